// The hand-off: a source record's outcome given to Kafka as one record (to
// the output, retry or dead-letter topic), and everything until Kafka
// acknowledges it or it is given up: the delivery report, the re-send of a
// failed one, the dead-letter record cut to fit that replaces a record Kafka
// refuses, and the thread failing when nothing can get through.
//
// A worker owns one HandOffs and calls it on its own thread. Delivery reports
// come on the producer's thread: they touch only the HandOffMailbox, which
// they share (and keep alive) with the worker, each field under the lock
// that says so.
//
// A fatal producer error does not fail the thread: the hand-offs given to
// that producer are dropped as their reports come (their records are not
// complete, so nothing is committed past them), and the worker rewinds to
// its last commit and moves to a new producer (ProducerSlot).
#ifndef RETRYD_SERVER_ENGINE_HANDOFF_HAND_OFFS_H_
#define RETRYD_SERVER_ENGINE_HANDOFF_HAND_OFFS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/log_throttle.h"
#include "server/engine/api/options.h"
#include "server/engine/api/processor.h"
#include "server/engine/handoff/completion_tracker.h"
#include "server/engine/handoff/dlq_dialects.h"
#include "server/engine/handoff/record_buffers.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/engine/held/byte_charge.h"
#include "server/engine/held/held_record.h"
#include "server/engine/held/in_flight.h"
#include "server/engine/ordering/key_parking.h"
#include "server/engine/stats/thread_stats.h"
#include "server/kafka/producer.h"
#include "server/model/record.h"

namespace retryd::engine {

// What a hand-off gives Kafka. kHandBack: a held retry record returned
// unchanged to the retry topic. kFollow: a record sent unprocessed behind its
// parked key (key order).
enum class HandOffKind { kOutput, kRetry, kDeadLetter, kHandBack, kFollow };
const char* HandOffKindName(HandOffKind kind);

// One record handed to Kafka for a source record's outcome.
struct HandOff {
  OutgoingRecord record;
  HandOffKind kind = HandOffKind::kOutput;
  std::shared_ptr<CompletionTracker> tracker;
  int64_t offset = 0;  // The source record's.
  // The source record's coordinates, attempts and last error, for the
  // dead-letter record that replaces a hand-off Kafka refuses for good.
  RetryMetadata origin;
  // 0: as made; 1: a dead-letter record fitted under message.max.bytes;
  // 2: the smallest form (FitDeadLetter to kMinimalDeadLetterBytes).
  int fit = 0;
  // The first form of the record when it was replaced by a fitted one, so
  // each fitting starts from the original sizes.
  std::shared_ptr<const OutgoingRecord> unfitted;
  // Failed once (or replayed): counted in its partition's failed hand-offs
  // until it is acknowledged or dropped.
  bool failed_before = false;
  // Emitted in in-order mode: an acknowledgement that overtook the re-send of
  // an earlier record of its partition is replayed after it.
  bool in_order = false;
  // Key order: the parked record whose outcome this is; its key is released
  // from it once Kafka acknowledges the outcome.
  std::optional<ParkedRecord> release;
  // Key order: the parked record this hand-off puts in the retry topic; its
  // place there is noted once Kafka acknowledges it.
  std::optional<ParkedRecord> parks;
  // Set for an operator's DeadLetterRecord: answered when the hand-off is
  // acknowledged or given up.
  std::shared_ptr<WorkerRequest> requested_by;
  // The record's bytes, charged to the thread until it is acknowledged or
  // given up (set by HandOffs::Emit()).
  ByteCharge charge;
  // A retry thread's keyed record sent back to the retry topic: counts one
  // in keyed_sends_back until acknowledged or given up.
  ByteCharge sent_back;
};

// The retryd-* headers an output hand-off carries (original topic,
// partition, offset, attempt), made from its origin when it is produced:
// built on the stack for the producer to copy, not kept as strings in the
// hand-off. Empty for any other kind, whose headers are in its record.
class OutputHeaders {
 public:
  explicit OutputHeaders(const HandOff& hand_off);
  std::span<const kafka::HeaderRef> refs() const { return {refs_.data(), count_}; }
  int64_t bytes() const;  // Keys and values, as RecordBytes counts them.

 private:
  char partition_[20];
  char offset_[20];
  char attempt_[20];
  std::array<kafka::HeaderRef, 4> refs_;
  size_t count_ = 0;
};

// A hand-off whose produce failed, to be sent again by the worker.
struct Redo {
  HandOff hand_off;
  absl::Time not_before;
  // Set when Kafka refused the record itself: it is replaced by a fitted
  // dead-letter record saying why, rather than sent again as it was.
  std::string refused;
};

struct EmittedHandOff;

// A thread's stats plus what delivery reports hand back to its worker.
// Shared with in-flight delivery callbacks, which may outlive the worker.
struct HandOffMailbox : ThreadStats {
  HandOffMailbox(int id, ThreadRole role, int64_t resume_below, KeyParking* parking)
      : ThreadStats(id, role), resume_below(resume_below), parking(parking) {}

