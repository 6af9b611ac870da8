// The engine's limits that are not plain (bounds) numbers: max_held_bytes
// (0 means no limit) and liveness_stall_ms (a floor that follows the
// processor's and shutdown's timeouts).
#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/config/section_validators.h"
#include "server/engine/api/options.h"

namespace retryd::config_validation {
namespace {

constexpr uint64_t kMinHeldBytes = 1024;
constexpr uint64_t kMaxHeldBytes = uint64_t{1} << 40;  // 1 TiB.

}  // namespace

// Optional, so an explicit 0 (no limit) differs from leaving it out.
void ValidateMaxHeldBytes(Checker& checker, v1::Config& config) {
  if (!config.has_max_held_bytes()) {
    config.set_max_held_bytes(engine::kMaxHeldBytesDefault);
    return;
  }
  const uint64_t value = config.max_held_bytes();
  if (value != 0 && (value < kMinHeldBytes || value > kMaxHeldBytes)) {
    checker.Error(checker.root(), "max_held_bytes",
                  absl::StrCat("must be 0 (no limit) or between ", kMinHeldBytes, " and ",
                               kMaxHeldBytes, ", got ", value));
  }
}

// One turn of a thread's loop may wait for both the longest processor call
// and shutdown_timeout_ms.
void ValidateLivenessStall(Checker& checker, v1::Config& config) {
  const Node& root = checker.root();
  std::optional<uint64_t> call_ms = LongestCallMs(config);
  const bool shutdown_ok =
      InBounds(root.Field("shutdown_timeout_ms"), config.shutdown_timeout_ms());
  // A bound that is itself wrong was reported already; no rule from it.
  if (!shutdown_ok) call_ms.reset();
  const uint64_t longest_call_ms = call_ms.value_or(0);
  const uint64_t floor_ms = longest_call_ms + config.shutdown_timeout_ms();
  const bool written = config.liveness_stall_ms() != 0 || root.Written("liveness_stall_ms");
  if (!written) {
    config.set_liveness_stall_ms(
        std::max<uint64_t>(engine::kLivenessStallMsDefault, floor_ms + 10'000));
    return;
  }
  const uint64_t value = config.liveness_stall_ms();
  const uint64_t high = BoundsOf(root.Field("liveness_stall_ms")).max();
  if (value > high) {
    checker.Error(root, "liveness_stall_ms",
                  absl::StrCat("must be at most ", high, ", got ", value));
  } else if (call_ms.has_value() && value <= floor_ms) {
    checker.Error(root, "liveness_stall_ms",
                  absl::StrCat("must exceed the longest processor call (",
                               config.processor().has_grpc() ? "processor.grpc.deadline_ms"
                                                             : "processor.simulate's latency",
                               ", ", longest_call_ms, ") plus shutdown_timeout_ms (",
                               config.shutdown_timeout_ms(), "), ", floor_ms,
                               ": one turn of a thread's loop may wait that long, and liveness "
                               "would restart retryd for it; got ",
                               value));
  }
}

}  // namespace retryd::config_validation
