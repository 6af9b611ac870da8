#include "server/engine/ordering/in_order_queue.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace retryd::engine {

void InOrderQueue::Wait(const TopicPartition& tp, Waiting waiting) {
  waiting_[tp].push_back(std::move(waiting));
}

int64_t InOrderQueue::WaitingFor(const TopicPartition& tp) const {
  auto it = waiting_.find(tp);
  return it == waiting_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

int64_t InOrderQueue::waiting() const {
  int64_t n = 0;
  for (const auto& [tp, queue] : waiting_) n += static_cast<int64_t>(queue.size());
  return n;
}

std::vector<TopicPartition> InOrderQueue::Partitions() const {
  std::vector<TopicPartition> all;
  for (const auto& [tp, queue] : waiting_) all.push_back(tp);
  return all;
}

void InOrderQueue::MarkReady(const TopicPartition& tp) {
  if (waiting_.contains(tp)) ready_.insert(tp);
}

bool InOrderQueue::DrainReady(absl::Time deadline,
                              const std::function<bool(const TopicPartition&)>& may_take,
                              const std::function<bool(const TopicPartition&)>& done_with,
                              const std::function<void(HeldRecord)>& start) {
  bool progressed = false;
  for (auto tp_it = ready_.begin(); tp_it != ready_.end() && absl::Now() < deadline;) {
    const TopicPartition& tp = *tp_it;
    auto it = waiting_.find(tp);
    while (it != waiting_.end() && !it->second.empty() && may_take(tp) && absl::Now() < deadline) {
      std::deque<Waiting>& queue = it->second;
      HeldRecord held = ReadFrom(tp, queue.front().record.offset, queue.front().read_ms,
                                 std::move(queue.front().charge));
      held.record = std::move(queue.front().record);
      queue.pop_front();
      start(std::move(held));
      progressed = true;
    }
    if (it != waiting_.end() && it->second.empty()) {
      waiting_.erase(it);
      it = waiting_.end();
    }
    if (it == waiting_.end() || done_with(tp)) {
      tp_it = ready_.erase(tp_it);
    } else {
      ++tp_it;
    }
  }
  return progressed;
}

std::optional<HeldRecord> InOrderQueue::Take(const RecordCoordinates& record) {
  // Waiting records were read from the input itself: their coordinates are
  // where they were read.
  auto it = waiting_.find(TopicPartition{record.topic, record.partition});
  if (it == waiting_.end()) return std::nullopt;
  std::deque<Waiting>& queue = it->second;
  auto at = std::find_if(queue.begin(), queue.end(),
                         [&record](const Waiting& w) { return record.Names(w.record); });
  if (at == queue.end()) return std::nullopt;
  HeldRecord held;
  held.source = it->first;
  held.source_offset = at->record.offset;
  held.read_ms = at->read_ms;
  held.record = std::move(at->record);
  queue.erase(at);
  if (queue.empty()) waiting_.erase(it);
  return held;
}

void InOrderQueue::ForEachWaiting(
    const std::function<void(const TopicPartition&, const Waiting&)>& fn) const {
  for (const auto& [tp, queue] : waiting_) {
    for (const Waiting& waiting : queue) fn(tp, waiting);
  }
}

void InOrderQueue::HoldInPlace(const TopicPartition& tp, const InPlaceRetry& state) {
  in_place_[tp] = state;
}

void InOrderQueue::EndInPlace(const TopicPartition& tp) { in_place_.erase(tp); }

void InOrderQueue::EndInPlaceAt(const TopicPartition& tp, int64_t offset) {
  if (auto it = in_place_.find(tp); it != in_place_.end() && it->second.offset == offset) {
    in_place_.erase(it);
  }
}

const InPlaceRetry* InOrderQueue::InPlaceAt(const TopicPartition& tp, int64_t offset) const {
  auto it = in_place_.find(tp);
  return it != in_place_.end() && it->second.offset == offset ? &it->second : nullptr;
}

void InOrderQueue::Restored(const TopicPartition& tp, const InPlaceRetry& state) {
  restored_[tp] = state;
}

bool InOrderQueue::Restore(HeldRecord& held) {
  auto it = restored_.find(held.source);
  if (it == restored_.end()) return false;
  // Only the first record read after the assignment can be the one the
  // metadata describes.
  const InPlaceRetry state = it->second;
  restored_.erase(it);
  if (state.offset != held.source_offset) return false;
  held.attempt = state.attempt;
  held.first_failure_ms = state.first_failure_ms;
  held.due_ms = state.due_ms;
  return true;
}

void InOrderQueue::Drop(const TopicPartition& tp) {
  waiting_.erase(tp);
  ready_.erase(tp);
  in_place_.erase(tp);
  restored_.erase(tp);
}

}  // namespace retryd::engine
