#include "server/processors/grpc_processor.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/common/logging.h"
#include "server/common/read_file.h"

namespace retryd {
namespace {

// Each TLS file is PEM, read once at start-up (config.proto).
constexpr size_t kMaxTlsFileBytes = 1 << 20;

// Every address the target resolves to takes calls in turn, rather than
// gRPC's default of the first one that connects.
constexpr char kRoundRobin[] = R"({"loadBalancingConfig":[{"round_robin":{}}]})";

// How long one connection attempt to the downstream may take (gRPC's default).
constexpr int kConnectTimeoutMs = 20'000;

void FillHeader(const Header& header, retryd::v1::RecordHeader& out) {
  out.set_key(header.key);
  if (header.value.has_value()) out.set_value(*header.value);
}

retryd::v1::ProcessRequest RequestOf(const Record& record, const engine::AttemptInfo& info) {
  retryd::v1::ProcessRequest request;
  retryd::v1::KafkaRecord& r = *request.mutable_record();
  r.set_topic(record.topic);
  r.set_partition(record.partition);
  r.set_offset(record.offset);
  r.set_timestamp_ms(record.timestamp_ms);
  if (record.key.has_value()) r.set_key(*record.key);
  if (record.value.has_value()) r.set_value(*record.value);
  for (const Header& h : record.headers) FillHeader(h, *r.add_headers());
  request.set_attempt(info.attempt);
  request.set_first_failure_ms(info.first_failure_ms);
  return request;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CredentialsOf(
    const retryd::v1::GrpcProcessorConfig& config) {
  if (!config.has_tls()) return grpc::InsecureChannelCredentials();
  const retryd::v1::GrpcTlsConfig& tls = config.tls();
  grpc::SslCredentialsOptions options;
  struct File {
    const char* field;
    const std::string& path;
    std::string* contents;
  };
  for (const File& file : {File{"ca_file", tls.ca_file(), &options.pem_root_certs},
                           File{"cert_file", tls.cert_file(), &options.pem_cert_chain},
                           File{"key_file", tls.key_file(), &options.pem_private_key}}) {
    if (file.path.empty()) continue;
    absl::StatusOr<std::string> contents = ReadFileToString(file.path, kMaxTlsFileBytes);
    if (!contents.ok()) {
      return absl::Status(contents.status().code(),
                          absl::StrCat("grpc.tls.", file.field, ": ", contents.status().message()));
    }
    *file.contents = *std::move(contents);
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::unique_ptr<BearerToken>> TokenOf(
    const retryd::v1::GrpcProcessorConfig& config) {
  absl::StatusOr<std::unique_ptr<BearerToken>> token;
  const char* field = "";
  if (!config.token_file().empty()) {
    field = "token_file";
    token = BearerToken::FromFile(config.token_file());
  } else if (!config.token_env().empty()) {
    field = "token_env";
    token = BearerToken::FromEnv(config.token_env());
  } else {
    return nullptr;
  }
  if (!token.ok()) {
    return absl::Status(token.status().code(),
                        absl::StrCat("grpc.", field, ": ", token.status().message()));
  }
  return token;
}

// The one RPC of processor.proto, as gRPC names it on the wire.
constexpr char kMethod[] = "/retryd.v1.RecordProcessor/Process";

uint32_t OrDefault(uint32_t value, uint32_t fallback) { return value == 0 ? fallback : value; }

}  // namespace

// One call, from Start to its completion. Shared between the completion
// callback (which holds `self` until it runs) and the canceller (which may
// hold it while it cancels), so whichever lets go last frees it.
struct GrpcProcessor::Call {
  grpc::ClientContext context;
  retryd::v1::ProcessRequest request;
  grpc::ByteBuffer response;
  engine::ProcessDone done;
  // Kept for the call: the subscription points into it.
  std::shared_ptr<engine::Cancellation> cancel;
  std::optional<engine::Cancellation::Subscription> subscription;
  std::shared_ptr<Call> self;  // Released by the completion callback.
};

// Cancels calls on its own thread. A Cancellation runs its wake-ups under
// its lock, and ClientContext::TryCancel may run the call's completion
// inline, which frees the call and with it its subscription, whose
// destructor takes that same lock: so TryCancel must not run in a wake-up.
class GrpcProcessor::Canceller {
 public:
  Canceller() : thread_([this] { Run(); }) {}
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;

  // Cancels what is posted, then stops.
  ~Canceller() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

  // Never blocks for long: safe inside a Cancellation's wake-up.
  void Post(std::weak_ptr<Call> call) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(call));
  }

 private:
  void Run() {
    SetThreadName("grpc-cancel");
    SetThreadComponent("processor");
    for (;;) {
      std::weak_ptr<Call> next;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Canceller::HasWork));
        if (queue_.empty()) return;
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      // A call that already ended is gone, and needs nothing.
      if (std::shared_ptr<Call> call = next.lock()) call->context.TryCancel();
    }
  }

  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); }

  absl::Mutex mu_;  // Guards the fields below.
  std::deque<std::weak_ptr<Call>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once the fields above exist.
};

