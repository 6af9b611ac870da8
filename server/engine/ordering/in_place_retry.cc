#include "server/engine/ordering/in_place_retry.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace retryd::engine {
namespace {

constexpr absl::string_view kPrefix = "retryd/1 ";

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

}  // namespace retryd::engine
