#include "client/command_args.h"

#include <cctype>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace retryd::retryctl {
namespace {

// Appends the ids of "3" or "3,4,5" to `ids`; false if one is not an id.
bool ParseIds(std::string_view text, std::vector<uint32_t>& ids) {
  for (absl::string_view piece : absl::StrSplit(Av(text), ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(piece, &value) || value < 0 ||
        value > std::numeric_limits<uint32_t>::max()) {
      return false;
    }
    ids.push_back(static_cast<uint32_t>(value));
  }
  return true;
}

}  // namespace

bool LooksLikeFlag(std::string_view arg) {
  return arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1]));
}

std::pair<std::string_view, std::optional<std::string_view>> SplitFlag(std::string_view arg) {
  const size_t eq = arg.find('=');
  if (!LooksLikeFlag(arg) || eq == std::string_view::npos) return {arg, std::nullopt};
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

UsageError Usage(std::string message, std::string_view topic) {
  return UsageError{std::move(message), std::string(topic)};
}

std::vector<std::string> CommandArgs::TakeRest() {
  std::vector<std::string> rest;
  while (!done()) rest.push_back(take());
  return rest;
}

std::optional<UsageError> CommandArgs::TakeIds(std::string_view flag,
                                               std::optional<std::string_view> inline_value,
                                               std::vector<uint32_t>& ids) {
  if (inline_value.has_value()) {
    if (!ParseIds(*inline_value, ids)) return BadId(flag, *inline_value);
    return std::nullopt;
  }
  if (done() || LooksLikeFlag(peek())) {
    return Error(absl::StrCat(Av(flag), " needs a thread id, e.g. ", Av(flag), " 3"));
  }
  while (!done() && !LooksLikeFlag(peek())) {
    const std::string& text = take();
    if (!ParseIds(text, ids)) return BadId(flag, text);
  }
  return std::nullopt;
}

std::optional<std::string> CommandArgs::TakeValue(std::optional<std::string_view> inline_value) {
  if (inline_value.has_value()) return std::string(*inline_value);
  if (done() || LooksLikeFlag(peek())) return std::nullopt;
  return take();
}

std::variant<int64_t, UsageError> CommandArgs::TakeNumber(
    std::string_view flag, std::optional<std::string_view> inline_value, int64_t min, int64_t max,
    std::string_view what) {
  const std::optional<std::string> text = TakeValue(inline_value);
  if (!text.has_value()) return Error(absl::StrCat(Av(flag), " needs a number of ", Av(what)));
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min || value > max) {
    return Error(absl::StrCat(Av(flag), " must be a whole number in ", min, "..", max, ", got '",
                              *text, "'"));
  }
  return value;
}

UsageError CommandArgs::Error(std::string_view message) const {
  return Usage(absl::StrCat(what_, ": ", Av(message)), topic_);
}

UsageError CommandArgs::UnknownFlag(std::string_view flag) const {
  return Error(absl::StrCat("unknown flag ", Av(flag)));
}

UsageError CommandArgs::Unexpected(std::string_view arg) const {
  return Error(absl::StrCat("unexpected argument '", Av(arg), "'"));
}

UsageError CommandArgs::BadId(std::string_view flag, std::string_view text) const {
  return Error(
      absl::StrCat(Av(flag), ": '", Av(text), "' is not a thread id (a number such as 3)"));
}

}  // namespace retryd::retryctl