  // One hand-off acknowledged or given up. The decrement that brings
  // in_flight below `resume_below` also passes through flight_mu, so a worker
  // waiting on it (in WaitForAcks) re-checks at once.
  void HandOffDone() {
    if (in_flight.fetch_sub(1, std::memory_order_relaxed) == resume_below) {
      absl::MutexLock lock(&flight_mu);
    }
  }

  // Failed hand-offs of the partition `tracker` belongs to that are not yet
  // acknowledged nor dropped.
  int FailedHandOffs(const std::shared_ptr<CompletionTracker>& tracker) const
      ABSL_LOCKS_EXCLUDED(redo_mu);
  void ForgetFailedHandOff(const HandOff& hand_off) ABSL_EXCLUSIVE_LOCKS_REQUIRED(redo_mu);

  // Marks the thread as failed for good, the reason as its last error (the
  // first reason wins); the worker's loop sees it and stops.
  void Fail(std::string reason) ABSL_LOCKS_EXCLUDED(redo_mu);
  bool has_failed() const ABSL_LOCKS_EXCLUDED(redo_mu);

  // A hand-off done with, for the worker to free (HandOffs::FreeDone): freed
  // on the producer's delivery thread, its memory would go back to the
  // worker's malloc arena from another thread, contending for its lock with
  // every allocation the worker makes.
  void Done(std::unique_ptr<EmittedHandOff> emitted) ABSL_LOCKS_EXCLUDED(done_mu);

  const int64_t resume_below;   // Back-pressure ends below this many in flight.
  KeyParking* const parking;    // The engine's; outlives every delivery report.
  absl::Mutex flight_mu;        // Guards nothing; wakes a worker in WaitForAcks.
  mutable absl::Mutex redo_mu;  // Guards the fields below.
  std::deque<Redo> redo ABSL_GUARDED_BY(redo_mu);
  // Per partition (its tracker), the source offsets of hand-offs that failed
  // and are not yet acknowledged nor dropped.
  std::map<std::shared_ptr<CompletionTracker>, std::multiset<int64_t>> failed_hand_offs
      ABSL_GUARDED_BY(redo_mu);
  bool failed ABSL_GUARDED_BY(redo_mu) = false;
  // An outage fails every record in flight at once: one line a second.
  LogThrottle redo_log{absl::Seconds(1)};

  absl::Mutex done_mu;  // Guards the field below.
  std::vector<std::unique_ptr<EmittedHandOff>> done ABSL_GUARDED_BY(done_mu);
  // Whether `done` may hold any: written under done_mu, read without it so
  // that a worker looking for hand-offs to free takes no lock when none is.
  std::atomic<bool> any_done{false};
};

// A hand-off given to Kafka: owned by the producer until its delivery
// report, which settles it (HandOffs::OnDelivered or OnFailed) and passes it
// to the mailbox to be freed by the worker.
struct EmittedHandOff final : kafka::Delivery {
  EmittedHandOff(std::shared_ptr<HandOffMailbox> mailbox, HandOff&& hand_off)
      : mailbox(std::move(mailbox)), hand_off(std::move(hand_off)) {}
  void Delivered(std::unique_ptr<kafka::Delivery> self, absl::Status status, int32_t partition,
                 int64_t offset) override;

