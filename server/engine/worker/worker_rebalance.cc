// Worker: the group's rebalances. An assignment (what the previous owner
// committed), a revoke (calls ended, hand-offs awaited, a last commit, every
// trace of the partitions dropped), and the checkpoint a retry thread serves
// before a rebalance the engine makes on purpose, handing its held records
// back to the retry topic.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/engine/worker/worker.h"

namespace retryd::engine {
namespace {

// How long an assignment may wait for the group's committed metadata.
constexpr absl::Duration kCommittedTimeout = absl::Seconds(10);
// A quiesced retry thread resumes on its own after this long, should the
// rebalance it was quiesced for never come.
constexpr absl::Duration kMaxQuiesce = absl::Seconds(60);
// How long a wait for hand-offs goes before it sends failed ones again.
constexpr absl::Duration kRedoDelay = absl::Seconds(1);

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

void Worker::OnAssigned(const std::vector<TopicPartition>& partitions) {
  thread_owner_.Check("a worker is assigned partitions on its own thread");
  mailbox_->counters.Add(&Counters::rebalances);
  // Its member id may be new: a rejoin after a session timeout gets one.
  mailbox_->SetGroup(group_id_, consumer_->MemberId());
  partitions_.Assign(partitions);
  if (!partitions.empty()) {
    // A record retried in place by the previous owner resumes where it was;
    // the records it completed above its commit are not processed again.
    absl::StatusOr<kafka::CommitOffsets> committed =
        consumer_->Committed(partitions, kCommittedTimeout);
    if (!committed.ok()) {
      LogWarning("thread ", id_, ": ", committed.status().message(),
                 "; records retried in place start again at attempt 1, and records complete "
                 "above the committed offsets are processed again");
    } else {
      partitions_.Restore(*committed, role_ == ThreadRole::kPrimary);
    }
  }
  if (role_ == ThreadRole::kPrimary && KeyOrder() && !partitions.empty()) {
    partitions_.SetKeysUnknown(partitions);
    LearnParkedKeys();
  }
  // Still quiesced: the engine releases the thread once every member it
  // waits for has joined, which may take more than one rebalance.
  if (quiesced_ && revoked_while_quiesced_) checkpoint_.Rebalanced();
  LogInfo("thread ", id_, ": assigned ", partitions.size(), " partitions, now ",
          partitions_.size());
  mailbox_->SetPartitions(partitions_.Assigned());
  mailbox_->rebalancing.store(false, std::memory_order_relaxed);
  mailbox_->assignment_changed_ms.store(NowMs(), std::memory_order_relaxed);
  if (!mailbox_->joined.HasBeenNotified()) {
    mailbox_->SetState(ThreadState::kRunning);
    mailbox_->joined.Notify();
  }
}

void Worker::AwaitHandOffs(const std::vector<TopicPartition>& tps, absl::Time deadline) {
  for (const TopicPartition& tp : tps) {
    const std::shared_ptr<CompletionTracker> tracker = partitions_.Tracker(tp);
    if (tracker == nullptr) continue;
    // Held records were dropped but stay pending in the tracker (they are
    // not complete); everything else pending is a hand-off awaiting its ack.
    const int64_t held = HeldInMemory(tp);
    while (!tracker->AwaitPendingAtMost(held, std::min(deadline, absl::Now() + kRedoDelay))) {
      if (absl::Now() >= deadline) {
        LogWarning("thread ", id_, ": ", tp.topic, "/", tp.partition, ": gave up waiting for ",
                   tracker->pending() - held, " hand-offs; they will be processed again");
        break;
      }
      hand_offs_.DrainRedo(/*force=*/true, InOrder());
    }
  }
}

void Worker::OnRevoked(const std::vector<TopicPartition>& partitions, bool lost) {
  thread_owner_.Check("a worker gives partitions up on its own thread");
  LogInfo("thread ", id_, ": ", lost ? "lost " : "revoked ", partitions.size(), " partitions");
  const bool graceful = graceful_.load(std::memory_order_relaxed);
  absl::Time deadline = absl::Now() + absl::Milliseconds(context_.options->shutdown_timeout_ms);
  if (stop_requested_.load(std::memory_order_acquire)) {
    const int64_t stop_ns = stop_deadline_ns_.load(std::memory_order_relaxed);
    deadline = std::min(deadline, absl::FromUnixNanos(stop_ns));
  }
  // Calls of these partitions end first: graceful, they finish (their
  // outcomes handed off) until the deadline; otherwise, or after it, they
  // are cancelled and the next owner processes their records again.
  AwaitCalls(&partitions, graceful && !lost ? deadline : absl::Now());
  if (!lost) {
    if (graceful && role_ == ThreadRole::kRetry && scheduler_.size() > 0) {
      // An unannounced rebalance (another instance came or went): hand the
      // held records back if the group still takes commits, else leave them
      // where they are, rather than leave two live copies behind.
      if (absl::Status s = CommitNow(partitions_.CommitPoints(partitions), deadline); s.ok()) {
        HandBack(partitions, deadline);
      } else {
        LogWarning("thread ", id_, ": the group refuses commits (", s.message(),
                   "); held retry records stay where they are and are read again");
      }
    } else if (graceful) {
      AwaitHandOffs(partitions, deadline);
    }
    // Bounded like the rest of a stop, yet given a moment even when the
    // hand-offs used up the deadline.
    const absl::Time commit_deadline = std::max(deadline, absl::Now() + kStopGrace / 2);
    if (absl::Status s = CommitNow(partitions_.CommitPoints(partitions), commit_deadline);
        !s.ok()) {
      LogWarning("thread ", id_, ": commit at revoke: ", s.message());
    }
  }
  if (quiesced_) revoked_while_quiesced_ = true;
  // librdkafka keeps an application's pause across unassign and assign: a
  // partition given up paused would come back paused, with nobody knowing.
  // Everything else of theirs goes too (the records waiting for them, their
  // keys' lanes): the next owner reads their records again.
  const std::vector<TopicPartition> resume = partitions_.Revoke(partitions);
  for (const TopicPartition& tp : partitions) scheduler_.DropPartition(tp);
  if (!resume.empty()) {
    if (absl::Status s = consumer_->Resume(resume); !s.ok()) {
      LogWarning("thread ", id_, ": resume at revoke: ", s.message());
    }
  }
  mailbox_->SetPartitions(partitions_.Assigned());
  // An assignment follows, in both rebalance protocols.
  mailbox_->rebalancing.store(true, std::memory_order_relaxed);
  mailbox_->assignment_changed_ms.store(NowMs(), std::memory_order_relaxed);
  UpdateGauges();
}

void Worker::HandBack(const std::vector<TopicPartition>& partitions, absl::Time deadline) {
  size_t handed_back = 0;
  for (const TopicPartition& tp : partitions) {
    if (!partitions_.Has(tp)) continue;
    for (HeldRecord& held : scheduler_.TakePartition(tp)) {
      ByteCharge sent_back;
      if (!MaySendBack(held, &sent_back)) {
        // Key order: handed back, it would land behind later records of its
        // key. It stays, and so does the commit below it: the next owner
        // reads it, and its key's records after it, again in order.
        scheduler_.Add(std::move(held));
        continue;
      }
      // Unchanged, due when it was due, to the same partition (so a key's
      // records stay in one partition), behind everything read so far.
      HandOff h = ToRetryTopic(std::move(held), HandOffKind::kHandBack);
      h.record.partition = tp.partition;
      h.sent_back = std::move(sent_back);
      Emit(std::move(h));
      ++handed_back;
    }
  }
  mailbox_->scheduled.store(static_cast<int64_t>(scheduler_.size()), std::memory_order_relaxed);
  AwaitHandOffs(partitions, deadline);
  if (handed_back > 0) {
    LogInfo("thread ", id_, ": handed ", handed_back, " held records back to the retry topic");
  }
}

void Worker::RequestCheckpoint(absl::Time deadline) { checkpoint_.Request(deadline); }

bool Worker::AwaitCheckpoint(absl::Time deadline) { return checkpoint_.AwaitServed(deadline); }

bool Worker::AwaitRebalanced(absl::Time deadline) { return checkpoint_.AwaitRebalanced(deadline); }

void Worker::ReleaseCheckpoint() { checkpoint_.Release(); }

void Worker::ServeCheckpoint() {
  thread_owner_.Check("a worker serves a checkpoint on its own thread");
  absl::Time deadline;
  const RebalanceCheckpoint::Step step = checkpoint_.Take(&deadline);
  if (step == RebalanceCheckpoint::Step::kReleased && quiesced_) {
    EndQuiesce("the group change is over");
  }
  if (quiesced_ && absl::Now() - quiesced_since_ > kMaxQuiesce) {
    EndQuiesce("nobody released it");
  }
  if (step != RebalanceCheckpoint::Step::kRequested) return;
  const std::vector<TopicPartition> all = partitions_.Assigned();
  quiesced_ = true;
  // With nothing assigned (still joining, or no partition to spare), the
  // next assignment is the end of the rebalance: no revoke comes first.
  revoked_while_quiesced_ = all.empty();
  quiesced_since_ = absl::Now();
  // Calls in flight end first, so that the commit below stays true. Those
  // still out at the deadline go on (the partitions stay assigned until the
  // rebalance, and cancelled calls would leave records that nobody
  // finishes); they complete behind the commit, at least once as ever.
  AwaitCalls(nullptr, deadline, /*cancel_rest=*/false);
  const absl::Time commit_deadline = std::max(deadline, absl::Now() + kStopGrace / 2);
  // Hand held records back only while the group takes commits: a hand-back
  // whose originals stay uncommitted would leave two live copies.
  if (absl::Status s = CommitNow(partitions_.CommitPoints(all), commit_deadline); !s.ok()) {
    LogWarning("thread ", id_, ": commit before the rebalance: ", s.message(),
               "; held records stay where they are");
  } else {
    HandBack(all, deadline);
    if (absl::Status s = CommitNow(partitions_.CommitPoints(all), commit_deadline); !s.ok()) {
      LogWarning("thread ", id_, ": commit before the rebalance: ", s.message());
    }
  }
  ReconcilePauses();
  checkpoint_.Served();
}

void Worker::EndQuiesce(const char* why) {
  quiesced_ = false;
  revoked_while_quiesced_ = false;
  LogInfo("thread ", id_, ": resumes: ", why);
}

}  // namespace retryd::engine
