// Options::read_only: readers under a shared lock, in several handles and
// processes at once; nothing written, a log replayed in memory only.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/test_db.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TempDir;
using mmdoc::test::V;

namespace {

Options ReadOnly() {
  Options o;
  o.read_only = true;
  return o;
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Both files' bytes, to show that a read-only session left them as it found them.
std::string Files(const std::string& path) { return Bytes(path) + "|" + Bytes(path + "-log"); }

void Fill(const std::string& path, int n) {
  auto db = DB::Open(path);
  REQUIRE(db.ok());
  REQUIRE(db.value()->CreateIndex("c", "k").ok());
  for (int i = 0; i < n; i++) {
    REQUIRE(db.value()
                ->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"k\": \"k" +
                                std::to_string(i) + "\"}"))
                .ok());
  }
  REQUIRE(db.value()->Close().ok());
}

// Every document of c, as JSON, in _id order.
std::vector<std::string> All(DB* db) {
  FindOptions by_id;
  by_id.sort_field = "_id";
  auto docs = db->Find("c", Document(), by_id);
  REQUIRE(docs.ok());
  std::vector<std::string> out;
  for (const Document& d : *docs) out.push_back(d.ToJson());
  return out;
}

// Runs body in a child that exits without closing its database (a crash,
// as far as the files know); requires that it got that far.
template <typename Body>
void InCrashingChild(Body body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(body());
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

}  // namespace

TEST_CASE("read_only: handles read at once, and every write is refused", "[engine]") {
  TempDir dir;
  const std::string path = dir.File("db");
  Fill(path, 50);
  const std::string before = Files(path);

  auto a = DB::Open(path, ReadOnly());
  REQUIRE(a.ok());
  auto b = DB::Open(path, ReadOnly());
  REQUIRE(b.ok());
  CHECK(*a.value()->Count("c") == 50);
  CHECK(*b.value()->Count("c", J(R"({"k": "k7"})")) == 1);
  CHECK(b.value()->GetBy("c", "k", V(R"("k9")"))->ToJson() ==
        J(R"({"_id": 9, "k": "k9"})").ToJson());
  CHECK(a.value()->Get("c", V("3")).ok());
  CHECK(a.value()->ListIndexes("c")->size() == 1);
  test::RequireCheckPasses(a.value().get());
  REQUIRE(a.value()->Stats().ok());

  // Not while they read: a writer, at once or after its wait.
  auto writer = DB::Open(path);
  REQUIRE_FALSE(writer.ok());
  CHECK(writer.status().IsBusy());
  Options wait;
  wait.lock_timeout_ms = 100;
  CHECK(DB::Open(path, wait).status().IsBusy());

  DB* db = a.value().get();
  auto read_only = [](const Status& s) {
    return s.IsNotSupported() && s.ToString().find("read-only") != std::string::npos;
  };
  CHECK(read_only(db->Insert("c", J(R"({"_id": 100})"))));
  CHECK(read_only(db->Replace("c", V("1"), J(R"({"_id": 1})"))));
  CHECK(read_only(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$set": {"k": 0}})")).status()));
  CHECK(read_only(db->DeleteMany("c", Document()).status()));
  CHECK(read_only(db->Delete("c", V("1"))));
  CHECK(read_only(db->CreateIndex("c", "z")));
  CHECK(read_only(db->DropIndex("c", "k")));
  CHECK(read_only(db->CreateCollection("d")));
  CHECK(read_only(db->DropCollection("c")));
  CHECK(read_only(db->Begin().status()));
  CHECK(read_only(db->Checkpoint()));
  CHECK(read_only(db->Flush()));
  CHECK(read_only(db->Compact()));
  CHECK(*db->Count("c") == 50);

  REQUIRE(a.value()->Close().ok());
  REQUIRE(b.value()->Close().ok());
  CHECK(Files(path) == before);
  // Once they are gone, a writer.
  auto rw = DB::Open(path);
  REQUIRE(rw.ok());
  REQUIRE(rw.value()->Insert("c", J(R"({"_id": 100})")).ok());
  test::RequireCheckPasses(rw.value().get());
  // And readers wait for it: Busy, not a half-seen file.
  CHECK(DB::Open(path, ReadOnly()).status().IsBusy());
  REQUIRE(rw.value()->Close().ok());
  auto again = DB::Open(path, ReadOnly());
  REQUIRE(again.ok());
  CHECK(*again.value()->Count("c") == 51);
}

