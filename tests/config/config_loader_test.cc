#include "server/config/config_loader.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace retryd {
namespace {

using ::retryd::testing::TempDir;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kSource[] = "test.textproto";

std::string ExamplePath(absl::string_view name) {
  return absl::StrCat(RETRYD_SOURCE_DIR, "/deploy/examples/", name);
}

absl::StatusOr<LoadedConfig> Load(std::string_view text, const ConfigOverrides& overrides = {}) {
  return LoadConfigText(text, kSource, overrides);
}

// The error message of a config that must be rejected as invalid.
std::string ErrorOf(std::string_view text, const ConfigOverrides& overrides = {}) {
  absl::StatusOr<LoadedConfig> loaded = Load(text, overrides);
  if (loaded.ok()) {
    ADD_FAILURE() << "config was accepted:\n" << text;
    return "";
  }
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << loaded.status();
  return std::string(loaded.status().message());
}

// `first_lines` (starting at line 1), then a valid remainder.
std::string WithBase(absl::string_view first_lines) {
  return absl::StrCat(first_lines, "\ngroup_id: \"g\"\ninput_topics: \"in\"\n",
                      "processor { simulate {} }\n");
}

// A config whose processor is grpc { `body` }, the body starting on line 4.
std::string WithGrpc(absl::string_view body) {
  return absl::StrCat("group_id: \"g\"\ninput_topics: \"in\"\nprocessor { grpc {\n", body,
                      "\n} }\n");
}

// The orders example as documented; deploy/examples/orders.textproto
// must mean exactly this.
constexpr char kOrdersVerbatim[] = R"cfg(
listen_address: "127.0.0.1:50051"
metrics_address: "127.0.0.1:9464"
kafka { bootstrap_servers: "127.0.0.1:9092" }
group_id: "orders-app"
input_topics: "orders"
output_topic: "orders.done"
primary_threads: 1
ordering: ORDERING_UNORDERED
retry {
  topic: "orders.retry"
  threads: 2
  max_threads: 16
  max_attempts: 4
  lookahead: 1000
  backoff { initial_ms: 50 multiplier: 2.0 max_ms: 2000 }
}
dead_letter_topic: "orders.dlq"
processor {
  simulate {
    seed: 7
    rule { key_prefix: "perm-" permanent: true }
    rule { key_prefix: "flaky-" fail_attempts: 2 }
  }
}
)cfg";

TEST(ConfigLoaderTest, OrdersExampleMapsToEngineOptions) {
  absl::StatusOr<LoadedConfig> loaded = LoadConfigFile(ExamplePath("orders.textproto"), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const engine::EngineOptions& e = loaded->engine;
  EXPECT_EQ(e.bootstrap_servers, "127.0.0.1:9092");
  EXPECT_THAT(e.kafka_properties, IsEmpty());
  EXPECT_EQ(e.group_id, "orders-app");
  EXPECT_THAT(e.input_topics, ElementsAre("orders"));
  EXPECT_EQ(e.output_topic, "orders.done");
  EXPECT_EQ(e.dead_letter_topic, "orders.dlq");
  EXPECT_EQ(e.primary_threads, 1);
  EXPECT_EQ(e.ordering, engine::Ordering::kUnordered);
  EXPECT_EQ(e.retry.topic, "orders.retry");
  EXPECT_EQ(e.retry.threads, 2);
  EXPECT_EQ(e.retry.max_threads, 16);
  EXPECT_EQ(e.retry.max_attempts, 4);
  EXPECT_EQ(e.retry.lookahead, 1000);
  EXPECT_EQ(e.retry.backoff.initial_ms, 50);
  EXPECT_EQ(e.retry.backoff.multiplier, 2.0);
  EXPECT_EQ(e.retry.backoff.max_ms, 2000);
  EXPECT_EQ(e.retry.seed, 0u);
  EXPECT_EQ(e.commit_interval_ms, 1000);
  EXPECT_EQ(e.max_in_flight, 10000);
  EXPECT_EQ(e.shutdown_timeout_ms, 30000);

  const v1::SimulateConfig& simulate = loaded->proto.processor().simulate();
  EXPECT_EQ(simulate.seed(), 7u);
  ASSERT_EQ(simulate.rule_size(), 2);
  EXPECT_EQ(simulate.rule(0).key_prefix(), "perm-");
  EXPECT_TRUE(simulate.rule(0).permanent());
  EXPECT_EQ(simulate.rule(1).fail_attempts(), 2u);
}

TEST(ConfigLoaderTest, OrdersExampleIsTheDocumentedConfig) {
  absl::StatusOr<LoadedConfig> from_file = LoadConfigFile(ExamplePath("orders.textproto"), {});
  absl::StatusOr<LoadedConfig> verbatim = Load(kOrdersVerbatim);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(verbatim.ok()) << verbatim.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(from_file->proto, verbatim->proto))
      << from_file->proto.DebugString() << "\nvs\n"
      << verbatim->proto.DebugString();
}

// kafka.create_topics is off unless the block is written; written, every
// field may be left out (0: the default, decided at start from the cluster)
// or set within its range, retention_ms -1 included (keep forever).
TEST(ConfigLoaderTest, CreateTopicsIsOffUnlessWrittenAndKeepsWhatItSays) {
  absl::StatusOr<LoadedConfig> absent = Load(WithBase(""));
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->proto.kafka().has_create_topics());

  absl::StatusOr<LoadedConfig> defaults = Load(WithBase("kafka { create_topics {} }"));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  ASSERT_TRUE(defaults->proto.kafka().has_create_topics());
  const v1::CreateTopicsConfig& d = defaults->proto.kafka().create_topics();
  EXPECT_EQ(d.partitions(), 0u);
  EXPECT_EQ(d.replication_factor(), 0u);
  EXPECT_FALSE(d.has_retention_ms());

  absl::StatusOr<LoadedConfig> set = Load(WithBase(
      "kafka { create_topics { partitions: 100000 replication_factor: 32767 retention_ms: -1 } }"));
  ASSERT_TRUE(set.ok()) << set.status();
  const v1::CreateTopicsConfig& c = set->proto.kafka().create_topics();
  EXPECT_EQ(c.partitions(), 100000u);
  EXPECT_EQ(c.replication_factor(), 32767u);
  ASSERT_TRUE(c.has_retention_ms());
  EXPECT_EQ(c.retention_ms(), -1);

  absl::StatusOr<LoadedConfig> lowest =
      Load(WithBase("kafka { create_topics { partitions: 1 replication_factor: 1 "
                    "retention_ms: 1000 } }"));
  ASSERT_TRUE(lowest.ok()) << lowest.status();
  EXPECT_EQ(lowest->proto.kafka().create_topics().retention_ms(), 1000);
}

TEST(ConfigLoaderTest, BootstrapOverrideReplacesTheFilesValue) {
  absl::StatusOr<LoadedConfig> loaded =
      LoadConfigFile(ExamplePath("orders.textproto"), {.bootstrap_servers = "10.0.0.1:9093"});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.bootstrap_servers, "10.0.0.1:9093");
  EXPECT_EQ(loaded->proto.kafka().bootstrap_servers(), "10.0.0.1:9093");

  // An empty override selects the embedded broker.
  loaded = LoadConfigFile(ExamplePath("orders.textproto"), {.bootstrap_servers = ""});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.bootstrap_servers, "");
}

TEST(ConfigLoaderTest, OverridesApplyBeforeValidation) {
  const std::string text = WithBase(R"cfg(kafka { bootstrap_servers: "a:1,,b:2" })cfg");
  EXPECT_THAT(ErrorOf(text),
              HasSubstr("test.textproto:1: kafka.bootstrap_servers: has an empty entry"));
  EXPECT_TRUE(Load(text, {.bootstrap_servers = "h:1"}).ok());
  EXPECT_THAT(
      ErrorOf(WithBase(""), {.bootstrap_servers = "h:1,"}),
      HasSubstr("kafka.bootstrap_servers (set by --bootstrap_servers): has an empty entry"));
}

