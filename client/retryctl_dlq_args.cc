// retryctl's `dlq` subcommands: ls, record, redrive, purge (declared in
// command_args.h).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/command_args.h"
#include "client/retryctl_args.h"

namespace retryd::retryctl {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
// How many records `dlq ls` shows at most without --all-pages.
constexpr int64_t kMaxListLimit = 1'000'000;
// Bounds of the request fields, as control.proto documents them.
constexpr int64_t kMaxPageSize = 1000;
constexpr int64_t kMaxValueBytes = 1 << 20;
constexpr int64_t kMaxRatePerS = 100'000;
constexpr int64_t kMaxRedrives = 1'000'000;

// A --since/--until value: Unix ms, or an RFC 3339 time with its zone.
std::optional<int64_t> ParseTimeArg(const std::string& text) {
  int64_t ms = 0;
  if (absl::SimpleAtoi(text, &ms)) {
    if (ms <= 0) return std::nullopt;
    return ms;
  }
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &time, &error)) return std::nullopt;
  ms = absl::ToUnixMillis(time);
  if (ms <= 0) return std::nullopt;
  return ms;
}

// A flag that takes no value.
std::optional<UsageError> SetSwitch(CommandArgs& args, std::string_view name,
                                    std::optional<std::string_view> value, bool& field) {
  if (value.has_value()) return args.Error(absl::StrCat(Av(name), " takes no value"));
  field = true;
  return std::nullopt;
}

// A flag that takes a non-empty text.
std::optional<UsageError> SetText(CommandArgs& args, std::string_view name,
                                  std::optional<std::string_view> value, std::string_view what,
                                  std::string& field) {
  std::optional<std::string> text = args.TakeValue(value);
  if (!text.has_value() || text->empty()) {
    return args.Error(absl::StrCat(Av(name), " needs ", Av(what)));
  }
  field = *std::move(text);
  return std::nullopt;
}

// A flag that takes a whole number in [min, max], stored in `field`.
template <typename Int>
std::optional<UsageError> SetNumber(CommandArgs& args, std::string_view name,
                                    std::optional<std::string_view> value, int64_t min, int64_t max,
                                    std::string_view what, Int& field) {
  std::variant<int64_t, UsageError> number = args.TakeNumber(name, value, min, max, what);
  if (UsageError* error = std::get_if<UsageError>(&number)) return *std::move(error);
  field = static_cast<Int>(std::get<int64_t>(number));
  return std::nullopt;
}

std::optional<UsageError> SetTime(CommandArgs& args, std::string_view name,
                                  std::optional<std::string_view> value, int64_t& field) {
  const std::optional<std::string> text = args.TakeValue(value);
  if (!text.has_value()) {
    return args.Error(absl::StrCat(Av(name), " needs a time, e.g. 2026-12-01T08:00:00Z"));
  }
  const std::optional<int64_t> ms = ParseTimeArg(*text);
  if (!ms.has_value()) {
    return args.Error(absl::StrCat(Av(name),
                                   " must be Unix milliseconds or an RFC 3339 time such as "
                                   "2026-12-01T08:00:00Z, got '",
                                   *text, "'"));
  }
  field = *ms;
  return std::nullopt;
}

// --partition P, repeated or "0,1,2".
std::optional<UsageError> AddPartitions(CommandArgs& args, std::string_view name,
                                        std::optional<std::string_view> value,
                                        std::vector<int32_t>& partitions) {
  const std::optional<std::string> text = args.TakeValue(value);
  if (!text.has_value()) return args.Error(absl::StrCat(Av(name), " needs a partition number"));
  for (absl::string_view piece : absl::StrSplit(*text, ',')) {
    int64_t partition = 0;
    if (!absl::SimpleAtoi(piece, &partition) || partition < 0 || partition > kMaxInt32) {
      return args.Error(
          absl::StrCat(Av(name), " must be a partition number (0 or more), got '", piece, "'"));
    }
    partitions.push_back(static_cast<int32_t>(partition));
  }
  return std::nullopt;
}

