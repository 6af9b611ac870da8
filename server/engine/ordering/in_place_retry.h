// In order, a failed record is retried in place: the partition's commit
// stays at it, and its attempt count, first failure and due time ride along
// in Kafka's offset-commit metadata. The next owner reads them when it is
// assigned the partition and resumes the record where it was, so a doomed
// record still reaches the dead-letter topic however often the group
// rebalances. (Out of order, the metadata says which records above the
// commit are done instead: handoff/done_above.h.)
//
// Thread-safety: plain values and pure functions.
#ifndef RETRYD_SERVER_ENGINE_ORDERING_IN_PLACE_RETRY_H_
#define RETRYD_SERVER_ENGINE_ORDERING_IN_PLACE_RETRY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace retryd::engine {

// A record retried in place at `offset`.
struct InPlaceRetry {
  int64_t offset = -1;
  int attempt = 1;  // The attempt to make next.
  int64_t first_failure_ms = 0;
  int64_t due_ms = 0;

  bool operator==(const InPlaceRetry&) const = default;
};

// "retryd/1 offset=<o> attempt=<a> first-failure-ms=<f> due-ms=<d>": short,
// readable in any tool that shows committed metadata.
std::string EncodeInPlaceRetry(const InPlaceRetry& retry);

// The state `metadata` describes, or nullopt if it is empty, written by
// something else, or malformed (a foreign writer's metadata is ignored,
// never trusted).
std::optional<InPlaceRetry> DecodeInPlaceRetry(absl::string_view metadata);

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_ORDERING_IN_PLACE_RETRY_H_
