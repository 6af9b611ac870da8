// Engine, the face of api/engine.h: each public method forwards to the
// Engine::Impl it holds (engine_impl.h), where the work is done.
#include <memory>
#include <utility>
#include <vector>

#include "server/engine/api/engine.h"
#include "server/engine/engine_impl.h"

namespace retryd::engine {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(EngineOptions options,
                                                       std::unique_ptr<Processor> processor) {
  absl::StatusOr<std::unique_ptr<Impl>> impl =
      Impl::Create(std::move(options), std::move(processor));
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<Engine>(new Engine(*std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() = default;  // ~Impl Stop()s.

absl::Status Engine::Start() { return impl_->Start(); }

void Engine::Stop() { impl_->Stop(); }

DownstreamSnapshot Engine::downstream() const { return impl_->downstream(); }

absl::StatusOr<RetryThreadChangeResult> Engine::ChangeRetryThreads(RetryThreadChange change,
                                                                   absl::Time deadline) {
  return impl_->ChangeRetryThreads(std::move(change), deadline);
}

absl::StatusOr<std::vector<int>> Engine::StartRetryThreads(int count, absl::Time deadline,
                                                           int tier) {
  return impl_->StartRetryThreads(count, deadline, tier);
}

absl::StatusOr<std::vector<int>> Engine::StopRetryThreads(int count, bool graceful,
                                                          absl::Time deadline, int tier) {
  return impl_->StopRetryThreads(count, graceful, deadline, tier);
}

absl::StatusOr<std::vector<int>> Engine::StopRetryThreadsById(const std::vector<int>& ids,
                                                              bool graceful, absl::Time deadline) {
  return impl_->StopRetryThreadsById(ids, graceful, deadline);
}

absl::StatusOr<SetOrderingResult> Engine::SetInOrder(bool in_order, bool drain_retries,
                                                     absl::Time deadline, Cancellation* cancel) {
  return impl_->SetInOrder(in_order, drain_retries, deadline, cancel);
}

absl::StatusOr<SetOrderingResult> Engine::SetOrderingMode(Ordering ordering, bool drain_retries,
                                                          absl::Time deadline,
                                                          Cancellation* cancel) {
  return impl_->SetOrderingMode(ordering, drain_retries, deadline, cancel);
}

Ordering Engine::ordering() const { return impl_->ordering(); }

bool Engine::in_order() const { return impl_->in_order(); }

ParkedKeysSummary Engine::ParkedKeys() const { return impl_->ParkedKeys(); }

InFlightList Engine::ListInFlight(size_t limit, absl::Time deadline, Cancellation* cancel) const {
  return impl_->ListInFlight(limit, deadline, cancel);
}

absl::StatusOr<int> Engine::DeadLetterRecord(const RecordCoordinates& record, absl::Time deadline,
                                             Cancellation* cancel) {
  return impl_->DeadLetterRecord(record, deadline, cancel);
}

EngineState Engine::state() const { return impl_->state(); }

const EngineOptions& Engine::options() const { return impl_->options(); }

absl::Status Engine::ProbeKafka(absl::Duration timeout) const { return impl_->ProbeKafka(timeout); }

absl::StatusOr<int64_t> Engine::MeasureRetryBacklog(absl::Duration timeout) {
  return impl_->MeasureRetryBacklog(timeout);
}

absl::StatusOr<std::vector<int64_t>> Engine::MeasureTierBacklogs(absl::Duration timeout) {
  return impl_->MeasureTierBacklogs(timeout);
}

std::vector<int64_t> Engine::TierBacklogs(
    const std::vector<std::shared_ptr<const ThreadStats>>& running) const {
  return impl_->TierBacklogs(running);
}

std::vector<PartitionBacklog> Engine::PartitionBacklogs() const {
  return impl_->PartitionBacklogs();
}

std::vector<std::shared_ptr<const ThreadStats>> Engine::Threads() const { return impl_->Threads(); }

std::vector<std::shared_ptr<const ThreadStats>> Engine::RecentlyStopped(
    absl::Duration window) const {
  return impl_->RecentlyStopped(window);
}

EngineTotals Engine::Totals() const { return impl_->Totals(); }

absl::Status Engine::ThreadFailure() const { return impl_->ThreadFailure(); }

absl::Status Engine::Liveness() const { return impl_->Liveness(); }

absl::Status Engine::Readiness() const { return impl_->Readiness(); }

int64_t Engine::producer_replacements() const { return impl_->producer_replacements(); }

absl::Status Engine::RaiseProducerFatalErrorForTest() const {
  return impl_->RaiseProducerFatalErrorForTest();
}

int64_t Engine::RetryBacklog(const std::vector<std::shared_ptr<const ThreadStats>>& running) const {
  return impl_->RetryBacklog(running);
}

std::vector<ScalingEvent> Engine::ScalingEvents() const { return impl_->ScalingEvents(); }

}  // namespace retryd::engine
