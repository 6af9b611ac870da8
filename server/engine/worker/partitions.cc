#include "server/engine/worker/partitions.h"

#include <algorithm>
#include <string>

#include "server/engine/handoff/done_above.h"
#include "server/engine/ordering/in_place_retry.h"

namespace retryd::engine {
namespace {

// The most ranges of complete records above a commit that it carries
// (EncodeDoneAbove also keeps to kMaxDoneMetadataBytes).
constexpr size_t kMaxDoneRanges = 128;

}  // namespace

void Partitions::Assign(const std::vector<TopicPartition>& tps) {
  for (const TopicPartition& tp : tps) {
    // Only what a new assignment starts afresh: a partition assigned again
    // keeps its pause, which librdkafka keeps too.
    Entry& e = entries_[tp];
    e.tracker = std::make_shared<CompletionTracker>();
    e.committed = {tp, -1, ""};
  }
}

void Partitions::Restore(const kafka::CommitOffsets& committed, bool primary) {
  for (const kafka::PartitionOffset& c : committed) {
    auto it = entries_.find(c.tp);
    if (it == entries_.end()) continue;
    if (auto done = DecodeDoneAbove(c.metadata, c.offset); !done.empty()) {
      it->second.done_before = std::move(done);
    }
    if (!primary) continue;
    std::optional<InPlaceRetry> state = DecodeInPlaceRetry(c.metadata);
    if (state && state->offset == c.offset) queue_.Restored(c.tp, *state);
    it->second.committed = c;
  }
}

std::vector<TopicPartition> Partitions::Revoke(const std::vector<TopicPartition>& tps) {
  std::vector<TopicPartition> paused;
  // Their keys' lanes go too: the next owner reads their records again.
  lanes_.Drop(tps);
  for (const TopicPartition& tp : tps) {
    queue_.Drop(tp);
    auto it = entries_.find(tp);
    if (it == entries_.end()) continue;
    if (it->second.paused) paused.push_back(tp);
    SetPaused(it->second, false);
    SetKeysUnknown(it->second, false);
    it->second.tracker->Abandon();
    if (found_ == it) found_ = entries_.end();
    entries_.erase(it);
  }
  return paused;
}

Partitions::Entry* Partitions::Find(const TopicPartition& tp) {
  if (found_ == entries_.end() || found_->first.partition != tp.partition ||
      found_->first.topic != tp.topic) {
    found_ = entries_.find(tp);
    if (found_ == entries_.end()) return nullptr;
  }
  return &found_->second;
}

void Partitions::SetPaused(Entry& e, bool paused) {
  if (e.paused == paused) return;
  e.paused = paused;
  paused ? ++paused_count_ : --paused_count_;
}

void Partitions::SetKeysUnknown(Entry& e, bool unknown) {
  if (e.keys_unknown == unknown) return;
  e.keys_unknown = unknown;
  unknown ? ++keys_unknown_count_ : --keys_unknown_count_;
}

std::shared_ptr<CompletionTracker> Partitions::Tracker(const TopicPartition& tp) const {
  const Entry* e = Find(tp);
  return e == nullptr ? nullptr : e->tracker;
}

std::vector<TopicPartition> Partitions::Assigned() const {
  std::vector<TopicPartition> all;
  all.reserve(entries_.size());
  for (const auto& [tp, e] : entries_) all.push_back(tp);
  return all;
}

bool Partitions::DoneBefore(const TopicPartition& tp, int64_t offset) {
  Entry* e = Find(tp);
  if (e == nullptr || e->done_before.empty()) return false;
  std::vector<std::pair<int64_t, int64_t>>& ranges = e->done_before;
  // Ranges in increasing order, records too: those passed are used up.
  auto passed = std::find_if(ranges.begin(), ranges.end(),
                             [offset](const auto& range) { return range.second >= offset; });
  ranges.erase(ranges.begin(), passed);
  return !ranges.empty() && ranges.front().first <= offset;
}

kafka::CommitOffsets Partitions::CommitPoints(const std::vector<TopicPartition>& tps) const {
  kafka::CommitOffsets points;
  for (const TopicPartition& tp : tps) {
    auto it = entries_.find(tp);
    if (it == entries_.end()) continue;
    const CompletionTracker& tracker = *it->second.tracker;
    const int64_t offset = tracker.CommitOffset();
    if (offset < 0) continue;
    std::string metadata;
    if (const InPlaceRetry* held = queue_.InPlaceAt(tp, offset); held != nullptr) {
      metadata = EncodeInPlaceRetry(*held);
    } else {
      metadata = EncodeDoneAbove(offset, tracker.DoneAbove(kMaxDoneRanges));
    }
    points.push_back({tp, offset, std::move(metadata)});
  }
  return points;
}

kafka::CommitOffsets Partitions::Moved() const {
  kafka::CommitOffsets moved;
  for (kafka::PartitionOffset& point : CommitPoints(Assigned())) {
    const kafka::PartitionOffset& last = entries_.at(point.tp).committed;
    if (point.offset > last.offset || point.metadata != last.metadata) {
      moved.push_back(std::move(point));
    }
  }
  return moved;
}

void Partitions::NoteCommitted(const kafka::CommitOffsets& offsets) {
  for (const kafka::PartitionOffset& o : offsets) {
    if (auto it = entries_.find(o.tp); it != entries_.end()) it->second.committed = o;
  }
}

void Partitions::OnCommitFailed(const kafka::CommitOffsets& offsets) {
  for (const kafka::PartitionOffset& o : offsets) {
    if (auto it = entries_.find(o.tp);
        it != entries_.end() && it->second.committed.offset == o.offset) {
      it->second.committed.offset = -1;
    }
  }
}

kafka::CommitOffsets Partitions::LastCommitted() const {
  kafka::CommitOffsets last;
  for (const auto& [tp, e] : entries_) last.push_back({tp, e.committed.offset, ""});
  return last;
}

bool Partitions::paused(const TopicPartition& tp) const {
  const Entry* e = Find(tp);
  return e != nullptr && e->paused;
}

void Partitions::NotePaused(const std::vector<TopicPartition>& tps, bool paused) {
  for (const TopicPartition& tp : tps) {
    if (Entry* e = Find(tp); e != nullptr) SetPaused(*e, paused);
  }
}

bool Partitions::keys_unknown(const TopicPartition& tp) const {
  const Entry* e = Find(tp);
  return e != nullptr && e->keys_unknown;
}

void Partitions::SetKeysUnknown(const std::vector<TopicPartition>& tps) {
  for (const TopicPartition& tp : tps) {
    if (Entry* e = Find(tp); e != nullptr) SetKeysUnknown(*e, true);
  }
}

std::vector<TopicPartition> Partitions::KeysUnknown() const {
  std::vector<TopicPartition> unknown;
  for (const auto& [tp, e] : entries_) {
    if (e.keys_unknown) unknown.push_back(tp);
  }
  return unknown;
}

void Partitions::ClearKeysUnknown() {
  for (auto& [tp, e] : entries_) SetKeysUnknown(e, false);
}

}  // namespace retryd::engine
