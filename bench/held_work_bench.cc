// B6, what held work costs (issue 24, "cost as work grows"): whether work
// the engine holds but does not do yet — a retry backlog due later, keys
// parked in key order — costs it CPU and memory while it waits. Not a test:
// prints each figure beside its baseline, measured in the same run, with
// their ratio, and writes held_work_bench.csv.
//
//   build-bench/bench/held_work_bench [--backlog=0,25000,100000]
//       [--parked_keys=100000] [--healthy=200000] [--idle_s=10] [--repeat=3]
//       [--scenarios=backlog,parked] [--out=bench/results]
//
// On a real Kafka (scripts/bench.sh --kafka) the backlogs are
// --backlog=0,250000,1000000 by default: the embedded broker keeps only
// ~5 MiB of records per partition (bench_support.h), which a backlog of a
// million retry records would overflow.
//
// Every size runs --repeat times, in rounds of all sizes, so that a machine
// busier at one time than another weighs on every size alike: each figure
// is the median of its runs, each ratio the median of the runs' ratios to
// size 0's run of the same round.
//
// Each scenario and size runs in a child process of its own (this program
// run again with --scenario=...), so its CPU and RSS are its own, on fresh
// topics of --partitions partitions. RSS is taken above the process's RSS
// just before the engine starts, the records produced and freed memory
// handed back (malloc_trim): the embedded broker's log, in the process, is
// left out, and what the engine takes is alike on either broker. The table
// gives it at the window's end as it is, and once the allocator has handed
// back what it kept of memory freed (trimmed), which is what is in use.
//
//  * backlog: N retry records due in an hour, written to the retry topic as
//    retryd writes them, read by --retry_threads retry threads of an engine
//    (UNORDERED) with nothing on its input. A retry thread holds at most
//    --lookahead records of a partition, then pauses it. The engine has
//    settled when its retry threads hold that bound (per partition, the
//    look-ahead or all of its records if fewer), each has been round its
//    loop three times since, and each last found nothing to read (state
//    WAITING_BACKOFF, or IDLE holding nothing): its partitions are paused.
//    Then nothing happens for --idle_s seconds, the window measured: the
//    process's CPU per second of it (getrusage), the engine's loop turns per
//    second, and the RSS at its end. Baseline: N = 0, in the same run.
//  * parked keys: key order (KEY) with K keys parked. An engine without
//    retry threads reads K records of keys "parked-<i>", each failing
//    retriably at every attempt (the simulate processor's rule for the
//    prefix), with a backoff of --parked_backoff_s: each key is parked behind
//    its record in the retry topic. It stops; M records of other keys
//    ("ok-<j>") are written to the input; a second engine, with
//    --retry_threads retry threads, starts in the same groups. It learns the
//    parked keys from the retry topic, its retry threads fill their
//    look-ahead with those keys' records and settle as above, and its
//    primary holds its first healthy record until then. The window runs
//    from there until every healthy record is in the output topic,
//    acknowledged: the process's CPU per healthy record, and the RSS at its
//    end. Baseline: K = 0, the same steps, in the same run. Backoff is full
//    jitter (a record comes due anywhere within its backoff), so of K keys
//    parked for a day about K / 86,400 come due each second, fail again and
//    go back to the retry topic ("retried" in the table); an hour's backoff
//    would bring 24 times as many.
//
// On the embedded broker its threads' CPU is in the process's: the table
// gives their part beside each CPU figure.
//
// The bench fails (exit 1, saying why) if the mechanism did not engage (the
// look-ahead did not fill to its bound, or held the whole backlog; a key not
// parked; a record processed in an idle window) or if the broker dropped a
// record.
#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_support.h"
#include "bench/gated_processor.h"
#include "retryd/v1/config.pb.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/engine/api/engine.h"
#include "server/engine/stats/thread_stats.h"
#include "server/processors/simulate.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd::bench {
namespace {

constexpr int64_t kHourMs = 3'600'000;
constexpr double kMiB = 1 << 20;
// How long an engine may take to park its keys, settle, or relay.
constexpr absl::Duration kRunLimit = absl::Seconds(600);
// How long the measured engine of the parked-keys scenario may take to
// settle: less than the gate's two minutes, after which it lets go by itself.
constexpr absl::Duration kGateLimit = absl::Seconds(100);
// Loop turns a settled retry thread has made since it held its bound: the
// turn that read the last records, the one that paused the partitions, one
// more that found nothing.
constexpr int64_t kSettledTurns = 3;
constexpr char kParkedPrefix[] = "parked-";
constexpr char kHealthyPrefix[] = "ok-";

// What the parent and every child read from the flags.
struct Settings {
  int partitions = kPartitions;
  int value_bytes = 100;
  int lookahead = 1000;
  int retry_threads = 1;
  absl::Duration idle = absl::Seconds(10);
  int64_t parked_backoff_ms = 24 * kHourMs;
  int64_t healthy = 200'000;
  int64_t fetch_queue_kbytes = 0;  // 0: librdkafka's default.
};

int Fail(const std::string& why) {
  std::fprintf(stderr, "held_work_bench: %s\n", why.c_str());
  return 1;
}

// The engine's options on `topics`: the tests' (bench_support.h), with
// retryd's commit interval and librdkafka's heartbeat and metadata refresh
// rather than the tests' faster ones, which an idle engine would pay for.
engine::EngineOptions Options(const testing::TestTopics& topics, const Settings& s) {
  engine::EngineOptions o = testing::TestEngineOptions(topics);
  o.kafka_properties.erase("heartbeat.interval.ms");
  o.kafka_properties.erase("topic.metadata.refresh.interval.ms");
  o.commit_interval_ms = engine::EngineOptions{}.commit_interval_ms;
  o.retry.threads = s.retry_threads;
  o.retry.max_threads = std::max(o.retry.max_threads, s.retry_threads);
  o.retry.lookahead = s.lookahead;
  if (s.fetch_queue_kbytes > 0) {
    o.kafka_properties["queued.max.messages.kbytes"] = absl::StrCat(s.fetch_queue_kbytes);
  }
  return o;
}

std::unique_ptr<engine::Engine> StartEngine(const engine::EngineOptions& options,
                                            std::unique_ptr<engine::Processor> processor) {
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, std::move(processor));
  if (!engine.ok()) {
    Fail(absl::StrCat("engine: ", engine.status().ToString()));
    return nullptr;
  }
  if (absl::Status s = (*engine)->Start(); !s.ok()) {
    Fail(absl::StrCat("engine start: ", s.ToString()));
    return nullptr;
  }
  return *std::move(engine);
}