// Takes `name` if it is a filter flag: `taken` says whether it was.
std::optional<UsageError> TakeFilterFlag(CommandArgs& args, std::string_view name,
                                         std::optional<std::string_view> value,
                                         DeadLetterFilterArgs& filter, bool& taken) {
  taken = true;
  if (name == "--key-prefix") return SetText(args, name, value, "a key prefix", filter.key_prefix);
  if (name == "--error") return SetText(args, name, value, "a text", filter.error_contains);
  if (name == "--reason") {
    return SetText(args, name, value, "a reason, e.g. ORDER_LOCKED", filter.reason);
  }
  if (name == "--topic") return SetText(args, name, value, "a topic", filter.original_topic);
  if (name == "--original-partition") {
    int32_t partition = 0;
    if (std::optional<UsageError> error =
            SetNumber(args, name, value, 0, kMaxInt32, "a partition", partition)) {
      return error;
    }
    filter.original_partition = partition;
    return std::nullopt;
  }
  if (name == "--since") return SetTime(args, name, value, filter.since_unix_ms);
  if (name == "--until") return SetTime(args, name, value, filter.until_unix_ms);
  if (name == "--min-attempts") {
    return SetNumber(args, name, value, 1, kMaxInt32, "attempts", filter.min_attempts);
  }
  if (name == "--max-attempts") {
    return SetNumber(args, name, value, 1, kMaxInt32, "attempts", filter.max_attempts);
  }
  if (name == "--partition") return AddPartitions(args, name, value, filter.partitions);
  taken = false;
  return std::nullopt;
}

std::optional<UsageError> CheckFilter(CommandArgs& args, const DeadLetterFilterArgs& filter) {
  if (filter.since_unix_ms > 0 && filter.until_unix_ms > 0 &&
      filter.since_unix_ms >= filter.until_unix_ms) {
    return args.Error("--since must be before --until");
  }
  if (filter.min_attempts > 0 && filter.max_attempts > 0 &&
      filter.min_attempts > filter.max_attempts) {
    return args.Error("--min-attempts must not be above --max-attempts");
  }
  return std::nullopt;
}

// The flags of one dlq subcommand: the filter's if `with_filter`, and
// those `take_own` takes (it sets `taken`).
template <typename TakeOwn>
std::optional<UsageError> TakeFlags(CommandArgs& args, bool with_filter, DlqArgs& dlq,
                                    TakeOwn take_own) {
  while (!args.done()) {
    const std::string& arg = args.take();
    if (!LooksLikeFlag(arg)) return args.Unexpected(arg);
    const auto [name, value] = SplitFlag(arg);
    bool taken = false;
    if (with_filter) {
      if (std::optional<UsageError> error = TakeFilterFlag(args, name, value, dlq.filter, taken)) {
        return error;
      }
      if (taken) continue;
    }
    if (std::optional<UsageError> error = take_own(name, value, taken)) return error;
    if (!taken) return args.UnknownFlag(name);
  }
  if (with_filter) return CheckFilter(args, dlq.filter);
  return std::nullopt;
}

std::optional<UsageError> ParseList(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kDlqList;
  DlqArgs& dlq = invocation.dlq;
  bool have_limit = false;
  std::optional<UsageError> error = TakeFlags(
      args, /*with_filter=*/true, dlq,
      [&](std::string_view name, std::optional<std::string_view> value,
          bool& taken) -> std::optional<UsageError> {
        taken = true;
        if (name == "--limit") {
          have_limit = true;
          return SetNumber(args, name, value, 1, kMaxListLimit, "records", dlq.limit);
        }
        if (name == "--all-pages") return SetSwitch(args, name, value, dlq.all_pages);
        if (name == "--page-size") {
          return SetNumber(args, name, value, 1, kMaxPageSize, "records", dlq.page_size);
        }
        if (name == "--max-value-bytes") {
          return SetNumber(args, name, value, 0, kMaxValueBytes, "bytes", dlq.max_value_bytes);
        }
        taken = false;
        return std::nullopt;
      });
  if (error.has_value()) return error;
  if (dlq.all_pages && have_limit) return args.Error("give --limit or --all-pages, not both");
  if (dlq.all_pages) dlq.limit = 0;
  return std::nullopt;
}

