// The producer the workers hand their records to, and its replacement after
// a fatal error. librdkafka's idempotent producer that hit one (its sequence
// broken, its epoch fenced) accepts nothing more; the application is to make
// a new one (librdkafka's INTRODUCTION.md). Every worker shares one producer,
// so every worker must move to the new one, and none may use one that is
// closed or destroyed meanwhile.
//
// Ownership and the swap: the slot holds the current producer; each worker
// holds its own reference to the producer it hands off through, and swaps it
// only on its own thread (Replace), after it has rewound to its last commit
// (so no record handed to the broken producer is ever committed past). A
// producer is closed by whoever lets go of it last: the slot at Close(), or
// the last worker to move off a broken one (Producer's destructor: no flush,
// what is left purged and reported). Delivery reports keep nothing of the
// producer alive, only their thread's mailbox.
//
// Thread-safe.
#ifndef RETRYD_SERVER_ENGINE_HANDOFF_PRODUCER_SLOT_H_
#define RETRYD_SERVER_ENGINE_HANDOFF_PRODUCER_SLOT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/kafka/producer.h"

namespace retryd::engine {

class ProducerSlot {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<kafka::Producer>>()>;

  // More replacements than this within kReplacementWindow and the slot makes
  // no more (Replace() answers FAILED_PRECONDITION): a fatal error that comes
  // back at once is not one a new producer gets past.
  static constexpr int kMaxReplacements = 5;
  static constexpr absl::Duration kReplacementWindow = absl::Minutes(5);

  // `first` is the producer in use from the start; `make` makes each
  // replacement (not under the slot's lock: it starts librdkafka's threads).
  ProducerSlot(std::unique_ptr<kafka::Producer> first, Factory make);

  ProducerSlot(const ProducerSlot&) = delete;
  ProducerSlot& operator=(const ProducerSlot&) = delete;

  std::shared_ptr<kafka::Producer> Current() const ABSL_LOCKS_EXCLUDED(mu_);

  // A worker saw `broken` fail for good: from now until every worker has let
  // go of it, Recovering() is true. Idempotent.
  void NoteBroken(const std::shared_ptr<kafka::Producer>& broken) ABSL_LOCKS_EXCLUDED(mu_);

  // The producer that replaces `broken`: made now by the first worker to
  // ask, the same one for the others (or a later one, if that broke too).
  // The error of the factory if none could be made (the caller may ask
  // again); FAILED_PRECONDITION, saying so, once kMaxReplacements were made
  // within kReplacementWindow.
  absl::StatusOr<std::shared_ptr<kafka::Producer>> Replace(
      const std::shared_ptr<kafka::Producer>& broken) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a worker still holds a producer that failed for good (it has
  // not rewound and moved on yet).
  bool Recovering() const ABSL_LOCKS_EXCLUDED(mu_);

  // Producers made to replace a broken one.
  int64_t replacements() const { return replacements_.load(std::memory_order_relaxed); }

  // Closes the current producer (Producer::Close). The owner makes sure no
  // worker hands anything off concurrently or afterwards.
  void Close(absl::Duration flush_timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Factory make_;
  std::atomic<int64_t> replacements_{0};

  mutable absl::Mutex mu_;  // Guards the fields below.
  std::shared_ptr<kafka::Producer> current_ ABSL_GUARDED_BY(mu_);
  // Producers that failed for good, until the last worker lets go of them.
  mutable std::vector<std::weak_ptr<kafka::Producer>> broken_ ABSL_GUARDED_BY(mu_);
  // When the replacements within kReplacementWindow were made, oldest first.
  std::deque<absl::Time> made_ ABSL_GUARDED_BY(mu_);
  // Replace() is making one now (outside the lock): others wait for it.
  bool making_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HANDOFF_PRODUCER_SLOT_H_
