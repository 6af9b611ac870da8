// retryd's HTTP listener: one address, plain HTTP or HTTPS, serving a fixed
// set of routes (/metrics; the console's pages and JSON API). It applies the
// control API's security: the same TLS settings (mutual TLS included) and
// the same bearer-token rule, each route declaring whether it only reads or
// mutates (Access), as the RPCs do. Other paths answer 404, other methods
// on a route 405, a refused token 401 with `WWW-Authenticate: Bearer`. A
// route may ask for its Host header to be checked (RouteOptions::check_host):
// then a request naming a host other than the listen address's, a loopback
// name or one of `allowed_hosts` is refused with 403, before anything else.
// No route sends CORS headers.
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
#ifndef RETRYD_SERVER_HTTP_HTTP_LISTENER_H_
#define RETRYD_SERVER_HTTP_HTTP_LISTENER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/control/auth.h"
#include "server/control/tls_options.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace retryd::http {
struct RequestGate;  // http_listener.cc
}  // namespace retryd::http

namespace retryd::http {

// Threads serving connections: each open connection holds one.
inline constexpr int kDefaultHttpThreads = 8;
// How long an idle keep-alive connection keeps its thread.
inline constexpr absl::Duration kKeepAliveTimeout = absl::Seconds(5);

struct HttpListenerOptions {
  // `host:port` (an IPv6 host in brackets); port 0 picks a free one.
  std::string address;
  // HTTPS when set (mutual TLS with client_ca_pem), else plain HTTP.
  std::optional<control::TlsOptions> tls;
  control::BearerTokenAuth auth;
  int threads = kDefaultHttpThreads;  // >= 1.
  // Hosts a check_host route answers to besides the address's host and the
  // loopback names (HostAllowed).
  std::vector<std::string> allowed_hosts;
};

// What a handler sees of a request.
struct HttpRequest {
  std::string method;  // GET, HEAD or POST.
  std::string path;
  std::map<std::string, std::string> query;  // The last value of each name.
  std::optional<std::string> authorization;  // The Authorization header.
  std::string body;
  std::string peer;  // "10.0.0.7:51234".
  // The client certificate's subject under mutual TLS, else empty.
  std::string client_subject;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the body is streamed instead of `body`: the listener calls it
  // once on the connection's thread, and it calls `write` with each piece
  // (false: the client has gone, so stop) and returns when the stream ends.
  std::function<void(const std::function<bool(std::string_view)>& write)> stream;
};

struct RouteOptions {
  control::Access access = control::Access::kReadOnly;
  // Whether the bearer-token rule applies (false: anyone the TLS handshake
  // admits, for pages that carry no data).
  bool authenticate = true;
  bool allow_post = false;  // POST besides GET and HEAD.
  bool prefix = false;      // Matches every path that starts with it.
  bool check_host = false;  // Refuse a Host header not allowed (HostAllowed).
};

// Whether `host_header` (a Host header: `name`, `name:port`, `[v6]:port`)
// names the listen address's host `listen_host`, a loopback name
// (localhost, 127.0.0.1, ::1) or one of `allowed` (case-insensitive).
bool HostAllowed(absl::string_view host_header, absl::string_view listen_host,
                 const std::vector<std::string>& allowed);

class HttpListener {
 public:
  using Handler = std::function<HttpResponse()>;
  using RequestHandler = std::function<HttpResponse(const HttpRequest&)>;

  HttpListener();
  ~HttpListener();  // Stop()s.

  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Serves GET `path` (exact match) with `handler`, for callers `access`
  // admits. Before Start().
  void Route(std::string path, control::Access access, Handler handler);
  // Serves `path` (or, with options.prefix, every path under it) with
  // `handler`. Before Start().
  void Route(std::string path, RouteOptions options, RequestHandler handler);

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
    RouteOptions options;
    RequestHandler handler;
  };
  // The route serving `path`: an exact one, else the longest prefix one.
  const RouteEntry* Find(const std::string& path) const;
  // Installs on `server` the handlers that check each request against
  // `gate` and the routes, then hand it to its route's handler.
  void Install(httplib::Server& server, RequestGate gate);

  // Read by the pool's threads once started, when it no longer changes.
  std::map<std::string, RouteEntry> routes_;

  // The owner's alone (Start() and Stop()).
  std::unique_ptr<httplib::Server> server_;
  std::thread accept_thread_;

  std::atomic<int> port_{0};
};

}  // namespace retryd::http

#endif  // RETRYD_SERVER_HTTP_HTTP_LISTENER_H_
