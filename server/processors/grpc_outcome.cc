#include "server/processors/grpc_outcome.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "server/common/grpc_code_names.h"

namespace retryd {
namespace {

using retryd::v1::StatusOutcome;

// Codes that point at the downstream or its configuration rather than at
// the record (processor.proto). CANCELLED reaches here only from the
// downstream's side (the engine ignores calls it cancels itself): a server
// shutting down cancels the calls it was serving.
bool PointsAtTheDownstream(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return true;
    default:
      return false;
  }
}

engine::Outcome::Kind KindOf(StatusOutcome outcome) {
  switch (outcome) {
    case retryd::v1::STATUS_OUTCOME_SUCCESS:
      return engine::Outcome::Kind::kOk;
    case retryd::v1::STATUS_OUTCOME_DEAD_LETTER:
      return engine::Outcome::Kind::kPermanent;
    default:
      return engine::Outcome::Kind::kRetriable;
  }
}

Header HeaderOf(const retryd::v1::RecordHeader& header) {
  Header h{header.key(), std::nullopt};
  if (header.has_value()) h.value = header.value();
  return h;
}

// kOk with what an OK answer asks the output record to carry.
engine::Outcome Replacement(const retryd::v1::ProcessRequest& request,
                            const retryd::v1::ProcessResponse& response) {
  if (response.has_value() && response.null_value()) {
    return engine::Outcome::Retriable(
        "malformed answer: the ProcessResponse sets both value and null_value");
  }
  engine::Outcome outcome = engine::Outcome::Ok();
  if (response.has_value()) {
    outcome.value.emplace(response.value());
  } else if (response.null_value()) {
    outcome.value.emplace(std::nullopt);
  }
  if (response.replace_headers() || response.headers_size() > 0) {
    Headers headers;
    if (!response.replace_headers()) {
      for (const retryd::v1::RecordHeader& h : request.record().headers()) {
        headers.push_back(HeaderOf(h));
      }
    }
    for (const retryd::v1::RecordHeader& h : response.headers()) headers.push_back(HeaderOf(h));
    outcome.headers = std::move(headers);
  }
  return outcome;
}

}  // namespace

std::string StatusCodeName(grpc::StatusCode code) {
  const int number = static_cast<int>(code);
  if (number >= 0 && number < static_cast<int>(kGrpcCodeNames.size())) {
    return std::string(kGrpcCodeNames[number]);
  }
  return absl::StrCat("CODE_", number);
}

std::optional<grpc::StatusCode> StatusCodeFromName(std::string_view name) {
  const std::optional<int> number = GrpcCodeNumber(name);
  if (!number.has_value()) return std::nullopt;
  return static_cast<grpc::StatusCode>(*number);
}

StatusTable::StatusTable() {
  using grpc::StatusCode;
  // Not listed in processor.proto, and anything a later gRPC adds: retried,
  // which loses nothing.
  outcomes_.fill(retryd::v1::STATUS_OUTCOME_RETRIABLE);
  outcomes_[StatusCode::OK] = retryd::v1::STATUS_OUTCOME_SUCCESS;
  outcomes_[StatusCode::ALREADY_EXISTS] = retryd::v1::STATUS_OUTCOME_SUCCESS;
  for (StatusCode code :
       {StatusCode::INVALID_ARGUMENT, StatusCode::FAILED_PRECONDITION, StatusCode::NOT_FOUND,
        StatusCode::OUT_OF_RANGE, StatusCode::DATA_LOSS, StatusCode::UNIMPLEMENTED,
        StatusCode::PERMISSION_DENIED, StatusCode::UNAUTHENTICATED}) {
    outcomes_[code] = retryd::v1::STATUS_OUTCOME_DEAD_LETTER;
  }
}

absl::StatusOr<StatusTable> StatusTable::WithOverrides(
    const google::protobuf::Map<std::string, StatusOutcome>& overrides) {
  StatusTable table;
  for (const auto& [name, outcome] : overrides) {
    const std::string entry = absl::StrCat("status_map[\"", absl::CHexEscape(name), "\"]");
    const std::optional<grpc::StatusCode> code = StatusCodeFromName(name);
    if (!code.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ": not a gRPC status code name, e.g. \"NOT_FOUND\""));
    }
    if (*code == grpc::StatusCode::OK) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ": OK always means success and cannot be changed"));
    }
    if (outcome != retryd::v1::STATUS_OUTCOME_SUCCESS &&
        outcome != retryd::v1::STATUS_OUTCOME_RETRIABLE &&
        outcome != retryd::v1::STATUS_OUTCOME_DEAD_LETTER) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry,
                       ": say what the code means: STATUS_OUTCOME_SUCCESS, "
                       "STATUS_OUTCOME_RETRIABLE or STATUS_OUTCOME_DEAD_LETTER"));
    }
    table.outcomes_[*code] = outcome;
  }
  return table;
}

StatusOutcome StatusTable::outcome(grpc::StatusCode code) const {
  const int number = static_cast<int>(code);
  if (number < 0 || number >= kCodes) return retryd::v1::STATUS_OUTCOME_RETRIABLE;
  return outcomes_[number];
}

engine::Outcome OutcomeOf(const StatusTable& table, grpc::StatusCode code, std::string_view message,
                          const retryd::v1::ProcessRequest& request,
                          const retryd::v1::ProcessResponse& response) {
  if (code == grpc::StatusCode::OK) return Replacement(request, response);
  const engine::Outcome::Kind kind = KindOf(table.outcome(code));
  if (kind == engine::Outcome::Kind::kOk) return engine::Outcome::Ok();
  std::string reason = StatusCodeName(code);
  if (!message.empty())
    absl::StrAppend(&reason, ": ", absl::string_view(message.data(), message.size()));
  if (PointsAtTheDownstream(code)) return engine::Outcome::Unavailable(std::move(reason), kind);
  if (kind == engine::Outcome::Kind::kPermanent)
    return engine::Outcome::Permanent(std::move(reason));
  return engine::Outcome::Retriable(std::move(reason));
}

engine::Outcome OutcomeOfAnswer(const StatusTable& table, grpc::StatusCode code,
                                std::string_view message, const retryd::v1::ProcessRequest& request,
                                const std::string* response_bytes) {
  retryd::v1::ProcessResponse response;
  if (code == grpc::StatusCode::OK) {
    if (response_bytes == nullptr) {
      return engine::Outcome::Retriable("malformed answer: OK without a ProcessResponse");
    }
    if (!response.ParseFromString(*response_bytes)) {
      return engine::Outcome::Retriable(absl::StrCat("malformed answer: ", response_bytes->size(),
                                                     " bytes that are not a ProcessResponse"));
    }
  }
  return OutcomeOf(table, code, message, request, response);
}

std::string ErrorReasonOf(std::string_view details) {
  if (details.empty()) return "";
  google::rpc::Status status;
  if (!status.ParseFromArray(details.data(), static_cast<int>(details.size()))) return "";
  for (const google::protobuf::Any& detail : status.details()) {
    google::rpc::ErrorInfo info;
    if (!detail.Is<google::rpc::ErrorInfo>() || !detail.UnpackTo(&info)) continue;
    if (info.reason().empty()) return "";
    if (info.domain().empty()) return info.reason();
    return absl::StrCat(info.domain(), "/", info.reason());
  }
  return "";
}

}  // namespace retryd
