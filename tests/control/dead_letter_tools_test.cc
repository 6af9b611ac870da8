// The dead-letter tools (server/control/dead_letter_tools.h) on the test
// broker, without gRPC: listing with filters and pages, purge marks, and a
// redrive refused where the cluster has no Admin API (the mock). Their
// whole run on a real Kafka is the kafka label's kafka_dead_letters. And
// the operation registry's cancel, which waits for the operation to end.
#include "server/control/dead_letter_tools.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/common/error_reason.h"
#include "server/engine/handoff/retry_headers.h"
#include "server/operations/operation_registry.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd::control {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kCall = absl::Seconds(30);

class DeadLetterToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topics_ = testing::CreateTopics("dlq-tools", /*partitions=*/2);
    const engine::EngineOptions engine = testing::TestEngineOptions(topics_);
    DeadLetterToolsOptions options;
    options.bootstrap_servers = engine.bootstrap_servers;
    options.kafka_properties = engine.kafka_properties;
    options.dead_letter_topic = topics_.dlq;
    options.group_id = engine.group_id;
    options.retry_topic = topics_.retry;
    options.instance_name = "test";
    tools_ = std::make_unique<DeadLetterTools>(options, operations_);
  }
  void TearDown() override {
    tools_->Shutdown();
    operations_.Shutdown();
  }

  // Dead letters key-0..key-(n-1) in partition 0, reasons alternating.
  void Seed(int n) {
    std::vector<OutgoingRecord> records;
    for (int i = 0; i < n; ++i) {
      engine::RetryMetadata m;
      m.attempt = 2 + i % 2;
      m.first_failure_ms = 1'700'000'000'000 + i;
      m.original_topic = topics_.input;
      m.error = absl::StrCat("UNAVAILABLE: #", i);
      m.error_reason = i % 2 == 0 ? "shop.example/A" : "shop.example/B";
      OutgoingRecord r;
      r.topic = topics_.dlq;
      r.partition = 0;
      r.key = absl::StrCat("key-", i);
      r.value = "v";
      r.headers = engine::WithDeadLetterHeaders({}, m, {1, "test/thread-1"});
      records.push_back(std::move(r));
    }
    testing::ProduceRecords(records);
  }

  // Every key ListDeadLetters gives for `filter`, `page_size` a page.
  std::vector<std::string> ListAll(const v1::DeadLetterFilter& filter, int page_size,
                                   int* pages = nullptr) {
    std::vector<std::string> keys;
    v1::ListDeadLettersRequest request;
    *request.mutable_filter() = filter;
    request.set_page_size(page_size);
    for (int page = 1; page <= 100; ++page) {
      absl::StatusOr<v1::ListDeadLettersResponse> r = tools_->List(request, absl::Now() + kCall);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      for (const v1::DeadLetter& d : r->records()) keys.push_back(d.key());
      if (pages != nullptr) *pages = page;
      if (r->next_page_token().empty()) break;
      request.set_page_token(r->next_page_token());
    }
    return keys;
  }

  testing::TestTopics topics_;
  OperationRegistry operations_;
  std::unique_ptr<DeadLetterTools> tools_;
};

TEST_F(DeadLetterToolsTest, ListsPagesFiltersAndHidesWhatWasPurged) {
  Seed(5);
  int pages = 0;
  EXPECT_THAT(ListAll({}, 2, &pages), ElementsAre("key-0", "key-1", "key-2", "key-3", "key-4"));
  EXPECT_EQ(pages, 3);
  v1::DeadLetterFilter reason_b;
  reason_b.set_reason("B");
  EXPECT_THAT(ListAll(reason_b, 100), ElementsAre("key-1", "key-3"));
  v1::DeadLetterFilter partition_1;
  partition_1.add_partitions(1);
  EXPECT_THAT(ListAll(partition_1, 100), ElementsAre());

  v1::PurgeDeadLettersRequest purge;
  (*purge.mutable_up_to())[0] = 3;
  absl::StatusOr<v1::PurgeDeadLettersResponse> purged = tools_->Purge(purge, absl::Now() + kCall);
  ASSERT_TRUE(purged.ok()) << purged.status();
  ASSERT_EQ(purged->partitions_size(), 1);
  EXPECT_EQ(purged->partitions(0).from(), 0);
  EXPECT_EQ(purged->partitions(0).to(), 3);
  EXPECT_THAT(ListAll({}, 2), ElementsAre("key-3", "key-4"));
  // A mark only moves forward.
  (*purge.mutable_up_to())[0] = 1;
  purged = tools_->Purge(purge, absl::Now() + kCall);
  ASSERT_TRUE(purged.ok()) << purged.status();
  EXPECT_EQ(purged->partitions(0).to(), 3);
  EXPECT_THAT(ListAll({}, 2), ElementsAre("key-3", "key-4"));
  // Every partition to its end.
  v1::PurgeDeadLettersRequest all;
  all.set_all(true);
  ASSERT_TRUE(tools_->Purge(all, absl::Now() + kCall).ok());
  EXPECT_THAT(ListAll({}, 2), ElementsAre());
}

