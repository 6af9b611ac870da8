// Waiting in tests for what they can only observe by looking. No Kafka here
// (retryd_test_base).
#ifndef RETRYD_TESTS_SUPPORT_WAIT_FOR_H_
#define RETRYD_TESTS_SUPPORT_WAIT_FOR_H_

#include <functional>

#include "absl/time/time.h"

namespace retryd::testing {

// Checks `condition` every 50 ms until it holds or `timeout` passes;
// returns whether it held. The bounded way tests wait for asynchronous
// outcomes they can only observe by looking.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout);

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_SUPPORT_WAIT_FOR_H_
