// Tiered retry topics (RetryOptions::tiers): which tier makes an attempt,
// how long a record waits for it, and how far ahead a tier's thread reads.
//
// A record's attempts are numbered from 1 (the primary thread's). With
// tiers of max_attempts m0, m1, ..., tier 0 makes attempts 2..1+m0, tier 1
// the m1 after those, and so on; the attempt after the last goes nowhere:
// the record is dead-lettered. The tier is a function of the attempt alone,
// so a record read from any retry topic is sent on to the right one.
//
// Thread-safety: pure functions.
#ifndef RETRYD_SERVER_ENGINE_STEERING_RETRY_TIERS_H_
#define RETRYD_SERVER_ENGINE_STEERING_RETRY_TIERS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/api/options.h"

namespace retryd::engine {

// `retry.tiers`, or the single tier of the single-topic form: `topic`,
// delay 0 (backoff), max_attempts - 1 attempts, `threads`.
std::vector<RetryTier> EffectiveTiers(const RetryOptions& retry);

// Checks `retry.tiers` (when set): topics non-empty and distinct, delays
// >= 1, attempts >= 1 and at most 1000 in all, at most kMaxRetryTiers,
// threads -1 or within
// [min_threads, max_threads]. INVALID_ARGUMENT naming
// the tier.
absl::Status CheckTiers(const RetryOptions& retry);

// Fills in `retry.tiers` (EffectiveTiers), `topic` (the first tier's) and
// max_attempts (TotalAttempts). REQUIRES: CheckTiers(retry) is OK.
void NormalizeTiers(RetryOptions& retry);

// Whether `retry` runs on configured tiers (fixed delays), as opposed to
// the single-topic form (its one tier has delay 0: the backoff).
bool HasTiers(const RetryOptions& retry);

// 1 + the tiers' attempts: attempts in all, the primary's included.
int TotalAttempts(const std::vector<RetryTier>& tiers);

// The index of the tier that makes attempt `attempt`; attempt 1 and below
// belong to tier 0, attempts past the last tier's to the last tier.
// REQUIRES: `tiers` is not empty.
int TierOfAttempt(const std::vector<RetryTier>& tiers, int attempt);

// The tier whose topic is `topic`, or -1.
int FindTier(const std::vector<RetryTier>& tiers, std::string_view topic);

// How far ahead of its due time a thread of `tier` reads a record, or -1
// for the backoff tier (it reads ahead retry.lookahead records). A
// fixed-delay tier's partition comes due in the order it was written: once
// the thread has read a record due further out than this, it pauses the
// partition (the rest is not due before it) and resumes it this long before
// that record is due; it also pauses a partition at retry.lookahead
// records held. So a backlog waiting an hour costs the memory of the
// records due within this, and a record is read before it is due: a
// resumed partition is fetched again only after a while (up to a second
// when every partition of its broker was paused: librdkafka's broker
// thread sees the resume at its next wake-up; then a fetch).
int64_t TierReadAheadMs(const RetryTier& tier);
inline constexpr int64_t kTierReadAheadMs = 2000;

// Whether a thread of `tier` offers a partition's records to the processor
// in offset order (a fixed-delay tier: see DueScheduler's FIFO).
bool TierIsFifo(const RetryTier& tier);

// The longest a record of `tier` should wait from when it is read: its
// delay, or retry.backoff.max_ms for a backoff tier.
int64_t TierMaxDelayMs(const RetryOptions& retry, const RetryTier& tier);

// Retry threads `tier` starts with.
int TierStartThreads(const RetryOptions& retry, const RetryTier& tier);

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_STEERING_RETRY_TIERS_H_
