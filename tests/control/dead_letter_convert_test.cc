// The dead-letter tools' converters (server/control/dead_letter_convert.h):
// the RPC's messages to the dead-letter wing's plain values and back, field
// by field, and a redrive's spec in its stored form: exactly the protobuf
// JSON of v1::RedriveSpec that every retryd wrote, so a redrive an older
// retryd left unfinished resumes.
#include "server/control/dead_letter_convert.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace retryd::control {
namespace {

using ::google::protobuf::util::MessageDifferencer;

// How many fields of `message` are set (for a proto3 scalar: not its default).
int FieldsSet(const google::protobuf::Message& message) {
  std::vector<const google::protobuf::FieldDescriptor*> set;
  message.GetReflection()->ListFields(message, &set);
  return static_cast<int>(set.size());
}

v1::DeadLetterFilter ParseFilter(const std::string& text) {
  v1::DeadLetterFilter filter;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &filter)) << text;
  return filter;
}

// What retryd wrote as a spec before the dead-letter wing had plain values.
std::string ProtoJson(const v1::RedriveSpec& spec) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(spec, &out, options).ok());
  return out;
}

v1::StartRedriveRequest FullRequest() {
  v1::StartRedriveRequest request;
  request.set_request_id("req-1");
  request.mutable_filter()->set_key_prefix("order-");
  request.mutable_filter()->set_reason("ORDER_LOCKED");
  request.mutable_filter()->set_original_partition(0);
  request.mutable_filter()->add_partitions(1);
  request.set_target_topic("orders.replay");
  request.set_rate_per_s(250);
  request.set_reset_attempts(true);
  request.set_dry_run(true);
  request.set_max_redrives(7);
  return request;
}

TEST(DeadLetterConvertTest, StartRedriveRequestRoundTrips) {
  const v1::StartRedriveRequest full = FullRequest();
  EXPECT_TRUE(MessageDifferencer::Equals(ToProto(FromProto(full)), full));
  // A request without a filter stays without one (a spec's JSON says so).
  v1::StartRedriveRequest bare;
  bare.set_target_topic("t");
  EXPECT_FALSE(ToProto(FromProto(bare)).has_filter());
  EXPECT_TRUE(MessageDifferencer::Equals(ToProto(FromProto(bare)), bare));
}

TEST(DeadLetterConvertTest, SpecKeepsItsStoredFormExactly) {
  v1::RedriveSpec spec;
  spec.set_operation_id("6f1c1a3e-0000-4000-8000-000000000001");
  spec.set_dead_letter_topic("orders.dlq");
  *spec.mutable_request() = FullRequest();
  spec.mutable_request()->clear_request_id();
  spec.set_end_offset(42);
  spec.set_create_time_unix_ms(1700000000000);
  spec.set_started_by("retryd-a");
  // Before its first commit: no checkpoint at all.
  const std::string initial = ProtoJson(spec);
  EXPECT_EQ(initial.find("checkpoint"), std::string::npos);
  std::optional<dlq::RedriveSpec> parsed = ParseSpec(initial);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_FALSE(parsed->checkpoint.has_value());
  EXPECT_EQ(SpecJson(*parsed), initial);
  // With one: every count, and the empty request filter kept as it was.
  v1::RedriveCheckpoint& c = *spec.mutable_checkpoint();
  c.set_scanned(10);
  c.set_matched(8);
  c.set_redriven(6);
  c.set_skipped(2);
  c.set_sent_twice(1);
  c.set_commit_time_unix_ms(1700000001000);
  spec.mutable_request()->clear_filter();
  spec.mutable_request()->mutable_filter();
  const std::string committed = ProtoJson(spec);
  parsed = ParseSpec(committed);
  ASSERT_TRUE(parsed.has_value());
  ASSERT_TRUE(parsed->checkpoint.has_value());
  EXPECT_EQ(parsed->checkpoint->sent_twice, 1);
  EXPECT_EQ(parsed->end_offset, 42);
  EXPECT_EQ(SpecJson(*parsed), committed);
  EXPECT_TRUE(MessageDifferencer::Equals(ToProto(*parsed), spec));
}

TEST(DeadLetterConvertTest, ParseSpecRefusesWhatIsNotASpec) {
  EXPECT_FALSE(ParseSpec("").has_value());
  EXPECT_FALSE(ParseSpec("not json").has_value());
  EXPECT_FALSE(ParseSpec(R"({"dead_letter_topic":"d"})").has_value());
  EXPECT_FALSE(ParseSpec(R"({"operation_id":"x"})").has_value());
  // A field a newer retryd added is ignored.
  std::optional<dlq::RedriveSpec> spec =
      ParseSpec(R"({"operation_id":"x","dead_letter_topic":"d","later":1})");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->operation_id, "x");
}

