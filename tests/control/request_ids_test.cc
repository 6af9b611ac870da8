// Unit tests of the request_id cache (server/control/request_ids.h) and of
// the ErrorInfo a reason becomes in a call's status (status.h).
#include "server/control/request_ids.h"

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "retryd/v1/control.pb.h"
#include "server/common/error_reason.h"
#include "server/control/status.h"

namespace retryd::control {
namespace {

using ::testing::HasSubstr;

constexpr char kId[] = "0b4c3a52-6f1e-4a8e-9d2c-3f7e8a1b2c4d";

std::string Fingerprint(int count) {
  v1::StartRetryThreadsRequest request;
  request.set_count(count);
  request.set_request_id(kId);
  return RequestFingerprint("StartRetryThreads", request);
}

TEST(RequestIdTest, AcceptsOnlyUuids) {
  EXPECT_TRUE(ValidateRequestId(kId).ok());
  EXPECT_TRUE(ValidateRequestId("0B4C3A52-6F1E-4A8E-9D2C-3F7E8A1B2C4D").ok());
  for (const char* bad :
       {"", "42", "0b4c3a52-6f1e-4a8e-9d2c-3f7e8a1b2c4", "0b4c3a52x6f1e-4a8e-9d2c-3f7e8a1b2c4d",
        "0b4c3a52-6f1e-4a8e-9d2c-3f7e8a1b2c4g"}) {
    const absl::Status s = ValidateRequestId(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("request_id: must be a UUID")) << bad;
    EXPECT_EQ(ReasonOf(s), "INVALID_FIELD");
  }
}

TEST(RequestIdTest, FingerprintLeavesTheIdOutAndTellsMethodsApart) {
  v1::StartRetryThreadsRequest a;
  a.set_count(2);
  a.set_request_id(kId);
  v1::StartRetryThreadsRequest b = a;
  b.set_request_id("11111111-2222-4333-8444-555555555555");
  EXPECT_EQ(RequestIdOf(a), kId);
  EXPECT_EQ(RequestFingerprint("StartRetryThreads", a), RequestFingerprint("StartRetryThreads", b));
  EXPECT_NE(RequestFingerprint("StartRetryThreads", a), RequestFingerprint("StopRetryThreads", a));
  b.set_count(3);
  EXPECT_NE(RequestFingerprint("StartRetryThreads", a), RequestFingerprint("StartRetryThreads", b));
  EXPECT_EQ(RequestIdOf(v1::GetStatusRequest()), "");
}

TEST(RequestIdCacheTest, ARetryOfASuccessReplaysItsResponse) {
  RequestIdCache cache;
  absl::StatusOr<RequestIdCache::Begun> first = cache.Begin(kId, Fingerprint(1), absl::Now());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->replay.has_value()) << "a new id runs";
  cache.End(kId, absl::OkStatus(), "response bytes");
  absl::StatusOr<RequestIdCache::Begun> retry = cache.Begin(kId, Fingerprint(1), absl::Now());
  ASSERT_TRUE(retry.ok()) << retry.status();
  ASSERT_TRUE(retry->replay.has_value());
  EXPECT_EQ(*retry->replay, "response bytes");
}

TEST(RequestIdCacheTest, TheSameIdWithAnotherRequestIsRefused) {
  RequestIdCache cache;
  ASSERT_TRUE(cache.Begin(kId, Fingerprint(1), absl::Now()).ok());
  cache.End(kId, absl::OkStatus(), "r");
  const absl::Status s = cache.Begin(kId, Fingerprint(2), absl::Now()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(s), "REQUEST_ID_REUSED");
  EXPECT_THAT(s.message(), HasSubstr(kId));
}

TEST(RequestIdCacheTest, AFailedCallKeepsNoIdSoARetryRunsAgain) {
  RequestIdCache cache;
  ASSERT_TRUE(cache.Begin(kId, Fingerprint(1), absl::Now()).ok());
  cache.End(kId, absl::FailedPreconditionError("in order"), "");
  absl::StatusOr<RequestIdCache::Begun> retry = cache.Begin(kId, Fingerprint(1), absl::Now());
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(retry->replay.has_value());
}

TEST(RequestIdCacheTest, ADuplicateWaitsForTheCallInProgress) {
  RequestIdCache cache;
  ASSERT_TRUE(cache.Begin(kId, Fingerprint(1), absl::Now()).ok());
  // Still running at its deadline: the duplicate learns nothing yet.
  EXPECT_EQ(cache.Begin(kId, Fingerprint(1), absl::Now()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  absl::Notification waiting;
  absl::StatusOr<RequestIdCache::Begun> duplicate = absl::UnknownError("not run");
  std::thread second([&] {
    waiting.Notify();
    duplicate = cache.Begin(kId, Fingerprint(1), absl::Now() + absl::Seconds(60));
  });
  waiting.WaitForNotification();
  cache.End(kId, absl::OkStatus(), "first");
  second.join();
  ASSERT_TRUE(duplicate.ok()) << duplicate.status();
  ASSERT_TRUE(duplicate->replay.has_value()) << "answered by the first call, not run again";
  EXPECT_EQ(*duplicate->replay, "first");
}

TEST(RequestIdCacheTest, KeepsTheLastIdsForTheirMinimumAgeAndNoMoreThanTheMaximum) {
  RequestIdCache::Options options;
  options.keep = 4;
  options.min_age = absl::ZeroDuration();  // Everything old enough at once.
  options.max_ids = 8;
  RequestIdCache cache(options);
  auto id = [](int i) { return absl::StrFormat("00000000-0000-4000-8000-%012d", i); };
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(cache.Begin(id(i), "f", absl::Now()).ok());
    cache.End(id(i), absl::OkStatus(), "r");
  }
  EXPECT_EQ(cache.size(), 4u) << "past min_age, only `keep` are kept";
  EXPECT_TRUE(cache.Begin(id(9), "f", absl::Now())->replay.has_value()) << "the newest is kept";
  EXPECT_FALSE(cache.Begin(id(0), "f", absl::Now())->replay.has_value()) << "the oldest went";

  options.min_age = absl::Hours(1);  // Nothing old enough: max_ids bounds it.
  RequestIdCache young(options);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(young.Begin(id(i), "f", absl::Now()).ok());
    young.End(id(i), absl::OkStatus(), "r");
  }
  EXPECT_LE(young.size(), 9u);
  EXPECT_GE(young.size(), 8u);
}

TEST(ErrorInfoTest, AReasonBecomesAnErrorInfoInTheDetails) {
  const grpc::Status s =
      ToGrpcStatus(WithReason(absl::FailedPreconditionError("in-order mode excludes retry threads"),
                              reason::kInOrderActive));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "in-order mode excludes retry threads");
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(s.error_details()));
  EXPECT_EQ(details.code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(details.message(), s.error_message());
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "IN_ORDER_ACTIVE");
  EXPECT_EQ(info.domain(), "retryd.io");
  // No reason, no details.
  EXPECT_TRUE(ToGrpcStatus(absl::InternalError("x")).error_details().empty());
}

}  // namespace
}  // namespace retryd::control
