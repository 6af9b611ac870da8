#include "server/http/console_gateway.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>
#include <grpcpp/support/sync_stream.h>
#include <openssl/rand.h>

#include <chrono>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "retryd/v1/control.grpc.pb.h"
#include "server/common/grpc_code_names.h"
#include "server/common/logging.h"
#include "server/control/auth.h"
#include "server/http/console/console_assets.h"

namespace retryd::http {
namespace {

constexpr char kJson[] = "application/json";
// How long a forwarded unary call may take: the service's own deadlines
// (a drain, a redrive's cancel) are shorter.
constexpr auto kCallTimeout = std::chrono::seconds(60);
constexpr int kDefaultEventsIntervalMs = 1000;

// The page's own origin only: no inline script, no other host.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

google::protobuf::util::JsonPrintOptions PrintOptions() {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  return options;
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(message, &out, PrintOptions()).ok()) {
    return "{}";
  }
  return out;
}

std::string JsonQuote(absl::string_view text) {
  std::string out;
  AppendJsonString(&out, text);
  return out;
}

absl::string_view CodeName(int grpc_code) {
  if (grpc_code < 0 || grpc_code >= static_cast<int>(kGrpcCodeNames.size())) return "UNKNOWN";
  const std::string_view name = kGrpcCodeNames[grpc_code];
  return absl::string_view(name.data(), name.size());
}

HttpResponse Error(int grpc_code, absl::string_view message, absl::string_view reason) {
  HttpResponse response;
  response.status = HttpStatusOf(grpc_code);
  response.content_type = kJson;
  response.body = absl::StrCat(R"({"error":{"code":)", grpc_code, R"(,"status":)",
                               JsonQuote(CodeName(grpc_code)), R"(,"message":)", JsonQuote(message),
                               R"(,"reason":)", JsonQuote(reason), "}}\n");
  return response;
}

HttpResponse Error(const grpc::Status& status) {
  std::string reason;
  google::rpc::Status details;
  if (!status.error_details().empty() && details.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& any : details.details()) {
      google::rpc::ErrorInfo info;
      if (any.UnpackTo(&info)) {
        reason = info.reason();
        break;
      }
    }
  }
  return Error(status.error_code(), status.error_message(), reason);
}

HttpResponse Json(const google::protobuf::Message& message) {
  HttpResponse response;
  response.content_type = kJson;
  response.body = ToJson(message) + "\n";
  response.headers.emplace_back("Cache-Control", "no-store");
  return response;
}

// A Control method by name: its descriptor, and its path, which
// grpc::internal::RpcMethod keeps a pointer to (so the strings live here).
struct Method {
  const google::protobuf::MethodDescriptor* descriptor;
  std::string path;  // "/retryd.v1.Control/GetStatus".
};

const std::map<std::string, Method, std::less<>>& UnaryMethods() {
  static const auto* methods = [] {
    auto* out = new std::map<std::string, Method, std::less<>>;
    const google::protobuf::ServiceDescriptor* service =
        v1::GetStatusRequest::descriptor()->file()->FindServiceByName("Control");
    for (int i = 0; i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* m = service->method(i);
      if (m->client_streaming() || m->server_streaming()) continue;
      (*out)[m->name()] = Method{m, absl::StrCat("/", service->full_name(), "/", m->name())};
    }
    return out;
  }();
  return *methods;
}

std::unique_ptr<google::protobuf::Message> NewMessage(
    const google::protobuf::Descriptor* descriptor) {
  const google::protobuf::Message* prototype =
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(descriptor);
  return std::unique_ptr<google::protobuf::Message>(prototype->New());
}

// The query parameter `name` as a number; nullopt when absent or not one.
std::optional<int64_t> QueryNumber(const HttpRequest& request, const std::string& name) {
  auto it = request.query.find(name);
  int64_t value = 0;
  if (it == request.query.end() || !absl::SimpleAtoi(it->second, &value)) return std::nullopt;
  return value;
}

// GET /: the console's page.
HttpResponse RedirectToConsole(const HttpRequest&) {
  HttpResponse response;
  response.status = 302;
  response.headers.emplace_back("Location", "/console/");
  response.body = "see /console/\n";
  return response;
}

// GET /console/<name>: one of the console's files (index.html for none),
// with headers that keep it to its own origin.
HttpResponse ServeConsoleAsset(const HttpRequest& request) {
  std::string name = request.path.substr(std::string("/console/").size());
  if (name.empty()) name = "index.html";
  const ConsoleAsset* asset = FindConsoleAsset(name);
  HttpResponse response;
  if (asset == nullptr) {
    response.status = 404;
    response.body = "not found\n";
    return response;
  }
  response.content_type = std::string(asset->content_type);
  response.body = std::string(asset->body);
  response.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  response.headers.emplace_back("X-Content-Type-Options", "nosniff");
  response.headers.emplace_back("X-Frame-Options", "DENY");
  response.headers.emplace_back("Referrer-Policy", "no-referrer");
  response.headers.emplace_back("Cache-Control", "no-cache");
  return response;
}

}  // namespace

