// B2, head-of-line blocking: do failing records slow the healthy ones?
// Every tenth key is flaky (each of its records fails twice retriably, then
// succeeds: the simulate processor's rule for the key prefix "flaky-"),
// backoff 500 ms (full jitter: each delay drawn from [0, 500] ms). Each run
// is paired with the same run without failures (same records, same mode and
// threads, the rule left out); the ratio of healthy throughputs is the
// figure. Not a test: prints a table and writes head_of_line_bench.csv.
//
//   build-bench/bench/head_of_line_bench [--sizes=50000,200000]
//       [--threads=2] [--modes=UNORDERED,KEY] [--in_order_records=10000]
//       [--repeat=1]
//
// The defaults run in about three minutes on 2 cores; --threads=1,2,4 runs
// the whole matrix (about three times as long), --in_order_records=50000
// the IN_ORDER size (each flaky record holds its partition for two
// backoffs: about 2.5 minutes more).
//
// One more case, UNORDERED-REFUSED (--refused_records, 0 skips it): the
// flaky keys are refused instead (Outcome::kUnavailable, as the grpc
// processor reports UNAVAILABLE) until their third attempt, by a downstream
// that answers every other record: the downstream outage detector must take
// them for the records' own failures, not for an outage that pauses intake.
//
// Records: `size` records over --keys keys (default 1,600) on 16 partitions,
// record i with key i % keys, so each key stays in one partition (key k in
// partition k % 16) and every partition holds its tenth of flaky keys. A
// run starts the engine in fresh groups over fresh topics, waits until its
// groups are joined, then starts the clock and produces the records at full
// speed while the engine works: records arrive as the engine runs, so the
// latency below includes any queueing when the engine falls behind.
//
// Clock: the record timestamps the broker keeps (CreateTime, set by each
// producer from the machine's clock when it is handed the record). Input
// records carry the moment the bench produced them; output records the
// moment retryd produced them (retryd does not copy the input's timestamp).
// Healthy throughput: healthy records / (the latest healthy output
// timestamp - the start). End-to-end latency of a healthy record: its
// output timestamp - its input timestamp (found through the
// retryd-original-partition/-offset headers). Both leave out the output
// write's own acknowledgement (linger.ms 5 and a loopback round trip), the
// same in every run. Everything is read back after the run, so no reader
// competes with the engine for the CPU.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_support.h"
#include "retryd/v1/config.pb.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/engine/api/engine.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/kafka/producer.h"
#include "server/kafka/topic_reader.h"
#include "server/processors/simulate.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd::bench {
namespace {

constexpr int kFlakyEvery = 10;
constexpr absl::Duration kRunLimit = absl::Seconds(900);
constexpr int kFetchWaitMs = 10;

struct Workload {
  int64_t records = 0;
  int64_t keys = 1600;
  int64_t backoff_ms = 500;
  int value_bytes = 100;
};

// Key k lives in partition k % kPartitions; every tenth key of each
// partition is flaky.
bool IsFlakyKey(int64_t k) { return (k / kPartitions) % kFlakyEvery == 0; }

std::string KeyOf(const Workload& w, int64_t i) {
  const int64_t k = i % w.keys;
  return absl::StrCat(IsFlakyKey(k) ? "flaky-" : "ok-", k);
}

// Writes the input records, made ready (producer id, the topic's
// metadata) before the clock starts.
class InputProducer {
 public:
  static std::unique_ptr<InputProducer> Create(const std::string& topic) {
    kafka::ProducerOptions options;
    options.bootstrap_servers = testing::BootstrapServers();
    options.properties = testing::ClientProperties();
    absl::StatusOr<std::unique_ptr<kafka::Producer>> producer = kafka::Producer::Create(options);
    absl::Status s =
        producer.ok() ? (*producer)->PrepareTopics({topic}, absl::Seconds(30)) : producer.status();
    if (!s.ok()) {
      std::fprintf(stderr, "input producer: %s\n", s.ToString().c_str());
      return nullptr;
    }
    return std::unique_ptr<InputProducer>(new InputProducer(topic, *std::move(producer)));
  }

  ~InputProducer() { producer_->Close(absl::Seconds(1)); }

