#include "server/engine/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/kafka/topics.h"

namespace retryd {
namespace {

absl::Status CheckOptions(const EngineOptions& o) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (o.bootstrap_servers.empty()) return invalid("bootstrap_servers is empty");
  if (o.group_id.empty()) return invalid("group_id is empty");
  if (o.input_topics.empty()) return invalid("no input topics");
  if (o.retry.topic.empty()) return invalid("retry.topic is empty");
  if (o.dead_letter_topic.empty()) return invalid("dead_letter_topic is empty");
  if (o.primary_threads < 1) return invalid("primary_threads must be at least 1");
  if (o.retry.threads < 0 || o.retry.threads > o.retry.max_threads) {
    return invalid("retry.threads must be between 0 and retry.max_threads (", o.retry.max_threads,
                   ")");
  }
  if (o.in_order && o.retry.threads > 0) {
    return absl::FailedPreconditionError(
        "in_order excludes retry threads: set retry.threads to 0 or in_order to false");
  }
  if (o.retry.max_attempts < 1) return invalid("retry.max_attempts must be at least 1");
  if (o.retry.lookahead < 1) return invalid("retry.lookahead must be at least 1");
  if (o.max_in_flight < 1) return invalid("max_in_flight must be at least 1");
  if (o.commit_interval_ms < 1) return invalid("commit_interval_ms must be at least 1");
  return absl::OkStatus();
}

std::string IdList(const std::vector<int>& ids) { return absl::StrJoin(ids, ", "); }

// How long stopped threads stay visible one by one (RecentlyStopped).
constexpr absl::Duration kKeepRetired = absl::Minutes(2);

// Adds one thread's counts to `t` (not the backlog: see RetryBacklog()).
void AddCounts(const ThreadStats& s, EngineTotals& t) {
  const int64_t processed = s.processed.load(std::memory_order_relaxed);
  if (s.role() == ThreadRole::kPrimary) t.consumed += processed;
  t.processed += processed;
  t.succeeded += s.succeeded.load(std::memory_order_relaxed);
  t.failed_attempts += s.failed_attempts.load(std::memory_order_relaxed);
  t.sent_to_retry += s.sent_to_retry.load(std::memory_order_relaxed);
  t.dead_lettered += s.dead_lettered.load(std::memory_order_relaxed);
  t.in_flight += s.in_flight.load(std::memory_order_relaxed);
}

// How long Start() waits, in all, for the metadata of the topics it produces to.
constexpr absl::Duration kPrepareTopicsTimeout = absl::Seconds(5);
// How often a drain looks at the retry group's committed lag.
constexpr absl::Duration kDrainCheckInterval = absl::Milliseconds(250);
// How often a drain logs how much of the retry backlog is left.
constexpr absl::Duration kDrainProgressLogInterval = absl::Seconds(5);

}  // namespace

