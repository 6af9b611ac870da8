// Worker: the requests other threads post to it (ListInFlight and an
// operator's DeadLetterRecord), served on the worker's own thread.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/worker.h"

namespace retryd {
namespace {

std::string Name(const RecordCoordinates& record) {
  return absl::StrCat(record.topic, "/", record.partition, "@", record.offset);
}

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

void Worker::Post(std::shared_ptr<WorkerRequest> request) {
  {
    absl::MutexLock lock(&mailbox_->call_mu);
    if (!mailbox_->requests_closed) {
      mailbox_->requests.push_back(std::move(request));
      if (mailbox_->wake != nullptr) mailbox_->wake->Wake();
      return;
    }
  }
  request->Answer(absl::UnavailableError(absl::StrCat("thread ", id_, " has stopped")));
}

void Worker::ServeRequests(bool serving) {
  std::vector<std::shared_ptr<WorkerRequest>> requests;
  {
    absl::MutexLock lock(&mailbox_->call_mu);
    requests.swap(mailbox_->requests);
    if (!serving) mailbox_->requests_closed = true;
  }
  for (const std::shared_ptr<WorkerRequest>& request : requests) {
    if (!serving) {
      request->Answer(absl::UnavailableError(absl::StrCat("thread ", id_, " is stopping")));
      continue;
    }
    if (request->abandoned()) continue;  // Nobody waits for it any more.
    if (absl::Now() >= request->deadline) {
      request->Answer(absl::DeadlineExceededError(
          absl::StrCat("thread ", id_, " took the request up after its deadline; it did nothing")));
      continue;
    }
    switch (request->kind) {
      case WorkerRequest::Kind::kList: {
        int64_t total = 0;
        std::vector<InFlightRecord> records = ListHeld(request->limit, total);
        request->Answer(absl::OkStatus(), std::move(records), total);
        break;
      }
      case WorkerRequest::Kind::kDeadLetter:
        ServeDeadLetter(request);
        break;
    }
  }
}

InFlightRecord Worker::Describe(const HeldRecord& held, InFlightState state) const {
  InFlightRecord r = Base(id_, role_, held.record, held.source, held.source_offset);
  r.state = state;
  r.attempt = held.attempt;
  if (state == InFlightState::kWaitingDue || state == InFlightState::kDeferred) {
    r.due_ms = held.due_ms;
  }
  r.since_ms = held.first_failure_ms > 0 ? held.first_failure_ms : held.read_ms;
  r.last_error = held.last_error;
  return r;
}

std::vector<InFlightRecord> Worker::ListHeld(size_t limit, int64_t& total) const {
  std::vector<InFlightRecord> records;
  for (const auto& [id, call] : calls_) {
    if (!call.cancel->cancelled()) records.push_back(Describe(call.held, InFlightState::kInCall));
  }
  scheduler_.ForEach([&](const HeldRecord& held) {
    records.push_back(
        Describe(held, held.deferred ? InFlightState::kDeferred : InFlightState::kWaitingDue));
  });
  for (const auto& [tp, queue] : waiting_) {
    for (const Waiting& waiting : queue) {
      InFlightRecord r = Base(id_, role_, waiting.record, tp, waiting.record.offset);
      r.state = InFlightState::kWaitingBehind;
      r.since_ms = waiting.read_ms;
      records.push_back(std::move(r));
    }
  }
  for (const auto& [key, lane] : lanes_) {
    for (const HeldRecord& held : lane.waiting) {
      records.push_back(Describe(held, InFlightState::kParked));
    }
  }
  total = static_cast<int64_t>(records.size());
  KeepOldest(records, limit);
  return records;
}

std::optional<HeldRecord> Worker::TakeHeld(const RecordCoordinates& record) {
  std::optional<HeldRecord> held =
      scheduler_.TakeFirst([&record](const HeldRecord& h) { return record.Names(h.record); });
  if (held.has_value()) {
    mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
    return held;
  }
  // Behind an earlier record of its key (key order): the key's lane goes on
  // without it.
  for (auto& [key, lane] : lanes_) {
    auto at = std::find_if(lane.waiting.begin(), lane.waiting.end(),
                           [&record](const HeldRecord& h) { return record.Names(h.record); });
    if (at == lane.waiting.end()) continue;
    held = std::move(*at);
    lane.waiting.erase(at);
    if (int64_t& n = lane_held_[held->source]; --n <= 0) lane_held_.erase(held->source);
    return held;
  }
  // Waiting records were read from the input itself: their coordinates are
  // where they were read.
  auto it = waiting_.find(TopicPartition{record.topic, record.partition});
  if (it == waiting_.end()) return std::nullopt;
  std::deque<Waiting>& queue = it->second;
  auto at = std::find_if(queue.begin(), queue.end(),
                         [&record](const Waiting& w) { return record.Names(w.record); });
  if (at == queue.end()) return std::nullopt;
  held.emplace();
  held->source = it->first;
  held->source_offset = at->record.offset;
  held->read_ms = at->read_ms;
  held->record = std::move(at->record);
  queue.erase(at);
  if (queue.empty()) waiting_.erase(it);
  return held;
}

void Worker::ServeDeadLetter(const std::shared_ptr<WorkerRequest>& request) {
  const RecordCoordinates& wanted = request->record;
  for (const auto& [id, call] : calls_) {
    if (!wanted.Names(call.held.record) || call.cancel->cancelled()) continue;
    request->Answer(absl::FailedPreconditionError(absl::StrCat(
        Name(wanted), " is in a processor call on thread ", id_,
        " right now; try again once the call has ended (should it fail, the record is held "
        "again)")));
    return;
  }
  std::optional<HeldRecord> held = TakeHeld(wanted);
  if (!held.has_value()) {
    request->Answer(
        absl::NotFoundError(absl::StrCat("thread ", id_, " holds no record ", Name(wanted))));
    return;
  }
  const TopicPartition tp = held->source;
  // Its state no longer rides with the commits: the partition moves on once
  // the dead-letter record is acknowledged.
  if (auto it = in_place_.find(tp);
      it != in_place_.end() && it->second.offset == held->source_offset) {
    in_place_.erase(it);
  }
  // A held record's attempt is the one it would make next; the dead-letter
  // record carries those made (at least 1, as every retryd-attempt does).
  const int made = held->attempt - 1;
  held->attempt = std::max(1, made);
  std::string reason = absl::StrCat("dead-lettered by an operator (DeadLetterRecord) after ", made,
                                    made == 1 ? " failed attempt" : " failed attempts");
  if (!held->last_error.empty()) absl::StrAppend(&reason, "; last error: ", held->last_error);
  LogInfo("thread ", id_, ": ", Name(wanted), " dead-lettered at an operator's request (", made,
          " attempts made)");
  RecordEndToEnd(*held, absl::Now());
  DeadLetter(*held, std::move(reason), request);
  // Records that waited behind it proceed (ProcessDue, this round).
  if (waiting_.contains(tp)) ready_.insert(tp);
}

}  // namespace retryd
