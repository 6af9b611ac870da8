// The `grpc` processor: every attempt of a record is one call of
// retryd.v1.RecordProcessor/Process on the user's downstream service
// (proto/retryd/v1/processor.proto), and the answer is the outcome
// (server/processors/grpc_outcome.h).
//
// Asynchronous: Start() sends the call and returns; the outcome arrives on
// one of gRPC's threads. One channel serves every retryd thread, balanced
// round-robin over the addresses the target resolves to.
//
// Thread-safe. Owns one thread, which cancels calls whose Cancellation fires
// (see Canceller in the .cc). Destroying it waits for the calls in flight to
// end (each is bounded by the deadline).
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
#include "server/engine/processor.h"
#include "server/processors/bearer_token.h"
#include "server/processors/grpc_outcome.h"

namespace retryd {

class GrpcProcessor : public Processor {
 public:
  // The defaults of config.proto, for fields left at 0 by a config that did
  // not pass through the config loader (which fills them in itself).
  static constexpr uint32_t kDefaultDeadlineMs = 10'000;
  static constexpr uint32_t kDefaultMaxConcurrentCalls = 1;
  static constexpr uint32_t kDefaultMaxResponseBytes = 4 << 20;

  // Builds the processor; nothing is sent yet (the channel connects on the
  // first call). Errors, naming the field: a TLS or token file that cannot
  // be read, a token_env that is unset, a bad status_map.
  static absl::StatusOr<std::unique_ptr<GrpcProcessor>> Create(
      const retryd::v1::GrpcProcessorConfig& config);

  ~GrpcProcessor() override;

  // Start(), then waits for its outcome (first_failure_ms unknown: 0).
  Outcome Process(const Record& record, int attempt) override;

  bool asynchronous() const override { return true; }
  int max_concurrent_calls() const override { return max_concurrent_calls_; }

  // Sends the call with the configured deadline and token. Cancelling
  // `cancel` (may be null) cancels the call; `done` still runs, once.
  void Start(const Record& record, const AttemptInfo& info, std::shared_ptr<Cancellation> cancel,
             ProcessDone done) override;

 private:
  struct Call;
  class Canceller;
  // The answer is taken as bytes and parsed here: gRPC's callback API would
  // report an answer that does not parse as OK (see OutcomeOfAnswer).
  using Stub = grpc::TemplatedGenericStub<retryd::v1::ProcessRequest, grpc::ByteBuffer>;

  GrpcProcessor(const retryd::v1::GrpcProcessorConfig& config, StatusTable table,
                std::unique_ptr<BearerToken> token, std::unique_ptr<Stub> stub);

  // Runs on a gRPC thread when `call` ends.
  void Finish(Call& call, const grpc::Status& status);

  const uint32_t deadline_ms_;
  const int max_concurrent_calls_;
  const StatusTable table_;
  const std::unique_ptr<BearerToken> token_;  // Null: no token.
  const std::unique_ptr<Stub> stub_;
  std::unique_ptr<Canceller> canceller_;

  absl::Mutex mu_;  // Guards calls_in_flight_.
  int64_t calls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace retryd

#endif  // RETRYD_SERVER_PROCESSORS_GRPC_PROCESSOR_H_
