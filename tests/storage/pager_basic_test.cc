// Pager basics: create, reopen, allocate/modify/free, runs, roots, stats,
// the lock, option errors.
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "storage/pager.h"
#include "tests/storage/storage_test_util.h"
#include "tests/support/fs_wrapper.h"
#include "tests/support/test_env.h"

namespace mmdoc::storage {
namespace {

using testutil::BodyMatches;
using testutil::FillBody;
using testutil::OpenOrDie;
using testutil::SmallOptions;
using testutil::WriteTagged;

// Pages reachable from the roots (each root one run) plus the pager's
// accounted pages (free, pending, free-list) are [2, page_count) exactly
// once (rule 6), and Verify agrees.
void CheckEveryPageAccountedOnce(Pager* p) {
  auto r = p->BeginRead();
  std::vector<PageId> pages;
  REQUIRE(p->AccountedPages(&pages).ok());
  for (int s = 0; s < kMetaRoots; s++) {
    PageId id = r.value()->root(s);
    if (id == 0) continue;
    const uint8_t* pg;
    REQUIRE(r.value()->Get(id, &pg).ok());
    uint32_t n = DecodeFixed32(pg + kPageRunLengthOffset);
    for (uint32_t k = 0; k < n; k++) pages.push_back(id + k);
  }
  std::sort(pages.begin(), pages.end());
  REQUIRE(pages.size() == r.value()->page_count() - 2);
  for (size_t i = 0; i < pages.size(); i++) REQUIRE(pages[i] == i + 2);
  CHECK(p->Verify().ok());
}

TEST_CASE("pager: create and reopen keep roots, page count and txid") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  uint64_t txid, page_count;
  PageId a, b;
  {
    auto p = OpenOrDie(path);
    a = WriteTagged(p.get(), 0, 11);
    b = WriteTagged(p.get(), 3, 22, Durability::kFsync);
    PagerStats st = p->Stats();
    txid = st.txid;
    page_count = st.page_count;
    REQUIRE(txid >= 2);
  }
  auto p = OpenOrDie(path);
  auto r = p->BeginRead();
  REQUIRE(r.ok());
  Txn* t = r.value().get();
  CHECK(t->root(0) == a);
  CHECK(t->root(3) == b);
  CHECK(t->root(1) == 0);
  // Close and Recover may each add an empty checkpoint transaction.
  CHECK(t->txid() >= txid);
  CHECK(t->txid() <= txid + 2);
  CHECK(t->page_count() >= page_count);
  const uint8_t* pg;
  REQUIRE(t->Get(a, &pg).ok());
  CHECK(BodyMatches(pg, t->page_size(), 11));
  CHECK(pg[kPageTypeOffset] == static_cast<uint8_t>(PageType::kLeaf));
  REQUIRE(t->Get(b, &pg).ok());
  CHECK(BodyMatches(pg, t->page_size(), 22));
  CHECK(p->Verify().ok());
}

TEST_CASE("pager: page size is chosen at creation and kept") {
  test::TempDir dir;
  PagerOptions o = SmallOptions();
  o.page_size = 16384;
  {
    auto p = OpenOrDie(dir.File("db"), o);
    WriteTagged(p.get(), 0, 5);
  }
  auto p = OpenOrDie(dir.File("db"));  // asks for 4096; the file's wins
  auto r = p->BeginRead();
  CHECK(r.value()->page_size() == 16384);
  const uint8_t* pg;
  REQUIRE(r.value()->Get(r.value()->root(0), &pg).ok());
  CHECK(BodyMatches(pg, 16384, 5));
}

TEST_CASE("pager: bad options and paths") {
  test::TempDir dir;
  PagerOptions o = SmallOptions();
  o.page_size = 5000;
  CHECK(Pager::Open(dir.File("db"), o).status().IsInvalidArgument());
  o = SmallOptions();
  o.create_if_missing = false;
  CHECK(Pager::Open(dir.File("missing"), o).status().IsNotFound());
  Status s = Pager::Open(dir.path(), SmallOptions()).status();
  CHECK(s.IsInvalidArgument());
}

TEST_CASE("pager: write txn allocate, modify in place and copy-on-write") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  PageId id = WriteTagged(p.get(), 0, 1);
  auto w = p->BeginWrite();
  REQUIRE(w.ok());
  Txn* t = w.value().get();
  CHECK_FALSE(t->IsDirty(id));
  PageId nid;
  uint8_t* pg;
  REQUIRE(t->Modify(id, &nid, &pg).ok());
  CHECK(nid != id);
  CHECK(t->IsDirty(nid));
  CHECK(BodyMatches(pg, t->page_size(), 1));
  CHECK(t->Free(id).IsInvalidArgument());  // Modify already freed it
  FillBody(pg, t->page_size(), 2);
  PageId nid2;
  uint8_t* pg2;
  REQUIRE(t->Modify(nid, &nid2, &pg2).ok());
  CHECK(nid2 == nid);
  CHECK(pg2 == pg);
  t->set_root(0, nid);
  // A reader opened now still sees the old page.
  auto r = p->BeginRead();
  REQUIRE(t->Commit("x", Durability::kNone).ok());
  const uint8_t* rp;
  REQUIRE(r.value()->Get(r.value()->root(0), &rp).ok());
  CHECK(r.value()->root(0) == id);
  CHECK(BodyMatches(rp, 4096, 1));
  auto r2 = p->BeginRead();
  REQUIRE(r2.value()->Get(r2.value()->root(0), &rp).ok());
  CHECK(BodyMatches(rp, 4096, 2));
}

