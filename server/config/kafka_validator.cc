// The kafka section: bootstrap_servers, the three property maps (plain,
// from the environment, from files) and create_topics.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "server/common/read_file.h"
#include "server/common/secret_properties.h"
#include "server/config/section_validators.h"

namespace retryd::config_validation {
namespace {

// A secret from kafka.properties_from_file: a password or a PEM key.
constexpr size_t kMaxSecretBytes = 1 << 20;
// kafka.create_topics: Kafka takes a replication factor as a 16-bit number;
// far past 100,000 partitions a topic is a typo. A retention below a second
// would delete records before retryd reads them.
constexpr uint64_t kMaxPartitions = 100'000;
constexpr uint64_t kMaxReplicationFactor = 32'767;
constexpr int64_t kMinRetentionMs = 1000;

// The properties of the kafka section's three maps, as they are checked.
struct KafkaProperties {
  std::map<std::string, std::string> resolved;  // Property -> value.
  std::map<std::string, std::string> where;     // Property -> map that set it.
};

void CheckBootstrapServers(Checker& checker, const Node& node, const v1::KafkaConfig& kafka) {
  if (kafka.bootstrap_servers().empty()) return;
  for (absl::string_view server : absl::StrSplit(kafka.bootstrap_servers(), ',')) {
    if (absl::StripAsciiWhitespace(server).empty()) {
      const std::string what =
          "has an empty entry; use a comma-separated list of host:port, or leave it empty "
          "for the embedded broker";
      if (checker.bootstrap_overridden()) {
        checker.Add(-1, "kafka.bootstrap_servers (set by --bootstrap_servers)", what);
      } else {
        checker.Error(node, "bootstrap_servers", what);
      }
      return;
    }
  }
}

// Checks a property name in `map_field`; false if it is unusable.
bool CheckPropertyName(Checker& checker, const Node& node, const v1::KafkaConfig& kafka,
                       absl::string_view map_field, const std::string& key,
                       KafkaProperties& properties) {
  const std::string path = absl::StrCat(node.Path(map_field), "[", Quote(key), "]");
  const int line = MapEntryLine(node, kafka, map_field, key);
  if (key.empty()) {
    checker.Add(line, path, "the librdkafka property name must not be empty");
    return false;
  }
  if (key == "bootstrap.servers") {
    checker.Add(line, path, "set the brokers with kafka.bootstrap_servers instead");
    return false;
  }
  if (key == "group.id") {
    checker.Add(line, path, "set the consumer group with group_id instead");
    return false;
  }
  if (auto [it, inserted] = properties.where.emplace(key, node.Path(map_field)); !inserted) {
    checker.Add(line, path,
                absl::StrCat("also set in ", it->second, "; set each property in one place"));
    return false;
  }
  return true;
}

void CheckPlainProperties(Checker& checker, const Node& node, const v1::KafkaConfig& kafka,
                          KafkaProperties& properties) {
  // Sorted, so that errors come in a stable order.
  const std::map<std::string, std::string> plain(kafka.properties().begin(),
                                                 kafka.properties().end());
  for (const auto& [key, value] : plain) {
    if (!CheckPropertyName(checker, node, kafka, "properties", key, properties)) continue;
    if (IsSecretProperty(key)) {
      // The value is left out of the message: it is the secret.
      checker.Add(MapEntryLine(node, kafka, "properties", key),
                  absl::StrCat(node.Path("properties"), "[", Quote(key), "]"),
                  absl::StrCat("holds a secret, which kafka.properties would show to every "
                               "GetStatus caller; name an environment variable in "
                               "kafka.properties_from_env (e.g. properties_from_env { key: ",
                               Quote(key),
                               " value: \"KAFKA_SECRET\" }) or a file in "
                               "kafka.properties_from_file instead"));
      continue;
    }
    properties.resolved[key] = value;
  }
}

// Resolves the entries of kafka.`map_field`, each naming where its value is
// (a variable, a file): `what_source` names that in the error for an empty
// one, and `resolve` returns the value or why there is none.
template <typename Resolve>
void ResolveProperties(Checker& checker, const Node& node, const v1::KafkaConfig& kafka,
                       absl::string_view map_field,
                       const google::protobuf::Map<std::string, std::string>& map,
                       absl::string_view what_source, KafkaProperties& properties,
                       Resolve resolve) {
  // Sorted, so that errors come in a stable order.
  const std::map<std::string, std::string> sorted(map.begin(), map.end());
  for (const auto& [key, source] : sorted) {
    if (!CheckPropertyName(checker, node, kafka, map_field, key, properties)) continue;
    const std::string path = absl::StrCat(node.Path(map_field), "[", Quote(key), "]");
    const int line = MapEntryLine(node, kafka, map_field, key);
    if (source.empty()) {
      checker.Add(line, path, absl::StrCat(what_source, " must not be empty"));
      continue;
    }
    absl::StatusOr<std::string> value = resolve(source);
    if (!value.ok()) {
      checker.Add(line, path, value.status().message());
      continue;
    }
    properties.resolved[key] = *std::move(value);
  }
}

absl::StatusOr<std::string> ReadVariable(const std::string& variable) {
  const char* value = std::getenv(variable.c_str());
  if (value == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("environment variable ", Quote(variable), " is not set"));
  }
  if (*value == '\0') {
    return absl::NotFoundError(absl::StrCat("environment variable ", Quote(variable), " is empty"));
  }
  return std::string(value);
}

// A secret file's contents, less one trailing line break.
absl::StatusOr<std::string> ReadSecretFile(const std::string& file) {
  absl::StatusOr<std::string> contents = ReadFileToString(file, kMaxSecretBytes);
  if (!contents.ok()) return contents.status();
  absl::string_view value = *contents;
  if (!absl::ConsumeSuffix(&value, "\r\n")) absl::ConsumeSuffix(&value, "\n");
  return std::string(value);
}

// kafka.create_topics: every field may be left out (0: decided at start,
// from the cluster); one that is written must lie in its range.
void CheckCreateTopics(Checker& checker, const v1::CreateTopicsConfig& create, const Node& node) {
  for (auto [field, high] : {std::pair<absl::string_view, uint64_t>{"partitions", kMaxPartitions},
                             {"replication_factor", kMaxReplicationFactor}}) {
    const uint64_t value = GetUnsigned(create, node.Field(field));
    if ((value != 0 || node.Written(field)) && (value < 1 || value > high)) {
      checker.Error(node, field,
                    absl::StrCat("must be between 1 and ", high, ", got ", value,
                                 " (leave it out for the default)"));
    }
  }
  if (create.has_retention_ms() && create.retention_ms() != -1 &&
      create.retention_ms() < kMinRetentionMs) {
    checker.Error(
        node, "retention_ms",
        absl::StrCat("must be -1 (keep records forever) or at least ", kMinRetentionMs, ", got ",
                     create.retention_ms(), " (leave it out for the broker's retention)"));
  }
}

}  // namespace

std::map<std::string, std::string> ValidateKafka(Checker& checker, const v1::KafkaConfig& kafka) {
  const Node node = checker.root().Child("kafka");
  CheckBootstrapServers(checker, node, kafka);
  KafkaProperties properties;
  CheckPlainProperties(checker, node, kafka, properties);
  ResolveProperties(checker, node, kafka, "properties_from_env", kafka.properties_from_env(),
                    "the environment variable name", properties, ReadVariable);
  ResolveProperties(checker, node, kafka, "properties_from_file", kafka.properties_from_file(),
                    "the file path", properties, ReadSecretFile);
  if (kafka.has_create_topics()) {
    CheckCreateTopics(checker, kafka.create_topics(), node.Child("create_topics"));
  }
  return std::move(properties.resolved);
}

}  // namespace retryd::config_validation
