// Corruption detection: meta fallback, both metas bad, a flipped byte in
// every page type, truncated files, out-of-range page ids.
#include <catch2/catch.hpp>

#include "storage/checksum.h"
#include "storage/coding.h"
#include "storage/pager.h"
#include "tests/storage/storage_test_util.h"
#include "tests/support/test_env.h"

namespace mmdoc::storage {
namespace {

using namespace testutil;  // NOLINT

uint64_t MetaTxid(const std::string& path, int slot) {
  return DecodeFixed64(ReadBytes(path, slot * 4096 + kPageTxidOffset, 8).data());
}

TEST_CASE("corruption: meta pages alternate and a bad newer meta falls back") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  PageId a;
  uint64_t ckpt_a, ckpt_b;
  {
    auto p = OpenOrDie(path);
    a = WriteTagged(p.get(), 0, 100);
    REQUIRE(p->Checkpoint().ok());
    ckpt_a = p->Stats().checkpoint_txid;
    WriteTagged(p.get(), 0, 200);
    WriteTagged(p.get(), 1, 201);
    REQUIRE(p->Checkpoint().ok());
    ckpt_b = p->Stats().checkpoint_txid;
    CHECK(ckpt_b > ckpt_a);
    CHECK(ckpt_a % 2 != ckpt_b % 2);
    p->TEST_CrashOnClose();
  }
  CHECK(MetaTxid(path, ckpt_a % 2) == ckpt_a);
  CHECK(MetaTxid(path, ckpt_b % 2) == ckpt_b);

  SECTION("garbage in the newer meta") {
    WriteBytes(path, (ckpt_b % 2) * 4096 + 100, std::string(300, 'x'));
  }
  SECTION("one flipped byte in the newer meta") {
    FlipByte(path, (ckpt_b % 2) * 4096 + kMetaRootsOffset);
  }
  SECTION("torn newer meta (first sector still the old content)") {
    WriteBytes(path, (ckpt_b % 2) * 4096, ReadBytes(path, (ckpt_a % 2) * 4096, 512));
  }
  // The older checkpoint A is used; the log still holds the records of the
  // commits between A and B (epoch of A), and they replay on top of it.
  std::vector<uint64_t> tags;
  auto p = OpenAndReplay(path, SmallOptions(), &tags);
  CHECK(tags == std::vector<uint64_t>{200, 201});
  CHECK(RootHasTag(p.get(), 0, 200));
  CHECK(RootHasTag(p.get(), 1, 201));
  CHECK(p->Verify().ok());
  (void)a;
}

// Sets the format version of both meta pages and reseals their checksums.
void SetMetaVersion(const std::string& path, uint32_t version) {
  for (int slot = 0; slot < 2; slot++) {
    std::string page = ReadBytes(path, slot * 4096, 4096);
    uint8_t* m = reinterpret_cast<uint8_t*>(page.data());
    EncodeFixed32(m + kMetaVersionOffset, version);
    EncodeFixed64(m + kPageChecksumOffset, PageChecksum(m, 4096, slot));
    WriteBytes(path, slot * 4096, page);
  }
}

// Version 1 files (before packed keys) open and are written back as the
// current version; a newer version is refused by name.
TEST_CASE("corruption: format versions 1 and 2 open, a newer one is refused") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path);
    WriteTagged(p.get(), 0, 7);
  }
  SetMetaVersion(path, 1);
  {
    auto p = OpenOrDie(path);
    CHECK(RootHasTag(p.get(), 0, 7));
    WriteTagged(p.get(), 0, 8);
  }
  CHECK(DecodeFixed32(reinterpret_cast<const uint8_t*>(ReadBytes(path, 0, 4096).data() +
                                                       kMetaVersionOffset)) == kFormatVersion);
  SetMetaVersion(path, kFormatVersion + 1);
  auto r = Pager::Open(path, SmallOptions());
  REQUIRE(r.status().IsCorruption());
  INFO(r.status().ToString());
  CHECK(r.status().message().find("unsupported format version " +
                                  std::to_string(kFormatVersion + 1)) != std::string::npos);
}

TEST_CASE("corruption: both meta pages bad is Corruption naming both") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path);
    WriteTagged(p.get(), 0, 1);
    REQUIRE(p->Checkpoint().ok());
    WriteTagged(p.get(), 0, 2);
  }
  FlipByte(path, 40);
  FlipByte(path, 4096 + 40);
  auto r = Pager::Open(path, SmallOptions());
  REQUIRE(r.status().IsCorruption());
  const Status st = r.status();
  const std::string& m = st.message();
  INFO(m);
  CHECK(m.find("page 0") != std::string::npos);
  CHECK(m.find("page 1") != std::string::npos);
  CHECK(m.find("checksum mismatch") != std::string::npos);
}

