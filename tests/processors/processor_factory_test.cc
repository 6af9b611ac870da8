#include "server/processors/processor_factory.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd {
namespace {

TEST(MakeProcessorTest, BuildsTheSimulateProcessor) {
  v1::ProcessorConfig config;
  config.mutable_simulate()->set_permanent_failure_rate(1.0);
  absl::StatusOr<std::unique_ptr<engine::Processor>> processor = MakeProcessor(config);
  ASSERT_TRUE(processor.ok()) << processor.status();
  EXPECT_FALSE((*processor)->asynchronous());
  Record record;
  record.topic = "t";
  const engine::Outcome outcome = (*processor)->Process(record, 1);
  EXPECT_EQ(outcome.kind, engine::Outcome::Kind::kPermanent);
  EXPECT_EQ(outcome.reason, "simulated permanent failure");
}

TEST(MakeProcessorTest, BuildsTheGrpcProcessor) {
  v1::ProcessorConfig config;
  config.mutable_grpc()->set_target("127.0.0.1:1");
  config.mutable_grpc()->set_max_concurrent_calls(3);
  absl::StatusOr<std::unique_ptr<engine::Processor>> processor = MakeProcessor(config);
  ASSERT_TRUE(processor.ok()) << processor.status();
  EXPECT_TRUE((*processor)->asynchronous());
  EXPECT_EQ((*processor)->max_concurrent_calls(), 3);
}

TEST(MakeProcessorTest, PassesOnTheKindsError) {
  v1::ProcessorConfig config;
  config.mutable_grpc()->set_target("127.0.0.1:1");
  config.mutable_grpc()->set_token_env("RETRYD_TEST_UNSET_VARIABLE");
  absl::StatusOr<std::unique_ptr<engine::Processor>> processor = MakeProcessor(config);
  ASSERT_FALSE(processor.ok());
  EXPECT_THAT(processor.status().message(), ::testing::HasSubstr("grpc.token_env"));
}

TEST(MakeProcessorTest, NoKindIsInvalidArgument) {
  absl::StatusOr<std::unique_ptr<engine::Processor>> processor =
      MakeProcessor(v1::ProcessorConfig{});
  ASSERT_FALSE(processor.ok());
  EXPECT_EQ(processor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(processor.status().message(), ::testing::HasSubstr("processor { simulate {} }"));
}

}  // namespace
}  // namespace retryd
