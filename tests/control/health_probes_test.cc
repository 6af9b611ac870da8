// The health service names a Kubernetes probe asks, judged as the kubelet
// sees them, through real grpc.health.v1.Health Check and Watch calls:
// "retryd.liveness" (restart me) turns NOT_SERVING only when a thread's loop
// stalls, never for Kafka's faults; "retryd.readiness" (send me no work)
// follows Kafka and the engine's life. And the plaintext listener that
// serves health alone beside a TLS control port. A real engine on the mock
// cluster.
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/control/control_server.h"
#include "tests/control/control_test_util.h"
#include "tests/support/missing_tool.h"
#include "tests/support/outcomes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace retryd::control {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::retryd::testing::Broker;
using ::retryd::testing::Channel;
using ::retryd::testing::Client;
using ::retryd::testing::Health;
using ::retryd::testing::HealthWatch;
using ::retryd::testing::ReadFileOrEmpty;
using ::retryd::testing::TempDir;
using ::retryd::testing::WaitFor;

constexpr auto kServing = HealthCheckResponse::SERVING;
constexpr auto kNotServing = HealthCheckResponse::NOT_SERVING;

std::string Local(int port) { return absl::StrCat("127.0.0.1:", port); }

// Records with keys starting "block-" wait in the processor call until
// Release(); everything else succeeds at once. A stuck downstream call as
// the engine sees it: the thread making it does not turn its loop.
class BlockingProcessor : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int /*attempt*/) override {
    if (record.key.has_value() && absl::StartsWith(*record.key, "block-")) {
      if (!entered_.HasBeenNotified()) entered_.Notify();
      // Bounded, so that a failed test cannot hang the binary.
      release_.WaitForNotificationWithTimeout(absl::Minutes(2));
    }
    return engine::Outcome::Ok();
  }
  // Whether a blocked call began within `timeout`.
  bool AwaitBlocked(absl::Duration timeout) {
    return entered_.WaitForNotificationWithTimeout(timeout);
  }
  void Release() {
    if (!release_.HasBeenNotified()) release_.Notify();
  }

 private:
  absl::Notification entered_;
  absl::Notification release_;
};

struct Instance {
  testing::TestTopics topics;
  BlockingProcessor* processor = nullptr;  // Owned by the engine.
  std::unique_ptr<engine::Engine> engine;
};

// An engine over fresh topics named after `name` with the blocking
// processor, `options_for` adjusting its options, every thread assigned.
std::unique_ptr<Instance> StartInstance(const std::string& name,
                                        void (*options_for)(engine::EngineOptions&)) {
  auto out = std::make_unique<Instance>();
  out->topics = testing::CreateTopics(name);
  engine::EngineOptions options = testing::TestEngineOptions(out->topics);
  options_for(options);
  auto processor = std::make_unique<BlockingProcessor>();
  out->processor = processor.get();
  out->engine = testing::StartEngine(options, std::move(processor));
  if (out->engine == nullptr) return nullptr;
  if (!WaitFor([&] { return testing::AllAssigned(*out->engine, 3); }, absl::Seconds(60))) {
    ADD_FAILURE() << "the engine's groups did not settle within 60 s";
    return nullptr;
  }
  return out;
}

// A control server probing an engine fast, with a Watch on each probe's
// service name.
struct Probed {
  explicit Probed(engine::Engine& engine) : server(engine) {}
  ControlServer server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<HealthWatch> liveness;
  std::unique_ptr<HealthWatch> readiness;
};

// Starts one over `engine` and waits until both watches say SERVING; null,
// with a test failure, if not.
std::unique_ptr<Probed> StartProbed(engine::Engine& engine) {
  auto out = std::make_unique<Probed>(engine);
  if (!testing::StartProbingFast(out->server)) return nullptr;
  out->channel = Channel(Local(out->server.port()));
  out->liveness = std::make_unique<HealthWatch>(out->channel, kLivenessHealthService);
  out->readiness = std::make_unique<HealthWatch>(out->channel, kReadinessHealthService);
  if (!out->liveness->WaitForLatest(kServing, absl::Seconds(30)) ||
      !out->readiness->WaitForLatest(kServing, absl::Seconds(30))) {
    ADD_FAILURE() << "never SERVING: liveness " << Health(out->channel, kLivenessHealthService)
                  << ", readiness " << Health(out->channel, kReadinessHealthService);
    return nullptr;
  }
  return out;
}

