#include "server/control/control_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpc/health/v1/health.pb.h"
#include "server/common/listen_address.h"
#include "server/common/logging.h"
#include "server/control/proto_convert.h"
#include "server/http/metrics_collector.h"

namespace retryd::control {

using http::ConsoleGateway;
using http::ConsoleOptions;
using http::HttpListener;
using http::HttpListenerOptions;
using http::HttpResponse;
using http::kConsoleHttpThreads;
using http::kMetricsContentType;
using http::MetricsCollector;
using http::MetricsContext;
using http::NewConsoleSecret;
using http::RenderMetrics;

namespace {

bool IsUnix(const std::string& address) { return absl::StartsWith(address, "unix:"); }

std::shared_ptr<grpc::ServerCredentials> Credentials(const std::optional<TlsOptions>& tls) {
  if (!tls.has_value()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      tls->client_ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls->client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls->private_key_pem, tls->cert_chain_pem});
  return grpc::SslServerCredentials(ssl);
}

bool IsLoopback(const std::string& address) {
  if (IsUnix(address)) return true;
  const std::string host = absl::AsciiStrToLower(SplitListenAddress(address).host);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

// A bearer token, or mutual TLS: only clients holding a certificate signed
// by the configured CA get through the handshake.
bool AuthenticatesCallers(const ControlServerOptions& options) {
  return options.auth_token.has_value() ||
         (options.tls.has_value() && !options.tls->client_ca_pem.empty());
}

// Drops every plugin from a ServerBuilder: the reflection plugin, which
// InitProtoReflectionServerBuilderPlugin adds to every server, has no place
// on the health-only listener.
class WithoutPlugins : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->clear();
  }
};

// `address` with port 0 replaced by `bound_port` (a unix: socket as is).
std::string BoundAddress(const std::string& address, int bound_port) {
  if (IsUnix(address)) return address;
  return absl::StrCat(address.substr(0, address.rfind(':')), ":", bound_port);
}

}  // namespace

const std::string& DefaultListenAddress() {
  return v1::Config::descriptor()
      ->FindFieldByName("listen_address")
      ->options()
      .GetExtension(v1::default_text);
}

namespace {

// The health-only listener.
struct HealthListener {
  // Answers UNIMPLEMENTED for every method but health's (its default
  // reactor). gRPC wants a service before it starts a server, and the
  // default health service only comes with the start.
  grpc::CallbackGenericService unknown;
  std::unique_ptr<grpc::Server> server;  // After `unknown`: goes first.
};

// Starts the health-only listener on `address`: plaintext, the default
// health service alone. UNAVAILABLE naming the field if it cannot listen.
absl::Status StartHealthListener(const std::string& address, int* bound_port,
                                 HealthListener& listener) {
  grpc::CallbackGenericService& unknown = listener.unknown;
  std::unique_ptr<grpc::Server>& server = listener.server;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetOption(std::make_unique<WithoutPlugins>());
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), bound_port);
  builder.RegisterCallbackGenericService(&unknown);
  server = builder.BuildAndStart();
  if (server == nullptr || (!IsUnix(address) && *bound_port == 0) ||
      server->GetHealthCheckService() == nullptr) {
    if (server != nullptr) server->Shutdown();
    server.reset();
    return absl::UnavailableError(absl::StrCat("control.health_listen_address: cannot listen on ",
                                               address, ": ", BindFailureReason(address)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateListenAddress(const std::string& address) {
  if (std::optional<std::string> problem = ListenAddressProblem(address)) {
    return absl::InvalidArgumentError(absl::StrCat("listen address: ", *problem));
  }
  return absl::OkStatus();
}

absl::Status CheckAuthenticationForAddress(const ControlServerOptions& options) {
  if (AuthenticatesCallers(options) || options.allow_unauthenticated_remote) {
    return absl::OkStatus();
  }
  constexpr absl::string_view kHowTo =
      "set control.auth_token_file or control.auth_token_env (or mutual TLS with "
      "control.tls_client_ca_file), listen on 127.0.0.1, or, where the network keeps strangers "
      "out, set control.allow_unauthenticated_remote: true";
  if (!IsLoopback(options.listen_address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "control API: listening on ", options.listen_address,
        " (beyond loopback) with no authentication would let anyone who reaches it stop retry "
        "threads; ",
        kHowTo, " (or use a unix: socket)"));
  }
  if (!options.metrics_address.empty() && !IsLoopback(options.metrics_address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics_address: listening on ", options.metrics_address,
        " (beyond loopback) with no authentication would let anyone who reaches it read the "
        "engine's state, and later use the console the HTTP listener serves; ",
        kHowTo));
  }
  return absl::OkStatus();
}

ControlServer::ControlServer(engine::Engine& engine) : engine_(engine) {}

ControlServer::~ControlServer() { Stop(); }

absl::Status ControlServer::Start(ControlServerOptions options) {
  // The phase is claimed under the lock; binding, starting gRPC's threads
  // and, on failure, tearing them down and resolving the address happen
  // without it.
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kNew) {
      return absl::FailedPreconditionError("the control server was started before; it runs once");
    }
    phase_ = Phase::kStarting;
  }
  absl::Status started = StartUnlocked(std::move(options));
  if (!started.ok()) {
    absl::MutexLock lock(&mu_);
    phase_ = Phase::kNew;  // As before the call: nothing was started.
  }
  return started;
}

