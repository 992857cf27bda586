// Log replay after a crash, torn log tails, free-page reuse (rule 5) and
// growth through remaps while a reader holds an old snapshot.
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <set>

#include "storage/pager.h"
#include "tests/storage/storage_test_util.h"
#include "tests/support/test_env.h"

namespace mmdoc::storage {
namespace {

using namespace testutil;  // NOLINT

TEST_CASE("recovery: a crash replays exactly the committed records in order") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  const int n = 30 * static_cast<int>(test::Scale());
  std::vector<uint64_t> want;
  uint64_t last_txid;
  {
    auto p = OpenOrDie(path);
    WriteTagged(p.get(), 0, 1);
    REQUIRE(p->Checkpoint().ok());
    for (int i = 0; i < n; i++) {
      WriteTagged(p.get(), i % 4, 1000 + i);
      want.push_back(1000 + i);
    }
    // An aborted txn leaves no record.
    {
      auto w = p->BeginWrite();
      w.value()->set_root(0, 0);
    }
    last_txid = p->Stats().txid;
    p->TEST_CrashOnClose();
  }
  std::vector<uint64_t> txids, tags;
  auto r = Pager::Open(path, SmallOptions());
  REQUIRE(r.ok());
  auto& p = r.value();
  REQUIRE(p->Recover([&](uint64_t txid, std::string_view payload) {
             txids.push_back(txid);
             return ApplyTagged(p.get(), payload, &tags);
           }).ok());
  CHECK(tags == want);
  REQUIRE(txids.size() == want.size());
  for (size_t i = 1; i < txids.size(); i++) CHECK(txids[i] == txids[i - 1] + 1);
  CHECK(txids.back() == last_txid);
  for (int i = n - 4; i < n; i++) CHECK(RootHasTag(p.get(), i % 4, want[i]));
  CHECK(p->Verify().ok());
  CHECK(p->Stats().log_used == 0);
}

TEST_CASE("recovery: a torn log tail stops replay at the last intact record") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  uint64_t last_offset = 0;
  {
    auto p = OpenOrDie(path);
    for (int i = 0; i < 10; i++) {
      last_offset = kLogRecordsOffset + p->Stats().log_used;
      WriteTagged(p.get(), 0, i);
    }
    p->TEST_CrashOnClose();
  }
  SECTION("flipped payload byte") { FlipByte(path + "-log", last_offset + 33); }
  SECTION("zeroed header") { WriteBytes(path + "-log", last_offset, std::string(32, '\0')); }
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(tags == std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(RootHasTag(p.get(), 0, 8));
  // New commits after recovery are not confused with the stale record.
  WriteTagged(p.get(), 0, 99);
  p->TEST_CrashOnClose();
  p.reset();
  tags.clear();
  p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(tags == std::vector<uint64_t>{99});
  CHECK(RootHasTag(p.get(), 0, 99));
}

TEST_CASE("recovery: BeginWrite before Recover with pending records fails") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path);
    WriteTagged(p.get(), 0, 1);
    p->TEST_CrashOnClose();
  }
  auto r = Pager::Open(path, SmallOptions());
  REQUIRE(r.ok());
  CHECK(r.value()->BeginWrite().status().IsInvalidArgument());
  CHECK(r.value()->Checkpoint().IsInvalidArgument());
}

TEST_CASE("recovery: a full log commits by checkpoint") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  PagerOptions o = SmallOptions();
  o.log_size = 4096;
  {
    auto p = OpenOrDie(path, o);
    uint64_t ckpt = p->Stats().checkpoint_txid;
    for (int i = 0; i < 200; i++) WriteTagged(p.get(), i % 2, i);
    CHECK(p->Stats().checkpoint_txid > ckpt);
    CHECK(p->Stats().log_used < 4096);
    // A payload larger than the log.
    auto w = p->BeginWrite();
    REQUIRE(w.value()->Commit(std::string(10000, 'x'), Durability::kFsync).ok());
    p->TEST_CrashOnClose();
  }
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, o, &tags);
  CHECK(RootHasTag(p.get(), 0, 198));
  CHECK(RootHasTag(p.get(), 1, 199));
}

// A WriteTagged record padded to about `bytes` (ApplyTagged ignores the
// padding).
void WriteTaggedPadded(Pager* p, uint64_t tag, size_t bytes, Durability d) {
  auto w = p->BeginWrite();
  REQUIRE(w.ok());
  PageId id;
  uint8_t* pg;
  REQUIRE(w.value()->Allocate(PageType::kLeaf, 1, &id, &pg).ok());
  FillBody(pg, w.value()->page_size(), tag);
  if (w.value()->root(0) != 0) REQUIRE(w.value()->Free(w.value()->root(0)).ok());
  w.value()->set_root(0, id);
  std::string payload = Payload(0, tag, PageType::kLeaf, 1) + " ";
  payload.resize(bytes, 'p');
  Status s = w.value()->Commit(payload, d);
  INFO(s.ToString());
  REQUIRE(s.ok());
}

