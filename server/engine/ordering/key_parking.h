// The keys parked in key order (Ordering::kKey): a key is parked while one
// of its records is in the retry topic, not yet complete. A primary thread
// that reads a later record of a parked key does not process it: the record
// follows the earlier ones through the retry topic (parked behind them), so
// the key's records complete in input order. A key is released when the
// last of its parked records is complete (processed, or dead-lettered) and
// that outcome acknowledged by Kafka.
//
// Keys are scoped to their input partition: the order kept is the order of
// one partition, the only order Kafka defines.
//
// Shared by every thread of one engine. The retry topic is the durable
// record of what is parked: a primary thread derives the parked keys of the
// partitions it is assigned from it (Replace), and the engine all of them
// when key order is switched on (Rebuild). A retry thread of this process
// releases a record when its outcome is acknowledged (Release); one of
// another process (several share the groups) is seen through the retry
// group's committed offsets, which pass a keyed retry record only once it
// is complete (ReleaseCommitted).
//
// Thread-safe: every method takes the one internal mutex, briefly, and
// never blocks while holding it.
#ifndef RETRYD_SERVER_ENGINE_ORDERING_KEY_PARKING_H_
#define RETRYD_SERVER_ENGINE_ORDERING_KEY_PARKING_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/api/parked_keys.h"
#include "server/model/record.h"

namespace retryd::engine {

// A key within its input partition.
struct PartitionKey {
  TopicPartition tp;
  std::string key;
  friend bool operator<(const PartitionKey& a, const PartitionKey& b) {
    return std::tie(a.tp, a.key) < std::tie(b.tp, b.key);
  }
  friend bool operator==(const PartitionKey& a, const PartitionKey& b) {
    return a.tp == b.tp && a.key == b.key;
  }
};

// The key of `record` (which has one) within its input partition.
inline PartitionKey KeyOf(const Record& record) {
  return {{record.topic, record.partition}, *record.key};
}

// One record of the retry topic that parks its key.
struct ParkedRecord {
  PartitionKey key;
  int64_t offset = 0;  // Its input offset.
  absl::Time since;    // When it failed first (or followed), as far as known.
  // Where it is in the retry topic; -1 until Kafka has acknowledged it.
  int32_t retry_partition = -1;
  int64_t retry_offset = -1;
};

class KeyParking {
 public:
  using Summary = ParkedKeysSummary;

  KeyParking() = default;
  KeyParking(const KeyParking&) = delete;
  KeyParking& operator=(const KeyParking&) = delete;

  // A record of `key` is sent to the retry topic (it failed): parks the key.
  void Park(const PartitionKey& key, int64_t offset, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // If `key` is parked, adds the record at `offset` to it and returns true:
  // the caller sends it to the retry topic unprocessed. Otherwise false.
  // One step, so a release cannot slip in between the check and the park.
  bool FollowIfParked(const PartitionKey& key, int64_t offset) ABSL_LOCKS_EXCLUDED(mu_);
  // The parked record at `offset` is complete, its outcome acknowledged.
  // Releases the key with its last parked record. Unknown records are
  // ignored (a record processed again after a restart).
  void Release(const PartitionKey& key, int64_t offset) ABSL_LOCKS_EXCLUDED(mu_);
  // Kafka acknowledged the parked record at `offset` at this place in the
  // retry topic.
  void Placed(const PartitionKey& key, int64_t offset, int32_t retry_partition,
              int64_t retry_offset) ABSL_LOCKS_EXCLUDED(mu_);
  // Releases every parked record whose place in the retry topic lies below
  // the retry group's committed offset of its partition (`committed`, by
  // partition; -1: none). Returns how many it released.
  int64_t ReleaseCommitted(const std::map<int32_t, int64_t>& committed) ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces everything with `records` (derived from the retry topic).
  void Rebuild(const std::vector<ParkedRecord>& records) ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces what is known of the input partitions `tps` with those of
  // `records` that belong to them.
  void Replace(const std::vector<TopicPartition>& tps, const std::vector<ParkedRecord>& records)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

  Summary summary() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Place {
    int32_t partition = -1;
    int64_t offset = -1;
  };
  struct Entry {
    std::map<int64_t, Place> records;  // Parked records by input offset.
    absl::Time since;
  };
  // Adds `r` to its key's entry.
  void AddLocked(const ParkedRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;  // Guards the fields below.
  std::map<PartitionKey, Entry> keys_ ABSL_GUARDED_BY(mu_);
  int64_t records_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_ORDERING_KEY_PARKING_H_
