// retryd: consumes Kafka topics, runs every record through a processor, and
// hands failures to a retry topic and retry threads so they never hold up
// the line. See README.md and docs/running.md.
//
// Exit status: 0 after a graceful stop (SIGINT/SIGTERM); 1 when the engine
// cannot run (Kafka unreachable, a topic missing or refused by
// kafka.create_topics, every primary thread failed, the control API's
// address in use); 2 for a bad command line or config.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/debug_check.h"
#include "server/common/logging.h"
#include "server/config/config_loader.h"
#include "server/control/control_config.h"
#include "server/control/control_server.h"
#include "server/control/instance.h"
#include "server/demo/demo_load.h"
#include "server/engine/api/counters.h"
#include "server/engine/api/engine.h"
#include "server/engine/stats/thread_stats.h"
#include "server/engine/steering/retry_tiers.h"
#include "server/kafka/embedded_broker.h"
#include "server/kafka/topics.h"
#include "server/processors/processor_factory.h"

ABSL_FLAG(std::string, config, "", "Path of the config file (text-format retryd.v1.Config).");
ABSL_FLAG(std::string, bootstrap_servers, "",
          "Kafka bootstrap servers; overrides kafka.bootstrap_servers in the config file.");
ABSL_FLAG(bool, demo, false,
          "Produce a synthetic demo load (ok-, flaky- and perm- keys) to the first input topic.");
ABSL_FLAG(int, demo_rate, 200, "Records per second of the demo load.");
ABSL_FLAG(int, summary_interval_s, 5, "Seconds between summary lines; 0 prints none.");
ABSL_FLAG(bool, verbose, false, "Log debug lines too.");
ABSL_FLAG(std::string, log_format, "text",
          "How log lines are written: text, or json (one object per line with time, level, "
          "component, thread and message, on stderr; stdout's lines become objects too).");
ABSL_FLAG(std::string, listen, "",
          "Address of the gRPC control API, host:port or unix:PATH; overrides listen_address in "
          "the config file (port 0 picks a free port).");
ABSL_FLAG(std::string, metrics_address, "",
          "Address of the HTTP listener for Prometheus' /metrics, host:port; overrides "
          "metrics_address in the config file (port 0 picks a free port).");
ABSL_FLAG(bool, console, false,
          "Serve the web console at /console/ on the HTTP listener (metrics_address), as "
          "http.console: true in the config file does.");
ABSL_FLAG(bool, testonly_producer_fatal_error_on_sigusr1, false,
          "TEST ONLY, never in production: SIGUSR1 raises a fatal error on the Kafka producer "
          "(librdkafka's test hook), so that a test sees retryd recover from one.");

namespace retryd {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

// The topics retryd writes to, which kafka.create_topics may create.
std::vector<std::string> WrittenTopics(const engine::EngineOptions& o) {
  std::vector<std::string> topics;
  for (const engine::RetryTier& tier : engine::EffectiveTiers(o.retry)) {
    topics.push_back(tier.topic);
  }
  topics.push_back(o.dead_letter_topic);
  if (!o.output_topic.empty()) topics.push_back(o.output_topic);
  return topics;
}

std::vector<std::string> AllTopics(const engine::EngineOptions& o) {
  std::vector<std::string> topics = o.input_topics;
  for (std::string& topic : WrittenTopics(o)) topics.push_back(std::move(topic));
  return topics;
}

// With kafka.create_topics, creates the retry, dead-letter and output topics
// the cluster lacks; without it, checks that every topic exists.
absl::Status PrepareTopics(const v1::KafkaConfig& kafka, const engine::EngineOptions& options) {
  constexpr absl::Duration kTimeout = absl::Seconds(30);
  if (!kafka.has_create_topics()) {
    return kafka::CheckTopicsExist(options.bootstrap_servers, options.kafka_properties,
                                   AllTopics(options), kTimeout);
  }
  const v1::CreateTopicsConfig& create = kafka.create_topics();
  kafka::NewTopicSpec spec;
  spec.partitions = static_cast<int>(create.partitions());
  spec.replication_factor = static_cast<int>(create.replication_factor());
  if (create.has_retention_ms()) spec.retention_ms = create.retention_ms();
  absl::StatusOr<kafka::CreatedTopics> created =
      kafka::CreateMissingTopics(options.bootstrap_servers, options.kafka_properties,
                                 options.input_topics, WrittenTopics(options), spec, kTimeout);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("kafka.create_topics: ", created.status().message()));
  }
  if (created->topics.empty()) {
    LogInfo("kafka.create_topics: every topic exists already; none created");
  } else {
    LogInfo("kafka.create_topics: created ", absl::StrJoin(created->topics, ", "), " with ",
            created->partitions, " partitions, replication factor ", created->replication_factor,
            ", retention.ms ",
            spec.retention_ms.has_value() ? absl::StrCat(*spec.retention_ms) : "the broker's");
  }
  return absl::OkStatus();
}

