#include "server/engine/handoff/retry_headers.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace retryd::engine {
namespace {

// Values echoed in error messages are cut to this many bytes: a header may be
// arbitrarily large and binary, and the message ends up in logs and in the
// dead-letter record.
constexpr size_t kMaxQuotedBytes = 64;

// Debian's Abseil is built with its own absl::string_view rather than an alias
// of std::string_view, so the two do not convert implicitly.
absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

std::string Quote(absl::string_view value) {
  const bool cut = value.size() > kMaxQuotedBytes;
  return absl::StrCat("\"", absl::CHexEscape(value.substr(0, kMaxQuotedBytes)),
                      cut ? "\"..." : "\"");
}

// Strictly decimal: SimpleAtoi alone would also accept '+' and surrounding
// whitespace, which no retryd writer produces, so such a value means the
// header was written by something else.
absl::StatusOr<int64_t> ParseInt(absl::string_view name, absl::string_view value) {
  const absl::string_view digits = absl::StartsWith(value, "-") ? value.substr(1) : value;
  const bool decimal = !digits.empty() && std::all_of(digits.begin(), digits.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
  int64_t result = 0;
  if (!decimal) {
    return absl::InvalidArgumentError(
        absl::StrCat("header ", name, " is not a decimal integer: ", Quote(value)));
  }
  if (!absl::SimpleAtoi(value, &result)) {
    return absl::InvalidArgumentError(
        absl::StrCat("header ", name, " does not fit in 64 bits: ", Quote(value)));
  }
  return result;
}

absl::StatusOr<int64_t> ParseIntInRange(absl::string_view name, absl::string_view value,
                                        int64_t min, int64_t max) {
  absl::StatusOr<int64_t> parsed = ParseInt(name, value);
  if (!parsed.ok()) return parsed.status();
  if (*parsed < min || *parsed > max) {
    std::string range = max == std::numeric_limits<int64_t>::max()
                            ? absl::StrCat(">= ", min)
                            : absl::StrCat("in [", min, ", ", max, "]");
    return absl::InvalidArgumentError(
        absl::StrCat("header ", name, " is out of range: ", *parsed, " (must be ", range, ")"));
  }
  return parsed;
}

absl::Status ValidateTopic(absl::string_view name, absl::string_view topic) {
  if (topic.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("header ", name, " is empty"));
  }
  if (topic.size() > kMaxTopicLength) {
    return absl::InvalidArgumentError(absl::StrCat("header ", name, " is longer than ",
                                                   kMaxTopicLength, " characters: ", topic.size()));
  }
  for (char c : topic) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header ", name, " is not a valid topic name (only [A-Za-z0-9._-]): ", Quote(topic)));
    }
  }
  // Kafka refuses these two names, so no record can have come from them.
  if (topic == "." || topic == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("header ", name, " is not a valid topic name: ", Quote(topic)));
  }
  return absl::OkStatus();
}

// The headers ParseRetryHeaders reads, in the order it checks them, so the
// error reported for a record with several problems is always the same one.
constexpr std::array<std::string_view, 11> kParsedHeaders = {kAttemptHeader,
                                                             kDueMsHeader,
                                                             kFirstFailureMsHeader,
                                                             kOriginalTopicHeader,
                                                             kOriginalPartitionHeader,
                                                             kOriginalOffsetHeader,
                                                             kOriginalTimestampMsHeader,
                                                             kOriginalTimestampTypeHeader,
                                                             kErrorHeader,
                                                             kFirstErrorHeader,
                                                             kErrorReasonHeader};

// Those a record may lack, written by an older retryd: the errors read as
// empty, the timestamp type as DefaultTimestampType().
bool Optional(std::string_view name) {
  return name == kOriginalTimestampTypeHeader || name == kErrorHeader ||
         name == kFirstErrorHeader || name == kErrorReasonHeader;
}