TEST(DeadLetterConvertTest, PurgeAndListingTranslateFieldByField) {
  v1::PurgeDeadLettersRequest purge;
  (*purge.mutable_up_to())[1] = 5;
  purge.set_delete_records(true);
  const dlq::PurgeRequest plain = FromProto(purge);
  ASSERT_EQ(plain.up_to.size(), 1u);
  EXPECT_EQ(plain.up_to[0], std::make_pair(1, int64_t{5}));
  EXPECT_FALSE(plain.all);
  EXPECT_TRUE(plain.delete_records);
  const v1::PurgeDeadLettersResponse purged = ToProto(dlq::PurgeResult{{{1, 2, 5, true}}, "dlq"});
  EXPECT_EQ(purged.topic(), "dlq");
  ASSERT_EQ(purged.partitions_size(), 1);
  EXPECT_EQ(purged.partitions(0).from(), 2);
  EXPECT_EQ(purged.partitions(0).to(), 5);
  EXPECT_TRUE(purged.partitions(0).deleted());

  v1::ListDeadLettersRequest list;
  list.mutable_filter()->set_error_contains("timeout");
  list.set_page_size(3);
  list.set_page_token("tok");
  list.set_max_value_bytes(64);
  const dlq::ListQuery query = FromProto(list);
  EXPECT_EQ(query.filter.error_contains, "timeout");
  EXPECT_EQ(query.page_size, 3u);
  EXPECT_EQ(query.page_token, "tok");
  EXPECT_EQ(query.max_value_bytes, 64u);
  dlq::ListPage page;
  page.records.emplace_back().offset = 9;
  page.next_page_token = "next";
  page.scanned = 4;
  page.topic = "dlq";
  const v1::ListDeadLettersResponse listed = ToProto(std::move(page));
  ASSERT_EQ(listed.records_size(), 1);
  EXPECT_EQ(listed.records(0).offset(), 9);
  EXPECT_EQ(listed.next_page_token(), "next");
  EXPECT_EQ(listed.scanned(), 4);
  EXPECT_EQ(listed.topic(), "dlq");
}

TEST(DeadLetterConvertTest, RedriveProgressAndResultTranslateFieldByField) {
  dlq::RedriveOperationProgress progress;
  progress.done = 3;
  progress.total = 9;
  progress.unit = "records";
  progress.description = "3 of 9";
  progress.redrive = {3, 2, 1, 1, 0.5, 1200, 9, false, true, 1};
  v1::OperationProgress out;
  ToProto(progress, out);
  EXPECT_EQ(out.done(), 3);
  EXPECT_EQ(out.total(), 9);
  EXPECT_EQ(out.unit(), "records");
  EXPECT_EQ(out.description(), "3 of 9");
  EXPECT_EQ(out.redrive().matched(), 2);
  EXPECT_EQ(out.redrive().eta_ms(), 1200);
  EXPECT_DOUBLE_EQ(out.redrive().rate_per_s(), 0.5);
  EXPECT_TRUE(out.redrive().resumed());
  EXPECT_EQ(out.redrive().sent_twice(), 1);

  dlq::RedriveResult result;
  result.progress = progress.redrive;
  result.by_partition = {{"0", 2, 1}};
  result.by_reason = {{"shop/LOCKED", 2, 1}};
  result.target = "ORIGIN";
  result.group = "g.ops.x";
  v1::RedriveResult r;
  ToProto(result, r);
  EXPECT_EQ(r.progress().scanned(), 3);
  ASSERT_EQ(r.by_partition_size(), 1);
  EXPECT_EQ(r.by_partition(0).key(), "0");
  ASSERT_EQ(r.by_reason_size(), 1);
  EXPECT_EQ(r.by_reason(0).key(), "shop/LOCKED");
  EXPECT_EQ(r.by_reason(0).skipped(), 1);
  EXPECT_EQ(r.target(), "ORIGIN");
  EXPECT_EQ(r.group(), "g.ops.x");
}

