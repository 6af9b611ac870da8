// The dead-letter tools behind ListDeadLetters, StartRedrive and
// PurgeDeadLetters, on plain values (tool_types.h): inspect the dead-letter
// topic, produce its records again at a set rate (a redrive, run as an
// operation of control/'s, through RedriveOperations), and hide a prefix of
// each partition. control/ translates its RPC messages to and from these.
//
// Every Kafka client here is the tools' own; none joins the engine's groups:
//  - a listing reads with an assigned consumer (kafka::PartitionReader);
//  - the purge marks are the committed offsets of consumer group
//    "<group_id>.dlq-tools", committed without joining it;
//  - a redrive joins consumer group "<group_id>.ops.<operation id>", whose
//    committed offsets are its position and whose commit metadata holds its
//    spec (RedriveSpec, in the form RedriveSpecCodec gives it) and, per
//    partition, its counts up to the committed offset, which a resumed
//    redrive carries on from. The group exists while the redrive is
//    unfinished: it is deleted when the redrive ends (succeeded, failed or
//    cancelled), and kept when retryd stops or dies, so that the next start
//    (ResumeUnfinished) carries on where it was, counts and all. While it
//    exists, another redrive of the same dead-letter topic is refused
//    (REDRIVE_RUNNING), on any retryd of the cluster.
//
// Thread-safety: thread-safe. A redrive runs on a thread of the operations
// and stops at BeginShutdown() (keeping its group) or when cancelled.
#ifndef RETRYD_SERVER_DLQ_DEAD_LETTER_TOOLS_H_
#define RETRYD_SERVER_DLQ_DEAD_LETTER_TOOLS_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/dlq/tool_types.h"

namespace retryd::kafka {
class GroupAdmin;
}  // namespace retryd::kafka

namespace retryd::dlq {

class DeadLetterTools {
 public:
  // `operations` must outlive it; `listed_bytes` sizes a listing's records.
  DeadLetterTools(ToolsOptions options, RedriveSpecCodec codec, ListedBytes listed_bytes,
                  RedriveOperations& operations);
  ~DeadLetterTools();  // Shutdown()s.
  DeadLetterTools(const DeadLetterTools&) = delete;
  DeadLetterTools& operator=(const DeadLetterTools&) = delete;

  const ToolsOptions& options() const { return options_; }

  // ListDeadLetters, answered by `deadline` (listing.cc).
  absl::StatusOr<ListPage> List(const ListQuery& query, absl::Time deadline) const;

  // PurgeDeadLetters, answered by `deadline` (purge.cc).
  absl::StatusOr<PurgeResult> Purge(const PurgeRequest& request, absl::Time deadline) const;

  // StartRedrive: checks, writes the redrive's group (not for a dry run)
  // and starts it with `launch` (the caller's way to RedriveOperations::
  // Launch, which sees what it started), returning what `launch` returned.
  // `caller` (peer, identity) goes into the audit lines.
  absl::Status StartRedrive(const RedriveRequest& request, const std::string& caller,
                            absl::Time deadline, absl::FunctionRef<absl::Status(RedriveJob)> launch)
      ABSL_LOCKS_EXCLUDED(start_mu_);

  // Looks, on a thread of its own, every 10 s until shutdown, for redrives
  // of this dead-letter topic whose group has no member (their retryd
  // stopped, or died and its session timed out) and resumes them under
  // their ids. Stops looking where the cluster has no Admin API. Once.
  void ResumeUnfinished() ABSL_LOCKS_EXCLUDED(start_mu_);

  // Running redrives stop where they are and keep their groups (the
  // operations end CANCELLED, saying so); no new one starts. Returns at
  // once; the operations' threads are joined by their owner.
  void BeginShutdown();
  // BeginShutdown(), then joins the resume thread. Idempotent.
  void Shutdown();

 private:
  // A redrive to start: its spec and range.
  struct Planned;
  // Launches the redrive `spec` with `launch`; `starts` and `ends` per
  // partition, with the counts `carried` from before a resume.
  absl::Status Launch(const RedriveSpec& spec, const std::map<int32_t, int64_t>& starts,
                      const std::map<int32_t, int64_t>& ends,
                      const std::map<int32_t, RedriveCheckpoint>& carried, bool resumed,
                      const std::string& caller,
                      absl::FunctionRef<absl::Status(RedriveJob)> launch);
  // The purge marks (-1 where none) of partitions 0..partitions-1.
  absl::StatusOr<std::map<int32_t, int64_t>> PurgeMarks(int partitions,
                                                        absl::Duration timeout) const;
  // StartRedrive's checks of the request alone.
  absl::Status CheckRedriveRequest(const RedriveRequest& request) const;
  // StartRedrive's spec and range, checked against the topic.
  absl::StatusOr<Planned> PlanRedrive(const RedriveRequest& request, absl::Time deadline) const;
  // Writes the redrive's group: its start offsets, with its spec.
  absl::Status WriteGroup(const Planned& plan, absl::Time deadline) const;
  // One look for unfinished redrives (see ResumeUnfinished).
  absl::Status ScanForUnfinished(const kafka::GroupAdmin& admin);
  // Resumes the redrive of group `group` if it is one of this topic's.
  absl::Status ResumeGroup(const kafka::GroupAdmin& admin, const std::string& group,
                           int partitions);
  // REDRIVE_RUNNING if a redrive group of this dead-letter topic exists.
  absl::Status CheckNoRedrive(int partitions, absl::Duration timeout) const;

  const ToolsOptions options_;
  const RedriveSpecCodec codec_;
  const ListedBytes listed_bytes_;
  RedriveOperations& operations_;
  // Shared with the redrives' runs, which may outlive a call.
  const std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  absl::Mutex start_mu_;  // Guards the two fields below; never held across a Kafka call.
  // A redrive is being checked and its group written: a second call to this
  // retryd meanwhile is refused, so two cannot both pass the check.
  bool starting_ ABSL_GUARDED_BY(start_mu_) = false;
  std::thread resume_thread_ ABSL_GUARDED_BY(start_mu_);
  absl::Mutex stop_mu_;  // Guards nothing: the resume thread's wait and its wake-up.
};

}  // namespace retryd::dlq

#endif  // RETRYD_SERVER_DLQ_DEAD_LETTER_TOOLS_H_
