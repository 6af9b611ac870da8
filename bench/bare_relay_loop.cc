#include "bench/bare_relay_loop.h"

#include <cstdio>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/bench_support.h"
#include "server/engine/handoff/retry_headers.h"

namespace retryd::bench {
namespace {

kafka::ConfPtr Conf(const BareRelayOptions& options, const kafka::Properties& own) {
  kafka::Properties all = options.client_properties;
  for (const auto& [key, value] : own) all[key] = value;
  return ClientConfAt(options.bootstrap_servers, all);
}

}  // namespace

std::unique_ptr<BareRelay> BareRelay::Create(const BareRelayOptions& options) {
  auto relay = std::unique_ptr<BareRelay>(new BareRelay(options.input_topic, options.output_topic));
  kafka::ConfPtr pconf = Conf(options, {{"client.id", "bare-producer"},
                                        {"topic.metadata.refresh.interval.ms", "1000"},
                                        {"linger.ms", "5"},
                                        {"enable.idempotence", "true"},
                                        {"acks", "all"},
                                        {"queue.buffering.max.messages", "1000000"}});
  if (pconf == nullptr) return nullptr;
  rd_kafka_conf_set_dr_msg_cb(
      pconf.get(), [](rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
        if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
          static_cast<BareRelay*>(opaque)->failed_.fetch_add(1, std::memory_order_relaxed);
        }
      });
  rd_kafka_conf_set_opaque(pconf.get(), relay.get());
  relay->producer_ = NewClient(RD_KAFKA_PRODUCER, std::move(pconf));
  if (relay->producer_ == nullptr) return nullptr;
  // Learn the output topic's partitions before the first record, as
  // retryd's engine does when it starts (Producer::PrepareTopics).
  if (absl::StatusOr<int> n =
          kafka::PartitionCount(relay->producer_.get(), options.output_topic, absl::Seconds(10));
      !n.ok()) {
    std::fprintf(stderr, "bare relay: %s\n", n.status().ToString().c_str());
    return nullptr;
  }
  kafka::Properties consumer = {{"client.id", "bare-consumer"},
                                {"group.id", options.group_id},
                                {"auto.offset.reset", "earliest"},
                                {"enable.partition.eof", "false"}};
  for (const auto& [key, value] : options.consumer_properties) consumer[key] = value;
  relay->consumer_ = NewClient(RD_KAFKA_CONSUMER, Conf(options, consumer));
  if (relay->consumer_ == nullptr) return nullptr;
  if (rd_kafka_poll_set_consumer(relay->consumer_.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::fprintf(stderr, "bare relay: cannot poll the consumer's queue\n");
    return nullptr;
  }
  std::unique_ptr<rd_kafka_topic_partition_list_t, decltype(&rd_kafka_topic_partition_list_destroy)>
      topics(rd_kafka_topic_partition_list_new(1), &rd_kafka_topic_partition_list_destroy);
  rd_kafka_topic_partition_list_add(topics.get(), options.input_topic.c_str(),
                                    RD_KAFKA_PARTITION_UA);
  if (rd_kafka_subscribe(relay->consumer_.get(), topics.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::fprintf(stderr, "bare relay: subscribe failed\n");
    return nullptr;
  }
  relay->thread_ = std::thread([r = relay.get()] { r->Loop(); });
  return relay;
}

BareRelay::~BareRelay() {
  if (!open_.HasBeenNotified()) open_.Notify();  // Never let go: nothing waits on it.
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (consumer_ != nullptr) {
    if (rd_kafka_resp_err_t err = rd_kafka_consumer_close(consumer_.get());
        err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "bare relay: consumer close: %s\n", rd_kafka_err2str(err));
    }
  }
  if (producer_ != nullptr) {
    if (rd_kafka_resp_err_t err = rd_kafka_flush(producer_.get(), 10000);
        err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "bare relay: %d records not acknowledged at close: %s\n",
                   rd_kafka_outq_len(producer_.get()), rd_kafka_err2str(err));
    }
  }
}

void BareRelay::Loop() {
  while (!stop_.load(std::memory_order_relaxed)) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer_.get(), 100);
    rd_kafka_poll(producer_.get(), 0);  // Serve delivery reports.
    if (m == nullptr) continue;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "bare relay: %s\n", rd_kafka_message_errstr(m));
      rd_kafka_message_destroy(m);
      continue;
    }
    if (!open_.HasBeenNotified()) {
      reached_.store(true);
      open_.WaitForNotificationWithTimeout(absl::Seconds(120));
    }
    Relay(m);
    rd_kafka_message_destroy(m);
  }
}

void BareRelay::Relay(const rd_kafka_message_t* m) {
  rd_kafka_headers_t* in = nullptr;
  rd_kafka_headers_t* headers = rd_kafka_message_headers(m, &in) == RD_KAFKA_RESP_ERR_NO_ERROR
                                    ? rd_kafka_headers_copy(in)
                                    : rd_kafka_headers_new(4);
  auto add = [&](std::string_view name, const std::string& value) {
    rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                        static_cast<ssize_t>(value.size()));
  };
  add(engine::kOriginalTopicHeader, input_);
  add(engine::kOriginalPartitionHeader, absl::StrCat(m->partition));
  add(engine::kOriginalOffsetHeader, absl::StrCat(m->offset));
  add(engine::kAttemptHeader, "1");
  while (true) {
    const rd_kafka_resp_err_t err = rd_kafka_producev(
        producer_.get(), RD_KAFKA_V_TOPIC(output_.c_str()),
        RD_KAFKA_V_PARTITION(RD_KAFKA_PARTITION_UA), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len),
        RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      relayed_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || stop_.load()) {
      std::fprintf(stderr, "bare relay: produce: %s\n", rd_kafka_err2str(err));
      rd_kafka_headers_destroy(headers);
      failed_.fetch_add(1);
      return;
    }
    rd_kafka_poll(producer_.get(), 10);
  }
}

}  // namespace retryd::bench
