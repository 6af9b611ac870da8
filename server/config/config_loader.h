// Loading retryd's config file: parse the text-format retryd.v1.Config,
// apply command-line overrides, validate every field, fill in defaults, and
// derive the engine's EngineOptions.
//
// Every error names where it comes from, one per line:
//   orders.textproto:14: retry.max_attempts: must be between 1 and 1000, got 0
//   orders.textproto: dead_letter_topic: required when there are 2 input topics
// (the line is left out for a field that is absent from the file). All
// problems found are reported together, not only the first.
//
// Secrets named by kafka.properties_from_env / properties_from_file are read
// here; their values go into EngineOptions::kafka_properties only, never into
// LoadedConfig::proto or an error message. A secret librdkafka setting (see
// IsSecretProperty, server/common/secret_properties.h) written in
// kafka.properties itself is an error.
//
// Stateless and thread-compatible; meant to be called from main() at
// start-up. Reads the environment (getenv), so callers must not modify the
// environment concurrently.
#ifndef RETRYD_SERVER_CONFIG_CONFIG_LOADER_H_
#define RETRYD_SERVER_CONFIG_CONFIG_LOADER_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "retryd/v1/config.pb.h"
#include "server/engine/api/options.h"

namespace retryd {

// Values from the command line that replace the file's, applied before
// validation. An unset member leaves the file's value alone.
struct ConfigOverrides {
  std::optional<std::string> bootstrap_servers;  // --bootstrap_servers.
};

struct LoadedConfig {
  // The file's config after overrides, with every default filled in (e.g.
  // retry.topic "<input>.retry", retry.threads, primary_threads). Holds no
  // secret values: only the names of their variables and files.
  retryd::v1::Config proto;
  // What the engine runs on. kafka_properties merges kafka.properties with
  // the resolved properties_from_env and properties_from_file values.
  // bootstrap_servers is empty when the embedded broker is to be started.
  engine::EngineOptions engine;
};

// Parses and validates `text`. `source_name` (usually the file's path) starts
// every error message. Returns InvalidArgumentError listing every problem.
absl::StatusOr<LoadedConfig> LoadConfigText(std::string_view text, std::string_view source_name,
                                            const ConfigOverrides& overrides);

// Reads the file at `path`, then as LoadConfigText with `path` as the source
// name. A missing file is NotFoundError, an unreadable one
// PermissionDeniedError; both name the path.
absl::StatusOr<LoadedConfig> LoadConfigFile(const std::string& path,
                                            const ConfigOverrides& overrides);

}  // namespace retryd

#endif  // RETRYD_SERVER_CONFIG_CONFIG_LOADER_H_
