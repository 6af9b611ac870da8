// The buffers of records a worker is done with, kept to read its next
// records into. A record's topic name, key, value and header list, once its
// hand-off is acknowledged, take the next record read from Kafka rather than being freed
// on one side and allocated again on the other: on the fast path (read,
// processed, produced, acknowledged) a record then costs retryd no
// allocation of its own for its bytes.
//
// Why not keep librdkafka's message instead of copying out of it: a message
// kept alive pins its whole fetch buffer, and a hand-off must keep the bytes
// anyway until Kafka acknowledges it (it is produced in place, and sent again
// or dead-lettered from them if it fails). Copying into a buffer that is
// reused costs a memcpy, never a lifetime rule.
//
// Bounded: buffers larger than kMaxBufferBytes are freed rather than kept,
// and at most kMaxBytes of capacity is kept in all (a burst of large records
// does not stay behind as memory).
//
// Thread-compatible: the worker that owns it, on its own thread.
#ifndef RETRYD_SERVER_ENGINE_HANDOFF_RECORD_BUFFERS_H_
#define RETRYD_SERVER_ENGINE_HANDOFF_RECORD_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/model/record.h"

namespace retryd::engine {

class RecordBuffers {
 public:
  static constexpr size_t kMaxBufferBytes = 64 * 1024;
  static constexpr int64_t kMaxBytes = 1024 * 1024;
  // A header list is kept only up to this many entries.
  static constexpr size_t kMaxHeaders = 64;

  // Takes the buffers `record` holds (its topic name, key, value and header
  // list) where they are worth keeping; `record` keeps the rest.
  void Recycle(OutgoingRecord& record);
  // The same for one string.
  void Recycle(std::string& s) { Keep(s); }
  // Gives `record`, about to be read into, kept buffers for a topic name, a
  // key, a value and a header list where it holds none.
  void Prepare(Record& record);

  // The capacity kept, in bytes, and the number of buffers (for tests).
  int64_t bytes() const { return bytes_; }
  size_t buffers() const { return strings_.size() + headers_.size(); }

 private:
  // Takes `s` if it holds a heap buffer worth keeping.
  void Keep(std::string& s);
  // A kept string buffer, or an empty string if none is kept.
  std::string Take();
  static int64_t HeadersBytes(const Headers& headers);

  std::vector<std::string> strings_;
  std::vector<Headers> headers_;
  int64_t bytes_ = 0;
};

}  // namespace retryd::engine

#endif  // RETRYD_SERVER_ENGINE_HANDOFF_RECORD_BUFFERS_H_
