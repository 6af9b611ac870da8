#include "server/engine/worker/held_records.h"

#include <utility>

namespace retryd::engine {
namespace {

// What every description starts from: where the record comes from.
InFlightRecord Base(int thread_id, ThreadRole role, const Record& record,
                    const TopicPartition& source, int64_t source_offset) {
  InFlightRecord r;
  r.thread_id = thread_id;
  r.role = role;
  r.topic = record.topic;
  r.partition = record.partition;
  r.offset = record.offset;
  r.read_from = source;
  r.read_offset = source_offset;
  r.key = record.key;
  return r;
}

}  // namespace

HeldRecords::HeldRecords(int thread_id, ThreadRole role, const Calls& calls,
                         DueScheduler& scheduler, InOrderQueue& queue, KeyLanes& lanes)
    : thread_id_(thread_id),
      role_(role),
      calls_(calls),
      scheduler_(scheduler),
      queue_(queue),
      lanes_(lanes) {}

InFlightRecord HeldRecords::Describe(const HeldRecord& held, InFlightState state) const {
  InFlightRecord r = Base(thread_id_, role_, held.record, held.source, held.source_offset);
  r.state = state;
  r.attempt = held.attempt;
  if (state == InFlightState::kWaitingDue || state == InFlightState::kDeferred) {
    r.due_ms = held.due_ms;
  }
  r.since_ms = held.first_failure_ms > 0 ? held.first_failure_ms : held.read_ms;
  r.last_error = held.last_error;
  return r;
}

std::vector<InFlightRecord> HeldRecords::List(size_t limit, int64_t& total) const {
  std::vector<InFlightRecord> records;
  calls_.ForEach([&](const Calls::Call& call) {
    if (!call.cancel->cancelled()) records.push_back(Describe(call.held, InFlightState::kInCall));
  });
  scheduler_.ForEach([&](const HeldRecord& held) {
    records.push_back(
        Describe(held, held.deferred ? InFlightState::kDeferred : InFlightState::kWaitingDue));
  });
  queue_.ForEachWaiting([&](const TopicPartition& tp, const InOrderQueue::Waiting& waiting) {
    InFlightRecord r = Base(thread_id_, role_, waiting.record, tp, waiting.record.offset);
    r.state = InFlightState::kWaitingBehind;
    r.since_ms = waiting.read_ms;
    records.push_back(std::move(r));
  });
  lanes_.ForEachWaiting(
      [&](const HeldRecord& held) { records.push_back(Describe(held, InFlightState::kParked)); });
  total = static_cast<int64_t>(records.size());
  KeepOldest(records, limit);
  return records;
}

bool HeldRecords::InCall(const RecordCoordinates& record) const {
  bool in_call = false;
  calls_.ForEach([&](const Calls::Call& call) {
    in_call = in_call || (record.Names(call.held.record) && !call.cancel->cancelled());
  });
  return in_call;
}

std::optional<HeldRecord> HeldRecords::Take(const RecordCoordinates& record) {
  std::optional<HeldRecord> held =
      scheduler_.TakeFirst([&record](const HeldRecord& h) { return record.Names(h.record); });
  if (held.has_value()) return held;
  held = lanes_.Take(record);
  if (held.has_value()) return held;
  return queue_.Take(record);
}

}  // namespace retryd::engine
