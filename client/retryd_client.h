// A C++ client of retryd's control API (`retryd.v1.Control`) and of its
// health service (`grpc.health.v1.Health`). `retryctl` is built on it, and
// tests use it to drive a running retryd.
//
// Typical use:
//   ClientOptions options;
//   options.address = "127.0.0.1:50051";
//   absl::StatusOr<std::unique_ptr<RetrydClient>> client =
//       RetrydClient::Create(options);
//   if (!client.ok()) return client.status();
//   absl::StatusOr<retryd::v1::GetStatusResponse> status = (*client)->GetStatus();
//
// Errors: a failed RPC becomes an absl::Status with the same code (gRPC and
// Abseil number their codes alike) and the server's message, unchanged. So
// `status.code() == absl::StatusCode::kFailedPrecondition` is how a caller
// recognises, e.g., StartRetryThreads while the engine is in order.
//
// Thread-safety: thread-safe. Any method may be called from any thread,
// concurrently with the others (they share one gRPC channel). Cancel() is
// meant to be called from a thread other than the one blocked in a call. The
// client must outlive the calls in progress on it.
#ifndef RETRYD_CLIENT_RETRYD_CLIENT_H_
#define RETRYD_CLIENT_RETRYD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/rpc/status.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "retryd/v1/control.grpc.pb.h"

namespace retryd {

// A google.rpc.Status (an Operation's error) as the calls return theirs:
// its code and message, and retryd's reason (ReasonOf in
// server/common/error_reason.h) if a google.rpc.ErrorInfo of domain
// "retryd.io" in its details carries one.
absl::Status FromRpcStatus(const google::rpc::Status& status);

struct ClientOptions {
  // host:port of retryd's control endpoint (any gRPC target works, e.g.
  // "dns:///retryd.example:50051" or "unix:/run/retryd.sock").
  std::string address = "127.0.0.1:50051";

  // Bearer token, sent with every call as "authorization: Bearer <token>".
  // Empty: none is sent. Printable ASCII only (it travels as HTTP/2 header).
  std::string token;

  // TLS. Used when `tls` is true or any of the files below is set.
  // tls_ca_file: PEM roots that verify the server (empty: the system's).
  // tls_cert_file + tls_key_file: this client's PEM certificate chain and
  // private key, for mutual TLS; both or neither.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  bool tls = false;

  // Deadline of each unary call (WatchMetrics has none: it runs until it is
  // cancelled). SetInOrder or SetOrderingMode with drain_retries spends up
  // to this long draining.
  absl::Duration timeout = absl::Seconds(30);
};

class RetrydClient {
 public:
  // Reads the TLS files and creates the channel; connects lazily, on the
  // first call, so an unreachable server shows up as UNAVAILABLE from the
  // calls. INVALID_ARGUMENT for inconsistent options (an empty address, a
  // certificate without its key, a token with a newline in it); a file that
  // cannot be read gives an error (e.g. NOT_FOUND) naming it.
  static absl::StatusOr<std::unique_ptr<RetrydClient>> Create(ClientOptions options);

  // A client on a channel the caller built (e.g. an in-process channel).
  // Only `token` and `timeout` of `options` are used.
  static std::unique_ptr<RetrydClient> CreateWithChannel(std::shared_ptr<grpc::Channel> channel,
                                                         ClientOptions options);

  RetrydClient(const RetrydClient&) = delete;
  RetrydClient& operator=(const RetrydClient&) = delete;
  ~RetrydClient();

  const ClientOptions& options() const { return options_; }

