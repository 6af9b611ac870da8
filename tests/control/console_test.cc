// The console's JSON API on the HTTP listener (ConsoleGateway): the same
// answers as the gRPC calls it forwards, the same token rules and reasons,
// the read-only mode, the Host check, no CORS, the event stream and its end
// when the server stops; and what the console may be configured with.
#include <google/protobuf/util/json_util.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/control/control_server.h"
#include "server/http/console/console_assets.h"
#include "server/http/console_gateway.h"
#include "tests/control/control_test_util.h"
#include "tests/support/missing_tool.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_for.h"

namespace retryd::control {
namespace {

using http::ConsoleCaller;
using http::ConsoleGateway;
using http::ConsoleOptions;
using http::ForwardedByConsole;
using http::HostAllowed;
using http::HttpStatusOf;
using http::kConsolePeerMetadata;
using http::kConsoleSecretMetadata;
using http::NewConsoleSecret;

using ::retryd::testing::Channel;
using ::retryd::testing::Client;
using ::retryd::testing::RetryThreadIds;
using ::retryd::testing::WaitFor;
using ::testing::HasSubstr;

constexpr char kToken[] = "console-token-1";

std::unique_ptr<httplib::Client> Http(int port) {
  return testing::HttpClient(port, /*read_timeout_s=*/30);
}

template <typename Message>
Message FromJson(const std::string& json) {
  Message out;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &out);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in " << json;
  return out;
}

httplib::Headers Bearer(const std::string& token) {
  return {{"Authorization", absl::StrCat("Bearer ", token)}};
}

constexpr char kConsoleTopics[] = "console-api";

class ConsoleApiTest : public testing::SharedEngineTest<kConsoleTopics> {
 protected:
  static ControlServerOptions ConsoleOptions() {
    ControlServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.metrics_address = "127.0.0.1:0";
    options.console = true;
    options.sample_tick = absl::Milliseconds(100);
    options.probe_interval = absl::Milliseconds(200);
    return options;
  }
};

TEST_F(ConsoleApiTest, StatusIsGetStatusInProtobufJson) {
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(ConsoleOptions()).ok());
  auto http = Http(server.metrics_port());
  auto rpc = Client(Channel(absl::StrCat("127.0.0.1:", server.port())));

  const httplib::Result r = http->Get("/api/v1/status");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  // lowerCamelCase names, enum names, zeros printed.
  EXPECT_THAT(r->body, HasSubstr(R"("state":"ENGINE_STATE_RUNNING")"));
  EXPECT_THAT(r->body, HasSubstr(R"("retryBacklog":)"));
  const auto over_http = FromJson<v1::GetStatusResponse>(r->body);
  const absl::StatusOr<v1::GetStatusResponse> over_grpc = rpc->GetStatus();
  ASSERT_TRUE(over_grpc.ok());
  auto ids = [](const v1::GetStatusResponse& s) {
    std::vector<std::pair<uint32_t, int>> out;
    for (const v1::ThreadInfo& t : s.threads()) out.emplace_back(t.thread_id(), t.role());
    return out;
  };
  EXPECT_EQ(ids(over_http), ids(*over_grpc));
  EXPECT_EQ(over_http.instance().host_name(), over_grpc->instance().host_name());

  const httplib::Result info = http->Get("/api/v1/console");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->body,
            "{\"readOnly\":false,\"tokenRequiredForActions\":false,"
            "\"tokenRequiredForReads\":false}\n");
  server.Stop();
}

