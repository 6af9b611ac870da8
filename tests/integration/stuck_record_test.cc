// Seeing and freeing a stuck record: Engine::ListInFlight shows the records
// the threads hold and why; Engine::DeadLetterRecord moves one of them to
// the dead-letter topic at once, and its partition moves on. Judged as an
// operator sees it: the list, the topics, the committed offsets.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/api/engine.h"
#include "server/engine/api/processor.h"
#include "server/engine/held/in_flight.h"
#include "tests/support/outcomes.h"
#include "tests/support/test_cluster.h"
#include "tests/support/wait_for.h"

namespace retryd {
namespace {

using ::retryd::testing::CommittedOffsets;
using ::retryd::testing::CreateTopics;
using ::retryd::testing::HeaderValue;
using ::retryd::testing::Keys;
using ::retryd::testing::OutOfOrder;
using ::retryd::testing::ProduceKeys;
using ::retryd::testing::ReadAll;
using ::retryd::testing::StartEngine;
using ::retryd::testing::TestEngineOptions;
using ::retryd::testing::TestProcessor;
using ::retryd::testing::WaitFor;
using ::testing::HasSubstr;

// An asynchronous processor whose calls stay open until Release(), then
// succeed; a cancelled call ends at once (as abandoned work does).
class GatedProcessor : public engine::Processor {
 public:
  engine::Outcome Process(const Record&, int) override { return engine::Outcome::Ok(); }
  bool asynchronous() const override { return true; }
  int max_concurrent_calls() const override { return 4; }
  void Start(const Record&, const engine::AttemptInfo&,
             std::shared_ptr<engine::Cancellation> cancel, engine::ProcessDone done) override {
    absl::MutexLock lock(&mu_);
    if (released_) {
      std::move(done)(engine::Outcome::Ok());
      return;
    }
    open_.push_back({std::move(cancel), std::move(done)});
  }
  // Ends every open call with OK, and every later call at once.
  void Release() {
    std::vector<Open> open;
    {
      absl::MutexLock lock(&mu_);
      released_ = true;
      open.swap(open_);
    }
    for (Open& call : open) std::move(call.done)(engine::Outcome::Ok());
  }

 private:
  struct Open {
    std::shared_ptr<engine::Cancellation> cancel;
    engine::ProcessDone done;
  };
  absl::Mutex mu_;
  std::vector<Open> open_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// A downstream that never takes a call.
class UnavailableProcessor : public engine::Processor {
 public:
  engine::Outcome Process(const Record&, int) override {
    return engine::Outcome::Unavailable("UNAVAILABLE: connection refused",
                                        engine::Outcome::Kind::kRetriable);
  }
};

// Synchronous: a call for a block- key does not end until Release();
// doomed- keys fail retriably; the rest succeed.
class BlockingProcessor : public engine::Processor {
 public:
  engine::Outcome Process(const Record& record, int) override {
    const std::string key = record.key.value_or("");
    if (key.rfind("doomed-", 0) == 0) return engine::Outcome::Retriable("doomed");
    if (key.rfind("block-", 0) == 0) {
      absl::MutexLock lock(&mu_);
      blocked_ = true;
      mu_.Await(absl::Condition(&released_));
      blocked_ = false;
    }
    return engine::Outcome::Ok();
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  bool blocked() const {
    absl::MutexLock lock(&mu_);
    return blocked_;
  }

 private:
  mutable absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
};

// Far beyond any test's run: a record that failed stays held.
constexpr int64_t kLongBackoffMs = 10 * 60 * 1000;

engine::InFlightList List(const engine::Engine& engine, size_t limit = 100) {
  return engine.ListInFlight(limit, absl::Now() + absl::Seconds(5));
}

std::vector<std::string> OutputKeys(const testing::TestTopics& topics) {
  std::vector<std::string> keys;
  for (const Record& r : ReadAll(topics.output)) keys.push_back(r.key.value_or("<null>"));
  return keys;
}

TEST(StuckRecordTest, InOrderHeldRecordIsShownAndDeadLetteredAndItsPartitionMovesOn) {
  const testing::TestTopics topics = CreateTopics("stuck-inorder", 1);
  ProduceKeys(topics.input, {"ok-0", "ok-1", "doomed-2", "ok-3", "ok-4", "ok-5"});
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  options.retry.backoff = {
      .initial_ms = kLongBackoffMs, .multiplier = 1.0, .max_ms = kLongBackoffMs};
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor());
  ASSERT_NE(engine, nullptr);

