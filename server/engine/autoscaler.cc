#include "server/engine/autoscaler.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"

namespace retryd::engine {
namespace {

// How long one look at the retry backlog may block; Stop() waits for it.
constexpr absl::Duration kMeasureTimeout = absl::Seconds(1);

// Often enough to notice an idle thread within a fraction of idle_exit_ms,
// seldom enough that measuring the backlog costs Kafka little.
absl::Duration Tick(const AutoscaleOptions& options) {
  return std::clamp(absl::Milliseconds(options.idle_exit_ms) / 2, absl::Milliseconds(100),
                    absl::Seconds(1));
}

std::string IdleReason(const RetryThreadView& t) {
  return absl::StrCat("idle for ", t.idle_ms, " ms (",
                      t.has_partitions ? "nothing held, due or arriving" : "no partitions", ")");
}

}  // namespace

ScalingPlan PlanScaling(const ScalingInput& input, const RetryOptions& options) {
  ScalingPlan plan;
  const int running = static_cast<int>(input.threads.size());
  const int64_t per_thread = std::max<int64_t>(1, options.autoscale.backlog_per_thread);
  const int64_t backlog = input.backlog;
  if (running < options.min_threads) {
    plan.start = std::min(options.min_threads, options.max_threads) - running;
    plan.start_reason = absl::StrCat(running, " retry threads run, below retry.min_threads (",
                                     options.min_threads, ")");
    return plan;
  }
  if (backlog > 0 && running == 0 && options.max_threads > 0) {
    plan.start = 1;
    plan.start_reason =
        absl::StrCat("retry backlog of ", backlog, " records and no retry thread running");
    return plan;
  }
  // partitions == 0 with threads running: they are still joining the group.
  if (backlog > per_thread * running && input.partitions > 0) {
    const int64_t wanted = (backlog + per_thread - 1) / per_thread;
    const int target =
        static_cast<int>(std::min<int64_t>({options.max_threads, input.partitions, wanted}));
    if (target > running) {
      plan.start = target - running;
      plan.start_reason =
          absl::StrCat("retry backlog of ", backlog, " records is over backlog_per_thread (",
                       per_thread, ") x ", running, " retry threads");
      return plan;
    }
  }

  std::vector<const RetryThreadView*> idle;
  for (const RetryThreadView& t : input.threads) {
    if (t.idle_ms >= options.autoscale.idle_exit_ms) idle.push_back(&t);
  }
  // Those without partitions first (stopping one moves no work), then the
  // most recently started.
  std::sort(idle.begin(), idle.end(), [](const RetryThreadView* a, const RetryThreadView* b) {
    if (a->has_partitions != b->has_partitions) return !a->has_partitions;
    return a->id > b->id;
  });
  const int keep = std::max(options.min_threads, backlog != 0 ? 1 : 0);
  int left = running;
  for (const RetryThreadView* t : idle) {
    if (left - 1 < keep) break;
    // Its partitions go to the others: only if they are not then over the
    // mark that would start a thread again.
    if (t->has_partitions && !(backlog >= 0 && backlog <= per_thread * (left - 1))) continue;
    plan.stop.push_back({t->id, IdleReason(*t)});
    --left;
  }
  return plan;
}

Autoscaler::Autoscaler(ScalingTarget& target, RetryOptions options,
                       absl::Duration operation_timeout)
    : target_(target),
      options_(std::move(options)),
      tick_(Tick(options_.autoscale)),
      operation_timeout_(operation_timeout) {}

Autoscaler::~Autoscaler() { Stop(); }

void Autoscaler::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_ || thread_.joinable()) return;
    thread_ = std::thread(&Autoscaler::Run, this);
  }
  LogInfo("autoscale: on: retry threads between ", options_.min_threads, " and ",
          options_.max_threads, ", more above ", options_.autoscale.backlog_per_thread,
          " retry records per thread, stopping after ", options_.autoscale.idle_exit_ms,
          " ms idle");
}

void Autoscaler::Stop() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    thread.swap(thread_);
  }
  if (thread.joinable()) thread.join();
}

std::vector<ScalingEvent> Autoscaler::Events() const {
  absl::MutexLock lock(&mu_);
  return {events_.begin(), events_.end()};
}

void Autoscaler::Run() {
  SetThreadName("autoscale");
  SetThreadComponent("engine");
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      // Paces the looks; Stop() ends the wait at once.
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), tick_)) return;
    }
    Step();
  }
}

