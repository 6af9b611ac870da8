#include "server/kafka/consumer.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/logging.h"
#include "server/kafka/message.h"
#include "server/kafka/properties.h"

namespace retryd::kafka {
namespace {

struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* list) const {
    rd_kafka_topic_partition_list_destroy(list);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

struct QueueDeleter {
  void operator()(rd_kafka_queue_t* queue) const { rd_kafka_queue_destroy(queue); }
};
using QueuePtr = std::unique_ptr<rd_kafka_queue_t, QueueDeleter>;

struct EventDeleter {
  void operator()(rd_kafka_event_t* event) const { rd_kafka_event_destroy(event); }
};
using EventPtr = std::unique_ptr<rd_kafka_event_t, EventDeleter>;

// What a client's destruction gets at least, its deadline passed or not
// (a closed consumer's takes a few milliseconds); and an abandoned one's,
// with no deadline of its caller's.
constexpr absl::Duration kMinDestroyWait = absl::Seconds(1);
constexpr absl::Duration kAbandonWait = absl::Seconds(5);
// What an unassignment during a close gets at least (it takes milliseconds).
constexpr absl::Duration kMinReassignWait = absl::Milliseconds(500);

// A queue poll's timeout: what is left until `deadline`, in short slices.
int PollSliceMs(absl::Time deadline) {
  const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
  return static_cast<int>(std::clamp<int64_t>(left, 1, 100));
}

ListPtr ToList(const std::vector<TopicPartition>& partitions) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size())));
  for (const TopicPartition& tp : partitions) {
    rd_kafka_topic_partition_list_add(list.get(), tp.topic.c_str(), tp.partition);
  }
  return list;
}

std::vector<TopicPartition> FromList(const rd_kafka_topic_partition_list_t* list) {
  std::vector<TopicPartition> out;
  out.reserve(list->cnt);
  for (int i = 0; i < list->cnt; ++i) {
    out.push_back({list->elems[i].topic, list->elems[i].partition});
  }
  return out;
}

absl::Status ErrorStatus(rd_kafka_resp_err_t err, absl::string_view what) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(what, ": ", rd_kafka_err2str(err)));
}

absl::Status ErrorStatus(rd_kafka_error_t* error, absl::string_view what) {
  if (error == nullptr) return absl::OkStatus();
  absl::Status status =
      absl::UnavailableError(absl::StrCat(what, ": ", rd_kafka_error_string(error)));
  rd_kafka_error_destroy(error);
  return status;
}

// `offsets` as librdkafka's list, metadata included.
ListPtr ToCommitList(const CommitOffsets& offsets) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const PartitionOffset& o : offsets) {
    rd_kafka_topic_partition_t* p =
        rd_kafka_topic_partition_list_add(list.get(), o.tp.topic.c_str(), o.tp.partition);
    p->offset = o.offset;
    if (!o.metadata.empty()) {
      // The list frees it with free().
      p->metadata = std::malloc(o.metadata.size());
      std::memcpy(p->metadata, o.metadata.data(), o.metadata.size());
      p->metadata_size = o.metadata.size();
    }
  }
  return list;
}

