#include "bench/judge/workload.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace retryd::bench::peers {
namespace {

constexpr char kPhaseLetters[] = {'W', 'M', 'P'};
constexpr absl::string_view kKeyPrefixes[] = {"ok-", "flaky-", "perm-"};

// True for every (100 / percent)-th of keys 0, 1, 2, ...: exactly `percent`
// of any 100 keys in a row.
bool Every(int percent, int64_t key) {
  if (percent <= 0) return false;
  return (key + 1) * percent / 100 > key * percent / 100;
}

}  // namespace

GeneratedRecord Generate(const Mix& mix, Phase phase, int64_t seq, int64_t count) {
  const int64_t per_key = std::max(1, mix.records_per_key);
  const int64_t keys = std::max<int64_t>(1, (count + per_key - 1) / per_key);
  const int64_t key = seq % keys;
  Kind kind = Kind::kHealthy;
  if (Every(mix.poison_percent, key)) {
    kind = Kind::kPoison;
  } else if (Every(mix.flaky_percent, key)) {
    kind = Kind::kFlaky;
  }
  const char letter = kPhaseLetters[static_cast<int>(phase)];
  GeneratedRecord r;
  r.key = absl::StrFormat("%s%c%d", kKeyPrefixes[static_cast<int>(kind)], letter - 'A' + 'a', key);
  r.value = absl::StrFormat("%c%010d|", letter, seq);
  if (static_cast<int>(r.value.size()) < mix.value_bytes) r.value.resize(mix.value_bytes, 'V');
  return r;
}

std::optional<Kind> KindOfKey(absl::string_view key) {
  for (int k = 0; k < 3; ++k) {
    if (absl::StartsWith(key, kKeyPrefixes[k])) return static_cast<Kind>(k);
  }
  return std::nullopt;
}

std::optional<Phase> PhaseOfValue(absl::string_view value) {
  if (value.empty()) return std::nullopt;
  for (int p = 0; p < 3; ++p) {
    if (value[0] == kPhaseLetters[p]) return static_cast<Phase>(p);
  }
  return std::nullopt;
}

absl::string_view PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kWarmUp:
      return "warm-up";
    case Phase::kMeasured:
      return "measured";
    case Phase::kPaced:
      return "paced";
  }
  return "?";
}

}  // namespace retryd::bench::peers
