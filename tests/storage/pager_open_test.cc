// Opening a database: creation that a crash cannot leave half-made, the log
// that must belong to its database (rule 9 of storage/pager.h), files that
// are empty, zeroed or replaced, and opens that must not change anything.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "storage/checksum.h"
#include "storage/format.h"
#include "tests/storage/storage_test_util.h"
#include "tests/support/fault_fs.h"
#include "tests/support/test_env.h"

namespace mmdoc::storage {
namespace {

using namespace testutil;
using test::FaultFileSystem;
using Op = FaultFileSystem::Op;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void Spill(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
bool Exists(const std::string& path) { return std::filesystem::exists(path); }

PagerOptions NoCreate() {
  PagerOptions o = SmallOptions();
  o.create_if_missing = false;
  return o;
}

// Commits tags 1..n with fsync, then "kills" the process: no checkpoint at
// close, the page cache keeps everything.
void CommitAndKill(const std::string& path, int n) {
  auto p = OpenOrDie(path);
  for (int i = 1; i <= n; i++) WriteTagged(p.get(), 0, i, Durability::kFsync);
  p->TEST_CrashOnClose();
}

// ------------------------------------------------------------ creation --

TEST_CASE("open: a new database is created whole, with its log") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  auto p = OpenOrDie(path);
  CHECK(Exists(path));
  CHECK(Exists(path + "-log"));
  // Nothing else is left in the directory (no temporary file).
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    files++;
  }
  CHECK(files == 2);
  CHECK(p->Verify().ok());
}

TEST_CASE("open: a kill or power cut at any point of creating leaves no half-made database") {
  // Creating a database, then at a random point no more: power is lost with
  // a random part of what was written, synced or not, on the disk. The
  // path must then either not exist (or be refused as empty, which a
  // creating open makes new) or open at a state some commit left.
  const uint64_t rounds = 60 * test::Scale();
  std::mt19937_64 rng(test::Seed("power loss while creating"));
  for (uint64_t round = 0; round < rounds; round++) {
    test::RamDir dir;
    const std::string path = dir.File("db");
    FaultFileSystem fs;
    PagerOptions o = SmallOptions();
    o.fs = &fs;
    const int commits = static_cast<int>(rng() % 3);
    const int fail_at = static_cast<int>(rng() % 6);
    if (fail_at < 4) fs.FailNth(static_cast<Op>(rng() % 4), 1 + rng() % 3, EIO);
    {
      auto r = Pager::Open(path, o);
      if (r.ok()) {
        Status s = r.value()->Recover([](uint64_t, std::string_view) { return Status::OK(); });
        for (int i = 1; i <= commits && s.ok(); i++) {
          auto w = r.value()->BeginWrite();
          if (!w.ok()) break;
          PageId id;
          uint8_t* pg;
          if (!w.value()->Allocate(PageType::kLeaf, 1, &id, &pg).ok()) break;
          FillBody(pg, w.value()->page_size(), i);
          w.value()->set_root(0, id);
          s = w.value()->Commit(Payload(0, i, PageType::kLeaf, 1), Durability::kFsync);
        }
        r.value()->TEST_CrashOnClose();
      } else {
        // A failed create leaves nothing behind.
        CHECK_FALSE(Exists(path));
        CHECK_FALSE(Exists(path + "-log"));
      }
    }
    fs.SimulatePowerLoss(rng);
    INFO("round " << round);
    if (!Exists(path)) continue;
    std::vector<uint64_t> tags;
    PagerOptions again = SmallOptions();
    auto r = Pager::Open(path, again);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    REQUIRE(r.value()
                ->Recover([&](uint64_t, std::string_view payload) {
                  return ApplyTagged(r.value().get(), payload, &tags);
                })
                .ok());
    CHECK(r.value()->Verify().ok());
    WriteTagged(r.value().get(), 1, 99);  // and it takes writes
  }
}

TEST_CASE("open: an empty or all-zero file is refused, not made a database, unless creating") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  for (size_t size : {size_t{0}, size_t{8192}, size_t{1 << 20}}) {
    INFO("size " << size);
    Spill(path, std::string(size, '\0'));
    auto r = Pager::Open(path, NoCreate());
    INFO(r.status().ToString());
    REQUIRE(r.status().IsCorruption());
    CHECK(r.status().ToString().find(path) != std::string::npos);
    // Nothing was changed or created.
    CHECK(Slurp(path) == std::string(size, '\0'));
    CHECK_FALSE(Exists(path + "-log"));
    // A caller that may create gets a new, empty database in its place.
    {
      auto p = OpenOrDie(path);
      WriteTagged(p.get(), 0, 7);
    }
    auto p = OpenOrDie(path, NoCreate());
    CHECK(RootHasTag(p.get(), 0, 7));
    p.reset();
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
  }
}

TEST_CASE("open: an empty data file whose log is not empty is never started over") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  CommitAndKill(path, 3);
  Spill(path, "");
  const std::string log = Slurp(path + "-log");
  auto r = Pager::Open(path, SmallOptions());
  INFO(r.status().ToString());
  REQUIRE(r.status().IsCorruption());
  CHECK(Slurp(path + "-log") == log);
}

