// Preloaded (LD_PRELOAD) into one test run: librdkafka as it behaves when
// its group handler drops the request of a closing consumer's
// rd_kafka_assign() (librdkafka 2.0.2; issues 4041, 4884): the call never
// returns. Everything else is the real librdkafka, passed through.
#include <dlfcn.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>

namespace {

std::mutex mu;
std::set<rd_kafka_t*>* closing = new std::set<rd_kafka_t*>();  // Guarded by mu; never freed.
std::atomic<int> stalled{0};

template <typename F>
F Real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

// How many rd_kafka_assign() calls were held; found by the test with dlsym.
int retryd_stalled_closing_assigns() { return stalled.load(); }

rd_kafka_error_t* rd_kafka_consumer_close_queue(rd_kafka_t* rk, rd_kafka_queue_t* queue) {
  static const auto real =
      Real<rd_kafka_error_t* (*)(rd_kafka_t*, rd_kafka_queue_t*)>("rd_kafka_consumer_close_queue");
  {
    std::lock_guard<std::mutex> lock(mu);
    closing->insert(rk);
  }
  return real(rk, queue);
}

rd_kafka_resp_err_t rd_kafka_assign(rd_kafka_t* rk,
                                    const rd_kafka_topic_partition_list_t* partitions) {
  static const auto real =
      Real<rd_kafka_resp_err_t (*)(rd_kafka_t*, const rd_kafka_topic_partition_list_t*)>(
          "rd_kafka_assign");
  bool held = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    held = closing->count(rk) > 0;
  }
  if (!held) return real(rk, partitions);
  stalled.fetch_add(1);
  for (;;) pause();  // The answer that never comes.
}

}  // extern "C"
