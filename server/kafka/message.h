// Conversion of librdkafka messages to engine records. Internal to server/kafka/.
#ifndef RETRYD_SERVER_KAFKA_MESSAGE_H_
#define RETRYD_SERVER_KAFKA_MESSAGE_H_

#include <librdkafka/rdkafka.h>

#include "server/model/record.h"

namespace retryd::kafka {

// Copies topic, coordinates, timestamp and its type, key, value and headers;
// null key, value and header values stay null.
Record ToRecord(const rd_kafka_message_t* m);
// The same into `r`, every field of which it sets: buffers `r` already holds
// (its strings, its header list and theirs) are written over, not allocated
// again.
void ToRecord(const rd_kafka_message_t* m, Record& r);

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_MESSAGE_H_