namespace {

// What Start() refuses before it starts anything.
absl::Status CheckOptions(const ControlServerOptions& options) {
  if (absl::Status s = ValidateListenAddress(options.listen_address); !s.ok()) return s;
  if (options.auth_token.has_value() && options.auth_token->empty()) {
    return absl::InvalidArgumentError("auth token: must not be empty");
  }
  if (options.read_only_requires_token && !options.auth_token.has_value()) {
    return absl::InvalidArgumentError("read_only_requires_token: needs a token");
  }
  if (options.tls.has_value() &&
      (options.tls->cert_chain_pem.empty() || options.tls->private_key_pem.empty())) {
    return absl::InvalidArgumentError("tls: needs both a certificate chain and a private key");
  }
  if (options.console && options.metrics_address.empty()) {
    return absl::InvalidArgumentError(
        "http.console: the console is served on metrics_address, which is not set");
  }
  if (options.console_read_only && !options.console) {
    return absl::InvalidArgumentError("http.console_read_only: needs http.console");
  }
  for (const std::string& host : options.allowed_hosts) {
    if (host.empty() || host.find_first_of(":/ \t") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "http.allowed_hosts: \"", host,
          "\" is not a host name (a name or IPv4 address, no port, no scheme, no slash)"));
    }
  }
  if (!options.metrics_address.empty()) {
    if (absl::StartsWith(options.metrics_address, "unix:")) {
      return absl::InvalidArgumentError("metrics_address: unix: sockets are not supported");
    }
    if (std::optional<std::string> problem = ListenAddressProblem(options.metrics_address)) {
      return absl::InvalidArgumentError(absl::StrCat("metrics_address: ", *problem));
    }
    if (options.metrics_address == options.listen_address &&
        !absl::EndsWith(options.metrics_address, ":0")) {
      return absl::InvalidArgumentError(
          "metrics_address: must differ from the control API's listen_address");
    }
  }
  if (!options.health_listen_address.empty()) {
    if (absl::Status s = ValidateListenAddress(options.health_listen_address); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("health ", s.message()));
    }
  }
  return CheckAuthenticationForAddress(options);
}

// Logs a warning for a listener others can reach without authentication, or
// whose token crosses the network in clear.
void WarnIfExposed(const ControlServerOptions& options) {
  if (!AuthenticatesCallers(options) && !IsLoopback(options.listen_address)) {
    LogWarning("control API: listening on ", options.listen_address,
               " with no authentication (control.allow_unauthenticated_remote: true): anyone "
               "who reaches it can stop retry threads and switch the ordering mode");
  }
  if (options.auth_token.has_value() && !options.tls.has_value() &&
      !IsLoopback(options.listen_address)) {
    LogWarning("control API: a bearer token is configured but the API listens on ",
               options.listen_address,
               " without TLS: the token crosses the network in clear; set control.tls_cert_file "
               "and control.tls_key_file");
  }
  if (options.metrics_address.empty() || IsLoopback(options.metrics_address)) return;
  if (!AuthenticatesCallers(options)) {
    LogWarning("metrics: listening on ", options.metrics_address,
               " with no authentication (control.allow_unauthenticated_remote: true): anyone "
               "who reaches it can read the engine's metrics");
  } else if (options.read_only_requires_token && !options.tls.has_value()) {
    LogWarning("metrics: scrapes must send the bearer token, which crosses the network to ",
               options.metrics_address,
               " in clear without TLS; set control.tls_cert_file and control.tls_key_file");
  }
}

