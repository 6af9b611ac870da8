// Temporary files for tests: a fresh directory per owner, removed with
// everything in it when the owner goes. No Kafka here: every test binary,
// the client's too, can link it (retryd_test_base).
#ifndef RETRYD_TESTS_SUPPORT_TEMP_DIR_H_
#define RETRYD_TESTS_SUPPORT_TEMP_DIR_H_

#include <string>

namespace retryd::testing {

// A directory made under $TEST_TMPDIR, else $TMPDIR, else /tmp, and removed
// with its contents by the destructor unless Keep() was called. A failure to
// make it or to write into it fails the test (ADD_FAILURE).
//
// Thread-compatible: one test's thread uses it.
class TempDir {
 public:
  TempDir();
  ~TempDir();

  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // path()/name; the file need not exist.
  std::string Path(const std::string& name) const;

  // Writes `contents` to path()/name, replacing the file; returns its path.
  std::string WriteFile(const std::string& name, const std::string& contents) const;

  // Leaves the directory for someone to look at, e.g. a failed test's logs.
  void Keep() { keep_ = true; }

 private:
  std::string path_;  // Empty if it could not be made.
  bool keep_ = false;
};

// The contents of `path`, or "" if it cannot be read: for checking what a
// test or a child process wrote.
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace retryd::testing

#endif  // RETRYD_TESTS_SUPPORT_TEMP_DIR_H_
