// retryd.v1.Control on gRPC's callback API: the remote control of one
// Engine.
//
// Every handler first checks the bearer token (see auth.h), then validates
// its request (INVALID_ARGUMENT naming the field and its allowed range),
// then acts. Handlers never block a gRPC thread: GetStatus reads the
// engine's lock-free stats; the operations that wait (StartRetryThreads,
// StopRetryThreads, SetInOrder, SetOrderingMode, and ListInFlight and
// DeadLetterRecord, which wait for the engine's threads to answer) run on a
// small owned BlockingExecutor and finish their call from there, with the
// call's deadline as the engine's deadline (less a small margin so the
// engine's answer — the ids started so far, or DEADLINE_EXCEEDED after a
// rolled-back drain — still reaches the client; a call without a deadline
// gets `default_operation_timeout`). SetInOrder and SetOrderingMode, which
// can wait long for a drain or a read of the retry topic, hand the engine a
// Cancellation that its reactor's OnCancel sets: a cancelled call (Ctrl-C
// in retryctl, a client gone, server shutdown) ends the drain at once and
// leaves the engine as it was. ListInFlight and DeadLetterRecord do the same
// for their wait on the engine's threads.
// ListDeadLetters, StartRedrive and PurgeDeadLetters run on the executor
// too, through DeadLetterTools (its redrives are operations of the
// registry). WatchMetrics streams are MetricsWatcher reactors fed by the shared
// MetricsSampler. Every absl::Status becomes a grpc::Status once, in
// ToGrpcStatus.
//
// Thread-safety: thread-safe; gRPC calls the handlers from its threads.
// BeginShutdown() and Shutdown() are for the owner (ControlServer), around
// grpc::Server::Shutdown.
#ifndef RETRYD_SERVER_CONTROL_CONTROL_SERVICE_H_
#define RETRYD_SERVER_CONTROL_CONTROL_SERVICE_H_

#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "retryd/v1/config.pb.h"
#include "retryd/v1/control.grpc.pb.h"
#include "server/control/auth.h"
#include "server/control/blocking_executor.h"
#include "server/control/dead_letter_tools.h"
#include "server/control/metrics_watcher.h"
#include "server/control/request_ids.h"
#include "server/engine/api/cancellation.h"
#include "server/engine/api/engine.h"
#include "server/engine/metrics_sampler.h"
#include "server/operations/operation_registry.h"

namespace retryd::control {

struct ControlServiceOptions {
  // The effective config, reported by GetStatus (it holds no secret values).
  retryd::v1::Config config;
  // The engine's deadline for a blocking operation whose call has none.
  absl::Duration default_operation_timeout = absl::Minutes(5);
  // Workers running blocking operations, and how many more may wait.
  // Changes of the retry threads wait in the engine for the ones before
  // them, to be applied together: each waits on a worker of its own.
  int operation_threads = 32;
  int max_queued_operations = 64;
  // Open WatchMetrics streams at most; more get RESOURCE_EXHAUSTED.
  int max_watchers = 256;
  // The console's secret (ConsoleGateway): a call carrying it names the
  // browser behind it in logs and audit lines. Empty: no console.
  std::string console_secret;
};

class ControlService final : public retryd::v1::Control::CallbackService {
 public:
  // `engine` and `sampler` (started) must outlive the service;
  // `kafka_reachable` reports the health prober's last answer.
  ControlService(engine::Engine& engine, const engine::MetricsSampler& sampler,
                 BearerTokenAuth auth, std::function<bool()> kafka_reachable,
                 ControlServiceOptions options);
  ~ControlService() override;  // Shutdown()s.

  // Ends every open WatchMetrics stream (UNAVAILABLE) and refuses new
  // streams and operations; operations already queued finish with
  // UNAVAILABLE without reaching the engine, the running one completes.
  // Returns at once.
  void BeginShutdown();
  // BeginShutdown(), then joins the operation workers. Call after
  // grpc::Server::Shutdown returned. Idempotent.
  void Shutdown();

