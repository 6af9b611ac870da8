// The hand-off pieces that need no broker: the records a worker builds for
// an outcome, and what a delivery report does with a hand-off (complete,
// send again, drop, fail the thread).
#include "server/engine/handoff/hand_offs.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/engine/handoff/dead_letter_fit.h"

namespace retryd::engine {
namespace {

std::string ValueOf(const Headers& headers, std::string_view key) {
  for (const Header& h : headers) {
    if (h.key == key) return h.value.value_or("<null>");
  }
  return "<absent>";
}

HeldRecord Held(std::optional<std::string> key = "k1") {
  HeldRecord held;
  held.source = {"orders.retry", 1};
  held.source_offset = 70;
  held.attempt = 3;
  held.first_failure_ms = 1000;
  held.due_ms = 5000;
  held.last_error = "timeout";
  held.first_error = "connection reset";
  held.last_error_reason = "billing.example.com/QUOTA_EXCEEDED";
  held.record.topic = "orders";
  held.record.partition = 2;
  held.record.offset = 41;
  held.record.timestamp_ms = 900;
  held.record.key = std::move(key);
  held.record.value = "v";
  held.record.headers = {{"trace", "t1"}};
  return held;
}

struct Delivery {
  KeyParking parking;
  std::shared_ptr<HandOffMailbox> mailbox =
      std::make_shared<HandOffMailbox>(7, ThreadRole::kRetry, /*resume_below=*/10, &parking);
  std::shared_ptr<CompletionTracker> tracker = std::make_shared<CompletionTracker>();

