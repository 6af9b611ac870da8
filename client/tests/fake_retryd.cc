#include "client/tests/fake_retryd.h"

#include <chrono>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/server_callback.h"

namespace retryd::testing {

// One WatchMetrics or WatchOperation call: fails with `error`, or writes
// the canned messages, one write in flight, then finishes or holds the
// stream until the client cancels.
template <typename Message>
class FakeRetryd::StreamWriter : public grpc::ServerWriteReactor<Message> {
 public:
  StreamWriter(FakeRetryd& fake, std::vector<Message> snapshots, bool then_end,
               const grpc::Status& error)
      : fake_(fake), snapshots_(std::move(snapshots)), then_end_(then_end) {
    absl::MutexLock lock(&mu_);
    if (!error.ok()) {
      FinishLocked(error);
      return;
    }
    WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok) {
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    if (!fake_.first_snapshot_written_.HasBeenNotified()) {
      fake_.first_snapshot_written_.Notify();
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    if (!fake_.watch_cancelled_.HasBeenNotified()) fake_.watch_cancelled_.Notify();
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    // With a write in flight, its OnWriteDone(false) finishes.
    if (!write_in_flight_) FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override { delete this; }

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    if (cancelled_) {
      // OnCancel came while a write was in flight that still succeeded.
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    if (next_ < snapshots_.size()) {
      write_in_flight_ = true;
      this->StartWrite(&snapshots_[next_++]);
    } else if (then_end_) {
      FinishLocked(grpc::Status::OK);
    }
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    this->Finish(status);
  }

  FakeRetryd& fake_;
  const std::vector<Message> snapshots_;
  const bool then_end_;
  absl::Mutex mu_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

class FakeRetryd::ControlService : public v1::Control::CallbackService {
 public:
  explicit ControlService(FakeRetryd& fake) : fake_(fake) {}

  // A mutating call: keeps the request where the test reads it (`seen`)
  // and answers with the canned response, or the status the test set.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Canned(grpc::CallbackServerContext* context, const char* method,
                                   const Request& request, Request FakeRetryd::*seen,
                                   Response FakeRetryd::*canned, Response* response) {
    grpc::Status status = fake_.Record(method, *context);
    absl::MutexLock lock(&fake_.mu_);
    fake_.*seen = request;
    if (status.ok()) *response = fake_.*canned;
    return Reply(context, status);
  }

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest*,
                                      v1::GetStatusResponse* response) override {
    grpc::Status status = fake_.Record("GetStatus", *context);
    if (status.ok()) {
      absl::MutexLock lock(&fake_.mu_);
      *response = fake_.status_;
    }
    return Reply(context, status);
  }

  grpc::ServerUnaryReactor* StartRetryThreads(grpc::CallbackServerContext* context,
                                              const v1::StartRetryThreadsRequest* request,
                                              v1::StartRetryThreadsResponse* response) override {
    return Canned(context, "StartRetryThreads", *request, &FakeRetryd::start_request_,
                  &FakeRetryd::start_response_, response);
  }

  grpc::ServerUnaryReactor* StopRetryThreads(grpc::CallbackServerContext* context,
                                             const v1::StopRetryThreadsRequest* request,
                                             v1::StopRetryThreadsResponse* response) override {
    return Canned(context, "StopRetryThreads", *request, &FakeRetryd::stop_request_,
                  &FakeRetryd::stop_response_, response);
  }

  grpc::ServerUnaryReactor* SetInOrder(grpc::CallbackServerContext* context,
                                       const v1::SetInOrderRequest* request,
                                       v1::SetInOrderResponse* response) override {
    return Canned(context, "SetInOrder", *request, &FakeRetryd::in_order_request_,
                  &FakeRetryd::in_order_response_, response);
  }

  grpc::ServerUnaryReactor* SetOrderingMode(grpc::CallbackServerContext* context,
                                            const v1::SetOrderingModeRequest* request,
                                            v1::SetOrderingModeResponse* response) override {
    return Canned(context, "SetOrderingMode", *request, &FakeRetryd::ordering_request_,
                  &FakeRetryd::ordering_response_, response);
  }

  grpc::ServerWriteReactor<v1::MetricsSnapshot>* WatchMetrics(
      grpc::CallbackServerContext* context, const v1::WatchMetricsRequest* request) override {
    grpc::Status status = fake_.Record("WatchMetrics", *context);
    std::vector<v1::MetricsSnapshot> snapshots;
    bool then_end = false;
    {
      absl::MutexLock lock(&fake_.mu_);
      fake_.watch_request_ = *request;
      snapshots = fake_.snapshots_;
      then_end = fake_.end_after_snapshots_;
    }
    // Owned by gRPC until OnDone.
    return new StreamWriter<v1::MetricsSnapshot>(fake_, std::move(snapshots), then_end, status);
  }

  grpc::ServerWriteReactor<v1::Operation>* WatchOperation(
      grpc::CallbackServerContext* context, const v1::WatchOperationRequest* request) override {
    grpc::Status status = fake_.Record("WatchOperation", *context);
    std::vector<v1::Operation> updates;
    bool then_end = false;
    {
      absl::MutexLock lock(&fake_.mu_);
      fake_.requests_["WatchOperation"] = request->SerializeAsString();
      updates = fake_.operation_updates_;
      then_end = fake_.end_after_operation_updates_;
    }
    return new StreamWriter<v1::Operation>(fake_, std::move(updates), then_end, status);
  }

  // A unary call answered with set_response's message for `method`.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const char* method,
                                   const Request& request, Response* response) {
    grpc::Status status = fake_.Record(method, *context);
    absl::MutexLock lock(&fake_.mu_);
    fake_.requests_[method] = request.SerializeAsString();
    if (const auto it = fake_.responses_.find(method);
        status.ok() && it != fake_.responses_.end()) {
      response->ParseFromString(it->second);
    }
    return Reply(context, status);
  }

