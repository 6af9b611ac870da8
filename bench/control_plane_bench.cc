// B4, control plane: what the control plane costs while the engine runs
// flat out, and how fast it answers then. Not a test: prints two tables and
// writes control_plane_latency.csv and control_plane_throughput.csv.
//
//   build/bench/control_plane_bench [--segment=150000] [--rounds=3]
//       [--watchers=100] [--interval_ms=100] [--status_calls=2000]
//       [--out=bench/results]
//
// One engine (no-op processor, output topic, one primary thread) and the
// control server in process, on 127.0.0.1 over real gRPC. The input holds
// enough records for the whole run before the engine starts, so it consumes
// flat out during each segment (between segments, while the conditions
// switch, the processor holds it); the run is cut into segments of
// --segment records, in turn: nothing else, --watchers WatchMetrics streams at --interval_ms
// (opened, each with its first snapshot, before the segment starts), and
// GetStatus called back to back by one client. --rounds of each, so drift
// in the machine's load touches all three alike. Throughput is each
// segment's records over its time; the table gives each condition's median
// and its ratio to the median with nothing else. GetStatus latency under
// load comes from the GetStatus segments; its baseline is --status_calls
// calls to the same engine once it is idle.
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/bench_support.h"
#include "retryd/v1/control.grpc.pb.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/control/control_server.h"
#include "server/engine/api/engine.h"
#include "server/processors/simulate.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd::bench {
namespace {

constexpr int kInputPartitions = 32;

// A no-op processor with a valve: while closed, a call waits until it opens
// (at most two minutes), so the engine takes no record while the bench
// switches conditions (opening watchers takes seconds, in which the engine
// would otherwise get through the input meant for the segments).
class ValvedProcessor : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int attempt) override {
    if (closed_.load(std::memory_order_acquire)) {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](std::atomic<bool>* closed) { return !closed->load(); }, &closed_),
          absl::Minutes(2));
    }
    return inner_.Process(record, attempt);
  }
  void Close() { closed_.store(true, std::memory_order_release); }
  void Open() {
    absl::MutexLock lock(&mu_);
    closed_.store(false, std::memory_order_release);
  }

 private:
  SimulateProcessor inner_{v1::SimulateConfig()};
  absl::Mutex mu_;  // Orders Open() with a waiting call's check of closed_.
  std::atomic<bool> closed_{false};
};

// One WatchMetrics stream, read as fast as snapshots come.
class Watcher : public grpc::ClientReadReactor<v1::MetricsSnapshot> {
 public:
  Watcher(v1::Control::Stub& stub, uint32_t interval_ms) {
    request_.set_interval_ms(interval_ms);
    stub.async()->WatchMetrics(&context_, &request_, this);
    StartRead(&snapshot_);
    StartCall();
  }
  ~Watcher() override {
    context_.TryCancel();
    done_.WaitForNotificationWithTimeout(absl::Seconds(10));
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    snapshots_.fetch_add(1, std::memory_order_relaxed);
    StartRead(&snapshot_);
  }
  void OnDone(const grpc::Status& /*status*/) override { done_.Notify(); }

  int64_t snapshots() const { return snapshots_.load(std::memory_order_relaxed); }

 private:
  grpc::ClientContext context_;
  v1::WatchMetricsRequest request_;
  v1::MetricsSnapshot snapshot_;
  std::atomic<int64_t> snapshots_{0};
  absl::Notification done_;
};

// Milliseconds of one GetStatus; -1 if it failed.
double TimedGetStatus(v1::Control::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetStatusRequest request;
  v1::GetStatusResponse response;
  const absl::Time start = absl::Now();
  const grpc::Status status = stub.GetStatus(&context, request, &response);
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  return status.ok() ? ms : -1;
}

