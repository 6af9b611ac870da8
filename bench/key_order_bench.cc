// What key order costs: healthy-key throughput in KEY next to UNORDERED and
// IN_ORDER on one workload, on the embedded broker (librdkafka's mock
// cluster, in process). Not a test: prints ratios against measurements of
// the same run, and writes key_order_bench.csv.
//
//   build/bench/key_order_bench [records [keys [repeat [in_order_records]]]]
//   (default 100000 records over 2500 keys, 5 runs, 2000 records in IN_ORDER)
//
// Workload: `records` records over `keys` keys, round after round (each
// key's records spread over the input), 4 input partitions, 1 primary
// thread. Every tenth key is flaky: each of its records fails twice
// retriably, then succeeds (the simulate processor's rule for the key prefix
// "flaky-"); the others succeed at once. Backoff: 100 ms initial, x2, 1 s
// max, in every mode. UNORDERED and KEY run 4 retry threads; IN_ORDER runs
// none (it excludes them) and, since each flaky record holds its whole
// partition for its backoff, only `in_order_records` records, with as many
// records per key (its throughput is still records per second).
//
// Each run produces the records to fresh topics first, then starts the
// engine in fresh groups; the processor holds the first call until the
// groups are stable, and the clock starts when it lets go: the engine works
// off a backlog, as a consumer that lags does. A reader scans the output
// topic as a user would, every few milliseconds (each input record counted
// once, by its retryd-original-* headers). Healthy: the time until every
// record of a healthy key is in the output topic. Total: until every record
// is. Baselines: reading the records back with a plain consumer (what the
// ratios are against), and producing them plus that read (as engine_bench).
// Every figure is the median of `repeat` runs.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/gated_processor.h"
#include "retryd/v1/config.pb.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/engine/api/engine.h"
#include "server/kafka/topic_reader.h"
#include "server/processors/simulate.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

constexpr int kFlakyEvery = 10;  // 10 % of keys.
constexpr int kPartitions = 4;
constexpr absl::Duration kRunLimit = absl::Seconds(600);

bool IsFlaky(int key) { return key % kFlakyEvery == 0; }

// `records` records over `keys` keys, round after round.
std::vector<std::string> Workload(int records, int keys) {
  std::vector<std::string> out;
  out.reserve(records);
  for (int i = 0; i < records; ++i) {
    const int k = i % keys;
    out.push_back(absl::StrCat(IsFlaky(k) ? "flaky-" : "ok-", k));
  }
  return out;
}

int HealthyRecords(int records, int keys) {
  int healthy = 0;
  for (int i = 0; i < records; ++i) healthy += IsFlaky(i % keys) ? 0 : 1;
  return healthy;
}

std::unique_ptr<engine::Processor> FlakyKeysProcessor() {
  retryd::v1::SimulateConfig config;
  config.set_latency_ms(0);
  auto* flaky = config.add_rule();
  flaky->set_key_prefix("flaky-");
  flaky->set_fail_attempts(2);
  return std::make_unique<SimulateProcessor>(config);
}

struct Mode {
  const char* name;
  engine::Ordering ordering;
  int retry_threads;
  bool capped;  // Runs in_order_records records.
};

struct Run {
  double healthy_seconds = -1;  // -1: did not finish.
  double total_seconds = -1;
  engine::EngineTotals totals;
};

// Counts the input records that reached `topic`, each once, by scanning it
// from where the last scan ended.
class OutputCounter {
 public:
  explicit OutputCounter(std::string topic) : topic_(std::move(topic)) {}

