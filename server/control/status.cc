#include "server/control/status.h"

#include <string>
#include <utility>

#include "google/rpc/status.pb.h"
#include "server/operations/rpc_status.h"

namespace retryd::control {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // Its code is a canonical one (CanonicalCode), which grpc::StatusCode has.
  const google::rpc::Status details = ToRpcStatus(status);
  const auto code = static_cast<grpc::StatusCode>(details.code());
  std::string message(status.message());
  if (details.details().empty()) return grpc::Status(code, std::move(message));
  return grpc::Status(code, std::move(message), details.SerializeAsString());
}

}  // namespace retryd::control
