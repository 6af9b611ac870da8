// The bare librdkafka relay that retryd is measured against: one thread
// polls a consumer and produces each record to the output topic, with the
// bytes retryd would write for it (key, value, the input's headers, then the
// four headers retryd adds to an output record: retryd-original-topic,
// -partition, -offset and retryd-attempt), through a producer set up as
// server/kafka/producer.cc sets up retryd's (idempotence, acks=all,
// linger.ms=5, queue.buffering.max.messages=1000000, the partitioner
// choosing by key). No processor, no failures, no retries: the floor of
// what a relay costs.
//
// Used in process by relay_bench (B1), which holds the first record until
// its clock starts, and as a process of its own by bare_relay (the peers
// bench), which lets it go at once.
//
// Thread safety: Create() and the destructor on one thread; reached(),
// Open(), failed() and relayed() from any thread.
#ifndef RETRYD_BENCH_BARE_RELAY_LOOP_H_
#define RETRYD_BENCH_BARE_RELAY_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "server/kafka/handle.h"
#include "server/kafka/properties.h"

namespace retryd::bench {

struct BareRelayOptions {
  std::string bootstrap_servers;
  // Given to both clients first (SASL, SSL: what every client of the broker
  // needs). Default: none.
  kafka::Properties client_properties;
  // Then to the consumer only: the settings retryd's engine would be given
  // (session timeout and such). Default: none.
  kafka::Properties consumer_properties;
  std::string input_topic;
  std::string output_topic;
  // The consumer group; it reads from the earliest offset when the group
  // has none, and commits automatically (librdkafka's default).
  std::string group_id;
};

class BareRelay {
 public:
  // Starts the loop. Returns nullptr (after saying why on stderr) if a
  // client could not be made or the output topic's partitions are unknown.
  static std::unique_ptr<BareRelay> Create(const BareRelayOptions& options);

  // Stops the loop, closes the consumer (leaving the group) and flushes the
  // producer for up to 10 s.
  ~BareRelay();

  BareRelay(const BareRelay&) = delete;
  BareRelay& operator=(const BareRelay&) = delete;

  // True once the loop holds its first record: it waits there until Open()
  // (with one member in the group, its whole assignment is in by then).
  bool reached() const { return reached_.load(); }
  // Lets the loop go; called before the first record, it never waits.
  void Open() { open_.Notify(); }
  // Records whose produce or delivery failed.
  int64_t failed() const { return failed_.load(); }
  // Records handed to the producer.
  int64_t relayed() const { return relayed_.load(); }

 private:
  BareRelay(std::string input, std::string output)
      : input_(std::move(input)), output_(std::move(output)) {}

  void Loop();
  void Relay(const rd_kafka_message_t* m);

  // Constant after Create().
  const std::string input_, output_;
  kafka::HandlePtr producer_;
  kafka::HandlePtr consumer_;

  std::atomic<bool> stop_{false};
  std::atomic<bool> reached_{false};
  std::atomic<int64_t> failed_{0};
  std::atomic<int64_t> relayed_{0};
  absl::Notification open_;
  std::thread thread_;
};

}  // namespace retryd::bench

#endif  // RETRYD_BENCH_BARE_RELAY_LOOP_H_
