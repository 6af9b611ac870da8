// An idempotent, acks=all Kafka producer with per-record completion callbacks.
//
// Thread-safe: Produce() may be called from any number of threads at once.
// The producer owns one delivery thread that serves librdkafka's delivery
// reports and runs the callbacks; callbacks must not block.
#ifndef RETRYD_SERVER_KAFKA_PRODUCER_H_
#define RETRYD_SERVER_KAFKA_PRODUCER_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/kafka/handle.h"
#include "server/model/record.h"

namespace retryd::kafka {

struct ProducerOptions {
  std::string bootstrap_servers;
  std::map<std::string, std::string> properties;  // The operator's pass-through.
  std::string client_id = "retryd";
};

// Called exactly once per record that Produce() accepted: with OK once the
// record is acknowledged by all in-sync replicas, or with the error that made
// librdkafka give it up (including a purge at Close()).
//
// Errors, from Produce() or in the callback, are classified by code so the
// caller knows what it can do:
//   INVALID_ARGUMENT   this record, as it is, can never be produced (larger
//                      than message.max.bytes or the broker's limit, refused
//                      by the broker's record validation, its timestamp
//                      out of the topic's bounds): change it.
//   NOT_FOUND          the topic or partition does not exist, after
//   PERMISSION_DENIED  librdkafka's own retries; or producing to it is not
//                      authorized. Not about this record: every record to
//                      that topic fails the same way.
//   INTERNAL           a fatal producer error (FatalError()): the producer is
//                      unusable, nothing produced through it can succeed.
//   CANCELLED          purged (Close(), or the queue flushed after a fatal
//                      error: then the code is INTERNAL instead).
//   anything else      transient (timed out, queue full, broker down): worth
//                      sending again.
using DeliveryCallback = absl::AnyInvocable<void(absl::Status) &&>;
// The same, told where the record landed when acknowledged (else -1, -1).
using PlacedCallback = absl::AnyInvocable<void(absl::Status, int32_t partition, int64_t offset) &&>;

// A header given by reference, appended after a record's own: librdkafka
// copies it before Produce...() returns.
struct HeaderRef {
  std::string_view key;
  std::optional<std::string_view> value;  // nullopt: a null value.
};

// One accepted record's delivery: what the caller keeps for the report and
// what the report does, in one object the producer owns from an accepted
// ProduceInPlace() until the report (one allocation per record, where a
// callback would need one for itself and one for what it holds).
class Delivery {
 public:
  virtual ~Delivery() = default;
  // Called exactly once, on the delivery thread, as a PlacedCallback is;
  // `self` is this delivery, handed back: destroy it or keep it.
  virtual void Delivered(std::unique_ptr<Delivery> self, absl::Status status, int32_t partition,
                         int64_t offset) = 0;
};

class Producer {
 public:
  static absl::StatusOr<std::unique_ptr<Producer>> Create(const ProducerOptions& options);
  ~Producer();  // Close()s with no flush time if the owner did not.

  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Enqueues `record` (its bytes are copied). On error the record was not
  // accepted and `done` is not called.
  absl::Status Produce(const OutgoingRecord& record, DeliveryCallback done);
  absl::Status Produce(const OutgoingRecord& record, PlacedCallback done);
  // The same, but librdkafka reads the value in place instead of copying
  // it, so a caller that keeps the record anyway (to send it again) does not
  // hold it twice. The caller must keep `record.value` alive and unchanged
  // until `done` has been called (e.g. by letting `done` own the record):
  // librdkafka reads it until the delivery report, never after, exactly as
  // long as it would keep its own copy. On error nothing was taken.
  absl::Status ProduceInPlace(const OutgoingRecord& record, PlacedCallback done);
  // The same, with `more_headers` after the record's own (copied, as
  // headers always are) and the report going to `delivery`, which must own
  // `record.value` as `done` would. On OK the producer took `delivery` (it
  // is null); on an error it is left with the caller, nothing taken.
  absl::Status ProduceInPlace(const OutgoingRecord& record, std::span<const HeaderRef> more_headers,
                              std::unique_ptr<Delivery>& delivery);

  // Waits until every accepted record is acknowledged or `timeout` passes.
  absl::Status Flush(absl::Duration timeout);

  // Flushes for up to `flush_timeout`, fails what is left (their callbacks
  // run with an error) and stops the delivery thread. Idempotent. The owner
  // must make sure no Produce() call runs concurrently with or after it.
  void Close(absl::Duration flush_timeout);

  // The client's configuration property `name` as in effect (defaults
  // included); nullopt if librdkafka has no such property. Not after Close().
  std::optional<std::string> Property(const std::string& name) const;

  // Records accepted and not yet reported.
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

  // Fetches the metadata of `topics` now. Without it, the first record to a
  // topic waits for librdkafka's once-a-second scan of unknown topics. Blocks
  // the caller up to `timeout` in all. Not concurrently with or after Close().
  absl::Status PrepareTopics(const std::vector<std::string>& topics, absl::Duration timeout) const;

  // A fatal producer error (e.g. the idempotent sequence is broken) as an
  // INTERNAL error, or OK. Once set it stays.
  absl::Status FatalError() const;

  // TEST ONLY: raises a fatal error on this producer as a broken idempotent
  // sequence would (librdkafka's rd_kafka_test_fatal_error: its reason
  // starts "test_fatal_error: "), so that tests see the recovery from one
  // engaged; nothing else can bring one about on purpose. Production code
  // must not call it.
  absl::Status RaiseFatalErrorForTest(std::string_view reason);

  // The effective message.max.bytes: librdkafka refuses (INVALID_ARGUMENT) a
  // record whose key, value and headers, with per-record framing, exceed it.
  int64_t max_message_bytes() const { return max_message_bytes_; }

 private:
  Producer() = default;
  void DeliveryLoop();
  static void OnDelivery(rd_kafka_s* rk, const void* message, void* opaque);
  // `value_flags`: RD_KAFKA_MSG_F_COPY, or 0 for the value read in place.
  // Takes `delivery` on OK only.
  absl::Status Enqueue(const OutgoingRecord& record, std::span<const HeaderRef> more_headers,
                       std::unique_ptr<Delivery>& delivery, int value_flags);
  absl::Status EnqueueCallback(const OutgoingRecord& record, PlacedCallback done, int value_flags);

  HandlePtr rk_;  // Set once by Create(), destroyed in Close().
  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> in_flight_{0};
  int64_t max_message_bytes_ = 1000000;  // librdkafka's default; set once by Create().
  std::thread delivery_thread_;
};

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_PRODUCER_H_