// The writer's per-page marks hold 32-bit serials of write txns; when the
// serial wraps, old marks are cleared so no page looks dirty (or freed) to
// a later txn that reuses a number.
TEST_CASE("pager: write serials wrap without old marks looking current") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  p->TEST_SetLastWriteSerial(UINT32_MAX - 2);
  PageId kept = WriteTagged(p.get(), 0, 1);  // serial UINT32_MAX - 1
  WriteTagged(p.get(), 1, 2);                // serial UINT32_MAX
  {
    auto w = p->BeginWrite();  // wraps: serial 1, every mark cleared
    REQUIRE(w.ok());
    Txn* t = w.value().get();
    CHECK_FALSE(t->IsDirty(kept));
    PageId nid;
    uint8_t* pg;
    REQUIRE(t->Modify(kept, &nid, &pg).ok());
    CHECK(nid != kept);  // copied, not changed in place
    CHECK(BodyMatches(pg, t->page_size(), 1));
    CHECK(t->Free(kept).IsInvalidArgument());  // freed by Modify just now
    t->set_root(0, nid);
    REQUIRE(t->Commit("", Durability::kNone).ok());
  }
  // Many txns across a second wrap: pages stay accounted for exactly once.
  p->TEST_SetLastWriteSerial(UINT32_MAX - 10);
  for (int i = 0; i < 40; i++) {
    WriteTagged(p.get(), i % kMetaRoots, 100 + i, Durability::kNone,
                i % 5 == 0 ? PageType::kOverflow : PageType::kLeaf, i % 5 == 0 ? 3 : 1);
    if (i % 13 == 0) REQUIRE(p->Checkpoint().ok());
  }
  CheckEveryPageAccountedOnce(p.get());
}

