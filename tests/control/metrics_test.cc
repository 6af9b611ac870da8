// Prometheus exposition: the families MetricsCollector derives from the
// counter and gauge tables, the HTTP listener serving them (routes, token,
// TLS, addresses), a scrape under load checked against GetStatus, and
// promtool's verdict on a live scrape of the retryd binary.
#include <httplib.h>
#include <prometheus/check_names.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "server/control/control_config.h"
#include "server/control/control_server.h"
#include "server/engine/api/counters.h"
#include "server/engine/metrics_sampler.h"
#include "server/engine/stats/latency_histogram.h"
#include "server/http/metrics_collector.h"
#include "tests/control/control_test_util.h"
#include "tests/support/missing_tool.h"
#include "tests/support/retryd_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd::control {
namespace {

using http::kMetricsContentType;
using http::LatencyBucketBounds;
using http::MetricFamilies;
using http::MetricsCollector;
using http::MetricsContext;
using http::RenderMetrics;

using ::prometheus::MetricFamily;
using ::prometheus::MetricType;
using ::retryd::testing::Channel;
using ::retryd::testing::Client;
using ::retryd::testing::EngineUnderTest;
using ::retryd::testing::ExitedWith;
using ::retryd::testing::ReadFileOrEmpty;
using ::retryd::testing::RetrydProcess;
using ::retryd::testing::TempDir;
using ::retryd::testing::WaitFor;
using ::testing::HasSubstr;

// ---- reading an exposition -------------------------------------------------------

// A sample's name and labels, labels sorted: `name{a="1",b="2"}`.
std::string Key(const std::string& name, std::map<std::string, std::string> labels = {}) {
  if (labels.empty()) return name;
  std::string out = name + "{";
  bool first = true;
  for (const auto& [label, value] : labels) {
    absl::StrAppend(&out, first ? "" : ",", label, "=\"", value, "\"");
    first = false;
  }
  return out + "}";
}

// The samples of a text exposition, by Key(). Label values here hold no
// quotes or commas.
std::map<std::string, double> ParseSamples(const std::string& body) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) continue;
    const size_t space = line.rfind(' ');
    const absl::string_view series = line.substr(0, space);
    double value = 0;
    const std::string text(line.substr(space + 1));
    if (text == "+Inf") {
      value = std::numeric_limits<double>::infinity();
    } else if (!absl::SimpleAtod(text, &value)) {
      ADD_FAILURE() << "not a sample line: " << line;
      continue;
    }
    const size_t brace = series.find('{');
    std::map<std::string, std::string> labels;
    if (brace != absl::string_view::npos) {
      const absl::string_view inner = series.substr(brace + 1, series.size() - brace - 2);
      for (absl::string_view pair : absl::StrSplit(inner, ',', absl::SkipEmpty())) {
        const size_t eq = pair.find('=');
        labels[std::string(pair.substr(0, eq))] =
            std::string(pair.substr(eq + 2, pair.size() - eq - 3));
      }
    }
    out[Key(std::string(series.substr(0, brace)), labels)] = value;
  }
  return out;
}

