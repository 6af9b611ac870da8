#include "server/common/error_reason.h"

#include <utility>

#include "absl/strings/cord.h"

namespace retryd {
namespace {

// The payload's key: a type URL of retryd's own, never sent as is.
constexpr absl::string_view kReasonUrl = "type.retryd.io/retryd.ErrorReason";

}  // namespace

absl::Status WithReason(absl::Status status, absl::string_view reason) {
  if (status.ok()) return status;
  status.SetPayload(kReasonUrl, absl::Cord(reason));
  return status;
}

std::string ReasonOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kReasonUrl);
  return payload.has_value() ? std::string(*payload) : std::string();
}

}  // namespace retryd