// One line: what came in, where it went (the outcome counters), what is
// still pending.
void PrintSummary(const engine::EngineTotals& t, int64_t demo_produced) {
  std::string line = absl::StrCat("consumed=", t.consumed);
  for (const engine::CounterField& counter : engine::kCounterFields) {
    if (counter.outcome) absl::StrAppend(&line, " ", counter.name, "=", t.*counter.member);
  }
  absl::StrAppend(&line, " backlog=", t.retry_backlog, " in_flight=", t.in_flight);
  if (demo_produced >= 0) absl::StrAppend(&line, " demo_produced=", demo_produced);
  PrintLine(line);
}

bool AllPrimariesFailed(const engine::Engine& engine) {
  bool any = false;
  for (const auto& stats : engine.Threads()) {
    if (stats->role() != engine::ThreadRole::kPrimary) continue;
    if (stats->state() != engine::ThreadState::kFailed) return false;
    any = true;
  }
  return any;
}

// The config, checked, with the command line's overrides applied.
struct Configuration {
  std::string path;
  LoadedConfig loaded;
  control::ControlServerOptions control_options;
};

// Loads the config named by --config and applies the flags that override
// it. The control API's settings are checked (token and TLS files read)
// here too, so a mistake there costs no broker or engine start-up. An
// error's message is what retryd prints after "retryd: ".
absl::StatusOr<Configuration> LoadConfiguration() {
  Configuration out;
  out.path = absl::GetFlag(FLAGS_config);
  if (out.path.empty()) return absl::InvalidArgumentError("--config is required (see --help)");
  ConfigOverrides overrides;
  if (!absl::GetFlag(FLAGS_bootstrap_servers).empty()) {
    overrides.bootstrap_servers = absl::GetFlag(FLAGS_bootstrap_servers);
  }
  absl::StatusOr<LoadedConfig> config = LoadConfigFile(out.path, overrides);
  if (!config.ok()) return config.status();
  out.loaded = *std::move(config);
  if (const std::string listen = absl::GetFlag(FLAGS_listen); !listen.empty()) {
    if (absl::Status s = control::ValidateListenAddress(listen); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--listen: ", s.message()));
    }
    out.loaded.proto.set_listen_address(listen);
  }
  if (const std::string metrics = absl::GetFlag(FLAGS_metrics_address); !metrics.empty()) {
    if (absl::StartsWith(metrics, "unix:")) {
      return absl::InvalidArgumentError("--metrics_address: must be host:port");
    }
    if (absl::Status s = control::ValidateListenAddress(metrics); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--metrics_address: ", s.message()));
    }
    out.loaded.proto.set_metrics_address(metrics);
  }
  if (absl::GetFlag(FLAGS_console)) out.loaded.proto.mutable_http()->set_console(true);
  absl::StatusOr<control::ControlServerOptions> control_options =
      control::ControlServerOptionsFromConfig(out.loaded.proto);
  if (!control_options.ok()) {
    return absl::Status(control_options.status().code(),
                        absl::StrCat(out.path, ": ", control_options.status().message()));
  }
  out.control_options = *std::move(control_options);
  return out;
}