const MetricFamily* FindFamily(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const MetricFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// A sample with two threads whose every counter and gauge differ.
engine::EngineSample TwoThreadSample() {
  engine::EngineSample sample;
  sample.time_ms = 1'700'000'000'000;
  sample.state = engine::EngineState::kRunning;
  sample.ordering = engine::Ordering::kKey;
  sample.retry_backlog = 42;
  sample.parked_keys.keys = 3;
  sample.parked_keys.records = 7;
  sample.downstream.roles[1].down = true;
  sample.downstream.roles[1].outages = 2;
  for (int id : {1, 2}) {
    engine::ThreadSample t;
    t.id = id;
    t.role = id == 1 ? engine::ThreadRole::kPrimary : engine::ThreadRole::kRetry;
    t.state = id == 1 ? engine::ThreadState::kRunning : engine::ThreadState::kIdle;
    int64_t n = id * 100;
    for (const engine::CounterField& c : engine::kCounterFields) t.*c.member = ++n;
    for (const engine::ThreadGaugeField& g : engine::kThreadGaugeFields) t.*g.member = ++n;
    t.group_id = id == 1 ? "orders" : "orders.retry";
    t.topic_lag = id == 1 ? std::map<std::string, int64_t>{{"in-a", 5}, {"in-b", 0}}
                          : std::map<std::string, int64_t>{{"orders.retry", 9}};
    sample.threads.push_back(t);
    sample.totals += t;
  }
  sample.totals.consumed = 11;
  sample.totals.in_flight = 5;
  return sample;
}

// ---- the families ---------------------------------------------------------------

TEST(MetricsUnitTest, FamiliesFollowTheCounterAndGaugeTables) {
  const engine::EngineSample sample = TwoThreadSample();
  const std::vector<MetricFamily> families =
      MetricFamilies(sample, MetricsContext{"9.9.9", 1 << 20, true});
  const std::map<std::string, double> samples = ParseSamples(RenderMetrics(families));

  for (const engine::CounterField& c : engine::kCounterFields) {
    const std::string thread_name = absl::StrCat("retryd_thread_", c.name, "_total");
    const MetricFamily* family = FindFamily(families, thread_name);
    ASSERT_NE(family, nullptr) << thread_name;
    EXPECT_EQ(family->type, MetricType::Counter) << thread_name;
    EXPECT_EQ(family->help, c.help);
    for (const engine::ThreadSample& t : sample.threads) {
      EXPECT_EQ(samples.at(Key(thread_name, {{"thread_id", absl::StrCat(t.id)},
                                             {"role", engine::ThreadRoleName(t.role)}})),
                static_cast<double>(t.*c.member))
          << thread_name;
    }
    const std::string total_name = absl::StrCat("retryd_", c.name, "_total");
    ASSERT_NE(FindFamily(families, total_name), nullptr) << total_name;
    EXPECT_EQ(FindFamily(families, total_name)->type, MetricType::Counter);
    EXPECT_EQ(samples.at(total_name), static_cast<double>(sample.totals.*c.member)) << total_name;
  }
  for (const engine::ThreadGaugeField& g : engine::kThreadGaugeFields) {
    const std::string name = absl::StrCat("retryd_thread_", g.name);
    ASSERT_NE(FindFamily(families, name), nullptr) << name;
    EXPECT_EQ(FindFamily(families, name)->type, MetricType::Gauge) << name;
    const engine::ThreadSample& t = sample.threads[1];
    EXPECT_EQ(samples.at(Key(name, {{"thread_id", "2"}, {"role", "retry"}})),
              static_cast<double>(t.*g.member));
  }
  EXPECT_EQ(samples.at(Key("retryd_build_info", {{"version", "9.9.9"}})), 1);
  EXPECT_EQ(samples.at("retryd_consumed_total"), 11);
  EXPECT_EQ(samples.at("retryd_in_flight"), 5);
  EXPECT_EQ(samples.at("retryd_retry_backlog"), 42);
  EXPECT_EQ(samples.at("retryd_parked_keys"), 3);
  EXPECT_EQ(samples.at("retryd_parked_records"), 7);
  EXPECT_EQ(samples.at("retryd_max_held_bytes"), 1 << 20);
  EXPECT_EQ(samples.at("retryd_kafka_reachable"), 1);
  EXPECT_EQ(samples.at(Key("retryd_engine_state", {{"state", "RUNNING"}})), 1);
  EXPECT_EQ(samples.at(Key("retryd_engine_state", {{"state", "DRAINING"}})), 0);
  EXPECT_EQ(samples.at(Key("retryd_ordering", {{"mode", "KEY"}})), 1);
  EXPECT_EQ(samples.at(Key("retryd_downstream_up", {{"role", "primary"}})), 1);
  EXPECT_EQ(samples.at(Key("retryd_downstream_up", {{"role", "retry"}})), 0);
  EXPECT_EQ(samples.at(Key("retryd_downstream_outages_total", {{"role", "retry"}})), 2);
  EXPECT_EQ(samples.at(Key("retryd_thread_state",
                           {{"thread_id", "2"}, {"role", "retry"}, {"state", "IDLE"}})),
            1);
  EXPECT_EQ(samples.at(Key("retryd_thread_state",
                           {{"thread_id", "2"}, {"role", "retry"}, {"state", "RUNNING"}})),
            0);

  // Prometheus' naming: valid names, `_total` exactly on counters.
  for (const MetricFamily& f : families) {
    EXPECT_TRUE(prometheus::CheckMetricName(f.name)) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ(absl::EndsWith(f.name, "_total"), f.type == MetricType::Counter) << f.name;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        EXPECT_TRUE(prometheus::CheckLabelName(l.name)) << f.name << " " << l.name;
      }
    }
  }
}

