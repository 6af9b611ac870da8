#include "server/common/listen_address.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace retryd {
namespace {

std::string Quoted(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

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

}  // namespace retryd
