// The cumulative per-thread counters, declared once: `Counters` is the plain
// value (a sample, a sum), `kCounterFields` names its members
// for everything that handles them one by one (summing, reading the atomics,
// filling the protos by field name), and `AtomicCounters` is what a worker
// counts into.
//
// A new counter is a member of `Counters` and an entry of `kCounterFields`
// (the build fails if one is missing), plus a field of the same name in the
// protos that report it (retryd.v1.ThreadMetrics, retryd.v1.Totals; their
// `display` options say how retryctl shows it), plus the line that counts
// it. Nothing else names counters one by one: the Prometheus families
// (retryd_thread_<name>_total, retryd_<name>_total) and their help come from
// this table too (server/http/metrics_collector.cc).
//
// Counters is a value type; AtomicCounters is thread-safe (relaxed atomics:
// readers never wait for a worker).
#ifndef RETRYD_SERVER_ENGINE_API_COUNTERS_H_
#define RETRYD_SERVER_ENGINE_API_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace retryd::engine {

struct Counters {
  int64_t processed = 0;        // Processor calls.
  int64_t succeeded = 0;        // Calls that returned OK (output acknowledged).
  int64_t failed_attempts = 0;  // Calls that returned a failure.
  int64_t sent_to_retry = 0;    // Records acknowledged by the retry topic.
  int64_t dead_lettered = 0;    // Records acknowledged by the DLQ.
  int64_t commits = 0;          // Successful offset commits.
  // Retry records due later than retry.backoff.max_ms from when they were
  // read, brought forward to that.
  int64_t due_clamped = 0;
  // Times the thread had max_in_flight hand-offs unacknowledged and stopped
  // to wait for acknowledgements (pausing its partitions if they were slow).
  int64_t backpressure_waits = 0;
  // Calls that found the processor's downstream unavailable (see
  // DownstreamGate): the record used up no attempt and waited.
  int64_t unavailable = 0;
  // Key order: records sent to the retry topic unprocessed, behind an
  // earlier record of their key parked there (counted in sent_to_retry too).
  int64_t followed = 0;
  // Turns of the thread's loop (one wait on the consumer each): a thread that
  // waits as it should polls a few times per record or call at most.
  int64_t polls = 0;
  // Times the thread held more than max_held_bytes and paused its
  // partitions until it held less than 3/4 of it.
  int64_t budget_pauses = 0;
  // Rebalances of its consumer group the thread went through (assignments
  // received, an empty one included).
  int64_t rebalances = 0;
  // Times the thread rewound to its last commit and moved to a new producer
  // after the producer failed for good (a fatal error).
  int64_t producer_rewinds = 0;

  Counters& operator+=(const Counters& other);
};

struct CounterField {
  const char* name;  // Also the name of its field in the protos.
  int64_t Counters::*member;
  // What it counts, in one sentence: the HELP line of its Prometheus
  // families.
  const char* help;
  // Counts one of the ends a processor call leads to (output, retry topic,
  // dead-letter topic): where the records went. retryd's summary line shows
  // these.
  bool outcome = false;
};

inline constexpr CounterField kCounterFields[] = {
    {"processed", &Counters::processed, "Processor calls."},
    {"succeeded", &Counters::succeeded,
     "Processor calls that succeeded (output acknowledged where there is an output topic).",
     /*outcome=*/true},
    {"failed_attempts", &Counters::failed_attempts, "Processor calls that returned a failure."},
    {"sent_to_retry", &Counters::sent_to_retry, "Records acknowledged by the retry topic.",
     /*outcome=*/true},
    {"dead_lettered", &Counters::dead_lettered, "Records acknowledged by the dead-letter topic.",
     /*outcome=*/true},
    {"commits", &Counters::commits, "Successful offset commits."},
    {"due_clamped", &Counters::due_clamped,
     "Retry records due later than retry.backoff.max_ms from their reading, brought forward."},
    {"backpressure_waits", &Counters::backpressure_waits,
     "Times a thread had max_in_flight hand-offs unacknowledged and waited."},
    {"unavailable", &Counters::unavailable,
     "Calls that found the downstream unavailable (no attempt used; the record waited)."},
    {"followed", &Counters::followed,
     "Key order: records sent to the retry topic behind a parked record of their key."},
    {"polls", &Counters::polls, "Turns of the threads' loops (one wait on the consumer each)."},
    {"budget_pauses", &Counters::budget_pauses,
     "Times a thread held more than max_held_bytes and paused its partitions."},
    {"rebalances", &Counters::rebalances,
     "Rebalances of their consumer groups the threads went through (assignments received)."},
    {"producer_rewinds", &Counters::producer_rewinds,
     "Times a thread rewound to its last commit and moved to a new producer after a fatal "
     "producer error."},
};
inline constexpr size_t kCounterCount = std::size(kCounterFields);

// Where `member` is in kCounterFields; kCounterCount if it is not.
constexpr size_t CounterIndex(int64_t Counters::*member) {
  for (size_t i = 0; i < kCounterCount; ++i) {
    if (kCounterFields[i].member == member) return i;
  }
  return kCounterCount;
}

namespace counters_internal {
// Every member listed once: with the size check, no member is left out.
constexpr bool EachListedOnce() {
  for (size_t i = 0; i < kCounterCount; ++i) {
    if (CounterIndex(kCounterFields[i].member) != i) return false;
  }
  return true;
}
}  // namespace counters_internal
static_assert(sizeof(Counters) == kCounterCount * sizeof(int64_t) &&
                  counters_internal::EachListedOnce(),
              "every member of Counters needs its one entry in kCounterFields");

inline Counters& Counters::operator+=(const Counters& other) {
  for (const CounterField& f : kCounterFields) this->*f.member += other.*f.member;
  return *this;
}

class AtomicCounters {
 public:
  void Add(int64_t Counters::*member, int64_t n = 1) {
    values_[CounterIndex(member)].fetch_add(n, std::memory_order_relaxed);
  }
  // Each counter is read on its own: the whole need not be one instant.
  Counters Read() const {
    Counters out;
    for (size_t i = 0; i < kCounterCount; ++i) {
      out.*kCounterFields[i].member = values_[i].load(std::memory_order_relaxed);
    }
    return out;
  }

 private:
  std::array<std::atomic<int64_t>, kCounterCount> values_{};
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_COUNTERS_H_
