// B1, the primary path: retryd's engine relaying records that all succeed
// (a no-op processor) to an output topic, against a bare librdkafka
// consume -> produce loop in the same process, on the same broker (the
// embedded one, or a real Kafka: bench_support.h), over the same input
// records. Not a test: prints a table with the bare
// loop beside retryd and the ratio, and writes relay_bench.csv.
//
//   build-bench/bench/relay_bench [--records=200000] [--repeat=3]
//
// Both sides are started the same way: the input (records spread over 16
// partitions) is produced once, before any run; each run consumes all of it
// in a fresh consumer group and writes to a fresh output topic. Each side
// holds its first record until its groups are joined and it has partitions;
// the clock starts when it is let go, so group joins are left out and the
// input is a backlog, as for a consumer that lags. The clock stops when the
// output topic's high watermarks, summed over its partitions and polled
// every --poll_ms milliseconds from outside, reach the number of records:
// every record is written and acknowledged. (Output timestamps would not
// serve: they are the time each side handed a record to its producer, not
// when the broker had it.)
//
// Same bytes out: the bare loop (bench/bare_relay_loop.h) writes each
// record's key, value and headers followed by the four headers retryd adds
// to an output record, with the producer settings of
// server/kafka/producer.cc. --verify=1 compares the two outputs of
// the first round record by record.
//
// The sides take turns, `repeat` rounds; the table shows each side's median
// records/s with its slowest and fastest run, and the ratio of medians.
// Every output topic and the input are checked for dropped records.
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bare_relay_loop.h"
#include "bench/bench_support.h"
#include "bench/gated_processor.h"
#include "retryd/v1/config.pb.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/engine/api/engine.h"
#include "server/kafka/topic_reader.h"
#include "server/processors/simulate.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd::bench {
namespace {

constexpr absl::Duration kRunLimit = absl::Seconds(300);

// Sums a topic's high watermarks, as seen from outside.
class Watermarks {
 public:
  Watermarks() : rk_(NewClient(RD_KAFKA_PRODUCER)) {}

  // -1 if the broker did not answer.
  int64_t Total(const std::string& topic, int partitions) {
    if (rk_ == nullptr) return -1;
    int64_t total = 0;
    for (int p = 0; p < partitions; ++p) {
      int64_t low = -1, high = -1;
      if (rd_kafka_query_watermark_offsets(rk_.get(), topic.c_str(), p, &low, &high, 5000) !=
          RD_KAFKA_RESP_ERR_NO_ERROR) {
        return -1;
      }
      total += high;
    }
    return total;
  }

 private:
  const kafka::HandlePtr rk_;
};

struct Setup {
  std::string input;
  int64_t records = 0;
  int poll_ms = 5;
  int retry_threads = 1;
};

// Seconds from `start` until `topic` holds `records` records; -1 if not
// within kRunLimit.
double WaitForOutput(Watermarks& watermarks, const std::string& topic, int64_t records, int poll_ms,
                     absl::Time start) {
  while (absl::Now() - start < kRunLimit) {
    const absl::Time polled_at = absl::Now();
    if (watermarks.Total(topic, kPartitions) >= records) {
      // The watermarks were read after polled_at: date the count there.
      return absl::ToDoubleSeconds(polled_at - start);
    }
    absl::SleepFor(absl::Milliseconds(poll_ms));
  }
  return -1;
}

// One run of retryd: a fresh group, a fresh output topic. Returns seconds.
double RunRetryd(const Setup& s, Watermarks& watermarks, std::string* output_topic) {
  const testing::TestTopics topics = Topics("relay-retryd");
  *output_topic = topics.output;
  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.input_topics = {s.input};
  options.retry.threads = s.retry_threads;
  options.commit_interval_ms = 1000;  // The default.
  retryd::v1::SimulateConfig noop;
  noop.set_latency_ms(0);
  auto gated = std::make_unique<GatedProcessor>(std::make_unique<SimulateProcessor>(noop));
  GatedProcessor* gate = gated.get();
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, std::move(gated));
  if (!engine.ok() || !(*engine)->Start().ok()) {
    gate->Open();
    return -1;
  }
  const bool ready = testing::WaitFor(
      [&] { return gate->reached() && testing::AllAssigned(**engine, kPartitions); },
      absl::Seconds(60));
  const absl::Time start = absl::Now();
  gate->Open();
  const double seconds =
      ready ? WaitForOutput(watermarks, topics.output, s.records, s.poll_ms, start) : -1;
  (*engine)->Stop();
  return seconds;
}

double RunBare(const Setup& s, Watermarks& watermarks, std::string* output_topic) {
  const testing::TestTopics topics = Topics("relay-bare");
  *output_topic = topics.output;
  // The group retryd would be given (on a real broker it is deleted at exit).
  const engine::EngineOptions options = testing::TestEngineOptions(topics);
  std::unique_ptr<BareRelay> relay =
      BareRelay::Create({.bootstrap_servers = testing::BootstrapServers(),
                         .client_properties = testing::ClientProperties(),
                         .consumer_properties = options.kafka_properties,
                         .input_topic = s.input,
                         .output_topic = topics.output,
                         .group_id = options.group_id});
  if (relay == nullptr) return -1;
  // One member in the group: its first record comes after its whole assignment.
  const bool ready = testing::WaitFor([&] { return relay->reached(); }, absl::Seconds(60));
  const absl::Time start = absl::Now();
  relay->Open();
  const double seconds =
      ready ? WaitForOutput(watermarks, topics.output, s.records, s.poll_ms, start) : -1;
  const bool failed = relay->failed() != 0;
  relay.reset();
  return failed ? -1 : seconds;
}