TEST_CASE("pager: abort rolls back page count, free list and roots") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  for (int i = 0; i < 5; i++) WriteTagged(p.get(), 0, i);
  REQUIRE(p->Checkpoint().ok());
  PagerStats before = p->Stats();
  std::vector<PageId> acc_before;
  REQUIRE(p->AccountedPages(&acc_before).ok());
  {
    auto w = p->BeginWrite();
    REQUIRE(w.ok());
    for (int i = 0; i < 50; i++) {
      PageId id;
      uint8_t* pg;
      REQUIRE(w.value()->Allocate(PageType::kLeaf, 1 + i % 3, &id, &pg).ok());
    }
    REQUIRE(w.value()->Free(w.value()->root(0)).ok());
    w.value()->set_root(0, 0);
    w.value()->Abort();
    w.value()->Abort();  // idempotent
  }
  PagerStats after = p->Stats();
  CHECK(after.txid == before.txid);
  CHECK(after.page_count == before.page_count);
  CHECK(after.free_pages == before.free_pages);
  std::vector<PageId> acc_after;
  REQUIRE(p->AccountedPages(&acc_after).ok());
  CHECK(acc_after == acc_before);
  auto r = p->BeginRead();
  CHECK(r.value()->root(0) != 0);
  // A destroyed, unfinished write txn aborts too.
  {
    auto w = p->BeginWrite();
    REQUIRE(w.ok());
    w.value()->set_root(0, 0);
  }
  auto r2 = p->BeginRead();
  CHECK(r2.value()->root(0) != 0);
}

TEST_CASE("pager: overflow runs are contiguous and reuse contiguous free runs") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  PageId run = WriteTagged(p.get(), 1, 7, Durability::kNone, PageType::kOverflow, 5);
  {
    auto r = p->BeginRead();
    const uint8_t* pg;
    REQUIRE(r.value()->Get(run, &pg).ok());
    CHECK(DecodeFixed32(pg + kPageRunLengthOffset) == 5);
    CHECK(BodyMatches(pg, 5 * 4096, 7));
  }
  // Free it (no readers, born after the checkpoint: reusable right away).
  {
    auto w = p->BeginWrite();
    REQUIRE(w.value()->Free(run).ok());
    w.value()->set_root(1, 0);
    REQUIRE(w.value()->Commit("", Durability::kNone).ok());
  }
  auto w = p->BeginWrite();
  PageId id;
  uint8_t* pg;
  REQUIRE(w.value()->Allocate(PageType::kOverflow, 4, &id, &pg).ok());
  CHECK(id >= run);
  CHECK(id + 4 <= run + 5);
  REQUIRE(w.value()->Commit("", Durability::kNone).ok());
}

// The data file's writes, and a page cache the test decides: a page is
// held unless `cold` says not (the log's file is left alone).
class WriteWatchingFileSystem final : public test::FileSystemWrapper {
 public:
  std::function<bool(PageId)> cold = [](PageId) { return false; };
  std::set<PageId> alone;      // pages written by WriteAt
  std::set<PageId> gathered;   // pages written by WriteGather
  std::set<PageId> populated;  // pages PrepareMappedRead was asked for
  uint64_t gathers = 0;

  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    auto f = base()->Open(path, mode);
    if (!f.ok() || path.size() < 4 || path.compare(path.size() - 4, 4, "-log") == 0) return f;
    return std::unique_ptr<File>(new DataFile(this, std::move(f.value())));
  }

 private:
  static constexpr uint64_t kPage = 4096;
  class DataFile final : public test::FileWrapper {
   public:
    DataFile(WriteWatchingFileSystem* fs, std::unique_ptr<File> real)
        : FileWrapper(std::move(real)), fs_(fs) {}
    Result<uint8_t*> Map(uint64_t length, MapMode mode) override {
      auto m = real()->Map(length, mode);
      if (m.ok()) base_ = m.value();
      return m;
    }
    Status WriteAt(uint64_t offset, const void* buf, size_t n) override {
      if (offset >= 2 * kPage) fs_->alone.insert(offset / kPage);  // not the meta pages
      return real()->WriteAt(offset, buf, n);
    }
    Status WriteGather(uint64_t offset, const Buffer* bufs, size_t n) override {
      fs_->gathers++;
      uint64_t at = offset;
      for (size_t i = 0; i < n; i++, at += bufs[i - 1].size) fs_->gathered.insert(at / kPage);
      return real()->WriteGather(offset, bufs, n);
    }
    Status ResidentPages(uint8_t* addr, uint64_t length, uint64_t unit,
                         std::vector<bool>* resident) override {
      REQUIRE(unit == kPage);
      const PageId first = static_cast<PageId>(addr - base_) / kPage;
      resident->assign(length / kPage, true);
      for (PageId id = first; id < first + length / kPage; id++) {
        if (fs_->cold(id) && fs_->populated.count(id) == 0) (*resident)[id - first] = false;
      }
      return Status::OK();
    }
    Status PrepareMappedRead(uint8_t* addr, uint64_t length) override {
      const PageId first = static_cast<PageId>(addr - base_) / kPage;
      for (PageId id = first; id < first + length / kPage; id++) fs_->populated.insert(id);
      return real()->PrepareMappedRead(addr, length);
    }

   private:
    WriteWatchingFileSystem* fs_;
    uint8_t* base_ = nullptr;
  };
};

