// The control plane's gRPC server: retryd.v1.Control, the standard health
// service and server reflection on one listening address; optionally a
// second, plaintext listener that serves the health service alone (for the
// kubelet's gRPC probes, which cannot speak TLS); and, when metrics_address
// is set, the HTTP listener serving Prometheus' /metrics with the same TLS
// and token rules.
//
// It owns the grpc::Servers, the ControlService, the MetricsSampler every
// WatchMetrics stream and scrape shares, the HttpListener, and a health
// prober thread. The prober asks Kafka for its brokers every
// `probe_interval` and reports, on both listeners' health services:
//  * "" and "retryd.v1.Control": SERVING only while the engine is RUNNING
//    (or DRAINING), no thread has FAILED and the last probe answered;
//  * kLivenessHealthService: SERVING while every thread's loop turns
//    (Engine::Liveness), whatever Kafka and the downstream do;
//  * kReadinessHealthService: SERVING while the engine is ready
//    (Engine::Readiness: started, its groups joined, not stopping) and the
//    last probe answered;
//  * kDownstreamHealthService: the processor's downstream.
// Everything is NOT_SERVING from Stop() on. Health and reflection never
// need the bearer token.
//
//   ControlServer server(engine);
//   if (absl::Status s = server.Start(options); !s.ok()) ...
//   ... server.port() ...
//   server.Stop();  // before engine.Stop()
//
// Thread-safety: thread-safe. Start() and Stop() serialise; port() may be
// read from any thread. The engine must outlive the server.
#ifndef RETRYD_SERVER_CONTROL_CONTROL_SERVER_H_
#define RETRYD_SERVER_CONTROL_CONTROL_SERVER_H_

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "retryd/v1/config.pb.h"
#include "server/control/control_service.h"
#include "server/control/tls_options.h"
#include "server/engine/api/engine.h"
#include "server/engine/metrics_sampler.h"
#include "server/http/console_gateway.h"
#include "server/http/http_listener.h"

namespace retryd::http {
class MetricsCollector;  // server/http/metrics_collector.h
}  // namespace retryd::http

namespace retryd::control {

// retryd.v1.Config.listen_address's default, as config.proto declares it
// (its (default_text) option).
const std::string& DefaultListenAddress();

struct ControlServerOptions {
  // `host:port` (port 0 picks a free one; see port()) or `unix:<path>`.
  std::string listen_address = DefaultListenAddress();
  // The bearer token, if any. A secret: never logged.
  std::optional<std::string> auth_token;
  // Whether GetStatus and WatchMetrics need the token too. Needs a token.
  bool read_only_requires_token = false;
  // TLS when set, else plaintext.
  std::optional<TlsOptions> tls;
  // Whether the server may listen beyond loopback with neither a token nor
  // mutual TLS (see CheckAuthenticationForAddress).
  bool allow_unauthenticated_remote = false;
  // Empty: none. Otherwise `host:port` (port 0 picks a free one; see
  // health_port()) or `unix:<path>` of a plaintext listener serving only
  // grpc.health.v1.Health, with no authentication.
  std::string health_listen_address;
  // The effective config GetStatus reports.
  retryd::v1::Config config;

  // Health: how often Kafka is probed, and how long a probe may take.
  absl::Duration probe_interval = absl::Seconds(2);
  absl::Duration probe_timeout = absl::Seconds(3);
  // The metrics sampler's tick: the finest interval WatchMetrics sees.
  absl::Duration sample_tick = absl::Milliseconds(100);
  // Engine deadline for a blocking RPC whose call has no deadline.
  absl::Duration default_operation_timeout = absl::Minutes(5);
  // Open WatchMetrics streams at most.
  int max_watchers = 256;

  // The HTTP listener's `host:port` for GET /metrics; empty: none. Takes
  // `tls`, the token (read-only access: needed with
  // read_only_requires_token) and the loopback rule as the gRPC address does.
  std::string metrics_address;
  // Its threads: each open connection (a scraper's keep-alive connection, a
  // stream) holds one; more connections wait.
  int http_threads = http::kDefaultHttpThreads;
  // The web console and its JSON API on metrics_address (ConsoleGateway),
  // which it needs; read-only when console_read_only. Hosts they answer to
  // beyond the address's and loopback's: allowed_hosts.
  bool console = false;
  bool console_read_only = false;
  // With the console on, the listener has at least kConsoleHttpThreads
  // threads, and this many event streams at most.
  int console_max_event_streams = http::kDefaultConsoleEventStreams;
  std::vector<std::string> allowed_hosts;
};

// The health service name that reports the processor's downstream:
// NOT_SERVING while retryd takes it for down (see DownstreamGate). Apart from
// "" and retryd.v1.Control, so that a liveness probe does not restart retryd
// for a downstream outage.
inline constexpr char kDownstreamHealthService[] = "retryd.downstream";
// "Restart me": NOT_SERVING once a thread's loop has stalled
// (Engine::Liveness). For a liveness probe.
inline constexpr char kLivenessHealthService[] = "retryd.liveness";
// "Send me no work": NOT_SERVING until the engine has started and joined
// its groups, while Kafka does not answer, and once it stops. For a
// readiness probe.
inline constexpr char kReadinessHealthService[] = "retryd.readiness";

class ControlServer {
 public:
  explicit ControlServer(engine::Engine& engine);
  ~ControlServer();  // Stop()s.

  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Validates `options`, starts the sampler, binds and starts serving, then
  // the health prober. INVALID_ARGUMENT for a malformed address,
  // incomplete TLS/token options, or an unauthenticated address beyond
  // loopback (CheckAuthenticationForAddress); UNAVAILABLE when the address cannot be
  // bound (in use, not an address of this host), with the reason (naming
  // control.health_listen_address for the health-only listener's);
  // FAILED_PRECONDITION if already started. On error nothing keeps running.
  absl::Status Start(ControlServerOptions options) ABSL_LOCKS_EXCLUDED(mu_);

