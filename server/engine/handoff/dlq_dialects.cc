#include "server/engine/handoff/dlq_dialects.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace retryd::engine {
namespace {

// Debian's Abseil is built with its own absl::string_view rather than an alias
// of std::string_view, so the two do not convert implicitly.
absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

// Java's Short.MAX_VALUE: KIP-1191's delivery count is a short.
constexpr int kMaxDeliveryCount = 32767;

// What Java's ByteBuffer.putInt/putLong write: big-endian two's complement.
template <typename Int>
std::string BigEndian(Int value) {
  std::string out(sizeof(Int), '\0');
  auto bits = static_cast<std::make_unsigned_t<Int>>(value);
  for (size_t i = sizeof(Int); i-- > 0;) {
    out[i] = static_cast<char>(bits & 0xFF);
    bits >>= 8;
  }
  return out;
}

template <typename Int>
absl::StatusOr<Int> FromBigEndian(std::string_view name, const std::string& value) {
  if (value.size() != sizeof(Int)) {
    return absl::InvalidArgumentError(absl::StrCat("header ", Av(name), " is not a ", sizeof(Int),
                                                   "-byte big-endian integer: ", value.size(),
                                                   " bytes"));
  }
  std::make_unsigned_t<Int> bits = 0;
  for (char c : value) bits = static_cast<decltype(bits)>((bits << 8) | static_cast<uint8_t>(c));
  return static_cast<Int>(bits);
}

std::string_view PrefixOf(DeadLetterDialect dialect) {
  switch (dialect) {
    case DeadLetterDialect::kSpring:
      return spring::kPrefix;
    case DeadLetterDialect::kStreams:
      return streams::kPrefix;
    case DeadLetterDialect::kKip1191:
      return kip1191::kPrefix;
  }
  return spring::kPrefix;
}

// Java's Throwable.printStackTrace shape ("<class>: <message>" then "\tat"
// lines), with one line saying where retryd failed the record instead of
// frames it has none of.
std::string StackTrace(const RetryMetadata& m, const std::string& error) {
  return absl::StrCat(Av(kFailureClassName), ": ", error, "\n\tat retryd(", m.original_topic, "-",
                      m.original_partition, "@", m.original_offset, ", ", m.attempt,
                      " attempts)\n");
}

void Add(Headers& out, std::string_view key, std::string value) {
  out.push_back(Header{std::string(key), std::move(value)});
}

// The last copy of `key` in `headers`; nullptr when there is none.
const Header* Last(const Headers& headers, std::string_view key) {
  const Header* found = nullptr;
  for (const Header& h : headers) {
    if (h.key == key) found = &h;
  }
  return found;
}

// The value of the last `key`: an error when it is missing (and
// `required`) or null; nullptr when it is missing and not required.
absl::StatusOr<const std::string*> Value(const Headers& headers, std::string_view key,
                                         bool required) {
  const Header* h = Last(headers, key);
  if (h == nullptr) {
    if (!required) return nullptr;
    return absl::InvalidArgumentError(absl::StrCat("missing header ", Av(key)));
  }
  if (!h->value.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("header ", Av(key), " has a null value"));
  }
  return &*h->value;
}

// The coordinates every dialect has: topic, partition and offset, the first
// as text, the other two decoded by `read_partition` and `read_offset`.
template <typename ReadPartition, typename ReadOffset>
absl::Status ReadOrigin(const Headers& headers, std::string_view topic_key,
                        std::string_view partition_key, std::string_view offset_key,
                        ReadPartition read_partition, ReadOffset read_offset, RetryMetadata& m) {
  absl::StatusOr<const std::string*> topic = Value(headers, topic_key, true);
  if (!topic.ok()) return topic.status();
  absl::StatusOr<const std::string*> partition = Value(headers, partition_key, true);
  if (!partition.ok()) return partition.status();
  absl::StatusOr<const std::string*> offset = Value(headers, offset_key, true);
  if (!offset.ok()) return offset.status();
  if (absl::Status s = ValidateTopicHeader(topic_key, **topic); !s.ok()) return s;
  m.original_topic = **topic;
  absl::StatusOr<int64_t> p = read_partition(partition_key, **partition);
  if (!p.ok()) return p.status();
  m.original_partition = static_cast<int32_t>(*p);
  absl::StatusOr<int64_t> o = read_offset(offset_key, **offset);
  if (!o.ok()) return o.status();
  m.original_offset = *o;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Decimal(std::string_view key, const std::string& value, int64_t max) {
  return ParseDecimalHeader(key, value, 0, max);
}

// Streams' and KIP-1191's coordinates: all three as text.
absl::Status ReadTextOrigin(const Headers& headers, std::string_view topic_key,
                            std::string_view partition_key, std::string_view offset_key,
                            RetryMetadata& m) {
  auto partition = [](std::string_view key, const std::string& v) {
    return Decimal(key, v, std::numeric_limits<int32_t>::max());
  };
  auto offset = [](std::string_view key, const std::string& v) {
    return Decimal(key, v, std::numeric_limits<int64_t>::max());
  };
  return ReadOrigin(headers, topic_key, partition_key, offset_key, partition, offset, m);
}

absl::Status OutOfRange(std::string_view key, int64_t value, std::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat("header ", Av(key), " is out of range: ", value, " (must be ", Av(range), ")"));
}