// A WriteAt txn (a merge) writes each stretch of consecutive pages the page
// cache holds in one call, reads fresh pages from the file's end into the
// cache first, and writes any other page alone: one write of many pages
// into uncached file makes large folios (File::WriteGather).
TEST_CASE("pager: a merge gathers the pages the cache holds, and writes the others alone") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  WriteWatchingFileSystem fs;
  PagerOptions o = SmallOptions();
  o.fs = &fs;
  // tag of each run's first page, and its length
  std::map<PageId, std::pair<uint64_t, uint32_t>> runs;
  auto p = OpenOrDie(path, o);
  auto write_runs = [&](int count, uint64_t tag0) {
    auto w = p->BeginWrite(PageWrites::kWriteAt);
    REQUIRE(w.ok());
    for (int i = 0; i < count; i++) {
      const uint32_t n = i % 100 == 99 ? 3 : 1;
      PageId id;
      uint8_t* pg;
      REQUIRE(
          w.value()->Allocate(n == 1 ? PageType::kLeaf : PageType::kOverflow, n, &id, &pg).ok());
      FillBody(pg, uint64_t{n} * 4096, tag0 + i);
      runs[id] = {tag0 + i, n};
    }
    w.value()->set_root(0, runs.begin()->first);
    Status s = w.value()->Commit("", Durability::kNone);
    INFO(s.ToString());
    REQUIRE(s.ok());
  };

  // 2,452 runs at the end of a new file, none of it cached: each is read in
  // first, then all go out in writes of at most 1,024 runs.
  fs.cold = [](PageId) { return true; };
  write_runs(2452, 0);
  CHECK(fs.gathers == 3);
  CHECK(fs.alone.empty());
  CHECK(fs.gathered.size() == runs.size());
  CHECK(fs.populated.size() == 2500);

  // Free them all (born after the last checkpoint: reusable at once), then
  // write as many again into the freed pages, every tenth page not cached.
  {
    auto w = p->BeginWrite(PageWrites::kWriteAt);
    REQUIRE(w.ok());
    for (const auto& [id, run] : runs) REQUIRE(w.value()->Free(id).ok());
    w.value()->set_root(0, 0);
    REQUIRE(w.value()->Commit("", Durability::kNone).ok());
  }
  const PageId fresh = p->Stats().page_count;
  runs.clear();
  fs.alone.clear();
  fs.gathered.clear();
  fs.populated.clear();
  fs.cold = [](PageId id) { return id % 10 == 3; };
  write_runs(2452, 10000);
  // A run is written alone when it has an uncached page that was in the
  // file before (reading it in would read the disk), or no neighbour.
  int alone = 0;
  for (const auto& entry : runs) {
    const PageId id = entry.first;
    const auto& run = entry.second;
    bool cold = false;
    for (uint32_t k = 0; k < run.second; k++) {
      cold = cold || (id + k < fresh && (id + k) % 10 == 3);
    }
    const bool prev = std::any_of(runs.begin(), runs.end(), [id = id](const auto& r) {
      return r.first + r.second.second == id;
    });
    const bool next = runs.count(id + run.second) != 0;
    const bool want_alone = cold || (!prev && !next);
    INFO("run " << id << " of " << run.second << " pages");
    CHECK(fs.alone.count(id) == (want_alone ? 1u : 0u));
    CHECK(fs.gathered.count(id) == (want_alone ? 0u : 1u));
    alone += want_alone;
  }
  CHECK(alone >= 200);                           // the cold pages did go alone
  CHECK(fs.gathered.size() >= runs.size() / 2);  // and most went gathered
  for (PageId id : fs.populated) CHECK(id >= fresh);

  p.reset();
  p = OpenOrDie(path, o);
  auto r = p->BeginRead();
  REQUIRE(r.ok());
  for (const auto& [id, run] : runs) {
    const uint8_t* pg;
    Status s = r.value()->Get(id, &pg);
    INFO("page " << id << ": " << s.ToString());
    REQUIRE(s.ok());
    CHECK(DecodeFixed32(pg + kPageRunLengthOffset) == run.second);
    CHECK(BodyMatches(pg, uint64_t{run.second} * 4096, run.first));
  }
}