// Every attempt of a record of a parked key fails retriably; the others
// succeed at once.
std::unique_ptr<engine::Processor> ParkingProcessor() {
  v1::SimulateConfig config;
  v1::SimulateConfig::Rule* parked = config.add_rule();
  parked->set_key_prefix(kParkedPrefix);
  parked->set_fail_attempts(1'000'000);
  return std::make_unique<SimulateProcessor>(config);
}

// The records the look-ahead holds once full: of each partition of `topic`,
// all of them or `lookahead`, whichever is fewer. -1 if the broker did not
// answer.
int64_t LookaheadBound(const std::string& topic, const Settings& s) {
  const std::vector<Watermark> marks = QueryWatermarks(topic, s.partitions);
  if (marks.empty()) return -1;
  int64_t bound = 0;
  for (const Watermark& m : marks) bound += std::min<int64_t>(m.high - m.low, s.lookahead);
  return bound;
}

// Whether the retry threads have settled: between them they hold `bound`
// records (or one paused on its byte budget, max_held_bytes), and each has
// since been round its loop kSettledTurns times, its last poll finding
// nothing. Read through the threads' stats, as a metrics reader would.
class RetrySettled {
 public:
  RetrySettled(const engine::Engine& engine, int64_t bound) : engine_(engine), bound_(bound) {}

