// What retryctl prints for each response, and its JSON.
#include "client/retryctl_format.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::GetStatusResponse SampleStatus() {
  v1::GetStatusResponse status;
  status.set_state(v1::ENGINE_STATE_RUNNING);
  status.set_in_order(false);
  status.set_retry_backlog(12);
  status.set_kafka_bootstrap_servers("broker-1:9092,broker-2:9092");
  status.set_kafka_reachable(true);
  status.set_max_retry_threads(4);
  status.set_version("0.1.0");
  v1::Totals* totals = status.mutable_totals();
  totals->set_consumed(1000);
  totals->set_processed(1200);
  totals->set_succeeded(1100);
  totals->set_failed_attempts(100);
  totals->set_sent_to_retry(80);
  totals->set_dead_lettered(20);
  totals->set_in_flight(3);
  v1::ThreadInfo* primary = status.add_threads();
  primary->set_thread_id(0);
  primary->set_role(v1::THREAD_ROLE_PRIMARY);
  primary->set_state(v1::THREAD_STATE_RUNNING);
  primary->set_state_since_unix_ms(1'000'000 - 133'000);
  for (int p : {2, 0, 1}) {
    v1::TopicPartition* tp = primary->add_assigned_partitions();
    tp->set_topic("orders");
    tp->set_partition(p);
  }
  v1::ThreadInfo* retry = status.add_threads();
  retry->set_thread_id(3);
  retry->set_role(v1::THREAD_ROLE_RETRY);
  retry->set_state(v1::THREAD_STATE_WAITING_BACKOFF);
  retry->set_state_since_unix_ms(1'000'000 - 5'000);
  v1::TopicPartition* tp = retry->add_assigned_partitions();
  tp->set_topic("orders.retry");
  tp->set_partition(0);
  return status;
}

TEST(FormatStatusTest, AutoscaleShowsTheBoundsAndTheNewestEvents) {
  v1::GetStatusResponse status = SampleStatus();
  status.set_min_retry_threads(1);
  status.set_autoscale(true);
  for (int i = 0; i < 7; ++i) {
    v1::ScalingEvent* event = status.add_scaling_events();
    event->set_time_unix_ms(1'000'000 - 10'000 + i * 1000);
    event->set_thread_id(static_cast<uint32_t>(10 + i));
    event->set_started(i % 2 == 0);
    event->set_reason(i == 6 ? "idle for 1500 ms\n(no partitions)" : "why");
  }
  const std::string text = FormatStatus(status, absl::FromUnixMillis(1'000'000));
  EXPECT_THAT(text,
              HasSubstr("threads       2: 1 primary, 1 retry (1 to 4 retry, autoscale on)\n"));
  EXPECT_THAT(text, Not(HasSubstr("retry thread 11:"))) << "only the newest five";
  EXPECT_THAT(text, HasSubstr("autoscale     8.0s ago: started retry thread 12: why\n"));
  EXPECT_THAT(text, HasSubstr("autoscale     4.0s ago: started retry thread 16: idle for 1500 ms "
                              "(no partitions)\n"));
}

TEST(FormatStatusTest, ReadableSummaryAndThreadsTable) {
  const std::string text = FormatStatus(SampleStatus(), absl::FromUnixMillis(1'000'000));
  EXPECT_EQ(text,
            "engine        RUNNING (retryd 0.1.0)\n"
            "ordering      unordered\n"
            "kafka         broker-1:9092,broker-2:9092 (reachable)\n"
            "retry backlog 12 records\n"
            "totals        consumed 1000, processed 1200, succeeded 1100, failed attempts 100,\n"
            "              sent to retry 80, dead-lettered 20, in flight 3, unavailable 0,\n"
            "              followed 0, producer rewinds 0\n"
            "threads       2: 1 primary, 1 retry (at most 4 retry)\n"
            "\n"
            "  ID  ROLE     STATE            IN-STATE  PARTITIONS\n"
            "   0  primary  RUNNING             2m13s  orders:0,1,2\n"
            "   3  retry    WAITING_BACKOFF      5.0s  orders.retry:0\n");
}

// Which replica answered: its host, its pod when the Downward API gave one,
// and how long it has run.
TEST(FormatStatusTest, InstanceLineSaysWhichReplicaAnswered) {
  v1::GetStatusResponse status = SampleStatus();
  status.mutable_instance()->set_host_name("retryd-7c9f");
  status.mutable_instance()->set_pod_name("retryd-7c9f");
  status.mutable_instance()->set_pod_namespace("orders");
  status.mutable_instance()->set_start_time_unix_ms(1'000'000 - 133'000);
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("engine        RUNNING (retryd 0.1.0)\n"
                        "instance      retryd-7c9f (pod orders/retryd-7c9f), up 2m13s\n"
                        "ordering      unordered\n"));
  status.mutable_instance()->clear_pod_name();
  status.mutable_instance()->clear_pod_namespace();
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("instance      retryd-7c9f, up 2m13s\n"));
}

TEST(FormatStatusTest, UnreachableKafkaAndNoThreads) {
  v1::GetStatusResponse status;
  status.set_state(v1::ENGINE_STATE_DRAINING);
  status.set_in_order(true);
  status.set_retry_backlog(1);
  const std::string text = FormatStatus(status, absl::Now());
  EXPECT_THAT(text, HasSubstr("engine        DRAINING\n"));
  // A server older than `ordering` still says in_order.
  EXPECT_THAT(text, HasSubstr("ordering      in-order\n"));
  EXPECT_THAT(text, HasSubstr("kafka         - (NOT reachable)\n"));
  EXPECT_THAT(text, HasSubstr("retry backlog 1 record\n"));
  EXPECT_THAT(text, Not(HasSubstr("PARTITIONS")));
}

TEST(FormatStatusTest, OrderingLineShowsKeyOrdersParkedKeys) {
  v1::GetStatusResponse status = SampleStatus();
  status.set_ordering(v1::ORDERING_KEY);
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("ordering      key (no parked keys)\n"));
  v1::ParkedKeys* parked = status.mutable_parked_keys();
  parked->set_keys(3);
  parked->set_records(7);
  parked->set_oldest_unix_ms(1'000'000 - 12'300);
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("ordering      key (3 parked keys, 7 records, oldest parked 12.3s)\n"));
  parked->set_keys(1);
  parked->set_records(1);
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("ordering      key (1 parked key, 1 record, oldest parked 12.3s)\n"));

  // The mode wins over the older in_order; parked keys only in key order.
  status.set_ordering(v1::ORDERING_IN_ORDER);
  status.set_in_order(true);
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("ordering      in-order\n"));
  status.set_ordering(v1::ORDERING_UNORDERED);
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("ordering      unordered\n"));
}

