#include "client/retryctl.h"

#include <cstddef>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/retryctl_format.h"
#include "client/retryctl_help.h"
#include "client/watch_table.h"
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

int RpcFailure(const absl::Status& status, const GlobalFlags& flags, std::ostream& err) {
  if (flags.json) {
    // One line on stderr, as google.rpc.Status reads in JSON, with the
    // code's name beside its number.
    err << ErrorJson(status) << "\n";
    return ExitStatusFor(status.code());
  }
  err << "retryctl: " << absl::StatusCodeToString(status.code()) << ": "
      << SanitizeForTerminal(std::string_view(status.message().data(), status.message().size()), 0)
      << "\n";
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

// Prints `response` as JSON or as `text`.
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
      absl::StatusOr<v1::StartRetryThreadsResponse> started =
          client.StartRetryThreads(invocation.count);
      if (!started.ok()) return RpcFailure(started.status(), flags, io.err);
      return PrintResponse(*started, FormatStartRetryThreads(*started), flags, io);
    }
    case Command::kThreadsStop: {
      absl::StatusOr<v1::StopRetryThreadsResponse> stopped =
          invocation.thread_ids.empty()
              ? client.StopRetryThreads(invocation.count, invocation.graceful)
              : client.StopRetryThreadsById(invocation.thread_ids, invocation.graceful);
      if (!stopped.ok()) return RpcFailure(stopped.status(), flags, io.err);
      return PrintResponse(*stopped, FormatStopRetryThreads(*stopped), flags, io);
    }
    case Command::kInOrder: {
      absl::StatusOr<v1::SetInOrderResponse> set =
          client.SetInOrder(invocation.in_order, invocation.drain);
      if (!set.ok()) return RpcFailure(set.status(), flags, io.err);
      return PrintResponse(*set, FormatSetInOrder(*set), flags, io);
    }
    case Command::kOrdering: {
      absl::StatusOr<v1::SetOrderingModeResponse> set =
          client.SetOrderingMode(ToProto(invocation.ordering), invocation.drain);
      if (!set.ok()) return RpcFailure(set.status(), flags, io.err);
      return PrintResponse(*set, FormatSetOrderingMode(*set), flags, io);
    }
    case Command::kWatch:
      return RunWatch(client, invocation, io, interrupt);
    case Command::kInFlight: {
      absl::StatusOr<v1::ListInFlightResponse> list = client.ListInFlight(invocation.limit);
      if (!list.ok()) return RpcFailure(list.status(), flags, io.err);
      return PrintResponse(*list, FormatListInFlight(*list, absl::ToUnixMillis(absl::Now())), flags,
                           io);
    }
    case Command::kDlqRecord: {
      absl::StatusOr<v1::DeadLetterRecordResponse> moved = client.DeadLetterRecord(
          invocation.record_topic, invocation.record_partition, invocation.record_offset);
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
  const Invocation& invocation = std::get<Invocation>(parsed);
  if (invocation.command == Command::kHelp) {
    io.out << HelpText(invocation.help_topic);
    io.out.flush();
    return kExitOk;
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
