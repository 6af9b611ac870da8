#include "server/config/parse_errors.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "retryd/v1/config.pb.h"
#include "server/config/validation_context.h"

namespace retryd::config_validation {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Turns protobuf's `Unknown enumeration value of "X" for field "f".`, for an
// enum field of Config itself (`ordering`), into "f: unknown value "X"
// (one of: A, B, C)"; nullopt for any other message. Only each number's
// current name is offered: the deprecated aliases (the names before the
// enum prefix) are still accepted, but not suggested.
std::optional<std::pair<std::string, std::string>> DescribeUnknownEnumValue(
    absl::string_view message) {
  if (!absl::ConsumePrefix(&message, "Unknown enumeration value of \"")) return std::nullopt;
  const size_t value_end = message.find('"');
  if (value_end == absl::string_view::npos) return std::nullopt;
  const absl::string_view value = message.substr(0, value_end);
  absl::string_view rest = message.substr(value_end);
  if (!absl::ConsumePrefix(&rest, "\" for field \"")) return std::nullopt;
  const std::string field_name(rest.substr(0, rest.find('"')));
  const FieldDescriptor* field = v1::Config::descriptor()->FindFieldByName(field_name);
  if (field == nullptr || field->enum_type() == nullptr) return std::nullopt;
  std::vector<std::string> names;
  for (int i = 0; i < field->enum_type()->value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor* value = field->enum_type()->value(i);
    if (value->number() != 0 && !value->options().deprecated()) {
      names.push_back(value->name());
    }
  }
  return std::make_pair(field_name, absl::StrCat("unknown value ", Quote(value),
                                                 " (one of: ", absl::StrJoin(names, ", "), ")"));
}

// Field path of the message type `full_name` inside Config ("" for Config
// itself), or nullopt if no field has that type.
std::optional<std::string> PathToType(absl::string_view full_name) {
  struct Item {
    const Descriptor* descriptor;
    std::string path;
  };
  std::deque<Item> queue = {{v1::Config::descriptor(), ""}};
  std::set<const Descriptor*> seen;
  while (!queue.empty()) {
    Item item = std::move(queue.front());
    queue.pop_front();
    if (item.descriptor->full_name() == full_name) return item.path;
    if (!seen.insert(item.descriptor).second) continue;
    for (int i = 0; i < item.descriptor->field_count(); ++i) {
      const FieldDescriptor* field = item.descriptor->field(i);
      if (field->message_type() == nullptr) continue;
      queue.push_back({field->message_type(), item.path.empty()
                                                  ? field->name()
                                                  : absl::StrCat(item.path, ".", field->name())});
    }
  }
  return std::nullopt;
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

// Turns protobuf's `Message type "retryd.v1.X" has no field named "y".` into
// "<path of X>.<closest field>: unknown field "y"; did you mean ...". Other
// parser messages are kept, with the column added.
std::pair<std::string, std::string> DescribeParseError(const ParseErrorCollector::Entry& entry) {
  if (auto described = DescribeUnknownEnumValue(entry.message)) return *std::move(described);
  absl::string_view message = entry.message;
  absl::string_view type_name;
  absl::string_view field_name;
  if (absl::ConsumePrefix(&message, "Message type \"")) {
    const size_t type_end = message.find('"');
    absl::string_view rest = message.substr(type_end == absl::string_view::npos ? 0 : type_end);
    if (type_end != absl::string_view::npos &&
        absl::ConsumePrefix(&rest, "\" has no field named \"")) {
      type_name = message.substr(0, type_end);
      field_name = rest.substr(0, rest.find('"'));
    }
  }
  const Descriptor* type =
      type_name.empty()
          ? nullptr
          : v1::Config::descriptor()->file()->pool()->FindMessageTypeByName(std::string(type_name));
  std::optional<std::string> type_path = type == nullptr ? std::nullopt : PathToType(type_name);
  if (!type_path.has_value()) {
    return {"", absl::StrCat(entry.message, " (column ", entry.column + 1, ")")};
  }
  const FieldDescriptor* closest = nullptr;
  size_t best = SIZE_MAX;
  for (int i = 0; i < type->field_count(); ++i) {
    const size_t distance = EditDistance(field_name, type->field(i)->name());
    if (distance < best) {
      best = distance;
      closest = type->field(i);
    }
  }
  const std::string prefix = type_path->empty() ? "" : absl::StrCat(*type_path, ".");
  if (closest != nullptr && best <= std::max<size_t>(2, field_name.size() / 3)) {
    return {absl::StrCat(prefix, closest->name()),
            absl::StrCat("unknown field ", Quote(field_name), "; did you mean ",
                         Quote(closest->name()), "?")};
  }
  std::vector<std::string> names;
  for (int i = 0; i < type->field_count(); ++i) names.push_back(type->field(i)->name());
  return {type_path->empty() ? std::string(field_name) : absl::StrCat(prefix, field_name),
          absl::StrCat("unknown field ", Quote(field_name), " in ", type->full_name(),
                       " (known fields: ", absl::StrJoin(names, ", "), ")")};
}

}  // namespace retryd::config_validation
