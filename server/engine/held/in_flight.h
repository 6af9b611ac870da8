// The requests that reach a worker's thread to list the records it holds
// (api/in_flight.h: InFlightRecord) or to dead-letter one of them.
//
// A worker's held records belong to its thread. Another thread (the
// engine, on behalf of a control call) posts a WorkerRequest to it
// (Worker::Post); the worker serves it at the top of its loop and answers
// it once. The poster waits for the answer with a deadline and may give up;
// the request is shared, so a late answer lands in an object nobody reads.
//
// Thread-safety: WorkerRequest is thread-safe: its request fields are immutable, its answer is set
// once under its mutex.
#ifndef RETRYD_SERVER_ENGINE_HELD_IN_FLIGHT_H_
#define RETRYD_SERVER_ENGINE_HELD_IN_FLIGHT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/api/cancellation.h"
#include "server/engine/api/in_flight.h"

namespace retryd::engine {

// Oldest first: by since_ms, then by original coordinates.
bool OlderThan(const InFlightRecord& a, const InFlightRecord& b);
// Keeps the `limit` oldest of `records`, sorted oldest first.
void KeepOldest(std::vector<InFlightRecord>& records, size_t limit);

// One request to one worker's thread, answered exactly once (later answers
// are ignored).
class WorkerRequest {
 public:
  enum class Kind {
    kList,        // The `limit` oldest held records, and how many there are.
    kDeadLetter,  // Dead-letter the held record `record` now.
  };

  static std::shared_ptr<WorkerRequest> List(size_t limit, absl::Time deadline);
  static std::shared_ptr<WorkerRequest> DeadLetter(RecordCoordinates record, absl::Time deadline);

  const Kind kind;
  const size_t limit;
  const RecordCoordinates record;
  // Served after it, the request is answered DEADLINE_EXCEEDED untouched.
  const absl::Time deadline;

  // The poster gives up waiting (its deadline passed, or its call was
  // cancelled): a worker that has not served the request yet drops it.
  // False if the answer came first (then nothing is abandoned).
  bool Abandon() ABSL_LOCKS_EXCLUDED(mu_);
  bool abandoned() const ABSL_LOCKS_EXCLUDED(mu_);

  // kList: OK with `records` and `total`. kDeadLetter: OK once the
  // dead-letter record is acknowledged, NOT_FOUND if the thread does not
  // hold it, or another error.
  void Answer(absl::Status status, std::vector<InFlightRecord> records = {}, int64_t total = 0)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the answer until `deadline`, or until `cancel` (if given) is
  // cancelled and Wake() called; whether the answer came.
  bool Await(absl::Time deadline, const Cancellation* cancel = nullptr) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Makes an Await() in progress check its cancellation again.
  void Wake() const ABSL_LOCKS_EXCLUDED(mu_);

  // The answer; valid once Await() returned true.
  absl::Status status() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<InFlightRecord> TakeRecords() ABSL_LOCKS_EXCLUDED(mu_);
  int64_t total() const ABSL_LOCKS_EXCLUDED(mu_);

  WorkerRequest(Kind kind, size_t limit, RecordCoordinates record, absl::Time deadline)
      : kind(kind), limit(limit), record(std::move(record)), deadline(deadline) {}

 private:
  mutable absl::Mutex mu_;  // Guards the answer and abandoned_ below.
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<InFlightRecord> records_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HELD_IN_FLIGHT_H_