TEST(ConfigLoaderTest, MinimalExampleTakesTheDefaults) {
  absl::StatusOr<LoadedConfig> loaded = LoadConfigFile(ExamplePath("minimal.textproto"), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const engine::EngineOptions& e = loaded->engine;
  EXPECT_EQ(e.bootstrap_servers, "");  // The embedded broker.
  EXPECT_EQ(e.group_id, "demo");
  EXPECT_THAT(e.input_topics, ElementsAre("events"));
  EXPECT_EQ(e.output_topic, "");
  EXPECT_EQ(e.retry.topic, "events.retry");
  EXPECT_EQ(e.dead_letter_topic, "events.dlq");
  EXPECT_EQ(e.primary_threads, 1);
  EXPECT_EQ(e.ordering, engine::Ordering::kUnordered);
  EXPECT_EQ(e.retry.threads, 1);
  EXPECT_EQ(e.retry.max_threads, 16);
  EXPECT_EQ(e.retry.max_attempts, 5);
  EXPECT_EQ(e.retry.lookahead, 1000);
  EXPECT_EQ(e.retry.backoff.initial_ms, 100);
  EXPECT_EQ(e.retry.backoff.multiplier, 2.0);
  EXPECT_EQ(e.retry.backoff.max_ms, 60000);
  EXPECT_EQ(e.retry.seed, 0u);
  EXPECT_EQ(e.commit_interval_ms, 1000);
  EXPECT_EQ(e.max_in_flight, 10000);
  EXPECT_EQ(e.max_held_bytes, 64 << 20);
  EXPECT_EQ(e.shutdown_timeout_ms, 30000);
  EXPECT_EQ(e.liveness_stall_ms, 120000);
  EXPECT_TRUE(loaded->proto.processor().has_simulate());
}

TEST(ConfigLoaderTest, DefaultsAreFilledIntoTheProto) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase(""));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const v1::Config& c = loaded->proto;
  EXPECT_EQ(c.listen_address(), "127.0.0.1:50051");
  EXPECT_TRUE(c.has_primary_threads());
  EXPECT_EQ(c.primary_threads(), 1u);
  EXPECT_EQ(c.retry().topic(), "in.retry");
  EXPECT_TRUE(c.retry().has_threads());
  EXPECT_EQ(c.retry().threads(), 1u);
  EXPECT_EQ(c.retry().max_threads(), 16u);
  EXPECT_EQ(c.retry().max_attempts(), 5u);
  EXPECT_EQ(c.retry().lookahead(), 1000u);
  EXPECT_EQ(c.retry().backoff().initial_ms(), 100u);
  EXPECT_EQ(c.retry().backoff().multiplier(), 2.0);
  EXPECT_EQ(c.retry().backoff().max_ms(), 60000u);
  EXPECT_EQ(c.retry().seed(), 0u);
  EXPECT_EQ(c.dead_letter_topic(), "in.dlq");
  EXPECT_EQ(c.commit_interval_ms(), 1000u);
  EXPECT_EQ(c.max_in_flight(), 10000u);
  EXPECT_TRUE(c.has_max_held_bytes());
  EXPECT_EQ(c.max_held_bytes(), 64u << 20);
  EXPECT_EQ(c.shutdown_timeout_ms(), 30000u);
  EXPECT_EQ(c.liveness_stall_ms(), 120000u);
  EXPECT_EQ(c.embedded().partitions(), 3u);
}

// liveness_stall_ms must exceed the longest processor call plus
// shutdown_timeout_ms, since one turn of a thread's loop may wait for both;
// left out, it grows with them.
TEST(ConfigLoaderTest, LivenessStallExceedsTheLongestCallPlusTheShutdownTimeout) {
  // The grpc processor's deadline (10000 by default) and the shutdown
  // timeout (30000 by default).
  absl::StatusOr<LoadedConfig> loaded =
      Load(absl::StrCat("liveness_stall_ms: 40001\n", WithGrpc("target: \"localhost:1\"")));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.liveness_stall_ms, 40001);
  EXPECT_THAT(
      ErrorOf(absl::StrCat("liveness_stall_ms: 40000\n", WithGrpc("target: \"localhost:1\""))),
      HasSubstr("test.textproto:1: liveness_stall_ms: must exceed the longest processor "
                "call (processor.grpc.deadline_ms, 10000) plus shutdown_timeout_ms "
                "(30000), 40000"));
  EXPECT_THAT(ErrorOf(WithBase("liveness_stall_ms: 0")),
              HasSubstr("test.textproto:1: liveness_stall_ms: must exceed the longest processor "
                        "call (processor.simulate's latency, 0) plus shutdown_timeout_ms (30000)"));
  EXPECT_THAT(ErrorOf(absl::StrCat("shutdown_timeout_ms: 100000\nliveness_stall_ms: 110000\n",
                                   "group_id: \"g\"\ninput_topics: \"in\"\n",
                                   "processor { simulate { latency_max_ms: 10000 } }\n")),
              HasSubstr("test.textproto:2: liveness_stall_ms: must exceed the longest processor "
                        "call (processor.simulate's latency, 10000) plus shutdown_timeout_ms "
                        "(100000), 110000"));
  // Left out: 120000, or the sum plus 10000 when that is more.
  loaded = Load(WithBase("shutdown_timeout_ms: 200000"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->proto.liveness_stall_ms(), 210000u);
  EXPECT_EQ(loaded->engine.liveness_stall_ms, 210000);
}

// TLS on the control port needs the plaintext health-only listener: the
// kubelet's gRPC probes cannot speak TLS.
TEST(ConfigLoaderTest, TlsNeedsTheHealthListener) {
  const std::string tls = "control {\n  tls_cert_file: \"c.pem\"\n  tls_key_file: \"k.pem\"";
  EXPECT_THAT(ErrorOf(WithBase(absl::StrCat(tls, "\n}"))),
              HasSubstr("test.textproto: control.health_listen_address: required with TLS on the "
                        "control API (control.tls_cert_file): the kubelet's gRPC probes cannot "
                        "speak TLS"));
  absl::StatusOr<LoadedConfig> loaded =
      Load(WithBase(absl::StrCat(tls, "\n  health_listen_address: \"0.0.0.0:50052\"\n}")));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->proto.control().health_listen_address(), "0.0.0.0:50052");
  // Without TLS it is optional, and checked like any address.
  loaded = Load(WithBase("control { health_listen_address: \"127.0.0.1:0\" }"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(ErrorOf(WithBase("control {\n health_listen_address: \"nohost\" }")),
              HasSubstr("test.textproto:2: control.health_listen_address: must be host:port"));
  EXPECT_THAT(ErrorOf(WithBase("listen_address: \"127.0.0.1:7000\"\n"
                               "control { health_listen_address: \"127.0.0.1:7000\" }")),
              HasSubstr("test.textproto:2: control.health_listen_address: must differ from "
                        "listen_address"));
}

TEST(ConfigLoaderTest, MaxHeldBytesTakesZeroForNoLimitAndItsBounds) {
  for (const uint64_t bytes : {uint64_t{0}, uint64_t{1024}, uint64_t{1} << 40}) {
    absl::StatusOr<LoadedConfig> loaded = Load(WithBase(absl::StrCat("max_held_bytes: ", bytes)));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->proto.max_held_bytes(), bytes);
    EXPECT_EQ(loaded->engine.max_held_bytes, static_cast<int64_t>(bytes));
  }
  EXPECT_EQ(ErrorOf(WithBase("max_held_bytes: 1099511627777")),
            "test.textproto:1: max_held_bytes: must be 0 (no limit) or between 1024 and "
            "1099511627776, got 1099511627777");
}

