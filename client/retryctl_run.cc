#include "client/retryctl_run.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/command_args.h"
#include "client/retryctl_format.h"
#include "server/common/error_reason.h"

namespace retryd::retryctl {
namespace {

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

}  // namespace retryd::retryctl
