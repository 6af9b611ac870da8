#include "server/engine/engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/logging.h"

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

}  // namespace

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
  return std::unique_ptr<Engine>(
      new Engine(std::move(options), std::move(processor), *std::move(producer)));
}

Engine::Engine(EngineOptions options, std::unique_ptr<Processor> processor,
               std::unique_ptr<kafka::Producer> producer)
    : options_(std::move(options)),
      processor_(std::move(processor)),
      producer_(std::move(producer)),
      in_order_(options_.in_order),
      context_{&options_, processor_.get(), producer_.get(), &in_order_} {}

Engine::~Engine() { Stop(); }

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
    if (phase_ != Phase::kCreated) return absl::FailedPreconditionError("engine already started");
    phase_ = Phase::kRunning;
  }
  LogInfo("engine: starting ", options_.primary_threads, " primary and ", options_.retry.threads,
          " retry threads", in_order() ? " (in order)" : "");
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
    absl::StatusOr<std::vector<int>> started = StartRetryThreads(options_.retry.threads);
    if (!started.ok()) {
      Stop();
      return started.status();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> Engine::StartRetryThreads(int count) {
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kRunning) return absl::FailedPreconditionError("engine is not running");
    if (in_order()) {
      return absl::FailedPreconditionError(
          "in-order mode excludes retry threads; switch in-order off first");
    }
    const int running = static_cast<int>(retries_.size());
    if (count < 1 || running + count > options_.retry.max_threads) {
      return absl::InvalidArgumentError(absl::StrCat(
          "count must be between 1 and ", options_.retry.max_threads - running, " (retry.max_threads ",
          options_.retry.max_threads, ", ", running, " running)"));
    }
  }
  std::vector<std::unique_ptr<Worker>> started;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<Worker>> worker = StartWorker(ThreadRole::kRetry);
    if (!worker.ok()) {
      StopWorkers(started, /*graceful=*/true);
      return worker.status();
    }
    started.push_back(*std::move(worker));
  }
  std::vector<int> ids;
  absl::MutexLock lock(&mu_);
  for (auto& worker : started) {
    ids.push_back(worker->id());
    retries_.push_back(std::move(worker));
  }
  return ids;
}

absl::StatusOr<std::vector<int>> Engine::StopRetryThreads(int count, bool graceful) {
  if (count < 1) return absl::InvalidArgumentError("count must be at least 1");
  std::vector<std::unique_ptr<Worker>> stopping;
  {
    absl::MutexLock lock(&mu_);
    while (count-- > 0 && !retries_.empty()) {
      stopping.push_back(std::move(retries_.back()));
      retries_.pop_back();
    }
  }
  std::vector<int> ids;
  for (const auto& worker : stopping) ids.push_back(worker->id());
  StopWorkers(stopping, graceful);
  absl::MutexLock lock(&mu_);
  for (const auto& worker : stopping) retired_.push_back(worker->stats());
  return ids;
}

void Engine::StopWorkers(std::vector<std::unique_ptr<Worker>>& workers, bool graceful) {
  // All at once, so their group leaves overlap instead of rebalancing in turn.
  for (auto& worker : workers) worker->RequestStop(graceful);
  for (auto& worker : workers) worker->Join();
}

void Engine::Stop() {
  std::vector<std::unique_ptr<Worker>> primaries, retries;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kStopped) return;
    phase_ = Phase::kStopped;
    primaries.swap(primaries_);
    retries.swap(retries_);
  }
  LogInfo("engine: stopping");
  StopWorkers(primaries, /*graceful=*/true);
  StopWorkers(retries, /*graceful=*/true);
  producer_->Close(absl::Milliseconds(options_.shutdown_timeout_ms));
  absl::MutexLock lock(&mu_);
  for (const auto& worker : primaries) retired_.push_back(worker->stats());
  for (const auto& worker : retries) retired_.push_back(worker->stats());
  LogInfo("engine: stopped");
}

std::vector<std::shared_ptr<const ThreadStats>> Engine::Threads() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ThreadStats>> out;
  for (const auto& worker : primaries_) out.push_back(worker->stats());
  for (const auto& worker : retries_) out.push_back(worker->stats());
  return out;
}

EngineTotals Engine::Totals() const {
  std::vector<std::shared_ptr<const ThreadStats>> all = Threads();
  {
    absl::MutexLock lock(&mu_);
    all.insert(all.end(), retired_.begin(), retired_.end());
  }
  EngineTotals t;
  for (const auto& s : all) {
    const int64_t processed = s->processed.load(std::memory_order_relaxed);
    if (s->role() == ThreadRole::kPrimary) t.consumed += processed;
    t.processed += processed;
    t.succeeded += s->succeeded.load(std::memory_order_relaxed);
    t.failed_attempts += s->failed_attempts.load(std::memory_order_relaxed);
    t.sent_to_retry += s->sent_to_retry.load(std::memory_order_relaxed);
    t.dead_lettered += s->dead_lettered.load(std::memory_order_relaxed);
    t.in_flight += s->in_flight.load(std::memory_order_relaxed);
    if (s->role() == ThreadRole::kRetry && s->state() != ThreadState::kStopped &&
        s->state() != ThreadState::kFailed) {
      t.retry_backlog += s->lag.load(std::memory_order_relaxed) +
                         s->scheduled.load(std::memory_order_relaxed);
    }
  }
  return t;
}

}  // namespace retryd
