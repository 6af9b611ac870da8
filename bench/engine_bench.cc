// End-to-end engine throughput on the embedded broker (librdkafka's mock
// cluster, in process). Not a test: prints a table of ratios against a
// baseline measured in the same run, and writes engine_bench.csv.
//
//   build/bench/engine_bench [records]   (default 20000)
//
// Baseline: producing the records and reading them back with a plain
// consumer (no processing, no hand-off). Each scenario starts the engine in a
// fresh group, waits for the group joins, then times producing the records
// until every one has its outcome.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "retryd/v1/config.pb.h"
#include "server/common/logging.h"
#include "server/engine/engine.h"
#include "server/processors/simulate.h"
#include "tests/support/test_cluster.h"

namespace retryd {
namespace {

struct Scenario {
  std::string name;
  bool output;
  bool in_order;
  int retry_threads;
  double flaky_fraction;
};

std::unique_ptr<Processor> FlakyProcessor() {
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

double RunScenario(const Scenario& s, int records) {
  const testing::TestTopics topics = testing::CreateTopics("bench");
  EngineOptions options = testing::TestEngineOptions(topics);
  if (!s.output) options.output_topic.clear();
  options.in_order = s.in_order;
  options.retry.threads = s.retry_threads;
  options.retry.backoff = {.initial_ms = 1, .multiplier = 1.0, .max_ms = 1};
  options.commit_interval_ms = 1000;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options, FlakyProcessor());
  if (!engine.ok() || !(*engine)->Start().ok()) return -1;
  testing::WaitFor([&] { return testing::AllAssigned(**engine, 3); }, absl::Seconds(60));
  const absl::Time start = absl::Now();
  testing::ProduceKeys(topics.input, Keys(records, s.flaky_fraction));
  const bool done = testing::WaitFor(
      [&] {
        const EngineTotals t = (*engine)->Totals();
        return t.succeeded >= records && t.in_flight == 0;
      },
      absl::Seconds(300));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  (*engine)->Stop();
  return done ? seconds : -1;
}

int Main(int argc, char** argv) {
  SetMinLogLevel(LogLevel::kError);
  const int records = argc > 1 ? std::atoi(argv[1]) : 20000;
  const testing::TestTopics base = testing::CreateTopics("bench-baseline");
  const absl::Time start = absl::Now();
  testing::ProduceKeys(base.input, Keys(records, 0));
  const size_t read = testing::ReadAll(base.input).size();
  const double baseline = absl::ToDoubleSeconds(absl::Now() - start);
  if (read != static_cast<size_t>(records)) return 1;

  const std::vector<Scenario> scenarios = {
      {"ok, no output, 1 primary", false, false, 0, 0},
      {"ok, output topic", true, false, 0, 0},
      {"10% fail once, 2 retry threads", true, false, 2, 0.1},
      {"10% fail once, in order", true, true, 0, 0.1},
  };
  std::ofstream csv("engine_bench.csv");
  csv << "scenario,records,seconds,records_per_second,ratio_to_baseline\n";
  std::printf("%-34s %10s %12s %10s\n", "scenario", "seconds", "records/s", "x baseline");
  std::printf("%-34s %10.3f %12.0f %10.2f\n", "baseline: produce + plain read", baseline,
              records / baseline, 1.0);
  csv << "baseline," << records << "," << baseline << "," << records / baseline << ",1\n";
  for (const Scenario& s : scenarios) {
    const double seconds = RunScenario(s, records);
    if (seconds < 0) {
      std::printf("%-34s did not finish\n", s.name.c_str());
      continue;
    }
    std::printf("%-34s %10.3f %12.0f %10.2f\n", s.name.c_str(), seconds, records / seconds,
                seconds / baseline);
    csv << '"' << s.name << "\"," << records << "," << seconds << "," << records / seconds << ","
        << seconds / baseline << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace retryd

int main(int argc, char** argv) { return retryd::Main(argc, argv); }