const char* EngineStateName(EngineState state) {
  switch (state) {
    case EngineState::kCreated: return "CREATED";
    case EngineState::kRunning: return "RUNNING";
    case EngineState::kDraining: return "DRAINING";
    case EngineState::kStopping: return "STOPPING";
    case EngineState::kStopped: return "STOPPED";
  }
  return "UNKNOWN";
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(EngineOptions options,
                                                       std::unique_ptr<Processor> processor) {
  if (processor == nullptr) return absl::InvalidArgumentError("no processor");
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  kafka::ProducerOptions producer_options;
  producer_options.bootstrap_servers = options.bootstrap_servers;
  producer_options.properties = options.kafka_properties;
  producer_options.client_id = "retryd-producer";
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer =
      kafka::Producer::Create(producer_options);
  if (!producer.ok()) return producer.status();
  absl::StatusOr<std::unique_ptr<kafka::GroupLagProbe>> retry_lag = kafka::GroupLagProbe::Create(
      options.bootstrap_servers, options.kafka_properties,
      absl::StrCat(options.group_id, ".retry"), options.retry.topic);
  if (!retry_lag.ok()) return retry_lag.status();
  return std::unique_ptr<Engine>(new Engine(std::move(options), std::move(processor),
                                            *std::move(producer), *std::move(retry_lag)));
}

Engine::Engine(EngineOptions options, std::unique_ptr<Processor> processor,
               std::unique_ptr<kafka::Producer> producer,
               std::unique_ptr<kafka::GroupLagProbe> retry_lag)
    : options_(std::move(options)),
      processor_(std::move(processor)),
      producer_(std::move(producer)),
      retry_lag_(std::move(retry_lag)),
      in_order_(options_.in_order),
      context_{&options_, processor_.get(), producer_.get(), &in_order_, &input_paused_} {}

Engine::~Engine() { Stop(); }

EngineState Engine::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

absl::Status Engine::CheckRunning() const {
  if (state_ != EngineState::kRunning && state_ != EngineState::kDraining) {
    return absl::FailedPreconditionError(
        absl::StrCat("the engine is ", EngineStateName(state_), ", not running"));
  }
  return absl::OkStatus();
}

absl::Status Engine::BeginControl(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const bool free = mu_.AwaitWithDeadline(
      absl::Condition(+[](bool* busy) { return !*busy; }, &control_busy_), deadline);
  if (!free) {
    return absl::DeadlineExceededError(
        "another control operation was still in progress when the deadline passed");
  }
  if (absl::Status s = CheckRunning(); !s.ok()) return s;
  control_busy_ = true;
  return absl::OkStatus();
}

void Engine::EndControl() {
  absl::MutexLock lock(&mu_);
  control_busy_ = false;
}

absl::StatusOr<std::unique_ptr<Worker>> Engine::StartWorker(ThreadRole role) {
  int id;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
  }
  auto worker = std::make_unique<Worker>(id, role, context_);
  if (absl::Status s = worker->Start(); !s.ok()) return s;
  return worker;
}

absl::Status Engine::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != EngineState::kCreated) {
      return absl::FailedPreconditionError("engine already started");
    }
    state_ = EngineState::kRunning;
  }
  LogInfo("engine: starting ", options_.primary_threads, " primary and ", options_.retry.threads,
          " retry threads", in_order() ? " (in order)" : "");
  // So that the first success, retry or dead letter does not wait a second
  // for the producer to learn its topic. Not fatal: it would learn it later.
  std::vector<std::string> produced = {options_.retry.topic, options_.dead_letter_topic};
  if (!options_.output_topic.empty()) produced.push_back(options_.output_topic);
  if (absl::Status s = producer_->PrepareTopics(produced, kPrepareTopicsTimeout); !s.ok()) {
    LogWarning("engine: ", s.message());
  }
  for (int i = 0; i < options_.primary_threads; ++i) {
    absl::StatusOr<std::unique_ptr<Worker>> worker = StartWorker(ThreadRole::kPrimary);
    if (!worker.ok()) {
      Stop();
      return worker.status();
    }
    absl::MutexLock lock(&mu_);
    primaries_.push_back(*std::move(worker));
  }
  if (options_.retry.threads > 0) {
    // Not waiting for the group join: start-up should not block on it.
    absl::StatusOr<std::vector<int>> started =
        StartRetryThreads(options_.retry.threads, absl::InfinitePast());
    if (!started.ok()) {
      Stop();
      return started.status();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> Engine::StartRetryThreads(int count, absl::Time deadline) {
  if (absl::Status s = BeginControl(std::max(deadline, absl::Now())); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    absl::Status invalid;
    const int running = static_cast<int>(retries_.size());
    if (in_order()) {
      invalid = absl::FailedPreconditionError(
          "in-order mode excludes retry threads: switch it off first (SetInOrder false)");
    } else if (count < 1 || running + count > options_.retry.max_threads) {
      invalid = absl::InvalidArgumentError(absl::StrCat(
          "count must be between 1 and ", options_.retry.max_threads - running,
          ": retry.max_threads is ", options_.retry.max_threads, " and ", running, " run"));
    }
    if (!invalid.ok()) {
      control_busy_ = false;
      return invalid;
    }
  }
  std::vector<std::unique_ptr<Worker>> started;
  absl::Status failure;
  for (int i = 0; i < count && failure.ok(); ++i) {
    absl::StatusOr<std::unique_ptr<Worker>> worker = StartWorker(ThreadRole::kRetry);
    if (worker.ok()) {
      started.push_back(*std::move(worker));
    } else {
      failure = worker.status();
    }
  }
  if (!failure.ok()) {
    StopWorkers(started, /*graceful=*/true);
    Retire(started);
    EndControl();
    return failure;
  }
  std::vector<int> ids;
  // Joining the group takes a rebalance; the caller may wait for it, on the
  // threads' stats, which stay valid whatever happens to the workers.
  std::vector<std::shared_ptr<const ThreadStats>> stats;
  {
    absl::MutexLock lock(&mu_);
    for (auto& worker : started) {
      ids.push_back(worker->id());
      stats.push_back(worker->stats());
      retries_.push_back(std::move(worker));
    }
    control_busy_ = false;
  }
  LogInfo("engine: started retry threads ", IdList(ids));
  for (const auto& s : stats) s->joined.WaitForNotificationWithDeadline(deadline);
  return ids;
}

absl::StatusOr<std::vector<int>> Engine::StopRetryThreads(int count, bool graceful,
                                                          absl::Time deadline) {
  if (count < 1) return absl::InvalidArgumentError("count must be at least 1");
  if (absl::Status s = BeginControl(deadline); !s.ok()) return s;
  std::vector<int> ids;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = retries_.rbegin(); it != retries_.rend() && count-- > 0; ++it) {
      ids.push_back((*it)->id());
    }
  }
  return StopRetryThreadsLocked(std::move(ids), graceful);
}