  // retryd.v1.Control.
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* StartRetryThreads(grpc::CallbackServerContext* context,
                                              const v1::StartRetryThreadsRequest* request,
                                              v1::StartRetryThreadsResponse* response) override;
  grpc::ServerUnaryReactor* StopRetryThreads(grpc::CallbackServerContext* context,
                                             const v1::StopRetryThreadsRequest* request,
                                             v1::StopRetryThreadsResponse* response) override;
  grpc::ServerUnaryReactor* SetRetryThreadCount(grpc::CallbackServerContext* context,
                                                const v1::SetRetryThreadCountRequest* request,
                                                v1::SetRetryThreadCountResponse* response) override;
  grpc::ServerUnaryReactor* SetInOrder(grpc::CallbackServerContext* context,
                                       const v1::SetInOrderRequest* request,
                                       v1::SetInOrderResponse* response) override;
  grpc::ServerUnaryReactor* SetOrderingMode(grpc::CallbackServerContext* context,
                                            const v1::SetOrderingModeRequest* request,
                                            v1::SetOrderingModeResponse* response) override;
  grpc::ServerWriteReactor<v1::MetricsSnapshot>* WatchMetrics(
      grpc::CallbackServerContext* context, const v1::WatchMetricsRequest* request) override;
  grpc::ServerUnaryReactor* ListInFlight(grpc::CallbackServerContext* context,
                                         const v1::ListInFlightRequest* request,
                                         v1::ListInFlightResponse* response) override;
  grpc::ServerUnaryReactor* DeadLetterRecord(grpc::CallbackServerContext* context,
                                             const v1::DeadLetterRecordRequest* request,
                                             v1::DeadLetterRecordResponse* response) override;
  grpc::ServerUnaryReactor* StartDrain(grpc::CallbackServerContext* context,
                                       const v1::StartDrainRequest* request,
                                       v1::Operation* response) override;
  grpc::ServerUnaryReactor* GetOperation(grpc::CallbackServerContext* context,
                                         const v1::GetOperationRequest* request,
                                         v1::Operation* response) override;
  grpc::ServerUnaryReactor* ListOperations(grpc::CallbackServerContext* context,
                                           const v1::ListOperationsRequest* request,
                                           v1::ListOperationsResponse* response) override;
  grpc::ServerWriteReactor<v1::Operation>* WatchOperation(
      grpc::CallbackServerContext* context, const v1::WatchOperationRequest* request) override;
  grpc::ServerUnaryReactor* CancelOperation(grpc::CallbackServerContext* context,
                                            const v1::CancelOperationRequest* request,
                                            v1::Operation* response) override;
  grpc::ServerUnaryReactor* ListDeadLetters(grpc::CallbackServerContext* context,
                                            const v1::ListDeadLettersRequest* request,
                                            v1::ListDeadLettersResponse* response) override;
  grpc::ServerUnaryReactor* StartRedrive(grpc::CallbackServerContext* context,
                                         const v1::StartRedriveRequest* request,
                                         v1::Operation* response) override;
  grpc::ServerUnaryReactor* PurgeDeadLetters(grpc::CallbackServerContext* context,
                                             const v1::PurgeDeadLettersRequest* request,
                                             v1::PurgeDeadLettersResponse* response) override;

  // Resumes the redrives left unfinished by a retryd that stopped or died
  // (DeadLetterTools::ResumeUnfinished), in the background. Once, after
  // the server serves.
  void ResumeRedrives();

 private:
  // The engine's work for one blocking call: gets the engine deadline,
  // fills the response, returns the call's status.
  using Operation = absl::AnyInvocable<absl::Status(absl::Time deadline) &&>;

  // A switch of the ordering mode: the engine's call, given the engine
  // deadline and the call's cancellation; it fills the response on success.
  using SwitchOperation =
      absl::AnyInvocable<absl::StatusOr<engine::SetOrderingResult>(
                             absl::Time deadline, engine::Cancellation* cancel) &&>;

  // SetInOrder and SetOrderingMode: a mutating call that, once authorized
  // and `validation` is OK, runs `operation` on the executor with a
  // Cancellation its reactor sets, and logs it as `call` with the result.
  // `request` and `response` are the call's (for its request_id); `drain`:
  // the switch drains, and is registered as an operation while it runs.
  grpc::ServerUnaryReactor* SwitchOrdering(grpc::CallbackServerContext* context,
                                           absl::Status validation, std::string call,
                                           const google::protobuf::Message& request,
                                           google::protobuf::Message* response, bool drain,
                                           SwitchOperation operation);

  // Runs `operation` on the executor and finishes `reactor` from there.
  // `cancel`, if given, is the one `reactor` sets when the call is
  // cancelled: an operation not yet begun then does not run.
  void RunBlocking(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                   Operation operation,
                   std::shared_ptr<const engine::Cancellation> cancel = nullptr);
  // RunBlocking for a mutating call: with a request_id (see request_ids.h),
  // a retry of a call that succeeded gets its response again instead of
  // running `operation`; `method` and `request` make its fingerprint.
  // Finishes `reactor` at once for a malformed request_id.
  void RunMutating(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                   std::string method, const google::protobuf::Message& request,
                   google::protobuf::Message* response, Operation operation,
                   std::shared_ptr<const engine::Cancellation> cancel = nullptr);
  // A drain's progress, from the retry backlog the engine last measured.
  OperationRegistry::Progress DrainProgress() const;
  absl::Time EngineDeadline(const grpc::CallbackServerContext& context) const;
  absl::Status Authorize(const grpc::CallbackServerContext& context, Access access) const;
  // Who made a call, for logs: gRPC's peer, or for a call the console
  // forwarded, "console " and the browser's address.
  std::string CallerPeer(const grpc::CallbackServerContext& context) const;
  // CallerPeer, the client certificate's subject and the token's digest,
  // for an audit line.
  std::string AuditCaller(const grpc::CallbackServerContext& context) const;

  engine::Engine& engine_;
  const engine::MetricsSampler& sampler_;
  const BearerTokenAuth auth_;
  const std::function<bool()> kafka_reachable_;
  const ControlServiceOptions options_;
  const v1::Instance instance_;  // GetStatus's, fixed at construction.

  std::atomic<bool> shutting_down_{false};
  WatcherRegistry watchers_;
  RequestIdCache request_ids_;
  OperationRegistry operations_;
  DeadLetterTools dead_letters_;  // Its redrives run on operations_.
  BlockingExecutor executor_;     // Last: its workers use the members above.
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_CONTROL_SERVICE_H_
