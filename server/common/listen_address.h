// Checks a gRPC listen address as retryd accepts it: host:port (an IPv6 host
// in brackets, port 0..65535, 0 meaning any free port) or unix:<path>.
// Shared by the config loader and the control server, so the config file,
// --listen and the server itself agree.
#ifndef RETRYD_SERVER_COMMON_LISTEN_ADDRESS_H_
#define RETRYD_SERVER_COMMON_LISTEN_ADDRESS_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace retryd {

// What is wrong with `address`, in words for the operator; nullopt if
// nothing is.
std::optional<std::string> ListenAddressProblem(absl::string_view address);

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_LISTEN_ADDRESS_H_
