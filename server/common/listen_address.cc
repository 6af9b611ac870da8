#include "server/common/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace retryd {
namespace {

std::string Quoted(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

std::string ErrnoText(int error) {
  char buffer[256];
  // The GNU strerror_r returns the message, in `buffer` or elsewhere.
  return strerror_r(error, buffer, sizeof buffer);
}

}  // namespace

std::optional<std::string> ListenAddressProblem(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) {
    if (address.size() == 5) return "\"unix:\" needs a socket path, e.g. \"unix:/run/retryd.sock\"";
    return std::nullopt;
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::StrCat("must be host:port (e.g. \"127.0.0.1:50051\") or unix:<path>, got ",
                        Quoted(address));
  }
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty()) {
    return absl::StrCat("the host is missing in ", Quoted(address),
                        "; use 0.0.0.0 or [::] to listen on every interface");
  }
  if (absl::StrContains(host, ':') && !(absl::StartsWith(host, "[") && absl::EndsWith(host, "]"))) {
    return absl::StrCat("an IPv6 host must be in brackets, e.g. \"[::1]:50051\", got ",
                        Quoted(address));
  }
  uint32_t port_number = 0;
  if (port.empty() || !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &port_number) || port_number > 65535) {
    return absl::StrCat("the port in ", Quoted(address), " must be a number from 0 to 65535");
  }
  return std::nullopt;
}

ListenHostPort SplitListenAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  absl::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {std::string(host), std::string(address.substr(colon + 1))};
}

std::string BindFailureReason(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) {
    const std::string path = address.substr(5);
    if (access(path.c_str(), F_OK) == 0) {
      return absl::StrCat(path, " exists (another retryd? remove it if it is stale)");
    }
    return absl::StrCat("cannot create the socket ", path,
                        "; check that its directory exists and is writable");
  }
  const ListenHostPort hp = SplitListenAddress(address);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* addresses = nullptr;
  if (int rc = getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &addresses); rc != 0) {
    return absl::StrCat("cannot resolve the host \"", hp.host, "\": ", gai_strerror(rc));
  }
  std::string reason;
  for (addrinfo* a = addresses; a != nullptr && reason.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // As the servers do.
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      const int error = errno;
      reason = error == EADDRINUSE
                   ? "the address is already in use (another retryd, or another program, "
                     "listens there; pick another port or stop it)"
               : error == EADDRNOTAVAIL
                   ? absl::StrCat("\"", hp.host, "\" is not an address of this host")
                   : ErrnoText(error);
    }
    close(fd);
  }
  freeaddrinfo(addresses);
  if (reason.empty()) reason = "the server refused it (see its log line above)";
  return reason;
}

}  // namespace retryd