  grpc::ServerUnaryReactor* SetRetryThreadCount(
      grpc::CallbackServerContext* context, const v1::SetRetryThreadCountRequest* request,
      v1::SetRetryThreadCountResponse* response) override {
    return Answer(context, "SetRetryThreadCount", *request, response);
  }
  grpc::ServerUnaryReactor* DeadLetterRecord(grpc::CallbackServerContext* context,
                                             const v1::DeadLetterRecordRequest* request,
                                             v1::DeadLetterRecordResponse* response) override {
    return Answer(context, "DeadLetterRecord", *request, response);
  }
  grpc::ServerUnaryReactor* StartDrain(grpc::CallbackServerContext* context,
                                       const v1::StartDrainRequest* request,
                                       v1::Operation* response) override {
    return Answer(context, "StartDrain", *request, response);
  }
  grpc::ServerUnaryReactor* GetOperation(grpc::CallbackServerContext* context,
                                         const v1::GetOperationRequest* request,
                                         v1::Operation* response) override {
    return Answer(context, "GetOperation", *request, response);
  }
  grpc::ServerUnaryReactor* ListOperations(grpc::CallbackServerContext* context,
                                           const v1::ListOperationsRequest* request,
                                           v1::ListOperationsResponse* response) override {
    return Answer(context, "ListOperations", *request, response);
  }
  grpc::ServerUnaryReactor* CancelOperation(grpc::CallbackServerContext* context,
                                            const v1::CancelOperationRequest* request,
                                            v1::Operation* response) override {
    return Answer(context, "CancelOperation", *request, response);
  }

  grpc::ServerUnaryReactor* StartRedrive(grpc::CallbackServerContext* context,
                                         const v1::StartRedriveRequest* request,
                                         v1::Operation* response) override {
    return Answer(context, "StartRedrive", *request, response);
  }
  grpc::ServerUnaryReactor* PurgeDeadLetters(grpc::CallbackServerContext* context,
                                             const v1::PurgeDeadLettersRequest* request,
                                             v1::PurgeDeadLettersResponse* response) override {
    return Answer(context, "PurgeDeadLetters", *request, response);
  }

  // The page that `request.page_token` names (set_dead_letter_pages).
  grpc::ServerUnaryReactor* ListDeadLetters(grpc::CallbackServerContext* context,
                                            const v1::ListDeadLettersRequest* request,
                                            v1::ListDeadLettersResponse* response) override {
    grpc::Status status = fake_.Record("ListDeadLetters", *context);
    absl::MutexLock lock(&fake_.mu_);
    fake_.dead_letter_requests_.push_back(*request);
    if (!status.ok()) return Reply(context, status);
    const std::vector<v1::ListDeadLettersResponse>& pages = fake_.dead_letter_pages_;
    std::string token;
    for (const v1::ListDeadLettersResponse& page : pages) {
      if (request->page_token() == token) {
        *response = page;
        return Reply(context, grpc::Status::OK);
      }
      token = page.next_page_token();
    }
    if (pages.empty() && request->page_token().empty()) return Reply(context, grpc::Status::OK);
    return Reply(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                       "unknown page token " + request->page_token()));
  }

 private:
  static grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                         const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  FakeRetryd& fake_;
};

class FakeRetryd::HealthService : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(FakeRetryd& fake) : fake_(fake) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    grpc::Status status = fake_.Record("Check", *context);
    {
      absl::MutexLock lock(&fake_.mu_);
      fake_.health_request_ = *request;
      if (status.ok()) response->set_status(fake_.health_);
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

 private:
  FakeRetryd& fake_;
};

