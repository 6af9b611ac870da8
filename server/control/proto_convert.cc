#include "server/control/proto_convert.h"

#include <string>

#include "absl/time/time.h"
#include "server/kafka/properties.h"

namespace retryd::control {

v1::ThreadRole ToProto(engine::ThreadRole role) {
  switch (role) {
    case engine::ThreadRole::kPrimary:
      return v1::THREAD_ROLE_PRIMARY;
    case engine::ThreadRole::kRetry:
      return v1::THREAD_ROLE_RETRY;
  }
  return v1::THREAD_ROLE_UNSPECIFIED;
}

v1::ThreadState ToProto(engine::ThreadState state) {
  switch (state) {
    case engine::ThreadState::kStarting:
      return v1::THREAD_STATE_STARTING;
    case engine::ThreadState::kRunning:
      return v1::THREAD_STATE_RUNNING;
    case engine::ThreadState::kIdle:
      return v1::THREAD_STATE_IDLE;
    case engine::ThreadState::kWaitingBackoff:
      return v1::THREAD_STATE_WAITING_BACKOFF;
    case engine::ThreadState::kPaused:
      return v1::THREAD_STATE_PAUSED;
    case engine::ThreadState::kWaitingDownstream:
      return v1::THREAD_STATE_WAITING_DOWNSTREAM;
    case engine::ThreadState::kStopping:
      return v1::THREAD_STATE_STOPPING;
    case engine::ThreadState::kStopped:
      return v1::THREAD_STATE_STOPPED;
    case engine::ThreadState::kFailed:
      return v1::THREAD_STATE_FAILED;
  }
  return v1::THREAD_STATE_UNSPECIFIED;
}

v1::EngineState ToProto(engine::EngineState state) {
  switch (state) {
    case engine::EngineState::kCreated:
      return v1::ENGINE_STATE_UNSPECIFIED;
    case engine::EngineState::kRunning:
      return v1::ENGINE_STATE_RUNNING;
    case engine::EngineState::kDraining:
      return v1::ENGINE_STATE_DRAINING;
    case engine::EngineState::kStopping:
      return v1::ENGINE_STATE_STOPPING;
    case engine::EngineState::kStopped:
      return v1::ENGINE_STATE_STOPPED;
  }
  return v1::ENGINE_STATE_UNSPECIFIED;
}

v1::Ordering ToProto(engine::Ordering ordering) {
  switch (ordering) {
    case engine::Ordering::kUnordered:
      return v1::ORDERING_UNORDERED;
    case engine::Ordering::kInOrder:
      return v1::ORDERING_IN_ORDER;
    case engine::Ordering::kKey:
      return v1::ORDERING_KEY;
  }
  return v1::ORDERING_UNSPECIFIED;
}

std::optional<engine::Ordering> FromProto(v1::Ordering ordering) {
  switch (ordering) {
    case v1::ORDERING_UNORDERED:
      return engine::Ordering::kUnordered;
    case v1::ORDERING_IN_ORDER:
      return engine::Ordering::kInOrder;
    case v1::ORDERING_KEY:
      return engine::Ordering::kKey;
    default:
      return std::nullopt;
  }
}

void ToProto(const engine::ParkedKeysSummary& parked, v1::ParkedKeys& out) {
  out.set_keys(parked.keys);
  out.set_records(parked.records);
  out.set_oldest_unix_ms(parked.keys > 0 && parked.oldest != absl::InfiniteFuture()
                             ? absl::ToUnixMillis(parked.oldest)
                             : 0);
}

void ToProto(const engine::LatencySummary& summary, v1::LatencySummary& out) {
  out.set_count(summary.count);
  out.set_p50_ms(summary.p50_ms);
  out.set_p99_ms(summary.p99_ms);
  out.set_max_ms(summary.max_ms);
}

void ToProto(const std::vector<TopicPartition>& partitions,
             google::protobuf::RepeatedPtrField<v1::TopicPartition>& out) {
  out.Reserve(static_cast<int>(partitions.size()));
  for (const TopicPartition& tp : partitions) {
    v1::TopicPartition* p = out.Add();
    p->set_topic(tp.topic);
    p->set_partition(tp.partition);
  }
}

namespace {

// Sets the int64 field `name` of `out`, if it has one.
void SetInt64ByName(const char* name, int64_t value, google::protobuf::Message& out) {
  using google::protobuf::FieldDescriptor;
  const FieldDescriptor* field = out.GetDescriptor()->FindFieldByName(name);
  if (field == nullptr || field->is_repeated() ||
      field->cpp_type() != FieldDescriptor::CPPTYPE_INT64) {
    return;
  }
  out.GetReflection()->SetInt64(&out, field, value);
}

}  // namespace

void ToProto(const engine::Counters& counters, google::protobuf::Message& out) {
  // By name, so that the protos keep their flat fields and a new counter
  // needs no code here.
  for (const engine::CounterField& counter : engine::kCounterFields) {
    SetInt64ByName(counter.name, counters.*counter.member, out);
  }
}

void GaugesToProto(const engine::ThreadSample& thread, v1::ThreadMetrics& out) {
  for (const engine::ThreadGaugeField& gauge : engine::kThreadGaugeFields) {
    SetInt64ByName(gauge.name, thread.*gauge.member, out);
  }
}

void ToProto(const engine::EngineTotals& totals, v1::Totals& out) {
  ToProto(static_cast<const engine::Counters&>(totals), out);
  out.set_consumed(totals.consumed);
  out.set_in_flight(totals.in_flight);
}

void ToProto(const engine::ThreadStats& stats, v1::ThreadInfo& out) {
  out.set_thread_id(static_cast<uint32_t>(stats.id()));
  out.set_role(ToProto(stats.role()));
  out.set_state(ToProto(stats.state()));
  out.set_state_since_unix_ms(stats.state_since_ms());
  ToProto(stats.partitions(), *out.mutable_assigned_partitions());
  out.set_group_id(stats.group_id());
  out.set_group_member_id(stats.group_member_id());
}

void ToProto(const std::vector<engine::RetryTier>& tiers, const std::vector<int64_t>& backlogs,
             const std::vector<std::shared_ptr<const engine::ThreadStats>>& threads,
             google::protobuf::RepeatedPtrField<v1::RetryTierStatus>& out) {
  out.Clear();
  int first = 2;  // Attempt 1 is the primary's.
  for (size_t i = 0; i < tiers.size(); ++i) {
    v1::RetryTierStatus* t = out.Add();
    t->set_topic(tiers[i].topic);
    t->set_delay_ms(static_cast<uint64_t>(tiers[i].delay_ms));
    t->set_max_attempts(static_cast<uint32_t>(tiers[i].max_attempts));
    if (tiers[i].max_attempts > 0) {
      t->set_first_attempt(static_cast<uint32_t>(first));
      t->set_last_attempt(static_cast<uint32_t>(first + tiers[i].max_attempts - 1));
    }
    first += tiers[i].max_attempts;
    for (const auto& stats : threads) {
      if (stats->role() == engine::ThreadRole::kRetry && stats->tier() == static_cast<int>(i)) {
        t->add_thread_ids(static_cast<uint32_t>(stats->id()));
      }
    }
    if (i < backlogs.size()) t->set_backlog(backlogs[i]);
  }
}

v1::Config WithoutSecrets(v1::Config config) {
  for (auto& [key, value] : *config.mutable_kafka()->mutable_properties()) {
    if (kafka::IsSecretProperty(key)) value = std::string(kafka::kRedacted);
  }
  return config;
}

void ToProto(const std::vector<engine::ScalingEvent>& events,
             google::protobuf::RepeatedPtrField<v1::ScalingEvent>& out) {
  out.Clear();
  for (const engine::ScalingEvent& event : events) {
    v1::ScalingEvent* e = out.Add();
    e->set_time_unix_ms(event.time_ms);
    e->set_thread_id(static_cast<uint32_t>(event.thread_id));
    e->set_started(event.started);
    e->set_reason(event.reason);
  }
}

void ToProto(const engine::DownstreamSnapshot& downstream, v1::Downstream& out) {
  out.set_state(downstream.down ? v1::DOWNSTREAM_STATE_DOWN : v1::DOWNSTREAM_STATE_UP);
  out.set_consecutive_unavailable(downstream.consecutive_unavailable);
  out.set_outages(downstream.outages);
  out.set_last_error(downstream.last_error);
  if (downstream.down) {
    out.set_down_since_unix_ms(absl::ToUnixMillis(downstream.since));
    out.set_next_probe_unix_ms(absl::ToUnixMillis(downstream.next_probe));
  }
  switch (downstream.health.channel) {
    case engine::DownstreamHealth::Channel::kReady:
      out.set_channel(v1::DOWNSTREAM_CHANNEL_READY);
      break;
    case engine::DownstreamHealth::Channel::kNotReady:
      out.set_channel(v1::DOWNSTREAM_CHANNEL_NOT_READY);
      break;
    case engine::DownstreamHealth::Channel::kUnknown:
      break;
  }
  switch (downstream.health.serving) {
    case engine::DownstreamHealth::Serving::kServing:
      out.set_health(v1::DOWNSTREAM_HEALTH_STATUS_SERVING);
      break;
    case engine::DownstreamHealth::Serving::kNotServing:
      out.set_health(v1::DOWNSTREAM_HEALTH_STATUS_NOT_SERVING);
      break;
    case engine::DownstreamHealth::Serving::kUnknown:
      break;
  }
  for (const engine::DownstreamRoleSnapshot& role : downstream.roles) {
    v1::RoleDownstream& r = *out.add_roles();
    r.set_role(ToProto(role.role));
    r.set_state(role.down ? v1::DOWNSTREAM_STATE_DOWN : v1::DOWNSTREAM_STATE_UP);
    r.set_evidence(ToProto(role.evidence));
    if (role.since != absl::InfinitePast())
      r.set_down_since_unix_ms(absl::ToUnixMillis(role.since));
    r.set_refused_in_a_row(role.refused_in_a_row);
    r.set_outages(role.outages);
    r.set_waiting(role.waiting);
    r.set_probes(role.probes);
    if (role.last_probe != absl::InfinitePast()) {
      r.set_last_probe_unix_ms(absl::ToUnixMillis(role.last_probe));
    }
    r.set_last_probe_result(role.last_probe_result);
    if (role.down) r.set_next_probe_unix_ms(absl::ToUnixMillis(role.next_probe));
  }
}

v1::DownstreamEvidence ToProto(engine::DownstreamEvidence evidence) {
  switch (evidence) {
    case engine::DownstreamEvidence::kChannel:
      return v1::DOWNSTREAM_EVIDENCE_CHANNEL;
    case engine::DownstreamEvidence::kHealth:
      return v1::DOWNSTREAM_EVIDENCE_HEALTH;
    case engine::DownstreamEvidence::kRefusals:
      return v1::DOWNSTREAM_EVIDENCE_REFUSALS;
    case engine::DownstreamEvidence::kNone:
      break;
  }
  return v1::DOWNSTREAM_EVIDENCE_UNSPECIFIED;
}

v1::InFlightState ToProto(engine::InFlightState state) {
  switch (state) {
    case engine::InFlightState::kInCall:
      return v1::IN_FLIGHT_STATE_IN_CALL;
    case engine::InFlightState::kWaitingDue:
      return v1::IN_FLIGHT_STATE_WAITING_DUE;
    case engine::InFlightState::kWaitingBehind:
      return v1::IN_FLIGHT_STATE_WAITING_BEHIND;
    case engine::InFlightState::kDeferred:
      return v1::IN_FLIGHT_STATE_DEFERRED;
    case engine::InFlightState::kParked:
      return v1::IN_FLIGHT_STATE_PARKED;
  }
  return v1::IN_FLIGHT_STATE_UNSPECIFIED;
}

void ToProto(const engine::InFlightRecord& record, int64_t now_ms, v1::InFlightRecord& out) {
  out.set_topic(record.topic);
  out.set_partition(record.partition);
  out.set_offset(record.offset);
  out.set_has_key(record.key.has_value());
  if (record.key.has_value()) out.set_key(*record.key);
  out.set_state(ToProto(record.state));
  out.set_thread_id(static_cast<uint32_t>(record.thread_id));
  out.set_role(ToProto(record.role));
  out.mutable_read_from()->set_topic(record.read_from.topic);
  out.mutable_read_from()->set_partition(record.read_from.partition);
  out.set_read_offset(record.read_offset);
  out.set_attempt(record.attempt);
  out.set_due_unix_ms(record.due_ms);
  out.set_since_unix_ms(record.since_ms);
  out.set_age_ms(std::max<int64_t>(0, now_ms - record.since_ms));
  out.set_last_error(record.last_error);
}

}  // namespace retryd::control
