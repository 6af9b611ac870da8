// The demo load: a built-in producer of synthetic records for `retryd --demo`.
//
// Keys mix good, flaky and poison records ("ok-N", "flaky-N", "perm-N", in
// the proportions of DemoLoadOptions) so that a simulate processor with the
// demo rules shows every path: success, retry, dead letter.
//
// Thread-safety: Start() and Stop() are for the owner; produced() may be
// read from any thread.
#ifndef RETRYD_SERVER_DEMO_DEMO_LOAD_H_
#define RETRYD_SERVER_DEMO_DEMO_LOAD_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "server/kafka/producer.h"

namespace retryd {

struct DemoLoadOptions {
  std::string bootstrap_servers;
  std::map<std::string, std::string> kafka_properties;
  std::string topic;
  int records_per_second = 200;
  double flaky_fraction = 0.05;   // Keys "flaky-N".
  double poison_fraction = 0.02;  // Keys "perm-N".
  uint64_t seed = 1;
};

class DemoLoad {
 public:
  explicit DemoLoad(DemoLoadOptions options) : options_(std::move(options)) {}
  ~DemoLoad() { Stop(); }

  DemoLoad(const DemoLoad&) = delete;
  DemoLoad& operator=(const DemoLoad&) = delete;

  absl::Status Start();
  // Stops producing and flushes what was produced. Idempotent.
  void Stop();

  int64_t produced() const { return produced_.load(std::memory_order_relaxed); }

 private:
  void Run();

  const DemoLoadOptions options_;
  std::unique_ptr<kafka::Producer> producer_;
  absl::Notification stop_;
  std::thread thread_;
  std::atomic<int64_t> produced_{0};  // Acknowledged records.
};

}  // namespace retryd

#endif  // RETRYD_SERVER_DEMO_DEMO_LOAD_H_
