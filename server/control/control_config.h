// Turns the config file's control settings (listen_address and the
// `control` message) into ControlServerOptions: reads the bearer token from
// its file or environment variable and the TLS files, and checks them.
//
// Meant for main() at start-up, before anything starts. Reads the
// environment (getenv), so callers must not modify it concurrently.
#ifndef RETRYD_SERVER_CONTROL_CONTROL_CONFIG_H_
#define RETRYD_SERVER_CONTROL_CONTROL_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "retryd/v1/config.pb.h"
#include "server/control/control_server.h"

namespace retryd::control {

// INVALID_ARGUMENT naming the field (e.g. "control.tls_key_file") and, for
// a file, its path and the system's reason; never the token itself. Also
// INVALID_ARGUMENT for a listen address beyond loopback without
// authentication (see CheckAuthenticationForAddress).
// `config` is the loaded, effective config; it is copied into the options
// for GetStatus.
absl::StatusOr<ControlServerOptions> ControlServerOptionsFromConfig(
    const retryd::v1::Config& config);

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_CONTROL_CONFIG_H_
