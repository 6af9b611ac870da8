// What the runners of retryctl's commands share: how a failed call and a
// response are printed, and following an operation. Internal to
// retryctl_lib: the command files (retryctl_commands.cc, retryctl_dlq.cc)
// call it; it calls none of them.
//
// Thread-safety: called on RunRetryctl's thread only.
#ifndef RETRYD_CLIENT_RETRYCTL_RUN_H_
#define RETRYD_CLIENT_RETRYCTL_RUN_H_

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/retryctl_args.h"
#include "client/retryctl_io.h"
#include "client/retryd_client.h"
#include "google/protobuf/message.h"

namespace retryd::retryctl {

// Prints `status` on io.err (a JSON line with --json) and returns the exit
// status for it (ExitStatusFor).
int RpcFailure(const absl::Status& status, const GlobalFlags& flags, std::ostream& err);

// Prints `response` as JSON (--json) or as `text`; kExitOk.
int PrintResponse(const google::protobuf::Message& response, const std::string& text,
                  const GlobalFlags& flags, const Io& io);

// A call's answer: its failure (RpcFailure), or the response printed as
// `format(response)` (PrintResponse).
template <typename Response, typename Format>
int PrintResult(const absl::StatusOr<Response>& result, const Format& format,
                const GlobalFlags& flags, const Io& io) {
  if (!result.ok()) return RpcFailure(result.status(), flags, io.err);
  return PrintResponse(*result, format(*result), flags, io);
}

// Follows operation `id` with WatchOperation until it ends: a line (--json:
// the operation as one line of JSON) whenever its state or progress line
// changes. Exits 0 if it succeeded, else as a failed call with the
// operation's error; kExitInterrupted if `interrupt` stopped it first.
int RunOperationWatch(RetrydClient& client, const std::string& id, const GlobalFlags& flags,
                      const Io& io, Interrupt* interrupt);

// An operation a command started (`started`, its error if it failed to
// start): prints "<what> started: operation ID" and how to follow it, or
// with `wait` follows it (RunOperationWatch). --json: the operation.
int ReportStarted(RetrydClient& client, const absl::StatusOr<v1::Operation>& started,
                  std::string_view what, bool wait, const GlobalFlags& flags, const Io& io,
                  Interrupt* interrupt);

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_RETRYCTL_RUN_H_