std::string MetadataOf(const rd_kafka_topic_partition_t& p) {
  if (p.metadata == nullptr) return "";
  return std::string(static_cast<const char*>(p.metadata), p.metadata_size);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(const ConsumerOptions& options,
                                                           ConsumerListener* listener) {
  const Properties enforced = {
      {"group.id", options.group_id},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"enable.partition.eof", "false"},
  };
  Properties user = options.properties;
  user.emplace("client.id", options.client_id);
  // A new group starts at the beginning: nothing produced before it first
  // joined is skipped.
  user.emplace("auto.offset.reset", "earliest");
  // A partition resumed (after a full look-ahead, a back-pressure pause)
  // is fetched again only with the next fetch request to its broker, which
  // waits this long when the broker's other partitions are idle: 100 ms
  // rather than librdkafka's 500 bounds that gap, at the price of up to ten
  // fetches a second from an idle consumer instead of two.
  user.emplace("fetch.wait.max.ms", std::string(kDefaultFetchWaitMs));
  user.emplace("topic.metadata.refresh.interval.ms", kDefaultMetadataRefreshMs);
  absl::StatusOr<ConfPtr> conf = MakeConf(options.bootstrap_servers, user, enforced);
  if (!conf.ok()) return conf.status();
  std::unique_ptr<Consumer> consumer(new Consumer(listener));
  rd_kafka_conf_set_opaque(conf->get(), consumer.get());
  rd_kafka_conf_set_rebalance_cb(
      conf->get(),
      [](rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions,
         void* opaque) { OnRebalance(rk, err, partitions, opaque); });
  rd_kafka_conf_set_offset_commit_cb(
      conf->get(),
      [](rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* offsets,
         void* opaque) { OnCommitted(rk, err, offsets, opaque); });
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_CONSUMER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  consumer->rk_ = *std::move(rk);
  // Every assignor of a client has the same protocol (librdkafka refuses a
  // mix), cooperative only for cooperative-sticky.
  consumer->cooperative_ = absl::StrContains(
      consumer->Property("partition.assignment.strategy").value_or(""), "cooperative");
  rd_kafka_poll_set_consumer(consumer->rk_.get());
  consumer->poll_queue_ = rd_kafka_queue_get_consumer(consumer->rk_.get());
  std::vector<TopicPartition> subscription;
  for (const std::string& topic : options.topics)
    subscription.push_back({topic, RD_KAFKA_PARTITION_UA});
  ListPtr topics = ToList(subscription);
  if (absl::Status s =
          ErrorStatus(rd_kafka_subscribe(consumer->rk_.get(), topics.get()), "subscribe");
      !s.ok()) {
    return s;
  }
  return consumer;
}

std::optional<std::string> Consumer::Property(const std::string& name) const {
  return ConfigValue(rk_.get(), name);
}

Consumer::~Consumer() {
  if (rk_ != nullptr) {
    LogWarning("consumer destroyed without Close(): leaving without commit");
    Abandon();
  }
}

void Consumer::OnRebalance(rd_kafka_s* rk, int err_int, void* partitions_ptr, void* opaque) {
  auto* self = static_cast<Consumer*>(opaque);
  auto err = static_cast<rd_kafka_resp_err_t>(err_int);
  auto* partitions = static_cast<rd_kafka_topic_partition_list_t*>(partitions_ptr);
  const std::vector<TopicPartition> tps = FromList(partitions);
  self->ForgetNextOffsets(tps);
  absl::Status status;
  switch (err) {
    case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
      status = self->Reassign(Reassignment::kAssign, partitions);
      if (status.ok()) self->listener_->OnAssigned(tps);
      break;
    case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
      self->listener_->OnRevoked(tps, rd_kafka_assignment_lost(rk) != 0);
      status = self->Reassign(Reassignment::kUnassign, partitions);
      break;
    default:
      // A failed rebalance: give everything up without committing.
      LogError(rd_kafka_name(rk), ": rebalance failed: ", rd_kafka_err2str(err));
      self->listener_->OnRevoked(tps, /*lost=*/true);
      status = self->Reassign(Reassignment::kUnassign, nullptr);
      break;
  }
  if (!status.ok()) LogError(rd_kafka_name(rk), ": ", status.message());
}

