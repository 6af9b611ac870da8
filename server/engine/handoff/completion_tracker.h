// Tracks the records of ONE partition from consumption until each has a
// durable outcome, and yields the offset that is safe to commit.
//
// Records finish out of order (a produce to the retry topic may be
// acknowledged before one to the output topic that was sent earlier), but a
// Kafka commit says "everything below this offset is done". The commit offset
// is therefore the lowest begun offset not yet complete, or, when nothing is
// pending, the last begun offset + 1.
//
// Thread-safety: thread-safe. The owning worker thread calls Begin() and
// CommitOffset(); Complete() is called from librdkafka delivery-report
// threads; any thread may call the other methods.
#ifndef RETRYD_SERVER_ENGINE_HANDOFF_COMPLETION_TRACKER_H_
#define RETRYD_SERVER_ENGINE_HANDOFF_COMPLETION_TRACKER_H_

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace retryd::engine {

class CompletionTracker {
 public:
  CompletionTracker() = default;
  CompletionTracker(const CompletionTracker&) = delete;
  CompletionTracker& operator=(const CompletionTracker&) = delete;

  // Starts tracking the record at `offset`. Offsets must strictly increase
  // from call to call (gaps are fine: compacted topics and transaction
  // markers leave them). Returns false, and changes nothing, for an offset
  // that is negative or not above every earlier one.
  bool Begin(int64_t offset);

  // Marks the record at `offset` durable. Returns false if `offset` was never
  // begun or is already complete.
  bool Complete(int64_t offset);

  // The offset to commit: the lowest incomplete offset, else the last begun
  // offset + 1; -1 before any Begin().
  int64_t CommitOffset() const;

  // The complete records above CommitOffset(), as ranges [first, last] of
  // offsets in increasing order, the lowest `max_ranges` of them. An offset
  // inside a range that was never begun holds no record (compaction,
  // transaction markers). The next owner of the partition need not process
  // them again (done_above.h).
  std::vector<std::pair<int64_t, int64_t>> DoneAbove(size_t max_ranges) const;

  // Records begun and not yet complete.
  int64_t pending() const;

  // Blocks until pending() == 0 or `deadline` passes. Returns true if
  // drained.
  bool AwaitDrained(absl::Time deadline) const;

  // Blocks until pending() <= n or `deadline` passes. Returns true if it
  // got there. For a caller that knows n of its pending records are held
  // back on purpose and waits only for the others.
  bool AwaitPendingAtMost(int64_t n, absl::Time deadline) const;

  // Marks the partition as revoked. Complete() keeps working (acks for
  // records already sent still arrive), but abandoned() tells callers to
  // skip follow-up work such as re-sending a record whose produce failed:
  // the partition's new owner will consume it again.
  void Abandon();
  bool abandoned() const;

 private:
  struct Entry {
    int64_t offset;
    bool done;
  };

  bool DrainedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Guards all the state below; Complete() runs on delivery-report threads
  // while the owning worker calls Begin() and CommitOffset().
  mutable absl::Mutex mu_;
  // Begun records in offset order. The front entry, if any, is never done:
  // Complete() pops done entries off the front, so the front is the commit
  // offset and the deque holds only the window of records in flight.
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Entries not done, kept apart because done entries may sit behind an
  // incomplete front.
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_begun_ ABSL_GUARDED_BY(mu_) = -1;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HANDOFF_COMPLETION_TRACKER_H_
