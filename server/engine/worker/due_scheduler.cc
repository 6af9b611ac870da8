#include "server/engine/worker/due_scheduler.h"

#include <algorithm>
#include <utility>

namespace retryd::engine {

bool DueScheduler::Later(const Entry& a, const Entry& b) {
  if (a.due_ms != b.due_ms) return a.due_ms > b.due_ms;
  return a.seq > b.seq;
}

void DueScheduler::Add(HeldRecord r) {
  PerPartition& p = counts_[r.source];
  p.last_due_ms = p.count == 0 ? r.due_ms : std::max(p.last_due_ms, r.due_ms);
  ++p.count;
  const int64_t due_ms = fifo_per_partition_ ? p.last_due_ms : r.due_ms;
  heap_.push_back(Entry{due_ms, next_seq_++, std::move(r)});
  std::push_heap(heap_.begin(), heap_.end(), &DueScheduler::Later);
}

std::optional<int64_t> DueScheduler::NextDueMs() const {
  if (heap_.empty()) return std::nullopt;
  return heap_.front().due_ms;
}

std::vector<HeldRecord> DueScheduler::PopDue(int64_t now_ms, size_t max) {
  std::vector<HeldRecord> due;
  while (due.size() < max && !heap_.empty() && heap_.front().due_ms <= now_ms) {
    std::pop_heap(heap_.begin(), heap_.end(), &DueScheduler::Later);
    HeldRecord held = std::move(heap_.back().held);
    heap_.pop_back();
    Taken(held.source);
    due.push_back(std::move(held));
  }
  return due;
}

size_t DueScheduler::CountFor(const TopicPartition& tp) const {
  auto it = counts_.find(tp);
  return it == counts_.end() ? 0 : it->second.count;
}

std::optional<int64_t> DueScheduler::LastDueFor(const TopicPartition& tp) const {
  auto it = counts_.find(tp);
  if (it == counts_.end()) return std::nullopt;
  return it->second.last_due_ms;
}

void DueScheduler::Taken(const TopicPartition& tp) {
  auto it = counts_.find(tp);
  if (--it->second.count == 0) counts_.erase(it);
}

std::vector<HeldRecord> DueScheduler::TakePartition(const TopicPartition& tp) {
  std::vector<HeldRecord> taken;
  auto it = counts_.find(tp);
  if (it == counts_.end()) return taken;
  counts_.erase(it);
  auto mine = std::partition(heap_.begin(), heap_.end(),
                             [&tp](const Entry& e) { return !(e.held.source == tp); });
  // Earliest first, as PopDue would hand them out.
  std::sort(mine, heap_.end(), [](const Entry& a, const Entry& b) { return Later(b, a); });
  for (auto e = mine; e != heap_.end(); ++e) taken.push_back(std::move(e->held));
  heap_.erase(mine, heap_.end());
  // (due_ms, seq) keys are unchanged, so FIFO among equal due times survives
  // the rebuild.
  std::make_heap(heap_.begin(), heap_.end(), &DueScheduler::Later);
  return taken;
}

HeldRecord DueScheduler::TakeAt(size_t i) {
  HeldRecord held = std::move(heap_[i].held);
  heap_.erase(heap_.begin() + static_cast<ptrdiff_t>(i));
  std::make_heap(heap_.begin(), heap_.end(), &DueScheduler::Later);
  Taken(held.source);
  return held;
}

size_t DueScheduler::DropPartition(const TopicPartition& tp) { return TakePartition(tp).size(); }

}  // namespace retryd::engine
