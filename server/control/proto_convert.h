// Conversions from the engine's types to the control API's messages.
//
// Thread-safe: pure functions.
#ifndef RETRYD_SERVER_CONTROL_PROTO_CONVERT_H_
#define RETRYD_SERVER_CONTROL_PROTO_CONVERT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "retryd/v1/config.pb.h"
#include "retryd/v1/control.pb.h"
#include "server/engine/api/counters.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/options.h"
#include "server/engine/api/parked_keys.h"
#include "server/engine/metrics_sampler.h"
#include "server/engine/stats/latency_histogram.h"
#include "server/engine/stats/thread_stats.h"
#include "server/model/record.h"

namespace retryd::control {

v1::ThreadRole ToProto(engine::ThreadRole role);
v1::ThreadState ToProto(engine::ThreadState state);
// kCreated has no counterpart in the API (the control server starts after
// the engine): ENGINE_STATE_UNSPECIFIED.
v1::EngineState ToProto(engine::EngineState state);
v1::Ordering ToProto(engine::Ordering ordering);
// The engine's mode for a request's; nullopt for ORDERING_UNSPECIFIED or a
// number this build does not know.
std::optional<engine::Ordering> FromProto(v1::Ordering ordering);
// The parked keys of key order; oldest_unix_ms 0 if none is parked.
void ToProto(const engine::ParkedKeysSummary& parked, v1::ParkedKeys& out);
void ToProto(const engine::LatencySummary& summary, v1::LatencySummary& out);
void ToProto(const std::vector<TopicPartition>& partitions,
             google::protobuf::RepeatedPtrField<v1::TopicPartition>& out);
// Sets each counter that `out` has a field for: the int64 field of the
// counter's name (kCounterFields). The others are not part of that message.
void ToProto(const engine::Counters& counters, google::protobuf::Message& out);
// Sets each thread gauge (kThreadGaugeFields) in its field of
// retryd.v1.ThreadMetrics, by name as for the counters.
void GaugesToProto(const engine::ThreadSample& thread, v1::ThreadMetrics& out);
void ToProto(const engine::EngineTotals& totals, v1::Totals& out);
void ToProto(const engine::DownstreamSnapshot& downstream, v1::Downstream& out);
v1::DownstreamEvidence ToProto(engine::DownstreamEvidence evidence);
void ToProto(const engine::ThreadStats& stats, v1::ThreadInfo& out);
// The retry tiers (normalized options) with each one's backlog (by index;
// missing ones left 0) and the retry threads of `threads` that read it.
void ToProto(const std::vector<engine::RetryTier>& tiers, const std::vector<int64_t>& backlogs,
             const std::vector<std::shared_ptr<const engine::ThreadStats>>& threads,
             google::protobuf::RepeatedPtrField<v1::RetryTierStatus>& out);
void ToProto(const std::vector<engine::ScalingEvent>& events,
             google::protobuf::RepeatedPtrField<v1::ScalingEvent>& out);
v1::InFlightState ToProto(engine::InFlightState state);
// `now_ms` (Unix ms) is what age_ms is measured to.
void ToProto(const engine::InFlightRecord& record, int64_t now_ms, v1::InFlightRecord& out);

// `config` as GetStatus shows it: a secret librdkafka setting (see
// kafka::IsSecretProperty) in kafka.properties keeps its key, its value
// becomes "<redacted>". The config loader refuses such settings; this holds
// for options built any other way. properties_from_env and
// properties_from_file hold variable names and paths, shown as they are.
v1::Config WithoutSecrets(v1::Config config);

}  // namespace retryd::control

#endif  // RETRYD_SERVER_CONTROL_PROTO_CONVERT_H_
