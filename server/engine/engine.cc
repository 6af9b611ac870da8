#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/common/debug_check.h"
#include "server/common/error_reason.h"
#include "server/common/logging.h"
#include "server/engine/autoscaler.h"
#include "server/engine/engine_impl.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/ordering_switch.h"
#include "server/engine/retry_thread_pool.h"
#include "server/engine/steering/retry_tiers.h"
#include "server/engine/worker/worker.h"
#include "server/kafka/topic_reader.h"
#include "server/kafka/topics.h"

namespace retryd::engine {
namespace {

absl::Status CheckOptions(const EngineOptions& o) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (o.bootstrap_servers.empty()) return invalid("bootstrap_servers is empty");
  if (o.group_id.empty()) return invalid("group_id is empty");
  if (o.input_topics.empty()) return invalid("no input topics");
  if (o.retry.tiers.empty() && o.retry.topic.empty()) return invalid("retry.topic is empty");
  if (absl::Status s = CheckTiers(o.retry); !s.ok()) return s;
  if (!o.retry.tiers.empty() && o.ordering == Ordering::kKey) {
    return invalid(
        "key order with retry tiers is not supported: a key's records could be spread over "
        "several tiers");
  }
  if (o.dead_letter_topic.empty()) return invalid("dead_letter_topic is empty");
  if (o.primary_threads < 1) return invalid("primary_threads must be at least 1");
  if (o.retry.threads < 0 || o.retry.threads > o.retry.max_threads) {
    return invalid("retry.threads must be between 0 and retry.max_threads (", o.retry.max_threads,
                   ")");
  }
  if (o.ordering == Ordering::kInOrder && o.retry.threads > 0) {
    return absl::FailedPreconditionError(
        "in_order excludes retry threads: set retry.threads to 0 or in_order to false");
  }
  if (o.ordering == Ordering::kInOrder && o.retry.min_threads > 0) {
    return absl::FailedPreconditionError(
        "in_order excludes retry threads: set retry.min_threads to 0 or in_order to false");
  }
  for (const RetryTier& tier : o.retry.tiers) {
    if (o.ordering == Ordering::kInOrder && tier.threads > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "in_order excludes retry threads: set the threads of tier ", tier.topic, " to 0"));
    }
  }
  if (o.retry.min_threads < 0 || o.retry.min_threads > o.retry.threads) {
    return invalid("retry.min_threads must be between 0 and retry.threads (", o.retry.threads, ")");
  }
  if (o.retry.autoscale.enabled &&
      (o.retry.autoscale.backlog_per_thread < 1 || o.retry.autoscale.idle_exit_ms < 1)) {
    return invalid("retry.autoscale.backlog_per_thread and idle_exit_ms must be at least 1");
  }
  if (o.retry.max_attempts < 1) return invalid("retry.max_attempts must be at least 1");
  if (o.retry.lookahead < 1) return invalid("retry.lookahead must be at least 1");
  if (o.max_in_flight < 1) return invalid("max_in_flight must be at least 1");
  if (o.max_held_bytes < 0) return invalid("max_held_bytes must not be negative");
  if (o.commit_interval_ms < 1) return invalid("commit_interval_ms must be at least 1");
  if (o.liveness_stall_ms < 1) return invalid("liveness_stall_ms must be at least 1");
  if (o.downstream.outage_after < 1) return invalid("downstream.outage_after must be at least 1");
  if (o.downstream.probe_initial_ms < 1 ||
      o.downstream.probe_max_ms < o.downstream.probe_initial_ms) {
    return invalid("downstream probe delays must be 1 <= probe_initial_ms <= probe_max_ms");
  }
  return absl::OkStatus();
}

std::string IdList(const std::vector<int>& ids) { return absl::StrJoin(ids, ", "); }

// How long stopped threads stay visible one by one (RecentlyStopped).
constexpr absl::Duration kKeepRetired = absl::Minutes(2);

// Adds one thread's counts to `t` (not the backlog: see RetryBacklog()).
void AddCounts(const ThreadStats& s, EngineTotals& t) {
  const Counters counts = s.counters.Read();
  if (s.role() == ThreadRole::kPrimary) t.consumed += counts.processed;
  t += counts;
  t.in_flight += s.in_flight.load(std::memory_order_relaxed);
}

