// A stand-in for retryd's gRPC server, for client tests: serves
// retryd.v1.Control and grpc.health.v1.Health on 127.0.0.1:0 with canned
// responses and errors, and records what each call carried.
//
// Thread-safety: thread-safe; setters are meant for before the calls.
#ifndef RETRYD_CLIENT_TESTS_FAKE_RETRYD_H_
#define RETRYD_CLIENT_TESTS_FAKE_RETRYD_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/server.h"
#include "retryd/v1/control.grpc.pb.h"

namespace retryd::testing {

// What one call carried.
struct CallRecord {
  std::string method;  // "GetStatus", ..., "WatchMetrics", "Check".
  std::optional<std::string> authorization;
  std::optional<absl::Duration> deadline_in;  // None: no deadline.
};

class FakeRetryd {
 public:
  FakeRetryd();  // Listening when constructed.
  ~FakeRetryd();
  FakeRetryd(const FakeRetryd&) = delete;
  FakeRetryd& operator=(const FakeRetryd&) = delete;

  const std::string& address() const { return address_; }
  // Stops serving (in-flight calls are cancelled); the address then refuses.
  void Shutdown();

  // Canned answers.
  void set_status(v1::GetStatusResponse response);
  void set_start_response(v1::StartRetryThreadsResponse response);
  void set_stop_response(v1::StopRetryThreadsResponse response);
  void set_in_order_response(v1::SetInOrderResponse response);
  void set_ordering_response(v1::SetOrderingModeResponse response);
  void set_health(grpc::health::v1::HealthCheckResponse::ServingStatus status);
  // The answer of a unary call without a setter of its own above, by
  // method name ("SetRetryThreadCount", "StartDrain", "GetOperation",
  // "ListOperations", "CancelOperation", "StartRedrive",
  // "PurgeDeadLetters"); unset: an empty message.
  void set_response(const std::string& method, const google::protobuf::Message& response);
  // WatchMetrics writes these, then ends the stream with OK if `then_end`,
  // else holds it open until the client cancels.
  void set_snapshots(std::vector<v1::MetricsSnapshot> snapshots, bool then_end);
  // WatchOperation, likewise.
  void set_operation_updates(std::vector<v1::Operation> updates, bool then_end);
  // ListDeadLetters answers an empty page_token with the first page, and
  // each page's next_page_token with the page after it; any other token is
  // INVALID_ARGUMENT. None set: one empty page.
  void set_dead_letter_pages(std::vector<v1::ListDeadLettersResponse> pages);
  // `method` fails with `status` instead of answering.
  void FailWith(const std::string& method, grpc::Status status);

  // Observations.
  std::vector<CallRecord> calls() const;
  std::optional<CallRecord> last_call(const std::string& method) const;
  v1::StartRetryThreadsRequest last_start_request() const;
  v1::StopRetryThreadsRequest last_stop_request() const;
  v1::SetInOrderRequest last_in_order_request() const;
  v1::SetOrderingModeRequest last_ordering_request() const;
  v1::WatchMetricsRequest last_watch_request() const;
  grpc::health::v1::HealthCheckRequest last_health_request() const;
  // Every ListDeadLetters request, in order.
  std::vector<v1::ListDeadLettersRequest> dead_letter_requests() const;
  // The last request of a call answered through set_response, or of
  // WatchOperation; an empty one if none came.
  template <typename Request>
  Request last_request(const std::string& method) const {
    Request request;
    request.ParseFromString(RequestBytes(method));
    return request;
  }

  // Notified once the first message of a watch (WatchMetrics or
  // WatchOperation) was written.
  absl::Notification& first_snapshot_written() { return first_snapshot_written_; }
  // Notified once a watch (either) was cancelled by its client.
  absl::Notification& watch_cancelled() { return watch_cancelled_; }

 private:
  class ControlService;
  class HealthService;
  template <typename Message>
  class StreamWriter;

  std::string RequestBytes(const std::string& method) const ABSL_LOCKS_EXCLUDED(mu_);

  // Records the call; returns the error to fail it with (OK: answer).
  grpc::Status Record(const std::string& method, const grpc::ServerContextBase& context)
      ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  v1::GetStatusResponse status_ ABSL_GUARDED_BY(mu_);
  v1::StartRetryThreadsResponse start_response_ ABSL_GUARDED_BY(mu_);
  v1::StopRetryThreadsResponse stop_response_ ABSL_GUARDED_BY(mu_);
  v1::SetInOrderResponse in_order_response_ ABSL_GUARDED_BY(mu_);
  v1::SetOrderingModeResponse ordering_response_ ABSL_GUARDED_BY(mu_);
  grpc::health::v1::HealthCheckResponse::ServingStatus health_ ABSL_GUARDED_BY(mu_) =
      grpc::health::v1::HealthCheckResponse::SERVING;
  std::vector<v1::MetricsSnapshot> snapshots_ ABSL_GUARDED_BY(mu_);
  bool end_after_snapshots_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<v1::Operation> operation_updates_ ABSL_GUARDED_BY(mu_);
  bool end_after_operation_updates_ ABSL_GUARDED_BY(mu_) = false;
  // By method name, serialized: set_response's answers, and the requests.
  absl::flat_hash_map<std::string, std::string> responses_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> requests_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, grpc::Status> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ListDeadLettersResponse> dead_letter_pages_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ListDeadLettersRequest> dead_letter_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<CallRecord> calls_ ABSL_GUARDED_BY(mu_);
  v1::StartRetryThreadsRequest start_request_ ABSL_GUARDED_BY(mu_);
  v1::StopRetryThreadsRequest stop_request_ ABSL_GUARDED_BY(mu_);
  v1::SetInOrderRequest in_order_request_ ABSL_GUARDED_BY(mu_);
  v1::SetOrderingModeRequest ordering_request_ ABSL_GUARDED_BY(mu_);
  v1::WatchMetricsRequest watch_request_ ABSL_GUARDED_BY(mu_);
  grpc::health::v1::HealthCheckRequest health_request_ ABSL_GUARDED_BY(mu_);

  absl::Notification first_snapshot_written_;
  absl::Notification watch_cancelled_;

  std::unique_ptr<ControlService> control_;
  std::unique_ptr<HealthService> health_service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace retryd::testing

#endif  // RETRYD_CLIENT_TESTS_FAKE_RETRYD_H_
