#include "server/engine/partition_state.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace retryd {
namespace {

constexpr absl::string_view kPrefix = "retryd/1 ";
constexpr absl::string_view kDonePrefix = "retryd-done/1 offset=";

}  // namespace

std::string EncodeInPlaceRetry(const InPlaceRetry& retry) {
  return absl::StrCat(kPrefix, "offset=", retry.offset, " attempt=", retry.attempt,
                      " first-failure-ms=", retry.first_failure_ms, " due-ms=", retry.due_ms);
}

std::optional<InPlaceRetry> DecodeInPlaceRetry(absl::string_view metadata) {
  if (!absl::ConsumePrefix(&metadata, kPrefix)) return std::nullopt;
  std::vector<absl::string_view> fields = absl::StrSplit(metadata, ' ');
  if (fields.size() != 4) return std::nullopt;
  InPlaceRetry retry;
  const std::pair<absl::string_view, int64_t*> int64_fields[] = {
      {"offset=", &retry.offset},
      {"first-failure-ms=", &retry.first_failure_ms},
      {"due-ms=", &retry.due_ms}};
  // Each field once, in the order EncodeInPlaceRetry writes them.
  if (!absl::ConsumePrefix(&fields[1], "attempt=") ||
      !absl::SimpleAtoi(fields[1], &retry.attempt)) {
    return std::nullopt;
  }
  for (size_t i : {0, 2, 3}) {
    const auto& [name, out] = int64_fields[i == 0 ? 0 : i - 1];
    if (!absl::ConsumePrefix(&fields[i], name) || !absl::SimpleAtoi(fields[i], out)) {
      return std::nullopt;
    }
  }
  if (retry.offset < 0 || retry.attempt < 1) return std::nullopt;
  return retry;
}

std::string EncodeDoneAbove(int64_t offset,
                            const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  if (ranges.empty()) return "";
  std::string out = absl::StrCat(kDonePrefix, offset);
  const size_t header = out.size();
  for (const auto& [first, last] : ranges) {
    if (first <= offset || last < first) break;
    std::string range = absl::StrCat(" ", first - offset, "-", last - offset);
    if (out.size() + range.size() > kMaxDoneMetadataBytes) break;
    out += range;
  }
  return out.size() == header ? "" : out;
}

std::vector<std::pair<int64_t, int64_t>> DecodeDoneAbove(absl::string_view metadata,
                                                         int64_t committed) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (!absl::ConsumePrefix(&metadata, kDonePrefix)) return ranges;
  std::vector<absl::string_view> fields = absl::StrSplit(metadata, ' ');
  int64_t offset = -1;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields[0], &offset) || offset != committed) {
    return ranges;
  }
  int64_t previous = 0;  // Relative: every range starts above the commit offset.
  for (size_t i = 1; i < fields.size(); ++i) {
    std::pair<absl::string_view, absl::string_view> ends = absl::StrSplit(fields[i], '-');
    int64_t first = 0, last = 0;
    if (!absl::SimpleAtoi(ends.first, &first) || !absl::SimpleAtoi(ends.second, &last) ||
        first <= previous || last < first || last > (int64_t{1} << 62) - offset) {
      return {};
    }
    ranges.emplace_back(offset + first, offset + last);
    previous = last;
  }
  return ranges;
}

}  // namespace retryd
