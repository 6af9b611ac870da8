#include "client/retryctl.h"

#include <cstddef>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/command_args.h"
#include "client/request_id.h"
#include "client/retryctl_format.h"
#include "client/retryctl_help.h"
#include "client/retryctl_run.h"
#include "client/watch_table.h"
#include "server/common/error_reason.h"
#include "server/common/read_file.h"

namespace retryd::retryctl {
namespace {

// Cursor home, then erase the screen: how watch redraws in place.
constexpr char kClearScreen[] = "\x1b[H\x1b[2J";

void PrintHint(std::string_view topic, std::ostream& err) {
  err << "Run 'retryctl " << topic << (topic.empty() ? "" : " ") << "--help' for usage.\n";
}

int UsageFailure(std::string_view message, std::string_view topic, std::ostream& err) {
  err << "retryctl: " << message << "\n";
  PrintHint(topic, err);
  return kExitUsage;
}

// Whether a mutating call that failed with `status` may all the same have
// been applied: no answer came back. An error with a reason applied nothing.
bool OutcomeUnknown(const absl::Status& status) {
  if (!ReasonOf(status).empty()) return false;
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

// The token is the file's content without surrounding whitespace (so a
// trailing newline does not matter).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  // A token is one short line: a token file larger than this is the wrong file.
  constexpr size_t kMaxTokenFileBytes = 64 << 10;
  absl::StatusOr<std::string> contents = ReadFileToString(path, kMaxTokenFileBytes);
  if (!contents.ok()) {
    return absl::Status(
        contents.status().code(),
        absl::StrCat("--token-file: cannot read ", path, " (", contents.status().message(), ")"));
  }
  std::string token(absl::StripAsciiWhitespace(*contents));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--token-file: ", path, " is empty"));
  }
  return token;
}

}  // namespace

int RpcFailure(const absl::Status& status, const GlobalFlags& flags, std::ostream& err) {
  if (flags.json) {
    // One line on stderr, as google.rpc.Status reads in JSON, with the
    // code's name beside its number.
    err << ErrorJson(status, flags.request_id) << "\n";
    return ExitStatusFor(status.code());
  }
  err << "retryctl: " << FormatError(status) << "\n";
  if (!flags.request_id.empty() && OutcomeUnknown(status)) {
    err << "retryctl: it may have been applied all the same; run it again with --request-id "
        << flags.request_id << " to have it applied at most once\n";
  }
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      err << "retryctl: is retryd running and listening on " << flags.address
          << "? (--addr or RETRYD_ADDR)\n";
      break;
    case absl::StatusCode::kUnauthenticated:
      if (flags.token_file.empty()) {
        err << "retryctl: retryd wants a token: pass --token-file FILE or set "
               "RETRYD_TOKEN_FILE\n";
      }
      break;
    case absl::StatusCode::kDeadlineExceeded:
      err << "retryctl: no answer within --timeout " << absl::FormatDuration(flags.timeout) << "\n";
      break;
    default:
      break;
  }
  return ExitStatusFor(status.code());
}

int PrintResponse(const google::protobuf::Message& response, const std::string& text,
                  const GlobalFlags& flags, const Io& io) {
  if (!flags.json) {
    io.out << text;
  } else {
    absl::StatusOr<std::string> json = ToJson(response, /*one_line=*/false);
    if (!json.ok()) return RpcFailure(json.status(), flags, io.err);
    io.out << *json;
  }
  io.out.flush();
  return kExitOk;
}

namespace {

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

}  // namespace

int RunOperationWatch(RetrydClient& client, const std::string& id, const GlobalFlags& flags,
                      const Io& io, Interrupt* interrupt) {
  v1::Operation last;
  bool seen = false;
  std::string last_line;
  absl::Status output_error;
  const auto on_update = [&](const v1::Operation& operation) {
    last = operation;
    seen = true;
    if (flags.json) {
      absl::StatusOr<std::string> json = ToJson(operation, /*one_line=*/true);
      if (!json.ok()) {
        output_error = json.status();
        return;
      }
      io.out << *json;
    } else {
      // The age in the line changes at every update: compare without it.
      const std::string key = absl::StrCat(operation.state(), " ", operation.done(), " ",
                                           FormatOperationProgress(operation.progress()));
      if (key == last_line) return;
      last_line = key;
      io.out << FormatOperationUpdate(operation, absl::ToUnixMillis(absl::Now())) << "\n";
    }
    io.out.flush();
  };

  if (interrupt != nullptr) interrupt->Attach(client);
  const absl::Status status = client.WatchOperation(id, on_update);
  bool interrupted = false;
  if (interrupt != nullptr) {
    interrupt->Detach();
    interrupted = interrupt->triggered();
  }
  if (!output_error.ok()) return RpcFailure(output_error, flags, io.err);
  if (!status.ok()) return RpcFailure(status, flags, io.err);
  if (interrupted && !(seen && last.done())) {
    io.err << "retryctl: stopped following operation " << SanitizeForTerminal(id, 64)
           << "; it goes on ('retryctl operation cancel " << SanitizeForTerminal(id, 64)
           << "' stops it)\n";
    return kExitInterrupted;
  }
  if (!seen || !last.done()) {
    return RpcFailure(absl::UnavailableError("retryd ended the stream before the operation ended"),
                      flags, io.err);
  }
  // A dry run's counts per partition and per reason.
  if (!flags.json && last.has_redrive()) {
    io.out << FormatRedriveCounts(last.redrive());
    io.out.flush();
  }
  const absl::Status error = OperationError(last);
  if (error.ok()) return kExitOk;
  // The human line says why already.
  if (!flags.json) return ExitStatusFor(error.code());
  return RpcFailure(error, flags, io.err);
}