// Without kafka.bootstrap_servers, starts the embedded broker with every
// topic, points `options` at it and returns it; otherwise prepares the
// cluster's topics (PrepareTopics) and returns null.
absl::StatusOr<std::unique_ptr<kafka::EmbeddedBroker>> StartKafka(const v1::Config& config,
                                                                  engine::EngineOptions& options) {
  if (!options.bootstrap_servers.empty()) {
    if (absl::Status s = PrepareTopics(config.kafka(), options); !s.ok()) return s;
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<kafka::EmbeddedBroker>> broker = kafka::EmbeddedBroker::Start(3);
  if (!broker.ok()) return broker.status();
  const int partitions = static_cast<int>(config.embedded().partitions());
  for (const std::string& topic : AllTopics(options)) {
    if (absl::Status s = (*broker)->CreateTopic(topic, partitions, 3); !s.ok()) return s;
  }
  options.bootstrap_servers = (*broker)->bootstrap_servers();
  // The embedded broker delays every rebalance by the members' session
  // timeout; the shortest a real broker accepts keeps joins to seconds.
  options.kafka_properties.emplace("session.timeout.ms", "6000");
  options.kafka_properties.emplace("heartbeat.interval.ms", "1000");
  // Its partitions never change leaders, and librdkafka 2.0.2 rejoins the
  // group when a periodic metadata refresh lands while the group's leader
  // waits for the metadata it assigns from, which the embedded broker holds
  // for the session timeout: librdkafka's own 5 minutes, not retryd's 5 s.
  options.kafka_properties.emplace("topic.metadata.refresh.interval.ms", "300000");
  if (int64_t session_ms = 0;
      absl::SimpleAtoi(options.kafka_properties["session.timeout.ms"], &session_ms) &&
      session_ms > 10000) {
    // A real broker ends a rebalance once every member has rejoined.
    LogWarning("kafka property session.timeout.ms is ", session_ms,
               ": the embedded broker holds every rebalance for that long less a second, so each "
               "start or stop of a retry thread takes as long");
  }
  LogWarning(
      "no kafka.bootstrap_servers: started the EMBEDDED broker (in memory, NOT durable: "
      "everything is lost when retryd stops)");
  LogWarning("embedded broker bootstrap: ", options.bootstrap_servers, " (e.g. kcat -b ",
             options.bootstrap_servers, " -L); topics ", absl::StrJoin(AllTopics(options), ", "),
             " with ", partitions, " partitions");
  if (config.kafka().has_create_topics()) {
    // The mock cluster takes no CreateTopics from clients; the topics above
    // are all there is.
    LogWarning(
        "kafka.create_topics does not apply to the embedded broker, which created every topic "
        "itself, with ",
        partitions, " partitions (embedded.partitions) and 3 replicas");
  }
  return broker;
}

// Waits for SIGINT or SIGTERM (blocked in `stop_signals`; SIGUSR1 too for a
// test, see --testonly_producer_fatal_error_on_sigusr1), printing a
// summary every --summary_interval_s; returns the exit code: 0, or
// kExitRuntime when every primary thread failed first.
int RunUntilSignal(const sigset_t& stop_signals, const engine::Engine& engine,
                   const DemoLoad* demo) {
  const int interval_s = absl::GetFlag(FLAGS_summary_interval_s);
  for (;;) {
    const timespec timeout{interval_s > 0 ? interval_s : 1, 0};
    const int sig = sigtimedwait(&stop_signals, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM) {
      LogInfo("signal ", sig, ": stopping gracefully");
      return 0;
    }
    if (sig == SIGUSR1) {
      // Only with --testonly_producer_fatal_error_on_sigusr1 (else SIGUSR1
      // is not in `stop_signals`).
      const absl::Status raised = engine.RaiseProducerFatalErrorForTest();
      LogWarning("signal ", sig, ": raising a fatal producer error for a test: ",
                 raised.ok() ? "raised" : raised.message());
    }
    if (AllPrimariesFailed(engine)) {
      LogError("every primary thread failed (", engine.ThreadFailure().message(), "); stopping");
      return kExitRuntime;
    }
    if (interval_s > 0 && sig < 0 && errno == EAGAIN) {
      PrintSummary(engine.Totals(), demo ? demo->produced() : -1);
    }
  }
}

// Parses the command line: --help lists the flags of this file (Abseil's
// default looks for a file named after the binary); --version prints the
// release.
void ParseFlags(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  usage.normalize_filename = [](absl::string_view path) {
    const size_t at = path.rfind("server/");
    return std::string(at == absl::string_view::npos ? path : path.substr(at));
  };
  usage.version_string = [] { return std::string("retryd " RETRYD_VERSION "\n"); };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "retryd --config FILE [--bootstrap_servers HOSTS] [--listen ADDR] [--metrics_address ADDR] "
      "[--console] "
      "[--demo]\n"
      "Consumes Kafka topics, processes every record, retries failures on retry threads.");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_verbose)) SetMinLogLevel(LogLevel::kDebug);
}

