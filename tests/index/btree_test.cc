// Edge cases of index::BTree over the in-memory MemTxn.
#include "index/btree.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/index/mem_txn.h"

namespace mmdoc::index {
namespace {

using test::MemStore;

std::string Key(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "key%08d", i);
  return buf;
}

// Verify must succeed and account exactly for the store's live pages.
void CheckTree(BTree* t, MemStore* store, TreeStats* stats = nullptr) {
  std::vector<storage::PageId> pages;
  TreeStats st;
  Status s = t->Verify(&pages, &st);
  INFO(s.ToString());
  REQUIRE(s.ok());
  std::sort(pages.begin(), pages.end());
  REQUIRE(std::adjacent_find(pages.begin(), pages.end()) == pages.end());
  if (stats) *stats = st;
  (void)store;
}

void Commit(storage::Txn* txn, BTree* t) {
  txn->set_root(0, t->root());
  REQUIRE(txn->Commit("", Durability::kNone).ok());
}

TEST_CASE("empty tree", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  std::string_view v;
  CHECK(t.Get("a", &v).IsNotFound());
  CHECK(t.Delete("a").IsNotFound());
  CHECK(t.Put("a", "x", PutMode::kUpdate).IsNotFound());
  CHECK(t.root() == 0);
  BTree::Cursor c(&t);
  REQUIRE(c.SeekToFirst().ok());
  CHECK(!c.Valid());
  REQUIRE(c.SeekToLast().ok());
  CHECK(!c.Valid());
  REQUIRE(c.Seek("m").ok());
  CHECK(!c.Valid());
  TreeStats st;
  std::vector<storage::PageId> pages;
  REQUIRE(t.Verify(&pages, &st).ok());
  CHECK(pages.empty());
  CHECK(st.entries == 0);
  CHECK(st.depth == 0);
  REQUIRE(t.Drop().ok());
}

TEST_CASE("one key", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  REQUIRE(t.Put("k", "v").ok());
  std::string_view v;
  REQUIRE(t.Get("k", &v).ok());
  CHECK(v == "v");
  CHECK(t.Get("j", &v).IsNotFound());
  CHECK(t.Get("l", &v).IsNotFound());
  BTree::Cursor c(&t);
  REQUIRE(c.Seek("a").ok());
  REQUIRE(c.Valid());
  CHECK(c.key() == "k");
  REQUIRE(c.Next().ok());
  CHECK(!c.Valid());
  REQUIRE(c.Seek("z").ok());
  CHECK(!c.Valid());
  REQUIRE(c.SeekToLast().ok());
  CHECK(c.key() == "k");
  REQUIRE(c.Prev().ok());
  CHECK(!c.Valid());
  Commit(w.get(), &t);
  CHECK(store.LivePages().size() == 1);
}

TEST_CASE("put modes and argument limits", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  REQUIRE(t.Put("a", "1", PutMode::kInsert).ok());
  CHECK(t.Put("a", "2", PutMode::kInsert).IsAlreadyExists());
  CHECK(t.Put("b", "2", PutMode::kUpdate).IsNotFound());
  REQUIRE(t.Put("a", "3", PutMode::kUpdate).ok());
  REQUIRE(t.Put("a", "4444", PutMode::kUpsert).ok());
  std::string_view v;
  REQUIRE(t.Get("a", &v).ok());
  CHECK(v == "4444");

  Status s = t.Put("", "x");
  CHECK(s.IsInvalidArgument());
  std::string max(kMaxKeySize, 'm');
  REQUIRE(t.Put(max, "maxkey").ok());
  REQUIRE(t.Get(max, &v).ok());
  CHECK(v == "maxkey");
  // A maximum key with an empty value (a null data pointer) overflows to an
  // empty run and reads back empty.
  std::string max_empty(kMaxKeySize, 'e');
  REQUIRE(t.Put(max_empty, std::string_view()).ok());
  REQUIRE(t.Get(max_empty, &v).ok());
  CHECK(v.empty());
  REQUIRE(t.Delete(max_empty).ok());
  s = t.Put(std::string(kMaxKeySize + 1, 'x'), "x");
  CHECK(s.IsInvalidArgument());
  CHECK(s.message().find("1024") != std::string::npos);
  CHECK(t.Get(std::string(kMaxKeySize + 1, 'x'), &v).IsNotFound());
  s = t.Put("huge", std::string(kMaxValueSize + 1, 'h'));
  CHECK(s.IsInvalidArgument());
  CHECK(s.message().find("64 MiB") != std::string::npos);

  // Many maximum-size keys force a deep tree of 3-4 keys per page.
  for (int i = 0; i < 300; i++) {
    std::string k(kMaxKeySize, 'a' + i % 26);
    std::snprintf(k.data(), 16, "%08d", i * 7919 % 300);
    Status ps = t.Put(k, std::string(i % 50, 'v'));
    INFO(ps.ToString());
    REQUIRE(ps.ok());
  }
  CheckTree(&t, &store);
  for (int i = 0; i < 300; i += 2) {
    std::string k(kMaxKeySize, 'a' + i % 26);
    std::snprintf(k.data(), 16, "%08d", i * 7919 % 300);
    REQUIRE(t.Delete(k).ok());
  }
  CheckTree(&t, &store);
}

TEST_CASE("splits and merges at the root, deleting everything frees every page", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  const int n = 5000;
  for (int i = 0; i < n; i++) {
    int k = (i * 7919) % n;
    REQUIRE(t.Put(Key(k), std::string(20 + k % 40, 'a' + k % 26), PutMode::kInsert).ok());
  }
  TreeStats st;
  CheckTree(&t, &store, &st);
  CHECK(st.entries == n);
  CHECK(st.depth >= 2);
  Commit(w.get(), &t);

  w = store.BeginWrite();
  BTree t2(w.get(), store.root(0));
  for (int i = 0; i < n; i++) {
    int k = (i * 104729) % n;
    REQUIRE(t2.Delete(Key(k)).ok());
    if (i % 500 == 0) CheckTree(&t2, &store);
  }
  CHECK(t2.root() == 0);
  CHECK(t2.Delete(Key(1)).IsNotFound());
  Commit(w.get(), &t2);
  CHECK(store.LivePages().empty());
  CHECK(store.FreePages() == store.page_count() - 2);
}

TEST_CASE("a tree that grows and shrinks stays filled", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  for (int i = 0; i < 20000; i++) REQUIRE(t.Put(Key(i), "value-" + std::to_string(i)).ok());
  for (int i = 0; i < 20000; i++) {
    if (i % 10 != 0) REQUIRE(t.Delete(Key(i)).ok());
  }
  TreeStats st;
  CheckTree(&t, &store, &st);
  CHECK(st.entries == 2000);
  // Every non-root page is kept at least ~1/4 full.
  CHECK(st.used_bytes * 100 / st.capacity_bytes >= 25);
  Commit(w.get(), &t);
  CHECK(store.LivePages().size() == st.leaf_pages + st.branch_pages);
}

TEST_CASE("sequential inserts fill leaves", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  for (int i = 0; i < 100000; i++) REQUIRE(t.Put(Key(i), std::string(16, 'v')).ok());
  TreeStats st;
  CheckTree(&t, &store, &st);
  CHECK(st.entries == 100000);
  INFO("fill " << st.used_bytes * 100.0 / st.capacity_bytes << "%");
  CHECK(st.used_bytes * 100 / st.capacity_bytes > 85);
}

TEST_CASE("random inserts share a full leaf with its sibling before splitting it", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  std::vector<int> order(50000);
  for (int i = 0; i < 50000; i++) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (int i : order) REQUIRE(t.Put(Key(i), std::string(40 + i % 60, 'v')).ok());
  TreeStats st;
  CheckTree(&t, &store, &st);
  CHECK(st.entries == 50000);
  // Every full leaf split in two leaves random inserts about 70% full.
  INFO("fill " << st.used_bytes * 100.0 / st.capacity_bytes << "%");
  CHECK(st.used_bytes * 100 / st.capacity_bytes >= 76);
  for (int i = 0; i < 50000; i += 97) {
    std::string_view got;
    REQUIRE(t.Get(Key(i), &got).ok());
    CHECK(got == std::string(40 + i % 60, 'v'));
  }
}

TEST_CASE("large values go to overflow runs and are freed", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  std::string big(16u << 20, '\0');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>(i * 131 + (i >> 12));
  REQUIRE(t.Put("big", big).ok());
  REQUIRE(t.Put("small", "s").ok());
  std::string_view v;
  REQUIRE(t.Get("big", &v).ok());
  CHECK(v.size() == big.size());
  CHECK(v == big);
  TreeStats st;
  std::vector<storage::PageId> pages;
  REQUIRE(t.Verify(&pages, &st).ok());
  CHECK(st.overflow_pages == (big.size() + 24 + 4095) / 4096);
  CHECK(pages.size() == st.overflow_pages + 1);
  Commit(w.get(), &t);

  // Shrinking the value frees the run; the cursor sees the new one.
  w = store.BeginWrite();
  BTree t2(w.get(), store.root(0));
  std::string mid(10000, 'q');
  REQUIRE(t2.Put("big", mid).ok());
  BTree::Cursor c(&t2);
  REQUIRE(c.SeekToFirst().ok());
  CHECK(c.key() == "big");
  CHECK(c.value() == mid);
  Commit(w.get(), &t2);
  CHECK(store.LivePages().size() == 1 + 3);

  w = store.BeginWrite();
  BTree t3(w.get(), store.root(0));
  REQUIRE(t3.Delete("big").ok());
  Commit(w.get(), &t3);
  CHECK(store.LivePages().size() == 1);
}

TEST_CASE("cursor: a leaf's bytes hold its inline values, SkipLeaf passes the rest", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  const int n = 2000;
  std::vector<std::string> values(n);
  for (int i = 0; i < n; i++) {
    // Every 301st value is too large to stay in its leaf.
    values[i] = std::string(i % 301 == 0 ? 2000 : 20 + i % 90, static_cast<char>('a' + i % 26));
    REQUIRE(t.Put(Key(i), values[i]).ok());
  }
  BTree::Cursor c(&t);
  REQUIRE(c.SeekToFirst().ok());
  int seen = 0, leaves = 0, leaves_with_overflow = 0;
  while (c.Valid()) {
    bool all_inline;
    const std::string_view leaf = c.LeafBytes(&all_inline);
    leaves++;
    bool overflow = false;
    int in_leaf = 0;
    // Walk this leaf: every value is inside its bytes unless it overflowed.
    while (c.Valid()) {
      bool ignored;
      if (c.LeafBytes(&ignored).data() != leaf.data()) break;
      const std::string_view v = c.value();
      const bool inside =
          v.data() >= leaf.data() && v.data() + v.size() <= leaf.data() + leaf.size();
      CHECK(inside == (v.size() < 2000));
      overflow |= !inside;
      CHECK(v == values[seen]);
      seen++;
      in_leaf++;
      REQUIRE(c.Next().ok());
    }
    CHECK(all_inline == !overflow);
    leaves_with_overflow += overflow;
    (void)in_leaf;
  }
  CHECK(seen == n);
  CHECK(leaves > 20);
  CHECK(leaves_with_overflow > 0);
  CHECK(leaves_with_overflow < leaves);

  // SkipLeaf from the first entry of each leaf passes the whole leaf, and
  // the counts add up to every entry.
  REQUIRE(c.SeekToFirst().ok());
  uint64_t skipped_total = 0;
  int skips = 0;
  while (c.Valid()) {
    uint64_t skipped = 0;
    REQUIRE(c.SkipLeaf(&skipped).ok());
    CHECK(skipped > 0);
    skipped_total += skipped;
    skips++;
  }
  CHECK(skipped_total == static_cast<uint64_t>(n));
  CHECK(skips == leaves);
  // From the middle of a leaf: the current entry and those after it.
  REQUIRE(c.Seek(Key(1)).ok());
  uint64_t skipped = 0;
  REQUIRE(c.SkipLeaf(&skipped).ok());
  REQUIRE(c.Valid());
  CHECK(c.key() == Key(static_cast<int>(skipped) + 1));
  Commit(w.get(), &t);
}

TEST_CASE("drop frees every page", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  for (int i = 0; i < 3000; i++) {
    REQUIRE(t.Put(Key(i), std::string(i % 97 == 0 ? 9000 : 30, 'x')).ok());
  }
  Commit(w.get(), &t);
  w = store.BeginWrite();
  BTree t2(w.get(), store.root(0));
  REQUIRE(t2.Drop().ok());
  CHECK(t2.root() == 0);
  Commit(w.get(), &t2);
  CHECK(store.LivePages().empty());
}

TEST_CASE("abort discards changes and snapshots keep old values", "[btree]") {
  MemStore store;
  store.check_clean_pages = true;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0);
  for (int i = 0; i < 2000; i++) REQUIRE(t.Put(Key(i), "old").ok());
  Commit(w.get(), &t);

