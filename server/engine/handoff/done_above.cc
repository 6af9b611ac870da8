#include "server/engine/handoff/done_above.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace retryd::engine {
namespace {

constexpr absl::string_view kDonePrefix = "retryd-done/1 offset=";

}  // namespace

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

}  // namespace retryd::engine
