// The addresses retryd listens on: listen_address, metrics_address and the
// control section's health_listen_address.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/listen_address.h"
#include "server/config/section_validators.h"

namespace retryd::config_validation {

void ValidateListenAddresses(Checker& checker, v1::Config& config) {
  const Node& root = checker.root();
  if (config.listen_address().empty()) {
    config.set_listen_address(DefaultText(root.Field("listen_address")));
  }
  if (auto problem = ListenAddressProblem(config.listen_address())) {
    checker.Error(root, "listen_address", *problem);
  }
  // Empty: no metrics listener.
  if (config.metrics_address().empty()) return;
  if (absl::StartsWith(config.metrics_address(), "unix:")) {
    checker.Error(root, "metrics_address",
                  "must be host:port (e.g. \"127.0.0.1:9464\"); unix: sockets are not supported");
  } else if (auto problem = ListenAddressProblem(config.metrics_address())) {
    checker.Error(root, "metrics_address", *problem);
  }
}

void ValidateControl(Checker& checker, const v1::Config& config) {
  const v1::ControlConfig& control = config.control();
  const Node node = checker.root().Child("control");
  const std::string& health = control.health_listen_address();
  if (!health.empty()) {
    if (auto problem = ListenAddressProblem(health)) {
      checker.Error(node, "health_listen_address", *problem);
    } else if (health == config.listen_address() && !absl::EndsWith(health, ":0")) {
      checker.Error(node, "health_listen_address",
                    absl::StrCat("must differ from listen_address (both are ", health,
                                 "): it is a listener of its own"));
    }
  } else if (!control.tls_cert_file().empty()) {
    checker.Error(
        node, "health_listen_address",
        "required with TLS on the control API (control.tls_cert_file): the kubelet's gRPC "
        "probes cannot speak TLS, so health needs a plaintext listener of its own, e.g. "
        "health_listen_address: \"0.0.0.0:50052\"");
  }
}

}  // namespace retryd::config_validation
