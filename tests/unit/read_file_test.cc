#include "server/common/read_file.h"

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace retryd {
namespace {

using ::testing::HasSubstr;

// Writes `contents` to a file of the test's temporary directory; returns its path.
std::string WriteTempFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  EXPECT_TRUE(out) << "cannot write " << path;
  return path;
}

TEST(ReadFileToStringTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = ::testing::TempDir() + "/read_file_test_does_not_exist";
  absl::StatusOr<std::string> contents = ReadFileToString(path, 1024);
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(contents.status().message(), HasSubstr("cannot open \"" + path + "\""));
}

TEST(ReadFileToStringTest, FileOfExactlyTheLimitIsReadWhole) {
  // Longer than one read's buffer, and binary.
  const std::string text = std::string(70 * 1024, 'x') + std::string("\0end\n", 5);
  const std::string path = WriteTempFile("read_file_test_exact", text);
  absl::StatusOr<std::string> contents = ReadFileToString(path, text.size());
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, text);
}

TEST(ReadFileToStringTest, FileOneByteOverTheLimitIsRefused) {
  const std::string path = WriteTempFile("read_file_test_large", std::string(101, 'x'));
  absl::StatusOr<std::string> contents = ReadFileToString(path, 100);
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(contents.status().message(), "\"" + path + "\" is larger than 100 bytes");
}

TEST(ReadFileToStringTest, EmptyFileIsEmpty) {
  const std::string path = WriteTempFile("read_file_test_empty", "");
  absl::StatusOr<std::string> contents = ReadFileToString(path, 0);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, "");
}

}  // namespace
}  // namespace retryd