TEST_CASE("pager: accounted pages plus reachable pages cover the file") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  uint64_t seed = test::Seed("pager accounting");
  std::mt19937_64 rng(seed);
  const int rounds = 200 * static_cast<int>(test::Scale());
  for (int i = 0; i < rounds; i++) {
    int slot = static_cast<int>(rng() % kMetaRoots);
    uint32_t n = rng() % 4 == 0 ? 1 + rng() % 6 : 1;
    WriteTagged(p.get(), slot, i, Durability::kNone, n > 1 ? PageType::kOverflow : PageType::kLeaf,
                n);
    if (rng() % 37 == 0) REQUIRE(p->Checkpoint().ok());
    if (rng() % 50 == 0) {
      p.reset();
      p = OpenOrDie(dir.File("db"));
    }
  }
  CheckEveryPageAccountedOnce(p.get());
}

TEST_CASE(
    "pager: a second open of a locked file is Busy, in-process and from a "
    "child") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  auto p = OpenOrDie(path);
  auto second = Pager::Open(path, SmallOptions());
  REQUIRE(second.status().IsBusy());
  CHECK(second.status().message().find(path) != std::string::npos);
  CHECK(second.status().message().find("locked") != std::string::npos);
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto r = Pager::Open(path, SmallOptions());
    _exit(static_cast<int>(r.status().code()));
  }
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == static_cast<int>(Status::Code::kBusy));
  p.reset();
  CHECK(Pager::Open(path, SmallOptions()).ok());
}

// In a child whose address space is capped (ulimit -v) below the default
// map: opens `path` with the default map size, commits a page, reopens and
// reads it. Exit status 0 when all went well, 3 when the cap did not keep
// a default-sized map out (the test would prove nothing), else 1 or 2.
[[noreturn]] void OpenUnderAddressCap(const std::string& path) {
  uint64_t vm_kib = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr)
      if (std::sscanf(line, "VmSize: %lu kB", &vm_kib) == 1) break;
    std::fclose(f);
  }
  const PagerOptions defaults;
  const rlim_t cap = vm_kib * 1024 + (defaults.initial_map_size / 4);
  const struct rlimit lim = {cap, cap};
  if (vm_kib == 0 || setrlimit(RLIMIT_AS, &lim) != 0) _exit(2);
  void* probe = mmap(nullptr, defaults.initial_map_size, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (probe != MAP_FAILED) _exit(3);
  PagerOptions o = defaults;
  o.log_size = 256 << 10;
  for (uint64_t tag : {7, 8}) {
    auto r = Pager::Open(path, o);
    if (!r.ok()) _exit(1);
    Pager* p = r.value().get();
    if (!p->Recover([](uint64_t, std::string_view) { return Status::OK(); }).ok()) _exit(1);
    if (tag == 8) {  // the page the first open committed
      auto t = p->BeginRead();
      const uint8_t* pg;
      if (!t.ok() || !t.value()->Get(t.value()->root(0), &pg).ok()) _exit(1);
      if (!BodyMatches(pg, 4096, 7)) _exit(1);
      _exit(0);
    }
    auto w = p->BeginWrite();
    PageId id;
    uint8_t* pg;
    if (!w.ok() || !w.value()->Allocate(PageType::kOverflow, 1, &id, &pg).ok()) _exit(1);
    FillBody(pg, 4096, tag);
    w.value()->set_root(0, id);
    if (!w.value()->Commit("x", Durability::kNone).ok()) _exit(1);
  }
  _exit(1);
}

