// The processor interface: what retryd runs every record through.
//
// Implementations must be thread-safe: every primary and retry thread calls
// Process() on the same instance concurrently. Process() may block (it is the
// record's work); it must return within a bounded time so that a graceful stop
// can finish.
#ifndef RETRYD_SERVER_ENGINE_PROCESSOR_H_
#define RETRYD_SERVER_ENGINE_PROCESSOR_H_

#include <string>
#include <utility>

#include "server/model/record.h"

namespace retryd {

struct Outcome {
  enum class Kind {
    kOk,         // Done.
    kRetriable,  // Try again later, with backoff.
    kPermanent,  // Never retried: straight to the dead-letter topic.
  };
  Kind kind = Kind::kOk;
  std::string reason;  // Why it failed; empty for kOk.

  static Outcome Ok() { return {Kind::kOk, {}}; }
  static Outcome Retriable(std::string why) { return {Kind::kRetriable, std::move(why)}; }
  static Outcome Permanent(std::string why) { return {Kind::kPermanent, std::move(why)}; }
};

class Processor {
 public:
  virtual ~Processor() = default;

  // Processes `record` for the `attempt`-th time (1 on the primary thread).
  // For a record read back from the retry topic, `record` carries the original
  // topic, partition, offset, timestamp and headers (retryd's own headers are
  // removed), exactly as the primary thread saw it.
  virtual Outcome Process(const Record& record, int attempt) = 0;
};

}  // namespace retryd

#endif  // RETRYD_SERVER_ENGINE_PROCESSOR_H_
