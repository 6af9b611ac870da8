#include "server/kafka/message.h"

namespace retryd::kafka {

Record ToRecord(const rd_kafka_message_t* m) {
  Record r;
  r.topic = rd_kafka_topic_name(m->rkt);
  r.partition = m->partition;
  r.offset = m->offset;
  r.timestamp_ms = rd_kafka_message_timestamp(m, nullptr);
  if (m->key != nullptr) r.key.emplace(static_cast<const char*>(m->key), m->key_len);
  if (m->payload != nullptr) r.value.emplace(static_cast<const char*>(m->payload), m->len);
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name;
    const void* value;
    size_t size;
    for (size_t i = 0;
         rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      Header h{name, std::nullopt};
      if (value != nullptr) h.value.emplace(static_cast<const char*>(value), size);
      r.headers.push_back(std::move(h));
    }
  }
  return r;
}

}  // namespace retryd::kafka
