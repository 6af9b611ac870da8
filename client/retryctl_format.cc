#include "client/retryctl_format.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "server/common/error_reason.h"

namespace retryd::retryctl {
namespace {

// The partitions column of `status` is cut here; `--json` has them all.
constexpr size_t kMaxPartitionsWidth = 60;

// "orders:0,1,2 orders.retry:0", topics in name order.
std::string FormatPartitions(
    const google::protobuf::RepeatedPtrField<v1::TopicPartition>& partitions) {
  if (partitions.empty()) return "-";
  std::map<std::string, std::vector<int32_t>> by_topic;
  for (const v1::TopicPartition& tp : partitions) by_topic[tp.topic()].push_back(tp.partition());
  std::vector<std::string> parts;
  for (auto& [topic, numbers] : by_topic) {
    std::sort(numbers.begin(), numbers.end());
    parts.push_back(absl::StrCat(topic, ":", absl::StrJoin(numbers, ",")));
  }
  return SanitizeForTerminal(absl::StrJoin(parts, " "), kMaxPartitionsWidth);
}

std::string OnOff(bool on) { return on ? "on" : "off"; }

std::string JoinIds(const google::protobuf::RepeatedField<uint32_t>& ids) {
  return absl::StrJoin(ids, ", ");
}

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  return absl::StrFormat("%d %s", n, n == 1 ? one : many);
}

// The "totals" lines: every count of `totals` in the proto's order, under
// its label, four to a line.
constexpr size_t kTotalsPerLine = 4;
std::string FormatTotals(const v1::Totals& totals) {
  const google::protobuf::Reflection& reflection = *totals.GetReflection();
  std::vector<std::string> items;
  for (const ShownCount& count : ShownCounts(*v1::Totals::descriptor())) {
    items.push_back(absl::StrCat(count.label, " ", reflection.GetInt64(totals, count.field)));
  }
  std::string out;
  for (size_t i = 0; i < items.size(); i += kTotalsPerLine) {
    const size_t end = std::min(items.size(), i + kTotalsPerLine);
    absl::StrAppendFormat(&out, "%-14s%s%s\n", i == 0 ? "totals" : "",
                          absl::StrJoin(items.begin() + i, items.begin() + end, ", "),
                          end < items.size() ? "," : "");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message, bool one_line) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = !one_line;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  // The pretty printer ends with a newline already; the compact one not.
  if (json.empty() || json.back() != '\n') json.push_back('\n');
  return json;
}

namespace {

// `object` as compact JSON, without a newline.
std::string CompactJson(const google::protobuf::Struct& object) {
  absl::StatusOr<std::string> json = ToJson(object, /*one_line=*/true);
  if (!json.ok()) return "{}";
  if (!json->empty() && json->back() == '\n') json->pop_back();
  return *std::move(json);
}

}  // namespace

std::string ErrorJson(const absl::Status& status, std::string_view request_id) {
  google::protobuf::Struct object;
  auto& fields = *object.mutable_fields();
  fields["code"].set_number_value(static_cast<int>(status.code()));
  fields["status"].set_string_value(absl::StatusCodeToString(status.code()));
  fields["message"].set_string_value(std::string(status.message()));
  if (const std::string reason = ReasonOf(status); !reason.empty()) {
    fields["reason"].set_string_value(reason);
  }
  if (!request_id.empty()) fields["request_id"].set_string_value(std::string(request_id));
  return CompactJson(object);
}

std::string FormatError(const absl::Status& status) {
  std::string out = absl::StatusCodeToString(status.code());
  if (const std::string reason = ReasonOf(status); !reason.empty()) {
    absl::StrAppend(&out, " (", SanitizeForTerminal(reason, 64), ")");
  }
  absl::StrAppend(
      &out, ": ",
      SanitizeForTerminal(std::string_view(status.message().data(), status.message().size()), 0));
  return out;
}

std::string VersionJson(std::string_view client, std::string_view server) {
  google::protobuf::Struct object;
  auto& fields = *object.mutable_fields();
  fields["client"].set_string_value(std::string(client));
  fields["server"].set_string_value(std::string(server));
  return CompactJson(object);
}

std::string RoleName(v1::ThreadRole role) {
  switch (role) {
    case v1::THREAD_ROLE_PRIMARY:
      return "primary";
    case v1::THREAD_ROLE_RETRY:
      return "retry";
    default:
      return absl::StrCat("role", static_cast<int>(role));
  }
}

std::string ShortEnumName(const google::protobuf::EnumDescriptor& type, int number) {
  const google::protobuf::EnumValueDescriptor* value = type.FindValueByNumber(number);
  if (value == nullptr) return "";
  // The prefix is the type's name in capitals, words split by underscores:
  // ThreadState -> THREAD_STATE_.
  std::string prefix;
  for (const char c : type.name()) {
    if (absl::ascii_isupper(c) && !prefix.empty()) prefix.push_back('_');
    prefix.push_back(absl::ascii_toupper(c));
  }
  prefix.push_back('_');
  absl::string_view name = value->name();
  absl::ConsumePrefix(&name, prefix);
  return std::string(name);
}

std::string ThreadStateName(v1::ThreadState state) {
  const std::string name = ShortEnumName(*v1::ThreadState_descriptor(), state);
  return name.empty() ? absl::StrCat("STATE", static_cast<int>(state)) : name;
}

std::string OrderingName(v1::Ordering ordering, bool in_order) {
  switch (ordering) {
    case v1::ORDERING_UNSPECIFIED:
      return in_order ? "in-order" : "unordered";
    case v1::ORDERING_UNORDERED:
      return "unordered";
    case v1::ORDERING_IN_ORDER:
      return "in-order";
    case v1::ORDERING_KEY:
      return "key";
    default:
      return absl::StrCat("ordering", static_cast<int>(ordering));
  }
}

std::string FormatOrdering(v1::Ordering ordering, bool in_order, const v1::ParkedKeys& parked,
                           int64_t now_ms) {
  std::string out = OrderingName(ordering, in_order);
  if (ordering != v1::ORDERING_KEY) return out;
  if (parked.keys() == 0) return absl::StrCat(out, " (no parked keys)");
  absl::StrAppend(&out, " (", Plural(parked.keys(), "parked key", "parked keys"), ", ",
                  Plural(parked.records(), "record", "records"));
  if (parked.oldest_unix_ms() > 0) {
    absl::StrAppend(&out, ", oldest parked ", FormatElapsed(now_ms - parked.oldest_unix_ms()));
  }
  out.append(")");
  return out;
}

std::string EngineStateName(v1::EngineState state) {
  const std::string name = ShortEnumName(*v1::EngineState_descriptor(), state);
  return name.empty() ? absl::StrCat("STATE", static_cast<int>(state)) : name;
}

std::vector<ShownCount> ShownCounts(const google::protobuf::Descriptor& descriptor) {
  using google::protobuf::FieldDescriptor;
  std::vector<ShownCount> counts;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor* field = descriptor.field(i);
    if (field->is_repeated() || field->cpp_type() != FieldDescriptor::CPPTYPE_INT64) continue;
    const v1::Display& display = field->options().GetExtension(v1::display);
    counts.push_back({field,
                      display.label().empty() ? absl::StrReplaceAll(field->name(), {{"_", " "}})
                                              : display.label(),
                      display.rate_column()});
  }
  return counts;
}