// How long Start() waits, in all, for the metadata of the topics it produces to.
constexpr absl::Duration kPrepareTopicsTimeout = absl::Seconds(5);

// Wait conditions on mu_ that a cancellation (see WakeOnCancel) also ends.
struct FreeOrCancelled {
  bool operator()() const { return !*busy || (cancel != nullptr && cancel->cancelled()); }
  const bool* busy;
  const Cancellation* cancel;
};

// The producer every thread hands its records to (and each one that
// replaces it after a fatal error).
kafka::ProducerOptions ProducerOptionsFor(const EngineOptions& options) {
  kafka::ProducerOptions producer_options;
  producer_options.bootstrap_servers = options.bootstrap_servers;
  producer_options.properties = options.kafka_properties;
  producer_options.client_id = "retryd-producer";
  return producer_options;
}

}  // namespace

const char* OrderingName(Ordering ordering) {
  switch (ordering) {
    case Ordering::kUnordered:
      return "UNORDERED";
    case Ordering::kInOrder:
      return "IN_ORDER";
    case Ordering::kKey:
      return "KEY";
  }
  return "UNKNOWN";
}

const char* EngineStateName(EngineState state) {
  switch (state) {
    case EngineState::kCreated:
      return "CREATED";
    case EngineState::kRunning:
      return "RUNNING";
    case EngineState::kDraining:
      return "DRAINING";
    case EngineState::kStopping:
      return "STOPPING";
    case EngineState::kStopped:
      return "STOPPED";
  }
  return "UNKNOWN";
}

absl::StatusOr<std::unique_ptr<Engine::Impl>> Engine::Impl::Create(
    EngineOptions options, std::unique_ptr<Processor> processor) {
  if (processor == nullptr) return absl::InvalidArgumentError("no processor");
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  NormalizeTiers(options.retry);
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer =
      kafka::Producer::Create(ProducerOptionsFor(options));
  if (!producer.ok()) return producer.status();
  std::vector<std::string> tier_topics;
  for (const RetryTier& tier : options.retry.tiers) tier_topics.push_back(tier.topic);
  absl::StatusOr<std::unique_ptr<kafka::GroupLagProbe>> retry_lag =
      kafka::GroupLagProbe::Create(options.bootstrap_servers, options.kafka_properties,
                                   absl::StrCat(options.group_id, ".retry"), tier_topics);
  if (!retry_lag.ok()) return retry_lag.status();
  return std::unique_ptr<Impl>(new Impl(std::move(options), std::move(processor),
                                        *std::move(producer), *std::move(retry_lag)));
}

// The engine as the autoscaler sees it: its own control operations.
class Engine::Impl::Scaling : public ScalingTarget {
 public:
  explicit Scaling(Impl& engine) : engine_(engine) {}

  bool Scalable() const override {
    return engine_.state() == EngineState::kRunning && !engine_.in_order();
  }
  absl::StatusOr<std::vector<int64_t>> MeasureTierBacklogs(absl::Duration timeout) override {
    return engine_.MeasureTierBacklogs(timeout);
  }
  std::vector<std::shared_ptr<const ThreadStats>> Threads() const override {
    return engine_.Threads();
  }
  absl::StatusOr<std::vector<int>> StartRetryThreads(int count, int tier,
                                                     absl::Time deadline) override {
    return engine_.StartRetryThreads(count, deadline, tier);
  }
  absl::StatusOr<std::vector<int>> StopRetryThreadsById(const std::vector<int>& ids,
                                                        absl::Time deadline) override {
    return engine_.StopRetryThreadsById(ids, /*graceful=*/true, deadline);
  }

 private:
  Impl& engine_;
};