  std::shared_ptr<HandOffMailbox> mailbox;  // Let go of when delivered.
  HandOff hand_off;
};

// The hand-off a record's outcome makes, as the worker builds them. None of
// them sends anything.

// `held`'s coordinates, attempts and last error.
RetryMetadata OriginOf(const HeldRecord& held);
// Key order: the parked record a retry thread's `held` is (any keyed record
// read from the retry topic may be one), to release once its outcome is
// acknowledged.
std::optional<ParkedRecord> ParkedRecordOf(ThreadRole role, const HeldRecord& held);
// `held` processed: to `output_topic` with what the processor made of it, its
// fields moved out of `held` and `outcome`.
HandOff OutputHandOff(ThreadRole role, HeldRecord& held, Outcome& outcome,
                      const std::string& output_topic);
// `held` as a hand-off of `kind` to `retry_topic`, with its retryd-* headers.
HandOff RetryHandOff(HeldRecord held, HandOffKind kind, const std::string& retry_topic);
// `held` to `dead_letter_topic` because of `reason`, dead-lettered as
// `stamp` says. Its last failure's reason is held.last_error_reason; a
// record that never failed before has `reason` for its first error too.
HandOff DeadLetterHandOff(ThreadRole role, const HeldRecord& held, std::string reason,
                          const std::string& dead_letter_topic, const DeadLetterStamp& stamp);
// A retry record whose retryd-* headers do not parse, to `dead_letter_topic`
// as it was found, `error` (with no error reason) and `stamp` added,
// described by where it was read.
HandOff MalformedDeadLetterHandOff(const Record& record, const std::string& error,
                                   const std::string& dead_letter_topic,
                                   const DeadLetterStamp& stamp);
// The dead-letter record that replaces `hand_off`, refused by Kafka because
// of `why`, in the next smaller form: under `max_message_bytes`, and then
// the smallest form. `stamp` is used when it is first fitted, and so are
// `dialects`: their headers (for consumer group `group`) describe it, and
// are kept as its retryd headers are. Every form is stamped by the
// producer: a record refused with a timestamp of its own (the Streams
// dialect's) may have been refused for it, and is first sent again in the
// larger form, whatever its size.
HandOff FittedDeadLetter(HandOff hand_off, const std::string& why,
                         const std::string& dead_letter_topic, size_t max_message_bytes,
                         const DeadLetterStamp& stamp,
                         std::span<const DeadLetterDialect> dialects = {},
                         std::string_view group = {});
// Adds to a dead-letter hand-off's record the headers of `dialects`
// describing its origin, for consumer group `group` (WithDialectHeaders),
// and gives it the timestamp they call for (DeadLetterTimestampMs): done
// for each dead-letter record as it is emitted, but for a fitted one, which
// has them already.
void AddDialectHeaders(HandOff& hand_off, std::span<const DeadLetterDialect> dialects,
                       std::string_view group);

class HandOffs {
 public:
  // `mailbox` is shared with the delivery reports; `producer` is the one
  // every hand-off goes to until UseProducer() names another.
  HandOffs(const EngineOptions& options, std::shared_ptr<kafka::Producer> producer,
           std::shared_ptr<HandOffMailbox> mailbox);

  HandOffs(const HandOffs&) = delete;
  HandOffs& operator=(const HandOffs&) = delete;

  // Gives `hand_off` to Kafka; `in_order`: emitted in in-order mode.
  void Emit(HandOff&& hand_off, bool in_order);
  // Sends again the failed hand-offs whose time has come (all, if `force`):
  // a refused record as a fitted dead-letter record, one of a partition given
  // up not at all. `in_order`: the thread is in in-order mode now.
  void DrainRedo(bool force, bool in_order);
  // Frees the hand-offs delivery reports are done with (HandOffMailbox::Done):
  // their records' buffers go to `buffers`, and up to kMaxSpare of them are
  // kept for Emit() to use again rather than allocate.
  void FreeDone(RecordBuffers& buffers);
  // Hand-offs kept for Emit() to use again.
  size_t spare() const { return spare_.size(); }
  // True once a hand-off failed beyond recovery: the thread then stops
  // without waiting for its hand-offs, and commits nothing past the record
  // whose outcome was lost.
  bool Broken() const { return mailbox_->has_failed(); }
  // Whether the producer hit a fatal error: nothing handed to it can get
  // through any more (the worker rewinds and moves to a new one).
  bool ProducerFailed() const { return !producer_->FatalError().ok(); }
  const std::shared_ptr<kafka::Producer>& producer() const { return producer_; }
  // Hand-offs go to `producer` from now on. The hand-offs given to the old
  // one are settled by its reports (a failure of a broken producer drops
  // them); the caller lets go of the old one only once it has rewound past
  // all of them.
  void UseProducer(std::shared_ptr<kafka::Producer> producer) { producer_ = std::move(producer); }
  // Charges `bytes` to the thread's held_bytes until the charge is gone.
  ByteCharge Charge(int64_t bytes) const;

  // Called by a delivery report or a refused Produce(): decides between
  // dropping, sending again, dead-lettering in a fitting form and failing.
  static void OnFailed(const std::shared_ptr<HandOffMailbox>& mailbox, HandOff hand_off,
                       const absl::Status& status);
  static void OnDelivered(const std::shared_ptr<HandOffMailbox>& mailbox, HandOff& hand_off);

 private:
  const EngineOptions& options_;
  std::shared_ptr<kafka::Producer> producer_;  // Never null.
  const std::shared_ptr<HandOffMailbox> mailbox_;
  // Swapped with HandOffMailbox::done, emptied, and swapped back next time:
  // the two vectors keep their capacity, so a delivery report never grows
  // one.
  std::vector<std::unique_ptr<EmittedHandOff>> freeing_;
  // Emitted hand-offs done with, emptied, for Emit() to fill again: one
  // allocation and one free fewer per record. Up to 1,024 (about 700 KiB):
  // what comes back from Kafka between two turns of a busy worker's loop.
  static constexpr size_t kMaxSpare = 1024;
  std::vector<std::unique_ptr<EmittedHandOff>> spare_;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HANDOFF_HAND_OFFS_H_