std::string FormatElapsed(int64_t ms) {
  if (ms < 0) return "-";
  if (ms < 1000) return absl::StrCat(ms, "ms");
  if (ms < 60'000) return absl::StrFormat("%.1fs", static_cast<double>(ms) / 1000);
  const int64_t s = ms / 1000;
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

std::string FormatScalingEvent(const v1::ScalingEvent& event, int64_t now_ms) {
  return absl::StrCat(FormatElapsed(now_ms - event.time_unix_ms()),
                      " ago: ", event.started() ? "started" : "stopped", " retry thread ",
                      event.thread_id(), ": ", SanitizeForTerminal(event.reason(), 160));
}

std::string SanitizeForTerminal(std::string_view text, size_t max_width) {
  std::string out;
  out.reserve(std::min(text.size(), max_width == 0 ? text.size() : max_width));
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '\t') {
      out.push_back(' ');
    } else {
      out.push_back(u >= 0x20 && u < 0x7f ? c : '?');
    }
  }
  if (max_width > 0 && out.size() > max_width) {
    out.resize(max_width > 3 ? max_width - 3 : 0);
    out.append(std::min<size_t>(3, max_width), '.');
  }
  return out;
}

namespace {

const char* EvidenceText(v1::DownstreamEvidence evidence) {
  switch (evidence) {
    case v1::DOWNSTREAM_EVIDENCE_CHANNEL:
      return "its channel is not ready";
    case v1::DOWNSTREAM_EVIDENCE_HEALTH:
      return "its health service answers NOT_SERVING";
    case v1::DOWNSTREAM_EVIDENCE_REFUSALS:
      return "records refused in a row";
    default:
      return "unknown evidence";
  }
}

// One role's line under the downstream's, e.g. "retry  DOWN for 4s: records
// refused in a row; 5 waiting; 3 probes, the last 1s ago: UNAVAILABLE".
std::string FormatRoleDownstream(const v1::RoleDownstream& role, int64_t now_ms) {
  std::string out =
      absl::StrFormat("  %-12s", role.role() == v1::THREAD_ROLE_RETRY ? "retry" : "primary");
  if (role.state() == v1::DOWNSTREAM_STATE_DOWN) {
    absl::StrAppend(&out, "DOWN for ", FormatElapsed(now_ms - role.down_since_unix_ms()), ": ",
                    EvidenceText(role.evidence()));
  } else {
    out.append("up");
  }
  if (role.refused_in_a_row() > 0) {
    absl::StrAppend(&out, "; ", role.refused_in_a_row(), " refused in a row");
  }
  if (role.waiting() > 0) absl::StrAppend(&out, "; ", role.waiting(), " waiting");
  if (role.probes() > 0) {
    absl::StrAppend(&out, "; ", Plural(role.probes(), "probe", "probes"));
    if (role.last_probe_unix_ms() > 0) {
      absl::StrAppend(&out, ", the last ", FormatElapsed(now_ms - role.last_probe_unix_ms()),
                      " ago: ", SanitizeForTerminal(role.last_probe_result(), 80));
    }
  }
  if (role.state() == v1::DOWNSTREAM_STATE_DOWN && role.next_probe_unix_ms() > 0) {
    absl::StrAppend(&out, "; next probe in ",
                    FormatElapsed(std::max<int64_t>(0, role.next_probe_unix_ms() - now_ms)));
  }
  return out;
}

}  // namespace

