// ControlServer's life cycle and security, health probing, and retryd's
// main() serving the control API. Real TCP on 127.0.0.1, a real engine on
// the mock cluster.
#include "server/control/control_server.h"

#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/control/control_config.h"
#include "server/processors/grpc_processor.h"
#include "tests/control/control_test_util.h"
#include "tests/support/downstream_server.h"
#include "tests/support/missing_tool.h"
#include "tests/support/outcomes.h"
#include "tests/support/retryd_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace retryd::control {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::retryd::testing::Broker;
using ::retryd::testing::Channel;
using ::retryd::testing::Client;
using ::retryd::testing::EngineUnderTest;
using ::retryd::testing::ExitedWith;
using ::retryd::testing::Health;
using ::retryd::testing::ReadFileOrEmpty;
using ::retryd::testing::RetrydProcess;
using ::retryd::testing::TempDir;
using ::retryd::testing::TlsChannel;
using ::retryd::testing::TlsServerOptions;
using ::retryd::testing::WaitFor;
using ::retryd::testing::WatchStatus;
using ::testing::Contains;
using ::testing::HasSubstr;

std::string Local(const ControlServer& server) { return absl::StrCat("127.0.0.1:", server.port()); }

constexpr char kControlServerTopics[] = "control-server";

class ControlServerTest : public testing::SharedEngineTest<kControlServerTopics> {
 protected:
  static ControlServerOptions LocalOptions() {
    ControlServerOptions options;
    options.listen_address = "127.0.0.1:0";
    return options;
  }
};