TEST_CASE("log: starts small, grows with the work up to log_size, and starts small again") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  const std::string log = path + "-log";
  PagerOptions o = SmallOptions();
  o.log_size = 4 << 20;  // starts at 256 KiB
  const uint64_t initial = kLogRecordsOffset + (256 << 10);
  std::vector<uint64_t> want;
  {
    auto p = OpenOrDie(path, o);
    CHECK(std::filesystem::file_size(log) == initial);
    // 1.5 MiB of records: the log doubles three times and nothing
    // checkpoints after the first write's (rule 9).
    uint64_t ckpt = 0;
    for (uint64_t i = 0; i < 96; i++) {
      WriteTaggedPadded(p.get(), i, 16 << 10, i % 2 ? Durability::kFsync : Durability::kNone);
      want.push_back(i);
      if (i == 0) ckpt = p->Stats().checkpoint_txid;
    }
    CHECK(p->Stats().checkpoint_txid == ckpt);
    CHECK(std::filesystem::file_size(log) == kLogRecordsOffset + (2 << 20));
    p->TEST_CrashOnClose();
  }
  std::vector<uint64_t> tags;
  {
    auto p = OpenAndReplay(path, o, &tags);
    CHECK(tags == want);
    CHECK(RootHasTag(p.get(), 0, 95));
    CHECK(p->Verify().ok());
    // Past the budget: the log stops at log_size and checkpoints instead.
    const uint64_t ckpt = p->Stats().checkpoint_txid;
    for (uint64_t i = 0; i < 400; i++)
      WriteTaggedPadded(p.get(), 1000 + i, 16 << 10, Durability::kNone);
    CHECK(p->Stats().checkpoint_txid > ckpt);
    CHECK(std::filesystem::file_size(log) == kLogRecordsOffset + o.log_size);
  }
  // Closed cleanly: the next session's first write makes the log anew, small.
  {
    auto p = OpenOrDie(path, o);
    CHECK(RootHasTag(p.get(), 0, 1399));
    WriteTagged(p.get(), 1, 7);
    CHECK(std::filesystem::file_size(log) == initial);
  }
  // A growth cut short (zeros past the size the header claims) is ignored.
  {
    std::filesystem::resize_file(log, initial + (64 << 10));
    auto p = OpenOrDie(path, o);
    CHECK(RootHasTag(p.get(), 1, 7));
    CHECK(p->Verify().ok());
  }
}

TEST_CASE("reuse: freed pages wait for older readers (rule 5a)") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  REQUIRE(p->Checkpoint().ok());
  PageId x = WriteTagged(p.get(), 0, 1);  // born after the checkpoint
  auto reader = p->BeginRead();
  REQUIRE(reader.value()->root(0) == x);
  WriteTagged(p.get(), 0, 2);  // frees x
  std::set<PageId> got;
  for (int i = 0; i < 20; i++) got.insert(WriteTagged(p.get(), 1 + i % 3, i));
  CHECK(got.count(x) == 0);
  const uint8_t* pg;
  REQUIRE(reader.value()->Get(x, &pg).ok());
  CHECK(BodyMatches(pg, 4096, 1));
  reader.value().reset();
  got.clear();
  for (int i = 0; i < 5; i++) got.insert(WriteTagged(p.get(), 1 + i % 3, i));
  CHECK(got.count(x) == 1);
}

TEST_CASE(
    "reuse: a page born before the checkpoint waits for the next one (rule "
    "5b)") {
  test::TempDir dir;
  auto p = OpenOrDie(dir.File("db"));
  PageId x = WriteTagged(p.get(), 0, 1);
  REQUIRE(p->Checkpoint().ok());
  WriteTagged(p.get(), 0, 2);  // frees x, which the durable meta reaches
  std::set<PageId> got;
  for (int i = 0; i < 20; i++) got.insert(WriteTagged(p.get(), 1, i));
  CHECK(got.count(x) == 0);
  CHECK(p->Stats().pending_pages >= 1);
  REQUIRE(p->Checkpoint().ok());
  got.clear();
  for (int i = 0; i < 3; i++) got.insert(WriteTagged(p.get(), 1, i));
  CHECK(got.count(x) == 1);
}

TEST_CASE("growth: remaps keep an old reader's pages valid and unchanged") {
  test::TempDir dir;
  PagerOptions o = SmallOptions();
  o.initial_map_size = 64 << 10;
  auto p = OpenOrDie(dir.File("db"), o);
  std::vector<PageId> ids;
  for (int i = 0; i < 8; i++) ids.push_back(WriteTagged(p.get(), i, i));
  auto reader = p->BeginRead();
  std::vector<const uint8_t*> ptrs;
  for (PageId id : ids) {
    const uint8_t* pg;
    REQUIRE(reader.value()->Get(id, &pg).ok());
    ptrs.push_back(pg);
  }
  // Grow to several MiB in chunks: each commit allocates 64 pages.
  const uint64_t size0 = p->Stats().file_size;
  for (int round = 0; round < 20; round++) {
    auto w = p->BeginWrite();
    for (int k = 0; k < 64; k++) {
      PageId id;
      uint8_t* pg;
      REQUIRE(w.value()->Allocate(PageType::kLeaf, 1, &id, &pg).ok());
      FillBody(pg, 4096, 77);
    }
    // Overwrite every root (copy-on-write); the reader keeps the old pages.
    for (int s = 0; s < 8; s++) {
      PageId nid;
      uint8_t* pg;
      REQUIRE(w.value()->Modify(w.value()->root(s), &nid, &pg).ok());
      FillBody(pg, 4096, 500 + round);
      w.value()->set_root(s, nid);
    }
    REQUIRE(w.value()->Commit("", Durability::kNone).ok());
  }
  CHECK(p->Stats().file_size >= size0 + (4 << 20));
  for (size_t i = 0; i < ids.size(); i++) {
    CHECK(BodyMatches(ptrs[i], 4096, i));
    const uint8_t* pg;
    REQUIRE(reader.value()->Get(ids[i], &pg).ok());
    CHECK(pg == ptrs[i]);
  }
  reader.value().reset();
  for (int s = 0; s < 8; s++) CHECK(RootHasTag(p.get(), s, 519));
  p.reset();
  p = OpenOrDie(dir.File("db"), o);
  for (int s = 0; s < 8; s++) CHECK(RootHasTag(p.get(), s, 519));
  CHECK(p->Verify().ok());
}

}  // namespace
}  // namespace mmdoc::storage