  // doomed-2 failed once and is retried in place much later; the three
  // records behind it wait.
  ASSERT_TRUE(WaitFor([&] { return List(*engine).total == 4; }, absl::Seconds(30)))
      << "in flight: " << List(*engine).total;
  const engine::InFlightList list = List(*engine);
  ASSERT_EQ(list.records.size(), 4u);
  EXPECT_TRUE(list.unanswered_thread_ids.empty());
  const engine::InFlightRecord& stuck = list.records[0];  // The oldest.
  EXPECT_EQ(stuck.key, "doomed-2");
  EXPECT_EQ(stuck.state, engine::InFlightState::kWaitingDue);
  EXPECT_EQ(stuck.topic, topics.input);
  EXPECT_EQ(stuck.partition, 0);
  EXPECT_EQ(stuck.offset, 2);
  EXPECT_EQ(stuck.attempt, 2);  // The next one: one attempt failed.
  EXPECT_THAT(stuck.last_error, ::testing::Not(::testing::IsEmpty()));
  EXPECT_GT(stuck.due_ms, stuck.since_ms);
  EXPECT_EQ(stuck.role, engine::ThreadRole::kPrimary);
  for (size_t i = 1; i < list.records.size(); ++i) {
    EXPECT_EQ(list.records[i].state, engine::InFlightState::kWaitingBehind) << i;
    EXPECT_EQ(list.records[i].offset, static_cast<int64_t>(i) + 2) << i;
    EXPECT_EQ(list.records[i].attempt, 1);
    EXPECT_EQ(list.records[i].thread_id, stuck.thread_id);
  }
  // A limit keeps the oldest, and the total says how many there are.
  const engine::InFlightList first = List(*engine, 1);
  ASSERT_EQ(first.records.size(), 1u);
  EXPECT_EQ(first.records[0].offset, 2);
  EXPECT_EQ(first.total, 4);

  // Held: the records behind it are not in the output, and the commit
  // stays at it.
  ASSERT_TRUE(WaitFor([&] { return CommittedOffsets(options.group_id, topics.input)[0] == 2; },
                      absl::Seconds(10)));
  EXPECT_EQ(OutputKeys(topics), (std::vector<std::string>{"ok-0", "ok-1"}));

  // A record nobody holds.
  absl::StatusOr<int> unknown =
      engine->DeadLetterRecord({topics.input, 0, 999}, absl::Now() + absl::Seconds(5));
  EXPECT_TRUE(absl::IsNotFound(unknown.status())) << unknown.status();
  EXPECT_THAT(unknown.status().message(), HasSubstr(topics.input + "/0@999"));

  absl::StatusOr<int> moved =
      engine->DeadLetterRecord({topics.input, 0, 2}, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, stuck.thread_id);
  // Returned once acknowledged: the record is in the dead-letter topic.
  const std::vector<Record> dlq = ReadAll(topics.dlq);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].key, "doomed-2");
  EXPECT_EQ(dlq[0].value, "v-doomed-2");
  const std::string error = HeaderValue(dlq[0], "retryd-error");
  EXPECT_THAT(error, HasSubstr("dead-lettered by an operator"));
  EXPECT_THAT(error, HasSubstr("last error: " + stuck.last_error));
  EXPECT_EQ(HeaderValue(dlq[0], "retryd-attempt"), "1");
  EXPECT_EQ(HeaderValue(dlq[0], "retryd-original-offset"), "2");

