#include "server/kafka/handle.h"

#include <librdkafka/rdkafka.h>

#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/common/logging.h"

namespace retryd::kafka {
namespace {

struct AbandonedHandles {
  absl::Mutex mu;  // Guards `handles`.
  std::vector<rd_kafka_s*> handles ABSL_GUARDED_BY(mu);
};

AbandonedHandles& Abandoned() {
  // Never destroyed: the handles outlive every static destructor.
  static AbandonedHandles* const abandoned = new AbandonedHandles();
  return *abandoned;
}

}  // namespace

void HandleDeleter::operator()(rd_kafka_s* rk) const { rd_kafka_destroy(rk); }

void AbandonHandle(HandlePtr rk) {
  if (rk == nullptr) return;
  AbandonedHandles& abandoned = Abandoned();
  absl::MutexLock lock(&abandoned.mu);
  abandoned.handles.push_back(rk.release());
}

bool CallWithin(absl::Time deadline, absl::AnyInvocable<void() &&> call) {
  // Shared with the thread, which may outlive this call.
  struct Done {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
  };
  auto state = std::make_shared<Done>();
  std::thread thread([state, call = std::move(call)]() mutable {
    SetThreadName("kafka-bounded");
    SetThreadComponent("kafka");
    std::move(call)();
    absl::MutexLock lock(&state->mu);
    state->done = true;
  });
  bool done = false;
  {
    absl::MutexLock lock(&state->mu);
    done = state->mu.AwaitWithDeadline(absl::Condition(&state->done), deadline);
  }
  if (done) {
    thread.join();
  } else {
    // Its owner from now on is the call it is in; it ends with it.
    thread.detach();
  }
  return done;
}

bool DestroyWithin(HandlePtr rk, absl::Time deadline, int flags) {
  if (rk == nullptr) return true;
  rd_kafka_s* raw = rk.release();
  return CallWithin(deadline, [raw, flags] { rd_kafka_destroy_flags(raw, flags); });
}

}  // namespace retryd::kafka