TEST_F(ControlServerTest, StartRejectsBadAddressesAndRunsOnce) {
  for (const char* address :
       {"nohost", "127.0.0.1:70000", "127.0.0.1:", ":50051", "unix:", "::1:50051"}) {
    ControlServer server(*engine_->engine);
    ControlServerOptions options = LocalOptions();
    options.listen_address = address;
    const absl::Status s = server.Start(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("listen address")) << address;
  }
  {
    ControlServer server(*engine_->engine);
    ControlServerOptions options = LocalOptions();
    options.listen_address = "192.0.2.1:0";  // TEST-NET-1: never this host's.
    options.allow_unauthenticated_remote = true;
    const absl::Status s = server.Start(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr("not an address of this host"));
    EXPECT_EQ(server.port(), 0);
  }
  ControlServer server(*engine_->engine);
  server.Stop();  // Before Start: nothing to do.
  ASSERT_TRUE(server.Start(LocalOptions()).ok());
  EXPECT_GT(server.port(), 0);
  EXPECT_EQ(server.address(), Local(server));
  EXPECT_EQ(server.Start(LocalOptions()).code(), absl::StatusCode::kFailedPrecondition);
  server.Stop();
  server.Stop();  // Idempotent.
  EXPECT_EQ(server.port(), 0);
  EXPECT_EQ(server.Start(LocalOptions()).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ControlServerTest, PortInUseIsAClearError) {
  ControlServer first(*engine_->engine);
  ASSERT_TRUE(first.Start(LocalOptions()).ok());
  ControlServer second(*engine_->engine);
  ControlServerOptions options = LocalOptions();
  options.listen_address = Local(first);
  const absl::Status s = second.Start(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("already in use"));
  EXPECT_THAT(s.message(), HasSubstr(Local(first)));
  EXPECT_TRUE(Client(Channel(Local(first)))->GetStatus().ok()) << "the first server is untouched";
}

// Stop() ends open streams itself rather than waiting out the grace period,
// including streams whose next snapshot is a minute away.
TEST_F(ControlServerTest, StopWithOpenStreamsIsPrompt) {
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(LocalOptions()).ok());
  std::unique_ptr<RetrydClient> client = Client(Channel(Local(server)));

  struct Stream {
    absl::Status status;
    absl::Notification first, done;
  };
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::thread> readers;
  for (int i = 0; i < 12; ++i) {
    streams.push_back(std::make_unique<Stream>());
    Stream& stream = *streams.back();
    const uint32_t interval = i % 2 == 0 ? 60'000 : 100;
    readers.emplace_back([&client, &stream, interval] {
      stream.status = client->Watch(interval, {}, [&stream](const v1::MetricsSnapshot&) {
        if (!stream.first.HasBeenNotified()) stream.first.Notify();
        return true;
      });
      stream.done.Notify();
    });
  }
  // If an assertion below fails, the streams are cancelled and joined.
  absl::Cleanup end_readers = [&] {
    client->Cancel();
    for (std::thread& t : readers) {
      if (t.joinable()) t.join();
    }
  };
  // The first snapshot comes at once, not after the 60 s interval.
  for (auto& stream : streams) {
    ASSERT_TRUE(stream->first.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }

  // Neither the streams (no deadline, next snapshot a minute away) nor
  // the grace period would end by themselves within half the grace: only
  // Stop() cancelling the streams does.
  constexpr absl::Duration kGrace = absl::Seconds(120);
  const absl::Time start = absl::Now();
  server.Stop(kGrace);
  EXPECT_LT(absl::Now() - start, kGrace / 2) << "Stop() waited for the streams";
  for (auto& stream : streams) {
    EXPECT_TRUE(stream->done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    EXPECT_EQ(stream->status.code(), absl::StatusCode::kUnavailable) << stream->status;
  }
  std::move(end_readers).Invoke();
  EXPECT_EQ(Client(Channel(Local(server)), "", absl::Seconds(2))->GetStatus().status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(ControlServerTest, TokenGuardsMutatingRpcs) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = LocalOptions();
  options.auth_token = "s3cret-token";
  ASSERT_TRUE(server.Start(options).ok());
  std::unique_ptr<RetrydClient> anonymous = Client(Channel(Local(server)));
  std::unique_ptr<RetrydClient> wrong = Client(Channel(Local(server)), "not-the-token");
  std::unique_ptr<RetrydClient> right = Client(Channel(Local(server)), "s3cret-token");

  for (RetrydClient* client : {anonymous.get(), wrong.get()}) {
    absl::Status s = client->StartRetryThreads(1).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    s = client->StartRetryThreads(0).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << "checked before the fields";
    s = client->StopRetryThreads(1, /*graceful=*/true).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
    s = client->SetInOrder(false, false).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
    EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("s3cret-token")));
    s = client->SetOrderingMode(v1::ORDERING_KEY, false).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    s = client->SetOrderingMode(v1::ORDERING_UNSPECIFIED, true).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << "checked before the fields";
    s = client->DeadLetterRecord("orders", 0, 1).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
    s = client->DeadLetterRecord("", -1, -1).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << "checked before the fields";
    EXPECT_TRUE(client->GetStatus().ok()) << "read-only RPCs stay open";
    EXPECT_TRUE(client->ListInFlight(0).ok());
    EXPECT_TRUE(WatchStatus(*client, 100).ok());
  }
  EXPECT_THAT(anonymous->StartRetryThreads(1).status().message(), HasSubstr("Bearer"));
  EXPECT_THAT(wrong->StartRetryThreads(1).status().message(), HasSubstr("wrong bearer token"));

  const absl::Status invalid = right->StartRetryThreads(0).status();
  EXPECT_EQ(invalid.code(), absl::StatusCode::kInvalidArgument) << "past the token check";
  EXPECT_EQ(right->DeadLetterRecord("orders", -1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(right->DeadLetterRecord("orders", 0, 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(right->SetInOrder(false, false).ok());
  EXPECT_EQ(right->SetOrderingMode(v1::ORDERING_UNSPECIFIED, false).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "past the token check";
  const absl::StatusOr<v1::SetOrderingModeResponse> same =
      right->SetOrderingMode(v1::ORDERING_UNORDERED, false);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->mode(), v1::ORDERING_UNORDERED);
  EXPECT_EQ(engine_->engine->ordering(), engine::Ordering::kUnordered);
  EXPECT_EQ(engine_->engine->Threads().size(), 2u) << "nothing changed";
}

// Anyone who reaches a port beyond loopback could stop retry threads:
// without a token or mutual TLS the server does not start there, unless the
// operator opted in.
TEST_F(ControlServerTest, RemoteWithoutAuthenticationNeedsTheOptIn) {
  for (const char* address : {"0.0.0.0:0", "[::]:0"}) {
    ControlServer server(*engine_->engine);
    ControlServerOptions options = LocalOptions();
    options.listen_address = address;
    const absl::Status s = server.Start(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("control.allow_unauthenticated_remote: true"));
    EXPECT_THAT(s.message(), HasSubstr("control.auth_token_file"));
    EXPECT_EQ(server.port(), 0) << "nothing listens";
  }
  {
    ControlServer server(*engine_->engine);
    ControlServerOptions options = LocalOptions();
    options.listen_address = "0.0.0.0:0";
    options.allow_unauthenticated_remote = true;
    ::testing::internal::CaptureStderr();
    const absl::Status s = server.Start(options);
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_THAT(log, HasSubstr("with no authentication (control.allow_unauthenticated_remote"));
    EXPECT_TRUE(Client(Channel(Local(server)))->GetStatus().ok());
  }
  {
    ControlServer server(*engine_->engine);
    ControlServerOptions options = LocalOptions();
    options.listen_address = "0.0.0.0:0";
    options.auth_token = "s3cret-token";
    EXPECT_TRUE(server.Start(options).ok()) << "a token is authentication";
  }
}

// Every refused call leaves a line naming the caller, never the token it
// sent.
TEST_F(ControlServerTest, FailedAuthenticationIsLoggedWithThePeer) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = LocalOptions();
  options.auth_token = "s3cret-token";
  ASSERT_TRUE(server.Start(options).ok());
  std::unique_ptr<RetrydClient> wrong = Client(Channel(Local(server)), "guessed-token");
  ::testing::internal::CaptureStderr();
  const absl::Status s = wrong->SetInOrder(false, false).status();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(log, HasSubstr("control: authentication failed for a call from ipv4:127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("wrong bearer token"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("guessed-token")));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("s3cret-token")));
}

// GetStatus shows the effective config; a secret in it, however it got
// there, shows as "<redacted>". Secrets from the environment show the
// variable's name.
TEST_F(ControlServerTest, GetStatusNeverShowsASecret) {
  retryd::v1::Config config;
  config.set_listen_address("127.0.0.1:0");
  auto& properties = *config.mutable_kafka()->mutable_properties();
  properties["security.protocol"] = "SASL_SSL";
  properties["sasl.password"] = "hunter2-in-properties";
  properties["sasl.oauthbearer.client.secret"] = "hunter2-oauth";
  (*config.mutable_kafka()->mutable_properties_from_env())["ssl.key.password"] =
      "RETRYD_TEST_KEY_PASSWORD";
  absl::StatusOr<ControlServerOptions> options = ControlServerOptionsFromConfig(config);
  ASSERT_TRUE(options.ok()) << options.status();
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(*options).ok());

  const absl::StatusOr<v1::GetStatusResponse> response =
      Client(Channel(Local(server)))->GetStatus();
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::GetStatusResponse& status = *response;
  const auto& shown = status.config().kafka().properties();
  EXPECT_EQ(shown.at("security.protocol"), "SASL_SSL");
  EXPECT_EQ(shown.at("sasl.password"), "<redacted>");
  EXPECT_EQ(shown.at("sasl.oauthbearer.client.secret"), "<redacted>");
  EXPECT_EQ(status.config().kafka().properties_from_env().at("ssl.key.password"),
            "RETRYD_TEST_KEY_PASSWORD");
  EXPECT_THAT(status.DebugString(), ::testing::Not(HasSubstr("hunter2")));
}

TEST_F(ControlServerTest, ReadOnlyNeedsTheTokenWhenConfigured) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = LocalOptions();
  options.auth_token = "s3cret-token";
  options.read_only_requires_token = true;
  ASSERT_TRUE(server.Start(options).ok());
  const std::shared_ptr<grpc::Channel> channel = Channel(Local(server));
  std::unique_ptr<RetrydClient> anonymous = Client(channel);
  std::unique_ptr<RetrydClient> right = Client(Channel(Local(server)), "s3cret-token");
  EXPECT_EQ(anonymous->GetStatus().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(WatchStatus(*anonymous, 100).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(anonymous->ListInFlight(0).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(right->GetStatus().ok());
  EXPECT_TRUE(right->ListInFlight(0).ok());
  EXPECT_TRUE(WatchStatus(*right, 100).ok());

  // Health and reflection never need the token.
  EXPECT_GE(Health(channel, ""), 0);
  absl::StatusOr<std::vector<std::string>> services = testing::ReflectionListServices(channel);
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_THAT(*services, Contains("retryd.v1.Control"));
  EXPECT_THAT(*services, Contains("grpc.health.v1.Health"));
  EXPECT_THAT(*services, Contains("grpc.reflection.v1alpha.ServerReflection"));
}

// What `grpcurl describe` needs: the files behind every service, from the
// server alone.
TEST_F(ControlServerTest, ReflectionDescribesTheServices) {
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(LocalOptions()).ok());
  auto channel = Channel(Local(server));
  absl::StatusOr<std::vector<google::protobuf::FileDescriptorProto>> files =
      testing::ReflectionFileContaining(channel, "retryd.v1.Control");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_FALSE(files->empty());
  const google::protobuf::FileDescriptorProto& control = files->front();
  EXPECT_EQ(control.name(), "retryd/v1/control.proto");
  ASSERT_EQ(control.service_size(), 1);
  std::vector<std::string> methods;
  for (const auto& m : control.service(0).method()) methods.push_back(m.name());
  EXPECT_THAT(methods, ::testing::UnorderedElementsAre(
                           "GetStatus", "StartRetryThreads", "SetRetryThreadCount",
                           "StopRetryThreads", "SetInOrder", "SetOrderingMode", "WatchMetrics",
                           "ListInFlight", "DeadLetterRecord", "StartDrain", "GetOperation",
                           "ListOperations", "WatchOperation", "CancelOperation", "ListDeadLetters",
                           "StartRedrive", "PurgeDeadLetters"));
  // Its imports resolve too: a reflection client decodes the errors'
  // google.rpc.Status.
  std::vector<std::string> names;
  for (const auto& f : *files) names.push_back(f.name());
  EXPECT_THAT(names, ::testing::Contains("google/rpc/status.proto"));
  files = testing::ReflectionFileContaining(channel, "grpc.health.v1.Health");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_FALSE(files->empty());
  EXPECT_EQ(files->front().name(), "grpc/health/v1/health.proto");
  files = testing::ReflectionFileContaining(channel, "retryd.v1.Config");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_FALSE(files->empty());
  EXPECT_EQ(files->front().name(), "retryd/v1/config.proto");
}

TEST_F(ControlServerTest, TlsServesOnlyTls) {
  const TempDir dir;
  const std::optional<testing::TlsTestCerts> certs = testing::MakeTlsTestCerts(dir.path());
  if (!certs.has_value()) RETRYD_MISSING_TOOL("openssl", "Debian package openssl");
  absl::StatusOr<ControlServerOptions> options = testing::TlsServerOptions(certs->server);
  ASSERT_TRUE(options.ok()) << options.status();
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(*options).ok());

  absl::Status s =
      Client(TlsChannel(Local(server), ReadFileOrEmpty(certs->server.cert)))->GetStatus().status();
  EXPECT_TRUE(s.ok()) << s;
  s = Client(Channel(Local(server)), "", absl::Seconds(3))->GetStatus().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << "plaintext is refused";
  s = Client(TlsChannel(Local(server), ReadFileOrEmpty(certs->stranger.cert)), "", absl::Seconds(3))
          ->GetStatus()
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << "an untrusted server is refused";
}

TEST_F(ControlServerTest, MutualTlsNeedsAClientCertificate) {
  const TempDir dir;
  const std::optional<testing::TlsTestCerts> certs = testing::MakeTlsTestCerts(dir.path());
  if (!certs.has_value()) RETRYD_MISSING_TOOL("openssl", "Debian package openssl");
  // The client's own self-signed certificate is the CA the server trusts.
  absl::StatusOr<ControlServerOptions> options =
      testing::TlsServerOptions(certs->server, certs->client.cert);
  ASSERT_TRUE(options.ok()) << options.status();
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(*options).ok());
  const std::string root = ReadFileOrEmpty(certs->server.cert);

  absl::Status s = Client(TlsChannel(Local(server), root, certs->client))->GetStatus().status();
  EXPECT_TRUE(s.ok()) << s;
  s = Client(TlsChannel(Local(server), root), "", absl::Seconds(3))->GetStatus().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << "no client certificate";
  s = Client(TlsChannel(Local(server), root, certs->stranger), "", absl::Seconds(3))
          ->GetStatus()
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << "a certificate it did not sign";
}

// ---- health --------------------------------------------------------------------

TEST(ControlHealthTest, FlipsWhenTheBrokersGoDownAndBack) {
  std::unique_ptr<EngineUnderTest> engine = testing::StartEngineUnderTest("control-health", 1, 4);
  ASSERT_NE(engine, nullptr);
  ControlServer server(*engine->engine);
  ASSERT_TRUE(testing::StartProbingFast(server));
  auto channel = Channel(Local(server));
  const std::string control = "retryd.v1.Control";
  auto both_are = [&](HealthCheckResponse::ServingStatus want) {
    return Health(channel, "") == want && Health(channel, control) == want;
  };

  ASSERT_TRUE(WaitFor([&] { return both_are(HealthCheckResponse::SERVING); }, absl::Seconds(30)))
      << "never SERVING: " << Health(channel, "");
  EXPECT_EQ(Health(channel, "no.such.Service"), -static_cast<int>(grpc::StatusCode::NOT_FOUND));

  absl::Cleanup up = [] {
    for (int id = 1; id <= 3; ++id) (void)Broker().SetBrokerUp(id);
  };
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(Broker().SetBrokerDown(id).ok());
  EXPECT_TRUE(
      WaitFor([&] { return both_are(HealthCheckResponse::NOT_SERVING); }, absl::Seconds(30)))
      << "still " << Health(channel, "") << " with every broker down";
  absl::StatusOr<v1::GetStatusResponse> status = Client(channel)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_FALSE(status->kafka_reachable());

  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(Broker().SetBrokerUp(id).ok());
  EXPECT_TRUE(WaitFor([&] { return both_are(HealthCheckResponse::SERVING); }, absl::Seconds(60)))
      << "still " << Health(channel, "") << " with the brokers back";
  status = Client(channel)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->kafka_reachable());
  server.Stop();
  engine->engine->Stop();
}

// The processor's downstream has a health service name of its own: while
// it is down, "retryd.downstream" says NOT_SERVING and GetStatus DOWN, and
// "" stays SERVING, so a liveness probe does not restart retryd for it.
TEST(ControlHealthTest, DownstreamOutageHasItsOwnServiceName) {
  testing::DownstreamServer downstream;
  ASSERT_TRUE(downstream.Start().ok());
  const testing::TestTopics topics = testing::CreateTopics("control-health-downstream");
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.downstream = {.outage_after = 2, .probe_initial_ms = 50, .probe_max_ms = 200};
  v1::GrpcProcessorConfig processor_config;
  processor_config.set_target(downstream.target());
  processor_config.set_deadline_ms(2000);
  absl::StatusOr<std::unique_ptr<GrpcProcessor>> processor =
      GrpcProcessor::Create(processor_config);
  ASSERT_TRUE(processor.ok()) << processor.status();
  std::unique_ptr<engine::Engine> engine = testing::StartEngine(options, *std::move(processor));
  ASSERT_NE(engine, nullptr);
  ControlServer server(*engine);
  ASSERT_TRUE(testing::StartProbingFast(server));
  auto channel = Channel(Local(server));
  const std::string service = "retryd.downstream";
  ASSERT_TRUE(WaitFor([&] { return Health(channel, "") == HealthCheckResponse::SERVING; },
                      absl::Seconds(30)));
  EXPECT_EQ(Health(channel, service), HealthCheckResponse::SERVING);

  downstream.Stop();
  testing::ProduceKeys(topics.input, {"a", "b", "c", "d", "e", "f"});
  EXPECT_TRUE(WaitFor([&] { return Health(channel, service) == HealthCheckResponse::NOT_SERVING; },
                      absl::Seconds(30)));
  EXPECT_EQ(Health(channel, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(Health(channel, "retryd.v1.Control"), HealthCheckResponse::SERVING);
  absl::StatusOr<v1::GetStatusResponse> status = Client(channel)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->downstream().state(), v1::DOWNSTREAM_STATE_DOWN);
  EXPECT_GT(status->downstream().down_since_unix_ms(), 0);
  EXPECT_NE(status->downstream().last_error().find("UNAVAILABLE"), std::string::npos)
      << status->downstream().last_error();

  ASSERT_TRUE(downstream.Start().ok());
  EXPECT_TRUE(WaitFor([&] { return Health(channel, service) == HealthCheckResponse::SERVING; },
                      absl::Seconds(30)));
  EXPECT_TRUE(testing::WaitForOutcomes(*engine, topics, {"a", "b", "c", "d", "e", "f"}));
  status = Client(channel)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->downstream().state(), v1::DOWNSTREAM_STATE_UP);
  EXPECT_EQ(status->downstream().outages(), 1);
  server.Stop();
  engine->Stop();
}

// After each probe that Kafka answers, the prober measures the retry backlog,
// which asks the retry topic's leaders for their watermarks. With those
// leaders down, the measurement must still end on time: it used to wait
// for them for as long as they stayed down, and the prober with it, so
// health stayed SERVING through the whole outage that followed.
TEST(ControlHealthTest, NotServingWhenKafkaGoesDownAfterTheRetryLeaderWent) {
  const testing::TestTopics topics = testing::CreateTopics("control-health-leader");
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.retry.threads = 1;
  // Broker 3 leads the retry topic; broker 1 coordinates the retry group,
  // so the backlog measurement gets as far as the watermarks.
  kafka::EmbeddedBroker& broker = Broker();
  ASSERT_TRUE(broker.SetGroupCoordinator(options.group_id + ".retry", 1).ok());
  for (int p = 0; p < 3; ++p) ASSERT_TRUE(broker.SetPartitionLeader(topics.retry, p, 3).ok());
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, std::make_unique<testing::SwitchProcessor>());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->Start().ok());
  ControlServer server(**engine);
  ASSERT_TRUE(testing::StartProbingFast(server));
  auto channel = Channel(Local(server));
  auto health_is = [&](HealthCheckResponse::ServingStatus want) {
    return Health(channel, "") == want;
  };
  ASSERT_TRUE(WaitFor([&] { return health_is(HealthCheckResponse::SERVING); }, absl::Seconds(30)))
      << "never SERVING: " << Health(channel, "");

  absl::Cleanup up = [&] {
    for (int id = 1; id <= 3; ++id) (void)broker.SetBrokerUp(id);
  };
  ASSERT_TRUE(broker.SetBrokerDown(3).ok());
  // Two brokers still answer: Kafka is reachable, so health stays SERVING
  // (for at least 2 s, ten probe rounds, each measuring the backlog).
  EXPECT_FALSE(WaitFor([&] { return !health_is(HealthCheckResponse::SERVING); }, absl::Seconds(2)))
      << Health(channel, "") << " with one broker of three down";
  ASSERT_TRUE(broker.SetBrokerDown(1).ok());
  ASSERT_TRUE(broker.SetBrokerDown(2).ok());
  EXPECT_TRUE(
      WaitFor([&] { return health_is(HealthCheckResponse::NOT_SERVING); }, absl::Seconds(30)))
      << "still " << Health(channel, "") << " with every broker down";

  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(broker.SetBrokerUp(id).ok());
  EXPECT_TRUE(WaitFor([&] { return health_is(HealthCheckResponse::SERVING); }, absl::Seconds(60)))
      << "still " << Health(channel, "") << " with the brokers back";
  server.Stop();
  (*engine)->Stop();
}

// ---- deadlines -------------------------------------------------------------------

// A start whose thread cannot join its group answers when the call's
// deadline is near, with the thread it started. gRPC sends the client's
// remaining time rounded up, by up to 1 % of it (100.5 s arrives as 101 s):
// the server's deadline is later than the client's by that much. Timed by
// it less 100 ms, the answer came after the client's deadline, and the
// client got DEADLINE_EXCEEDED without learning that a thread had started.
TEST(ControlDeadlineTest, StartThatCannotJoinAnswersBeforeTheCallsDeadline) {
  std::unique_ptr<EngineUnderTest> engine = testing::StartEngineUnderTest("control-deadline", 1, 4);
  ASSERT_NE(engine, nullptr);
  ControlServer server(*engine->engine);
  ControlServerOptions options;
  options.listen_address = "127.0.0.1:0";
  ASSERT_TRUE(server.Start(options).ok());
  constexpr int16_t kJoinGroup = 11;
  constexpr int kCoordinatorLoadInProgress = 14;  // Retriable: the join goes on failing.
  Broker().PushRequestErrors(kJoinGroup, std::vector<int>(100000, kCoordinatorLoadInProgress));
  absl::Cleanup clear = [] { Broker().ClearRequestErrors(kJoinGroup); };
  std::unique_ptr<RetrydClient> client =
      Client(Channel(Local(server)), "", absl::Milliseconds(100'500));

  const absl::StatusOr<v1::StartRetryThreadsResponse> started = client->StartRetryThreads(1);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->thread_ids_size(), 1);
  std::move(clear).Invoke();
  server.Stop();
  engine->engine->Stop();
}

// ---- retryd's main() -----------------------------------------------------------

// Writes a config for retryd into `dir`, with `extra` at its end; returns its path.
std::string WriteConfig(const TempDir& dir, const std::string& extra) {
  return dir.WriteFile("retryd.textproto", absl::StrCat("group_id: \"control-main\"\n"
                                                        "input_topics: \"control-main-in\"\n"
                                                        "processor { simulate {} }\n",
                                                        extra));
}

TEST(ControlMainTest, BadControlSettingsExit2) {
  const TempDir dir;
  struct Case {
    std::string config_extra;
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {absl::StrCat("control { auth_token_file: \"", dir.Path("no-token"), "\" }\n"),
       {},
       "control.auth_token_file"},
      {"control { tls_cert_file: \"/etc/hostname\" health_listen_address: \"127.0.0.1:0\" }\n",
       {},
       "control.tls_key_file"},
      {"control { read_only_requires_token: true }\n", {}, "control.read_only_requires_token"},
      {"control { tls_cert_file: \"/etc/hostname\" tls_key_file: \"/etc/hostname\" }\n",
       {},
       "control.health_listen_address: required with TLS"},
      {"", {"--listen", "nohost"}, "--listen"},
      {"", {"--listen", "0.0.0.0:0"}, "control.allow_unauthenticated_remote: true"},
      {"kafka { properties { key: \"sasl.password\" value: \"hunter2\" } }\n",
       {},
       "kafka.properties[\"sasl.password\"]: holds a secret"},
  };
  for (const Case& c : cases) {
    const TempDir case_dir;
    std::vector<std::string> args = {"--config", WriteConfig(case_dir, c.config_extra)};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    RetrydProcess retryd(case_dir.Path("retryd"), args);
    EXPECT_TRUE(ExitedWith(retryd.WaitExit(absl::Seconds(30)), 2))
        << c.message << ": " << retryd.Stderr();
    EXPECT_THAT(retryd.Stderr(), HasSubstr(c.message));
    EXPECT_THAT(retryd.Stderr(), ::testing::Not(HasSubstr("hunter2")));
  }
}

TEST(ControlMainTest, PortInUseExits1) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  absl::Cleanup close_fd = [fd] { close(fd); };
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));

  const TempDir dir;
  RetrydProcess retryd(dir.Path("retryd"), {"--config", WriteConfig(dir, ""), "--listen", taken});
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(absl::Seconds(90)), 1)) << retryd.Stderr();
  EXPECT_THAT(retryd.Stderr(), HasSubstr("cannot listen on " + taken));
  EXPECT_THAT(retryd.Stderr(), HasSubstr("already in use"));
}

