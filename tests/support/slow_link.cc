#include "tests/support/slow_link.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>

#include "absl/strings/str_cat.h"

namespace retryd::testing {
namespace {

// How often a waiting thread looks at the stop flag.
constexpr int kPollMs = 50;

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// Writes all of `data`; false if the peer is gone.
bool WriteAll(int fd, const char* data, ssize_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, static_cast<size_t>(size), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

}  // namespace

SlowLink::SlowLink(int target_port, absl::Duration delay)
    : target_port_(target_port), delay_(delay) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = Loopback(0);
  socklen_t length = sizeof(address);
  if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listener_, 16) != 0 ||
      getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return;
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

SlowLink::~SlowLink() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> relays;
  {
    absl::MutexLock lock(&mu_);
    relays.swap(relays_);
  }
  for (std::thread& relay : relays) relay.join();
  if (listener_ >= 0) close(listener_);
}

std::string SlowLink::target() const { return absl::StrCat("127.0.0.1:", port_); }

void SlowLink::Accept() {
  while (!stop_) {
    pollfd waiting{listener_, POLLIN, 0};
    if (poll(&waiting, 1, kPollMs) <= 0) continue;
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    ++connections_;
    absl::MutexLock lock(&mu_);
    relays_.emplace_back([this, client] { Relay(client); });
  }
}

void SlowLink::Relay(int client) {
  // The link's latency: what this class is for, not a wait for an event.
  const absl::Time through = absl::Now() + delay_;
  while (!stop_ && absl::Now() < through) absl::SleepFor(absl::Milliseconds(kPollMs) / 5);
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in address = Loopback(target_port_);
  bool open = !stop_ && server >= 0 &&
              connect(server, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  std::array<char, 16384> buffer;
  while (open && !stop_) {
    std::array<pollfd, 2> ends = {pollfd{client, POLLIN, 0}, pollfd{server, POLLIN, 0}};
    if (poll(ends.data(), ends.size(), kPollMs) <= 0) continue;
    for (size_t i = 0; i < ends.size() && open; ++i) {
      if (ends[i].revents == 0) continue;
      const ssize_t n = recv(ends[i].fd, buffer.data(), buffer.size(), 0);
      open = n > 0 && WriteAll(ends[1 - i].fd, buffer.data(), n);
    }
  }
  if (server >= 0) close(server);
  close(client);
}

}  // namespace retryd::testing