  bool Check() {
    std::vector<std::shared_ptr<const engine::ThreadStats>> retry;
    for (auto& s : engine_.Threads()) {
      if (s->role() == engine::ThreadRole::kRetry) retry.push_back(std::move(s));
    }
    held_ = held_bytes_ = 0;
    int64_t budget_pauses = 0;
    for (const auto& s : retry) {
      held_ += s->scheduled.load(std::memory_order_relaxed);
      held_bytes_ += s->held_bytes.load(std::memory_order_relaxed);
      budget_pauses += s->counters.Read().budget_pauses;
    }
    if (retry.empty() || (held_ < bound_ && budget_pauses == 0)) {
      turns_at_bound_.clear();
      return false;
    }
    bool settled = true;
    for (const auto& s : retry) {
      const int64_t turns = s->counters.Read().polls;
      const int64_t since = turns_at_bound_.emplace(s->id(), turns).first->second;
      const engine::ThreadState state = s->state();
      const bool quiet = state == engine::ThreadState::kWaitingBackoff ||
                         (state == engine::ThreadState::kIdle && bound_ == 0);
      settled = settled && quiet && turns >= since + kSettledTurns;
    }
    return settled;
  }
  // What the retry threads held at the last Check().
  int64_t held() const { return held_; }
  // The bytes they held then, as they count them (ByteCharge, max_held_bytes).
  int64_t held_bytes() const { return held_bytes_; }

 private:
  const engine::Engine& engine_;
  const int64_t bound_;
  int64_t held_ = 0;
  int64_t held_bytes_ = 0;
  std::map<int, int64_t> turns_at_bound_;  // By thread id.
};

bool PrimariesIdle(const engine::Engine& engine) {
  for (const auto& s : engine.Threads()) {
    if (s->role() == engine::ThreadRole::kPrimary && s->state() != engine::ThreadState::kIdle) {
      return false;
    }
  }
  return true;
}

// The process's RSS with the memory it freed handed back: before an engine
// starts, so that what it takes is measured above what was there.
int64_t TrimmedRss() {
  malloc_trim(0);
  return ProcStatusBytes("VmRSS");
}

// What the process spent over a window.
class Window {
 public:
  Window() : start_(absl::Now()), cpu_(ProcessCpu()), threads_(ReadThreadCpu()) {}

  // Fills the window's CPU (microseconds: all, and the embedded broker's
  // threads') and length into `values`.
  void Report(std::map<std::string, int64_t>& values) const {
    const CpuMicros threads = ReadThreadCpu();
    values["cpu_us"] = absl::ToInt64Microseconds(ProcessCpu() - cpu_);
    values["broker_cpu_us"] = threads[kBrokerCpu] - threads_[kBrokerCpu];
    values["window_us"] = absl::ToInt64Microseconds(absl::Now() - start_);
  }

 private:
  const absl::Time start_;
  const absl::Duration cpu_;
  const CpuMicros threads_;
};

// Child: `records` retry records due in an hour, held by the retry threads
// of an idle engine.
int RunBacklog(const Settings& s, int64_t records) {
  const testing::TestTopics topics = Topics("backlog", s.partitions);
  const int64_t now = absl::ToUnixMillis(absl::Now());
  if (!ProduceEach(records, [&](int64_t i) {
        return RetryRecord(topics, i, s.partitions, now, now + kHourMs, s.value_bytes);
      })) {
    return Fail("producing the backlog failed");
  }
  if (!CheckNothingDropped(topics.retry, records, s.partitions)) return 1;
  const int64_t bound = LookaheadBound(topics.retry, s);
  if (bound < 0) return 1;
  engine::EngineOptions options = Options(topics, s);
  options.retry.backoff.max_ms = 2 * kHourMs;  // No due time brought forward (due_clamped).
  const int64_t rss_before = TrimmedRss();
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, std::make_unique<SimulateProcessor>(v1::SimulateConfig{}));
  if (engine == nullptr) return 1;
  RetrySettled settled(*engine, bound);
  if (!testing::WaitFor(
          [&] {
            return testing::AllAssigned(*engine, s.partitions) && PrimariesIdle(*engine) &&
                   settled.Check();
          },
          kRunLimit)) {
    engine->Stop();
    return Fail(absl::StrCat("backlog ", records, ": the engine did not settle in ",
                             absl::FormatDuration(kRunLimit), ": its retry threads hold ",
                             settled.held(), " records, the look-ahead's bound is ", bound));
  }
  const int64_t turns_before = engine->Totals().polls;
  std::map<std::string, int64_t> values;
  {
    const Window window;
    // The window itself: a fixed length of nothing to do, not a wait for
    // something to happen.
    absl::SleepFor(s.idle);
    window.Report(values);
  }
  values["rss_end"] = ProcStatusBytes("VmRSS");
  // What of it the allocator kept of freed memory, not in use.
  values["rss_trimmed"] = TrimmedRss();
  const engine::EngineTotals totals = engine->Totals();
  settled.Check();
  // Before the engine stops: a graceful stop hands what it holds back to
  // the retry topic.
  const bool intact = CheckNothingDropped(topics.retry, records, s.partitions);
  engine->Stop();
  if (!intact) return 1;
  if (totals.processed != 0 || totals.due_clamped != 0) {
    return Fail(absl::StrCat("backlog ", records, ": ", totals.processed, " records processed and ",
                             totals.due_clamped,
                             " brought forward in what should have been an idle window"));
  }
  if (settled.held() < bound) {
    return Fail(absl::StrCat("backlog ", records, ": the retry threads hold ", settled.held(),
                             " records after the window, the look-ahead's bound is ", bound));
  }
  if (records > 0 && settled.held() >= records) {
    return Fail(absl::StrCat("backlog ", records,
                             ": the look-ahead held the whole backlog, so it bounded nothing "
                             "(give more records than --partitions x --lookahead)"));
  }
  values["rss_before"] = rss_before;
  values["held"] = settled.held();
  values["held_bytes"] = settled.held_bytes();
  values["retry_backlog"] = totals.retry_backlog;
  values["turns"] = totals.polls - turns_before;
  ReportToParent(values);
  return 0;
}