// What the HTTP wing serves on options.metrics_address: /metrics and, with
// options.console, the console. All null without metrics_address.
// Declared so that the listener goes (~HttpListener stops it) before the
// console and the collector its handlers call.
struct HttpWing {
  std::unique_ptr<MetricsCollector> collector;
  std::unique_ptr<ConsoleGateway> console;
  std::unique_ptr<HttpListener> http;
};

std::unique_ptr<ConsoleGateway> NewConsole(const ControlServerOptions& options,
                                           const BearerTokenAuth& auth) {
  ConsoleOptions console_options;
  console_options.read_only = options.console_read_only;
  console_options.token_for_actions = auth.enabled();
  console_options.token_for_reads = auth.enabled() && options.read_only_requires_token;
  console_options.secret = NewConsoleSecret();
  console_options.max_event_streams = options.console_max_event_streams;
  return std::make_unique<ConsoleGateway>(std::move(console_options));
}

HttpListenerOptions HttpOptions(const ControlServerOptions& options, const BearerTokenAuth& auth) {
  HttpListenerOptions http_options;
  http_options.address = options.metrics_address;
  http_options.tls = options.tls;
  http_options.auth = auth;
  http_options.threads = options.http_threads;
  if (options.console) {
    http_options.threads = std::max(
        http_options.threads, std::max(kConsoleHttpThreads, options.console_max_event_streams + 8));
  }
  http_options.allowed_hosts = options.allowed_hosts;
  return http_options;
}

// Builds the HTTP wing and starts its listener; an error (naming
// metrics_address) leaves nothing running.
absl::StatusOr<HttpWing> StartHttpWing(const ControlServerOptions& options,
                                       const BearerTokenAuth& auth, engine::MetricsSampler& sampler,
                                       std::function<MetricsContext()> context) {
  HttpWing wing;
  if (options.metrics_address.empty()) return wing;
  wing.collector = std::make_unique<MetricsCollector>(sampler, std::move(context));
  wing.http = std::make_unique<HttpListener>();
  wing.http->Route("/metrics", Access::kReadOnly, [collector = wing.collector.get()] {
    HttpResponse response;
    response.content_type = kMetricsContentType;
    response.body = RenderMetrics(collector->Collect());
    return response;
  });
  if (options.console) {
    wing.console = NewConsole(options, auth);
    wing.console->Register(*wing.http);
  }
  if (absl::Status s = wing.http->Start(HttpOptions(options, auth)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("metrics_address: ", s.message()));
  }
  return wing;
}

// Builds and starts the control API's server for `service`; UNAVAILABLE,
// with nothing left running, if it cannot listen.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartControlApi(const ControlServerOptions& options,
                                                              ControlService& service,
                                                              int* bound_port) {
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which would let a second retryd
  // share the port silently instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen_address, Credentials(options.tls), bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (!IsUnix(options.listen_address) && *bound_port == 0)) {
    if (server != nullptr) server->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "control API: cannot listen on ", options.listen_address, ": ",
        BindFailureReason(options.listen_address),
        options.tls.has_value() ? "; or the TLS certificate or key was rejected" : ""));
  }
  return server;
}

// NOT_SERVING until the first probe answers; liveness needs no probe.
void ReportInitialHealth(engine::Engine& engine,
                         const std::vector<grpc::HealthCheckServiceInterface*>& health) {
  const bool live = engine.Liveness().ok();
  for (grpc::HealthCheckServiceInterface* h : health) {
    h->SetServingStatus("", false);
    h->SetServingStatus(v1::Control::service_full_name(), false);
    h->SetServingStatus(kLivenessHealthService, live);
    h->SetServingStatus(kReadinessHealthService, false);
    h->SetServingStatus(kDownstreamHealthService, !engine.downstream().down);
  }
}

void LogHttpWing(const ControlServerOptions& options, const HttpWing& wing) {
  if (wing.http == nullptr) return;
  LogInfo("metrics: serving http", options.tls.has_value() ? "s" : "", "://",
          options.metrics_address.substr(0, options.metrics_address.rfind(':')), ":",
          wing.http->port(), "/metrics");
  if (wing.console != nullptr) {
    LogInfo("console: serving http", options.tls.has_value() ? "s" : "", "://",
            options.metrics_address.substr(0, options.metrics_address.rfind(':')), ":",
            wing.http->port(), "/console/", options.console_read_only ? " (read-only)" : "");
  }
}

