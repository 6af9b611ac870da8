// A thin synchronous client on the generated stub, for the tests: each call
// takes a timeout and, optionally, a bearer token.
#ifndef RETRYD_TESTS_CONTROL_CONTROL_CLIENT_H_
#define RETRYD_TESTS_CONTROL_CONTROL_CLIENT_H_

#include <grpcpp/channel.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "retryd/v1/control.grpc.pb.h"
#include "tests/control/control_test_util.h"

namespace retryd::testing {

class ControlClient {
 public:
  explicit ControlClient(std::shared_ptr<grpc::Channel> channel, std::string token = "")
      : channel_(channel), stub_(v1::Control::NewStub(channel)), token_(std::move(token)) {}

  grpc::Status GetStatus(v1::GetStatusResponse* response,
                         absl::Duration timeout = absl::Seconds(10)) {
    grpc::ClientContext context;
    Prepare(context, timeout, token_);
    return stub_->GetStatus(&context, v1::GetStatusRequest(), response);
  }

  grpc::Status StartRetryThreads(int count, std::vector<uint32_t>* ids = nullptr,
                                 absl::Duration timeout = absl::Seconds(60)) {
    grpc::ClientContext context;
    Prepare(context, timeout, token_);
    v1::StartRetryThreadsRequest request;
    request.set_count(count);
    v1::StartRetryThreadsResponse response;
    grpc::Status s = stub_->StartRetryThreads(&context, request, &response);
    if (ids != nullptr) ids->assign(response.thread_ids().begin(), response.thread_ids().end());
    return s;
  }

  grpc::Status StopRetryThreads(int count, const std::vector<uint32_t>& thread_ids,
                                std::optional<bool> graceful = std::nullopt,
                                std::vector<uint32_t>* stopped = nullptr,
                                absl::Duration timeout = absl::Seconds(60)) {
    grpc::ClientContext context;
    Prepare(context, timeout, token_);
    v1::StopRetryThreadsRequest request;
    request.set_count(count);
    for (uint32_t id : thread_ids) request.add_thread_ids(id);
    if (graceful.has_value()) request.set_graceful(*graceful);
    v1::StopRetryThreadsResponse response;
    grpc::Status s = stub_->StopRetryThreads(&context, request, &response);
    if (stopped != nullptr) {
      stopped->assign(response.stopped_thread_ids().begin(), response.stopped_thread_ids().end());
    }
    return s;
  }

  grpc::Status SetInOrder(bool in_order, bool drain_retries,
                          v1::SetInOrderResponse* response = nullptr,
                          absl::Duration timeout = absl::Seconds(60)) {
    grpc::ClientContext context;
    Prepare(context, timeout, token_);
    v1::SetInOrderRequest request;
    request.set_in_order(in_order);
    request.set_drain_retries(drain_retries);
    v1::SetInOrderResponse ignored;
    return stub_->SetInOrder(&context, request, response != nullptr ? response : &ignored);
  }

  // Opens a stream; the caller reads from it and Finish()es it.
  std::unique_ptr<grpc::ClientReader<v1::MetricsSnapshot>> Watch(
      grpc::ClientContext& context, uint32_t interval_ms,
      const std::vector<uint32_t>& thread_ids = {}) {
    v1::WatchMetricsRequest request;
    request.set_interval_ms(interval_ms);
    for (uint32_t id : thread_ids) request.add_thread_ids(id);
    if (!token_.empty()) context.AddMetadata("authorization", "Bearer " + token_);
    return stub_->WatchMetrics(&context, request);
  }

  // The status a stream ends with when the server refuses it at once.
  grpc::Status WatchStatus(uint32_t interval_ms, const std::vector<uint32_t>& thread_ids = {}) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    auto reader = Watch(context, interval_ms, thread_ids);
    v1::MetricsSnapshot snapshot;
    if (reader->Read(&snapshot)) {
      context.TryCancel();
      reader->Finish();
      return grpc::Status::OK;
    }
    return reader->Finish();
  }

  std::vector<uint32_t> RetryThreadIds() {
    v1::GetStatusResponse status;
    std::vector<uint32_t> ids;
    if (!GetStatus(&status).ok()) return ids;
    for (const auto& t : status.threads()) {
      if (t.role() == v1::RETRY) ids.push_back(t.thread_id());
    }
    return ids;
  }

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Control::Stub> stub_;
  std::string token_;
};

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_CONTROL_CONTROL_CLIENT_H_
