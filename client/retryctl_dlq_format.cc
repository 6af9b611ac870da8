// retryctl's text for the dead-letter tools: dlq ls, a redrive's progress
// and result, dlq purge (declared in retryctl_format.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/retryctl_format.h"

namespace retryd::retryctl {
namespace {

constexpr size_t kMaxKeyWidth = 32;
constexpr size_t kMaxReasonWidth = 40;
constexpr size_t kMaxOriginWidth = 60;
// The ERROR column's width when the terminal's is unknown, and at least.
constexpr size_t kDefaultErrorWidth = 60;
constexpr size_t kMinErrorWidth = 16;

// When it was dead-lettered, as an age; its record's timestamp if an older
// retryd did not say.
std::string DeadLetteredAge(const v1::DeadLetter& record, int64_t now_ms) {
  const int64_t when = record.dead_lettered_unix_ms() > 0 ? record.dead_lettered_unix_ms()
                                                          : record.timestamp_unix_ms();
  if (when <= 0) return "-";
  return absl::StrCat(FormatElapsed(std::max<int64_t>(0, now_ms - when)), " ago");
}

std::string ErrorCell(const v1::DeadLetter& record) {
  if (!record.decode_error().empty()) {
    return absl::StrCat("not written by retryd: ", record.decode_error());
  }
  return record.error().empty() ? "-" : record.error();
}

// The rows of a RedriveCount table under `header`.
std::string CountTable(const std::string& header,
                       const google::protobuf::RepeatedPtrField<v1::RedriveCount>& counts) {
  std::vector<std::vector<std::string>> rows = {{header, "MATCHED", "SKIPPED"}};
  for (const v1::RedriveCount& count : counts) {
    rows.push_back({count.key().empty() ? "-" : SanitizeForTerminal(count.key(), kMaxReasonWidth),
                    absl::StrCat(count.matched()), absl::StrCat(count.skipped())});
  }
  return RenderTable(rows);
}

}  // namespace

std::string FormatDeadLetters(const std::vector<v1::DeadLetter>& records, int64_t now_ms,
                              size_t width) {
  if (records.empty()) return "";
  std::vector<std::vector<std::string>> rows = {
      {"PARTITION@OFFSET", "KEY", "ATTEMPTS", "DEAD-LETTERED", "REASON", "ORIGIN"}};
  for (const v1::DeadLetter& r : records) {
    const bool decoded = r.decode_error().empty();
    rows.push_back({
        absl::StrCat(r.partition(), "@", r.offset()),
        FormatKey(r.key(), !r.key_null(), kMaxKeyWidth),
        // 0: another tool's dead letter that does not say.
        decoded && r.attempts() > 0 ? absl::StrCat(r.attempts()) : "-",
        DeadLetteredAge(r, now_ms),
        r.error_reason().empty() ? "-" : SanitizeForTerminal(r.error_reason(), kMaxReasonWidth),
        decoded ? SanitizeForTerminal(absl::StrCat(r.original_topic(), "/", r.original_partition(),
                                                   "@", r.original_offset()),
                                      kMaxOriginWidth)
                : "-",
    });
  }
  // The error takes what the other columns leave of the terminal's width.
  size_t used = 0;
  for (size_t column = 0; column < rows.front().size(); ++column) {
    size_t widest = 0;
    for (const auto& row : rows) widest = std::max(widest, row[column].size());
    used += widest + 2;
  }
  const size_t error_width =
      width == 0 ? kDefaultErrorWidth : std::max(width > used ? width - used : 0, kMinErrorWidth);
  rows.front().push_back("ERROR");
  for (size_t i = 0; i < records.size(); ++i) {
    rows[i + 1].push_back(SanitizeForTerminal(ErrorCell(records[i]), error_width));
  }
  return RenderTable(rows);
}

std::string FormatDeadLettersFooter(int64_t shown, int64_t scanned, const std::string& topic,
                                    bool more) {
  std::string out = absl::StrCat(shown, shown == 1 ? " dead letter" : " dead letters");
  if (!topic.empty()) absl::StrAppend(&out, " of ", SanitizeForTerminal(topic, 0));
  absl::StrAppend(&out, " shown (", scanned, " scanned)");
  absl::StrAppend(
      &out, more ? "; more may remain: raise --limit, or use --all-pages" : "; the list has ended");
  return out;
}

std::string FormatRedriveProgress(const v1::RedriveProgress& progress) {
  std::string out = progress.dry_run() ? "dry run: scanned " : "scanned ";
  absl::StrAppend(&out, progress.scanned());
  if (progress.total() > 0) absl::StrAppend(&out, " of ", progress.total());
  absl::StrAppend(&out, ", matched ", progress.matched(),
                  progress.dry_run() ? ", would redrive " : ", redriven ", progress.redriven(),
                  ", skipped ", progress.skipped());
  if (progress.sent_twice() > 0) absl::StrAppend(&out, ", sent twice ", progress.sent_twice());
  if (!progress.dry_run()) absl::StrAppendFormat(&out, ", %.1f/s", progress.rate_per_s());
  if (progress.eta_ms() >= 0) absl::StrAppend(&out, ", ETA ", FormatElapsed(progress.eta_ms()));
  if (progress.resumed()) out.append(" (resumed)");
  return out;
}

std::string FormatRedriveOutcome(const v1::RedriveResult& result) {
  std::string out = FormatRedriveProgress(result.progress());
  if (!result.target().empty()) {
    absl::StrAppend(&out, "; to ", SanitizeForTerminal(result.target(), 0));
  }
  return out;
}

std::string FormatRedriveCounts(const v1::RedriveResult& result) {
  std::string out;
  if (!result.by_partition().empty()) out += CountTable("PARTITION", result.by_partition());
  if (!result.by_reason().empty()) {
    if (!out.empty()) out += "\n";
    out += CountTable("REASON", result.by_reason());
  }
  return out;
}

std::string FormatPurge(const v1::PurgeDeadLettersResponse& response) {
  if (response.partitions().empty()) return "nothing purged: no partition named\n";
  int64_t purged = 0;
  bool deleted = false;
  std::vector<std::vector<std::string>> rows = {{"PARTITION", "FROM", "TO", "DELETED"}};
  for (const v1::PartitionPurge& p : response.partitions()) {
    purged += std::max<int64_t>(0, p.to() - p.from());
    deleted = deleted || p.deleted();
    rows.push_back({absl::StrCat(p.partition()), absl::StrCat(p.from()), absl::StrCat(p.to()),
                    p.deleted() ? "yes" : "no"});
  }
  std::string out = absl::StrCat("purged ", purged, purged == 1 ? " dead letter" : " dead letters");
  if (!response.topic().empty()) {
    absl::StrAppend(&out, " of ", SanitizeForTerminal(response.topic(), 0));
  }
  absl::StrAppend(&out, deleted ? " (hidden, and deleted where DELETED says yes)\n"
                                : " (hidden from dlq ls and dlq redrive; still in the topic)\n");
  return out + RenderTable(rows);
}

}  // namespace retryd::retryctl