TEST(MetricsUnitTest, EachRetryTierHasItsBacklog) {
  engine::EngineSample sample = TwoThreadSample();
  sample.tier_backlog = {4, 0, 1200};
  MetricsContext context;
  context.tier_topics = {"r-1s", "r-1m", "r-1h"};
  const std::vector<MetricFamily> families = MetricFamilies(sample, context);
  const MetricFamily* family = FindFamily(families, "retryd_retry_tier_backlog");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->type, MetricType::Gauge);
  std::map<std::string, double> by_tier;
  for (const prometheus::ClientMetric& m : family->metric) {
    ASSERT_EQ(m.label.size(), 1u);
    EXPECT_EQ(m.label[0].name, "tier");
    by_tier[m.label[0].value] = m.gauge.value;
  }
  EXPECT_EQ(by_tier, (std::map<std::string, double>{{"r-1s", 4}, {"r-1m", 0}, {"r-1h", 1200}}));
}

TEST(MetricsUnitTest, LatencyHistogramsHaveExactFixedBuckets) {
  engine::LatencyHistogram histogram;
  histogram.Record(absl::Microseconds(300));   // Under 512 us.
  histogram.Record(absl::Microseconds(1000));  // Under 1024 us.
  histogram.Record(absl::Seconds(5));          // Under 2^23 us = 8.39 s.
  engine::EngineSample sample = TwoThreadSample();
  sample.threads[0].processing = histogram.Read();
  const std::vector<MetricFamily> families = MetricFamilies(sample, MetricsContext{});
  const MetricFamily* family = FindFamily(families, "retryd_thread_processing_latency_seconds");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->type, MetricType::Histogram);
  const prometheus::ClientMetric::Histogram& h = family->metric[0].histogram;
  const std::vector<double> bounds = LatencyBucketBounds();
  ASSERT_EQ(h.bucket.size(), bounds.size() + 1);
  EXPECT_EQ(h.sample_count, 3u);
  for (size_t i = 0; i < bounds.size(); ++i) {
    EXPECT_EQ(h.bucket[i].upper_bound, bounds[i]);
    const uint64_t expected = (bounds[i] > 0.0003) + (bounds[i] > 0.001) + (bounds[i] > 5.0);
    EXPECT_EQ(h.bucket[i].cumulative_count, expected) << "le=" << bounds[i];
  }
  EXPECT_EQ(h.bucket.back().cumulative_count, 3u);
  EXPECT_TRUE(std::isinf(h.bucket.back().upper_bound));
  // The sum is estimated from the fine buckets, within 12.5 %.
  EXPECT_NEAR(h.sample_sum, 5.0013, 5.0013 * 0.125);
  // Fixed: the same bounds for every thread and every scrape.
  EXPECT_EQ(bounds.front(), 256e-6);
  EXPECT_NEAR(bounds.back(), 67.108864, 1e-9);
}

