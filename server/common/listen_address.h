// Checks a listen address as retryd accepts it: host:port (an IPv6 host in
// brackets, port 0..65535, 0 meaning any free port) or unix:<path>.
// Shared by the config loader, the control server and the HTTP listener, so
// the config file, --listen and the servers themselves agree; and says why
// an address could not be bound.
//
// Thread-safe: functions of their arguments (and of the host's addresses).
#ifndef RETRYD_SERVER_COMMON_LISTEN_ADDRESS_H_
#define RETRYD_SERVER_COMMON_LISTEN_ADDRESS_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace retryd {

// What is wrong with `address`, in words for the operator; nullopt if
// nothing is.
std::optional<std::string> ListenAddressProblem(absl::string_view address);

struct ListenHostPort {
  std::string host;  // Without IPv6 brackets.
  std::string port;
};
// Splits a TCP listen address that ListenAddressProblem accepted.
ListenHostPort SplitListenAddress(absl::string_view address);

// Why `address` (host:port or unix:<path>) cannot be listened on, in words
// for the operator: tries the bind itself to learn the system's reason.
// Called after a server failed to bind it.
std::string BindFailureReason(const std::string& address);

}  // namespace retryd

#endif  // RETRYD_SERVER_COMMON_LISTEN_ADDRESS_H_
