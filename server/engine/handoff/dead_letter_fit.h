// A dead-letter record that Kafka refused as too large, cut to a size it
// takes: the retryd headers and other tools' dead-letter headers always kept,
// then what fits of the original. Pure: no I/O.
#ifndef RETRYD_SERVER_ENGINE_HANDOFF_DEAD_LETTER_FIT_H_
#define RETRYD_SERVER_ENGINE_HANDOFF_DEAD_LETTER_FIT_H_

#include <cstddef>

#include "server/model/record.h"

namespace retryd::engine {

// An upper bound of the bytes `record` takes against a producer's
// message.max.bytes: key, value, headers and per-record framing.
size_t RecordWireSize(const OutgoingRecord& record);

// The form of `dead_letter` (a dead-letter record: the original key, value
// and headers plus its retryd headers) that fits in `max_bytes` as counted
// by RecordWireSize(), for a record Kafka refused as it was. Its retryd
// headers, and other tools' dead-letter headers (IsDialectHeader), are
// always kept; then, while they fit, the key, the original
// headers (in order, each whole or not at all) and as much of the value as
// fits (cut at a byte boundary: values are opaque). What does not fit is
// left out (null). A retryd-truncated header is added:
//   original key=K value=V headers=H; kept key=K' value=V' headers=H'
// K and V are sizes in bytes ("null" for a null field), H a header count.
// When even the retryd headers do not fit, they are returned alone.
OutgoingRecord FitDeadLetter(const OutgoingRecord& dead_letter, size_t max_bytes);

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HANDOFF_DEAD_LETTER_FIT_H_