TEST_CASE("pager: under a ulimit -v too small for the default map, opens with a smaller one") {
  if (test::kSanitized) {
    WARN("not run under a sanitizer: its shadow memory needs the address space a cap takes");
    return;
  }
  test::TempDir dir;
  const std::string path = dir.File("db");
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) OpenUnderAddressCap(path);
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
  // Without the cap the default map opens the same file.
  auto p = OpenOrDie(path, PagerOptions());
  auto t = p->BeginRead();
  REQUIRE(t.ok());
  const uint8_t* pg;
  REQUIRE(t.value()->Get(t.value()->root(0), &pg).ok());
  CHECK(BodyMatches(pg, 4096, 7));
}

TEST_CASE("pager: stats report readers and log use") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  WriteTagged(p.get(), 0, 1);
  auto r1 = p->BeginRead();
  WriteTagged(p.get(), 0, 2);
  auto r2 = p->BeginRead();
  PagerStats st = p->Stats();
  CHECK(st.readers == 2);
  CHECK(st.oldest_reader_txid == r1.value()->txid());
  CHECK(st.log_used > 0);
  CHECK(st.pending_pages >= 1);
  r1.value().reset();
  st = p->Stats();
  CHECK(st.readers == 1);
  CHECK(st.oldest_reader_txid == r2.value()->txid());
  // The library's own reader pins pages but is not the application's.
  WriteTagged(p.get(), 0, 3);
  auto internal = p->BeginInternalRead();
  REQUIRE(internal.ok());
  st = p->Stats();
  CHECK(st.readers == 1);
  r2.value().reset();
  WriteTagged(p.get(), 0, 4);
  st = p->Stats();
  CHECK(st.readers == 0);
  CHECK(st.oldest_reader_txid == internal.value()->txid());
  internal.value().reset();
  CHECK(p->Stats().oldest_reader_txid == 0);
}

TEST_CASE("pager: readers of one snapshot and of older ones are counted apart") {
  // BeginRead counts readers of the newest snapshot in one counter and moves
  // them to the per-txid map when a newer snapshot gets a reader; whichever
  // order readers close in, the oldest open snapshot is what rule 5(a)
  // waits for.
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  WriteTagged(p.get(), 0, 1);
  auto a1 = p->BeginRead();
  auto a2 = p->BeginRead();
  const uint64_t ta = a1.value()->txid();
  CHECK(a2.value()->txid() == ta);
  WriteTagged(p.get(), 0, 2);  // frees a page a1 and a2 can still read
  auto b = p->BeginRead();
  const uint64_t tb = b.value()->txid();
  REQUIRE(tb > ta);
  PagerStats st = p->Stats();
  CHECK(st.readers == 3);
  CHECK(st.oldest_reader_txid == ta);
  const uint64_t pending = st.pending_pages;
  CHECK(pending >= 1);
  a1.value().reset();
  st = p->Stats();
  CHECK(st.readers == 2);
  CHECK(st.oldest_reader_txid == ta);
  WriteTagged(p.get(), 0, 3);  // a2 still pins what the second write freed
  CHECK(p->Stats().pending_pages >= pending);
  a2.value().reset();
  st = p->Stats();
  CHECK(st.readers == 1);
  CHECK(st.oldest_reader_txid == tb);
  auto c = p->BeginRead();  // b moves to the map, c is the newest
  const uint64_t tc = c.value()->txid();
  REQUIRE(tc > tb);
  CHECK(p->Stats().oldest_reader_txid == tb);
  c.value().reset();
  st = p->Stats();
  CHECK(st.readers == 1);
  CHECK(st.oldest_reader_txid == tb);
  b.value().reset();
  st = p->Stats();
  CHECK(st.readers == 0);
  CHECK(st.oldest_reader_txid == 0);
}

}  // namespace
}  // namespace mmdoc::storage

