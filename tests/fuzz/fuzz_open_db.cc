// libFuzzer target: opening and reading a mutated database file; the body
// is RunOpenDbInput (tests/fuzz/open_db_input.h), which the engine tests
// also run over the committed corpus.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/fuzz/open_db_input.h"

namespace {

std::string Dir() {
  static std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string t = std::string(base && *base ? base : "/tmp") + "/mmdoc-fuzz-XXXXXX";
    if (mkdtemp(t.data()) == nullptr) std::abort();
    return t;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mmdoc::fuzz::RunOpenDbInput(data, size, Dir() + "/f.mmdb");
  return 0;
}
