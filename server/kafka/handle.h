// The owning handle of a librdkafka client, declared without
// <librdkafka/rdkafka.h> so that server/kafka's public headers can hold one
// as a private member. Only server/kafka/ uses it.
#ifndef RETRYD_SERVER_KAFKA_HANDLE_H_
#define RETRYD_SERVER_KAFKA_HANDLE_H_

#include <memory>

struct rd_kafka_s;  // rd_kafka_t

namespace retryd::kafka {

// rd_kafka_destroy(): for a consumer, that closes it first (leaves the group).
struct HandleDeleter {
  void operator()(rd_kafka_s* rk) const;
};
using HandlePtr = std::unique_ptr<rd_kafka_s, HandleDeleter>;

// Gives `rk` up without destroying it, for a client whose destruction would
// block for long (a consumer whose group leave the coordinator does not
// answer): librdkafka keeps running it until the process exits. The handle
// is kept in a process-wide list, never emptied, so that it stays reachable:
// a leak checker (LeakSanitizer) sees a handle kept on purpose, not a leak.
// Thread-safe.
void AbandonHandle(HandlePtr rk);

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_HANDLE_H_
