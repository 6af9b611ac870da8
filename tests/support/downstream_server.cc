#include "tests/support/downstream_server.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"

namespace retryd::testing {

// One call: answers at once, or when its alarm rings; a cancel rings the
// alarm early. Finish runs exactly once, from Begin or from the alarm.
class DownstreamServer::Reactor : public grpc::ServerUnaryReactor {
 public:
  Reactor(DownstreamServer& owner, size_t index, Answer answer,
          retryd::v1::ProcessResponse* response)
      : owner_(owner), index_(index), answer_(std::move(answer)), response_(response) {}

  void Begin() {
    if (answer_.latency <= absl::ZeroDuration()) {
      Respond(true);
      return;
    }
    has_alarm_ = true;
    alarm_.Set(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(answer_.latency),
               [this](bool rang) { Respond(rang); });
  }

  void OnCancel() override {
    owner_.Cancelled(index_);
    if (has_alarm_) alarm_.Cancel();
  }

  void OnDone() override { delete this; }

 private:
  // `in_time`: false if the call was cancelled while it waited.
  void Respond(bool in_time) {
    owner_.Answered(index_);
    if (!in_time) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while waiting"));
      return;
    }
    if (answer_.code == grpc::StatusCode::OK) *response_ = answer_.response;
    Finish(grpc::Status(answer_.code, answer_.message, answer_.details));
  }

  DownstreamServer& owner_;
  const size_t index_;
  const Answer answer_;
  retryd::v1::ProcessResponse* const response_;
  bool has_alarm_ = false;  // Set before the reactor is handed to gRPC.
  grpc::Alarm alarm_;
};

class DownstreamServer::Service : public retryd::v1::RecordProcessor::CallbackService {
 public:
  explicit Service(DownstreamServer& owner) : owner_(owner) {}

  grpc::ServerUnaryReactor* Process(grpc::CallbackServerContext* context,
                                    const retryd::v1::ProcessRequest* request,
                                    retryd::v1::ProcessResponse* response) override {
    std::string authorization;
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      authorization.assign(it->second.data(), it->second.size());
    }
    size_t index = 0;
    Answer answer = owner_.Arrive(*request, std::move(authorization), &index);
    auto* reactor = new Reactor(owner_, index, std::move(answer), response);
    reactor->Begin();
    return reactor;
  }

 private:
  DownstreamServer& owner_;
};

class DownstreamServer::HealthService : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(DownstreamServer& owner) : owner_(owner) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    absl::MutexLock lock(&owner_.mu_);
    ++owner_.health_checks_;
    auto it = owner_.health_.find(request->service());
    if (it == owner_.health_.end()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
    } else {
      response->set_status(it->second);
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

 private:
  DownstreamServer& owner_;
};

DownstreamServer::DownstreamServer()
    : service_(std::make_unique<Service>(*this)),
      health_service_(std::make_unique<HealthService>(*this)) {}

void DownstreamServer::SetAnswerer(Answerer answerer) {
  absl::MutexLock lock(&mu_);
  answerer_ = std::move(answerer);
}

void DownstreamServer::SetHealth(const std::string& service,
                                 grpc::health::v1::HealthCheckResponse::ServingStatus status) {
  absl::MutexLock lock(&mu_);
  health_[service] = status;
}

int DownstreamServer::health_checks() const {
  absl::MutexLock lock(&mu_);
  return health_checks_;
}

DownstreamServer::~DownstreamServer() { Stop(); }

absl::Status DownstreamServer::Start() {
  if (server_ != nullptr) return absl::FailedPreconditionError("already started");
  int port = 0;
  {
    absl::MutexLock lock(&mu_);
    port = port_;
  }
  int selected = 0;
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls_.has_value()) {
    grpc::SslServerCredentialsOptions options(
        tls_->client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    options.pem_root_certs = tls_->client_ca;
    options.pem_key_cert_pairs.push_back({tls_->key, tls_->cert});
    credentials = grpc::SslServerCredentials(options);
  }
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), credentials, &selected);
  builder.RegisterService(service_.get());
  bool health = false;
  {
    absl::MutexLock lock(&mu_);
    health = !health_.empty();
  }
  if (health) builder.RegisterService(health_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || selected == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on 127.0.0.1:", port));
  }
  absl::MutexLock lock(&mu_);
  port_ = selected;
  return absl::OkStatus();
}

void DownstreamServer::Stop() {
  if (server_ == nullptr) return;
  // A deadline now: calls in progress are cancelled rather than awaited.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

int DownstreamServer::port() const {
  absl::MutexLock lock(&mu_);
  return port_;
}

std::string DownstreamServer::target() const { return absl::StrCat("127.0.0.1:", port()); }

void DownstreamServer::SetAnswer(const std::string& key_prefix, Answer answer) {
  absl::MutexLock lock(&mu_);
  answers_[key_prefix] = std::move(answer);
}

std::vector<DownstreamServer::Call> DownstreamServer::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

int DownstreamServer::peak_in_progress() const {
  absl::MutexLock lock(&mu_);
  return peak_in_progress_;
}

bool DownstreamServer::Wait(int count, const int* value, absl::Duration timeout) const {
  struct AtLeast {
    const int* value;
    int count;
    bool operator()() const { return *value >= count; }
  } at_least{value, count};
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&at_least), timeout);
}

bool DownstreamServer::WaitForCalls(int count, absl::Duration timeout) const {
  return Wait(count, &arrived_, timeout);
}

bool DownstreamServer::WaitForInProgress(int count, absl::Duration timeout) const {
  return Wait(count, &in_progress_, timeout);
}

bool DownstreamServer::WaitForCancelled(int count, absl::Duration timeout) const {
  return Wait(count, &cancelled_, timeout);
}

DownstreamServer::Answer DownstreamServer::Arrive(const retryd::v1::ProcessRequest& request,
                                                  std::string authorization, size_t* index) {
  absl::MutexLock lock(&mu_);
  *index = calls_.size();
  calls_.push_back(Call{request, std::move(authorization), absl::Now()});
  ++arrived_;
  peak_in_progress_ = std::max(peak_in_progress_, ++in_progress_);
  if (answerer_) {
    if (std::optional<Answer> answer = answerer_(request)) return *std::move(answer);
  }
  const retryd::v1::KafkaRecord& record = request.record();
  const Answer* best = nullptr;
  size_t best_length = 0;
  for (const auto& [prefix, answer] : answers_) {
    const bool matches = record.has_key() ? absl::StartsWith(record.key(), prefix) : prefix.empty();
    if (matches && (best == nullptr || prefix.size() >= best_length)) {
      best = &answer;
      best_length = prefix.size();
    }
  }
  return best == nullptr ? Answer{} : *best;
}

void DownstreamServer::Answered(size_t index) {
  absl::MutexLock lock(&mu_);
  calls_[index].finished = absl::Now();
  --in_progress_;
}

void DownstreamServer::Cancelled(size_t index) {
  absl::MutexLock lock(&mu_);
  // A cancel that comes after the answer went out changed nothing.
  if (calls_[index].cancelled || calls_[index].finished != absl::InfiniteFuture()) return;
  calls_[index].cancelled = true;
  ++cancelled_;
}

}  // namespace retryd::testing
