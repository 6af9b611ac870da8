// Building librdkafka configurations from retryd's settings and the user's
// pass-through properties. Internal to server/kafka/.
#ifndef RETRYD_SERVER_KAFKA_PROPERTIES_H_
#define RETRYD_SERVER_KAFKA_PROPERTIES_H_

#include <librdkafka/rdkafka.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/common/secret_properties.h"
#include "server/kafka/handle.h"

namespace retryd::kafka {

using Properties = std::map<std::string, std::string>;

struct ConfDeleter {
  void operator()(rd_kafka_conf_t* conf) const { rd_kafka_conf_destroy(conf); }
};
using ConfPtr = std::unique_ptr<rd_kafka_conf_t, ConfDeleter>;

// The secret settings' list (IsSecretProperty, kRedacted) lives in
// server/common/secret_properties.h, where the config loader reads it too;
// named here as well for kafka/'s callers.
using ::retryd::IsSecretProperty;
using ::retryd::kRedacted;

// `line` (one of librdkafka's log lines) with the text that follows a
// secret property's name cut off and replaced by kRedacted. librdkafka
// prints a setting as "name = value" in its `debug: conf` dump (redacting
// only what it flags as sensitive) and quotes a bad sasl.oauthbearer.config
// back in its error; neither is left to show a secret.
std::string RedactLogLine(absl::string_view line);

// topic.metadata.refresh.interval.ms for retryd's consumers and producers
// unless the operator's properties set it: 5 s rather than librdkafka's
// 5 minutes. A hung broker (a stopped process, a frozen VM) keeps its
// connections open and answers nothing, so no error makes librdkafka 2.0.2
// ask for new metadata; only this periodic refresh learns that its
// partitions have new leaders, and a consumer fetches from them at once. It
// bounds the intake a hung leader holds to a few seconds beyond the
// election, for one small Metadata request per client every 5 s
// (docs/running.md, kafka.properties). socket.timeout.ms stays
// librdkafka's 60 s: see there why.
inline constexpr char kDefaultMetadataRefreshMs[] = "5000";

// Returns a configuration holding `user` (the operator's kafka.properties),
// then `enforced` (settings retryd's guarantees depend on). A user property
// that contradicts an enforced one is an error naming it, rather than being
// silently overridden. Also routes librdkafka's log lines to retryd's log,
// through RedactLogLine.
absl::StatusOr<ConfPtr> MakeConf(const std::string& bootstrap_servers, const Properties& user,
                                 const Properties& enforced);

// Checks a partition.assignment.strategy value against the librdkafka
// version (as rd_kafka_version() returns it): before 2.3.0, a consumer using
// the cooperative-sticky assignor aborts the whole process when it is closed
// before its first assignment (librdkafka issue 4312), which a retry thread
// stopped while it joins, or retryd stopped during start-up, does. MakeConf
// refuses that combination with this error.
absl::Status CheckAssignmentStrategy(absl::string_view strategy, int librdkafka_version);

// Asks the cluster for `topic`'s metadata and returns its partition count.
// Unavailable if the request failed, NotFound if the cluster reports an
// error for the topic (unknown, not authorised). Blocks up to `timeout`.
absl::StatusOr<int> PartitionCount(rd_kafka_t* rk, const std::string& topic,
                                   absl::Duration timeout);

// Creates a client handle from `conf`, which it consumes on success and on
// failure alike.
absl::StatusOr<HandlePtr> NewHandle(rd_kafka_type_t type, ConfPtr conf);

// The configuration property `name` of the client `rk` as in effect
// (defaults included); nullopt if librdkafka has no such property.
std::optional<std::string> ConfigValue(rd_kafka_t* rk, const std::string& name);

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_PROPERTIES_H_
