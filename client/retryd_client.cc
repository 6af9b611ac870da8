#include "client/retryd_client.h"

#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"
#include "server/common/error_reason.h"
#include "server/common/read_file.h"

namespace retryd {
namespace {

// `status` with the reason of the first ErrorInfo of domain retryd.io in
// `details`, if there is one.
absl::Status WithReasonOf(absl::Status status, const google::rpc::Status& details) {
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&info) && info.domain() == "retryd.io") {
      return WithReason(std::move(status), info.reason());
    }
  }
  return status;
}

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their numbering.
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  // retryd's reason, if the details carry one (see control.proto).
  google::rpc::Status details;
  if (!status.error_details().empty() && details.ParseFromString(status.error_details())) {
    return WithReasonOf(std::move(out), details);
  }
  return out;
}

// Call the RPC before this: as one expression, `std::move(response)` may be
// evaluated before the call fills `response`.
template <typename Response>
absl::StatusOr<Response> ToStatusOr(const grpc::Status& status, Response response) {
  if (!status.ok()) return ToAbslStatus(status);
  return response;
}

// A certificate chain or CA bundle: Debian's whole CA bundle is ~200 KiB.
constexpr size_t kMaxPemFileBytes = 1 << 20;

// `what` says which file it is, for the error.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const char* what) {
  absl::StatusOr<std::string> contents = ReadFileToString(path, kMaxPemFileBytes);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat(what, ": ", contents.status().message()));
  }
  return contents;
}

