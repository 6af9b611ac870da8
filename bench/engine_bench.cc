// End-to-end engine throughput on the embedded broker (librdkafka's mock
// cluster, in process). Not a test: prints a table of ratios against a
// baseline measured in the same run, and writes engine_bench.csv.
//
//   build/bench/engine_bench [records [repeat]] [--only=TEXT] [--lookahead=N]
//                            [--fetch_wait_ms=N]
//
// Defaults: 20000 records, 3 runs. --only runs the scenarios whose name
// contains TEXT (the baseline always runs); --lookahead and --fetch_wait_ms
// set retry.lookahead and the consumers' fetch.wait.max.ms (default: the
// engine's own).
//
// Baseline: producing the records and reading them back with a plain
// consumer (no processing, no hand-off). Each scenario starts the engine in a
// fresh group, waits for the group joins, then times producing the records
// until every one has its outcome. The baseline and every scenario run
// `repeat` times on fresh topics; the table shows each one's median, its
// ratio to the baseline's median, and the fastest and slowest run.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "retryd/v1/config.pb.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/engine/api/engine.h"
#include "server/processors/simulate.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

struct Scenario {
  std::string name;
  bool output;
  bool in_order;
  int retry_threads;
  double flaky_fraction;
};

std::unique_ptr<engine::Processor> FlakyProcessor() {
  retryd::v1::SimulateConfig config;
  auto* flaky = config.add_rule();
  flaky->set_key_prefix("flaky-");
  flaky->set_fail_attempts(1);
  return std::make_unique<SimulateProcessor>(config);
}

std::vector<std::string> Keys(int n, double flaky_fraction) {
  std::vector<std::string> keys;
  const int every = flaky_fraction > 0 ? static_cast<int>(1 / flaky_fraction) : 0;
  for (int i = 0; i < n; ++i) {
    keys.push_back(absl::StrCat(every > 0 && i % every == 0 ? "flaky-" : "ok-", i));
  }
  return keys;
}

// Settings from the command line; 0: the engine's default.
struct Overrides {
  int64_t lookahead = 0;
  int64_t fetch_wait_ms = 0;
};

double RunScenario(const Scenario& s, int records, const Overrides& overrides) {
  const testing::TestTopics topics = testing::CreateTopics("bench");
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  if (!s.output) options.output_topic.clear();
  options.ordering = s.in_order ? engine::Ordering::kInOrder : engine::Ordering::kUnordered;
  options.retry.threads = s.retry_threads;
  options.retry.backoff = {.initial_ms = 1, .multiplier = 1.0, .max_ms = 1};
  options.commit_interval_ms = 1000;
  if (overrides.lookahead > 0) options.retry.lookahead = overrides.lookahead;
  if (overrides.fetch_wait_ms > 0) {
    options.kafka_properties["fetch.wait.max.ms"] = absl::StrCat(overrides.fetch_wait_ms);
  }
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, FlakyProcessor());
  if (!engine.ok() || !(*engine)->Start().ok()) return -1;
  testing::WaitFor([&] { return testing::AllAssigned(**engine, 3); }, absl::Seconds(60));
  const absl::Time start = absl::Now();
  testing::ProduceKeys(topics.input, Keys(records, s.flaky_fraction));
  const bool done = testing::WaitFor(
      [&] {
        const engine::EngineTotals t = (*engine)->Totals();
        return t.succeeded >= records && t.in_flight == 0;
      },
      absl::Seconds(300));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  (*engine)->Stop();
  return done ? seconds : -1;
}

struct Timing {
  double median = -1, fastest = -1, slowest = -1;  // Seconds; -1: a run failed.
};

Timing Measure(int repeat, const std::function<double()>& run) {
  std::vector<double> seconds;
  for (int i = 0; i < repeat; ++i) {
    const double s = run();
    if (s < 0) return Timing{};
    seconds.push_back(s);
  }
  std::sort(seconds.begin(), seconds.end());
  return Timing{seconds[seconds.size() / 2], seconds.front(), seconds.back()};
}

double RunBaseline(int records) {
  const testing::TestTopics base = testing::CreateTopics("bench-baseline");
  const absl::Time start = absl::Now();
  testing::ProduceKeys(base.input, Keys(records, 0));
  const size_t read = testing::ReadAll(base.input).size();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return read == static_cast<size_t>(records) ? seconds : -1;
}

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();  // As retryd does (server/main.cc).
  SetMinLogLevel(LogLevel::kError);
  std::vector<std::string> positional;
  std::string only;
  Overrides overrides;
  bool bad = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--")) {
      positional.emplace_back(arg);
    } else if (absl::ConsumePrefix(&arg, "only=")) {
      only = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "lookahead=")) {
      bad = bad || !absl::SimpleAtoi(arg, &overrides.lookahead);
    } else if (absl::ConsumePrefix(&arg, "fetch_wait_ms=")) {
      bad = bad || !absl::SimpleAtoi(arg, &overrides.fetch_wait_ms);
    } else {
      bad = true;
    }
  }
  const int records = positional.size() > 0 ? std::atoi(positional[0].c_str()) : 20000;
  const int repeat = positional.size() > 1 ? std::max(1, std::atoi(positional[1].c_str())) : 3;
  if (records < 1 || bad || positional.size() > 2) {
    std::fprintf(stderr,
                 "usage: engine_bench [records [repeat]] [--only=TEXT] [--lookahead=N] "
                 "[--fetch_wait_ms=N]\n");
    return 2;
  }
  const Timing baseline = Measure(repeat, [&] { return RunBaseline(records); });
  if (baseline.median < 0) {
    std::fprintf(stderr, "engine_bench: the baseline did not read back every record\n");
    return 1;
  }

  const std::vector<Scenario> scenarios = {
      {"ok, no output, 1 primary", false, false, 0, 0},
      {"ok, output topic", true, false, 0, 0},
      {"10% fail once, 2 retry threads", true, false, 2, 0.1},
      {"10% fail once, in order", true, true, 0, 0.1},
  };
  std::ofstream csv("engine_bench.csv");
  csv << "scenario,records,runs,median_seconds,fastest_seconds,slowest_seconds,"
         "records_per_second,ratio_to_baseline\n";
  std::printf("%d records, median of %d runs each\n", records, repeat);
  std::printf("%-34s %9s %11s %10s %17s\n", "scenario", "median s", "records/s", "x baseline",
              "fastest..slowest");
  auto row = [&](const std::string& name, const Timing& t) {
    std::printf("%-34s %9.3f %11.0f %10.2f %8.3f..%-8.3f\n", name.c_str(), t.median,
                records / t.median, t.median / baseline.median, t.fastest, t.slowest);
    csv << '"' << name << "\"," << records << "," << repeat << "," << t.median << "," << t.fastest
        << "," << t.slowest << "," << records / t.median << "," << t.median / baseline.median
        << "\n";
  };
  row("baseline: produce + plain read", baseline);
  int failed = 0;
  for (const Scenario& s : scenarios) {
    if (!absl::StrContains(s.name, only)) continue;
    const Timing t = Measure(repeat, [&] { return RunScenario(s, records, overrides); });
    if (t.median < 0) {
      std::printf("%-34s did not finish\n", s.name.c_str());
      ++failed;
      continue;
    }
    row(s.name, t);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace retryd

int main(int argc, char** argv) { return retryd::Main(argc, argv); }
