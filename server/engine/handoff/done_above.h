// Records complete out of order (unordered and key order), and a
// partition's commit stays at the lowest one not yet complete: a retry
// record waiting for its backoff while later ones finish, in key order,
// where it cannot be handed back. The records complete above the commit
// ride along in Kafka's offset-commit metadata as ranges of offsets, and the
// partition's next owner skips them instead of processing them again, which
// would give their outcomes twice. (In order, the metadata carries the
// record retried in place instead: ordering/in_place_retry.h.)
//
// Thread-safety: pure functions.
#ifndef RETRYD_SERVER_ENGINE_HANDOFF_DONE_ABOVE_H_
#define RETRYD_SERVER_ENGINE_HANDOFF_DONE_ABOVE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace retryd::engine {

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

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HANDOFF_DONE_ABOVE_H_
