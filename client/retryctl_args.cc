#include "client/retryctl_args.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/command_args.h"
#include "client/request_id.h"
#include "client/retryctl_help.h"

namespace retryd::retryctl {
namespace {

// Bounds of WatchMetricsRequest.interval_ms, as the proto documents them.
constexpr int64_t kMinIntervalMs = 100;
constexpr int64_t kMaxIntervalMs = 60000;
// The server's bound on ListInFlight's limit.
constexpr int64_t kMaxInFlightLimit = 10000;
// StartDrainRequest.timeout_ms's bound: a day.
constexpr absl::Duration kMaxDrainTimeout = absl::Hours(24);

bool IsKnownTopic(std::string_view topic) { return topic.empty() || !HelpText(topic).empty(); }

// A count N: an integer in 1..INT32_MAX.
std::optional<int32_t> ParseCount(std::string_view text) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(Av(text), &value)) return std::nullopt;
  if (value < 1 || value > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return static_cast<int32_t>(value);
}

std::optional<absl::Duration> ParseTimeout(std::string_view text) {
  const absl::string_view view(text.data(), text.size());
  double seconds = 0;
  absl::Duration timeout;
  if (absl::SimpleAtod(view, &seconds)) {
    if (!std::isfinite(seconds)) return std::nullopt;
    timeout = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(view, &timeout)) {
    return std::nullopt;
  }
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) return std::nullopt;
  return timeout;
}

// A command that takes no arguments: status, version.
std::optional<UsageError> ParseNoArguments(Command command, CommandArgs& args,
                                           Invocation& invocation) {
  invocation.command = command;
  if (args.done()) return std::nullopt;
  const std::string& arg = args.take();
  if (LooksLikeFlag(arg)) return args.UnknownFlag(SplitFlag(arg).first);
  return args.Error(absl::StrCat("takes no arguments, got '", arg, "'"));
}

// The positional N of `threads start`, `threads stop` and `threads set`
// (the one that may be 0), once.
std::optional<UsageError> TakeCount(CommandArgs& args, const std::string& arg, bool& have_count,
                                    Invocation& invocation, bool zero_allowed = false) {
  if (have_count) return args.Unexpected(arg);
  const std::optional<int32_t> count = arg == "0" && zero_allowed ? 0 : ParseCount(arg);
  if (!count.has_value()) {
    return args.Error(absl::StrCat("N must be a whole number of at least ", zero_allowed ? 0 : 1,
                                   ", got '", arg, "'"));
  }
  invocation.count = *count;
  have_count = true;
  return std::nullopt;
}

// What a threads subcommand takes besides its N.
struct ThreadsSyntax {
  bool now = false;   // --now
  bool ids = false;   // --id ID...
  bool zero = false;  // N may be 0.
};

// The N, --now and --id of a threads subcommand, as far as `syntax` allows.
std::optional<UsageError> TakeThreadsArgs(CommandArgs& args, ThreadsSyntax syntax, bool& have_count,
                                          Invocation& invocation) {
  while (!args.done()) {
    const std::string& arg = args.take();
    if (!LooksLikeFlag(arg)) {
      if (std::optional<UsageError> error =
              TakeCount(args, arg, have_count, invocation, syntax.zero)) {
        return error;
      }
      continue;
    }
    const auto [name, value] = SplitFlag(arg);
    if (syntax.now && name == "--now") {
      if (value.has_value()) return args.Error("--now takes no value");
      invocation.graceful = false;
    } else if (name == "--tier") {
      std::optional<std::string> tier = args.TakeValue(value);
      if (!tier.has_value() || tier->empty()) {
        return args.Error("--tier needs a value: a retry tier's topic ('retryctl status')");
      }
      invocation.tier = *std::move(tier);
    } else if (syntax.ids && name == "--id") {
      if (std::optional<UsageError> error = args.TakeIds(name, value, invocation.thread_ids)) {
        return error;
      }
    } else {
      return args.UnknownFlag(name);
    }
  }
  return std::nullopt;
}