std::string FormatDownstream(const v1::Downstream& downstream, int64_t now_ms) {
  std::string out;
  if (downstream.state() == v1::DOWNSTREAM_STATE_DOWN) {
    absl::StrAppend(&out, "DOWN for ", FormatElapsed(now_ms - downstream.down_since_unix_ms()),
                    ", intake paused, probing");
  } else {
    out = "up";
  }
  if (downstream.outages() > 0) {
    absl::StrAppend(&out, " (", Plural(downstream.outages(), "outage", "outages"), " so far)");
  }
  if (downstream.channel() != v1::DOWNSTREAM_CHANNEL_UNSPECIFIED) {
    absl::StrAppend(&out, "; channel ",
                    downstream.channel() == v1::DOWNSTREAM_CHANNEL_READY ? "ready" : "NOT ready");
  }
  if (downstream.health() != v1::DOWNSTREAM_HEALTH_STATUS_UNSPECIFIED) {
    absl::StrAppend(
        &out, "; health ",
        downstream.health() == v1::DOWNSTREAM_HEALTH_STATUS_SERVING ? "SERVING" : "NOT_SERVING");
  }
  if (downstream.state() == v1::DOWNSTREAM_STATE_DOWN && !downstream.last_error().empty()) {
    absl::StrAppend(&out, "; last error: ", SanitizeForTerminal(downstream.last_error(), 120));
  }
  // Each role's line once something happened to it.
  for (const v1::RoleDownstream& role : downstream.roles()) {
    if (role.state() != v1::DOWNSTREAM_STATE_DOWN && role.outages() == 0 && role.probes() == 0 &&
        role.refused_in_a_row() == 0 && role.waiting() == 0) {
      continue;
    }
    absl::StrAppend(&out, "\n", FormatRoleDownstream(role, now_ms));
  }
  return out;
}

// "retryd-7c9f (pod orders/retryd-7c9f), up 3h12m": which replica
// answered.
std::string FormatInstance(const v1::Instance& instance, int64_t now_ms) {
  std::string out =
      instance.host_name().empty() ? "-" : SanitizeForTerminal(instance.host_name(), 64);
  if (!instance.pod_name().empty()) {
    absl::StrAppend(&out, " (pod ",
                    instance.pod_namespace().empty()
                        ? ""
                        : absl::StrCat(SanitizeForTerminal(instance.pod_namespace(), 64), "/"),
                    SanitizeForTerminal(instance.pod_name(), 64), ")");
  }
  if (instance.start_time_unix_ms() > 0 && now_ms >= instance.start_time_unix_ms()) {
    absl::StrAppend(&out, ", up ", FormatElapsed(now_ms - instance.start_time_unix_ms()));
  }
  return out;
}

