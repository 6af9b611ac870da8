// Worker: the requests other threads post to it (ListInFlight and an
// operator's DeadLetterRecord), served on the worker's own thread.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/worker.h"

namespace retryd::engine {
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
  thread_owner_.Check("a worker serves requests on its own thread");
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
  calls_.ForEach([&](const Calls::Call& call) {
    if (!call.cancel->cancelled()) records.push_back(Describe(call.held, InFlightState::kInCall));
  });
  scheduler_.ForEach([&](const HeldRecord& held) {
    records.push_back(
        Describe(held, held.deferred ? InFlightState::kDeferred : InFlightState::kWaitingDue));
  });
  queue_.ForEachWaiting([&](const TopicPartition& tp, const InOrderQueue::Waiting& waiting) {
    InFlightRecord r = Base(id_, role_, waiting.record, tp, waiting.record.offset);
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

std::optional<HeldRecord> Worker::TakeHeld(const RecordCoordinates& record) {
  std::optional<HeldRecord> held =
      scheduler_.TakeFirst([&record](const HeldRecord& h) { return record.Names(h.record); });
  if (held.has_value()) {
    mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
    return held;
  }
  // Behind an earlier record of its key (key order): the key's lane goes on
  // without it.
  held = lanes_.Take(record);
  if (held.has_value()) return held;
  return queue_.Take(record);
}

void Worker::ServeDeadLetter(const std::shared_ptr<WorkerRequest>& request) {
  const RecordCoordinates& wanted = request->record;
  bool in_call = false;
  calls_.ForEach([&](const Calls::Call& call) {
    in_call = in_call || (wanted.Names(call.held.record) && !call.cancel->cancelled());
  });
  if (in_call) {
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
  queue_.EndInPlaceAt(tp, held->source_offset);
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
  queue_.MarkReady(tp);
}

}  // namespace retryd::engine
