// retryctl's command table: which function runs each Command, the name the
// overview (`retryctl --help`) gives it and the help topic that describes
// it. The command files each provide their part of the table
// (ControlCommands in retryctl_commands.cc, DlqCommands in retryctl_dlq.cc);
// RunRetryctl looks a command up here and calls its runner. So calls go one
// way: retryctl.cc -> retryctl_command_table.cc -> the command files ->
// retryctl_run.cc -> retryctl_io.cc.
//
// Thread-safety: the table is constant; safe from any thread.
#ifndef RETRYD_CLIENT_RETRYCTL_COMMAND_TABLE_H_
#define RETRYD_CLIENT_RETRYCTL_COMMAND_TABLE_H_

#include <string_view>

#include "absl/types/span.h"
#include "client/retryctl_args.h"
#include "client/retryctl_io.h"
#include "client/retryd_client.h"

namespace retryd::retryctl {

// Runs one parsed command through `client`; returns retryctl's exit status.
// `interrupt` may be null.
using CommandRunner = int (*)(RetrydClient& client, const Invocation& invocation, const Io& io,
                              Interrupt* interrupt);

struct CommandEntry {
  Command command;
  // As the overview's list of commands spells it: "status", "threads start",
  // "dlq ls", "operation" (get), "operation watch", ...
  std::string_view name;
  // The topic of HelpText that describes it: "threads", "dlq ls", ...
  std::string_view help_topic;
  CommandRunner run;
};

// Every command but kHelp (which RunRetryctl answers without a client), once
// each: ControlCommands, then DlqCommands.
absl::Span<const CommandEntry> CommandTable();

// The entry of `command`; null for kHelp.
const CommandEntry* FindCommand(Command command);

// The parts of the table, one per command file.
absl::Span<const CommandEntry> ControlCommands();  // retryctl_commands.cc
absl::Span<const CommandEntry> DlqCommands();      // retryctl_dlq.cc

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_RETRYCTL_COMMAND_TABLE_H_
