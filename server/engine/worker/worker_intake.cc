// Worker: how much it takes in. It pauses a partition's fetching while
// its records held reach the lookahead (or, on a fixed-delay tier, run
// further ahead than the tier reads), and every partition while hand-offs
// in flight reach max_in_flight, the held bytes exceed max_held_bytes, the
// input is paused, the thread is quiesced or the downstream gate holds its
// role's intake; it resumes them when that ends. At the back-pressure
// limit it first waits a little for acknowledgements.
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/worker/worker.h"

namespace retryd::engine {
namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

void Worker::WaitForAcks() {
  constexpr absl::Duration kMaxWait = absl::Milliseconds(500);
  if (mailbox_->in_flight.load(std::memory_order_relaxed) < context_.options->max_in_flight) return;
  mailbox_->counters.Add(&Counters::backpressure_waits);
  const Mailbox* sink = mailbox_.get();
  const std::atomic<bool>* stop = &stop_requested_;
  auto relieved = [sink, stop] {
    return sink->in_flight.load(std::memory_order_relaxed) < sink->resume_below ||
           stop->load(std::memory_order_relaxed);
  };
  absl::MutexLock lock(&mailbox_->flight_mu);
  mailbox_->flight_mu.AwaitWithTimeout(absl::Condition(&relieved), kMaxWait);
}

bool Worker::LookaheadFull(const TopicPartition& tp) const {
  int64_t held = role_ == ThreadRole::kPrimary ? RecordsAhead(tp)
                                               : static_cast<int64_t>(scheduler_.CountFor(tp));
  held += lanes_.WaitingFrom(tp);
  if (held >= Lookahead()) return true;
  // A fixed-delay tier: the records after the last one read are due no
  // sooner than it.
  if (read_ahead_ms_ < 0) return false;
  const std::optional<int64_t> last_due = scheduler_.LastDueFor(tp);
  return last_due.has_value() && *last_due > NowMs() + read_ahead_ms_;
}

int Worker::Lookahead() const { return context_.options->retry.lookahead; }

bool Worker::AnyLookaheadMayBeFull() const {
  if (InOrder()) return true;
  if (read_ahead_ms_ >= 0 && scheduler_.size() > 0) return true;
  const int64_t held =
      static_cast<int64_t>(scheduler_.size()) + queue_.waiting() + lanes_.waiting();
  return held >= Lookahead();
}

void Worker::ReconcilePauses() {
  const int64_t in_flight = mailbox_->in_flight.load(std::memory_order_relaxed);
  if (in_flight >= context_.options->max_in_flight) {
    backpressure_ = true;
  } else if (in_flight < mailbox_->resume_below) {
    backpressure_ = false;
  }
  std::vector<TopicPartition> pause, resume;
  const bool input_paused =
      role_ == ThreadRole::kPrimary && context_.input_paused->load(std::memory_order_relaxed);
  const bool all = backpressure_ || input_paused || quiesced_ ||
                   context_.gate->IntakePaused(role_, absl::Now()) || OverBudget();
  // Run every loop turn: the steady state, where nothing is paused and no
  // partition can want a pause, is told without a look at each partition.
  if (!all && !partitions_.any_paused() && !partitions_.any_keys_unknown() &&
      !AnyLookaheadMayBeFull()) {
    return;
  }
  for (const TopicPartition& tp : partitions_.Assigned()) {
    // In order, records behind a held one wait in `queue_` rather than
    // pausing at once: a pause drops what was fetched and costs a fetch
    // round trip, far more than a short backoff. Both roles stop fetching
    // once `lookahead` records of a partition are held.
    const bool is = partitions_.paused(tp);
    const bool want = all || partitions_.keys_unknown(tp) || LookaheadFull(tp);
    if (want && !is) pause.push_back(tp);
    if (!want && is) resume.push_back(tp);
  }
  if (!pause.empty()) {
    if (absl::Status s = consumer_->Pause(pause); s.ok()) {
      partitions_.NotePaused(pause, true);
    } else {
      LogWarning("thread ", id_, ": ", s.message());
    }
  }
  if (!resume.empty()) {
    if (absl::Status s = consumer_->Resume(resume); s.ok()) {
      partitions_.NotePaused(resume, false);
    } else {
      LogWarning("thread ", id_, ": ", s.message());
    }
  }
}

bool Worker::OverBudget() {
  const int64_t budget = context_.options->max_held_bytes;
  if (budget <= 0) return false;
  const int64_t held = mailbox_->held_bytes.load(std::memory_order_relaxed);
  if (!over_budget_ && held > budget) {
    over_budget_ = true;
    mailbox_->counters.Add(&Counters::budget_pauses);
  } else if (over_budget_ && held < budget / 4 * 3) {
    over_budget_ = false;
  }
  return over_budget_;
}

}  // namespace retryd::engine