  // A hand-off of the source record at `offset`, begun and counted in flight
  // as HandOffs::Emit counts it.
  HandOff Begun(int64_t offset, HandOffKind kind = HandOffKind::kOutput) {
    EXPECT_TRUE(tracker->Begin(offset));
    mailbox->in_flight.fetch_add(1);
    HandOff h;
    h.kind = kind;
    h.tracker = tracker;
    h.offset = offset;
    h.record.topic = "out";
    return h;
  }
  size_t redo() {
    absl::MutexLock lock(&mailbox->redo_mu);
    return mailbox->redo.size();
  }
};

TEST(HandOffRecordsTest, OutputCarriesTheOriginHeadersAndWhatTheProcessorMade) {
  HeldRecord held = Held();
  Outcome outcome;
  outcome.value = "made";
  HandOff h = OutputHandOff(ThreadRole::kRetry, held, outcome, "orders.out");
  EXPECT_EQ(h.kind, HandOffKind::kOutput);
  EXPECT_EQ(h.offset, 70);
  EXPECT_EQ(h.record.topic, "orders.out");
  EXPECT_EQ(h.record.key, "k1");
  EXPECT_EQ(h.record.value, "made");
  EXPECT_EQ(ValueOf(h.record.headers, "trace"), "t1");
  // The origin headers are made when the hand-off is produced, after the
  // record's own: none of those is left in the record.
  EXPECT_EQ(ValueOf(h.record.headers, std::string(kOriginalTopicHeader)), "<absent>");
  const OutputHeaders origin(h);
  ASSERT_EQ(origin.refs().size(), 4u);
  std::vector<std::pair<std::string, std::string>> made;
  for (const kafka::HeaderRef& ref : origin.refs()) {
    ASSERT_TRUE(ref.value.has_value());
    made.emplace_back(ref.key, *ref.value);
  }
  EXPECT_EQ(made, (std::vector<std::pair<std::string, std::string>>{
                      {std::string(kOriginalTopicHeader), "orders"},
                      {std::string(kOriginalPartitionHeader), "2"},
                      {std::string(kOriginalOffsetHeader), "41"},
                      {std::string(kAttemptHeader), "3"}}));
  EXPECT_EQ(origin.bytes(),
            static_cast<int64_t>(kOriginalTopicHeader.size() + 6 + kOriginalPartitionHeader.size() +
                                 1 + kOriginalOffsetHeader.size() + 2 + kAttemptHeader.size() + 1));
  // A retry thread's keyed record releases its parked key once acknowledged;
  // a primary's never parked it.
  ASSERT_TRUE(h.release.has_value());
  EXPECT_EQ(h.release->offset, 41);
  HeldRecord primary = Held();
  EXPECT_FALSE(OutputHandOff(ThreadRole::kPrimary, primary, outcome, "o").release.has_value());
}

// An input header with an origin header's name is replaced, not repeated;
// other kinds of hand-off carry their headers in their record.
TEST(HandOffRecordsTest, OutputReplacesOriginHeadersOfTheInputAndOnlyOutputsGetThem) {
  HeldRecord held = Held();
  held.record.headers.push_back({std::string(kOriginalOffsetHeader), "999"});
  held.record.headers.push_back({std::string(kAttemptHeader), std::nullopt});
  Outcome outcome;
  HandOff h = OutputHandOff(ThreadRole::kPrimary, held, outcome, "orders.out");
  ASSERT_EQ(h.record.headers.size(), 1u);
  EXPECT_EQ(h.record.headers[0].key, "trace");
  EXPECT_EQ(OutputHeaders(h).refs().size(), 4u);
  EXPECT_TRUE(OutputHeaders(RetryHandOff(Held(), HandOffKind::kRetry, "r")).refs().empty());
  EXPECT_EQ(OutputHeaders(RetryHandOff(Held(), HandOffKind::kRetry, "r")).bytes(), 0);
}

TEST(HandOffRecordsTest, RetryRecordCarriesItsNextAttemptAndDueTime) {
  HandOff h = RetryHandOff(Held(), HandOffKind::kRetry, "orders.retry");
  EXPECT_EQ(h.record.topic, "orders.retry");
  EXPECT_EQ(h.offset, 70);
  absl::StatusOr<RetryMetadata> meta = ParseRetryHeaders(h.record.headers);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->attempt, 3);
  EXPECT_EQ(meta->due_ms, 5000);
  EXPECT_EQ(meta->first_failure_ms, 1000);
  EXPECT_EQ(meta->original_offset, 41);
  EXPECT_EQ(meta->error, "timeout");
}

// The bytes a held record hands off are counted once: the hand-off takes
// the held record's charge, and Emit resizes it to what goes to Kafka, so
// the budget never sees the record twice while the held one still lives.
TEST(HandOffRecordsTest, OutputAndRetryTakeOverTheHeldRecordsCharge) {
  auto account = std::make_shared<std::atomic<int64_t>>(0);
  HeldRecord held = Held();
  held.charge = ByteCharge(account, 100);
  Outcome outcome;
  HandOff out = OutputHandOff(ThreadRole::kRetry, held, outcome, "orders.out");
  EXPECT_EQ(account->load(), 100);
  EXPECT_EQ(held.charge.bytes(), 0);
  EXPECT_EQ(out.charge.bytes(), 100);
  out.charge.Resize(130);  // The output headers added.
  EXPECT_EQ(account->load(), 130);
  out = HandOff();
  EXPECT_EQ(account->load(), 0);

  HeldRecord retried = Held();
  retried.charge = ByteCharge(account, 50);
  HandOff retry = RetryHandOff(std::move(retried), HandOffKind::kRetry, "orders.retry");
  EXPECT_EQ(account->load(), 50);
  EXPECT_EQ(retry.charge.bytes(), 50);
  retry = HandOff();
  EXPECT_EQ(account->load(), 0);
}

TEST(HandOffRecordsTest, DeadLetterSaysWhyAndWhen) {
  HeldRecord never_failed = Held();
  never_failed.first_failure_ms = 0;
  never_failed.first_error = "";
  HandOff h = DeadLetterHandOff(ThreadRole::kPrimary, never_failed, "permanent failure: bad",
                                "orders.dlq", {8000, "pod-1/thread-4"});
  EXPECT_EQ(h.kind, HandOffKind::kDeadLetter);
  EXPECT_EQ(h.record.topic, "orders.dlq");
  absl::StatusOr<RetryMetadata> meta = ParseRetryHeaders(h.record.headers);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->error, "permanent failure: bad");
  EXPECT_EQ(meta->first_failure_ms, 8000);                 // It failed first now...
  EXPECT_EQ(meta->first_error, "permanent failure: bad");  // ...and for this.
  EXPECT_EQ(ValueOf(h.record.headers, kDeadLetteredMsHeader), "8000");
  EXPECT_EQ(ValueOf(h.record.headers, kDeadLetteredByHeader), "pod-1/thread-4");
}

TEST(HandOffRecordsTest, DeadLetterKeepsTheFirstErrorAndTheLastReason) {
  HandOff h = DeadLetterHandOff(ThreadRole::kRetry, Held(), "timeout (gave up after attempt 3)",
                                "orders.dlq", {8000, "thread-4"});
  absl::StatusOr<RetryMetadata> meta = ParseRetryHeaders(h.record.headers);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->error, "timeout (gave up after attempt 3)");
  EXPECT_EQ(meta->first_failure_ms, 1000);
  EXPECT_EQ(meta->first_error, "connection reset");
  EXPECT_EQ(meta->error_reason, "billing.example.com/QUOTA_EXCEEDED");
  EXPECT_EQ(ValueOf(h.record.headers, kDeadLetteredByHeader), "thread-4");
}

