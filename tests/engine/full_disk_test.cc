// A real full disk: a small tmpfs mounted for each test (it needs root, as
// CI runs; elsewhere the tests say they were skipped). Every path that can
// allocate must fail with Full, never SIGBUS, and leave the disk as it
// found it; reads go on.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/small_disk.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

namespace mmdoc::test {
namespace {

// {_id: i, v: <1000 bytes>}
Document KiBDoc(int i) {
  return J("{\"_id\": " + std::to_string(i) + ", \"v\": \"" + std::string(1000, 'v') + "\"}");
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Copies `from` to `to` leaving a hole for every 4 KiB block of zeros, as
// `cp --sparse=always` does.
void SparseCopy(const std::string& from, const std::string& to) {
  const std::string bytes = Slurp(from);
  int fd = open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  const std::string zeros(4096, '\0');
  for (size_t off = 0; off < bytes.size(); off += 4096) {
    const size_t n = std::min<size_t>(4096, bytes.size() - off);
    if (bytes.compare(off, n, zeros, 0, n) == 0) continue;
    REQUIRE(pwrite(fd, bytes.data() + off, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n));
  }
  REQUIRE(ftruncate(fd, static_cast<off_t>(bytes.size())) == 0);
  close(fd);
}

TEST_CASE("full disk: a sparse copy on a full disk fails writes with Full, not SIGBUS") {
  SmallDisk disk(32 << 20);
  MMDOC_NEED_DISK(disk);
  TempDir dir;
  const std::string src = dir.File("s.mmdb");
  {
    Options o;
    o.log_size = 1 << 20;
    auto db = DB::Open(src, o).value();
    for (int i = 0; i < 300; i++) {
      REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"v\": \"" +
                                std::string(200, 'v') + "\"}"))
                  .ok());
    }
  }
  const std::string db_path = disk.File("s.mmdb");
  SparseCopy(src, db_path);
  SparseCopy(src + "-log", db_path + "-log");
  disk.Fill();
  uint64_t stored = 0;
  {
    Options o;
    o.log_size = 1 << 20;
    auto db = DB::Open(db_path, o);
    INFO(db.status().ToString());
    REQUIRE(db.ok());
    CHECK(db.value()->Count("c").value() == 300);  // reads go on
    // Enough inserts to reach the pages the copy left as holes: a store
    // through the map there needs a block the disk does not have.
    Status s;
    for (int i = 0; s.ok() && i < 5000; i++) {
      s = db.value()->Insert("c", J("{\"_id\": " + std::to_string(1000 + i) + ", \"v\": \"" +
                                    std::string(200, 'w') + "\"}"));
      if (s.ok()) stored++;
    }
    INFO(s.ToString());
    CHECK(s.IsFull());
    CHECK(db.value()->Count("c").value() == 300 + stored);
    // Room again: writes go on without a reopen.
    disk.Unfill();
    s = db.value()->Insert("c", J(R"({"_id": 100000})"));
    INFO(s.ToString());
    CHECK(s.ok());
    CHECK(db.value()->Check().ok());
    stored++;
  }
  auto db = DB::Open(db_path, Options()).value();
  CHECK(db->Count("c").value() == 300 + stored);
}

TEST_CASE("full disk: creating a database without room for its log fails whole") {
  SmallDisk disk(8 << 20);
  MMDOC_NEED_DISK(disk);
  Options o;
  o.log_size = 64 << 20;  // the log starts at 1 MiB
  disk.Fill(512 << 10);   // room for the data file, not for the log
  auto db = DB::Open(disk.File("n.mmdb"), o);
  INFO(db.status().ToString());
  CHECK(db.status().IsFull());
  // Neither the data file nor a partial log.
  CHECK(disk.List() == std::vector<std::string>{"filler"});
  // With room, the same call works.
  disk.Unfill();
  auto ok = DB::Open(disk.File("n.mmdb"), o);
  INFO(ok.status().ToString());
  CHECK(ok.ok());
}

TEST_CASE("full disk: growth fails with Full and the database stays as it was") {
  SmallDisk disk(16 << 20);
  MMDOC_NEED_DISK(disk);
  const std::string path = disk.File("g.mmdb");
  Options o;
  o.log_size = 1 << 20;
  o.durability = Durability::kFsync;
  uint64_t stored = 0;
  {
    auto db = DB::Open(path, o).value();
    disk.Fill(2 << 20);
    Status s;
    for (int i = 0; s.ok() && i < 100000; i++) {
      s = db->Insert("c", KiBDoc(i));
      if (s.ok()) stored++;
    }
    INFO(s.ToString());
    REQUIRE(s.IsFull());
    CHECK(db->Count("c").value() == stored);
    CHECK(db->Check().ok());
  }
  disk.Unfill();
  auto db = DB::Open(path, o).value();
  CHECK(db->Count("c").value() == stored);
  CHECK(db->Check().ok());
}