// Waits until the engine has processed `target` records; false if the
// deadline passed first. Looks every millisecond: a segment lasts about a
// second, and a coarser look would blur its end.
// False at once if the input holds fewer than `target` records (the engine
// got through them while the conditions switched), or at `deadline`.
bool WaitProcessed(const engine::Engine& engine, int64_t target, int64_t available,
                   absl::Time deadline) {
  if (target > available) return false;
  while (engine.Totals().succeeded < target) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

enum class Condition { kAlone, kWatchers, kGetStatus };

struct Segment {
  Condition condition;
  double records_per_second = 0;
  int64_t snapshots = 0;  // Watchers: snapshots received during the segment.
  double seconds = 0;
  int64_t records = 0;
  // Used during the segment: the engine's, the embedded broker's (0 on a
  // real broker, which runs in a process of its own; "cores busy" then counts
  // only this process), the control server's and its clients'.
  CpuMicros cpu{};
};

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();  // As retryd does (server/main.cc).
  SetMinLogLevel(LogLevel::kError);
  Flags flags(argc, argv, "control plane: GetStatus latency and watcher cost under load");
  const int64_t segment = flags.Int("segment", 150000, "records per measured segment");
  const int64_t rounds = flags.Int("rounds", 3, "segments of each condition");
  const auto watchers = static_cast<int>(flags.Int("watchers", 100, "WatchMetrics streams"));
  const auto interval_ms =
      static_cast<uint32_t>(flags.Int("interval_ms", 100, "WatchMetrics interval, ms"));
  const int64_t status_calls = flags.Int("status_calls", 2000, "GetStatus calls when idle");
  const std::string out = flags.String("out", "bench/results", "directory for the CSVs");
  flags.Finish();

  // A warm-up segment first, one segment's slack at the end (the valve
  // holds the engine while conditions switch, but a call or two may pass).
  const int64_t warm_up = segment;
  const int64_t total = warm_up + (3 * rounds + 1) * segment;
  const testing::TestTopics topics = Topics("control", kInputPartitions);
  std::printf("producing %lld records\n", static_cast<long long>(total));
  std::fflush(stdout);
  if (!Produce(
          topics.input, total, kInputPartitions, [](int64_t i) { return absl::StrCat("key-", i); },
          /*value_bytes=*/16)) {
    return 1;
  }

  engine::EngineOptions options = testing::TestEngineOptions(topics);
  options.commit_interval_ms = 1000;
  auto processor = std::make_unique<ValvedProcessor>();
  ValvedProcessor* valve = processor.get();
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, std::move(processor));
  if (!engine.ok() || !(*engine)->Start().ok()) {
    std::fprintf(stderr, "the engine did not start\n");
    return 1;
  }
  control::ControlServer server(**engine);
  control::ControlServerOptions server_options;
  server_options.listen_address = "127.0.0.1:0";
  server_options.max_watchers = std::max(256, watchers);
  if (absl::Status s = server.Start(server_options); !s.ok()) {
    std::fprintf(stderr, "control server: %s\n", s.ToString().c_str());
    return 1;
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::Control::Stub> stub = v1::Control::NewStub(channel);

  const absl::Time deadline = absl::Now() + absl::Minutes(10);
  if (!WaitProcessed(**engine, warm_up, total, deadline)) {
    std::fprintf(stderr, "the engine did not get through the warm-up\n");
    return 1;
  }

  std::vector<Segment> segments;
  std::vector<double> loaded_ms;
  int failed_calls = 0;
  for (int64_t round = 0; round < rounds; ++round) {
    for (Condition condition : {Condition::kAlone, Condition::kWatchers, Condition::kGetStatus}) {
      valve->Close();
      std::vector<std::unique_ptr<Watcher>> open;
      if (condition == Condition::kWatchers) {
        for (int i = 0; i < watchers; ++i)
          open.push_back(std::make_unique<Watcher>(*stub, interval_ms));
        const bool all_up = testing::WaitFor(
            [&] {
              return std::all_of(open.begin(), open.end(),
                                 [](const auto& w) { return w->snapshots() > 0; });
            },
            absl::Seconds(30));
        if (!all_up) {
          std::fprintf(stderr, "not every watcher got its first snapshot\n");
          return 1;
        }
      }
      int64_t snapshots_before = 0;
      for (const auto& w : open) snapshots_before += w->snapshots();
      const CpuMicros cpu_before = ReadThreadCpu();
      const int64_t from = (*engine)->Totals().succeeded;
      const absl::Time start = absl::Now();
      valve->Open();
      std::atomic<bool> segment_over{false};
      std::thread caller;
      if (condition == Condition::kGetStatus) {
        caller = std::thread([&] {
          while (!segment_over.load()) {
            const double ms = TimedGetStatus(*stub);
            if (ms < 0) {
              ++failed_calls;
            } else {
              loaded_ms.push_back(ms);
            }
          }
        });
      }
      const bool done = WaitProcessed(**engine, from + segment, total, deadline);
      const absl::Duration took = absl::Now() - start;
      const int64_t to = (*engine)->Totals().succeeded;
      segment_over.store(true);
      if (caller.joinable()) caller.join();
      CpuMicros cpu = ReadThreadCpu();
      for (int part = 0; part < kCpuParts; ++part) cpu[part] -= cpu_before[part];
      int64_t snapshots_after = 0;
      for (const auto& w : open) snapshots_after += w->snapshots();
      open.clear();
      if (!done) {
        std::fprintf(stderr, "the engine did not get through a segment in time\n");
        return 1;
      }
      segments.push_back({condition, static_cast<double>(to - from) / absl::ToDoubleSeconds(took),
                          snapshots_after - snapshots_before, absl::ToDoubleSeconds(took),
                          to - from, cpu});
    }
  }
  if (!WaitProcessed(**engine, total, total, deadline)) {
    std::fprintf(stderr, "the engine did not finish the records\n");
    return 1;
  }
  std::vector<double> idle_ms;
  for (int64_t i = 0; i < status_calls; ++i) {
    const double ms = TimedGetStatus(*stub);
    if (ms < 0) {
      ++failed_calls;
    } else {
      idle_ms.push_back(ms);
    }
  }
  server.Stop();
  (*engine)->Stop();
  const bool intact = CheckNothingDropped(topics.input, total, kInputPartitions);

  Table latency("control_plane_latency",
                {"GetStatus", "calls", "p50 ms", "p99 ms", "max ms", "p99 x idle"});
  const double idle_p99 = Percentile(idle_ms, 99);
  auto latency_row = [&](const std::string& name, const std::vector<double>& ms) {
    latency.AddRow({name, absl::StrCat(ms.size()), Fixed(Percentile(ms, 50), 3),
                    Fixed(Percentile(ms, 99), 3), Fixed(Percentile(ms, 100), 3),
                    Fixed(Percentile(ms, 99) / idle_p99, 2)});
  };
  latency_row("engine idle", idle_ms);
  latency_row("engine flat out", loaded_ms);

  Table throughput(
      "control_plane_throughput",
      {"beside the engine", "segments", "median records/s", "slowest", "fastest", "x alone",
       "snapshots/s", "CPU us/record engine", "broker", "control+clients", "cores busy"});
  auto rates = [&](Condition c) {
    std::vector<double> r;
    for (const Segment& s : segments) {
      if (s.condition == c) r.push_back(s.records_per_second);
    }
    return r;
  };
  const double alone = Percentile(rates(Condition::kAlone), 50);
  auto throughput_row = [&](const std::string& name, Condition c) {
    const std::vector<double> r = rates(c);
    double snapshots = 0, seconds = 0, records = 0;
    CpuMicros cpu{};
    for (const Segment& s : segments) {
      if (s.condition != c) continue;
      snapshots += static_cast<double>(s.snapshots);
      seconds += s.seconds;
      records += static_cast<double>(s.records);
      for (int part = 0; part < kCpuParts; ++part) cpu[part] += s.cpu[part];
    }
    auto per_record = [&](int part) { return Fixed(static_cast<double>(cpu[part]) / records, 2); };
    const double busy_us = static_cast<double>(cpu[kEngineCpu] + cpu[kBrokerCpu] + cpu[kOtherCpu]);
    throughput.AddRow(
        {name, absl::StrCat(r.size()), Fixed(Percentile(r, 50), 0),
         Fixed(*std::min_element(r.begin(), r.end()), 0),
         Fixed(*std::max_element(r.begin(), r.end()), 0), Fixed(Percentile(r, 50) / alone, 3),
         c == Condition::kWatchers ? Fixed(snapshots / seconds, 0) : "", per_record(kEngineCpu),
         per_record(kBrokerCpu), per_record(kOtherCpu), Fixed(busy_us / 1e6 / seconds, 2)});
  };
  throughput_row("nothing", Condition::kAlone);
  throughput_row(absl::StrCat(watchers, " WatchMetrics at ", interval_ms, " ms"),
                 Condition::kWatchers);
  throughput_row("GetStatus back to back", Condition::kGetStatus);

  std::printf("targets: GetStatus p99 < 2 ms under load; watchers cost < 5 %% (x alone > 0.95)\n");
  latency.Print();
  throughput.Print();
  if (failed_calls > 0) std::printf("%d GetStatus calls failed\n", failed_calls);
  const bool written = latency.WriteCsv(out) && throughput.WriteCsv(out);
  return intact && written && failed_calls == 0 ? 0 : 1;
}

}  // namespace
}  // namespace retryd::bench

int main(int argc, char** argv) { return retryd::bench::Main(argc, argv); }
