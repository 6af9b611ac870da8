#include "server/engine/worker/calls.h"

#include <algorithm>

namespace retryd::engine {

Calls::Calls(Processor& processor, std::shared_ptr<WorkerMailbox> mailbox, int max_calls)
    : processor_(processor), mailbox_(std::move(mailbox)), max_calls_(max_calls) {}

int Calls::For(const TopicPartition& tp) const {
  auto it = calling_.find(tp);
  return it == calling_.end() ? 0 : it->second;
}

bool Calls::InFlight(const std::vector<TopicPartition>* tps) const {
  if (tps == nullptr) return !calls_.empty();
  return std::any_of(tps->begin(), tps->end(),
                     [this](const TopicPartition& tp) { return calling_.contains(tp); });
}

void Calls::UpdateGauge() {
  mailbox_->calls_in_flight.store(static_cast<int64_t>(calls_.size()), std::memory_order_relaxed);
}

void Calls::Start(HeldRecord held, std::shared_ptr<CompletionTracker> tracker, absl::Time now,
                  bool probe) {
  const int64_t id = next_id_++;
  Call& call = calls_[id];
  call.tracker = std::move(tracker);
  call.cancel = std::make_shared<Cancellation>();
  call.started = now;
  call.probe = probe;
  call.held = std::move(held);
  ++calling_[call.held.source];
  UpdateGauge();
  std::shared_ptr<WorkerMailbox> mailbox = mailbox_;
  processor_.Start(call.held.record, {call.held.attempt, call.held.first_failure_ms}, call.cancel,
                   [mailbox, id](Outcome outcome) {
                     absl::MutexLock lock(&mailbox->call_mu);
                     mailbox->finished_calls.emplace_back(id, std::move(outcome));
                     if (mailbox->wake != nullptr) mailbox->wake->Wake();
                   });
}

void Calls::TakeFinished(const std::function<void(Call, Outcome)>& ended) {
  std::vector<std::pair<int64_t, Outcome>> finished;
  {
    absl::MutexLock lock(&mailbox_->call_mu);
    finished.swap(mailbox_->finished_calls);
  }
  for (auto& [id, outcome] : finished) {
    auto it = calls_.find(id);
    if (it == calls_.end()) continue;
    Call call = std::move(it->second);
    calls_.erase(it);
    if (auto c = calling_.find(call.held.source); c != calling_.end() && --c->second <= 0) {
      calling_.erase(c);
    }
    ended(std::move(call), std::move(outcome));
  }
  UpdateGauge();
}

void Calls::AwaitFinished(absl::Time deadline) {
  WorkerMailbox* mailbox = mailbox_.get();
  auto finished = [mailbox]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mailbox->call_mu) {
    return !mailbox->finished_calls.empty();
  };
  absl::MutexLock lock(&mailbox_->call_mu);
  mailbox_->call_mu.AwaitWithDeadline(absl::Condition(&finished), deadline);
}

void Calls::Cancel(const std::vector<TopicPartition>* tps) {
  for (auto& [id, call] : calls_) {
    if (tps == nullptr || std::find(tps->begin(), tps->end(), call.held.source) != tps->end()) {
      call.cancel->Cancel();
    }
  }
}

void Calls::ForEach(const std::function<void(const Call&)>& fn) const {
  for (const auto& [id, call] : calls_) fn(call);
}

void Calls::ForEachMutable(const std::function<void(Call&)>& fn) {
  for (auto& [id, call] : calls_) fn(call);
}

}  // namespace retryd::engine