TEST(ConfigLoaderTest, DeadLetterDialectsAreNoneByDefaultAndEachListedOnce) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase(""));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(loaded->engine.dead_letter_dialects, IsEmpty());
  loaded = Load(
      WithBase("dead_letter_dialects: [DEAD_LETTER_DIALECT_KIP1191, DEAD_LETTER_DIALECT_SPRING, "
               "DEAD_LETTER_DIALECT_STREAMS]"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(loaded->engine.dead_letter_dialects,
              ElementsAre(engine::DeadLetterDialect::kKip1191, engine::DeadLetterDialect::kSpring,
                          engine::DeadLetterDialect::kStreams));
  EXPECT_EQ(ErrorOf(WithBase("dead_letter_dialects: [DEAD_LETTER_DIALECT_SPRING, "
                             "DEAD_LETTER_DIALECT_SPRING]")),
            "test.textproto:1: dead_letter_dialects[1]: DEAD_LETTER_DIALECT_SPRING is listed "
            "twice (also dead_letter_dialects[0]); list each dialect once");
  EXPECT_EQ(ErrorOf(WithBase("dead_letter_dialects: DEAD_LETTER_DIALECT_UNSPECIFIED")),
            "test.textproto:1: dead_letter_dialects[0]: must be DEAD_LETTER_DIALECT_SPRING, "
            "DEAD_LETTER_DIALECT_STREAMS or DEAD_LETTER_DIALECT_KIP1191, got "
            "DEAD_LETTER_DIALECT_UNSPECIFIED");
  EXPECT_THAT(ErrorOf(WithBase("dead_letter_dialects: 9")),
              HasSubstr("dead_letter_dialects[0]: must be DEAD_LETTER_DIALECT_SPRING"));
}

TEST(ConfigLoaderTest, GrpcProcessorDefaultsAreFilledIn) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithGrpc("  target: \"localhost:50061\""));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const v1::GrpcProcessorConfig& grpc = loaded->proto.processor().grpc();
  EXPECT_EQ(grpc.target(), "localhost:50061");
  EXPECT_EQ(grpc.deadline_ms(), 10000u);
  EXPECT_EQ(grpc.max_concurrent_calls(), 1u);
  EXPECT_EQ(grpc.outage_after(), 5u);
  EXPECT_EQ(grpc.probe_initial_ms(), 500u);
  EXPECT_EQ(grpc.probe_max_ms(), 30000u);
  EXPECT_EQ(grpc.max_response_bytes(), 4u << 20);
  EXPECT_FALSE(grpc.has_tls());
}

TEST(ConfigLoaderTest, GrpcProcessorTakesEveryFieldInRange) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithGrpc(R"cfg(
  target: "dns:///processor.example:443"
  deadline_ms: 3600000
  max_concurrent_calls: 1024
  tls { ca_file: "ca.pem" cert_file: "c.pem" key_file: "k.pem" server_name: "p.example" }
  token_env: "PROCESSOR_TOKEN"
  status_map { key: "NOT_FOUND" value: STATUS_OUTCOME_RETRIABLE }
  status_map { key: "CANCELLED" value: STATUS_OUTCOME_DEAD_LETTER }
  status_map { key: "ABORTED" value: STATUS_OUTCOME_SUCCESS }
  outage_after: 1000
  probe_initial_ms: 60000
  max_response_bytes: 67108864)cfg"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const v1::GrpcProcessorConfig& grpc = loaded->proto.processor().grpc();
  EXPECT_EQ(grpc.max_concurrent_calls(), 1024u);
  EXPECT_EQ(grpc.status_map().at("NOT_FOUND"), v1::STATUS_OUTCOME_RETRIABLE);
  // The longest delay between probes is never below the first.
  EXPECT_EQ(grpc.probe_max_ms(), 60000u);
}

TEST(ConfigLoaderTest, MaxBackoffDefaultsToAtLeastTheInitialDelay) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase("retry { backoff { initial_ms: 120000 } }"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.retry.backoff.max_ms, 120000);
}

TEST(ConfigLoaderTest, InOrderDefaultsToNoRetryThreads) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase("in_order: true"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.ordering, engine::Ordering::kInOrder);
  EXPECT_EQ(loaded->engine.retry.threads, 0);

  loaded = Load(WithBase("in_order: true\nretry { threads: 0 }"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.retry.threads, 0);

  // Without in_order an explicit 0 is an ordinary value, not "default".
  loaded = Load(WithBase("retry { threads: 0 }"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.retry.threads, 0);
}

TEST(ConfigLoaderTest, InOrderWithRetryThreadsIsRejected) {
  const std::string error = ErrorOf(WithBase("in_order: true\nretry {\n  threads: 2\n}"));
  EXPECT_THAT(error, StartsWith("test.textproto:3: retry.threads: "));
  EXPECT_THAT(error, HasSubstr("excludes retry threads"));
  EXPECT_THAT(error, HasSubstr("set threads: 0 or in_order: false"));
}

TEST(ConfigLoaderTest, OrderingDefaultsToUnorderedInTheEffectiveConfig) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase(""));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.ordering, engine::Ordering::kUnordered);
  EXPECT_EQ(loaded->proto.ordering(), v1::ORDERING_UNORDERED);
  EXPECT_FALSE(loaded->proto.in_order());
}

