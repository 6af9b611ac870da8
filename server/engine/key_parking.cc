#include "server/engine/key_parking.h"

#include <algorithm>

namespace retryd {

void KeyParking::Park(const PartitionKey& key, int64_t offset, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = keys_.try_emplace(key);
  if (inserted) it->second.since = now;
  if (it->second.offsets.insert(offset).second) ++records_;
}

bool KeyParking::FollowIfParked(const PartitionKey& key, int64_t offset) {
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return false;
  if (it->second.offsets.insert(offset).second) ++records_;
  return true;
}

void KeyParking::Release(const PartitionKey& key, int64_t offset) {
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  if (it->second.offsets.erase(offset) > 0) --records_;
  if (it->second.offsets.empty()) keys_.erase(it);
}

void KeyParking::Rebuild(const std::vector<ParkedRecord>& records) {
  absl::MutexLock lock(&mu_);
  keys_.clear();
  records_ = 0;
  for (const ParkedRecord& r : records) {
    auto [it, inserted] = keys_.try_emplace(r.key);
    if (inserted || r.since < it->second.since) it->second.since = r.since;
    if (it->second.offsets.insert(r.offset).second) ++records_;
  }
}

void KeyParking::Clear() { Rebuild({}); }

bool KeyParking::parked(const PartitionKey& key) const {
  absl::MutexLock lock(&mu_);
  return keys_.contains(key);
}

KeyParking::Summary KeyParking::summary() const {
  absl::MutexLock lock(&mu_);
  Summary s;
  s.keys = static_cast<int64_t>(keys_.size());
  s.records = records_;
  for (const auto& [key, entry] : keys_) s.oldest = std::min(s.oldest, entry.since);
  return s;
}

}  // namespace retryd
