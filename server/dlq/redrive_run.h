// One redrive's run and counts (see dead_letter_tools.h), shared by its
// operation's thread and whoever reads its progress. Internal to
// server/dlq/.
//
// Thread-safety: Run() on one thread; Progress() from any.
#ifndef RETRYD_SERVER_DLQ_REDRIVE_RUN_H_
#define RETRYD_SERVER_DLQ_REDRIVE_RUN_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/log_throttle.h"
#include "server/dlq/redrive_pacer.h"
#include "server/dlq/tool_types.h"
#include "server/engine/api/cancellation.h"

namespace retryd::kafka {
class Producer;
class GroupConsumer;
}  // namespace retryd::kafka

namespace retryd::dlq {

// "ORIGIN" or the spec's target topic.
std::string Target(const RedriveSpec& spec);

class RedriveRun {
 public:
  // `carried`: per partition, the counts of its last commit (a resumed
  // redrive's; empty for a new one).
  RedriveRun(const ToolsOptions& options, RedriveSpecCodec codec, RedriveSpec spec,
             std::map<int32_t, int64_t> starts, std::map<int32_t, int64_t> ends,
             const std::map<int32_t, RedriveCheckpoint>& carried, bool resumed, std::string caller,
             std::shared_ptr<const std::atomic<bool>> stopping);
  ~RedriveRun();

  void Progress(RedriveOperationProgress& out) const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Run(engine::Cancellation& cancel, RedriveResult& result);

 private:
  struct Live;  // A live run's clients and position (redrive_live.cc).

  absl::Status Stopped() const;
  double RateLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t RedrivenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Sample(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void Fill(RedriveResult& result) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a matching record; returns whether the loop guard skips it.
  bool Count(const DeadLetter& dead) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RunDry(engine::Cancellation& cancel);
  // The commit metadata of `partition`: the spec, its end and its counts.
  std::string Metadata(int32_t partition) const ABSL_LOCKS_EXCLUDED(mu_);
  void CountScanned(int32_t partition) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until the pacer lets a record go and takes its token; false if
  // cancelled first.
  bool AwaitSend(engine::Cancellation& cancel) ABSL_LOCKS_EXCLUDED(pace_mu_);
  // A delivery report of a record of dead-letter partition `partition`;
  // `again`: how many copies of it the target held from before the resume.
  void Delivered(int32_t partition, int64_t again, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(pace_mu_, mu_);
  // A record of dead-letter partition `partition` redriven (in a dry run:
  // that would be), sent `again` times before a resume.
  void CountRedriven(int32_t partition, int64_t again) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether dead letter `partition`@`offset` is in this redrive's range.
  bool InRange(int32_t partition, int64_t offset) const;
  // Readies `producer` for the first record to `topic`: fetches its
  // metadata, so that the record does not wait for it in the producer; in a
  // resumed redrive, looks there for the records sent after the last commit.
  void FirstTo(const std::string& topic, kafka::Producer& producer);

  // The live run (redrive_live.cc).
  absl::Status RunLive(engine::Cancellation& cancel);
  absl::Status OpenLive(Live& live);
  absl::Status Commit(Live& live);
  void EndPartition(Live& live, int32_t p);
  // Handles the next event; a status when the run stops.
  std::optional<absl::Status> Step(engine::Cancellation& cancel, Live& live);
  // Sends `record` on if it matches; a status when the run stops.
  std::optional<absl::Status> Redrive(engine::Cancellation& cancel, Live& live,
                                      const Record& record);
  // Whether every partition the consumer holds is done (looked at when
  // one ended, and every 200 ms).
  bool AllDone(Live& live, absl::Time now);
  // Whether every partition's committed offset is at its end.
  bool AllCommitted(Live& live);
  // Closes the clients; deletes the group unless it is kept for a resume.
  void CloseLive(Live& live, const absl::Status& status, bool finished);

  const ToolsOptions options_;
  const RedriveSpecCodec codec_;
  const RedriveSpec spec_;
  const std::map<int32_t, int64_t> starts_;
  const std::map<int32_t, int64_t> ends_;
  const bool resumed_;
  const std::string caller_;
  const std::shared_ptr<const std::atomic<bool>> stopping_;
  const uint32_t rate_;
  const uint32_t max_redrives_;
  const std::string group_;
  int64_t total_ = 0;          // Set by the constructor.
  absl::Time look_back_from_;  // Set by the constructor: see FirstTo().
  absl::Time started_;
  LogThrottle skip_log_{absl::Seconds(1)};
  // Used by the run's thread alone: the records (dead-letter partition,
  // offset) a target held from before a resume and not yet sent again, with
  // how many copies it held.
  std::map<std::pair<int32_t, int64_t>, int64_t> sent_before_;
  absl::Mutex pace_mu_;  // Guards the two fields below; AwaitSend waits on it.
  RedrivePacer pacer_ ABSL_GUARDED_BY(pace_mu_);
  int64_t acknowledged_ ABSL_GUARDED_BY(pace_mu_) = 0;  // Delivery reports so far.
  mutable absl::Mutex mu_;                              // Guards the fields below.
  // Per partition, the whole redrive's counts (those before a resume
  // included): what its commits carry, and what Progress() sums.
  std::map<int32_t, RedriveCheckpoint> counts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::pair<int64_t, int64_t>> by_reason_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, int64_t>> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::dlq

#endif  // RETRYD_SERVER_DLQ_REDRIVE_RUN_H_