namespace {

// The lines about the whole process: engine, instance, ordering, Kafka and
// the downstream.
std::string FormatOverview(const v1::GetStatusResponse& status, int64_t now_ms) {
  std::string out;
  std::string engine = EngineStateName(status.state());
  if (!status.version().empty()) {
    absl::StrAppend(&engine, " (retryd ", SanitizeForTerminal(status.version(), 40), ")");
  }
  const std::string kafka =
      absl::StrCat(status.kafka_bootstrap_servers().empty()
                       ? "-"
                       : SanitizeForTerminal(status.kafka_bootstrap_servers(), 0),
                   status.kafka_reachable() ? " (reachable)" : " (NOT reachable)");
  absl::StrAppendFormat(&out, "%-14s%s\n", "engine", engine);
  if (status.has_instance()) {
    absl::StrAppendFormat(&out, "%-14s%s\n", "instance", FormatInstance(status.instance(), now_ms));
  }
  absl::StrAppendFormat(
      &out, "%-14s%s\n", "ordering",
      FormatOrdering(status.ordering(), status.in_order(), status.parked_keys(), now_ms));
  absl::StrAppendFormat(&out, "%-14s%s\n", "kafka", kafka);
  if (status.has_downstream()) {
    absl::StrAppendFormat(&out, "%-14s%s\n", "downstream",
                          FormatDownstream(status.downstream(), now_ms));
  }
  return out;
}

// The retry backlog, and with tiered retry topics each tier's delay,
// attempts, threads and backlog.
std::string FormatRetryBacklog(const v1::GetStatusResponse& status) {
  std::string out;
  absl::StrAppendFormat(&out, "%-14s%s\n", "retry backlog",
                        Plural(status.retry_backlog(), "record", "records"));
  if (status.retry_tiers_size() <= 1) return out;
  for (const v1::RetryTierStatus& tier : status.retry_tiers()) {
    absl::StrAppendFormat(&out, "%-14s%s: every %s, attempts %d-%d, %s, %s\n", "  tier",
                          SanitizeForTerminal(tier.topic(), 249),
                          FormatElapsed(static_cast<int64_t>(tier.delay_ms())),
                          tier.first_attempt(), tier.last_attempt(),
                          Plural(tier.thread_ids_size(), "thread", "threads"),
                          Plural(tier.backlog(), "record", "records"));
  }
  return out;
}

// The count of threads by role, with the retry threads' range, and the
// newest scaling events.
std::string FormatThreadCounts(const v1::GetStatusResponse& status, int64_t now_ms) {
  std::string out;
  int primaries = 0;
  int retries = 0;
  for (const v1::ThreadInfo& thread : status.threads()) {
    if (thread.role() == v1::THREAD_ROLE_PRIMARY) ++primaries;
    if (thread.role() == v1::THREAD_ROLE_RETRY) ++retries;
  }
  if (status.min_retry_threads() == 0 && !status.autoscale()) {
    absl::StrAppendFormat(&out, "%-14s%d: %d primary, %d retry (at most %d retry)\n", "threads",
                          status.threads_size(), primaries, retries, status.max_retry_threads());
  } else {
    absl::StrAppendFormat(&out, "%-14s%d: %d primary, %d retry (%d to %d retry, autoscale %s)\n",
                          "threads", status.threads_size(), primaries, retries,
                          status.min_retry_threads(), status.max_retry_threads(),
                          OnOff(status.autoscale()));
  }
  // The newest few: the status is a glance, not a history.
  constexpr int kShownEvents = 5;
  const int shown = std::min(status.scaling_events_size(), kShownEvents);
  for (int i = status.scaling_events_size() - shown; i < status.scaling_events_size(); ++i) {
    absl::StrAppendFormat(&out, "%-14s%s\n", "autoscale",
                          FormatScalingEvent(status.scaling_events(i), now_ms));
  }
  return out;
}

// One row per thread, by id: role, state, time in it, partitions.
std::string FormatThreadTable(const v1::GetStatusResponse& status, int64_t now_ms) {
  std::string out;
  std::vector<const v1::ThreadInfo*> threads;
  for (const v1::ThreadInfo& thread : status.threads()) threads.push_back(&thread);
  std::stable_sort(threads.begin(), threads.end(),
                   [](const auto* a, const auto* b) { return a->thread_id() < b->thread_id(); });
  absl::StrAppendFormat(&out, "\n%4s  %-7s  %-15s  %8s  %s\n", "ID", "ROLE", "STATE", "IN-STATE",
                        "PARTITIONS");
  for (const v1::ThreadInfo* thread : threads) {
    const std::string in_state = thread->state_since_unix_ms() > 0
                                     ? FormatElapsed(now_ms - thread->state_since_unix_ms())
                                     : "-";
    absl::StrAppendFormat(&out, "%4d  %-7s  %-15s  %8s  %s\n", thread->thread_id(),
                          RoleName(thread->role()), ThreadStateName(thread->state()), in_state,
                          FormatPartitions(thread->assigned_partitions()));
  }
  return out;
}

}  // namespace