  // The records behind it proceed, in order, and the commit moves past.
  ASSERT_TRUE(WaitFor([&] { return OutputKeys(topics).size() == 5; }, absl::Seconds(20)));
  EXPECT_EQ(OutputKeys(topics), (std::vector<std::string>{"ok-0", "ok-1", "ok-3", "ok-4", "ok-5"}));
  EXPECT_EQ(OutOfOrder(ReadAll(topics.output)), 0);
  ASSERT_TRUE(WaitFor([&] { return CommittedOffsets(options.group_id, topics.input)[0] == 6; },
                      absl::Seconds(10)));
  EXPECT_EQ(List(*engine).total, 0);
  // Gone from the threads: a second request finds nothing.
  EXPECT_TRUE(absl::IsNotFound(
      engine->DeadLetterRecord({topics.input, 0, 2}, absl::Now() + absl::Seconds(5)).status()));
  EXPECT_EQ(engine->Totals().dead_lettered, 1);
  engine->Stop();
}

TEST(StuckRecordTest, RetryThreadHeldRecordIsShownAndDeadLettered) {
  const testing::TestTopics topics = CreateTopics("stuck-retry", 1);
  ProduceKeys(topics.input, {"ok-0", "doomed-1", "ok-2"});
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 1;
  options.retry.backoff = {
      .initial_ms = kLongBackoffMs, .multiplier = 1.0, .max_ms = kLongBackoffMs};
  std::unique_ptr<engine::Engine> engine = StartEngine(options, TestProcessor());
  ASSERT_NE(engine, nullptr);

  // Unordered: the primary moves on; the retry thread holds doomed-1.
  ASSERT_TRUE(WaitFor(
      [&] {
        const engine::InFlightList list = List(*engine);
        return list.total == 1 && list.records[0].role == engine::ThreadRole::kRetry;
      },
      absl::Seconds(30)));
  const engine::InFlightRecord held = List(*engine).records[0];
  EXPECT_EQ(held.key, "doomed-1");
  EXPECT_EQ(held.state, engine::InFlightState::kWaitingDue);
  EXPECT_EQ(held.topic, topics.input);  // The original coordinates.
  EXPECT_EQ(held.partition, 0);
  EXPECT_EQ(held.offset, 1);
  EXPECT_EQ(held.read_from.topic, topics.retry);  // Where it was read.
  EXPECT_EQ(held.read_offset, 0);
  EXPECT_EQ(held.attempt, 2);
  EXPECT_THAT(held.last_error, ::testing::Not(::testing::IsEmpty()));
  ASSERT_TRUE(WaitFor([&] { return OutputKeys(topics).size() == 2; }, absl::Seconds(10)));
  // Held: the retry group's commit stays at it (or has not been made).
  EXPECT_LE(CommittedOffsets(options.group_id + ".retry", topics.retry)[0], 0);

  absl::StatusOr<int> moved =
      engine->DeadLetterRecord({topics.input, 0, 1}, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, held.thread_id);
  const std::vector<Record> dlq = ReadAll(topics.dlq);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].key, "doomed-1");
  EXPECT_THAT(HeaderValue(dlq[0], "retryd-error"), HasSubstr("dead-lettered by an operator"));
  EXPECT_EQ(HeaderValue(dlq[0], "retryd-original-topic"), topics.input);
  EXPECT_EQ(HeaderValue(dlq[0], "retryd-original-offset"), "1");
  ASSERT_TRUE(
      WaitFor([&] { return CommittedOffsets(options.group_id + ".retry", topics.retry)[0] == 1; },
              absl::Seconds(10)));
  EXPECT_EQ(List(*engine).total, 0);
  engine->Stop();
}

TEST(StuckRecordTest, RecordInAProcessorCallIsShownButNotDeadLettered) {
  const testing::TestTopics topics = CreateTopics("stuck-call", 1);
  ProduceKeys(topics.input, {"slow-0"});
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  auto owned = std::make_unique<GatedProcessor>();
  GatedProcessor* processor = owned.get();
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::move(owned));
  ASSERT_NE(engine, nullptr);
  absl::Cleanup release = [processor] { processor->Release(); };

  ASSERT_TRUE(WaitFor([&] { return List(*engine).total == 1; }, absl::Seconds(30)));
  const engine::InFlightRecord call = List(*engine).records[0];
  EXPECT_EQ(call.state, engine::InFlightState::kInCall);
  EXPECT_EQ(call.offset, 0);
  EXPECT_EQ(call.attempt, 1);
  EXPECT_EQ(call.due_ms, 0);
  EXPECT_TRUE(call.last_error.empty());

  absl::StatusOr<int> refused =
      engine->DeadLetterRecord({topics.input, 0, 0}, absl::Now() + absl::Seconds(5));
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("in a processor call"));
  EXPECT_THAT(refused.status().message(), HasSubstr("try again"));

  // The call goes on and ends as it would have: the record is not lost.
  processor->Release();
  ASSERT_TRUE(WaitFor([&] { return OutputKeys(topics).size() == 1; }, absl::Seconds(10)));
  EXPECT_TRUE(ReadAll(topics.dlq).empty());
  engine->Stop();
}

