// `retryctl dlq ls | record | redrive | purge` (`dlq record` also spelled
// `dlq-record`): the dead-letter tools' calls and their output. DlqCommands
// lists them for the command table.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/retryctl_command_table.h"
#include "client/retryctl_format.h"
#include "client/retryctl_run.h"

namespace retryd::retryctl {
namespace {

// ListDeadLettersRequest.page_size's bound.
constexpr int64_t kMaxPageSize = 1000;

v1::DeadLetterFilter ToProto(const DeadLetterFilterArgs& args) {
  v1::DeadLetterFilter filter;
  filter.set_key_prefix(args.key_prefix);
  filter.set_error_contains(args.error_contains);
  filter.set_reason(args.reason);
  filter.set_original_topic(args.original_topic);
  if (args.original_partition.has_value()) {
    filter.set_original_partition(*args.original_partition);
  }
  filter.set_first_failure_from_unix_ms(args.since_unix_ms);
  filter.set_first_failure_to_unix_ms(args.until_unix_ms);
  filter.set_min_attempts(args.min_attempts);
  filter.set_max_attempts(args.max_attempts);
  filter.mutable_partitions()->Add(args.partitions.begin(), args.partitions.end());
  return filter;
}

// The end of `dlq ls`: the table of what it found (none with --json, which
// printed each record as it came), then `footer`, or the failed call
// `error`.
int EndList(const std::vector<v1::DeadLetter>& table, const std::string& footer,
            const absl::Status& error, const GlobalFlags& flags, const Io& io) {
  if (!flags.json) {
    const size_t width = io.terminal_width ? io.terminal_width() : 0;
    io.out << FormatDeadLetters(table, absl::ToUnixMillis(absl::Now()), width);
    if (error.ok()) io.out << footer << "\n";
    io.out.flush();
  } else if (error.ok()) {
    io.err << "retryctl: " << footer << "\n";
  }
  if (!error.ok()) return RpcFailure(error, flags, io.err);
  return kExitOk;
}

// `dlq ls`: pages until `limit` records are shown or the list ends. --json
// prints each record as it comes, one line each; the table comes at the
// end. The footer (on stderr with --json) says whether more remain.
int RunList(RetrydClient& client, const Invocation& invocation, const Io& io,
            Interrupt* /*interrupt*/) {
  const GlobalFlags& flags = invocation.flags;
  const DlqArgs& dlq = invocation.dlq;
  v1::ListDeadLettersRequest request;
  *request.mutable_filter() = ToProto(dlq.filter);
  request.set_max_value_bytes(dlq.max_value_bytes);

  std::vector<v1::DeadLetter> table;
  int64_t shown = 0;
  int64_t scanned = 0;
  std::string topic;
  bool more = false;
  absl::Status error;
  while (true) {
    uint32_t page_size = dlq.page_size;
    if (page_size == 0 && dlq.limit > 0) {
      page_size = static_cast<uint32_t>(std::min(dlq.limit - shown, kMaxPageSize));
    }
    request.set_page_size(page_size);
    absl::StatusOr<v1::ListDeadLettersResponse> page = client.ListDeadLetters(request);
    if (!page.ok()) {
      error = page.status();
      break;
    }
    topic = page->topic();
    scanned += page->scanned();
    for (const v1::DeadLetter& record : page->records()) {
      if (dlq.limit > 0 && shown == dlq.limit) {
        more = true;  // The rest of this page.
        break;
      }
      ++shown;
      if (!flags.json) {
        table.push_back(record);
        continue;
      }
      absl::StatusOr<std::string> json = ToJson(record, /*one_line=*/true);
      if (!json.ok()) return RpcFailure(json.status(), flags, io.err);
      io.out << *json;
    }
    io.out.flush();
    // A closed stdout (e.g. `| head`) ends it too.
    if (!io.out || page->next_page_token().empty()) break;
    if (dlq.limit > 0 && shown >= dlq.limit) {
      more = true;
      break;
    }
    request.set_page_token(page->next_page_token());
  }
  // What came before an error is shown all the same.
  return EndList(table, FormatDeadLettersFooter(shown, scanned, topic, more), error, flags, io);
}

// `dlq redrive`: StartRedrive, then with --wait follows the operation.
int RunRedrive(RetrydClient& client, const Invocation& invocation, const Io& io,
               Interrupt* interrupt) {
  const DlqArgs& dlq = invocation.dlq;
  v1::StartRedriveRequest request;
  request.set_request_id(invocation.flags.request_id);
  *request.mutable_filter() = ToProto(dlq.filter);
  request.set_target_topic(dlq.target_topic);
  request.set_rate_per_s(dlq.rate_per_s);
  request.set_reset_attempts(dlq.reset_attempts);
  request.set_dry_run(dlq.dry_run);
  request.set_max_redrives(dlq.max_redrives);
  return ReportStarted(client, client.StartRedrive(request),
                       dlq.dry_run ? "redrive (dry run)" : "redrive", invocation.wait,
                       invocation.flags, io, interrupt);
}

int RunPurge(RetrydClient& client, const Invocation& invocation, const Io& io,
             Interrupt* /*interrupt*/) {
  const DlqArgs& dlq = invocation.dlq;
  v1::PurgeDeadLettersRequest request;
  request.set_request_id(invocation.flags.request_id);
  request.set_all(dlq.purge_all);
  for (const auto& [partition, offset] : dlq.purge_up_to) {
    (*request.mutable_up_to())[partition] = offset;
  }
  request.set_delete_records(dlq.delete_records);
  return PrintResult(client.PurgeDeadLetters(request), FormatPurge, invocation.flags, io);
}

// `dlq record` (and `dlq-record`): DeadLetterRecord.
int RunRecord(RetrydClient& client, const Invocation& invocation, const Io& io,
              Interrupt* /*interrupt*/) {
  v1::DeadLetterRecordRequest request;
  request.set_topic(invocation.record_topic);
  request.set_partition(invocation.record_partition);
  request.set_offset(invocation.record_offset);
  request.set_request_id(invocation.flags.request_id);
  const auto format = [&invocation](const v1::DeadLetterRecordResponse& moved) {
    return FormatDeadLetterRecord(moved, invocation.record_topic, invocation.record_partition,
                                  invocation.record_offset);
  };
  return PrintResult(client.DeadLetterRecord(request), format, invocation.flags, io);
}

constexpr CommandEntry kDlqCommands[] = {
    {Command::kDlqList, "dlq ls", "dlq ls", RunList},
    {Command::kDlqRecord, "dlq record", "dlq record", RunRecord},
    {Command::kDlqRedrive, "dlq redrive", "dlq redrive", RunRedrive},
    {Command::kDlqPurge, "dlq purge", "dlq purge", RunPurge},
};

}  // namespace

absl::Span<const CommandEntry> DlqCommands() { return kDlqCommands; }

}  // namespace retryd::retryctl
