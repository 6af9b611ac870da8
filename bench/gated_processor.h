// A processor that holds the first call until the bench lets go: the engine
// has joined its groups and fetched records, and none is processed before
// the clock starts. Given a key prefix, it holds only the records whose key
// starts with it: the others (records of the retry topic, say) go on.
//
// Thread-safety: Process() may be called from any engine thread; Open() and
// reached() from any thread.
#ifndef RETRYD_BENCH_GATED_PROCESSOR_H_
#define RETRYD_BENCH_GATED_PROCESSOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/engine/api/processor.h"

namespace retryd::bench {

class GatedProcessor : public engine::Processor {
 public:
  // Holds records whose key starts with `key_prefix` (empty: every record).
  explicit GatedProcessor(std::unique_ptr<engine::Processor> inner, std::string key_prefix = "")
      : inner_(std::move(inner)), key_prefix_(std::move(key_prefix)) {}

  // Until Open(), waits for it (at most two minutes) if the record is one it
  // holds, then asks `inner`.
  engine::Outcome Process(const Record& record, int attempt) override {
    if (!open_.HasBeenNotified() && Holds(record)) {
      reached_.store(true);
      open_.WaitForNotificationWithTimeout(absl::Seconds(120));
    }
    return inner_->Process(record, attempt);
  }
  // True once a call waits for Open().
  bool reached() const { return reached_.load(); }
  // Lets every call through; call it once.
  void Open() { open_.Notify(); }

 private:
  bool Holds(const Record& record) const {
    return key_prefix_.empty() || absl::StartsWith(record.key.value_or(""), key_prefix_);
  }

  const std::unique_ptr<engine::Processor> inner_;
  const std::string key_prefix_;
  std::atomic<bool> reached_{false};
  absl::Notification open_;
};

}  // namespace retryd::bench

#endif  // RETRYD_BENCH_GATED_PROCESSOR_H_
