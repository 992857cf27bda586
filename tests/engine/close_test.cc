// DB::Close: the status of closing a database, the lock let go at once,
// and a data file moved, replaced or removed while the database is open.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include "mmdoc/db.h"
#include "tests/support/fs_wrapper.h"
#include "tests/support/test_db.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::RequireCheckPasses;
using mmdoc::test::TempDir;
using mmdoc::test::V;

namespace {

std::unique_ptr<DB> OpenOrFail(const std::string& path, const Options& o = Options()) {
  auto db = DB::Open(path, o);
  INFO(db.status().ToString());
  REQUIRE(db.ok());
  return std::move(db.value());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Inserts {_id: from..to-1, n: i} in transactions of `batch`.
void InsertRange(DB* db, int from, int to, int batch = 100) {
  for (int i = from; i < to; i += batch) {
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int j = i; j < std::min(to, i + batch); j++)
      REQUIRE(t.value()->Insert("c", J("{\"_id\": " + std::to_string(j) + ", \"n\": 1}")).ok());
    REQUIRE(t.value()->Commit().ok());
  }
}

// Makes `other` a closed database holding {_id: "other"} in "c", and
// returns `path` opened afresh with 500 documents in "c".
std::unique_ptr<DB> OpenBesideOther(const std::string& path, const std::string& other,
                                    const Options& o) {
  for (const std::string& p : {path, path + "-log", other, other + "-log"})
    std::filesystem::remove(p);
  {
    auto d = OpenOrFail(other, o);
    REQUIRE(d->Insert("c", J("{\"_id\": \"other\"}")).ok());
  }
  auto db = OpenOrFail(path, o);
  InsertRange(db.get(), 0, 500);
  return db;
}

// Writes `other`'s bytes over `path` without cutting it short, as a copy
// program does once it has truncated (a read past a shorter end is SIGBUS).
void OverwriteInPlace(const std::string& path, const std::string& other) {
  const std::string bytes = ReadFile(other);
  REQUIRE(bytes.size() <= std::filesystem::file_size(path));
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A database a program keeps in a global and closes from its destructor,
// which runs after the main thread's thread_local objects are destroyed.
struct ClosedAtExit {
  std::unique_ptr<DB> db;
  ~ClosedAtExit() {
    if (db == nullptr) return;
    // A read by _id, one by regex, then the close's merge into the pages.
    auto got = db->Get("c", V("7"));
    if (!got.ok()) _exit(10);
    auto found = db->Find("c", J(R"({"s": {"$regex": "^k-00"}})"));
    if (!found.ok() || found.value().size() != 100) _exit(11);
    if (!db->Close().ok()) _exit(12);
  }
};

}  // namespace

TEST_CASE("close: a database closed from a static destructor, after thread_local ones ran") {
  TempDir dir;
  const std::string path = dir.File("db");
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    static ClosedAtExit global;
    auto db = DB::Open(path);
    if (!db.ok()) _exit(1);
    global.db = std::move(db.value());
    if (!global.db->CreateIndex("c", "s").ok()) _exit(2);
    for (int t = 0; t < 20; t++) {
      auto txn = global.db->Begin();
      if (!txn.ok()) _exit(3);
      for (int i = t * 100; i < t * 100 + 100; i++) {
        char s[16];
        std::snprintf(s, sizeof(s), "k-%04d", i);
        const std::string doc = "{\"_id\": " + std::to_string(i) + ", \"s\": \"" + s +
                                "\", \"pad\": \"" + std::string(200, 'x') + "\"}";
        if (!txn.value()->Insert("c", J(doc)).ok()) _exit(4);
      }
      if (!txn.value()->Commit().ok()) _exit(5);
    }
    // Every thread-local scratch object in use before the exit.
    if (!global.db->Get("c", V("1")).ok()) _exit(6);
    if (!global.db->Find("c", J(R"({"s": {"$regex": "^k-01"}})")).ok()) _exit(7);
    std::exit(0);  // thread_local destructors, then ClosedAtExit's
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("child status " << status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  auto db = OpenOrFail(path);
  CHECK(db->Count("c").value() == 2000);
  RequireCheckPasses(db.get());
}

TEST_CASE("close: a child forked after the open refuses the handle and harms nothing") {
  for (const uint64_t buffer : {uint64_t{0}, uint64_t{64} << 20}) {
    INFO("write buffer " << buffer);
    TempDir dir;
    const std::string path = dir.File("db");
    Options o;
    o.write_buffer_size = buffer;
    auto db = OpenOrFail(path, o);
    InsertRange(db.get(), 0, 100);
    auto txn = db->Begin();
    REQUIRE(txn.ok());
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto forked = [](const Status& s) {
        return s.IsInvalidArgument() && s.ToString().find("forked") != std::string::npos;
      };
      if (!forked(db->Insert("c", J(R"({"_id": "child"})")))) _exit(1);
      if (!forked(db->Get("c", V("1")).status())) _exit(2);
      if (!forked(db->Count("c").status())) _exit(3);
      if (!forked(db->Compact())) _exit(4);
      // The parent's open transaction, inherited: neither written nor committed.
      if (!forked(txn.value()->Insert("c", J(R"({"_id": "txn"})")))) _exit(5);
      if (!forked(txn.value()->Commit())) _exit(6);
      (void)txn.value().release();  // its destructor would take the parent's locks
      if (!forked(db->Close())) _exit(7);
      _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    INFO("child status " << status);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // The parent's handle and transaction go on.
    REQUIRE(txn.value()->Insert("c", J(R"({"_id": "parent"})")).ok());
    REQUIRE(txn.value()->Commit().ok());
    InsertRange(db.get(), 100, 200);
    REQUIRE(db->Close().ok());
    db = OpenOrFail(path, o);
    CHECK(db->Count("c").value() == 201);
    CHECK(db->Get("c", V("\"child\"")).status().IsNotFound());
    RequireCheckPasses(db.get());
  }
}

TEST_CASE("close: a child forked after the open does not keep the database locked") {
  // Found by an outside test: the child's inherited descriptors and maps
  // held the flock after the parent closed, until the child exited: the
  // parent could not open the database again, nor could the child.
  for (const uint64_t buffer : {uint64_t{0}, uint64_t{64} << 20}) {
    INFO("write buffer " << buffer);
    TempDir dir;
    const std::string path = dir.File("db");
    Options o;
    o.write_buffer_size = buffer;
    o.lock_timeout_ms = 0;  // a lock still held fails the test instead of hanging it
    auto db = OpenOrFail(path, o);
    InsertRange(db.get(), 0, 100);
    int go[2];
    REQUIRE(pipe(go) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      char c;
      if (read(go[0], &c, 1) != 1) _exit(1);  // the parent closed
      auto mine = DB::Open(path, o);
      if (!mine.ok()) _exit(2);
      auto n = mine.value()->Count("c");
      if (!n.ok() || n.value() != 101) _exit(3);
      if (!mine.value()->Insert("c", J(R"({"_id": "child"})")).ok()) _exit(4);
      if (!mine.value()->Close().ok()) _exit(5);
      _exit(0);
    }
    REQUIRE(db->Close().ok());
    // While the child lives: this process opens it again, then lets go.
    auto again = DB::Open(path, o);
    const Status reopened = again.status();
    if (again.ok()) {
      CHECK(again.value()->Insert("c", J(R"({"_id": "parent"})")).ok());
      CHECK(again.value()->Close().ok());
    }
    REQUIRE(write(go[1], "x", 1) == 1);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    close(go[0]);
    close(go[1]);
    REQUIRE(reopened.ok());
    INFO("child status " << status);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    db = OpenOrFail(path, o);
    CHECK(db->Count("c").value() == 102);
    RequireCheckPasses(db.get());
  }
}

TEST_CASE("close: a clean close lets go of the lock and leaves no need for the log") {
  TempDir dir;
  const std::string path = dir.File("db");
  for (const uint64_t buffer : {uint64_t{0}, uint64_t{64} << 20}) {
    INFO("write buffer " << buffer);
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
    Options o;
    o.write_buffer_size = buffer;  // with a buffer, the documents are only in it and the log
    auto db = OpenOrFail(path, o);
    InsertRange(db.get(), 0, 2000);
    RequireCheckPasses(db.get());
    CHECK(db->Close().ok());
    // The lock is gone while the DB object still exists.
    auto other = DB::Open(path, o);
    INFO(other.status().ToString());
    REQUIRE(other.ok());
    other.value().reset();
    // Every later call says the database is closed; Close says OK again.
    Status s = db->Insert("c", J("{\"_id\": -1}"));
    CHECK(s.IsInvalidArgument());
    CHECK(s.ToString().find("closed") != std::string::npos);
    CHECK(db->Get("c", V("1")).status().IsInvalidArgument());
    CHECK(db->Begin().status().IsInvalidArgument());
    CHECK(db->Check().IsInvalidArgument());
    CHECK(db->Close().ok());
    CHECK(db->path() == path);
    db.reset();
    // Closed cleanly: the pages hold everything, so the log is not needed.
    std::filesystem::remove(path + "-log");
    auto again = OpenOrFail(path, o);
    auto n = again->Count("c");
    REQUIRE(n.ok());
    CHECK(n.value() == 2000);
    RequireCheckPasses(again.get());
  }
}

TEST_CASE("close: a data file replaced while open stops the commits and is left alone") {
  TempDir dir;
  const std::string path = dir.File("db"), other = dir.File("other");
  for (const uint64_t buffer : {uint64_t{0}, uint64_t{64} << 20}) {
    INFO("write buffer " << buffer);
    Options o;
    o.write_buffer_size = buffer;
    auto db = OpenBesideOther(path, other, o);
    std::filesystem::rename(other, path);
    // Commits stop within the check's interval (100 ms): none after it.
    const auto start = std::chrono::steady_clock::now();
    Status s;
    int committed = 0;
    while (s.ok() && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
      s = db->Insert("c", J("{\"_id\": " + std::to_string(1000 + committed) + "}"));
      if (s.ok()) committed++;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    INFO(s.ToString() << " after " << committed << " commits");
    CHECK(s.IsIOError());
    CHECK(s.ToString().find("replaced") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500));
    // Later writes fail with the same error; reads go on.
    CHECK(db->Insert("c", J("{\"_id\": \"late\"}")).IsIOError());
    CHECK(db->Get("c", V("7")).ok());
    // Close reports it, and writes nothing into the file now at the path.
    s = db->Close();
    INFO(s.ToString());
    CHECK(s.IsIOError());
    CHECK(s.ToString().find("replaced") != std::string::npos);
    db.reset();
    auto now = OpenOrFail(path, o);
    auto n = now->Count("c");
    REQUIRE(n.ok());
    CHECK(n.value() == 1);
    CHECK(now->Get("c", V("\"other\"")).ok());
    RequireCheckPasses(now.get());
  }
}

TEST_CASE(
    "close: a data file overwritten in place while open stops the commits and is left alone") {
  // Found by an independent test: `cp other.mmdb DB` over an open database
  // (the same file, other bytes) went unnoticed; its commits were
  // acknowledged and its checkpoint wrote into the copied-in database.
  TempDir dir;
  const std::string path = dir.File("db"), other = dir.File("other");
  for (const uint64_t buffer : {uint64_t{0}, uint64_t{64} << 20}) {
    INFO("write buffer " << buffer);
    Options o;
    o.write_buffer_size = buffer;
    auto db = OpenBesideOther(path, other, o);
    OverwriteInPlace(path, other);
    // Commits stop within the check's interval (100 ms). Before that, one
    // that reads the stranger's pages fails with Corruption, or commits.
    const auto start = std::chrono::steady_clock::now();
    Status s;
    int committed = 0;
    while (!s.IsIOError() && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
      s = db->Insert("c", J("{\"_id\": " + std::to_string(1000 + committed) + "}"));
      if (s.ok()) committed++;
      if (!s.ok() && !s.IsIOError()) CHECK(s.IsCorruption());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    INFO(s.ToString() << " after " << committed << " commits");
    CHECK(s.IsIOError());
    CHECK(s.ToString().find("overwritten") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500));
    // From then on nothing is written into the file, and reads fail too:
    // the map shows the other database's pages.
    const std::string at_error = ReadFile(path);
    CHECK(db->Insert("c", J("{\"_id\": \"late\"}")).IsIOError());
    CHECK(db->Get("c", V("7")).status().IsIOError());
    CHECK(db->Get("c", V("\"other\"")).status().IsIOError());
    CHECK(db->Count("c").status().IsIOError());
    CHECK(db->Find("c", J("{}")).status().IsIOError());
    s = db->Close();
    CHECK(s.IsIOError());
    db.reset();
    CHECK(ReadFile(path) == at_error);
    auto reopened = OpenOrFail(path, o);
    CHECK(reopened->Count("c").value() == 1);
    CHECK(reopened->Get("c", V("\"other\"")).ok());
    RequireCheckPasses(reopened.get());
  }
}

TEST_CASE("close: a data file overwritten in place under readers alone fails their reads") {
  TempDir dir;
  const std::string path = dir.File("db"), other = dir.File("other");
  for (const uint64_t buffer : {uint64_t{0}, uint64_t{64} << 20}) {
    INFO("write buffer " << buffer);
    Options o;
    o.write_buffer_size = buffer;
    auto db = OpenBesideOther(path, other, o);
    REQUIRE(db->Get("c", V("7")).ok());  // the point reads' shared snapshot
    OverwriteInPlace(path, other);
    // No commit: the reads alone notice, within the check's interval.
    const auto start = std::chrono::steady_clock::now();
    Status s;
    while (!s.IsIOError() && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
      s = db->Get("c", V("7")).status();
      // Before it is noticed a read may still answer from the pages there.
      CHECK((s.ok() || s.IsNotFound() || s.IsIOError() || s.IsCorruption()));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    INFO(s.ToString());
    CHECK(s.IsIOError());
    CHECK(s.ToString().find("overwritten") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500));
    CHECK(db->Count("c").status().IsIOError());
    CHECK(db->Close().IsIOError());
  }
}

TEST_CASE("close: a database opened by a relative path survives a chdir") {
  TempDir dir, elsewhere;
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  auto db = OpenOrFail("rel.mmdb");
  CHECK(db->path() == (std::filesystem::path(dir.path()) / "rel.mmdb").string());
  InsertRange(db.get(), 0, 100);
  std::filesystem::current_path(elsewhere.path());
  // Past the file check's interval: the file must not look moved.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  InsertRange(db.get(), 100, 200);
  REQUIRE(db->Compact().ok());
  InsertRange(db.get(), 200, 300);
  REQUIRE(db->Close().ok());
  std::filesystem::current_path(before);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::path(elsewhere.path()) / "rel.mmdb"));
  auto again = OpenOrFail(dir.File("rel.mmdb"));
  CHECK(again->Count("c").value() == 300);
  RequireCheckPasses(again.get());
}

