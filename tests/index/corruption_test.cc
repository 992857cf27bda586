// Damaged pages must give Corruption (naming the page), never a crash or an
// out-of-bounds read. Run under ASan to make the second half meaningful.
#include <catch2/catch.hpp>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "index/btree.h"
#include "index/btree_page.h"
#include "tests/index/mem_txn.h"
#include "tests/support/test_env.h"

namespace mmdoc::index {
namespace {

using test::MemStore;

std::string Key(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "key%06d", i);
  return buf;
}

constexpr int kKeys = 3000;

void Build(MemStore* store) {
  auto w = store->BeginWrite();
  BTree t(w.get(), 0);
  for (int i = 0; i < kKeys; i++) {
    REQUIRE(t.Put(Key(i), std::string(i % 100 == 0 ? 5000 : 20 + i % 30, 'v')).ok());
  }
  w->set_root(0, t.root());
  REQUIRE(w->Commit("", Durability::kNone).ok());
}

// The leaf that holds Key(i).
storage::PageId LeafOf(MemStore* store, int i) {
  auto r = store->BeginRead();
  storage::PageId id = r->root(0);
  for (;;) {
    const uint8_t* p;
    REQUIRE(r->Get(id, &p).ok());
    if (node::Type(p) == storage::PageType::kLeaf) return id;
    uint32_t n = node::Count(p), c = 0;
    while (c < n) {
      uint32_t off = node::Slot(p, c);
      std::string_view k(reinterpret_cast<const char*>(p + off + node::kBranchCellHeader),
                         node::BranchKeyLen(p + off));
      if (Key(i) < k) break;
      c++;
    }
    id = c == 0 ? node::Leftmost(p) : node::BranchChild(p + node::Slot(p, c - 1));
  }
}

TEST_CASE("a damaged slot array is Corruption", "[btree][corruption]") {
  MemStore store;
  Build(&store);
  storage::PageId leaf = LeafOf(&store, 1234);
  uint8_t* p = store.MutablePage(leaf);
  std::vector<uint8_t> saved(p, p + store.page_size());
  uint32_t n = node::Count(p);
  REQUIRE(n > 2);

  for (uint16_t bad : {uint16_t{0xFFFF}, uint16_t{4095}, uint16_t{10}, uint16_t{40}}) {
    for (uint32_t slot = 0; slot < n; slot++) node::SetSlot(p, slot, bad);
    auto r = store.BeginRead();
    BTree t(r.get(), r->root(0));
    std::string_view v;
    Status s = t.Verify(nullptr, nullptr);
    CHECK(s.IsCorruption());
    CHECK(s.message().find("page " + std::to_string(leaf)) != std::string::npos);
    CHECK(t.Get(Key(1234), &v).IsCorruption());
    BTree::Cursor c(&t);
    CHECK(c.Seek(Key(1234)).IsCorruption());
    std::copy(saved.begin(), saved.end(), p);
  }

  // A count larger than the slot array can hold.
  node::SetCount(p, 4000);
  {
    auto r = store.BeginRead();
    BTree t(r.get(), r->root(0));
    std::string_view v;
    CHECK(t.Verify(nullptr, nullptr).IsCorruption());
    CHECK(t.Get(Key(1234), &v).IsCorruption());
    auto w = store.BeginWrite();
    BTree tw(w.get(), w->root(0));
    CHECK(tw.Put(Key(1234), "x").IsCorruption());
    CHECK(tw.Delete(Key(1234)).IsCorruption());
  }
  std::copy(saved.begin(), saved.end(), p);

  // The wrong page type.
  p[storage::kPageTypeOffset] = static_cast<uint8_t>(storage::PageType::kOverflow);
  {
    auto r = store.BeginRead();
    BTree t(r.get(), r->root(0));
    std::string_view v;
    CHECK(t.Get(Key(1234), &v).IsCorruption());
    CHECK(t.Verify(nullptr, nullptr).IsCorruption());
  }
  std::copy(saved.begin(), saved.end(), p);
  auto r = store.BeginRead();
  BTree t(r.get(), r->root(0));
  REQUIRE(t.Verify(nullptr, nullptr).ok());
}

// Flips random bytes of random pages (mostly node headers and slot
// arrays), then reads, scans and writes each damaged tree.
void RandomDamage(uint64_t seed) {
  std::mt19937_64 rng(seed);
  MemStore store;
  Build(&store);
  std::vector<storage::PageId> pages = store.LivePages();
  const uint32_t ps = store.page_size();
  int trials = 300 * static_cast<int>(mmdoc::test::Scale());
  int detected = 0;
  for (int trial = 0; trial < trials; trial++) {
    storage::PageId id = pages[rng() % pages.size()];
    uint8_t* p;
    try {
      p = store.MutablePage(id);
    } catch (...) {
      continue;  // not the first page of a run
    }
    std::vector<uint8_t> saved(p, p + ps);
    int flips = 1 + rng() % 8;
    for (int f = 0; f < flips; f++) {
      // Mostly the node header and slot array, sometimes anywhere.
      uint32_t at = rng() % 4 ? 16 + rng() % 200 : rng() % ps;
      p[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    {
      auto r = store.BeginRead();
      BTree t(r.get(), r->root(0));
      if (t.Verify(nullptr, nullptr).IsCorruption()) detected++;
      std::string_view v;
      for (int i = 0; i < 50; i++) {
        Status s = t.Get(Key(rng() % kKeys), &v);
        (void)s;
      }
      BTree::Cursor c(&t);
      Status s = c.Seek(Key(rng() % kKeys));
      for (int i = 0; i < 200 && s.ok() && c.Valid(); i++) s = (i % 3 ? c.Next() : c.Prev());
      s = c.SeekToLast();
      for (int i = 0; i < 100 && s.ok() && c.Valid(); i++) s = c.Prev();
    }
    {
      auto w = store.BeginWrite();
      BTree t(w.get(), w->root(0));
      for (int i = 0; i < 30; i++) {
        Status s = rng() % 2 ? t.Put(Key(rng() % kKeys), std::string(rng() % 300, 'w'))
                             : t.Delete(Key(rng() % kKeys));
        if (!s.ok()) break;
      }
      w->Abort();
    }
    std::copy(saved.begin(), saved.end(), p);
  }
  INFO("Verify found damage in " << detected << " of " << trials << " trials");
  // About two in five trials damage what Verify reads (106-139 of 300 in
  // 40 seeds; 97 in one of 300 seeds): a quarter is far below that and
  // still fails a Verify that stopped looking.
  CHECK(detected > trials / 4);
  auto r = store.BeginRead();
  BTree t(r.get(), r->root(0));
  REQUIRE(t.Verify(nullptr, nullptr).ok());
}

TEST_CASE("random damage never crashes", "[btree][corruption]") {
  RandomDamage(mmdoc::test::Seed("btree corruption"));
}

TEST_CASE("random damage: seeds that once crashed", "[btree][corruption]") {
  // An insert into a node whose dead-byte count lied compacted it and then
  // placed its cell below the page (BTree::Impl::TryInsert).
  RandomDamage(8061953507749748962u);
}

}  // namespace
}  // namespace mmdoc::index
