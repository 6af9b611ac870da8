// Engine options: the validated, typed form of retryd.v1.Config that the
// engine runs on. Kept free of protobuf so the engine can be embedded as a
// library. Defaults are config.proto's, declared once: a number field's
// (bounds) default_value comes in as a constant of config_defaults.h
// (generated from config.proto, see proto/config_defaults_gen.cc); the
// defaults the proto cannot declare in (bounds) (a double, an optional, or
// one that follows another field) are the k...Default constants below,
// which the config loader's validators use too.
#ifndef RETRYD_SERVER_ENGINE_API_OPTIONS_H_
#define RETRYD_SERVER_ENGINE_API_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "retryd/v1/config_defaults.h"

namespace retryd::engine {

namespace config_defaults = ::retryd::v1::config_defaults;

// Defaults config.proto documents in comments but declares in no (bounds)
// option: the config loader's validators fill the effective config with
// these, so they are written here once.
// retry.backoff.multiplier: a double, which (bounds) cannot hold.
inline constexpr double kBackoffMultiplierDefault = 2.0;
// retry.backoff.max_ms: 60 s, or initial_ms if that is more.
inline constexpr int64_t kBackoffMaxMsDefault = 60000;
// processor.grpc.probe_max_ms: 30 s, or probe_initial_ms if that is more.
inline constexpr int64_t kProbeMaxMsDefault = 30000;
// retry.threads: 1 (min_threads if more; 0 in in-order mode).
inline constexpr int kRetryThreadsDefault = 1;
// max_held_bytes: optional (0 is "no limit"), so (bounds) cannot say it.
inline constexpr int64_t kMaxHeldBytesDefault = int64_t{64} << 20;
// liveness_stall_ms: 120 s, or the longest processor call plus
// shutdown_timeout_ms plus 10 s if that is more.
inline constexpr int64_t kLivenessStallMsDefault = 120000;

struct BackoffOptions {
  // Cap of the first retry's delay.
  int64_t initial_ms = config_defaults::BackoffConfig::initial_ms;
  double multiplier = kBackoffMultiplierDefault;  // Growth of the cap per attempt (>= 1).
  int64_t max_ms = kBackoffMaxMsDefault;          // Largest cap.
};

// Elastic retry threads (see Autoscaler).
struct AutoscaleOptions {
  bool enabled = false;  // Off: retry threads change only on request.
  // Retry backlog per retry thread above which more start.
  int64_t backlog_per_thread = config_defaults::AutoscaleConfig::backlog_per_thread;
  // A retry thread with nothing to do this long stops.
  int64_t idle_exit_ms = config_defaults::AutoscaleConfig::idle_exit_ms;
};

// Most tiers RetryOptions::tiers may hold.
inline constexpr int kMaxRetryTiers = 16;

// One tier of tiered retry topics (RetryOptions::tiers): a retry topic
// whose records all wait the same delay before each attempt it makes.
struct RetryTier {
  std::string topic;
  // Fixed wait before each of the tier's attempts, from the failure before
  // it; no jitter, so due times in a partition come in the order written.
  // 0: retry.backoff's exponential backoff with jitter (the single-topic
  // form, which EffectiveTiers makes).
  int64_t delay_ms = 0;
  int max_attempts = config_defaults::RetryTier::max_attempts;  // Attempts the tier makes (>= 0).
  int threads = -1;  // Retry threads started with the engine; -1: RetryOptions::threads.
};

struct RetryOptions {
  // Retry topic; required without `tiers`. With tiers, Engine::Create sets
  // it to the first tier's topic.
  std::string topic;
  int threads = kRetryThreadsDefault;  // Retry threads started with the engine.
  // Cap for runtime and automatic starts.
  int max_threads = config_defaults::RetryConfig::max_threads;
  int min_threads = 0;  // Floor for stops, outside in-order mode.
  AutoscaleOptions autoscale;
  // Attempts in all, the primary's included. With tiers, Engine::Create sets
  // it to 1 + the sum of the tiers' max_attempts.
  int max_attempts = config_defaults::RetryConfig::max_attempts;
  // Records held per partition before pausing it.
  int lookahead = config_defaults::RetryConfig::lookahead;
  BackoffOptions backoff;
  uint64_t seed = 0;  // Jitter seed; 0 picks one at random.
  // Tiered retry topics, in the order a record goes through them: a record
  // that used up a tier's attempts goes to the next, and to the dead-letter
  // topic after the last. Empty: the single `topic`, with `backoff` and
  // max_attempts - 1 retries. threads, min_threads and max_threads count
  // per tier. Engine::Create fills it in from the single-topic form (see
  // retry_tiers.h), so the engine always runs on tiers.
  std::vector<RetryTier> tiers;
};

// When the processor's downstream is taken for down (see DownstreamGate).
struct DownstreamOptions {
  // Unavailable calls in a row.
  int outage_after = config_defaults::GrpcProcessorConfig::outage_after;
  // First delay between probes.
  int64_t probe_initial_ms = config_defaults::GrpcProcessorConfig::probe_initial_ms;
  int64_t probe_max_ms = kProbeMaxMsDefault;  // Largest delay between probes.
};

// How records of one input partition are ordered (see docs/guarantees.md, "Ordering modes").
enum class Ordering {
  // Failures go to the retry topic; later records overtake them.
  kUnordered,
  // Per input partition, records complete in offset order: a failure is
  // retried in place, its partition paused. Excludes retry threads.
  kInOrder,
  // Per key (within an input partition), records complete in offset order:
  // a key with a record in the retry topic is parked, and its later records
  // follow that record through the retry topic. Records with no key are
  // unordered.
  kKey,
};
const char* OrderingName(Ordering ordering);

// Another tool's dead-letter headers, written beside retryd's own on every
// dead-letter record (see handoff/dlq_dialects.h and docs/dead-letters.md,
// "Dead letters").
enum class DeadLetterDialect {
  // Spring Kafka's DeadLetterPublishingRecoverer: kafka_dlt-*.
  kSpring,
  // Kafka Streams' dead-letter queue (KIP-1034): __streams.errors.*.
  kStreams,
  // Share groups' dead-letter queues (KIP-1191, experimental): __dlq.errors.*.
  kKip1191,
};

struct EngineOptions {
  std::string bootstrap_servers;                        // Required.
  std::map<std::string, std::string> kafka_properties;  // Passed to librdkafka.
  std::string group_id;                                 // Required.
  std::vector<std::string> input_topics;                // At least one.
  std::string output_topic;                             // Empty: successes produce nothing.
  std::string dead_letter_topic;                        // Required.
  // This process, as dead-letter records name it (retryd-dead-lettered-by:
  // "<instance_name>/thread-<id>"): the host or pod name. Empty: the thread
  // alone.
  std::string instance_name;
  int primary_threads = config_defaults::Config::primary_threads;
  Ordering ordering = Ordering::kUnordered;
  RetryOptions retry;
  DownstreamOptions downstream;
  // How often watermarks are committed.
  int commit_interval_ms = config_defaults::Config::commit_interval_ms;
  // Per thread: records awaiting an ack.
  int max_in_flight = config_defaults::Config::max_in_flight;
  // Per thread: bytes of the records it holds (see ByteCharge) above which
  // it pauses its partitions. 0: no limit.
  int64_t max_held_bytes = kMaxHeldBytesDefault;
  // Graceful stop: wait this long for acks.
  int shutdown_timeout_ms = config_defaults::Config::shutdown_timeout_ms;
  // A thread whose loop has not turned for this long is stalled (see
  // Engine::Liveness). The config keeps it above the longest processor call
  // plus shutdown_timeout_ms: a turn may wait that long on purpose.
  int64_t liveness_stall_ms = kLivenessStallMsDefault;
  // The dialects whose headers every dead-letter record carries too, each
  // once, in this order after retryd's own. Empty (the default): retryd's
  // alone.
  std::vector<DeadLetterDialect> dead_letter_dialects;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_API_OPTIONS_H_
