// I/O faults (sticky errors, rule 8), power loss per durability mode, group
// commit with several threads, the periodic flusher. Uses
// tests/support/fault_fs.h.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "storage/pager.h"
#include "tests/storage/storage_test_util.h"
#include "tests/support/fault_fs.h"
#include "tests/support/fs_wrapper.h"
#include "tests/support/test_env.h"

namespace mmdoc::storage {
namespace {

using namespace testutil;  // NOLINT
using test::FaultFileSystem;
using Op = FaultFileSystem::Op;

PagerOptions FaultOptions(FaultFileSystem* fs) {
  PagerOptions o = SmallOptions();
  o.fs = fs;
  o.log_size = 64 << 10;
  return o;
}

TEST_CASE("fault: EIO on log sync fails the commit and is sticky") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  FaultFileSystem fs;
  {
    auto p = OpenOrDie(path, FaultOptions(&fs));
    WriteTagged(p.get(), 0, 1, Durability::kFsync);
    fs.FailNth(Op::kSync, 1, EIO, "-log");
    auto w = p->BeginWrite();
    PageId id;
    uint8_t* pg;
    REQUIRE(w.value()->Allocate(PageType::kLeaf, 1, &id, &pg).ok());
    FillBody(pg, 4096, 2);
    w.value()->set_root(0, id);
    Status s = w.value()->Commit(Payload(0, 2, PageType::kLeaf, 1), Durability::kFsync);
    REQUIRE(s.IsIOError());
    CHECK(s.message().find("-log") != std::string::npos);
    CHECK(p->BackgroundError().IsIOError());
    CHECK(p->BeginWrite().status().IsIOError());
    CHECK(p->Checkpoint().IsIOError());
    CHECK(p->Flush().IsIOError());  // never retried as if it succeeded
    // Reads keep working on the last good state.
    CHECK(RootHasTag(p.get(), 0, 1));
  }
  // Reopens at its last commit (the failed record may or may not replay).
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK((RootHasTag(p.get(), 0, 1) || RootHasTag(p.get(), 0, 2)));
  CHECK(p->Verify().ok());
}

TEST_CASE("fault: msync and data sync failures are sticky") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  FaultFileSystem fs;
  {
    auto p = OpenOrDie(path, FaultOptions(&fs));
    WriteTagged(p.get(), 0, 1, Durability::kMsync);
    SECTION("msync") {
      fs.FailNth(Op::kMapSync, 1, EIO);
      auto w = p->BeginWrite();
      CHECK(w.value()->Commit(Payload(0, 1, PageType::kLeaf, 1), Durability::kMsync).IsIOError());
    }
    SECTION("checkpoint data sync") {
      fs.FailNth(Op::kSync, 1, EIO, "db");
      CHECK(p->Checkpoint().IsIOError());
    }
    SECTION("everything fails") {
      fs.FailAll(EIO);
      auto w = p->BeginWrite();
      CHECK(w.value()->Commit(Payload(0, 1, PageType::kLeaf, 1), Durability::kFsync).IsIOError());
    }
    CHECK(p->BeginWrite().status().IsIOError());
    CHECK(RootHasTag(p.get(), 0, 1));
  }
  fs.ClearFaults();
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, FaultOptions(&fs), &tags);
  CHECK(RootHasTag(p.get(), 0, 1));
  CHECK(p->Verify().ok());
}

TEST_CASE("fault: ENOSPC when the file grows is Full, and not sticky") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  FaultFileSystem fs;
  {
    auto p = OpenOrDie(path, FaultOptions(&fs));
    WriteTagged(p.get(), 0, 1, Durability::kFsync);
    fs.FailNth(Op::kAllocate, 1, ENOSPC);
    auto w = p->BeginWrite();
    Status s;
    for (int i = 0; i < 100000 && s.ok(); i++) {
      PageId id;
      uint8_t* pg;
      s = w.value()->Allocate(PageType::kLeaf, 1, &id, &pg);
    }
    REQUIRE(s.IsFull());
    CHECK(s.message().find(path) != std::string::npos);
    w.value()->Abort();
    // Nothing was published: once the disk has room, writes go on.
    WriteTagged(p.get(), 0, 2, Durability::kFsync);
    CHECK(RootHasTag(p.get(), 0, 2));
  }
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, FaultOptions(&fs), &tags);
  CHECK(RootHasTag(p.get(), 0, 2));
  CHECK(p->Verify().ok());
}

