// The runners of retryctl's commands other than `dlq`: status, threads,
// ordering, watch, inflight, version, health, drain and operations. Each
// makes its call and prints the answer (retryctl_run.h); ControlCommands
// lists them for the command table.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/retryctl_command_table.h"
#include "client/retryctl_format.h"
#include "client/retryctl_run.h"
#include "client/watch_table.h"

namespace retryd::retryctl {
namespace {

// Cursor home, then erase the screen: how watch redraws in place.
constexpr char kClearScreen[] = "\x1b[H\x1b[2J";

int RunWatch(RetrydClient& client, const Invocation& invocation, const Io& io,
             Interrupt* interrupt) {
  WatchTable table(WatchTableOptions{});
  int64_t shown = 0;
  bool stopped_by_us = false;
  absl::Status output_error;
  const auto on_snapshot = [&](const v1::MetricsSnapshot& snapshot) {
    if (interrupt != nullptr && interrupt->triggered()) {
      stopped_by_us = true;
      return false;
    }
    if (invocation.flags.json) {
      absl::StatusOr<std::string> json = ToJson(snapshot, /*one_line=*/true);
      if (!json.ok()) {
        output_error = json.status();
        return false;
      }
      io.out << *json;
    } else {
      const size_t width = io.terminal_width ? io.terminal_width() : 0;
      if (io.out_is_tty) {
        io.out << kClearScreen;
      } else if (shown > 0) {
        io.out << "\n";
      }
      io.out << table.Render(snapshot, width);
    }
    io.out.flush();
    ++shown;
    // A closed stdout (e.g. `| head`) ends the watch too.
    if (!io.out || (invocation.max_snapshots > 0 && shown >= invocation.max_snapshots)) {
      stopped_by_us = true;
      return false;
    }
    return true;
  };

  if (interrupt != nullptr) interrupt->Attach(client);
  const absl::Status status =
      client.Watch(invocation.interval_ms, invocation.thread_ids, on_snapshot);
  if (interrupt != nullptr) {
    interrupt->Detach();
    if (interrupt->triggered()) stopped_by_us = true;
  }
  if (!output_error.ok()) return RpcFailure(output_error, invocation.flags, io.err);
  if (!status.ok()) return RpcFailure(status, invocation.flags, io.err);
  if (!stopped_by_us) io.err << "retryctl: retryd ended the stream\n";
  return kExitOk;
}

// `retryctl drain`: StartDrain, then with --wait follows the operation.
int RunDrain(RetrydClient& client, const Invocation& invocation, const Io& io,
             Interrupt* interrupt) {
  v1::StartDrainRequest request;
  request.set_request_id(invocation.flags.request_id);
  request.set_timeout_ms(invocation.drain_timeout_ms);
  return ReportStarted(client, client.StartDrain(request), "drain", invocation.wait,
                       invocation.flags, io, interrupt);
}

// `retryctl version`: this tool's release, then the server's (GetStatus).
// The client's line is printed even when the server cannot be asked.
int RunVersion(RetrydClient& client, const Invocation& invocation, const Io& io,
               Interrupt* /*interrupt*/) {
  const GlobalFlags& flags = invocation.flags;
  absl::StatusOr<v1::GetStatusResponse> status = client.GetStatus();
  if (flags.json) {
    if (!status.ok()) return RpcFailure(status.status(), flags, io.err);
    io.out << VersionJson(RETRYD_VERSION, status->version()) << "\n";
    io.out.flush();
    return kExitOk;
  }
  io.out << "retryctl " << RETRYD_VERSION << "\n";
  io.out.flush();
  if (!status.ok()) return RpcFailure(status.status(), flags, io.err);
  io.out << "retryd   " << SanitizeForTerminal(status->version(), 0) << " at " << flags.address
         << "\n";
  io.out.flush();
  return kExitOk;
}

v1::Ordering ToProto(OrderingMode mode) {
  switch (mode) {
    case OrderingMode::kUnordered:
      return v1::ORDERING_UNORDERED;
    case OrderingMode::kInOrder:
      return v1::ORDERING_IN_ORDER;
    case OrderingMode::kKey:
      return v1::ORDERING_KEY;
  }
  return v1::ORDERING_UNSPECIFIED;
}

int RunStatus(RetrydClient& client, const Invocation& invocation, const Io& io,
              Interrupt* /*interrupt*/) {
  const auto format = [](const v1::GetStatusResponse& status) {
    return FormatStatus(status, absl::Now());
  };
  return PrintResult(client.GetStatus(), format, invocation.flags, io);
}

int RunThreadsStart(RetrydClient& client, const Invocation& invocation, const Io& io,
                    Interrupt* /*interrupt*/) {
  v1::StartRetryThreadsRequest request;
  request.set_count(invocation.count);
  request.set_tier(invocation.tier);
  request.set_request_id(invocation.flags.request_id);
  return PrintResult(client.StartRetryThreads(request), FormatStartRetryThreads, invocation.flags,
                     io);
}

int RunThreadsStop(RetrydClient& client, const Invocation& invocation, const Io& io,
                   Interrupt* /*interrupt*/) {
  v1::StopRetryThreadsRequest request;
  if (invocation.thread_ids.empty()) request.set_count(invocation.count);
  request.mutable_thread_ids()->Add(invocation.thread_ids.begin(), invocation.thread_ids.end());
  request.set_graceful(invocation.graceful);
  request.set_tier(invocation.tier);
  request.set_request_id(invocation.flags.request_id);
  return PrintResult(client.StopRetryThreads(request), FormatStopRetryThreads, invocation.flags,
                     io);
}

int RunThreadsSet(RetrydClient& client, const Invocation& invocation, const Io& io,
                  Interrupt* /*interrupt*/) {
  v1::SetRetryThreadCountRequest request;
  request.set_target(invocation.count);
  request.set_tier(invocation.tier);
  request.set_graceful(invocation.graceful);
  request.set_request_id(invocation.flags.request_id);
  return PrintResult(client.SetRetryThreadCount(request), FormatSetRetryThreadCount,
                     invocation.flags, io);
}

int RunInOrder(RetrydClient& client, const Invocation& invocation, const Io& io,
               Interrupt* /*interrupt*/) {
  v1::SetInOrderRequest request;
  request.set_in_order(invocation.in_order);
  request.set_drain_retries(invocation.drain);
  request.set_request_id(invocation.flags.request_id);
  return PrintResult(client.SetInOrder(request), FormatSetInOrder, invocation.flags, io);
}

int RunOrdering(RetrydClient& client, const Invocation& invocation, const Io& io,
                Interrupt* /*interrupt*/) {
  v1::SetOrderingModeRequest request;
  request.set_mode(ToProto(invocation.ordering));
  request.set_drain_retries(invocation.drain);
  request.set_request_id(invocation.flags.request_id);
  return PrintResult(client.SetOrderingMode(request), FormatSetOrderingMode, invocation.flags, io);
}

int RunInFlight(RetrydClient& client, const Invocation& invocation, const Io& io,
                Interrupt* /*interrupt*/) {
  const auto format = [](const v1::ListInFlightResponse& list) {
    return FormatListInFlight(list, absl::ToUnixMillis(absl::Now()));
  };
  return PrintResult(client.ListInFlight(invocation.limit), format, invocation.flags, io);
}

int RunHealth(RetrydClient& client, const Invocation& invocation, const Io& io,
              Interrupt* /*interrupt*/) {
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> health =
      client.HealthCheck(invocation.health_service);
  if (!health.ok()) return RpcFailure(health.status(), invocation.flags, io.err);
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(health->status());
  const int printed = PrintResponse(*health, name + "\n", invocation.flags, io);
  if (printed != kExitOk) return printed;
  return health->status() == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk
                                                                            : kExitNotServing;
}

int RunOperations(RetrydClient& client, const Invocation& invocation, const Io& io,
                  Interrupt* /*interrupt*/) {
  const auto format = [](const v1::ListOperationsResponse& list) {
    return FormatListOperations(list, absl::ToUnixMillis(absl::Now()));
  };
  return PrintResult(client.ListOperations(), format, invocation.flags, io);
}

// The answer of `operation ID` and of `operation cancel ID`.
int PrintOperation(const absl::StatusOr<v1::Operation>& operation, const GlobalFlags& flags,
                   const Io& io) {
  const auto format = [](const v1::Operation& operation) {
    return FormatOperation(operation, absl::ToUnixMillis(absl::Now()));
  };
  return PrintResult(operation, format, flags, io);
}

int RunOperationGet(RetrydClient& client, const Invocation& invocation, const Io& io,
                    Interrupt* /*interrupt*/) {
  return PrintOperation(client.GetOperation(invocation.operation_id), invocation.flags, io);
}

int RunOperationCancel(RetrydClient& client, const Invocation& invocation, const Io& io,
                       Interrupt* /*interrupt*/) {
  v1::CancelOperationRequest request;
  request.set_id(invocation.operation_id);
  request.set_request_id(invocation.flags.request_id);
  return PrintOperation(client.CancelOperation(request), invocation.flags, io);
}

int RunFollowOperation(RetrydClient& client, const Invocation& invocation, const Io& io,
                       Interrupt* interrupt) {
  return RunOperationWatch(client, invocation.operation_id, invocation.flags, io, interrupt);
}

constexpr CommandEntry kControlCommands[] = {
    {Command::kStatus, "status", "status", RunStatus},
    {Command::kThreadsStart, "threads start", "threads", RunThreadsStart},
    {Command::kThreadsStop, "threads stop", "threads", RunThreadsStop},
    {Command::kThreadsSet, "threads set", "threads", RunThreadsSet},
    {Command::kOrdering, "ordering", "ordering", RunOrdering},
    {Command::kInOrder, "inorder", "inorder", RunInOrder},
    {Command::kWatch, "watch", "watch", RunWatch},
    {Command::kInFlight, "inflight", "inflight", RunInFlight},
    {Command::kDrain, "drain", "drain", RunDrain},
    {Command::kOperations, "operations", "operations", RunOperations},
    {Command::kOperationGet, "operation", "operation", RunOperationGet},
    {Command::kOperationWatch, "operation watch", "operation", RunFollowOperation},
    {Command::kOperationCancel, "operation cancel", "operation", RunOperationCancel},
    {Command::kVersion, "version", "version", RunVersion},
    {Command::kHealth, "health", "health", RunHealth},
};

}  // namespace

absl::Span<const CommandEntry> ControlCommands() { return kControlCommands; }

}  // namespace retryd::retryctl