// Child: `keys` keys parked in key order, then the healthy records relayed.
int RunParked(const Settings& s, int64_t keys) {
  const testing::TestTopics topics = Topics("parked", s.partitions);
  const auto parked_key = [](int64_t i) { return absl::StrCat(kParkedPrefix, i); };
  const auto healthy_key = [](int64_t i) { return absl::StrCat(kHealthyPrefix, i); };
  if (!Produce(topics.input, keys, s.partitions, parked_key, s.value_bytes)) {
    return Fail("producing the records of the parked keys failed");
  }
  engine::EngineOptions options = Options(topics, s);
  options.ordering = engine::Ordering::kKey;
  options.retry.max_attempts = 1000;  // Never dead-lettered while measured.
  options.retry.backoff = {
      .initial_ms = s.parked_backoff_ms, .multiplier = 1.0, .max_ms = s.parked_backoff_ms};
  {
    // No retry thread: every record of a parked key stays in the retry
    // topic, none done, none due before the measured engine reads them.
    engine::EngineOptions parking = options;
    parking.retry.threads = 0;
    parking.retry.min_threads = 0;
    std::unique_ptr<engine::Engine> engine = StartEngine(parking, ParkingProcessor());
    if (engine == nullptr) return 1;
    const bool parked = testing::WaitFor(
        [&] {
          const engine::EngineTotals t = engine->Totals();
          return testing::AllAssigned(*engine, s.partitions) && t.sent_to_retry >= keys &&
                 t.in_flight == 0 && engine->ParkedKeys().keys >= keys;
        },
        kRunLimit);
    const int64_t parked_keys = engine->ParkedKeys().keys;
    engine->Stop();
    if (!parked) {
      return Fail(absl::StrCat("parked ", keys, ": ", parked_keys, " keys parked in ",
                               absl::FormatDuration(kRunLimit)));
    }
  }
  if (!CheckNothingDropped(topics.retry, keys, s.partitions)) return 1;
  if (!Produce(topics.input, s.healthy, s.partitions, healthy_key, s.value_bytes)) {
    return Fail("producing the healthy records failed");
  }
  const int64_t bound = LookaheadBound(topics.retry, s);
  if (bound < 0) return 1;
  const int64_t rss_before = TrimmedRss();
  auto gated = std::make_unique<GatedProcessor>(ParkingProcessor(), kHealthyPrefix);
  GatedProcessor* gate = gated.get();
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::move(gated));
  if (engine == nullptr) return 1;
  RetrySettled settled(*engine, bound);
  const bool ready = testing::WaitFor(
      [&] {
        return gate->reached() && testing::AllAssigned(*engine, s.partitions) &&
               engine->ParkedKeys().keys == keys && settled.Check();
      },
      kGateLimit);
  const engine::ParkedKeysSummary parked = engine->ParkedKeys();
  const engine::EngineTotals before = engine->Totals();
  if (!ready || before.succeeded != 0) {
    gate->Open();
    engine->Stop();
    return Fail(absl::StrCat("parked ", keys, ": the engine did not settle in ",
                             absl::FormatDuration(kGateLimit), " (", parked.keys,
                             " keys parked, its retry threads hold ", settled.held(),
                             " records, the look-ahead's bound is ", bound, ", ", before.succeeded,
                             " healthy records let through)"));
  }
  std::map<std::string, int64_t> values;
  bool relayed = false;
  {
    const Window window;
    gate->Open();
    relayed = testing::WaitFor(
        [&] {
          const engine::EngineTotals t = engine->Totals();
          return t.succeeded >= s.healthy && t.in_flight == 0;
        },
        kRunLimit);
    window.Report(values);
  }
  values["rss_end"] = ProcStatusBytes("VmRSS");
  // What of it the allocator kept of freed memory, not in use.
  values["rss_trimmed"] = TrimmedRss();
  const engine::EngineTotals after = engine->Totals();
  engine->Stop();
  const engine::EngineTotals totals = engine->Totals();
  if (!relayed || totals.succeeded != s.healthy || totals.dead_lettered != 0) {
    return Fail(absl::StrCat("parked ", keys, ": ", totals.succeeded, " of ", s.healthy,
                             " healthy records relayed, ", totals.dead_lettered, " dead-lettered"));
  }
  if (!CheckNothingDropped(topics.input, keys + s.healthy, s.partitions) ||
      !CheckNothingDropped(topics.output, s.healthy, s.partitions) ||
      // Records retried in the window went back to it, and what the retry
      // thread held was handed back when it stopped.
      !CheckNothingDropped(topics.retry, keys, s.partitions, /*at_least=*/true)) {
    return 1;
  }
  values["rss_before"] = rss_before;
  values["healthy"] = s.healthy;
  values["held"] = settled.held();
  values["held_bytes"] = settled.held_bytes();
  values["parked_keys"] = parked.keys;
  values["retried"] = after.failed_attempts - before.failed_attempts;
  ReportToParent(values);
  return 0;
}

