// A real downstream for tests of the grpc processor: an in-process gRPC
// server on 127.0.0.1 implementing retryd.v1.RecordProcessor, whose answers
// are programmed per key prefix, and which records every call it gets.
//
// Thread-safe. Calls are served by gRPC's callback API, so calls with a
// latency overlap however many there are. Not for TSan-built tests (gRPC is
// not instrumented): give gRPC-using tests their own ctest label.
#ifndef RETRYD_TESTS_SUPPORT_DOWNSTREAM_SERVER_H_
#define RETRYD_TESTS_SUPPORT_DOWNSTREAM_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/server.h"
#include "grpcpp/support/status_code_enum.h"
#include "retryd/v1/processor.grpc.pb.h"

namespace retryd::testing {

class DownstreamServer {
 public:
  // What the server answers a call with.
  struct Answer {
    grpc::StatusCode code = grpc::StatusCode::OK;
    std::string message;
    // The answer comes this long after the call arrives (unless the client
    // cancels first, or the server stops).
    absl::Duration latency = absl::ZeroDuration();
    // Sent with an OK status.
    retryd::v1::ProcessResponse response;
    // Sent with a failure: a serialized google.rpc.Status, in the
    // grpc-status-details-bin trailer. Empty: none.
    std::string details;

    // OK, after `latency`.
    static Answer Delayed(absl::Duration latency) {
      Answer answer;
      answer.latency = latency;
      return answer;
    }
  };

  // A call as the server saw it.
  struct Call {
    retryd::v1::ProcessRequest request;
    std::string authorization;  // The "authorization" metadata; empty if none.
    absl::Time arrived;
    absl::Time finished = absl::InfiniteFuture();  // When it was answered.
    // The client cancelled it, its deadline passed, or the server stopped,
    // before the answer went out.
    bool cancelled = false;
  };

  // PEM contents for a server that speaks TLS.
  struct Tls {
    std::string cert;
    std::string key;
    // Not empty: clients must present a certificate this CA signed.
    std::string client_ca;
  };

  DownstreamServer();
  ~DownstreamServer();  // Stops it.
  DownstreamServer(const DownstreamServer&) = delete;
  DownstreamServer& operator=(const DownstreamServer&) = delete;

  // Listens on 127.0.0.1: on a free port the first time, then on the same
  // port again after Stop(), so that a client sees the same server return.
  absl::Status Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Serves TLS from the next Start() on.
  void UseTls(Tls tls) { tls_ = std::move(tls); }
  // Stops listening; calls in progress end CANCELLED (and are marked so).
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  int port() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string target() const;  // "127.0.0.1:<port>".

  // Calls whose key starts with `key_prefix` get `answer`; the longest
  // matching prefix wins; a null key matches only "". Default: OK at once.
  void SetAnswer(const std::string& key_prefix, Answer answer) ABSL_LOCKS_EXCLUDED(mu_);
  // Asked first, for every call (under the server's lock: keep it a pure
  // function of the request): an answer, or nullopt for SetAnswer's.
  using Answerer = std::function<std::optional<Answer>(const retryd::v1::ProcessRequest&)>;
  void SetAnswerer(Answerer answerer) ABSL_LOCKS_EXCLUDED(mu_);

  // Serves grpc.health.v1.Health from the next Start() on (without it the
  // server answers UNIMPLEMENTED, as one without the health service does):
  // `service` answers `status`; a service never set answers NOT_FOUND.
  void SetHealth(const std::string& service,
                 grpc::health::v1::HealthCheckResponse::ServingStatus status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Health checks answered so far.
  int health_checks() const ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<Call> calls() const ABSL_LOCKS_EXCLUDED(mu_);
  // The most calls that were in progress (arrived, not yet answered) at once.
  int peak_in_progress() const ABSL_LOCKS_EXCLUDED(mu_);

  // Bounded waits; each returns whether the condition held in time.
  bool WaitForCalls(int count, absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  bool WaitForInProgress(int count, absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  bool WaitForCancelled(int count, absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Service;
  class Reactor;
  class HealthService;

  // Called by the service and its reactors, on gRPC's threads.
  Answer Arrive(const retryd::v1::ProcessRequest& request, std::string authorization, size_t* index)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Answered(size_t index) ABSL_LOCKS_EXCLUDED(mu_);
  void Cancelled(size_t index) ABSL_LOCKS_EXCLUDED(mu_);

  bool Wait(int count, const int* value, absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

  const std::unique_ptr<Service> service_;
  const std::unique_ptr<HealthService> health_service_;
  // Touched only by Start and Stop, which the test calls from one thread.
  std::unique_ptr<grpc::Server> server_;
  std::optional<Tls> tls_;

  mutable absl::Mutex mu_;  // Guards the fields below.
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Answer> answers_ ABSL_GUARDED_BY(mu_);
  Answerer answerer_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, grpc::health::v1::HealthCheckResponse::ServingStatus> health_
      ABSL_GUARDED_BY(mu_);
  int health_checks_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int in_progress_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_in_progress_ ABSL_GUARDED_BY(mu_) = 0;
  int cancelled_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_SUPPORT_DOWNSTREAM_SERVER_H_
