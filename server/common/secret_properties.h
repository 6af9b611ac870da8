// The librdkafka settings whose values are secrets: passwords, private keys
// and client secrets. The one list retryd keeps, here rather than in kafka/ so
// that the config loader reads it without linking the Kafka client: the
// config loader refuses them in kafka.properties (they come from the
// environment or files), GetStatus redacts them, and kafka/'s log callback
// (kafka::MakeConf) keeps their values out of librdkafka's log lines.
//
// Thread-safe (constants).
#ifndef RETRYD_SERVER_COMMON_SECRET_PROPERTIES_H_
#define RETRYD_SERVER_COMMON_SECRET_PROPERTIES_H_

#include <array>

#include "absl/strings/string_view.h"

namespace retryd {

// librdkafka 2.0.2's rdkafka_conf.c flags sasl.password, sasl.oauthbearer.config,
// ssl.key.password, ssl.key.pem and ssl.keystore.password as sensitive, and
// also sasl.username, ssl.key.location and ssl.ca.pem, which hold a name, a
// path and a public certificate: those three are no secrets and may stay in
// kafka.properties. sasl.oauthbearer.client.secret is a secret it does not
// flag. sasl.jaas.config and ssl.truststore.password are the Java client's
// settings operators copy from their Java configs (librdkafka refuses them,
// but only after the value sat in a config file).
inline constexpr std::array<absl::string_view, 8> kSecretProperties = {
    "sasl.password",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
    "sasl.jaas.config",
    "ssl.truststore.password",
};

// Whether `name` is one of kSecretProperties.
bool IsSecretProperty(absl::string_view name);

// What GetStatus and error messages show in place of a secret's value.
inline constexpr absl::string_view kRedacted = "<redacted>";

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_SECRET_PROPERTIES_H_