absl::Status Consumer::Reassign(Reassignment what,
                                const rd_kafka_topic_partition_list_t* partitions) {
  // Cooperative: the partitions given or taken; eager: the whole assignment
  // (none to unassign).
  auto call = [cooperative = cooperative_, what](rd_kafka_t* rk,
                                                 const rd_kafka_topic_partition_list_t* tps) {
    if (cooperative && tps != nullptr) {
      return what == Reassignment::kAssign
                 ? ErrorStatus(rd_kafka_incremental_assign(rk, tps), "assign")
                 : ErrorStatus(rd_kafka_incremental_unassign(rk, tps), "unassign");
    }
    return what == Reassignment::kAssign ? ErrorStatus(rd_kafka_assign(rk, tps), "assign")
                                         : ErrorStatus(rd_kafka_assign(rk, nullptr), "unassign");
  };
  if (close_deadline_ == absl::InfiniteFuture()) return call(rk_.get(), partitions);
  // Closing: rd_kafka_assign() waits for librdkafka's group handler without
  // a bound, and a handler that terminates meanwhile never answers
  // (librdkafka issues 4041, 4884); the close must still end by its
  // deadline. The call gets a copy of what it uses, as it may outlive us.
  // A revoke that overran the deadline still gives it a moment: given up,
  // the group waits a whole session for this member.
  auto result = std::make_shared<absl::Status>();
  ListPtr copy(partitions != nullptr ? rd_kafka_topic_partition_list_copy(partitions) : nullptr);
  if (CallWithin(std::max(close_deadline_, absl::Now() + kMinReassignWait),
                 [call, rk = rk_.get(), copy = std::move(copy), result]() mutable {
                   *result = call(rk, copy.get());
                 })) {
    return *result;
  }
  wedged_ = true;
  return absl::DeadlineExceededError(absl::StrCat(
      "librdkafka did not take the ", what == Reassignment::kAssign ? "assignment" : "unassignment",
      " of ", partitions != nullptr ? partitions->cnt : 0,
      " partitions before the close's deadline; abandoning the consumer (the group reassigns its "
      "partitions once its session times out)"));
}

void Consumer::OnCommitted(rd_kafka_s* rk, int err_int, void* offsets_ptr, void* opaque) {
  auto err = static_cast<rd_kafka_resp_err_t>(err_int);
  auto* offsets = static_cast<rd_kafka_topic_partition_list_t*>(offsets_ptr);
  if (err == RD_KAFKA_RESP_ERR__NO_OFFSET || offsets == nullptr) return;
  CommitOffsets failed;
  for (int i = 0; i < offsets->cnt; ++i) {
    const rd_kafka_topic_partition_t& p = offsets->elems[i];
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR || p.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      failed.push_back({{p.topic, p.partition}, p.offset, MetadataOf(p)});
    }
  }
  if (failed.empty()) return;
  auto* self = static_cast<Consumer*>(opaque);
  if (int64_t held_back = 0; self->commit_failure_log_.Allow(absl::Now(), &held_back)) {
    LogWarning(rd_kafka_name(rk), ": offset commit failed for ", failed.size(), " partitions: ",
               rd_kafka_err2str(err != RD_KAFKA_RESP_ERR_NO_ERROR ? err : offsets->elems[0].err),
               "; committing again", LogThrottle::HeldBackNote(held_back));
  }
  self->listener_->OnCommitFailed(failed);
}

