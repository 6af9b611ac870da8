// A processor that holds the first call until the bench lets go: the engine
// has joined its groups and fetched records, and none is processed before
// the clock starts.
//
// Thread-safety: Process() may be called from any engine thread; Open() and
// reached() from any thread.
#ifndef RETRYD_BENCH_GATED_PROCESSOR_H_
#define RETRYD_BENCH_GATED_PROCESSOR_H_

#include <atomic>
#include <memory>
#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/engine/api/processor.h"

namespace retryd::bench {

class GatedProcessor : public engine::Processor {
 public:
  explicit GatedProcessor(std::unique_ptr<engine::Processor> inner) : inner_(std::move(inner)) {}

  // Until Open(), waits for it (at most two minutes), then asks `inner`.
  engine::Outcome Process(const Record& record, int attempt) override {
    if (!open_.HasBeenNotified()) {
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
  const std::unique_ptr<engine::Processor> inner_;
  std::atomic<bool> reached_{false};
  absl::Notification open_;
};

}  // namespace retryd::bench

#endif  // RETRYD_BENCH_GATED_PROCESSOR_H_