TEST_CASE("full disk: a check that cannot merge the buffer checks the buffered documents too") {
  SmallDisk disk(32 << 20);
  MMDOC_NEED_DISK(disk);
  const std::string path = disk.File("b.mmdb");
  Options o;
  // Every insert below stays in the buffer (set, so that MMDOC_WRITE_BUFFER
  // does not replace it): 2 MB, more than the new file's room, so that
  // merging it needs the disk.
  o.write_buffer_size = 32 << 20;
  o.log_size = 16 << 20;
  auto db = DB::Open(path, o).value();
  REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
  for (int i = 0; i < 2000; i++) {
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"k\": " + std::to_string(i) +
                              ", \"v\": \"" + std::string(1000, 'v') + "\"}"))
                .ok());
  }
  disk.Fill();
  CheckReport report;
  Status s = db->Check(&report);
  INFO(s.ToString());
  CHECK(s.ok());
  // The merge found no room: the documents are still in the buffer, and
  // the check covered them, not only the (empty) pages.
  CHECK(db->Stats().value().write_buffer_bytes > 0);
  CHECK(report.documents_checked == 2000);
  CHECK(report.index_entries_checked == 2000);
  disk.Unfill();
  CHECK(db->Check(&report).ok());
  CHECK(report.documents_checked == 2000);
  CHECK(db->Stats().value().write_buffer_bytes == 0);
}

TEST_CASE("full disk: Close says Full when the buffer finds no room, and the log keeps it all") {
  SmallDisk disk(32 << 20);
  MMDOC_NEED_DISK(disk);
  const std::string path = disk.File("c.mmdb");
  Options o;
  o.write_buffer_size = 32 << 20;  // set: every insert stays in the buffer
  o.log_size = 16 << 20;
  auto db = DB::Open(path, o).value();
  for (int i = 0; i < 2000; i++) REQUIRE(db->Insert("c", KiBDoc(i)).ok());
  disk.Fill();
  Status s = db->Close();
  INFO(s.ToString());
  CHECK(s.IsFull());
  CHECK(db->Insert("c", KiBDoc(-1)).IsInvalidArgument());  // closed
  db.reset();
  // The lock is gone, the commits are in the log: with room again the next
  // open replays them.
  disk.Unfill();
  auto again = DB::Open(path, o);
  INFO(again.status().ToString());
  REQUIRE(again.ok());
  CHECK(again.value()->Count("c").value() == 2000);
  RequireCheckPasses(again.value().get());
  CHECK(again.value()->Close().ok());
}

TEST_CASE("full disk: a log that cannot be replayed for lack of room says Full, not Corruption") {
  SmallDisk disk(32 << 20);
  MMDOC_NEED_DISK(disk);
  const std::string path = disk.File("r.mmdb");
  Options o;
  o.write_buffer_size = 32 << 20;  // nothing merged: the log holds every insert
  o.log_size = 16 << 20;
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto db = DB::Open(path, o);
    if (!db.ok()) _exit(1);
    for (int t = 0; t < 20; t++) {  // transactions of 100 inserts
      auto txn = db.value()->Begin();
      if (!txn.ok()) _exit(2);
      for (int i = t * 100; i < t * 100 + 100; i++) {
        if (!txn.value()->Insert("c", KiBDoc(i)).ok()) _exit(3);
      }
      if (!txn.value()->Commit().ok()) _exit(4);
    }
    _exit(0);  // no close, as a kill
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  // Without a buffer the log replays into pages, which need the disk.
  Options pages = o;
  pages.write_buffer_size = 0;
  disk.Fill();
  auto full = DB::Open(path, pages);
  INFO(full.status().ToString());
  CHECK(full.status().IsFull());
  disk.Unfill();
  auto db = DB::Open(path, pages);
  INFO(db.status().ToString());
  REQUIRE(db.ok());
  CHECK(db.value()->Count("c").value() == 2000);
  CHECK(db.value()->Check().ok());
}

TEST_CASE("full disk: a compaction without room fails and leaves no copy behind") {
  SmallDisk disk(32 << 20);
  MMDOC_NEED_DISK(disk);
  const std::string path = disk.File("k.mmdb");
  Options o;
  o.log_size = 1 << 20;
  auto db = DB::Open(path, o).value();
  for (int i = 0; i < 2000; i++) {
    REQUIRE(db->Insert("c", KiBDoc(i)).ok());
  }
  const std::vector<std::string> before = disk.List();
  disk.Fill(256 << 10);
  Status s = db->Compact();
  INFO(s.ToString());
  CHECK(s.IsFull());
  std::vector<std::string> after = disk.List();
  after.erase(std::remove(after.begin(), after.end(), "filler"), after.end());
  std::vector<std::string> expect = before;
  std::sort(after.begin(), after.end());
  std::sort(expect.begin(), expect.end());
  CHECK(after == expect);
  CHECK(db->Count("c").value() == 2000);
  disk.Unfill();
  REQUIRE(db->Compact().ok());
  CHECK(db->Count("c").value() == 2000);
  CHECK(db->Check().ok());
}

}  // namespace
}  // namespace mmdoc::test
