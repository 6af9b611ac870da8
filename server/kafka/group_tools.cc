#include "server/kafka/group_tools.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/kafka/message.h"
#include "server/kafka/properties.h"

namespace retryd::kafka {
namespace {

struct AdminOptionsDeleter {
  void operator()(rd_kafka_AdminOptions_t* o) const { rd_kafka_AdminOptions_destroy(o); }
};
struct QueueDeleter {
  void operator()(rd_kafka_queue_t* q) const { rd_kafka_queue_destroy(q); }
};
struct EventDeleter {
  void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
};
struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;
using EventPtr = std::unique_ptr<rd_kafka_event_t, EventDeleter>;

int Ms(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 0, 3'600'000));
}

// The status for a failed admin call: what the operator can act on.
absl::Status AdminError(rd_kafka_resp_err_t err, absl::string_view what, absl::string_view detail) {
  const std::string message =
      absl::StrCat(what, ": ", detail.empty() ? rd_kafka_err2str(err) : detail);
  switch (err) {
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION:
    case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
    case RD_KAFKA_RESP_ERR_INVALID_REQUEST:
      return WithReason(absl::FailedPreconditionError(message), reason::kAdminApiUnavailable);
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
      return absl::PermissionDeniedError(message);
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    default:
      return absl::UnavailableError(message);
  }
}

// Runs one admin request (`send` puts it on the queue) and waits for its
// event, up to `timeout` plus a margin for the timeout's own error event.
absl::StatusOr<EventPtr> AdminCall(
    rd_kafka_t* rk, rd_kafka_admin_op_t op, absl::Duration timeout, absl::string_view what,
    const std::function<void(const rd_kafka_AdminOptions_t*, rd_kafka_queue_t*)>& send) {
  char errstr[512];
  const std::unique_ptr<rd_kafka_AdminOptions_t, AdminOptionsDeleter> options(
      rd_kafka_AdminOptions_new(rk, op));
  if (rd_kafka_AdminOptions_set_request_timeout(options.get(), std::max(1, Ms(timeout)), errstr,
                                                sizeof(errstr)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::InvalidArgumentError(absl::StrCat(what, " options: ", errstr));
  }
  const std::unique_ptr<rd_kafka_queue_t, QueueDeleter> queue(rd_kafka_queue_new(rk));
  send(options.get(), queue.get());
  EventPtr event(rd_kafka_queue_poll(queue.get(), Ms(timeout) + 1000));
  if (event == nullptr) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": the cluster did not answer in time"));
  }
  if (rd_kafka_event_error(event.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* detail = rd_kafka_event_error_string(event.get());
    return AdminError(rd_kafka_event_error(event.get()), what, detail != nullptr ? detail : "");
  }
  return event;
}

absl::StatusOr<HandlePtr> NewAdmin(const std::string& bootstrap_servers,
                                   const std::map<std::string, std::string>& properties) {
  Properties user = properties;
  user.emplace("client.id", "retryd-dlq-admin");
  absl::StatusOr<ConfPtr> conf = MakeConf(bootstrap_servers, user, {});
  if (!conf.ok()) return conf.status();
  return NewHandle(RD_KAFKA_PRODUCER, *std::move(conf));
}

ListPtr ToList(const std::string& topic, const std::vector<CommittedOffset>& offsets) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const CommittedOffset& o : offsets) {
    rd_kafka_topic_partition_t* p =
        rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), o.partition);
    p->offset = o.offset;
    if (!o.metadata.empty()) {
      // librdkafka frees what it is given with the list.
      p->metadata = malloc(o.metadata.size());
      std::copy(o.metadata.begin(), o.metadata.end(), static_cast<char*>(p->metadata));
      p->metadata_size = o.metadata.size();
    }
  }
  return list;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GroupAdmin>> GroupAdmin::Create(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties) {
  absl::StatusOr<HandlePtr> rk = NewAdmin(bootstrap_servers, properties);
  if (!rk.ok()) return rk.status();
  return std::unique_ptr<GroupAdmin>(new GroupAdmin(*std::move(rk)));
}

GroupAdmin::~GroupAdmin() = default;

