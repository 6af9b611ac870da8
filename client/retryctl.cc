// RunRetryctl: parses the command line, answers help, builds the client and
// hands the command to its runner in the command table
// (retryctl_command_table.h). It calls into the table; nothing calls back.
#include "client/retryctl.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/request_id.h"
#include "client/retryctl_command_table.h"
#include "client/retryctl_help.h"
#include "server/common/read_file.h"

namespace retryd::retryctl {
namespace {

void PrintHint(std::string_view topic, std::ostream& err) {
  err << "Run 'retryctl " << topic << (topic.empty() ? "" : " ") << "--help' for usage.\n";
}

int UsageFailure(std::string_view message, std::string_view topic, std::ostream& err) {
  err << "retryctl: " << message << "\n";
  PrintHint(topic, err);
  return kExitUsage;
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

ClientFactory DefaultClientFactory() {
  return [](const ClientOptions& options) { return RetrydClient::Create(options); };
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
  const CommandEntry* entry = FindCommand(invocation.command);
  // Every command but kHelp, answered above, has one (CommandTableTest).
  if (entry == nullptr) return kExitOk;
  return entry->run(**client, invocation, io, interrupt);
}

}  // namespace retryd::retryctl
