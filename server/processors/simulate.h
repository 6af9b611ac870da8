// The `simulate` processor: no real work, configurable latency and failures,
// for demos, tests and benchmarks.
//
// Every decision is a pure function of (seed, topic, partition, offset,
// attempt): the same record on its n-th attempt gets the same outcome and
// latency whichever thread, instance or process handles it. Process() is
// thread-safe (it reads only immutable state) and blocks the calling thread
// for the simulated latency.
#ifndef RETRYD_SERVER_PROCESSORS_SIMULATE_H_
#define RETRYD_SERVER_PROCESSORS_SIMULATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "retryd/v1/config.pb.h"
#include "server/engine/api/processor.h"
#include "server/model/record.h"

namespace retryd {

class SimulateProcessor : public engine::Processor {
 public:
  // `config` must be valid (as LoadConfigText checks); it is copied.
  explicit SimulateProcessor(const retryd::v1::SimulateConfig& config);

  // Sleeps for the latency, then decides: the first rule whose key_prefix
  // starts the record's key (a null key matches none); else
  // permanent_failure_rate; else transient_failure_rate; else OK.
  engine::Outcome Process(const Record& record, int attempt) override;

 private:
  struct Rule {
    std::string key_prefix;
    bool permanent = false;
    uint32_t fail_attempts = 0;
  };

  // A 64-bit hash of the record's identity, the attempt and `stream` (which
  // separates the latency draw from the failure draw).
  uint64_t Hash(const Record& record, int attempt, uint64_t stream) const;
  int64_t LatencyMs(const Record& record, int attempt) const;
  engine::Outcome Decide(const Record& record, int attempt) const;

  const uint64_t seed_;
  const uint32_t latency_ms_;
  const uint32_t latency_min_ms_;
  const uint32_t latency_max_ms_;
  const double transient_failure_rate_;
  const double permanent_failure_rate_;
  const std::vector<Rule> rules_;
};

}  // namespace retryd

#endif  // RETRYD_SERVER_PROCESSORS_SIMULATE_H_
