// retryctl's text for ListInFlight and DeadLetterRecord (declared in
// retryctl_format.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/retryctl_format.h"

namespace retryd::retryctl {
namespace {

constexpr size_t kMaxKeyWidth = 32;
constexpr size_t kMaxErrorWidth = 60;

}  // namespace

std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string InFlightStateName(v1::InFlightState state) {
  if (state == v1::IN_FLIGHT_STATE_UNSPECIFIED || !v1::InFlightState_IsValid(state)) {
    return absl::StrCat(static_cast<int>(state));
  }
  return ShortEnumName(*v1::InFlightState_descriptor(), state);
}

std::string FormatKey(std::string_view key, bool has_key, size_t max_width) {
  if (!has_key) return "<null>";
  const bool printable = std::all_of(key.begin(), key.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (printable) return SanitizeForTerminal(key, max_width);
  return SanitizeForTerminal(
      absl::StrCat("0x", absl::BytesToHexString(absl::string_view(key.data(), key.size()))),
      max_width);
}

std::string FormatListInFlight(const v1::ListInFlightResponse& response, int64_t now_ms) {
  std::string out;
  if (response.total() == response.records_size()) {
    absl::StrAppend(&out, response.total(), response.total() == 1 ? " record" : " records",
                    " in flight\n");
  } else {
    absl::StrAppend(&out, response.total(), " records in flight, the ", response.records_size(),
                    " oldest shown\n");
  }
  if (!response.unanswered_thread_ids().empty()) {
    absl::StrAppend(&out, "threads ", absl::StrJoin(response.unanswered_thread_ids(), ", "),
                    " did not answer in time (busy in a long call?): their records are not "
                    "listed\n");
  }
  if (response.records().empty()) return out;
  std::vector<std::vector<std::string>> rows = {
      {"RECORD", "KEY", "STATE", "THREAD", "ATTEMPT", "AGE", "DUE IN", "LAST ERROR"}};
  for (const v1::InFlightRecord& r : response.records()) {
    std::string thread = absl::StrCat(r.thread_id(), " ", RoleName(r.role()));
    if (r.role() == v1::THREAD_ROLE_RETRY) {
      absl::StrAppend(&thread, " (", r.read_from().topic(), "/", r.read_from().partition(), "@",
                      r.read_offset(), ")");
    }
    rows.push_back({
        SanitizeForTerminal(absl::StrCat(r.topic(), "/", r.partition(), "@", r.offset()), 0),
        FormatKey(r.key(), r.has_key(), kMaxKeyWidth),
        InFlightStateName(r.state()),
        SanitizeForTerminal(thread, 0),
        absl::StrCat(r.attempt()),
        FormatElapsed(r.age_ms()),
        r.due_unix_ms() > 0 ? FormatElapsed(std::max<int64_t>(0, r.due_unix_ms() - now_ms)) : "-",
        r.last_error().empty() ? "-" : SanitizeForTerminal(r.last_error(), kMaxErrorWidth),
    });
  }
  return out + RenderTable(rows);
}

std::string FormatDeadLetterRecord(const v1::DeadLetterRecordResponse& response,
                                   const std::string& topic, int32_t partition, int64_t offset) {
  return SanitizeForTerminal(absl::StrCat(topic, "/", partition, "@", offset,
                                          " dead-lettered by thread ", response.thread_id()),
                             0) +
         "\n";
}

}  // namespace retryd::retryctl