Engine::Impl::Impl(EngineOptions options, std::unique_ptr<Processor> processor,
                   std::unique_ptr<kafka::Producer> producer,
                   std::unique_ptr<kafka::GroupLagProbe> retry_lag)
    : options_(std::move(options)),
      processor_(std::move(processor)),
      producers_(std::move(producer),
                 [this] { return kafka::Producer::Create(ProducerOptionsFor(options_)); }),
      retry_lag_(std::move(retry_lag)),
      ordering_(options_.ordering),
      gate_(options_.downstream, processor_.get(),
            absl::Milliseconds(options_.retry.backoff.max_ms)),
      context_{&options_,
               processor_.get(),
               &producers_,
               &ordering_,
               &input_paused_,
               &gate_,
               &parking_,
               &key_order_coming_,
               keyed_sends_back_,
               [this](absl::Duration timeout) { return ReadParkedRecords(timeout); },
               [this](absl::Duration timeout) { return retry_lag_->Committed(timeout); }},
      ordering_switch_(std::make_unique<OrderingSwitch>(*this)),
      retry_pool_(std::make_unique<RetryThreadPool>(*this)),
      scaling_(std::make_unique<Scaling>(*this)),
      autoscaler_(
          options_.retry.autoscale.enabled
              ? std::make_unique<Autoscaler>(*scaling_, options_.retry,
                                             absl::Milliseconds(options_.shutdown_timeout_ms))
              : nullptr) {}

Engine::Impl::~Impl() { Stop(); }

EngineState Engine::Impl::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