TEST_CASE("open: a missing database with create_if_missing off creates nothing") {
  test::TempDir dir;
  auto r = Pager::Open(dir.File("db"), NoCreate());
  CHECK(r.status().IsNotFound());
  CHECK_FALSE(Exists(dir.File("db")));
  CHECK_FALSE(Exists(dir.File("db-log")));
}

TEST_CASE("open: a clean database opened and read changes no file, even without its log") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path);
    for (int i = 0; i < 5; i++) WriteTagged(p.get(), i % 2, 10 + i, Durability::kFsync);
  }
  const std::string data = Slurp(path), log = Slurp(path + "-log");
  {
    auto p = OpenOrDie(path, NoCreate());
    CHECK(RootHasTag(p.get(), 0, 14));
    CHECK(p->Verify().ok());
  }
  CHECK(Slurp(path) == data);
  CHECK(Slurp(path + "-log") == log);
  // Its log is not needed: a clean database opens without one, reads, and
  // makes a new log only when it is written.
  std::filesystem::remove(path + "-log");
  {
    auto p = OpenOrDie(path, NoCreate());
    CHECK(RootHasTag(p.get(), 1, 13));
  }
  CHECK(Slurp(path) == data);
  CHECK_FALSE(Exists(path + "-log"));
  {
    auto p = OpenOrDie(path, NoCreate());
    WriteTagged(p.get(), 0, 20, Durability::kFsync);
    CHECK(Exists(path + "-log"));
    p->TEST_CrashOnClose();
  }
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, NoCreate(), &tags);
  CHECK(tags == std::vector<uint64_t>{20});
  CHECK(RootHasTag(p.get(), 0, 20));
}

// ----------------------------------------------------- the log's identity --

TEST_CASE("open: a database not closed cleanly refuses a log that is not its own") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  const std::string other = dir.File("other");
  CommitAndKill(other, 4);
  CommitAndKill(path, 30);
  const std::string log = Slurp(path + "-log");

  struct Damage {
    const char* name;
    const char* says;
  };
  for (const Damage& d : {Damage{"deleted", "missing"}, Damage{"another database's", "another"},
                          Damage{"truncated", "truncated"}, Damage{"zeroed", "not an mmdoc log"},
                          Damage{"emptied", "empty"}}) {
    INFO(d.name);
    const std::string n = d.name;
    if (n == "deleted") std::filesystem::remove(path + "-log");
    if (n == "another database's") Spill(path + "-log", Slurp(other + "-log"));
    if (n == "truncated") Spill(path + "-log", log.substr(0, log.size() / 2));
    if (n == "zeroed") Spill(path + "-log", std::string(log.size(), '\0'));
    if (n == "emptied") Spill(path + "-log", "");
    const std::string data = Slurp(path);
    auto r = Pager::Open(path, SmallOptions());
    INFO(r.status().ToString());
    REQUIRE(r.status().IsCorruption());
    const std::string said = r.status().ToString();
    CHECK(said.find(path + "-log") != std::string::npos);
    CHECK(said.find(path + "-log") == said.rfind(path + "-log"));  // named once
    CHECK(said.find(d.says) != std::string::npos);
    CHECK(Slurp(path) == data);  // nothing changed
    Spill(path + "-log", log);
  }
  // The real log is still there to recover from.
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(tags.size() == 30);
  CHECK(RootHasTag(p.get(), 0, 30));
}

TEST_CASE("open: an older copy of the log is refused, though every record in it is intact") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  std::string copy;
  {
    auto p = OpenOrDie(path);
    for (int i = 1; i <= 300; i++) {
      WriteTagged(p.get(), 0, i, Durability::kFsync);
      if (i == 150) copy = Slurp(path + "-log");
    }
    p->TEST_CrashOnClose();
  }
  Spill(path + "-log", copy);
  auto r = Pager::Open(path, SmallOptions());
  INFO(r.status().ToString());
  REQUIRE(r.status().IsCorruption());
  CHECK(r.status().ToString().find("older copy") != std::string::npos);
  // accept_log_loss opens at what the copy holds.
  PagerOptions o = SmallOptions();
  o.accept_log_loss = true;
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, o, &tags);
  CHECK(tags.size() == 150);
  CHECK(RootHasTag(p.get(), 0, 150));
  WriteTagged(p.get(), 0, 151, Durability::kFsync);
  CHECK(p->Verify().ok());
}

TEST_CASE("open: accept_log_loss opens at the last checkpoint without the log, then writes") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path);
    WriteTagged(p.get(), 0, 1, Durability::kFsync);
    REQUIRE(p->Checkpoint().ok());
    WriteTagged(p.get(), 0, 2, Durability::kFsync);
    p->TEST_CrashOnClose();
  }
  std::filesystem::remove(path + "-log");
  PagerOptions o = SmallOptions();
  o.accept_log_loss = true;
  {
    std::vector<uint64_t> tags;
    auto p = OpenAndReplay(path, o, &tags);
    CHECK(tags.empty());
    CHECK(RootHasTag(p.get(), 0, 1));
    WriteTagged(p.get(), 0, 3, Durability::kFsync);
    p->TEST_CrashOnClose();
  }
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(tags == std::vector<uint64_t>{3});
  CHECK(RootHasTag(p.get(), 0, 3));
}