absl::StatusOr<std::vector<int>> Engine::StopRetryThreadsById(const std::vector<int>& ids,
                                                              bool graceful, absl::Time deadline) {
  if (ids.empty()) return absl::InvalidArgumentError("no thread ids given");
  if (absl::Status s = BeginControl(deadline); !s.ok()) return s;
  std::vector<int> unknown;
  {
    absl::MutexLock lock(&mu_);
    for (int id : ids) {
      const bool found = std::any_of(retries_.begin(), retries_.end(),
                                     [id](const auto& w) { return w->id() == id; });
      if (!found) unknown.push_back(id);
    }
    if (!unknown.empty()) {
      control_busy_ = false;
      return absl::NotFoundError(absl::StrCat(
          unknown.size() > 1 ? "threads " : "thread ", IdList(unknown),
          unknown.size() > 1 ? " are not running retry threads" : " is not a running retry thread"));
    }
  }
  return StopRetryThreadsLocked(ids, graceful);
}

// Requires BeginControl() to have succeeded; ends it.
absl::StatusOr<std::vector<int>> Engine::StopRetryThreadsLocked(std::vector<int> ids,
                                                                bool graceful) {
  std::vector<std::unique_ptr<Worker>> stopping;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = retries_.begin(); it != retries_.end();) {
      if (std::find(ids.begin(), ids.end(), (*it)->id()) != ids.end()) {
        stopping.push_back(std::move(*it));
        it = retries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  StopWorkers(stopping, graceful);
  Retire(stopping);
  LogInfo("engine: stopped retry threads ", IdList(ids), graceful ? "" : " (not graceful)");
  EndControl();
  return ids;
}

absl::StatusOr<SetInOrderResult> Engine::SetInOrder(bool in_order, bool drain_retries,
                                                    absl::Time deadline) {
  if (!in_order && drain_retries) {
    return absl::InvalidArgumentError("drain_retries applies only when switching in_order on");
  }
  if (absl::Status s = BeginControl(deadline); !s.ok()) return s;
  int running;
  {
    absl::MutexLock lock(&mu_);
    running = static_cast<int>(retries_.size());
  }
  if (in_order && running > 0) {
    if (!drain_retries) {
      EndControl();
      return absl::FailedPreconditionError(absl::StrCat(
          running, " retry thread", running > 1 ? "s run" : " runs",
          "; in-order mode excludes retry threads. Stop them first (StopRetryThreads), or call "
          "SetInOrder with drain_retries to empty the retry backlog, stop them and switch"));
    }
    absl::StatusOr<SetInOrderResult> result = DrainAndSetInOrder(deadline);
    EndControl();
    return result;
  }
  in_order_.store(in_order, std::memory_order_relaxed);
  LogInfo("engine: in-order mode ", in_order ? "on" : "off");
  EndControl();
  return SetInOrderResult{in_order, {}, 0};
}

absl::StatusOr<SetInOrderResult> Engine::DrainAndSetInOrder(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    state_ = EngineState::kDraining;
  }
  input_paused_.store(true, std::memory_order_relaxed);
  LogInfo("engine: draining the retry backlog before switching to in-order mode");
  auto resume = [&](EngineState state) {
    input_paused_.store(false, std::memory_order_relaxed);
    absl::MutexLock lock(&mu_);
    if (state_ == EngineState::kDraining) state_ = state;
  };

  int64_t initial_lag = -1, lag = -1;
  absl::Time last_progress_log = absl::Now();
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (state_ != EngineState::kDraining) {
        return absl::AbortedError("the engine is stopping; in-order mode stays off");
      }
    }
    // Every primary must have paused its partitions (so none is halfway
    // through a record) and have no hand-off in flight: from then on the
    // retry topic can only shrink.
    bool primaries_quiet = true;
    for (const auto& s : Threads()) {
      if (s->role() != ThreadRole::kPrimary) continue;
      const bool paused = s->state() == ThreadState::kPaused || s->partitions().empty();
      primaries_quiet = primaries_quiet && paused && s->in_flight.load() == 0;
    }
    if (primaries_quiet) {
      absl::StatusOr<int64_t> committed_lag = MeasureRetryBacklog(
          std::max(absl::Milliseconds(1), std::min(absl::Seconds(5), deadline - absl::Now())));
      if (committed_lag.ok()) {
        lag = *committed_lag;
        if (initial_lag < 0) initial_lag = lag;
        if (lag == 0) break;
        if (absl::Now() - last_progress_log >= kDrainProgressLogInterval) {
          last_progress_log = absl::Now();
          LogInfo("engine: drain: ", lag, " of ", initial_lag, " retry records left");
        }
      } else {
        LogWarning("engine: drain: ", committed_lag.status().message());
      }
    }
    if (absl::Now() >= deadline) {
      resume(EngineState::kRunning);
      LogWarning("engine: drain timed out; in-order mode stays off");
      return absl::DeadlineExceededError(absl::StrCat(
          "the retry backlog was not empty when the deadline passed (",
          lag >= 0 ? absl::StrCat(lag, " records left") : "not measured",
          "); nothing changed: retry threads still run and in-order mode is off. Retry with a "
          "longer deadline"));
    }
    // Paces the checks; a Stop() during the drain ends the wait at once.
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](EngineState* state) { return *state != EngineState::kDraining; },
                              &state_),
                          std::min(deadline, absl::Now() + kDrainCheckInterval));
  }

  std::vector<std::unique_ptr<Worker>> stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping.swap(retries_);
  }
  std::vector<int> ids;
  for (const auto& worker : stopping) ids.push_back(worker->id());
  StopWorkers(stopping, /*graceful=*/true);
  Retire(stopping);
  in_order_.store(true, std::memory_order_relaxed);
  resume(EngineState::kRunning);
  LogInfo("engine: drained ", initial_lag, " retry records, stopped retry threads ", IdList(ids),
          "; in-order mode on");
  return SetInOrderResult{true, ids, std::max<int64_t>(0, initial_lag)};
}

