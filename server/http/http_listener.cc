#include "server/http/http_listener.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/common/listen_address.h"
#include "server/common/logging.h"

namespace retryd::http {
namespace {

// A request's headers and body must arrive, and a response leave, within
// these; GET routes take no body.
constexpr time_t kReadTimeoutSeconds = 10;
constexpr time_t kWriteTimeoutSeconds = 10;
constexpr size_t kMaxPayloadBytes = 64 << 10;

// OpenSSL's reasons, oldest first, emptying its error queue.
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    absl::StrAppend(&out, out.empty() ? "" : "; ", text);
  }
  return out.empty() ? "no reason given" : out;
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Calls `use` with each certificate of `pem` in order (it takes ownership);
// false, with `error` set, if there is none or `use` refuses one.
template <typename Use>
bool EachCertificate(const std::string& pem, const char* what, std::string& error, Use use) {
  BioPtr bio = MemoryBio(pem);
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    ++count;
    if (!use(cert)) {
      error = absl::StrCat(what, ": certificate ", count, " refused: ", OpenSslErrors());
      return false;
    }
  }
  ERR_clear_error();  // The end of the input reads as an error.
  if (count == 0) error = absl::StrCat(what, ": no PEM certificate could be read");
  return count > 0;
}

// Sets up `ctx` from `tls` as the gRPC listener would: TLS 1.2 or later,
// the whole chain, and with a client CA, a certificate from every client.
bool SetUpTls(SSL_CTX& ctx, const control::TlsOptions& tls, std::string& error) {
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  bool leaf = true;
  if (!EachCertificate(tls.cert_chain_pem, "control.tls_cert_file", error, [&](X509* cert) {
        if (leaf) {
          leaf = false;
          const bool ok = SSL_CTX_use_certificate(&ctx, cert) == 1;
          X509_free(cert);
          return ok;
        }
        if (SSL_CTX_add_extra_chain_cert(&ctx, cert) == 1) return true;  // Took it.
        X509_free(cert);
        return false;
      })) {
    return false;
  }
  BioPtr key_bio = MemoryBio(tls.private_key_pem);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) {
    error = absl::StrCat("control.tls_key_file: no private key could be read: ", OpenSslErrors());
    return false;
  }
  const bool key_ok = SSL_CTX_use_PrivateKey(&ctx, key) == 1;
  EVP_PKEY_free(key);
  if (!key_ok || SSL_CTX_check_private_key(&ctx) != 1) {
    error = absl::StrCat("control.tls_key_file: does not match the certificate: ", OpenSslErrors());
    return false;
  }
  if (tls.client_ca_pem.empty()) return true;
  X509_STORE* store = SSL_CTX_get_cert_store(&ctx);
  if (!EachCertificate(tls.client_ca_pem, "control.tls_client_ca_file", error, [&](X509* cert) {
        const bool ok = X509_STORE_add_cert(store, cert) == 1 && SSL_CTX_add_client_CA(&ctx, cert);
        X509_free(cert);
        return ok;
      })) {
    return false;
  }
  SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return true;
}

// The subject of the client's certificate under mutual TLS, else empty.
std::string ClientSubject(const httplib::Request& request) {
  if (request.ssl == nullptr) return "";
  X509* cert = SSL_get_peer_certificate(const_cast<SSL*>(request.ssl));
  if (cert == nullptr) return "";
  char text[512];
  X509_NAME_oneline(X509_get_subject_name(cert), text, sizeof text);
  X509_free(cert);
  return text;
}

// Only SO_REUSEADDR: cpp-httplib's default adds SO_REUSEPORT, which would
// let a second retryd share the port silently instead of failing.
void SetSocketOptions(int socket) {
  const int one = 1;
  setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
}

}  // namespace

// What every request is checked against before its route's handler runs.
struct RequestGate {
  control::BearerTokenAuth auth;
  std::string listen_host;
  std::vector<std::string> allowed_hosts;
};