// Why retryd cannot start or run on: one line on stderr, "retryd: <why>" as
// text, an ERROR object as JSON.
void Fail(absl::string_view why) {
  if (GetLogFormat() == LogFormat::kJson) {
    LogError(why);
    return;
  }
  std::fprintf(stderr, "retryd: %s\n", std::string(why).c_str());
}

// With --demo, starts the demo load into the first input topic; null
// without it.
absl::StatusOr<std::unique_ptr<DemoLoad>> StartDemo(const engine::EngineOptions& options) {
  if (!absl::GetFlag(FLAGS_demo)) return nullptr;
  DemoLoadOptions demo_options;
  demo_options.bootstrap_servers = options.bootstrap_servers;
  demo_options.kafka_properties = options.kafka_properties;
  demo_options.topic = options.input_topics.front();
  demo_options.records_per_second = absl::GetFlag(FLAGS_demo_rate);
  auto demo = std::make_unique<DemoLoad>(demo_options);
  if (absl::Status s = demo->Start(); !s.ok()) return s;
  LogInfo("demo load: ", demo_options.records_per_second, " records/s to ", demo_options.topic);
  return demo;
}

// Sets the log format --log_format names; false (having said why) if it
// names none.
bool SetLogFormatFromFlag() {
  const std::optional<LogFormat> log_format = ParseLogFormat(absl::GetFlag(FLAGS_log_format));
  if (!log_format.has_value()) {
    std::fprintf(stderr, "retryd: --log_format=%s: must be text or json\n",
                 absl::GetFlag(FLAGS_log_format).c_str());
    return false;
  }
  SetLogFormat(*log_format);
  return true;
}

// Blocks SIGINT and SIGTERM (and SIGUSR1 for a test) in this thread, which
// takes them synchronously (RunUntilSignal); blocking them first means
// every thread started later inherits the mask and none is interrupted.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (absl::GetFlag(FLAGS_testonly_producer_fatal_error_on_sigusr1)) {
    sigaddset(&stop_signals, SIGUSR1);
  }
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// The composition root: everything Main starts, each part a member
// declared in start order. Stop() stops them all on one path, and the
// destructor calls it, so that an error half-way through start-up unwinds
// what started through the same path as a normal stop.
class Running {
 public:
  Running() = default;
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
  ~Running() { Stop(); }

  // Each step starts one part; nullopt, or the exit code after saying why
  // it could not.
  std::optional<int> StartEngine(const Configuration& configuration,
                                 engine::EngineOptions& options);
  std::optional<int> StartControl(control::ControlServerOptions options);
  std::optional<int> StartDemoLoad(const engine::EngineOptions& options);

  // The control API and the engine stop side by side, so that the whole
  // stop stays within shutdown_timeout_ms and a little more: the control
  // API's grace for calls in progress and its last Kafka probe would
  // otherwise come on top. A control operation racing the stop is safe:
  // the engine finishes or aborts it first (Engine::Stop). Idempotent.
  void Stop();

  const engine::Engine& engine() const { return *engine_; }
  const DemoLoad* demo() const { return demo_.get(); }

