// retryctl's command line: parses argv (and the environment's defaults) into
// an Invocation, or a UsageError saying what is wrong. No I/O, no RPC.
//
// Thread-safety: stateless functions; safe from any thread.
#ifndef RETRYD_CLIENT_RETRYCTL_ARGS_H_
#define RETRYD_CLIENT_RETRYCTL_ARGS_H_

#include <string>
#include <variant>
#include <vector>

#include "client/invocation.h"

namespace retryd::retryctl {

// Whether `command` changes retryd (and so takes --request-id).
bool IsMutating(Command command);

// `args` excludes argv[0].
std::variant<Invocation, UsageError> ParseArgs(const std::vector<std::string>& args,
                                               const Environment& env);

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_RETRYCTL_ARGS_H_