namespace mmdoc::storage {
namespace {

// What /proc/self/smaps says about one mapping.
struct MapInfo {
  uint64_t rss = 0;   // resident bytes ("Rss")
  std::string flags;  // "VmFlags", e.g. "rd wr sh mr mw me ms rr"
};

// Every mapping of `path` in this process.
std::vector<MapInfo> MapsOf(const std::string& path) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  REQUIRE(f != nullptr);
  std::vector<MapInfo> maps;
  bool ours = false;
  char line[4096];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    std::string l(line);
    if (!l.empty() && l.back() == '\n') l.pop_back();
    const std::string first = l.substr(0, l.find(' '));
    const bool header = first.find('-') != std::string::npos &&
                        first.find_first_not_of("0123456789abcdef-") == std::string::npos;
    unsigned long long kb;
    if (header) {  // "start-end perms offset dev inode path"
      ours = l.size() >= path.size() && l.compare(l.size() - path.size(), path.size(), path) == 0;
      if (ours) maps.emplace_back();
    } else if (ours && std::sscanf(line, "Rss: %llu kB", &kb) == 1) {
      maps.back().rss = kb * 1024;
    } else if (ours && l.rfind("VmFlags:", 0) == 0) {
      maps.back().flags = l.substr(8) + " ";
    }
  }
  std::fclose(f);
  return maps;
}

uint64_t ResidentBytesOfMaps(const std::string& path) {
  uint64_t total = 0;
  for (const MapInfo& m : MapsOf(path)) total += m.rss;
  return total;
}

TEST_CASE("pager: every map of the data file is advised random access") {
  // Without MADV_RANDOM the kernel fills the page cache with large folios
  // and a one-page write dirties (and writes back) the whole folio.
  test::TempDir dir;
  PagerOptions o = SmallOptions();
  o.initial_map_size = 64 << 10;
  const std::string path = dir.File("db");
  auto p = OpenOrDie(path, o);
  for (uint64_t i = 0; i < 8; i++) {
    WriteTagged(p.get(), 0, i, Durability::kNone, PageType::kOverflow, 32);
  }
  std::vector<MapInfo> maps = MapsOf(path);
  CHECK(maps.size() >= 2);  // remapped at least once
  for (const MapInfo& m : maps) {
    INFO("VmFlags:" << m.flags);
    CHECK(m.flags.find(" rr ") != std::string::npos);
  }
}

// This process's write_bytes (/proc/self/io): bytes of page cache it
// dirtied, counted a folio at a time; 0 when unreadable.
uint64_t WriteBytes() {
  std::FILE* f = std::fopen("/proc/self/io", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long v = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "write_bytes: %llu", &v) == 1) break;
  }
  std::fclose(f);
  return v;
}

TEST_CASE("pager: an msync commit dirties a page of the log, not a large folio") {
  // The log is zero-filled when made; written in large chunks, it sat in
  // 1 MiB folios and every msync commit wrote 1 MiB back.
  test::TempDir dir;
  PagerOptions o = SmallOptions();
  o.log_size = 64 << 20;  // a 1 MiB log to start with
  const std::string path = dir.File("db");
  auto p = OpenOrDie(path, o);
  WriteTagged(p.get(), 0, 0, Durability::kMsync);
  for (const MapInfo& m : MapsOf(path + "-log")) {
    INFO("VmFlags:" << m.flags);
    CHECK(m.flags.find(" rr ") != std::string::npos);
  }
  const int n = 50;
  const uint64_t before = WriteBytes();
  for (int i = 1; i <= n; i++) WriteTagged(p.get(), 0, i, Durability::kMsync);
  const uint64_t per_commit = (WriteBytes() - before) / n;
  INFO("write_bytes per commit: " << per_commit);
  // A log page and a leaf page, and a share of the rest.
  CHECK(per_commit < (64 << 10));
}