std::optional<UsageError> ParseThreadsStart(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kThreadsStart;
  bool have_count = false;
  if (std::optional<UsageError> error = TakeThreadsArgs(args, {}, have_count, invocation)) {
    return error;
  }
  if (!have_count) return args.Error("missing N, the number of retry threads to start");
  return std::nullopt;
}

std::optional<UsageError> ParseThreadsStop(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kThreadsStop;
  bool have_count = false;
  if (std::optional<UsageError> error =
          TakeThreadsArgs(args, {.now = true, .ids = true}, have_count, invocation)) {
    return error;
  }
  if (have_count && !invocation.thread_ids.empty()) {
    return args.Error("give either N (how many) or --id (which), not both");
  }
  if (!invocation.thread_ids.empty() && !invocation.tier.empty()) {
    return args.Error("--tier goes with N: --id names threads of any tier");
  }
  if (!have_count && invocation.thread_ids.empty()) {
    return args.Error("say how many retry threads to stop (N) or which (--id ID)");
  }
  return std::nullopt;
}

// threads set N [--now]: N may be 0.
std::optional<UsageError> ParseThreadsSet(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kThreadsSet;
  bool have_count = false;
  if (std::optional<UsageError> error =
          TakeThreadsArgs(args, {.now = true, .zero = true}, have_count, invocation)) {
    return error;
  }
  if (!have_count) return args.Error("missing N, the number of retry threads to run");
  return std::nullopt;
}

std::optional<UsageError> ParseThreads(CommandArgs& args, Invocation& invocation) {
  if (args.done()) return args.Error("missing 'start N', 'stop N | --id ID' or 'set N'");
  const std::string& sub = args.take();
  if (sub == "start" || sub == "stop" || sub == "set") {
    // Errors name the subcommand: "threads start: ...".
    std::vector<std::string> remaining;
    while (!args.done()) remaining.push_back(args.take());
    CommandArgs sub_args(std::move(remaining), absl::StrCat("threads ", sub), "threads");
    if (sub == "start") return ParseThreadsStart(sub_args, invocation);
    if (sub == "stop") return ParseThreadsStop(sub_args, invocation);
    return ParseThreadsSet(sub_args, invocation);
  }
  return args.Error(absl::StrCat("unknown subcommand '", sub, "' (use start, stop or set)"));
}

// The one word (`word`, nullopt if none was given) and the --drain flag
// that inorder and ordering take.
std::optional<UsageError> TakeWordAndDrain(CommandArgs& args, Invocation& invocation,
                                           std::optional<std::string>& word) {
  while (!args.done()) {
    const std::string& arg = args.take();
    if (LooksLikeFlag(arg)) {
      const auto [name, value] = SplitFlag(arg);
      if (name != "--drain") return args.UnknownFlag(name);
      if (value.has_value()) return args.Error("--drain takes no value");
      invocation.drain = true;
      continue;
    }
    if (word.has_value()) return args.Unexpected(arg);
    word = arg;
  }
  return std::nullopt;
}

std::optional<UsageError> ParseInOrder(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kInOrder;
  std::optional<std::string> word;
  if (std::optional<UsageError> error = TakeWordAndDrain(args, invocation, word)) return error;
  if (!word.has_value()) return args.Error("missing 'on' or 'off'");
  if (*word != "on" && *word != "off") {
    return args.Error(absl::StrCat("expected 'on' or 'off', got '", *word, "'"));
  }
  invocation.in_order = *word == "on";
  if (!invocation.in_order && invocation.drain) {
    return args.Error("--drain applies only to 'inorder on'");
  }
  return std::nullopt;
}

std::optional<UsageError> ParseOrdering(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kOrdering;
  std::optional<std::string> word;
  if (std::optional<UsageError> error = TakeWordAndDrain(args, invocation, word)) return error;
  if (!word.has_value()) return args.Error("missing MODE: unordered, in-order or key");
  // Case-insensitive, and the API's spellings too: ORDERING_IN_ORDER, or
  // the older IN_ORDER.
  std::string mode = absl::AsciiStrToLower(absl::StrReplaceAll(*word, {{"_", "-"}}));
  constexpr std::string_view kApiPrefix = "ordering-";
  if (absl::StartsWith(mode, Av(kApiPrefix))) mode.erase(0, kApiPrefix.size());
  if (mode == "unordered") {
    invocation.ordering = OrderingMode::kUnordered;
  } else if (mode == "in-order") {
    invocation.ordering = OrderingMode::kInOrder;
  } else if (mode == "key") {
    invocation.ordering = OrderingMode::kKey;
  } else {
    return args.Error(absl::StrCat("expected 'unordered', 'in-order' or 'key', got '", *word, "'"));
  }
  if (invocation.ordering != OrderingMode::kInOrder && invocation.drain) {
    return args.Error("--drain applies only to 'ordering in-order'");
  }
  return std::nullopt;
}

