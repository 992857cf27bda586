// I/O faults through the engine: EIO on a write or a
// sync and ENOSPC when the file grows, injected by tests/support/fault_fs.h.
// The operation fails with IOError or Full, the failure is sticky (later
// writes fail with it, reads still work), and after a reopen the database is
// at its last good commit with nothing acknowledged lost and DB::Check OK.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/fault_fs.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

namespace mmdoc::test {
namespace {

using Op = FaultFileSystem::Op;

Document Doc(int i, size_t bytes = 50) {
  return J("{\"_id\": " + std::to_string(i) + ", \"k\": " + std::to_string(i) + ", \"v\": \"" +
           std::string(bytes, 'x') + "\"}");
}

Options FaultOptions(FaultFileSystem* fs, Durability d) {
  Options o;
  o.file_system = fs;
  o.durability = d;
  o.log_size = 64 << 10;
  return o;
}

// Opens `path` with the real file system and checks it holds exactly the
// documents 0..n-1 (the `maybe` one may be there too).
void ExpectDocs(const std::string& path, int n, int maybe = -1) {
  auto db = DB::Open(path, Options());
  INFO(db.status().ToString());
  REQUIRE(db.ok());
  CHECK(db.value()->Check().ok());
  for (int i = 0; i < n; i++) {
    auto d = db.value()->Get("c", Value::Int32(i));
    INFO("_id " << i << ": " << d.status().ToString());
    REQUIRE(d.ok());
    CHECK(d.value() == Doc(i));
  }
  auto count = db.value()->Count("c");
  REQUIRE(count.ok());
  if (maybe >= 0) {
    CHECK((count.value() == static_cast<uint64_t>(n) ||
           count.value() == static_cast<uint64_t>(n + 1)));
  } else {
    CHECK(count.value() == static_cast<uint64_t>(n));
  }
  auto idx = db.value()->ListIndexes("c");
  REQUIRE(idx.ok());
  REQUIRE(idx.value().size() == 1);
  CHECK(idx.value()[0].entries == count.value());
}

// Fills a database with `n` documents and a unique index, durably.
std::unique_ptr<DB> Prepare(const std::string& path, FaultFileSystem* fs, Durability d, int n) {
  auto db = DB::Open(path, FaultOptions(fs, d));
  REQUIRE(db.ok());
  IndexOptions u;
  u.unique = true;
  REQUIRE(db.value()->CreateIndex("c", "k", u).ok());
  for (int i = 0; i < n; i++) REQUIRE(db.value()->Insert("c", Doc(i)).ok());
  REQUIRE(db.value()->Flush().ok());
  return std::move(db.value());
}

// After a failed commit: the error is sticky for writes, reads go on.
void ExpectSticky(DB* db, const Status& first, int n) {
  Status again = db->Insert("c", Doc(1000));
  INFO(again.ToString());
  CHECK(again.code() == first.code());
  CHECK(db->Begin().status().code() == first.code());
  CHECK(db->CreateIndex("c", "v").code() == first.code());
  CHECK(!db->Checkpoint().ok());
  CHECK(!db->Flush().ok());  // never pretends the log reached the disk
  // Reads keep working on the last good state.
  for (int i = 0; i < n; i++) {
    auto d = db->Get("c", Value::Int32(i));
    REQUIRE(d.ok());
    CHECK(d.value() == Doc(i));
  }
  auto found = db->Find("c", J(R"({"k": {"$lt": 3}})"));
  REQUIRE(found.ok());
  CHECK(found.value().size() == static_cast<size_t>(std::min(n, 3)));
}

TEST_CASE("fault io: EIO on the log sync fails the commit, sticky, reopen keeps acknowledged") {
  for (Durability d : {Durability::kFsync, Durability::kGroup}) {
    TempDir dir;
    const std::string path = dir.File("f.mmdb");
    FaultFileSystem fs;
    {
      auto db = Prepare(path, &fs, d, 20);
      fs.FailNth(Op::kSync, 1, EIO, "-log");
      Status s = db->Insert("c", Doc(20));
      INFO(s.ToString());
      REQUIRE(s.IsIOError());
      CHECK(s.message().find("-log") != std::string::npos);
      ExpectSticky(db.get(), s, 20);
    }
    ExpectDocs(path, 20, /*maybe=*/20);
  }
}

TEST_CASE("fault io: EIO on msync fails the commit and is sticky") {
  TempDir dir;
  const std::string path = dir.File("f.mmdb");
  FaultFileSystem fs;
  {
    auto db = Prepare(path, &fs, Durability::kMsync, 10);
    fs.FailNth(Op::kMapSync, 1, EIO);
    Status s = db->Insert("c", Doc(10));
    REQUIRE(s.IsIOError());
    ExpectSticky(db.get(), s, 10);
  }
  ExpectDocs(path, 10, 10);
}

TEST_CASE("fault io: EIO on a page write of the checkpoint is sticky and loses nothing") {
  // Commits write the log through its map and data pages through the data
  // file's map; pwrite (WriteAt) is what checkpoints use for the free-list
  // and meta pages.
  TempDir dir;
  const std::string path = dir.File("f.mmdb");
  FaultFileSystem fs;
  {
    auto db = Prepare(path, &fs, Durability::kFsync, 10);
    for (int i = 0; i < 10; i += 2) REQUIRE(db->Delete("c", Value::Int32(i)).ok());
    for (int i = 0; i < 10; i += 2) REQUIRE(db->Insert("c", Doc(i)).ok());
    const uint64_t writes = fs.Count(Op::kWrite);
    fs.FailAll(EIO);
    Status s = db->Checkpoint();
    INFO(s.ToString());
    REQUIRE(s.IsIOError());
    fs.ClearFaults();
    INFO("WriteAt calls during the checkpoint: " << fs.Count(Op::kWrite) - writes);
    ExpectSticky(db.get(), s, 10);
  }
  ExpectDocs(path, 10);
}

TEST_CASE("fault io: EIO on the checkpoint's data sync is sticky and loses nothing") {
  TempDir dir;
  const std::string path = dir.File("f.mmdb");
  FaultFileSystem fs;
  {
    auto db = Prepare(path, &fs, Durability::kFsync, 30);
    fs.FailNth(Op::kSync, 1, EIO, ".mmdb");
    Status s = db->Checkpoint();
    INFO(s.ToString());
    REQUIRE(s.IsIOError());
    ExpectSticky(db.get(), s, 30);
  }
  ExpectDocs(path, 30);
}

TEST_CASE("fault io: a checkpoint forced by a full log fails the commit that needed it") {
  TempDir dir;
  const std::string path = dir.File("f.mmdb");
  FaultFileSystem fs;
  int acknowledged = 0;
  Status s;
  {
    auto db = Prepare(path, &fs, Durability::kFsync, 0);
    fs.FailNth(Op::kSync, 1, EIO, ".mmdb");
    // 64 KiB of log: a few dozen 2 KiB documents fill it.
    for (int i = 0; i < 200; i++) {
      s = db->Insert("c", Doc(i, 2000));
      if (!s.ok()) break;
      acknowledged++;
    }
    INFO(s.ToString());
    REQUIRE(s.IsIOError());
    CHECK(acknowledged > 5);
    CHECK(db->Insert("c", Doc(999)).IsIOError());
  }
  auto db = DB::Open(path, Options());
  REQUIRE(db.ok());
  CHECK(db.value()->Check().ok());
  for (int i = 0; i < acknowledged; i++) {
    auto d = db.value()->Get("c", Value::Int32(i));
    REQUIRE(d.ok());
    CHECK(d.value() == Doc(i, 2000));
  }
  auto n = db.value()->Count("c");
  CHECK((n.value() == static_cast<uint64_t>(acknowledged) ||
         n.value() == static_cast<uint64_t>(acknowledged + 1)));
}

TEST_CASE("fault io: ENOSPC when the file grows fails with Full, sticky or not, nothing lost") {
  TempDir dir;
  const std::string path = dir.File("f.mmdb");
  FaultFileSystem fs;
  int acknowledged = 10;
  {
    auto db = Prepare(path, &fs, Durability::kFsync, 10);
    fs.FailAll(ENOSPC);  // every later growth (and write, and sync) fails
    Status s;
    for (int i = 10; i < 2000; i++) {
      s = db->Insert("c", Doc(i, 3000));
      if (!s.ok()) break;
      acknowledged++;  // fit into space the file already had
    }
    INFO(s.ToString());
    REQUIRE(s.IsFull());
    CHECK(s.ToString().find("f.mmdb") != std::string::npos);
    // Later writes fail too while the disk is full; reads go on.
    CHECK(!db->Insert("c", Doc(5000, 3000)).ok());
    for (int i = 0; i < 10; i++) CHECK(db->Get("c", Value::Int32(i)).ok());
    fs.ClearFaults();
  }
  auto db = DB::Open(path, Options());
  REQUIRE(db.ok());
  CHECK(db.value()->Check().ok());
  for (int i = 0; i < 10; i++) CHECK(db.value()->Get("c", Value::Int32(i)).value() == Doc(i));
  for (int i = 10; i < acknowledged; i++) CHECK(db.value()->Get("c", Value::Int32(i)).ok());
}

TEST_CASE("fault io: ENOSPC on the first growth only, then the disk has room again") {
  TempDir dir;
  const std::string path = dir.File("f.mmdb");
  FaultFileSystem fs;
  std::vector<int> acknowledged;
  {
    auto db = Prepare(path, &fs, Durability::kFsync, 5);
    fs.FailNth(Op::kAllocate, 1, ENOSPC, ".mmdb");
    bool saw_full = false;
    for (int i = 5; i < 400; i++) {
      Status s = db->Insert("c", Doc(i, 3000));
      if (s.ok()) {
        acknowledged.push_back(i);
      } else {
        INFO(s.ToString());
        CHECK(s.IsFull());
        saw_full = true;
        break;
      }
    }
    // With a write buffer the growth fails in a background merge, which the
    // next commit retries (and succeeds, the disk having room again).
    CHECK((saw_full || test::DefaultWriteBuffer() != 0));
  }
  auto db = DB::Open(path, Options());
  REQUIRE(db.ok());
  CHECK(db.value()->Check().ok());
  for (int i = 0; i < 5; i++) CHECK(db.value()->Get("c", Value::Int32(i)).value() == Doc(i));
  for (int i : acknowledged) CHECK(db.value()->Get("c", Value::Int32(i)).value() == Doc(i, 3000));
  // The database takes writes again after the reopen.
  CHECK(db.value()->Insert("c", Doc(100000)).ok());
  CHECK(db.value()->Check().ok());
}

TEST_CASE("fault io: ENOSPC while the log grows gives back what the growth wrote") {
  // Found by an outside test: on a full disk a growth cut short kept the
  // zeros written so far (13 MiB on a 30 MiB disk), so the disk stayed full.
  TempDir dir;
  const std::string path = dir.File("g.mmdb"), log = path + "-log";
  FaultFileSystem fs;
  Options o = FaultOptions(&fs, Durability::kNone);
  o.log_size = 8 << 20;  // the log starts at 1 MiB and doubles
  std::vector<int> acknowledged;
  {
    auto db = DB::Open(path, o).value();
    const uint64_t before = std::filesystem::file_size(log);
    // The 20th page of zeros of the first growth fails.
    fs.FailNth(Op::kWrite, 20, ENOSPC, "-log");
    for (int i = 0; fs.injected() == 0 && i < 100000; i++) {
      if (db->Insert("c", Doc(i, 1000)).ok()) acknowledged.push_back(i);
    }
    REQUIRE(fs.injected() == 1);
    CHECK(std::filesystem::file_size(log) == before);
    // Not sticky: the next growth has room.
    for (int i = 100000; i < 102000; i++) {
      REQUIRE(db->Insert("c", Doc(i, 1000)).ok());
      acknowledged.push_back(i);
    }
    CHECK(std::filesystem::file_size(log) > before);
    CHECK(db->Check().ok());
  }
  auto db = DB::Open(path, Options()).value();
  CHECK(db->Count("c").value() == acknowledged.size());
  CHECK(db->Check().ok());
}

TEST_CASE("fault io: a failed transaction leaves no index entry behind") {
  TempDir dir;
  const std::string path = dir.File("f.mmdb");
  FaultFileSystem fs;
  {
    auto db = Prepare(path, &fs, Durability::kFsync, 3);
    auto t = db->Begin();
    REQUIRE(t.ok());
    REQUIRE(t.value()->Insert("c", Doc(3)).ok());
    REQUIRE(t.value()->Insert("c", Doc(4)).ok());
    fs.FailNth(Op::kSync, 1, EIO, "-log");
    CHECK(t.value()->Commit().IsIOError());
  }
  // Both or neither.
  auto db = DB::Open(path, Options());
  REQUIRE(db.ok());
  CHECK(db.value()->Check().ok());
  auto n = db.value()->Count("c").value();
  CHECK((n == 3 || n == 5));
  CHECK(db.value()->Find("c", J(R"({"k": 4})")).value().size() == (n == 5 ? 1u : 0u));
}

}  // namespace
}  // namespace mmdoc::test
