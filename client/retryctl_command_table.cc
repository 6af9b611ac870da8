#include "client/retryctl_command_table.h"

#include <vector>

namespace retryd::retryctl {

absl::Span<const CommandEntry> CommandTable() {
  // Built once, never destroyed (a static of a non-trivial type).
  static const std::vector<CommandEntry>* const kTable = [] {
    auto* table = new std::vector<CommandEntry>;
    for (const absl::Span<const CommandEntry> part : {ControlCommands(), DlqCommands()}) {
      table->insert(table->end(), part.begin(), part.end());
    }
    return table;
  }();
  return *kTable;
}

const CommandEntry* FindCommand(Command command) {
  for (const CommandEntry& entry : CommandTable()) {
    if (entry.command == command) return &entry;
  }
  return nullptr;
}

}  // namespace retryd::retryctl