// Reads the runs of root slots 0..7 as the test below last wrote them
// (tags 56..63).
void CheckLastRuns(Pager* p) {
  auto r = p->BeginRead();
  REQUIRE(r.ok());
  for (int slot = 0; slot < 8; slot++) {
    const uint8_t* pg;
    REQUIRE(r.value()->Get(r.value()->root(slot), &pg).ok());
    CHECK(BodyMatches(pg, 32 * 4096, 56 + slot));
  }
}

TEST_CASE("pager: a remap leaves each page resident once in the process") {
  test::TempDir dir;
  PagerOptions o = SmallOptions();
  o.initial_map_size = 64 << 10;  // many remaps below
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path, o);
    // Runs of 32 pages in 8 root slots: overwriting a slot frees its old
    // run, which checkpoints let later runs reuse through a newer map.
    for (uint64_t i = 0; i < 64; i++) {
      WriteTagged(p.get(), static_cast<int>(i % 8), i, Durability::kNone, PageType::kOverflow, 32);
      if (i % 16 == 15) REQUIRE(p->Checkpoint().ok());
    }
    CheckLastRuns(p.get());  // reads every live run through the current map
    const uint64_t file_bytes = p->Stats().file_size;
    const uint64_t resident = ResidentBytesOfMaps(path);
    INFO("resident " << resident << " bytes, file " << file_bytes << " bytes");
    CHECK(resident > 0);
    CHECK(resident <= file_bytes);
  }
  // Dropping the old maps' pages lost nothing written through them.
  auto p = OpenOrDie(path, o);
  CheckLastRuns(p.get());
}

TEST_CASE("pager: readers run concurrently with a writer") {
  test::TempDir dir;
  PagerOptions o = testutil::SmallOptions();
  o.initial_map_size = 64 << 10;  // remaps while readers read
  auto p = testutil::OpenOrDie(dir.File("db"), o);
  testutil::WriteTagged(p.get(), 0, 0);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  readers.reserve(3);
  for (int t = 0; t < 3; t++) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        auto r = p->BeginRead();
        if (!r.ok()) {
          bad++;
          continue;
        }
        const uint8_t* pg;
        PageId id = r.value()->root(0);
        if (!r.value()->Get(id, &pg).ok()) {
          bad++;
          continue;
        }
        // The tag is the txid of the commit that wrote the page; it never
        // exceeds the snapshot's txid and the body always matches it.
        uint64_t tag = (DecodeFixed64(pg + kPageHeaderSize) - kPageHeaderSize) / 1000003;
        if (!testutil::BodyMatches(pg, 4096, tag)) bad++;
      }
    });
  }
  const int n = 300 * static_cast<int>(test::Scale());
  for (int i = 1; i <= n; i++) {
    auto w = p->BeginWrite();
    REQUIRE(w.ok());
    PageId id;
    uint8_t* pg;
    REQUIRE(w.value()->Allocate(PageType::kLeaf, 1 + i % 2, &id, &pg).ok());
    testutil::FillBody(pg, 4096, i);
    REQUIRE(w.value()->Free(w.value()->root(0)).ok());
    w.value()->set_root(0, id);
    REQUIRE(w.value()->Commit("", i % 50 == 0 ? Durability::kFsync : Durability::kNone).ok());
    if (i % 100 == 0) REQUIRE(p->Checkpoint().ok());
  }
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(bad == 0);
  CHECK(p->Verify().ok());
}

}  // namespace
}  // namespace mmdoc::storage