TEST(StuckRecordTest, RecordDeferredWhileTheDownstreamIsDownIsShownAndDeadLettered) {
  const testing::TestTopics topics = CreateTopics("stuck-deferred", 1);
  ProduceKeys(topics.input, {"k-0"});
  engine::EngineOptions options = TestEngineOptions(topics);
  options.retry.threads = 0;
  // Down after the first unavailable call, and no probe for a long time.
  options.downstream = {
      .outage_after = 1, .probe_initial_ms = kLongBackoffMs, .probe_max_ms = kLongBackoffMs};
  std::unique_ptr<engine::Engine> engine =
      StartEngine(options, std::make_unique<UnavailableProcessor>());
  ASSERT_NE(engine, nullptr);

  ASSERT_TRUE(WaitFor([&] { return List(*engine).total == 1; }, absl::Seconds(30)));
  const engine::InFlightRecord deferred = List(*engine).records[0];
  EXPECT_EQ(deferred.state, engine::InFlightState::kDeferred);
  EXPECT_EQ(deferred.key, "k-0");
  EXPECT_EQ(deferred.attempt, 1) << "no attempt used";
  EXPECT_GT(deferred.due_ms, absl::ToUnixMillis(absl::Now()));
  EXPECT_TRUE(engine->downstream().down);

  absl::StatusOr<int> moved =
      engine->DeadLetterRecord({topics.input, 0, 0}, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(moved.ok()) << moved.status();
  const std::vector<Record> dlq = ReadAll(topics.dlq);
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq[0].key, "k-0");
  EXPECT_THAT(HeaderValue(dlq[0], "retryd-error"),
              HasSubstr("dead-lettered by an operator (DeadLetterRecord) after 0 failed attempts"));
  ASSERT_TRUE(WaitFor([&] { return CommittedOffsets(options.group_id, topics.input)[0] == 1; },
                      absl::Seconds(10)));
  EXPECT_EQ(List(*engine).total, 0);
  engine->Stop();
}

TEST(StuckRecordTest, ThreadBusyInALongCallIsNamedAndChangesNothingAfterTheDeadline) {
  const testing::TestTopics topics = CreateTopics("stuck-busy", 2);
  engine::EngineOptions options = TestEngineOptions(topics);
  options.ordering = engine::Ordering::kInOrder;
  options.retry.threads = 0;
  options.retry.backoff = {
      .initial_ms = kLongBackoffMs, .multiplier = 1.0, .max_ms = kLongBackoffMs};
  auto owned = std::make_unique<BlockingProcessor>();
  BlockingProcessor* processor = owned.get();
  std::unique_ptr<engine::Engine> engine = StartEngine(options, std::move(owned));
  ASSERT_NE(engine, nullptr);
  absl::Cleanup release = [processor] { processor->Release(); };

  auto produce = [&](int32_t partition, const std::string& key) {
    OutgoingRecord r;
    r.topic = topics.input;
    r.partition = partition;
    r.key = key;
    r.value = "v-" + key;
    testing::ProduceRecords({r});
  };
  produce(0, "doomed-0");
  ASSERT_TRUE(WaitFor([&] { return List(*engine).total == 1; }, absl::Seconds(30)));
  // The one thread is now in a synchronous call that does not end.
  produce(1, "block-1");
  ASSERT_TRUE(WaitFor([&] { return processor->blocked(); }, absl::Seconds(30)));

  const engine::InFlightList list =
      engine->ListInFlight(100, absl::Now() + absl::Milliseconds(300));
  ASSERT_EQ(list.unanswered_thread_ids.size(), 1u);
  EXPECT_TRUE(list.records.empty());

  absl::StatusOr<int> late =
      engine->DeadLetterRecord({topics.input, 0, 0}, absl::Now() + absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("ListInFlight tells"));

  // A call cancelled while it waits (a client gone) ends at once, long
  // before its deadline.
  engine::Cancellation cancel;
  absl::StatusOr<int> cancelled;
  std::thread caller([&] {
    cancelled =
        engine->DeadLetterRecord({topics.input, 0, 0}, absl::Now() + absl::Minutes(10), &cancel);
  });
  cancel.Cancel();
  caller.join();
  EXPECT_TRUE(absl::IsCancelled(cancelled.status())) << cancelled.status();

  // Free again, the thread takes the request up after its deadline and
  // leaves the record where it was.
  processor->Release();
  ASSERT_TRUE(WaitFor([&] { return OutputKeys(topics).size() == 1; }, absl::Seconds(20)));
  const engine::InFlightList after = List(*engine);
  ASSERT_EQ(after.total, 1);
  EXPECT_EQ(after.records[0].key, "doomed-0");
  EXPECT_EQ(after.records[0].state, engine::InFlightState::kWaitingDue);
  EXPECT_TRUE(ReadAll(topics.dlq).empty());
  engine->Stop();
}

}  // namespace
}  // namespace retryd