// The value of each of kParsedHeaders, in its order; empty where an
// optional one is absent.
using ParsedValues = std::array<absl::string_view, kParsedHeaders.size()>;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ParseRetryHeaders: finds each of kParsedHeaders in `headers` (one pass),
// into `value`, with its copies counted in `count`. INVALID_ARGUMENT if
// one is missing (and not optional), repeated or null.
absl::Status FindParsedHeaders(const Headers& headers, ParsedValues& value,
                               std::array<int, kParsedHeaders.size()>& count) {
  std::array<const Header*, kParsedHeaders.size()> found{};
  for (const Header& h : headers) {
    if (!absl::StartsWith(h.key, Av(kRetrydHeaderPrefix))) continue;
    for (size_t i = 0; i < kParsedHeaders.size(); ++i) {
      if (h.key == kParsedHeaders[i]) {
        if (count[i]++ == 0) found[i] = &h;
        break;
      }
    }
  }

  for (size_t i = 0; i < kParsedHeaders.size(); ++i) {
    const absl::string_view name = Av(kParsedHeaders[i]);
    if (count[i] == 0) {
      if (Optional(kParsedHeaders[i])) continue;
      return absl::InvalidArgumentError(absl::StrCat("missing header ", name));
    }
    if (count[i] > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("header ", name, " appears ", count[i], " times"));
    }
    if (!found[i]->value.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("header ", name, " has a null value"));
    }
    value[i] = *found[i]->value;
  }
  return absl::OkStatus();
}

// ParseRetryHeaders: the record's original coordinates (values 3 to 7:
// topic, partition, offset, timestamp and its type, which `has_type` says
// is there) into `m`.
absl::Status ParseOrigin(const ParsedValues& value, bool has_type, RetryMetadata& m) {
  if (absl::Status s = ValidateTopic(Av(kOriginalTopicHeader), value[3]); !s.ok()) {
    return s;
  }
  m.original_topic = std::string(value[3]);

  absl::StatusOr<int64_t> n = ParseIntInRange(Av(kOriginalPartitionHeader), value[4], 0,
                                              std::numeric_limits<int32_t>::max());
  if (!n.ok()) return n.status();
  m.original_partition = static_cast<int32_t>(*n);

  n = ParseIntInRange(Av(kOriginalOffsetHeader), value[5], 0, kInt64Max);
  if (!n.ok()) return n.status();
  m.original_offset = *n;

  n = ParseIntInRange(Av(kOriginalTimestampMsHeader), value[6], -1, kInt64Max);
  if (!n.ok()) return n.status();
  m.original_timestamp_ms = *n;

  if (!has_type) {
    m.original_timestamp_type = DefaultTimestampType(m.original_timestamp_ms);
  } else if (std::optional<TimestampType> type =
                 TimestampTypeFromName({value[7].data(), value[7].size()})) {
    m.original_timestamp_type = *type;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("header ", Av(kOriginalTimestampTypeHeader),
                     " is not CreateTime, LogAppendTime or NoTimestampType: ", Quote(value[7])));
  }
  return absl::OkStatus();
}

}  // namespace

Headers StripRetrydHeaders(const Headers& headers) {
  Headers kept;
  kept.reserve(headers.size());
  for (const Header& h : headers) {
    if (!absl::StartsWith(h.key, Av(kRetrydHeaderPrefix)) || h.key == kRedrivenFromHeader ||
        h.key == kRedriveCountHeader) {
      kept.push_back(h);
    }
  }
  return kept;
}

Headers WithRetryHeaders(const Headers& original, const RetryMetadata& m) {
  Headers out = StripRetrydHeaders(original);
  out.reserve(out.size() + kParsedHeaders.size());
  auto add = [&out](std::string_view key, std::string value) {
    out.push_back(Header{std::string(key), std::move(value)});
  };
  add(kAttemptHeader, absl::StrCat(m.attempt));
  add(kDueMsHeader, absl::StrCat(m.due_ms));
  add(kFirstFailureMsHeader, absl::StrCat(m.first_failure_ms));
  add(kOriginalTopicHeader, m.original_topic);
  add(kOriginalPartitionHeader, absl::StrCat(m.original_partition));
  add(kOriginalOffsetHeader, absl::StrCat(m.original_offset));
  add(kOriginalTimestampMsHeader, absl::StrCat(m.original_timestamp_ms));
  add(kOriginalTimestampTypeHeader, std::string(TimestampTypeName(m.original_timestamp_type)));
  add(kErrorHeader, TruncateUtf8(m.error, kMaxErrorBytes));
  add(kFirstErrorHeader, TruncateUtf8(m.first_error, kMaxErrorBytes));
  add(kErrorReasonHeader, TruncateUtf8(m.error_reason, kMaxErrorReasonBytes));
  return out;
}