TEST(MetricsUnitTest, ConsumerLagIsSummedByGroupAndTopicOverRunningThreads) {
  engine::EngineSample sample = TwoThreadSample();
  engine::ThreadSample more = sample.threads[0];  // A second primary: its lag adds up.
  more.id = 3;
  more.topic_lag = {{"in-a", 2}};
  sample.threads.push_back(more);
  engine::ThreadSample stopped = sample.threads[1];  // Stopped: not counted.
  stopped.id = 4;
  stopped.state = engine::ThreadState::kStopped;
  sample.threads.push_back(stopped);
  const std::vector<MetricFamily> families = MetricFamilies(sample, MetricsContext{});
  const MetricFamily* family = FindFamily(families, "retryd_consumer_lag_records");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->type, MetricType::Gauge);
  std::map<std::string, double> by_label;
  for (const prometheus::ClientMetric& m : family->metric) {
    std::string key;
    for (const auto& label : m.label) absl::StrAppend(&key, label.name, "=", label.value, " ");
    by_label[key] = m.gauge.value;
  }
  EXPECT_THAT(by_label, ::testing::UnorderedElementsAre(
                            ::testing::Pair("group=orders topic=in-a ", 7),
                            ::testing::Pair("group=orders topic=in-b ", 0),
                            ::testing::Pair("group=orders.retry topic=orders.retry ", 9)));
}

TEST(MetricsUnitTest, OperatingGuideListsEveryFamily) {
  const std::string guide = ReadFileOrEmpty(RETRYD_SOURCE_DIR "/docs/metrics.md");
  ASSERT_FALSE(guide.empty());
  for (const MetricFamily& f : MetricFamilies(TwoThreadSample(), MetricsContext{})) {
    EXPECT_THAT(guide, HasSubstr(absl::StrCat("`", f.name, "`")))
        << "docs/metrics.md (\"Metrics\") does not list " << f.name;
  }
}

// ---- the listener, on an engine on the mock cluster -------------------------------

std::unique_ptr<httplib::Client> Http(int port) { return testing::HttpClient(port); }

constexpr char kMetricsServerTopics[] = "metrics-server";

class MetricsServerTest : public testing::SharedEngineTest<kMetricsServerTopics> {
 protected:
  static ControlServerOptions LocalOptions() {
    ControlServerOptions options;
    options.listen_address = "127.0.0.1:0";
    options.metrics_address = "127.0.0.1:0";
    options.sample_tick = absl::Milliseconds(100);
    options.probe_interval = absl::Milliseconds(200);
    return options;
  }
};

// What GetStatus and the engine's totals say at one moment.
struct Reading {
  v1::GetStatusResponse status;
  engine::EngineTotals totals;
};

// The counter `name` as GetStatus reports it (its Totals field), or, for a
// counter GetStatus leaves out, the engine's totals it is made from.
double CounterOf(const Reading& r, const engine::CounterField& c) {
  const google::protobuf::FieldDescriptor* field =
      v1::Totals::descriptor()->FindFieldByName(c.name);
  if (field != nullptr) {
    return static_cast<double>(
        r.status.totals().GetReflection()->GetInt64(r.status.totals(), field));
  }
  return static_cast<double>(r.totals.*c.member);
}

