// A Kafka group consumer that hands out records one at a time, never commits
// on its own, and reports assignment changes to a listener.
//
// Thread-compatible: every method, and every listener callback, runs on the
// one thread that owns the consumer (its worker).
#ifndef RETRYD_SERVER_KAFKA_CONSUMER_H_
#define RETRYD_SERVER_KAFKA_CONSUMER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/log_throttle.h"
#include "server/kafka/handle.h"
#include "server/model/record.h"

struct rd_kafka_message_s;               // rd_kafka_message_t
struct rd_kafka_queue_s;                 // rd_kafka_queue_t
struct rd_kafka_topic_partition_list_s;  // rd_kafka_topic_partition_list_t

namespace retryd::kafka {

// A partition's offset as the group commits it: the next offset to read,
// and a small string Kafka keeps beside it (offset-commit metadata; at most
// the broker's offset.metadata.max.bytes, 4096 by default). A commit
// replaces both, so whoever commits must send the metadata again each time.
struct PartitionOffset {
  TopicPartition tp;
  int64_t offset = -1;
  std::string metadata;
};
using CommitOffsets = std::vector<PartitionOffset>;

class ConsumerListener {
 public:
  virtual ~ConsumerListener() = default;
  // `partitions` were just assigned to this consumer.
  virtual void OnAssigned(const std::vector<TopicPartition>& partitions) = 0;
  // `partitions` are about to be given up: finish or abandon their work and
  // commit now. `lost`: the group already gave them to someone else, so a
  // commit would fail and must not be attempted.
  virtual void OnRevoked(const std::vector<TopicPartition>& partitions, bool lost) = 0;
  // An asynchronous commit of `offsets` failed (reported inside Poll());
  // they should be committed again.
  virtual void OnCommitFailed(const CommitOffsets& offsets) = 0;
};

struct ConsumerOptions {
  std::string bootstrap_servers;
  std::map<std::string, std::string> properties;  // The operator's pass-through.
  std::string group_id;
  std::vector<std::string> topics;
  std::string client_id = "retryd";
};

class Consumer {
 public:
  // fetch.wait.max.ms unless the operator's properties set it (see Create).
  static constexpr std::string_view kDefaultFetchWaitMs = "100";

  // Creates the consumer and subscribes. `listener` must outlive it.
  static absl::StatusOr<std::unique_ptr<Consumer>> Create(const ConsumerOptions& options,
                                                          ConsumerListener* listener);
  // Abandons the group membership if Close() was not called.
  ~Consumer();

  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Waits up to `timeout` for the next record and reads it into `record`
  // (every field set), writing over the buffers `record` holds rather than
  // allocating new ones; false if none came (`record` then unspecified).
  // Listener callbacks run inside. Errors are only fatal ones; transient
  // broker trouble is logged and retried by librdkafka.
  //
  // A partition never goes back on its own: when librdkafka resets one to
  // an offset before the next one to hand out (auto.offset.reset after an
  // OFFSET_OUT_OF_RANGE fetch, which a stale leader answers: librdkafka
  // 2.0.2 has no leader-epoch check) while the partition's log reaches
  // that next offset, the record is dropped and the partition sought back
  // there, logged; nothing is read twice. If the log ends before it (the
  // log was truncated), the reset stands.
  absl::StatusOr<bool> Poll(absl::Duration timeout, Record& record);

  // Commits `offsets` (the next offset to read, per partition, with its
  // metadata).
  absl::Status Commit(const CommitOffsets& offsets, bool async);

  // What the group has committed for `partitions` (offset -1 and empty
  // metadata where nothing is). Blocks up to `timeout`.
  absl::StatusOr<CommitOffsets> Committed(const std::vector<TopicPartition>& partitions,
                                          absl::Duration timeout);

  // Commits `offsets` and waits for the broker's answer until `deadline`:
  // DEADLINE_EXCEEDED (naming how many partitions) if none came by then.
  // A synchronous Commit() would wait for as long as the group coordinator
  // cannot be reached.
  absl::Status CommitWithin(const CommitOffsets& offsets, absl::Time deadline);

  // Makes each of `to`'s partitions (assigned ones, each with an offset)
  // hand out records from its offset on, as if just assigned there: what
  // was fetched beyond is dropped, and a pause in force stays. Waits up to
  // `timeout` for librdkafka to take it.
  absl::Status Seek(const CommitOffsets& to, absl::Duration timeout);

  // Stops / restarts fetching. Records not yet handed out by Poll() are
  // fetched again after Resume(), from the last one handed out.
  absl::Status Pause(const std::vector<TopicPartition>& partitions);
  absl::Status Resume(const std::vector<TopicPartition>& partitions);

