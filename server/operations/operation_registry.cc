#include "server/operations/operation_registry.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/common/logging.h"
#include "server/operations/rpc_status.h"

namespace retryd::control {
namespace {

// Ended operations are kept this long, and this many at most.
constexpr absl::Duration kKeepEnded = absl::Hours(1);
constexpr size_t kMaxEnded = 100;

absl::Status NotFound(const std::string& id);

}  // namespace

// A random UUID (version 4): unique within the instance, and not guessable
// from the previous one.
std::string OperationRegistry::NewId() {
  static thread_local std::mt19937_64 random(std::random_device{}());
  const uint64_t hi = (random() & 0xffffffffffff0fffULL) | 0x4000ULL;
  const uint64_t lo = (random() & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  char out[37];
  std::snprintf(out, sizeof(out),
                "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64, hi >> 32,
                (hi >> 16) & 0xffff, hi & 0xffff, lo >> 48,
                static_cast<uint64_t>(lo & 0xffffffffffffULL));
  return out;
}

namespace {

absl::Status NotFound(const std::string& id) {
  return WithReason(absl::NotFoundError(absl::StrCat(
                        "no operation ", id,
                        " on this instance (an ended one is kept for an hour; ids are not valid "
                        "on other replicas)")),
                    reason::kOperationNotFound);
}

}  // namespace

OperationRegistry::~OperationRegistry() { Shutdown(); }

OperationRegistry::Begun OperationRegistry::Begin(v1::OperationKind kind, std::string request_id,
                                                  Progress progress,
                                                  std::shared_ptr<engine::Cancellation> cancel,
                                                  std::string id) {
  if (cancel == nullptr) cancel = std::make_shared<engine::Cancellation>();
  Entry entry;
  entry.operation.set_id(id.empty() ? NewId() : std::move(id));
  entry.operation.set_kind(kind);
  entry.operation.set_state(v1::OPERATION_STATE_RUNNING);
  entry.operation.set_create_time_unix_ms(absl::ToUnixMillis(absl::Now()));
  entry.operation.set_request_id(std::move(request_id));
  entry.progress = std::move(progress);
  entry.cancel = cancel;
  Begun begun{entry.operation.id(), std::move(cancel)};
  absl::MutexLock lock(&mu_);
  order_.push_back(begun.id);
  entries_.emplace(begun.id, std::move(entry));
  return begun;
}

void OperationRegistry::Finish(const std::string& id, const absl::Status& status,
                               const v1::Operation& result) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  v1::Operation& op = it->second.operation;
  op.set_done(true);
  op.set_end_time_unix_ms(absl::ToUnixMillis(now));
  if (result.has_drain()) *op.mutable_drain() = result.drain();
  if (result.has_redrive()) *op.mutable_redrive() = result.redrive();
  if (status.ok()) {
    op.set_state(v1::OPERATION_STATE_SUCCEEDED);
  } else {
    op.set_state(absl::IsCancelled(status) ? v1::OPERATION_STATE_CANCELLED
                                           : v1::OPERATION_STATE_FAILED);
    *op.mutable_error() = ToRpcStatus(status);
  }
  // The last progress seen stays with the ended operation.
  if (it->second.progress) it->second.progress(*op.mutable_progress());
  it->second.progress = nullptr;
  ForgetOldLocked(now);
}

absl::StatusOr<v1::Operation> OperationRegistry::Run(v1::OperationKind kind, std::string request_id,
                                                     Progress progress, Work work, std::string id) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("the control server is stopping");
    if (!id.empty() && entries_.contains(id)) {
      return absl::AlreadyExistsError(absl::StrCat("operation ", id, " exists already"));
    }
  }
  const Begun begun =
      Begin(kind, std::move(request_id), std::move(progress), nullptr, std::move(id));
  absl::StatusOr<v1::Operation> started = Get(begun.id);
  std::vector<std::thread> ended;
  {
    absl::MutexLock lock(&mu_);
    auto done = std::partition(threads_.begin(), threads_.end(),
                               [](const RunThread& t) { return !t.ended->load(); });
    for (auto it = done; it != threads_.end(); ++it) ended.push_back(std::move(it->thread));
    threads_.erase(done, threads_.end());
    auto flag = std::make_shared<std::atomic<bool>>(false);
    threads_.push_back({std::thread([this, begun, flag, work = std::move(work)]() mutable {
                          SetThreadName("operation");
                          SetThreadComponent("control");
                          v1::Operation result;
                          const absl::Status status = std::move(work)(*begun.cancel, result);
                          Finish(begun.id, status, result);
                          flag->store(true);
                        }),
                        flag});
  }
  // Outside the lock: each has at most its return left to do.
  for (std::thread& thread : ended) thread.join();
  return started;
}

v1::Operation OperationRegistry::Snapshot(const Entry& entry) const {
  v1::Operation op = entry.operation;
  if (entry.progress) entry.progress(*op.mutable_progress());
  return op;
}

absl::StatusOr<v1::Operation> OperationRegistry::Get(const std::string& id) const {
  Entry entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return NotFound(id);
    entry = it->second;
  }
  // Outside the lock: the progress asks the engine.
  return Snapshot(entry);
}

std::vector<v1::Operation> OperationRegistry::List() const {
  std::vector<Entry> entries;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if (auto e = entries_.find(*it); e != entries_.end()) entries.push_back(e->second);
    }
  }
  std::vector<v1::Operation> out;
  for (const Entry& entry : entries) out.push_back(Snapshot(entry));
  return out;
}

absl::StatusOr<v1::Operation> OperationRegistry::Cancel(const std::string& id,
                                                        absl::Time wait_until) {
  std::shared_ptr<engine::Cancellation> cancel;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return NotFound(id);
    if (!it->second.operation.done()) cancel = it->second.cancel;
  }
  if (cancel != nullptr) {
    LogInfo("control: operation ", id, " cancelled");
    cancel->Cancel();  // Runs only the engine's brief wake-up.
    absl::MutexLock lock(&mu_);
    auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = entries_.find(id);
      return it == entries_.end() || it->second.operation.done();
    };
    mu_.AwaitWithDeadline(absl::Condition(&ended), wait_until);
  }
  return Get(id);
}

void OperationRegistry::ForgetOldLocked(absl::Time now) {
  size_t ended = 0;
  for (const auto& [id, entry] : entries_) ended += entry.operation.done();
  for (auto it = order_.begin(); it != order_.end();) {
    auto e = entries_.find(*it);
    const bool forget =
        e != entries_.end() && e->second.operation.done() &&
        (ended > kMaxEnded ||
         now - absl::FromUnixMillis(e->second.operation.end_time_unix_ms()) > kKeepEnded);
    if (forget) {
      entries_.erase(e);
      --ended;
      it = order_.erase(it);
    } else {
      ++it;
    }
  }
}

void OperationRegistry::Shutdown() {
  std::vector<RunThread> threads;
  std::vector<std::shared_ptr<engine::Cancellation>> running;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    threads.swap(threads_);
    for (const auto& [id, entry] : entries_) {
      if (!entry.operation.done()) running.push_back(entry.cancel);
    }
  }
  for (const auto& cancel : running) cancel->Cancel();
  for (RunThread& t : threads) t.thread.join();
}

}  // namespace retryd::control