// Commits a WriteTagged-like txn and returns its status.
Status TryWriteTagged(Pager* p, uint64_t tag) {
  auto w = p->BeginWrite();
  if (!w.ok()) return w.status();
  PageId id;
  uint8_t* pg;
  MMDOC_RETURN_IF_ERROR(w.value()->Allocate(PageType::kLeaf, 1, &id, &pg));
  FillBody(pg, w.value()->page_size(), tag);
  if (w.value()->root(0) != 0) MMDOC_RETURN_IF_ERROR(w.value()->Free(w.value()->root(0)));
  w.value()->set_root(0, id);
  return w.value()->Commit(Payload(0, tag, PageType::kLeaf, 1), Durability::kNone);
}

// The log starts at 4 KiB here and grows as commits fill it. In `none` mode
// the log's only writes are a growth's: its zeros, then its header.
TEST_CASE("fault: a log growth that fails loses nothing, a failed header write is sticky") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  const std::string log = path + "-log";
  FaultFileSystem fs;
  uint64_t last = 0;
  SECTION("ENOSPC while the new space is zeroed: that commit checkpoints instead") {
    {
      auto p = OpenOrDie(path, FaultOptions(&fs));
      REQUIRE(TryWriteTagged(p.get(), 1).ok());
      const uint64_t ckpt = p->Stats().checkpoint_txid;
      fs.FailNth(Op::kWrite, 1, ENOSPC, "-log");
      for (last = 2; last <= 300; last++) REQUIRE(TryWriteTagged(p.get(), last).ok());
      last--;
      CHECK(fs.injected() == 1);
      CHECK(p->Stats().checkpoint_txid > ckpt);
      // Once the disk had room, a later growth went through.
      CHECK(std::filesystem::file_size(log) > kLogRecordsOffset + 4096);
      p->TEST_CrashOnClose();
    }
  }
  SECTION("EIO on the header that claims the new space: the commit fails, and later ones") {
    {
      auto p = OpenOrDie(path, FaultOptions(&fs));
      REQUIRE(TryWriteTagged(p.get(), 1).ok());
      fs.FailNth(Op::kWrite, 2, EIO, "-log");
      Status s;
      for (last = 2; last <= 300; last++) {
        s = TryWriteTagged(p.get(), last);
        if (!s.ok()) break;
      }
      INFO(s.ToString());
      REQUIRE(s.IsIOError());
      last--;
      CHECK(p->BeginWrite().status().IsIOError());
      CHECK(std::filesystem::file_size(log) > kLogRecordsOffset + 4096);
      p->TEST_CrashOnClose();
    }
  }
  fs.ClearFaults();
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, FaultOptions(&fs), &tags);
  CHECK(RootHasTag(p.get(), 0, last));
  CHECK(p->Verify().ok());
}

TEST_CASE("fault: a failed write while creating the log fails Open") {
  test::TempDir dir;
  FaultFileSystem fs;
  fs.FailNth(Op::kWrite, 1, EIO, "-log");
  auto r = Pager::Open(dir.File("db"), FaultOptions(&fs));
  CHECK(r.status().IsIOError());
  // A create that fails leaves nothing behind.
  CHECK_FALSE(fs.Exists(dir.File("db")));
  CHECK_FALSE(fs.Exists(dir.File("db-log")));
}

// A file system whose log files cannot be mapped (mmap's ENOMEM under a
// small ulimit -v), after the log was created and written.
class NoLogMapFileSystem final : public test::FileSystemWrapper {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    auto f = base()->Open(path, mode);
    if (!f.ok()) return f.status();
    const bool log = path.size() > 4 && path.compare(path.size() - 4, 4, "-log") == 0;
    if (!log) return f;
    return std::unique_ptr<File>(new NoMapFile(std::move(f.value())));
  }

 private:
  class NoMapFile final : public test::FileWrapper {
   public:
    explicit NoMapFile(std::unique_ptr<File> real) : FileWrapper(std::move(real)) {}
    Result<uint8_t*> Map(uint64_t, MapMode) override {
      return Status::IOError(path(), "mmap: Cannot allocate memory");
    }
  };
};

