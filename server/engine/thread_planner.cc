#include "server/engine/thread_planner.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/common/error_reason.h"

namespace retryd::engine {
namespace {

absl::Status Refused(absl::StatusCode code, absl::string_view reason, absl::string_view message) {
  return WithReason(absl::Status(code, message), reason);
}

absl::Status Invalid(absl::string_view message) {
  return Refused(absl::StatusCode::kInvalidArgument, reason::kInvalidField, message);
}

absl::Status InOrderRefusal() {
  return Refused(absl::StatusCode::kFailedPrecondition, reason::kInOrderActive,
                 "in-order mode excludes retry threads: switch it off first (SetInOrder "
                 "false, or SetOrderingMode); nothing changed");
}

absl::Status NoSuchTier(int tier) {
  return Invalid(absl::StrCat("tier: there is no retry tier ", tier));
}

absl::Status CountTooSmall(int count) {
  return Invalid(absl::StrCat("count: must be at least 1, got ", count));
}

bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Decides the changes one after another, each against the threads the
// ones before it leave.
class Planner {
 public:
  Planner(const RetryOptions& retry, const RetryThreadsNow& now)
      : retry_(retry), tiers_(static_cast<int>(retry.tiers.size())), in_order_(now.in_order) {
    for (const RetryThreadsNow::Thread& thread : now.running) {
      kept_.push_back(thread.id);
      tier_of_[thread.id] = thread.tier;
    }
    next_id_ = now.next_id;
  }

  ThreadChangeDecision Decide(const RetryThreadChange& c);
  ThreadPlan Finish() &&;

 private:
  // The change's tier as the changes before it leave it.
  struct Tier {
    std::vector<int> kept;  // Its threads that stay, oldest first.
    int running = 0;        // Those and the ones starting.
    std::string of_tier;    // " of tier <topic>" where there are tiers, for messages.
  };
  Tier TierOf(const RetryThreadChange& c);
  absl::Status OverMax(const Tier& tier, int total) const;
  // One per kind of change: the refusal, or how many threads it starts
  // (`*start`) and which it stops (`*stop`).
  absl::Status Start(const RetryThreadChange& c, const Tier& tier, int* start) const;
  absl::Status StopCount(const RetryThreadChange& c, const Tier& tier,
                         std::vector<int>* stop) const;
  absl::Status StopIds(const RetryThreadChange& c, std::vector<int>* stop) const;
  absl::Status SetCount(const RetryThreadChange& c, const Tier& tier, int* start,
                        std::vector<int>* stop) const;
  absl::Status CheckFloor(const std::vector<int>& stop);
  void Apply(const RetryThreadChange& c, int start, ThreadChangeDecision* d);