  // Record i to partition i % kPartitions, key KeyOf(w, i); waits for every
  // acknowledgement.
  bool Send(const Workload& w) {
    std::atomic<int64_t> failed{0};
    OutgoingRecord record;
    record.topic = topic_;
    record.value = std::string(static_cast<size_t>(std::max(0, w.value_bytes)), 'v');
    for (int64_t i = 0; i < w.records; ++i) {
      record.partition = static_cast<int32_t>(i % kPartitions);
      record.key = KeyOf(w, i);
      const absl::Status s = producer_->Produce(record, [&failed](absl::Status delivered) {
        if (!delivered.ok()) failed.fetch_add(1);
      });
      if (!s.ok()) {
        std::fprintf(stderr, "produce to %s: %s\n", topic_.c_str(), s.ToString().c_str());
        return false;
      }
    }
    const absl::Status flushed = producer_->Flush(absl::Seconds(120));
    if (!flushed.ok() || failed.load() != 0) {
      std::fprintf(stderr, "produce to %s: %lld not delivered (%s)\n", topic_.c_str(),
                   static_cast<long long>(failed.load()), flushed.ToString().c_str());
      return false;
    }
    return true;
  }

 private:
  InputProducer(std::string topic, std::unique_ptr<kafka::Producer> producer)
      : topic_(std::move(topic)), producer_(std::move(producer)) {}

  const std::string topic_;
  const std::unique_ptr<kafka::Producer> producer_;
};

// The flaky keys refused (the downstream answers them UNAVAILABLE) until
// their third attempt; every other record done at once.
class RefusingProcessor : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int attempt) override {
    if (absl::StartsWith(record.key.value_or(""), "flaky-") && attempt < 3) {
      return engine::Outcome::Unavailable("UNAVAILABLE: try later",
                                          engine::Outcome::Kind::kRetriable);
    }
    return engine::Outcome::Ok();
  }
};

struct Run {
  bool ok = false;
  int64_t healthy = 0;
  double healthy_seconds = -1;      // Until the last healthy record was written.
  double total_seconds = -1;        // Until the last record was.
  double p50_ms = -1, p99_ms = -1;  // End-to-end latency of healthy records.
};

Run RunOnce(const Workload& w, engine::Ordering ordering, int retry_threads, bool failures,
            bool refused) {
  Run run;
  const testing::TestTopics topics = Topics(absl::StrCat("hol-", engine::OrderingName(ordering)));
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.ordering = ordering;
  options.retry.threads = retry_threads;
  options.retry.max_attempts = 5;
  options.retry.backoff = {.initial_ms = w.backoff_ms, .multiplier = 1.0, .max_ms = w.backoff_ms};
  options.commit_interval_ms = 1000;
  // A real broker answers a fetch as soon as records arrive; the embedded
  // one waits out fetch.wait.max.ms (500 ms by default) on an empty
  // partition, which stalls a consumer that keeps up with its producer by up
  // to that much every time it catches up. 10 ms in every run, with or
  // without failures, on either broker, so both run the same clients.
  options.kafka_properties["fetch.wait.max.ms"] = absl::StrCat(kFetchWaitMs);
  retryd::v1::SimulateConfig config;
  config.set_latency_ms(0);
  if (failures) {
    auto* flaky = config.add_rule();
    flaky->set_key_prefix("flaky-");
    flaky->set_fail_attempts(2);
  }
  // Made ready before the clock starts: its first record must not wait for
  // a producer id or the input topic's metadata.
  std::unique_ptr<InputProducer> producer = InputProducer::Create(topics.input);
  if (producer == nullptr) return run;
  std::unique_ptr<engine::Processor> processor;
  if (refused && failures) {
    processor = std::make_unique<RefusingProcessor>();
  } else {
    processor = std::make_unique<SimulateProcessor>(config);
  }
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, std::move(processor));
  if (!engine.ok() || !(*engine)->Start().ok()) return run;
  // Running, not draining: in KEY and IN_ORDER the engine reads the retry
  // topic before it takes input.
  if (!testing::WaitFor(
          [&] {
            return (*engine)->state() == engine::EngineState::kRunning &&
                   testing::AllAssigned(**engine, kPartitions);
          },
          absl::Seconds(60))) {
    (*engine)->Stop();
    return run;
  }
  const int64_t start_ms = absl::ToUnixMillis(absl::Now());
  const bool produced = producer->Send(w);
  const bool done = produced && testing::WaitFor(
                                    [&] {
                                      const engine::EngineTotals t = (*engine)->Totals();
                                      return t.succeeded >= w.records && t.in_flight == 0;
                                    },
                                    kRunLimit);
  (*engine)->Stop();
  if (!done || !CheckNothingDropped(topics.input, w.records, kPartitions) ||
      !CheckNothingDropped(topics.output, w.records, kPartitions)) {
    return run;
  }

  // Input timestamps by partition and offset.
  std::vector<std::vector<int64_t>> produced_ms(kPartitions);
  absl::Status s = kafka::ScanTopic(testing::BootstrapServers(), testing::ClientProperties(),
                                    topics.input, {}, absl::Seconds(120), [&](const Record& r) {
                                      auto& p = produced_ms[r.partition];
                                      if (p.size() <= static_cast<size_t>(r.offset)) {
                                        p.resize(r.offset + 1, -1);
                                      }
                                      p[r.offset] = r.timestamp_ms;
                                    });
  if (!s.ok()) {
    std::fprintf(stderr, "read %s: %s\n", topics.input.c_str(), s.ToString().c_str());
    return run;
  }
  std::vector<double> latencies;
  int64_t last_healthy_ms = start_ms, last_ms = start_ms;
  bool headers_ok = true;
  s = kafka::ScanTopic(
      testing::BootstrapServers(), testing::ClientProperties(), topics.output, {},
      absl::Seconds(120), [&](const Record& r) {
        last_ms = std::max(last_ms, r.timestamp_ms);
        if (!absl::StartsWith(r.key.value_or(""), "ok-")) return;
        int partition = -1;
        int64_t offset = -1;
        if (!absl::SimpleAtoi(
                testing::HeaderValue(r, std::string(engine::kOriginalPartitionHeader)),
                &partition) ||
            !absl::SimpleAtoi(testing::HeaderValue(r, std::string(engine::kOriginalOffsetHeader)),
                              &offset) ||
            partition < 0 || partition >= kPartitions || offset < 0 ||
            static_cast<size_t>(offset) >= produced_ms[partition].size()) {
          headers_ok = false;
          return;
        }
        last_healthy_ms = std::max(last_healthy_ms, r.timestamp_ms);
        latencies.push_back(static_cast<double>(r.timestamp_ms - produced_ms[partition][offset]));
      });
  if (!s.ok() || !headers_ok) {
    std::fprintf(stderr, "read %s: %s\n", topics.output.c_str(),
                 s.ok() ? "an output record without its original partition and offset"
                        : s.ToString().c_str());
    return run;
  }
  run.ok = true;
  run.healthy = static_cast<int64_t>(latencies.size());
  run.healthy_seconds = (last_healthy_ms - start_ms) / 1000.0;
  run.total_seconds = (last_ms - start_ms) / 1000.0;
  run.p50_ms = Percentile(latencies, 50);
  run.p99_ms = Percentile(latencies, 99);
  return run;
}