TEST_F(ConsoleApiTest, RetryBacklogPerPartitionIsMeasured) {
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(ConsoleOptions()).ok());
  auto http = Http(server.metrics_port());
  const std::string retry_topic = engine_->engine->options().retry.tiers.front().topic;
  v1::GetStatusResponse status;
  ASSERT_TRUE(WaitFor(
      [&] {
        const httplib::Result r = http->Get("/api/v1/status");
        if (!r || r->status != 200) return false;
        status = FromJson<v1::GetStatusResponse>(r->body);
        return status.retry_backlog_partitions_size() > 0;
      },
      absl::Seconds(30)))
      << "no per-partition backlog after 30 s";
  std::vector<int> partitions;
  for (const v1::PartitionBacklog& p : status.retry_backlog_partitions()) {
    EXPECT_EQ(p.topic(), retry_topic);
    EXPECT_GE(p.backlog(), 0);
    partitions.push_back(p.partition());
  }
  // Every partition of the retry topic, once each, in order.
  std::vector<int> expected(partitions.size());
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int>(i);
  EXPECT_EQ(partitions, expected);
  // And the same in /metrics.
  const httplib::Result metrics = http->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr(absl::StrCat("retryd_retry_partition_backlog{topic=\"",
                                                    retry_topic, "\",partition=\"0\"}")));
  server.Stop();
}