// Key, value and headers of every record of `topic`, sorted: what a reader
// of the output sees, whatever the order.
std::vector<std::string> Contents(const std::string& topic) {
  std::vector<std::string> out;
  const absl::Status s = kafka::ScanTopic(
      testing::BootstrapServers(), testing::ClientProperties(), topic, {}, absl::Seconds(120),
      [&](const Record& r) {
        std::string line = absl::StrCat(r.key.value_or("<null>"), "|", r.value.value_or("<null>"));
        for (const Header& h : r.headers) {
          absl::StrAppend(&line, "|", h.key, "=", h.value.value_or("<null>"));
        }
        out.push_back(std::move(line));
      });
  if (!s.ok()) std::fprintf(stderr, "read %s: %s\n", topic.c_str(), s.ToString().c_str());
  std::sort(out.begin(), out.end());
  return out;
}

struct Spread {
  double median = -1, least = -1, greatest = -1;
};

Spread SpreadOf(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  return {Percentile(values, 50), values.front(), values.back()};
}

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();  // As retryd does (server/main.cc).
  SetMinLogLevel(LogLevel::kError);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // Progress lines as they come.
  Flags flags(argc, argv,
              "B1, the primary path: retryd's engine (no-op processor, output topic) against a "
              "bare librdkafka consume -> produce loop, same broker, same records.");
  const int64_t records = flags.Int("records", 200000, "input records (over 16 partitions)");
  const int64_t repeat = flags.Int("repeat", 3, "rounds; each side runs once per round");
  const int64_t value_bytes = flags.Int("value_bytes", 100, "bytes per record value");
  const int64_t poll_ms = flags.Int("poll_ms", 5, "how often the output watermarks are read");
  const int64_t retry_threads =
      flags.Int("retry_threads", 1, "retryd's retry threads (idle here; 1 is the default)");
  const int64_t verify = flags.Int("verify", 1, "1: compare both outputs of the first round");
  const std::string sides =
      flags.String("sides", "both", "both, retryd or bare (one side alone, e.g. to profile it)");
  const std::string out = flags.String("out", "bench/results", "directory for the CSV");
  flags.Finish();
  if (records < 1 || repeat < 1 || (sides != "both" && sides != "retryd" && sides != "bare")) {
    std::fprintf(stderr,
                 "relay_bench: --records and --repeat must be positive, --sides one of "
                 "both, retryd, bare\n");
    return 2;
  }

  const testing::TestTopics input = Topics("relay-input");
  std::printf("producing %lld records to %d partitions\n", static_cast<long long>(records),
              kPartitions);
  if (!Produce(
          input.input, records, kPartitions, [](int64_t i) { return absl::StrCat("key-", i); },
          static_cast<int>(value_bytes))) {
    return 1;
  }
  Setup setup{input.input, records, static_cast<int>(poll_ms), static_cast<int>(retry_threads)};
  Watermarks watermarks;
  std::vector<double> retryd_runs, bare_runs, ratios;
  bool ok = true;
  for (int64_t round = 0; round < repeat; ++round) {
    std::string retryd_out, bare_out;
    // Alternate which side goes first, so neither always follows the other.
    const bool retryd_first = round % 2 == 0;
    double r = -1, b = -1;
    for (int turn = 0; turn < 2; ++turn) {
      const bool retryd_turn = (turn == 0) == retryd_first;
      if (retryd_turn && sides != "bare") {
        r = RunRetryd(setup, watermarks, &retryd_out);
        ok = ok && r > 0 && CheckNothingDropped(retryd_out, records, kPartitions);
        std::printf("round %lld retryd: %.3f s\n", static_cast<long long>(round + 1), r);
      } else if (!retryd_turn && sides != "retryd") {
        b = RunBare(setup, watermarks, &bare_out);
        ok = ok && b > 0 && CheckNothingDropped(bare_out, records, kPartitions);
        std::printf("round %lld bare:   %.3f s\n", static_cast<long long>(round + 1), b);
      }
    }
    if (r > 0) retryd_runs.push_back(records / r);
    if (b > 0) bare_runs.push_back(records / b);
    if (r > 0 && b > 0) ratios.push_back(b / r);  // Throughput ratio retryd / bare.
    if (round == 0 && verify != 0 && r > 0 && b > 0) {
      const bool same = Contents(retryd_out) == Contents(bare_out);
      std::printf("outputs of round 1: %s\n",
                  same ? "the same records, byte for byte" : "DIFFERENT (see relay_bench.cc)");
      ok = ok && same;
    }
  }
  ok = CheckNothingDropped(input.input, records, kPartitions) && ok;

  Table table("relay_bench", {"side", "records", "runs", "records_per_s_median",
                              "records_per_s_slowest", "records_per_s_fastest", "x_bare"});
  const Spread bare = SpreadOf(bare_runs), mine = SpreadOf(retryd_runs), ratio = SpreadOf(ratios);
  auto row = [&](const std::string& name, const std::vector<double>& runs, const Spread& sp,
                 const std::string& x) {
    if (runs.empty()) return;
    table.AddRow({name, absl::StrCat(records), absl::StrCat(runs.size()), Fixed(sp.median, 0),
                  Fixed(sp.least, 0), Fixed(sp.greatest, 0), x});
  };
  row("bare librdkafka loop", bare_runs, bare, "1.00");
  row("retryd", retryd_runs, mine,
      bare.median > 0 ? Fixed(mine.median / bare.median, 2) : std::string("-"));
  table.Print();
  if (!ratios.empty()) {
    std::printf("retryd / bare, round by round: median %.2f (%.2f..%.2f); target >= 0.8\n",
                ratio.median, ratio.least, ratio.greatest);
  }
  if (!table.WriteCsv(out)) ok = false;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace retryd::bench

int main(int argc, char** argv) { return retryd::bench::Main(argc, argv); }