TEST_CASE("read_only: another process reads while this one does", "[engine]") {
  TempDir dir;
  const std::string path = dir.File("db");
  Fill(path, 20);
  auto mine = DB::Open(path, ReadOnly());
  REQUIRE(mine.ok());
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto theirs = DB::Open(path, ReadOnly());
    if (!theirs.ok()) _exit(1);
    if (*theirs.value()->Count("c") != 20) _exit(2);
    if (!DB::Open(path).status().IsBusy()) _exit(3);
    _exit(theirs.value()->Close().ok() ? 0 : 4);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(*mine.value()->Count("c") == 20);
}

TEST_CASE("read_only: a missing or empty database is not created", "[engine]") {
  TempDir dir;
  const std::string path = dir.File("db");
  auto missing = DB::Open(path, ReadOnly());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().IsNotFound());
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path + "-log"));
  { std::ofstream(path).flush(); }
  auto empty = DB::Open(path, ReadOnly());
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().IsCorruption());
  CHECK(std::filesystem::file_size(path) == 0);
}

TEST_CASE("read_only: a database not closed cleanly is read with its log, left as it was",
          "[engine]") {
  TempDir dir;
  const std::string path = dir.File("db");
  Fill(path, 30);
  // A small buffer, so that the session leaves runs in the file as well
  // as commits in the log.
  const uint64_t buffers[] = {0, 64 << 10, kDefaultWriteBufferSize};
  for (uint64_t buffer : buffers) {
    INFO("write_buffer_size " << buffer);
    InCrashingChild([&] {
      Options o;
      o.write_buffer_size = buffer;
      o.durability = Durability::kFsync;
      auto db = DB::Open(path, o);
      if (!db.ok()) return 1;
      for (int i = 0; i < 400; i++) {
        const std::string id = std::to_string(1000 * (buffer % 7 + 1) + i);
        const std::string doc = "{\"_id\": " + id + ", \"k\": \"n" + id + "\", \"pad\": \"" +
                                std::string(300, 'p') + "\"}";
        if (!db.value()->Insert("c", J(doc)).ok()) return 2;
      }
      if (!db.value()
               ->UpdateMany("c", J(R"({"_id": {"$lt": 10}})"), J(R"({"$set": {"u": 1}})"))
               .ok())
        return 3;
      if (!db.value()->DeleteOne("c", J(R"({"_id": 20})")).ok()) return 4;
      (void)db.value().release();  // no close: its commits are in the log only
      return 0;
    });
    const std::string left = Files(path);
    std::vector<std::string> seen;
    {
      auto ro = DB::Open(path, ReadOnly());
      REQUIRE(ro.ok());
      seen = All(ro.value().get());
      // What the reads went through: the log replayed into the buffer (with
      // the small buffer, the merger may have emptied the log and left runs,
      // or merged them too: that depends on when the child stopped).
      if (buffer != 64 << 10) CHECK(ro.value()->Stats()->write_buffer_bytes > 0);
      CHECK(*ro.value()->Count("c", J(R"({"u": 1})")) == 10);
      CHECK(ro.value()->Get("c", V("20")).status().IsNotFound());
      CHECK(*ro.value()->Count("c", J(R"({"k": "n1005"})")) == 1);
      test::RequireCheckPasses(ro.value().get());
      REQUIRE(ro.value()->Close().ok());
    }
    CHECK(Files(path) == left);
    // A writer recovers the same documents.
    auto rw = DB::Open(path);
    REQUIRE(rw.ok());
    CHECK(All(rw.value().get()) == seen);
    test::RequireCheckPasses(rw.value().get());
    REQUIRE(rw.value()->Close().ok());
  }
}

TEST_CASE("read_only: a log that made an index is not replayed, and says so", "[engine]") {
  TempDir dir;
  const std::string path = dir.File("db");
  Fill(path, 10);
  InCrashingChild([&] {
    auto db = DB::Open(path);
    if (!db.ok()) return 1;
    if (!db.value()->CreateIndex("c", "z").ok()) return 2;
    if (!db.value()->Insert("c", J(R"({"_id": 99, "z": 1})")).ok()) return 3;
    (void)db.value().release();
    return 0;
  });
  const std::string left = Files(path);
  auto ro = DB::Open(path, ReadOnly());
  REQUIRE_FALSE(ro.ok());
  CHECK(ro.status().IsNotSupported());
  CHECK(ro.status().ToString().find("read-only") != std::string::npos);
  CHECK(Files(path) == left);
  auto rw = DB::Open(path);
  REQUIRE(rw.ok());
  CHECK(*rw.value()->Count("c") == 11);
  test::RequireCheckPasses(rw.value().get());
}