TEST_CASE("corruption: a flipped byte in a data page is reported on Get") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  PageId leaf, branch, run;
  {
    auto p = OpenOrDie(path);
    leaf = WriteTagged(p.get(), 0, 1, Durability::kNone, PageType::kLeaf);
    branch = WriteTagged(p.get(), 1, 2, Durability::kNone, PageType::kBranch);
    run = WriteTagged(p.get(), 2, 3, Durability::kNone, PageType::kOverflow, 4);
  }
  PageId victim = 0;
  uint64_t offset = 0;
  SECTION("leaf header") {
    victim = leaf;
    offset = leaf * 4096 + kPageTypeOffset;
  }
  SECTION("branch body") {
    victim = branch;
    offset = branch * 4096 + 4000;
  }
  SECTION("third page of an overflow run") {
    victim = run;
    offset = (run + 2) * 4096 + 77;
  }
  SECTION("checksum field") {
    victim = leaf;
    offset = leaf * 4096 + 3;
  }
  FlipByte(path, offset);
  auto p = OpenOrDie(path);
  for (int round = 0; round < 2; round++) {
    auto r = p->BeginRead();
    const uint8_t* pg;
    Status s = r.value()->Get(victim, &pg);
    INFO(s.ToString());
    REQUIRE(s.IsCorruption());
    CHECK(s.message() == "page " + std::to_string(victim) + ": checksum mismatch");
    // Twice: a bad page is never marked verified.
    CHECK(r.value()->Get(victim, &pg).IsCorruption());
    // A write txn sees it too.
    auto w = p->BeginWrite();
    PageId nid;
    uint8_t* np;
    CHECK(w.value()->Modify(victim, &nid, &np).IsCorruption());
  }
  // Other pages are fine.
  auto r = p->BeginRead();
  const uint8_t* pg;
  for (PageId id : {leaf, branch, run}) {
    if (id != victim) CHECK(r.value()->Get(id, &pg).ok());
  }
}

TEST_CASE("corruption: a flipped byte in a free-list page fails Open") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path);
    for (int i = 0; i < 20; i++) WriteTagged(p.get(), i % 2, i);
    REQUIRE(p->Checkpoint().ok());
    REQUIRE(p->Stats().freelist_pages == 1);
  }
  // Find the free-list root in the newest meta.
  uint64_t t0 = DecodeFixed64(ReadBytes(path, kPageTxidOffset, 8).data());
  uint64_t t1 = DecodeFixed64(ReadBytes(path, 4096 + kPageTxidOffset, 8).data());
  int slot = t1 > t0 ? 1 : 0;
  PageId fl = DecodeFixed64(ReadBytes(path, slot * 4096 + kMetaFreeListRootOffset, 8).data());
  REQUIRE(fl >= 2);
  FlipByte(path, fl * 4096 + kFreeListEntriesOffset + 1);
  auto r = Pager::Open(path, SmallOptions());
  REQUIRE(r.status().IsCorruption());
  CHECK(r.status().message() == "page " + std::to_string(fl) + ": checksum mismatch");
}

TEST_CASE("corruption: truncated file and out-of-range ids") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path);
    for (int i = 0; i < 10; i++) WriteTagged(p.get(), i % 3, i);
    auto r = p->BeginRead();
    uint64_t pc = r.value()->page_count();
    const uint8_t* pg;
    Status s = r.value()->Get(pc, &pg);
    CHECK(s.IsCorruption());
    CHECK(s.message().find("page " + std::to_string(pc)) != std::string::npos);
    CHECK(r.value()->Get(0, &pg).IsCorruption());
    CHECK(r.value()->Get(1, &pg).IsCorruption());
    CHECK(r.value()->Get(~0ull, &pg).IsCorruption());
  }
  auto f = FileSystem::Default()->Open(path, OpenMode::kExisting);
  REQUIRE(f.value()->Truncate(3 * 4096).ok());
  f.value().reset();
  auto r = Pager::Open(path, SmallOptions());
  REQUIRE(r.status().IsCorruption());
  CHECK(r.status().message().find("shorter") != std::string::npos);
}

TEST_CASE("corruption: a page copied to the wrong place fails its checksum") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  PageId a, b;
  {
    auto p = OpenOrDie(path);
    a = WriteTagged(p.get(), 0, 1);
    b = WriteTagged(p.get(), 1, 2);
  }
  WriteBytes(path, b * 4096, ReadBytes(path, a * 4096, 4096));
  auto p = OpenOrDie(path);
  auto r = p->BeginRead();
  const uint8_t* pg;
  CHECK(r.value()->Get(a, &pg).ok());
  CHECK(r.value()->Get(b, &pg).IsCorruption());
}

}  // namespace
}  // namespace mmdoc::storage