// One child's figures, named as its RESULT line names them.
using Result = std::map<std::string, int64_t>;

int64_t GetInt(const Result& r, const std::string& key) {
  auto it = r.find(key);
  return it == r.end() ? 0 : it->second;
}

double Get(const Result& r, const std::string& key) { return static_cast<double>(GetInt(r, key)); }

double EngineRssMiB(const Result& r) { return (Get(r, "rss_end") - Get(r, "rss_before")) / kMiB; }

// The same once the allocator has handed back what it kept of freed memory.
double EngineTrimmedRssMiB(const Result& r) {
  return (Get(r, "rss_trimmed") - Get(r, "rss_before")) / kMiB;
}

// The columns of held_work_bench.csv. Each figure is the median of the
// runs, beside its baseline (the scenario's size 0, the median of the same
// runs) and the median of the runs' ratios, each run against the baseline
// run of its round; cpu_ratio_range gives the least and greatest of those.
const std::vector<std::string> kColumns = {"scenario",
                                           "size",
                                           "runs",
                                           "held_records",
                                           "held_mib",
                                           "parked_keys",
                                           "cpu",
                                           "cpu_unit",
                                           "baseline_cpu",
                                           "cpu_ratio",
                                           "cpu_ratio_range",
                                           "broker_cpu",
                                           "engine_rss_mib",
                                           "baseline_engine_rss_mib",
                                           "rss_ratio",
                                           "engine_rss_trimmed_mib",
                                           "process_rss_mib",
                                           "window_s",
                                           "loop_turns_per_s",
                                           "retry_backlog",
                                           "retried"};

double Median(std::vector<double> values) { return Percentile(std::move(values), 50); }

