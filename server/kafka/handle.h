// The owning handle of a librdkafka client, declared without
// <librdkafka/rdkafka.h> so that server/kafka's public headers can hold one
// as a private member. Only server/kafka/ uses it.
#ifndef RETRYD_SERVER_KAFKA_HANDLE_H_
#define RETRYD_SERVER_KAFKA_HANDLE_H_

#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"

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

// Runs `call` on a thread of its own and waits for it until `deadline`:
// true if it returned by then. Otherwise false, and the thread is left to
// run `call` to its end, which may be never: librdkafka 2.0.2 makes some
// calls wait without a bound for an answer of its own threads that does
// not always come (rd_kafka_assign() from a rebalance callback while the
// consumer closes; librdkafka issues 4041, 4884). So `call` must own what
// it uses, and a client it uses must never be destroyed afterwards
// (AbandonHandle). For the stop path, which must end by its deadline
// whatever librdkafka does. Thread-safe.
bool CallWithin(absl::Time deadline, absl::AnyInvocable<void() &&> call);

// rd_kafka_destroy_flags(rk, flags) if it is done by `deadline`; otherwise
// false, the destruction going on (or hanging) on a thread of its own: a
// destroy joins librdkafka's threads, which for a consumer wait for its
// group handler to finish. The caller logs what it gave up. Thread-safe.
bool DestroyWithin(HandlePtr rk, absl::Time deadline, int flags = 0);

}  // namespace retryd::kafka

#endif  // RETRYD_SERVER_KAFKA_HANDLE_H_