std::string FormatStatus(const v1::GetStatusResponse& status, absl::Time now) {
  const int64_t now_ms = absl::ToUnixMillis(now);
  std::string out = FormatOverview(status, now_ms);
  out.append(FormatRetryBacklog(status));
  out.append(FormatTotals(status.totals()));
  out.append(FormatThreadCounts(status, now_ms));
  if (!status.threads().empty()) out.append(FormatThreadTable(status, now_ms));
  return out;
}

std::string FormatStartRetryThreads(const v1::StartRetryThreadsResponse& response) {
  if (response.thread_ids().empty()) return "started no retry threads\n";
  return absl::StrCat("started ",
                      Plural(response.thread_ids_size(), "retry thread", "retry threads"), ": ",
                      JoinIds(response.thread_ids()), "\n");
}

std::string FormatStopRetryThreads(const v1::StopRetryThreadsResponse& response) {
  if (response.stopped_thread_ids().empty()) return "no retry threads were running\n";
  return absl::StrCat("stopped ",
                      Plural(response.stopped_thread_ids_size(), "retry thread", "retry threads"),
                      ": ", JoinIds(response.stopped_thread_ids()), "\n");
}

std::string FormatSetRetryThreadCount(const v1::SetRetryThreadCountResponse& response) {
  std::string out;
  if (!response.started_thread_ids().empty()) {
    absl::StrAppend(&out, "started ",
                    Plural(response.started_thread_ids_size(), "retry thread", "retry threads"),
                    ": ", JoinIds(response.started_thread_ids()), "\n");
  }
  if (!response.stopped_thread_ids().empty()) {
    absl::StrAppend(&out, "stopped ",
                    Plural(response.stopped_thread_ids_size(), "retry thread", "retry threads"),
                    ": ", JoinIds(response.stopped_thread_ids()), "\n");
  }
  if (out.empty()) out = "no change: ";
  if (response.running_thread_ids().empty()) return out + "no retry threads running\n";
  return absl::StrCat(out,
                      Plural(response.running_thread_ids_size(), "retry thread", "retry threads"),
                      " running: ", JoinIds(response.running_thread_ids()), "\n");
}

namespace {

// What a switch of the ordering mode did besides switching.
template <typename Response>
std::string FormatSwitch(const Response& response) {
  std::string out;
  if (!response.stopped_thread_ids().empty() || response.drained_records() > 0) {
    absl::StrAppend(&out, "drained ",
                    Plural(response.drained_records(), "retry record", "retry records"));
    if (!response.stopped_thread_ids().empty()) {
      absl::StrAppend(&out, " and stopped retry threads ", JoinIds(response.stopped_thread_ids()));
    }
    out.append("\n");
  }
  if (!response.started_thread_ids().empty()) {
    absl::StrAppend(&out, "started ",
                    Plural(response.started_thread_ids_size(), "retry thread", "retry threads"),
                    " to read the retry topic: ", JoinIds(response.started_thread_ids()), "\n");
  }
  return out;
}

}  // namespace

std::string FormatSetInOrder(const v1::SetInOrderResponse& response) {
  return absl::StrCat("in_order: ", OnOff(response.in_order()), "\n", FormatSwitch(response));
}

std::string FormatSetOrderingMode(const v1::SetOrderingModeResponse& response) {
  std::string out = absl::StrCat("ordering: ", OrderingName(response.mode(), false), "\n");
  if (response.mode() == v1::ORDERING_KEY) {
    absl::StrAppend(&out, "found ", Plural(response.parked_keys(), "parked key", "parked keys"),
                    " in the retry topic\n");
  }
  return out + FormatSwitch(response);
}

}  // namespace retryd::retryctl
