// retryctl's help: the overview (`retryctl --help`) and one text per
// command (`retryctl COMMAND --help`), each with examples.
//
// Thread-safety: returns views of constants; safe from any thread.
#ifndef RETRYD_CLIENT_RETRYCTL_HELP_H_
#define RETRYD_CLIENT_RETRYCTL_HELP_H_

#include <string_view>

namespace retryd::retryctl {

// The help text of `topic`: "" for the overview, or a command name (status,
// threads, inorder, watch, drain, operation, dlq, ...) or a dlq subcommand
// ("dlq ls"); empty for an unknown topic.
std::string_view HelpText(std::string_view topic);

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_RETRYCTL_HELP_H_