absl::Status Engine::Impl::CheckRunning() const {
  mu_.AssertHeld();
  if (state_ != EngineState::kRunning && state_ != EngineState::kDraining) {
    return absl::FailedPreconditionError(
        absl::StrCat("the engine is ", EngineStateName(state_), ", not running"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Engine::Impl::ControlSlot> Engine::Impl::BeginControl(absl::Time deadline,
                                                                     const Cancellation* cancel) {
  absl::MutexLock lock(&mu_);
  if (state_ == EngineState::kDraining && control_busy_) {
    return DrainRunningError();
  }
  const FreeOrCancelled free_or_cancelled{&control_busy_, cancel};
  mu_.AwaitWithDeadline(absl::Condition(&free_or_cancelled), deadline);
  if (cancel != nullptr && cancel->cancelled()) {
    return absl::CancelledError(
        "the call was cancelled before the operation began; nothing changed");
  }
  if (control_busy_) {
    return WithReason(
        absl::DeadlineExceededError(
            "another control operation was still in progress when the deadline passed"),
        reason::kControlBusy);
  }
  if (absl::Status s = CheckRunning(); !s.ok()) return WithReason(s, reason::kEngineNotRunning);
  return TakeControlLocked();
}

absl::Status Engine::Impl::DrainRunningError() {
  return WithReason(absl::FailedPreconditionError(
                        "a switch of the ordering mode is under way (input paused while it "
                        "reads or drains the retry backlog); nothing changed. Try again when "
                        "it is over, or cancel its drain"),
                    reason::kDrainRunning);
}

Engine::Impl::ControlSlot Engine::Impl::TakeControlLocked() {
  mu_.AssertHeld();
  control_busy_ = true;
  return ControlSlot(this);
}

void Engine::Impl::AssertControlHeld(const ControlSlot* control) const {
  if constexpr (kDebugChecks) {
    absl::MutexLock lock(&mu_);
    RETRYD_DCHECK(control_busy_, "the engine's control slot is held");
    RETRYD_DCHECK(control == nullptr || control->engine_ == this,
                  "the control slot held is this engine's");
  }
}

void Engine::Impl::EndControl() {
  absl::MutexLock lock(&mu_);
  control_busy_ = false;
}

Engine::Impl::ControlSlot::~ControlSlot() {
  if (engine_ != nullptr) engine_->EndControl();
}

absl::StatusOr<std::unique_ptr<Worker>> Engine::Impl::StartWorker(ThreadRole role, int id,
                                                                  int tier) {
  if (id == 0) {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
  }
  auto worker = std::make_unique<Worker>(id, role, context_, tier);
  if (absl::Status s = worker->Start(); !s.ok()) return s;
  return worker;
}

absl::Status Engine::Impl::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != EngineState::kCreated) {
      return absl::FailedPreconditionError("engine already started");
    }
    state_ = EngineState::kRunning;
  }
  int retry_threads = 0;
  for (const RetryTier& tier : options_.retry.tiers) {
    retry_threads += TierStartThreads(options_.retry, tier);
  }
  LogInfo("engine: starting ", options_.primary_threads, " primary and ", retry_threads,
          " retry threads", options_.retry.tiers.size() > 1 ? " (over the retry tiers)" : "",
          ", ordering ", OrderingName(ordering()));
  // Until StartInOrder() has seen the retry backlog empty. (In key order,
  // each primary learns the keys parked in the retry topic when it is
  // assigned its partitions.)
  const bool in_order = options_.ordering == Ordering::kInOrder;
  if (in_order) input_paused_.store(true, std::memory_order_relaxed);
  PrepareProducedTopics();
  if (absl::Status s = StartConfiguredThreads(); !s.ok()) {
    Stop();
    return s;
  }
  if (in_order) {
    // Held as a control operation, so that none interleaves with it; in the
    // background, because emptying a backlog may take long.
    absl::MutexLock lock(&mu_);
    state_ = EngineState::kDraining;
    start_in_order_thread_ = std::thread(&Engine::Impl::StartInOrder, this, TakeControlLocked());
  }
  if (autoscaler_ != nullptr) autoscaler_->Start();
  return absl::OkStatus();
}

void Engine::Impl::PrepareProducedTopics() {
  // So that the first success, retry or dead letter does not wait a second
  // for the producer to learn its topic. Not fatal: it would learn it later.
  std::vector<std::string> produced = {options_.dead_letter_topic};
  for (const RetryTier& tier : options_.retry.tiers) produced.push_back(tier.topic);
  if (!options_.output_topic.empty()) produced.push_back(options_.output_topic);
  if (absl::Status s = producers_.Current()->PrepareTopics(produced, kPrepareTopicsTimeout);
      !s.ok()) {
    LogWarning("engine: ", s.message());
  }
}

absl::Status Engine::Impl::StartConfiguredThreads() {
  for (int i = 0; i < options_.primary_threads; ++i) {
    absl::StatusOr<std::unique_ptr<Worker>> worker = StartWorker(ThreadRole::kPrimary);
    if (!worker.ok()) return worker.status();
    absl::MutexLock lock(&mu_);
    primaries_.push_back(*std::move(worker));
  }
  // Every tier's threads at once, so they join the retry group together;
  // not waiting for the join: start-up should not block on it.
  std::vector<int> started;
  for (size_t tier = 0; tier < options_.retry.tiers.size(); ++tier) {
    const int count = TierStartThreads(options_.retry, options_.retry.tiers[tier]);
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<std::unique_ptr<Worker>> worker =
          StartWorker(ThreadRole::kRetry, 0, static_cast<int>(tier));
      if (!worker.ok()) return worker.status();
      started.push_back((*worker)->id());
      absl::MutexLock lock(&mu_);
      retries_.push_back(*std::move(worker));
    }
  }
  if (!started.empty()) LogInfo("engine: retry threads: started [", IdList(started), "]");
  return absl::OkStatus();
}

void Engine::Impl::StartInOrder(ControlSlot control) {
  SetThreadName("in-order-start");
  SetThreadComponent("engine");
  LogInfo(
      "engine: in_order is configured: input waits until the retry backlog an earlier run "
      "may have left is empty");
  // ordering_ is in order from the start, so the primaries add nothing to
  // the retry topic; input stays paused all the same, since a record left
  // there came before the input that follows it.
  absl::StatusOr<SetOrderingResult> result = ordering_switch_->SwitchToInOrder(
      control, absl::InfiniteFuture(), /*drain=*/true, /*cancel=*/nullptr);
  if (!result.ok()) LogWarning("engine: in-order start: ", result.status().message());
}

Cancellation::Subscription Engine::Impl::WakeOnCancel(Cancellation* cancel) {
  if (cancel == nullptr) return {};
  // Releasing mu_ makes its waiters evaluate their conditions again.
  return cancel->OnCancel([this] { absl::MutexLock lock(&mu_); });
}

