// How the `grpc` processor turns a downstream's answer into an Outcome: the
// status table of proto/retryd/v1/processor.proto, with the config's
// status_map overrides, and the replacement an OK answer carries.
//
// Pure and free of I/O, so that a fuzzer can drive it with any answer a
// downstream could send. Thread-safe: a StatusTable is immutable once built.
#ifndef RETRYD_SERVER_PROCESSORS_GRPC_OUTCOME_H_
#define RETRYD_SERVER_PROCESSORS_GRPC_OUTCOME_H_

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/map.h"
#include "grpcpp/support/status_code_enum.h"
#include "retryd/v1/config.pb.h"
#include "retryd/v1/processor.pb.h"
#include "server/engine/api/processor.h"

namespace retryd {

// "NOT_FOUND" for grpc::StatusCode::NOT_FOUND; "CODE_<n>" for a number that
// names no code (a downstream may send any number).
std::string StatusCodeName(grpc::StatusCode code);

// The code named `name` exactly as StatusCodeName spells it ("OK" included),
// or nullopt.
std::optional<grpc::StatusCode> StatusCodeFromName(std::string_view name);

// What each gRPC status means for the record.
class StatusTable {
 public:
  // The default table of processor.proto.
  StatusTable();

  // The default table with `overrides` (code name -> outcome) applied.
  // InvalidArgumentError, naming the entry, for an unknown code name, for OK
  // (whose meaning is fixed), or for STATUS_OUTCOME_UNSPECIFIED.
  static absl::StatusOr<StatusTable> WithOverrides(
      const google::protobuf::Map<std::string, retryd::v1::StatusOutcome>& overrides);

  // The outcome of `code`; STATUS_OUTCOME_RETRIABLE for a code the table does not list
  // (CANCELLED, or a number that names no code).
  retryd::v1::StatusOutcome outcome(grpc::StatusCode code) const;

 private:
  static constexpr int kCodes = 17;  // OK (0) .. UNAUTHENTICATED (16).
  std::array<retryd::v1::StatusOutcome, kCodes> outcomes_;
};

// The outcome of one Process call that ended with `code` and `message` (and,
// for OK, `response`) for `request`:
//  * OK: kOk, with the replacement the response asks for (its value or
//    null_value; its headers added after the request's, or in their place
//    with replace_headers). A response that sets both value and null_value
//    is malformed: kRetriable, saying so.
//  * UNAVAILABLE, UNIMPLEMENTED, UNAUTHENTICATED, PERMISSION_DENIED: the
//    downstream, not the record, is likely at fault: kUnavailable with the
//    table's outcome as its fallback, unless the table maps the code to
//    STATUS_OUTCOME_SUCCESS.
//  * any other code: the table's outcome (STATUS_OUTCOME_SUCCESS is kOk with nothing
//    replaced, e.g. ALREADY_EXISTS).
// A failure's reason is "<CODE_NAME>: <message>" ("<CODE_NAME>" alone for an
// empty message), never empty.
engine::Outcome OutcomeOf(const StatusTable& table, grpc::StatusCode code, std::string_view message,
                          const retryd::v1::ProcessRequest& request,
                          const retryd::v1::ProcessResponse& response);

// As OutcomeOf, from the answer as it came off the wire: `response_bytes` is
// the serialized ProcessResponse, or null when the answer carried no
// message. For OK, a missing message or bytes that do not parse as a
// ProcessResponse (e.g. a header key that is not UTF-8) are a malformed
// answer: kRetriable, saying so. gRPC's callback API reports such an answer
// as plain OK, with whatever part of the message it could read.
engine::Outcome OutcomeOfAnswer(const StatusTable& table, grpc::StatusCode code,
                                std::string_view message, const retryd::v1::ProcessRequest& request,
                                const std::string* response_bytes);

// The machine-readable reason of a failed call, from its status details:
// `details` is the serialized google.rpc.Status a downstream sends in the
// grpc-status-details-bin trailer (grpc::Status::error_details()). The first
// google.rpc.ErrorInfo among its details gives "<domain>/<reason>", or
// "<reason>" alone for an empty domain (a domain names a service, e.g.
// "payments.example.com", and holds no '/'). Empty when there is no
// ErrorInfo, its reason is empty, or the bytes do not parse: details are
// optional, and never change the outcome.
std::string ErrorReasonOf(std::string_view details);

}  // namespace retryd

#endif  // RETRYD_SERVER_PROCESSORS_GRPC_OUTCOME_H_