TEST_CASE("fault: a log that cannot be mapped fails the create and leaves nothing behind") {
  test::TempDir dir;
  NoLogMapFileSystem fs;
  PagerOptions o = SmallOptions();
  o.fs = &fs;
  auto r = Pager::Open(dir.File("db"), o);
  REQUIRE(r.status().IsIOError());
  CHECK_FALSE(fs.Exists(dir.File("db")));
  // A log left behind would make the next create refuse the path.
  CHECK_FALSE(fs.Exists(dir.File("db-log")));
  o.fs = nullptr;
  auto again = Pager::Open(dir.File("db"), o);
  INFO(again.status().ToString());
  CHECK(again.ok());
}

// A file system whose data files cannot be mapped again while `refuse` is
// set (mmap's ENOMEM when ulimit -v leaves no room for a larger map).
class RefusedRemapFileSystem final : public test::FileSystemWrapper {
 public:
  std::atomic<bool> refuse{false};

  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    auto f = base()->Open(path, mode);
    if (!f.ok()) return f.status();
    const bool log = path.size() > 4 && path.compare(path.size() - 4, 4, "-log") == 0;
    if (log) return f;
    return std::unique_ptr<File>(new File_(this, std::move(f.value())));
  }

 private:
  class File_ final : public test::FileWrapper {
   public:
    File_(RefusedRemapFileSystem* fs, std::unique_ptr<File> real)
        : FileWrapper(std::move(real)), fs_(fs) {}
    Result<uint8_t*> Map(uint64_t length, MapMode mode) override {
      if (fs_->refuse.load()) return Status::IOError(path(), "mmap: Cannot allocate memory");
      return real()->Map(length, mode);
    }

   private:
    RefusedRemapFileSystem* fs_;
  };
};

TEST_CASE("fault: a map refused after the file grew is asked again, never read past") {
  // Found under ulimit -v with a small write buffer: the file grew, its
  // larger map failed, and the next growth found the file large enough and
  // skipped the map; pages past the map's end were then read (wrong page
  // types, then checksum mismatches written back).
  test::TempDir dir;
  RefusedRemapFileSystem fs;
  PagerOptions o = SmallOptions();
  o.fs = &fs;
  o.initial_map_size = 64 << 10;  // 16 pages
  auto p = OpenOrDie(dir.File("db"), o);
  WriteTagged(p.get(), 0, 1);
  // A run past the file's end: the file grows, and its map must too.
  const uint32_t run = static_cast<uint32_t>(p->Stats().file_size / 4096) + 16;
  fs.refuse = true;
  for (int attempt = 0; attempt < 2; attempt++) {
    INFO("attempt " << attempt);
    auto w = p->BeginWrite();
    REQUIRE(w.ok());
    PageId id;
    uint8_t* pg;
    Status s = w.value()->Allocate(PageType::kOverflow, run, &id, &pg);
    INFO(s.ToString());
    CHECK(s.IsIOError());
    w.value()->Abort();
  }
  fs.refuse = false;
  WriteTagged(p.get(), 1, 2, Durability::kNone, PageType::kOverflow, run);
  CHECK(RootHasTag(p.get(), 0, 1));
  CHECK(RootHasTag(p.get(), 1, 2));
  CHECK(p->Verify().ok());
}

// Runs commits in `mode` with checkpoints mixed in, crashes, loses power,
// reopens. Returns the tags that were acknowledged and the ones recovered.
void PowerLossRound(Durability mode, uint64_t seed, bool expect_all) {
  test::TempDir dir;
  const std::string path = dir.File("db");
  FaultFileSystem fs;
  std::mt19937_64 rng(seed);
  std::map<int, uint64_t> acked;                 // slot -> last acknowledged tag
  std::vector<std::map<int, uint64_t>> history;  // state after each commit
  {
    auto p = OpenOrDie(path, FaultOptions(&fs));
    const int n = 20 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; i++) {
      int slot = static_cast<int>(rng() % 3);
      uint32_t pages = rng() % 5 == 0 ? 2 + rng() % 3 : 1;
      WriteTagged(p.get(), slot, 10000 + i, mode, pages > 1 ? PageType::kOverflow : PageType::kLeaf,
                  pages);
      acked[slot] = 10000 + i;
      history.push_back(acked);
      if (rng() % 10 == 0) REQUIRE(p->Checkpoint().ok());
    }
    p->TEST_CrashOnClose();
  }
  fs.SimulatePowerLoss(rng);
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  REQUIRE(p->Verify().ok());
  // The recovered state is exactly the state after some commit (all of them
  // when the mode is durable).
  std::map<int, uint64_t> got;
  for (int s = 0; s < 3; s++) {
    auto r = p->BeginRead();
    if (r.value()->root(s) == 0) continue;
    const uint8_t* pg;
    Status st = r.value()->Get(r.value()->root(s), &pg);
    INFO(st.ToString());
    REQUIRE(st.ok());
    uint32_t n = DecodeFixed32(pg + kPageRunLengthOffset);
    uint64_t tag = DecodeFixed64(pg + kPageHeaderSize) - kPageHeaderSize;
    tag /= 1000003;
    REQUIRE(BodyMatches(pg, n * 4096ull, tag));
    got[s] = tag;
  }
  if (expect_all) {
    CHECK(got == acked);
  } else {
    bool match = got.empty();
    for (const auto& h : history) match = match || h == got;
    CHECK(match);
  }
}

