#include "server/engine/steering/retry_tiers.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace retryd::engine {

std::vector<RetryTier> EffectiveTiers(const RetryOptions& retry) {
  if (!retry.tiers.empty()) return retry.tiers;
  return {RetryTier{.topic = retry.topic,
                    .delay_ms = 0,
                    .max_attempts = std::max(0, retry.max_attempts - 1),
                    .threads = retry.threads}};
}

absl::Status CheckTiers(const RetryOptions& retry) {
  if (retry.tiers.empty()) return absl::OkStatus();
  if (static_cast<int>(retry.tiers.size()) > kMaxRetryTiers) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry.tiers: at most ", kMaxRetryTiers, ", got ", retry.tiers.size()));
  }
  std::set<std::string> topics;
  int attempts = 1;
  for (size_t i = 0; i < retry.tiers.size(); ++i) {
    const RetryTier& t = retry.tiers[i];
    auto invalid = [i](auto&&... parts) {
      return absl::InvalidArgumentError(absl::StrCat("retry.tiers[", i, "]: ", parts...));
    };
    if (t.topic.empty()) return invalid("topic is empty");
    if (!topics.insert(t.topic).second) return invalid("topic ", t.topic, " is named twice");
    if (t.delay_ms < 1) return invalid("delay_ms must be at least 1, got ", t.delay_ms);
    if (t.max_attempts < 1) return invalid("max_attempts must be at least 1, got ", t.max_attempts);
    attempts += t.max_attempts;
    if (t.threads != -1 && (t.threads < retry.min_threads || t.threads > retry.max_threads)) {
      return invalid("threads must be between retry.min_threads (", retry.min_threads,
                     ") and retry.max_threads (", retry.max_threads, "), got ", t.threads);
    }
  }
  if (attempts > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retry.tiers: 1 + the tiers' max_attempts must be at most 1000, got ", attempts));
  }
  return absl::OkStatus();
}

void NormalizeTiers(RetryOptions& retry) {
  retry.tiers = EffectiveTiers(retry);
  retry.topic = retry.tiers.front().topic;
  retry.max_attempts = TotalAttempts(retry.tiers);
}

bool HasTiers(const RetryOptions& retry) {
  return !retry.tiers.empty() && retry.tiers.front().delay_ms > 0;
}

int TotalAttempts(const std::vector<RetryTier>& tiers) {
  int total = 1;
  for (const RetryTier& t : tiers) total += t.max_attempts;
  return total;
}

int TierOfAttempt(const std::vector<RetryTier>& tiers, int attempt) {
  int last = 1;  // The last attempt of the tiers before.
  for (size_t i = 0; i < tiers.size(); ++i) {
    last += tiers[i].max_attempts;
    if (attempt <= last) return static_cast<int>(i);
  }
  return static_cast<int>(tiers.size()) - 1;
}

int FindTier(const std::vector<RetryTier>& tiers, std::string_view topic) {
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (tiers[i].topic == topic) return static_cast<int>(i);
  }
  return -1;
}

int64_t TierReadAheadMs(const RetryTier& tier) { return TierIsFifo(tier) ? kTierReadAheadMs : -1; }

bool TierIsFifo(const RetryTier& tier) { return tier.delay_ms > 0; }

int64_t TierMaxDelayMs(const RetryOptions& retry, const RetryTier& tier) {
  return tier.delay_ms > 0 ? tier.delay_ms : retry.backoff.max_ms;
}

int TierStartThreads(const RetryOptions& retry, const RetryTier& tier) {
  return tier.threads >= 0 ? tier.threads : retry.threads;
}

}  // namespace retryd::engine
