// The dead-letter tools behind ListDeadLetters, StartRedrive and
// PurgeDeadLetters: inspect the dead-letter topic, produce its records again
// at a set rate (a REDRIVE operation of the OperationRegistry), and hide a
// prefix of each partition.
//
// Every Kafka client here is the tools' own; none joins the engine's groups:
//  - a listing reads with an assigned consumer (kafka::PartitionReader);
//  - the purge marks are the committed offsets of consumer group
//    "<group_id>.dlq-tools", committed without joining it;
//  - a redrive joins consumer group "<group_id>.ops.<operation id>", whose
//    committed offsets are its position and whose commit metadata holds its
//    spec (v1::RedriveSpec) and, per partition, its counts up to the
//    committed offset, which a resumed redrive carries on from. The group
//    exists while the redrive is unfinished: it is deleted when the redrive
//    ends (succeeded, failed or cancelled), and kept when retryd stops or
//    dies, so that the next start (ResumeUnfinished) carries on where it
//    was, counts and all. While it exists, another
//    redrive of the same dead-letter topic is refused (REDRIVE_RUNNING), on
//    any retryd of the cluster.
//
// Thread-safety: thread-safe. A redrive runs on a thread of the registry
// and stops at BeginShutdown() (keeping its group) or when cancelled.
#ifndef RETRYD_SERVER_CONTROL_DEAD_LETTER_TOOLS_H_
#define RETRYD_SERVER_CONTROL_DEAD_LETTER_TOOLS_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "retryd/v1/control.pb.h"
#include "server/control/operations.h"

namespace retryd::kafka {
class GroupAdmin;
}  // namespace retryd::kafka

namespace retryd::control {

struct DeadLetterToolsOptions {
  std::string bootstrap_servers;
  std::map<std::string, std::string> kafka_properties;
  std::string dead_letter_topic;
  std::string group_id;  // The engine's; the tools' groups are named after it.
  std::string retry_topic;
  std::string instance_name;  // In a redrive's spec: who started it.
  // How often a redrive flushes its producer and commits its position: the
  // most it redrives again after a SIGKILL.
  absl::Duration commit_interval = absl::Seconds(1);
};

// The tools' consumer group names.
std::string PurgeGroup(const std::string& group_id);          // "<group_id>.dlq-tools"
std::string RedriveGroupPrefix(const std::string& group_id);  // "<group_id>.ops."

class DeadLetterTools {
 public:
  // `operations` must outlive it.
  DeadLetterTools(DeadLetterToolsOptions options, OperationRegistry& operations);
  ~DeadLetterTools();  // Shutdown()s.
  DeadLetterTools(const DeadLetterTools&) = delete;
  DeadLetterTools& operator=(const DeadLetterTools&) = delete;

  const DeadLetterToolsOptions& options() const { return options_; }

  // ListDeadLetters, answered by `deadline`.
  absl::StatusOr<v1::ListDeadLettersResponse> List(const v1::ListDeadLettersRequest& request,
                                                   absl::Time deadline) const;

  // PurgeDeadLetters, answered by `deadline`.
  absl::StatusOr<v1::PurgeDeadLettersResponse> Purge(const v1::PurgeDeadLettersRequest& request,
                                                     absl::Time deadline) const;

  // StartRedrive: checks, writes the redrive's group (not for a dry run)
  // and starts its operation; returns it RUNNING. `caller` (peer, identity)
  // goes into the audit lines.
  absl::StatusOr<v1::Operation> StartRedrive(const v1::StartRedriveRequest& request,
                                             const std::string& caller, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(start_mu_);

  // Looks, on a thread of its own, every 10 s until shutdown, for redrives
  // of this dead-letter topic whose group has no member (their retryd
  // stopped, or died and its session timed out) and resumes them under
  // their ids. Stops looking where the cluster has no Admin API. Once.
  void ResumeUnfinished() ABSL_LOCKS_EXCLUDED(start_mu_);

  // Running redrives stop where they are and keep their groups (the
  // operations end CANCELLED, saying so); no new one starts. Returns at
  // once; the operations' threads are joined by the registry's Shutdown().
  void BeginShutdown();
  // BeginShutdown(), then joins the resume thread. Idempotent.
  void Shutdown();

 private:
  // Starts the redrive `spec` (its group written, unless a dry run) as an
  // operation; `starts` and `ends` per partition, with the counts
  // `carried` from before a resume.
  absl::StatusOr<v1::Operation> Launch(const v1::RedriveSpec& spec,
                                       const std::map<int32_t, int64_t>& starts,
                                       const std::map<int32_t, int64_t>& ends,
                                       const std::map<int32_t, v1::RedriveCheckpoint>& carried,
                                       bool resumed, const std::string& caller);
  // The purge marks (-1 where none) of partitions 0..partitions-1.
  absl::StatusOr<std::map<int32_t, int64_t>> PurgeMarks(int partitions,
                                                        absl::Duration timeout) const;
  // One look for unfinished redrives (see ResumeUnfinished).
  absl::Status ScanForUnfinished(const kafka::GroupAdmin& admin);
  // REDRIVE_RUNNING if a redrive group of this dead-letter topic exists.
  absl::Status CheckNoRedrive(int partitions, absl::Duration timeout) const;

  const DeadLetterToolsOptions options_;
  OperationRegistry& operations_;
  // Shared with the redrives' runs, which may outlive a call.
  const std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  absl::Mutex start_mu_;  // Guards the two fields below; never held across a Kafka call.
  // A redrive is being checked and its group written: a second call to this
  // retryd meanwhile is refused, so two cannot both pass the check.
  bool starting_ ABSL_GUARDED_BY(start_mu_) = false;
  std::thread resume_thread_ ABSL_GUARDED_BY(start_mu_);
  absl::Mutex stop_mu_;  // Guards nothing: the resume thread's wait and its wake-up.
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_DEAD_LETTER_TOOLS_H_
