// The POSIX File's map hints (storage/posix_file.cc): each changes how the
// process maps the file, never what the file holds.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "mmdoc/file_system.h"
#include "tests/support/test_env.h"

namespace mmdoc {
namespace {

constexpr uint64_t kPage = 4096;

long ThreadMinorFaults() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt;
}

std::vector<uint8_t> ReadBack(File* f, uint64_t offset, size_t n) {
  std::vector<uint8_t> out(n);
  Status s = f->ReadAt(offset, out.data(), n);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return out;
}

TEST_CASE("posix file: unmapping and premapping pages keep the data and the stores") {
  test::TempDir dir;
  FileSystem* fs = FileSystem::Default();
  auto opened = fs->Open(dir.File("f"), OpenMode::kCreate);
  REQUIRE(opened.ok());
  File* f = opened.value().get();
  const uint64_t len = 128 * kPage;
  REQUIRE(f->Allocate(0, len).ok());
  auto m = f->Map(len, MapMode::kReadWrite);
  REQUIRE(m.ok());
  uint8_t* base = m.value();

  // Stores through the map, then the first half's page-table entries
  // dropped: the stores are still in the file, dirty, and read back
  // through the map too.
  for (uint64_t p = 0; p < 64; p++) std::memset(base + p * kPage, static_cast<int>(p + 1), 100);
  REQUIRE(f->DropMappedPages(base, 32 * kPage).ok());
  for (uint64_t p = 0; p < 64; p++) {
    INFO("page " << p);
    CHECK(ReadBack(f, p * kPage, 100) == std::vector<uint8_t>(100, static_cast<uint8_t>(p + 1)));
    CHECK(base[p * kPage + 99] == p + 1);
  }

  // The second half made writable ahead: nothing in it changes, and the
  // stores that follow land in the file without a fault each.
  Status s = f->PrepareMappedWrite(base + 64 * kPage, 64 * kPage);
  INFO(s.ToString());
  const bool prepared = s.ok();  // an error is a kernel before 5.14: a hint
  if (!prepared) WARN("PrepareMappedWrite: " << s.ToString());
  CHECK(ReadBack(f, 64 * kPage, 64 * kPage) == std::vector<uint8_t>(64 * kPage, 0));
  const long faults = ThreadMinorFaults();
  for (uint64_t p = 64; p < 128; p++) base[p * kPage] = 0x5a;
  const long taken = ThreadMinorFaults() - faults;
  // (A sanitizer's shadow memory takes faults of its own.)
  if (prepared && !test::kSanitized) CHECK(taken == 0);
  for (uint64_t p = 64; p < 128; p++) {
    INFO("page " << p);
    CHECK(ReadBack(f, p * kPage, 1)[0] == 0x5a);
  }
  REQUIRE(f->Sync().ok());
  REQUIRE(f->Unmap(base, len).ok());
}

}  // namespace
}  // namespace mmdoc
