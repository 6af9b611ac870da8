#include "server/engine/handoff/record_buffers.h"

#include <utility>

namespace retryd::engine {
namespace {

// A string of at most this many bytes lives inside the object (libstdc++'s
// small-string buffer): nothing to keep.
constexpr size_t kInlineBytes = 15;

}  // namespace

void RecordBuffers::Keep(std::string& s) {
  const size_t capacity = s.capacity();
  if (capacity <= kInlineBytes || capacity > kMaxBufferBytes) return;
  if (bytes_ + static_cast<int64_t>(capacity) > kMaxBytes) return;
  bytes_ += static_cast<int64_t>(capacity);
  strings_.push_back(std::move(s));
  strings_.back().clear();
}

std::string RecordBuffers::Take() {
  if (strings_.empty()) return {};
  std::string s = std::move(strings_.back());
  strings_.pop_back();
  bytes_ -= static_cast<int64_t>(s.capacity());
  return s;
}

int64_t RecordBuffers::HeadersBytes(const Headers& headers) {
  int64_t bytes = static_cast<int64_t>(headers.capacity() * sizeof(Header));
  for (const Header& h : headers) {
    if (h.key.capacity() > kInlineBytes) bytes += static_cast<int64_t>(h.key.capacity());
    if (h.value && h.value->capacity() > kInlineBytes) {
      bytes += static_cast<int64_t>(h.value->capacity());
    }
  }
  return bytes;
}

void RecordBuffers::Recycle(OutgoingRecord& record) {
  Keep(record.topic);
  if (record.value) Keep(*record.value);
  if (record.key) Keep(*record.key);
  Headers& headers = record.headers;
  if (headers.capacity() == 0 || headers.capacity() > kMaxHeaders) return;
  const int64_t bytes = HeadersBytes(headers);
  if (bytes_ + bytes > kMaxBytes) return;
  bytes_ += bytes;
  headers_.push_back(std::move(headers));
  headers.clear();
}

void RecordBuffers::Prepare(Record& record) {
  if (!record.value || record.value->capacity() <= kInlineBytes) {
    if (std::string s = Take(); s.capacity() > kInlineBytes) record.value.emplace(std::move(s));
  }
  if (!record.key || record.key->capacity() <= kInlineBytes) {
    if (std::string s = Take(); s.capacity() > kInlineBytes) record.key.emplace(std::move(s));
  }
  // A topic name longer than the string's own buffer (most are) would be
  // allocated for every record read.
  if (record.topic.capacity() <= kInlineBytes) {
    if (std::string s = Take(); s.capacity() > kInlineBytes) record.topic = std::move(s);
  }
  if (record.headers.capacity() == 0 && !headers_.empty()) {
    bytes_ -= HeadersBytes(headers_.back());
    record.headers = std::move(headers_.back());
    headers_.pop_back();
  }
}

}  // namespace retryd::engine