TEST_F(DeadLetterToolsTest, RefusesWhatItCannotDo) {
  auto reason = [](const absl::Status& s) { return ReasonOf(s); };
  v1::ListDeadLettersRequest big;
  big.set_page_size(1001);
  EXPECT_EQ(reason(tools_->List(big, absl::Now() + kCall).status()), "INVALID_FIELD");
  v1::ListDeadLettersRequest forged;
  forged.set_page_token("not-a-token");
  EXPECT_EQ(reason(tools_->List(forged, absl::Now() + kCall).status()), "INVALID_FIELD");
  v1::PurgeDeadLettersRequest both;
  both.set_all(true);
  (*both.mutable_up_to())[0] = 1;
  EXPECT_EQ(reason(tools_->Purge(both, absl::Now() + kCall).status()), "INVALID_FIELD");
  v1::PurgeDeadLettersRequest past_end;
  (*past_end.mutable_up_to())[0] = 10;
  const absl::Status s = tools_->Purge(past_end, absl::Now() + kCall).status();
  EXPECT_EQ(reason(s), "INVALID_FIELD");
  EXPECT_THAT(s.message(), HasSubstr("the partition's end"));
  v1::StartRedriveRequest fast;
  fast.set_rate_per_s(100'001);
  EXPECT_EQ(reason(tools_->StartRedrive(fast, "test", absl::Now() + kCall).status()),
            "INVALID_FIELD");
  v1::StartRedriveRequest to_itself;
  to_itself.set_target_topic(topics_.dlq);
  EXPECT_EQ(reason(tools_->StartRedrive(to_itself, "test", absl::Now() + kCall).status()),
            "INVALID_FIELD");
  if (!testing::OnRealKafka()) {
    // The mock cluster has no Admin API: a redrive cannot tell whether
    // another one runs, and says so; a dry run needs none.
    const absl::Status refused =
        tools_->StartRedrive(v1::StartRedriveRequest(), "test", absl::Now() + kCall).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_EQ(reason(refused), "ADMIN_API_UNAVAILABLE") << refused;
  }
}

TEST_F(DeadLetterToolsTest, ADryRunCountsAndWritesNothing) {
  Seed(4);
  v1::StartRedriveRequest request;
  request.set_dry_run(true);
  request.mutable_filter()->set_reason("A");
  absl::StatusOr<v1::Operation> op = tools_->StartRedrive(request, "test", absl::Now() + kCall);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->kind(), v1::OPERATION_KIND_REDRIVE);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        absl::StatusOr<v1::Operation> now = operations_.Get(op->id());
        return now.ok() && now->done();
      },
      kCall));
  absl::StatusOr<v1::Operation> ended = operations_.Get(op->id());
  ASSERT_TRUE(ended.ok());
  ASSERT_TRUE(ended->done()) << ended->DebugString();
  EXPECT_EQ(ended->redrive().progress().scanned(), 4);
  EXPECT_EQ(ended->redrive().progress().matched(), 2);
  EXPECT_EQ(ended->redrive().progress().redriven(), 2);
  ASSERT_EQ(ended->redrive().by_reason_size(), 1);
  EXPECT_EQ(ended->redrive().by_reason(0).key(), "shop.example/A");
  EXPECT_TRUE(testing::ReadAll(topics_.input).empty());
  EXPECT_TRUE(testing::ReadAll(topics_.retry).empty());
}

TEST(OperationRegistryTest, CancelWaitsForTheOperationToEnd) {
  OperationRegistry registry;
  absl::Notification cleaned_up;
  absl::StatusOr<v1::Operation> op = registry.Run(
      v1::OPERATION_KIND_REDRIVE, "", nullptr,
      [&](engine::Cancellation& cancel, v1::Operation& result) {
        absl::Mutex mu;
        engine::Cancellation::Subscription wake =
            cancel.OnCancel([&mu] { absl::MutexLock l(&mu); });
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(
            +[](engine::Cancellation* c) { return c->cancelled(); }, &cancel));
        // What a redrive does when cancelled: flushes, then reports.
        result.mutable_redrive()->mutable_progress()->set_redriven(7);
        cleaned_up.Notify();
        return absl::CancelledError("cancelled");
      },
      "fixed-id");
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->id(), "fixed-id");
  EXPECT_EQ(
      registry
          .Run(
              v1::OPERATION_KIND_REDRIVE, "", nullptr,
              [](engine::Cancellation&, v1::Operation&) { return absl::OkStatus(); }, "fixed-id")
          .status()
          .code(),
      absl::StatusCode::kAlreadyExists);
  absl::StatusOr<v1::Operation> cancelled =
      registry.Cancel("fixed-id", absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(cancelled.ok());
  EXPECT_TRUE(cleaned_up.HasBeenNotified());
  EXPECT_TRUE(cancelled->done());
  EXPECT_EQ(cancelled->state(), v1::OPERATION_STATE_CANCELLED);
  // The result of an operation that did not succeed is kept.
  EXPECT_EQ(cancelled->redrive().progress().redriven(), 7);
}

}  // namespace
}  // namespace retryd::control