  auto r = store.BeginRead();
  w = store.BeginWrite();
  BTree tw(w.get(), store.root(0));
  for (int i = 0; i < 2000; i += 2) REQUIRE(tw.Put(Key(i), "new").ok());
  for (int i = 1; i < 2000; i += 4) REQUIRE(tw.Delete(Key(i)).ok());
  w->Abort();
  w = store.BeginWrite();
  BTree tw2(w.get(), store.root(0));
  std::string_view v;
  REQUIRE(tw2.Get(Key(2), &v).ok());
  CHECK(v == "old");
  for (int i = 0; i < 2000; i += 2) REQUIRE(tw2.Put(Key(i), "new").ok());
  Commit(w.get(), &tw2);

  BTree tr(r.get(), r->root(0));
  REQUIRE(tr.Get(Key(2), &v).ok());
  CHECK(v == "old");
  REQUIRE(tr.Verify(nullptr, nullptr).ok());
  auto r2 = store.BeginRead();
  BTree tr2(r2.get(), r2->root(0));
  REQUIRE(tr2.Get(Key(2), &v).ok());
  CHECK(v == "new");
}

int ReverseCmp(std::string_view a, std::string_view b) { return b.compare(a); }

TEST_CASE("custom comparator and cursor both ways", "[btree]") {
  MemStore store;
  auto w = store.BeginWrite();
  BTree t(w.get(), 0, ReverseCmp);
  for (int i = 0; i < 3000; i++) REQUIRE(t.Put(Key(i), Key(i)).ok());
  REQUIRE(t.Verify(nullptr, nullptr).ok());
  BTree::Cursor c(&t);
  REQUIRE(c.SeekToFirst().ok());
  int expect = 2999;
  while (c.Valid()) {
    REQUIRE(c.key() == Key(expect));
    expect--;
    REQUIRE(c.Next().ok());
  }
  CHECK(expect == -1);
  REQUIRE(c.SeekToLast().ok());
  expect = 0;
  while (c.Valid()) {
    REQUIRE(c.key() == Key(expect));
    expect++;
    REQUIRE(c.Prev().ok());
  }
  CHECK(expect == 3000);
  REQUIRE(c.Seek(Key(1500) + "x").ok());  // reverse order: next is 1500
  REQUIRE(c.Valid());
  CHECK(c.key() == Key(1500));
}

}  // namespace
}  // namespace mmdoc::index
