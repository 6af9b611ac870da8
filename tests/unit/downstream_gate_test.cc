// DownstreamGate's rules, call by call: which evidence takes which role
// down, when a refusal is the record's own, how probes rotate, and what
// brings the roles back up. The processor here is a real Processor whose
// health() the test sets; no calls are made.
#include "server/engine/steering/downstream_gate.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/engine/api/processor.h"

namespace retryd::engine {
namespace {

using Admission = DownstreamGate::Admission;
using Evidence = DownstreamGate::Evidence;

constexpr ThreadRole kPrimary = ThreadRole::kPrimary;
constexpr ThreadRole kRetry = ThreadRole::kRetry;

// A processor whose downstream health is whatever the test says.
class HealthProcessor : public Processor {
 public:
  Outcome Process(const Record&, int) override { return Outcome::Ok(); }
  DownstreamHealth health() const override { return health_; }
  void SetChannel(DownstreamHealth::Channel channel) { health_.channel = channel; }
  // A new health check answered `serving`.
  void Check(DownstreamHealth::Serving serving) {
    health_.serving = serving;
    ++health_.checks;
  }

 private:
  DownstreamHealth health_;
};

DownstreamGate::RefusedRecord Rec(uint64_t id, bool refused_before = false,
                                  bool refused_last_attempt = false, int64_t answers_since = 0) {
  DownstreamGate::RefusedRecord r;
  r.id = id;
  r.refused_before = refused_before;
  r.refused_last_attempt = refused_last_attempt;
  r.answers_since = answers_since;
  return r;
}

class DownstreamGateTest : public ::testing::Test {
 protected:
  DownstreamGateTest() { processor_.SetChannel(DownstreamHealth::Channel::kReady); }

  // A first refusal of record `id` (never refused before).
  DownstreamGate::Verdict RefuseNew(ThreadRole role, uint64_t id, bool probe = false) {
    return gate_.Refused(role, Rec(id), probe, "UNAVAILABLE: no", now_);
  }
  // A refusal of record `id`, refused so before, while `answers` others
  // were answered.
  DownstreamGate::Verdict RefuseAgain(ThreadRole role, uint64_t id, int64_t answers,
                                      bool probe = false) {
    return gate_.Refused(role, Rec(id, true, false, answers), probe, "UNAVAILABLE: no", now_);
  }