TEST_F(MetricsServerTest, ScrapeUnderLoadAgreesWithGetStatus) {
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(LocalOptions()).ok());
  ASSERT_GT(server.metrics_port(), 0);
  auto rpc = Client(Channel(absl::StrCat("127.0.0.1:", server.port())));
  auto http = Http(server.metrics_port());
  auto read = [&]() -> std::optional<Reading> {
    absl::StatusOr<v1::GetStatusResponse> status = rpc->GetStatus();
    if (!status.ok()) return std::nullopt;
    return Reading{*std::move(status), engine_->engine->Totals()};
  };

  // Load: records that succeed, and records that fail and circulate through
  // the retry topic, produced until the end of the test.
  engine_->processor->set_failing(true);
  std::atomic<bool> stop_load{false};
  std::thread load([&] {
    for (int batch = 0; !stop_load.load(); ++batch) {
      std::vector<std::string> keys;
      for (int i = 0; i < 20; ++i) keys.push_back(absl::StrCat(i % 4 ? "ok-" : "fail-", batch, i));
      testing::ProduceKeys(engine_->topics.input, keys);
    }
  });
  absl::Cleanup end_load = [&] {
    stop_load.store(true);
    load.join();
    engine_->processor->set_failing(false);
  };
  ASSERT_TRUE(
      WaitFor([&] { return engine_->engine->Totals().sent_to_retry > 20; }, absl::Seconds(60)));

  for (int round = 0; round < 5; ++round) {
    const std::optional<Reading> before = read();
    ASSERT_TRUE(before.has_value());
    const httplib::Result scrape = http->Get("/metrics");
    ASSERT_TRUE(scrape) << httplib::to_string(scrape.error());
    ASSERT_EQ(scrape->status, 200);
    EXPECT_EQ(scrape->get_header_value("Content-Type"), kMetricsContentType);
    const std::optional<Reading> after = read();
    ASSERT_TRUE(after.has_value());
    const std::map<std::string, double> samples = ParseSamples(scrape->body);

    for (const engine::CounterField& c : engine::kCounterFields) {
      const std::string name = absl::StrCat("retryd_", c.name, "_total");
      ASSERT_TRUE(samples.contains(name)) << name;
      EXPECT_LE(CounterOf(*before, c), samples.at(name)) << name << " in round " << round;
      EXPECT_LE(samples.at(name), CounterOf(*after, c)) << name << " in round " << round;
      // The threads' own counters add up to no more than the totals, which
      // also count threads long stopped.
      double by_thread = 0;
      const std::string thread_prefix = absl::StrCat("retryd_thread_", c.name, "_total{");
      for (const auto& [key, value] : samples) {
        if (absl::StartsWith(key, thread_prefix)) by_thread += value;
      }
      EXPECT_LE(by_thread, samples.at(name)) << name;
    }
    // The input topic's consumer lag, by the primary's group.
    EXPECT_TRUE(std::any_of(
        samples.begin(), samples.end(),
        [&](const auto& sample) {
          return absl::StartsWith(sample.first, "retryd_consumer_lag_records{") &&
                 absl::StrContains(sample.first, absl::StrCat("topic=\"", engine_->topics.input));
        }))
        << "no retryd_consumer_lag_records for " << engine_->topics.input;
    EXPECT_LE(before->status.totals().consumed(), samples.at("retryd_consumed_total"));
    EXPECT_LE(samples.at("retryd_consumed_total"), after->status.totals().consumed());
    // The load is seen: records processed, and some sent to the retry topic.
    EXPECT_GT(samples.at("retryd_processed_total"), 0);
    EXPECT_GT(samples.at("retryd_sent_to_retry_total"), 20);
    // And the latencies: some thread's histogram counted calls.
    double calls_timed = 0;
    for (const auto& [key, value] : samples) {
      if (absl::StartsWith(key, "retryd_thread_processing_latency_seconds_count{")) {
        calls_timed += value;
      }
    }
    EXPECT_GT(calls_timed, 0);
  }
  std::move(end_load).Invoke();

  // Gauges: equal to a GetStatus of the same WatchMetrics interval. A round
  // counts when GetStatus says the same before and after the scrape.
  auto gauges_agree = [&] {
    const std::optional<Reading> before = read();
    const httplib::Result scrape = http->Get("/metrics");
    const std::optional<Reading> after = read();
    if (!before || !after || !scrape || scrape->status != 200) return false;
    const v1::GetStatusResponse& b = before->status;
    const v1::GetStatusResponse& a = after->status;
    if (b.retry_backlog() != a.retry_backlog() ||
        b.parked_keys().keys() != a.parked_keys().keys() ||
        b.parked_keys().records() != a.parked_keys().records() ||
        b.totals().in_flight() != a.totals().in_flight() || b.state() != a.state() ||
        b.kafka_reachable() != a.kafka_reachable() ||
        b.downstream().state() != a.downstream().state() || b.threads_size() != a.threads_size()) {
      return false;
    }
    for (int i = 0; i < b.threads_size(); ++i) {
      if (b.threads(i).state() != a.threads(i).state()) return false;
    }
    const std::map<std::string, double> s = ParseSamples(scrape->body);
    bool equal = s.at("retryd_retry_backlog") == static_cast<double>(a.retry_backlog()) &&
                 s.at("retryd_parked_keys") == static_cast<double>(a.parked_keys().keys()) &&
                 s.at("retryd_parked_records") == static_cast<double>(a.parked_keys().records()) &&
                 s.at("retryd_in_flight") == static_cast<double>(a.totals().in_flight()) &&
                 s.at(Key("retryd_engine_state", {{"state", "RUNNING"}})) ==
                     (a.state() == v1::ENGINE_STATE_RUNNING ? 1 : 0) &&
                 s.at("retryd_kafka_reachable") == (a.kafka_reachable() ? 1 : 0) &&
                 s.at(Key("retryd_downstream_up", {{"role", "primary"}})) ==
                     (a.downstream().state() == v1::DOWNSTREAM_STATE_DOWN ? 0 : 1);
    for (const v1::ThreadInfo& t : a.threads()) {
      // The metric's label is the engine's name, without the proto's prefix.
      const std::string state(absl::StripPrefix(v1::ThreadState_Name(t.state()), "THREAD_STATE_"));
      const auto it =
          s.find(Key("retryd_thread_state",
                     {{"thread_id", absl::StrCat(t.thread_id())},
                      {"role", t.role() == v1::THREAD_ROLE_PRIMARY ? "primary" : "retry"},
                      {"state", state}}));
      equal = equal && it != s.end() && it->second == 1;
    }
    return equal;
  };
  EXPECT_TRUE(WaitFor(gauges_agree, absl::Seconds(30)));
  server.Stop();
  EXPECT_EQ(server.metrics_port(), 0);
}