 private:
  bool stopped_ = false;
  // Before the engine, so that it outlives it: it hosts the cluster the
  // engine uses when kafka.bootstrap_servers is empty.
  std::unique_ptr<kafka::EmbeddedBroker> broker_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<control::ControlServer> control_;  // After the engine it steers.
  std::unique_ptr<DemoLoad> demo_;
};

std::optional<int> Running::StartEngine(const Configuration& configuration,
                                        engine::EngineOptions& options) {
  const v1::Config& config = configuration.loaded.proto;
  absl::StatusOr<std::unique_ptr<kafka::EmbeddedBroker>> broker = StartKafka(config, options);
  if (!broker.ok()) {
    Fail(broker.status().message());
    return kExitRuntime;
  }
  broker_ = *std::move(broker);
  absl::StatusOr<std::unique_ptr<engine::Processor>> processor = MakeProcessor(config.processor());
  if (!processor.ok()) {
    Fail(absl::StrCat(configuration.path, ": processor: ", processor.status().message()));
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options, *std::move(processor));
  if (!engine.ok()) {
    Fail(engine.status().message());
    // A Kafka property the engine cannot use is a config error.
    return engine.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
  }
  engine_ = *std::move(engine);
  if (absl::Status s = engine_->Start(); !s.ok()) {
    Fail(s.message());
    return kExitRuntime;
  }
  return std::nullopt;
}

std::optional<int> Running::StartControl(control::ControlServerOptions options) {
  control_ = std::make_unique<control::ControlServer>(*engine_);
  if (absl::Status s = control_->Start(std::move(options)); !s.ok()) {
    Fail(s.message());
    return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitRuntime;
  }
  PrintLine(absl::StrCat("control API listening on ", control_->address()));
  if (const std::string health = control_->health_address(); !health.empty()) {
    PrintLine(absl::StrCat("health listening on ", health));
  }
  if (const int metrics_port = control_->metrics_port(); metrics_port > 0) {
    PrintLine(absl::StrCat("metrics listening on port ", metrics_port));
  }
  return std::nullopt;
}

std::optional<int> Running::StartDemoLoad(const engine::EngineOptions& options) {
  absl::StatusOr<std::unique_ptr<DemoLoad>> demo = StartDemo(options);
  if (!demo.ok()) {
    Fail(absl::StrCat("demo load: ", demo.status().message()));
    return kExitUsage;
  }
  demo_ = *std::move(demo);
  return std::nullopt;
}

void Running::Stop() {
  if (stopped_) return;
  stopped_ = true;
  std::thread control_stop;
  if (control_ != nullptr) control_stop = std::thread([this] { control_->Stop(); });
  if (demo_ != nullptr) demo_->Stop();
  if (engine_ != nullptr) engine_->Stop();
  if (control_stop.joinable()) control_stop.join();
}

int Main(int argc, char** argv) {
  MatchMutexChecksToBuild();
  ParseFlags(argc, argv);
  if (!SetLogFormatFromFlag()) return kExitUsage;
  absl::StatusOr<Configuration> configuration = LoadConfiguration();
  if (!configuration.ok()) {
    Fail(configuration.status().message());
    return kExitUsage;
  }
  engine::EngineOptions options = configuration->loaded.engine;
  options.instance_name = control::InstanceName(control::DescribeInstance(absl::Now()));
  const sigset_t stop_signals = BlockStopSignals();

  Running running;
  if (std::optional<int> failed = running.StartEngine(*configuration, options)) return *failed;
  if (std::optional<int> failed = running.StartControl(std::move(configuration->control_options))) {
    return *failed;
  }
  if (std::optional<int> failed = running.StartDemoLoad(options)) return *failed;
  LogInfo("retryd running; Ctrl-C or SIGTERM stops it gracefully");

  const int exit_code = RunUntilSignal(stop_signals, running.engine(), running.demo());
  running.Stop();
  PrintSummary(running.engine().Totals(), running.demo() ? running.demo()->produced() : -1);
  return exit_code;
}

}  // namespace
}  // namespace retryd

int main(int argc, char** argv) { return retryd::Main(argc, argv); }