std::optional<UsageError> ParseWatch(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kWatch;
  while (!args.done()) {
    const std::string& arg = args.take();
    if (!LooksLikeFlag(arg)) return args.Unexpected(arg);
    const auto [name, value] = SplitFlag(arg);
    if (name == "--thread") {
      if (std::optional<UsageError> error = args.TakeIds(name, value, invocation.thread_ids)) {
        return error;
      }
    } else if (name == "--interval") {
      const std::optional<std::string> text = args.TakeValue(value);
      if (!text.has_value()) return args.Error("--interval needs a value in milliseconds");
      int64_t ms = 0;
      if (!absl::SimpleAtoi(*text, &ms) || ms < kMinIntervalMs || ms > kMaxIntervalMs) {
        return args.Error(absl::StrCat("--interval must be a number of milliseconds in ",
                                       kMinIntervalMs, "..", kMaxIntervalMs, ", got '", *text,
                                       "'"));
      }
      invocation.interval_ms = static_cast<uint32_t>(ms);
    } else if (name == "--count") {
      const std::optional<std::string> text = args.TakeValue(value);
      if (!text.has_value()) return args.Error("--count needs a number of snapshots");
      const std::optional<int32_t> count = ParseCount(*text);
      if (!count.has_value()) {
        return args.Error(
            absl::StrCat("--count must be a whole number of at least 1, got '", *text, "'"));
      }
      invocation.max_snapshots = *count;
    } else {
      return args.UnknownFlag(name);
    }
  }
  return std::nullopt;
}

std::optional<UsageError> ParseInFlight(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kInFlight;
  while (!args.done()) {
    const std::string& arg = args.take();
    if (!LooksLikeFlag(arg)) return args.Unexpected(arg);
    const auto [name, value] = SplitFlag(arg);
    if (name != "--limit") return args.UnknownFlag(name);
    const std::optional<std::string> text = args.TakeValue(value);
    if (!text.has_value()) return args.Error("--limit needs a number of records");
    int64_t limit = 0;
    if (!absl::SimpleAtoi(*text, &limit) || limit < 1 || limit > kMaxInFlightLimit) {
      return args.Error(absl::StrCat("--limit must be a whole number in 1..", kMaxInFlightLimit,
                                     ", got '", *text, "'"));
    }
    invocation.limit = static_cast<uint32_t>(limit);
  }
  return std::nullopt;
}

// health [SERVICE]
std::optional<UsageError> ParseHealth(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kHealth;
  bool have_service = false;
  while (!args.done()) {
    const std::string& arg = args.take();
    if (LooksLikeFlag(arg)) return args.UnknownFlag(SplitFlag(arg).first);
    if (have_service) return args.Unexpected(arg);
    invocation.health_service = arg;
    have_service = true;
  }
  return std::nullopt;
}

}  // namespace

std::optional<UsageError> ParseDlqRecord(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kDlqRecord;
  std::vector<std::string> positional;
  while (!args.done()) {
    const std::string& arg = args.take();
    if (LooksLikeFlag(arg)) return args.UnknownFlag(SplitFlag(arg).first);
    if (positional.size() == 3) return args.Unexpected(arg);
    positional.push_back(arg);
  }
  if (positional.size() < 3) {
    return args.Error("needs TOPIC PARTITION OFFSET, the record's original coordinates");
  }
  int64_t partition = 0;
  if (!absl::SimpleAtoi(positional[1], &partition) || partition < 0 ||
      partition > std::numeric_limits<int32_t>::max()) {
    return args.Error(absl::StrCat("PARTITION must be a partition number (0 or more), got '",
                                   positional[1], "'"));
  }
  int64_t offset = 0;
  if (!absl::SimpleAtoi(positional[2], &offset) || offset < 0) {
    return args.Error(
        absl::StrCat("OFFSET must be an offset (0 or more), got '", positional[2], "'"));
  }
  invocation.record_topic = positional[0];
  invocation.record_partition = static_cast<int32_t>(partition);
  invocation.record_offset = offset;
  return std::nullopt;
}

