// ordering (with the older in_order) and the retry section: threads,
// autoscale, attempts, tiers and backoff. Its topics are checked with the
// others (topics_validator.cc).
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "server/config/section_validators.h"
#include "server/engine/api/options.h"

namespace retryd::config_validation {
namespace {

// Checks retry.min_threads (after max_threads); false if it is unusable.
bool CheckMinThreads(Checker& checker, const v1::Config& config, v1::RetryConfig& retry,
                     const Node& node) {
  if (retry.min_threads() == 0) return true;
  if (config.in_order()) {
    checker.Error(node, "min_threads",
                  absl::StrCat("in-order mode keeps strict order per partition, which excludes "
                               "retry threads (got min_threads: ",
                               retry.min_threads(),
                               "); set min_threads: 0 or another ordering (ORDERING_UNORDERED or "
                               "ORDERING_KEY)"));
    return false;
  }
  if (retry.min_threads() > retry.max_threads()) {
    checker.Error(node, "min_threads",
                  absl::StrCat("must be at most max_threads (", retry.max_threads(), "), got ",
                               retry.min_threads()));
    return false;
  }
  return true;
}

// retry.threads: defaulted, or checked against the ordering and
// min_threads..max_threads.
void CheckThreads(Checker& checker, const v1::Config& config, v1::RetryConfig& retry,
                  const Node& node, bool min_ok) {
  const bool in_order = config.ordering() == v1::ORDERING_IN_ORDER;
  if (!retry.has_threads()) {
    retry.set_threads(
        in_order ? 0 : std::max<uint32_t>(engine::kRetryThreadsDefault, retry.min_threads()));
  } else if (in_order && retry.threads() > 0) {
    // Named as the file spells it.
    const bool old_spelling = !checker.root().Written("ordering");
    checker.Error(
        node, "threads",
        absl::StrCat(
            old_spelling ? "in_order: true" : "ordering: ORDERING_IN_ORDER",
            " keeps strict order per partition, which excludes retry threads (got "
            "threads: ",
            retry.threads(), "); set threads: 0 or ",
            old_spelling ? "in_order: false" : "ordering: ORDERING_KEY or ORDERING_UNORDERED"));
  } else if (retry.threads() > retry.max_threads()) {
    checker.Error(node, "threads",
                  absl::StrCat("must be at most max_threads (", retry.max_threads(), "), got ",
                               retry.threads()));
  } else if (min_ok && retry.threads() < retry.min_threads()) {
    checker.Error(node, "threads",
                  absl::StrCat("must be at least min_threads (", retry.min_threads(), "), got ",
                               retry.threads()));
  }
}

// One of retry.tiers: its attempts, delay and threads.
void CheckTier(Checker& checker, const v1::Config& config, const v1::RetryConfig& retry,
               v1::RetryTier& tier, const Node& tier_node, bool min_ok) {
  checker.Number(tier, tier_node, "max_attempts");
  checker.Number(tier, tier_node, "delay_ms");
  if (tier.delay_ms() == 0) {
    checker.Error(tier_node, "delay_ms",
                  absl::StrCat("required: how long, in milliseconds, a record waits in this tier "
                               "before each attempt, 1..",
                               BoundsOf(tier_node.Field("delay_ms")).max()));
  }
  if (!tier.has_threads()) return;
  if (config.ordering() == v1::ORDERING_IN_ORDER && tier.threads() > 0) {
    checker.Error(tier_node, "threads",
                  absl::StrCat("in-order mode keeps strict order per partition, which excludes "
                               "retry threads (got threads: ",
                               tier.threads(), "); set threads: 0 or leave it out"));
  } else if (tier.threads() > retry.max_threads()) {
    checker.Error(tier_node, "threads",
                  absl::StrCat("must be at most retry.max_threads (", retry.max_threads(),
                               "), got ", tier.threads()));
  } else if (min_ok && tier.threads() < retry.min_threads()) {
    checker.Error(tier_node, "threads",
                  absl::StrCat("must be at least retry.min_threads (", retry.min_threads(),
                               "), got ", tier.threads()));
  }
}

// Checks retry.tiers (their topics are checked with the others), after
// max_attempts, threads, min_threads and max_threads.
void CheckTiers(Checker& checker, const v1::Config& config, v1::RetryConfig& retry,
                const Node& node, bool min_ok) {
  if (retry.tiers_size() == 0) return;
  const int first_line = node.Line("tiers", 0);
  if (retry.tiers_size() > engine::kMaxRetryTiers) {
    checker.Add(
        first_line, node.Path("tiers"),
        absl::StrCat("at most ", engine::kMaxRetryTiers, " tiers, got ", retry.tiers_size()));
  }
  if (node.Written("max_attempts")) {
    checker.Error(node, "max_attempts",
                  "leave it out with tiers: the attempts are 1 + the sum of the tiers' "
                  "max_attempts");
  }
  if (node.Written("backoff")) {
    checker.Error(node, "backoff", "leave it out with tiers: each tier waits its own delay_ms");
  }
  if (config.ordering() == v1::ORDERING_KEY) {
    checker.Add(first_line, node.Path("tiers"),
                "ORDERING_KEY with retry tiers is not supported yet (a key's records could be "
                "spread over several tiers); use ORDERING_UNORDERED, or one retry topic");
  }
  uint64_t attempts = 1;
  for (int i = 0; i < retry.tiers_size(); ++i) {
    v1::RetryTier& tier = *retry.mutable_tiers(i);
    CheckTier(checker, config, retry, tier, node.Child("tiers", i), min_ok);
    attempts += tier.max_attempts();
  }
  if (attempts > 1000) {
    checker.Add(first_line, node.Path("tiers"),
                absl::StrCat("1 + the tiers' max_attempts must be at most 1000, got ", attempts));
  }
  // The effective config says what runs: the attempts in all.
  retry.set_max_attempts(static_cast<uint32_t>(std::min<uint64_t>(attempts, 1000)));
}

// retry.backoff: initial_ms, multiplier (default 2) and max_ms (default
// 60 s or initial_ms if more, at least initial_ms).
void CheckBackoff(Checker& checker, v1::BackoffConfig& backoff, const Node& backoff_node) {
  checker.Number(backoff, backoff_node, "initial_ms");
  if (backoff.multiplier() == 0 && !backoff_node.Written("multiplier")) {
    backoff.set_multiplier(engine::kBackoffMultiplierDefault);
  } else if (!(backoff.multiplier() >= 1 && backoff.multiplier() <= 100)) {
    checker.Error(backoff_node, "multiplier",
                  absl::StrCat("must be between 1 and 100, got ", backoff.multiplier()));
  }
  const uint64_t initial = backoff.initial_ms();
  const bool initial_ok = InBounds(backoff_node.Field("initial_ms"), initial);
  const uint64_t max_max_ms = BoundsOf(backoff_node.Field("max_ms")).max();
  if (backoff.max_ms() == 0 && !backoff_node.Written("max_ms")) {
    constexpr uint64_t kMaxMs = engine::kBackoffMaxMsDefault;
    backoff.set_max_ms(initial_ok ? std::max<uint64_t>(kMaxMs, initial) : kMaxMs);
  } else if (backoff.max_ms() < 1 || backoff.max_ms() > max_max_ms) {
    checker.Error(backoff_node, "max_ms",
                  absl::StrCat("must be between 1 and ", max_max_ms, ", got ", backoff.max_ms()));
  } else if (initial_ok && backoff.max_ms() < initial) {
    checker.Error(
        backoff_node, "max_ms",
        absl::StrCat("must be at least initial_ms (", initial, "), got ", backoff.max_ms()));
  }
}

}  // namespace

// Written back into both fields (the effective config): ordering set,
// in_order true exactly when it is ORDERING_IN_ORDER.
void ValidateOrdering(Checker& checker, v1::Config& config) {
  const Node& root = checker.root();
  const bool ordering_set = config.ordering() != v1::ORDERING_UNSPECIFIED;
  const bool in_order_set = config.in_order() || root.Written("in_order");
  if (ordering_set && !v1::Ordering_IsValid(config.ordering())) {
    // Text format refuses unknown names; a number slips through.
    checker.Error(
        root, "ordering",
        absl::StrCat("must be ORDERING_UNORDERED, ORDERING_IN_ORDER or ORDERING_KEY, got ",
                     static_cast<int>(config.ordering())));
    return;
  }
  if (ordering_set && in_order_set &&
      (config.ordering() == v1::ORDERING_IN_ORDER) != config.in_order()) {
    checker.Error(root, "ordering",
                  absl::StrCat("ordering: ", v1::Ordering_Name(config.ordering()),
                               " disagrees with in_order: ", config.in_order() ? "true" : "false",
                               "; in_order is the older spelling of ordering: ORDERING_IN_ORDER, "
                               "set only ordering"));
    return;
  }
  if (!ordering_set) {
    config.set_ordering(config.in_order() ? v1::ORDERING_IN_ORDER : v1::ORDERING_UNORDERED);
  }
  config.set_in_order(config.ordering() == v1::ORDERING_IN_ORDER);
}

void ValidateRetry(Checker& checker, v1::Config& config) {
  v1::RetryConfig& retry = *config.mutable_retry();
  const Node node = checker.root().Child("retry");
  checker.Number(retry, node, "max_threads");
  const bool min_ok = CheckMinThreads(checker, config, retry, node);
  CheckThreads(checker, config, retry, node, min_ok);
  if (retry.has_autoscale()) {
    v1::AutoscaleConfig& autoscale = *retry.mutable_autoscale();
    const Node autoscale_node = node.Child("autoscale");
    checker.Number(autoscale, autoscale_node, "backlog_per_thread");
    checker.Number(autoscale, autoscale_node, "idle_exit_ms");
  }
  checker.Number(retry, node, "max_attempts");
  checker.Number(retry, node, "lookahead");
  CheckTiers(checker, config, retry, node, min_ok);
  CheckBackoff(checker, *retry.mutable_backoff(), node.Child("backoff"));
}

}  // namespace retryd::config_validation
