// A primary's records that wait for their partition, in offset order: in
// in-order mode behind the record of the partition that is held (retried in
// place, in a call, or with a failed hand-off); in any mode behind those
// already waiting for a call slot, or while the parked keys of the partition
// are not known yet. And, in in-order mode, the record retried in place per
// partition, whose state rides along with every commit
// (ordering/in_place_retry.h), with what the committed metadata said at
// assignment.
//
// Thread-safety: none; confined to the worker's thread.
#ifndef RETRYD_SERVER_ENGINE_ORDERING_IN_ORDER_QUEUE_H_
#define RETRYD_SERVER_ENGINE_ORDERING_IN_ORDER_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/time/time.h"
#include "server/engine/held/byte_charge.h"
#include "server/engine/held/held_record.h"
#include "server/engine/held/in_flight.h"
#include "server/engine/ordering/in_place_retry.h"
#include "server/model/record.h"

namespace retryd::engine {

class InOrderQueue {
 public:
  // A record waiting behind others of its partition, with when it was read
  // (Unix ms) and its bytes' charge.
  struct Waiting {
    Record record;
    int64_t read_ms = 0;
    ByteCharge charge;
  };

  bool HasWaiting(const TopicPartition& tp) const { return waiting_.contains(tp); }
  void Wait(const TopicPartition& tp, Waiting waiting);
  // Records waiting, of `tp`; in all.
  int64_t WaitingFor(const TopicPartition& tp) const;
  int64_t waiting() const;
  // Whether any partition has records waiting.
  bool empty() const { return waiting_.empty(); }
  std::vector<TopicPartition> Partitions() const;

  // What held `tp`'s records back is gone: they may go on (DrainReady). No
  // effect on a partition with none waiting.
  void MarkReady(const TopicPartition& tp);
  // Goes through the ready partitions until `deadline`: while
  // `may_take(tp)`, hands its next record to `start`. A partition stays
  // ready only if `deadline` or `may_take` cut its queue short and
  // `done_with(tp)` is false (its call's end, or its held record's, brings
  // it back otherwise). Returns whether it handed any on.
  bool DrainReady(absl::Time deadline, const std::function<bool(const TopicPartition&)>& may_take,
                  const std::function<bool(const TopicPartition&)>& done_with,
                  const std::function<void(HeldRecord)>& start);

  // Removes the waiting record `record` names (by where it was read).
  std::optional<HeldRecord> Take(const RecordCoordinates& record);
  void ForEachWaiting(const std::function<void(const TopicPartition&, const Waiting&)>& fn) const;

  // The record retried in place on `tp` from now on (until EndInPlace).
  void HoldInPlace(const TopicPartition& tp, const InPlaceRetry& state);
  void EndInPlace(const TopicPartition& tp);
  // Ends it only if it is the record at `offset`.
  void EndInPlaceAt(const TopicPartition& tp, int64_t offset);
  // The record retried in place on `tp` if it is at `offset`, else null.
  const InPlaceRetry* InPlaceAt(const TopicPartition& tp, int64_t offset) const;

  // At assignment: the committed metadata of `tp` described a record retried
  // in place.
  void Restored(const TopicPartition& tp, const InPlaceRetry& state);
  // The first record read after the assignment, `held`: if it is the one the
  // metadata described, takes its attempt, first failure and due time from
  // there (true). Either way the restored state is used up.
  bool Restore(HeldRecord& held);

  // Forgets everything of `tp` (a revoke).
  void Drop(const TopicPartition& tp);

 private:
  std::map<TopicPartition, std::deque<Waiting>> waiting_;
  // Partitions whose held record completed while records wait behind it.
  std::set<TopicPartition> ready_;
  std::map<TopicPartition, InPlaceRetry> in_place_;
  std::map<TopicPartition, InPlaceRetry> restored_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_ORDERING_IN_ORDER_QUEUE_H_