std::optional<ConsoleCaller> ForwardedByConsole(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, const std::string& secret) {
  if (secret.empty()) return std::nullopt;
  auto value = [&](const char* key) -> std::optional<std::string> {
    auto it = metadata.find(key);
    if (it == metadata.end()) return std::nullopt;
    return std::string(it->second.data(), it->second.size());
  };
  const std::optional<std::string> presented = value(kConsoleSecretMetadata);
  if (!presented.has_value() || !control::BearerTokenAuth::ConstantTimeEquals(*presented, secret)) {
    return std::nullopt;
  }
  return ConsoleCaller{value(kConsolePeerMetadata).value_or(""),
                       value(kConsoleSubjectMetadata).value_or("")};
}

std::string NewConsoleSecret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return "";  // No console calls then.
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

int HttpStatusOf(int grpc_code) {
  switch (static_cast<grpc::StatusCode>(grpc_code)) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::CANCELLED:
      return 499;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::ABORTED:
      return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::UNIMPLEMENTED:
      return 501;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

bool ConsoleGateway::ReadOnlyMethod(absl::string_view method) {
  return method == "GetStatus" || method == "ListInFlight" || method == "GetOperation" ||
         method == "ListOperations" || method == "ListDeadLetters";
}

ConsoleGateway::ConsoleGateway(ConsoleOptions options) : options_(std::move(options)) {}

ConsoleGateway::~ConsoleGateway() { Close(); }

void ConsoleGateway::SetChannel(std::shared_ptr<grpc::Channel> channel) {
  absl::MutexLock lock(&mu_);
  if (!closed_) channel_ = std::move(channel);
}

void ConsoleGateway::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  channel_.reset();
  for (grpc::ClientContext* context : streams_) context->TryCancel();
}

std::shared_ptr<grpc::Channel> ConsoleGateway::Channel() const {
  absl::MutexLock lock(&mu_);
  return channel_;
}

void ConsoleGateway::Prepare(grpc::ClientContext& context, const HttpRequest& request) const {
  context.AddMetadata(kConsoleSecretMetadata, options_.secret);
  context.AddMetadata(kConsolePeerMetadata, request.peer);
  if (!request.client_subject.empty()) {
    context.AddMetadata(kConsoleSubjectMetadata, request.client_subject);
  }
  if (request.authorization.has_value()) {
    context.AddMetadata("authorization", *request.authorization);
  }
}

void ConsoleGateway::Register(HttpListener& http) {
  RouteOptions api;
  api.check_host = true;
  http.Route("/api/v1/console", api, [this](const HttpRequest&) { return ConsoleInfo(); });
  http.Route("/api/v1/status", api,
             [this](const HttpRequest& request) { return Call("GetStatus", request, "{}"); });
  http.Route("/api/v1/operations", api,
             [this](const HttpRequest& request) { return Call("ListOperations", request, "{}"); });
  http.Route("/api/v1/inflight", api, [this](const HttpRequest& request) {
    std::string body = "{}";
    if (std::optional<int64_t> limit = QueryNumber(request, "limit")) {
      body = absl::StrCat(R"({"limit":)", *limit, "}");
    }
    return Call("ListInFlight", request, body);
  });
  http.Route("/api/v1/events", api, [this](const HttpRequest& request) { return Events(request); });
  // The access of a call is the service's to check: the listener checks
  // the read-only rule first, as for every route.
  RouteOptions rpc = api;
  rpc.prefix = true;
  rpc.allow_post = true;
  http.Route("/api/v1/rpc/", rpc, [this](const HttpRequest& request) {
    const std::string method = request.path.substr(std::string("/api/v1/rpc/").size());
    if (request.method != "POST") {
      return Error(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT),
                   "POST the request message as JSON", "");
    }
    return Call(method, request, request.body.empty() ? "{}" : request.body);
  });
  if (!options_.pages) return;
  // The pages carry no data: anyone the TLS handshake admits may load them,
  // and then needs the token to read or act.
  RouteOptions pages;
  pages.check_host = true;
  pages.authenticate = false;
  http.Route("/", pages, RedirectToConsole);
  pages.prefix = true;
  http.Route("/console/", pages, ServeConsoleAsset);
}

HttpResponse ConsoleGateway::ConsoleInfo() const {
  HttpResponse response;
  response.content_type = kJson;
  response.headers.emplace_back("Cache-Control", "no-store");
  response.body = absl::StrCat(
      R"({"readOnly":)", options_.read_only ? "true" : "false", R"(,"tokenRequiredForActions":)",
      options_.token_for_actions ? "true" : "false", R"(,"tokenRequiredForReads":)",
      options_.token_for_reads ? "true" : "false", "}\n");
  return response;
}

