// What memory the engine takes, on the embedded broker (librdkafka's mock
// cluster, in process) or a real Kafka (bench_support.h). Not a test: prints
// figures against a baseline measured in the same run, and writes
// memory_bench.csv. The embedded broker's memory, the produced records
// included, is in the baseline; a real broker's is in its own process, so
// there the baseline is smaller and the growth over it alike.
//
//   build/bench/memory_bench [--records=50000] [--value_bytes=2048]
//                            [--partitions=64] [--out=bench/results]
//
// Each scenario runs in a child process of its own (this program run again
// with --scenario=...), so each peak RSS (VmHWM) is its own.
//
//  * held: `records` retry records due a day ahead, spread over `partitions`
//    retry partitions, read by one retry thread whose look-ahead (1000 per
//    partition) would hold them all; once with the default max_held_bytes
//    (64 MiB), once with no limit (0). The records are produced first (they
//    sit in the broker, the same in both runs); then the peak is reset
//    (/proc/self/clear_refs) and the baseline is the process's RSS before
//    the engine starts; the peak is the highest RSS until the retry thread
//    holds all the records, or as many as its budget lets in.
//  * idle: the engine with 1 and with 16 idle retry threads, nothing to read.
//    Baseline: the process's RSS with the broker up (the embedded one) or
//    its topics made (a real one) and the engine not yet started.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_support.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/engine/api/engine.h"
#include "server/engine/stats/thread_stats.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

constexpr int64_t kDefaultBudget = int64_t{64} << 20;
constexpr double kMiB = 1 << 20;

// Resets VmHWM to the current RSS (Linux 4.0+), so a peak measured after it
// is the engine's, not the producing's before it. False if refused.
bool ResetPeak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

std::unique_ptr<engine::Engine> Start(engine::EngineOptions options) {
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, testing::TestProcessor());
  if (!engine.ok() || !(*engine)->Start().ok()) {
    std::cerr << "engine did not start\n";
    return nullptr;
  }
  return *std::move(engine);
}

// Produces `records` retry records due a day ahead, record i to partition
// i % partitions; false if any was not acknowledged.
bool ProduceRetryRecords(const testing::TestTopics& topics, int64_t records, int partitions,
                         int value_bytes) {
  const int64_t now = absl::ToUnixMillis(absl::Now());
  return bench::ProduceEach(records, [&](int64_t i) {
    return bench::RetryRecord(topics, i, partitions, now, now + 86'400'000, value_bytes);
  });
}

// Child: one retry thread holding the retry backlog, under `budget`.
int RunHeld(int64_t budget, int64_t records, int partitions, int value_bytes,
            int64_t fetch_queue_kbytes) {
  const testing::TestTopics topics = bench::Topics("held", partitions);
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  if (fetch_queue_kbytes > 0) {
    options.kafka_properties["queued.max.messages.kbytes"] = absl::StrCat(fetch_queue_kbytes);
  }
  options.retry.threads = 1;
  options.retry.backoff.max_ms = 86'400'000;  // No clamping of the due times.
  options.max_held_bytes = budget;
  if (!ProduceRetryRecords(topics, records, partitions, value_bytes)) {
    std::cerr << "producing the retry records failed\n";
    return 1;
  }
  if (!bench::CheckNothingDropped(topics.retry, records, partitions)) return 1;
  if (!ResetPeak()) {
    std::cerr << "cannot reset VmHWM (/proc/self/clear_refs)\n";
    return 1;
  }
  const int64_t baseline = bench::ProcStatusBytes("VmRSS");
  std::unique_ptr<engine::Engine> engine = Start(options);
  if (engine == nullptr) return 1;
  // Held: all of them, or as many as the budget lets in (then the count
  // stays put for a second).
  int64_t held = 0, pauses = 0, held_bytes = 0, last = -1;
  absl::Time steady_since = absl::Now();
  testing::WaitFor(
      [&] {
        held = pauses = held_bytes = 0;
        for (const auto& s : engine->Threads()) {
          held += s->scheduled.load(std::memory_order_relaxed);
          held_bytes += s->held_bytes.load(std::memory_order_relaxed);
          pauses += s->counters.Read().budget_pauses;
        }
        if (held != last) {
          last = held;
          steady_since = absl::Now();
        }
        return held == records || (pauses > 0 && absl::Now() - steady_since > absl::Seconds(1));
      },
      absl::Seconds(300));
  const int64_t peak = bench::ProcStatusBytes("VmHWM");
  engine->Stop();
  bench::ReportToParent({{"baseline", baseline},
                         {"peak", peak},
                         {"held", held},
                         {"held_bytes", held_bytes},
                         {"pauses", pauses}});
  return 0;
}

