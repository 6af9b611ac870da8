// A slow network link on loopback for tests: a TCP relay on 127.0.0.1 that
// holds each new connection for `delay` before it connects it through to the
// target, so a client's connection setup (its handshake with the server)
// takes at least that long, as over a distant or congested link.
//
// Each connection is relayed by a thread of its own until either side
// closes or the link is destroyed; the destructor stops and joins them all.
#ifndef RETRYD_TESTS_SUPPORT_SLOW_LINK_H_
#define RETRYD_TESTS_SUPPORT_SLOW_LINK_H_

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace retryd::testing {

class SlowLink {
 public:
  // Relays to 127.0.0.1:`target_port`. Listens at once; port() is 0 if it
  // could not.
  SlowLink(int target_port, absl::Duration delay);
  ~SlowLink();
  SlowLink(const SlowLink&) = delete;
  SlowLink& operator=(const SlowLink&) = delete;

  int port() const { return port_; }
  std::string target() const;                              // "127.0.0.1:<port>".
  int connections() const { return connections_.load(); }  // Accepted so far.

 private:
  void Accept();
  void Relay(int client);

  const int target_port_;
  const absl::Duration delay_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;  // Runs Accept() until stop_.
  absl::Mutex mu_;        // Guards relays_.
  std::vector<std::thread> relays_ ABSL_GUARDED_BY(mu_);
};

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_SUPPORT_SLOW_LINK_H_
