#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/logging.h"
#include "server/kafka/consumer.h"
#include "server/kafka/handle.h"
#include "server/kafka/producer.h"
#include "server/kafka/properties.h"
#include "tests/support/temp_dir.h"

namespace retryd::kafka {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Sends this process's stderr (where retryd logs) to a file while it lives,
// so a test can read what was logged so far.
class StderrToFile {
 public:
  StderrToFile() : path_(dir_.Path("stderr")) {
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0) << "cannot open " << path_;
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  ~StderrToFile() {
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
  }
  std::string Contents() const { return ::retryd::testing::ReadFileOrEmpty(path_); }

 private:
  const ::retryd::testing::TempDir dir_;
  const std::string path_;
  int saved_ = -1;
};

constexpr int kV2_0_2 = 0x020002ff;
constexpr int kV2_3_0 = 0x020300ff;

TEST(CheckAssignmentStrategyTest, CooperativeStickyNeedsLibrdkafka2_3) {
  const absl::Status refused = CheckAssignmentStrategy("cooperative-sticky", kV2_0_2);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("partition.assignment.strategy"));
  EXPECT_THAT(refused.message(), HasSubstr("librdkafka 2.0.2"));
  EXPECT_THAT(refused.message(), HasSubstr("issue 4312, fixed in 2.3.0"));
  EXPECT_THAT(refused.message(), HasSubstr("\"range,roundrobin\""));

  EXPECT_TRUE(CheckAssignmentStrategy("cooperative-sticky", kV2_3_0).ok());
}

TEST(CheckAssignmentStrategyTest, EagerAssignorsAreFine) {
  for (const char* strategy : {"range", "roundrobin", "range,roundrobin"}) {
    EXPECT_TRUE(CheckAssignmentStrategy(strategy, kV2_0_2).ok()) << strategy;
  }
}

