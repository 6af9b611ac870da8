// The dead-letter tools' bounds and timeouts, and the helpers their calls
// share. Internal to server/dlq/.
#ifndef RETRYD_SERVER_DLQ_TOOL_LIMITS_H_
#define RETRYD_SERVER_DLQ_TOOL_LIMITS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace retryd::dlq {

// Bounds of one ListDeadLetters page.
inline constexpr uint32_t kDefaultPageSize = 100;
inline constexpr uint32_t kMaxPageSize = 1000;
inline constexpr size_t kMaxPageBytes = 4 << 20;
inline constexpr int64_t kMaxScannedPerPage = 100'000;
// StartRedriveRequest bounds.
inline constexpr uint32_t kDefaultRate = 100;
inline constexpr uint32_t kMaxRate = 100'000;
inline constexpr uint32_t kDefaultMaxRedrives = 3;
// The broker's offset.metadata.max.bytes default.
inline constexpr size_t kMaxSpecBytes = 4096;
// Each Kafka round trip of a tool call, at most.
inline constexpr absl::Duration kKafkaTimeout = absl::Seconds(10);
// Each Kafka call of a look for unfinished redrives, at most: the most it
// holds up a shutdown, which waits for the look in progress.
inline constexpr absl::Duration kScanTimeout = absl::Seconds(3);
// How often unfinished redrives are looked for.
inline constexpr absl::Duration kResumeScanInterval = absl::Seconds(10);
// A redrive's burst: it may send this much of its rate's worth at once,
// after a pause (a commit's flush), beyond its rate in any window.
inline constexpr absl::Duration kBurst = absl::Milliseconds(250);
// A resumed redrive looks in its targets for what was sent after its last
// commit from this long before that commit: the clocks of the retryd that
// committed and of the brokers that stamped the records may differ.
inline constexpr absl::Duration kClockSlack = absl::Minutes(1);
// Reading a target for what was sent before a resume, at most.
inline constexpr absl::Duration kLookBackTimeout = absl::Seconds(60);
// A redrive's flush when it ends or commits.
inline constexpr absl::Duration kFlushTimeout = absl::Seconds(30);

// INVALID_ARGUMENT (INVALID_FIELD) saying `message`.
absl::Status InvalidField(const std::string& message);

// `status` with `prefix` before its message, its reason kept.
absl::Status Prefixed(const absl::Status& status, absl::string_view prefix);

// What is left of `deadline`, at least 1 ms, at most `cap`.
inline absl::Duration Until(absl::Time deadline, absl::Duration cap = kKafkaTimeout) {
  return std::clamp(deadline - absl::Now(), absl::Milliseconds(1), cap);
}

}  // namespace retryd::dlq

#endif  // RETRYD_SERVER_DLQ_TOOL_LIMITS_H_
