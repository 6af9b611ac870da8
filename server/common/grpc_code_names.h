// The names of gRPC's status codes, by number, as processor.proto and the
// config's processor.grpc.status_map spell them. Plain strings, so that the
// config loader can check names without linking gRPC.
#ifndef RETRYD_SERVER_COMMON_GRPC_CODE_NAMES_H_
#define RETRYD_SERVER_COMMON_GRPC_CODE_NAMES_H_

#include <array>
#include <optional>
#include <string_view>

namespace retryd {

// Indexed by code number: kGrpcCodeNames[5] is "NOT_FOUND".
inline constexpr std::array<std::string_view, 17> kGrpcCodeNames = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

// The number of the code spelled exactly `name`, or nullopt.
inline std::optional<int> GrpcCodeNumber(std::string_view name) {
  for (size_t i = 0; i < kGrpcCodeNames.size(); ++i) {
    if (kGrpcCodeNames[i] == name) return static_cast<int>(i);
  }
  return std::nullopt;
}

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_GRPC_CODE_NAMES_H_
