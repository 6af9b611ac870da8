#include "server/processors/simulate.h"

#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace retryd {
namespace {

// Salts that make the latency and the failure draws independent.
constexpr uint64_t kOutcomeStream = 1;
constexpr uint64_t kLatencyStream = 2;

// SplitMix64's finalizer: a bijection that spreads every input bit over the
// output. Unlike absl::Hash it is the same in every process, which keeps
// simulated runs reproducible across restarts.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a, for the topic name.
uint64_t HashString(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// A double uniform in [0, 1) from the top 53 bits.
double Unit(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

}  // namespace

SimulateProcessor::SimulateProcessor(const retryd::v1::SimulateConfig& config)
    : seed_(config.seed()),
      latency_ms_(config.latency_ms()),
      latency_min_ms_(config.latency_min_ms()),
      latency_max_ms_(config.latency_max_ms()),
      transient_failure_rate_(config.transient_failure_rate()),
      permanent_failure_rate_(config.permanent_failure_rate()),
      rules_([&config] {
        std::vector<Rule> rules;
        for (const retryd::v1::SimulateConfig::Rule& rule : config.rule()) {
          rules.push_back({rule.key_prefix(), rule.permanent(), rule.fail_attempts()});
        }
        return rules;
      }()) {}

uint64_t SimulateProcessor::Hash(const Record& record, int attempt, uint64_t stream) const {
  uint64_t h = Mix(seed_ ^ Mix(stream));
  h = Mix(h ^ HashString(record.topic));
  h = Mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(record.partition)));
  h = Mix(h ^ static_cast<uint64_t>(record.offset));
  h = Mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(attempt)));
  return h;
}

int64_t SimulateProcessor::LatencyMs(const Record& record, int attempt) const {
  if (latency_ms_ > 0) return latency_ms_;
  if (latency_max_ms_ == 0) return 0;
  const uint64_t span = uint64_t{latency_max_ms_} - latency_min_ms_ + 1;
  return latency_min_ms_ + static_cast<int64_t>(Hash(record, attempt, kLatencyStream) % span);
}

engine::Outcome SimulateProcessor::Decide(const Record& record, int attempt) const {
  if (record.key.has_value()) {
    for (const Rule& rule : rules_) {
      if (!absl::StartsWith(*record.key, rule.key_prefix)) continue;
      if (rule.permanent) {
        return engine::Outcome::Permanent(
            absl::StrCat("rule ", rule.key_prefix, ": permanent failure"));
      }
      if (attempt >= 1 && static_cast<uint32_t>(attempt) <= rule.fail_attempts) {
        return engine::Outcome::Retriable(absl::StrCat(
            "rule ", rule.key_prefix, ": attempt ", attempt, " of ", rule.fail_attempts, " fails"));
      }
      return engine::Outcome::Ok();
    }
  }
  const double u = Unit(Hash(record, attempt, kOutcomeStream));
  if (u < permanent_failure_rate_) return engine::Outcome::Permanent("simulated permanent failure");
  if (u < permanent_failure_rate_ + transient_failure_rate_) {
    return engine::Outcome::Retriable("simulated transient failure");
  }
  return engine::Outcome::Ok();
}

engine::Outcome SimulateProcessor::Process(const Record& record, int attempt) {
  // Sleeping is the point here: it stands for the record's work.
  if (const int64_t latency = LatencyMs(record, attempt); latency > 0) {
    absl::SleepFor(absl::Milliseconds(latency));
  }
  return Decide(record, attempt);
}

}  // namespace retryd
