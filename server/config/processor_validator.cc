// The processor section: what processes records, simulate or grpc.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/common/grpc_code_names.h"
#include "server/config/section_validators.h"
#include "server/engine/api/options.h"

namespace retryd::config_validation {
namespace {

constexpr uint64_t kMaxLatencyMs = 60'000;

// probe_max_ms: defaults to 30 s (or probe_initial_ms if more), at least
// probe_initial_ms. After probe_initial_ms is checked.
void CheckProbeMax(Checker& checker, v1::GrpcProcessorConfig& grpc, const Node& node) {
  const uint64_t initial = grpc.probe_initial_ms();
  const bool initial_ok = InBounds(node.Field("probe_initial_ms"), initial);
  const uint64_t max_probe_max_ms = BoundsOf(node.Field("probe_max_ms")).max();
  if (grpc.probe_max_ms() == 0 && !node.Written("probe_max_ms")) {
    constexpr uint32_t kProbeMax = engine::kProbeMaxMsDefault;
    grpc.set_probe_max_ms(initial_ok ? std::max<uint32_t>(kProbeMax, grpc.probe_initial_ms())
                                     : kProbeMax);
  } else if (grpc.probe_max_ms() < 1 || grpc.probe_max_ms() > max_probe_max_ms) {
    checker.Error(
        node, "probe_max_ms",
        absl::StrCat("must be between 1 and ", max_probe_max_ms, ", got ", grpc.probe_max_ms()));
  } else if (initial_ok && grpc.probe_max_ms() < initial) {
    checker.Error(node, "probe_max_ms",
                  absl::StrCat("must be at least probe_initial_ms (", initial, "), got ",
                               grpc.probe_max_ms()));
  }
}

void CheckStatusMap(Checker& checker, const v1::GrpcProcessorConfig& grpc, const Node& node) {
  // Sorted, so that errors come in a stable order.
  const std::map<std::string, v1::StatusOutcome> status_map(grpc.status_map().begin(),
                                                            grpc.status_map().end());
  for (const auto& [code, outcome] : status_map) {
    const std::string path = absl::StrCat(node.Path("status_map"), "[", Quote(code), "]");
    const int line = MapEntryLine(node, grpc, "status_map", code);
    const std::optional<int> number = GrpcCodeNumber(std::string_view(code));
    if (!number.has_value()) {
      checker.Add(line, path,
                  "not a gRPC status code name; use the name in capitals, e.g. \"NOT_FOUND\"");
    } else if (*number == 0) {
      checker.Add(line, path, "OK always means success and cannot be changed");
    } else if (outcome != v1::STATUS_OUTCOME_SUCCESS && outcome != v1::STATUS_OUTCOME_RETRIABLE &&
               outcome != v1::STATUS_OUTCOME_DEAD_LETTER) {
      checker.Add(line, path,
                  "say what the code means: STATUS_OUTCOME_SUCCESS, STATUS_OUTCOME_RETRIABLE or "
                  "STATUS_OUTCOME_DEAD_LETTER");
    }
  }
}

void CheckGrpc(Checker& checker, v1::GrpcProcessorConfig& grpc, const Node& node) {
  if (grpc.target().empty()) {
    checker.Error(node, "target",
                  "required: the downstream's gRPC address, e.g. target: \"localhost:50061\"");
  }
  checker.Number(grpc, node, "deadline_ms");
  checker.Number(grpc, node, "max_concurrent_calls");
  checker.Number(grpc, node, "outage_after");
  checker.Number(grpc, node, "probe_initial_ms");
  CheckProbeMax(checker, grpc, node);
  checker.Number(grpc, node, "max_response_bytes");
  checker.Number(grpc, node, "health_check_interval_ms");
  if (!grpc.token_file().empty() && !grpc.token_env().empty()) {
    checker.Error(node, "token_env", "set either token_file or token_env, not both");
  }
  if (grpc.has_tls() && grpc.tls().cert_file().empty() != grpc.tls().key_file().empty()) {
    const Node tls = node.Child("tls");
    checker.Error(tls, grpc.tls().cert_file().empty() ? "cert_file" : "key_file",
                  "mutual TLS needs both cert_file and key_file; set both or neither");
  }
  CheckStatusMap(checker, grpc, node);
}

// The latencies and failure rates of simulate (not its rules).
void CheckSimulateRates(Checker& checker, const v1::SimulateConfig& simulate, const Node& node) {
  for (absl::string_view field : {"latency_ms", "latency_min_ms", "latency_max_ms"}) {
    const uint64_t value = GetUnsigned(simulate, node.Field(field));
    if (value > kMaxLatencyMs) {
      checker.Error(node, field, absl::StrCat("must be at most ", kMaxLatencyMs, ", got ", value));
    }
  }
  const bool has_range = simulate.latency_min_ms() > 0 || simulate.latency_max_ms() > 0;
  if (simulate.latency_ms() > 0 && has_range) {
    checker.Error(
        node, "latency_ms",
        "set either a fixed latency_ms or the range latency_min_ms..latency_max_ms, not both");
  } else if (simulate.latency_min_ms() > simulate.latency_max_ms()) {
    checker.Error(node, "latency_min_ms",
                  absl::StrCat("must not exceed latency_max_ms (", simulate.latency_max_ms(),
                               "), got ", simulate.latency_min_ms()));
  }
  bool rates_ok = true;
  for (absl::string_view field : {"transient_failure_rate", "permanent_failure_rate"}) {
    const double rate = simulate.GetReflection()->GetDouble(simulate, node.Field(field));
    if (!(rate >= 0 && rate <= 1)) {
      checker.Error(node, field, absl::StrCat("must be between 0 and 1, got ", rate));
      rates_ok = false;
    }
  }
  if (rates_ok && simulate.transient_failure_rate() + simulate.permanent_failure_rate() > 1) {
    checker.Error(
        node, "transient_failure_rate",
        absl::StrCat("together with permanent_failure_rate (", simulate.permanent_failure_rate(),
                     ") must not exceed 1, got ", simulate.transient_failure_rate()));
  }
}

void CheckSimulate(Checker& checker, const v1::SimulateConfig& simulate, const Node& node) {
  CheckSimulateRates(checker, simulate, node);
  for (int i = 0; i < simulate.rule_size(); ++i) {
    const v1::SimulateConfig::Rule& rule = simulate.rule(i);
    const Node rule_node = node.Child("rule", i);
    if (rule.key_prefix().empty()) {
      checker.Add(
          rule_node.Line("key_prefix") >= 0 ? rule_node.Line("key_prefix") : node.Line("rule", i),
          rule_node.Path("key_prefix"),
          "required: the key prefix this rule matches, e.g. key_prefix: \"perm-\"");
    }
    if (rule.permanent() && rule.fail_attempts() > 0) {
      checker.Error(rule_node, "fail_attempts",
                    "a rule either fails permanently or fails its first fail_attempts attempts; "
                    "set permanent: true or fail_attempts, not both");
    }
  }
}

}  // namespace

void ValidateProcessor(Checker& checker, v1::Config& config) {
  constexpr absl::string_view kExample =
      "e.g. processor { simulate {} } or processor { grpc { target: \"localhost:50061\" } }";
  const Node& root = checker.root();
  if (!config.has_processor()) {
    checker.Error(root, "processor",
                  absl::StrCat("required: say what processes records, ", kExample));
    return;
  }
  const Node node = root.Child("processor");
  switch (config.processor().kind_case()) {
    case v1::ProcessorConfig::kSimulate:
      CheckSimulate(checker, config.processor().simulate(), node.Child("simulate"));
      return;
    case v1::ProcessorConfig::kGrpc:
      CheckGrpc(checker, *config.mutable_processor()->mutable_grpc(), node.Child("grpc"));
      return;
    case v1::ProcessorConfig::KIND_NOT_SET:
      break;
  }
  checker.Add(root.Line("processor"), "processor",
              absl::StrCat("choose a processor kind, ", kExample));
}

std::optional<uint64_t> LongestCallMs(const v1::Config& config) {
  switch (config.processor().kind_case()) {
    case v1::ProcessorConfig::kGrpc: {
      const uint64_t deadline_ms = config.processor().grpc().deadline_ms();
      if (!InBounds(v1::GrpcProcessorConfig::descriptor()->FindFieldByName("deadline_ms"),
                    deadline_ms)) {
        return std::nullopt;
      }
      return deadline_ms;
    }
    case v1::ProcessorConfig::kSimulate: {
      const v1::SimulateConfig& simulate = config.processor().simulate();
      const uint64_t latency_ms = std::max(simulate.latency_ms(), simulate.latency_max_ms());
      if (latency_ms > kMaxLatencyMs) return std::nullopt;
      return latency_ms;
    }
    case v1::ProcessorConfig::KIND_NOT_SET:
      break;
  }
  return std::nullopt;
}

}  // namespace retryd::config_validation
