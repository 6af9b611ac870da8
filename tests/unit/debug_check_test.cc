// ThreadOwner and RETRYD_DCHECK: the checks behind "confined to its thread"
// and "REQUIRES:" comments.
#include "server/common/debug_check.h"

#include <thread>

#include "gtest/gtest.h"

namespace retryd {
namespace {

TEST(ThreadOwnerTest, OnlyTheBoundThreadIsTheOwnerAndAnyoneBeforeTheBind) {
  ThreadOwner owner;
  bool elsewhere = false;
  std::thread([&] { elsewhere = owner.OnOwner(); }).join();
  EXPECT_TRUE(elsewhere);  // Not bound yet: set up on its creator's thread.
  owner.Bind();
  EXPECT_TRUE(owner.OnOwner());
  std::thread([&] { elsewhere = owner.OnOwner(); }).join();
  EXPECT_FALSE(elsewhere);
  // Bound to another thread, it is no longer this one's.
  std::thread([&] { owner.Bind(); }).join();
  EXPECT_FALSE(owner.OnOwner());
}

TEST(DebugCheckDeathTest, AThreadOffItsOwnerAbortsInDebugBuilds) {
  if (!kDebugChecks) GTEST_SKIP() << "release build: the checks are compiled out";
  // The child starts afresh rather than forked from a test binary that ran
  // threads (and may run under ThreadSanitizer).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ThreadOwner owner;
  owner.Bind();
  owner.Check("on the owner: no abort");
  EXPECT_DEATH(std::thread([&] { owner.Check("the worker's own"); }).join(),
               "debug check failed: the worker's own");
  int evaluated = 0;
  RETRYD_DCHECK(++evaluated == 1, "evaluated once");
  EXPECT_EQ(evaluated, 1);
  EXPECT_DEATH(RETRYD_DCHECK(evaluated == 2, "a broken contract"),
               "debug check failed: a broken contract \\(evaluated == 2\\)");
}

TEST(DebugCheckTest, ReleaseBuildsDoNotEvaluateTheCondition) {
  if (kDebugChecks) GTEST_SKIP() << "debug build: the checks run";
  int evaluated = 0;
  RETRYD_DCHECK(++evaluated == 1, "not evaluated");
  EXPECT_EQ(evaluated, 0);
}

}  // namespace
}  // namespace retryd