namespace {

// Answers `status` with `text` into `response`; false, for Admit to return.
bool Refuse(httplib::Response& response, int status, absl::string_view text) {
  response.status = status;
  response.set_content(absl::StrCat(text, "\n"), "text/plain; charset=utf-8");
  return false;
}

// Whether `request` may go on to `route` (null: no route serves its path);
// if not, the refusal is written into `response`: 404, 405, 403 or 401.
bool Admit(const RouteOptions* route, const RequestGate& gate, const httplib::Request& request,
           httplib::Response& response) {
  if (route == nullptr) return Refuse(response, 404, "not found");
  const bool post = request.method == "POST";
  if (request.method != "GET" && request.method != "HEAD" && !(post && route->allow_post)) {
    response.set_header("Allow", route->allow_post ? "GET, HEAD, POST" : "GET, HEAD");
    return Refuse(
        response, 405,
        route->allow_post ? "method not allowed: use GET or POST" : "method not allowed: use GET");
  }
  if (route->check_host &&
      !HostAllowed(request.get_header_value("Host"), gate.listen_host, gate.allowed_hosts)) {
    return Refuse(response, 403,
                  "Host not allowed: use the listen address, a loopback name, or one of "
                  "http.allowed_hosts");
  }
  if (!route->authenticate) return true;
  const std::string header = request.get_header_value("Authorization");
  std::optional<absl::string_view> authorization;
  if (request.has_header("Authorization")) authorization = header;
  if (absl::Status s =
          gate.auth.AuthenticateHeader(authorization, route->access,
                                       absl::StrCat(request.remote_addr, ":", request.remote_port));
      !s.ok()) {
    response.set_header("WWW-Authenticate", "Bearer");
    return Refuse(response, 401, s.message());
  }
  return true;
}

// What a handler sees of `request`.
HttpRequest ToHttpRequest(const httplib::Request& request) {
  HttpRequest in;
  in.method = request.method;
  in.path = request.path;
  for (const auto& [name, value] : request.params) in.query[name] = value;
  if (request.has_header("Authorization")) {
    in.authorization = request.get_header_value("Authorization");
  }
  in.body = request.body;
  in.peer = absl::StrCat(request.remote_addr, ":", request.remote_port);
  in.client_subject = ClientSubject(request);
  return in;
}

// Writes a handler's `answer` into `response`, streamed if it streams.
void Answer(HttpResponse answer, httplib::Response& response) {
  response.status = answer.status;
  for (auto& [name, value] : answer.headers) response.set_header(name, value);
  if (answer.stream == nullptr) {
    response.set_content(answer.body, answer.content_type);
    return;
  }
  response.set_chunked_content_provider(
      answer.content_type, [stream = std::move(answer.stream)](size_t, httplib::DataSink& sink) {
        stream([&sink](std::string_view piece) {
          return sink.is_writable() && sink.write(piece.data(), piece.size());
        });
        sink.done();
        return true;
      });
}

// The port `options` asks for, once its address and threads are checked.
absl::StatusOr<int> RequestedPort(const HttpListenerOptions& options) {
  if (absl::StartsWith(options.address, "unix:")) {
    return absl::InvalidArgumentError("HTTP listener: unix: sockets are not supported");
  }
  if (std::optional<std::string> problem = ListenAddressProblem(options.address)) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP listener: ", *problem));
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError("HTTP listener: needs at least one thread");
  }
  const ListenHostPort host_port = SplitListenAddress(options.address);
  int port = 0;
  if (!absl::SimpleAtoi(host_port.port, &port)) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP listener: bad port ", host_port.port));
  }
  return port;
}

// A server, HTTPS with `tls`, with retryd's socket options, timeouts and
// request size limit; INVALID_ARGUMENT if OpenSSL refuses the TLS material.
absl::StatusOr<std::unique_ptr<httplib::Server>> NewServer(
    const std::optional<control::TlsOptions>& tls) {
  std::unique_ptr<httplib::Server> server;
  if (tls.has_value()) {
    std::string tls_error;
    auto https = std::make_unique<httplib::SSLServer>(
        [&](SSL_CTX& ctx) { return SetUpTls(ctx, *tls, tls_error); });
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP listener: TLS: ", tls_error.empty() ? OpenSslErrors() : tls_error));
    }
    server = std::move(https);
  } else {
    server = std::make_unique<httplib::Server>();
  }
  server->set_socket_options(SetSocketOptions);
  server->set_keep_alive_timeout(absl::ToInt64Seconds(kKeepAliveTimeout));
  server->set_read_timeout(kReadTimeoutSeconds, 0);
  server->set_write_timeout(kWriteTimeoutSeconds, 0);
  server->set_payload_max_length(kMaxPayloadBytes);
  return server;
}

// Binds `server` to `host`:`port` (0: a free port); the bound port, or
// UNAVAILABLE naming `address` and the reason.
absl::StatusOr<int> Bind(httplib::Server& server, const std::string& host, int port,
                         const std::string& address) {
  const int bound =
      port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return absl::UnavailableError(absl::StrCat("HTTP listener: cannot listen on ", address, ": ",
                                               BindFailureReason(address)));
  }
  return bound;
}

