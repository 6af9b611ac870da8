// The `grpc` processor: every attempt of a record is one call of
// retryd.v1.RecordProcessor/Process on the user's downstream service
// (proto/retryd/v1/processor.proto), and the answer is the outcome
// (server/processors/grpc_outcome.h).
//
// Asynchronous: Start() sends the call and returns; the outcome arrives on
// one of gRPC's threads. One channel serves every retryd thread, balanced
// round-robin over the addresses the target resolves to.
//
// health() reports the channel's connectivity and what the downstream's
// grpc.health.v1 service answers (asked every health_check_interval_ms, and
// at once after a refused call): evidence the engine's DownstreamGate takes
// for an outage that no record is to blame for.
//
// Thread-safe. Owns two threads: one cancels calls whose Cancellation fires
// (see Canceller in the .cc), one asks the health service (HealthChecker).
// Destroying it waits for the calls in flight to end (each is bounded by the
// deadline).
#ifndef RETRYD_SERVER_PROCESSORS_GRPC_PROCESSOR_H_
#define RETRYD_SERVER_PROCESSORS_GRPC_PROCESSOR_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "retryd/v1/config.pb.h"
#include "retryd/v1/processor.grpc.pb.h"
#include "server/engine/api/processor.h"
#include "server/processors/bearer_token.h"
#include "server/processors/grpc_outcome.h"

namespace retryd {

class GrpcProcessor : public engine::Processor {
 public:
  // The defaults of config.proto, for fields left at 0 by a config that did
  // not pass through the config loader (which fills them in itself).
  static constexpr uint32_t kDefaultDeadlineMs = 10'000;
  static constexpr uint32_t kDefaultMaxConcurrentCalls = 1;
  static constexpr uint32_t kDefaultMaxResponseBytes = 4 << 20;
  static constexpr uint32_t kDefaultHealthCheckIntervalMs = 1000;

  // Builds the processor; nothing is sent yet (the channel connects on the
  // first call). Errors, naming the field: a TLS or token file that cannot
  // be read, a token_env that is unset, a bad status_map.
  static absl::StatusOr<std::unique_ptr<GrpcProcessor>> Create(
      const retryd::v1::GrpcProcessorConfig& config);

  ~GrpcProcessor() override;

  // Start(), then waits for its outcome (first_failure_ms unknown: 0).
  engine::Outcome Process(const Record& record, int attempt) override;

  bool asynchronous() const override { return true; }
  int max_concurrent_calls() const override { return max_concurrent_calls_; }

  // Sends the call with the configured deadline and token. Cancelling
  // `cancel` (may be null) cancels the call; `done` still runs, once.
  void Start(const Record& record, const engine::AttemptInfo& info,
             std::shared_ptr<engine::Cancellation> cancel, engine::ProcessDone done) override;

  // The channel's state (READY, or not: CONNECTING, TRANSIENT_FAILURE) and
  // the health service's last answer. Lock-free.
  engine::DownstreamHealth health() const override;

 private:
  struct Call;
  class Canceller;
  class HealthChecker;
  // The answer is taken as bytes and parsed here: gRPC's callback API would
  // report an answer that does not parse as OK (see OutcomeOfAnswer).
  using Stub = grpc::TemplatedGenericStub<retryd::v1::ProcessRequest, grpc::ByteBuffer>;

  GrpcProcessor(const retryd::v1::GrpcProcessorConfig& config, StatusTable table,
                std::unique_ptr<BearerToken> token, std::shared_ptr<grpc::Channel> channel);

  // Runs on a gRPC thread when `call` ends.
  void Finish(Call& call, const grpc::Status& status);

  const uint32_t deadline_ms_;
  const int max_concurrent_calls_;
  const StatusTable table_;
  const std::unique_ptr<BearerToken> token_;  // Null: no token.
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<Stub> stub_;
  std::unique_ptr<Canceller> canceller_;
  std::unique_ptr<HealthChecker> health_checker_;

  absl::Mutex mu_;  // Guards calls_in_flight_.
  int64_t calls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace retryd

#endif  // RETRYD_SERVER_PROCESSORS_GRPC_PROCESSOR_H_
