// The records of the peers bench (bench/peers/run.py): what each side is
// given to read, and how a record's key and value say what should become of
// it. Every side applies the same rule by key (bench/peers'
// ProcessingRule, retryd's simulate rules, the example downstream's flags):
//
//   ok-...     succeeds at once                      -> the output topic
//   flaky-...  fails attempts 1 and 2, then succeeds -> the output topic
//   perm-...   always fails (retriably)              -> the dead-letter topic
//
// A value is the record's phase letter, its number within the phase (ten
// digits), '|' and padding: upper-case letters and digits only, so that a
// downstream that upper-cases values (the example does) leaves it as it is.
// Values are unique within a run, which is what the judge matches on.
//
// Pure functions, any thread.
#ifndef RETRYD_BENCH_JUDGE_WORKLOAD_H_
#define RETRYD_BENCH_JUDGE_WORKLOAD_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace retryd::bench::peers {

// Where a record sits in a side's run. Warm-up records come first in every
// partition; the measured backlog follows them; paced records are produced
// at a fixed rate once the backlog is done, for latency.
enum class Phase : uint8_t { kWarmUp, kMeasured, kPaced };

enum class Kind : uint8_t { kHealthy, kFlaky, kPoison };

struct Mix {
  // Of the keys of each phase: every (100 / flaky_percent)-th key is flaky,
  // every (100 / poison_percent)-th poison (poison wins where both fall).
  int flaky_percent = 0;
  int poison_percent = 0;
  // Records of each key, spread over the phase (record i has key i % keys),
  // so that per-key order can be judged.
  int records_per_key = 10;
  int value_bytes = 100;
};

struct GeneratedRecord {
  std::string key;
  std::string value;
};

// Record `seq` (0-based) of the `count` records of `phase`.
GeneratedRecord Generate(const Mix& mix, Phase phase, int64_t seq, int64_t count);

// What the key's prefix says, or nullopt for a key of no kind.
std::optional<Kind> KindOfKey(absl::string_view key);

// The phase a value's first letter names, or nullopt.
std::optional<Phase> PhaseOfValue(absl::string_view value);

absl::string_view PhaseName(Phase phase);

}  // namespace retryd::bench::peers

#endif  // RETRYD_BENCH_JUDGE_WORKLOAD_H_
