// libFuzzer target: opening and reading a mutated database file. The input
// (after one control byte) is written as the data file; it is opened, DB::
// Check runs, every collection is scanned and salvaged. Anything but a
// crash (or a sanitizer report) is fine. When bit 0 of the control byte is
// set, every page's checksum is recomputed first, so mutations reach the
// structure checks behind the checksums instead of stopping at them.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mmdoc/db.h"
#include "storage/checksum.h"
#include "storage/format.h"

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

void FixChecksums(std::string* f) {
  const size_t ps = 4096;  // the seed corpus uses the default page size
  for (size_t p = 0; (p + 1) * ps <= f->size(); p++) {
    uint8_t* page = reinterpret_cast<uint8_t*>(f->data()) + p * ps;
    uint32_t run;
    std::memcpy(&run, page + mmdoc::storage::kPageRunLengthOffset, 4);
    if (run == 0 || (p + run) * ps > f->size()) run = 1;
    uint64_t sum = mmdoc::storage::PageChecksum(page, run * ps, p);
    std::memcpy(page, &sum, 8);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) FixChecksums(&file);
  const std::string path = Dir() + "/f.mmdb";
  FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) std::abort();
  std::fwrite(file.data(), 1, file.size(), out);
  std::fclose(out);
  std::remove((path + "-log").c_str());
  {
    mmdoc::Options o;
    o.create_if_missing = false;
    o.log_size = 4096;
    auto db = mmdoc::DB::Open(path, o);
    if (db.ok()) {
      mmdoc::CheckReport report;
      (void)db.value()->Check(&report);
      auto names = db.value()->ListCollections();
      if (names.ok()) {
        for (const std::string& c : names.value()) {
          (void)db.value()->Find(c, mmdoc::Document());
          (void)db.value()->Count(c);
          (void)db.value()->ListIndexes(c);
          mmdoc::DB::SalvageReport sr;
          (void)db.value()->Salvage(c, [](std::string_view) {}, &sr);
        }
      }
      (void)db.value()->Stats();
    }
  }
  std::remove(path.c_str());
  std::remove((path + "-log").c_str());
  return 0;
}