void Engine::Impl::CheckpointRetryThreads(const std::vector<Worker*>& workers,
                                          absl::Time deadline) {
  if (workers.empty()) return;
  deadline = std::min(deadline, absl::Now() + absl::Milliseconds(options_.shutdown_timeout_ms));
  for (Worker* worker : workers) worker->RequestCheckpoint(deadline);
  for (Worker* worker : workers) {
    // A worker's last commit may take a second past the deadline.
    if (!worker->AwaitCheckpoint(deadline + absl::Seconds(1))) {
      LogWarning("engine: retry thread ", worker->id(),
                 " did not commit before the rebalance in time; it may repeat some records");
    }
  }
}

void Engine::Impl::ReleaseRetryThreads(const std::vector<Worker*>& workers, absl::Time deadline) {
  for (Worker* worker : workers) {
    if (!worker->AwaitRebalanced(deadline)) {
      LogWarning("engine: retry thread ", worker->id(),
                 " was not through the rebalance in time; it resumes all the same");
    }
  }
  for (Worker* worker : workers) worker->ReleaseCheckpoint();
}

int64_t Engine::Impl::SessionTimeoutMs() const {
  int64_t ms = 45000;  // librdkafka's default.
  if (auto it = options_.kafka_properties.find("session.timeout.ms");
      it != options_.kafka_properties.end()) {
    if (!absl::SimpleAtoi(it->second, &ms)) ms = 45000;
  }
  return ms;
}

int Engine::Impl::RetryThreadCount() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(retries_.size());
}

void Engine::Impl::StopWorkers(std::vector<std::unique_ptr<Worker>>& workers, bool graceful,
                               absl::Time deadline) {
  // All at once, so their group leaves overlap instead of rebalancing in
  // turn, and their waits share the deadline instead of adding up.
  for (auto& worker : workers) worker->RequestStop(graceful, deadline);
  for (auto& worker : workers) worker->Join();
}

void Engine::Impl::Retire(std::vector<std::unique_ptr<Worker>>& workers) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  for (const auto& worker : workers) retired_.push_back({worker->stats(), now});
  workers.clear();
  auto old = std::partition(retired_.begin(), retired_.end(),
                            [&](const Retired& r) { return now - r.stopped_at < kKeepRetired; });
  for (auto it = old; it != retired_.end(); ++it) AddCounts(*it->stats, retired_totals_);
  retired_.erase(old, retired_.end());
}

void Engine::Impl::Stop() {
  // One deadline for the whole stop, a control operation's end included;
  // each worker's last commit and group leave get a little past it (see
  // Worker::RequestStop), the producer only what is left of it: the
  // workers awaited its records already.
  const absl::Time deadline = StopDeadline();
  std::vector<std::unique_ptr<Worker>> primaries, retries;
  std::thread start_in_order;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == EngineState::kStopping || state_ == EngineState::kStopped) return;
    const bool started = state_ != EngineState::kCreated;
    state_ = EngineState::kStopping;
    // A control operation in progress finishes first: it owns the workers
    // it took out of the lists.
    mu_.Await(absl::Condition(
        +[](bool* busy) { return !*busy; }, &control_busy_));
    primaries.swap(primaries_);
    retries.swap(retries_);
    start_in_order.swap(start_in_order_thread_);
    if (!started) {
      state_ = EngineState::kStopped;
      return;
    }
  }
  if (start_in_order.joinable()) start_in_order.join();  // Ended: control_busy_ was clear.
  // Its next operation finds the engine stopping and does nothing.
  if (autoscaler_ != nullptr) autoscaler_->Stop();
  LogInfo("engine: stopping (within ", options_.shutdown_timeout_ms, " ms)");
  input_paused_.store(false, std::memory_order_relaxed);
  // Retry threads hand back what they hold and commit first (see
  // CheckpointRetryThreads), so their group's rebalance repeats nothing.
  std::vector<Worker*> leaving;
  for (const auto& worker : retries) leaving.push_back(worker.get());
  CheckpointRetryThreads(leaving, deadline);
  // Primaries and retry threads together: neither waits for the other's
  // records, and one after the other their waits would add up.
  std::vector<std::unique_ptr<Worker>> all = std::move(primaries);
  for (auto& worker : retries) all.push_back(std::move(worker));
  StopWorkers(all, /*graceful=*/true, deadline);
  producers_.Close(std::max(absl::ZeroDuration(), deadline - absl::Now()));
  Retire(all);
  absl::MutexLock lock(&mu_);
  state_ = EngineState::kStopped;
  LogInfo("engine: stopped");
}