TEST(ControlMainTest, ServesTheControlApiUntilSigterm) {
  const TempDir dir;
  // A secret from the environment: GetStatus names the variable only.
  ASSERT_EQ(setenv("RETRYD_TEST_KAFKA_PASSWORD", "hunter2-from-env", 1), 0);
  absl::Cleanup unset = [] { unsetenv("RETRYD_TEST_KAFKA_PASSWORD"); };
  const std::string config =
      WriteConfig(dir,
                  "kafka { properties_from_env { key: \"sasl.password\" value: "
                  "\"RETRYD_TEST_KAFKA_PASSWORD\" } }\n"
                  "control { health_listen_address: \"127.0.0.1:0\" }\n");
  RetrydProcess retryd(dir.Path("retryd"), {"--config", config, "--listen", "127.0.0.1:0",
                                            "--summary_interval_s", "0"});
  const std::string kListening = "control API listening on 127.0.0.1:";
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string out = retryd.Stdout();
        const size_t at = out.find(kListening);
        return at != std::string::npos && out.find('\n', at) != std::string::npos;
      },
      absl::Seconds(90)))
      << "stdout: " << retryd.Stdout() << "\nstderr: " << retryd.Stderr();
  const std::string out = retryd.Stdout();
  const size_t at = out.find(kListening) + kListening.size();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(out.substr(at, out.find('\n', at) - at), &port)) << out;
  ASSERT_GT(port, 0);

  auto channel = Channel(absl::StrCat("127.0.0.1:", port));
  const absl::StatusOr<v1::GetStatusResponse> response = Client(channel)->GetStatus();
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::GetStatusResponse& status = *response;
  EXPECT_EQ(status.state(), v1::ENGINE_STATE_RUNNING);
  EXPECT_EQ(status.config().group_id(), "control-main");
  EXPECT_EQ(status.config().kafka().properties_from_env().at("sasl.password"),
            "RETRYD_TEST_KAFKA_PASSWORD");
  EXPECT_THAT(status.DebugString(), ::testing::Not(HasSubstr("hunter2")));
  EXPECT_TRUE(WaitFor([&] { return Health(channel, "") == HealthCheckResponse::SERVING; },
                      absl::Seconds(60)));
  // The health-only listener, as a probe reaches it.
  const std::string kHealth = "health listening on 127.0.0.1:";
  const size_t health_at = out.find(kHealth);
  ASSERT_NE(health_at, std::string::npos) << out;
  const size_t health_port_at = health_at + kHealth.size();
  int health_port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      out.substr(health_port_at, out.find('\n', health_port_at) - health_port_at), &health_port))
      << out;
  auto health = Channel(absl::StrCat("127.0.0.1:", health_port));
  EXPECT_EQ(Health(health, "retryd.liveness"), HealthCheckResponse::SERVING);
  EXPECT_TRUE(
      WaitFor([&] { return Health(health, "retryd.readiness") == HealthCheckResponse::SERVING; },
              absl::Seconds(60)));

  retryd.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(absl::Seconds(60)), 0)) << retryd.Stderr();
  EXPECT_THAT(retryd.Stderr(), ::testing::Not(HasSubstr("hunter2")));
}

}  // namespace
}  // namespace retryd::control
