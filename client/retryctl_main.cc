// retryctl: the command-line client of retryd's control API. See
// `retryctl --help`; the work is done by RunRetryctl (retryctl.h).
#include <pthread.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "client/retryctl.h"

namespace {

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

size_t TerminalWidth() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace

int main(int argc, char** argv) {
  using retryd::retryctl::Interrupt;

  // SIGINT and SIGTERM go to one thread, which may call into gRPC (a signal
  // handler may not). Blocked before any other thread exists, so that all
  // inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Never destroyed: the detached signal thread may use it until the
  // process ends.
  static Interrupt& interrupt = *new Interrupt;
  std::thread([signals] {
    int signal = 0;
    while (sigwait(&signals, &signal) == 0) {
      // A watch ends cleanly (exit 0); anything else ends as the signal's
      // default action would.
      if (!interrupt.Trigger()) std::_Exit(128 + signal);
    }
  }).detach();

  retryd::retryctl::Environment env;
  env.retryd_addr = GetEnv("RETRYD_ADDR");
  env.retryd_token_file = GetEnv("RETRYD_TOKEN_FILE");

  retryd::retryctl::Io io(std::cout, std::cerr);
  io.out_is_tty = isatty(STDOUT_FILENO) == 1;
  if (io.out_is_tty) io.terminal_width = TerminalWidth;

  const std::vector<std::string> args(argv + 1, argv + argc);
  const int status = retryd::retryctl::RunRetryctl(
      args, env, io, retryd::retryctl::DefaultClientFactory(), &interrupt);
  std::cout.flush();
  return status;
}