TEST(HandOffRecordsTest, RetryRecordCarriesTheFirstErrorAndTheLastReason) {
  HandOff h = RetryHandOff(Held(), HandOffKind::kRetry, "orders.retry");
  absl::StatusOr<RetryMetadata> meta = ParseRetryHeaders(h.record.headers);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->first_error, "connection reset");
  EXPECT_EQ(meta->error_reason, "billing.example.com/QUOTA_EXCEEDED");
  // Only dead letters say when and by whom.
  EXPECT_EQ(ValueOf(h.record.headers, kDeadLetteredMsHeader), "<absent>");
}

TEST(HandOffRecordsTest, MalformedRetryRecordIsKeptAsFoundAndDescribedByWhereItWasRead) {
  Record r;
  r.topic = "orders.retry";
  r.partition = 0;
  r.offset = 9;
  r.value = "x";
  r.headers = {{std::string(kAttemptHeader), "not a number"},
               {std::string(kErrorReasonHeader), "an.earlier/FAILURE"}};
  HandOff h = MalformedDeadLetterHandOff(r, "malformed", "orders.dlq", {1, "thread-0"});
  EXPECT_EQ(h.offset, 9);
  EXPECT_EQ(ValueOf(h.record.headers, std::string(kAttemptHeader)), "not a number");
  EXPECT_EQ(ValueOf(h.record.headers, std::string(kErrorHeader)), "malformed");
  EXPECT_EQ(ValueOf(h.record.headers, std::string(kErrorReasonHeader)), "");
  EXPECT_EQ(ValueOf(h.record.headers, std::string(kDeadLetteredMsHeader)), "1");
  EXPECT_EQ(ValueOf(h.record.headers, std::string(kDeadLetteredByHeader)), "thread-0");
  EXPECT_EQ(h.origin.original_topic, "orders.retry");
  EXPECT_EQ(h.origin.original_offset, 9);
}

TEST(HandOffRecordsTest, RefusedRetryRecordBecomesAFittedDeadLetterWithTheAttemptsMade) {
  HeldRecord held = Held();
  held.record.value = std::string(100000, 'v');
  HandOff refused = RetryHandOff(std::move(held), HandOffKind::kRetry, "orders.retry");
  HandOff fitted =
      FittedDeadLetter(std::move(refused), "too large", "orders.dlq", 50000, {9000, "thread-7"});
  EXPECT_EQ(fitted.kind, HandOffKind::kDeadLetter);
  EXPECT_EQ(fitted.fit, 1);
  EXPECT_EQ(fitted.record.topic, "orders.dlq");
  EXPECT_LE(RecordWireSize(fitted.record), 50000u);
  EXPECT_EQ(ValueOf(fitted.record.headers, std::string(kAttemptHeader)), "2");
  EXPECT_NE(ValueOf(fitted.record.headers, std::string(kErrorHeader))
                .find("retry record refused by Kafka (too large)"),
            std::string::npos);
  EXPECT_EQ(ValueOf(fitted.record.headers, std::string(kFirstErrorHeader)), "connection reset");
  EXPECT_EQ(ValueOf(fitted.record.headers, std::string(kDeadLetteredMsHeader)), "9000");
  EXPECT_EQ(ValueOf(fitted.record.headers, std::string(kDeadLetteredByHeader)), "thread-7");
  // Refused again: the smallest form, and no further one.
  HandOff smallest =
      FittedDeadLetter(std::move(fitted), "too large", "orders.dlq", 50000, {9000, "thread-7"});
  EXPECT_EQ(smallest.fit, 2);
  EXPECT_LE(RecordWireSize(smallest.record), 16u * 1024);
}

TEST(HandOffDeliveryTest, AcknowledgedHandOffCompletesItsRecordAndCounts) {
  Delivery d;
  HandOff h = d.Begun(5, HandOffKind::kDeadLetter);
  HandOffs::OnDelivered(d.mailbox, h);
  EXPECT_EQ(d.tracker->CommitOffset(), 6);
  EXPECT_EQ(d.mailbox->in_flight.load(), 0);
  EXPECT_EQ(d.mailbox->counters.Read().dead_lettered, 1);
}

