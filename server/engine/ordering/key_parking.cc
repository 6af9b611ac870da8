#include "server/engine/ordering/key_parking.h"

#include <algorithm>

namespace retryd::engine {

void KeyParking::AddLocked(const ParkedRecord& r) {
  auto [it, inserted] = keys_.try_emplace(r.key);
  if (inserted || r.since < it->second.since) it->second.since = r.since;
  auto [record, added] = it->second.records.try_emplace(r.offset);
  if (added) ++records_;
  // Sent back to the retry topic, a record is there twice until its first
  // copy is committed past: the later place is where it is now.
  if (r.retry_offset >= 0 &&
      (record->second.partition != r.retry_partition || record->second.offset < r.retry_offset)) {
    record->second = {r.retry_partition, r.retry_offset};
  }
}

void KeyParking::Park(const PartitionKey& key, int64_t offset, absl::Time now) {
  absl::MutexLock lock(&mu_);
  AddLocked({key, offset, now});
}

bool KeyParking::FollowIfParked(const PartitionKey& key, int64_t offset) {
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return false;
  if (it->second.records.try_emplace(offset).second) ++records_;
  return true;
}

void KeyParking::Placed(const PartitionKey& key, int64_t offset, int32_t retry_partition,
                        int64_t retry_offset) {
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  // Released already (its outcome overtook this report): nothing to place.
  if (auto record = it->second.records.find(offset); record != it->second.records.end()) {
    record->second = {retry_partition, retry_offset};
  }
}

void KeyParking::Release(const PartitionKey& key, int64_t offset) {
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  if (it->second.records.erase(offset) > 0) --records_;
  if (it->second.records.empty()) keys_.erase(it);
}

int64_t KeyParking::ReleaseCommitted(const std::map<int32_t, int64_t>& committed) {
  absl::MutexLock lock(&mu_);
  int64_t released = 0;
  for (auto it = keys_.begin(); it != keys_.end();) {
    std::map<int64_t, Place>& records = it->second.records;
    for (auto r = records.begin(); r != records.end();) {
      auto c = committed.find(r->second.partition);
      if (r->second.offset >= 0 && c != committed.end() && c->second > r->second.offset) {
        r = records.erase(r);
        ++released;
      } else {
        ++r;
      }
    }
    it = records.empty() ? keys_.erase(it) : std::next(it);
  }
  records_ -= released;
  return released;
}

void KeyParking::Rebuild(const std::vector<ParkedRecord>& records) {
  absl::MutexLock lock(&mu_);
  keys_.clear();
  records_ = 0;
  for (const ParkedRecord& r : records) AddLocked(r);
}

void KeyParking::Replace(const std::vector<TopicPartition>& tps,
                         const std::vector<ParkedRecord>& records) {
  auto ours = [&tps](const TopicPartition& tp) {
    return std::find(tps.begin(), tps.end(), tp) != tps.end();
  };
  absl::MutexLock lock(&mu_);
  for (auto it = keys_.begin(); it != keys_.end();) {
    if (ours(it->first.tp)) {
      records_ -= static_cast<int64_t>(it->second.records.size());
      it = keys_.erase(it);
    } else {
      ++it;
    }
  }
  for (const ParkedRecord& r : records) {
    if (ours(r.key.tp)) AddLocked(r);
  }
}

void KeyParking::Clear() { Rebuild({}); }

KeyParking::Summary KeyParking::summary() const {
  absl::MutexLock lock(&mu_);
  Summary s;
  s.keys = static_cast<int64_t>(keys_.size());
  s.records = records_;
  for (const auto& [key, entry] : keys_) s.oldest = std::min(s.oldest, entry.since);
  return s;
}

}  // namespace retryd::engine
