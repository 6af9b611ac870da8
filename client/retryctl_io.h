// What every part of retryctl shares: its exit statuses, the streams it
// writes to (Io) and how Ctrl-C reaches a call in progress (Interrupt).
// The bottom of retryctl_lib: it calls nothing else of retryctl's.
#ifndef RETRYD_CLIENT_RETRYCTL_IO_H_
#define RETRYD_CLIENT_RETRYCTL_IO_H_

#include <cstddef>
#include <functional>
#include <ostream>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "client/retryd_client.h"

namespace retryd::retryctl {

inline constexpr int kExitOk = 0;
// `retryctl health`: the call succeeded, and the service is not SERVING.
inline constexpr int kExitNotServing = 1;
inline constexpr int kExitUsage = 2;
// Ctrl-C while following an operation: it goes on without us (128 + SIGINT,
// as a shell reports it).
inline constexpr int kExitInterrupted = 130;
// A failed call exits with kExitRpcFailedBase + its gRPC status code
// (FAILED_PRECONDITION: 73, UNAVAILABLE: 78), so scripts can tell the
// reasons apart without reading stderr.
inline constexpr int kExitRpcFailedBase = 64;
int ExitStatusFor(absl::StatusCode code);

struct Io {
  Io(std::ostream& out, std::ostream& err) : out(out), err(err) {}

  std::ostream& out;
  std::ostream& err;
  // When true, watch redraws its table in place (ANSI clear screen).
  bool out_is_tty = false;
  // The terminal's columns now (0: unknown); may be empty.
  std::function<size_t()> terminal_width;
};

// Ctrl-C for `watch`, `drain --wait`, `dlq redrive --wait` and `operation
// watch`: another thread (main's signal thread, or a test) calls Trigger(),
// which cancels the stream in progress: `watch` exits 0 after the last table it drew, the
// others kExitInterrupted, the operation going on.
//
// Thread-safety: thread-safe.
class Interrupt {
 public:
  // True if a watch was in progress and has been told to stop; false if
  // there was none (then the caller decides, e.g. exits the process).
  bool Trigger();
  bool triggered() const;

  // The commands that follow a stream bracket it with these; `client`
  // outlives the bracket.
  void Attach(RetrydClient& client);
  void Detach();

 private:
  mutable absl::Mutex mu_;
  RetrydClient* client_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool triggered_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace retryd::retryctl

#endif  // RETRYD_CLIENT_RETRYCTL_IO_H_