// Every field of a listed dead letter, each set apart from its default.
dlq::DeadLetter FullDeadLetter() {
  dlq::DeadLetter d;
  d.partition = 1;
  d.offset = 2;
  d.timestamp_unix_ms = 3;
  d.key = std::string("k\0y", 3);
  d.key_null = true;
  d.value = "value";
  d.value_null = true;
  d.value_size = 8;
  d.headers = {{"trace", "t1", false}, {"gone", "", true}};
  d.original_topic = "orders";
  d.original_partition = 11;
  d.original_offset = 12;
  d.original_timestamp_unix_ms = -1;
  d.attempts = 14;
  d.first_failure_unix_ms = 15;
  d.error = "UNAVAILABLE: down";
  d.first_error = "DEADLINE_EXCEEDED: slow";
  d.error_reason = "shop.example/LOCKED";
  d.dead_lettered_unix_ms = 19;
  d.dead_lettered_by = "pod-a/thread-3";
  d.redrive_count = 21;
  d.redriven_from = "orders.dlq/0@5";
  d.truncated = "value";
  d.decode_error = "missing header retryd-attempt";
  d.dialect = "retryd";
  return d;
}

TEST(DeadLetterConvertTest, AListedDeadLetterKeepsEveryField) {
  v1::DeadLetter expected;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(partition: 1
           offset: 2
           timestamp_unix_ms: 3
           key: "k\000y"
           key_null: true
           value: "value"
           value_null: true
           value_size: 8
           headers { key: "trace" value: "t1" }
           headers { key: "gone" value_null: true }
           original_topic: "orders"
           original_partition: 11
           original_offset: 12
           original_timestamp_unix_ms: -1
           attempts: 14
           first_failure_unix_ms: 15
           error: "UNAVAILABLE: down"
           first_error: "DEADLINE_EXCEEDED: slow"
           error_reason: "shop.example/LOCKED"
           dead_lettered_unix_ms: 19
           dead_lettered_by: "pod-a/thread-3"
           redrive_count: 21
           redriven_from: "orders.dlq/0@5"
           truncated: "value"
           decode_error: "missing header retryd-attempt"
           dialect: "retryd")pb",
      &expected));
  // The expectation covers every field control.proto has (one it adds
  // fails here until dlq::DeadLetter has it too).
  ASSERT_EQ(FieldsSet(expected), v1::DeadLetter::descriptor()->field_count());
  ASSERT_EQ(FieldsSet(expected.headers(0)) + 1, v1::DeadLetterHeader::descriptor()->field_count());
  const v1::DeadLetter listed = ToProto(FullDeadLetter());
  std::string diff;
  MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(listed, expected)) << diff;
  // A page is cut by the bytes of the proto the caller gets, exactly.
  EXPECT_EQ(DeadLetterBytes(FullDeadLetter()), expected.ByteSizeLong());
  dlq::DeadLetter plain = FullDeadLetter();
  plain.value = std::string(1 << 20, 'v');
  *expected.mutable_value() = plain.value;
  EXPECT_EQ(DeadLetterBytes(plain), expected.ByteSizeLong());
  // The listing's page carries them as they are.
  dlq::ListPage page;
  page.records = {FullDeadLetter(), FullDeadLetter()};
  const v1::ListDeadLettersResponse response = ToProto(std::move(page));
  ASSERT_EQ(response.records_size(), 2);
  EXPECT_TRUE(MessageDifferencer::Equals(response.records(1), ToProto(FullDeadLetter())));
}

TEST(DeadLetterConvertTest, AFilterRoundTripsEveryField) {
  const v1::DeadLetterFilter full = ParseFilter(
      R"pb(key_prefix: "order-"
           error_contains: "timeout"
           reason: "LOCKED"
           original_topic: "orders"
           original_partition: 3
           first_failure_from_unix_ms: 6
           first_failure_to_unix_ms: 7
           min_attempts: 8
           max_attempts: 9
           partitions: [ 2, 0 ])pb");
  ASSERT_EQ(FieldsSet(full), v1::DeadLetterFilter::descriptor()->field_count());
  const dlq::DeadLetterFilter plain = FromProto(full);
  EXPECT_EQ(plain.original_partition, 3);
  EXPECT_EQ(plain.partitions, (std::vector<int32_t>{2, 0}));
  EXPECT_TRUE(MessageDifferencer::Equals(ToProto(plain), full));
  EXPECT_EQ(FromProto(ToProto(plain)), plain);
  // original_partition 0 is a filter on partition 0; none is no filter.
  const v1::DeadLetterFilter zero = ParseFilter("original_partition: 0");
  EXPECT_EQ(FromProto(zero).original_partition, 0);
  EXPECT_TRUE(ToProto(FromProto(zero)).has_original_partition());
  EXPECT_FALSE(FromProto(v1::DeadLetterFilter()).original_partition.has_value());
  EXPECT_FALSE(ToProto(dlq::DeadLetterFilter()).has_original_partition());
  // A log line shows it as its protobuf JSON.
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(full, &json, options).ok());
  EXPECT_EQ(DescribeFilter(plain), json);
}

}  // namespace
}  // namespace retryd::control
