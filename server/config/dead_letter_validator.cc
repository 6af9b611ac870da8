// dead_letter_dialects: the header dialects each dead letter is written in.
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/config/section_validators.h"

namespace retryd::config_validation {

void ValidateDeadLetterDialects(Checker& checker, const v1::Config& config) {
  constexpr absl::string_view kDialects =
      "DEAD_LETTER_DIALECT_SPRING, DEAD_LETTER_DIALECT_STREAMS or DEAD_LETTER_DIALECT_KIP1191";
  const Node& root = checker.root();
  std::map<int, int> seen;  // Value -> its first index.
  for (int i = 0; i < config.dead_letter_dialects_size(); ++i) {
    const int value = config.dead_letter_dialects(i);
    if (value == v1::DEAD_LETTER_DIALECT_UNSPECIFIED || !v1::DeadLetterDialect_IsValid(value)) {
      // Text format refuses unknown names; a number slips through.
      checker.Error(root, "dead_letter_dialects",
                    absl::StrCat("must be ", kDialects, ", got ",
                                 value == v1::DEAD_LETTER_DIALECT_UNSPECIFIED
                                     ? "DEAD_LETTER_DIALECT_UNSPECIFIED"
                                     : absl::StrCat(value)),
                    i);
      continue;
    }
    auto [first, inserted] = seen.emplace(value, i);
    if (!inserted) {
      checker.Error(root, "dead_letter_dialects",
                    absl::StrCat(v1::DeadLetterDialect_Name(config.dead_letter_dialects(i)),
                                 " is listed twice (also dead_letter_dialects[", first->second,
                                 "]); list each dialect once"),
                    i);
    }
  }
}

}  // namespace retryd::config_validation
