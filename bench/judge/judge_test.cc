// The peers bench's judge on hand-made topics, no broker: it must catch a
// lost record, a duplicate, a record in the wrong outcome and a key out of
// order, and find nothing wrong where nothing is.
#include "bench/judge/judge.h"

#include <cctype>
#include <string>
#include <vector>

#include "bench/judge/workload.h"
#include "gtest/gtest.h"

namespace retryd::bench::peers {
namespace {

struct Produced {
  GeneratedRecord record;
  Place place;
};

// `count` records of `phase`, each at its own offset of partition 0, input
// timestamps 1000 + i.
std::vector<Produced> Input(Judge& judge, const Mix& mix, Phase phase, int count) {
  std::vector<Produced> out;
  for (int i = 0; i < count; ++i) {
    Produced p{Generate(mix, phase, i, count), {0, i, 1000 + i}};
    EXPECT_TRUE(judge.AddInput(p.record.key, p.record.value, p.place));
    out.push_back(p);
  }
  return out;
}

Outcome Right(const GeneratedRecord& r) {
  return KindOfKey(r.key) == Kind::kPoison ? Outcome::kDeadLetter : Outcome::kOutput;
}

// Writes every record where it belongs, in input order, at broker time
// 2000 + i.
void DeliverAll(Judge& judge, const std::vector<Produced>& in) {
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t at = static_cast<int64_t>(i);
    judge.AddOutcome(Right(in[i].record), in[i].record.key, in[i].record.value, {0, at, 2000 + at});
  }
}

const Mix kMix{.flaky_percent = 10, .poison_percent = 1, .records_per_key = 5, .value_bytes = 40};

TEST(PeersWorkloadTest, KeysAndValuesSayKindAndPhase) {
  const GeneratedRecord r = Generate(kMix, Phase::kPaced, 7, 1000);
  EXPECT_EQ(r.value.size(), 40u);
  EXPECT_EQ(PhaseOfValue(r.value), Phase::kPaced);
  int flaky = 0, poison = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::optional<Kind> kind = KindOfKey(Generate(kMix, Phase::kMeasured, i, 1000).key);
    ASSERT_TRUE(kind.has_value());
    flaky += kind == Kind::kFlaky;
    poison += kind == Kind::kPoison;
  }
  // 200 keys of 5 records: 2 poison keys, 20 flaky ones less the one both.
  EXPECT_EQ(poison, 2 * 5);
  EXPECT_EQ(flaky, 18 * 5);
  // Upper-casing (the example downstream's answer) changes nothing.
  std::string upper = r.value;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(upper, r.value);
}

TEST(PeersJudgeTest, EverythingWhereItBelongs) {
  Judge judge;
  const std::vector<Produced> in = Input(judge, kMix, Phase::kMeasured, 1000);
  EXPECT_EQ(judge.missing(), 1000);
  DeliverAll(judge, in);
  EXPECT_EQ(judge.missing(), 0);
  const Verdict v = judge.Finish();
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.records, 1000);
  EXPECT_EQ(v.lost, 0);
  EXPECT_EQ(v.duplicates, 0);
  EXPECT_EQ(v.wrong_outcome, 0);
  EXPECT_EQ(v.strays, 0);
  EXPECT_EQ(v.keys, 200);
  EXPECT_EQ(v.keys_out_of_order, 0);
  EXPECT_EQ(v.measured, 1000);
  EXPECT_EQ(v.first_ms, 2000);
  EXPECT_EQ(v.last_ms, 2999);
  EXPECT_EQ(v.done_in_window, 1000);
}

TEST(PeersJudgeTest, WarmUpRecordsOutWithinTheWindowCount) {
  Judge judge;
  const Mix mix{.records_per_key = 1, .value_bytes = 20};
  const std::vector<Produced> warm = Input(judge, mix, Phase::kWarmUp, 10);
  const std::vector<Produced> measured = Input(judge, mix, Phase::kMeasured, 100);
  // Measured records out at 3000..3099; warm-up ones before them, but for
  // one from a partition the side reached late, at 3049.
  for (int i = 0; i < 100; ++i) {
    judge.AddOutcome(Outcome::kOutput, measured[i].record.key, measured[i].record.value,
                     {0, i, 3000 + i});
  }
  for (int i = 0; i < 10; ++i) {
    judge.AddOutcome(Outcome::kOutput, warm[i].record.key, warm[i].record.value,
                     {1, i, i == 9 ? 3049 : 2990 + i});
  }
  const Verdict v = judge.Finish();
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.first_ms, 3000);
  EXPECT_EQ(v.last_ms, 3099);
  EXPECT_EQ(v.measured, 100);
  EXPECT_EQ(v.done_in_window, 101);
}

