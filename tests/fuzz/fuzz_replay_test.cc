// Replays one fuzz target's checked-in inputs through its
// LLVMFuzzerTestOneInput, in the ordinary build: the seed corpus
// (tests/fuzz/corpus/<target>/) and every crash found so far
// (tests/fuzz/regressions/<target>/). A crash input that crashes again, or
// breaks one of the target's property checks, fails this test; under
// scripts/sanitize.sh so does any ASan or UBSan report.
//
// Built once per target, with RETRYD_FUZZ_TARGET naming it and
// RETRYD_FUZZ_DIR the tests/fuzz directory.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace retryd {
namespace {

namespace fs = std::filesystem;

// The regular files of `dir`, sorted; none if it does not exist. Dot files
// (a .gitkeep) are not inputs.
std::vector<fs::path> InputsIn(const fs::path& dir) {
  std::vector<fs::path> inputs;
  if (!fs::is_directory(dir)) return inputs;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && !entry.path().filename().string().starts_with(".")) {
      inputs.push_back(entry.path());
    }
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

void Replay(const fs::path& input) {
  SCOPED_TRACE(input.string());
  std::ifstream file(input, std::ios::binary);
  ASSERT_TRUE(file) << "cannot read " << input;
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
            0);
}

const fs::path kFuzzDir = RETRYD_FUZZ_DIR;

TEST(FuzzReplayTest, ReplaysTheSeedCorpus) {
  const fs::path corpus = kFuzzDir / "corpus" / RETRYD_FUZZ_TARGET;
  const std::vector<fs::path> inputs = InputsIn(corpus);
  // An empty corpus would make this test, and the CI fuzz run, prove nothing.
  ASSERT_FALSE(inputs.empty()) << "no seed inputs in " << corpus;
  for (const fs::path& input : inputs) Replay(input);
}

TEST(FuzzReplayTest, ReplaysEveryCrashFound) {
  // No directory is fine: the target has crashed on nothing yet.
  for (const fs::path& input : InputsIn(kFuzzDir / "regressions" / RETRYD_FUZZ_TARGET)) {
    Replay(input);
  }
}

}  // namespace
}  // namespace retryd
