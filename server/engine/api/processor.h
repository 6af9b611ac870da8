// The processor interface: what retryd runs every record through.
//
// Two ways to implement it:
//  * synchronous: Process() does the record's work on the calling thread
//    (the `simulate` processor, or C++ embedded as a library);
//  * asynchronous: asynchronous() returns true and Start() begins a call
//    that ends later, on any thread (the `grpc` processor). Each retryd
//    thread then keeps up to max_concurrent_calls() calls in flight.
//
// Implementations must be thread-safe: every primary and retry thread uses
// the same instance concurrently. A call must end within a bounded time
// (a deadline) so that a graceful stop can finish.
#ifndef RETRYD_SERVER_ENGINE_API_PROCESSOR_H_
#define RETRYD_SERVER_ENGINE_API_PROCESSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "server/engine/api/cancellation.h"
#include "server/model/record.h"

namespace retryd::engine {

struct Outcome {
  enum class Kind {
    kOk,         // Done.
    kRetriable,  // Try again later, with backoff.
    kPermanent,  // Never retried: straight to the dead-letter topic.
    // A refusal: the work could not be done for a reason that may not be
    // the record's (the downstream is unreachable, or refuses calls in a way
    // that points at its configuration). The first refusal of a record uses
    // up no attempt: it waits, and counts toward taking its role's
    // downstream for down (see DownstreamGate). Once nothing shows the
    // downstream down (its channel is ready, its health is not NOT_SERVING,
    // and its role is up or this call was the role's probe), a refusal of a
    // record refused before is the record's own, judged by `fallback`.
    kUnavailable,
  };
  Kind kind = Kind::kOk;
  std::string reason;  // Why it failed; empty for kOk.
  // A failure's machine-readable cause, when the processor knows one: a
  // short stable identifier, not a message (the grpc processor gives
  // "<domain>/<reason>" of a google.rpc.ErrorInfo). Kept with the record's
  // last failure and written on its dead-letter record as
  // retryd-error-reason; empty for none.
  std::string error_reason;
  // kUnavailable only: the outcome once the downstream is known to be up.
  Kind fallback = Kind::kRetriable;
  // kOk only: what the output record carries instead of the input's value
  // (an inner nullopt is a null value) and headers. Unset: forwarded as is.
  std::optional<std::optional<std::string>> value;
  std::optional<Headers> headers;

  static Outcome Ok() { return Make(Kind::kOk, {}); }
  static Outcome Retriable(std::string why) { return Make(Kind::kRetriable, std::move(why)); }
  static Outcome Permanent(std::string why) { return Make(Kind::kPermanent, std::move(why)); }
  static Outcome Unavailable(std::string why, Kind fallback) {
    Outcome o = Make(Kind::kUnavailable, std::move(why));
    o.fallback = fallback;
    return o;
  }

 private:
  static Outcome Make(Kind kind, std::string reason) {
    Outcome o;
    o.kind = kind;
    o.reason = std::move(reason);
    return o;
  }
};

// What a call knows of the record's history.
struct AttemptInfo {
  int attempt = 1;               // 1 on the record's first attempt.
  int64_t first_failure_ms = 0;  // Unix ms of its first failed attempt; 0 before.
};

// What a processor knows of its downstream beyond the answers to its calls:
// evidence that the downstream is down which no record is to blame for (see
// DownstreamGate). A processor with no downstream of its own (simulate, a
// library's) knows nothing: every field stays unknown.
struct DownstreamHealth {
  enum class Channel {
    kUnknown,   // No notion of a channel.
    kReady,     // Connected.
    kNotReady,  // Connecting, or the connection failed (refused, reset).
  };
  enum class Serving {
    kUnknown,     // No health service, or no answer from it yet.
    kServing,     // Its health service answered SERVING.
    kNotServing,  // Its health service answered NOT_SERVING.
  };
  Channel channel = Channel::kUnknown;
  Serving serving = Serving::kUnknown;
  // Health checks answered so far (any status): a new answer moves it, so a
  // reader tells a fresh SERVING or NOT_SERVING from one it saw already.
  int64_t checks = 0;
};

// Receives a call's outcome, exactly once, on any thread.
using ProcessDone = absl::AnyInvocable<void(Outcome) &&>;

class Processor {
 public:
  virtual ~Processor() = default;

  // Processes `record` for the `attempt`-th time (1 on the primary thread).
  // For a record read back from the retry topic, `record` carries the original
  // topic, partition, offset, timestamp and headers (retryd's own headers are
  // removed), exactly as the primary thread saw it.
  virtual Outcome Process(const Record& record, int attempt) = 0;

  // True if the engine should use Start() rather than Process().
  virtual bool asynchronous() const { return false; }
  // Calls one retryd thread may have in flight at once (asynchronous only).
  virtual int max_concurrent_calls() const { return 1; }

  // What the processor knows of its downstream right now. Called by any
  // retryd thread, often (on every refused call, and while the downstream is
  // taken for down on every loop of every thread): it must be cheap and must
  // not block. The default knows nothing.
  virtual DownstreamHealth health() const { return {}; }

  // Begins processing `record`; `done` gets the outcome, possibly before
  // Start returns. `record` need not outlive the call to Start. Once
  // `cancel` is cancelled the engine ignores the outcome, so the call may
  // end at once (with any outcome). The default runs Process() inline.
  virtual void Start(const Record& record, const AttemptInfo& info,
                     std::shared_ptr<Cancellation> cancel, ProcessDone done) {
    std::move(done)(Process(record, info.attempt));
  }
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_PROCESSOR_H_