// Asks the downstream's grpc.health.v1 service on its own thread, every
// interval and whenever Kick() asks, and keeps the last answer in atomics
// for health() to read. Blocking calls on its own thread, with a deadline,
// holding no lock; destroying it cancels the call in progress.
class GrpcProcessor::HealthChecker {
 public:
  HealthChecker(std::shared_ptr<grpc::Channel> channel, BearerToken* token, absl::Duration interval)
      : stub_(grpc::health::v1::Health::NewStub(std::move(channel))),
        token_(token),
        interval_(interval),
        thread_([this] { Run(); }) {}
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  ~HealthChecker() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (current_ != nullptr) current_->TryCancel();
    }
    thread_.join();
  }

  // Asks again now (a call was refused). Never blocks for long.
  void Kick() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    kicked_ = true;
  }

  engine::DownstreamHealth::Serving serving() const {
    return static_cast<engine::DownstreamHealth::Serving>(serving_.load(std::memory_order_relaxed));
  }
  int64_t checks() const { return checks_.load(std::memory_order_relaxed); }

 private:
  // The service name asked for first; a downstream that does not know it
  // (NOT_FOUND) is asked for the server as a whole ("").
  static constexpr char kService[] = "retryd.v1.RecordProcessor";
  static constexpr absl::Duration kMaxWait = absl::Seconds(5);

  void Run() {
    SetThreadName("grpc-health");
    SetThreadComponent("processor");
    std::string service = kService;
    for (;;) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           absl::ToChronoMilliseconds(std::min(interval_, kMaxWait)));
      if (token_ != nullptr) context.AddMetadata("authorization", "Bearer " + token_->Get());
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        current_ = &context;
        kicked_ = false;
      }
      grpc::health::v1::HealthCheckRequest request;
      request.set_service(service);
      grpc::health::v1::HealthCheckResponse response;
      const grpc::Status status = stub_->Check(&context, request, &response);
      {
        absl::MutexLock lock(&mu_);
        current_ = nullptr;
      }
      Take(status, response, service);
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || kicked_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), interval_);
      if (stopping_) return;
    }
  }

  void Take(const grpc::Status& status, const grpc::health::v1::HealthCheckResponse& response,
            std::string& service) {
    using Serving = engine::DownstreamHealth::Serving;
    if (status.error_code() == grpc::StatusCode::NOT_FOUND && !service.empty()) {
      service.clear();  // Asked for the server as a whole from now on.
      serving_.store(static_cast<int>(Serving::kUnknown), std::memory_order_relaxed);
      return;
    }
    if (!status.ok()) {
      // No health service (UNIMPLEMENTED), or no answer: the channel and
      // the answers to calls say the rest.
      serving_.store(static_cast<int>(Serving::kUnknown), std::memory_order_relaxed);
      return;
    }
    Serving serving = Serving::kUnknown;
    if (response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      serving = Serving::kServing;
    } else if (response.status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING) {
      serving = Serving::kNotServing;
    }
    serving_.store(static_cast<int>(serving), std::memory_order_relaxed);
    // After the status: a reader that sees the new count sees its answer.
    checks_.fetch_add(1, std::memory_order_release);
  }

  const std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  BearerToken* const token_;  // Null: no token. The processor's (thread-safe).
  const absl::Duration interval_;
  std::atomic<int> serving_{static_cast<int>(engine::DownstreamHealth::Serving::kUnknown)};
  std::atomic<int64_t> checks_{0};
  absl::Mutex mu_;  // Guards the fields below.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* current_ ABSL_GUARDED_BY(mu_) = nullptr;  // The check in progress.
  std::thread thread_;  // Last: starts once the fields above exist.
};