  HealthProcessor processor_;
  DownstreamGate gate_{{.outage_after = 3, .probe_initial_ms = 100, .probe_max_ms = 1000},
                       &processor_,
                       absl::Milliseconds(400)};
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
};

TEST_F(DownstreamGateTest, RefusalsOfOneRoleTakeOnlyThatRoleDown) {
  for (uint64_t id = 1; id <= 2; ++id) EXPECT_FALSE(RefuseNew(kRetry, id).own);
  EXPECT_FALSE(gate_.down(kRetry));
  const DownstreamGate::Verdict third = RefuseNew(kRetry, 3);
  EXPECT_FALSE(third.own);
  EXPECT_TRUE(third.mark);
  EXPECT_TRUE(gate_.down(kRetry));
  EXPECT_FALSE(gate_.down(kPrimary));
  EXPECT_EQ(gate_.Admit(kPrimary, 10, now_), Admission::kCall);
  const DownstreamGate::Snapshot s = gate_.snapshot();
  EXPECT_EQ(s.roles[1].evidence, Evidence::kRefusals);
  EXPECT_EQ(s.roles[0].outages, 0);
  EXPECT_EQ(s.roles[1].outages, 1);
  EXPECT_TRUE(s.down);
}

TEST_F(DownstreamGateTest, OneRecordRefusedAgainAndAgainIsNoOutage) {
  for (int i = 0; i < 10; ++i) RefuseNew(kRetry, 7);
  EXPECT_FALSE(gate_.down(kRetry));
  EXPECT_EQ(gate_.snapshot().roles[1].refused_in_a_row, 1);
}

TEST_F(DownstreamGateTest, AnAnswerBetweenRefusalsStartsTheCountAgain) {
  RefuseNew(kPrimary, 1);
  RefuseNew(kPrimary, 2);
  gate_.OnAnswered(kRetry, /*probe=*/false, now_);  // Any role's answer.
  RefuseNew(kPrimary, 3);
  RefuseNew(kPrimary, 4);
  EXPECT_FALSE(gate_.down(kPrimary));
}

TEST_F(DownstreamGateTest, ARecordRefusedBeforeWhileItsRoleIsUpIsJudgedItsOwn) {
  const DownstreamGate::Verdict first = RefuseNew(kRetry, 5);
  EXPECT_FALSE(first.own);
  EXPECT_TRUE(first.mark);
  const DownstreamGate::Verdict again = RefuseAgain(kRetry, 5, 12);
  EXPECT_TRUE(again.own);
  EXPECT_EQ(again.reason,
            "refused while the downstream answered 12 other records: UNAVAILABLE: no");
  EXPECT_TRUE(DownstreamGate::IsRefusalReason(again.reason));
  const DownstreamGate::Verdict alone = RefuseAgain(kRetry, 5, 0);
  EXPECT_TRUE(alone.own) << "nothing shows an outage: one record alone cannot";
  EXPECT_EQ(alone.reason,
            "refused again while nothing showed the downstream down: UNAVAILABLE: no");
  EXPECT_TRUE(DownstreamGate::IsRefusalReason(alone.reason));
  EXPECT_FALSE(DownstreamGate::IsRefusalReason("UNAVAILABLE: no"));
}

TEST_F(DownstreamGateTest, RecordsRefusedOnTheirLastAttemptAreNoEvidenceOfAnOutage) {
  for (uint64_t id = 1; id <= 10; ++id) {
    EXPECT_FALSE(gate_.Refused(kRetry, Rec(id, false, true), false, "UNAVAILABLE: no", now_).own)
        << "its first refusal on this attempt waits, like any";
  }
  EXPECT_FALSE(gate_.down(kRetry));
}

TEST_F(DownstreamGateTest, AChannelNotReadyTakesEveryRoleDownAndNoRefusalIsOwn) {
  processor_.SetChannel(DownstreamHealth::Channel::kNotReady);
  const DownstreamGate::Verdict v = RefuseAgain(kRetry, 1, 50);
  EXPECT_FALSE(v.own);
  EXPECT_FALSE(v.mark);
  EXPECT_TRUE(gate_.down(kPrimary));
  EXPECT_TRUE(gate_.down(kRetry));
  EXPECT_EQ(gate_.snapshot().roles[0].evidence, Evidence::kChannel);
  // Its probe, refused while the channel is still not ready, uses no attempt.
  ASSERT_EQ(gate_.Admit(kPrimary, 2, now_ + absl::Milliseconds(100)), Admission::kProbe);
  EXPECT_FALSE(gate_
                   .Refused(kPrimary, Rec(2, true, false, 50), true, "UNAVAILABLE: refused",
                            now_ + absl::Milliseconds(101))
                   .own);
  // Connected again: the next probe goes at once, without waiting out its delay.
  processor_.SetChannel(DownstreamHealth::Channel::kReady);
  EXPECT_EQ(gate_.Admit(kPrimary, 3, now_ + absl::Milliseconds(102)), Admission::kProbe);
}

TEST_F(DownstreamGateTest, AChannelBackReadyGivesOneProbeFreeBeforeRefusalsCost) {
  processor_.SetChannel(DownstreamHealth::Channel::kNotReady);
  const int64_t epoch = gate_.outage_epoch();
  RefuseNew(kPrimary, 1);
  EXPECT_GT(gate_.outage_epoch(), epoch) << "marks from before the outage no longer count";
  processor_.SetChannel(DownstreamHealth::Channel::kReady);  // Reconnected, still refusing.
  const absl::Time t = now_ + absl::Milliseconds(100);
  ASSERT_EQ(gate_.Admit(kPrimary, 1, t), Admission::kProbe);
  const DownstreamGate::Verdict first = RefuseAgain(kPrimary, 1, 0, /*probe=*/true);
  EXPECT_FALSE(first.own) << "the role was down on its channel: this probe is free";
  EXPECT_EQ(gate_.snapshot().roles[0].evidence, Evidence::kRefusals);
  const absl::Time later = gate_.snapshot().roles[0].next_probe;
  ASSERT_EQ(gate_.Admit(kPrimary, 2, later), Admission::kProbe);
  EXPECT_TRUE(gate_.Refused(kPrimary, Rec(2), true, "UNAVAILABLE: no", later).own);
}

TEST_F(DownstreamGateTest, AProbeRefusedOnAReadyChannelWhileTheRoleIsDownUsesAnAttempt) {
  for (uint64_t id = 1; id <= 3; ++id) RefuseNew(kRetry, id);
  ASSERT_TRUE(gate_.down(kRetry));
  EXPECT_EQ(gate_.Admit(kRetry, 1, now_), Admission::kWait) << "before the probe delay";
  const absl::Time later = now_ + absl::Milliseconds(100);
  ASSERT_EQ(gate_.Admit(kRetry, 1, later), Admission::kProbe);
  EXPECT_EQ(gate_.Admit(kRetry, 2, later), Admission::kWait) << "one probe at a time";
  const DownstreamGate::Verdict v = RefuseNew(kRetry, 1, /*probe=*/true);
  EXPECT_TRUE(v.own);
  EXPECT_TRUE(absl::StrContains(v.reason, "refused as the retry role's probe")) << v.reason;
  EXPECT_TRUE(gate_.down(kRetry)) << "a refused probe keeps the role down";
  const DownstreamGate::Snapshot s = gate_.snapshot();
  EXPECT_EQ(s.roles[1].probes, 1);
  EXPECT_EQ(s.roles[1].last_probe_result, "UNAVAILABLE: no");
}

TEST_F(DownstreamGateTest, ProbesOnRefusalsAloneWaitNoLongerThanTheLongestBackoff) {
  for (uint64_t id = 1; id <= 3; ++id) RefuseNew(kRetry, id);
  absl::Time t = now_;
  for (int i = 0; i < 6; ++i) {
    t = gate_.snapshot().roles[1].next_probe;
    ASSERT_EQ(gate_.Admit(kRetry, 100 + i, t), Admission::kProbe);
    gate_.Refused(kRetry, Rec(100 + i), true, "UNAVAILABLE: no", t);
  }
  // 100, 200, 400, then capped at the 400 ms backoff (not probe_max_ms).
  EXPECT_EQ(gate_.snapshot().roles[1].next_probe - t, absl::Milliseconds(400));
}

TEST_F(DownstreamGateTest, ProbesRotateWhileAnotherRecordWaits) {
  for (uint64_t id = 1; id <= 3; ++id) RefuseNew(kPrimary, id);
  ASSERT_TRUE(gate_.down(kPrimary));
  absl::Time t = now_ + absl::Milliseconds(100);
  ASSERT_EQ(gate_.Admit(kPrimary, 1, t), Admission::kProbe);
  processor_.SetChannel(DownstreamHealth::Channel::kNotReady);  // No attempts used.
  gate_.Refused(kPrimary, Rec(1, true), true, "UNAVAILABLE: no", t);
  {
    ByteCharge other = gate_.CountWaiting(kPrimary);  // Record 2 waits.
    t = gate_.snapshot().roles[0].next_probe;
    EXPECT_EQ(gate_.Admit(kPrimary, 1, t), Admission::kWait) << "probed last, and 2 waits";
    EXPECT_EQ(gate_.Admit(kPrimary, 2, t), Admission::kProbe);
  }
  gate_.Refused(kPrimary, Rec(2, true), true, "UNAVAILABLE: no", t);
  // Alone, the record probed last is probed again.
  t = gate_.snapshot().roles[0].next_probe;
  EXPECT_EQ(gate_.Admit(kPrimary, 2, t), Admission::kProbe);
}

TEST_F(DownstreamGateTest, AnyAnswerBringsEveryRoleUp) {
  processor_.SetChannel(DownstreamHealth::Channel::kNotReady);
  RefuseNew(kPrimary, 1);
  ASSERT_TRUE(gate_.down(kPrimary) && gate_.down(kRetry));
  gate_.OnAnswered(kRetry, /*probe=*/false, now_);
  EXPECT_FALSE(gate_.down());
  EXPECT_EQ(gate_.snapshot().outages, 1);
}

TEST_F(DownstreamGateTest, HealthNotServingTakesEveryRoleDownAndServingBringsThemUp) {
  EXPECT_FALSE(gate_.IntakePaused(kPrimary, now_));
  processor_.Check(DownstreamHealth::Serving::kNotServing);
  {
    ByteCharge waiting = gate_.CountWaiting(kPrimary);
    EXPECT_TRUE(gate_.IntakePaused(kPrimary, now_));
  }
  EXPECT_TRUE(gate_.down(kRetry));
  EXPECT_EQ(gate_.snapshot().roles[1].evidence, Evidence::kHealth);
  // A refusal meanwhile uses no attempt, even of a record refused before.
  EXPECT_FALSE(RefuseAgain(kRetry, 1, 9).own);
  const int64_t answers = gate_.answers();
  processor_.Check(DownstreamHealth::Serving::kServing);
  EXPECT_FALSE(gate_.IntakePaused(kPrimary, now_));
  EXPECT_FALSE(gate_.down());
  EXPECT_EQ(gate_.answers(), answers + 1) << "SERVING counts as an answer";
}

TEST_F(DownstreamGateTest, ARoleDownWithNothingWaitingLetsRecordsIn) {
  for (uint64_t id = 1; id <= 3; ++id) RefuseNew(kRetry, id);
  ASSERT_TRUE(gate_.down(kRetry));
  EXPECT_FALSE(gate_.IntakePaused(kRetry, now_)) << "nothing to probe: one must come in";
  ByteCharge waiting = gate_.CountWaiting(kRetry);
  EXPECT_TRUE(gate_.IntakePaused(kRetry, now_));
}

}  // namespace
}  // namespace retryd::engine