namespace {

// drain [--wait] [--drain-timeout DURATION]. Not --timeout: that is the
// deadline of each call, a global flag.
std::optional<UsageError> ParseDrain(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kDrain;
  while (!args.done()) {
    const std::string& arg = args.take();
    if (!LooksLikeFlag(arg)) return args.Unexpected(arg);
    const auto [name, value] = SplitFlag(arg);
    if (name == "--wait") {
      if (value.has_value()) return args.Error("--wait takes no value");
      invocation.wait = true;
    } else if (name == "--drain-timeout") {
      const std::optional<std::string> text = args.TakeValue(value);
      if (!text.has_value()) return args.Error("--drain-timeout needs a duration, e.g. 10m");
      const std::optional<absl::Duration> timeout = ParseTimeout(*text);
      if (!timeout.has_value() || *timeout > kMaxDrainTimeout || *timeout < absl::Milliseconds(1)) {
        return args.Error(absl::StrCat(
            "--drain-timeout must be a duration from 1ms to 24h (or seconds), got '", *text, "'"));
      }
      invocation.drain_timeout_ms = static_cast<uint32_t>(absl::ToInt64Milliseconds(*timeout));
    } else {
      return args.UnknownFlag(name);
    }
  }
  return std::nullopt;
}

// operation ID | get ID | watch ID | cancel ID | ls, and `op` the same.
std::optional<UsageError> ParseOperation(CommandArgs& args, std::string_view command,
                                         Invocation& invocation) {
  if (args.done()) {
    return args.Error(command == "op" ? "missing 'ls', 'get ID', 'watch ID' or 'cancel ID'"
                                      : "missing ID, 'watch ID' or 'cancel ID'");
  }
  invocation.command = Command::kOperationGet;
  std::string sub = args.take();
  if (sub == "ls") return ParseNoArguments(Command::kOperations, args, invocation);
  if (sub == "get" || sub == "watch" || sub == "cancel") {
    if (sub == "watch") invocation.command = Command::kOperationWatch;
    if (sub == "cancel") invocation.command = Command::kOperationCancel;
    if (args.done()) return args.Error(absl::StrCat(sub, ": missing ID, the operation's id"));
    sub = args.take();
  }
  if (LooksLikeFlag(sub)) return args.UnknownFlag(SplitFlag(sub).first);
  invocation.operation_id = sub;
  if (!args.done()) {
    const std::string& arg = args.take();
    if (LooksLikeFlag(arg)) return args.UnknownFlag(SplitFlag(arg).first);
    return args.Unexpected(arg);
  }
  return std::nullopt;
}

// The help topic of a command line (without "help" or the help flag):
// "dlq ls" for the dlq subcommands, else its first word.
std::string HelpTopicOf(const std::vector<std::string>& words, size_t first) {
  if (words.size() <= first) return "";
  const std::string& command = words[first];
  if (command == "dlq" && words.size() > first + 1) {
    const std::string sub = absl::StrCat("dlq ", words[first + 1]);
    if (IsKnownTopic(sub)) return sub;
  }
  return command;
}

// What the global flags set: the flags themselves, and whether help was asked for.
struct GlobalSettings {
  GlobalFlags flags;
  bool help = false;
};

// Records a global flag in `settings`: its value, if it takes one, else ""; a
// UsageError if the value is not one the flag accepts.
using SetGlobal = std::optional<UsageError> (*)(std::string value, GlobalSettings& settings);

template <std::string GlobalFlags::*kField>
std::optional<UsageError> SetText(std::string value, GlobalSettings& settings) {
  settings.flags.*kField = std::move(value);
  return std::nullopt;
}

template <bool GlobalFlags::*kField>
std::optional<UsageError> SetTrue(std::string /*value*/, GlobalSettings& settings) {
  settings.flags.*kField = true;
  return std::nullopt;
}

std::optional<UsageError> SetHelp(std::string /*value*/, GlobalSettings& settings) {
  settings.help = true;
  return std::nullopt;
}

std::optional<UsageError> SetTimeout(std::string value, GlobalSettings& settings) {
  const std::optional<absl::Duration> timeout = ParseTimeout(value);
  if (!timeout.has_value()) {
    return Usage(absl::StrCat("--timeout must be a positive number of seconds (or a "
                              "duration such as 500ms or 2m), got '",
                              value, "'"),
                 "");
  }
  settings.flags.timeout = *timeout;
  return std::nullopt;
}

std::optional<UsageError> SetRequestId(std::string value, GlobalSettings& settings) {
  if (value != "auto" && !IsUuid(value)) {
    return Usage(absl::StrCat("--request-id must be a UUID (8-4-4-4-12 hex digits, as uuidgen "
                              "prints) or 'auto', got '",
                              value, "'"),
                 "");
  }
  settings.flags.request_id = std::move(value);
  return std::nullopt;
}

// A flag accepted before or after the command. Their help is the overview's
// "Flags" section (retryctl_help.cc).
struct GlobalFlag {
  enum class Value { kNone, kRequired };