template <typename Make>
std::vector<std::pair<int, std::shared_ptr<WorkerRequest>>> Engine::Impl::PostToWorkers(
    Make make) const {
  std::vector<std::pair<int, std::shared_ptr<WorkerRequest>>> posted;
  // mu_ keeps the workers alive while they are posted to; Post() never
  // blocks.
  absl::MutexLock lock(&mu_);
  for (const auto* workers : {&primaries_, &retries_}) {
    for (const auto& worker : *workers) {
      std::shared_ptr<WorkerRequest> request = make();
      worker->Post(request);
      posted.emplace_back(worker->id(), std::move(request));
    }
  }
  return posted;
}

namespace {

using PostedRequests = std::vector<std::pair<int, std::shared_ptr<WorkerRequest>>>;

// Waits until every request of `posted` is answered, `deadline` passes or
// `cancel` (if given) is cancelled; abandons the others (a worker that has
// not served one yet drops it) and returns their threads' ids.
std::vector<int> AwaitAnswers(const PostedRequests& posted, absl::Time deadline,
                              Cancellation* cancel) {
  std::optional<Cancellation::Subscription> wake;
  if (cancel != nullptr) {
    wake.emplace(cancel->OnCancel([&posted] {
      for (const auto& [id, request] : posted) request->Wake();
    }));
  }
  std::vector<int> unanswered;
  for (const auto& [id, request] : posted) {
    if (!request->Await(deadline, cancel) && request->Abandon()) unanswered.push_back(id);
  }
  return unanswered;
}

}  // namespace

InFlightList Engine::Impl::ListInFlight(size_t limit, absl::Time deadline,
                                        Cancellation* cancel) const {
  const PostedRequests posted = PostToWorkers([&] { return WorkerRequest::List(limit, deadline); });
  InFlightList list;
  list.unanswered_thread_ids = AwaitAnswers(posted, deadline, cancel);
  for (const auto& [id, request] : posted) {
    if (std::find(list.unanswered_thread_ids.begin(), list.unanswered_thread_ids.end(), id) !=
        list.unanswered_thread_ids.end()) {
      continue;
    }
    const absl::Status status = request->status();
    if (absl::IsDeadlineExceeded(status)) {
      list.unanswered_thread_ids.push_back(id);  // It took the request up too late.
    } else if (status.ok()) {
      list.total += request->total();
      for (InFlightRecord& r : request->TakeRecords()) list.records.push_back(std::move(r));
    }
    // Otherwise it is stopping: it holds nothing any more.
  }
  KeepOldest(list.records, limit);
  return list;
}

absl::StatusOr<int> Engine::Impl::DeadLetterRecord(const RecordCoordinates& record,
                                                   absl::Time deadline, Cancellation* cancel) {
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckRunning(); !s.ok()) return s;
  }
  // Every thread answers NOT_FOUND but the one holding the record, which
  // answers once the dead-letter topic has acknowledged it.
  const PostedRequests posted =
      PostToWorkers([&] { return WorkerRequest::DeadLetter(record, deadline); });
  std::vector<int> unanswered = AwaitAnswers(posted, deadline, cancel);
  std::optional<int> moved_by;
  absl::Status refused;
  for (const auto& [id, request] : posted) {
    if (std::find(unanswered.begin(), unanswered.end(), id) != unanswered.end()) continue;
    const absl::Status status = request->status();
    if (status.ok()) {
      if (!moved_by.has_value()) moved_by = id;
    } else if (absl::IsDeadlineExceeded(status)) {
      unanswered.push_back(id);
    } else if (!absl::IsNotFound(status) && !absl::IsUnavailable(status) && refused.ok()) {
      refused = status;
    }
  }
  const std::string name = absl::StrCat(record.topic, "/", record.partition, "@", record.offset);
  if (moved_by.has_value()) {
    LogInfo("engine: ", name, " dead-lettered by thread ", *moved_by, " at an operator's request");
    return *moved_by;
  }
  if (!refused.ok()) return refused;
  if (!unanswered.empty()) {
    const bool cancelled = cancel != nullptr && cancel->cancelled();
    const std::string why = absl::StrCat(
        cancelled ? "the call was cancelled" : "the deadline passed", " before threads ",
        IdList(unanswered), " answered; if one holds ", name,
        " and had taken the request up, it may still be dead-lettered (ListInFlight tells)");
    return cancelled ? absl::CancelledError(why) : absl::DeadlineExceededError(why);
  }
  return absl::NotFoundError(absl::StrCat(
      "no thread holds ", name,
      " (it is not in flight here: done already, not read yet, or held by another instance)"));
}