// A processor call that does not return stalls its thread's loop: past
// liveness_stall_ms, liveness says NOT_SERVING (a restart is what helps),
// while readiness and the overall answer, which nothing else disturbs,
// stay SERVING. Once the call returns, liveness is SERVING again.
TEST(HealthProbesTest, StalledLoopTurnsLivenessNotServing) {
  std::unique_ptr<Instance> instance =
      StartInstance("health-stall", [](engine::EngineOptions& options) {
        options.shutdown_timeout_ms = 500;
        options.liveness_stall_ms = 1500;
      });
  ASSERT_NE(instance, nullptr);
  absl::Cleanup release = [&] { instance->processor->Release(); };
  std::unique_ptr<Probed> probed = StartProbed(*instance->engine);
  ASSERT_NE(probed, nullptr);
  const auto& channel = probed->channel;
  HealthWatch& liveness = *probed->liveness;
  HealthWatch& readiness = *probed->readiness;

  testing::ProduceKeys(instance->topics.input, {"block-1"});
  ASSERT_TRUE(instance->processor->AwaitBlocked(absl::Seconds(30)));
  EXPECT_TRUE(liveness.WaitForLatest(kNotServing, absl::Seconds(30)))
      << "liveness never NOT_SERVING with a thread stuck in a call";
  EXPECT_EQ(Health(channel, kLivenessHealthService), kNotServing);
  EXPECT_EQ(Health(channel, kReadinessHealthService), kServing);
  EXPECT_EQ(Health(channel, ""), kServing);
  EXPECT_EQ(readiness.Seen().back(), kServing);

  instance->processor->Release();
  EXPECT_TRUE(liveness.WaitForLatest(kServing, absl::Seconds(30)))
      << "liveness still NOT_SERVING once the call returned";
  EXPECT_TRUE(testing::WaitForOutcomes(*instance->engine, instance->topics, {"block-1"}));
  probed->server.Stop();
  instance->engine->Stop();
}

// Kafka away is no reason to restart: readiness turns NOT_SERVING (the
// instance leaves the Service), liveness stays SERVING for several times
// liveness_stall_ms; both are SERVING once the brokers are back.
TEST(HealthProbesTest, KafkaOutageTurnsReadinessNotLiveness) {
  constexpr int64_t kStallMs = 4000;
  std::unique_ptr<Instance> instance =
      StartInstance("health-kafka", [](engine::EngineOptions& options) {
        // The rule the config keeps: above a call (none here) plus the
        // shutdown timeout, which a rebalance's commit may take.
        options.shutdown_timeout_ms = 2000;
        options.liveness_stall_ms = kStallMs;
      });
  ASSERT_NE(instance, nullptr);
  std::unique_ptr<Probed> probed = StartProbed(*instance->engine);
  ASSERT_NE(probed, nullptr);
  const auto& channel = probed->channel;
  HealthWatch& liveness = *probed->liveness;
  HealthWatch& readiness = *probed->readiness;

  absl::Cleanup up = [] {
    for (int id = 1; id <= 3; ++id) (void)Broker().SetBrokerUp(id);
  };
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(Broker().SetBrokerDown(id).ok());
  EXPECT_TRUE(readiness.WaitForLatest(kNotServing, absl::Seconds(30)))
      << "readiness still SERVING with every broker down";
  EXPECT_EQ(Health(channel, ""), kNotServing);
  // Long enough for a stall to show: twice liveness_stall_ms.
  EXPECT_FALSE(WaitFor([&] { return Health(channel, kLivenessHealthService) != kServing; },
                       absl::Milliseconds(2 * kStallMs)))
      << "liveness turned " << Health(channel, kLivenessHealthService) << " with Kafka away";
  EXPECT_THAT(liveness.Seen(), ::testing::Each(kServing));

  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(Broker().SetBrokerUp(id).ok());
  EXPECT_TRUE(readiness.WaitForLatest(kServing, absl::Seconds(60)))
      << "readiness still NOT_SERVING with the brokers back";
  EXPECT_THAT(liveness.Seen(), ::testing::Each(kServing));
  probed->server.Stop();
  instance->engine->Stop();
}

// A stopping engine takes no more work: readiness turns NOT_SERVING as soon
// as the stop begins (here it waits for a call in progress), and liveness
// stays SERVING, so a probe does not kill an instance that stops as asked.
TEST(HealthProbesTest, StoppingTurnsReadinessNotServing) {
  std::unique_ptr<Instance> instance = StartInstance("health-stop", [](engine::EngineOptions&) {});
  ASSERT_NE(instance, nullptr);
  absl::Cleanup release = [&] { instance->processor->Release(); };
  std::unique_ptr<Probed> probed = StartProbed(*instance->engine);
  ASSERT_NE(probed, nullptr);
  const auto& channel = probed->channel;
  HealthWatch& readiness = *probed->readiness;

  testing::ProduceKeys(instance->topics.input, {"block-1"});
  ASSERT_TRUE(instance->processor->AwaitBlocked(absl::Seconds(30)));
  std::thread stop([&] { instance->engine->Stop(); });
  EXPECT_TRUE(readiness.WaitForLatest(kNotServing, absl::Seconds(30)))
      << "readiness still SERVING while the engine stops";
  EXPECT_EQ(instance->engine->state(), engine::EngineState::kStopping)
      << "the stop was over before readiness changed";
  EXPECT_EQ(Health(channel, kLivenessHealthService), kServing);
  instance->processor->Release();
  stop.join();
  EXPECT_EQ(Health(channel, kReadinessHealthService), kNotServing);
  EXPECT_EQ(Health(channel, kLivenessHealthService), kServing);
  probed->server.Stop();
}

