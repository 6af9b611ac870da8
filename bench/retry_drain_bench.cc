// B3, retry drain: how fast retry threads work off a retry topic full of
// records that are all due, and how that scales with the number of threads.
// Not a test: prints a table and writes retry_drain_bench.csv.
//
//   build/bench/retry_drain_bench [--records=20000] [--threads=1,2,4,8]
//       [--latency_ms=2] [--calls=1,8] [--out=bench/results]
//
// Each run starts an engine with n retry threads on fresh topics of 8
// partitions and waits until both groups have every partition, then writes
// the records to the retry topic as retryd itself does (the original record
// plus retryd's retry headers, see retry_headers.h), due a second ago, and
// times them from the first write until every one has its outcome (the
// output topic) and is acknowledged. Each takes `latency_ms` in the
// processor: the simulate processor (a synchronous call per thread at a
// time), then the grpc processor against an in-process downstream server
// answering after `latency_ms`, with each max_concurrent_calls of --calls.
// Scaling efficiency of n threads: T1 / (n * Tn), T1 the same processor's
// 1-thread time in the same run.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_support.h"
#include "retryd/v1/config.pb.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/engine/api/engine.h"
#include "server/processors/grpc_processor.h"
#include "server/processors/simulate.h"
#include "tests/support/downstream_server.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd::bench {
namespace {

constexpr int kRetryPartitions = 8;

// The processor of one series of runs: simulate, or grpc with a call limit.
struct ProcessorKind {
  std::string name;
  int max_calls = 0;  // 0: simulate.
};

std::unique_ptr<engine::Processor> MakeProcessor(const ProcessorKind& kind, int latency_ms,
                                                 const testing::DownstreamServer& server) {
  if (kind.max_calls == 0) {
    v1::SimulateConfig config;
    config.set_latency_ms(static_cast<uint32_t>(latency_ms));
    return std::make_unique<SimulateProcessor>(config);
  }
  v1::GrpcProcessorConfig config;
  config.set_target(server.target());
  config.set_deadline_ms(10000);
  config.set_max_concurrent_calls(static_cast<uint32_t>(kind.max_calls));
  absl::StatusOr<std::unique_ptr<GrpcProcessor>> processor = GrpcProcessor::Create(config);
  if (!processor.ok()) {
    std::fprintf(stderr, "grpc processor: %s\n", processor.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(processor);
}

// `count` records for the retry topic of `topics`, each due a second ago
// at its second attempt, record i in partition i % kRetryPartitions.
std::vector<OutgoingRecord> DueRetryRecords(const testing::TestTopics& topics, int64_t count) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  std::vector<OutgoingRecord> records;
  records.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    records.push_back(RetryRecord(topics, i, kRetryPartitions, now_ms - 2000, now_ms - 1000));
  }
  return records;
}

// Every record is in the output topic, acknowledged.
bool Drained(const engine::EngineTotals& totals, int64_t count) {
  return totals.succeeded >= count && totals.in_flight == 0;
}

// Seconds to drain `count` due records with `threads` retry threads; -1 if
// the run failed (said why).
double RunDrain(const ProcessorKind& kind, int threads, int64_t count, int latency_ms,
                const testing::DownstreamServer& server) {
  const testing::TestTopics topics = Topics("drain", kRetryPartitions);
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.retry.threads = threads;
  options.retry.max_threads = threads;
  options.commit_interval_ms = 1000;
  std::unique_ptr<engine::Processor> processor = MakeProcessor(kind, latency_ms, server);
  if (processor == nullptr) return -1;
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, std::move(processor));
  if (!engine.ok() || !(*engine)->Start().ok()) {
    std::fprintf(stderr, "the engine did not start\n");
    return -1;
  }
  if (!testing::WaitFor([&] { return testing::AllAssigned(**engine, kRetryPartitions); },
                        absl::Seconds(60))) {
    std::fprintf(stderr, "the groups did not settle\n");
    (*engine)->Stop();
    return -1;
  }
  const std::vector<OutgoingRecord> records = DueRetryRecords(topics, count);
  const absl::Time start = absl::Now();
  testing::ProduceRecords(records);
  const bool done =
      testing::WaitFor([&] { return Drained((*engine)->Totals(), count); }, absl::Seconds(600));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const engine::EngineTotals totals = (*engine)->Totals();
  (*engine)->Stop();
  if (!done) {
    std::fprintf(stderr, "%s, %d threads: %lld of %lld records done in time\n", kind.name.c_str(),
                 threads, static_cast<long long>(totals.succeeded), static_cast<long long>(count));
    return -1;
  }
  if (totals.sent_to_retry != 0 || totals.dead_lettered != 0) {
    std::fprintf(stderr, "%s: records failed again\n", kind.name.c_str());
    return -1;
  }
  if (!CheckNothingDropped(topics.retry, count, kRetryPartitions) ||
      !CheckNothingDropped(topics.output, count, kRetryPartitions)) {
    return -1;
  }
  return seconds;
}

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();  // As retryd does (server/main.cc).
  SetMinLogLevel(LogLevel::kError);
  Flags flags(argc, argv, "retry drain: due records worked off by 1..n retry threads");
  const int64_t records = flags.Int("records", 20000, "due records in the retry topic");
  const std::vector<int64_t> thread_counts =
      flags.Ints("threads", {1, 2, 4, 8}, "retry thread counts, the first one the baseline");
  const auto latency_ms =
      static_cast<int>(flags.Int("latency_ms", 2, "processor latency per call, ms"));
  const std::vector<int64_t> calls =
      flags.Ints("calls", {1, 8}, "grpc processor max_concurrent_calls values");
  const std::string out = flags.String("out", "bench/results", "directory for the CSV");
  flags.Finish();

  testing::DownstreamServer server;
  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "downstream server: %s\n", s.ToString().c_str());
    return 1;
  }
  server.SetAnswer("", testing::DownstreamServer::Answer::Delayed(absl::Milliseconds(latency_ms)));

  std::vector<ProcessorKind> kinds = {{"simulate", 0}};
  for (int64_t c : calls) {
    kinds.push_back({absl::StrCat("grpc max_concurrent_calls=", c), static_cast<int>(c)});
  }
  Table table("retry_drain_bench", {"processor", "retry threads", "records", "drain s", "records/s",
                                    "speed-up", "efficiency"});
  int failed = 0;
  for (const ProcessorKind& kind : kinds) {
    double base = -1;
    int64_t base_threads = 0;
    for (int64_t threads : thread_counts) {
      const double seconds = RunDrain(kind, static_cast<int>(threads), records, latency_ms, server);
      if (seconds < 0) {
        table.AddRow(
            {kind.name, absl::StrCat(threads), absl::StrCat(records), "failed", "", "", ""});
        ++failed;
        continue;
      }
      if (base < 0) {
        base = seconds;
        base_threads = threads;
      }
      const double speed_up = base / seconds;
      const double efficiency =
          speed_up * static_cast<double>(base_threads) / static_cast<double>(threads);
      table.AddRow({kind.name, absl::StrCat(threads), absl::StrCat(records), Fixed(seconds, 2),
                    Fixed(static_cast<double>(records) / seconds, 0), Fixed(speed_up, 2),
                    Fixed(efficiency, 2)});
      std::fflush(stdout);
    }
  }
  std::printf(
      "processor latency %d ms; efficiency of n threads = T%lld * %lld / (n * Tn), target >= "
      "0.8\n",
      latency_ms, static_cast<long long>(thread_counts.front()),
      static_cast<long long>(thread_counts.front()));
  table.Print();
  if (!table.WriteCsv(out)) ++failed;
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace retryd::bench

int main(int argc, char** argv) { return retryd::bench::Main(argc, argv); }