TEST(FormatStatusTest, DownstreamLine) {
  v1::GetStatusResponse status = SampleStatus();
  v1::Downstream* downstream = status.mutable_downstream();
  downstream->set_state(v1::DOWNSTREAM_STATE_UP);
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("downstream    up\n"));
  downstream->set_state(v1::DOWNSTREAM_STATE_DOWN);
  downstream->set_down_since_unix_ms(988'000);
  downstream->set_outages(2);
  downstream->set_last_error("UNAVAILABLE: connection refused");
  EXPECT_THAT(FormatStatus(status, absl::FromUnixMillis(1'000'000)),
              HasSubstr("downstream    DOWN for 12.0s, intake paused, probing (2 outages so far); "
                        "last error: UNAVAILABLE: connection refused\n"));
}

TEST(FormatStatusTest, DownstreamRoleLinesSayWhatTookThemDown) {
  v1::GetStatusResponse status = SampleStatus();
  v1::Downstream* downstream = status.mutable_downstream();
  downstream->set_state(v1::DOWNSTREAM_STATE_DOWN);
  downstream->set_down_since_unix_ms(996'000);
  downstream->set_outages(1);
  downstream->set_channel(v1::DOWNSTREAM_CHANNEL_READY);
  v1::RoleDownstream* primary = downstream->add_roles();
  primary->set_role(v1::THREAD_ROLE_PRIMARY);
  primary->set_state(v1::DOWNSTREAM_STATE_UP);
  v1::RoleDownstream* retry = downstream->add_roles();
  retry->set_role(v1::THREAD_ROLE_RETRY);
  retry->set_state(v1::DOWNSTREAM_STATE_DOWN);
  retry->set_evidence(v1::DOWNSTREAM_EVIDENCE_REFUSALS);
  retry->set_down_since_unix_ms(996'000);
  retry->set_outages(1);
  retry->set_waiting(5);
  retry->set_probes(3);
  retry->set_last_probe_unix_ms(999'000);
  retry->set_last_probe_result("UNAVAILABLE: try later");
  retry->set_next_probe_unix_ms(1'000'500);
  const std::string text = FormatStatus(status, absl::FromUnixMillis(1'000'000));
  EXPECT_THAT(text, HasSubstr("downstream    DOWN for 4.0s, intake paused, probing (1 outage so "
                              "far); channel ready\n"
                              "  retry       DOWN for 4.0s: records refused in a row; 5 waiting; "
                              "3 probes, the last 1.0s ago: UNAVAILABLE: try later; next probe "
                              "in 500ms\n"));
  EXPECT_THAT(text, Not(HasSubstr("  primary     up"))) << "a role nothing happened to has no line";
}

TEST(FormatStatusTest, ServerTextCannotDriveTheTerminal) {
  v1::GetStatusResponse status = SampleStatus();
  status.mutable_threads(0)->mutable_assigned_partitions(0)->set_topic("evil\x1b[2Jtopic");
  const std::string text = FormatStatus(status, absl::FromUnixMillis(1'000'000));
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  EXPECT_THAT(text, HasSubstr("evil?[2Jtopic"));
}

TEST(FormatResponsesTest, ThreadsAndInOrder) {
  v1::StartRetryThreadsResponse started;
  started.add_thread_ids(5);
  started.add_thread_ids(6);
  EXPECT_EQ(FormatStartRetryThreads(started), "started 2 retry threads: 5, 6\n");
  started.clear_thread_ids();
  started.add_thread_ids(7);
  EXPECT_EQ(FormatStartRetryThreads(started), "started 1 retry thread: 7\n");

  v1::StopRetryThreadsResponse stopped;
  EXPECT_EQ(FormatStopRetryThreads(stopped), "no retry threads were running\n");
  stopped.add_stopped_thread_ids(3);
  EXPECT_EQ(FormatStopRetryThreads(stopped), "stopped 1 retry thread: 3\n");

  v1::SetInOrderResponse in_order;
  in_order.set_in_order(true);
  EXPECT_EQ(FormatSetInOrder(in_order), "in_order: on\n");
  in_order.set_drained_records(12);
  in_order.add_stopped_thread_ids(3);
  in_order.add_stopped_thread_ids(4);
  EXPECT_EQ(FormatSetInOrder(in_order),
            "in_order: on\ndrained 12 retry records and stopped retry threads 3, 4\n");
  in_order.Clear();
  EXPECT_EQ(FormatSetInOrder(in_order), "in_order: off\n");
  in_order.add_started_thread_ids(7);
  EXPECT_EQ(FormatSetInOrder(in_order),
            "in_order: off\nstarted 1 retry thread to read the retry topic: 7\n");
}

TEST(FormatResponsesTest, OrderingMode) {
  v1::SetOrderingModeResponse response;
  response.set_mode(v1::ORDERING_KEY);
  EXPECT_EQ(FormatSetOrderingMode(response),
            "ordering: key\nfound 0 parked keys in the retry topic\n");
  response.set_parked_keys(1);
  EXPECT_EQ(FormatSetOrderingMode(response),
            "ordering: key\nfound 1 parked key in the retry topic\n");

  response.Clear();
  response.set_mode(v1::ORDERING_IN_ORDER);
  response.set_drained_records(1);
  response.add_stopped_thread_ids(2);
  EXPECT_EQ(FormatSetOrderingMode(response),
            "ordering: in-order\ndrained 1 retry record and stopped retry threads 2\n");

  response.Clear();
  response.set_mode(v1::ORDERING_UNORDERED);
  response.add_started_thread_ids(5);
  response.add_started_thread_ids(6);
  EXPECT_EQ(FormatSetOrderingMode(response),
            "ordering: unordered\nstarted 2 retry threads to read the retry topic: 5, 6\n");
}

TEST(ToJsonTest, ProtoFieldNamesEveryFieldAndRoundTrip) {
  const v1::GetStatusResponse status = SampleStatus();
  absl::StatusOr<std::string> json = ToJson(status, /*one_line=*/false);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"retry_backlog\": \"12\""));  // int64 is a JSON string.
  EXPECT_THAT(*json, HasSubstr("\"kafka_bootstrap_servers\""));
  EXPECT_THAT(*json, HasSubstr("\"in_order\": false"));  // Printed though it is the default.
  // An enum by its current, prefixed name (the first of its number).
  EXPECT_THAT(*json, HasSubstr("\"state\": \"ENGINE_STATE_RUNNING\""));
  EXPECT_THAT(*json, Not(HasSubstr("retryBacklog")));
  EXPECT_EQ(json->back(), '\n');

  v1::GetStatusResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, status));
}

