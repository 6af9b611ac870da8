// Writes retryd/v1/config_defaults.h: each number field's declared default
// (its `(bounds)` option's default_value in config.proto) as a C++ constant,
// read from the compiled descriptors rather than from the proto's text, so
// that code kept free of protobuf (the engine's EngineOptions) takes its
// defaults from the one place the config loader reads them.
//
//   retryd_config_defaults_gen <output header>
//
// A struct per message of config.proto that declares a default (a nested
// message as a nested struct), a member per field, in declaration order, in
// namespace retryd::v1::config_defaults. The file is written only when its
// text changes, so an unchanged default rebuilds nothing. Exits 1, saying
// why, when config.proto declares no default or a message it reaches from
// another file declares one (it would have no struct here).
#include <cstdint>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "google/protobuf/descriptor.h"
#include "retryd/v1/config.pb.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

constexpr char kProgram[] = "retryd_config_defaults_gen";

// The same accessor as the config loader's BoundsOf
// (server/config/validation_context.h), which this program cannot link: the
// loader links the engine's options, whose header this program writes.
const retryd::v1::NumberBounds& BoundsOf(const FieldDescriptor& field) {
  return field.options().GetExtension(retryd::v1::bounds);
}

bool DeclaresDefault(const FieldDescriptor& field) { return BoundsOf(field).has_default_value(); }

// `message`'s struct, its nested messages' inside it, indented by `indent`;
// empty when neither it nor any message nested in it declares a default.
// Adds the constants it writes to `count`.
std::string StructOf(const Descriptor& message, const std::string& indent, int& count) {
  std::string members;
  for (int i = 0; i < message.field_count(); ++i) {
    const FieldDescriptor& field = *message.field(i);
    if (!DeclaresDefault(field)) continue;
    members += indent + "  static constexpr uint64_t " + field.name() + " = " +
               std::to_string(BoundsOf(field).default_value()) + ";\n";
    ++count;
  }
  for (int i = 0; i < message.nested_type_count(); ++i) {
    std::string nested = StructOf(*message.nested_type(i), indent + "  ", count);
    if (nested.empty()) continue;
    if (!members.empty()) members += "\n";
    members += nested;
  }
  if (members.empty()) return "";
  return indent + "struct " + message.name() + " {\n" + members + indent + "};\n";
}

// The first message outside `file` that `message` reaches through its
// fields and declares a default, or null.
const Descriptor* DefaultOutside(const Descriptor& message, const FileDescriptor& file,
                                 std::set<const Descriptor*>& seen) {
  if (!seen.insert(&message).second) return nullptr;
  for (int i = 0; i < message.field_count(); ++i) {
    const FieldDescriptor& field = *message.field(i);
    if (message.file() != &file && DeclaresDefault(field)) return &message;
    if (field.message_type() == nullptr) continue;
    const Descriptor* found = DefaultOutside(*field.message_type(), file, seen);
    if (found != nullptr) return found;
  }
  return nullptr;
}

std::string HeaderOf(const FileDescriptor& file, int& count) {
  std::string structs;
  for (int i = 0; i < file.message_type_count(); ++i) {
    std::string text = StructOf(*file.message_type(i), "", count);
    if (!text.empty()) structs += text + "\n";
  }
  return "// Generated from " + file.name() + " by proto/config_defaults_gen.cc: do\n" +
         "// not edit. Each number field's (bounds) default_value, by message.\n" +
         "#ifndef RETRYD_V1_CONFIG_DEFAULTS_H_\n#define RETRYD_V1_CONFIG_DEFAULTS_H_\n\n" +
         "#include <cstdint>\n\nnamespace retryd::v1::config_defaults {\n\n" + structs +
         "}  // namespace retryd::v1::config_defaults\n\n" +
         "#endif  // RETRYD_V1_CONFIG_DEFAULTS_H_\n";
}

// Writes `text` to `path` unless the file holds it already.
bool WriteIfChanged(const std::string& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::ostringstream old;
    old << in.rdbuf();
    if (old.str() == text) return true;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << kProgram << " <output header>\n";
    return 2;
  }
  const Descriptor& config = *retryd::v1::Config::descriptor();
  const FileDescriptor& file = *config.file();
  std::set<const Descriptor*> seen;
  if (const Descriptor* outside = DefaultOutside(config, file, seen)) {
    std::cerr << kProgram << ": " << outside->full_name() << " (" << outside->file()->name()
              << ") declares a (bounds) default_value outside " << file.name()
              << "; config_defaults.h holds " << file.name() << "'s only\n";
    return 1;
  }
  int count = 0;
  const std::string text = HeaderOf(file, count);
  if (count == 0) {
    std::cerr << kProgram << ": " << file.name()
              << " declares no (bounds) default_value, which server/engine/api/options.h "
                 "takes its defaults from\n";
    return 1;
  }
  if (!WriteIfChanged(argv[1], text)) {
    std::cerr << kProgram << ": cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