TEST_F(ConsoleApiTest, ActionsFollowTheControlApisTokenRulesAndReasons) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = ConsoleOptions();
  options.auth_token = kToken;
  ASSERT_TRUE(server.Start(options).ok());
  auto http = Http(server.metrics_port());
  auto rpc = Client(Channel(absl::StrCat("127.0.0.1:", server.port())), kToken);
  const std::vector<uint32_t> before = RetryThreadIds(*rpc);
  ASSERT_FALSE(before.empty());

  // Without the token: the service's own refusal, as JSON.
  httplib::Result r =
      http->Post("/api/v1/rpc/StartRetryThreads", R"({"count":1})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
  EXPECT_THAT(r->body, HasSubstr(R"("status":"UNAUTHENTICATED")"));
  EXPECT_EQ(RetryThreadIds(*rpc), before);
  // Reads need none (read_only_requires_token is off).
  r = http->Get("/api/v1/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  // With it: applied, and the answer is StartRetryThreadsResponse.
  r = http->Post("/api/v1/rpc/StartRetryThreads", Bearer(kToken), R"({"count":1})",
                 "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto started = FromJson<v1::StartRetryThreadsResponse>(r->body);
  ASSERT_EQ(started.thread_ids_size(), 1);
  std::vector<uint32_t> now = RetryThreadIds(*rpc);
  EXPECT_NE(std::find(now.begin(), now.end(), started.thread_ids(0)), now.end());

  // A refusal keeps its code and reason: a tier that does not exist.
  r = http->Post("/api/v1/rpc/StartRetryThreads", Bearer(kToken),
                 R"({"count":1,"tier":"no-such-topic"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(r->body, HasSubstr(R"("status":"INVALID_ARGUMENT")"));
  EXPECT_THAT(r->body, HasSubstr(R"("reason":"INVALID_FIELD")"));

  // Bad input: a field the message lacks, a body that is not JSON, a
  // method the service lacks, a streaming one, GET on a method.
  for (const char* body : {R"({"cuont":1})", "not json"}) {
    r = http->Post("/api/v1/rpc/StopRetryThreads", Bearer(kToken), body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_THAT(r->body, HasSubstr("retryd.v1.StopRetryThreadsRequest")) << body;
  }
  for (const char* method : {"NoSuchMethod", "WatchMetrics"}) {
    r = http->Post(absl::StrCat("/api/v1/rpc/", method), Bearer(kToken), "{}", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << method;
  }
  r = http->Get("/api/v1/rpc/GetStatus");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);

  // Stop the one started, by id.
  r = http->Post("/api/v1/rpc/StopRetryThreads", Bearer(kToken),
                 absl::StrCat(R"({"threadIds":[)", started.thread_ids(0), "]}"),
                 "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(RetryThreadIds(*rpc), before);
  server.Stop();
}

TEST_F(ConsoleApiTest, ReadOnlyConsoleRefusesEveryChange) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = ConsoleOptions();
  options.console_read_only = true;
  ASSERT_TRUE(server.Start(options).ok());
  auto http = Http(server.metrics_port());
  auto rpc = Client(Channel(absl::StrCat("127.0.0.1:", server.port())));
  const std::vector<uint32_t> before = RetryThreadIds(*rpc);
  for (const char* method : {"StartRetryThreads", "StopRetryThreads", "SetRetryThreadCount",
                             "SetInOrder", "SetOrderingMode", "DeadLetterRecord", "StartDrain",
                             "CancelOperation", "StartRedrive", "PurgeDeadLetters"}) {
    const httplib::Result r =
        http->Post(absl::StrCat("/api/v1/rpc/", method), R"({})", "application/json");
    ASSERT_TRUE(r) << method;
    EXPECT_EQ(r->status, 403) << method;
    EXPECT_THAT(r->body, HasSubstr(R"("reason":"CONSOLE_READ_ONLY")")) << method;
  }
  EXPECT_EQ(RetryThreadIds(*rpc), before);
  for (const char* method : {"GetStatus", "ListInFlight", "ListOperations"}) {
    const httplib::Result r =
        http->Post(absl::StrCat("/api/v1/rpc/", method), "{}", "application/json");
    ASSERT_TRUE(r) << method;
    EXPECT_EQ(r->status, 200) << method << ": " << r->body;
  }
  const httplib::Result info = http->Get("/api/v1/console");
  ASSERT_TRUE(info);
  EXPECT_THAT(info->body, HasSubstr(R"("readOnly":true)"));
  // The gRPC API itself is not read-only.
  EXPECT_TRUE(rpc->StartRetryThreads(1).ok());
  server.Stop();
}

TEST_F(ConsoleApiTest, ForeignHostIsRefusedAndNoCorsHeaderIsSent) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = ConsoleOptions();
  options.allowed_hosts = {"retryd.example.svc"};
  ASSERT_TRUE(server.Start(options).ok());
  const int port = server.metrics_port();
  auto http = Http(port);
  auto get = [&](const std::string& path, const std::string& host) {
    httplib::Headers headers = {{"Host", host}, {"Origin", "http://attacker.example"}};
    return http->Get(path, headers);
  };
  for (const std::string path : {"/api/v1/status", "/api/v1/console", "/console/"}) {
    for (const std::string& host : std::vector<std::string>{
             "attacker.example", absl::StrCat("attacker.example:", port), "127.0.0.2"}) {
      const httplib::Result r = get(path, host);
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, 403) << path << " Host " << host;
    }
  }
  for (const std::string& host : std::vector<std::string>{
           absl::StrCat("127.0.0.1:", port), absl::StrCat("localhost:", port), "LOCALHOST",
           absl::StrCat("[::1]:", port), "retryd.example.svc", "Retryd.Example.Svc:80"}) {
    const httplib::Result r = get("/api/v1/status", host);
    ASSERT_TRUE(r) << host;
    EXPECT_EQ(r->status, 200) << "Host " << host;
    EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin")) << host;
  }
  // A POST from a foreign page never reaches the service.
  const httplib::Result post =
      http->Post("/api/v1/rpc/StartRetryThreads", httplib::Headers{{"Host", "attacker.example"}},
                 R"({"count":1})", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 403);
  // Prometheus scrapes by whatever name it knows the target by.
  const httplib::Result metrics = get("/metrics", "10.1.2.3:9090");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  server.Stop();
}

TEST_F(ConsoleApiTest, EventsStreamSnapshotsAndEndWhenTheServerStops) {
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(ConsoleOptions()).ok());
  auto http = Http(server.metrics_port());
  std::atomic<int> events{0};
  std::string first;
  std::atomic<bool> ended{false};
  int status = 0;
  std::string content_type;
  std::thread reader([&] {
    std::string buffer;
    httplib::Result r = http->Get(
        "/api/v1/events?interval_ms=100",
        [&](const httplib::Response& response) {
          status = response.status;
          content_type = response.get_header_value("Content-Type");
          return true;
        },
        [&](const char* data, size_t size) {
          buffer.append(data, size);
          size_t end;
          while ((end = buffer.find("\n\n")) != std::string::npos) {
            const std::string event = buffer.substr(0, end);
            buffer.erase(0, end + 2);
            if (events.load() == 0) first = event;
            events.fetch_add(1);
          }
          return true;
        });
    ended.store(true);
  });
  EXPECT_TRUE(WaitFor([&] { return events.load() >= 3; }, absl::Seconds(20)))
      << events.load() << " events";
  EXPECT_EQ(status, 200);
  EXPECT_EQ(content_type, "text/event-stream");
  ASSERT_TRUE(absl::StartsWith(first, "event: snapshot\ndata: {")) << first;
  const auto snapshot =
      FromJson<v1::MetricsSnapshot>(first.substr(std::string("event: snapshot\ndata: ").size()));
  EXPECT_EQ(snapshot.engine_state(), v1::ENGINE_STATE_RUNNING);
  EXPECT_GT(snapshot.threads_size(), 0);
  EXPECT_FALSE(ended.load());
  // The open stream does not hold the stop up, and ends with it.
  server.Stop();
  EXPECT_TRUE(WaitFor([&] { return ended.load(); }, absl::Seconds(20)));
  reader.join();
}

TEST_F(ConsoleApiTest, EventStreamsAreCappedAndScrapesStillAnswer) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = ConsoleOptions();
  options.console_max_event_streams = 2;
  ASSERT_TRUE(server.Start(options).ok());
  const int port = server.metrics_port();
  // A stream that reads until `stop` is set, counting its events.
  struct Stream {
    std::atomic<int> events{0};
    std::atomic<bool> stop{false};
    std::atomic<bool> ended{false};
    std::thread reader;
  };
  auto open = [port](Stream& s) {
    s.reader = std::thread([port, &s] {
      Http(port)->Get(
          "/api/v1/events?interval_ms=100", [](const httplib::Response&) { return true; },
          [&s](const char*, size_t) {
            s.events.fetch_add(1);
            return !s.stop.load();
          });
      s.ended.store(true);
    });
  };
  Stream a, b;
  open(a);
  open(b);
  ASSERT_TRUE(
      WaitFor([&] { return a.events.load() > 0 && b.events.load() > 0; }, absl::Seconds(20)));
  // A third is refused while both are open; a scrape and a call still answer.
  httplib::Result r = Http(port)->Get("/api/v1/events");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_THAT(r->body, HasSubstr(R"("status":"RESOURCE_EXHAUSTED")"));
  r = Http(port)->Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = Http(port)->Get("/api/v1/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Once one closes, a new one is served.
  a.stop.store(true);
  ASSERT_TRUE(WaitFor([&] { return a.ended.load(); }, absl::Seconds(20)));
  bool served = WaitFor(
      [&] {
        int status = 0;
        Http(port)->Get(
            "/api/v1/events?interval_ms=100",
            [&status](const httplib::Response& response) {
              status = response.status;
              return true;
            },
            [](const char*, size_t) { return false; });  // Served: done with it.
        return status == 200;
      },
      absl::Seconds(20));
  EXPECT_TRUE(served);
  b.stop.store(true);
  server.Stop();
  a.reader.join();
  b.reader.join();
}

TEST_F(ConsoleApiTest, PagesAreServedWithTheirPolicy) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = ConsoleOptions();
  options.auth_token = kToken;
  options.read_only_requires_token = true;
  ASSERT_TRUE(server.Start(options).ok());
  auto http = Http(server.metrics_port());
  httplib::Result r = http->Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 302);
  EXPECT_EQ(r->get_header_value("Location"), "/console/");
  // The page needs no token to load (it holds no data); the API does.
  r = http->Get("/console/");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/html"));
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), HasSubstr("default-src 'self'"));
  EXPECT_EQ(r->body, std::string(FindConsoleAsset("index.html")->body));
  r = http->Get("/console/app.js");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("javascript"));
  // Every file the page loads (its scripts, in order, and its stylesheet) is
  // served, with its type.
  const std::string page(FindConsoleAsset("index.html")->body);
  int loaded = 0;
  for (std::string_view attr : {"<script src=\"", "<link rel=\"stylesheet\" href=\""}) {
    for (size_t at = page.find(attr); at != std::string::npos; at = page.find(attr, at + 1)) {
      const size_t start = at + attr.size();
      const std::string name = page.substr(start, page.find('"', start) - start);
      r = http->Get("/console/" + name);
      ASSERT_TRUE(r) << name;
      EXPECT_EQ(r->status, 200) << name;
      EXPECT_THAT(r->get_header_value("Content-Type"),
                  HasSubstr(absl::EndsWith(name, ".js") ? "javascript" : "text/css"))
          << name;
      ++loaded;
    }
  }
  EXPECT_EQ(loaded, 8);  // Seven scripts and the stylesheet.
  r = http->Get("/console/../metrics");
  ASSERT_TRUE(r);
  EXPECT_NE(r->status, 200);
  r = http->Get("/console/no-such-file.js");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = http->Get("/api/v1/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = http->Get("/api/v1/status", Bearer(kToken));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = http->Get("/api/v1/console", Bearer(kToken));
  ASSERT_TRUE(r);
  EXPECT_THAT(r->body, HasSubstr(R"("tokenRequiredForReads":true)"));
  server.Stop();
}

