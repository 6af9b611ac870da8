// Key order on one thread: a lane per key with a record in progress here (in
// a processor call, deferred, or held until due). The records of the key read
// after it wait in its lane, in the order read, until it is done; then the
// next one goes on. Records of other keys never wait for it.
//
// Which keys are parked in the retry topic is KeyParking's (the engine's,
// shared by every thread); the lanes are one thread's own.
//
// Thread-safety: none; confined to the worker's thread.
#ifndef RETRYD_SERVER_ENGINE_ORDERING_KEY_LANES_H_
#define RETRYD_SERVER_ENGINE_ORDERING_KEY_LANES_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "server/engine/held/held_record.h"
#include "server/engine/held/in_flight.h"
#include "server/engine/ordering/key_parking.h"
#include "server/model/record.h"

namespace retryd::engine {

class KeyLanes {
 public:
  // If a record of `held`'s key is in progress here, queues `held` in its
  // lane (true, `held` taken); otherwise false.
  bool QueueBehind(const PartitionKey& key, HeldRecord& held);
  // A record of `key`, read from `source`, is in progress from now on.
  // False if one already was.
  bool Open(PartitionKey key, const TopicPartition& source);
  // `held`, its key's record in progress (held.laned), is done here: the
  // next record of its lane may go on (DrainReady), or the lane closes.
  void End(const HeldRecord& held);

  // Whether a lane's record in progress ended while records wait in it.
  bool any_ready() const { return !ready_.empty(); }
  // Goes through the lanes whose record in progress ended while `go_on()`:
  // hands each lane's next record to `next(key, record)`, which returns true
  // when the record became its key's record in progress (the lane waits for
  // it again) and false when it went elsewhere (then the lane's next one
  // goes). A lane left empty closes. Returns whether it handed any on.
  bool DrainReady(const std::function<bool()>& go_on,
                  const std::function<bool(const PartitionKey&, HeldRecord)>& next);

  // Removes the waiting record `record` names, if a lane holds it; the lane
  // goes on without it.
  std::optional<HeldRecord> Take(const RecordCoordinates& record);
  void ForEachWaiting(const std::function<void(const HeldRecord&)>& fn) const;
  // Records waiting in lanes, read from `tp`; in all.
  int64_t WaitingFrom(const TopicPartition& tp) const;
  int64_t waiting() const;
  // The lanes of keys read from `partitions` go, with what waits in them:
  // the next owner reads those records again.
  void Drop(const std::vector<TopicPartition>& partitions);

 private:
  struct Lane {
    TopicPartition source;
    std::deque<HeldRecord> waiting;
  };
  void Uncount(const TopicPartition& tp);

  std::map<PartitionKey, Lane> lanes_;
  // Lanes whose record in progress ended while records wait in them.
  std::set<PartitionKey> ready_;
  // Records waiting in lanes_, per partition they were read from.
  std::map<TopicPartition, int64_t> waiting_from_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_ORDERING_KEY_LANES_H_
