// Holds records read from the retry topic until they come due.
//
// A retry thread reads ahead of the due times so it never blocks a partition
// on one record's delay; this is where those records wait. The caller keeps
// the look-ahead bounded by pausing a partition once CountFor() reaches its
// limit, and drops a partition's records when it is revoked.
//
// Per-partition FIFO (a fixed-delay retry tier): a record never comes out
// before one added earlier from its partition. Its place is its due time
// raised to theirs, the due time it keeps (held.due_ms) unchanged; records
// of a tier come due in the order they were written, so this changes a
// place only when two writers' clocks or hand-offs cross.
//
// Thread-safety: NOT thread-safe. Owned and used by one retry worker thread.
#ifndef RETRYD_SERVER_ENGINE_WORKER_DUE_SCHEDULER_H_
#define RETRYD_SERVER_ENGINE_WORKER_DUE_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/engine/held/held_record.h"
#include "server/model/record.h"

namespace retryd::engine {

class DueScheduler {
 public:
  // `fifo_per_partition`: see the class comment.
  explicit DueScheduler(bool fifo_per_partition = false)
      : fifo_per_partition_(fifo_per_partition) {}
  DueScheduler(const DueScheduler&) = delete;
  DueScheduler& operator=(const DueScheduler&) = delete;

  void Add(HeldRecord r);

  // The earliest due time held, or nullopt when empty.
  std::optional<int64_t> NextDueMs() const;

  // Removes and returns up to `max` records with due_ms <= now_ms, earliest
  // first. Records with equal due times come out in the order they were
  // added, so one partition's records keep their order.
  std::vector<HeldRecord> PopDue(int64_t now_ms, size_t max);

  size_t size() const { return heap_.size(); }

  // Records held whose `source` is `tp`.
  size_t CountFor(const TopicPartition& tp) const;

  // The latest due time among the records added from `tp` since it last
  // held none (those taken out since included), or nullopt when it holds
  // none: in FIFO, no record of `tp` comes out before it.
  std::optional<int64_t> LastDueFor(const TopicPartition& tp) const;

  // Removes every record whose `source` is `tp` and returns them, earliest
  // due first (FIFO among equal due times). O(n log n).
  std::vector<HeldRecord> TakePartition(const TopicPartition& tp);

  // Removes every record whose `source` is `tp`; returns how many.
  size_t DropPartition(const TopicPartition& tp);

  // Removes and returns the first held record for which `pred` is true.
  template <typename Pred>
  std::optional<HeldRecord> TakeFirst(Pred pred) {
    for (size_t i = 0; i < heap_.size(); ++i) {
      if (pred(static_cast<const HeldRecord&>(heap_[i].held))) return TakeAt(i);
    }
    return std::nullopt;
  }

  // Calls `f` on every held record, in no particular order.
  template <typename F>
  void ForEach(F f) const {
    for (const Entry& e : heap_) f(e.held);
  }

 private:
  struct Entry {
    int64_t due_ms;  // Its place: held.due_ms, in FIFO raised (see the class comment).
    uint64_t seq;    // Insertion order; breaks ties so equal due times are FIFO.
    HeldRecord held;
  };
  // Orders std::*_heap so the front is the earliest (due_ms, seq).
  static bool Later(const Entry& a, const Entry& b);
  // Removes the entry at heap_[i]; O(n).
  HeldRecord TakeAt(size_t i);

  struct PerPartition {
    size_t count = 0;
    int64_t last_due_ms = 0;  // See LastDueFor().
  };
  // Its entry in counts_ loses a record; erased when it holds none.
  void Taken(const TopicPartition& tp);

  const bool fifo_per_partition_;
  std::vector<Entry> heap_;  // A binary min-heap under Later().
  uint64_t next_seq_ = 0;
  // Per source partition; partitions with no entry are erased.
  absl::flat_hash_map<TopicPartition, PerPartition> counts_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_WORKER_DUE_SCHEDULER_H_
