#include "server/engine/handoff/completion_tracker.h"

#include <algorithm>

namespace retryd::engine {

bool CompletionTracker::Begin(int64_t offset) {
  absl::MutexLock lock(&mu_);
  if (offset < 0 || offset <= last_begun_) return false;
  entries_.push_back(Entry{offset, false});
  last_begun_ = offset;
  ++pending_;
  return true;
}

bool CompletionTracker::Complete(int64_t offset) {
  absl::MutexLock lock(&mu_);
  auto it = std::lower_bound(entries_.begin(), entries_.end(), offset,
                             [](const Entry& e, int64_t o) { return e.offset < o; });
  if (it == entries_.end() || it->offset != offset || it->done) return false;
  it->done = true;
  --pending_;
  while (!entries_.empty() && entries_.front().done) entries_.pop_front();
  return true;
}

int64_t CompletionTracker::CommitOffset() const {
  absl::ReaderMutexLock lock(&mu_);
  if (!entries_.empty()) return entries_.front().offset;
  return last_begun_ < 0 ? -1 : last_begun_ + 1;
}

std::vector<std::pair<int64_t, int64_t>> CompletionTracker::DoneAbove(size_t max_ranges) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool in_range = false;
  for (const Entry& e : entries_) {
    if (!e.done) {
      in_range = false;
      continue;
    }
    if (in_range) {
      ranges.back().second = e.offset;
      continue;
    }
    if (ranges.size() == max_ranges) break;
    ranges.emplace_back(e.offset, e.offset);
    in_range = true;
  }
  return ranges;
}

int64_t CompletionTracker::pending() const {
  absl::ReaderMutexLock lock(&mu_);
  return pending_;
}

bool CompletionTracker::DrainedLocked() const { return pending_ == 0; }

bool CompletionTracker::AwaitDrained(absl::Time deadline) const {
  absl::ReaderMutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(this, &CompletionTracker::DrainedLocked), deadline);
}

bool CompletionTracker::AwaitPendingAtMost(int64_t n, absl::Time deadline) const {
  absl::ReaderMutexLock lock(&mu_);
  auto at_most = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pending_ <= n; };
  return mu_.AwaitWithDeadline(absl::Condition(&at_most), deadline);
}

void CompletionTracker::Abandon() {
  absl::MutexLock lock(&mu_);
  abandoned_ = true;
}

bool CompletionTracker::abandoned() const {
  absl::ReaderMutexLock lock(&mu_);
  return abandoned_;
}

}  // namespace retryd::engine