// A delivered hand-off waits in its mailbox for the worker to free it; it
// must not keep the mailbox alive from there (a mailbox holding itself
// through its own done list is never freed), failed or acknowledged.
TEST(HandOffDeliveryTest, ADeliveredHandOffLetsGoOfItsMailbox) {
  for (const absl::Status& status : {absl::OkStatus(), absl::UnavailableError("broker down")}) {
    Delivery d;
    auto emitted = std::make_unique<EmittedHandOff>(d.mailbox, d.Begun(5));
    EmittedHandOff* raw = emitted.get();
    raw->Delivered(std::move(emitted), status, 0, status.ok() ? 11 : -1);
    {
      absl::MutexLock lock(&d.mailbox->done_mu);
      ASSERT_EQ(d.mailbox->done.size(), 1u) << status;  // Kept for the worker to free.
      EXPECT_EQ(d.mailbox->done.front()->mailbox, nullptr) << status;
    }
    const std::weak_ptr<HandOffMailbox> weak = d.mailbox;
    d.mailbox.reset();
    EXPECT_TRUE(weak.expired()) << status;
  }
}

TEST(HandOffDeliveryTest, AcknowledgedOutcomeReleasesTheParkedKey) {
  Delivery d;
  const PartitionKey key{{"orders", 2}, "k1"};
  d.parking.Park(key, 41, absl::Now());
  HandOff h = d.Begun(5);
  h.release = ParkedRecord{key, 41, absl::InfinitePast()};
  HandOffs::OnDelivered(d.mailbox, h);
  EXPECT_EQ(d.parking.summary().keys, 0);
}

TEST(HandOffDeliveryTest, TransientFailureIsSentAgainAndHoldsItsPartitionCommit) {
  Delivery d;
  HandOffs::OnFailed(d.mailbox, d.Begun(5), absl::UnavailableError("broker down"));
  EXPECT_EQ(d.redo(), 1u);
  EXPECT_EQ(d.mailbox->FailedHandOffs(d.tracker), 1);
  EXPECT_FALSE(d.mailbox->has_failed());
  EXPECT_EQ(d.tracker->CommitOffset(), 5);  // Not past the record.
  EXPECT_EQ(d.mailbox->in_flight.load(), 1);
}

TEST(HandOffDeliveryTest, InOrderAcknowledgementThatOvertookAFailedOneIsReplayedAfterIt) {
  Delivery d;
  HandOffs::OnFailed(d.mailbox, d.Begun(5), absl::UnavailableError("broker down"));
  HandOff later = d.Begun(6);
  later.in_order = true;
  HandOffs::OnDelivered(d.mailbox, later);
  EXPECT_EQ(d.redo(), 2u);
  EXPECT_EQ(d.mailbox->FailedHandOffs(d.tracker), 2);
  EXPECT_EQ(d.tracker->CommitOffset(), 5);
}

TEST(HandOffDeliveryTest, HandOffOfAPartitionGivenUpIsDroppedAndItsRequestToldWhy) {
  Delivery d;
  HandOff h = d.Begun(5, HandOffKind::kDeadLetter);
  h.requested_by = WorkerRequest::DeadLetter({"orders", 2, 41}, absl::InfiniteFuture());
  std::shared_ptr<WorkerRequest> request = h.requested_by;
  d.tracker->Abandon();
  HandOffs::OnFailed(d.mailbox, std::move(h), absl::UnavailableError("broker down"));
  EXPECT_EQ(d.redo(), 0u);
  EXPECT_EQ(d.mailbox->in_flight.load(), 0);
  ASSERT_TRUE(request->Await(absl::Now()));
  EXPECT_TRUE(absl::IsAborted(request->status())) << request->status();
}

TEST(HandOffDeliveryTest, MissingTopicFailsTheThreadForGood) {
  Delivery d;
  HandOffs::OnFailed(d.mailbox, d.Begun(5), absl::NotFoundError("unknown topic"));
  EXPECT_TRUE(d.mailbox->has_failed());
  EXPECT_EQ(d.redo(), 0u);
  EXPECT_EQ(d.tracker->CommitOffset(), 5);
  EXPECT_NE(d.mailbox->last_error().find("output hand-off of"), std::string::npos)
      << d.mailbox->last_error();
}

TEST(HandOffDeliveryTest, RecordRefusedInItsSmallestFormFailsTheThread) {
  Delivery d;
  HandOff h = d.Begun(5);
  HandOffs::OnFailed(d.mailbox, std::move(h), absl::InvalidArgumentError("too large"));
  EXPECT_FALSE(d.mailbox->has_failed());  // First: replaced by a fitted form.
  HandOff smallest = d.Begun(6, HandOffKind::kDeadLetter);
  smallest.fit = 2;
  HandOffs::OnFailed(d.mailbox, std::move(smallest), absl::InvalidArgumentError("too large"));
  EXPECT_TRUE(d.mailbox->has_failed());
}

}  // namespace
}  // namespace retryd::engine
