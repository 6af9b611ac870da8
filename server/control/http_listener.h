// retryd's HTTP listener: one address, plain HTTP or HTTPS, serving a fixed
// set of GET routes (today /metrics; the web console's later). It applies the
// control API's security: the same TLS settings (mutual TLS included) and
// the same bearer-token rule, each route declaring whether it only reads or
// mutates (Access), as the RPCs do. Other paths answer 404, other methods
// on a route 405, a refused token 401 with `WWW-Authenticate: Bearer`.
//
// It runs on cpp-httplib: one thread accepts, and a fixed pool of
// `threads` serves connections, one connection per thread for as long as
// it stays open (a keep-alive connection between requests, a long-lived
// stream for its whole life). A connection beyond the pool waits, accepted,
// until a thread is free. The pool is sized for a few scrapers and a few
// console streams (kDefaultHttpThreads); an idle keep-alive connection
// gives its thread up after kKeepAliveTimeout.
//
//   HttpListener http;
//   http.Route("/metrics", Access::kReadOnly, [&] { return Metrics(); });
//   if (absl::Status s = http.Start(options); !s.ok()) ...
//   ... http.port() ...
//   http.Stop();
//
// Thread-safety: Route() before Start() only; Start() and Stop() from the
// owner; port() from any thread. Handlers run on the pool's
// threads, several at once.
#ifndef RETRYD_SERVER_CONTROL_HTTP_LISTENER_H_
#define RETRYD_SERVER_CONTROL_HTTP_LISTENER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/control/auth.h"
#include "server/control/tls_options.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace retryd::control {

// Threads serving connections: each open connection holds one.
inline constexpr int kDefaultHttpThreads = 8;
// How long an idle keep-alive connection keeps its thread.
inline constexpr absl::Duration kKeepAliveTimeout = absl::Seconds(5);

struct HttpListenerOptions {
  // `host:port` (an IPv6 host in brackets); port 0 picks a free one.
  std::string address;
  // HTTPS when set (mutual TLS with client_ca_pem), else plain HTTP.
  std::optional<TlsOptions> tls;
  BearerTokenAuth auth;
  int threads = kDefaultHttpThreads;  // >= 1.
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpListener {
 public:
  using Handler = std::function<HttpResponse()>;

  HttpListener();
  ~HttpListener();  // Stop()s.

  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Serves GET `path` (exact match) with `handler`, for callers `access`
  // admits. Before Start().
  void Route(std::string path, Access access, Handler handler);

  // Binds and starts serving. INVALID_ARGUMENT for a malformed address, a
  // unix: socket, or TLS material OpenSSL refuses (naming which);
  // UNAVAILABLE when the address cannot be bound, with the reason;
  // FAILED_PRECONDITION if started before. On error nothing keeps running.
  absl::Status Start(HttpListenerOptions options);

  // Stops accepting, waits for requests in progress and for open
  // connections to end (an idle keep-alive connection within
  // kKeepAliveTimeout), and joins every thread. Idempotent; a no-op before
  // Start().
  void Stop();

  // The bound port (the chosen one for port 0); 0 before Start() and after
  // Stop().
  int port() const { return port_.load(); }

 private:
  struct RouteEntry {
    Access access;
    Handler handler;
  };
  // Read by the pool's threads once started, when it no longer changes.
  std::map<std::string, RouteEntry> routes_;

  // The owner's alone (Start() and Stop()).
  std::unique_ptr<httplib::Server> server_;
  std::thread accept_thread_;

  std::atomic<int> port_{0};
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_HTTP_LISTENER_H_