// Runs `scenario` at each of `sizes` (0 first: the baseline), `repeat`
// rounds of them all, so that a machine busier at one time than another
// weighs on every size alike, and adds a row for each size; `cpu` turns a
// child's figures into its CPU figure. False if a child failed.
bool RunSizes(const std::string& scenario, const std::string& child_args,
              const std::vector<int64_t>& sizes, int repeat, const std::string& cpu_unit,
              double (*cpu)(const Result&), Table& table) {
  std::vector<std::vector<Result>> runs(sizes.size());  // By size, then round.
  for (int round = 1; round <= repeat; ++round) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::printf("%s, size %lld, round %d of %d ...\n", scenario.c_str(),
                  static_cast<long long>(sizes[i]), round, repeat);
      std::fflush(stdout);
      Result r =
          RunChild(absl::StrCat("--scenario=", scenario, " --size=", sizes[i], " ", child_args));
      if (r.empty()) {
        std::fprintf(stderr, "held_work_bench: %s, size %lld: the child failed\n", scenario.c_str(),
                     static_cast<long long>(sizes[i]));
        return false;
      }
      runs[i].push_back(std::move(r));
    }
  }
  const bool idle = scenario == "backlog";
  // The median over the rounds of `figure` at size i, and of its ratio to
  // the baseline's of the same round.
  struct Figure {
    double value = 0, ratio = 0, least = 0, greatest = 0;
  };
  const auto figure = [&](size_t i, const auto& of) {
    std::vector<double> values, ratios;
    for (int k = 0; k < repeat; ++k) {
      values.push_back(of(runs[i][k]));
      const double base = of(runs[0][k]);
      if (base > 0) ratios.push_back(values.back() / base);
    }
    Figure f{Median(values), Median(ratios), 0, 0};
    if (!ratios.empty()) {
      f.least = *std::min_element(ratios.begin(), ratios.end());
      f.greatest = *std::max_element(ratios.begin(), ratios.end());
    }
    return f;
  };
  const auto ratio = [](const Figure& f) { return f.ratio > 0 ? Fixed(f.ratio, 2) : "-"; };
  const auto broker = [&](const Result& r) {
    return cpu(r) * Get(r, "broker_cpu_us") / std::max(1.0, Get(r, "cpu_us"));
  };
  const auto seconds = [](const Result& r) { return Get(r, "window_us") / 1e6; };
  const auto turns = [&](const Result& r) { return Get(r, "turns") / seconds(r); };
  const auto rss = [](const Result& r) { return Get(r, "rss_end") / kMiB; };
  const Figure base_cpu = figure(0, cpu);
  const Figure base_rss = figure(0, EngineRssMiB);
  for (size_t i = 0; i < sizes.size(); ++i) {
    // What shows the mechanism engaged, from the last round.
    const Result& last = runs[i].back();
    const Figure c = figure(i, cpu);
    const Figure m = figure(i, EngineRssMiB);
    table.AddRow({scenario,
                  absl::StrCat(sizes[i]),
                  absl::StrCat(repeat),
                  absl::StrCat(GetInt(last, "held")),
                  Fixed(Get(last, "held_bytes") / kMiB, 1),
                  idle ? "-" : absl::StrCat(GetInt(last, "parked_keys")),
                  Fixed(c.value, 2),
                  cpu_unit,
                  Fixed(base_cpu.value, 2),
                  ratio(c),
                  absl::StrCat(Fixed(c.least, 2), "..", Fixed(c.greatest, 2)),
                  Fixed(figure(i, broker).value, 2),
                  Fixed(m.value, 1),
                  Fixed(base_rss.value, 1),
                  ratio(m),
                  Fixed(figure(i, EngineTrimmedRssMiB).value, 1),
                  Fixed(figure(i, rss).value, 1),
                  Fixed(figure(i, seconds).value, 1),
                  idle ? Fixed(figure(i, turns).value, 1) : "-",
                  idle ? absl::StrCat(GetInt(last, "retry_backlog")) : "-",
                  idle ? "-" : absl::StrCat(GetInt(last, "retried"))});
  }
  return true;
}

// Milliseconds of CPU per second of an idle window.
double IdleCpu(const Result& r) {
  return Get(r, "window_us") > 0 ? Get(r, "cpu_us") / 1e3 / (Get(r, "window_us") / 1e6) : 0;
}

