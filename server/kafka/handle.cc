#include "server/kafka/handle.h"

#include <librdkafka/rdkafka.h>

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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

}  // namespace retryd::kafka