  absl::Status Scan() {
    return kafka::ScanTopic(
        testing::BootstrapServers(), testing::ClientProperties(), topic_, next_, absl::Seconds(30),
        [&](const Record& r) {
          next_[r.partition] = r.offset + 1;
          int partition = 0;
          int64_t offset = 0;
          if (!absl::SimpleAtoi(testing::HeaderValue(r, "retryd-original-partition"), &partition) ||
              !absl::SimpleAtoi(testing::HeaderValue(r, "retryd-original-offset"), &offset)) {
            return;
          }
          if (!seen_.emplace(partition, offset).second) return;  // A repeat.
          if (absl::StartsWith(r.key.value_or(""), "ok-")) ++healthy_;
        });
  }
  int64_t all() const { return static_cast<int64_t>(seen_.size()); }
  int64_t healthy() const { return healthy_; }

 private:
  const std::string topic_;
  std::map<int32_t, int64_t> next_;
  std::set<std::pair<int32_t, int64_t>> seen_;
  int64_t healthy_ = 0;
};

Run RunMode(const Mode& mode, int records, int keys) {
  Run run;
  const testing::TestTopics topics = testing::CreateTopics(
      absl::StrCat("kbench-", engine::OrderingName(mode.ordering)), kPartitions);
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.ordering = mode.ordering;
  options.retry.threads = mode.retry_threads;
  options.retry.backoff = {.initial_ms = 100, .multiplier = 2.0, .max_ms = 1000};
  options.commit_interval_ms = 1000;
  testing::ProduceKeys(topics.input, Workload(records, keys));
  auto gated = std::make_unique<bench::GatedProcessor>(FlakyKeysProcessor());
  bench::GatedProcessor* gate = gated.get();
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, std::move(gated));
  if (!engine.ok()) return run;
  if (!(*engine)->Start().ok()) {
    gate->Open();
    return run;
  }
  // The clock starts once the groups are stable and the primary holds its
  // first record: group joins and, in IN_ORDER and KEY, reading the retry
  // topic first, are left out; the input is a backlog, as for a consumer
  // that lags.
  const bool ready = testing::WaitFor(
      [&] { return gate->reached() && testing::AllAssigned(**engine, kPartitions); },
      absl::Seconds(60));
  const int healthy = HealthyRecords(records, keys);
  OutputCounter output(topics.output);
  const absl::Time start = absl::Now();
  gate->Open();
  if (!ready) {
    (*engine)->Stop();
    return run;
  }
  // Each scan sees what was in the topic when it began: a count reached
  // there is dated at that scan's start.
  while (absl::Now() - start < kRunLimit) {
    const absl::Time scanned_at = absl::Now();
    if (!output.Scan().ok()) break;
    const double seconds = absl::ToDoubleSeconds(scanned_at - start);
    if (run.healthy_seconds < 0 && output.healthy() >= healthy) run.healthy_seconds = seconds;
    if (output.all() >= records) {
      run.total_seconds = seconds;
      break;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  run.totals = (*engine)->Totals();
  (*engine)->Stop();
  return run;
}

struct Timing {
  double median = -1, fastest = -1, slowest = -1;  // Seconds; -1: a run failed.
};

Timing Summarize(std::vector<double> seconds) {
  if (seconds.empty()) return Timing{};
  for (double s : seconds) {
    if (s < 0) return Timing{};
  }
  std::sort(seconds.begin(), seconds.end());
  return Timing{seconds[seconds.size() / 2], seconds.front(), seconds.back()};
}

// Produces `records` records and reads them back with a plain consumer.
struct Baseline {
  double produce_seconds = -1, read_seconds = -1;
};
Baseline RunBaseline(int records, int keys) {
  const testing::TestTopics base = testing::CreateTopics("kbench-baseline", kPartitions);
  const absl::Time start = absl::Now();
  testing::ProduceKeys(base.input, Workload(records, keys));
  const absl::Time produced = absl::Now();
  const size_t read = testing::ReadAll(base.input).size();
  if (read != static_cast<size_t>(records)) return Baseline{};
  return Baseline{absl::ToDoubleSeconds(produced - start),
                  absl::ToDoubleSeconds(absl::Now() - produced)};
}

struct Result {
  const Mode* mode = nullptr;
  int records = 0, keys = 0;
  Timing healthy, total;
  engine::EngineTotals last;  // Of the last run: shows the mechanism engaged.
  int healthy_records() const { return HealthyRecords(records, keys); }
  double healthy_rate() const { return healthy_records() / healthy.median; }
  double total_rate() const { return records / total.median; }
};

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();  // As retryd does (server/main.cc).
  SetMinLogLevel(LogLevel::kError);
  const int records = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int keys = argc > 2 ? std::atoi(argv[2]) : 2500;
  const int repeat = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  const int in_order_records = argc > 4 ? std::atoi(argv[4]) : 2000;
  // IN_ORDER keeps the rounds (records per key) and so the share of flaky records.
  const int rounds = keys > 0 ? records / keys : 0;
  const int in_order_keys = rounds > 0 ? in_order_records / rounds : 0;
  if (keys < kFlakyEvery || rounds < 1 || in_order_keys < kFlakyEvery) {
    std::fprintf(stderr,
                 "usage: key_order_bench [records [keys [repeat [in_order_records]]]]\n"
                 "  at least %d keys, and as many records in each mode (IN_ORDER keeps the\n"
                 "  records per key: in_order_records / (records / keys) keys)\n",
                 kFlakyEvery);
    return 2;
  }
  std::vector<double> produce_runs, read_runs, both_runs;
  for (int i = 0; i < repeat; ++i) {
    const Baseline b = RunBaseline(records, keys);
    produce_runs.push_back(b.produce_seconds);
    read_runs.push_back(b.read_seconds);
    both_runs.push_back(b.read_seconds < 0 ? -1 : b.produce_seconds + b.read_seconds);
  }
  const Timing read = Summarize(read_runs);
  const Timing both = Summarize(both_runs);
  if (read.median < 0) {
    std::fprintf(stderr, "key_order_bench: the baseline did not read back every record\n");
    return 1;
  }
  const double read_rate = records / read.median;

  const std::vector<Mode> modes = {
      {"UNORDERED", engine::Ordering::kUnordered, 4, false},
      {"KEY", engine::Ordering::kKey, 4, false},
      {"IN_ORDER", engine::Ordering::kInOrder, 0, true},
  };
  // Round after round of one run per mode, so that a machine busier at
  // one time than another weighs on every mode alike.
  std::vector<Result> all(modes.size());
  std::vector<std::vector<double>> healthy(modes.size()), total(modes.size());
  for (size_t m = 0; m < modes.size(); ++m) {
    all[m].mode = &modes[m];
    all[m].records = modes[m].capped ? in_order_keys * rounds : records;
    all[m].keys = modes[m].capped ? in_order_keys : keys;
  }
  for (int i = 0; i < repeat; ++i) {
    for (size_t m = 0; m < modes.size(); ++m) {
      const Run run = RunMode(modes[m], all[m].records, all[m].keys);
      healthy[m].push_back(run.healthy_seconds);
      total[m].push_back(run.total_seconds);
      all[m].last = run.totals;
    }
  }
  std::vector<Result> results;
  int failed = 0;
  for (size_t m = 0; m < modes.size(); ++m) {
    Result& r = all[m];
    r.healthy = Summarize(healthy[m]);
    r.total = Summarize(total[m]);
    if (r.healthy.median <= 0 || r.total.median <= 0) {
      std::printf("%s: a run did not finish within %.0f s\n", r.mode->name,
                  absl::ToDoubleSeconds(kRunLimit));
      ++failed;
      continue;
    }
    results.push_back(r);
  }
  const Result* unordered = nullptr;
  for (const Result& r : results) {
    if (r.mode->ordering == engine::Ordering::kUnordered) unordered = &r;
  }
  if (unordered == nullptr) return 1;

  std::printf(
      "%d records over %d keys (%d rounds), 1 key in %d flaky (each record fails twice), "
      "backoff 100 ms x2 up to 1 s, %d partitions; median of %d runs\n",
      records, keys, rounds, kFlakyEvery, kPartitions, repeat);
  std::printf("baseline: plain read %.0f records/s; produce + plain read %.0f records/s\n",
              read_rate, records / both.median);
  std::printf("%-10s %7s %10s %12s %8s %10s %9s %10s %8s %9s\n", "mode", "records", "healthy s",
              "healthy r/s", "x UNORD", "x read", "total s", "total r/s", "x UNORD", "followed");
  std::ofstream csv("key_order_bench.csv");
  csv << "mode,records,keys,healthy_records,runs,healthy_median_seconds,healthy_fastest_seconds,"
         "healthy_slowest_seconds,healthy_records_per_second,healthy_throughput_vs_unordered,"
         "healthy_throughput_vs_plain_read,total_median_seconds,total_fastest_seconds,"
         "total_slowest_seconds,total_records_per_second,total_throughput_vs_unordered,"
         "failed_attempts,sent_to_retry,followed\n";
  auto baseline_row = [&](const char* name, const Timing& t) {
    csv << name << "," << records << "," << keys << ",," << repeat << ",,,,,,," << t.median << ","
        << t.fastest << "," << t.slowest << "," << records / t.median << ",,,,\n";
  };
  baseline_row("baseline: plain read", read);
  baseline_row("baseline: produce + plain read", both);
  for (const Result& r : results) {
    const double h_vs_u = r.healthy_rate() / unordered->healthy_rate();
    const double h_vs_read = r.healthy_rate() / read_rate;
    const double t_vs_u = r.total_rate() / unordered->total_rate();
    std::printf("%-10s %7d %10.3f %12.0f %8.3f %10.3f %9.3f %10.0f %8.3f %9lld\n", r.mode->name,
                r.records, r.healthy.median, r.healthy_rate(), h_vs_u, h_vs_read, r.total.median,
                r.total_rate(), t_vs_u, static_cast<long long>(r.last.followed));
    csv << r.mode->name << "," << r.records << "," << r.keys << "," << r.healthy_records() << ","
        << repeat << "," << r.healthy.median << "," << r.healthy.fastest << "," << r.healthy.slowest
        << "," << r.healthy_rate() << "," << h_vs_u << "," << h_vs_read << "," << r.total.median
        << "," << r.total.fastest << "," << r.total.slowest << "," << r.total_rate() << ","
        << t_vs_u << "," << r.last.failed_attempts << "," << r.last.sent_to_retry << ","
        << r.last.followed << "\n";
  }
  for (const Result& r : results) {
    std::printf("%-10s healthy %.3f..%.3f s, total %.3f..%.3f s (fastest..slowest)\n", r.mode->name,
                r.healthy.fastest, r.healthy.slowest, r.total.fastest, r.total.slowest);
  }
  // Paired: each run against the UNORDERED run of its round.
  for (size_t m = 1; m < modes.size(); ++m) {
    std::vector<double> ratios;
    for (int i = 0; i < repeat; ++i) {
      const double h = healthy[m][i], u = healthy[0][i];
      if (h > 0 && u > 0) {
        ratios.push_back((all[m].healthy_records() / h) / (all[0].healthy_records() / u));
      }
    }
    const Timing paired = Summarize(ratios);  // Least..greatest.
    if (paired.median < 0) continue;
    std::printf("%-10s healthy r/s x UNORDERED's in the same round: median %.3f (%.3f..%.3f)\n",
                modes[m].name, paired.median, paired.fastest, paired.slowest);
  }
  std::printf(
      "healthy: until every healthy key's record is in the output topic; total: every record.\n"
      "x UNORD: records/s over UNORDERED's (1 = as fast); x read: over the plain read's.\n"
      "IN_ORDER ran %d records over %d keys, not %d: each flaky record holds its whole\n"
      "partition for its backoff, so it is compared per record (records/s).\n",
      in_order_keys * rounds, in_order_keys, records);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace retryd

int main(int argc, char** argv) { return retryd::Main(argc, argv); }
