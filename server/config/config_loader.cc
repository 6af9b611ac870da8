#include "server/config/config_loader.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/text_format.h"
#include "server/common/read_file.h"
#include "server/config/parse_errors.h"
#include "server/config/section_validators.h"
#include "server/config/validation_context.h"

namespace retryd {
namespace {

using google::protobuf::TextFormat;
using ParseInfoTree = TextFormat::ParseInfoTree;
namespace cv = config_validation;

// A config file is hand-written text; far past this it is the wrong file.
constexpr size_t kMaxConfigBytes = 16 << 20;

// Validates a parsed config in place, filling in defaults as it goes, one
// section after another (section_validators.h: the order is the errors').
// Returns the resolved Kafka properties, or the errors found.
absl::StatusOr<std::map<std::string, std::string>> ValidateConfig(absl::string_view source,
                                                                  const ParseInfoTree& tree,
                                                                  bool bootstrap_overridden,
                                                                  v1::Config& config) {
  cv::Checker checker(source, tree, bootstrap_overridden);
  const cv::Node& root = checker.root();
  cv::ValidateListenAddresses(checker, config);
  // mutable_kafka: the effective config always has the section, if empty.
  std::map<std::string, std::string> properties =
      cv::ValidateKafka(checker, *config.mutable_kafka());
  cv::ValidateTopics(checker, config);
  checker.Number(config, root, "primary_threads");
  cv::ValidateOrdering(checker, config);
  cv::ValidateRetry(checker, config);
  cv::ValidateProcessor(checker, config);
  checker.Number(config, root, "commit_interval_ms");
  checker.Number(config, root, "max_in_flight");
  cv::ValidateMaxHeldBytes(checker, config);
  checker.Number(config, root, "shutdown_timeout_ms");
  cv::ValidateLivenessStall(checker, config);
  cv::ValidateControl(checker, config);
  checker.Number(*config.mutable_embedded(), root.Child("embedded"), "partitions");
  cv::ValidateDeadLetterDialects(checker, config);
  if (!checker.ok()) return checker.ToStatus();
  return properties;
}

// `dialect` as the validator left it: never UNSPECIFIED.
engine::DeadLetterDialect ToEngineDialect(int dialect) {
  switch (dialect) {
    case v1::DEAD_LETTER_DIALECT_STREAMS:
      return engine::DeadLetterDialect::kStreams;
    case v1::DEAD_LETTER_DIALECT_KIP1191:
      return engine::DeadLetterDialect::kKip1191;
    default:
      return engine::DeadLetterDialect::kSpring;
  }
}

// `ordering` as the validator left it: never ORDERING_UNSPECIFIED.
engine::Ordering ToEngineOrdering(v1::Ordering ordering) {
  switch (ordering) {
    case v1::ORDERING_IN_ORDER:
      return engine::Ordering::kInOrder;
    case v1::ORDERING_KEY:
      return engine::Ordering::kKey;
    default:
      return engine::Ordering::kUnordered;
  }
}

engine::RetryOptions ToEngineRetry(const v1::RetryConfig& retry) {
  engine::RetryOptions options;
  options.topic = retry.topic();
  options.threads = static_cast<int>(retry.threads());
  options.max_threads = static_cast<int>(retry.max_threads());
  options.min_threads = static_cast<int>(retry.min_threads());
  options.autoscale.enabled = retry.has_autoscale();
  options.autoscale.backlog_per_thread =
      static_cast<int64_t>(retry.autoscale().backlog_per_thread());
  options.autoscale.idle_exit_ms = static_cast<int64_t>(retry.autoscale().idle_exit_ms());
  options.max_attempts = static_cast<int>(retry.max_attempts());
  options.lookahead = static_cast<int>(retry.lookahead());
  options.backoff.initial_ms = static_cast<int64_t>(retry.backoff().initial_ms());
  options.backoff.multiplier = retry.backoff().multiplier();
  options.backoff.max_ms = static_cast<int64_t>(retry.backoff().max_ms());
  options.seed = retry.seed();
  for (const v1::RetryTier& tier : retry.tiers()) {
    options.tiers.push_back(
        engine::RetryTier{.topic = tier.topic(),
                          .delay_ms = static_cast<int64_t>(tier.delay_ms()),
                          .max_attempts = static_cast<int>(tier.max_attempts()),
                          .threads = tier.has_threads() ? static_cast<int>(tier.threads()) : -1});
  }
  return options;
}

engine::EngineOptions ToEngineOptions(const v1::Config& config,
                                      std::map<std::string, std::string> properties) {
  engine::EngineOptions engine;
  engine.bootstrap_servers = config.kafka().bootstrap_servers();
  engine.kafka_properties = std::move(properties);
  engine.group_id = config.group_id();
  engine.input_topics.assign(config.input_topics().begin(), config.input_topics().end());
  engine.output_topic = config.output_topic();
  engine.dead_letter_topic = config.dead_letter_topic();
  engine.primary_threads = static_cast<int>(config.primary_threads());
  engine.ordering = ToEngineOrdering(config.ordering());
  engine.retry = ToEngineRetry(config.retry());
  engine.commit_interval_ms = static_cast<int>(config.commit_interval_ms());
  engine.max_in_flight = static_cast<int>(config.max_in_flight());
  engine.max_held_bytes = static_cast<int64_t>(config.max_held_bytes());
  engine.shutdown_timeout_ms = static_cast<int>(config.shutdown_timeout_ms());
  engine.liveness_stall_ms = static_cast<int64_t>(config.liveness_stall_ms());
  for (int dialect : config.dead_letter_dialects()) {
    engine.dead_letter_dialects.push_back(ToEngineDialect(dialect));
  }
  if (config.processor().has_grpc()) {
    // Zero stands for the default (DownstreamOptions), as in config.proto.
    const v1::GrpcProcessorConfig& grpc = config.processor().grpc();
    engine::DownstreamOptions& d = engine.downstream;
    if (grpc.outage_after() != 0) d.outage_after = static_cast<int>(grpc.outage_after());
    if (grpc.probe_initial_ms() != 0) d.probe_initial_ms = grpc.probe_initial_ms();
    if (grpc.probe_max_ms() != 0) d.probe_max_ms = grpc.probe_max_ms();
    d.probe_max_ms = std::max(d.probe_max_ms, d.probe_initial_ms);
  }
  return engine;
}

}  // namespace

absl::StatusOr<LoadedConfig> LoadConfigText(std::string_view text, std::string_view source_name,
                                            const ConfigOverrides& overrides) {
  const absl::string_view source(source_name.data(), source_name.size());
  LoadedConfig loaded;
  ParseInfoTree tree;
  cv::ParseErrorCollector collector;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &loaded.proto)) {
    cv::Errors errors(source);
    for (const cv::ParseErrorCollector::Entry& entry : collector.entries()) {
      auto [path, what] = cv::DescribeParseError(entry);
      errors.Add(entry.line, path, what);
    }
    if (errors.empty()) errors.Add(-1, "", "not a valid text-format retryd.v1.Config");
    return errors.ToStatus();
  }

  if (overrides.bootstrap_servers.has_value()) {
    loaded.proto.mutable_kafka()->set_bootstrap_servers(*overrides.bootstrap_servers);
  }
  absl::StatusOr<std::map<std::string, std::string>> properties =
      ValidateConfig(source, tree, overrides.bootstrap_servers.has_value(), loaded.proto);
  if (!properties.ok()) return properties.status();
  loaded.engine = ToEngineOptions(loaded.proto, *std::move(properties));
  return loaded;
}

absl::StatusOr<LoadedConfig> LoadConfigFile(const std::string& path,
                                            const ConfigOverrides& overrides) {
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxConfigBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("config file: ", text.status().message()));
  }
  return LoadConfigText(*text, path, overrides);
}

}  // namespace retryd