absl::StatusOr<std::unique_ptr<GrpcProcessor>> GrpcProcessor::Create(
    const retryd::v1::GrpcProcessorConfig& config) {
  if (config.target().empty()) {
    return absl::InvalidArgumentError("grpc.target: required: the downstream's address");
  }
  absl::StatusOr<StatusTable> table = StatusTable::WithOverrides(config.status_map());
  if (!table.ok()) {
    return absl::Status(table.status().code(), absl::StrCat("grpc.", table.status().message()));
  }
  absl::StatusOr<std::unique_ptr<BearerToken>> token = TokenOf(config);
  if (!token.ok()) return token.status();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = CredentialsOf(config);
  if (!credentials.ok()) return credentials.status();

  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(kRoundRobin);
  // gRPC reconnects to an unreachable address with backoff up to 120 s by
  // default, failing calls at once meanwhile: a downstream back from an
  // outage would wait that long for retryd's probes to get through.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // Despite its name, the least time one connection attempt (TCP, TLS,
  // HTTP/2 settings) is given before it counts as failed; not the backoff.
  // Short, a slow link or a busy downstream never connects and every call
  // fails UNAVAILABLE meanwhile: keep gRPC's own 20 s.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kConnectTimeoutMs);
  args.SetMaxReceiveMessageSize(
      static_cast<int>(OrDefault(config.max_response_bytes(), kDefaultMaxResponseBytes)));
  if (config.has_tls() && !config.tls().server_name().empty()) {
    args.SetSslTargetNameOverride(config.tls().server_name());
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(config.target(), *credentials, args);
  return std::unique_ptr<GrpcProcessor>(
      new GrpcProcessor(config, *std::move(table), *std::move(token), std::move(channel)));
}

GrpcProcessor::GrpcProcessor(const retryd::v1::GrpcProcessorConfig& config, StatusTable table,
                             std::unique_ptr<BearerToken> token,
                             std::shared_ptr<grpc::Channel> channel)
    : deadline_ms_(OrDefault(config.deadline_ms(), kDefaultDeadlineMs)),
      max_concurrent_calls_(
          static_cast<int>(OrDefault(config.max_concurrent_calls(), kDefaultMaxConcurrentCalls))),
      table_(std::move(table)),
      token_(std::move(token)),
      channel_(channel),
      stub_(std::make_unique<Stub>(std::move(channel))),
      canceller_(std::make_unique<Canceller>()),
      health_checker_(std::make_unique<HealthChecker>(
          channel_, token_.get(),
          absl::Milliseconds(
              OrDefault(config.health_check_interval_ms(), kDefaultHealthCheckIntervalMs)))) {}

engine::DownstreamHealth GrpcProcessor::health() const {
  engine::DownstreamHealth health;
  // Read first: a reader that sees a new count sees its answer (see Take).
  health.checks = health_checker_->checks();
  health.serving = health_checker_->serving();
  switch (channel_->GetState(/*try_to_connect=*/false)) {
    case GRPC_CHANNEL_READY:
      health.channel = engine::DownstreamHealth::Channel::kReady;
      break;
    case GRPC_CHANNEL_CONNECTING:
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      health.channel = engine::DownstreamHealth::Channel::kNotReady;
      break;
    default:  // IDLE (no call for a while) or SHUTDOWN: nothing known.
      break;
  }
  return health;
}

GrpcProcessor::~GrpcProcessor() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int64_t* in_flight) { return *in_flight == 0; }, &calls_in_flight_));
  }
  health_checker_.reset();
  canceller_.reset();
}

engine::Outcome GrpcProcessor::Process(const Record& record, int attempt) {
  absl::Notification finished;
  engine::Outcome outcome;
  Start(record, engine::AttemptInfo{attempt, 0}, nullptr, [&](engine::Outcome o) {
    outcome = std::move(o);
    finished.Notify();
  });
  finished.WaitForNotification();
  return outcome;
}

void GrpcProcessor::Start(const Record& record, const engine::AttemptInfo& info,
                          std::shared_ptr<engine::Cancellation> cancel, engine::ProcessDone done) {
  auto call = std::make_shared<Call>();
  call->request = RequestOf(record, info);
  call->done = std::move(done);
  call->context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::milliseconds(deadline_ms_));
  if (token_ != nullptr) call->context.AddMetadata("authorization", "Bearer " + token_->Get());
  if (cancel != nullptr) {
    call->subscription.emplace(
        cancel->OnCancel([weak = std::weak_ptr<Call>(call), canceller = canceller_.get()] {
          canceller->Post(weak);
        }));
    // Cancelled before it subscribed: no wake-up comes. Not yet started, the
    // call cannot complete inside TryCancel; it starts cancelled.
    if (cancel->cancelled()) call->context.TryCancel();
    call->cancel = std::move(cancel);
  }
  {
    absl::MutexLock lock(&mu_);
    ++calls_in_flight_;
  }
  Call* raw = call.get();
  raw->self = std::move(call);
  // The completion may run before this returns, on this thread: `raw` is
  // not touched after the call starts.
  stub_->UnaryCall(&raw->context, kMethod, grpc::StubOptions(), &raw->request, &raw->response,
                   [this, raw](grpc::Status status) { Finish(*raw, status); });
}

void GrpcProcessor::Finish(Call& call, const grpc::Status& status) {
  std::shared_ptr<Call> self = std::move(call.self);
  // The wake-up points at canceller_: it must be gone before the processor
  // may be.
  call.subscription.reset();
  std::optional<std::string> bytes;
  std::vector<grpc::Slice> slices;
  if (status.ok() && call.response.Valid() && call.response.Dump(&slices).ok()) {
    bytes.emplace();
    for (const grpc::Slice& slice : slices) {
      bytes->append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  engine::Outcome outcome = OutcomeOfAnswer(table_, status.error_code(), status.error_message(),
                                            call.request, bytes.has_value() ? &*bytes : nullptr);
  if (outcome.kind != engine::Outcome::Kind::kOk) {
    outcome.error_reason = ErrorReasonOf(status.error_details());
  }
  // A refusal: the health service says, before the record is tried again,
  // whether the downstream as a whole is down.
  if (outcome.kind == engine::Outcome::Kind::kUnavailable) health_checker_->Kick();
  std::move(call.done)(std::move(outcome));
  // Frees the call, unless the canceller holds it for a moment longer.
  self.reset();
  absl::MutexLock lock(&mu_);
  --calls_in_flight_;
}

}  // namespace retryd