// Microseconds of CPU per healthy record relayed.
double HealthyCpu(const Result& r) {
  return Get(r, "healthy") > 0 ? Get(r, "cpu_us") / Get(r, "healthy") : 0;
}

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();  // As retryd does (server/main.cc).
  const bool real = testing::OnRealKafka();
  Flags flags(argc, argv,
              "what held work costs: an engine idle with a retry backlog of N records, and "
              "relaying with K keys parked, each against size 0");
  const std::string scenario = flags.String("scenario", "", "internal: the child's scenario");
  const int64_t size = flags.Int("size", 0, "internal: the child's N or K");
  const std::string scenarios =
      flags.String("scenarios", "backlog,parked", "the scenarios to run, comma-separated");
  std::vector<int64_t> backlog = flags.Ints(
      "backlog",
      real ? std::vector<int64_t>{0, 250'000, 1'000'000} : std::vector<int64_t>{0, 25'000, 100'000},
      "retry backlog sizes N (0, the baseline, is added if missing; the embedded broker keeps "
      "~5 MiB per partition, ~12,000 of these records)");
  const int64_t parked_keys = flags.Int("parked_keys", 100'000, "keys parked K");
  Settings s;
  s.healthy = flags.Int("healthy", 200'000, "healthy records M relayed with the keys parked");
  s.partitions = static_cast<int>(
      flags.Int("partitions", kPartitions, "partitions of the input and retry topics"));
  s.value_bytes = static_cast<int>(flags.Int("value_bytes", 100, "value size of every record"));
  s.lookahead = static_cast<int>(
      flags.Int("lookahead", engine::RetryOptions{}.lookahead, "retry.lookahead of the engine"));
  s.retry_threads =
      static_cast<int>(flags.Int("retry_threads", 1, "retry threads reading the backlog"));
  const int64_t idle_s = flags.Int("idle_s", 10, "length of the idle window, seconds");
  s.idle = absl::Seconds(idle_s);
  const int64_t parked_backoff_s = flags.Int(
      "parked_backoff_s", 86'400, "backoff of a parked key's record (full jitter), seconds");
  s.parked_backoff_ms = parked_backoff_s * 1000;
  s.fetch_queue_kbytes =
      flags.Int("fetch_queue_kbytes", 0,
                "the consumers' queued.max.messages.kbytes (0: librdkafka's default, 64 MiB)");
  const int repeat = static_cast<int>(
      flags.Int("repeat", 3, "rounds of every size; each figure is the median of its rounds"));
  const std::string out = flags.String("out", "bench/results", "directory for the CSV");
  flags.Finish();
  SetMinLogLevel(LogLevel::kWarning);
  if (repeat < 1) return Fail("--repeat must be at least 1");
  if (scenario == "backlog") return RunBacklog(s, size);
  if (scenario == "parked") return RunParked(s, size);
  if (!scenario.empty()) return Fail(absl::StrCat("unknown --scenario=", scenario));

  const std::string child_args = absl::StrCat(
      "--healthy=", s.healthy, " --partitions=", s.partitions, " --value_bytes=", s.value_bytes,
      " --lookahead=", s.lookahead, " --retry_threads=", s.retry_threads, " --idle_s=", idle_s,
      " --parked_backoff_s=", parked_backoff_s, " --fetch_queue_kbytes=", s.fetch_queue_kbytes);
  Table table("held_work_bench", kColumns);
  const std::vector<std::string> run = absl::StrSplit(scenarios, ',', absl::SkipEmpty());
  for (const std::string& name : run) {
    bool ok = false;
    if (name == "backlog") {
      backlog.erase(std::remove(backlog.begin(), backlog.end(), 0), backlog.end());
      backlog.insert(backlog.begin(), 0);
      ok = RunSizes("backlog", child_args, backlog, repeat, "ms/s idle", IdleCpu, table);
    } else if (name == "parked") {
      ok = RunSizes("parked", child_args, {0, parked_keys}, repeat, "us/healthy record", HealthyCpu,
                    table);
    } else {
      return Fail(absl::StrCat("unknown scenario '", name, "' (backlog, parked)"));
    }
    if (!ok) return 1;
  }
  table.Print();
  std::printf(
      "cpu: the process's user + system time, per second of the idle window (backlog) or per "
      "healthy record relayed (parked); broker_cpu: the embedded broker's threads' part of it "
      "(0 on a real broker); engine_rss: RSS at the window's end above RSS before the engine "
      "started (trimmed: once the allocator has handed back what it kept of freed memory); each "
      "figure the median of its rounds, each ratio the median of the rounds' "
      "ratios against size 0 of the same scenario in the same round\n");
  return table.WriteCsv(out) ? 0 : 1;
}

}  // namespace
}  // namespace retryd::bench

int main(int argc, char** argv) { return retryd::bench::Main(argc, argv); }