absl::Status CheckToken(const std::string& token) {
  for (const char c : token) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "the token must be printable ASCII (no newline or control characters)");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(
    const ClientOptions& options) {
  const bool tls = options.tls || !options.tls_ca_file.empty() || !options.tls_cert_file.empty() ||
                   !options.tls_key_file.empty();
  if (!tls) return grpc::InsecureChannelCredentials();
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "mutual TLS needs both a client certificate and its private key");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca_file.empty()) {
    absl::StatusOr<std::string> roots = ReadPemFile(options.tls_ca_file, "TLS CA file");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
  }
  if (!options.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPemFile(options.tls_cert_file, "TLS certificate file");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPemFile(options.tls_key_file, "TLS key file");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::Status FromRpcStatus(const google::rpc::Status& status) {
  // A code outside gRPC's range would not be an absl::StatusCode either.
  const int code = status.code();
  if (code == 0) return absl::OkStatus();
  const absl::StatusCode absl_code =
      code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
          ? static_cast<absl::StatusCode>(code)
          : absl::StatusCode::kUnknown;
  return WithReasonOf(absl::Status(absl_code, status.message()), status);
}

class RetrydClient::ActiveCall {
 public:
  ActiveCall(RetrydClient& client, grpc::ClientContext& context)
      : client_(client), context_(context) {
    absl::MutexLock lock(&client_.mu_);
    client_.active_.insert(&context_);
    generation_ = client_.cancel_generation_;
  }
  ~ActiveCall() {
    absl::MutexLock lock(&client_.mu_);
    client_.active_.erase(&context_);
  }
  ActiveCall(const ActiveCall&) = delete;
  ActiveCall& operator=(const ActiveCall&) = delete;

  bool cancelled_by_client() {
    absl::MutexLock lock(&client_.mu_);
    return client_.cancel_generation_ != generation_;
  }

 private:
  RetrydClient& client_;
  grpc::ClientContext& context_;
  uint64_t generation_ = 0;
};

absl::StatusOr<std::unique_ptr<RetrydClient>> RetrydClient::Create(ClientOptions options) {
  if (options.address.empty()) return absl::InvalidArgumentError("the address is empty");
  if (absl::Status status = CheckToken(options.token); !status.ok()) return status;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = MakeCredentials(options);
  if (!credentials.ok()) return credentials.status();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(options.address, *credentials);
  return std::unique_ptr<RetrydClient>(new RetrydClient(std::move(channel), std::move(options)));
}

std::unique_ptr<RetrydClient> RetrydClient::CreateWithChannel(
    std::shared_ptr<grpc::Channel> channel, ClientOptions options) {
  return std::unique_ptr<RetrydClient>(new RetrydClient(std::move(channel), std::move(options)));
}

RetrydClient::RetrydClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      control_(v1::Control::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

RetrydClient::~RetrydClient() = default;

void RetrydClient::Prepare(grpc::ClientContext& context, bool unary) const {
  if (unary) context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  if (!options_.token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
  }
}

template <typename Request, typename Response>
absl::StatusOr<Response> RetrydClient::Unary(
    grpc::Status (v1::Control::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request) {
  grpc::ClientContext context;
  Prepare(context, /*unary=*/true);
  ActiveCall call(*this, context);
  Response response;
  const grpc::Status status = ((*control_).*method)(&context, request, &response);
  return ToStatusOr(status, std::move(response));
}

absl::StatusOr<v1::GetStatusResponse> RetrydClient::GetStatus() {
  return Unary(&v1::Control::Stub::GetStatus, v1::GetStatusRequest());
}

absl::StatusOr<v1::StartRetryThreadsResponse> RetrydClient::StartRetryThreads(int32_t count) {
  v1::StartRetryThreadsRequest request;
  request.set_count(count);
  return Unary(&v1::Control::Stub::StartRetryThreads, request);
}

absl::StatusOr<v1::StartRetryThreadsResponse> RetrydClient::StartRetryThreads(
    const v1::StartRetryThreadsRequest& request) {
  return Unary(&v1::Control::Stub::StartRetryThreads, request);
}

absl::StatusOr<v1::SetRetryThreadCountResponse> RetrydClient::SetRetryThreadCount(
    const v1::SetRetryThreadCountRequest& request) {
  return Unary(&v1::Control::Stub::SetRetryThreadCount, request);
}

absl::StatusOr<v1::Operation> RetrydClient::StartDrain(const v1::StartDrainRequest& request) {
  return Unary(&v1::Control::Stub::StartDrain, request);
}

absl::StatusOr<v1::Operation> RetrydClient::GetOperation(const std::string& id) {
  v1::GetOperationRequest request;
  request.set_id(id);
  return Unary(&v1::Control::Stub::GetOperation, request);
}

absl::StatusOr<v1::ListOperationsResponse> RetrydClient::ListOperations() {
  return Unary(&v1::Control::Stub::ListOperations, v1::ListOperationsRequest());
}

absl::StatusOr<v1::Operation> RetrydClient::CancelOperation(const std::string& id) {
  v1::CancelOperationRequest request;
  request.set_id(id);
  return CancelOperation(request);
}

absl::StatusOr<v1::Operation> RetrydClient::CancelOperation(
    const v1::CancelOperationRequest& request) {
  return Unary(&v1::Control::Stub::CancelOperation, request);
}

absl::Status RetrydClient::WatchOperation(const std::string& id,
                                          absl::FunctionRef<void(const v1::Operation&)> on_update) {
  grpc::ClientContext context;
  Prepare(context, /*unary=*/false);
  ActiveCall call(*this, context);
  v1::WatchOperationRequest request;
  request.set_id(id);
  std::unique_ptr<grpc::ClientReader<v1::Operation>> reader =
      control_->WatchOperation(&context, request);
  v1::Operation op;
  while (reader->Read(&op)) on_update(op);
  const grpc::Status status = reader->Finish();
  if (status.error_code() == grpc::StatusCode::CANCELLED && call.cancelled_by_client()) {
    return absl::OkStatus();
  }
  return ToAbslStatus(status);
}

absl::StatusOr<v1::StopRetryThreadsResponse> RetrydClient::StopRetryThreads(int32_t count,
                                                                            bool graceful) {
  v1::StopRetryThreadsRequest request;
  request.set_count(count);
  request.set_graceful(graceful);
  return StopRetryThreads(request);
}

absl::StatusOr<v1::StopRetryThreadsResponse> RetrydClient::StopRetryThreadsById(
    const std::vector<uint32_t>& thread_ids, bool graceful) {
  v1::StopRetryThreadsRequest request;
  request.mutable_thread_ids()->Add(thread_ids.begin(), thread_ids.end());
  request.set_graceful(graceful);
  return StopRetryThreads(request);
}

absl::StatusOr<v1::StopRetryThreadsResponse> RetrydClient::StopRetryThreads(
    const v1::StopRetryThreadsRequest& request) {
  return Unary(&v1::Control::Stub::StopRetryThreads, request);
}

absl::StatusOr<v1::SetInOrderResponse> RetrydClient::SetInOrder(bool in_order, bool drain_retries) {
  v1::SetInOrderRequest request;
  request.set_in_order(in_order);
  request.set_drain_retries(drain_retries);
  return SetInOrder(request);
}

absl::StatusOr<v1::SetInOrderResponse> RetrydClient::SetInOrder(
    const v1::SetInOrderRequest& request) {
  return Unary(&v1::Control::Stub::SetInOrder, request);
}

absl::StatusOr<v1::SetOrderingModeResponse> RetrydClient::SetOrderingMode(v1::Ordering mode,
                                                                          bool drain_retries) {
  v1::SetOrderingModeRequest request;
  request.set_mode(mode);
  request.set_drain_retries(drain_retries);
  return SetOrderingMode(request);
}

absl::StatusOr<v1::SetOrderingModeResponse> RetrydClient::SetOrderingMode(
    const v1::SetOrderingModeRequest& request) {
  return Unary(&v1::Control::Stub::SetOrderingMode, request);
}

absl::StatusOr<v1::ListInFlightResponse> RetrydClient::ListInFlight(uint32_t limit) {
  v1::ListInFlightRequest request;
  request.set_limit(limit);
  return Unary(&v1::Control::Stub::ListInFlight, request);
}

absl::StatusOr<v1::DeadLetterRecordResponse> RetrydClient::DeadLetterRecord(
    const std::string& topic, int32_t partition, int64_t offset) {
  v1::DeadLetterRecordRequest request;
  request.set_topic(topic);
  request.set_partition(partition);
  request.set_offset(offset);
  return DeadLetterRecord(request);
}

absl::StatusOr<v1::DeadLetterRecordResponse> RetrydClient::DeadLetterRecord(
    const v1::DeadLetterRecordRequest& request) {
  return Unary(&v1::Control::Stub::DeadLetterRecord, request);
}

absl::StatusOr<v1::ListDeadLettersResponse> RetrydClient::ListDeadLetters(
    const v1::ListDeadLettersRequest& request) {
  return Unary(&v1::Control::Stub::ListDeadLetters, request);
}

absl::StatusOr<v1::Operation> RetrydClient::StartRedrive(const v1::StartRedriveRequest& request) {
  return Unary(&v1::Control::Stub::StartRedrive, request);
}

absl::StatusOr<v1::PurgeDeadLettersResponse> RetrydClient::PurgeDeadLetters(
    const v1::PurgeDeadLettersRequest& request) {
  return Unary(&v1::Control::Stub::PurgeDeadLetters, request);
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse> RetrydClient::HealthCheck(
    const std::string& service) {
  grpc::ClientContext context;
  Prepare(context, /*unary=*/true);
  ActiveCall call(*this, context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health_->Check(&context, request, &response);
  return ToStatusOr(status, std::move(response));
}

absl::Status RetrydClient::Watch(uint32_t interval_ms, const std::vector<uint32_t>& thread_ids,
                                 absl::FunctionRef<bool(const v1::MetricsSnapshot&)> on_snapshot) {
  grpc::ClientContext context;
  Prepare(context, /*unary=*/false);
  ActiveCall call(*this, context);
  v1::WatchMetricsRequest request;
  request.set_interval_ms(interval_ms);
  request.mutable_thread_ids()->Add(thread_ids.begin(), thread_ids.end());
  std::unique_ptr<grpc::ClientReader<v1::MetricsSnapshot>> reader =
      control_->WatchMetrics(&context, request);
  v1::MetricsSnapshot snapshot;
  bool stopped_by_callback = false;
  while (reader->Read(&snapshot)) {
    if (!on_snapshot(snapshot)) {
      stopped_by_callback = true;
      // Finish() would otherwise wait for the server to end a stream that
      // never ends.
      context.TryCancel();
      break;
    }
  }
  const grpc::Status status = reader->Finish();
  if (stopped_by_callback) return absl::OkStatus();
  if (status.error_code() == grpc::StatusCode::CANCELLED && call.cancelled_by_client()) {
    return absl::OkStatus();
  }
  return ToAbslStatus(status);
}

void RetrydClient::Cancel() {
  absl::MutexLock lock(&mu_);
  ++cancel_generation_;
  for (grpc::ClientContext* context : active_) context->TryCancel();
}

}  // namespace retryd