std::optional<UsageError> ParseRedrive(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kDlqRedrive;
  DlqArgs& dlq = invocation.dlq;
  return TakeFlags(
      args, /*with_filter=*/true, dlq,
      [&](std::string_view name, std::optional<std::string_view> value,
          bool& taken) -> std::optional<UsageError> {
        taken = true;
        if (name == "--to") return SetText(args, name, value, "a topic", dlq.target_topic);
        if (name == "--rate") {
          return SetNumber(args, name, value, 1, kMaxRatePerS, "records a second", dlq.rate_per_s);
        }
        if (name == "--reset-attempts") return SetSwitch(args, name, value, dlq.reset_attempts);
        if (name == "--dry-run") return SetSwitch(args, name, value, dlq.dry_run);
        if (name == "--max-redrives") {
          return SetNumber(args, name, value, 1, kMaxRedrives, "redrives", dlq.max_redrives);
        }
        if (name == "--wait") return SetSwitch(args, name, value, invocation.wait);
        taken = false;
        return std::nullopt;
      });
}

// Adds the P=OFFSET pairs of `text` ("0=120" or "0=120,1=80") to `up_to`.
std::optional<UsageError> AddUpTo(CommandArgs& args, std::string_view text,
                                  std::vector<std::pair<int32_t, int64_t>>& up_to) {
  for (absl::string_view piece : absl::StrSplit(Av(text), ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(piece, absl::MaxSplits('=', 1));
    int64_t partition = 0;
    int64_t offset = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &partition) || partition < 0 ||
        partition > kMaxInt32 || !absl::SimpleAtoi(parts[1], &offset) || offset < 0) {
      return args.Error(absl::StrCat(
          "--up-to takes PARTITION=OFFSET (the first offset to keep), e.g. 0=1200, got '", piece,
          "'"));
    }
    for (const auto& [seen, unused] : up_to) {
      if (seen == partition) {
        return args.Error(absl::StrCat("--up-to names partition ", partition, " twice"));
      }
    }
    up_to.emplace_back(static_cast<int32_t>(partition), offset);
  }
  return std::nullopt;
}

std::optional<UsageError> ParsePurge(CommandArgs& args, Invocation& invocation) {
  invocation.command = Command::kDlqPurge;
  DlqArgs& dlq = invocation.dlq;
  std::optional<UsageError> error = TakeFlags(
      args, /*with_filter=*/false, dlq,
      [&](std::string_view name, std::optional<std::string_view> value,
          bool& taken) -> std::optional<UsageError> {
        taken = true;
        if (name == "--all") return SetSwitch(args, name, value, dlq.purge_all);
        if (name == "--delete-records") return SetSwitch(args, name, value, dlq.delete_records);
        if (name != "--up-to") {
          taken = false;
          return std::nullopt;
        }
        // Inline, or the next arguments that are not flags: --up-to 0=10 1=20.
        if (value.has_value()) return AddUpTo(args, *value, dlq.purge_up_to);
        if (args.done() || LooksLikeFlag(args.peek())) {
          return args.Error("--up-to needs PARTITION=OFFSET, e.g. --up-to 0=1200");
        }
        while (!args.done() && !LooksLikeFlag(args.peek())) {
          if (std::optional<UsageError> bad = AddUpTo(args, args.take(), dlq.purge_up_to)) {
            return bad;
          }
        }
        return std::nullopt;
      });
  if (error.has_value()) return error;
  if (dlq.purge_all && !dlq.purge_up_to.empty()) {
    return args.Error("give --all or --up-to, not both");
  }
  if (!dlq.purge_all && dlq.purge_up_to.empty()) {
    return args.Error("say what to purge: --all, or --up-to PARTITION=OFFSET...");
  }
  return std::nullopt;
}

}  // namespace

std::optional<UsageError> ParseDlq(CommandArgs& args, Invocation& invocation) {
  if (args.done()) return args.Error("missing a subcommand: ls, record, redrive or purge");
  const std::string sub = args.take();
  if (sub != "ls" && sub != "record" && sub != "redrive" && sub != "purge") {
    return args.Error(
        absl::StrCat("unknown subcommand '", sub, "' (use ls, record, redrive or purge)"));
  }
  // Errors name the subcommand, and point at its help: "dlq ls: ...".
  const std::string what = absl::StrCat("dlq ", sub);
  CommandArgs sub_args(args.TakeRest(), what, what);
  if (sub == "ls") return ParseList(sub_args, invocation);
  if (sub == "record") return ParseDlqRecord(sub_args, invocation);
  if (sub == "redrive") return ParseRedrive(sub_args, invocation);
  return ParsePurge(sub_args, invocation);
}

}  // namespace retryd::retryctl
