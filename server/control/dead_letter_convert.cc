#include "server/control/dead_letter_convert.h"

#include <google/protobuf/util/json_util.h>

#include <utility>

namespace retryd::control {

dlq::DeadLetterFilter FromProto(const v1::DeadLetterFilter& filter) {
  dlq::DeadLetterFilter out;
  out.key_prefix = filter.key_prefix();
  out.error_contains = filter.error_contains();
  out.reason = filter.reason();
  out.original_topic = filter.original_topic();
  if (filter.has_original_partition()) out.original_partition = filter.original_partition();
  out.first_failure_from_unix_ms = filter.first_failure_from_unix_ms();
  out.first_failure_to_unix_ms = filter.first_failure_to_unix_ms();
  out.min_attempts = filter.min_attempts();
  out.max_attempts = filter.max_attempts();
  out.partitions.assign(filter.partitions().begin(), filter.partitions().end());
  return out;
}

v1::DeadLetterFilter ToProto(const dlq::DeadLetterFilter& filter) {
  v1::DeadLetterFilter out;
  out.set_key_prefix(filter.key_prefix);
  out.set_error_contains(filter.error_contains);
  out.set_reason(filter.reason);
  out.set_original_topic(filter.original_topic);
  if (filter.original_partition.has_value()) out.set_original_partition(*filter.original_partition);
  out.set_first_failure_from_unix_ms(filter.first_failure_from_unix_ms);
  out.set_first_failure_to_unix_ms(filter.first_failure_to_unix_ms);
  out.set_min_attempts(filter.min_attempts);
  out.set_max_attempts(filter.max_attempts);
  out.mutable_partitions()->Add(filter.partitions.begin(), filter.partitions.end());
  return out;
}

v1::DeadLetter ToProto(dlq::DeadLetter dead) {
  v1::DeadLetter out;
  out.set_partition(dead.partition);
  out.set_offset(dead.offset);
  out.set_timestamp_unix_ms(dead.timestamp_unix_ms);
  out.set_key(std::move(dead.key));
  out.set_key_null(dead.key_null);
  out.set_value(std::move(dead.value));
  out.set_value_null(dead.value_null);
  out.set_value_size(dead.value_size);
  for (dlq::DeadLetterHeader& h : dead.headers) {
    v1::DeadLetterHeader* header = out.add_headers();
    header->set_key(std::move(h.key));
    header->set_value(std::move(h.value));
    header->set_value_null(h.value_null);
  }
  out.set_original_topic(std::move(dead.original_topic));
  out.set_original_partition(dead.original_partition);
  out.set_original_offset(dead.original_offset);
  out.set_original_timestamp_unix_ms(dead.original_timestamp_unix_ms);
  out.set_attempts(dead.attempts);
  out.set_first_failure_unix_ms(dead.first_failure_unix_ms);
  out.set_error(std::move(dead.error));
  out.set_first_error(std::move(dead.first_error));
  out.set_error_reason(std::move(dead.error_reason));
  out.set_dead_lettered_unix_ms(dead.dead_lettered_unix_ms);
  out.set_dead_lettered_by(std::move(dead.dead_lettered_by));
  out.set_redrive_count(dead.redrive_count);
  out.set_redriven_from(std::move(dead.redriven_from));
  out.set_truncated(std::move(dead.truncated));
  out.set_decode_error(std::move(dead.decode_error));
  out.set_dialect(std::move(dead.dialect));
  return out;
}

size_t DeadLetterBytes(const dlq::DeadLetter& dead) { return ToProto(dead).ByteSizeLong(); }

dlq::ListQuery FromProto(const v1::ListDeadLettersRequest& request) {
  dlq::ListQuery query;
  query.filter = FromProto(request.filter());
  query.page_size = request.page_size();
  query.page_token = request.page_token();
  query.max_value_bytes = request.max_value_bytes();
  return query;
}

v1::ListDeadLettersResponse ToProto(dlq::ListPage page) {
  v1::ListDeadLettersResponse response;
  for (dlq::DeadLetter& dead : page.records) *response.add_records() = ToProto(std::move(dead));
  response.set_next_page_token(std::move(page.next_page_token));
  response.set_scanned(page.scanned);
  response.set_topic(std::move(page.topic));
  return response;
}

dlq::PurgeRequest FromProto(const v1::PurgeDeadLettersRequest& request) {
  dlq::PurgeRequest out;
  for (const auto& [p, offset] : request.up_to()) out.up_to.emplace_back(p, offset);
  out.all = request.all();
  out.delete_records = request.delete_records();
  return out;
}

v1::PurgeDeadLettersResponse ToProto(const dlq::PurgeResult& result) {
  v1::PurgeDeadLettersResponse response;
  response.set_topic(result.topic);
  for (const dlq::PartitionPurge& p : result.partitions) {
    v1::PartitionPurge* out = response.add_partitions();
    out->set_partition(p.partition);
    out->set_from(p.from);
    out->set_to(p.to);
    out->set_deleted(p.deleted);
  }
  return response;
}

dlq::RedriveRequest FromProto(const v1::StartRedriveRequest& request) {
  dlq::RedriveRequest out;
  out.request_id = request.request_id();
  out.has_filter = request.has_filter();
  out.filter = FromProto(request.filter());
  out.target_topic = request.target_topic();
  out.rate_per_s = request.rate_per_s();
  out.reset_attempts = request.reset_attempts();
  out.dry_run = request.dry_run();
  out.max_redrives = request.max_redrives();
  return out;
}

v1::StartRedriveRequest ToProto(const dlq::RedriveRequest& request) {
  v1::StartRedriveRequest out;
  out.set_request_id(request.request_id);
  if (request.has_filter) *out.mutable_filter() = ToProto(request.filter);
  out.set_target_topic(request.target_topic);
  out.set_rate_per_s(request.rate_per_s);
  out.set_reset_attempts(request.reset_attempts);
  out.set_dry_run(request.dry_run);
  out.set_max_redrives(request.max_redrives);
  return out;
}

dlq::RedriveCheckpoint FromProto(const v1::RedriveCheckpoint& checkpoint) {
  return {checkpoint.scanned(), checkpoint.matched(),    checkpoint.redriven(),
          checkpoint.skipped(), checkpoint.sent_twice(), checkpoint.commit_time_unix_ms()};
}

v1::RedriveCheckpoint ToProto(const dlq::RedriveCheckpoint& checkpoint) {
  v1::RedriveCheckpoint out;
  out.set_scanned(checkpoint.scanned);
  out.set_matched(checkpoint.matched);
  out.set_redriven(checkpoint.redriven);
  out.set_skipped(checkpoint.skipped);
  out.set_sent_twice(checkpoint.sent_twice);
  out.set_commit_time_unix_ms(checkpoint.commit_time_unix_ms);
  return out;
}

dlq::RedriveSpec FromProto(const v1::RedriveSpec& spec) {
  dlq::RedriveSpec out;
  out.operation_id = spec.operation_id();
  out.dead_letter_topic = spec.dead_letter_topic();
  out.request = FromProto(spec.request());
  out.end_offset = spec.end_offset();
  out.create_time_unix_ms = spec.create_time_unix_ms();
  out.started_by = spec.started_by();
  if (spec.has_checkpoint()) out.checkpoint = FromProto(spec.checkpoint());
  return out;
}

v1::RedriveSpec ToProto(const dlq::RedriveSpec& spec) {
  v1::RedriveSpec out;
  out.set_operation_id(spec.operation_id);
  out.set_dead_letter_topic(spec.dead_letter_topic);
  *out.mutable_request() = ToProto(spec.request);
  out.set_end_offset(spec.end_offset);
  out.set_create_time_unix_ms(spec.create_time_unix_ms);
  out.set_started_by(spec.started_by);
  if (spec.checkpoint.has_value()) *out.mutable_checkpoint() = ToProto(*spec.checkpoint);
  return out;
}

void ToProto(const dlq::RedriveProgress& progress, v1::RedriveProgress& out) {
  out.set_scanned(progress.scanned);
  out.set_matched(progress.matched);
  out.set_redriven(progress.redriven);
  out.set_skipped(progress.skipped);
  out.set_rate_per_s(progress.rate_per_s);
  out.set_eta_ms(progress.eta_ms);
  out.set_total(progress.total);
  out.set_dry_run(progress.dry_run);
  out.set_resumed(progress.resumed);
  out.set_sent_twice(progress.sent_twice);
}

void ToProto(const dlq::RedriveOperationProgress& progress, v1::OperationProgress& out) {
  ToProto(progress.redrive, *out.mutable_redrive());
  out.set_done(progress.done);
  out.set_total(progress.total);
  out.set_unit(progress.unit);
  out.set_description(progress.description);
}

void ToProto(const dlq::RedriveResult& result, v1::RedriveResult& out) {
  ToProto(result.progress, *out.mutable_progress());
  for (const dlq::RedriveCount& count : result.by_partition) {
    v1::RedriveCount* c = out.add_by_partition();
    c->set_key(count.key);
    c->set_matched(count.matched);
    c->set_skipped(count.skipped);
  }
  for (const dlq::RedriveCount& count : result.by_reason) {
    v1::RedriveCount* c = out.add_by_reason();
    c->set_key(count.key);
    c->set_matched(count.matched);
    c->set_skipped(count.skipped);
  }
  out.set_target(result.target);
  out.set_group(result.group);
}

std::string SpecJson(const dlq::RedriveSpec& spec) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(ToProto(spec), &out, options);
  return out;
}

std::optional<dlq::RedriveSpec> ParseSpec(const std::string& json) {
  v1::RedriveSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(json, &spec, options).ok()) return std::nullopt;
  if (spec.operation_id().empty() || spec.dead_letter_topic().empty()) return std::nullopt;
  return FromProto(spec);
}

std::string DescribeFilter(const dlq::DeadLetterFilter& filter) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(ToProto(filter), &out, options);
  return out;
}

dlq::RedriveSpecCodec SpecCodec() { return {SpecJson, ParseSpec, DescribeFilter}; }

}  // namespace retryd::control