// The error a dialect gives: its message, else the exception's class.
std::string Error(const Headers& headers, std::string_view message_key,
                  std::string_view class_key) {
  for (std::string_view key : {message_key, class_key}) {
    if (key.empty()) continue;
    const Header* h = Last(headers, key);
    if (h != nullptr && h->value.has_value() && !h->value->empty()) return *h->value;
  }
  return std::string();
}

absl::StatusOr<RetryMetadata> ParseSpring(const Headers& headers) {
  RetryMetadata m;
  m.attempt = 0;
  auto int32 = [](std::string_view key, const std::string& v) -> absl::StatusOr<int64_t> {
    absl::StatusOr<int32_t> n = FromBigEndian<int32_t>(key, v);
    if (!n.ok()) return n.status();
    if (*n < 0) return OutOfRange(key, *n, ">= 0");
    return *n;
  };
  auto int64 = [](std::string_view key, const std::string& v) -> absl::StatusOr<int64_t> {
    absl::StatusOr<int64_t> n = FromBigEndian<int64_t>(key, v);
    if (!n.ok()) return n.status();
    if (*n < 0) return OutOfRange(key, *n, ">= 0");
    return *n;
  };
  if (absl::Status s = ReadOrigin(headers, spring::kOriginalTopic, spring::kOriginalPartition,
                                  spring::kOriginalOffset, int32, int64, m);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<const std::string*> ts = Value(headers, spring::kOriginalTimestamp, false);
  if (!ts.ok()) return ts.status();
  if (*ts != nullptr) {
    absl::StatusOr<int64_t> n = FromBigEndian<int64_t>(spring::kOriginalTimestamp, **ts);
    if (!n.ok()) return n.status();
    if (*n < -1) return OutOfRange(spring::kOriginalTimestamp, *n, ">= -1");
    m.original_timestamp_ms = *n;
  }
  m.original_timestamp_type = DefaultTimestampType(m.original_timestamp_ms);
  // Read leniently: nothing retryd does with another tool's dead letter
  // depends on the type, so a value Kafka does not name keeps the default
  // rather than failing the record.
  absl::StatusOr<const std::string*> type = Value(headers, spring::kOriginalTimestampType, false);
  if (type.ok() && *type != nullptr) {
    m.original_timestamp_type = TimestampTypeFromName(**type).value_or(m.original_timestamp_type);
  }
  m.error = Error(headers, spring::kExceptionMessage, spring::kExceptionFqcn);
  return m;
}

absl::StatusOr<RetryMetadata> ParseStreams(const Headers& headers, int64_t record_timestamp_ms) {
  RetryMetadata m;
  m.attempt = 0;
  if (absl::Status s =
          ReadTextOrigin(headers, streams::kTopic, streams::kPartition, streams::kOffset, m);
      !s.ok()) {
    return s;
  }
  // Kafka Streams gives the dead-letter record the failed record's timestamp.
  m.original_timestamp_ms = std::max<int64_t>(record_timestamp_ms, -1);
  m.original_timestamp_type = DefaultTimestampType(m.original_timestamp_ms);
  m.error = Error(headers, streams::kMessage, streams::kException);
  return m;
}

absl::StatusOr<RetryMetadata> ParseKip1191(const Headers& headers) {
  RetryMetadata m;
  m.attempt = 0;
  if (absl::Status s =
          ReadTextOrigin(headers, kip1191::kTopic, kip1191::kPartition, kip1191::kOffset, m);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<const std::string*> count = Value(headers, kip1191::kDeliveryCount, false);
  if (!count.ok()) return count.status();
  if (*count != nullptr) {
    absl::StatusOr<int64_t> n = Decimal(kip1191::kDeliveryCount, **count, kMaxDeliveryCount);
    if (!n.ok()) return n.status();
    m.attempt = static_cast<int>(*n);
  }
  m.error = Error(headers, kip1191::kMessage, {});
  return m;
}

}  // namespace

std::string_view DialectName(DeadLetterDialect dialect) {
  switch (dialect) {
    case DeadLetterDialect::kSpring:
      return "spring";
    case DeadLetterDialect::kStreams:
      return "streams";
    case DeadLetterDialect::kKip1191:
      return "kip1191";
  }
  return "unknown";
}

std::optional<DeadLetterDialect> DialectFromName(std::string_view name) {
  for (DeadLetterDialect d :
       {DeadLetterDialect::kSpring, DeadLetterDialect::kStreams, DeadLetterDialect::kKip1191}) {
    if (DialectName(d) == name) return d;
  }
  return std::nullopt;
}

bool IsDialectHeader(std::string_view key) {
  return absl::StartsWith(Av(key), Av(spring::kPrefix)) ||
         absl::StartsWith(Av(key), Av(streams::kPrefix)) ||
         absl::StartsWith(Av(key), Av(kip1191::kPrefix));
}

Headers StripDialectHeaders(const Headers& headers, DeadLetterDialect dialect) {
  const std::string_view prefix = PrefixOf(dialect);
  Headers kept;
  kept.reserve(headers.size());
  for (const Header& h : headers) {
    if (!absl::StartsWith(h.key, Av(prefix))) kept.push_back(h);
  }
  return kept;
}

Headers DialectHeaders(DeadLetterDialect dialect, const RetryMetadata& m, std::string_view group) {
  const std::string error = TruncateUtf8(m.error, kMaxErrorBytes);
  Headers out;
  switch (dialect) {
    case DeadLetterDialect::kSpring:
      // DeadLetterRecordManager adds the exception's headers, then the
      // original record's.
      Add(out, spring::kExceptionFqcn, std::string(kFailureClassName));
      Add(out, spring::kExceptionCauseFqcn, std::string(kFailureClassName));
      Add(out, spring::kExceptionMessage, error);
      Add(out, spring::kExceptionStacktrace, StackTrace(m, error));
      Add(out, spring::kOriginalTopic, m.original_topic);
      Add(out, spring::kOriginalPartition, BigEndian<int32_t>(m.original_partition));
      Add(out, spring::kOriginalOffset, BigEndian<int64_t>(m.original_offset));
      Add(out, spring::kOriginalTimestamp, BigEndian<int64_t>(m.original_timestamp_ms));
      // Kafka's TimestampType name, as the consumer was told it (and kept
      // through the retry topic in retryd-original-timestamp-type).
      Add(out, spring::kOriginalTimestampType,
          std::string(TimestampTypeName(m.original_timestamp_type)));
      if (!group.empty()) Add(out, spring::kOriginalConsumerGroup, std::string(group));
      break;
    case DeadLetterDialect::kStreams:
      Add(out, streams::kException, std::string(kFailureClassName));
      Add(out, streams::kMessage, error);
      Add(out, streams::kStacktrace, StackTrace(m, error));
      Add(out, streams::kTopic, m.original_topic);
      Add(out, streams::kPartition, absl::StrCat(m.original_partition));
      Add(out, streams::kOffset, absl::StrCat(m.original_offset));
      break;
    case DeadLetterDialect::kKip1191:
      Add(out, kip1191::kTopic, m.original_topic);
      Add(out, kip1191::kPartition, absl::StrCat(m.original_partition));
      Add(out, kip1191::kOffset, absl::StrCat(m.original_offset));
      Add(out, kip1191::kGroup, std::string(group));
      if (m.attempt > 0) {
        Add(out, kip1191::kDeliveryCount, absl::StrCat(std::min(m.attempt, kMaxDeliveryCount)));
      }
      Add(out, kip1191::kMessage, error);
      break;
  }
  return out;
}

Headers WithDialectHeaders(const Headers& headers, std::span<const DeadLetterDialect> dialects,
                           const RetryMetadata& m, std::string_view group) {
  Headers added;
  for (size_t i = 0; i < dialects.size(); ++i) {
    const DeadLetterDialect d = dialects[i];
    // Listed twice (the config refuses it; an embedder may not): once.
    if (std::find(dialects.begin(), dialects.begin() + i, d) != dialects.begin() + i) continue;
    Headers more = DialectHeaders(d, m, group);
    added.insert(added.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  }
  Headers out;
  out.reserve(headers.size() + added.size());
  for (const Header& h : headers) {
    const bool replaced =
        std::any_of(added.begin(), added.end(), [&h](const Header& a) { return a.key == h.key; });
    if (!replaced) out.push_back(h);
  }
  out.insert(out.end(), std::make_move_iterator(added.begin()),
             std::make_move_iterator(added.end()));
  return out;
}

int64_t DeadLetterTimestampMs(std::span<const DeadLetterDialect> dialects, const RetryMetadata& m) {
  const bool streams =
      std::find(dialects.begin(), dialects.end(), DeadLetterDialect::kStreams) != dialects.end();
  return streams && m.original_timestamp_ms >= 0 ? m.original_timestamp_ms : -1;
}

std::optional<DeadLetterDialect> DetectDialect(const Headers& headers) {
  if (Last(headers, spring::kOriginalTopic) != nullptr) return DeadLetterDialect::kSpring;
  if (Last(headers, streams::kTopic) != nullptr) return DeadLetterDialect::kStreams;
  if (Last(headers, kip1191::kTopic) != nullptr) return DeadLetterDialect::kKip1191;
  return std::nullopt;
}

absl::StatusOr<RetryMetadata> ParseDialectHeaders(const Headers& headers, DeadLetterDialect dialect,
                                                  int64_t record_timestamp_ms) {
  switch (dialect) {
    case DeadLetterDialect::kSpring:
      return ParseSpring(headers);
    case DeadLetterDialect::kStreams:
      return ParseStreams(headers, record_timestamp_ms);
    case DeadLetterDialect::kKip1191:
      return ParseKip1191(headers);
  }
  return absl::InvalidArgumentError("unknown dead-letter dialect");
}

}  // namespace retryd::engine