TEST(ConfigLoaderTest, OrderingKeyKeepsRetryThreads) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase("ordering: ORDERING_KEY"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.ordering, engine::Ordering::kKey);
  EXPECT_EQ(loaded->engine.retry.threads, 1);
  EXPECT_EQ(loaded->proto.ordering(), v1::ORDERING_KEY);
  EXPECT_FALSE(loaded->proto.in_order());

  // Only in order excludes retry threads.
  loaded = Load(WithBase("ordering: ORDERING_KEY\nretry { threads: 3 }"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.retry.threads, 3);

  loaded = Load(WithBase("ordering: ORDERING_UNORDERED\nin_order: false"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.ordering, engine::Ordering::kUnordered);
}

TEST(ConfigLoaderTest, OrderingInOrderIsInOrderByEitherSpelling) {
  for (const char* text : {"ordering: ORDERING_IN_ORDER", "in_order: true",
                           "ordering: ORDERING_IN_ORDER\nin_order: true"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<LoadedConfig> loaded = Load(WithBase(text));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->engine.ordering, engine::Ordering::kInOrder);
    EXPECT_EQ(loaded->engine.retry.threads, 0);
    // The effective config says it both ways, for old and new readers.
    EXPECT_EQ(loaded->proto.ordering(), v1::ORDERING_IN_ORDER);
    EXPECT_TRUE(loaded->proto.in_order());
  }
}

TEST(ConfigLoaderTest, OrderingInOrderWithRetryThreadsIsRejected) {
  const std::string error =
      ErrorOf(WithBase("ordering: ORDERING_IN_ORDER\nretry {\n  threads: 2\n}"));
  EXPECT_THAT(error, StartsWith("test.textproto:3: retry.threads: "));
  EXPECT_THAT(error, HasSubstr("ordering: ORDERING_IN_ORDER keeps strict order"));
  EXPECT_THAT(error, HasSubstr("set threads: 0 or ordering: ORDERING_KEY or ORDERING_UNORDERED"));
}

TEST(ConfigLoaderTest, OrderingAndInOrderThatDisagreeAreRejected) {
  std::string error = ErrorOf(WithBase("in_order: true\nordering: ORDERING_KEY"));
  EXPECT_THAT(error, StartsWith("test.textproto:2: ordering: "));
  EXPECT_THAT(error, HasSubstr("ordering: ORDERING_KEY disagrees with in_order: true"));

  error = ErrorOf(WithBase("in_order: true\nordering: ORDERING_UNORDERED"));
  EXPECT_THAT(error, HasSubstr("ordering: ORDERING_UNORDERED disagrees with in_order: true"));

  error = ErrorOf(WithBase("in_order: false\nordering: ORDERING_IN_ORDER"));
  EXPECT_THAT(error, HasSubstr("ordering: ORDERING_IN_ORDER disagrees with in_order: false"));
}

TEST(ConfigLoaderTest, UnknownOrderingIsRejected) {
  // (The parser places the error at the token after the value.)
  std::string error = ErrorOf(WithBase("ordering: SORTED primary_threads: 1"));
  // Only the current names are offered, not the deprecated aliases.
  EXPECT_THAT(error, StartsWith("test.textproto:1: ordering: unknown value \"SORTED\" (one of: "
                                "ORDERING_UNORDERED, ORDERING_IN_ORDER, ORDERING_KEY)"));

  error = ErrorOf(WithBase("ordering: 7"));
  EXPECT_THAT(error, StartsWith("test.textproto:1: ordering: "));
  EXPECT_THAT(error,
              HasSubstr("must be ORDERING_UNORDERED, ORDERING_IN_ORDER or ORDERING_KEY, got 7"));
}

// The names from before the enum prefix are deprecated aliases of the same
// numbers: a config written with them loads as with the new names, and the
// effective config (GetStatus, text or JSON) prints the new ones.
TEST(ConfigLoaderTest, OldEnumValueNamesStillLoad) {
  const std::string grpc_with = R"cfg(
  target: "x:1"
  status_map { key: "NOT_FOUND" value: RETRIABLE }
  status_map { key: "CANCELLED" value: DEAD_LETTER }
  status_map { key: "ABORTED" value: SUCCESS })cfg";
  for (const auto& [old_name, new_name, ordering] :
       {std::tuple{"UNORDERED", "ORDERING_UNORDERED", v1::ORDERING_UNORDERED},
        std::tuple{"IN_ORDER", "ORDERING_IN_ORDER", v1::ORDERING_IN_ORDER},
        std::tuple{"KEY", "ORDERING_KEY", v1::ORDERING_KEY}}) {
    SCOPED_TRACE(old_name);
    const std::string ordering_line = absl::StrCat("ordering: ", old_name, "\n");
    absl::StatusOr<LoadedConfig> old_names = Load(ordering_line + WithGrpc(grpc_with));
    ASSERT_TRUE(old_names.ok()) << old_names.status();
    absl::StatusOr<LoadedConfig> new_names =
        Load(absl::StrCat("ordering: ", new_name, "\n") +
             WithGrpc(absl::StrReplaceAll(grpc_with, {{"RETRIABLE", "STATUS_OUTCOME_RETRIABLE"},
                                                      {"DEAD_LETTER", "STATUS_OUTCOME_DEAD_LETTER"},
                                                      {"SUCCESS", "STATUS_OUTCOME_SUCCESS"}})));
    ASSERT_TRUE(new_names.ok()) << new_names.status();

    EXPECT_EQ(old_names->proto.ordering(), ordering);
    EXPECT_TRUE(
        google::protobuf::util::MessageDifferencer::Equals(old_names->proto, new_names->proto));
    const auto& status_map = old_names->proto.processor().grpc().status_map();
    EXPECT_EQ(status_map.at("NOT_FOUND"), v1::STATUS_OUTCOME_RETRIABLE);
    EXPECT_EQ(status_map.at("CANCELLED"), v1::STATUS_OUTCOME_DEAD_LETTER);
    EXPECT_EQ(status_map.at("ABORTED"), v1::STATUS_OUTCOME_SUCCESS);

    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(old_names->proto, &text));
    EXPECT_THAT(text, HasSubstr(absl::StrCat("ordering: ", new_name, "\n")));
    EXPECT_THAT(text, HasSubstr("value: STATUS_OUTCOME_DEAD_LETTER"));
    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(old_names->proto, &json).ok());
    EXPECT_THAT(json, HasSubstr(absl::StrCat("\"ordering\":\"", new_name, "\"")));
    EXPECT_THAT(json, HasSubstr("\"CANCELLED\":\"STATUS_OUTCOME_DEAD_LETTER\""));
    EXPECT_THAT(json, Not(HasSubstr(absl::StrCat("\"", old_name, "\""))));
  }
}

TEST(ConfigLoaderTest, SeveralInputsNeedExplicitRetryAndDeadLetterTopics) {
  const std::string error = ErrorOf(R"cfg(group_id: "g"
input_topics: "a"
input_topics: "b"
processor { simulate {} })cfg");
  EXPECT_THAT(error,
              HasSubstr("test.textproto: retry.topic: required when there are 2 input topics"));
  EXPECT_THAT(
      error,
      HasSubstr("test.textproto: dead_letter_topic: required when there are 2 input topics"));

  absl::StatusOr<LoadedConfig> loaded = Load(R"cfg(group_id: "g"
input_topics: "a"
input_topics: "b"
retry { topic: "r" }
dead_letter_topic: "d"
processor { simulate {} })cfg");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(loaded->engine.input_topics, ElementsAre("a", "b"));
}

