// retryctl, the command-line tool, as a function: arguments, environment and
// output streams in, exit status out. retryctl_main.cc wires it to the
// process; tests call it directly.
//
// Exit status: kExitOk; kExitNotServing for `health` of a service that is
// not SERVING; for a failed call 64 + its gRPC code
// (ExitStatusFor, as grpcurl does: "retryctl: CODE (REASON): message" on
// err, or a JSON object with --json); the same for an operation followed
// with `drain --wait` or `operation watch` that ended without success;
// kExitUsage (what is wrong and a pointer to --help on err);
// kExitInterrupted when Ctrl-C stops following an operation that goes on
// (the constants, Io and Interrupt: retryctl_io.h).
#ifndef RETRYD_CLIENT_RETRYCTL_H_
#define RETRYD_CLIENT_RETRYCTL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/retryctl_args.h"
#include "client/retryctl_io.h"
#include "client/retryd_client.h"

namespace retryd::retryctl {

// Builds the client a command talks through; tests substitute their own.
using ClientFactory =
    std::function<absl::StatusOr<std::unique_ptr<RetrydClient>>(const ClientOptions&)>;

// RetrydClient::Create.
ClientFactory DefaultClientFactory();

// Runs retryctl with `args` (argv without argv[0]). `interrupt` may be null
// (then only --count ends a watch, or the server).
int RunRetryctl(const std::vector<std::string>& args, const Environment& env, const Io& io,
                const ClientFactory& factory, Interrupt* interrupt);

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_RETRYCTL_H_