absl::StatusOr<bool> Consumer::Poll(absl::Duration timeout, Record& record) {
  rd_kafka_message_t* m =
      rd_kafka_consumer_poll(rk_.get(), static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (m == nullptr) return false;
  std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> owned(
      m, rd_kafka_message_destroy);
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (UndoneReset(*m)) return false;
    ToRecord(m, record);
    return true;
  }
  char errstr[512];
  if (rd_kafka_fatal_error(rk_.get(), errstr, sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InternalError(absl::StrCat("fatal consumer error: ", errstr));
  }
  switch (m->err) {
    case RD_KAFKA_RESP_ERR__PARTITION_EOF:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
      break;
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
      LogError(rd_kafka_name(rk_.get()), ": ", rd_kafka_message_errstr(m));
      break;
    default:
      LogWarning(rd_kafka_name(rk_.get()), ": ", rd_kafka_message_errstr(m));
      break;
  }
  return false;
}

absl::Status Consumer::Commit(const CommitOffsets& offsets, bool async) {
  if (offsets.empty()) return absl::OkStatus();
  ListPtr list = ToCommitList(offsets);
  rd_kafka_resp_err_t err = rd_kafka_commit(rk_.get(), list.get(), async ? 1 : 0);
  if (!async && err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    // A synchronous commit also reports per-partition errors.
    for (int i = 0; i < list->cnt; ++i) {
      if (list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        err = list->elems[i].err;
        break;
      }
    }
  }
  return ErrorStatus(err, "commit");
}

absl::StatusOr<CommitOffsets> Consumer::Committed(const std::vector<TopicPartition>& partitions,
                                                  absl::Duration timeout) {
  CommitOffsets out;
  if (partitions.empty()) return out;
  ListPtr list = ToList(partitions);
  const rd_kafka_resp_err_t err = rd_kafka_committed(
      rk_.get(), list.get(),
      static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return ErrorStatus(err, "committed offsets");
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& p = list->elems[i];
    if (p.err != RD_KAFKA_RESP_ERR_NO_ERROR) return ErrorStatus(p.err, "committed offset");
    out.push_back({{p.topic, p.partition}, p.offset >= 0 ? p.offset : -1, MetadataOf(p)});
    // Where librdkafka starts the partition, if nothing was handed out yet.
    if (p.offset >= 0) {
      next_offsets_[p.topic].try_emplace(p.partition, p.offset);
      last_topic_ = nullptr;  // The map may have moved its values.
    }
  }
  return out;
}

absl::Status Consumer::CommitWithin(const CommitOffsets& offsets, absl::Time deadline) {
  if (offsets.empty()) return absl::OkStatus();
  ListPtr list = ToCommitList(offsets);
  // The answer comes to a queue of our own, waited on only until `deadline`;
  // destroying the queue disowns an answer that comes later.
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_resp_err_t err =
      rd_kafka_commit_queue(rk_.get(), list.get(), queue.get(), nullptr, nullptr);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return ErrorStatus(err, "commit");
  while (absl::Now() < deadline) {
    EventPtr event(rd_kafka_queue_poll(queue.get(), PollSliceMs(deadline)));
    if (event == nullptr || rd_kafka_event_type(event.get()) != RD_KAFKA_EVENT_OFFSET_COMMIT) {
      continue;
    }
    err = rd_kafka_event_error(event.get());
    if (const rd_kafka_topic_partition_list_t* committed =
            rd_kafka_event_topic_partition_list(event.get());
        err == RD_KAFKA_RESP_ERR_NO_ERROR && committed != nullptr) {
      for (int i = 0; i < committed->cnt; ++i) {
        if (committed->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
          err = committed->elems[i].err;
          break;
        }
      }
    }
    return ErrorStatus(err, "commit");
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "commit of ", offsets.size(), " partition", offsets.size() == 1 ? "" : "s",
      " not confirmed in time; records after the last confirmed commit will be processed again"));
}