HttpResponse ConsoleGateway::Call(const std::string& method, const HttpRequest& request,
                                  const std::string& json_body) {
  const auto& methods = UnaryMethods();
  auto found = methods.find(method);
  if (found == methods.end()) {
    return Error(static_cast<int>(grpc::StatusCode::NOT_FOUND),
                 absl::StrCat("no unary method ", JsonQuote(method), " in retryd.v1.Control"), "");
  }
  if (options_.read_only && !ReadOnlyMethod(method)) {
    return Error(static_cast<int>(grpc::StatusCode::PERMISSION_DENIED),
                 absl::StrCat(method, ": the console is read-only (http.console_read_only)"),
                 "CONSOLE_READ_ONLY");
  }
  std::shared_ptr<grpc::Channel> channel = Channel();
  if (channel == nullptr) {
    return Error(static_cast<int>(grpc::StatusCode::UNAVAILABLE), "the control API is not serving",
                 "");
  }
  std::unique_ptr<google::protobuf::Message> in =
      NewMessage(found->second.descriptor->input_type());
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = false;
  if (auto s = google::protobuf::util::JsonStringToMessage(json_body, in.get(), parse); !s.ok()) {
    return Error(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT),
                 absl::StrCat("the body is not a JSON ", in->GetDescriptor()->full_name(), ": ",
                              std::string(s.message())),
                 "");
  }
  std::unique_ptr<google::protobuf::Message> out =
      NewMessage(found->second.descriptor->output_type());
  grpc::ClientContext context;
  Prepare(context, request);
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  const grpc::internal::RpcMethod rpc(found->second.path.c_str(),
                                      grpc::internal::RpcMethod::NORMAL_RPC);
  const grpc::Status status =
      grpc::internal::BlockingUnaryCall<google::protobuf::Message, google::protobuf::Message>(
          channel.get(), rpc, &context, *in, out.get());
  if (!status.ok()) return Error(status);
  return Json(*out);
}

// One event stream's call: finished, and forgotten by the gateway, when the
// last of its holders lets go (the stream ended, or never began).
struct ConsoleGateway::EventStream {
  EventStream(ConsoleGateway& gateway, std::shared_ptr<grpc::Channel> channel)
      : gateway(gateway), stub(v1::Control::NewStub(std::move(channel))) {}
  ~EventStream() {
    if (reader != nullptr) {
      context.TryCancel();
      reader->Finish();
    }
    absl::MutexLock lock(&gateway.mu_);
    gateway.streams_.erase(&context);
  }
  ConsoleGateway& gateway;
  std::unique_ptr<v1::Control::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::MetricsSnapshot>> reader;
};

HttpResponse ConsoleGateway::Events(const HttpRequest& request) {
  auto unavailable = [] {
    return Error(static_cast<int>(grpc::StatusCode::UNAVAILABLE), "the control API is not serving",
                 "");
  };
  const int64_t interval = QueryNumber(request, "interval_ms").value_or(kDefaultEventsIntervalMs);
  if (interval < 0 || interval > std::numeric_limits<uint32_t>::max()) {
    return Error(static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT),
                 "interval_ms: must be a number of milliseconds", "INVALID_FIELD");
  }
  std::shared_ptr<grpc::Channel> channel = Channel();
  if (channel == nullptr) return unavailable();
  auto stream = std::make_shared<EventStream>(*this, std::move(channel));
  Prepare(stream->context, request);
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return unavailable();
    if (static_cast<int>(streams_.size()) >= options_.max_event_streams) {
      return Error(static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED),
                   absl::StrCat(streams_.size(),
                                " event streams are open, the most the console serves at once; "
                                "close a console page, or try again later"),
                   "");
    }
    streams_.insert(&stream->context);
  }
  v1::WatchMetricsRequest watch;
  watch.set_interval_ms(static_cast<uint32_t>(interval));
  stream->reader = stream->stub->WatchMetrics(&stream->context, watch);
  // The first snapshot (or the refusal) before the status line, so that a
  // refused stream answers with its error rather than an empty stream.
  auto first = std::make_shared<v1::MetricsSnapshot>();
  if (!stream->reader->Read(first.get())) {
    const grpc::Status status = stream->reader->Finish();
    stream->reader.reset();
    return status.ok() ? unavailable() : Error(status);
  }
  HttpResponse response;
  response.content_type = "text/event-stream";
  response.headers.emplace_back("Cache-Control", "no-store");
  response.stream = [stream, first](const std::function<bool(std::string_view)>& write) {
    v1::MetricsSnapshot snapshot = std::move(*first);
    do {
      if (!write(absl::StrCat("event: snapshot\ndata: ", ToJson(snapshot), "\n\n"))) break;
    } while (stream->reader->Read(&snapshot));
  };
  return response;
}

}  // namespace retryd::http