TEST(ToJsonTest, OneLineHasASingleTrailingNewline) {
  v1::MetricsSnapshot snapshot;
  snapshot.set_time_unix_ms(42);
  snapshot.add_threads()->set_thread_id(1);
  absl::StatusOr<std::string> json = ToJson(snapshot, /*one_line=*/true);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->find('\n'), json->size() - 1);
  EXPECT_THAT(*json, HasSubstr("\"time_unix_ms\":\"42\""));
  EXPECT_THAT(*json, HasSubstr("\"thread_id\":1"));
}

TEST(FormatHelpersTest, Elapsed) {
  EXPECT_EQ(FormatElapsed(-1), "-");
  EXPECT_EQ(FormatElapsed(0), "0ms");
  EXPECT_EQ(FormatElapsed(850), "850ms");
  EXPECT_EQ(FormatElapsed(12'345), "12.3s");
  EXPECT_EQ(FormatElapsed(133'000), "2m13s");
  EXPECT_EQ(FormatElapsed(3'720'000), "1h02m");
  EXPECT_EQ(FormatElapsed(3 * 86'400'000LL + 4 * 3'600'000LL), "3d04h");
}

TEST(FormatHelpersTest, SanitizeForTerminal) {
  EXPECT_EQ(SanitizeForTerminal("plain", 0), "plain");
  EXPECT_EQ(SanitizeForTerminal("a\nb\tc", 0), "a b c");
  EXPECT_EQ(SanitizeForTerminal("\x1b[31mred\x07", 0), "?[31mred?");
  EXPECT_EQ(SanitizeForTerminal("caf\xc3\xa9", 0), "caf??");
  EXPECT_EQ(SanitizeForTerminal("0123456789", 8), "01234...");
  EXPECT_EQ(SanitizeForTerminal("0123456789", 10), "0123456789");
}

TEST(FormatHelpersTest, EnumNames) {
  EXPECT_EQ(RoleName(v1::THREAD_ROLE_PRIMARY), "primary");
  EXPECT_EQ(RoleName(v1::THREAD_ROLE_RETRY), "retry");
  EXPECT_EQ(ThreadStateName(v1::THREAD_STATE_WAITING_BACKOFF), "WAITING_BACKOFF");
  EXPECT_EQ(EngineStateName(v1::ENGINE_STATE_STOPPING), "STOPPING");
  EXPECT_EQ(ThreadStateName(static_cast<v1::ThreadState>(42)), "STATE42");
  EXPECT_EQ(InFlightStateName(v1::IN_FLIGHT_STATE_WAITING_DUE), "WAITING_DUE");
  EXPECT_EQ(ShortEnumName(*v1::DownstreamHealthStatus_descriptor(),
                          v1::DOWNSTREAM_HEALTH_STATUS_NOT_SERVING),
            "NOT_SERVING");
  EXPECT_EQ(ShortEnumName(*v1::Ordering_descriptor(), v1::ORDERING_IN_ORDER), "IN_ORDER");
  EXPECT_EQ(ShortEnumName(*v1::Ordering_descriptor(), 42), "");
}

}  // namespace
}  // namespace retryd::retryctl