TEST_F(MetricsServerTest, ServesGetMetricsOnly) {
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(LocalOptions()).ok());
  auto http = Http(server.metrics_port());
  for (const char* path : {"/", "/metric", "/metrics/", "/metrics/x", "/console"}) {
    const httplib::Result r = http->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
  }
  httplib::Result r = http->Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
  r = http->Put("/metrics", "x", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  r = http->Delete("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  r = http->Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->body, HasSubstr("# TYPE retryd_processed_total counter"));
  server.Stop();
}

TEST_F(MetricsServerTest, TokenRulesAreTheControlApis) {
  for (const bool read_only_requires_token : {true, false}) {
    ControlServer server(*engine_->engine);
    ControlServerOptions options = LocalOptions();
    options.auth_token = "s3cret-token";
    options.read_only_requires_token = read_only_requires_token;
    ASSERT_TRUE(server.Start(options).ok());
    auto http = Http(server.metrics_port());
    const int needed = read_only_requires_token ? 401 : 200;

    httplib::Result r = http->Get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, needed) << "no token";
    if (needed == 401) {
      EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
      EXPECT_THAT(r->body, HasSubstr("missing bearer token"));
      EXPECT_THAT(r->body, ::testing::Not(HasSubstr("s3cret")));
    }
    r = http->Get("/metrics", httplib::Headers{{"Authorization", "Bearer wrong"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, needed) << "a wrong token";
    r = http->Get("/metrics", httplib::Headers{{"Authorization", "Basic czNjcmV0LXRva2Vu"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, needed) << "not a bearer token";
    r = http->Get("/metrics", httplib::Headers{{"Authorization", "Bearer s3cret-token"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << "the token";
    // As GetStatus: the same rule on the gRPC side.
    const absl::Status status =
        Client(Channel(absl::StrCat("127.0.0.1:", server.port())))->GetStatus().status();
    EXPECT_EQ(status.code(), read_only_requires_token ? absl::StatusCode::kUnauthenticated
                                                      : absl::StatusCode::kOk);
    server.Stop();
  }
}

std::unique_ptr<httplib::SSLClient> Https(int port, const std::string& ca,
                                          const std::optional<testing::CertFiles>& client = {}) {
  auto https = client.has_value() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port,
                                                                         client->cert, client->key)
                                  : std::make_unique<httplib::SSLClient>("127.0.0.1", port);
  https->set_ca_cert_path(ca.c_str());
  https->enable_server_certificate_verification(true);
  https->set_connection_timeout(5, 0);
  https->set_read_timeout(10, 0);
  return https;
}

TEST_F(MetricsServerTest, TlsAsTheControlApi) {
  const TempDir dir;
  const std::optional<testing::TlsTestCerts> certs = testing::MakeTlsTestCerts(dir.path());
  if (!certs.has_value()) RETRYD_MISSING_TOOL("openssl", "Debian package openssl");
  absl::StatusOr<ControlServerOptions> options =
      testing::TlsServerOptions(certs->server, "", "127.0.0.1:0");
  ASSERT_TRUE(options.ok()) << options.status();
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(*options).ok());

  httplib::Result r = Https(server.metrics_port(), certs->server.cert)->Get("/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->body, HasSubstr("retryd_build_info"));
  r = Http(server.metrics_port())->Get("/metrics");
  EXPECT_FALSE(r && r->status == 200) << "plain HTTP is refused";
  r = Https(server.metrics_port(), certs->stranger.cert)->Get("/metrics");
  EXPECT_FALSE(r) << "an untrusted server is refused";
  server.Stop();
}

TEST_F(MetricsServerTest, MutualTlsNeedsAClientCertificate) {
  const TempDir dir;
  const std::optional<testing::TlsTestCerts> certs = testing::MakeTlsTestCerts(dir.path());
  if (!certs.has_value()) RETRYD_MISSING_TOOL("openssl", "Debian package openssl");
  absl::StatusOr<ControlServerOptions> options =
      testing::TlsServerOptions(certs->server, certs->client.cert, "127.0.0.1:0");
  ASSERT_TRUE(options.ok()) << options.status();
  ControlServer server(*engine_->engine);
  ASSERT_TRUE(server.Start(*options).ok());

  httplib::Result r =
      Https(server.metrics_port(), certs->server.cert, certs->client)->Get("/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  r = Https(server.metrics_port(), certs->server.cert)->Get("/metrics");
  EXPECT_FALSE(r && r->status == 200) << "no client certificate";
  r = Https(server.metrics_port(), certs->server.cert, certs->stranger)->Get("/metrics");
  EXPECT_FALSE(r && r->status == 200) << "a certificate it did not sign";
  server.Stop();
}

TEST_F(MetricsServerTest, RefusesAddressesItCannotServeSafely) {
  retryd::v1::Config config;
  config.set_listen_address("127.0.0.1:0");
  config.set_metrics_address("0.0.0.0:9464");
  absl::StatusOr<ControlServerOptions> options = ControlServerOptionsFromConfig(config);
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(), HasSubstr("metrics_address"));
  EXPECT_THAT(options.status().message(), HasSubstr("allow_unauthenticated_remote"));
  config.mutable_control()->set_allow_unauthenticated_remote(true);
  EXPECT_TRUE(ControlServerOptionsFromConfig(config).ok());

  for (const char* address : {"unix:/tmp/retryd-metrics.sock", "nohost", "127.0.0.1:70000"}) {
    ControlServer server(*engine_->engine);
    ControlServerOptions local = LocalOptions();
    local.metrics_address = address;
    const absl::Status s = server.Start(local);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("metrics_address")) << address;
    EXPECT_EQ(server.port(), 0) << "nothing runs";
  }

  // A port in use: UNAVAILABLE, and the control API does not run either.
  ControlServer first(*engine_->engine);
  ASSERT_TRUE(first.Start(LocalOptions()).ok());
  ControlServer second(*engine_->engine);
  ControlServerOptions taken = LocalOptions();
  taken.metrics_address = absl::StrCat("127.0.0.1:", first.metrics_port());
  const absl::Status s = second.Start(taken);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("metrics_address"));
  EXPECT_THAT(s.message(), HasSubstr("already in use"));
  EXPECT_EQ(second.port(), 0);
  EXPECT_EQ(second.metrics_port(), 0);
  // And the first still answers.
  const httplib::Result r = Http(first.metrics_port())->Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// ---- the retryd binary, checked by promtool --------------------------------------

// The path of `program` on $PATH; empty if it is not there.
std::string OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The number after `prefix` on a line of `out`; 0 if there is none yet.
int NumberAfter(const std::string& out, const std::string& prefix) {
  const size_t at = out.find(prefix);
  if (at == std::string::npos) return 0;
  const size_t end = out.find('\n', at);
  if (end == std::string::npos) return 0;
  int n = 0;
  const size_t start = at + prefix.size();
  return absl::SimpleAtoi(out.substr(start, end - start), &n) ? n : 0;
}

// Without promtool (Debian's `prometheus` package, a test-only dependency of
// scripts/setup.sh) the test is skipped, and fails under CI=true.
TEST(MetricsPromtoolTest, LiveScrapeOfRetrydUnderLoadPasses) {
  const std::string promtool = OnPath("promtool");
  if (promtool.empty()) RETRYD_MISSING_TOOL("promtool", "Debian package prometheus");
  const TempDir dir;
  const std::string config = dir.WriteFile("retryd.textproto",
                                           "group_id: \"metrics-main\"\n"
                                           "input_topics: \"metrics-main-in\"\n"
                                           "metrics_address: \"127.0.0.1:0\"\n"
                                           "processor { simulate {\n"
                                           "  rule { key_prefix: \"perm-\" permanent: true }\n"
                                           "  rule { key_prefix: \"flaky-\" fail_attempts: 2 }\n"
                                           "} }\n");
  RetrydProcess retryd(dir.Path("retryd"), {"--config", config, "--listen", "127.0.0.1:0", "--demo",
                                            "--demo_rate", "500", "--summary_interval_s", "0"});
  int port = 0;
  ASSERT_TRUE(WaitFor(
      [&] { return (port = NumberAfter(retryd.Stdout(), "metrics listening on port ")) > 0; },
      absl::Seconds(90)))
      << "stdout: " << retryd.Stdout() << "\nstderr: " << retryd.Stderr();
  auto http = Http(port);
  std::string body;
  // Under load: the demo's records have gone through, some to the retry
  // topic, with the retry threads' series present.
  ASSERT_TRUE(WaitFor(
      [&] {
        const httplib::Result r = http->Get("/metrics");
        if (!r || r->status != 200) return false;
        body = r->body;
        const std::map<std::string, double> s = ParseSamples(body);
        return s.contains("retryd_sent_to_retry_total") && s.at("retryd_processed_total") > 100 &&
               s.at("retryd_sent_to_retry_total") > 0;
      },
      absl::Seconds(90)))
      << body << "\nstderr: " << retryd.Stderr();
  EXPECT_THAT(body,
              HasSubstr(absl::StrCat("retryd_build_info{version=\"", RETRYD_VERSION, "\"} 1")));
  EXPECT_THAT(body, HasSubstr("retryd_thread_processing_latency_seconds_bucket{"));

  const std::string scrape = dir.WriteFile("scrape.txt", body);
  const std::string verdict = dir.Path("promtool.out");
  const int rc = std::system(
      absl::StrCat(promtool, " check metrics < ", scrape, " > ", verdict, " 2>&1").c_str());
  EXPECT_EQ(rc, 0) << "promtool check metrics said:\n"
                   << ReadFileOrEmpty(verdict) << "\non:\n"
                   << body;

  retryd.Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(retryd.WaitExit(absl::Seconds(60)), 0)) << retryd.Stderr();
}

}  // namespace
}  // namespace retryd::control