// MakeConf applies the check to the librdkafka it runs with.
TEST(MakeConfTest, RefusesCooperativeStickyWhereLibrdkafkaWouldAbort) {
  const absl::StatusOr<ConfPtr> conf =
      MakeConf("127.0.0.1:9", {{"partition.assignment.strategy", "cooperative-sticky"}}, {});
  if (rd_kafka_version() < kV2_3_0) {
    EXPECT_EQ(conf.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(conf.status().message(), HasSubstr(rd_kafka_version_str()));
  } else {
    EXPECT_TRUE(conf.ok()) << conf.status();
  }
  EXPECT_TRUE(MakeConf("127.0.0.1:9", {{"partition.assignment.strategy", "roundrobin"}}, {}).ok());
}

TEST(MakeConfTest, ManagedPropertiesCannotBeContradicted) {
  const absl::StatusOr<ConfPtr> conf =
      MakeConf("127.0.0.1:9", {{"enable.auto.commit", "true"}}, {{"enable.auto.commit", "false"}});
  EXPECT_EQ(conf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(conf.status().message(), HasSubstr("managed by retryd"));
}

TEST(SecretPropertiesTest, TheListHoldsSecretsOnly) {
  for (const char* secret :
       {"sasl.password", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config",
        "ssl.key.password", "ssl.key.pem", "ssl.keystore.password", "sasl.jaas.config"}) {
    EXPECT_TRUE(IsSecretProperty(secret)) << secret;
  }
  for (const char* plain : {"sasl.username", "ssl.key.location", "ssl.certificate.pem",
                            "ssl.ca.pem", "security.protocol", "debug", "sasl.password.x"}) {
    EXPECT_FALSE(IsSecretProperty(plain)) << plain;
  }
}

// librdkafka 2.0.2 prints every modified setting under `debug: conf` and
// redacts only those it flags sensitive, which sasl.oauthbearer.client.secret
// is not (a build with OIDC prints it as is).
TEST(SecretPropertiesTest, RedactLogLineCutsWhatFollowsASecretName) {
  EXPECT_EQ(RedactLogLine("  sasl.oauthbearer.client.secret = s3cret"),
            "  sasl.oauthbearer.client.secret = <redacted>");
  EXPECT_EQ(RedactLogLine("Unrecognized sasl.oauthbearer.config beginning at: x=s3cret y"),
            "Unrecognized sasl.oauthbearer.config <redacted>");
  EXPECT_EQ(RedactLogLine("  sasl.username = retryd"), "  sasl.username = retryd");
  EXPECT_EQ(RedactLogLine("  my.sasl.password.hint = fine"), "  my.sasl.password.hint = fine");
}

// A malformed sasl.oauthbearer.config makes librdkafka log part of it at
// error level, debug or not; retryd's log must show the setting's name only.
TEST(SecretPropertiesTest, LibrdkafkaLogLinesNeverShowASecret) {
  SetMinLogLevel(LogLevel::kDebug);
  StderrToFile captured;
  absl::StatusOr<ConfPtr> conf =
      MakeConf("127.0.0.1:9",
               {{"security.protocol", "SASL_PLAINTEXT"},
                {"sasl.mechanisms", "OAUTHBEARER"},
                {"enable.sasl.oauthbearer.unsecure.jwt", "true"},
                {"sasl.oauthbearer.config", "principal=retryd hunter2-oauth"},
                {"debug", "conf,security"}},
               {});
  ASSERT_TRUE(conf.ok()) << conf.status();
  absl::StatusOr<HandlePtr> producer = NewHandle(RD_KAFKA_PRODUCER, *std::move(conf));
  ASSERT_TRUE(producer.ok()) << producer.status();
  // The token is asked for on the application's queue: poll it, bounded.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!absl::StrContains(captured.Contents(), "Failed to acquire SASL OAUTHBEARER token") &&
         absl::Now() < deadline) {
    rd_kafka_poll(producer->get(), 100);
  }
  producer->reset();
  const std::string log = captured.Contents();
  SetMinLogLevel(LogLevel::kInfo);
  EXPECT_THAT(log, HasSubstr("Failed to acquire SASL OAUTHBEARER token"));
  EXPECT_THAT(log, HasSubstr("sasl.oauthbearer.config <redacted>"));
  EXPECT_THAT(log, HasSubstr("sasl.oauthbearer.config = <redacted>")) << "the debug conf dump";
  EXPECT_THAT(log, Not(HasSubstr("hunter2")));
}

class NoListener : public ConsumerListener {
 public:
  void OnAssigned(const std::vector<TopicPartition>&) override {}
  void OnRevoked(const std::vector<TopicPartition>&, bool) override {}
  void OnCommitFailed(const CommitOffsets&) override {}
};

// The consumers fetch every 100 ms at most from idle partitions, so a
// resumed partition waits that long, not librdkafka's 500 ms; the
// operator's value wins.
// The stop path's guard against a librdkafka call that never returns: the
// caller goes on at the deadline, the call keeps its thread until it ends.
TEST(CallWithinTest, ACallPastTheDeadlineIsLeftToFinishOnItsOwn) {
  EXPECT_TRUE(kafka::CallWithin(absl::Now() + absl::Seconds(30), [] {}));
  // Shared with the call, which may still be ending when the test is.
  auto release = std::make_shared<absl::Notification>();
  auto finished = std::make_shared<absl::Notification>();
  EXPECT_FALSE(kafka::CallWithin(absl::Now() + absl::Milliseconds(100), [release, finished] {
    release->WaitForNotificationWithTimeout(absl::Seconds(30));
    finished->Notify();
  }));
  EXPECT_FALSE(finished->HasBeenNotified());
  release->Notify();
  EXPECT_TRUE(finished->WaitForNotificationWithTimeout(absl::Seconds(30)));
}

// A consumer's or a producer's property `name` as in effect when the
// operator's properties are `properties`, on a client that never connects.
std::optional<std::string> ConsumerProperty(const Properties& properties, const std::string& name) {
  NoListener listener;
  ConsumerOptions options;
  options.bootstrap_servers = "127.0.0.1:9";
  options.group_id = "g";
  options.topics = {"t"};
  options.properties = properties;
  absl::StatusOr<std::unique_ptr<Consumer>> consumer = Consumer::Create(options, &listener);
  EXPECT_TRUE(consumer.ok()) << consumer.status();
  if (!consumer.ok()) return std::nullopt;
  std::optional<std::string> value = (*consumer)->Property(name);
  (*consumer)->Abandon();
  return value;
}

std::optional<std::string> ProducerProperty(const Properties& properties, const std::string& name) {
  ProducerOptions options;
  options.bootstrap_servers = "127.0.0.1:9";
  options.properties = properties;
  absl::StatusOr<std::unique_ptr<Producer>> producer = Producer::Create(options);
  EXPECT_TRUE(producer.ok()) << producer.status();
  if (!producer.ok()) return std::nullopt;
  std::optional<std::string> value = (*producer)->Property(name);
  (*producer)->Close(absl::ZeroDuration());
  return value;
}

TEST(ConsumerTest, FetchWaitIs100MsUnlessTheOperatorSetsIt) {
  EXPECT_EQ(ConsumerProperty({}, "fetch.wait.max.ms"), "100");
  EXPECT_EQ(ConsumerProperty({}, "no.such.property"), std::nullopt);
  EXPECT_EQ(ConsumerProperty({{"fetch.wait.max.ms", "500"}}, "fetch.wait.max.ms"), "500");
}

// A hung leader is left once a metadata refresh names its successor: every
// 5 s rather than librdkafka's 5 minutes, unless the operator says otherwise.
TEST(ClientDefaultsTest, MetadataIsRefreshedEvery5SecondsUnlessTheOperatorSetsIt) {
  constexpr char kRefresh[] = "topic.metadata.refresh.interval.ms";
  EXPECT_EQ(ConsumerProperty({}, kRefresh), "5000");
  EXPECT_EQ(ProducerProperty({}, kRefresh), "5000");
  EXPECT_EQ(ConsumerProperty({{kRefresh, "30000"}}, kRefresh), "30000");
  EXPECT_EQ(ProducerProperty({{kRefresh, "30000"}}, kRefresh), "30000");
}

}  // namespace
}  // namespace retryd::kafka