TEST(ConfigLoaderTest, AutoscaleIsOffUnlessPresent) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase(""));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.retry.min_threads, 0);
  EXPECT_FALSE(loaded->engine.retry.autoscale.enabled);
  EXPECT_FALSE(loaded->proto.retry().has_autoscale());

  loaded = Load(WithBase("retry { min_threads: 2 autoscale {} }"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const engine::RetryOptions& r = loaded->engine.retry;
  EXPECT_EQ(r.min_threads, 2);
  EXPECT_EQ(r.threads, 2) << "threads defaults to min_threads when that is above 1";
  EXPECT_TRUE(r.autoscale.enabled);
  EXPECT_EQ(r.autoscale.backlog_per_thread, 1000);
  EXPECT_EQ(r.autoscale.idle_exit_ms, 60000);
  EXPECT_EQ(loaded->proto.retry().autoscale().idle_exit_ms(), 60000u);

  loaded = Load(WithBase(
      "retry { threads: 0 max_threads: 4 autoscale { backlog_per_thread: 50 idle_exit_ms: 100 } "
      "}"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.retry.threads, 0);
  EXPECT_EQ(loaded->engine.retry.autoscale.backlog_per_thread, 50);
  EXPECT_EQ(loaded->engine.retry.autoscale.idle_exit_ms, 100);

  // In order with autoscale: it waits for in-order mode to be switched off.
  loaded = Load(WithBase("in_order: true\nretry { autoscale {} }"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.retry.threads, 0);
  EXPECT_TRUE(loaded->engine.retry.autoscale.enabled);
}

TEST(ConfigLoaderTest, EveryProblemIsReportedAtOnce) {
  const std::string error = ErrorOf("primary_threads: 0\ncommit_interval_ms: 1\n");
  EXPECT_THAT(error,
              HasSubstr("test.textproto:1: primary_threads: must be between 1 and 64, got 0"));
  EXPECT_THAT(
      error,
      HasSubstr("test.textproto:2: commit_interval_ms: must be between 10 and 60000, got 1"));
  EXPECT_THAT(error, HasSubstr("test.textproto: group_id: required"));
  EXPECT_THAT(error,
              HasSubstr("test.textproto: input_topics: at least one input topic is required"));
  EXPECT_THAT(error, HasSubstr("test.textproto: processor: required"));
}

struct BadConfig {
  std::string name;
  std::string text;
  std::string expected;  // A substring of the error.
};

// Keeps ctest's test names readable.
void PrintTo(const BadConfig& config, std::ostream* out) { *out << config.name; }

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, NamesFileLineAndField) {
  EXPECT_THAT(ErrorOf(GetParam().text), HasSubstr(GetParam().expected));
}

const std::string kLongTopic(250, 'x');

INSTANTIATE_TEST_SUITE_P(
    Validation, BadConfigTest,
    ::testing::Values(
        BadConfig{"MaxAttemptsZero", WithBase("retry {\n  max_attempts: 0\n}"),
                  "test.textproto:2: retry.max_attempts: must be between 1 and 1000, got 0"},
        BadConfig{"MaxAttemptsTooMany", WithBase("retry { max_attempts: 1001 }"),
                  "test.textproto:1: retry.max_attempts: must be between 1 and 1000, got 1001"},
        BadConfig{"PrimaryThreadsZero", WithBase("primary_threads: 0"),
                  "test.textproto:1: primary_threads: must be between 1 and 64, got 0"},
        BadConfig{"PrimaryThreadsTooMany", WithBase("\nprimary_threads: 65"),
                  "test.textproto:2: primary_threads: must be between 1 and 64, got 65"},
        BadConfig{"MaxThreads", WithBase("retry { max_threads: 257 }"),
                  "test.textproto:1: retry.max_threads: must be between 1 and 256, got 257"},
        BadConfig{"ThreadsAboveMax", WithBase("retry { threads: 5 max_threads: 4 }"),
                  "test.textproto:1: retry.threads: must be at most max_threads (4), got 5"},
        BadConfig{"MinThreadsAboveMax", WithBase("retry { min_threads: 5 max_threads: 4 }"),
                  "test.textproto:1: retry.min_threads: must be at most max_threads (4), got 5"},
        BadConfig{"ThreadsBelowMin", WithBase("retry {\n threads: 1\n min_threads: 2\n}"),
                  "test.textproto:2: retry.threads: must be at least min_threads (2), got 1"},
        BadConfig{"MinThreadsInOrder", WithBase("in_order: true\nretry { min_threads: 1 }"),
                  "test.textproto:2: retry.min_threads: in-order mode keeps strict order per "
                  "partition, which excludes retry threads (got min_threads: 1)"},
        BadConfig{"BacklogPerThreadZero",
                  WithBase("retry { autoscale {\n backlog_per_thread: 0 } }"),
                  "test.textproto:2: retry.autoscale.backlog_per_thread: must be between 1 and "
                  "10000000, got 0"},
        BadConfig{"IdleExitTooShort", WithBase("retry { autoscale { idle_exit_ms: 99 } }"),
                  "test.textproto:1: retry.autoscale.idle_exit_ms: must be between 100 and "
                  "86400000, got 99"},
        BadConfig{"Lookahead", WithBase("retry { lookahead: 100001 }"),
                  "test.textproto:1: retry.lookahead: must be between 1 and 100000, got 100001"},
        BadConfig{
            "InitialZero", WithBase("retry { backoff { initial_ms: 0 } }"),
            "test.textproto:1: retry.backoff.initial_ms: must be between 1 and 86400000, got 0"},
        BadConfig{"Multiplier", WithBase("retry {\n backoff {\n  multiplier: 0.5\n }\n}"),
                  "test.textproto:3: retry.backoff.multiplier: must be between 1 and 100, got 0.5"},
        BadConfig{"MultiplierHuge", WithBase("retry { backoff { multiplier: 101 } }"),
                  "test.textproto:1: retry.backoff.multiplier: must be between 1 and 100, got 101"},
        BadConfig{
            "MaxBelowInitial", WithBase("retry { backoff {\n initial_ms: 500\n max_ms: 100 } }"),
            "test.textproto:3: retry.backoff.max_ms: must be at least initial_ms (500), got 100"},
        BadConfig{"CommitInterval", WithBase("commit_interval_ms: 5"),
                  "test.textproto:1: commit_interval_ms: must be between 10 and 60000, got 5"},
        BadConfig{"MaxInFlight", WithBase("max_in_flight: 100001"),
                  "test.textproto:1: max_in_flight: must be between 1 and 100000, got 100001"},
        BadConfig{"MaxHeldBytesTooSmall", WithBase("max_held_bytes: 1023"),
                  "test.textproto:1: max_held_bytes: must be 0 (no limit) or between 1024 and "
                  "1099511627776, got 1023"},
        BadConfig{"ShutdownTimeoutZero", WithBase("shutdown_timeout_ms: 0"),
                  "test.textproto:1: shutdown_timeout_ms: must be between 1 and 3600000, got 0"},
        BadConfig{"CreateTopicsPartitionsZero",
                  WithBase("kafka {\n  create_topics {\n    partitions: 0\n  }\n}"),
                  "test.textproto:3: kafka.create_topics.partitions: must be between 1 and "
                  "100000, got 0 (leave it out for the default)"},
        BadConfig{"CreateTopicsPartitionsTooMany",
                  WithBase("kafka { create_topics { partitions: 100001 } }"),
                  "test.textproto:1: kafka.create_topics.partitions: must be between 1 and "
                  "100000, got 100001"},
        BadConfig{"CreateTopicsReplicationFactorZero",
                  WithBase("kafka {\n  create_topics { replication_factor: 0 }\n}"),
                  "test.textproto:2: kafka.create_topics.replication_factor: must be between 1 "
                  "and 32767, got 0"},
        BadConfig{"CreateTopicsReplicationFactorTooMany",
                  WithBase("kafka { create_topics { replication_factor: 32768 } }"),
                  "kafka.create_topics.replication_factor: must be between 1 and 32767, got "
                  "32768"},
        BadConfig{"CreateTopicsRetentionZero",
                  WithBase("kafka {\n  create_topics {\n    retention_ms: 0\n  }\n}"),
                  "test.textproto:3: kafka.create_topics.retention_ms: must be -1 (keep records "
                  "forever) or at least 1000, got 0"},
        BadConfig{"CreateTopicsRetentionBelowASecond",
                  WithBase("kafka { create_topics { retention_ms: 999 } }"),
                  "kafka.create_topics.retention_ms: must be -1 (keep records forever) or at "
                  "least 1000, got 999"},
        BadConfig{"CreateTopicsRetentionNegative",
                  WithBase("kafka { create_topics { retention_ms: -2 } }"),
                  "kafka.create_topics.retention_ms: must be -1 (keep records forever) or at "
                  "least 1000, got -2"},
        BadConfig{"EmbeddedPartitions", WithBase("embedded {\n  partitions: 65\n}"),
                  "test.textproto:2: embedded.partitions: must be between 1 and 64, got 65"},
        BadConfig{"ListenAddressNoPort", WithBase("listen_address: \"localhost\""),
                  "test.textproto:1: listen_address: must be host:port"},
        BadConfig{
            "ListenAddressBadPort", WithBase("listen_address: \"127.0.0.1:70000\""),
            "test.textproto:1: listen_address: the port in \"127.0.0.1:70000\" must be a number"},
        BadConfig{"MetricsAddressNoPort", WithBase("metrics_address: \"localhost\""),
                  "test.textproto:1: metrics_address: must be host:port"},
        BadConfig{"MetricsAddressUnixSocket",
                  WithBase("metrics_address: \"unix:/run/retryd-metrics.sock\""),
                  "test.textproto:1: metrics_address: must be host:port (e.g. "
                  "\"127.0.0.1:9464\"); unix: sockets are not supported"},
        BadConfig{
            "BootstrapPropertyHasItsOwnField",
            WithBase("kafka {\n  properties { key: \"bootstrap.servers\" value: \"x:1\" }\n}"),
            "test.textproto:2: kafka.properties[\"bootstrap.servers\"]: set the brokers with "
            "kafka.bootstrap_servers instead"},
        BadConfig{"GroupIdPropertyHasItsOwnField",
                  WithBase("kafka { properties { key: \"group.id\" value: \"x\" } }"),
                  "kafka.properties[\"group.id\"]: set the consumer group with group_id instead"},
        BadConfig{"PropertySetTwice",
                  WithBase("kafka {\n  properties { key: \"client.id\" value: \"x\" }\n"
                           "  properties_from_env { key: \"client.id\" value: \"HOME\" }\n}"),
                  "test.textproto:3: kafka.properties_from_env[\"client.id\"]: also set in "
                  "kafka.properties"},
        BadConfig{"OutputTopicInvalid", WithBase("output_topic: \"bad topic\""),
                  "test.textproto:1: output_topic: \"bad topic\" is not a valid Kafka topic name: "
                  "it contains \" \""},
        BadConfig{"TopicTooLong", WithBase(absl::StrCat("output_topic: \"", kLongTopic, "\"")),
                  "test.textproto:1: output_topic: \"" + kLongTopic +
                      "\" is not a valid Kafka topic name: is 250 characters long"},
        BadConfig{"TopicDot", WithBase("retry { topic: \"..\" }"),
                  "test.textproto:1: retry.topic: \"..\" is not a valid Kafka topic name"},
        BadConfig{"DerivedTopicTooLong",
                  absl::StrCat("group_id: \"g\"\ninput_topics: \"", std::string(246, 'a'),
                               "\"\nretry { topic: \"r\" }\nprocessor { simulate {} }"),
                  "test.textproto: dead_letter_topic: \"" + std::string(246, 'a') +
                      ".dlq\" is not a valid Kafka topic name: is 250 characters long"},
        BadConfig{"OutputIsInput", WithBase("output_topic: \"in\""),
                  "test.textproto:1: output_topic: \"in\" is already used as input_topics[0]"},
        BadConfig{
            "DeadLetterIsDefaultRetry", WithBase("dead_letter_topic: \"in.retry\""),
            "test.textproto:1: dead_letter_topic: \"in.retry\" is already used as retry.topic"},
        BadConfig{"RetryIsInput", WithBase("retry { topic: \"in\" }"),
                  "test.textproto:1: retry.topic: \"in\" is already used as input_topics[0]"},
        BadConfig{"GroupMissing", "input_topics: \"in\"\nprocessor { simulate {} }",
                  "test.textproto: group_id: required"},
        BadConfig{"InputsMissing", "group_id: \"g\"\nprocessor { simulate {} }",
                  "test.textproto: input_topics: at least one input topic is required"},
        BadConfig{
            "InputTwice",
            "group_id: \"g\"\ninput_topics: \"a\"\ninput_topics: \"a\"\n"
            "retry { topic: \"r\" }\ndead_letter_topic: \"d\"\nprocessor { simulate {} }",
            "test.textproto:3: input_topics[1]: \"a\" is listed twice (also input_topics[0])"},
        BadConfig{"InputInListInvalid",
                  "group_id: \"g\"\ninput_topics: [\"a\", \"b b\"]\nretry { topic: \"r\" }\n"
                  "dead_letter_topic: \"d\"\nprocessor { simulate {} }",
                  "test.textproto:2: input_topics[1]: \"b b\" is not a valid Kafka topic name: "
                  "it contains \" \""},
        BadConfig{"InputInvalid",
                  "group_id: \"g\"\ninput_topics: \"a/b\"\nprocessor { simulate {} }",
                  "test.textproto:2: input_topics[0]: \"a/b\" is not a valid Kafka topic name"},
        BadConfig{"ProcessorMissing", "group_id: \"g\"\ninput_topics: \"in\"",
                  "test.textproto: processor: required: say what processes records, e.g. "
                  "processor { simulate {} }"},
        BadConfig{
            "ProcessorKindMissing", "group_id: \"g\"\ninput_topics: \"in\"\nprocessor {}",
            "test.textproto:3: processor: choose a processor kind, e.g. processor { simulate {} }"},
        BadConfig{"RateAboveOne",
                  "group_id: \"g\"\ninput_topics: \"in\"\nprocessor {\n  simulate {\n"
                  "    transient_failure_rate: 1.5\n  }\n}",
                  "test.textproto:5: processor.simulate.transient_failure_rate: must be between 0 "
                  "and 1, got 1.5"},
        BadConfig{"RateNegative",
                  "group_id: \"g\"\ninput_topics: \"in\"\n"
                  "processor { simulate { permanent_failure_rate: -0.1 } }",
                  "test.textproto:3: processor.simulate.permanent_failure_rate: must be between 0 "
                  "and 1, got -0.1"},
        BadConfig{"RatesAboveOneTogether",
                  "group_id: \"g\"\ninput_topics: \"in\"\nprocessor { simulate {\n"
                  "transient_failure_rate: 0.6 permanent_failure_rate: 0.5 } }",
                  "test.textproto:4: processor.simulate.transient_failure_rate: together with "
                  "permanent_failure_rate (0.5) must not exceed 1"},
        BadConfig{"LatencyFixedAndRange",
                  "group_id: \"g\"\ninput_topics: \"in\"\n"
                  "processor { simulate { latency_ms: 5 latency_max_ms: 10 } }",
                  "test.textproto:3: processor.simulate.latency_ms: set either a fixed latency_ms "
                  "or the range"},
        BadConfig{"LatencyRangeReversed",
                  "group_id: \"g\"\ninput_topics: \"in\"\n"
                  "processor { simulate { latency_min_ms: 10 latency_max_ms: 5 } }",
                  "test.textproto:3: processor.simulate.latency_min_ms: must not exceed "
                  "latency_max_ms (5), got 10"},
        BadConfig{
            "LatencyTooLong",
            "group_id: \"g\"\ninput_topics: \"in\"\n"
            "processor { simulate { latency_ms: 60001 } }",
            "test.textproto:3: processor.simulate.latency_ms: must be at most 60000, got 60001"},
        BadConfig{"RuleWithoutPrefix",
                  "group_id: \"g\"\ninput_topics: \"in\"\nprocessor { simulate {\n"
                  "  rule { key_prefix: \"a\" }\n  rule { permanent: true }\n} }",
                  "test.textproto:5: processor.simulate.rule[1].key_prefix: required"},
        BadConfig{
            "RulePermanentAndAttempts",
            "group_id: \"g\"\ninput_topics: \"in\"\nprocessor { simulate {\n"
            "  rule {\n    key_prefix: \"a\"\n    permanent: true\n    fail_attempts: 2\n  }\n} }",
            "test.textproto:7: processor.simulate.rule[0].fail_attempts: a rule either fails "
            "permanently or fails its first fail_attempts attempts"},
        BadConfig{"GrpcTargetMissing", WithGrpc("  deadline_ms: 100"),
                  "test.textproto: processor.grpc.target: required: the downstream's gRPC "
                  "address"},
        BadConfig{"GrpcDeadlineZero", WithGrpc("  target: \"x:1\"\n  deadline_ms: 0"),
                  "test.textproto:5: processor.grpc.deadline_ms: must be between 1 and 3600000, "
                  "got 0"},
        BadConfig{"GrpcDeadlineTooLong", WithGrpc("  target: \"x:1\" deadline_ms: 3600001"),
                  "test.textproto:4: processor.grpc.deadline_ms: must be between 1 and 3600000"},
        BadConfig{"GrpcConcurrencyTooHigh",
                  WithGrpc("  target: \"x:1\" max_concurrent_calls: 1025"),
                  "test.textproto:4: processor.grpc.max_concurrent_calls: must be between 1 and "
                  "1024, got 1025"},
        BadConfig{"GrpcOutageAfterZero", WithGrpc("  target: \"x:1\" outage_after: 0"),
                  "test.textproto:4: processor.grpc.outage_after: must be between 1 and 1000"},
        BadConfig{"GrpcProbeInitialZero", WithGrpc("  target: \"x:1\" probe_initial_ms: 0"),
                  "test.textproto:4: processor.grpc.probe_initial_ms: must be between 1 and "
                  "3600000"},
        BadConfig{"GrpcProbeMaxBelowInitial",
                  WithGrpc("  target: \"x:1\"\n  probe_initial_ms: 2000\n  probe_max_ms: 1000"),
                  "test.textproto:6: processor.grpc.probe_max_ms: must be at least "
                  "probe_initial_ms (2000), got 1000"},
        BadConfig{"GrpcResponseLimitTooSmall",
                  WithGrpc("  target: \"x:1\" max_response_bytes: 1023"),
                  "test.textproto:4: processor.grpc.max_response_bytes: must be between 1024 and "
                  "67108864, got 1023"},
        BadConfig{"GrpcTokenFileAndEnv",
                  WithGrpc("  target: \"x:1\"\n  token_file: \"t\"\n  token_env: \"T\""),
                  "test.textproto:6: processor.grpc.token_env: set either token_file or "
                  "token_env, not both"},
        BadConfig{"GrpcCertWithoutKey",
                  WithGrpc("  target: \"x:1\"\n  tls {\n    cert_file: \"c.pem\"\n  }"),
                  "processor.grpc.tls.key_file: mutual TLS needs both cert_file and key_file"},
        BadConfig{"GrpcStatusMapUnknownCode",
                  WithGrpc("  target: \"x:1\"\n  status_map { key: \"not_found\" value: "
                           "STATUS_OUTCOME_RETRIABLE }"),
                  "test.textproto:5: processor.grpc.status_map[\"not_found\"]: not a gRPC "
                  "status code name"},
        BadConfig{"GrpcStatusMapOk",
                  WithGrpc("  target: \"x:1\"\n  status_map { key: \"OK\" value: "
                           "STATUS_OUTCOME_RETRIABLE }"),
                  "test.textproto:5: processor.grpc.status_map[\"OK\"]: OK always means success "
                  "and cannot be changed"},
        BadConfig{"GrpcStatusMapUnspecified",
                  WithGrpc("  target: \"x:1\"\n  status_map { key: \"ABORTED\" value: "
                           "STATUS_OUTCOME_UNSPECIFIED }"),
                  "test.textproto:5: processor.grpc.status_map[\"ABORTED\"]: say what the code "
                  "means: STATUS_OUTCOME_SUCCESS, STATUS_OUTCOME_RETRIABLE or "
                  "STATUS_OUTCOME_DEAD_LETTER"}),
    [](const ::testing::TestParamInfo<BadConfig>& info) { return info.param.name; });

TEST(ConfigLoaderTest, UnknownFieldNamesLineAndSuggestsTheField) {
  std::string error = ErrorOf("group_id: \"g\"\ninput_topic: \"orders\"\n");
  EXPECT_THAT(error, StartsWith("test.textproto:2: input_topics: unknown field \"input_topic\""));
  EXPECT_THAT(error, HasSubstr("did you mean \"input_topics\"?"));

  error = ErrorOf(WithBase("retry {\n  max_attempt: 3\n}"));
  EXPECT_THAT(error,
              StartsWith("test.textproto:2: retry.max_attempts: unknown field \"max_attempt\""));

  error = ErrorOf(WithBase("\n\nretry { backoff { zzzzzzzz: 1 } }"));
  EXPECT_THAT(error,
              StartsWith("test.textproto:3: retry.backoff.zzzzzzzz: unknown field \"zzzzzzzz\""));
  EXPECT_THAT(error, HasSubstr("known fields: initial_ms, multiplier, max_ms"));
}

TEST(ConfigLoaderTest, SyntaxErrorNamesLine) {
  EXPECT_THAT(ErrorOf("group_id: \"g\"\ninput_topics \"orders\"\n"),
              StartsWith("test.textproto:2: "));
  EXPECT_THAT(ErrorOf("group_id: \"g\"\nretry {\n  max_attempts: 3\n"),
              StartsWith("test.textproto:4: "));
  EXPECT_THAT(ErrorOf("group_id: \"g\"\nprimary_threads: -1\n"), StartsWith("test.textproto:2: "));
  EXPECT_THAT(ErrorOf("group_id: \"g\"\ngroup_id: \"h\"\n"),
              AllOf(StartsWith("test.textproto:2: "), HasSubstr("group_id")));
}

TEST(ConfigLoaderTest, MissingFileIsNotFoundNamingThePath) {
  absl::StatusOr<LoadedConfig> loaded = LoadConfigFile("/nonexistent/retryd.textproto", {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr("/nonexistent/retryd.textproto"));
}

TEST(ConfigLoaderTest, ConfigFileErrorsNameThePath) {
  const TempDir dir;
  const std::string path = dir.WriteFile(
      "retryd.textproto",
      "group_id: \"g\"\ninput_topics: \"in\"\nprimary_threads: 99\nprocessor { simulate {} }\n");
  absl::StatusOr<LoadedConfig> loaded = LoadConfigFile(path, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr(absl::StrCat(path, ":3: primary_threads: must be between 1 and 64")));
}

TEST(ConfigLoaderTest, UnreadableFileIsPermissionDenied) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  const TempDir dir;
  const std::string path = dir.WriteFile("retryd.textproto", WithBase(""));
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  absl::StatusOr<LoadedConfig> loaded = LoadConfigFile(path, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(loaded.status().message(), HasSubstr(path));
}

TEST(ConfigLoaderTest, SecretsComeFromEnvironmentAndFiles) {
  ASSERT_EQ(setenv("RETRYD_TEST_SASL_PASSWORD", "env-s3cret", 1), 0);
  const TempDir dir;
  const std::string key_password = dir.WriteFile("key-password", "file-s3cret\n");
  const std::string text = WithBase(absl::StrCat(
      R"cfg(
kafka {
  bootstrap_servers: "broker:9092"
  properties { key: "security.protocol" value: "SASL_SSL" }
  properties_from_env { key: "sasl.password" value: "RETRYD_TEST_SASL_PASSWORD" }
  properties_from_file { key: "ssl.key.password" value: ")cfg",
      key_password, "\" }\n}"));
  absl::StatusOr<LoadedConfig> loaded = Load(text);
  unsetenv("RETRYD_TEST_SASL_PASSWORD");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(loaded->engine.kafka_properties,
              ::testing::UnorderedElementsAre(::testing::Pair("security.protocol", "SASL_SSL"),
                                              ::testing::Pair("sasl.password", "env-s3cret"),
                                              ::testing::Pair("ssl.key.password", "file-s3cret")));
  // The effective config (shown by GetStatus) names the sources, never the values.
  const std::string shown = loaded->proto.DebugString();
  EXPECT_THAT(shown, HasSubstr("RETRYD_TEST_SASL_PASSWORD"));
  EXPECT_THAT(shown, Not(HasSubstr("s3cret\"")));
  EXPECT_THAT(shown, Not(HasSubstr("env-s3cret")));
  EXPECT_THAT(shown, Not(HasSubstr("file-s3cret")));
}

// A secret written in kafka.properties would sit in the config file and in
// every GetStatus answer: refused, pointing to the two secret maps, without
// repeating the value.
TEST(ConfigLoaderTest, SecretsAreRefusedInPlainProperties) {
  for (const char* key : {"sasl.password", "sasl.jaas.config", "ssl.key.password",
                          "ssl.keystore.password", "ssl.key.pem", "sasl.oauthbearer.client.secret",
                          "sasl.oauthbearer.config", "ssl.truststore.password"}) {
    SCOPED_TRACE(key);
    const std::string error = ErrorOf(WithBase(
        absl::StrCat("kafka {\n  properties { key: \"security.protocol\" value: \"SASL_SSL\" }\n"
                     "  properties { key: \"",
                     key, "\" value: \"hunter2-in-the-file\" }\n}")));
    EXPECT_THAT(error, HasSubstr(absl::StrCat("test.textproto:3: kafka.properties[\"", key,
                                              "\"]: holds a secret")));
    EXPECT_THAT(error, HasSubstr("kafka.properties_from_env"));
    EXPECT_THAT(error, HasSubstr("kafka.properties_from_file"));
    EXPECT_THAT(error, Not(HasSubstr("hunter2")));
  }
  // Names, paths and public certificates are no secrets.
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase(
      R"cfg(kafka {
  properties { key: "sasl.username" value: "retryd" }
  properties { key: "ssl.key.location" value: "/etc/retryd/client.key" }
  properties { key: "ssl.certificate.pem" value: "-----BEGIN CERTIFICATE-----" }
})cfg"));
  EXPECT_TRUE(loaded.ok()) << loaded.status();
}

TEST(ConfigLoaderTest, OnlyOneTrailingNewlineIsStrippedFromSecretFiles) {
  const TempDir dir;
  const std::string crlf = dir.WriteFile("crlf", "pw\r\n");
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase(absl::StrCat(
      "kafka { properties_from_file { key: \"sasl.password\" value: \"", crlf, "\" } }")));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.kafka_properties.at("sasl.password"), "pw");

  const std::string two = dir.WriteFile("two", "pw\n\n");
  loaded = Load(WithBase(absl::StrCat(
      "kafka { properties_from_file { key: \"sasl.password\" value: \"", two, "\" } }")));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->engine.kafka_properties.at("sasl.password"), "pw\n");
}

TEST(ConfigLoaderTest, UnsetOrEmptyEnvironmentVariableIsAnError) {
  unsetenv("RETRYD_TEST_UNSET_VARIABLE");
  const std::string error = ErrorOf(WithBase(
      R"cfg(kafka {
  properties_from_env { key: "sasl.password" value: "RETRYD_TEST_UNSET_VARIABLE" }
})cfg"));
  EXPECT_THAT(error, HasSubstr("test.textproto:2: kafka.properties_from_env[\"sasl.password\"]: "
                               "environment variable \"RETRYD_TEST_UNSET_VARIABLE\" is not set"));

  ASSERT_EQ(setenv("RETRYD_TEST_EMPTY_VARIABLE", "", 1), 0);
  EXPECT_THAT(ErrorOf(WithBase(
                  R"cfg(kafka {
  properties_from_env { key: "sasl.password" value: "RETRYD_TEST_EMPTY_VARIABLE" }
})cfg")),
              HasSubstr("environment variable \"RETRYD_TEST_EMPTY_VARIABLE\" is empty"));
  unsetenv("RETRYD_TEST_EMPTY_VARIABLE");
}

TEST(ConfigLoaderTest, ErrorsNeverShowSecretValues) {
  ASSERT_EQ(setenv("RETRYD_TEST_SECRET", "do-not-print-me", 1), 0);
  // Another problem in the same file must not drag the secret into the message.
  const std::string error = ErrorOf(WithBase(R"cfg(primary_threads: 0
kafka {
  properties_from_env { key: "sasl.password" value: "RETRYD_TEST_SECRET" }
})cfg"));
  unsetenv("RETRYD_TEST_SECRET");
  EXPECT_THAT(error, HasSubstr("primary_threads"));
  EXPECT_THAT(error, Not(HasSubstr("do-not-print-me")));
}

TEST(ConfigLoaderTest, UnreadableSecretFileIsAnErrorNamingThePath) {
  const std::string error = ErrorOf(WithBase(R"cfg(
kafka {
  properties_from_file { key: "ssl.key.password" value: "/nonexistent/secret" }
})cfg"));
  EXPECT_THAT(error,
              HasSubstr("test.textproto:3: kafka.properties_from_file[\"ssl.key.password\"]: "
                        "cannot open \"/nonexistent/secret\""));
}

// Found by tests/fuzz/config_loader_fuzz.cc: a file path written with "\n"
// put a raw newline into its error, splitting it over two lines, the second
// of which named no file (and could pass for another error).
TEST(ConfigLoaderTest, AnErrorQuotingAPathStaysOneLine) {
  const std::string error = ErrorOf(WithBase(R"cfg(primary_threads: 0
kafka {
  properties_from_file { key: "ssl.key.password" value: "/nonexistent/a\ntest.textproto:1: b" }
})cfg"));
  const std::vector<std::string> lines = absl::StrSplit(error, '\n');
  EXPECT_THAT(lines, ElementsAre(HasSubstr("test.textproto:3: kafka.properties_from_file"),
                                 StartsWith("test.textproto:1: primary_threads: ")))
      << error;
  EXPECT_THAT(error, HasSubstr("cannot open \"/nonexistent/a\\ntest.textproto:1: b\""));
}

TEST(ConfigLoaderTest, RetryTiersMapToEngineOptions) {
  absl::StatusOr<LoadedConfig> loaded = Load(WithBase(R"(retry {
  threads: 2
  tiers { topic: "in.retry-1s" delay_ms: 1000 max_attempts: 3 }
  tiers { topic: "in.retry-1m" delay_ms: 60000 threads: 1 }
  tiers { topic: "in.retry-1h" delay_ms: 3600000 max_attempts: 2 threads: 0 }
})"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const engine::RetryOptions& r = loaded->engine.retry;
  ASSERT_EQ(r.tiers.size(), 3u);
  EXPECT_EQ(r.tiers[0].topic, "in.retry-1s");
  EXPECT_EQ(r.tiers[0].delay_ms, 1000);
  EXPECT_EQ(r.tiers[0].max_attempts, 3);
  EXPECT_EQ(r.tiers[0].threads, -1) << "retry.threads";
  EXPECT_EQ(r.tiers[1].max_attempts, 1) << "the default";
  EXPECT_EQ(r.tiers[1].threads, 1);
  EXPECT_EQ(r.tiers[2].threads, 0);
  EXPECT_EQ(r.topic, "") << "no single retry topic";
  // The effective config states the attempts in all: 1 + 3 + 1 + 2.
  EXPECT_EQ(loaded->proto.retry().max_attempts(), 7u);
  EXPECT_EQ(r.max_attempts, 7);
}

TEST(ConfigLoaderTest, TieredExampleLoads) {
  absl::StatusOr<LoadedConfig> loaded = LoadConfigFile(ExamplePath("tiered.textproto"), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const engine::RetryOptions& r = loaded->engine.retry;
  ASSERT_EQ(r.tiers.size(), 3u);
  EXPECT_EQ(r.tiers[2].topic, "payments.retry-1h");
  EXPECT_EQ(r.tiers[2].delay_ms, 3600000);
  EXPECT_EQ(r.max_attempts, 7) << "as its comment says";
}

TEST(ConfigLoaderTest, RetryTiersAreCheckedWithLinesAndPaths) {
  EXPECT_THAT(ErrorOf(WithBase("retry { tiers { topic: \"t1\" } }")),
              HasSubstr("retry.tiers[0].delay_ms: required"));
  EXPECT_THAT(ErrorOf(WithBase("retry {\n topic: \"r\"\n tiers { topic: \"t1\" delay_ms: 5 }\n}")),
              HasSubstr("test.textproto:2: retry.topic: leave it out with tiers"));
  EXPECT_THAT(
      ErrorOf(WithBase("retry {\n max_attempts: 3\n tiers { topic: \"t1\" delay_ms: 5 }\n}")),
      HasSubstr("test.textproto:2: retry.max_attempts: leave it out with tiers"));
  EXPECT_THAT(ErrorOf(WithBase(
                  "retry {\n backoff { initial_ms: 5 }\n tiers { topic: \"t1\" delay_ms: 5 }\n}")),
              HasSubstr("retry.backoff: leave it out with tiers"));
  EXPECT_THAT(ErrorOf(WithBase("retry { tiers { delay_ms: 5 } }")),
              HasSubstr("retry.tiers[0].topic: required"));
  EXPECT_THAT(ErrorOf(WithBase("retry {\n tiers { topic: \"t1\" delay_ms: 5 }\n tiers { topic: "
                               "\"in\" delay_ms: 5 }\n}")),
              HasSubstr("retry.tiers[1].topic"));
  EXPECT_THAT(ErrorOf(WithBase("retry {\n tiers { topic: \"t1\" delay_ms: 604800001 }\n}")),
              HasSubstr("retry.tiers[0].delay_ms: must be between 1 and 604800000"));
  EXPECT_THAT(ErrorOf(WithBase("retry {\n tiers { topic: \"t1\" delay_ms: 5 max_attempts: 999 }\n "
                               "tiers { topic: \"t2\" delay_ms: 5 max_attempts: 5 }\n}")),
              HasSubstr("1 + the tiers' max_attempts must be at most 1000, got 1005"));
  EXPECT_THAT(ErrorOf(WithBase(
                  "retry {\n max_threads: 2\n tiers { topic: \"t1\" delay_ms: 5 threads: 3 }\n}")),
              HasSubstr("retry.tiers[0].threads: must be at most retry.max_threads (2), got 3"));
  EXPECT_THAT(
      ErrorOf(WithBase("ordering: ORDERING_KEY\nretry { tiers { topic: \"t1\" delay_ms: 5 } }")),
      HasSubstr("ORDERING_KEY with retry tiers is not supported"));
  EXPECT_THAT(ErrorOf(WithBase("ordering: ORDERING_IN_ORDER\nretry { tiers { topic: \"t1\" "
                               "delay_ms: 5 threads: 1 } }")),
              HasSubstr("excludes retry threads"));
}

}  // namespace
}  // namespace retryd
