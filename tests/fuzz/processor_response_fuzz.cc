// Fuzzes how the grpc processor turns a downstream's answer into an outcome
// (server/processors/grpc_outcome.h): the status code, its message and the
// response bytes all come from a service retryd does not control.
//
// Input: byte 0 is the status code (its low bits modulo 20: the 17 codes
// and numbers that name none; its top bit set: the answer carried no
// message); byte 1 the number of status_map entries (0..3), each two
// bytes: a code (0..17, 17 naming none) and an outcome (0..3); then one byte
// L and the L bytes of the status message; the rest is the serialized
// ProcessResponse, or bytes that are not one (an input that ends early
// leaves the rest empty).
//
// Beyond "no crash, no sanitizer report", it checks the conversion's
// promises: an OK answer that is missing or does not parse is retriable;
// success only for OK, ALREADY_EXISTS or a SUCCESS mapping; a
// replacement only after OK, and then exactly what the response asks for;
// a failure always has a reason naming the code; kUnavailable only for the
// four codes that point at the downstream.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "retryd/v1/processor.pb.h"
#include "server/processors/grpc_outcome.h"
#include "tests/fuzz/fuzz_check.h"

namespace retryd::fuzz {
namespace {

using Kind = engine::Outcome::Kind;

// Takes bytes from the front of the input; past its end, zeros.
class Reader {
 public:
  explicit Reader(std::string_view input) : input_(input) {}
  uint8_t Byte() {
    if (input_.empty()) return 0;
    const uint8_t b = static_cast<uint8_t>(input_.front());
    input_.remove_prefix(1);
    return b;
  }
  std::string_view Take(size_t n) {
    const std::string_view taken = input_.substr(0, n);
    input_.remove_prefix(taken.size());
    return taken;
  }
  std::string_view Rest() const { return input_; }

 private:
  std::string_view input_;
};

retryd::v1::ProcessRequest Request() {
  retryd::v1::ProcessRequest request;
  retryd::v1::KafkaRecord& record = *request.mutable_record();
  record.set_topic("orders");
  record.set_offset(42);
  record.set_key("k");
  record.set_value("v");
  record.add_headers()->set_key("null-value");
  auto* h = record.add_headers();
  h->set_key("trace");
  h->set_value("abc");
  request.set_attempt(2);
  return request;
}

bool PointsAtTheDownstream(grpc::StatusCode code) {
  return code == grpc::StatusCode::CANCELLED || code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::UNIMPLEMENTED || code == grpc::StatusCode::UNAUTHENTICATED ||
         code == grpc::StatusCode::PERMISSION_DENIED;
}

bool SameHeader(const Header& h, const retryd::v1::RecordHeader& r) {
  return h.key == r.key() && h.value.has_value() == r.has_value() &&
         (!r.has_value() || *h.value == r.value());
}

void CheckReplacement(const retryd::v1::ProcessRequest& request,
                      const retryd::v1::ProcessResponse& response, const engine::Outcome& outcome) {
  if (response.has_value() && response.null_value()) {
    Require(outcome.kind == Kind::kRetriable && !outcome.reason.empty(),
            "an answer with both value and null_value is retriable, with a reason");
    return;
  }
  Require(outcome.kind == Kind::kOk && outcome.reason.empty(), "OK is success, with no reason");
  if (response.has_value()) {
    Require(outcome.value.has_value() && outcome.value->has_value() &&
                **outcome.value == response.value(),
            "a value in the answer replaces the record's");
  } else if (response.null_value()) {
    Require(outcome.value.has_value() && !outcome.value->has_value(),
            "null_value makes the value null");
  } else {
    Require(!outcome.value.has_value(), "no value in the answer keeps the record's");
  }
  const auto& in = request.record().headers();
  const auto& added = response.headers();
  if (!response.replace_headers() && added.empty()) {
    Require(!outcome.headers.has_value(), "no headers in the answer keeps the record's");
    return;
  }
  Require(outcome.headers.has_value(), "headers in the answer replace the record's set");
  const Headers& out = *outcome.headers;
  const int kept = response.replace_headers() ? 0 : in.size();
  Require(out.size() == static_cast<size_t>(kept + added.size()),
          "the output headers are the input's (unless replaced) and the answer's");
  for (int i = 0; i < kept; ++i) Require(SameHeader(out[i], in[i]), "input headers come first");
  for (int i = 0; i < added.size(); ++i) {
    Require(SameHeader(out[kept + i], added[i]), "the answer's headers follow, in order");
  }
}

void FuzzProcessorResponse(std::string_view input) {
  Reader reader(input);
  const uint8_t first = reader.Byte();
  const auto code = static_cast<grpc::StatusCode>((first & 0x7f) % 20);
  const bool has_message = (first & 0x80) == 0;
  google::protobuf::Map<std::string, retryd::v1::StatusOutcome> overrides;
  for (int n = reader.Byte() % 4; n > 0; --n) {
    const std::string name = StatusCodeName(static_cast<grpc::StatusCode>(reader.Byte() % 18));
    overrides[name] = static_cast<retryd::v1::StatusOutcome>(reader.Byte() % 4);
  }
  const std::string message(reader.Take(reader.Byte()));
  const std::string bytes(reader.Rest());

  absl::StatusOr<StatusTable> table = StatusTable::WithOverrides(overrides);
  Require(table.ok() || table.status().code() == absl::StatusCode::kInvalidArgument,
          "a bad status_map is INVALID_ARGUMENT", table.status().ToString());
  if (!table.ok()) table = StatusTable();
  const retryd::v1::ProcessRequest request = Request();
  const engine::Outcome outcome =
      OutcomeOfAnswer(*table, code, message, request, has_message ? &bytes : nullptr);

  if (code == grpc::StatusCode::OK) {
    retryd::v1::ProcessResponse response;
    if (!has_message || !response.ParseFromString(bytes)) {
      Require(outcome.kind == Kind::kRetriable && outcome.reason.starts_with("malformed answer") &&
                  !outcome.value.has_value() && !outcome.headers.has_value(),
              "an OK answer without a readable ProcessResponse is retriable, and replaces nothing",
              outcome.reason);
      return;
    }
    CheckReplacement(request, response, outcome);
    return;
  }
  Require(!outcome.value.has_value() && !outcome.headers.has_value(),
          "only an OK answer replaces anything");
  const retryd::v1::StatusOutcome mapped = table->outcome(code);
  if (outcome.kind == Kind::kOk) {
    Require(mapped == retryd::v1::STATUS_OUTCOME_SUCCESS,
            "success only for OK or a code mapped to SUCCESS");
    Require(outcome.reason.empty(), "success has no reason");
    return;
  }
  Require(mapped != retryd::v1::STATUS_OUTCOME_SUCCESS, "a code mapped to SUCCESS is success");
  Require(outcome.reason.starts_with(StatusCodeName(code)), "the reason starts with the code",
          outcome.reason);
  Require(outcome.reason.find(message) != std::string::npos, "the reason carries the message",
          outcome.reason);
  const Kind expected =
      mapped == retryd::v1::STATUS_OUTCOME_DEAD_LETTER ? Kind::kPermanent : Kind::kRetriable;
  if (PointsAtTheDownstream(code)) {
    Require(outcome.kind == Kind::kUnavailable && outcome.fallback == expected,
            "a code that points at the downstream is kUnavailable, the table's outcome its "
            "fallback");
  } else {
    Require(outcome.kind == expected, "any other code gets the table's outcome");
  }
}

}  // namespace
}  // namespace retryd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  retryd::fuzz::FuzzProcessorResponse(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