  std::string_view name;
  Value value;
  SetGlobal set;
};

constexpr GlobalFlag kGlobalFlags[] = {
    {"--addr", GlobalFlag::Value::kRequired, SetText<&GlobalFlags::address>},
    {"--token-file", GlobalFlag::Value::kRequired, SetText<&GlobalFlags::token_file>},
    {"--tls-ca", GlobalFlag::Value::kRequired, SetText<&GlobalFlags::tls_ca_file>},
    {"--tls-cert", GlobalFlag::Value::kRequired, SetText<&GlobalFlags::tls_cert_file>},
    {"--tls-key", GlobalFlag::Value::kRequired, SetText<&GlobalFlags::tls_key_file>},
    {"--timeout", GlobalFlag::Value::kRequired, SetTimeout},
    {"--request-id", GlobalFlag::Value::kRequired, SetRequestId},
    {"--json", GlobalFlag::Value::kNone, SetTrue<&GlobalFlags::json>},
    {"--tls", GlobalFlag::Value::kNone, SetTrue<&GlobalFlags::tls>},
    {"--help", GlobalFlag::Value::kNone, SetHelp},
    {"-h", GlobalFlag::Value::kNone, SetHelp},
};

const GlobalFlag* FindGlobalFlag(std::string_view name) {
  for (const GlobalFlag& flag : kGlobalFlags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

// The global flags, which may come anywhere in `args`, and the rest in order:
// the command line of the command.
struct SplitArgs {
  GlobalSettings settings;
  std::vector<std::string> command_line;
};

std::variant<SplitArgs, UsageError> SplitGlobalFlags(const std::vector<std::string>& args,
                                                     const Environment& env) {
  SplitArgs split;
  GlobalFlags& flags = split.settings.flags;
  if (!env.retryd_addr.empty()) flags.address = env.retryd_addr;
  flags.token_file = env.retryd_token_file;

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const auto [name, inline_value] = SplitFlag(arg);
    if (name == "--token") {
      // Never echo the value: it may be a secret.
      return Usage(
          "there is no --token: a token on the command line is visible to other users; "
          "put it in a file and pass --token-file FILE (or set RETRYD_TOKEN_FILE)",
          "");
    }
    const GlobalFlag* flag = FindGlobalFlag(name);
    if (flag == nullptr) {
      split.command_line.push_back(arg);
      continue;
    }
    std::string value;
    if (flag->value == GlobalFlag::Value::kNone) {
      if (inline_value.has_value()) return Usage(absl::StrCat(Av(name), " takes no value"), "");
    } else {
      if (inline_value.has_value()) {
        value = std::string(*inline_value);
      } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
        value = args[++i];
      }
      if (value.empty()) return Usage(absl::StrCat(Av(name), " needs a value"), "");
    }
    if (std::optional<UsageError> error = flag->set(std::move(value), split.settings)) {
      return *std::move(error);
    }
  }
  if (flags.tls_cert_file.empty() != flags.tls_key_file.empty()) {
    return Usage("--tls-cert and --tls-key go together (mutual TLS needs both)", "");
  }
  return split;
}

// Runs the parser of `command` over its arguments, filling in `invocation`.
std::optional<UsageError> ParseCommand(const std::string& command, CommandArgs& command_args,
                                       Invocation& invocation) {
  if (command == "status") return ParseNoArguments(Command::kStatus, command_args, invocation);
  if (command == "threads") return ParseThreads(command_args, invocation);
  if (command == "inorder") return ParseInOrder(command_args, invocation);
  if (command == "ordering") return ParseOrdering(command_args, invocation);
  if (command == "watch") return ParseWatch(command_args, invocation);
  if (command == "inflight") return ParseInFlight(command_args, invocation);
  if (command == "dlq-record") return ParseDlqRecord(command_args, invocation);
  if (command == "dlq") return ParseDlq(command_args, invocation);
  if (command == "version") return ParseNoArguments(Command::kVersion, command_args, invocation);
  if (command == "health") return ParseHealth(command_args, invocation);
  if (command == "drain") return ParseDrain(command_args, invocation);
  if (command == "operations") {
    return ParseNoArguments(Command::kOperations, command_args, invocation);
  }
  if (command == "operation" || command == "op") {
    return ParseOperation(command_args, command, invocation);
  }
  return Usage(absl::StrCat("unknown command '", command, "'"), "");
}

// "retryctl help [TOPIC]" or --help anywhere: the help of the topic named
// ("retryctl threads start --help" shows the threads help).
std::variant<Invocation, UsageError> ParseHelp(const std::vector<std::string>& rest,
                                               Invocation invocation) {
  const std::string topic = HelpTopicOf(rest, !rest.empty() && rest[0] == "help" ? 1 : 0);
  if (!IsKnownTopic(topic)) return Usage(absl::StrCat("unknown command '", topic, "'"), "");
  invocation.command = Command::kHelp;
  invocation.help_topic = topic;
  return invocation;
}

}  // namespace