absl::Status Engine::Impl::ProbeKafka(absl::Duration timeout) const {
  kafka::ClusterProbe* probe = nullptr;
  {
    // Made on first use: an engine nobody probes (no control server)
    // keeps no connection to every broker.
    absl::MutexLock lock(&cluster_probe_mu_);
    if (cluster_probe_ == nullptr) {
      absl::StatusOr<std::unique_ptr<kafka::ClusterProbe>> made =
          kafka::ClusterProbe::Create(options_.bootstrap_servers, options_.kafka_properties);
      if (!made.ok()) return made.status();
      cluster_probe_ = *std::move(made);
    }
    probe = cluster_probe_.get();
  }
  return probe->Ping(timeout);  // Blocks: outside the lock.
}

absl::StatusOr<int64_t> Engine::Impl::MeasureRetryBacklog(absl::Duration timeout) {
  absl::StatusOr<std::vector<int64_t>> each = MeasureTierBacklogs(timeout);
  if (!each.ok()) return each.status();
  int64_t lag = 0;
  for (int64_t l : *each) lag += l;
  return lag;
}

absl::StatusOr<std::vector<int64_t>> Engine::Impl::MeasureTierBacklogs(absl::Duration timeout) {
  const LatestMeasurement::Ticket ticket = measured_retry_backlog_.Begin();
  absl::StatusOr<std::vector<std::map<int32_t, int64_t>>> partitions =
      retry_lag_->MeasurePartitions(timeout);
  if (!partitions.ok()) return partitions.status();
  std::vector<int64_t> each;
  std::vector<PartitionBacklog> by_partition;
  int64_t lag = 0;
  for (size_t tier = 0; tier < partitions->size(); ++tier) {
    int64_t tier_lag = 0;
    for (const auto& [partition, l] : (*partitions)[tier]) {
      tier_lag += l;
      by_partition.push_back({static_cast<int>(tier), partition, l});
    }
    each.push_back(tier_lag);
    lag += tier_lag;
  }
  measured_retry_backlog_.Store(ticket, lag);
  absl::MutexLock lock(&tier_backlog_mu_);
  if (ticket > tier_backlog_ticket_) {
    tier_backlog_ticket_ = ticket;
    tier_backlog_ = each;
    partition_backlog_ = std::move(by_partition);
  }
  return each;
}

std::vector<PartitionBacklog> Engine::Impl::PartitionBacklogs() const {
  absl::MutexLock lock(&tier_backlog_mu_);
  return partition_backlog_;
}

std::vector<int64_t> Engine::Impl::TierBacklogs(
    const std::vector<std::shared_ptr<const ThreadStats>>& running) const {
  {
    absl::MutexLock lock(&tier_backlog_mu_);
    if (!tier_backlog_.empty()) return tier_backlog_;
  }
  // Not measured yet: what the running retry threads know of.
  std::vector<int64_t> backlog(options_.retry.tiers.size(), 0);
  for (const auto& s : running) {
    if (s->role() == ThreadRole::kRetry && s->tier() >= 0 &&
        s->tier() < static_cast<int>(backlog.size())) {
      backlog[s->tier()] +=
          s->lag.load(std::memory_order_relaxed) + s->scheduled.load(std::memory_order_relaxed);
    }
  }
  return backlog;
}

