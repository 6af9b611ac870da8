#include "server/control/dead_letter_convert.h"

#include <google/protobuf/util/json_util.h>

#include <utility>

namespace retryd::control {

dlq::ListQuery FromProto(const v1::ListDeadLettersRequest& request) {
  dlq::ListQuery query;
  query.filter = request.filter();
  query.page_size = request.page_size();
  query.page_token = request.page_token();
  query.max_value_bytes = request.max_value_bytes();
  return query;
}

v1::ListDeadLettersResponse ToProto(dlq::ListPage page) {
  v1::ListDeadLettersResponse response;
  for (v1::DeadLetter& dead : page.records) *response.add_records() = std::move(dead);
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
  out.filter = request.filter();
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
  if (request.has_filter) *out.mutable_filter() = request.filter;
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

std::string DescribeFilter(const v1::DeadLetterFilter& filter) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(filter, &out, options);
  return out;
}

dlq::RedriveSpecCodec SpecCodec() { return {SpecJson, ParseSpec, DescribeFilter}; }

}  // namespace retryd::control
