// Worker: recovering from a fatal producer error. The producer every thread
// shares is finished (librdkafka: an idempotent producer whose sequence broke
// accepts nothing more); what was handed to it and not acknowledged may or
// may not be in Kafka. Each thread rewinds to its commit point, below every
// such record, reads its partitions again from there, and hands off through
// a new producer: at least once, as after a restart, without one.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/worker/worker.h"

namespace retryd::engine {
namespace {

// How often, a second apart, a thread asks for a new producer before it
// fails (the slot answers at once once one is made).
constexpr int kReplaceAttempts = 5;
constexpr absl::Duration kReplaceRetry = absl::Seconds(1);
// How long librdkafka may take to move the partitions back.
constexpr absl::Duration kSeekTimeout = absl::Seconds(5);

}  // namespace

void Worker::RecoverProducer() {
  thread_owner_.Check("a worker recovers from a fatal producer error on its own thread");
  const std::shared_ptr<kafka::Producer> broken = hand_offs_.producer();
  const absl::Status fatal = broken->FatalError();
  context_.producers->NoteBroken(broken);
  LogError("thread ", id_, ": ", fatal.message(),
           "; rewinding to the last commit and moving to a new producer");
  mailbox_->SetLastError(std::string(fatal.message()));
  absl::StatusOr<size_t> rewound = RewindToCommit();
  if (!rewound.ok()) {
    const std::string reason = absl::StrCat(
        "recovery from a fatal producer error failed: rewinding: ", rewound.status().message());
    LogError("thread ", id_, ": ", reason, "; the thread fails");
    mailbox_->Fail(reason);
    return;
  }
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<std::shared_ptr<kafka::Producer>> next = context_.producers->Replace(broken);
    if (next.ok()) {
      // The last thread to let go of the broken producer closes it: what it
      // still holds is purged and reported, each report dropped.
      hand_offs_.UseProducer(*std::move(next));
      mailbox_->counters.Add(&Counters::producer_rewinds);
      LogInfo("thread ", id_, ": rewound ", *rewound,
              " partitions to their last commit; handing off through a new producer");
      return;
    }
    if (absl::IsFailedPrecondition(next.status()) || attempt >= kReplaceAttempts) {
      const std::string reason =
          absl::StrCat("recovery from a fatal producer error failed (", attempt,
                       attempt == 1 ? " try): " : " tries): ", next.status().message());
      LogError("thread ", id_, ": ", reason, "; the thread fails");
      mailbox_->Fail(reason);
      return;
    }
    LogWarning("thread ", id_, ": ", next.status().message(), "; trying again in ",
               absl::FormatDuration(kReplaceRetry));
    // A stop ends the wait (RequestStop takes flight_mu after setting it).
    absl::MutexLock lock(&mailbox_->flight_mu);
    if (mailbox_->flight_mu.AwaitWithTimeout(
            absl::Condition(
                +[](std::atomic<bool>* stop) { return stop->load(std::memory_order_acquire); },
                &stop_requested_),
            kReplaceRetry)) {
      return;
    }
  }
}

absl::StatusOr<size_t> Worker::RewindToCommit() {
  const std::vector<TopicPartition> all = partitions_.Assigned();
  // Their outcomes would go to the broken producer: cancelled now, and
  // dropped when they end through their abandoned trackers.
  AwaitCalls(nullptr, absl::Now());
  const kafka::CommitOffsets points = partitions_.CommitPoints(all);
  if (absl::Status s = CommitNow(points, absl::Now() + kStopGrace / 2); !s.ok()) {
    // Still true for this thread: it reads again from there all the same,
    // and commits it with the next commit.
    LogWarning("thread ", id_, ": commit before the rewind: ", s.message());
  }
  // As a revoke and an assignment of the same partitions would, without
  // the group: every trace dropped (hand-offs still with the broken
  // producer, re-sends waiting, held records), new trackers, and the
  // committed metadata taken up again (a record retried in place resumes
  // its attempts; records complete above the commit are not repeated).
  const std::vector<TopicPartition> resume = partitions_.Revoke(all);
  for (const TopicPartition& tp : all) scheduler_.DropPartition(tp);
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
  partitions_.Assign(all);
  partitions_.Restore(points, role_ == ThreadRole::kPrimary);
  // Resumed before the seek: both are queued to the partition in order, and
  // the seek decides where reading goes on. ReconcilePauses pauses again
  // what must be.
  if (!resume.empty()) {
    if (absl::Status s = consumer_->Resume(resume); !s.ok()) return s;
  }
  // A partition with no point read nothing since it was assigned: nothing
  // to read again.
  if (absl::Status s = consumer_->Seek(points, kSeekTimeout); !s.ok()) return s;
  if (role_ == ThreadRole::kPrimary && KeyOrder() && !all.empty()) {
    partitions_.SetKeysUnknown(all);
    LearnParkedKeys();
  }
  UpdateGauges();
  return all.size();
}

}  // namespace retryd::engine