Headers WithDeadLetterHeaders(const Headers& original, const RetryMetadata& m,
                              const DeadLetterStamp& stamp) {
  Headers out = WithRetryHeaders(original, m);
  out.push_back(Header{std::string(kDeadLetteredMsHeader), absl::StrCat(stamp.ms)});
  out.push_back(Header{std::string(kDeadLetteredByHeader), stamp.by});
  return out;
}

std::string DeadLetteredBy(std::string_view instance, int thread_id) {
  if (instance.empty()) return absl::StrCat("thread-", thread_id);
  return absl::StrCat(Av(instance), "/thread-", thread_id);
}

absl::StatusOr<RetryMetadata> ParseRetryHeaders(const Headers& headers) {
  ParsedValues value{};
  std::array<int, kParsedHeaders.size()> count{};
  if (absl::Status s = FindParsedHeaders(headers, value, count); !s.ok()) return s;

  RetryMetadata m;
  absl::StatusOr<int64_t> n = ParseIntInRange(Av(kAttemptHeader), value[0], 1, kMaxAttempt);
  if (!n.ok()) return n.status();
  m.attempt = static_cast<int>(*n);

  n = ParseIntInRange(Av(kDueMsHeader), value[1], 0, kInt64Max);
  if (!n.ok()) return n.status();
  m.due_ms = *n;

  n = ParseIntInRange(Av(kFirstFailureMsHeader), value[2], 0, kInt64Max);
  if (!n.ok()) return n.status();
  m.first_failure_ms = *n;

  if (absl::Status s = ParseOrigin(value, /*has_type=*/count[7] != 0, m); !s.ok()) return s;

  m.error = std::string(value[8]);
  m.first_error = std::string(value[9]);
  m.error_reason = std::string(value[10]);
  return m;
}

std::string_view TimestampTypeName(TimestampType type) {
  switch (type) {
    case TimestampType::kCreateTime:
      return "CreateTime";
    case TimestampType::kLogAppendTime:
      return "LogAppendTime";
    case TimestampType::kNone:
      break;
  }
  return "NoTimestampType";
}

std::optional<TimestampType> TimestampTypeFromName(std::string_view name) {
  for (TimestampType t :
       {TimestampType::kNone, TimestampType::kCreateTime, TimestampType::kLogAppendTime}) {
    if (TimestampTypeName(t) == name) return t;
  }
  return std::nullopt;
}

TimestampType DefaultTimestampType(int64_t timestamp_ms) {
  return timestamp_ms >= 0 ? TimestampType::kCreateTime : TimestampType::kNone;
}

absl::StatusOr<int64_t> ParseDecimalHeader(std::string_view name, std::string_view value,
                                           int64_t min, int64_t max) {
  return ParseIntInRange(Av(name), Av(value), min, max);
}

absl::Status ValidateTopicHeader(std::string_view name, std::string_view topic) {
  return ValidateTopic(Av(name), Av(topic));
}

std::string TruncateUtf8(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  auto is_continuation = [](unsigned char c) { return (c & 0xC0) == 0x80; };
  // s[max_bytes] is the first byte cut off. If it continues a sequence, find
  // that sequence's lead byte (at most 3 bytes back) and cut before it when
  // the sequence would not fit.
  size_t cut = max_bytes;
  size_t lead = max_bytes;
  while (lead > 0 && max_bytes - lead < 3 && is_continuation(static_cast<unsigned char>(s[lead]))) {
    --lead;
  }
  if (lead != max_bytes) {
    const unsigned char c = static_cast<unsigned char>(s[lead]);
    size_t length = 1;  // Not a lead byte: invalid UTF-8, cut where asked.
    if ((c & 0xE0) == 0xC0) {
      length = 2;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4;
    }
    if (lead + length > max_bytes) cut = lead;
  }
  return std::string(s.substr(0, cut));
}

void SetHeader(Headers& headers, std::string_view key, std::string value) {
  std::erase_if(headers, [key](const Header& h) { return h.key == key; });
  headers.push_back(Header{std::string(key), std::move(value)});
}

}  // namespace retryd::engine
