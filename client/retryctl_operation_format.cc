// retryctl's text for operations: drain, dlq redrive, operations,
// operation (declared in retryctl_format.h).
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/retryctl_format.h"
#include "client/retryd_client.h"

namespace retryd::retryctl {
namespace {

constexpr size_t kMaxDescriptionWidth = 80;

// The progress line, or "-" if the server gave none.
std::string Progress(const v1::OperationProgress& progress) {
  if (progress.has_redrive()) return FormatRedriveProgress(progress.redrive());
  if (!progress.description().empty()) {
    return SanitizeForTerminal(progress.description(), kMaxDescriptionWidth);
  }
  if (progress.total() > 0) {
    return absl::StrCat(progress.done(), " of ", progress.total(), " ",
                        SanitizeForTerminal(progress.unit(), 32));
  }
  return "-";
}

// What a drain that succeeded did.
std::string DrainOutcome(const v1::DrainResult& drain) {
  std::string out = absl::StrCat("drained ", drain.drained_records(),
                                 drain.drained_records() == 1 ? " retry record" : " retry records");
  if (!drain.stopped_thread_ids().empty()) {
    absl::StrAppend(&out, ", stopped retry threads ",
                    absl::StrJoin(drain.stopped_thread_ids(), ", "));
  }
  return out;
}

// The result of an operation that succeeded, or why one ended otherwise;
// "" while it runs.
std::string Outcome(const v1::Operation& operation) {
  if (!operation.done()) return "";
  const absl::Status error = OperationError(operation);
  if (!error.ok()) return FormatError(error);
  if (operation.has_drain()) return DrainOutcome(operation.drain());
  if (operation.has_redrive()) return FormatRedriveOutcome(operation.redrive());
  return "done";
}

std::string Age(int64_t since_ms, int64_t now_ms) {
  return since_ms > 0 ? FormatElapsed(now_ms - since_ms) : "-";
}

}  // namespace

std::string FormatOperationProgress(const v1::OperationProgress& progress) {
  return Progress(progress);
}

std::string OperationKindName(v1::OperationKind kind) {
  const std::string name = ShortEnumName(*v1::OperationKind_descriptor(), kind);
  if (kind == v1::OPERATION_KIND_UNSPECIFIED || name.empty()) return absl::StrCat(kind);
  return absl::AsciiStrToLower(name);
}

std::string OperationStateName(v1::OperationState state) {
  const std::string name = ShortEnumName(*v1::OperationState_descriptor(), state);
  if (state == v1::OPERATION_STATE_UNSPECIFIED || name.empty()) return absl::StrCat(state);
  return name;
}

absl::Status OperationError(const v1::Operation& operation) {
  const absl::Status error = FromRpcStatus(operation.error());
  if (!error.ok() || !operation.done() || operation.state() == v1::OPERATION_STATE_SUCCEEDED) {
    return error;
  }
  // Ended otherwise, yet without an error code: say so rather than OK.
  const std::string message =
      absl::StrCat("operation ", operation.id(), " ended ", OperationStateName(operation.state()));
  return operation.state() == v1::OPERATION_STATE_CANCELLED ? absl::CancelledError(message)
                                                            : absl::UnknownError(message);
}

std::string FormatOperation(const v1::Operation& operation, int64_t now_ms) {
  std::string out;
  const auto line = [&out](std::string_view label, std::string_view value) {
    absl::StrAppendFormat(&out, "%-10s%s\n", label, value);
  };
  line("id", SanitizeForTerminal(operation.id(), 0));
  line("kind", OperationKindName(operation.kind()));
  line("state", OperationStateName(operation.state()));
  line("progress", Progress(operation.progress()));
  line("created", absl::StrCat(Age(operation.create_time_unix_ms(), now_ms), " ago"));
  if (operation.end_time_unix_ms() > 0) {
    line("ended", absl::StrCat(Age(operation.end_time_unix_ms(), now_ms), " ago, after ",
                               FormatElapsed(operation.end_time_unix_ms() -
                                             operation.create_time_unix_ms())));
  }
  if (!operation.request_id().empty()) {
    line("request", SanitizeForTerminal(operation.request_id(), 64));
  }
  if (operation.done()) {
    line(OperationError(operation).ok() ? "result" : "error", Outcome(operation));
  }
  // A redrive that failed still says how far it came.
  if (operation.has_redrive() && !OperationError(operation).ok()) {
    line("redrive", FormatRedriveOutcome(operation.redrive()));
  }
  if (operation.has_redrive()) out += FormatRedriveCounts(operation.redrive());
  return out;
}

std::string FormatListOperations(const v1::ListOperationsResponse& response, int64_t now_ms) {
  if (response.operations().empty()) return "no operations\n";
  std::vector<std::vector<std::string>> rows = {
      {"ID", "KIND", "STATE", "AGE", "ENDED", "PROGRESS"}};
  for (const v1::Operation& operation : response.operations()) {
    rows.push_back({SanitizeForTerminal(operation.id(), 40), OperationKindName(operation.kind()),
                    OperationStateName(operation.state()),
                    Age(operation.create_time_unix_ms(), now_ms),
                    operation.end_time_unix_ms() > 0
                        ? absl::StrCat(Age(operation.end_time_unix_ms(), now_ms), " ago")
                        : "-",
                    Progress(operation.progress())});
  }
  return RenderTable(rows);
}

std::string FormatOperationUpdate(const v1::Operation& operation, int64_t now_ms) {
  const std::string state = OperationStateName(operation.state());
  if (!operation.done()) {
    return absl::StrCat(state, " ", Age(operation.create_time_unix_ms(), now_ms), ": ",
                        Progress(operation.progress()));
  }
  std::string out = state;
  if (operation.end_time_unix_ms() > 0 && operation.create_time_unix_ms() > 0) {
    absl::StrAppend(&out, " after ",
                    FormatElapsed(operation.end_time_unix_ms() - operation.create_time_unix_ms()));
  }
  return absl::StrCat(out, ": ", Outcome(operation));
}

}  // namespace retryd::retryctl