ScalingInput Autoscaler::Observe(int tier, int64_t backlog) const {
  ScalingInput input;
  input.backlog = backlog;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  std::set<TopicPartition> partitions;
  int64_t waiting = 0;  // Partitions whose next record is held until due.
  for (const auto& s : target_.Threads()) {
    if (s->role() != ThreadRole::kRetry || s->tier() != tier) continue;
    RetryThreadView view;
    view.id = s->id();
    const std::vector<TopicPartition> held = s->partitions();
    view.has_partitions = !held.empty();
    partitions.insert(held.begin(), held.end());
    waiting += s->waiting_partitions.load(std::memory_order_relaxed);
    // IDLE: its last poll brought nothing, it holds nothing until due and
    // none of its partitions is paused; the gauges rule out the rest. Not
    // in the middle of a rebalance, and counted from the last one: what it
    // has now may differ from what it had idled with.
    const bool idle = s->state() == ThreadState::kIdle &&
                      !s->rebalancing.load(std::memory_order_relaxed) &&
                      s->scheduled.load(std::memory_order_relaxed) == 0 &&
                      s->in_flight.load(std::memory_order_relaxed) == 0 &&
                      s->calls_in_flight.load(std::memory_order_relaxed) == 0 &&
                      s->lag.load(std::memory_order_relaxed) == 0;
    const int64_t since =
        std::max(s->state_since_ms(), s->assignment_changed_ms.load(std::memory_order_relaxed));
    if (idle) view.idle_ms = std::max<int64_t>(0, now_ms - since);
    input.threads.push_back(view);
  }
  input.partitions = static_cast<int>(partitions.size());
  const bool fixed_delay = options_.tiers[tier].delay_ms > 0;
  if (fixed_delay && input.backlog > 0 && input.partitions > 0) {
    const int64_t due = std::max<int64_t>(0, input.partitions - waiting);
    input.backlog = input.backlog * due / input.partitions;
  }
  return input;
}

void Autoscaler::Step() {
  // Draining holds the control slot anyway; in order, retry threads are
  // excluded (Engine::StartRetryThreads would refuse).
  if (!target_.Scalable()) return;
  // Measured here rather than read from the engine: the control server's
  // prober may measure seldom, or not run at all.
  absl::StatusOr<std::vector<int64_t>> backlogs = target_.MeasureTierBacklogs(kMeasureTimeout);
  const int tiers = static_cast<int>(options_.tiers.size());
  // One tier acts per look, each looked at first in turn.
  for (int i = 0; i < tiers; ++i) {
    const int tier = (next_tier_ + i) % tiers;
    const int64_t backlog =
        backlogs.ok() && static_cast<int>(backlogs->size()) == tiers ? (*backlogs)[tier] : -1;
    const ScalingPlan plan = PlanScaling(Observe(tier, backlog), options_);
    if (plan.start == 0 && plan.stop.empty()) continue;
    next_tier_ = (tier + 1) % tiers;
    Act(plan, tier);
    return;
  }
}

void Autoscaler::Act(const ScalingPlan& plan, int tier) {
  const std::string tier_note =
      options_.tiers.size() > 1 ? absl::StrCat(" of tier ", options_.tiers[tier].topic) : "";
  if (plan.start > 0) {
    absl::StatusOr<std::vector<int>> started =
        target_.StartRetryThreads(plan.start, tier, absl::Now() + operation_timeout_);
    if (!started.ok()) {
      NoteFailure(absl::StrCat("could not start ", plan.start, " retry threads", tier_note, " (",
                               plan.start_reason, "): ", started.status().message()));
      return;
    }
    Record(*started, /*started=*/true,
           std::vector<std::string>(started->size(), plan.start_reason + tier_note));
    return;
  }
  std::vector<int> ids;
  std::vector<std::string> reasons;
  for (const ScalingPlan::Stop& stop : plan.stop) {
    ids.push_back(stop.id);
    reasons.push_back(stop.reason + tier_note);
  }
  absl::StatusOr<std::vector<int>> stopped =
      target_.StopRetryThreadsById(ids, absl::Now() + operation_timeout_);
  if (!stopped.ok()) {
    // NOT_FOUND: a manual stop took one first; the next look sees that.
    NoteFailure(absl::StrCat("could not stop idle retry threads", tier_note, ": ",
                             stopped.status().message()));
    return;
  }
  Record(*stopped, /*started=*/false, reasons);
}

void Autoscaler::Record(const std::vector<int>& ids, bool started,
                        const std::vector<std::string>& reasons) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (size_t i = 0; i < ids.size(); ++i) {
    LogInfo("autoscale: ", started ? "started" : "stopped", " retry thread ", ids[i], ": ",
            reasons[i]);
  }
  absl::MutexLock lock(&mu_);
  last_failure_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    events_.push_back({now_ms, ids[i], started, reasons[i]});
    if (events_.size() > kMaxEvents) events_.pop_front();
  }
}

void Autoscaler::NoteFailure(const std::string& what) {
  {
    absl::MutexLock lock(&mu_);
    if (what == last_failure_) return;
    last_failure_ = what;
  }
  LogWarning("autoscale: ", what);
}

}  // namespace retryd::engine