void Engine::StopWorkers(std::vector<std::unique_ptr<Worker>>& workers, bool graceful) {
  // All at once, so their group leaves overlap instead of rebalancing in turn.
  for (auto& worker : workers) worker->RequestStop(graceful);
  for (auto& worker : workers) worker->Join();
}

void Engine::Retire(std::vector<std::unique_ptr<Worker>>& workers) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  for (const auto& worker : workers) retired_.push_back({worker->stats(), now});
  workers.clear();
  auto old = std::partition(retired_.begin(), retired_.end(), [&](const Retired& r) {
    return now - r.stopped_at < kKeepRetired;
  });
  for (auto it = old; it != retired_.end(); ++it) AddCounts(*it->stats, retired_totals_);
  retired_.erase(old, retired_.end());
}

void Engine::Stop() {
  std::vector<std::unique_ptr<Worker>> primaries, retries;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == EngineState::kStopping || state_ == EngineState::kStopped) return;
    const bool started = state_ != EngineState::kCreated;
    state_ = EngineState::kStopping;
    // A control operation in progress finishes first: it owns the workers
    // it took out of the lists.
    mu_.Await(absl::Condition(+[](bool* busy) { return !*busy; }, &control_busy_));
    primaries.swap(primaries_);
    retries.swap(retries_);
    if (!started) {
      state_ = EngineState::kStopped;
      return;
    }
  }
  LogInfo("engine: stopping");
  input_paused_.store(false, std::memory_order_relaxed);
  StopWorkers(primaries, /*graceful=*/true);
  StopWorkers(retries, /*graceful=*/true);
  producer_->Close(absl::Milliseconds(options_.shutdown_timeout_ms));
  Retire(primaries);
  Retire(retries);
  absl::MutexLock lock(&mu_);
  state_ = EngineState::kStopped;
  LogInfo("engine: stopped");
}

