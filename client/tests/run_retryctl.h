// Runs retryctl in-process against a FakeRetryd, and parses its command
// lines, for the client tests.
#ifndef RETRYD_CLIENT_TESTS_RUN_RETRYCTL_H_
#define RETRYD_CLIENT_TESTS_RUN_RETRYCTL_H_

#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "client/retryctl.h"
#include "client/retryctl_args.h"
#include "client/tests/fake_retryd.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {

struct RunResult {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs retryctl against `fake` (its address comes from RETRYD_ADDR, as a
// user's would).
inline RunResult RunAgainst(const testing::FakeRetryd& fake, const std::vector<std::string>& args,
                            Environment env = {}, bool tty = false,
                            Interrupt* interrupt = nullptr) {
  if (env.retryd_addr.empty()) env.retryd_addr = fake.address();
  std::ostringstream out;
  std::ostringstream err;
  Io io(out, err);
  io.out_is_tty = tty;
  const int code = RunRetryctl(args, env, io, DefaultClientFactory(), interrupt);
  return RunResult{code, out.str(), err.str()};
}

// `args` parsed with an empty environment.
inline std::variant<Invocation, UsageError> ParseLine(const std::vector<std::string>& args) {
  return ParseArgs(args, Environment());
}

// The usage error `args` give; fails the test if they parse.
inline std::string ErrorOf(const std::vector<std::string>& args) {
  std::variant<Invocation, UsageError> result = ParseLine(args);
  if (!std::holds_alternative<UsageError>(result)) {
    ADD_FAILURE() << "expected a usage error";
    return "";
  }
  return std::get<UsageError>(result).message;
}

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_TESTS_RUN_RETRYCTL_H_
