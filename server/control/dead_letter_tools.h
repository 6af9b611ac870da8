// ListDeadLetters, StartRedrive and PurgeDeadLetters in the RPC's messages:
// translates them (dead_letter_convert.h) to the dead-letter wing's tools
// (server/dlq/dead_letter_tools.h, which say what they do in Kafka) and
// their results back, and runs a redrive as a REDRIVE operation of the
// OperationRegistry.
//
// Thread-safety: thread-safe. A redrive runs on a thread of the registry
// and stops at BeginShutdown() (keeping its group) or when cancelled.
#ifndef RETRYD_SERVER_CONTROL_DEAD_LETTER_TOOLS_H_
#define RETRYD_SERVER_CONTROL_DEAD_LETTER_TOOLS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "retryd/v1/control.pb.h"
#include "server/dlq/dead_letter_tools.h"
#include "server/operations/operation_registry.h"

namespace retryd::control {

using DeadLetterToolsOptions = dlq::ToolsOptions;
using dlq::PurgeGroup;
using dlq::RedriveGroupPrefix;

// dlq::RedriveOperations over an OperationRegistry.
class RedriveOperationsAdapter final : public dlq::RedriveOperations {
 public:
  // `operations` must outlive it.
  explicit RedriveOperationsAdapter(OperationRegistry& operations) : operations_(operations) {}

  // Runs `job` as a REDRIVE operation; returns it as it started.
  absl::StatusOr<v1::Operation> Run(dlq::RedriveJob job);

  // dlq::RedriveOperations.
  std::string NewId() override;
  bool Known(const std::string& id) const override;
  absl::Status Launch(dlq::RedriveJob job) override;

 private:
  OperationRegistry& operations_;
};

class DeadLetterTools {
 public:
  // `operations` must outlive it.
  DeadLetterTools(DeadLetterToolsOptions options, OperationRegistry& operations);
  ~DeadLetterTools();  // Shutdown()s.
  DeadLetterTools(const DeadLetterTools&) = delete;
  DeadLetterTools& operator=(const DeadLetterTools&) = delete;

  const DeadLetterToolsOptions& options() const { return tools_.options(); }

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
                                             const std::string& caller, absl::Time deadline);

  // See dlq::DeadLetterTools.
  void ResumeUnfinished() { tools_.ResumeUnfinished(); }
  void BeginShutdown() { tools_.BeginShutdown(); }
  void Shutdown() { tools_.Shutdown(); }

 private:
  RedriveOperationsAdapter operations_;  // Before tools_, which uses it.
  dlq::DeadLetterTools tools_;
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_DEAD_LETTER_TOOLS_H_
