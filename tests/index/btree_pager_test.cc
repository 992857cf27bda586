// index::BTree and Catalog over the real storage::Pager: snapshots, abort,
// reopen.
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <random>
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

// Every entry of `t`, in order, equals the model's (the reads of a reopened
// pager verify each page's checksum the first time).
void CheckAgainst(BTree* t, const std::map<std::string, std::string>& model) {
  BTree::Cursor c(t);
  REQUIRE(c.SeekToFirst().ok());
  auto it = model.begin();
  for (; c.Valid(); it++) {
    REQUIRE(it != model.end());
    REQUIRE(c.key() == it->first);
    REQUIRE(c.value() == it->second);
    Status s = c.Next();
    INFO(s.ToString());
    REQUIRE(s.ok());
  }
  CHECK(it == model.end());
}

TEST_CASE("a write txn's pages written with WriteAt: across write-backs, a reopen, an abort",
          "[btree][pager]") {
  mmdoc::test::TempDir dir;
  test::PagerBackend be(dir.File("writeat.mmdb"));
  std::map<std::string, std::string> model;
  std::mt19937 rng(5);
  auto random_ops = [&](BTree* t, storage::Txn* w, std::map<std::string, std::string>* m) {
    bool had_private = false;
    for (int i = 0; i < 6000; i++) {
      const std::string key = Key(static_cast<int>(rng() % 20000));
      if (rng() % 4 == 0) {
        Status s = t->Delete(key);
        REQUIRE((s.ok() || s.IsNotFound()));
        m->erase(key);
      } else {
        // Now and then a value in an overflow run of several pages.
        const size_t n = rng() % 50 == 0 ? 9000 + rng() % 3000 : 20 + rng() % 300;
        std::string v(n, static_cast<char>('a' + rng() % 26));
        REQUIRE(t->Put(key, v).ok());
        (*m)[key] = v;
      }
      if (i % 700 == 699) {
        had_private = had_private || w->private_bytes() > 0;
        REQUIRE(w->WriteBack().ok());
        CHECK(w->private_bytes() == 0);
      }
    }
    CHECK(had_private);
  };

  for (int round = 0; round < 3; round++) {
    auto w = be.pager()->BeginWrite(storage::PageWrites::kWriteAt);
    REQUIRE(w.ok());
    Catalog cat(w.value().get());
    if (round == 0) REQUIRE(cat.Create("t", "").ok());
    BTree* t;
    REQUIRE(cat.Open("t", &t).ok());
    random_ops(t, w.value().get(), &model);
    CheckAgainst(t, model);  // private and written-back pages together
    REQUIRE(cat.Flush().ok());
    REQUIRE(w.value()->Commit("", Durability::kNone).ok());
  }
  {
    // A reader sees what was committed; a classic txn goes on from there.
    auto r = be.pager()->BeginRead();
    REQUIRE(r.ok());
    Catalog rcat(r.value().get());
    BTree* rt;
    REQUIRE(rcat.Open("t", &rt).ok());
    CheckAgainst(rt, model);
  }
  {
    // An abort after write-backs leaves nothing behind.
    auto w = be.pager()->BeginWrite(storage::PageWrites::kWriteAt);
    REQUIRE(w.ok());
    Catalog cat(w.value().get());
    BTree* t;
    REQUIRE(cat.Open("t", &t).ok());
    std::map<std::string, std::string> lost = model;
    random_ops(t, w.value().get(), &lost);
    w.value()->Abort();
  }
  REQUIRE(be.pager()->Checkpoint().ok());
  be.Reopen();
  storage::Txn* w = be.BeginWrite();
  Catalog cat(w);
  BTree* t;
  REQUIRE(cat.Open("t", &t).ok());
  CheckAgainst(t, model);
  std::vector<storage::PageId> pages;
  REQUIRE(cat.Verify(&pages).ok());
  be.CheckAccounting(&pages);
  be.Abort();
}

}  // namespace
}  // namespace mmdoc::index
#endif  // MMDOC_INDEX_NO_PAGER
