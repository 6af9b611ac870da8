#include "server/control/dead_letter_tools.h"

#include <optional>
#include <utility>

#include "server/control/dead_letter_convert.h"

namespace retryd::control {

absl::StatusOr<v1::Operation> RedriveOperationsAdapter::Run(dlq::RedriveJob job) {
  auto progress = std::move(job.progress);
  return operations_.Run(
      v1::OPERATION_KIND_REDRIVE, std::move(job.request_id),
      [progress](v1::OperationProgress& out) {
        dlq::RedriveOperationProgress p;
        progress(p);
        ToProto(p, out);
      },
      [work = std::move(job.work)](engine::Cancellation& cancel, v1::Operation& result) mutable {
        dlq::RedriveResult r;
        absl::Status status = std::move(work)(cancel, r);
        ToProto(r, *result.mutable_redrive());
        return status;
      },
      std::move(job.id));
}

std::string RedriveOperationsAdapter::NewId() { return OperationRegistry::NewId(); }

bool RedriveOperationsAdapter::Known(const std::string& id) const {
  return operations_.Get(id).ok();
}

absl::Status RedriveOperationsAdapter::Launch(dlq::RedriveJob job) {
  return Run(std::move(job)).status();
}

DeadLetterTools::DeadLetterTools(DeadLetterToolsOptions options, OperationRegistry& operations)
    : operations_(operations),
      tools_(std::move(options), SpecCodec(), DeadLetterBytes, operations_) {}

DeadLetterTools::~DeadLetterTools() { Shutdown(); }

absl::StatusOr<v1::ListDeadLettersResponse> DeadLetterTools::List(
    const v1::ListDeadLettersRequest& request, absl::Time deadline) const {
  absl::StatusOr<dlq::ListPage> page = tools_.List(FromProto(request), deadline);
  if (!page.ok()) return page.status();
  return ToProto(*std::move(page));
}

absl::StatusOr<v1::PurgeDeadLettersResponse> DeadLetterTools::Purge(
    const v1::PurgeDeadLettersRequest& request, absl::Time deadline) const {
  absl::StatusOr<dlq::PurgeResult> result = tools_.Purge(FromProto(request), deadline);
  if (!result.ok()) return result.status();
  return ToProto(*result);
}

absl::StatusOr<v1::Operation> DeadLetterTools::StartRedrive(const v1::StartRedriveRequest& request,
                                                            const std::string& caller,
                                                            absl::Time deadline) {
  std::optional<v1::Operation> started;
  absl::Status status =
      tools_.StartRedrive(FromProto(request), caller, deadline, [&](dlq::RedriveJob job) {
        absl::StatusOr<v1::Operation> op = operations_.Run(std::move(job));
        if (!op.ok()) return op.status();
        started = *std::move(op);
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return *std::move(started);
}

}  // namespace retryd::control