  const RetryOptions& retry_;
  const int tiers_;
  const bool in_order_;
  std::vector<int> kept_;       // Running threads no change so far stops, oldest first.
  std::map<int, int> tier_of_;  // Of every thread running or starting, by id.
  std::vector<int> starting_;   // Ids reserved for threads to start.
  int next_id_;
  ThreadPlan plan_;
};

Planner::Tier Planner::TierOf(const RetryThreadChange& c) {
  Tier tier;
  for (int id : kept_) {
    if (tier_of_[id] == c.tier) tier.kept.push_back(id);
  }
  tier.running = static_cast<int>(tier.kept.size());
  for (int id : starting_) tier.running += tier_of_[id] == c.tier ? 1 : 0;
  if (tiers_ > 1 && c.tier >= 0 && c.tier < tiers_) {
    tier.of_tier = absl::StrCat(" of tier ", retry_.tiers[c.tier].topic);
  }
  return tier;
}

absl::Status Planner::OverMax(const Tier& tier, int total) const {
  return Refused(absl::StatusCode::kFailedPrecondition, reason::kMaxThreadsReached,
                 absl::StrCat(total, " retry threads", tier.of_tier,
                              " would be too many: retry.max_threads is ", retry_.max_threads,
                              tiers_ > 1 ? " a tier" : "", " and ", tier.running,
                              " run or are starting; nothing changed"));
}

absl::Status Planner::Start(const RetryThreadChange& c, const Tier& tier, int* start) const {
  if (c.count < 1) return CountTooSmall(c.count);
  if (in_order_) return InOrderRefusal();
  if (tier.running + c.count > retry_.max_threads) return OverMax(tier, tier.running + c.count);
  *start = c.count;
  return absl::OkStatus();
}

absl::Status Planner::StopCount(const RetryThreadChange& c, const Tier& tier,
                                std::vector<int>* stop) const {
  if (c.count < 1) return CountTooSmall(c.count);
  const int n = std::min<int>(c.count, static_cast<int>(tier.kept.size()));
  stop->assign(tier.kept.rbegin(), tier.kept.rbegin() + n);
  return absl::OkStatus();
}

absl::Status Planner::StopIds(const RetryThreadChange& c, std::vector<int>* stop) const {
  std::vector<int> unknown;
  for (int id : c.ids) {
    if (!Contains(kept_, id)) unknown.push_back(id);
  }
  if (c.ids.empty()) return Invalid("no thread ids given");
  if (!unknown.empty()) {
    const bool many = unknown.size() > 1;
    return Refused(
        absl::StatusCode::kNotFound, reason::kThreadNotFound,
        absl::StrCat(many ? "threads " : "thread ", absl::StrJoin(unknown, ", "),
                     many ? " are not running retry threads" : " is not a running retry thread",
                     "; nothing stopped"));
  }
  *stop = c.ids;
  return absl::OkStatus();
}

absl::Status Planner::SetCount(const RetryThreadChange& c, const Tier& tier, int* start,
                               std::vector<int>* stop) const {
  if (retry_.autoscale.enabled) {
    return Refused(absl::StatusCode::kFailedPrecondition, reason::kAutoscaleActive,
                   "retry.autoscale is on and sets the number of retry threads itself; "
                   "nothing changed. Turn it off in the config to set a count");
  }
  if (c.count < 0) return Invalid(absl::StrCat("target: must be at least 0, got ", c.count));
  if (c.count > retry_.max_threads) return OverMax(tier, c.count);
  if (c.count > 0 && in_order_) return InOrderRefusal();
  if (c.count > tier.running) {
    *start = c.count - tier.running;
  } else if (tier.running - c.count > static_cast<int>(tier.kept.size())) {
    return Refused(absl::StatusCode::kAborted, reason::kConcurrentChange,
                   "a change applied together with this one starts threads it would "
                   "have to stop; nothing changed. Try again");
  } else {
    stop->assign(tier.kept.rbegin(), tier.kept.rbegin() + (tier.running - c.count));
  }
  return absl::OkStatus();
}

// retry.min_threads holds in every tier `stop` touches.
absl::Status Planner::CheckFloor(const std::vector<int>& stop) {
  std::map<int, int> left, stopped;
  for (int id : kept_) ++left[tier_of_[id]];
  for (int id : starting_) ++left[tier_of_[id]];
  for (int id : stop) ++stopped[tier_of_[id]];
  for (const auto& [tier, n] : stopped) {
    if (left[tier] - n >= retry_.min_threads) continue;
    return Refused(
        absl::StatusCode::kFailedPrecondition, reason::kMinThreadsReached,
        absl::StrCat("stopping ", n, " of the ", left[tier], " retry threads",
                     tiers_ > 1 ? absl::StrCat(" of tier ", retry_.tiers[tier].topic) : "",
                     " would leave ", left[tier] - n, ", below retry.min_threads (",
                     retry_.min_threads, "); nothing stopped"));
  }
  return absl::OkStatus();
}

// Takes an accepted decision into the threads the next changes see:
// reserves ids for the `start` threads it starts, drops those it stops.
void Planner::Apply(const RetryThreadChange& c, int start, ThreadChangeDecision* d) {
  for (int id : d->stop) {
    auto it = std::find(kept_.begin(), kept_.end(), id);
    if (it != kept_.end()) kept_.erase(it);
  }
  for (int i = 0; i < start; ++i) {
    tier_of_[next_id_] = c.tier;
    d->start.push_back(next_id_++);
  }
  starting_.insert(starting_.end(), d->start.begin(), d->start.end());
  std::vector<int>& stops = c.graceful ? plan_.stop_graceful : plan_.stop_now;
  stops.insert(stops.end(), d->stop.begin(), d->stop.end());
}

ThreadChangeDecision Planner::Decide(const RetryThreadChange& c) {
  ThreadChangeDecision d;
  const Tier tier = TierOf(c);
  const bool tier_ok = c.tier >= 0 && c.tier < tiers_;
  int start = 0;
  using Kind = RetryThreadChange::Kind;
  if (c.kind != Kind::kStopIds && !tier_ok) {
    d.status = NoSuchTier(c.tier);  // kStopIds stops threads of any tier.
  } else if (c.kind == Kind::kStart) {
    d.status = Start(c, tier, &start);
  } else if (c.kind == Kind::kStopCount) {
    d.status = StopCount(c, tier, &d.stop);
  } else if (c.kind == Kind::kStopIds) {
    d.status = StopIds(c, &d.stop);
  } else {
    d.status = SetCount(c, tier, &start, &d.stop);
  }
  if (d.status.ok() && !d.stop.empty() && !in_order_) d.status = CheckFloor(d.stop);
  if (d.status.ok()) {
    Apply(c, start, &d);
  } else {
    d.stop.clear();
  }
  return d;
}

ThreadPlan Planner::Finish() && {
  plan_.running = kept_;
  plan_.running.insert(plan_.running.end(), starting_.begin(), starting_.end());
  plan_.next_id = next_id_;
  return std::move(plan_);
}

}  // namespace

bool ThreadPlan::changes_threads() const {
  return std::any_of(decisions.begin(), decisions.end(), [](const ThreadChangeDecision& d) {
    return !d.start.empty() || !d.stop.empty();
  });
}

ThreadPlan PlanThreadChanges(const RetryOptions& retry, const RetryThreadsNow& now,
                             const std::vector<RetryThreadChange>& changes) {
  Planner planner(retry, now);
  std::vector<ThreadChangeDecision> decisions;
  for (const RetryThreadChange& c : changes) decisions.push_back(planner.Decide(c));
  ThreadPlan plan = std::move(planner).Finish();
  plan.decisions = std::move(decisions);
  return plan;
}

}  // namespace retryd::engine