// Child: `threads` idle retry threads.
int RunIdle(int threads, int partitions) {
  const testing::TestTopics topics = bench::Topics("idle", partitions);
  const int64_t baseline = bench::ProcStatusBytes("VmRSS");
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.retry.threads = threads;
  options.retry.max_threads = std::max(threads, options.retry.max_threads);
  std::unique_ptr<engine::Engine> engine = Start(options);
  if (engine == nullptr) return 1;
  if (!testing::WaitFor([&] { return testing::AllAssigned(*engine, partitions); },
                        absl::Seconds(120))) {
    std::cerr << "not assigned\n";
    return 1;
  }
  const int64_t rss = bench::ProcStatusBytes("VmRSS");
  const int64_t peak = bench::ProcStatusBytes("VmHWM");
  engine->Stop();
  bench::ReportToParent({{"baseline", baseline}, {"rss", rss}, {"peak", peak}});
  return 0;
}

std::string MiB(int64_t bytes) { return bench::Fixed(static_cast<double>(bytes) / kMiB, 1); }

struct Scenario {
  std::string name;
  std::string args;  // For the child.
};

// Runs each of `scenarios` in a child and adds its row: its growth is
// v[end] - v["baseline"], its ratio that growth over the last scenario's.
bool RunScenarios(const std::vector<Scenario>& scenarios, const std::string& end,
                  bench::Table& table) {
  std::vector<std::map<std::string, int64_t>> results;
  for (const Scenario& scenario : scenarios) {
    results.push_back(bench::RunChild(scenario.args));
    if (results.back().empty()) {
      std::cerr << scenario.name << ": the child failed\n";
      return false;
    }
  }
  const auto growth = [&end](std::map<std::string, int64_t>& v) {
    return static_cast<double>(v[end] - v["baseline"]);
  };
  const double reference = growth(results.back());
  for (size_t i = 0; i < scenarios.size(); ++i) {
    std::map<std::string, int64_t>& v = results[i];
    const auto cell = [&v](const std::string& key, bool mib) {
      auto it = v.find(key);
      if (it == v.end()) return std::string("-");
      return mib ? MiB(it->second) : absl::StrCat(it->second);
    };
    table.AddRow({scenarios[i].name, MiB(v["peak"]), MiB(v["baseline"]),
                  bench::Fixed(growth(v) / kMiB, 1), cell("held", false), cell("held_bytes", true),
                  cell("pauses", false), bench::Fixed(growth(v) / reference, 2)});
  }
  return true;
}

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();  // As retryd does (server/main.cc).
  bench::Flags flags(argc, argv, "peak RSS with records held in look-ahead, and idle threads");
  const std::string scenario = flags.String("scenario", "", "internal: the child's scenario");
  const int64_t records = flags.Int("records", 50'000, "retry records held in look-ahead");
  const int value_bytes = static_cast<int>(flags.Int("value_bytes", 2048, "value size"));
  const int partitions = static_cast<int>(flags.Int("partitions", 64, "retry partitions"));
  const int64_t budget = flags.Int("budget", kDefaultBudget, "internal: max_held_bytes");
  const int threads = static_cast<int>(flags.Int("threads", 1, "internal: idle retry threads"));
  const int64_t fetch_queue_kbytes =
      flags.Int("fetch_queue_kbytes", 0,
                "the consumers' queued.max.messages.kbytes (0: librdkafka's default)");
  const std::string out = flags.String("out", "bench/results", "directory for the CSV");
  flags.Finish();
  SetMinLogLevel(LogLevel::kWarning);
  if (scenario == "held") {
    return RunHeld(budget, records, partitions, value_bytes, fetch_queue_kbytes);
  }
  if (scenario == "idle") return RunIdle(threads, partitions);

  const std::string default_budget = absl::StrCat(kDefaultBudget);
  bench::Table table("memory_bench",
                     {"scenario", "peak_rss_mib", "baseline_mib", "over_baseline_mib",
                      "held_records", "held_mib", "budget_pauses", "ratio"});
  const std::string common =
      absl::StrCat("--records=", records, " --value_bytes=", value_bytes,
                   " --partitions=", partitions, " --fetch_queue_kbytes=", fetch_queue_kbytes);
  const std::string held = "--scenario=held " + common;
  const std::string idle = absl::StrCat("--scenario=idle --partitions=", partitions);
  // The ratios are against the last scenario of each group.
  const std::vector<Scenario> held_runs = {
      {"held, budget 64 MiB (default)", held + " --budget=" + default_budget},
      {"held, no limit", held + " --budget=0"}};
  const std::vector<Scenario> idle_runs = {{"idle, 16 retry threads", idle + " --threads=16"},
                                           {"idle, 1 retry thread", idle + " --threads=1"}};
  if (!RunScenarios(held_runs, "peak", table) || !RunScenarios(idle_runs, "rss", table)) return 1;
  table.Print();
  std::cout << "over_baseline: peak (held) or RSS (idle) above the baseline; ratio: against the "
               "no-limit run (held) or 1 retry thread (idle)\n";
  return table.WriteCsv(out) ? 0 : 1;
}

}  // namespace
}  // namespace retryd

int main(int argc, char** argv) { return retryd::Main(argc, argv); }
