// Replays the committed fuzz corpus of fuzz_update (tests/fuzz/corpus/update)
// through the fuzz target itself, so every input in it (the operators'
// seeds and what the fuzzer found) runs in the ordinary and sanitizer
// suites, not only in tools/fuzz. The target aborts on a broken invariant.
#include <dirent.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// The target's one function, LLVMFuzzerTestOneInput, compiled here.
#include "tests/fuzz/fuzz_update.cc"

namespace mmdoc {
namespace {

TEST_CASE("fuzz corpus: every update input replays without a crash", "[update][fuzz]") {
  const std::string dir = std::string(MMDOC_SOURCE_DIR) + "/tests/fuzz/corpus/update";
  DIR* d = opendir(dir.c_str());
  REQUIRE(d != nullptr);
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') files.push_back(e->d_name);
  }
  closedir(d);
  REQUIRE(files.size() >= 10);
  for (const std::string& f : files) {
    INFO("input " << f);
    std::ifstream in(dir + "/" + f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string bytes = ss.str();
    CHECK(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) ==
          0);
  }
}

}  // namespace
}  // namespace mmdoc
