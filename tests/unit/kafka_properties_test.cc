#include "server/kafka/properties.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::kafka {
namespace {

using ::testing::HasSubstr;

constexpr int kV2_0_2 = 0x020002ff;
constexpr int kV2_3_0 = 0x020300ff;

TEST(CheckAssignmentStrategyTest, CooperativeStickyNeedsLibrdkafka2_3) {
  const absl::Status refused = CheckAssignmentStrategy("cooperative-sticky", kV2_0_2);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("partition.assignment.strategy"));
  EXPECT_THAT(refused.message(), HasSubstr("librdkafka 2.0.2"));
  EXPECT_THAT(refused.message(), HasSubstr("issue 4312, fixed in 2.3.0"));
  EXPECT_THAT(refused.message(), HasSubstr("\"range,roundrobin\""));

  EXPECT_TRUE(CheckAssignmentStrategy("cooperative-sticky", kV2_3_0).ok());
}

TEST(CheckAssignmentStrategyTest, EagerAssignorsAreFine) {
  for (const char* strategy : {"range", "roundrobin", "range,roundrobin"}) {
    EXPECT_TRUE(CheckAssignmentStrategy(strategy, kV2_0_2).ok()) << strategy;
  }
}

// MakeConf applies the check to the librdkafka it runs with.
TEST(MakeConfTest, RefusesCooperativeStickyWhereLibrdkafkaWouldAbort) {
  const absl::StatusOr<ConfPtr> conf =
      MakeConf("127.0.0.1:9", {{"partition.assignment.strategy", "cooperative-sticky"}}, {});
  if (rd_kafka_version() < kV2_3_0) {
    EXPECT_EQ(conf.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(conf.status().message(), HasSubstr(rd_kafka_version_str()));
  } else {
    EXPECT_TRUE(conf.ok()) << conf.status();
  }
  EXPECT_TRUE(MakeConf("127.0.0.1:9", {{"partition.assignment.strategy", "roundrobin"}}, {}).ok());
}

TEST(MakeConfTest, ManagedPropertiesCannotBeContradicted) {
  const absl::StatusOr<ConfPtr> conf =
      MakeConf("127.0.0.1:9", {{"enable.auto.commit", "true"}}, {{"enable.auto.commit", "false"}});
  EXPECT_EQ(conf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(conf.status().message(), HasSubstr("managed by retryd"));
}

}  // namespace
}  // namespace retryd::kafka