absl::StatusOr<std::vector<GroupListing>> GroupAdmin::ListGroups(const std::string& prefix,
                                                                 absl::Duration timeout) const {
  // rd_kafka_list_groups(), not the Admin API's ListConsumerGroups: in
  // librdkafka 2.0.2 the latter leaks an allocation whenever a broker does
  // not serve ListGroups (the mock cluster), which every start on the mock
  // would pay. Both send ListGroups and DescribeGroups to every broker.
  const struct rd_kafka_group_list* list = nullptr;
  const rd_kafka_resp_err_t err =
      rd_kafka_list_groups(rk_.get(), nullptr, &list, std::max(1, Ms(timeout)));
  const std::unique_ptr<const rd_kafka_group_list, void (*)(const rd_kafka_group_list*)> owned(
      list, [](const rd_kafka_group_list* l) {
        if (l != nullptr) rd_kafka_group_list_destroy(l);
      });
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return AdminError(err, "ListGroups", "");
  std::vector<GroupListing> out;
  for (int i = 0; list != nullptr && i < list->group_cnt; ++i) {
    const rd_kafka_group_info& group = list->groups[i];
    if (group.group == nullptr || !absl::StartsWith(group.group, prefix)) continue;
    out.push_back({group.group, group.state != nullptr ? group.state : "Unknown"});
  }
  std::sort(out.begin(), out.end(),
            [](const GroupListing& a, const GroupListing& b) { return a.group < b.group; });
  return out;
}

absl::StatusOr<std::vector<CommittedOffset>> GroupAdmin::GroupOffsets(
    const std::string& group, const std::string& topic, int partitions,
    absl::Duration timeout) const {
  ListPtr list(rd_kafka_topic_partition_list_new(partitions));
  for (int p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p);
  }
  rd_kafka_ListConsumerGroupOffsets_t* request =
      rd_kafka_ListConsumerGroupOffsets_new(group.c_str(), list.get());
  absl::StatusOr<EventPtr> event =
      AdminCall(rk_.get(), RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS, timeout, "OffsetFetch",
                [&](const rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
                  rd_kafka_ListConsumerGroupOffsets(rk_.get(), &request, 1, options, queue);
                });
  rd_kafka_ListConsumerGroupOffsets_destroy(request);
  if (!event.ok()) return event.status();
  const rd_kafka_ListConsumerGroupOffsets_result_t* result =
      rd_kafka_event_ListConsumerGroupOffsets_result(event->get());
  size_t count = 0;
  const rd_kafka_group_result_t** groups =
      result == nullptr ? nullptr : rd_kafka_ListConsumerGroupOffsets_result_groups(result, &count);
  if (count != 1) return absl::InternalError("OffsetFetch: no group in its answer");
  if (const rd_kafka_error_t* err = rd_kafka_group_result_error(groups[0])) {
    return AdminError(rd_kafka_error_code(err), absl::StrCat("OffsetFetch ", group),
                      rd_kafka_error_string(err));
  }
  std::vector<CommittedOffset> out(partitions);
  for (int p = 0; p < partitions; ++p) out[p].partition = p;
  const rd_kafka_topic_partition_list_t* got = rd_kafka_group_result_partitions(groups[0]);
  for (int i = 0; got != nullptr && i < got->cnt; ++i) {
    const rd_kafka_topic_partition_t& e = got->elems[i];
    if (e.partition < 0 || e.partition >= partitions || topic != e.topic) continue;
    CommittedOffset& o = out[e.partition];
    o.offset = e.offset >= 0 ? e.offset : -1;
    if (e.metadata != nullptr && e.metadata_size > 0) {
      o.metadata.assign(static_cast<const char*>(e.metadata), e.metadata_size);
    }
  }
  return out;
}

absl::Status GroupAdmin::DeleteGroup(const std::string& group, absl::Duration timeout) const {
  rd_kafka_DeleteGroup_t* request = rd_kafka_DeleteGroup_new(group.c_str());
  absl::StatusOr<EventPtr> event =
      AdminCall(rk_.get(), RD_KAFKA_ADMIN_OP_DELETEGROUPS, timeout, "DeleteGroups",
                [&](const rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
                  rd_kafka_DeleteGroups(rk_.get(), &request, 1, options, queue);
                });
  rd_kafka_DeleteGroup_destroy(request);
  if (!event.ok()) return event.status();
  const rd_kafka_DeleteGroups_result_t* result = rd_kafka_event_DeleteGroups_result(event->get());
  size_t count = 0;
  const rd_kafka_group_result_t** groups =
      result == nullptr ? nullptr : rd_kafka_DeleteGroups_result_groups(result, &count);
  if (count != 1) return absl::InternalError("DeleteGroups: no group in its answer");
  if (const rd_kafka_error_t* err = rd_kafka_group_result_error(groups[0])) {
    const rd_kafka_resp_err_t code = rd_kafka_error_code(err);
    if (code == RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) return absl::OkStatus();
    if (code == RD_KAFKA_RESP_ERR_NON_EMPTY_GROUP) {
      return absl::FailedPreconditionError(
          absl::StrCat("DeleteGroups ", group, ": the group has members"));
    }
    return AdminError(code, absl::StrCat("DeleteGroups ", group), rd_kafka_error_string(err));
  }
  return absl::OkStatus();
}

