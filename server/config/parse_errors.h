// The text-format parser's errors, told in the config's own terms: an
// unknown field is named by its path with the closest known field
// suggested, an unknown enum value with the values allowed.
//
// For config_loader.cc only; thread-compatible.
#ifndef RETRYD_SERVER_CONFIG_PARSE_ERRORS_H_
#define RETRYD_SERVER_CONFIG_PARSE_ERRORS_H_

#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/io/tokenizer.h"

namespace retryd::config_validation {

// Collects parser errors with their positions.
class ParseErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  struct Entry {
    int line;
    int column;
    std::string message;
  };

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    entries_.push_back({line, column, message});
  }

  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

// The field path ("" if none) and the description of one parser error.
// Turns protobuf's `Message type "retryd.v1.X" has no field named "y".` into
// "<path of X>.<closest field>: unknown field "y"; did you mean ...", and
// `Unknown enumeration value of "X" for field "f".` (for an enum field of
// Config itself) into "f: unknown value "X" (one of: A, B, C)". Other parser
// messages are kept, with the column added.
std::pair<std::string, std::string> DescribeParseError(const ParseErrorCollector::Entry& entry);

}  // namespace retryd::config_validation

#endif  // RETRYD_SERVER_CONFIG_PARSE_ERRORS_H_
