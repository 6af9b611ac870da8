#include "server/dlq/dead_letters.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/error_reason.h"
#include "server/engine/handoff/dlq_dialects.h"
#include "server/engine/handoff/retry_headers.h"

namespace retryd::dlq {
namespace {

using engine::kDeadLetteredByHeader;
using engine::kDeadLetteredMsHeader;
using engine::kRedriveCountHeader;
using engine::kRedrivenFromHeader;
using engine::kTruncatedHeader;

absl::Status InvalidField(const std::string& message) {
  return WithReason(absl::InvalidArgumentError(message), reason::kInvalidField);
}

const std::string* LastHeader(const Headers& headers, std::string_view key) {
  const std::string* found = nullptr;
  for (const Header& h : headers) {
    if (h.key == key && h.value.has_value()) found = &*h.value;
  }
  return found;
}

// The original timestamp's type a dead letter's retryd headers give; the
// default for its timestamp when they give none (or none Kafka names).
TimestampType OriginalTimestampType(const Headers& headers, int64_t timestamp_ms) {
  std::optional<TimestampType> type;
  if (const std::string* name = LastHeader(headers, engine::kOriginalTimestampTypeHeader)) {
    type = engine::TimestampTypeFromName(*name);
  }
  return type.value_or(engine::DefaultTimestampType(timestamp_ms));
}

constexpr absl::string_view kTokenVersion = "c1";

// DeadLetter.dialect of a record retryd wrote.
constexpr std::string_view kRetrydDialect = "retryd";

// The record as it sits in the dead-letter topic: position, timestamp, key
// and value (cut to `max_value_bytes`).
void SetRecordFields(const Record& record, size_t max_value_bytes, DeadLetter& out) {
  out.partition = record.partition;
  out.offset = record.offset;
  out.timestamp_unix_ms = record.timestamp_ms;
  out.key_null = !record.key.has_value();
  if (record.key.has_value()) out.key = *record.key;
  out.value_null = !record.value.has_value();
  if (record.value.has_value()) {
    out.value_size = static_cast<int64_t>(record.value->size());
    out.value = record.value->substr(0, max_value_bytes);
  }
}

// The record's own headers (`own`: without retryd's; without `dialect`'s
// too, if another tool wrote it), its lineage headers aside, and what the
// lineage and truncation headers say.
void SetHeaders(const Record& record, const Headers& own,
                const std::optional<engine::DeadLetterDialect>& dialect, DeadLetter& out) {
  for (const Header& h : dialect ? engine::StripDialectHeaders(own, *dialect) : own) {
    if (h.key == kRedrivenFromHeader || h.key == kRedriveCountHeader) continue;
    DeadLetterHeader& header = out.headers.emplace_back();
    header.key = h.key;
    header.value_null = !h.value.has_value();
    if (h.value.has_value()) header.value = *h.value;
  }
  if (const std::string* v = LastHeader(record.headers, kRedriveCountHeader)) {
    int32_t count = 0;
    if (absl::SimpleAtoi(*v, &count) && count >= 0) out.redrive_count = count;
  }
  if (const std::string* v = LastHeader(record.headers, kRedrivenFromHeader)) {
    out.redriven_from = *v;
  }
  if (const std::string* v = LastHeader(record.headers, kTruncatedHeader)) out.truncated = *v;
}

// What the retry metadata says of the record's history, and when and by
// whom retryd dead-lettered it.
void SetHistory(const Record& record, const engine::RetryMetadata& meta, DeadLetter& out) {
  out.original_topic = meta.original_topic;
  out.original_partition = meta.original_partition;
  out.original_offset = meta.original_offset;
  out.original_timestamp_unix_ms = meta.original_timestamp_ms;
  out.attempts = meta.attempt;
  out.first_failure_unix_ms = meta.first_failure_ms;
  out.error = meta.error;
  out.first_error = meta.first_error;
  out.error_reason = meta.error_reason;
  if (const std::string* v = LastHeader(record.headers, kDeadLetteredMsHeader)) {
    int64_t ms = 0;
    if (absl::SimpleAtoi(*v, &ms) && ms > 0) out.dead_lettered_unix_ms = ms;
  }
  if (const std::string* v = LastHeader(record.headers, kDeadLetteredByHeader)) {
    out.dead_lettered_by = *v;
  }
}

}  // namespace

DeadLetter DecodeDeadLetter(const Record& record, size_t max_value_bytes) {
  DeadLetter out;
  SetRecordFields(record, max_value_bytes, out);
  const Headers own = engine::StripRetrydHeaders(record.headers);
  // Retryd's own first; another tool's only where retryd's are absent
  // (its lineage headers aside, which any redriven record carries).
  std::optional<engine::DeadLetterDialect> dialect;
  if (own.size() == record.headers.size()) dialect = engine::DetectDialect(record.headers);
  SetHeaders(record, own, dialect, out);
  // A record with neither retryd's headers nor another tool's is described
  // by the first retryd header missing. Another tool's leave the fields
  // retryd alone knows empty.
  absl::StatusOr<engine::RetryMetadata> meta;
  if (dialect) {
    const engine::DeadLetterDialect d = *dialect;
    out.dialect = std::string(engine::DialectName(d));
    meta = engine::ParseDialectHeaders(record.headers, d, record.timestamp_ms);
  } else {
    if (own.size() != record.headers.size()) out.dialect = std::string(kRetrydDialect);
    meta = engine::ParseRetryHeaders(record.headers);
  }
  if (!meta.ok()) {
    out.decode_error = std::string(meta.status().message());
    return out;
  }
  SetHistory(record, *meta, out);
  return out;
}

absl::Status ValidateFilter(const DeadLetterFilter& filter) {
  if (filter.original_partition.has_value() && *filter.original_partition < 0) {
    return InvalidField(
        absl::StrCat("filter.original_partition: must be >= 0, got ", *filter.original_partition));
  }
  if (filter.first_failure_from_unix_ms < 0 || filter.first_failure_to_unix_ms < 0) {
    return InvalidField("filter.first_failure_from_unix_ms/to_unix_ms: must be >= 0 (0: no bound)");
  }
  if (filter.first_failure_to_unix_ms != 0 &&
      filter.first_failure_to_unix_ms <= filter.first_failure_from_unix_ms) {
    return InvalidField(absl::StrCat(
        "filter.first_failure_to_unix_ms (", filter.first_failure_to_unix_ms,
        ") must be after first_failure_from_unix_ms (", filter.first_failure_from_unix_ms, ")"));
  }
  if (filter.min_attempts < 0 || filter.max_attempts < 0) {
    return InvalidField("filter.min_attempts/max_attempts: must be >= 0 (0: no bound)");
  }
  if (filter.max_attempts != 0 && filter.max_attempts < filter.min_attempts) {
    return InvalidField(absl::StrCat("filter.max_attempts (", filter.max_attempts,
                                     ") is below min_attempts (", filter.min_attempts, ")"));
  }
  for (int32_t p : filter.partitions) {
    if (p < 0) return InvalidField(absl::StrCat("filter.partitions: must be >= 0, got ", p));
  }
  return absl::OkStatus();
}

bool Matches(const DeadLetterFilter& filter, const DeadLetter& dead) {
  if (!filter.key_prefix.empty() &&
      (dead.key_null || !absl::StartsWith(dead.key, filter.key_prefix))) {
    return false;
  }
  if (!filter.partitions.empty() && std::find(filter.partitions.begin(), filter.partitions.end(),
                                              dead.partition) == filter.partitions.end()) {
    return false;
  }
  const bool retryd_fields =
      !filter.error_contains.empty() || !filter.reason.empty() || !filter.original_topic.empty() ||
      filter.original_partition.has_value() || filter.first_failure_from_unix_ms != 0 ||
      filter.first_failure_to_unix_ms != 0 || filter.min_attempts != 0 || filter.max_attempts != 0;
  if (!retryd_fields) return true;
  if (!dead.decode_error.empty()) return false;
  if (!filter.error_contains.empty() && !absl::StrContains(dead.error, filter.error_contains) &&
      !absl::StrContains(dead.first_error, filter.error_contains)) {
    return false;
  }
  if (!filter.reason.empty() && dead.error_reason != filter.reason) {
    const size_t slash = dead.error_reason.rfind('/');
    if (slash == std::string::npos || dead.error_reason.substr(slash + 1) != filter.reason) {
      return false;
    }
  }
  if (!filter.original_topic.empty() && dead.original_topic != filter.original_topic) {
    return false;
  }
  if (filter.original_partition.has_value() &&
      dead.original_partition != *filter.original_partition) {
    return false;
  }
  if (filter.first_failure_from_unix_ms != 0 &&
      dead.first_failure_unix_ms < filter.first_failure_from_unix_ms) {
    return false;
  }
  if (filter.first_failure_to_unix_ms != 0 &&
      dead.first_failure_unix_ms >= filter.first_failure_to_unix_ms) {
    return false;
  }
  if (filter.min_attempts != 0 && dead.attempts < filter.min_attempts) return false;
  if (filter.max_attempts != 0 && dead.attempts > filter.max_attempts) return false;
  return true;
}

absl::StatusOr<std::vector<int32_t>> FilterPartitions(const DeadLetterFilter& filter,
                                                      int partitions) {
  std::vector<int32_t> out;
  if (filter.partitions.empty()) {
    for (int32_t p = 0; p < partitions; ++p) out.push_back(p);
    return out;
  }
  for (int32_t p : filter.partitions) {
    if (p >= partitions) {
      return InvalidField(absl::StrCat("filter.partitions: the dead-letter topic has ", partitions,
                                       " partitions (0..", partitions - 1, "), not ", p));
    }
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool ListCursor::done() const {
  return std::all_of(partitions.begin(), partitions.end(),
                     [](const auto& p) { return p.second.next >= p.second.end; });
}

std::string EncodePageToken(const ListCursor& cursor) {
  if (cursor.done()) return "";
  std::string text(kTokenVersion);
  for (const auto& [partition, range] : cursor.partitions) {
    if (range.next >= range.end) continue;
    absl::StrAppend(&text, ";", partition, ":", range.next, ":", range.end);
  }
  return absl::WebSafeBase64Escape(text);
}

absl::StatusOr<ListCursor> DecodePageToken(const std::string& token) {
  const absl::Status bad = InvalidField(
      "page_token: not a token this retryd gave (pass next_page_token as it came, or none for "
      "the first page)");
  std::string text;
  if (!absl::WebSafeBase64Unescape(token, &text)) return bad;
  std::vector<absl::string_view> parts = absl::StrSplit(text, ';');
  if (parts.empty() || parts[0] != kTokenVersion) return bad;
  ListCursor cursor;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::vector<absl::string_view> fields = absl::StrSplit(parts[i], ':');
    int32_t partition = 0;
    ListCursor::Range range;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &partition) ||
        !absl::SimpleAtoi(fields[1], &range.next) || !absl::SimpleAtoi(fields[2], &range.end) ||
        partition < 0 || range.next < 0 || range.end < range.next) {
      return bad;
    }
    cursor.partitions[partition] = range;
  }
  return cursor;
}

