// retryctl inflight and dlq-record: their command lines and what they print.
#include <string>
#include <variant>
#include <vector>

#include "client/retryctl_args.h"
#include "client/retryctl_format.h"
#include "client/retryctl_help.h"
#include "client/tests/run_retryctl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd::retryctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RetryctlInFlightArgsTest, InFlightWithAndWithoutLimit) {
  std::variant<Invocation, UsageError> plain = ParseLine({"inflight"});
  ASSERT_TRUE(std::holds_alternative<Invocation>(plain));
  EXPECT_EQ(std::get<Invocation>(plain).command, Command::kInFlight);
  EXPECT_EQ(std::get<Invocation>(plain).limit, 0u);  // The server's default.
  for (const std::vector<std::string>& line :
       {std::vector<std::string>{"inflight", "--limit", "25"},
        {"inflight", "--limit=25"},
        {"--json", "inflight", "--limit", "25"}}) {
    std::variant<Invocation, UsageError> parsed = ParseLine(line);
    ASSERT_TRUE(std::holds_alternative<Invocation>(parsed)) << line.back();
    EXPECT_EQ(std::get<Invocation>(parsed).limit, 25u);
  }
}

TEST(RetryctlInFlightArgsTest, InFlightErrors) {
  EXPECT_THAT(ErrorOf({"inflight", "--limit", "0"}), HasSubstr("--limit must be"));
  EXPECT_THAT(ErrorOf({"inflight", "--limit", "10001"}), HasSubstr("1..10000"));
  EXPECT_THAT(ErrorOf({"inflight", "--limit", "many"}), HasSubstr("'many'"));
  EXPECT_THAT(ErrorOf({"inflight", "--limit"}), HasSubstr("--limit needs"));
  EXPECT_THAT(ErrorOf({"inflight", "--oldest"}), HasSubstr("unknown flag --oldest"));
  EXPECT_THAT(ErrorOf({"inflight", "5"}), HasSubstr("unexpected argument '5'"));
}

TEST(RetryctlInFlightArgsTest, DlqRecord) {
  std::variant<Invocation, UsageError> parsed = ParseLine({"dlq-record", "orders", "3", "1042"});
  ASSERT_TRUE(std::holds_alternative<Invocation>(parsed));
  const Invocation& invocation = std::get<Invocation>(parsed);
  EXPECT_EQ(invocation.command, Command::kDlqRecord);
  EXPECT_EQ(invocation.record_topic, "orders");
  EXPECT_EQ(invocation.record_partition, 3);
  EXPECT_EQ(invocation.record_offset, 1042);
}

TEST(RetryctlInFlightArgsTest, DlqRecordErrors) {
  EXPECT_THAT(ErrorOf({"dlq-record", "orders", "3"}), HasSubstr("needs TOPIC PARTITION OFFSET"));
  EXPECT_THAT(ErrorOf({"dlq-record", "orders", "x", "1"}), HasSubstr("PARTITION must be"));
  EXPECT_THAT(ErrorOf({"dlq-record", "orders", "3", "1.5"}), HasSubstr("OFFSET must be"));
  EXPECT_THAT(ErrorOf({"dlq-record", "orders", "3", "1", "2"}),
              HasSubstr("unexpected argument '2'"));
  EXPECT_THAT(ErrorOf({"dlq-record", "orders", "99999999999", "1"}), HasSubstr("PARTITION"));
}

TEST(RetryctlInFlightArgsTest, HelpForBothCommands) {
  EXPECT_THAT(std::string(HelpText("inflight")), HasSubstr("WAITING_BEHIND"));
  EXPECT_THAT(std::string(HelpText("dlq-record")), HasSubstr("NOT_FOUND"));
  EXPECT_THAT(std::string(HelpText("")), HasSubstr("dlq record TOPIC PARTITION OFFSET"));
  EXPECT_THAT(std::string(HelpText("")), HasSubstr("spelled dlq-record"));
}

TEST(RetryctlInFlightFormatTest, KeysAreShownReadably) {
  EXPECT_EQ(FormatKey("order-17", true, 0), "order-17");
  EXPECT_EQ(FormatKey(std::string("\x01\xff", 2), true, 0), "0x01ff");
  EXPECT_EQ(FormatKey("", false, 0), "<null>");
  EXPECT_EQ(FormatKey("", true, 0), "");
  EXPECT_EQ(FormatKey("abcdefghijklmnop", true, 8), "abcde...");
}

TEST(RetryctlInFlightFormatTest, TableShowsEachRecordOldestFirstWithWhyItWaits) {
  constexpr int64_t kNow = 10'000'000;
  v1::ListInFlightResponse response;
  response.set_total(3);
  v1::InFlightRecord* held = response.add_records();
  held->set_topic("orders");
  held->set_partition(0);
  held->set_offset(2);
  held->set_key("doomed-2");
  held->set_has_key(true);
  held->set_state(v1::IN_FLIGHT_STATE_WAITING_DUE);
  held->set_thread_id(1);
  held->set_role(v1::THREAD_ROLE_PRIMARY);
  held->set_attempt(2);
  held->set_age_ms(125'000);
  held->set_due_unix_ms(kNow + 60'000);
  held->set_last_error("timeout\nfrom downstream");
  v1::InFlightRecord* retry = response.add_records();
  retry->set_topic("orders");
  retry->set_partition(1);
  retry->set_offset(7);
  retry->set_state(static_cast<v1::InFlightState>(9));  // One this build does not know.
  retry->set_thread_id(2);
  retry->set_role(v1::THREAD_ROLE_RETRY);
  retry->mutable_read_from()->set_topic("orders.retry");
  retry->set_read_offset(40);
  retry->set_attempt(3);
  retry->set_age_ms(5'000);
  response.add_unanswered_thread_ids(4);

  const std::string text = FormatListInFlight(response, kNow);
  EXPECT_THAT(text, HasSubstr("3 records in flight, the 2 oldest shown"));
  EXPECT_THAT(text, HasSubstr("threads 4 did not answer"));
  EXPECT_THAT(text, HasSubstr("RECORD"));
  EXPECT_THAT(text, HasSubstr("orders/0@2"));
  EXPECT_THAT(text, HasSubstr("doomed-2"));
  EXPECT_THAT(text, HasSubstr("WAITING_DUE"));
  EXPECT_THAT(text, HasSubstr("2m05s"));                    // Its age.
  EXPECT_THAT(text, HasSubstr("1m00s"));                    // Due in.
  EXPECT_THAT(text, HasSubstr("timeout from downstream"));  // One line.
  EXPECT_THAT(text, HasSubstr("<null>"));
  EXPECT_THAT(text, HasSubstr("2 retry (orders.retry/0@40)"));
  EXPECT_THAT(text, HasSubstr(" 9 "));  // The unknown state, as its number.
  EXPECT_LT(text.find("orders/0@2"), text.find("orders/1@7"));
}

TEST(RetryctlInFlightFormatTest, EmptyListAndDeadLetterAnswer) {
  v1::ListInFlightResponse none;
  EXPECT_EQ(FormatListInFlight(none, 0), "0 records in flight\n");
  v1::DeadLetterRecordResponse moved;
  moved.set_thread_id(3);
  EXPECT_EQ(FormatDeadLetterRecord(moved, "orders", 0, 2),
            "orders/0@2 dead-lettered by thread 3\n");
}

}  // namespace
}  // namespace retryd::retryctl
