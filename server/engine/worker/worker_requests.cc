// Worker: the requests other threads post to it (ListInFlight and an
// operator's DeadLetterRecord), served on the worker's own thread from what
// HeldRecords sees of every record it holds.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/worker/worker.h"

namespace retryd::engine {
namespace {

std::string Name(const RecordCoordinates& record) {
  return absl::StrCat(record.topic, "/", record.partition, "@", record.offset);
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
        std::vector<InFlightRecord> records = held_records_.List(request->limit, total);
        request->Answer(absl::OkStatus(), std::move(records), total);
        break;
      }
      case WorkerRequest::Kind::kDeadLetter:
        ServeDeadLetter(request);
        break;
    }
  }
}

void Worker::ServeDeadLetter(const std::shared_ptr<WorkerRequest>& request) {
  const RecordCoordinates& wanted = request->record;
  if (held_records_.InCall(wanted)) {
    request->Answer(absl::FailedPreconditionError(absl::StrCat(
        Name(wanted), " is in a processor call on thread ", id_,
        " right now; try again once the call has ended (should it fail, the record is held "
        "again)")));
    return;
  }
  std::optional<HeldRecord> held = held_records_.Take(wanted);
  if (!held.has_value()) {
    request->Answer(
        absl::NotFoundError(absl::StrCat("thread ", id_, " holds no record ", Name(wanted))));
    return;
  }
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
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
