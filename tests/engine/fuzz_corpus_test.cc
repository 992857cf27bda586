// Replays the committed fuzz corpus of fuzz_open_db (tests/fuzz/corpus/
// open_db) through the same driver, so every damaged file the fuzzer found
// stays a test in the ordinary and sanitizer suites, not only in tools/fuzz.
#include <dirent.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/open_db_input.h"
#include "tests/support/test_env.h"

namespace mmdoc {
namespace {

std::string CorpusDir() { return std::string(MMDOC_SOURCE_DIR) + "/tests/fuzz/corpus/open_db"; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> CorpusFiles() {
  std::vector<std::string> out;
  DIR* d = opendir(CorpusDir().c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

TEST_CASE("fuzz corpus: every open_db input replays without a crash", "[engine][fuzz]") {
  test::TempDir dir;
  std::vector<std::string> files = CorpusFiles();
  REQUIRE(files.size() >= 3);
  for (const std::string& f : files) {
    INFO("input " << f);
    std::string bytes = ReadAll(CorpusDir() + "/" + f);
    REQUIRE(!bytes.empty());
    fuzz::RunOpenDbInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                         dir.File("f.mmdb"));
  }
}

// The input fuzz_open_db found at 3c57af9: a catalog tree whose order is
// broken lists a collection that a lookup by name cannot find. Every caller
// that walks the listed names must get Corruption, never a null tree.
TEST_CASE("fuzz corpus: a listed collection the catalog cannot find is Corruption",
          "[engine][fuzz]") {
  test::TempDir dir;
  std::string bytes = ReadAll(CorpusDir() + "/regress-check-null-primary");
  REQUIRE(bytes.size() > 1);
  const std::string path = dir.File("f.mmdb");
  fuzz::WriteOpenDbInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
  Options o;
  o.create_if_missing = false;
  o.log_size = 4096;
  auto db = DB::Open(path, o);
  REQUIRE(db.ok());
  CheckReport report;
  Status s = db.value()->Check(&report);
  CHECK_FALSE(s.ok());
  bool named = false;
  for (const std::string& p : report.problems)
    if (p.find("cannot look up") != std::string::npos) named = true;
  CHECK(named);
  auto st = db.value()->Stats();
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().IsCorruption());
  Status c = db.value()->Compact();
  CHECK(c.IsCorruption());
}

}  // namespace
}  // namespace mmdoc
