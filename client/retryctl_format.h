// How retryctl prints responses: the human-readable text of each command,
// protobuf JSON for --json, and the small helpers the watch table shares.
//
// Text from the server (errors, topic names) is shown with control
// characters replaced, so a record's error message cannot drive the
// operator's terminal.
//
// Thread-safety: stateless functions; safe from any thread.
#ifndef RETRYD_CLIENT_RETRYCTL_FORMAT_H_
#define RETRYD_CLIENT_RETRYCTL_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "retryd/v1/control.pb.h"

namespace retryd::retryctl {

// Protobuf JSON with the .proto field names and every field present (so
// scripts need no defaults). `one_line`: no whitespace, for JSON lines.
// Ends with a newline.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message, bool one_line);

// A failed call as one line of JSON, no newline: {"code": 9, "status":
// "FAILED_PRECONDITION", "message": "..."}: google.rpc.Status's code and
// message, and the code's name; "reason": "..." too when the error carries
// one (ReasonOf), and "request_id" when `request_id` is not empty.
std::string ErrorJson(const absl::Status& status, std::string_view request_id = {});

// A failed call for people, one line without a prefix or newline:
// "FAILED_PRECONDITION (MAX_THREADS_REACHED): message", the reason in
// brackets only when the error carries one; the message made safe to print.
std::string FormatError(const absl::Status& status);

// `retryctl version --json`, one line, no newline: {"client": "...",
// "server": "..."}.
std::string VersionJson(std::string_view client, std::string_view server);

std::string FormatStatus(const v1::GetStatusResponse& status, absl::Time now);
std::string FormatStartRetryThreads(const v1::StartRetryThreadsResponse& response);
std::string FormatStopRetryThreads(const v1::StopRetryThreadsResponse& response);
// What `threads set N` changed (the ids started and stopped, if any), then
// every retry thread running.
std::string FormatSetRetryThreadCount(const v1::SetRetryThreadCountResponse& response);
std::string FormatSetInOrder(const v1::SetInOrderResponse& response);
std::string FormatSetOrderingMode(const v1::SetOrderingModeResponse& response);
// A table of the records in flight, oldest first, with a line saying how
// many there are and which threads did not answer. `now_ms`: Unix ms, for
// the DUE IN column.
std::string FormatListInFlight(const v1::ListInFlightResponse& response, int64_t now_ms);
std::string FormatDeadLetterRecord(const v1::DeadLetterRecordResponse& response,
                                   const std::string& topic, int32_t partition, int64_t offset);
// `rows` as columns two spaces apart, each as wide as its widest cell; the
// last column is not padded. Each line ends with a newline.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);

// Operations (retryctl_operation_format.cc). `now_ms`: Unix ms, for ages.
// "drain", "redrive"; an unknown kind as its number.
std::string OperationKindName(v1::OperationKind kind);
// "RUNNING", "SUCCEEDED", ...; an unknown state as its number.
std::string OperationStateName(v1::OperationState state);
// One operation, a field a line: id, kind, state, progress, created, ended,
// request id, error, result.
std::string FormatOperation(const v1::Operation& operation, int64_t now_ms);
// An operation's progress on one line: a redrive's counts
// (FormatRedriveProgress), else the server's description; "-" for none.
std::string FormatOperationProgress(const v1::OperationProgress& progress);
// A table of the operations, newest first: ID, KIND, STATE, AGE, ENDED,
// PROGRESS.
std::string FormatListOperations(const v1::ListOperationsResponse& response, int64_t now_ms);
// One line of a watched operation: "RUNNING 12.3s: 120 of 400 retry records
// left", or once ended "SUCCEEDED after 14.0s: drained 400 retry records,
// stopped retry threads 3, 4".
std::string FormatOperationUpdate(const v1::Operation& operation, int64_t now_ms);
// Why an operation that ended did not succeed, its reason included; OK if it
// succeeded or still runs. A FAILED (CANCELLED) one without an error code
// is UNKNOWN (CANCELLED).
absl::Status OperationError(const v1::Operation& operation);

// Dead letters (retryctl_dlq_format.cc). `now_ms`: Unix ms, for ages.
// The table of `dlq ls`: PARTITION@OFFSET, KEY, ATTEMPTS, DEAD-LETTERED,
// REASON, ORIGIN, ERROR; the error cut to what the terminal's `width`
// leaves of it (0: unknown, 60 characters). "" for no records.
std::string FormatDeadLetters(const std::vector<v1::DeadLetter>& records, int64_t now_ms,
                              size_t width);
// The line under it, without a newline: "3 dead letters of orders.dlq shown
// (1204 scanned); the list has ended", or "...; more may remain: ...".
std::string FormatDeadLettersFooter(int64_t shown, int64_t scanned, const std::string& topic,
                                    bool more);
// A redrive's counts on one line: "scanned 1200 of 5000, matched 300,
// redriven 250, skipped 2, 98.5/s, ETA 40.0s" ("dry run: ..., would
// redrive 250" for a dry run; ", sent twice 8" after "skipped" when a
// resumed redrive sent records the target held already).
std::string FormatRedriveProgress(const v1::RedriveProgress& progress);
// A redrive that ended: its counts and where it went ("; to ORIGIN").
std::string FormatRedriveOutcome(const v1::RedriveResult& result);
// A dry run's counts per dead-letter partition and per reason, as two
// small tables (PARTITION|REASON, MATCHED, SKIPPED); "" if it has none.
std::string FormatRedriveCounts(const v1::RedriveResult& result);
// `dlq purge`: how many were hidden, then PARTITION, FROM, TO, DELETED.
std::string FormatPurge(const v1::PurgeDeadLettersResponse& response);

// A record key as a terminal shows it: printable ASCII as it is, other
// bytes as "0x" and hex, "<null>" for a null key; cut to `max_width`.
std::string FormatKey(std::string_view key, bool has_key, size_t max_width);
// The tables show an enum value by its name without its type's prefix
// ("THREAD_STATE_RUNNING" is "RUNNING"), as they did before the values were
// prefixed; --json prints the full name. Empty for a number `type` does not
// name.
std::string ShortEnumName(const google::protobuf::EnumDescriptor& type, int number);

// "IN_CALL", "WAITING_DUE", ...; the number for a state this build does not
// know.
std::string InFlightStateName(v1::InFlightState state);

// "primary", "retry"; the number for a role this build does not know.
std::string RoleName(v1::ThreadRole role);
// "RUNNING", "WAITING_BACKOFF", ...
std::string ThreadStateName(v1::ThreadState state);
// "unordered", "in-order", "key", as `retryctl ordering` takes them; for
// ORDERING_UNSPECIFIED (a server older than the field) from `in_order`.
std::string OrderingName(v1::Ordering ordering, bool in_order);
// The ordering mode in one line: "unordered", "in-order", or in key order
// "key (3 parked keys, 7 records, oldest parked 12.3s)".
std::string FormatOrdering(v1::Ordering ordering, bool in_order, const v1::ParkedKeys& parked,
                           int64_t now_ms);
// "RUNNING", "DRAINING", ...
std::string EngineStateName(v1::EngineState state);

// A count a metrics message reports (an int64 field of v1::Totals or
// v1::ThreadMetrics) and how retryctl shows it, from the field's display
// option: a new count in the proto needs no code in retryctl.
struct ShownCount {
  const google::protobuf::FieldDescriptor* field;
  std::string label;        // The option's label, or the field's name with spaces.
  std::string rate_column;  // The header of its rate column in watch; "" for none.
};
// Every count of `descriptor`, in the proto's order.
std::vector<ShownCount> ShownCounts(const google::protobuf::Descriptor& descriptor);

// A compact duration: "850ms", "12.3s", "2m13s", "1h02m", "3d04h"; "-" if
// negative.
std::string FormatElapsed(int64_t ms);

// The processor's downstream in one line: "up", or "DOWN for 12s, intake
// paused, probing (2 outages so far); last error: ...".
std::string FormatDownstream(const v1::Downstream& downstream, int64_t now_ms);

// One automatic start or stop on one line: "12.3s ago: started retry
// thread 4: <reason>".
std::string FormatScalingEvent(const v1::ScalingEvent& event, int64_t now_ms);

// `text` on one line, safe to print: newlines and tabs become spaces, every
// other byte outside printable ASCII becomes '?'; cut
// to `max_width` characters ending in "..." when longer (0: no limit).
std::string SanitizeForTerminal(std::string_view text, size_t max_width);

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_RETRYCTL_FORMAT_H_
