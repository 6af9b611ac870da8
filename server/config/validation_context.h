// What every section validator of the config loader shares: where each field
// was written in the file (Node), the errors found so far (Errors), and the
// checks common to all sections (Checker: a number field against its
// (bounds) option, an error naming file:line: field).
//
// For the config loader's own files only (config_loader.cc and the
// *_validator.cc files); thread-compatible, used by one thread at start-up.
#ifndef RETRYD_SERVER_CONFIG_VALIDATION_CONTEXT_H_
#define RETRYD_SERVER_CONFIG_VALIDATION_CONTEXT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "retryd/v1/config.pb.h"

namespace retryd::config_validation {

// `s` in double quotes, C-escaped.
std::string Quote(absl::string_view s);

// A number field's (bounds) option (config.proto): its default and range,
// declared there once. Every field Number() reads has one with all three
// (ConfigBoundsTest checks), and max_ms-like fields at least a max.
const v1::NumberBounds& BoundsOf(const google::protobuf::FieldDescriptor* field);
bool InBounds(const google::protobuf::FieldDescriptor* field, uint64_t value);
// A string field's (default_text) option (config.proto): the value it takes
// when the file leaves it out or empty.
const std::string& DefaultText(const google::protobuf::FieldDescriptor* field);

// An unsigned (uint32 or uint64) field by reflection.
uint64_t GetUnsigned(const google::protobuf::Message& message,
                     const google::protobuf::FieldDescriptor* field);
void SetUnsigned(google::protobuf::Message& message, const google::protobuf::FieldDescriptor* field,
                 uint64_t value);

// Collects errors as "<source>:<line>: <path>: <what>", one per problem.
class Errors {
 public:
  explicit Errors(absl::string_view source) : source_(source) {}

  // `line` is 0-based as protobuf reports it, or -1 when the file has none.
  void Add(int line, absl::string_view path, absl::string_view what);

  bool empty() const { return errors_.empty(); }
  absl::Status ToStatus() const;

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

// One message of the parsed file: its type, where its fields were written
// (null when the message itself is absent) and its field path, e.g.
// "processor.simulate.rule[1]".
class Node {
 public:
  Node(const google::protobuf::Descriptor* descriptor,
       const google::protobuf::TextFormat::ParseInfoTree* tree, std::string path)
      : descriptor_(descriptor), tree_(tree), path_(std::move(path)) {}

  // Aborts if the type has no such field: a typo in the loader, not in the
  // user's file, so tests fail loudly.
  const google::protobuf::FieldDescriptor* Field(absl::string_view name) const;

  // 0-based line where the field (its index-th value, if repeated) was
  // written, or -1.
  int Line(absl::string_view name, int index = -1) const;
  bool Written(absl::string_view name) const { return Line(name) >= 0; }

  std::string Path(absl::string_view name, int index = -1) const;
  Node Child(absl::string_view name, int index = -1) const;

  const std::string& path() const { return path_; }

 private:
  const google::protobuf::Descriptor* descriptor_;
  const google::protobuf::TextFormat::ParseInfoTree* tree_;
  std::string path_;
};

// 0-based line of the map entry with `key` in `map_field` of `message`, or
// -1. The reflection view of a parsed map lists entries in file order.
int MapEntryLine(const Node& node, const google::protobuf::Message& message,
                 absl::string_view map_field, absl::string_view key);

// The state one validation run shares among the section validators: the
// errors found, the root of the parsed file, and whether the command line
// replaced kafka.bootstrap_servers.
class Checker {
 public:
  Checker(absl::string_view source, const google::protobuf::TextFormat::ParseInfoTree& tree,
          bool bootstrap_overridden)
      : errors_(source),
        root_(v1::Config::descriptor(), &tree, ""),
        bootstrap_overridden_(bootstrap_overridden) {}

  // Reports `what` at `field` of `node` (its index-th value, if repeated).
  void Error(const Node& node, absl::string_view field, absl::string_view what, int index = -1) {
    errors_.Add(node.Line(field, index), node.Path(field, index), what);
  }
  // Reports `what` at a line and path of the caller's choosing.
  void Add(int line, absl::string_view path, absl::string_view what) {
    errors_.Add(line, path, what);
  }

  // A number field with its default and range in its (bounds) option
  // (config.proto): if the file leaves it out it takes the default,
  // otherwise it must lie in [min, max]. A plain proto3 0 cannot be told
  // apart from "not set", but the parse tree can tell whether the file
  // wrote it.
  void Number(google::protobuf::Message& message, const Node& node, absl::string_view name);

  const Node& root() const { return root_; }
  bool bootstrap_overridden() const { return bootstrap_overridden_; }
  bool ok() const { return errors_.empty(); }
  absl::Status ToStatus() const { return errors_.ToStatus(); }

 private:
  Errors errors_;
  const Node root_;
  const bool bootstrap_overridden_;
};

}  // namespace retryd::config_validation

#endif  // RETRYD_SERVER_CONFIG_VALIDATION_CONTEXT_H_
