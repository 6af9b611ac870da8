// What a worker keeps durable about a partition beside its committed offset,
// in Kafka's offset-commit metadata, so that a rebalance or a restart does
// not forget it.
//
// In order, a failed record is retried in place: the partition's commit
// stays at it, and its attempt count, first failure and due time ride along
// in the metadata. The next owner reads them when it is assigned the
// partition and resumes the record where it was, so a doomed record still
// reaches the dead-letter topic however often the group rebalances.
//
// Otherwise, records complete out of order, and the commit stays at the
// lowest one not yet complete: a retry record waiting for its backoff while
// later ones finish, in key order, where it cannot be handed back. The
// records complete above the commit ride along as ranges of offsets, and
// the next owner skips them instead of processing them again, which would
// give their outcomes twice.
//
// Thread-safety: plain values and pure functions.
#ifndef RETRYD_SERVER_ENGINE_PARTITION_STATE_H_
#define RETRYD_SERVER_ENGINE_PARTITION_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace retryd {

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

// The most bytes EncodeDoneAbove writes: well under Kafka's default
// offset.metadata.max.bytes (4096), above which a broker refuses the commit.
inline constexpr size_t kMaxDoneMetadataBytes = 1024;

// "retryd-done/1 offset=<o> <a>-<b> ...": the ranges [first, last] of offsets
// above the commit offset `offset` whose records are complete, each written
// relative to `offset`, in increasing order; as many as fit in
// kMaxDoneMetadataBytes (those left out are processed again, at least once
// as ever). Empty when there is no range.
std::string EncodeDoneAbove(int64_t offset, const std::vector<std::pair<int64_t, int64_t>>& ranges);

// The ranges `metadata` lists, in absolute offsets, if it was written for
// the commit offset `committed`; empty if it describes another offset, was
// written by something else, or is malformed.
std::vector<std::pair<int64_t, int64_t>> DecodeDoneAbove(absl::string_view metadata,
                                                         int64_t committed);

}  // namespace retryd

#endif  // RETRYD_SERVER_ENGINE_PARTITION_STATE_H_