// The families' context for MetricsCollector, read at each scrape.
std::function<MetricsContext()> MetricsContextOf(engine::Engine& engine,
                                                 const std::atomic<bool>& kafka_reachable) {
  return [&engine, &kafka_reachable, max_held_bytes = engine.options().max_held_bytes] {
    MetricsContext context{RETRYD_VERSION, max_held_bytes, kafka_reachable.load(), {}};
    for (const engine::RetryTier& tier : engine.options().retry.tiers) {
      context.tier_topics.push_back(tier.topic);
    }
    return context;
  };
}

// The health prober's thread, told to stop through `stop` and joined when
// it goes.
struct ProberThread {
  ProberThread() = default;
  ProberThread(const ProberThread&) = delete;
  ProberThread& operator=(const ProberThread&) = delete;
  ~ProberThread() {
    if (thread.joinable()) thread.join();
  }

  absl::Notification stop;
  std::thread thread;  // Not joinable until Publish() starts it.
};

BearerTokenAuth AuthOf(const ControlServerOptions& options) {
  return options.auth_token.has_value()
             ? BearerTokenAuth(*options.auth_token, options.read_only_requires_token)
             : BearerTokenAuth();
}

// The control API's service, for `options` (whose config it takes).
std::unique_ptr<ControlService> NewService(engine::Engine& engine, engine::MetricsSampler& sampler,
                                           const BearerTokenAuth& auth,
                                           const std::atomic<bool>& kafka_reachable,
                                           const ConsoleGateway* console,
                                           ControlServerOptions& options) {
  ControlServiceOptions service_options;
  service_options.config = WithoutSecrets(std::move(options.config));
  service_options.default_operation_timeout = options.default_operation_timeout;
  service_options.max_watchers = options.max_watchers;
  if (console != nullptr) service_options.console_secret = console->secret();
  return std::make_unique<ControlService>(
      engine, sampler, auth, [&kafka_reachable] { return kafka_reachable.load(); },
      std::move(service_options));
}

// Readies gRPC's process-wide parts the servers use.
void PrepareGrpc() {
  // Reflection describes grpc.health.v1.Health from the compiled-in
  // descriptor; touching it keeps the linker from dropping that file.
  grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

}  // namespace

// Members in start order, so that they are destroyed, and stopped, in
// reverse: the prober joined, the health-only listener, the control API's
// server and its service gone, the HTTP listener stopped, the sampler
// stopped. Before that, the destructor's body quiesces, in the order the
// parts must hear of the stop. A part not started (null) is skipped.
struct ControlServer::Listeners {
  Listeners() = default;
  Listeners(const Listeners&) = delete;
  Listeners& operator=(const Listeners&) = delete;
  ~Listeners();

  // What the control API's server gives calls in progress (Stop's grace).
  absl::Duration grace = absl::Seconds(2);
  std::unique_ptr<engine::MetricsSampler> sampler;  // ~MetricsSampler stops it.
  HttpWing wing;                                    // Null parts without metrics_address.
  std::unique_ptr<ControlService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;                                     // The control API's bound port.
  std::unique_ptr<HealthListener> health_listener;  // Null without one.
  int health_port = 0;
  ProberThread prober;
};

ControlServer::Listeners::~Listeners() {
  prober.stop.Notify();
  // No console call begins from here on, and its event streams end.
  if (wing.console != nullptr) wing.console->Close();
  // Every health check and watch sees NOT_SERVING from here on, on both
  // listeners; the health-only one answers so until the control API is
  // down.
  grpc::Server* health_only = health_listener ? health_listener->server.get() : nullptr;
  for (grpc::Server* s : {server.get(), health_only}) {
    if (s == nullptr) continue;
    if (grpc::HealthCheckServiceInterface* health = s->GetHealthCheckService()) health->Shutdown();
  }
  if (service != nullptr) service->BeginShutdown();
  if (server != nullptr) {
    server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server->Wait();
  }
  if (health_only != nullptr) {
    // Only health calls: a Watch is ended at once.
    health_only->Shutdown(absl::ToChronoTime(absl::Now()));
    health_only->Wait();
  }
  if (service != nullptr) service->Shutdown();
  // The members go now, in reverse: the prober is joined (a probe in
  // progress may take up to probe_timeout) before the servers and their
  // health services go, and the HTTP listener stops before the collector
  // and the sampler it reads.
}