bool Consumer::UndoneReset(const rd_kafka_message_t& m) {
  const char* topic = rd_kafka_topic_name(m.rkt);
  // Records come in runs of one topic: its partitions' map is looked up by
  // name only when the topic changes.
  if (m.rkt != last_topic_) {
    auto by_topic = next_offsets_.find(absl::string_view(topic));
    if (by_topic == next_offsets_.end()) by_topic = next_offsets_.try_emplace(topic).first;
    last_topic_ = m.rkt;
    last_topic_offsets_ = &by_topic->second;
  }
  const auto [it, first] = last_topic_offsets_->try_emplace(m.partition, m.offset + 1);
  if (first) return false;
  const int64_t next = it->second;
  if (m.offset >= next) {
    it->second = m.offset + 1;
    return false;
  }
  // librdkafka went back on its own: an offset reset. If the partition's
  // log (as the fetch that brought this record saw it) reaches `next`, the
  // records from there on exist: read on from there.
  int64_t low = -1, high = -1;
  (void)rd_kafka_get_watermark_offsets(rk_.get(), topic, m.partition, &low, &high);
  int64_t held_back = 0;
  const bool log = reset_log_.Allow(absl::Now(), &held_back);
  if (high < next) {
    if (log) {
      LogWarning(rd_kafka_name(rk_.get()), ": ", topic, "/", m.partition,
                 ": librdkafka reset the partition from offset ", next, " to ", m.offset,
                 " and its log ends at ", high,
                 ": records up to there are read again (the log was truncated)",
                 LogThrottle::HeldBackNote(held_back));
    }
    it->second = m.offset + 1;
    return false;
  }
  ListPtr list(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(list.get(), topic, m.partition)->offset = next;
  rd_kafka_error_t* error = rd_kafka_seek_partitions(rk_.get(), list.get(), 5000);
  if (error == nullptr && list->elems[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    error = rd_kafka_error_new(list->elems[0].err, "%s", rd_kafka_err2str(list->elems[0].err));
  }
  if (error != nullptr) {
    LogWarning(rd_kafka_name(rk_.get()), ": ", topic, "/", m.partition,
               ": librdkafka reset the partition from offset ", next, " to ", m.offset,
               ", and seeking back failed (", rd_kafka_error_string(error),
               "): records up to there are read again");
    rd_kafka_error_destroy(error);
    it->second = m.offset + 1;
    return false;
  }
  if (log) {
    LogWarning(rd_kafka_name(rk_.get()), ": ", topic, "/", m.partition,
               ": librdkafka reset the partition from offset ", next, " to ", m.offset,
               " (an out-of-range fetch, as a stale leader answers after a broker pause); its log "
               "reaches ",
               high, ", so reading goes on from ", next, " and nothing is read twice",
               LogThrottle::HeldBackNote(held_back));
  }
  return true;
}

void Consumer::ForgetNextOffsets(const std::vector<TopicPartition>& partitions) {
  for (const TopicPartition& tp : partitions) {
    auto by_topic = next_offsets_.find(tp.topic);
    if (by_topic != next_offsets_.end()) by_topic->second.erase(tp.partition);
  }
}

absl::Status Consumer::Seek(const CommitOffsets& to, absl::Duration timeout) {
  if (to.empty()) return absl::OkStatus();
  std::vector<TopicPartition> sought;
  sought.reserve(to.size());
  for (const PartitionOffset& o : to) sought.push_back(o.tp);
  ForgetNextOffsets(sought);
  ListPtr list = ToCommitList(to);
  // librdkafka 2.0.2 forgets the last offset handed out at a seek (its
  // #3567), so a Resume() after it goes on from the seek, not from there.
  absl::Status status =
      ErrorStatus(rd_kafka_seek_partitions(rk_.get(), list.get(),
                                           static_cast<int>(absl::ToInt64Milliseconds(timeout))),
                  "seek");
  if (!status.ok()) return status;
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& p = list->elems[i];
    if (p.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return ErrorStatus(p.err, absl::StrCat("seek of ", p.topic, "/", p.partition));
    }
  }
  return absl::OkStatus();
}

absl::Status Consumer::Pause(const std::vector<TopicPartition>& partitions) {
  ListPtr list = ToList(partitions);
  return ErrorStatus(rd_kafka_pause_partitions(rk_.get(), list.get()), "pause");
}

absl::Status Consumer::Resume(const std::vector<TopicPartition>& partitions) {
  ListPtr list = ToList(partitions);
  return ErrorStatus(rd_kafka_resume_partitions(rk_.get(), list.get()), "resume");
}

std::string Consumer::MemberId() const {
  char* id = rd_kafka_memberid(rk_.get());
  if (id == nullptr) return std::string();
  std::string out(id);
  rd_kafka_mem_free(rk_.get(), id);
  return out;
}

int64_t Consumer::Lag(const std::vector<PartitionOffset>& partitions,
                      std::map<std::string, int64_t>* by_topic) {
  if (by_topic != nullptr) {
    by_topic->clear();
    for (const PartitionOffset& p : partitions) (*by_topic)[p.tp.topic];
  }
  if (partitions.empty()) return 0;
  // rd_kafka_position overwrites every offset; the caller's stay in `partitions`.
  ListPtr list = ToCommitList(partitions);
  if (rd_kafka_position(rk_.get(), list.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) return 0;
  int64_t lag = 0;
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& p = list->elems[i];
    // rd_kafka_position keeps the list's order.
    const int64_t position = p.offset >= 0 ? p.offset : partitions[i].offset;
    int64_t low = -1, high = -1;
    if (position < 0 ||
        rd_kafka_get_watermark_offsets(rk_.get(), p.topic, p.partition, &low, &high) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        high < 0) {
      continue;
    }
    const int64_t from = std::max(position, low);
    if (high <= from) continue;
    lag += high - from;
    if (by_topic != nullptr) (*by_topic)[p.topic] += high - from;
  }
  return lag;
}

void Consumer::Wake() {
  if (poll_queue_ != nullptr) rd_kafka_queue_yield(poll_queue_);
}

void Consumer::ReleasePollQueue() {
  if (poll_queue_ == nullptr) return;
  rd_kafka_queue_destroy(poll_queue_);
  poll_queue_ = nullptr;
}

absl::Status Consumer::Close(absl::Time deadline) {
  if (rk_ == nullptr) return absl::OkStatus();
  ReleasePollQueue();
  close_deadline_ = deadline;
  // rd_kafka_consumer_close() would block until the group is left, which
  // with the coordinator unreachable takes session.timeout.ms or longer.
  // The asynchronous close posts the rebalance (OnRevoked) to `queue`,
  // served here until the consumer is closed or `deadline` passes.
  absl::Status status;
  {
    QueuePtr queue(rd_kafka_queue_new(rk_.get()));
    status = ErrorStatus(rd_kafka_consumer_close_queue(rk_.get(), queue.get()), "close");
    while (status.ok() && !rd_kafka_consumer_closed(rk_.get())) {
      if (wedged_) {
        status = absl::DeadlineExceededError(
            "librdkafka did not take the unassignment that ends the revoke; abandoning the "
            "consumer");
        break;
      }
      if (absl::Now() >= deadline) {
        status = absl::DeadlineExceededError(
            "could not leave the consumer group in time; abandoning the consumer (the group "
            "reassigns its partitions once its session times out)");
        break;
      }
      // Serves callbacks the way a consumer poll does; a record it hands out
      // is not ours any more (the next owner reads it again).
      if (rd_kafka_message_t* m = rd_kafka_consume_queue(queue.get(), PollSliceMs(deadline))) {
        rd_kafka_message_destroy(m);
      }
    }
  }
  if (absl::IsDeadlineExceeded(status)) {
    // Left to librdkafka, not destroyed: rd_kafka_destroy() waits for the
    // group to terminate, which with a commit or a leave still waiting for
    // the coordinator lasts until session.timeout.ms after the close began
    // (45 s by default), far past any stop deadline, and forever while a
    // call of ours still waits inside (wedged_). Its threads are the price,
    // paid only when a stop meets an unresponsive broker or librdkafka: the
    // handle is abandoned on purpose, never destroyed.
    AbandonHandle(std::move(rk_));
    return status;
  }
  if (!status.ok()) {
    AbandonWithin(std::max(deadline, absl::Now() + kMinDestroyWait));
    return status;
  }
  // Closed: destroying it no longer waits for the group, only for its
  // threads, which is bounded all the same.
  if (!DestroyWithin(std::move(rk_), std::max(deadline, absl::Now() + kMinDestroyWait))) {
    return absl::DeadlineExceededError(
        "left the consumer group, but the client's threads did not end in time; left behind");
  }
  return status;
}

void Consumer::Abandon() { AbandonWithin(absl::Now() + kAbandonWait); }

void Consumer::AbandonWithin(absl::Time deadline) {
  if (rk_ == nullptr) return;
  ReleasePollQueue();
  // Not HandleDeleter's rd_kafka_destroy(), which would close the consumer.
  // Even so it waits for the group handler to terminate, which waits for
  // commits in flight: bounded.
  if (!DestroyWithin(std::move(rk_), deadline, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE)) {
    LogWarning("consumer abandoned: the client's threads did not end in time; left behind");
  }
}

}  // namespace retryd::kafka
