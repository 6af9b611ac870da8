// Fuzzes the dead-letter tools' record logic (server/dlq/dead_letters.h)
// with what a caller and a producer to the dead-letter topic control: a
// ListDeadLetters page token, and a dead letter's headers.
//
// Input: the first line is the page token; every later line is a header of
// the dead letter, as in retry_headers_fuzz.cc ("key=value", a line without
// '=' a null value). The key is the token line too.
//
// Beyond "no crash, no sanitizer report", it checks: a token decodes or is
// INVALID_ARGUMENT (INVALID_FIELD), and a decoded one encodes back to a token
// that decodes the same; a dead letter decodes with a decode_error exactly
// when its retry headers do not parse, or, without retryd's headers, those
// of the dialect it has (dlq_dialects.h), whose name it then gives; a
// filter made of a record's own fields selects it; the record a redrive
// sends back through the retry topic parses, with one attempt more, and
// carries the redrive count once, one more than before; a foreign dead
// letter goes back to its original topic and partition without its
// dialect's headers.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/error_reason.h"
#include "server/dlq/dead_letters.h"
#include "server/engine/handoff/dlq_dialects.h"
#include "server/engine/handoff/retry_headers.h"
#include "tests/fuzz/fuzz_check.h"

namespace retryd::fuzz {
namespace {

void CheckToken(const std::string& token) {
  absl::StatusOr<dlq::ListCursor> cursor = dlq::DecodePageToken(token);
  if (!cursor.ok()) {
    Require(cursor.status().code() == absl::StatusCode::kInvalidArgument &&
                ReasonOf(cursor.status()) == "INVALID_FIELD",
            "a bad token is INVALID_ARGUMENT (INVALID_FIELD)", cursor.status().ToString());
    return;
  }
  const std::string again = dlq::EncodePageToken(*cursor);
  if (cursor->done()) {
    Require(again.empty(), "a cursor read to its end has no token");
    return;
  }
  absl::StatusOr<dlq::ListCursor> back = dlq::DecodePageToken(again);
  Require(back.ok(), "an encoded cursor decodes", back.status().ToString());
  for (const auto& [p, range] : cursor->partitions) {
    if (range.next >= range.end) continue;
    auto it = back->partitions.find(p);
    Require(it != back->partitions.end() && it->second.next == range.next &&
                it->second.end == range.end,
            "an encoded cursor decodes to the same ranges");
  }
}

void CheckDeadLetter(const std::string& key, const Headers& headers) {
  Record record;
  record.topic = "orders.dlq";
  record.partition = 3;
  record.offset = 17;
  record.key = key;
  record.value = "value";
  record.headers = headers;
  const dlq::DeadLetter dead = dlq::DecodeDeadLetter(record, 2);
  const bool retryds = engine::StripRetrydHeaders(headers).size() != headers.size();
  std::optional<engine::DeadLetterDialect> dialect;
  if (!retryds) dialect = engine::DetectDialect(headers);
  const absl::StatusOr<engine::RetryMetadata> meta =
      dialect ? engine::ParseDialectHeaders(headers, *dialect, record.timestamp_ms)
              : engine::ParseRetryHeaders(headers);
  Require(meta.ok() == dead.decode_error.empty(),
          "decode_error is set exactly when the dialect's headers do not parse");
  Require(dead.dialect ==
              (dialect ? engine::DialectName(*dialect) : std::string_view(retryds ? "retryd" : "")),
          "the dialect read is named", dead.dialect);
  Require(dead.value.size() <= 2 && dead.value_size == 5, "the value is cut, its size kept");

  dlq::DeadLetterFilter own;
  own.key_prefix = key.substr(0, key.size() / 2);
  own.partitions.push_back(3);
  if (meta.ok()) {
    own.original_topic = dead.original_topic;
    own.original_partition = dead.original_partition;
    own.min_attempts = dead.attempts;
    own.max_attempts = dead.attempts;
    own.first_failure_from_unix_ms = dead.first_failure_unix_ms;
    if (!dead.error_reason.empty()) own.reason = dead.error_reason;
    if (!dead.error.empty()) own.error_contains = dead.error.substr(0, 3);
  }
  Require(dlq::Matches(own, dead), "a filter of the record's own fields selects it",
          absl::StrCat("key_prefix ", absl::CEscape(own.key_prefix), " reason ", own.reason,
                       " error_contains ", own.error_contains, " original ", own.original_topic,
                       "/", own.original_partition.value_or(-1), " attempts ", own.min_attempts));
  if (!meta.ok()) return;

  if (dialect) {
    const OutgoingRecord out =
        dlq::RedriveRecord(record, dead, {"", false, "orders.retry"}, "orders.dlq", 1);
    Require(out.topic == dead.original_topic && out.partition == dead.original_partition,
            "a foreign dead letter goes back to its origin");
    for (const Header& h : out.headers) {
      Require(engine::StripDialectHeaders({h}, *dialect).size() == 1,
              "a foreign dead letter is redriven without its dialect's headers", h.key);
    }
    return;
  }

  const OutgoingRecord out = dlq::RedriveRecord(record, dead, {"", false, "orders.retry"},
                                                "orders.dlq", 1'700'000'000'000);
  Require(out.topic == "orders.retry", "without reset_attempts it goes to the retry topic");
  absl::StatusOr<engine::RetryMetadata> again = engine::ParseRetryHeaders(out.headers);
  Require(again.ok(), "a redriven retry record parses", again.status().ToString());
  Require(again->attempt == std::min(dead.attempts + 1, engine::kMaxAttempt),
          "a redriven retry record has one attempt more");
  const auto count = std::count_if(out.headers.begin(), out.headers.end(),
                                   [](const Header& h) { return h.key == "retryd-redrive-count"; });
  Require(count == 1, "the redrive count appears once");
  for (const Header& h : out.headers) {
    if (h.key == "retryd-redrive-count") {
      Require(h.value == absl::StrCat(dead.redrive_count + 1), "the redrive count grows by one");
    }
  }
}

void FuzzDeadLetters(std::string_view input) {
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(input.data(), input.size()), '\n');
  const std::string token(lines.empty() ? absl::string_view() : lines.front());
  CheckToken(token);
  Headers headers;
  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (line.empty() && i + 1 == lines.size()) break;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      headers.push_back(Header{std::string(line), std::nullopt});
    } else {
      headers.push_back(Header{std::string(line.substr(0, eq)), std::string(line.substr(eq + 1))});
    }
  }
  CheckDeadLetter(token, headers);
}

}  // namespace
}  // namespace retryd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  retryd::fuzz::FuzzDeadLetters(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