// Starts the thread accepting on the bound `server`, with a pool of
// `threads`, and returns it once it accepts.
std::thread StartAccepting(httplib::Server& server, int threads) {
  auto ready = std::make_shared<absl::Notification>();
  // cpp-httplib makes the task queue as it begins to accept (is_running() is
  // true from then on, so that stop() takes effect): the moment Start()
  // waits for. Should it return without, the thread says so itself.
  server.new_task_queue = [ready, threads]() -> httplib::TaskQueue* {
    ready->Notify();
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  std::thread accept_thread([serving = &server, ready] {
    SetThreadName("http");
    serving->listen_after_bind();
    if (!ready->HasBeenNotified()) ready->Notify();  // Same thread: no race.
  });
  ready->WaitForNotification();
  return accept_thread;
}

}  // namespace

bool HostAllowed(absl::string_view host_header, absl::string_view listen_host,
                 const std::vector<std::string>& allowed) {
  absl::string_view host = host_header;
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    host = host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (host.empty()) return false;
  absl::string_view listen = listen_host;
  if (absl::StartsWith(listen, "[") && absl::EndsWith(listen, "]")) {
    listen = listen.substr(1, listen.size() - 2);
  }
  const bool wildcard = listen.empty() || listen == "0.0.0.0" || listen == "::";
  if (!wildcard && absl::EqualsIgnoreCase(host, listen)) return true;
  for (absl::string_view loopback : {"localhost", "127.0.0.1", "::1"}) {
    if (absl::EqualsIgnoreCase(host, loopback)) return true;
  }
  for (const std::string& a : allowed) {
    if (absl::EqualsIgnoreCase(host, a)) return true;
  }
  return false;
}

HttpListener::HttpListener() = default;

HttpListener::~HttpListener() { Stop(); }

void HttpListener::Route(std::string path, control::Access access, Handler handler) {
  RouteOptions options;
  options.access = access;
  Route(std::move(path), options,
        [handler = std::move(handler)](const HttpRequest&) { return handler(); });
}

void HttpListener::Route(std::string path, RouteOptions options, RequestHandler handler) {
  routes_[std::move(path)] = RouteEntry{options, std::move(handler)};
}

const HttpListener::RouteEntry* HttpListener::Find(const std::string& path) const {
  if (auto exact = routes_.find(path); exact != routes_.end()) return &exact->second;
  const RouteEntry* best = nullptr;
  size_t best_length = 0;
  for (const auto& [prefix, entry] : routes_) {
    if (entry.options.prefix && absl::StartsWith(path, prefix) && prefix.size() > best_length) {
      best = &entry;
      best_length = prefix.size();
    }
  }
  return best;
}

void HttpListener::Install(httplib::Server& server, RequestGate gate) {
  // Every request is checked here, before cpp-httplib's own routing: the
  // routes are few, and 404, 405, 403 and 401 come out alike for all. GET
  // and HEAD are answered here too; a POST goes on to the handler below,
  // once cpp-httplib has read its body.
  server.set_pre_routing_handler(
      [this, gate = std::move(gate)](const httplib::Request& request, httplib::Response& response) {
        const RouteEntry* route = Find(request.path);
        if (!Admit(route != nullptr ? &route->options : nullptr, gate, request, response)) {
          return httplib::Server::HandlerResponse::Handled;
        }
        if (request.method == "POST") return httplib::Server::HandlerResponse::Unhandled;
        Answer(route->handler(ToHttpRequest(request)), response);
        return httplib::Server::HandlerResponse::Handled;
      });
  // Only a POST the check above let through reaches this.
  server.Post(".*", [this](const httplib::Request& request, httplib::Response& response) {
    if (const RouteEntry* route = Find(request.path)) {
      Answer(route->handler(ToHttpRequest(request)), response);
    }
  });
}

absl::Status HttpListener::Start(HttpListenerOptions options) {
  if (server_ != nullptr) {
    return absl::FailedPreconditionError("the HTTP listener was started before; it runs once");
  }
  absl::StatusOr<int> port = RequestedPort(options);
  if (!port.ok()) return port.status();
  const ListenHostPort host_port = SplitListenAddress(options.address);
  absl::StatusOr<std::unique_ptr<httplib::Server>> server = NewServer(options.tls);
  if (!server.ok()) return server.status();
  Install(**server,
          RequestGate{std::move(options.auth), host_port.host, std::move(options.allowed_hosts)});
  absl::StatusOr<int> bound = Bind(**server, host_port.host, *port, options.address);
  if (!bound.ok()) return bound.status();
  accept_thread_ = StartAccepting(**server, options.threads);
  server_ = *std::move(server);
  port_.store(*bound);
  return absl::OkStatus();
}

void HttpListener::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  accept_thread_.join();  // Its task queue's shutdown waits for the pool.
  server_.reset();
  port_.store(0);
}

}  // namespace retryd::http
