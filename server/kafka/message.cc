#include "server/kafka/message.h"

#include <cstddef>

namespace retryd::kafka {
namespace {

// `to` gets `size` bytes at `data`, or null if `data` is; a buffer it
// already holds is written over rather than allocated again.
void AssignBytes(std::optional<std::string>& to, const void* data, size_t size) {
  if (data == nullptr) {
    to.reset();
  } else if (to.has_value()) {
    to->assign(static_cast<const char*>(data), size);
  } else {
    to.emplace(static_cast<const char*>(data), size);
  }
}

TimestampType TimestampTypeOf(rd_kafka_timestamp_type_t type) {
  switch (type) {
    case RD_KAFKA_TIMESTAMP_CREATE_TIME:
      return TimestampType::kCreateTime;
    case RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME:
      return TimestampType::kLogAppendTime;
    case RD_KAFKA_TIMESTAMP_NOT_AVAILABLE:
      break;
  }
  return TimestampType::kNone;
}

}  // namespace

void ToRecord(const rd_kafka_message_t* m, Record& r) {
  r.topic.assign(rd_kafka_topic_name(m->rkt));
  r.partition = m->partition;
  r.offset = m->offset;
  rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  r.timestamp_ms = rd_kafka_message_timestamp(m, &type);
  r.timestamp_type = TimestampTypeOf(type);
  AssignBytes(r.key, m->key, m->key_len);
  AssignBytes(r.value, m->payload, m->len);
  size_t count = 0;
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name;
    const void* value;
    size_t size;
    for (; rd_kafka_header_get_all(headers, count, &name, &value, &size) ==
           RD_KAFKA_RESP_ERR_NO_ERROR;
         ++count) {
      if (count < r.headers.size()) {
        Header& h = r.headers[count];
        h.key.assign(name);
        AssignBytes(h.value, value, size);
      } else {
        Header& h = r.headers.emplace_back(Header{name, std::nullopt});
        AssignBytes(h.value, value, size);
      }
    }
  }
  r.headers.erase(r.headers.begin() + static_cast<std::ptrdiff_t>(count), r.headers.end());
}

Record ToRecord(const rd_kafka_message_t* m) {
  Record r;
  ToRecord(m, r);
  return r;
}

}  // namespace retryd::kafka
