#include "server/common/read_file.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace retryd {
namespace {

using ::retryd::testing::TempDir;
using ::testing::HasSubstr;

TEST(ReadFileToStringTest, MissingFileIsNotFoundNamingThePath) {
  const TempDir dir;
  const std::string path = dir.Path("does-not-exist");
  absl::StatusOr<std::string> contents = ReadFileToString(path, 1024);
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(contents.status().message(), HasSubstr("cannot open \"" + path + "\""));
}

TEST(ReadFileToStringTest, FileOfExactlyTheLimitIsReadWhole) {
  // Longer than one read's buffer, and binary.
  const std::string text = std::string(70 * 1024, 'x') + std::string("\0end\n", 5);
  const TempDir dir;
  const std::string path = dir.WriteFile("exact", text);
  absl::StatusOr<std::string> contents = ReadFileToString(path, text.size());
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, text);
}

TEST(ReadFileToStringTest, FileOneByteOverTheLimitIsRefused) {
  const TempDir dir;
  const std::string path = dir.WriteFile("large", std::string(101, 'x'));
  absl::StatusOr<std::string> contents = ReadFileToString(path, 100);
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(contents.status().message(), "\"" + path + "\" is larger than 100 bytes");
}

TEST(ReadFileToStringTest, EmptyFileIsEmpty) {
  const TempDir dir;
  const std::string path = dir.WriteFile("empty", "");
  absl::StatusOr<std::string> contents = ReadFileToString(path, 0);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, "");
}

}  // namespace
}  // namespace retryd
