// index::BTree and Catalog over the real storage::Pager: snapshots, abort,
// reopen.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "index/btree.h"
#include "index/catalog.h"
#include "tests/index/model_backends.h"
#include "tests/support/test_env.h"

#ifndef MMDOC_INDEX_NO_PAGER
namespace mmdoc::index {
namespace {

std::string Key(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "key%07d", i);
  return buf;
}

TEST_CASE("a reader's snapshot keeps old values while a writer commits", "[btree][pager]") {
  mmdoc::test::TempDir dir;
  test::PagerBackend be(dir.File("snap.mmdb"));
  storage::Pager* pager = be.pager();
  {
    storage::Txn* w = be.BeginWrite();
    Catalog cat(w);
    REQUIRE(cat.Create("t", "").ok());
    BTree* t;
    REQUIRE(cat.Open("t", &t).ok());
    for (int i = 0; i < 5000; i++) REQUIRE(t->Put(Key(i), "old").ok());
    REQUIRE(t->Put("big", std::string(100000, 'o')).ok());
    REQUIRE(cat.Flush().ok());
    REQUIRE(be.Commit().ok());
  }
  auto r = pager->BeginRead();
  REQUIRE(r.ok());
  Catalog rcat(r.value().get());
  BTree* rt;
  REQUIRE(rcat.Open("t", &rt).ok());

  for (int round = 0; round < 5; round++) {
    storage::Txn* w = be.BeginWrite();
    Catalog cat(w);
    BTree* t;
    REQUIRE(cat.Open("t", &t).ok());
    for (int i = round; i < 5000; i += 3) REQUIRE(t->Put(Key(i), "new").ok());
    for (int i = round; i < 5000; i += 7) {
      Status s = t->Delete(Key(i));
      REQUIRE((s.ok() || s.IsNotFound()));
    }
    REQUIRE(t->Put("big", std::string(100000, 'n')).ok());
    REQUIRE(cat.Flush().ok());
    REQUIRE(be.Commit().ok());

    std::string_view v;
    for (int i = 0; i < 5000; i += 13) {
      REQUIRE(rt->Get(Key(i), &v).ok());
      REQUIRE(v == "old");
    }
    REQUIRE(rt->Get("big", &v).ok());
    REQUIRE(v == std::string(100000, 'o'));
  }
  REQUIRE(rcat.Verify(nullptr).ok());
  r.value().reset();

  // An aborted write leaves nothing behind; a reopen keeps the commits.
  {
    storage::Txn* w = be.BeginWrite();
    Catalog cat(w);
    BTree* t;
    REQUIRE(cat.Open("t", &t).ok());
    REQUIRE(t->Drop().ok());
    REQUIRE(cat.Flush().ok());
    be.Abort();
  }
  be.Reopen();
  storage::Txn* w = be.BeginWrite();
  Catalog cat(w);
  BTree* t;
  REQUIRE(cat.Open("t", &t).ok());
  std::string_view v;
  REQUIRE(t->Get(Key(5), &v).ok());
  CHECK(v == "new");
  REQUIRE(t->Get("big", &v).ok());
  CHECK(v == std::string(100000, 'n'));
  std::vector<storage::PageId> pages;
  REQUIRE(cat.Verify(&pages).ok());
  be.CheckAccounting(&pages);
  be.Abort();
}

}  // namespace
}  // namespace mmdoc::index
#endif  // MMDOC_INDEX_NO_PAGER