TEST_CASE("open: a clean database with a foreign or damaged log opens and makes a new one") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  const std::string other = dir.File("other");
  CommitAndKill(other, 2);
  {
    auto p = OpenOrDie(path);
    WriteTagged(p.get(), 0, 5, Durability::kFsync);
  }  // closed cleanly
  Spill(path + "-log", Slurp(other + "-log"));
  {
    auto p = OpenOrDie(path, NoCreate());
    CHECK(RootHasTag(p.get(), 0, 5));
    WriteTagged(p.get(), 0, 6, Durability::kFsync);
    p->TEST_CrashOnClose();
  }
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(tags == std::vector<uint64_t>{6});
  // The other database's log was not the one written.
  auto o = OpenAndReplay(other, SmallOptions(), &tags);
  CHECK(RootHasTag(o.get(), 0, 2));
}

TEST_CASE(
    "open: the data file is locked through the descriptor read, and a replaced file is noticed") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  auto p = OpenOrDie(path);
  WriteTagged(p.get(), 0, 1, Durability::kFsync);
  // A second open, in this process or another, is Busy.
  CHECK(Pager::Open(path, SmallOptions()).status().IsBusy());
  // A file renamed over the open database: its next checkpoint says so
  // rather than write into a file nobody will open again.
  {
    auto q = OpenOrDie(dir.File("other"));
    WriteTagged(q.get(), 0, 2);
  }
  std::filesystem::rename(dir.File("other"), path);
  Status s = p->Checkpoint();
  INFO(s.ToString());
  CHECK(s.IsIOError());
  CHECK(s.ToString().find("replaced") != std::string::npos);
  p.reset();
  // The file now at the path is the other database, unharmed.
  auto q = OpenOrDie(path);
  CHECK(RootHasTag(q.get(), 0, 2));
}

// How many of this process's mappings are of `path` (/proc/self/maps).
int MappingsOf(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  const std::string canonical = std::filesystem::canonical(path).string();
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.size() >= canonical.size() &&
        line.compare(line.size() - canonical.size(), canonical.size(), canonical) == 0)
      n++;
  }
  return n;
}

TEST_CASE("open: a clean database's grown log made anew replaces its mapping, not adds one") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  const std::string log = path + "-log";
  {
    auto p = OpenOrDie(path);
    for (uint64_t i = 1; i <= 3000; i++) WriteTagged(p.get(), 0, i);
  }  // closed cleanly, its log grown past the starting size
  const uint64_t grown = std::filesystem::file_size(log);
  {
    auto p = OpenOrDie(path, NoCreate());
    CHECK(MappingsOf(log) == 1);
    WriteTagged(p.get(), 0, 3001, Durability::kFsync);  // the log is made anew, small
    CHECK(std::filesystem::file_size(log) < grown);
    CHECK(MappingsOf(log) == 1);
  }
  CHECK(MappingsOf(log) == 0);
  auto p = OpenOrDie(path, NoCreate());
  CHECK(RootHasTag(p.get(), 0, 3001));
}

TEST_CASE("open: a version 2 database and its headerless log open and are written as version 3") {
  // A version 2 file: written by hand from a version 3 one, with its log's
  // records moved to offset 0, as the previous version kept them.
  test::TempDir dir;
  const std::string path = dir.File("db");
  CommitAndKill(path, 5);
  std::string data = Slurp(path);
  std::string log = Slurp(path + "-log");
  for (int slot = 0; slot < 2; slot++) {
    uint8_t* m = reinterpret_cast<uint8_t*>(&data[slot * 4096]);
    if (DecodeFixed64(m + kMetaMagicOffset) != kMagic) continue;
    EncodeFixed32(m + kMetaVersionOffset, 2);
    std::memset(m + kMetaDbIdOffset, 0, 4096 - kMetaDbIdOffset);
    EncodeFixed64(m + kPageChecksumOffset, PageChecksum(m, 4096, slot));
  }
  Spill(path, data);
  Spill(path + "-log", log.substr(kLogRecordsOffset));
  {
    std::vector<uint64_t> tags;
    auto p = OpenAndReplay(path, SmallOptions(), &tags);
    CHECK(tags == std::vector<uint64_t>{1, 2, 3, 4, 5});
    WriteTagged(p.get(), 0, 6, Durability::kFsync);
    p->TEST_CrashOnClose();
  }
  CHECK(DecodeFixed32(reinterpret_cast<const uint8_t*>(Slurp(path).data()) + kMetaVersionOffset) ==
        3);
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(tags == std::vector<uint64_t>{6});
  CHECK(RootHasTag(p.get(), 0, 6));
}

}  // namespace
}  // namespace mmdoc::storage
