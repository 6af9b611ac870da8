#include "server/kafka/producer.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/logging.h"
#include "server/kafka/properties.h"

namespace retryd::kafka {
namespace {

// A callback as a Delivery.
class CallbackDelivery final : public Delivery {
 public:
  explicit CallbackDelivery(PlacedCallback done) : done_(std::move(done)) {}
  void Delivered(std::unique_ptr<Delivery> /*self*/, absl::Status status, int32_t partition,
                 int64_t offset) override {
    std::move(done_)(std::move(status), partition, offset);
  }

 private:
  PlacedCallback done_;
};

// The absl code says what the caller can do about the error (see
// producer.h): send the record again, change the record, or stop.
absl::Status KafkaError(rd_kafka_resp_err_t err, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", rd_kafka_err2str(err));
  switch (err) {
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
      return absl::ResourceExhaustedError(message);
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
      return absl::CancelledError(message);
    // This record, as it is, can never be written: too large for the
    // client's message.max.bytes (local) or the broker's limits, or refused
    // by the broker's record validation (a timestamp given, older or newer
    // than the topic's message.timestamp.before.max.ms or after.max.ms
    // allow, included). Sending it again cannot help.
    case RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
      return absl::InvalidArgumentError(message);
    // The topic is gone. librdkafka reports it only after its own retries
    // (message.timeout.ms, or topic.metadata.propagation.max.ms for a topic
    // the metadata says does not exist).
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
      return absl::NotFoundError(message);
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
      return absl::PermissionDeniedError(message);
    case RD_KAFKA_RESP_ERR__FATAL:
      return absl::InternalError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace

std::optional<std::string> Producer::Property(const std::string& name) const {
  return ConfigValue(rk_.get(), name);
}

absl::StatusOr<std::unique_ptr<Producer>> Producer::Create(const ProducerOptions& options) {
  const Properties enforced = {
      {"enable.idempotence", "true"},
      {"acks", "all"},
      // Bounded by the engine's max_in_flight per thread; this is the backstop.
      {"queue.buffering.max.messages", "1000000"},
  };
  Properties user = options.properties;
  user.emplace("client.id", options.client_id);
  user.emplace("linger.ms", "5");
  user.emplace("topic.metadata.refresh.interval.ms", kDefaultMetadataRefreshMs);
  absl::StatusOr<ConfPtr> conf = MakeConf(options.bootstrap_servers, user, enforced);
  if (!conf.ok()) return conf.status();
  rd_kafka_conf_set_dr_msg_cb(conf->get(), [](rd_kafka_t* rk, const rd_kafka_message_t* m,
                                              void* opaque) { OnDelivery(rk, m, opaque); });
  std::unique_ptr<Producer> producer(new Producer());
  rd_kafka_conf_set_opaque(conf->get(), producer.get());
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_PRODUCER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  producer->rk_ = *std::move(rk);
  // The effective limit, whoever set it (librdkafka's default, or the
  // operator's properties), so records can be fitted under it.
  if (std::optional<std::string> value = ConfigValue(producer->rk_.get(), "message.max.bytes")) {
    int64_t max_bytes = 0;
    if (absl::SimpleAtoi(*value, &max_bytes) && max_bytes > 0) {
      producer->max_message_bytes_ = max_bytes;
    }
  }
  producer->delivery_thread_ = std::thread([p = producer.get()] { p->DeliveryLoop(); });
  return producer;
}

Producer::~Producer() { Close(absl::ZeroDuration()); }

void Producer::OnDelivery(rd_kafka_s* rk, const void* message, void* /*conf_opaque*/) {
  const auto* m = static_cast<const rd_kafka_message_t*>(message);
  // Every accepted record travels through librdkafka with its Delivery as
  // the message opaque.
  std::unique_ptr<Delivery> delivery(static_cast<Delivery*>(m->_private));
  auto* self = static_cast<Producer*>(rd_kafka_opaque(rk));
  absl::Status status;
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    // After a fatal error librdkafka purges what is queued and reports the
    // records with a purge or the broker's error; the callback must learn
    // that the producer itself is finished, not that one record failed.
    status = self->FatalError();
    if (status.ok()) {
      status = KafkaError(m->err, absl::StrCat("delivery to ", rd_kafka_topic_name(m->rkt)));
    }
  }
  const bool placed = status.ok();
  Delivery* d = delivery.get();
  d->Delivered(std::move(delivery), std::move(status), placed ? m->partition : -1,
               placed ? m->offset : -1);
  self->in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void Producer::DeliveryLoop() {
  SetThreadName("producer-dr");
  SetThreadComponent("kafka");
  while (!stop_.load(std::memory_order_acquire)) {
    // Blocks until a delivery report arrives or 100 ms pass (to see stop_).
    rd_kafka_poll(rk_.get(), 100);
  }
}

absl::Status Producer::Produce(const OutgoingRecord& record, DeliveryCallback done) {
  return Produce(record, PlacedCallback([done = std::move(done)](absl::Status status, int32_t,
                                                                 int64_t) mutable {
                   std::move(done)(std::move(status));
                 }));
}

absl::Status Producer::Produce(const OutgoingRecord& record, PlacedCallback done) {
  return EnqueueCallback(record, std::move(done), RD_KAFKA_MSG_F_COPY);
}

absl::Status Producer::ProduceInPlace(const OutgoingRecord& record, PlacedCallback done) {
  // Without RD_KAFKA_MSG_F_COPY (and without F_FREE) librdkafka points its
  // message at the value and never frees it. It reads it while building
  // requests (values above message.copy.max.bytes are referenced from the
  // request buffer rather than copied), and its own copy under F_COPY lives
  // exactly as long: until the message is destroyed right after its
  // delivery report, which reaches `done` first (OnDelivery).
  return EnqueueCallback(record, std::move(done), 0);
}

absl::Status Producer::ProduceInPlace(const OutgoingRecord& record,
                                      std::span<const HeaderRef> more_headers,
                                      std::unique_ptr<Delivery>& delivery) {
  return Enqueue(record, more_headers, delivery, 0);
}

absl::Status Producer::EnqueueCallback(const OutgoingRecord& record, PlacedCallback done,
                                       int value_flags) {
  std::unique_ptr<Delivery> delivery = std::make_unique<CallbackDelivery>(std::move(done));
  return Enqueue(record, {}, delivery, value_flags);
}

absl::Status Producer::Enqueue(const OutgoingRecord& record,
                               std::span<const HeaderRef> more_headers,
                               std::unique_ptr<Delivery>& delivery, int value_flags) {
  if (closed_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("producer is closed");
  }
  rd_kafka_headers_t* headers = rd_kafka_headers_new(record.headers.size() + more_headers.size());
  for (const Header& h : record.headers) {
    rd_kafka_header_add(headers, h.key.data(), static_cast<ssize_t>(h.key.size()),
                        h.value ? h.value->data() : nullptr, h.value ? h.value->size() : 0);
  }
  for (const HeaderRef& h : more_headers) {
    rd_kafka_header_add(headers, h.key.data(), static_cast<ssize_t>(h.key.size()),
                        h.value ? h.value->data() : nullptr, h.value ? h.value->size() : 0);
  }
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  // Null pointers make a null key or value, as Kafka distinguishes them from empty.
  const void* key = record.key ? record.key->data() : nullptr;
  const size_t key_size = record.key ? record.key->size() : 0;
  void* value = record.value ? const_cast<char*>(record.value->data()) : nullptr;
  const size_t value_size = record.value ? record.value->size() : 0;
  const int32_t partition = record.partition < 0 ? RD_KAFKA_PARTITION_UA : record.partition;
  const rd_kafka_resp_err_t err = rd_kafka_producev(
      rk_.get(), RD_KAFKA_V_TOPIC(record.topic.c_str()), RD_KAFKA_V_PARTITION(partition),
      RD_KAFKA_V_MSGFLAGS(value_flags), RD_KAFKA_V_KEY(key, key_size),
      RD_KAFKA_V_VALUE(value, value_size), RD_KAFKA_V_HEADERS(headers),
      RD_KAFKA_V_TIMESTAMP(std::max<int64_t>(record.timestamp_ms, 0)),
      RD_KAFKA_V_OPAQUE(delivery.get()), RD_KAFKA_V_END);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    rd_kafka_headers_destroy(headers);  // Not taken over on failure.
    if (err == RD_KAFKA_RESP_ERR__FATAL) return FatalError();
    return KafkaError(err, absl::StrCat("produce to ", record.topic));
  }
  delivery.release();  // Owned by librdkafka until OnDelivery.
  return absl::OkStatus();
}

absl::Status Producer::Flush(absl::Duration timeout) {
  const rd_kafka_resp_err_t err = rd_kafka_flush(rk_.get(), absl::ToInt64Milliseconds(timeout));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return KafkaError(err, "flush");
  return absl::OkStatus();
}

void Producer::Close(absl::Duration flush_timeout) {
  if (closed_.exchange(true) || rk_ == nullptr) return;
  if (absl::Status s = Flush(flush_timeout); !s.ok()) {
    LogWarning("producer close: ", s.message(), "; failing ", in_flight(),
               " unacknowledged records");
  }
  if (const rd_kafka_resp_err_t err =
          rd_kafka_purge(rk_.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    LogWarning("producer close: purge: ", rd_kafka_err2str(err));
  }
  stop_.store(true, std::memory_order_release);
  if (delivery_thread_.joinable()) delivery_thread_.join();
  // Serve the purge reports so every callback runs exactly once.
  for (int i = 0; i < 100 && in_flight() > 0; ++i) rd_kafka_poll(rk_.get(), 100);
  if (in_flight() > 0) LogError("producer close: ", in_flight(), " records never reported");
  rk_.reset();
}

absl::Status Producer::PrepareTopics(const std::vector<std::string>& topics,
                                     absl::Duration timeout) const {
  if (rk_ == nullptr || closed_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("producer is closed");
  }
  // One deadline for all of them: start-up waits `timeout` at most.
  const absl::Time deadline = absl::Now() + timeout;
  for (const std::string& topic : topics) {
    if (absl::StatusOr<int> partitions = PartitionCount(rk_.get(), topic, deadline - absl::Now());
        !partitions.ok()) {
      return partitions.status();
    }
  }
  return absl::OkStatus();
}

absl::Status Producer::FatalError() const {
  if (rk_ == nullptr) return absl::OkStatus();  // Closed: nothing more can fail.
  char errstr[512];
  const rd_kafka_resp_err_t err = rd_kafka_fatal_error(rk_.get(), errstr, sizeof(errstr));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("fatal producer error: ", errstr));
}

absl::Status Producer::RaiseFatalErrorForTest(std::string_view reason) {
  if (rk_ == nullptr || closed_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("producer is closed");
  }
  const std::string why(reason);
  const rd_kafka_resp_err_t err = rd_kafka_test_fatal_error(
      rk_.get(), RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, why.c_str());
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return KafkaError(err, "raising a fatal error");
  return absl::OkStatus();
}

}  // namespace retryd::kafka
