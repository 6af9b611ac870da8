#include "server/engine/held/in_flight.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace retryd::engine {

bool OlderThan(const InFlightRecord& a, const InFlightRecord& b) {
  return std::tie(a.since_ms, a.topic, a.partition, a.offset) <
         std::tie(b.since_ms, b.topic, b.partition, b.offset);
}

void KeepOldest(std::vector<InFlightRecord>& records, size_t limit) {
  if (records.size() > limit) {
    std::partial_sort(records.begin(), records.begin() + static_cast<ptrdiff_t>(limit),
                      records.end(), &OlderThan);
    records.resize(limit);
  } else {
    std::sort(records.begin(), records.end(), &OlderThan);
  }
}

std::shared_ptr<WorkerRequest> WorkerRequest::List(size_t limit, absl::Time deadline) {
  return std::make_shared<WorkerRequest>(Kind::kList, limit, RecordCoordinates{}, deadline);
}

std::shared_ptr<WorkerRequest> WorkerRequest::DeadLetter(RecordCoordinates record,
                                                         absl::Time deadline) {
  return std::make_shared<WorkerRequest>(Kind::kDeadLetter, 0, std::move(record), deadline);
}

void WorkerRequest::Answer(absl::Status status, std::vector<InFlightRecord> records,
                           int64_t total) {
  absl::MutexLock lock(&mu_);
  if (answered_) return;
  answered_ = true;
  status_ = std::move(status);
  records_ = std::move(records);
  total_ = total;
}

bool WorkerRequest::Await(absl::Time deadline, const Cancellation* cancel) const {
  absl::MutexLock lock(&mu_);
  auto done = [this, cancel]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return answered_ || (cancel != nullptr && cancel->cancelled());
  };
  mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  return answered_;
}

void WorkerRequest::Wake() const { absl::MutexLock lock(&mu_); }

bool WorkerRequest::Abandon() {
  absl::MutexLock lock(&mu_);
  if (answered_) return false;
  abandoned_ = true;
  return true;
}

bool WorkerRequest::abandoned() const {
  absl::MutexLock lock(&mu_);
  return abandoned_;
}

absl::Status WorkerRequest::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

std::vector<InFlightRecord> WorkerRequest::TakeRecords() {
  absl::MutexLock lock(&mu_);
  return std::move(records_);
}

int64_t WorkerRequest::total() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

}  // namespace retryd::engine
