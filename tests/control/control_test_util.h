// Helpers for the control-plane tests: an engine on the mock cluster,
// RetrydClients, self-signed certificates and TLS channels, health checks
// and watches, reflection.
#ifndef RETRYD_TESTS_CONTROL_CONTROL_TEST_UTIL_H_
#define RETRYD_TESTS_CONTROL_CONTROL_TEST_UTIL_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/retryd_client.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "retryd/v1/control.grpc.pb.h"
#include "server/control/control_server.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/processor.h"
#include "tests/support/test_cluster.h"

namespace retryd::testing {

// Keys starting with "fail-" fail retriably while failing() is set (they
// keep circulating through the retry topic); everything else succeeds.
class SwitchProcessor : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int attempt) override;
  void set_failing(bool failing) { failing_.store(failing); }

 private:
  std::atomic<bool> failing_{true};
};

struct EngineUnderTest {
  TestTopics topics;
  SwitchProcessor* processor = nullptr;  // Owned by the engine.
  std::unique_ptr<engine::Engine> engine;
};

// Creates topics named after `name`, starts an engine (StartEngine) with
// `retry_threads` retry threads (cap `max_threads`) and waits until every
// thread has its partitions. Fails the test and returns null on error.
std::unique_ptr<EngineUnderTest> StartEngineUnderTest(const std::string& name, int retry_threads,
                                                      int max_threads);

// The base of a suite whose cases share one engine on the mock cluster,
// started once with one retry thread (cap 4) on topics named after `kName`;
// each case fails at once if it did not start.
template <const char* kName>
class SharedEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_ = StartEngineUnderTest(kName, /*retry_threads=*/1, /*max_threads=*/4).release();
  }
  static void TearDownTestSuite() {
    if (engine_ != nullptr) engine_->engine->Stop();
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(engine_, nullptr) << "the suite's engine did not start"; }

  static inline EngineUnderTest* engine_ = nullptr;
};

// A plain HTTP client of 127.0.0.1:`port` (the HTTP listener): 5 s to
// connect, `read_timeout_s` for an answer.
std::unique_ptr<httplib::Client> HttpClient(int port, int read_timeout_s = 10);

std::shared_ptr<grpc::Channel> Channel(
    const std::string& target,
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials());

// A RetrydClient on `channel`, sending `token` (if not empty), each unary
// call bounded by `timeout`.
std::unique_ptr<RetrydClient> Client(std::shared_ptr<grpc::Channel> channel,
                                     const std::string& token = "",
                                     absl::Duration timeout = absl::Seconds(60));

// The ids of the running retry threads; empty if GetStatus fails.
std::vector<uint32_t> RetryThreadIds(RetrydClient& client);

// The status a WatchMetrics stream ends with when the server refuses it at
// once; OK once the first snapshot arrives.
absl::Status WatchStatus(RetrydClient& client, uint32_t interval_ms,
                         const std::vector<uint32_t>& thread_ids = {});

// Sets a deadline `timeout` from now and, if `token` is not empty, the
// bearer token.
void Prepare(grpc::ClientContext& context, absl::Duration timeout, const std::string& token = "");

struct CertFiles {
  std::string cert;  // PEM, self-signed, SAN localhost and 127.0.0.1.
  std::string key;
};
// Generates a self-signed certificate with openssl; nullopt if openssl is
// missing (the test then skips).
std::optional<CertFiles> MakeSelfSignedCert(const std::string& dir, const std::string& name);

// The certificates of a TLS test, each self-signed: the server's, a
// client's (the CA of mutual TLS) and a stranger's, which nobody trusts.
struct TlsTestCerts {
  CertFiles server, client, stranger;
};
// Makes them in `dir`; nullopt if openssl is missing (the test then skips).
std::optional<TlsTestCerts> MakeTlsTestCerts(const std::string& dir);

// Control server options from a config listening on 127.0.0.1:0 whose
// control section names `server`'s TLS files and, if not empty, the client
// CA `client_ca` (mutual TLS); with `metrics_address` too if not empty.
absl::StatusOr<control::ControlServerOptions> TlsServerOptions(
    const CertFiles& server, const std::string& client_ca = "",
    const std::string& metrics_address = "");

// A TLS channel to `target` that trusts `root_pem` and takes the server for
// "localhost", presenting `client`'s certificate if given.
std::shared_ptr<grpc::Channel> TlsChannel(const std::string& target, const std::string& root_pem,
                                          const std::optional<CertFiles>& client = {});

// Starts `server` on a free loopback port, probing health every 200 ms;
// whether it started (a test failure if not).
bool StartProbingFast(control::ControlServer& server);

// The health status of `service` (grpc.health.v1.Health/Check), or the
// call's error code as a negative number.
int Health(const std::shared_ptr<grpc::Channel>& channel, const std::string& service);

// A grpc.health.v1.Health/Watch call on `service`, read on a thread of its
// own, as a probe that watches sees it: every status the server sends, in
// order. Destroying it cancels the call.
class HealthWatch {
 public:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  HealthWatch(const std::shared_ptr<grpc::Channel>& channel, const std::string& service);
  ~HealthWatch();

  HealthWatch(const HealthWatch&) = delete;
  HealthWatch& operator=(const HealthWatch&) = delete;

  // Waits until the last status the stream sent is `want`, or `timeout`.
  bool WaitForLatest(Status want, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Every status sent so far.
  std::vector<Status> Seen() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Read();

  const std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  grpc::health::v1::HealthCheckRequest request_;
  grpc::ClientContext context_;
  mutable absl::Mutex mu_;  // Guards the fields below.
  std::vector<Status> seen_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;  // Last: starts once the rest is made.
};

// Server reflection (grpc.reflection.v1alpha), spoken over raw bytes since
// the reflection protos ship without headers.
absl::StatusOr<std::vector<std::string>> ReflectionListServices(
    const std::shared_ptr<grpc::Channel>& channel);
// The file descriptors the server returns for `symbol` (the file defining
// it first, then perhaps its dependencies).
absl::StatusOr<std::vector<google::protobuf::FileDescriptorProto>> ReflectionFileContaining(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& symbol);

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_CONTROL_CONTROL_TEST_UTIL_H_