absl::Status GroupAdmin::DeleteRecords(const std::string& topic,
                                       const std::map<int32_t, int64_t>& before,
                                       absl::Duration timeout) const {
  if (before.empty()) return absl::OkStatus();
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(before.size())));
  for (const auto& [partition, offset] : before) {
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), partition)->offset = offset;
  }
  rd_kafka_DeleteRecords_t* request = rd_kafka_DeleteRecords_new(list.get());
  absl::StatusOr<EventPtr> event =
      AdminCall(rk_.get(), RD_KAFKA_ADMIN_OP_DELETERECORDS, timeout, "DeleteRecords",
                [&](const rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
                  char errstr[256];
                  (void)rd_kafka_AdminOptions_set_operation_timeout(
                      const_cast<rd_kafka_AdminOptions_t*>(options), std::max(1, Ms(timeout)),
                      errstr, sizeof(errstr));
                  rd_kafka_DeleteRecords(rk_.get(), &request, 1, options, queue);
                });
  rd_kafka_DeleteRecords_destroy(request);
  if (!event.ok()) return event.status();
  const rd_kafka_DeleteRecords_result_t* result = rd_kafka_event_DeleteRecords_result(event->get());
  const rd_kafka_topic_partition_list_t* offsets =
      result == nullptr ? nullptr : rd_kafka_DeleteRecords_result_offsets(result);
  for (int i = 0; offsets != nullptr && i < offsets->cnt; ++i) {
    if (offsets->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return AdminError(offsets->elems[i].err,
                        absl::StrCat("DeleteRecords ", topic, "/", offsets->elems[i].partition),
                        "");
    }
  }
  return absl::OkStatus();
}

absl::Status CommitWithoutJoining(const std::string& bootstrap_servers,
                                  const std::map<std::string, std::string>& properties,
                                  const std::string& group, const std::string& topic,
                                  const std::vector<CommittedOffset>& offsets,
                                  absl::Duration timeout) {
  Properties user = properties;
  user.emplace("client.id", "retryd-dlq-tools");
  absl::StatusOr<ConfPtr> conf =
      MakeConf(bootstrap_servers, user, {{"group.id", group}, {"enable.auto.commit", "false"}});
  if (!conf.ok()) return conf.status();
  // The commit's own wait is bounded by the socket timeout: bound it by ours.
  char errstr[256];
  (void)rd_kafka_conf_set(conf->get(), "socket.timeout.ms",
                          absl::StrCat(std::max(10, Ms(timeout))).c_str(), errstr, sizeof(errstr));
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_CONSUMER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  ListPtr list = ToList(topic, offsets);
  const rd_kafka_resp_err_t err = rd_kafka_commit(rk->get(), list.get(), /*async=*/0);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < list->cnt; ++i) {
      if (list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return AdminError(list->elems[i].err, absl::StrCat("commit to group ", group), "");
      }
    }
    return absl::OkStatus();
  }
  if (err == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID || err == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
      err == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS) {
    return absl::FailedPreconditionError(absl::StrCat(
        "commit to group ", group, ": the group has members (", rd_kafka_err2str(err), ")"));
  }
  return AdminError(err, absl::StrCat("commit to group ", group), "");
}

