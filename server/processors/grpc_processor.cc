#include "server/processors/grpc_processor.h"

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

retryd::v1::ProcessRequest RequestOf(const Record& record, const AttemptInfo& info) {
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
  ProcessDone done;
  // Kept for the call: the subscription points into it.
  std::shared_ptr<Cancellation> cancel;
  std::optional<Cancellation::Subscription> subscription;
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
  return std::unique_ptr<GrpcProcessor>(new GrpcProcessor(
      config, *std::move(table), *std::move(token), std::make_unique<Stub>(std::move(channel))));
}

GrpcProcessor::GrpcProcessor(const retryd::v1::GrpcProcessorConfig& config, StatusTable table,
                             std::unique_ptr<BearerToken> token, std::unique_ptr<Stub> stub)
    : deadline_ms_(OrDefault(config.deadline_ms(), kDefaultDeadlineMs)),
      max_concurrent_calls_(
          static_cast<int>(OrDefault(config.max_concurrent_calls(), kDefaultMaxConcurrentCalls))),
      table_(std::move(table)),
      token_(std::move(token)),
      stub_(std::move(stub)),
      canceller_(std::make_unique<Canceller>()) {}

GrpcProcessor::~GrpcProcessor() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int64_t* in_flight) { return *in_flight == 0; }, &calls_in_flight_));
  }
  canceller_.reset();
}

Outcome GrpcProcessor::Process(const Record& record, int attempt) {
  absl::Notification finished;
  Outcome outcome;
  Start(record, AttemptInfo{attempt, 0}, nullptr, [&](Outcome o) {
    outcome = std::move(o);
    finished.Notify();
  });
  finished.WaitForNotification();
  return outcome;
}

void GrpcProcessor::Start(const Record& record, const AttemptInfo& info,
                          std::shared_ptr<Cancellation> cancel, ProcessDone done) {
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
  std::move(call.done)(OutcomeOfAnswer(table_, status.error_code(), status.error_message(),
                                       call.request, bytes.has_value() ? &*bytes : nullptr));
  // Frees the call, unless the canceller holds it for a moment longer.
  self.reset();
  absl::MutexLock lock(&mu_);
  --calls_in_flight_;
}

}  // namespace retryd
