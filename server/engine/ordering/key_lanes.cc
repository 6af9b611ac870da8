#include "server/engine/ordering/key_lanes.h"

#include <algorithm>
#include <utility>

namespace retryd::engine {

bool KeyLanes::QueueBehind(const PartitionKey& key, HeldRecord& held) {
  auto it = lanes_.find(key);
  if (it == lanes_.end()) return false;
  ++waiting_from_[held.source];
  it->second.waiting.push_back(std::move(held));
  return true;
}

bool KeyLanes::Open(PartitionKey key, const TopicPartition& source) {
  return lanes_.try_emplace(std::move(key), Lane{source, {}}).second;
}

void KeyLanes::End(const HeldRecord& held) {
  if (!held.laned) return;
  auto it = lanes_.find(KeyOf(held.record));
  if (it == lanes_.end()) return;
  if (it->second.waiting.empty()) {
    lanes_.erase(it);
  } else {
    ready_.insert(it->first);
  }
}

void KeyLanes::Uncount(const TopicPartition& tp) {
  if (auto it = waiting_from_.find(tp); it != waiting_from_.end() && --it->second <= 0) {
    waiting_from_.erase(it);
  }
}

bool KeyLanes::DrainReady(const std::function<bool()>& go_on,
                          const std::function<bool(const PartitionKey&, HeldRecord)>& next) {
  bool progressed = false;
  for (auto key_it = ready_.begin(); key_it != ready_.end() && go_on();) {
    auto lane = lanes_.find(*key_it);
    key_it = ready_.erase(key_it);
    while (lane != lanes_.end() && !lane->second.waiting.empty()) {
      HeldRecord record = std::move(lane->second.waiting.front());
      lane->second.waiting.pop_front();
      Uncount(record.source);
      progressed = true;
      if (next(lane->first, std::move(record))) lane = lanes_.end();  // In progress again.
    }
    if (lane != lanes_.end()) lanes_.erase(lane);
  }
  return progressed;
}

std::optional<HeldRecord> KeyLanes::Take(const RecordCoordinates& record) {
  for (auto& [key, lane] : lanes_) {
    auto at = std::find_if(lane.waiting.begin(), lane.waiting.end(),
                           [&record](const HeldRecord& h) { return record.Names(h.record); });
    if (at == lane.waiting.end()) continue;
    HeldRecord held = std::move(*at);
    lane.waiting.erase(at);
    Uncount(held.source);
    return held;
  }
  return std::nullopt;
}

void KeyLanes::ForEachWaiting(const std::function<void(const HeldRecord&)>& fn) const {
  for (const auto& [key, lane] : lanes_) {
    for (const HeldRecord& held : lane.waiting) fn(held);
  }
}

int64_t KeyLanes::WaitingFrom(const TopicPartition& tp) const {
  auto it = waiting_from_.find(tp);
  return it == waiting_from_.end() ? 0 : it->second;
}

int64_t KeyLanes::waiting() const {
  int64_t n = 0;
  for (const auto& [tp, count] : waiting_from_) n += count;
  return n;
}

void KeyLanes::Drop(const std::vector<TopicPartition>& partitions) {
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    if (std::find(partitions.begin(), partitions.end(), it->second.source) != partitions.end()) {
      ready_.erase(it->first);
      it = lanes_.erase(it);
    } else {
      ++it;
    }
  }
  for (const TopicPartition& tp : partitions) waiting_from_.erase(tp);
}

}  // namespace retryd::engine
