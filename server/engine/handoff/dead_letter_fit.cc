#include "server/engine/handoff/dead_letter_fit.h"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/engine/handoff/dlq_dialects.h"
#include "server/engine/handoff/retry_headers.h"

namespace retryd::engine {
namespace {

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

// librdkafka frames a v2 record with at most a few dozen bytes (varints,
// attributes, deltas); this leaves room to spare.
constexpr size_t kRecordFramingBytes = 256;
// Per header: two varint lengths of at most 5 bytes each.
constexpr size_t kHeaderFramingBytes = 10;
// The longest retryd-truncated value: four 20-digit numbers and the words.
constexpr size_t kTruncatedHeaderBytes = 160;

size_t HeaderSize(const Header& h) {
  return h.key.size() + (h.value ? h.value->size() : 0) + kHeaderFramingBytes;
}

std::string SizeText(const std::optional<std::string>& field) {
  return field ? absl::StrCat(field->size()) : "null";
}

}  // namespace

size_t RecordWireSize(const OutgoingRecord& record) {
  size_t size = kRecordFramingBytes + (record.key ? record.key->size() : 0) +
                (record.value ? record.value->size() : 0);
  for (const Header& h : record.headers) size += HeaderSize(h);
  return size;
}

OutgoingRecord FitDeadLetter(const OutgoingRecord& dead_letter, size_t max_bytes) {
  OutgoingRecord out;
  out.topic = dead_letter.topic;
  out.partition = dead_letter.partition;
  out.timestamp_ms = dead_letter.timestamp_ms;
  Headers original;
  size_t used =
      kRecordFramingBytes + kTruncatedHeader.size() + kTruncatedHeaderBytes + kHeaderFramingBytes;
  for (const Header& h : dead_letter.headers) {
    if (h.key == kTruncatedHeader) continue;  // Fitted before: sized afresh below.
    // Another tool's dead-letter headers describe the record as retryd's do.
    if (absl::StartsWith(h.key, Av(kRetrydHeaderPrefix)) || IsDialectHeader(h.key)) {
      out.headers.push_back(h);
      used += HeaderSize(h);
    } else {
      original.push_back(h);
    }
  }
  auto fits = [&](size_t bytes) { return used + bytes <= max_bytes; };
  if (dead_letter.key && fits(dead_letter.key->size())) {
    out.key = dead_letter.key;
    used += out.key->size();
  }
  size_t kept_headers = 0;
  for (const Header& h : original) {
    if (!fits(HeaderSize(h))) break;  // A prefix, so the kept ones keep their order.
    out.headers.insert(out.headers.begin() + static_cast<std::ptrdiff_t>(kept_headers), h);
    used += HeaderSize(h);
    ++kept_headers;
  }
  if (dead_letter.value && used < max_bytes) {
    out.value = dead_letter.value->substr(0, max_bytes - used);
  }
  SetHeader(out.headers, kTruncatedHeader,
            absl::StrCat("original key=", SizeText(dead_letter.key),
                         " value=", SizeText(dead_letter.value), " headers=", original.size(),
                         "; kept key=", SizeText(out.key), " value=", SizeText(out.value),
                         " headers=", kept_headers));
  return out;
}

}  // namespace retryd::engine