OutgoingRecord RedriveRecord(const Record& dead, const DeadLetter& decoded,
                             const RedriveTarget& target, const std::string& dlq_topic,
                             int64_t now_ms) {
  OutgoingRecord out;
  out.key = dead.key;
  out.value = dead.value;
  const Headers lineage_free = [&] {
    Headers h;
    for (const Header& header : dead.headers) {
      if (header.key != kRedrivenFromHeader && header.key != kRedriveCountHeader) {
        h.push_back(header);
      }
    }
    return h;
  }();
  const std::optional<engine::DeadLetterDialect> foreign = engine::DialectFromName(decoded.dialect);
  if (foreign) {
    // retryd never had its retry state: it starts over, as new, without
    // the other tool's headers.
    out.topic = target.topic.empty() ? decoded.original_topic : target.topic;
    out.partition = target.topic.empty() ? decoded.original_partition : -1;
    out.headers = engine::StripDialectHeaders(lineage_free, *foreign);
  } else if (target.topic.empty()) {
    if (target.reset_attempts) {
      out.topic = decoded.original_topic;
      out.partition = decoded.original_partition;
      out.headers = engine::StripRetrydHeaders(lineage_free);
    } else {
      engine::RetryMetadata m;
      m.attempt = std::min(decoded.attempts + 1, engine::kMaxAttempt);
      m.due_ms = now_ms;
      m.first_failure_ms = decoded.first_failure_unix_ms;
      m.original_topic = decoded.original_topic;
      m.original_partition = decoded.original_partition;
      m.original_offset = decoded.original_offset;
      m.original_timestamp_ms = decoded.original_timestamp_unix_ms;
      // Not in DeadLetter: read again from the record (an older retryd's
      // has none, and gets the default).
      m.original_timestamp_type = OriginalTimestampType(lineage_free, m.original_timestamp_ms);
      m.error = decoded.error;
      m.first_error = decoded.first_error;
      m.error_reason = decoded.error_reason;
      out.topic = target.retry_topic;
      // The retry topic is partitioned as the input: by key.
      out.partition = -1;
      out.headers = engine::WithRetryHeaders(lineage_free, m);
    }
  } else {
    out.topic = target.topic;
    out.partition = -1;
    out.headers = target.reset_attempts ? engine::StripRetrydHeaders(lineage_free) : lineage_free;
  }
  out.headers.push_back(Header{std::string(kRedrivenFromHeader),
                               absl::StrCat(dlq_topic, "/", dead.partition, "@", dead.offset)});
  out.headers.push_back(
      Header{std::string(kRedriveCountHeader), absl::StrCat(decoded.redrive_count + 1)});
  return out;
}

std::optional<std::pair<int32_t, int64_t>> RedrivenFrom(const Record& record,
                                                        const std::string& dlq_topic) {
  const std::string* v = LastHeader(record.headers, kRedrivenFromHeader);
  if (v == nullptr) return std::nullopt;
  // "<topic>/<partition>@<offset>", as RedriveRecord writes it.
  const absl::string_view value(*v);
  const size_t at = value.rfind('@');
  const size_t slash = value.rfind('/', at);
  if (at == absl::string_view::npos || slash == absl::string_view::npos ||
      value.substr(0, slash) != dlq_topic) {
    return std::nullopt;
  }
  int32_t partition = 0;
  int64_t offset = 0;
  if (!absl::SimpleAtoi(value.substr(slash + 1, at - slash - 1), &partition) ||
      !absl::SimpleAtoi(value.substr(at + 1), &offset)) {
    return std::nullopt;
  }
  return std::make_pair(partition, offset);
}

}  // namespace retryd::dlq