// With TLS on the control port, the health-only listener answers Check and
// Watch in plaintext, for every service name, and nothing else: not the
// control API, not reflection. The control port stays TLS only.
TEST(HealthListenerTest, ServesHealthAlonePlaintextBesideTls) {
  const TempDir dir;
  const std::optional<testing::CertFiles> cert = testing::MakeSelfSignedCert(dir.path(), "server");
  if (!cert.has_value()) RETRYD_MISSING_TOOL("openssl", "Debian package openssl");
  std::unique_ptr<Instance> instance =
      StartInstance("health-listener", [](engine::EngineOptions&) {});
  ASSERT_NE(instance, nullptr);
  absl::StatusOr<ControlServerOptions> options = testing::TlsServerOptions(*cert);
  ASSERT_TRUE(options.ok()) << options.status();
  options->health_listen_address = "127.0.0.1:0";
  options->probe_interval = absl::Milliseconds(200);
  ControlServer server(*instance->engine);
  ASSERT_TRUE(server.Start(*options).ok());
  ASSERT_GT(server.health_port(), 0);
  EXPECT_NE(server.health_port(), server.port());
  EXPECT_EQ(server.health_address(), Local(server.health_port()));

  auto plain = Channel(Local(server.health_port()));
  for (const std::string service : {"", "retryd.v1.Control", kLivenessHealthService,
                                    kReadinessHealthService, kDownstreamHealthService}) {
    EXPECT_TRUE(WaitFor([&] { return Health(plain, service) == kServing; }, absl::Seconds(30)))
        << "\"" << service << "\": " << Health(plain, service);
  }
  EXPECT_EQ(Health(plain, "no.such.Service"), -static_cast<int>(grpc::StatusCode::NOT_FOUND));
  {
    HealthWatch readiness(plain, kReadinessHealthService);
    EXPECT_TRUE(readiness.WaitForLatest(kServing, absl::Seconds(10)));
  }

  // Only health there.
  absl::Status s = Client(plain, "", absl::Seconds(5))->GetStatus().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  absl::StatusOr<std::vector<std::string>> listed = testing::ReflectionListServices(plain);
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kUnimplemented) << listed.status();
  // The control port: TLS only, health there too.
  auto tls = testing::TlsChannel(Local(server.port()), ReadFileOrEmpty(cert->cert));
  s = Client(tls)->GetStatus().status();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(Health(tls, kReadinessHealthService), kServing);
  s = Client(Channel(Local(server.port())), "", absl::Seconds(3))->GetStatus().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << "plaintext on the control port";

  const int health_port = server.health_port();
  server.Stop();
  EXPECT_EQ(server.health_port(), 0);
  EXPECT_EQ(Health(Channel(Local(health_port)), ""),
            -static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  instance->engine->Stop();
}

// A health-only listener that cannot listen fails Start() naming its field,
// and leaves nothing running.
TEST(HealthListenerTest, UnusableAddressFailsStartNamingTheField) {
  std::unique_ptr<Instance> instance =
      StartInstance("health-listener-bad", [](engine::EngineOptions&) {});
  ASSERT_NE(instance, nullptr);
  ControlServer server(*instance->engine);
  ControlServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.health_listen_address = "192.0.2.1:0";  // TEST-NET-1: never this host's.
  absl::Status started = server.Start(options);
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable) << started;
  EXPECT_THAT(started.message(), ::testing::HasSubstr("control.health_listen_address"));
  EXPECT_EQ(server.port(), 0);
  options.health_listen_address = "nohost";
  started = server.Start(options);
  EXPECT_EQ(started.code(), absl::StatusCode::kInvalidArgument) << started;
  options.health_listen_address = "127.0.0.1:0";
  ASSERT_TRUE(server.Start(options).ok()) << "a failed start leaves the server startable";
  server.Stop();
  instance->engine->Stop();
}

}  // namespace
}  // namespace retryd::control
