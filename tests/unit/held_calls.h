// An asynchronous processor for the engine's unit tests that keeps each
// call open (its `done` and cancellation, by the record's offset) until the
// test ends it.
#ifndef RETRYD_TESTS_UNIT_HELD_CALLS_H_
#define RETRYD_TESTS_UNIT_HELD_CALLS_H_

#include <map>
#include <memory>
#include <utility>

#include "server/engine/api/processor.h"

namespace retryd::engine {

class HeldCalls : public Processor {
 public:
  Outcome Process(const Record&, int) override { return Outcome::Ok(); }
  bool asynchronous() const override { return true; }
  void Start(const Record& record, const AttemptInfo&, std::shared_ptr<Cancellation> cancel,
             ProcessDone done) override {
    pending[record.offset] = std::move(done);
    cancels[record.offset] = std::move(cancel);
  }
  void End(int64_t offset, Outcome outcome) {
    std::move(pending.at(offset))(std::move(outcome));
    pending.erase(offset);
  }
  std::map<int64_t, ProcessDone> pending;
  std::map<int64_t, std::shared_ptr<Cancellation>> cancels;
};

}  // namespace retryd::engine

#endif  // RETRYD_TESTS_UNIT_HELD_CALLS_H_