// Starts the parts in order into a Listeners; should one fail, returning
// destroys the Listeners, which stops those started before it.
absl::Status ControlServer::StartUnlocked(ControlServerOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  PrepareGrpc();
  auto started = std::make_unique<Listeners>();
  started->sampler = std::make_unique<engine::MetricsSampler>(engine_, options.sample_tick);
  started->sampler->Start();
  const BearerTokenAuth auth = AuthOf(options);
  // The HTTP listener first: gRPC's server is the harder one to take back.
  absl::StatusOr<HttpWing> wing =
      StartHttpWing(options, auth, *started->sampler, MetricsContextOf(engine_, kafka_reachable_));
  if (!wing.ok()) return wing.status();
  started->wing = std::move(*wing);
  started->service = NewService(engine_, *started->sampler, auth, kafka_reachable_,
                                started->wing.console.get(), options);
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      StartControlApi(options, *started->service, &started->port);
  if (!server.ok()) return server.status();
  started->server = std::move(*server);
  if (!options.health_listen_address.empty()) {
    started->health_listener = std::make_unique<HealthListener>();
    if (absl::Status s = StartHealthListener(options.health_listen_address, &started->health_port,
                                             *started->health_listener);
        !s.ok()) {
      return s;
    }
  }
  Publish(options, std::move(started));
  return absl::OkStatus();
}

void ControlServer::Publish(const ControlServerOptions& options,
                            std::unique_ptr<Listeners> listeners) {
  std::vector<grpc::HealthCheckServiceInterface*> health = {
      listeners->server->GetHealthCheckService()};
  if (listeners->health_listener != nullptr) {
    health.push_back(listeners->health_listener->server->GetHealthCheckService());
  }
  ReportInitialHealth(engine_, health);
  // The console calls the service through the server itself, in process.
  if (listeners->wing.console != nullptr) {
    listeners->wing.console->SetChannel(
        listeners->server->InProcessChannel(grpc::ChannelArguments()));
  }
  WarnIfExposed(options);
  LogHttpWing(options, listeners->wing);
  absl::MutexLock lock(&mu_);
  address_ = BoundAddress(options.listen_address, listeners->port);
  port_.store(IsUnix(options.listen_address) ? 0 : listeners->port);
  if (listeners->health_listener != nullptr) {
    health_address_ = BoundAddress(options.health_listen_address, listeners->health_port);
    health_port_.store(IsUnix(options.health_listen_address) ? 0 : listeners->health_port);
    LogInfo("control: health alone (plaintext) on ", health_address_);
  }
  listeners->prober.thread =
      std::thread([this, health = std::move(health), interval = options.probe_interval,
                   timeout = options.probe_timeout, &stop = listeners->prober.stop]() mutable {
        ProbeLoop(std::move(health), interval, timeout, stop);
      });
  metrics_port_.store(listeners->wing.http != nullptr ? listeners->wing.http->port() : 0);
  // Redrives a stopped or killed retryd left unfinished go on, in the
  // background, now that their operations can be watched and cancelled.
  listeners->service->ResumeRedrives();
  listeners_ = std::move(listeners);
  phase_ = Phase::kRunning;
}

void ControlServer::Stop(absl::Duration grace) {
  // Taken out under the lock, then stopped without it: the shutdown waits
  // for calls in progress and for the prober's Kafka request.
  std::unique_ptr<Listeners> listeners;
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    // A Start() in progress finishes first, so that what it starts is stopped.
    mu_.Await(absl::Condition(
        +[](Phase* phase) { return *phase != Phase::kStarting; }, &phase_));
    if (phase_ != Phase::kRunning) return;
    phase_ = Phase::kStopped;
    listeners = std::move(listeners_);
    address = address_;
  }
  listeners->grace = grace;
  listeners.reset();  // ~Listeners: the teardown.
  health_port_.store(0);
  metrics_port_.store(0);
  port_.store(0);
  LogInfo("control API on ", address, " stopped");
}

std::string ControlServer::address() const {
  absl::MutexLock lock(&mu_);
  return address_;
}

