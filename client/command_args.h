// The pieces retryctl's argument parsers share: what a flag looks like, and
// CommandArgs, the arguments of one command being taken in order. Internal
// to retryctl_lib (retryctl_args.cc and retryctl_dlq_args.cc); no I/O.
//
// Thread-safety: a CommandArgs belongs to the one parse that made it; the
// functions are stateless.
#ifndef RETRYD_CLIENT_COMMAND_ARGS_H_
#define RETRYD_CLIENT_COMMAND_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/invocation.h"

namespace retryd::retryctl {

// Debian's Abseil has its own string_view, which absl::StrCat wants.
inline absl::string_view Av(std::string_view text) {
  return absl::string_view(text.data(), text.size());
}

// "-x" or "--x", but not a negative number (reported as an invalid number).
bool LooksLikeFlag(std::string_view arg);

// Splits "--name=value" into its name and value.
std::pair<std::string_view, std::optional<std::string_view>> SplitFlag(std::string_view arg);

UsageError Usage(std::string message, std::string_view topic);

// The arguments after the command (and its subcommand), global flags removed.
class CommandArgs {
 public:
  // `what` prefixes every error ("threads start"); `topic` is the help
  // topic an error points at.
  CommandArgs(std::vector<std::string> args, std::string_view what, std::string_view topic)
      : args_(std::move(args)), what_(what), topic_(topic) {}

  bool done() const { return next_ >= args_.size(); }
  const std::string& peek() const { return args_[next_]; }
  const std::string& take() { return args_[next_++]; }
  // The arguments not taken yet, for a subcommand's own CommandArgs.
  std::vector<std::string> TakeRest();

  // Takes the ids of an --id/--thread flag: inline ("--id=3") or the next
  // arguments that are not flags ("--id 3 4").
  std::optional<UsageError> TakeIds(std::string_view flag,
                                    std::optional<std::string_view> inline_value,
                                    std::vector<uint32_t>& ids);

  // Takes the value of a flag that needs one; nullopt if there is none.
  std::optional<std::string> TakeValue(std::optional<std::string_view> inline_value);

  // Takes the value of `flag` as a whole number in [min, max]; an error
  // naming the flag and `what` it counts if it is missing or out of range.
  std::variant<int64_t, UsageError> TakeNumber(std::string_view flag,
                                               std::optional<std::string_view> inline_value,
                                               int64_t min, int64_t max, std::string_view what);

  UsageError Error(std::string_view message) const;
  UsageError UnknownFlag(std::string_view flag) const;
  UsageError Unexpected(std::string_view arg) const;

 private:
  UsageError BadId(std::string_view flag, std::string_view text) const;

  std::vector<std::string> args_;
  size_t next_ = 0;
  std::string what_;
  std::string topic_;
};

// The parsers of the dead-letter commands, which set `invocation.command`:
// dlq-record TOPIC PARTITION OFFSET (retryctl_args.cc), and dlq SUBCOMMAND
// ... (retryctl_dlq_args.cc), whose `dlq record` is the same.
std::optional<UsageError> ParseDlqRecord(CommandArgs& args, Invocation& invocation);
std::optional<UsageError> ParseDlq(CommandArgs& args, Invocation& invocation);

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_COMMAND_ARGS_H_
