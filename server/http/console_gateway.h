// The console's JSON API (docs/console.md, "Console"): HTTP routes on the
// HTTP listener that call the Control service, and the console's pages.
//
// Every call goes through the service itself, over an in-process gRPC
// channel to the control server: the same validation, the same
// authorization (the request's Authorization header travels as the call's
// metadata) and the same audit lines as a gRPC client's call. What the
// service cannot see through that channel, the browser's address and its
// client certificate's subject, travels as metadata beside a secret made
// for this process (ForwardedByConsole), so that no remote gRPC client can
// pose as the console.
//
//   GET  /api/v1/console          what the page needs to know of the listener
//   GET  /api/v1/status           GetStatus
//   GET  /api/v1/inflight         ListInFlight (?limit=)
//   GET  /api/v1/operations       ListOperations
//   GET  /api/v1/events           WatchMetrics as Server-Sent Events
//   POST /api/v1/rpc/<Method>     any unary method of retryd.v1.Control
//   GET  /console/...             the page (server/http/console/assets/)
//
// JSON is protobuf's JSON mapping of the messages of control.proto. An
// error is {"error": {code, status, message, reason}} with the HTTP status
// of its gRPC code (HttpStatusOf).
//
// Thread-safety: Register() before the listener starts; SetChannel() and
// Close() from the owner; the handlers from the listener's threads.
#ifndef RETRYD_SERVER_HTTP_CONSOLE_GATEWAY_H_
#define RETRYD_SERVER_HTTP_CONSOLE_GATEWAY_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/string_ref.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/http/http_listener.h"

namespace retryd::http {

// With the console on, the HTTP listener serves connections on this many
// threads (each open event stream, or a browser's idle keep-alive
// connection, holds one), and at most kDefaultConsoleEventStreams of them
// stream events, so that scrapes and calls always find a thread.
inline constexpr int kConsoleHttpThreads = 32;
inline constexpr int kDefaultConsoleEventStreams = 16;

// The metadata a forwarded call carries.
inline constexpr char kConsoleSecretMetadata[] = "retryd-console-secret";
inline constexpr char kConsolePeerMetadata[] = "retryd-console-peer";
inline constexpr char kConsoleSubjectMetadata[] = "retryd-console-subject";

// The browser behind a call the console forwarded.
struct ConsoleCaller {
  std::string peer;     // "10.0.0.7:51234".
  std::string subject;  // The client certificate's, under mutual TLS.
};

// The caller, if `metadata` carries `secret` (compared in constant time);
// nullopt for any other call, or when `secret` is empty.
std::optional<ConsoleCaller> ForwardedByConsole(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, const std::string& secret);

// A fresh secret: 32 random bytes, hex.
std::string NewConsoleSecret();

// The HTTP status for a gRPC code (google.api's mapping).
int HttpStatusOf(int grpc_code);

struct ConsoleOptions {
  // Refuse every method but the read-only ones (403, CONSOLE_READ_ONLY).
  bool read_only = false;
  // For GET /api/v1/console.
  bool token_for_actions = false;
  bool token_for_reads = false;
  // Shared with the control service (ForwardedByConsole).
  std::string secret;
  // The console's pages too, or the JSON API alone.
  bool pages = true;
  // Event streams open at once at most; more answer 429
  // (RESOURCE_EXHAUSTED). Each holds one of the HTTP listener's threads for
  // its whole life, so this must stay below the listener's threads, which
  // scrapes and the API's calls need too.
  int max_event_streams = kDefaultConsoleEventStreams;
};

class ConsoleGateway {
 public:
  explicit ConsoleGateway(ConsoleOptions options);
  ~ConsoleGateway();

  ConsoleGateway(const ConsoleGateway&) = delete;
  ConsoleGateway& operator=(const ConsoleGateway&) = delete;

  // Adds the routes to `http`, before it starts.
  void Register(HttpListener& http);

  // The channel to the control server; until it is set, calls answer 503.
  void SetChannel(std::shared_ptr<grpc::Channel> channel) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends every open event stream (cancelling its call) and answers 503 to
  // every later request. Returns at once. Idempotent.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // The secret of options.secret, for the control service.
  const std::string& secret() const { return options_.secret; }

  // Whether `method` (a Control method's name) only reads.
  static bool ReadOnlyMethod(absl::string_view method);

 private:
  HttpResponse Call(const std::string& method, const HttpRequest& request,
                    const std::string& json_body) ABSL_LOCKS_EXCLUDED(mu_);
  HttpResponse Events(const HttpRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  HttpResponse ConsoleInfo() const;
  struct EventStream;
  // The channel, or nullptr once closed or before SetChannel().
  std::shared_ptr<grpc::Channel> Channel() const ABSL_LOCKS_EXCLUDED(mu_);
  // The metadata every forwarded call carries.
  void Prepare(grpc::ClientContext& context, const HttpRequest& request) const;

  const ConsoleOptions options_;

  // Guards the fields below; never held across a call.
  mutable absl::Mutex mu_;
  std::shared_ptr<grpc::Channel> channel_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // The event streams' calls open now, for Close() to cancel.
  absl::flat_hash_set<grpc::ClientContext*> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::http

#endif  // RETRYD_SERVER_HTTP_CONSOLE_GATEWAY_H_