struct Case {
  engine::Ordering ordering;
  int retry_threads;
  int64_t records;
  bool refused = false;  // The flaky keys are refused rather than failed.
};

std::vector<engine::Ordering> ParseModes(const std::string& text, bool* ok) {
  std::vector<engine::Ordering> modes;
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    if (name == "UNORDERED") {
      modes.push_back(engine::Ordering::kUnordered);
    } else if (name == "KEY") {
      modes.push_back(engine::Ordering::kKey);
    } else {
      *ok = false;
    }
  }
  return modes;
}

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();  // As retryd does (server/main.cc).
  SetMinLogLevel(LogLevel::kError);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // Progress lines as they come.
  Flags flags(argc, argv,
              "B2, head-of-line blocking: healthy-record throughput and latency with 10 % flaky "
              "keys (each record fails twice), against the same run without failures.");
  const std::vector<int64_t> sizes =
      flags.Ints("sizes", {50000, 200000}, "records per run (UNORDERED and KEY)");
  const std::vector<int64_t> threads =
      flags.Ints("threads", {2}, "retry threads (--threads=1,2,4: the full matrix, ~3x as long)");
  const std::string modes_text =
      flags.String("modes", "UNORDERED,KEY", "ordering modes with retry threads");
  const int64_t in_order_records = flags.Int(
      "in_order_records", 10000, "records of the IN_ORDER run (no retry threads); 0 skips it");
  const int64_t refused_records = flags.Int(
      "refused_records", 50000,
      "records of the UNORDERED-REFUSED run (flaky keys refused, not failed); 0 skips it");
  const int64_t repeat =
      flags.Int("repeat", 1, "pairs of runs per case, medians shown (IN_ORDER: always 1)");
  Workload w;
  w.keys = flags.Int("keys", 1600, "keys (a multiple of 16 keeps 10 % flaky per partition)");
  w.backoff_ms = flags.Int("backoff_ms", 500, "retry backoff cap (full jitter below it)");
  w.value_bytes = static_cast<int>(flags.Int("value_bytes", 100, "bytes per record value"));
  const std::string out = flags.String("out", "bench/results", "directory for the CSV");
  flags.Finish();
  bool modes_ok = true;
  const std::vector<engine::Ordering> modes = ParseModes(modes_text, &modes_ok);
  if (!modes_ok || w.keys < kPartitions * kFlakyEvery || repeat < 1) {
    std::fprintf(stderr, "head_of_line_bench: --modes takes UNORDERED and KEY; --keys >= %d\n",
                 kPartitions * kFlakyEvery);
    return 2;
  }

  std::vector<Case> cases;
  for (int64_t size : sizes) {
    for (engine::Ordering mode : modes) {
      for (int64_t t : threads) cases.push_back({mode, static_cast<int>(t), size});
    }
  }
  if (refused_records > 0 && !threads.empty()) {
    cases.push_back(
        {engine::Ordering::kUnordered, static_cast<int>(threads.front()), refused_records, true});
  }
  if (in_order_records > 0) cases.push_back({engine::Ordering::kInOrder, 0, in_order_records});

  Table table("head_of_line_bench",
              {"mode", "records", "retry_threads", "healthy_records", "healthy_per_s_no_failures",
               "healthy_per_s_flaky", "x_no_failures", "p50_ms_no_failures", "p99_ms_no_failures",
               "p50_ms_flaky", "p99_ms_flaky", "total_s_flaky", "runs", "x_least", "x_greatest"});
  bool ok = true;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    Workload cw = w;
    cw.records = k.records;
    const std::string name =
        absl::StrCat(engine::OrderingName(k.ordering), k.refused ? "-REFUSED" : "");
    std::vector<double> clean_rate, flaky_rate, ratio, clean_p50, clean_p99, flaky_p50, flaky_p99,
        total;
    int64_t healthy = 0;
    int failed_pairs = 0;
    // IN_ORDER's cost is two orders of magnitude, not a matter of noise:
    // one pair shows it.
    const int64_t pairs = k.ordering == engine::Ordering::kInOrder ? 1 : repeat;
    for (int64_t r = 0; r < pairs; ++r) {
      // Alternate which of the pair runs first.
      Run flaky, clean;
      if ((c + r) % 2 == 0) {
        clean = RunOnce(cw, k.ordering, k.retry_threads, false, k.refused);
        flaky = RunOnce(cw, k.ordering, k.retry_threads, true, k.refused);
      } else {
        flaky = RunOnce(cw, k.ordering, k.retry_threads, true, k.refused);
        clean = RunOnce(cw, k.ordering, k.retry_threads, false, k.refused);
      }
      if (!flaky.ok || !clean.ok) {
        // A busy machine can make a group coordinator time out: the group
        // rebalances and records are processed again (at least once), which
        // the output check counts. One such pair is run again.
        std::printf("%s, %lld records, %d retry threads: a run failed%s\n", name.c_str(),
                    static_cast<long long>(k.records), k.retry_threads,
                    failed_pairs == 0 ? "; running the pair again" : "");
        if (failed_pairs++ == 0) {
          --r;
        } else {
          ok = false;
        }
        continue;
      }
      healthy = flaky.healthy;
      clean_rate.push_back(flaky.healthy / clean.healthy_seconds);
      flaky_rate.push_back(flaky.healthy / flaky.healthy_seconds);
      ratio.push_back(flaky_rate.back() / clean_rate.back());
      clean_p50.push_back(clean.p50_ms);
      clean_p99.push_back(clean.p99_ms);
      flaky_p50.push_back(flaky.p50_ms);
      flaky_p99.push_back(flaky.p99_ms);
      total.push_back(flaky.total_seconds);
      std::printf(
          "%s %lld records %d retry threads: healthy %.0f/s vs %.0f/s without failures "
          "(x%.2f), p99 %.0f ms vs %.0f ms\n",
          name.c_str(), static_cast<long long>(k.records), k.retry_threads, flaky_rate.back(),
          clean_rate.back(), ratio.back(), flaky.p99_ms, clean.p99_ms);
    }
    if (ratio.empty()) continue;
    auto median = [](const std::vector<double>& v) { return Fixed(Percentile(v, 50), 0); };
    table.AddRow(
        {name, absl::StrCat(k.records), absl::StrCat(k.retry_threads), absl::StrCat(healthy),
         median(clean_rate), median(flaky_rate), Fixed(Percentile(ratio, 50), 2), median(clean_p50),
         median(clean_p99), median(flaky_p50), median(flaky_p99), Fixed(Percentile(total, 50), 2),
         absl::StrCat(ratio.size()), Fixed(*std::min_element(ratio.begin(), ratio.end()), 2),
         Fixed(*std::max_element(ratio.begin(), ratio.end()), 2)});
  }
  table.Print();
  std::printf(
      "healthy: records of keys that never fail; x_no_failures: healthy records/s over the same "
      "run's without failures (target >= 0.9 but for IN_ORDER), median of the pairs' ratios; "
      "figures: medians over the runs; latency: output timestamp - "
      "input timestamp, healthy records.\n");
  if (!table.WriteCsv(out)) ok = false;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace retryd::bench

int main(int argc, char** argv) { return retryd::bench::Main(argc, argv); }