  // retryd.v1.Control. Each blocks for at most options().timeout.
  absl::StatusOr<v1::GetStatusResponse> GetStatus();
  absl::StatusOr<v1::StartRetryThreadsResponse> StartRetryThreads(int32_t count);
  // As built by the caller (with a request_id, say).
  absl::StatusOr<v1::StartRetryThreadsResponse> StartRetryThreads(
      const v1::StartRetryThreadsRequest& request);
  absl::StatusOr<v1::SetRetryThreadCountResponse> SetRetryThreadCount(
      const v1::SetRetryThreadCountRequest& request);
  // Stops the `count` most recently started retry threads (all of them if
  // fewer run). `graceful` finishes in-flight hand-offs and commits first.
  absl::StatusOr<v1::StopRetryThreadsResponse> StopRetryThreads(int32_t count, bool graceful);
  // Stops exactly these retry threads; NOT_FOUND if one is not running.
  absl::StatusOr<v1::StopRetryThreadsResponse> StopRetryThreadsById(
      const std::vector<uint32_t>& thread_ids, bool graceful);
  absl::StatusOr<v1::StopRetryThreadsResponse> StopRetryThreads(
      const v1::StopRetryThreadsRequest& request);
  absl::StatusOr<v1::SetInOrderResponse> SetInOrder(bool in_order, bool drain_retries);
  absl::StatusOr<v1::SetInOrderResponse> SetInOrder(const v1::SetInOrderRequest& request);
  // drain_retries only with IN_ORDER (the server refuses it otherwise).
  absl::StatusOr<v1::SetOrderingModeResponse> SetOrderingMode(v1::Ordering mode,
                                                              bool drain_retries);
  absl::StatusOr<v1::SetOrderingModeResponse> SetOrderingMode(
      const v1::SetOrderingModeRequest& request);
  // The `limit` oldest records in flight (0: the server's default, 100).
  absl::StatusOr<v1::ListInFlightResponse> ListInFlight(uint32_t limit);
  // Dead-letters the held record at these original coordinates now;
  // returns once the dead-letter topic has it. NOT_FOUND if no thread holds
  // it, FAILED_PRECONDITION if it is in a processor call right now.
  absl::StatusOr<v1::DeadLetterRecordResponse> DeadLetterRecord(const std::string& topic,
                                                                int32_t partition, int64_t offset);
  absl::StatusOr<v1::DeadLetterRecordResponse> DeadLetterRecord(
      const v1::DeadLetterRecordRequest& request);

  // Dead-letter tools. One page of the dead letters that match the
  // request's filter (follow next_page_token for the rest).
  absl::StatusOr<v1::ListDeadLettersResponse> ListDeadLetters(
      const v1::ListDeadLettersRequest& request);
  // Returns the redrive's operation at once (kind REDRIVE).
  absl::StatusOr<v1::Operation> StartRedrive(const v1::StartRedriveRequest& request);
  absl::StatusOr<v1::PurgeDeadLettersResponse> PurgeDeadLetters(
      const v1::PurgeDeadLettersRequest& request);

  // Long-running operations (a drain, a redrive).
  absl::StatusOr<v1::Operation> StartDrain(const v1::StartDrainRequest& request);
  absl::StatusOr<v1::Operation> GetOperation(const std::string& id);
  absl::StatusOr<v1::ListOperationsResponse> ListOperations();
  absl::StatusOr<v1::Operation> CancelOperation(const std::string& id);
  absl::StatusOr<v1::Operation> CancelOperation(const v1::CancelOperationRequest& request);
  // Streams operation `id` into `on_update` until it has ended (OK), the
  // server ends the stream (its status) or Cancel() is called (OK).
  absl::Status WatchOperation(const std::string& id,
                              absl::FunctionRef<void(const v1::Operation&)> on_update);

  // grpc.health.v1.Health/Check. `service` "" is the whole server;
  // "retryd.v1.Control" the control service.
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> HealthCheck(const std::string& service);

  // Streams metric snapshots of `thread_ids` (empty: all threads) every
  // `interval_ms` into `on_snapshot`, on the calling thread, until
  //   - `on_snapshot` returns false: OK;
  //   - Cancel() is called: OK;
  //   - the server ends the stream: its status (OK when it shut down cleanly).
  // Errors before the first snapshot (unreachable server, INVALID_ARGUMENT
  // interval, UNAUTHENTICATED) come back the same way.
  absl::Status Watch(uint32_t interval_ms, const std::vector<uint32_t>& thread_ids,
                     absl::FunctionRef<bool(const v1::MetricsSnapshot&)> on_snapshot);

  // Cancels every call in progress on this client, from any thread: a Watch
  // returns OK, a unary call CANCELLED. Calls started afterwards are not
  // affected.
  void Cancel();

 private:
  RetrydClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  // Registers `context` so Cancel() reaches it, for the scope's lifetime.
  class ActiveCall;

  // Sets the deadline (if `unary`) and the authorization header.
  void Prepare(grpc::ClientContext& context, bool unary) const;

  // One unary call of the control service: `method` of the stub, prepared
  // and cancellable like every call.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Unary(grpc::Status (v1::Control::Stub::*method)(grpc::ClientContext*,
                                                                           const Request&,
                                                                           Response*),
                                 const Request& request);

  const ClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Control::Stub> control_;
  const std::unique_ptr<grpc::health::v1::Health::Stub> health_;

  absl::Mutex mu_;
  // Contexts of the calls in progress; each is removed before it dies.
  absl::flat_hash_set<grpc::ClientContext*> active_ ABSL_GUARDED_BY(mu_);
  // Bumped by each Cancel(): a Watch that sees it change knows its CANCELLED
  // status came from us, not from the server.
  uint64_t cancel_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace retryd

#endif  // RETRYD_CLIENT_RETRYD_CLIENT_H_
