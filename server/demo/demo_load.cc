#include "server/demo/demo_load.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"

namespace retryd {

absl::Status DemoLoad::Start() {
  if (options_.records_per_second < 1) {
    return absl::InvalidArgumentError("demo rate must be at least 1 record per second");
  }
  kafka::ProducerOptions producer_options;
  producer_options.bootstrap_servers = options_.bootstrap_servers;
  producer_options.properties = options_.kafka_properties;
  producer_options.client_id = "retryd-demo-load";
  absl::StatusOr<std::unique_ptr<kafka::Producer>> producer =
      kafka::Producer::Create(producer_options);
  if (!producer.ok()) return producer.status();
  producer_ = *std::move(producer);
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void DemoLoad::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  producer_->Close(absl::Seconds(10));
}

void DemoLoad::Run() {
  SetThreadName("demo-load");
  SetThreadComponent("demo");
  std::mt19937_64 rng(options_.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Produce in small bursts ten times a second, paced against the clock.
  const int per_tick = std::max(1, options_.records_per_second / 10);
  const absl::Duration tick = absl::Seconds(1) * per_tick / options_.records_per_second;
  absl::Time next = absl::Now();
  for (int64_t n = 0; !stop_.HasBeenNotified();) {
    for (int i = 0; i < per_tick; ++i, ++n) {
      const double u = unit(rng);
      const char* kind = u < options_.poison_fraction                             ? "perm-"
                         : u < options_.poison_fraction + options_.flaky_fraction ? "flaky-"
                                                                                  : "ok-";
      OutgoingRecord record;
      record.topic = options_.topic;
      record.key = absl::StrCat(kind, n);
      record.value = absl::StrCat("{\"order\":", n, ",\"amount\":", 10 + n % 90, "}");
      record.headers.push_back({"source", std::string("retryd-demo")});
      absl::Status s = producer_->Produce(record, [this](absl::Status delivered) {
        if (delivered.ok()) produced_.fetch_add(1, std::memory_order_relaxed);
      });
      if (!s.ok()) LogWarning("demo load: ", s.message());
    }
    next += tick;
    // Waits for the next tick, or returns at once when stopped.
    stop_.WaitForNotificationWithDeadline(next);
  }
}

}  // namespace retryd