int ReportStarted(RetrydClient& client, const absl::StatusOr<v1::Operation>& started,
                  std::string_view what, bool wait, const GlobalFlags& flags, const Io& io,
                  Interrupt* interrupt) {
  if (!started.ok()) return RpcFailure(started.status(), flags, io.err);
  const std::string id = SanitizeForTerminal(started->id(), 0);
  if (!wait) {
    return PrintResponse(*started,
                         absl::StrCat(Av(what), " started: operation ", id, "\n",
                                      "follow it with 'retryctl operation watch ", id,
                                      "', stop it with 'retryctl operation cancel ", id, "'\n"),
                         flags, io);
  }
  if (!flags.json) {
    io.out << what << " started: operation " << id << "\n";
    io.out.flush();
  }
  return RunOperationWatch(client, started->id(), flags, io, interrupt);
}

namespace {

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
int RunVersion(RetrydClient& client, const GlobalFlags& flags, const Io& io) {
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

int RunCommand(RetrydClient& client, const Invocation& invocation, const Io& io,
               Interrupt* interrupt) {
  const GlobalFlags& flags = invocation.flags;
  switch (invocation.command) {
    case Command::kStatus: {
      absl::StatusOr<v1::GetStatusResponse> status = client.GetStatus();
      if (!status.ok()) return RpcFailure(status.status(), flags, io.err);
      return PrintResponse(*status, FormatStatus(*status, absl::Now()), flags, io);
    }
    case Command::kThreadsStart: {
      v1::StartRetryThreadsRequest request;
      request.set_count(invocation.count);
      request.set_tier(invocation.tier);
      request.set_request_id(flags.request_id);
      absl::StatusOr<v1::StartRetryThreadsResponse> started = client.StartRetryThreads(request);
      if (!started.ok()) return RpcFailure(started.status(), flags, io.err);
      return PrintResponse(*started, FormatStartRetryThreads(*started), flags, io);
    }
    case Command::kThreadsStop: {
      v1::StopRetryThreadsRequest request;
      if (invocation.thread_ids.empty()) request.set_count(invocation.count);
      request.mutable_thread_ids()->Add(invocation.thread_ids.begin(), invocation.thread_ids.end());
      request.set_graceful(invocation.graceful);
      request.set_tier(invocation.tier);
      request.set_request_id(flags.request_id);
      absl::StatusOr<v1::StopRetryThreadsResponse> stopped = client.StopRetryThreads(request);
      if (!stopped.ok()) return RpcFailure(stopped.status(), flags, io.err);
      return PrintResponse(*stopped, FormatStopRetryThreads(*stopped), flags, io);
    }
    case Command::kThreadsSet: {
      v1::SetRetryThreadCountRequest request;
      request.set_target(invocation.count);
      request.set_tier(invocation.tier);
      request.set_graceful(invocation.graceful);
      request.set_request_id(flags.request_id);
      absl::StatusOr<v1::SetRetryThreadCountResponse> set = client.SetRetryThreadCount(request);
      if (!set.ok()) return RpcFailure(set.status(), flags, io.err);
      return PrintResponse(*set, FormatSetRetryThreadCount(*set), flags, io);
    }
    case Command::kInOrder: {
      v1::SetInOrderRequest request;
      request.set_in_order(invocation.in_order);
      request.set_drain_retries(invocation.drain);
      request.set_request_id(flags.request_id);
      absl::StatusOr<v1::SetInOrderResponse> set = client.SetInOrder(request);
      if (!set.ok()) return RpcFailure(set.status(), flags, io.err);
      return PrintResponse(*set, FormatSetInOrder(*set), flags, io);
    }
    case Command::kOrdering: {
      v1::SetOrderingModeRequest request;
      request.set_mode(ToProto(invocation.ordering));
      request.set_drain_retries(invocation.drain);
      request.set_request_id(flags.request_id);
      absl::StatusOr<v1::SetOrderingModeResponse> set = client.SetOrderingMode(request);
      if (!set.ok()) return RpcFailure(set.status(), flags, io.err);
      return PrintResponse(*set, FormatSetOrderingMode(*set), flags, io);
    }
    case Command::kDrain:
      return RunDrain(client, invocation, io, interrupt);
    case Command::kOperations: {
      absl::StatusOr<v1::ListOperationsResponse> list = client.ListOperations();
      if (!list.ok()) return RpcFailure(list.status(), flags, io.err);
      return PrintResponse(*list, FormatListOperations(*list, absl::ToUnixMillis(absl::Now())),
                           flags, io);
    }
    case Command::kOperationGet:
    case Command::kOperationCancel: {
      absl::StatusOr<v1::Operation> operation;
      if (invocation.command == Command::kOperationGet) {
        operation = client.GetOperation(invocation.operation_id);
      } else {
        v1::CancelOperationRequest request;
        request.set_id(invocation.operation_id);
        request.set_request_id(flags.request_id);
        operation = client.CancelOperation(request);
      }
      if (!operation.ok()) return RpcFailure(operation.status(), flags, io.err);
      return PrintResponse(*operation, FormatOperation(*operation, absl::ToUnixMillis(absl::Now())),
                           flags, io);
    }
    case Command::kOperationWatch:
      return RunOperationWatch(client, invocation.operation_id, flags, io, interrupt);
    case Command::kWatch:
      return RunWatch(client, invocation, io, interrupt);
    case Command::kDlqList:
    case Command::kDlqRedrive:
    case Command::kDlqPurge:
      return RunDlq(client, invocation, io, interrupt);
    case Command::kInFlight: {
      absl::StatusOr<v1::ListInFlightResponse> list = client.ListInFlight(invocation.limit);
      if (!list.ok()) return RpcFailure(list.status(), flags, io.err);
      return PrintResponse(*list, FormatListInFlight(*list, absl::ToUnixMillis(absl::Now())), flags,
                           io);
    }
    case Command::kDlqRecord: {
      v1::DeadLetterRecordRequest request;
      request.set_topic(invocation.record_topic);
      request.set_partition(invocation.record_partition);
      request.set_offset(invocation.record_offset);
      request.set_request_id(flags.request_id);
      absl::StatusOr<v1::DeadLetterRecordResponse> moved = client.DeadLetterRecord(request);
      if (!moved.ok()) return RpcFailure(moved.status(), flags, io.err);
      return PrintResponse(
          *moved,
          FormatDeadLetterRecord(*moved, invocation.record_topic, invocation.record_partition,
                                 invocation.record_offset),
          flags, io);
    }
    case Command::kVersion:
      return RunVersion(client, flags, io);
    case Command::kHealth: {
      absl::StatusOr<grpc::health::v1::HealthCheckResponse> health =
          client.HealthCheck(invocation.health_service);
      if (!health.ok()) return RpcFailure(health.status(), flags, io.err);
      const std::string name =
          grpc::health::v1::HealthCheckResponse::ServingStatus_Name(health->status());
      const int printed = PrintResponse(*health, name + "\n", flags, io);
      if (printed != kExitOk) return printed;
      return health->status() == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk
                                                                                : kExitNotServing;
    }
    case Command::kHelp:
      break;
  }
  return kExitOk;
}

}  // namespace

int ExitStatusFor(absl::StatusCode code) { return kExitRpcFailedBase + static_cast<int>(code); }

ClientFactory DefaultClientFactory() {
  return [](const ClientOptions& options) { return RetrydClient::Create(options); };
}

bool Interrupt::Trigger() {
  absl::MutexLock lock(&mu_);
  triggered_ = true;
  if (client_ == nullptr) return false;
  client_->Cancel();
  return true;
}

bool Interrupt::triggered() const {
  absl::MutexLock lock(&mu_);
  return triggered_;
}

void Interrupt::Attach(RetrydClient& client) {
  absl::MutexLock lock(&mu_);
  client_ = &client;
}

void Interrupt::Detach() {
  absl::MutexLock lock(&mu_);
  client_ = nullptr;
}

int RunRetryctl(const std::vector<std::string>& args, const Environment& env, const Io& io,
                const ClientFactory& factory, Interrupt* interrupt) {
  std::variant<Invocation, UsageError> parsed = ParseArgs(args, env);
  if (const UsageError* error = std::get_if<UsageError>(&parsed)) {
    return UsageFailure(error->message, error->topic, io.err);
  }
  Invocation& invocation = std::get<Invocation>(parsed);
  if (invocation.command == Command::kHelp) {
    io.out << HelpText(invocation.help_topic);
    io.out.flush();
    return kExitOk;
  }

  if (invocation.flags.request_id == "auto") {
    absl::StatusOr<std::string> id = NewRequestId();
    if (!id.ok()) return UsageFailure(std::string(id.status().message()), "", io.err);
    invocation.flags.request_id = *std::move(id);
  }
  const GlobalFlags& flags = invocation.flags;
  ClientOptions options;
  options.address = flags.address;
  options.tls = flags.tls;
  options.tls_ca_file = flags.tls_ca_file;
  options.tls_cert_file = flags.tls_cert_file;
  options.tls_key_file = flags.tls_key_file;
  options.timeout = flags.timeout;
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(flags.token_file);
    if (!token.ok()) return UsageFailure(std::string(token.status().message()), "", io.err);
    options.token = *std::move(token);
  }
  absl::StatusOr<std::unique_ptr<RetrydClient>> client = factory(options);
  if (!client.ok()) return UsageFailure(std::string(client.status().message()), "", io.err);
  return RunCommand(**client, invocation, io, interrupt);
}

}  // namespace retryd::retryctl