TEST(PeersJudgeTest, CatchesALostRecord) {
  Judge judge;
  std::vector<Produced> in = Input(judge, kMix, Phase::kMeasured, 100);
  in.erase(in.begin() + 42);
  DeliverAll(judge, in);
  EXPECT_EQ(judge.missing(), 1);
  const Verdict v = judge.Finish();
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.lost, 1);
  EXPECT_EQ(v.wrong_outcome, 0);
}

TEST(PeersJudgeTest, CountsADuplicate) {
  Judge judge;
  const std::vector<Produced> in = Input(judge, kMix, Phase::kMeasured, 100);
  DeliverAll(judge, in);
  // The same record once more, later: at least once is allowed, and counted.
  judge.AddOutcome(Right(in[3].record), in[3].record.key, in[3].record.value, {0, 500, 9000});
  const Verdict v = judge.Finish();
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.duplicates, 1);
  EXPECT_EQ(v.lost, 0);
  EXPECT_EQ(v.keys_out_of_order, 0) << "a later copy is no first occurrence";
}

TEST(PeersJudgeTest, CatchesARecordInTheWrongOutcome) {
  Judge judge;
  const std::vector<Produced> in = Input(judge, kMix, Phase::kMeasured, 1000);
  // A healthy record dead-lettered, a poison one in the output.
  size_t healthy = 0, poison = 0;
  while (KindOfKey(in[healthy].record.key) != Kind::kHealthy) ++healthy;
  while (KindOfKey(in[poison].record.key) != Kind::kPoison) ++poison;
  for (size_t i = 0; i < in.size(); ++i) {
    Outcome where = Right(in[i].record);
    if (i == healthy || i == poison) {
      where = where == Outcome::kOutput ? Outcome::kDeadLetter : Outcome::kOutput;
    }
    const int64_t at = static_cast<int64_t>(i);
    judge.AddOutcome(where, in[i].record.key, in[i].record.value, {0, at, 2000 + at});
  }
  const Verdict v = judge.Finish();
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.wrong_outcome, 2);
  EXPECT_EQ(v.lost, 0);
}

TEST(PeersJudgeTest, CatchesAKeyOutOfOrder) {
  Judge judge;
  std::vector<Produced> in = Input(judge, kMix, Phase::kMeasured, 100);
  // 20 keys of 5 records: records 0 and 20 are key 0's first two. The second
  // comes out first.
  ASSERT_EQ(in[0].record.key, in[20].record.key);
  std::swap(in[0], in[20]);
  DeliverAll(judge, in);
  const Verdict v = judge.Finish();
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.keys_out_of_order, 1);
}

TEST(PeersJudgeTest, CatchesAStrayAndKeepsPacedLatency) {
  Judge judge;
  const std::vector<Produced> in = Input(judge, kMix, Phase::kPaced, 10);
  DeliverAll(judge, in);
  judge.AddOutcome(Outcome::kOutput, in[0].record.key, "M9999999999|", {0, 99, 5000});
  judge.AddOutcome(Outcome::kOutput, "ok-x", in[1].record.value, {0, 100, 5000});
  const Verdict v = judge.Finish();
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.strays, 2);
  // Ten paced records of two healthy keys: output at 2000 + i, input at 1000 + i.
  ASSERT_EQ(v.paced_latency_ms.size(), 10u);
  EXPECT_EQ(v.paced_latency_ms[0], 1000);
  EXPECT_EQ(v.measured, 0);
}

TEST(PeersJudgeTest, RefusesUnknownAndRepeatedInput) {
  Judge judge;
  EXPECT_FALSE(judge.AddInput("other-1", "M0000000001|", {0, 0, 0}));
  EXPECT_FALSE(judge.AddInput("ok-m1", "X0000000001|", {0, 1, 0}));
  EXPECT_TRUE(judge.AddInput("ok-m1", "M0000000001|", {0, 2, 0}));
  EXPECT_FALSE(judge.AddInput("ok-m1", "M0000000001|", {0, 3, 0}));
  EXPECT_EQ(judge.missing(), 1);
}

}  // namespace
}  // namespace retryd::bench::peers