std::string ControlServer::health_address() const {
  absl::MutexLock lock(&mu_);
  return health_address_;
}

namespace {

// What the prober last told the health services, so that it sets (and
// logs) a status only when it changes.
class HealthReports {
 public:
  explicit HealthReports(std::vector<grpc::HealthCheckServiceInterface*> health)
      : health_(std::move(health)) {}

  // "" and retryd.v1.Control: SERVING while Kafka answers, no thread failed
  // and the engine runs (or drains).
  void Overall(const absl::Status& probe, const absl::Status& threads, engine::EngineState state) {
    const bool serving =
        probe.ok() && threads.ok() &&
        (state == engine::EngineState::kRunning || state == engine::EngineState::kDraining);
    if (overall_ == serving) return;
    Set("", serving);
    Set(v1::Control::service_full_name(), serving);
    if (serving) {
      LogInfo("control: health SERVING (engine ", engine::EngineStateName(state),
              ", Kafka answers)");
    } else {
      LogWarning("control: health NOT_SERVING: ",
                 !probe.ok()     ? absl::StrCat("Kafka did not answer: ", probe.message())
                 : !threads.ok() ? std::string(threads.message())
                                 : absl::StrCat("the engine is ", engine::EngineStateName(state)));
    }
    overall_ = serving;
  }

  void Downstream(bool up) {
    if (downstream_ == up) return;
    Set(kDownstreamHealthService, up);
    downstream_ = up;
  }

  // Kafka's faults and the downstream's take an instance out of the
  // Service (readiness), never restart it (liveness).
  void Readiness(const absl::Status& probe, const absl::Status& engine_ready) {
    const bool ready = probe.ok() && engine_ready.ok();
    if (ready_ == ready) return;
    Set(kReadinessHealthService, ready);
    if (ready) {
      LogInfo("control: ", kReadinessHealthService, " SERVING");
    } else {
      LogWarning("control: ", kReadinessHealthService, " NOT_SERVING: ",
                 !engine_ready.ok() ? std::string(engine_ready.message())
                                    : absl::StrCat("Kafka did not answer: ", probe.message()));
    }
    ready_ = ready;
  }

  void Liveness(const absl::Status& live) {
    if (live_ == live.ok()) return;
    Set(kLivenessHealthService, live.ok());
    if (live.ok()) {
      LogInfo("control: ", kLivenessHealthService, " SERVING");
    } else {
      LogError("control: ", kLivenessHealthService, " NOT_SERVING: ", live.message());
    }
    live_ = live.ok();
  }

 private:
  void Set(const std::string& service, bool serving) {
    for (grpc::HealthCheckServiceInterface* h : health_) h->SetServingStatus(service, serving);
  }

  const std::vector<grpc::HealthCheckServiceInterface*> health_;
  std::optional<bool> overall_;
  std::optional<bool> downstream_;
  std::optional<bool> ready_;
  std::optional<bool> live_;
};

// Measures the retry backlog that status and metrics report, here, off
// every request path, with what is left of the round until `deadline`.
void MeasureRetryBacklog(engine::Engine& engine, absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return;
  if (absl::StatusOr<int64_t> backlog = engine.MeasureRetryBacklog(left); !backlog.ok()) {
    LogDebug("control: retry backlog not measured: ", backlog.status().message());
  }
}

}  // namespace

void ControlServer::ProbeLoop(std::vector<grpc::HealthCheckServiceInterface*> health,
                              absl::Duration interval, absl::Duration timeout,
                              const absl::Notification& stop) {
  SetThreadName("control-health");
  SetThreadComponent("control");
  HealthReports reports(std::move(health));
  do {
    // One timeout for the whole round, so that a round (and a Stop waiting
    // for it) takes at most `timeout`, not one per request.
    const absl::Time round_deadline = absl::Now() + timeout;
    const absl::Status probe = engine_.ProbeKafka(timeout);
    const engine::EngineState state = engine_.state();
    if (probe.ok()) MeasureRetryBacklog(engine_, round_deadline);
    kafka_reachable_.store(probe.ok());
    reports.Overall(probe, engine_.ThreadFailure(), state);
    reports.Downstream(!engine_.downstream().down);
    reports.Readiness(probe, engine_.Readiness());
    reports.Liveness(engine_.Liveness());
  } while (!stop.WaitForNotificationWithTimeout(interval));
}

}  // namespace retryd::control
