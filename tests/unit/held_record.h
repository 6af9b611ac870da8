// A record as a worker holds it, for the engine's unit tests: read from an
// input partition `tp` at `offset` (its original coordinates the same).
#ifndef RETRYD_TESTS_UNIT_HELD_RECORD_H_
#define RETRYD_TESTS_UNIT_HELD_RECORD_H_

#include <optional>
#include <string>

#include "server/engine/held/held_record.h"

namespace retryd::engine {

inline HeldRecord HeldAt(const TopicPartition& tp, int64_t offset,
                         std::optional<std::string> key = std::nullopt) {
  HeldRecord held;
  held.source = tp;
  held.source_offset = offset;
  held.record.topic = tp.topic;
  held.record.partition = tp.partition;
  held.record.offset = offset;
  held.record.key = std::move(key);
  return held;
}

}  // namespace retryd::engine

#endif  // RETRYD_TESTS_UNIT_HELD_RECORD_H_