  // Records behind the high watermark, summed over `partitions`, from the
  // offsets the last fetches reported (no broker round trip). A partition
  // counts from the last record handed out; one that has handed out none
  // since it was assigned counts from its PartitionOffset's offset (where
  // its reading began, as the caller knows it: its committed offset), and
  // not at all if that is unknown (-1): librdkafka knows no position for
  // it, and its log start would count records committed long ago.
  // `by_topic`, if given, gets the same sum by topic (each topic of
  // `partitions` present).
  int64_t Lag(const std::vector<PartitionOffset>& partitions,
              std::map<std::string, int64_t>* by_topic = nullptr);

  // The member id the group's coordinator gave this client; empty until it
  // has joined. Not after Close() or Abandon().
  std::string MemberId() const;

  // Leaves the group: the listener's OnRevoked runs first (inside). Returns
  // by `deadline` (give OnRevoked's own wait a moment less), whatever
  // librdkafka does: if the group is not left by then (the broker
  // unreachable), or librdkafka does not take the unassignment that ends
  // the revoke (its rd_kafka_assign() waits for its group handler without
  // a bound), returns DEADLINE_EXCEEDED saying which, and leaves the client
  // to librdkafka without waiting for it (its threads live on). Its
  // destruction, once closed, is bounded by `deadline` too (a second at
  // least). Idempotent.
  absl::Status Close(absl::Time deadline);

  // Destroys the client without committing or leaving the group, as a crash
  // would. For tests of crash recovery and for fatal errors.
  void Abandon();

  // The client's configuration property `name` as in effect (defaults
  // included); nullopt if librdkafka has no such property. Not after
  // Close() or Abandon().
  std::optional<std::string> Property(const std::string& name) const;

  // Makes a Poll() in progress return at once (with no record), or the next
  // one if none is. Thread-safe, the one method that is; callable until
  // Close() or Abandon() begins, which the caller must order after its last
  // Wake() (e.g. under a mutex it shares with the waking thread).
  void Wake();

 private:
  Consumer(ConsumerListener* listener) : listener_(listener) {}
  static void OnRebalance(rd_kafka_s* rk, int err, void* partitions, void* opaque);
  // rd_kafka_(incremental_)(un)assign() of `partitions` (null: unassign
  // all) from a rebalance callback; while Close() runs, bounded by its
  // deadline (CallWithin), after which the client is wedged.
  enum class Reassignment { kAssign, kUnassign };
  absl::Status Reassign(Reassignment what, const rd_kafka_topic_partition_list_s* partitions);
  void AbandonWithin(absl::Time deadline);
  static void OnCommitted(rd_kafka_s* rk, int err, void* offsets, void* opaque);

  ConsumerListener* const listener_;
  // Set once by Create(); null once Close() or Abandon() let go of it.
  HandlePtr rk_;
  // The queue Poll() waits on, held for Wake(); released before rk_ goes.
  rd_kafka_queue_s* poll_queue_ = nullptr;
  // From the configured assignors, set by Create(): asking librdkafka
  // (rd_kafka_rebalance_protocol()) from a rebalance callback during a
  // close may never return (librdkafka issue 4041).
  bool cooperative_ = false;
  // Close()'s deadline while it runs; InfiniteFuture before.
  absl::Time close_deadline_ = absl::InfiniteFuture();
  // A librdkafka call of the close never returned: the client must never
  // be destroyed (a thread of CallWithin still uses it).
  bool wedged_ = false;
  void ReleasePollQueue();
  // A rebalance fails every commit in flight at once: one line a second.
  LogThrottle commit_failure_log_{absl::Seconds(1)};

  // Whether `m` (a record) comes from before its partition's next offset to
  // hand out, where librdkafka's offset reset took it, and the partition
  // was sought back there: then the record must be dropped. Records the
  // next offset otherwise.
  bool UndoneReset(const rd_kafka_message_s& m);
  // Forgets the next offsets of `partitions` (assigned, revoked, sought).
  void ForgetNextOffsets(const std::vector<TopicPartition>& partitions);
  // Per topic and partition: the next offset to hand out, from the last
  // record handed out or, before the first, the committed offset that
  // Committed() read at the assignment (where librdkafka starts). Forgotten
  // at an assignment, a revoke and a seek.
  absl::flat_hash_map<std::string, absl::flat_hash_map<int32_t, int64_t>> next_offsets_;
  // The topic of the last record UndoneReset saw (librdkafka's topic object)
  // and its entry of next_offsets_; reset where next_offsets_ may rehash.
  const void* last_topic_ = nullptr;
  absl::flat_hash_map<int32_t, int64_t>* last_topic_offsets_ = nullptr;
  LogThrottle reset_log_{absl::Seconds(1)};
};

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_CONSUMER_H_
