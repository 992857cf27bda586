// The body of fuzz_open_db, shared with the Catch2 test that replays the
// committed corpus (tests/engine/fuzz_corpus_test.cc), so every crash the
// fuzzer ever found stays a test in the ordinary and sanitizer suites.
//
// Input: one control byte, then the data file. When bit 0 of the control
// byte is set, every page's checksum is recomputed first, so mutations reach
// the structure checks behind the checksums instead of stopping at them.
// The file is opened, checked, every listed collection read, counted,
// salvaged, and the database compacted. Anything but a crash (or a
// sanitizer report) is fine.
#ifndef MMDOC_TESTS_FUZZ_OPEN_DB_INPUT_H_
#define MMDOC_TESTS_FUZZ_OPEN_DB_INPUT_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mmdoc/db.h"
#include "storage/checksum.h"
#include "storage/format.h"

namespace mmdoc::fuzz {

inline void FixChecksums(std::string* f) {
  const size_t ps = 4096;  // the seed corpus uses the default page size
  for (size_t p = 0; (p + 1) * ps <= f->size(); p++) {
    uint8_t* page = reinterpret_cast<uint8_t*>(f->data()) + p * ps;
    uint32_t run;
    std::memcpy(&run, page + storage::kPageRunLengthOffset, 4);
    if (run == 0 || (p + run) * ps > f->size()) run = 1;
    uint64_t sum = storage::PageChecksum(page, run * ps, p);
    std::memcpy(page, &sum, 8);
  }
}

// Writes an input (control byte, then the file) as the data file at
// `path`, without a log. REQUIRES: size >= 1.
inline void WriteOpenDbInput(const uint8_t* data, size_t size, const std::string& path) {
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) FixChecksums(&file);
  FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) std::abort();
  std::fwrite(file.data(), 1, file.size(), out);
  std::fclose(out);
  std::remove((path + "-log").c_str());
}

// Runs one input against a data file at `path` (removed afterwards).
inline void RunOpenDbInput(const uint8_t* data, size_t size, const std::string& path) {
  if (size < 1) return;
  WriteOpenDbInput(data, size, path);
  {
    Options o;
    o.create_if_missing = false;
    o.log_size = 4096;
    auto db = DB::Open(path, o);
    if (db.ok()) {
      CheckReport report;
      (void)db.value()->Check(&report);
      auto names = db.value()->ListCollections();
      if (names.ok()) {
        for (const std::string& c : names.value()) {
          (void)db.value()->Find(c, Document());
          (void)db.value()->Count(c);
          (void)db.value()->ListIndexes(c);
          DB::SalvageReport sr;
          (void)db.value()->Salvage(
              c, [](std::string_view) {}, &sr);
        }
      }
      (void)db.value()->Stats();
      (void)db.value()->Compact();
    }
  }
  std::remove(path.c_str());
  std::remove((path + "-log").c_str());
}

}  // namespace mmdoc::fuzz

#endif  // MMDOC_TESTS_FUZZ_OPEN_DB_INPUT_H_
