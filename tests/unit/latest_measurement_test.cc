#include "server/engine/stats/latest_measurement.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace retryd::engine {
namespace {

TEST(LatestMeasurementTest, NothingBeforeTheFirstStore) {
  LatestMeasurement m;
  EXPECT_FALSE(m.value().has_value());
  EXPECT_TRUE(m.Store(m.Begin(), 0));
  EXPECT_EQ(m.value(), 0);
}

// A drain's measurement (begun second, ended first) saw the backlog empty;
// the probe's (begun first, ended second) must not bring the old one back.
TEST(LatestMeasurementTest, AMeasurementBegunEarlierDoesNotOverwriteALaterOne) {
  LatestMeasurement m;
  const LatestMeasurement::Ticket probe = m.Begin();
  const LatestMeasurement::Ticket drain = m.Begin();
  EXPECT_TRUE(m.Store(drain, 0));
  EXPECT_FALSE(m.Store(probe, 29));
  EXPECT_EQ(m.value(), 0);
  EXPECT_TRUE(m.Store(m.Begin(), 7)) << "a measurement begun after both is kept";
  EXPECT_EQ(m.value(), 7);
}

TEST(LatestMeasurementTest, InOrderMeasurementsAreAllKept) {
  LatestMeasurement m;
  for (int64_t v : {5, 3, 9}) {
    EXPECT_TRUE(m.Store(m.Begin(), v));
    EXPECT_EQ(m.value(), v);
  }
}

// Threads measuring at once: whatever the interleaving, the value kept is
// the one of the last ticket stored (every thread stores its ticket as the
// value here), and no store of an earlier ticket follows it.
TEST(LatestMeasurementTest, ConcurrentStoresKeepTheLatestTicket) {
  LatestMeasurement m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m] {
      for (int i = 0; i < 1000; ++i) {
        const LatestMeasurement::Ticket ticket = m.Begin();
        m.Store(ticket, ticket);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(m.value(), 4000);
}

}  // namespace
}  // namespace retryd::engine