TEST_CASE("close: a data file removed while open stops the commits") {
  TempDir dir;
  const std::string path = dir.File("db");
  auto db = OpenOrFail(path);
  InsertRange(db.get(), 0, 100);
  std::filesystem::remove(path);
  Status s;
  for (int i = 0; i < 400 && s.ok(); i++) {
    s = db->Insert("c", J("{\"_id\": " + std::to_string(1000 + i) + "}"));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  INFO(s.ToString());
  CHECK(s.IsIOError());
  CHECK(db->Close().IsIOError());
  db.reset();
  // Nothing was made again at the path.
  CHECK(!std::filesystem::exists(path));
}

TEST_CASE("close: a log removed or replaced while open loses nothing at a clean close") {
  // The log is not watched (docs/design.md): it is needed only after a
  // crash, and stopping the commits for it would lose the unmerged ones at
  // Close, where the closing merge and checkpoint keep them all.
  for (const char* how : {"removed", "replaced"}) {
    for (Durability d : {Durability::kFsync, Durability::kGroup, Durability::kNone}) {
      CAPTURE(how, DurabilityName(d));
      TempDir dir;
      const std::string path = dir.File("db");
      Options o;
      o.durability = d;
      {
        auto db = OpenOrFail(path, o);
        InsertRange(db.get(), 0, 100);
        const std::string log = path + "-log";
        if (std::string(how) == "removed") {
          std::filesystem::remove(log);
        } else {
          std::filesystem::copy_file(log, log + ".copy");
          std::filesystem::rename(log + ".copy", log);
        }
        InsertRange(db.get(), 100, 300);
        REQUIRE(db->Close().ok());
      }
      auto db = OpenOrFail(path, o);
      CHECK(db->Count("c").value() == 300);
      RequireCheckPasses(db.get());
    }
  }
}

TEST_CASE("close: a database opened through a symbolic link lives beside the file it names") {
  TempDir dir;
  const std::string real = dir.File("real.mmdb"), link = dir.File("link.mmdb");
  {
    auto db = OpenOrFail(real);
    InsertRange(db.get(), 0, 2);
  }
  std::filesystem::create_symlink(real, link);
  {
    auto db = OpenOrFail(link);
    CHECK(db->path() == std::filesystem::canonical(real).string());
    InsertRange(db.get(), 2, 3);
    REQUIRE(db->Compact().ok());  // renames over the file, not the link
    InsertRange(db.get(), 3, 4);
  }
  CHECK(std::filesystem::is_symlink(link));
  CHECK(!std::filesystem::exists(link + "-log"));
  CHECK(OpenOrFail(real)->Count("c").value() == 4);
  // A link to nothing is NotFound naming it, and nothing is made.
  const std::string dangling = dir.File("dangling.mmdb");
  std::filesystem::create_symlink(dir.File("nowhere.mmdb"), dangling);
  auto none = DB::Open(dangling);
  INFO(none.status().ToString());
  CHECK(none.status().IsNotFound());
  CHECK(none.status().ToString().find("symbolic link") != std::string::npos);
  CHECK(!std::filesystem::exists(dir.File("nowhere.mmdb")));
}

TEST_CASE("close: Busy while a transaction is open, and nothing closed") {
  TempDir dir;
  const std::string path = dir.File("db");
  for (const uint64_t buffer : {uint64_t{0}, uint64_t{64} << 20}) {
    INFO("write buffer " << buffer);
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
    Options o;
    o.write_buffer_size = buffer;
    auto db = OpenOrFail(path, o);
    InsertRange(db.get(), 0, 10);
    // A read snapshot: Close would free the pages it reads.
    auto r = db->BeginRead();
    REQUIRE(r.ok());
    Status s = db->Close();
    CHECK(s.IsBusy());
    CHECK(s.ToString().find("still open") != std::string::npos);
    CHECK(r.value()->Get("c", V("5")).ok());
    CHECK(db->Insert("c", J(R"({"_id": 100})")).ok());
    r.value().reset();
    // The write transaction's own thread: Busy, not a wait for itself.
    auto w = db->Begin();
    REQUIRE(w.ok());
    REQUIRE(w.value()->Insert("c", J(R"({"_id": 101})")).ok());
    CHECK(db->Close().IsBusy());
    REQUIRE(w.value()->Commit().ok());
    // Committed but not destroyed: finished, so Close goes ahead.
    auto aborted = db->BeginRead();
    REQUIRE(aborted.ok());
    aborted.value()->Abort();
    REQUIRE(db->Close().ok());
    // The lock is gone at once, and every commit is there.
    w.value().reset();
    aborted.value().reset();
    auto again = OpenOrFail(path, o);
    CHECK(again->Count("c").value() == 12);
    RequireCheckPasses(again.get());
  }
}

TEST_CASE("close: a cursor whose transaction ended says so instead of reading freed pages") {
  TempDir dir;
  auto db = OpenOrFail(dir.File("db"));
  InsertRange(db.get(), 0, 300);
  for (const bool commit : {true, false}) {
    INFO("commit " << commit);
    auto t = commit ? db->Begin() : db->BeginRead();
    REQUIRE(t.ok());
    auto c = t.value()->Find("c", J("{}"));
    REQUIRE(c.ok());
    REQUIRE(c.value()->Next());
    if (commit) {
      REQUIRE(t.value()->Commit().ok());
    } else {
      t.value()->Abort();
    }
    // Pages the snapshot read may now be reused.
    InsertRange(db.get(), 1000 + (commit ? 0 : 1000), 1500 + (commit ? 0 : 1000));
    REQUIRE(db->Compact().ok());
    CHECK_FALSE(c.value()->Next());
    CHECK(c.value()->status().IsInvalidArgument());
  }
  RequireCheckPasses(db.get());
}

namespace {

// Out of memory where Compact opens its copy.
class CopyOutOfMemory final : public mmdoc::test::FileSystemWrapper {
 public:
  Result<std::unique_ptr<storage::File>> Open(const std::string& path, OpenMode mode) override {
    if (path.size() > 8 && path.compare(path.size() - 8, 8, ".compact") == 0)
      throw std::bad_alloc();
    return FileSystemWrapper::Open(path, mode);
  }
};

}  // namespace

TEST_CASE("close: an exception out of Compact leaves no writer holding the database") {
  TempDir dir;
  CopyOutOfMemory fs;
  Options o;
  o.file_system = &fs;
  auto db = OpenOrFail(dir.File("db"), o);
  InsertRange(db.get(), 0, 200);
  CHECK_THROWS_AS(db->Compact(), std::bad_alloc);
  // Writers, Check and Close go on: none waits for a token the throw kept.
  CHECK(db->Insert("c", J(R"({"_id": "after"})")).ok());
  RequireCheckPasses(db.get());
  CHECK(db->Close().ok());
}