  // Reports NOT_SERVING, ends every WatchMetrics stream, refuses new calls,
  // waits up to `grace` for calls in progress, then cancels the rest; a
  // blocking operation already inside the engine runs to its own deadline.
  // Then joins the prober (a probe in progress may take up to
  // probe_timeout) and stops the sampler. Idempotent; a no-op before
  // Start().
  void Stop(absl::Duration grace = absl::Seconds(2)) ABSL_LOCKS_EXCLUDED(mu_);

  // The bound TCP port (the chosen one for port 0); 0 before Start(), for a
  // unix socket, and after Stop().
  int port() const { return port_.load(); }
  // The HTTP listener's bound port; 0 without metrics_address, before
  // Start() and after Stop().
  int metrics_port() const { return metrics_port_.load(); }
  // The address as given, with port 0 replaced by the bound port.
  std::string address() const ABSL_LOCKS_EXCLUDED(mu_);
  // The same for the health-only listener: 0 and "" without one.
  int health_port() const { return health_port_.load(); }
  std::string health_address() const ABSL_LOCKS_EXCLUDED(mu_);

  // The prober's last answer.
  bool kafka_reachable() const { return kafka_reachable_.load(); }

 private:
  // The composition root of a started server: every part Start() starts,
  // each owned by a member whose destructor stops it, in reverse start order
  // (control_server.cc). The one teardown: Stop() destroys the published
  // one, and an error half-way through StartUnlocked() unwinds the parts
  // started so far through the same destructor.
  struct Listeners;
  // Start() after it claimed the kStarting phase: validates, binds and
  // starts the parts into a Listeners without holding mu_, then Publish()es
  // it; on error the Listeners goes, and with it what it started.
  absl::Status StartUnlocked(ControlServerOptions options) ABSL_LOCKS_EXCLUDED(mu_);
  // Sets the health statuses, hands the console its channel, logs where
  // each listener serves, starts the prober and keeps `listeners` under mu_
  // for Stop().
  void Publish(const ControlServerOptions& options, std::unique_ptr<Listeners> listeners)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The prober thread: probes, then reports through `health` on change,
  // until `stop` is notified. `health`: the health service of each
  // listener, all told the same.
  void ProbeLoop(std::vector<grpc::HealthCheckServiceInterface*> health, absl::Duration interval,
                 absl::Duration timeout, const absl::Notification& stop);

  engine::Engine& engine_;
  std::atomic<int> port_{0};
  std::atomic<int> metrics_port_{0};
  std::atomic<int> health_port_{0};
  std::atomic<bool> kafka_reachable_{false};

  mutable absl::Mutex mu_;  // Guards the fields below; never held while stopping them.
  enum class Phase { kNew, kStarting, kRunning, kStopped };
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kNew;
  std::string address_ ABSL_GUARDED_BY(mu_);
  std::string health_address_ ABSL_GUARDED_BY(mu_);  // Empty without the health-only listener.
  std::unique_ptr<Listeners> listeners_ ABSL_GUARDED_BY(mu_);  // Null unless kRunning.
};

// Checks a listen address: `host:port` (IPv6 hosts in brackets, port
// 0..65535) or `unix:<path>`. INVALID_ARGUMENT saying what is wrong.
absl::Status ValidateListenAddress(const std::string& address);

// Refuses, with INVALID_ARGUMENT saying what to set, a listen address or
// metrics address beyond loopback (anything but 127.x, [::1], localhost and
// unix: sockets) when callers need no authentication, neither a bearer token
// nor mutual TLS, unless allow_unauthenticated_remote says so: anyone who
// reaches the port could stop retry threads (or, for the HTTP listener, use
// what it serves). Start() checks it; so does the config's conversion, so
// that retryd stops before it starts anything.
absl::Status CheckAuthenticationForAddress(const ControlServerOptions& options);

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_CONTROL_SERVER_H_
