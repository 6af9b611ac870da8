// The state of each partition a worker is assigned: its completion tracker,
// the last commit sent, the ranges the previous owner completed above its
// commit, whether it is paused, whether (key order) its parked keys are known
// yet; and, through the InOrderQueue and KeyLanes it owns, the records that
// wait for it. Assign() creates a partition's entry, Revoke() erases every
// trace of it in one place.
//
// What a revoke must not drop stays with the worker: calls in flight and the
// trackers they hold (a call ends after its partition is revoked, and its
// outcome is then dropped through the abandoned tracker), and the records
// held until due (DueScheduler, dropped by the worker with its partition).
//
// Thread-safety: none; confined to the worker's thread.
#ifndef RETRYD_SERVER_ENGINE_WORKER_PARTITIONS_H_
#define RETRYD_SERVER_ENGINE_WORKER_PARTITIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "server/engine/handoff/completion_tracker.h"
#include "server/engine/ordering/in_order_queue.h"
#include "server/engine/ordering/key_lanes.h"
#include "server/kafka/consumer.h"
#include "server/model/record.h"

namespace retryd::engine {

class Partitions {
 public:
  Partitions() = default;
  Partitions(const Partitions&) = delete;  // found_ points into entries_.
  Partitions& operator=(const Partitions&) = delete;

  // Entries for `tps`, each with a new tracker and nothing committed yet.
  void Assign(const std::vector<TopicPartition>& tps);
  // What the group had committed for assigned partitions, read at
  // assignment: the ranges complete above each commit (not processed
  // again), and for a primary (`primary`) the record retried in place there
  // and the commit itself.
  void Restore(const kafka::CommitOffsets& committed, bool primary);
  // Abandons the trackers of `tps` and forgets everything of them. Returns
  // those that were paused (librdkafka keeps an application's pause across
  // unassign and assign: the caller resumes them).
  std::vector<TopicPartition> Revoke(const std::vector<TopicPartition>& tps);

  bool Has(const TopicPartition& tp) const { return Find(tp) != nullptr; }
  // `tp`'s tracker; null if it is not assigned.
  std::shared_ptr<CompletionTracker> Tracker(const TopicPartition& tp) const;
  std::vector<TopicPartition> Assigned() const;
  size_t size() const { return entries_.size(); }

  // Whether the previous owner completed `offset` (its outcome is durable):
  // skipped, not processed again. Offsets must come in increasing order.
  bool DoneBefore(const TopicPartition& tp, int64_t offset);

  // What to commit for `tps`: each one's commit offset, with the metadata
  // of a record retried in place there, else the ranges complete above it.
  kafka::CommitOffsets CommitPoints(const std::vector<TopicPartition>& tps) const;
  // The commit points of every partition that moved since the last commit
  // sent (the metadata must be sent with every commit, so a change of it
  // alone is one).
  kafka::CommitOffsets Moved() const;
  void NoteCommitted(const kafka::CommitOffsets& offsets);
  // Forgets a commit Kafka refused, unless a later one already went out.
  void OnCommitFailed(const kafka::CommitOffsets& offsets);
  // The last commit of each partition (-1: none known), where its reading
  // began as far as this thread knows.
  kafka::CommitOffsets LastCommitted() const;

  bool paused(const TopicPartition& tp) const;
  void NotePaused(const std::vector<TopicPartition>& tps, bool paused);
  bool any_paused() const { return paused_count_ > 0; }
  // Whether every partition is paused (and there is one).
  bool all_paused() const { return !entries_.empty() && paused_count_ == entries_.size(); }

  // Key order, a primary: partitions whose parked keys it does not know yet;
  // paused, their records wait.
  bool keys_unknown(const TopicPartition& tp) const;
  void SetKeysUnknown(const std::vector<TopicPartition>& tps);
  std::vector<TopicPartition> KeysUnknown() const;
  // KeysUnknown() is not empty; no copy.
  bool any_keys_unknown() const { return keys_unknown_count_ > 0; }
  void ClearKeysUnknown();

  InOrderQueue& queue() { return queue_; }
  KeyLanes& lanes() { return lanes_; }

 private:
  struct Entry {
    std::shared_ptr<CompletionTracker> tracker;
    kafka::PartitionOffset committed;  // The last commit sent.
    // Ranges of offsets above the committed one that the previous owner
    // completed, from the committed metadata at assignment; used up as
    // records are read.
    std::vector<std::pair<int64_t, int64_t>> done_before;
    bool paused = false;
    bool keys_unknown = false;
  };

  using Entries = std::map<TopicPartition, Entry>;

  // The entry of `tp`, null if it is not assigned. A record's partition is
  // looked up several times while it is handled, and records come in runs
  // of one partition: the last entry found is kept (`found_`) and checked
  // first, so a lookup costs one comparison however many partitions there
  // are. Valid until its entry is erased (Revoke), which clears it.
  Entry* Find(const TopicPartition& tp);
  const Entry* Find(const TopicPartition& tp) const {
    return const_cast<Partitions*>(this)->Find(tp);  // Changes only the cache.
  }
  void SetPaused(Entry& e, bool paused);
  void SetKeysUnknown(Entry& e, bool unknown);

  Entries entries_;
  Entries::iterator found_ = entries_.end();
  // How many entries are paused, how many have their keys unknown: asked
  // every loop, not counted there.
  size_t paused_count_ = 0;
  size_t keys_unknown_count_ = 0;
  InOrderQueue queue_;
  KeyLanes lanes_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_WORKER_PARTITIONS_H_
