#include "server/common/logging.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/read_file.h"
#include "tests/support/temp_dir.h"

namespace retryd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kTime = absl::FromUnixMillis(1796400000123);

// `line` parsed as a JSON object; fails the test if it is not one.
google::protobuf::Struct Parse(const std::string& line) {
  google::protobuf::Struct object;
  const auto status = google::protobuf::util::JsonStringToMessage(line, &object);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in: " << line;
  return object;
}

std::string Field(const google::protobuf::Struct& object, const std::string& name) {
  const auto it = object.fields().find(name);
  if (it == object.fields().end()) return "<missing>";
  return it->second.string_value();
}

TEST(LoggingTest, ParsesTheTwoFormats) {
  EXPECT_EQ(ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(ParseLogFormat("JSON"), std::nullopt);
  EXPECT_EQ(ParseLogFormat(""), std::nullopt);
}

TEST(LoggingTest, TextLineIsTimeLevelThreadMessage) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, kTime, LogLevel::kWarning, "engine", "primary-1",
                          "it said \"no\""),
            "2026-12-04T16:00:00.123Z WARN [primary-1] it said \"no\"\n");
}

TEST(LoggingTest, JsonLineHasTheFiveFieldsInOrder) {
  const std::string line =
      FormatLogLine(LogFormat::kJson, kTime, LogLevel::kError, "kafka", "producer-dr", "gone");
  EXPECT_EQ(line,
            "{\"time\":\"2026-12-04T16:00:00.123Z\",\"level\":\"ERROR\",\"component\":\"kafka\","
            "\"thread\":\"producer-dr\",\"message\":\"gone\"}\n");
  const google::protobuf::Struct object = Parse(line);
  EXPECT_EQ(object.fields_size(), 5);
}

// Whatever bytes a message holds (a record's key in an error, librdkafka's
// text), the line stays one valid JSON object that reads back as the
// message: escapes for quotes, backslashes and control characters, valid
// UTF-8 kept, any other byte replaced by U+FFFD.
TEST(LoggingTest, JsonEscapesEveryByteIntoValidJson) {
  const std::string message = std::string("quote\" back\\ nl\n cr\r tab\t nul") +
                              std::string(1, '\0') + " bell\x07 del\x7f é € 😀 bad\xff\xc3 end";
  const std::string line =
      FormatLogLine(LogFormat::kJson, kTime, LogLevel::kInfo, "main", "main", message);
  ASSERT_TRUE(absl::EndsWith(line, "}\n"));
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per message";
  const google::protobuf::Struct object = Parse(line);
  EXPECT_EQ(Field(object, "message"),
            std::string("quote\" back\\ nl\n cr\r tab\t nul") + std::string(1, '\0') +
                " bell\x07 del\x7f é € 😀 bad\xef\xbf\xbd\xef\xbf\xbd end");
}

TEST(LoggingTest, OverlongAndSurrogateSequencesAreReplaced) {
  // C0 80: an overlong NUL; ED A0 80: a UTF-16 surrogate; F4 90 80 80: past U+10FFFF.
  const std::string line = FormatLogLine(LogFormat::kJson, kTime, LogLevel::kInfo, "main", "main",
                                         "a\xc0\x80"
                                         "b\xed\xa0\x80"
                                         "c\xf4\x90\x80\x80"
                                         "d");
  const std::string message = Field(Parse(line), "message");
  EXPECT_FALSE(absl::StrContains(message, "\xc0\x80"));
  EXPECT_FALSE(absl::StrContains(message, "\xed\xa0\x80"));
  EXPECT_TRUE(absl::StartsWith(message, "a\xef\xbf\xbd"));
  EXPECT_TRUE(absl::EndsWith(message,
                             "\xef\xbf\xbd"
                             "d"));
}

// What the process writes to stderr through LogLine and LogLineFor: the
// calling thread's component and name, or the OS's name of a thread retryd
// did not name (librdkafka's own threads).
class StderrCapture {
 public:
  explicit StderrCapture(const std::string& path) {
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    std::FILE* file = std::fopen(path.c_str(), "w");
    dup2(fileno(file), STDERR_FILENO);
    std::fclose(file);
  }
  ~StderrCapture() { Restore(); }
  void Restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    saved_ = -1;
  }

 private:
  int saved_ = -1;
};

TEST(LoggingTest, LinesCarryTheThreadsComponentAndName) {
  testing::TempDir dir;
  const std::string path = dir.Path("stderr");
  SetLogFormat(LogFormat::kJson);
  {
    StderrCapture capture(path);
    LogInfo("from the first thread");
    std::thread named([] {
      SetThreadName("primary-7");
      SetThreadComponent("engine");
      LogWarning("from a named thread");
    });
    named.join();
    std::thread foreign([] {
      pthread_setname_np(pthread_self(), "rdk:broker9");
      LogLineFor(LogLevel::kError, "librdkafka", "from a library's thread");
      LogInfo("unnamed component");
    });
    foreign.join();
    capture.Restore();
  }
  SetLogFormat(LogFormat::kText);
  const absl::StatusOr<std::string> written = ReadFileToString(path, 1 << 20);
  ASSERT_TRUE(written.ok()) << written.status();
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(*written, '\n', absl::SkipEmpty())) {
    const google::protobuf::Struct object = Parse(std::string(line));
    lines.push_back(Field(object, "level") + " " + Field(object, "component") + " " +
                    Field(object, "thread") + " " + Field(object, "message"));
  }
  EXPECT_THAT(lines, ElementsAre("INFO main main from the first thread",
                                 "WARN engine primary-7 from a named thread",
                                 "ERROR librdkafka rdk:broker9 from a library's thread",
                                 "INFO retryd rdk:broker9 unnamed component"));
}

}  // namespace
}  // namespace retryd
