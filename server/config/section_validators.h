// The config loader's validators, one per section of retryd.v1.Config. Each
// checks its fields, reports every problem through the Checker, and fills in
// the defaults of its section in place, so later validators see them.
//
// ValidateConfig (config_loader.cc) calls them in a fixed order, which is
// the order of the errors: listen addresses, kafka, topics, primary_threads,
// ordering, retry, processor, commit_interval_ms, max_in_flight,
// max_held_bytes, shutdown_timeout_ms, liveness_stall_ms, control,
// embedded, dead_letter_dialects. The dependencies: retry reads the
// resolved ordering; liveness_stall_ms reads the processor's and
// shutdown_timeout_ms's values; control reads listen_address's default.
//
// For config_loader.cc only; stateless between calls, used by one thread.
#ifndef RETRYD_SERVER_CONFIG_SECTION_VALIDATORS_H_
#define RETRYD_SERVER_CONFIG_SECTION_VALIDATORS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "retryd/v1/config.pb.h"
#include "server/config/validation_context.h"

namespace retryd::config_validation {

// listen_address (defaulted) and metrics_address (listen_validator.cc).
void ValidateListenAddresses(Checker& checker, v1::Config& config);
// The control section's addresses; its token and TLS files are read and
// checked where they are used (control_config.h). listen_validator.cc.
void ValidateControl(Checker& checker, const v1::Config& config);

// The kafka section; returns the librdkafka properties of its three maps,
// resolved (values read from the environment and from files).
// kafka_validator.cc.
std::map<std::string, std::string> ValidateKafka(Checker& checker, const v1::KafkaConfig& kafka);

// group_id and every topic: input, retry (or the tiers'), dead-letter and
// output, each a valid name and each used once; fills in the "<input>.retry"
// and "<input>.dlq" defaults. topics_validator.cc.
void ValidateTopics(Checker& checker, v1::Config& config);

// Resolves `ordering` and the older `in_order` into one mode, written back
// into both. retry_validator.cc.
void ValidateOrdering(Checker& checker, v1::Config& config);
// The retry section but its topics: threads, autoscale, attempts, tiers and
// backoff. After ValidateOrdering. retry_validator.cc.
void ValidateRetry(Checker& checker, v1::Config& config);

// The processor section: simulate or grpc. processor_validator.cc.
void ValidateProcessor(Checker& checker, v1::Config& config);
// The longest a processor call may take, in ms, as the config says: nullopt
// when the processor section is unusable or out of its range (reported
// already). processor_validator.cc.
std::optional<uint64_t> LongestCallMs(const v1::Config& config);

// max_held_bytes (limits_validator.cc).
void ValidateMaxHeldBytes(Checker& checker, v1::Config& config);
// liveness_stall_ms: above the longest processor call plus
// shutdown_timeout_ms; its default grows with them. After both are checked.
// limits_validator.cc.
void ValidateLivenessStall(Checker& checker, v1::Config& config);

// dead_letter_dialects: each a dialect, each once. dead_letter_validator.cc.
void ValidateDeadLetterDialects(Checker& checker, const v1::Config& config);

}  // namespace retryd::config_validation

#endif  // RETRYD_SERVER_CONFIG_SECTION_VALIDATORS_H_
