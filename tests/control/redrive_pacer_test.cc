// RedrivePacer (server/dlq/redrive_pacer.h) on a clock of its own: the
// pace starts with the first record, a pause earns at most the burst, and
// records that wait unacknowledged never come out as more than the burst,
// whatever the wait: the bound a redrive promises where its records land.
#include "server/dlq/redrive_pacer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

#include "absl/time/time.h"

namespace retryd::dlq {
namespace {

constexpr double kRate = 40;
constexpr double kBurst = 10;  // A quarter second at 40/s.
const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

// The most of `times` (sorted) in any window [t, t + window).
int Busiest(const std::vector<absl::Time>& times, absl::Duration window) {
  int worst = 0;
  size_t j = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    while (times[j] <= times[i] - window) ++j;
    worst = std::max(worst, static_cast<int>(i - j + 1));
  }
  return worst;
}

TEST(RedrivePacerTest, TheFirstRecordGoesAtOnceAndTheRestAtTheRate) {
  RedrivePacer pacer(kRate, kBurst);
  // Seconds before the first record (a group join, a read) earn nothing.
  const absl::Time first = kStart + absl::Seconds(5);
  ASSERT_LE(pacer.NextSend(first), first);
  pacer.Sent(first);
  pacer.Acknowledged(first);
  EXPECT_NEAR(absl::ToDoubleSeconds(pacer.NextSend(first) - first), 1 / kRate, 1e-6);
}

TEST(RedrivePacerTest, APauseEarnsTheBurstAndNoMore) {
  RedrivePacer pacer(kRate, kBurst);
  pacer.Sent(kStart);
  pacer.Acknowledged(kStart);
  const absl::Time later = kStart + absl::Seconds(10);
  int at_once = 0;
  while (pacer.NextSend(later) <= later && at_once < 1000) {
    pacer.Sent(later);
    pacer.Acknowledged(later);
    ++at_once;
  }
  EXPECT_EQ(at_once, kBurst);
}

TEST(RedrivePacerTest, AnUnacknowledgedRecordHoldsItsToken) {
  RedrivePacer pacer(kRate, kBurst);
  // Nothing acknowledged for 2 s (the target's metadata, a slow broker):
  // the burst goes out and then nothing, not the rate's worth.
  int sent = 0;
  for (absl::Time t = kStart; t < kStart + absl::Seconds(2); t += absl::Milliseconds(1)) {
    while (pacer.NextSend(t) <= t) {
      pacer.Sent(t);
      ++sent;
    }
  }
  EXPECT_EQ(sent, kBurst);
  EXPECT_EQ(pacer.NextSend(kStart + absl::Seconds(2)), absl::InfiniteFuture());
  // They all land and are acknowledged at once; what follows is paced from
  // there, no catching up.
  const absl::Time landed = kStart + absl::Seconds(2);
  for (int i = 0; i < sent; ++i) pacer.Acknowledged(landed);
  EXPECT_NEAR(absl::ToDoubleSeconds(pacer.NextSend(landed) - landed), 1 / kRate, 1e-6);
}

// Records sent as the pacer lets them and acknowledged after random delays,
// some long (stalls): any window of their landings (at most their
// acknowledgements) holds at most rate x window + burst.
TEST(RedrivePacerTest, LandingsKeepTheRatePlusTheBurstWhateverTheDelays) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> delay_ms(0, 30);
  std::bernoulli_distribution stall(0.0005);  // About one every 2 s.
  std::uniform_int_distribution<int> stall_ms(200, 2000);
  RedrivePacer pacer(kRate, kBurst);
  std::deque<absl::Time> pending;  // Acknowledgement times, in order.
  std::vector<absl::Time> landed;
  absl::Time stalled_until = kStart;
  for (absl::Time t = kStart; t < kStart + absl::Seconds(60); t += absl::Milliseconds(1)) {
    while (!pending.empty() && pending.front() <= t) {
      landed.push_back(pending.front());
      pending.pop_front();
      pacer.Acknowledged(t);
    }
    if (stall(random))
      stalled_until = std::max(stalled_until, t + absl::Milliseconds(stall_ms(random)));
    while (pacer.NextSend(t) <= t) {
      pacer.Sent(t);
      // A broker that stalls delivers in order, at the end of the stall.
      absl::Time ack = std::max(t, stalled_until) + absl::Milliseconds(delay_ms(random));
      if (!pending.empty()) ack = std::max(ack, pending.back());
      pending.push_back(ack);
    }
  }
  ASSERT_GT(landed.size(), 1000u);
  for (const int seconds : {1, 2, 5}) {
    EXPECT_LE(Busiest(landed, absl::Seconds(seconds)), kRate * seconds + kBurst) << seconds;
  }
}

}  // namespace
}  // namespace retryd::dlq