absl::StatusOr<std::unique_ptr<GroupConsumer>> GroupConsumer::Create(
    const std::string& bootstrap_servers, const std::map<std::string, std::string>& properties,
    const std::string& group, const std::string& topic, const std::string& client_id) {
  Properties user = properties;
  user.emplace("client.id", client_id);
  absl::StatusOr<ConfPtr> conf =
      MakeConf(bootstrap_servers, user,
               {{"group.id", group},
                {"enable.auto.commit", "false"},
                {"enable.auto.offset.store", "false"},
                {"enable.partition.eof", "true"},
                // What a purge with DeleteRecords removed is gone: start after it.
                {"auto.offset.reset", "earliest"},
                // The eager assignor: librdkafka 2.0.2's cooperative-sticky
                // aborts on an early close (issue 4312).
                {"partition.assignment.strategy", "range"}});
  if (!conf.ok()) return conf.status();
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_CONSUMER, *std::move(conf));
  if (!rk.ok()) return rk.status();
  rd_kafka_poll_set_consumer(rk->get());
  ListPtr subscription(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(subscription.get(), topic.c_str(), RD_KAFKA_PARTITION_UA);
  if (const rd_kafka_resp_err_t err = rd_kafka_subscribe(rk->get(), subscription.get());
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(
        absl::StrCat("subscribe ", group, " to ", topic, ": ", rd_kafka_err2str(err)));
  }
  return std::unique_ptr<GroupConsumer>(new GroupConsumer(*std::move(rk), topic));
}

GroupConsumer::~GroupConsumer() { Close(); }

absl::StatusOr<GroupConsumer::Event> GroupConsumer::Poll(absl::Duration timeout) {
  Event event;
  rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_.get(), Ms(timeout));
  if (m == nullptr) return event;
  const std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> owned(
      m, rd_kafka_message_destroy);
  if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
    event.eof_partition = m->partition;
    event.eof_offset = m->offset;
    return event;
  }
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    // Transient errors (a broker away) are retried by librdkafka; a fatal
    // one ends the tool's run.
    if (rd_kafka_fatal_error(rk_.get(), nullptr, 0) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
        m->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) {
      return absl::UnavailableError(
          absl::StrCat("reading ", topic_, ": ", rd_kafka_message_errstr(m)));
    }
    return event;
  }
  event.record = ToRecord(m);
  return event;
}

std::vector<int32_t> GroupConsumer::Assignment() const {
  rd_kafka_topic_partition_list_t* list = nullptr;
  std::vector<int32_t> out;
  if (rd_kafka_assignment(rk_.get(), &list) != RD_KAFKA_RESP_ERR_NO_ERROR || list == nullptr) {
    return out;
  }
  for (int i = 0; i < list->cnt; ++i) out.push_back(list->elems[i].partition);
  rd_kafka_topic_partition_list_destroy(list);
  std::sort(out.begin(), out.end());
  return out;
}

void GroupConsumer::Pause(int32_t partition) {
  ListPtr list(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(list.get(), topic_.c_str(), partition);
  (void)rd_kafka_pause_partitions(rk_.get(), list.get());
}

absl::Status GroupConsumer::Commit(const std::vector<CommittedOffset>& offsets) {
  if (offsets.empty()) return absl::OkStatus();
  ListPtr list = ToList(topic_, offsets);
  const rd_kafka_resp_err_t err = rd_kafka_commit(rk_.get(), list.get(), /*async=*/0);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(absl::StrCat("commit: ", rd_kafka_err2str(err)));
  }
  for (int i = 0; i < list->cnt; ++i) {
    if (list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return absl::UnavailableError(absl::StrCat("commit ", topic_, "/", list->elems[i].partition,
                                                 ": ", rd_kafka_err2str(list->elems[i].err)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<int32_t, int64_t>> GroupConsumer::Committed(
    const std::vector<int32_t>& partitions, absl::Duration timeout) const {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size())));
  for (int32_t p : partitions) rd_kafka_topic_partition_list_add(list.get(), topic_.c_str(), p);
  const rd_kafka_resp_err_t err = rd_kafka_committed(rk_.get(), list.get(), Ms(timeout));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(absl::StrCat("committed offsets: ", rd_kafka_err2str(err)));
  }
  std::map<int32_t, int64_t> out;
  for (int i = 0; i < list->cnt; ++i) {
    out[list->elems[i].partition] = list->elems[i].offset >= 0 ? list->elems[i].offset : -1;
  }
  return out;
}

void GroupConsumer::Close() {
  if (closed_) return;
  closed_ = true;
  (void)rd_kafka_consumer_close(rk_.get());
}

}  // namespace retryd::kafka