std::variant<Invocation, UsageError> ParseArgs(const std::vector<std::string>& args,
                                               const Environment& env) {
  std::variant<SplitArgs, UsageError> split = SplitGlobalFlags(args, env);
  if (UsageError* error = std::get_if<UsageError>(&split)) return *std::move(error);
  SplitArgs& parsed = std::get<SplitArgs>(split);
  const std::vector<std::string>& rest = parsed.command_line;
  Invocation invocation;
  invocation.flags = std::move(parsed.settings.flags);

  if (parsed.settings.help || (!rest.empty() && rest[0] == "help")) {
    return ParseHelp(rest, std::move(invocation));
  }
  if (rest.empty()) return Usage("missing COMMAND", "");

  const std::string command = rest[0];
  CommandArgs command_args(std::vector<std::string>(rest.begin() + 1, rest.end()), command,
                           command);
  if (std::optional<UsageError> error = ParseCommand(command, command_args, invocation)) {
    return *std::move(error);
  }
  if (!invocation.flags.request_id.empty() && !IsMutating(invocation.command)) {
    return Usage(absl::StrCat("--request-id applies only to a command that changes retryd, "
                              "not to '",
                              command, "'"),
                 command);
  }
  return invocation;
}

bool IsMutating(Command command) {
  switch (command) {
    case Command::kThreadsStart:
    case Command::kThreadsStop:
    case Command::kThreadsSet:
    case Command::kInOrder:
    case Command::kOrdering:
    case Command::kDlqRecord:
    case Command::kDrain:
    case Command::kOperationCancel:
    case Command::kDlqRedrive:
    case Command::kDlqPurge:
      return true;
    case Command::kHelp:
    case Command::kStatus:
    case Command::kWatch:
    case Command::kInFlight:
    case Command::kVersion:
    case Command::kHealth:
    case Command::kOperations:
    case Command::kOperationGet:
    case Command::kOperationWatch:
    case Command::kDlqList:
      return false;
  }
  return false;
}

}  // namespace retryd::retryctl
