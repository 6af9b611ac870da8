// The command table against the enum, the overview and the help topics: a
// command the parser can produce but the table lacks would run nothing.
#include "client/retryctl_command_table.h"

#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/retryctl_args.h"
#include "client/retryctl_help.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {
namespace {

// The commands the overview's "Commands:" section lists, as the table names
// them: its first word, or two for `threads` and `dlq` ("threads start"),
// and `operation`'s subcommands ("operation watch"); `help` (answered
// without a call) and `op` (another spelling of `operation`) left out.
std::set<std::string> OverviewCommands() {
  const std::string overview(HelpText(""));
  const size_t begin = overview.find("Commands:\n");
  const size_t end = overview.find("\n\n", begin);
  std::set<std::string> names;
  const std::vector<std::string> lines =
      absl::StrSplit(overview.substr(begin, end - begin), '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    // A command's line is indented by two; its continuation lines by more.
    if (line.size() < 3 || line.substr(0, 2) != "  " || line[2] == ' ') continue;
    const std::vector<std::string> words = absl::StrSplit(line.substr(2), ' ', absl::SkipEmpty());
    std::string name = words[0];
    if (name == "help" || name == "op") continue;
    if (name == "threads" || name == "dlq") name += " " + words[1];
    names.insert(name);
    // "operation ID | watch ID | cancel ID": each alternative but the first
    // is a subcommand.
    if (name != "operation") continue;
    for (size_t i = 1; i + 1 < words.size(); ++i) {
      if (words[i] == "|") names.insert(name + " " + words[i + 1]);
    }
  }
  return names;
}

TEST(CommandTableTest, EveryCommandButHelpHasOneEntry) {
  // kDlqPurge is the enum's last (retryctl_args.h).
  for (int i = 0; i <= static_cast<int>(Command::kDlqPurge); ++i) {
    const Command command = static_cast<Command>(i);
    int entries = 0;
    for (const CommandEntry& entry : CommandTable()) {
      if (entry.command == command) ++entries;
    }
    EXPECT_EQ(entries, command == Command::kHelp ? 0 : 1) << "Command " << i;
    const CommandEntry* found = FindCommand(command);
    if (command == Command::kHelp) {
      EXPECT_EQ(found, nullptr);
    } else {
      ASSERT_NE(found, nullptr) << "Command " << i;
      EXPECT_EQ(found->command, command);
      EXPECT_NE(found->run, nullptr) << found->name;
    }
  }
}

TEST(CommandTableTest, TheTableHasEveryCommandTheOverviewLists) {
  std::set<std::string> in_table;
  for (const CommandEntry& entry : CommandTable()) in_table.insert(std::string(entry.name));
  const std::set<std::string> listed = OverviewCommands();
  // The overview's list was found at all: a check of the test itself.
  EXPECT_TRUE(listed.count("status") == 1 && listed.count("dlq purge") == 1);
  EXPECT_EQ(in_table, listed);
}

TEST(CommandTableTest, EachEntrysHelpTopicIsTheOneItsCommandLineShows) {
  for (const CommandEntry& entry : CommandTable()) {
    EXPECT_FALSE(HelpText(entry.help_topic).empty()) << entry.name;
    std::vector<std::string> args = absl::StrSplit(std::string(entry.name), ' ');
    args.push_back("--help");
    const std::variant<Invocation, UsageError> parsed = ParseArgs(args, Environment{});
    const Invocation* invocation = std::get_if<Invocation>(&parsed);
    ASSERT_NE(invocation, nullptr) << entry.name;
    EXPECT_EQ(invocation->command, Command::kHelp);
    EXPECT_EQ(invocation->help_topic, entry.help_topic) << entry.name;
  }
}

}  // namespace
}  // namespace retryd::retryctl
