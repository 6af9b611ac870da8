// Fuzzes what the control API checks before the engine sees a call: the
// bearer token in the call's metadata (server/control/auth.h) and each RPC's
// request (server/control/request_validation.h), fed the bytes gRPC would
// hand the handler.
//
// Input, byte by byte:
//   [0]     the RPC, modulo 8: GetStatus, StartRetryThreads, StopRetryThreads,
//           SetInOrder, WatchMetrics, SetOrderingMode, ListInFlight,
//           DeadLetterRecord
//   [1]     retry.max_threads - 1 (so 1..256), for StartRetryThreads
//   [2]     the retry threads running, for StartRetryThreads
//   [3]     N, the length of the authorization metadata value (0: none)
//   [4..]   N bytes of that value, then the serialized request message
// Shorter inputs are padded with zeros.
//
// Beyond "no crash, no sanitizer report", it checks that a refused call is
// UNAUTHENTICATED or INVALID_ARGUMENT naming a field of the request, and
// that an accepted request is one the engine can act on.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/string_ref.h"
#include "retryd/v1/control.pb.h"
#include "server/control/auth.h"
#include "server/control/request_validation.h"
#include "tests/fuzz/fuzz_check.h"

namespace retryd::fuzz {
namespace {

// absl::string_view throughout: Debian's Abseil has its own, not an alias of
// std::string_view.

using control::Access;
using control::BearerTokenAuth;

constexpr char kToken[] = "fuzz-token";

enum class Rpc {
  kGetStatus,
  kStartRetryThreads,
  kStopRetryThreads,
  kSetInOrder,
  kWatchMetrics,
  kSetOrderingMode,
  kListInFlight,
  kDeadLetterRecord,
};
constexpr int kRpcCount = 8;

// A refusal of a request names the field at fault first.
void RequireInvalidArgument(const absl::Status& status, std::vector<absl::string_view> fields) {
  Require(status.code() == absl::StatusCode::kInvalidArgument,
          "a refused request is INVALID_ARGUMENT", status.ToString());
  bool named = false;
  for (absl::string_view field : fields) named = named || absl::StartsWith(status.message(), field);
  Require(named, "the refusal starts with the field's name", status.ToString());
}

bool ValidThreadIds(const google::protobuf::RepeatedField<uint32_t>& ids) {
  std::set<uint32_t> seen;
  for (uint32_t id : ids) {
    if (id == 0 || id > static_cast<uint32_t>(std::numeric_limits<int>::max())) return false;
    if (!seen.insert(id).second) return false;
  }
  return ids.size() <= control::kMaxThreadIdsPerRequest;
}

void CheckEngineIds(const google::protobuf::RepeatedField<uint32_t>& ids) {
  const std::vector<int> engine_ids = control::EngineThreadIds(ids);
  Require(engine_ids.size() == static_cast<size_t>(ids.size()), "every id reaches the engine");
  for (int i = 0; i < ids.size(); ++i) {
    Require(engine_ids[i] > 0 && static_cast<uint32_t>(engine_ids[i]) == ids[i],
            "an accepted id reaches the engine unchanged");
  }
}

void CheckAuth(Rpc rpc, absl::string_view authorization, bool has_authorization) {
  std::multimap<grpc::string_ref, grpc::string_ref> metadata;
  if (has_authorization) {
    metadata.emplace("authorization", grpc::string_ref(authorization.data(), authorization.size()));
  }
  const Access access =
      rpc == Rpc::kGetStatus || rpc == Rpc::kWatchMetrics || rpc == Rpc::kListInFlight
          ? Access::kReadOnly
          : Access::kMutating;
  Require(BearerTokenAuth().Check(metadata, access).ok(), "without a token every call passes");
  const absl::Status status = BearerTokenAuth(kToken, true).Check(metadata, access);
  if (!status.ok()) {
    Require(status.code() == absl::StatusCode::kUnauthenticated,
            "a refused token is UNAUTHENTICATED", status.ToString());
    Require(!absl::StrContains(status.message(), kToken), "a refusal never shows the token");
    return;
  }
  const absl::string_view scheme = authorization.substr(0, 7);
  Require(has_authorization && absl::EqualsIgnoreCase(scheme, "bearer ") &&
              absl::StripAsciiWhitespace(authorization.substr(7)) == kToken,
          "only \"Bearer <token>\" passes");
}

template <typename Request>
bool Parse(absl::string_view bytes, Request& request) {
  return request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

void CheckRequest(Rpc rpc, int max_threads, int running, absl::string_view bytes) {
  switch (rpc) {
    case Rpc::kGetStatus: {
      // No fields to check: parsing is all gRPC does with it.
      v1::GetStatusRequest request;
      Parse(bytes, request);
      return;
    }
    case Rpc::kStartRetryThreads: {
      v1::StartRetryThreadsRequest request;
      if (!Parse(bytes, request)) return;
      const absl::Status status =
          control::ValidateStartRetryThreadsRequest(request, max_threads, running);
      const bool fits = request.count() >= 1 && request.count() <= max_threads - running;
      Require(status.ok() == fits, "count is accepted exactly when it fits under the cap",
              status.ToString());
      if (!status.ok() && request.count() < 1) RequireInvalidArgument(status, {"count"});
      if (!status.ok() && request.count() >= 1) {
        Require(status.code() == absl::StatusCode::kFailedPrecondition,
                "a count past the cap is FAILED_PRECONDITION", status.ToString());
      }
      return;
    }
    case Rpc::kStopRetryThreads: {
      v1::StopRetryThreadsRequest request;
      if (!Parse(bytes, request)) return;
      const absl::Status status = control::ValidateStopRetryThreadsRequest(request);
      if (!status.ok()) {
        RequireInvalidArgument(status, {"count", "thread_ids", "tier"});
        return;
      }
      const bool by_ids = !request.thread_ids().empty();
      Require(by_ids ? request.count() == 0 && ValidThreadIds(request.thread_ids())
                     : request.count() >= 1,
              "an accepted stop names valid ids or a positive count, not both");
      Require(!by_ids || request.tier().empty(), "a tier goes with a count, not with ids");
      CheckEngineIds(request.thread_ids());
      return;
    }
    case Rpc::kSetInOrder: {
      v1::SetInOrderRequest request;
      if (!Parse(bytes, request)) return;
      const absl::Status status = control::ValidateSetInOrderRequest(request);
      Require(status.ok() == (request.in_order() || !request.drain_retries()),
              "drain_retries is refused exactly without in_order", status.ToString());
      if (!status.ok()) RequireInvalidArgument(status, {"drain_retries"});
      return;
    }
    case Rpc::kSetOrderingMode: {
      v1::SetOrderingModeRequest request;
      if (!Parse(bytes, request)) return;
      const absl::Status status = control::ValidateSetOrderingModeRequest(request);
      const bool known = request.mode() == v1::ORDERING_UNORDERED ||
                         request.mode() == v1::ORDERING_IN_ORDER ||
                         request.mode() == v1::ORDERING_KEY;
      Require(status.ok() ==
                  (known && (request.mode() == v1::ORDERING_IN_ORDER || !request.drain_retries())),
              "a mode is accepted exactly when known, with drain_retries only into IN_ORDER",
              status.ToString());
      if (!status.ok()) RequireInvalidArgument(status, {"mode", "drain_retries"});
      return;
    }
    case Rpc::kWatchMetrics: {
      v1::WatchMetricsRequest request;
      if (!Parse(bytes, request)) return;
      const absl::Status status = control::ValidateWatchMetricsRequest(request);
      if (!status.ok()) {
        RequireInvalidArgument(status, {"interval_ms", "thread_ids"});
        return;
      }
      Require(request.interval_ms() >= control::kMinWatchIntervalMs &&
                  request.interval_ms() <= control::kMaxWatchIntervalMs &&
                  ValidThreadIds(request.thread_ids()),
              "an accepted watch has an interval in range and valid ids");
      CheckEngineIds(request.thread_ids());
      return;
    }
    case Rpc::kListInFlight: {
      v1::ListInFlightRequest request;
      if (!Parse(bytes, request)) return;
      const absl::Status status = control::ValidateListInFlightRequest(request);
      Require(status.ok() == (request.limit() <= control::kMaxInFlightLimit),
              "limit is accepted exactly up to its bound", status.ToString());
      if (!status.ok()) {
        RequireInvalidArgument(status, {"limit"});
        return;
      }
      const size_t limit = control::InFlightLimit(request);
      Require(limit >= 1 && limit <= control::kMaxInFlightLimit,
              "the engine gets a limit in range");
      return;
    }
    case Rpc::kDeadLetterRecord: {
      v1::DeadLetterRecordRequest request;
      if (!Parse(bytes, request)) return;
      const absl::Status status = control::ValidateDeadLetterRecordRequest(request);
      if (!status.ok()) {
        RequireInvalidArgument(status, {"topic", "partition", "offset"});
        return;
      }
      Require(!request.topic().empty() && request.topic().size() <= 249 &&
                  request.partition() >= 0 && request.offset() >= 0,
              "an accepted record names a topic, a partition and an offset");
      return;
    }
  }
}

void FuzzControlRequests(absl::string_view input) {
  auto byte = [&input](size_t i) -> uint8_t { return i < input.size() ? input[i] : 0; };
  const Rpc rpc = static_cast<Rpc>(byte(0) % kRpcCount);
  const int max_threads = byte(1) + 1;
  const int running = byte(2);
  const size_t auth_length = byte(3);
  const absl::string_view rest = input.size() > 4 ? input.substr(4) : absl::string_view();
  const absl::string_view authorization = rest.substr(0, auth_length);
  const absl::string_view request = rest.substr(authorization.size());
  CheckAuth(rpc, authorization, auth_length > 0);
  CheckRequest(rpc, max_threads, running, request);
}

}  // namespace
}  // namespace retryd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  retryd::fuzz::FuzzControlRequests(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
