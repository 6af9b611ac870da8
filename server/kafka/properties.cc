#include "server/kafka/properties.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/common/logging.h"

namespace retryd::kafka {
namespace {

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '_'; }

void LogCallback(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  // syslog levels: 0..3 error, 4 warning, 5..6 info, 7 debug.
  LogLevel log_level = LogLevel::kDebug;
  if (level <= 3) {
    log_level = LogLevel::kError;
  } else if (level == 4) {
    log_level = LogLevel::kWarning;
  } else if (level <= 6) {
    log_level = LogLevel::kInfo;
  }
  // kafka.properties is shared by consumers and producers; each ignores the
  // other's settings, which is expected, not worth a warning.
  if (absl::StrContains(buf, "property and will be ignored by this")) log_level = LogLevel::kDebug;
  if (!LogEnabled(log_level)) return;
  LogLineFor(log_level, "librdkafka",
             absl::StrCat("librdkafka ", rd_kafka_name(rk), " ", fac, ": ", RedactLogLine(buf)));
}

absl::Status Set(rd_kafka_conf_t* conf, const std::string& key, const std::string& value) {
  char errstr[512];
  if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof(errstr)) !=
      RD_KAFKA_CONF_OK) {
    std::string reason = errstr;
    // librdkafka quotes a value it cannot parse; a secret's must not reach
    // the error a user sees.
    if (IsSecretProperty(key) && !value.empty()) {
      absl::StrReplaceAll({{value, kRedacted}}, &reason);
    }
    return absl::InvalidArgumentError(absl::StrCat("kafka property \"", key, "\": ", reason));
  }
  return absl::OkStatus();
}

std::string VersionString(int version) {
  return absl::StrCat((version >> 24) & 0xff, ".", (version >> 16) & 0xff, ".",
                      (version >> 8) & 0xff);
}

}  // namespace

std::string RedactLogLine(absl::string_view line) {
  // The earliest secret name standing as a whole word; everything after it
  // but the "=", ":" or space that introduces its value goes.
  size_t cut = absl::string_view::npos;
  for (absl::string_view name : kSecretProperties) {
    for (size_t at = line.find(name); at != absl::string_view::npos; at = line.find(name, at + 1)) {
      const size_t end = at + name.size();
      if ((at > 0 && IsNameChar(line[at - 1])) || (end < line.size() && IsNameChar(line[end]))) {
        continue;
      }
      cut = std::min(cut, end);
      break;
    }
  }
  if (cut == absl::string_view::npos) return std::string(line);
  while (cut < line.size() && (line[cut] == ' ' || line[cut] == '=' || line[cut] == ':')) ++cut;
  if (cut == line.size()) return std::string(line);  // The name, but no value.
  return absl::StrCat(line.substr(0, cut), kRedacted);
}

absl::Status CheckAssignmentStrategy(absl::string_view strategy, int librdkafka_version) {
  constexpr int kFixedIn = 0x020300ff;  // librdkafka 2.3.0
  if (!absl::StrContains(strategy, "cooperative-sticky") || librdkafka_version >= kFixedIn) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "kafka property \"partition.assignment.strategy\": cooperative-sticky is not usable with "
      "librdkafka ",
      VersionString(librdkafka_version),
      ": it aborts the process when a consumer closes before its first assignment (librdkafka "
      "issue 4312, fixed in ",
      VersionString(kFixedIn),
      "), as a retry thread stopped while it joins does; use \"range,roundrobin\" (the default) "
      "or \"roundrobin\""));
}

absl::StatusOr<ConfPtr> MakeConf(const std::string& bootstrap_servers, const Properties& user,
                                 const Properties& enforced) {
  ConfPtr conf(rd_kafka_conf_new());
  for (const auto& [key, value] : user) {
    if (auto it = enforced.find(key); it != enforced.end() && it->second != value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kafka property \"", key, "\" is managed by retryd (it must be \"", it->second,
          "\" for the delivery guarantee); remove it from kafka.properties"));
    }
    if (key == "partition.assignment.strategy") {
      if (absl::Status s = CheckAssignmentStrategy(value, rd_kafka_version()); !s.ok()) return s;
    }
    if (absl::Status s = Set(conf.get(), key, value); !s.ok()) return s;
  }
  for (const auto& [key, value] : enforced) {
    if (absl::Status s = Set(conf.get(), key, value); !s.ok()) return s;
  }
  if (absl::Status s = Set(conf.get(), "bootstrap.servers", bootstrap_servers); !s.ok()) return s;
  rd_kafka_conf_set_log_cb(conf.get(), LogCallback);
  return conf;
}

absl::StatusOr<int> PartitionCount(rd_kafka_t* rk, const std::string& topic,
                                   absl::Duration timeout) {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  if (rkt == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("topic handle for ", topic, ": ", rd_kafka_err2str(rd_kafka_last_error())));
  }
  const rd_kafka_metadata_t* metadata = nullptr;
  const rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk, /*all_topics=*/0, rkt, &metadata,
                        static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  // librdkafka keeps the topic and its metadata after the handle goes.
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(
        absl::StrCat("metadata for ", topic, ": ", rd_kafka_err2str(err)));
  }
  const int partitions = metadata->topic_cnt == 1 ? metadata->topics[0].partition_cnt : 0;
  const rd_kafka_resp_err_t topic_err =
      metadata->topic_cnt == 1 ? metadata->topics[0].err : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  rd_kafka_metadata_destroy(metadata);
  if (topic_err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::NotFoundError(absl::StrCat("topic ", topic, ": ", rd_kafka_err2str(topic_err)));
  }
  return partitions;
}

absl::StatusOr<HandlePtr> NewHandle(rd_kafka_type_t type, ConfPtr conf) {
  char errstr[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), errstr, sizeof(errstr));
  if (rk == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create Kafka client: ", errstr));
  }
  conf.release();  // rd_kafka_new took ownership.
  return HandlePtr(rk);
}

std::optional<std::string> ConfigValue(rd_kafka_t* rk, const std::string& name) {
  const rd_kafka_conf_t* conf = rd_kafka_conf(rk);
  size_t size = 0;
  if (rd_kafka_conf_get(conf, name.c_str(), nullptr, &size) != RD_KAFKA_CONF_OK) {
    return std::nullopt;
  }
  std::string value(size, '\0');
  if (rd_kafka_conf_get(conf, name.c_str(), value.data(), &size) != RD_KAFKA_CONF_OK) {
    return std::nullopt;
  }
  value.resize(size > 0 ? size - 1 : 0);  // Without the terminating NUL.
  return value;
}

}  // namespace retryd::kafka
