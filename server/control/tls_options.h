// The TLS settings of retryd's listeners (the gRPC control API and the HTTP
// listener share them): PEM contents, not paths. A plain value.
#ifndef RETRYD_SERVER_CONTROL_TLS_OPTIONS_H_
#define RETRYD_SERVER_CONTROL_TLS_OPTIONS_H_

#include <string>

namespace retryd::control {

struct TlsOptions {
  std::string cert_chain_pem;   // Required.
  std::string private_key_pem;  // Required.
  // Non-empty: clients must present a certificate signed by one of these
  // CAs (mutual TLS).
  std::string client_ca_pem;
};

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_TLS_OPTIONS_H_
