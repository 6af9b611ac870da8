// Worker: key order (OrderingMode::kKey). A key's records go one at a time:
// the record in progress opens its key's lane and the records of its key
// read meanwhile wait behind it (ordering/key_lanes.h); a primary's record
// whose key is parked in the retry topic follows it there
// (ordering/key_parking.h). At an assignment a primary learns the keys
// parked in the retry topic before its records go on, and it looks now and
// then for keys another process released.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/worker/worker.h"

namespace retryd::engine {
namespace {

// Key order: how long a primary may wait, at an assignment, to learn the
// keys parked in the retry topic, and how often it tries again after a
// failure; how often it looks for keys released by another process.
constexpr absl::Duration kLearnTimeout = absl::Seconds(10);
constexpr absl::Duration kLearnRetry = absl::Seconds(1);
constexpr absl::Duration kSweepInterval = absl::Seconds(2);
constexpr absl::Duration kSweepTimeout = absl::Milliseconds(500);

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

bool Worker::TakenByItsKey(HeldRecord& held) {
  if (!KeyOrder() || !held.record.key.has_value()) return false;
  PartitionKey key = KeyOf(held.record);
  if (lanes_.QueueBehind(key, held)) return true;
  if (role_ == ThreadRole::kPrimary && context_.parking->FollowIfParked(key, held.record.offset)) {
    Follow(std::move(held));
    return true;
  }
  lanes_.Open(std::move(key), held.source);
  held.laned = true;
  return false;
}

void Worker::Follow(HeldRecord held) {
  // Not yet attempted: the retry thread makes its first attempt, after the
  // records of its key before it.
  held.due_ms = NowMs();
  held.last_error = "follows an earlier record of its key (key order)";
  const ParkedRecord parks{KeyOf(held.record), held.record.offset, absl::Now()};
  HandOff h = ToRetryTopic(std::move(held), HandOffKind::kFollow);
  h.parks = parks;
  Emit(std::move(h));
}

void Worker::EndOfLane(const HeldRecord& held) { lanes_.End(held); }

bool Worker::DrainLanes(absl::Time deadline) {
  return lanes_.DrainReady([this, deadline] { return !AtCallLimit() && absl::Now() < deadline; },
                           [this](const PartitionKey& key, HeldRecord next) {
                             // Its next record is the key's record in progress, unless (a
                             // primary's) its key was parked meanwhile: then it and all behind
                             // it follow.
                             if (role_ == ThreadRole::kPrimary &&
                                 context_.parking->FollowIfParked(key, next.record.offset)) {
                               Follow(std::move(next));
                               return false;
                             }
                             next.laned = true;
                             const int64_t now = NowMs();
                             if (role_ == ThreadRole::kRetry) ClampDue(next, now);
                             if (next.due_ms <= now) {
                               Attempt(std::move(next));
                             } else {
                               scheduler_.Add(std::move(next));
                             }
                             return true;
                           });
}

void Worker::LearnParkedKeys() {
  const std::vector<TopicPartition> unknown = partitions_.KeysUnknown();
  absl::StatusOr<std::vector<ParkedRecord>> parked = context_.read_parked(kLearnTimeout);
  if (!parked.ok()) {
    next_learn_ = absl::Now() + kLearnRetry;
    if (int64_t held_back = 0; learn_log_.Allow(absl::Now(), &held_back)) {
      LogWarning("thread ", id_, ": key order: the parked keys of ", unknown.size(),
                 " partitions are not known (", parked.status().message(), "); their records wait",
                 LogThrottle::HeldBackNote(held_back));
    }
    return;
  }
  context_.parking->Replace(unknown, *parked);
  partitions_.ClearKeysUnknown();
  // Records that arrived meanwhile wait in queue_: they go on now.
  for (const TopicPartition& tp : unknown) queue_.MarkReady(tp);
  LogInfo("thread ", id_, ": key order: learned the parked keys of ", unknown.size(),
          " partitions (", context_.parking->summary().keys, " keys parked in all)");
}

void Worker::AdoptLanes() {
  // A call in flight is its key's record in progress.
  calls_.ForEachMutable([this](Calls::Call& call) {
    HeldRecord& held = call.held;
    if (!held.record.key.has_value() || held.laned) return;
    if (lanes_.Open(KeyOf(held.record), held.source)) held.laned = true;
  });
  std::vector<HeldRecord> held;
  for (const TopicPartition& tp : partitions_.Assigned()) {
    for (HeldRecord& h : scheduler_.TakePartition(tp)) held.push_back(std::move(h));
  }
  std::stable_sort(held.begin(), held.end(), [](const HeldRecord& a, const HeldRecord& b) {
    return a.record.offset < b.record.offset;
  });
  for (HeldRecord& h : held) {
    if (h.laned || !TakenByItsKey(h)) scheduler_.Add(std::move(h));
  }
}

void Worker::SweepParkedKeys() {
  next_sweep_ = absl::Now() + kSweepInterval;
  absl::StatusOr<std::map<int32_t, int64_t>> committed = context_.retry_committed(kSweepTimeout);
  // Not reached: the keys stay parked a little longer, which orders no
  // record wrongly.
  if (!committed.ok()) return;
  context_.parking->ReleaseCommitted(*committed);
}

}  // namespace retryd::engine
