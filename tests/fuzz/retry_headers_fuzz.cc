// Fuzzes the retryd-* header codec (server/engine/handoff/retry_headers.h) with the
// headers of a record read from the retry topic, which anyone who can
// produce to that topic controls.
//
// Input: the record's headers, one per line; "key=value" splits at the
// first '=', a line without '=' is a header with a null value, and the
// newline after the last line is optional. The whole input is also the
// record's value, and its first line the record's key, when a dead-letter
// form of the record is fitted to a size limit.
//
// Beyond "no crash, no sanitizer report", it checks the codec's promises:
// parsing fails only with INVALID_ARGUMENT and a short message; what parses
// survives being written back and parsed again; writing keeps the other
// headers byte for byte; TruncateUtf8 and FitDeadLetter stay within their
// limits.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "server/engine/handoff/dead_letter_fit.h"
#include "server/engine/handoff/dlq_dialects.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/model/record.h"
#include "tests/fuzz/fuzz_check.h"

namespace retryd::fuzz {
namespace {

// An error message ends up in a log line and in retryd-error; values quoted
// in it are cut, so it stays short whatever the input.
constexpr size_t kMaxErrorMessageBytes = 1024;

Headers ParseInput(std::string_view input) {
  // Debian's Abseil has its own string_view, not an alias of std's.
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(input.data(), input.size()), '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  Headers headers;
  for (absl::string_view line : lines) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      headers.push_back(Header{std::string(line), std::nullopt});
    } else {
      headers.push_back(Header{std::string(line.substr(0, eq)), std::string(line.substr(eq + 1))});
    }
  }
  return headers;
}

bool IsRetrydHeader(const Header& h) { return h.key.starts_with(engine::kRetrydHeaderPrefix); }

// What FitDeadLetter keeps whole as the dead letter's description: retryd's
// headers and another tool's dead-letter headers (its dialects).
bool IsDescription(const Header& h) { return IsRetrydHeader(h) || engine::IsDialectHeader(h.key); }

void CheckRoundTrip(const Headers& headers, const engine::RetryMetadata& parsed) {
  const Headers written = engine::WithRetryHeaders(headers, parsed);
  Require(engine::StripRetrydHeaders(written) == engine::StripRetrydHeaders(headers),
          "WithRetryHeaders keeps the other headers as they were");
  absl::StatusOr<engine::RetryMetadata> again = engine::ParseRetryHeaders(written);
  Require(again.ok(), "written retry headers parse", again.status().ToString());
  engine::RetryMetadata expected = parsed;
  expected.error = engine::TruncateUtf8(parsed.error, engine::kMaxErrorBytes);
  Require(*again == expected, "written retry headers parse to what was written");
}

void CheckTruncateUtf8(std::string_view s) {
  for (size_t max_bytes : {size_t{0}, size_t{1}, size_t{3}, s.size() / 2, s.size()}) {
    const std::string cut = engine::TruncateUtf8(s, max_bytes);
    Require(cut.size() <= max_bytes || s.size() <= max_bytes,
            "TruncateUtf8 stays within max_bytes");
    Require(s.starts_with(cut), "TruncateUtf8 returns a prefix");
    // At most one character (4 bytes) is given up to end on a boundary.
    Require(cut.size() + 3 >= std::min(max_bytes, s.size()), "TruncateUtf8 cuts at most 3 bytes");
  }
}

void CheckFitDeadLetter(std::string_view input, const Headers& headers) {
  OutgoingRecord record;
  record.topic = "orders.dlq";
  record.key = std::string(input.substr(0, input.find('\n')));
  record.value = std::string(input);
  record.headers = headers;
  const size_t full = engine::RecordWireSize(record);
  for (size_t max_bytes : {size_t{0}, size_t{512}, size_t{1024}, full / 2, full}) {
    const OutgoingRecord fitted = engine::FitDeadLetter(record, max_bytes);
    Headers original;  // The record's own headers, in order.
    for (const Header& h : headers) {
      if (!IsDescription(h)) original.push_back(h);
    }
    Headers kept;
    for (const Header& h : fitted.headers) {
      if (!IsDescription(h)) kept.push_back(h);
    }
    Require(
        kept.size() <= original.size() && std::equal(kept.begin(), kept.end(), original.begin()),
        "FitDeadLetter keeps a prefix of the original headers, whole and in order");
    Require(!fitted.key.has_value() || fitted.key == record.key, "FitDeadLetter keeps the key");
    Require(!fitted.value.has_value() || record.value->starts_with(*fitted.value),
            "FitDeadLetter keeps a prefix of the value");
    const bool kept_content = fitted.key.has_value() || fitted.value.has_value() || !kept.empty();
    Require(!kept_content || engine::RecordWireSize(fitted) <= max_bytes,
            "FitDeadLetter keeps content only while the record fits");
    const int truncated = static_cast<int>(
        std::count_if(fitted.headers.begin(), fitted.headers.end(),
                      [](const Header& h) { return h.key == engine::kTruncatedHeader; }));
    Require(truncated == 1, "FitDeadLetter adds one retryd-truncated header");
  }
}

void FuzzRetryHeaders(std::string_view input) {
  const Headers headers = ParseInput(input);
  absl::StatusOr<engine::RetryMetadata> parsed = engine::ParseRetryHeaders(headers);
  if (parsed.ok()) {
    CheckRoundTrip(headers, *parsed);
  } else {
    Require(parsed.status().code() == absl::StatusCode::kInvalidArgument,
            "a bad header set is INVALID_ARGUMENT", parsed.status().ToString());
    Require(!parsed.status().message().empty() &&
                parsed.status().message().size() <= kMaxErrorMessageBytes,
            "the error message is short", parsed.status().ToString());
  }
  for (const Header& h : headers) {
    if (h.value.has_value()) CheckTruncateUtf8(*h.value);
  }
  CheckFitDeadLetter(input, headers);
}

}  // namespace
}  // namespace retryd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  retryd::fuzz::FuzzRetryHeaders(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