FakeRetryd::FakeRetryd()
    : control_(std::make_unique<ControlService>(*this)),
      health_service_(std::make_unique<HealthService>(*this)) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(control_.get());
  builder.RegisterService(health_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) std::abort();
  address_ = absl::StrCat("127.0.0.1:", port);
}

FakeRetryd::~FakeRetryd() { Shutdown(); }

void FakeRetryd::Shutdown() {
  if (server_ == nullptr) return;
  // Cancels calls in progress at once: a held watch would otherwise keep
  // the server up until its client goes.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

grpc::Status FakeRetryd::Record(const std::string& method, const grpc::ServerContextBase& context) {
  CallRecord record;
  record.method = method;
  const auto& metadata = context.client_metadata();
  if (const auto it = metadata.find("authorization"); it != metadata.end()) {
    record.authorization = std::string(it->second.data(), it->second.size());
  }
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    record.deadline_in = absl::FromChrono(context.deadline()) - absl::Now();
  }
  absl::MutexLock lock(&mu_);
  calls_.push_back(std::move(record));
  const auto failure = failures_.find(method);
  return failure == failures_.end() ? grpc::Status::OK : failure->second;
}

void FakeRetryd::set_status(v1::GetStatusResponse response) {
  absl::MutexLock lock(&mu_);
  status_ = std::move(response);
}
void FakeRetryd::set_start_response(v1::StartRetryThreadsResponse response) {
  absl::MutexLock lock(&mu_);
  start_response_ = std::move(response);
}
void FakeRetryd::set_stop_response(v1::StopRetryThreadsResponse response) {
  absl::MutexLock lock(&mu_);
  stop_response_ = std::move(response);
}
void FakeRetryd::set_in_order_response(v1::SetInOrderResponse response) {
  absl::MutexLock lock(&mu_);
  in_order_response_ = std::move(response);
}
void FakeRetryd::set_ordering_response(v1::SetOrderingModeResponse response) {
  absl::MutexLock lock(&mu_);
  ordering_response_ = std::move(response);
}
void FakeRetryd::set_health(grpc::health::v1::HealthCheckResponse::ServingStatus status) {
  absl::MutexLock lock(&mu_);
  health_ = status;
}
void FakeRetryd::set_snapshots(std::vector<v1::MetricsSnapshot> snapshots, bool then_end) {
  absl::MutexLock lock(&mu_);
  snapshots_ = std::move(snapshots);
  end_after_snapshots_ = then_end;
}
void FakeRetryd::set_response(const std::string& method,
                              const google::protobuf::Message& response) {
  absl::MutexLock lock(&mu_);
  responses_[method] = response.SerializeAsString();
}
void FakeRetryd::set_operation_updates(std::vector<v1::Operation> updates, bool then_end) {
  absl::MutexLock lock(&mu_);
  operation_updates_ = std::move(updates);
  end_after_operation_updates_ = then_end;
}
void FakeRetryd::set_dead_letter_pages(std::vector<v1::ListDeadLettersResponse> pages) {
  absl::MutexLock lock(&mu_);
  dead_letter_pages_ = std::move(pages);
}
void FakeRetryd::FailWith(const std::string& method, grpc::Status status) {
  absl::MutexLock lock(&mu_);
  failures_[method] = std::move(status);
}

std::vector<CallRecord> FakeRetryd::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}
std::optional<CallRecord> FakeRetryd::last_call(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  for (auto it = calls_.rbegin(); it != calls_.rend(); ++it) {
    if (it->method == method) return *it;
  }
  return std::nullopt;
}
v1::StartRetryThreadsRequest FakeRetryd::last_start_request() const {
  absl::MutexLock lock(&mu_);
  return start_request_;
}
v1::StopRetryThreadsRequest FakeRetryd::last_stop_request() const {
  absl::MutexLock lock(&mu_);
  return stop_request_;
}
v1::SetInOrderRequest FakeRetryd::last_in_order_request() const {
  absl::MutexLock lock(&mu_);
  return in_order_request_;
}
v1::SetOrderingModeRequest FakeRetryd::last_ordering_request() const {
  absl::MutexLock lock(&mu_);
  return ordering_request_;
}
v1::WatchMetricsRequest FakeRetryd::last_watch_request() const {
  absl::MutexLock lock(&mu_);
  return watch_request_;
}
std::string FakeRetryd::RequestBytes(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  const auto it = requests_.find(method);
  return it == requests_.end() ? std::string() : it->second;
}
grpc::health::v1::HealthCheckRequest FakeRetryd::last_health_request() const {
  absl::MutexLock lock(&mu_);
  return health_request_;
}
std::vector<v1::ListDeadLettersRequest> FakeRetryd::dead_letter_requests() const {
  absl::MutexLock lock(&mu_);
  return dead_letter_requests_;
}

}  // namespace retryd::testing
