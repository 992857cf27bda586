// The POSIX File's map hints (storage/posix_file.cc), each of which changes
// how the process maps the file, never what the file holds; its gathered
// writes; which of its pages the page cache holds.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <memory>
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

std::unique_ptr<File> NewFile(const test::TempDir& dir) {
  auto opened = FileSystem::Default()->Open(dir.File("f"), OpenMode::kCreate);
  REQUIRE(opened.ok());
  return std::move(opened.value());
}

TEST_CASE("posix file: unmapping and premapping pages keep the data and the stores") {
  test::TempDir dir;
  std::unique_ptr<File> file = NewFile(dir);
  File* f = file.get();
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

TEST_CASE("posix file: which pages the cache holds, and reading pages in through the map") {
  test::TempDir dir;
  std::unique_ptr<File> file = NewFile(dir);
  File* f = file.get();
  const uint64_t len = 16 * kPage;
  REQUIRE(f->Allocate(0, len).ok());  // blocks, but nothing in the page cache
  auto m = f->Map(len, MapMode::kReadWrite);
  REQUIRE(m.ok());
  uint8_t* base = m.value();
  REQUIRE(f->AdviseRandomAccess(base, len).ok());
  std::vector<bool> res;
  REQUIRE(f->ResidentPages(base, len, kPage, &res).ok());
  REQUIRE(res.size() == 16);
  if (res != std::vector<bool>(16, false)) {
    // tmpfs keeps a file's allocated pages in memory: nothing to tell apart.
    WARN("the file system caches allocated pages");
    return;
  }

  std::vector<uint8_t> page(kPage, 0x77);
  REQUIRE(f->WriteAt(3 * kPage, page.data(), kPage).ok());
  Status s = f->PrepareMappedRead(base + 8 * kPage, 2 * kPage);
  INFO(s.ToString());
  const bool populated = s.ok();  // an error is a kernel before 5.14: a hint
  if (!populated) WARN("PrepareMappedRead: " << s.ToString());
  REQUIRE(f->ResidentPages(base, len, kPage, &res).ok());
  for (size_t i = 0; i < 16; i++) {
    INFO("page " << i);
    CHECK(res[i] == (i == 3 || (populated && (i == 8 || i == 9))));
  }
  // In pieces of two pages, a piece is held when both of its pages are.
  REQUIRE(f->ResidentPages(base + 2 * kPage, 12 * kPage, 2 * kPage, &res).ok());
  REQUIRE(res.size() == 6);
  for (size_t i = 0; i < 6; i++) CHECK(res[i] == (populated && i == 3));  // pages 8 and 9
  // Reading in changes nothing in the file.
  CHECK(ReadBack(f, 8 * kPage, 2 * kPage) == std::vector<uint8_t>(2 * kPage, 0));
  CHECK(ReadBack(f, 3 * kPage, kPage) == page);
  REQUIRE(f->Unmap(base, len).ok());
}

// n buffers of 0..5000 bytes, each with a pattern of its own, and the
// bytes they make one after another.
struct Gather {
  explicit Gather(size_t n) : parts(n) {
    for (size_t i = 0; i < n; i++) {
      parts[i].resize((i * 2654435761u) % 5001);
      for (size_t b = 0; b < parts[i].size(); b++) parts[i][b] = static_cast<uint8_t>(i * 31 + b);
      bufs.push_back(File::Buffer{parts[i].data(), parts[i].size()});
      whole.insert(whole.end(), parts[i].begin(), parts[i].end());
    }
  }
  std::vector<std::vector<uint8_t>> parts;
  std::vector<File::Buffer> bufs;
  std::vector<uint8_t> whole;
};

TEST_CASE("posix file: a gathered write is the write of its buffers one after another") {
  test::TempDir dir;
  std::unique_ptr<File> f = NewFile(dir);
  // More buffers than one pwritev takes, empty ones among them, at an
  // offset past the end of the file.
  Gather g(300);
  REQUIRE(g.whole.size() > 500000);
  Status s = f->WriteGather(12345, g.bufs.data(), g.bufs.size());
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(f->Size().value() == 12345 + g.whole.size());
  CHECK(ReadBack(f.get(), 12345, g.whole.size()) == g.whole);
  CHECK(ReadBack(f.get(), 0, 12345) == std::vector<uint8_t>(12345, 0));
  REQUIRE(f->WriteGather(0, g.bufs.data(), 0).ok());
}

TEST_CASE("posix file: a gathered write cut short by the file size limit writes what fits") {
  // RLIMIT_FSIZE makes pwritev write short at the limit, then fail there
  // (EFBIG; SIGXFSZ ignored for the test): an error, not a short file
  // reported as written, and the bytes before the limit are the buffers'.
  test::TempDir dir;
  std::unique_ptr<File> f = NewFile(dir);
  Gather g(40);
  const rlim_t limit = 70001;  // inside a buffer
  REQUIRE(g.whole.size() > limit);
  rlimit old;
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  rlimit small = old;
  small.rlim_cur = limit;
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  Status s = f->WriteGather(0, g.bufs.data(), g.bufs.size());
  REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
  signal(SIGXFSZ, old_handler);
  INFO(s.ToString());
  CHECK(s.IsIOError());
  CHECK(s.ToString().find("pwritev") != std::string::npos);
  CHECK(f->Size().value() == limit);
  CHECK(ReadBack(f.get(), 0, limit) ==
        std::vector<uint8_t>(g.whole.begin(), g.whole.begin() + limit));
}

}  // namespace
}  // namespace mmdoc