absl::Status Engine::ProbeKafka(absl::Duration timeout) const { return producer_->Ping(timeout); }

absl::StatusOr<int64_t> Engine::MeasureRetryBacklog(absl::Duration timeout) {
  absl::StatusOr<int64_t> lag = retry_lag_->Measure(timeout);
  if (lag.ok()) measured_retry_backlog_.store(*lag, std::memory_order_relaxed);
  return lag;
}

std::vector<std::shared_ptr<const ThreadStats>> Engine::Threads() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ThreadStats>> out;
  for (const auto& worker : primaries_) out.push_back(worker->stats());
  for (const auto& worker : retries_) out.push_back(worker->stats());
  return out;
}

absl::Status Engine::ThreadFailure() const {
  for (const auto& s : Threads()) {
    if (s->state() != ThreadState::kFailed) continue;
    return absl::UnavailableError(absl::StrCat("thread ", s->id(), " (", ThreadRoleName(s->role()),
                                               ") failed: ", s->last_error()));
  }
  return absl::OkStatus();
}

std::vector<std::shared_ptr<const ThreadStats>> Engine::RecentlyStopped(
    absl::Duration window) const {
  const absl::Time since = absl::Now() - window;
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ThreadStats>> out;
  for (const Retired& r : retired_) {
    if (r.stopped_at >= since) out.push_back(r.stats);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->id() < b->id(); });
  return out;
}

EngineTotals Engine::Totals() const {
  std::vector<std::shared_ptr<const ThreadStats>> all = Threads();
  EngineTotals t;
  {
    absl::MutexLock lock(&mu_);
    t = retired_totals_;
    for (const Retired& r : retired_) all.push_back(r.stats);
  }
  for (const auto& s : all) AddCounts(*s, t);
  t.retry_backlog = RetryBacklog();
  return t;
}

int64_t Engine::RetryBacklog() const {
  if (const int64_t measured = measured_retry_backlog_.load(std::memory_order_relaxed);
      measured >= 0) {
    return measured;
  }
  // Not measured yet: what the running retry threads know of.
  int64_t backlog = 0;
  for (const auto& s : Threads()) {
    if (s->role() == ThreadRole::kRetry) {
      backlog += s->lag.load(std::memory_order_relaxed) +
                 s->scheduled.load(std::memory_order_relaxed);
    }
  }
  return backlog;
}

}  // namespace retryd