std::vector<ScalingEvent> Engine::Impl::ScalingEvents() const {
  if (autoscaler_ == nullptr) return {};
  return autoscaler_->Events();
}

std::vector<std::shared_ptr<const ThreadStats>> Engine::Impl::Threads() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ThreadStats>> out;
  for (const auto& worker : primaries_) out.push_back(worker->stats());
  for (const auto& worker : retries_) out.push_back(worker->stats());
  return out;
}

absl::Status Engine::Impl::ThreadFailure() const {
  for (const auto& s : Threads()) {
    if (s->state() != ThreadState::kFailed) continue;
    return absl::UnavailableError(absl::StrCat("thread ", s->id(), " (", ThreadRoleName(s->role()),
                                               ") failed: ", s->last_error()));
  }
  return absl::OkStatus();
}

absl::Status Engine::Impl::Liveness() const {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const auto& s : Threads()) {
    // A thread that failed turns no more either: it is counted, so that a
    // failure nothing recovers from ends in a restart.
    const int64_t still_ms = now_ms - s->loop_turned_ms();
    if (still_ms <= options_.liveness_stall_ms) continue;
    return absl::UnavailableError(
        absl::StrCat("thread ", s->id(), " (", ThreadRoleName(s->role()), ", ",
                     ThreadStateName(s->state()), ") has not turned its loop for ", still_ms,
                     " ms (liveness_stall_ms ", options_.liveness_stall_ms, ")"));
  }
  return absl::OkStatus();
}

absl::Status Engine::Impl::Readiness() const {
  const EngineState now = state();
  if (now != EngineState::kRunning && now != EngineState::kDraining) {
    return absl::UnavailableError(absl::StrCat("the engine is ", EngineStateName(now)));
  }
  if (absl::Status failed = ThreadFailure(); !failed.ok()) return failed;
  if (producers_.Recovering()) {
    return absl::UnavailableError(
        "the Kafka producer failed for good; the threads rewind to their last commits and move "
        "to a new one");
  }
  bool retry_group_joined = false;
  int retry_threads = 0;
  for (const auto& s : Threads()) {
    const bool joined = s->joined.HasBeenNotified();
    if (s->role() == ThreadRole::kPrimary && !joined) {
      return absl::UnavailableError(
          absl::StrCat("primary thread ", s->id(), " has not joined its consumer group yet"));
    }
    if (s->role() == ThreadRole::kRetry) {
      ++retry_threads;
      retry_group_joined = retry_group_joined || joined;
    }
  }
  if (retry_threads > 0 && !retry_group_joined) {
    return absl::UnavailableError("no retry thread has joined the retry group yet");
  }
  return absl::OkStatus();
}

std::vector<std::shared_ptr<const ThreadStats>> Engine::Impl::RecentlyStopped(
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

EngineTotals Engine::Impl::Totals() const {
  std::vector<std::shared_ptr<const ThreadStats>> all = Threads();
  const int64_t retry_backlog = RetryBacklog(all);
  EngineTotals t;
  {
    absl::MutexLock lock(&mu_);
    t = retired_totals_;
    for (const Retired& r : retired_) all.push_back(r.stats);
  }
  for (const auto& s : all) AddCounts(*s, t);
  t.retry_backlog = retry_backlog;
  return t;
}

int64_t Engine::Impl::RetryBacklog(
    const std::vector<std::shared_ptr<const ThreadStats>>& running) const {
  if (const std::optional<int64_t> measured = measured_retry_backlog_.value()) return *measured;
  // Not measured yet: what the running retry threads know of.
  int64_t backlog = 0;
  for (const auto& s : running) {
    if (s->role() == ThreadRole::kRetry) {
      backlog +=
          s->lag.load(std::memory_order_relaxed) + s->scheduled.load(std::memory_order_relaxed);
    }
  }
  return backlog;
}

absl::Status Engine::Impl::RaiseProducerFatalErrorForTest() const {
  return producers_.Current()->RaiseFatalErrorForTest("raised on purpose, for a test");
}

}  // namespace retryd::engine
