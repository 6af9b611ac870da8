#include "server/config/validation_context.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace retryd::config_validation {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using ParseInfoTree = google::protobuf::TextFormat::ParseInfoTree;

std::string Quote(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

const v1::NumberBounds& BoundsOf(const FieldDescriptor* field) {
  return field->options().GetExtension(v1::bounds);
}

bool InBounds(const FieldDescriptor* field, uint64_t value) {
  const v1::NumberBounds& bounds = BoundsOf(field);
  return value >= bounds.min() && value <= bounds.max();
}

const std::string& DefaultText(const FieldDescriptor* field) {
  return field->options().GetExtension(v1::default_text);
}

uint64_t GetUnsigned(const Message& message, const FieldDescriptor* field) {
  const Reflection* reflection = message.GetReflection();
  return field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32
             ? reflection->GetUInt32(message, field)
             : reflection->GetUInt64(message, field);
}

void SetUnsigned(Message& message, const FieldDescriptor* field, uint64_t value) {
  const Reflection* reflection = message.GetReflection();
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {
    reflection->SetUInt32(&message, field, static_cast<uint32_t>(value));
  } else {
    reflection->SetUInt64(&message, field, value);
  }
}

void Errors::Add(int line, absl::string_view path, absl::string_view what) {
  std::string error =
      line >= 0 ? absl::StrCat(source_, ":", line + 1, ": ") : absl::StrCat(source_, ": ");
  if (!path.empty()) absl::StrAppend(&error, path, ": ");
  absl::StrAppend(&error, what);
  errors_.push_back(std::move(error));
}

absl::Status Errors::ToStatus() const {
  return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
}

const FieldDescriptor* Node::Field(absl::string_view name) const {
  const FieldDescriptor* field = descriptor_->FindFieldByName(std::string(name));
  if (field == nullptr) {
    // A typo in the loader, not in the user's file: fail loudly in tests.
    std::abort();
  }
  return field;
}

int Node::Line(absl::string_view name, int index) const {
  if (tree_ == nullptr) return -1;
  const FieldDescriptor* field = Field(name);
  if (!field->is_repeated()) return tree_->GetLocation(field, -1).line;
  // Values given as a list (`f: ["a", "b"]`) share one location, recorded
  // for the first: fall back to the closest earlier value.
  for (int i = std::max(index, 0); i >= 0; --i) {
    const int line = tree_->GetLocation(field, i).line;
    if (line >= 0) return line;
  }
  return -1;
}

std::string Node::Path(absl::string_view name, int index) const {
  std::string path = path_.empty() ? std::string(name) : absl::StrCat(path_, ".", name);
  if (index >= 0) absl::StrAppend(&path, "[", index, "]");
  return path;
}

Node Node::Child(absl::string_view name, int index) const {
  const FieldDescriptor* field = Field(name);
  const ParseInfoTree* child =
      tree_ == nullptr ? nullptr
                       : tree_->GetTreeForNested(field, field->is_repeated() ? index : -1);
  return Node(field->message_type(), child, Path(name, index));
}

int MapEntryLine(const Node& node, const Message& message, absl::string_view map_field,
                 absl::string_view key) {
  const FieldDescriptor* field = node.Field(map_field);
  const Reflection* reflection = message.GetReflection();
  int line = -1;
  for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
    const Message& entry = reflection->GetRepeatedMessage(message, field, i);
    const FieldDescriptor* key_field = entry.GetDescriptor()->map_key();
    if (entry.GetReflection()->GetString(entry, key_field) == key) line = node.Line(map_field, i);
  }
  return line;
}

void Checker::Number(Message& message, const Node& node, absl::string_view name) {
  const FieldDescriptor* field = node.Field(name);
  const v1::NumberBounds& bounds = BoundsOf(field);
  const uint64_t fallback = bounds.default_value();
  const uint64_t low = bounds.min();
  const uint64_t high = bounds.max();
  const uint64_t value = GetUnsigned(message, field);
  const bool set = field->has_presence() ? message.GetReflection()->HasField(message, field)
                                         : value != 0 || node.Written(name);
  if (!set) {
    SetUnsigned(message, field, fallback);
    return;
  }
  if (value < low || value > high) {
    Error(node, name, absl::StrCat("must be between ", low, " and ", high, ", got ", value));
  }
}

}  // namespace retryd::config_validation