TEST_F(ConsoleApiTest, MutualTlsIdentityIsEnoughToAct) {
  const testing::TempDir dir;
  const std::optional<testing::TlsTestCerts> certs = testing::MakeTlsTestCerts(dir.path());
  if (!certs.has_value()) RETRYD_MISSING_TOOL("openssl", "Debian package openssl");
  absl::StatusOr<ControlServerOptions> options =
      testing::TlsServerOptions(certs->server, certs->client.cert, "127.0.0.1:0");
  ASSERT_TRUE(options.ok()) << options.status();
  options->console = true;
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(*options).ok());
  auto https = [&](const std::optional<testing::CertFiles>& client) {
    auto c = client.has_value()
                 ? std::make_unique<httplib::SSLClient>("127.0.0.1", server.metrics_port(),
                                                        client->cert, client->key)
                 : std::make_unique<httplib::SSLClient>("127.0.0.1", server.metrics_port());
    c->set_ca_cert_path(certs->server.cert.c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(5, 0);
    c->set_read_timeout(30, 0);
    return c;
  };
  // The client's certificate admits it: no token is configured, so it may act.
  httplib::Result r =
      https(certs->client)
          ->Post("/api/v1/rpc/StartRetryThreads", R"({"count":1})", "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  const auto started = FromJson<v1::StartRetryThreadsResponse>(r->body);
  ASSERT_EQ(started.thread_ids_size(), 1);
  r = https(certs->client)
          ->Post("/api/v1/rpc/StopRetryThreads",
                 absl::StrCat(R"({"threadIds":[)", started.thread_ids(0), "]}"),
                 "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // Without one, or with a stranger's, the handshake fails: nothing runs.
  for (const std::optional<testing::CertFiles>& client :
       {std::optional<testing::CertFiles>(), std::optional<testing::CertFiles>(certs->stranger)}) {
    r = https(client)->Post("/api/v1/rpc/StartRetryThreads", R"({"count":1})", "application/json");
    EXPECT_FALSE(r && r->status == 200);
  }
  server.Stop();
}

TEST_F(ConsoleApiTest, OptionsItCannotServeAreRefused) {
  ControlServer server(*engine_->engine);
  ControlServerOptions options = ConsoleOptions();
  options.metrics_address.clear();
  absl::Status s = server.Start(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("metrics_address"));
  options = ConsoleOptions();
  options.console = false;
  options.console_read_only = true;
  s = server.Start(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("http.console"));
  for (const char* host : {"", "host:80", "http://host", "a b"}) {
    options = ConsoleOptions();
    options.allowed_hosts = {host};
    s = server.Start(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << host;
    EXPECT_THAT(std::string(s.message()), HasSubstr("http.allowed_hosts")) << host;
  }
  // Without console the API is not there.
  options = ConsoleOptions();
  options.console = false;
  ASSERT_TRUE(server.Start(options).ok());
  const httplib::Result r = Http(server.metrics_port())->Get("/api/v1/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  server.Stop();
}

TEST(ConsoleUnitTest, OnlyTheProcessSecretMakesACallTheConsoles) {
  const std::string secret = NewConsoleSecret();
  ASSERT_EQ(secret.size(), 64u);
  EXPECT_NE(secret, NewConsoleSecret());
  std::string peer = "10.0.0.7:51234";
  std::string wrong = std::string(secret.size(), '0');
  auto metadata = [&](const std::string& s) {
    std::multimap<grpc::string_ref, grpc::string_ref> m;
    m.emplace(kConsoleSecretMetadata, s);
    m.emplace(kConsolePeerMetadata, peer);
    return m;
  };
  const std::optional<ConsoleCaller> caller = ForwardedByConsole(metadata(secret), secret);
  ASSERT_TRUE(caller.has_value());
  EXPECT_EQ(caller->peer, peer);
  EXPECT_FALSE(ForwardedByConsole(metadata(wrong), secret).has_value());
  EXPECT_FALSE(ForwardedByConsole(metadata(""), "").has_value());
  EXPECT_FALSE(ForwardedByConsole({}, secret).has_value());
}

TEST(ConsoleUnitTest, HttpStatusFollowsTheGrpcCode) {
  EXPECT_EQ(HttpStatusOf(0), 200);
  EXPECT_EQ(HttpStatusOf(3), 400);   // INVALID_ARGUMENT
  EXPECT_EQ(HttpStatusOf(9), 400);   // FAILED_PRECONDITION
  EXPECT_EQ(HttpStatusOf(16), 401);  // UNAUTHENTICATED
  EXPECT_EQ(HttpStatusOf(7), 403);   // PERMISSION_DENIED
  EXPECT_EQ(HttpStatusOf(5), 404);   // NOT_FOUND
  EXPECT_EQ(HttpStatusOf(8), 429);   // RESOURCE_EXHAUSTED
  EXPECT_EQ(HttpStatusOf(14), 503);  // UNAVAILABLE
  EXPECT_EQ(HttpStatusOf(4), 504);   // DEADLINE_EXCEEDED
  EXPECT_EQ(HttpStatusOf(13), 500);  // INTERNAL
}

TEST(ConsoleUnitTest, HostCheck) {
  const std::vector<std::string> allowed = {"retryd.example"};
  EXPECT_TRUE(HostAllowed("localhost:9090", "0.0.0.0", allowed));
  EXPECT_TRUE(HostAllowed("[::1]:9090", "0.0.0.0", allowed));
  EXPECT_TRUE(HostAllowed("10.0.0.5:9090", "10.0.0.5", allowed));
  EXPECT_TRUE(HostAllowed("RETRYD.example", "0.0.0.0", allowed));
  EXPECT_FALSE(HostAllowed("10.0.0.5:9090", "0.0.0.0", allowed));
  EXPECT_FALSE(HostAllowed("0.0.0.0:9090", "0.0.0.0", allowed));
  EXPECT_FALSE(HostAllowed("", "127.0.0.1", allowed));
  EXPECT_FALSE(HostAllowed("[::1", "127.0.0.1", allowed));
  EXPECT_FALSE(HostAllowed("localhost.attacker.example", "127.0.0.1", allowed));
}

}  // namespace
}  // namespace retryd::control