TEST_CASE(
    "power loss: kFsync and kMsync commits survive, kNone opens at an earlier "
    "commit") {
  const uint64_t seed = test::Seed("power loss");
  const int rounds = 6 * static_cast<int>(test::Scale());
  for (int i = 0; i < rounds; i++) {
    INFO("round " << i);
    PowerLossRound(Durability::kFsync, seed + i, true);
    PowerLossRound(Durability::kMsync, seed + 1000 + i, true);
    PowerLossRound(Durability::kGroup, seed + 2000 + i, true);
    PowerLossRound(Durability::kNone, seed + 3000 + i, false);
  }
}

TEST_CASE("group commit: several threads, every commit durable") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  FaultFileSystem fs;
  const int threads = 4, per = 25 * static_cast<int>(test::Scale());
  {
    PagerOptions o = FaultOptions(&fs);
    o.log_size = 1 << 20;
    auto p = OpenOrDie(path, o);
    std::vector<std::thread> ts;
    std::atomic<int> failures{0};
    for (int t = 0; t < threads; t++) {
      ts.emplace_back([&, t] {
        for (int i = 0; i < per; i++) {
          auto w = p->BeginWrite();
          if (!w.ok()) {
            failures++;
            continue;
          }
          PageId id;
          uint8_t* pg;
          uint64_t tag = t * 100000 + i;
          if (!w.value()->Allocate(PageType::kLeaf, 1, &id, &pg).ok()) failures++;
          FillBody(pg, 4096, tag);
          PageId old = w.value()->root(t);
          if (old != 0 && !w.value()->Free(old).ok()) failures++;
          w.value()->set_root(t, id);
          if (!w.value()->Commit(Payload(t, tag, PageType::kLeaf, 1), Durability::kGroup).ok()) {
            failures++;
          }
        }
      });
    }
    for (auto& t : ts) t.join();
    CHECK(failures == 0);
    CHECK(fs.Count(Op::kSync, "-log") <= static_cast<uint64_t>(threads * per));
    p->TEST_CrashOnClose();
  }
  std::mt19937_64 rng(test::Seed("group power loss"));
  fs.SimulatePowerLoss(rng);
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(tags.size() == static_cast<size_t>(threads * per));
  for (int t = 0; t < threads; t++) CHECK(RootHasTag(p.get(), t, t * 100000 + per - 1));
}

TEST_CASE("periodic: the background thread flushes the log") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  FaultFileSystem fs;
  {
    PagerOptions o = FaultOptions(&fs);
    o.sync_interval_ms = 10;
    auto p = OpenOrDie(path, o);
    const uint64_t syncs = fs.Count(Op::kSync, "-log");
    WriteTagged(p.get(), 0, 42, Durability::kPeriodic);
    for (int i = 0; i < 200 && fs.Count(Op::kSync, "-log") == syncs; i++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(fs.Count(Op::kSync, "-log") > syncs);
    p->TEST_CrashOnClose();
  }
  std::mt19937_64 rng(test::Seed("periodic power loss"));
  fs.SimulatePowerLoss(rng);
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(RootHasTag(p.get(), 0, 42));
}

TEST_CASE("SyncForCommit: every mode works on a committed range") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  WriteTagged(p.get(), 0, 1);
  uint64_t used = p->Stats().log_used;
  for (Durability d : {Durability::kNone, Durability::kPeriodic, Durability::kMsync,
                       Durability::kFsync, Durability::kGroup}) {
    INFO(DurabilityName(d));
    CHECK(p->SyncForCommit(d, kLogRecordsOffset, used).ok());
  }
  CHECK(p->Flush().ok());
}

}  // namespace
}  // namespace mmdoc::storage
