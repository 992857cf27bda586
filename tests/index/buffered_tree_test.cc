// index::BufferedTree: the overlay, the buffer and the BTree read as one
// tree. Unit cases for each layer and the BTree's errors, a randomized model
// test (write transactions, commits into the buffer, freezes, merges into
// the pages, readers at past snapshots kept open meanwhile), readers beside
// a publishing writer (run under TSan by CI: `ctest -R concurrency`), and a
// hidden scan-cost measurement ("[.bench]").
//
// Two trees as the engine has them: "c:coll" stores its keys through a
// KeyCodec (the buffer and the cursors order ordinary keys bytewise), and
// "i:coll\0field" has its own comparator (reverse bytewise).
//
// Replay a failure with MMDOC_TEST_SEED=<seed printed on stderr>; make it
// bigger with MMDOC_TEST_SCALE.
#include "index/buffered_tree.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "index/btree.h"
#include "index/write_buffer.h"
#include "tests/index/mem_txn.h"
#include "tests/support/test_env.h"

namespace mmdoc::index {
namespace {

using test::MemStore;
using test::MemTxn;

uint64_t Sized(uint64_t n) {
  return (mmdoc::test::kSanitized ? std::max<uint64_t>(n / 4, 1) : n) * mmdoc::test::Scale();
}

// A codec that stores "p" + 8 bytes as 0xFF + those bytes reversed, so the
// stored order differs from the ordinary one unless compared through it.
// Ordinary keys of the tests never begin with 0xFF.
size_t PackKey(std::string_view key, char* buf) {
  if (key.size() != 9 || key[0] != 'p') return 0;
  buf[0] = '\xff';
  for (int i = 0; i < 8; i++) buf[1 + i] = key[8 - i];
  return 9;
}
size_t UnpackKey(std::string_view stored, char* buf) {
  if (stored.size() != 9 || stored[0] != '\xff') return 0;
  buf[0] = 'p';
  for (int i = 0; i < 8; i++) buf[1 + i] = stored[8 - i];
  return 9;
}
int CompareStored(std::string_view a, std::string_view b) {
  char ba[9], bb[9];
  if (size_t n = UnpackKey(a, ba)) a = {ba, n};
  if (size_t n = UnpackKey(b, bb)) b = {bb, n};
  return a.compare(b);
}
const KeyCodec kCodec = {PackKey, UnpackKey, CompareStored};

int Reverse(std::string_view a, std::string_view b) { return b.compare(a); }

const std::string kNames[2] = {"c:coll", std::string("i:coll\0field", 12)};
Comparator OrderOf(int tree) { return tree == 0 ? nullptr : Reverse; }

std::unique_ptr<BTree> OpenTree(storage::Txn* txn, int tree) {
  if (tree == 0) return std::make_unique<BTree>(txn, txn->root(0), kCodec);
  return std::make_unique<BTree>(txn, txn->root(1), Reverse);
}

struct Less {
  Comparator order;
  bool operator()(const std::string& a, const std::string& b) const {
    return CompareKeys(order, a, b) < 0;
  }
};
using Model = std::map<std::string, std::string, Less>;

// For checks that also run on reader threads, where Catch2's assertions
// may not be used: the first failure is returned as a message instead.
#define BT_EXPECT(cond)                                                                 \
  do {                                                                                  \
    if (!(cond)) return ctx + ": " #cond " failed at line " + std::to_string(__LINE__); \
  } while (0)
#define BT_OK(expr)                                                                          \
  do {                                                                                       \
    Status s_ = (expr);                                                                      \
    if (!s_.ok())                                                                            \
      return ctx + ": " #expr ": " + s_.ToString() + " at line " + std::to_string(__LINE__); \
  } while (0)

// Compares a cursor over `t` with `want`: full scans both ways, and walks
// from random seeks that turn around. Returns "" or what failed.
std::string CheckScans(BufferedTree* t, const Model& want, std::mt19937_64* rng,
                       const std::string& ctx) {
  BufferedTree::Cursor c(t);
  BT_OK(c.SeekToFirst());
  for (const auto& [k, v] : want) {
    BT_EXPECT(c.Valid());
    BT_EXPECT(c.key() == k);
    BT_EXPECT(c.value() == v);
    BT_OK(c.Next());
  }
  BT_EXPECT(!c.Valid());
  BT_OK(c.SeekToLast());
  for (auto it = want.rbegin(); it != want.rend(); ++it) {
    BT_EXPECT(c.Valid());
    BT_EXPECT(c.key() == it->first);
    BT_EXPECT(c.value() == it->second);
    BT_OK(c.Prev());
  }
  BT_EXPECT(!c.Valid());
  std::vector<std::pair<std::string, std::string>> flat(want.begin(), want.end());
  for (int round = 0; round < 8; round++) {
    std::string target;
    if (!flat.empty() && (*rng)() % 2) {
      target = flat[(*rng)() % flat.size()].first;
      if ((*rng)() % 3 == 0) target.push_back('\0');  // just past a key
    } else {
      target = std::string(1 + (*rng)() % 4, static_cast<char>('0' + (*rng)() % 80));
    }
    BT_OK(c.Seek(target));
    size_t pos =
        std::lower_bound(flat.begin(), flat.end(), target,
                         [&](const std::pair<std::string, std::string>& e, const std::string& k) {
                           return want.key_comp()(e.first, k);
                         }) -
        flat.begin();
    for (int step = 0; step < 25; step++) {
      if (pos == flat.size()) {
        BT_EXPECT(!c.Valid());
        break;
      }
      BT_EXPECT(c.Valid());
      BT_EXPECT(c.key() == flat[pos].first);
      BT_EXPECT(c.value() == flat[pos].second);
      if ((*rng)() % 3 == 0) {
        BT_OK(c.Prev());
        if (pos == 0) {
          BT_EXPECT(!c.Valid());
          break;
        }
        pos--;
      } else {
        BT_OK(c.Next());
        pos++;
      }
    }
  }
  return "";
}

// A forward scan that calls SkipLeaf now and then (where the group's
// values are all inline, as the engine's filter does): it must visit
// entries of `want` in order with their values, and every entry it does not
// visit must have been passed over by a SkipLeaf from a BTree leaf whose
// bytes hold its value (so a filter that rejected those bytes rejected it
// rightly). Entries of newer layers are always visited.
std::string CheckSkips(BufferedTree* t, const Model& want, std::mt19937_64* rng,
                       const std::string& ctx) {
  BufferedTree::Cursor c(t);
  BT_OK(c.SeekToFirst());
  auto it = want.begin();
  std::optional<std::string> leaf;  // of the last SkipLeaf from a BTree leaf
  while (c.Valid()) {
    while (it != want.end() && want.key_comp()(it->first, std::string(c.key()))) {
      BT_EXPECT(leaf && leaf->find(it->second) != std::string::npos);
      ++it;
    }
    BT_EXPECT(it != want.end());
    BT_EXPECT(c.key() == it->first);
    BT_EXPECT(c.value() == it->second);
    ++it;
    bool all_inline;
    const std::string_view bytes = c.LeafBytes(&all_inline);
    if ((*rng)() % 4 != 0 || !all_inline) {
      BT_OK(c.Next());
      continue;
    }
    if (bytes.data() != c.value().data() || bytes.size() != c.value().size()) leaf = bytes;
    uint64_t skipped = 0;
    BT_OK(c.SkipLeaf(&skipped));
    BT_EXPECT(skipped >= 1);
  }
  for (; it != want.end(); ++it) BT_EXPECT(leaf && leaf->find(it->second) != std::string::npos);
  return "";
}

// A forward scan for the values that hold a random byte, as the engine's
// scan for a needle makes it: the buffer's entries without the byte passed
// over (RejectInBuffer), BTree and run leaves without it skipped, and every
// entry Hidden calls hidden stepped over. The tables start to select at the
// first Seek or after a few entries. It must find exactly the entries of
// `want` whose values hold the byte, in order, and nothing stale.
std::string CheckRejects(BufferedTree* t, const Model& want, std::mt19937_64* rng,
                         const std::string& where) {
  static constexpr size_t kAfter[] = {0, 0, 1, 2, 5, 20, BufferedTree::Cursor::kSelectAfter};
  const size_t select_after = kAfter[(*rng)() % std::size(kAfter)];
  const std::string ctx = where + " (select after " + std::to_string(select_after) + ")";
  const char needle = static_cast<char>((*rng)());
  auto holds = [needle](std::string_view bytes) {
    return bytes.find(needle) != std::string_view::npos;
  };
  Model expect{want.key_comp()};
  for (const auto& [k, v] : want)
    if (holds(v)) expect.emplace(k, v);
  BufferedTree::Cursor c(t);
  uint64_t rejected = 0;
  c.RejectInBuffer(holds, &rejected, select_after);
  Model got{want.key_comp()};
  std::string last;
  for (Status s = c.SeekToFirst();; s = c.Next()) {
    while (s.ok() && c.Valid()) {
      bool all_inline;
      const std::string_view bytes = c.LeafBytes(&all_inline);
      if (!all_inline || holds(bytes)) break;
      uint64_t skipped = 0;
      s = c.SkipLeaf(&skipped);
    }
    BT_OK(s);
    if (!c.Valid()) break;
    bool hidden = false;
    BT_OK(c.Hidden(&hidden));
    if (hidden || !holds(c.value())) continue;
    const std::string k(c.key());
    BT_EXPECT(got.empty() || want.key_comp()(last, k));
    auto it = want.find(k);
    BT_EXPECT(it != want.end());
    BT_EXPECT(c.value() == it->second);
    got.emplace(k, it->second);
    last = k;
  }
  BT_EXPECT(got == expect);
  if (expect.empty()) return "";
  // The same cursor from an earlier key, and backward from the end: tables
  // that began to select after a key walk from before it again.
  auto visible = [&](Model* m) -> std::string {
    bool hidden = false;
    BT_OK(c.Hidden(&hidden));
    if (!hidden && holds(c.value())) m->emplace(c.key(), c.value());
    return "";
  };
  const auto from = std::next(expect.begin(), static_cast<long>((*rng)() % expect.size()));
  Model again{want.key_comp()};
  for (Status s = c.Seek(from->first);; s = c.Next()) {
    BT_OK(s);
    if (!c.Valid()) break;
    BT_EXPECT(visible(&again).empty());
  }
  BT_EXPECT(again == Model(from, expect.end(), want.key_comp()));
  Model back{want.key_comp()};
  for (Status s = c.SeekToLast();; s = c.Prev()) {
    BT_OK(s);
    if (!c.Valid()) break;
    BT_EXPECT(visible(&back).empty());
  }
  BT_EXPECT(back == expect);
  return "";
}

// Point reads of keys in `want`, of `probes` (which may be absent) and of
// a random key.
std::string CheckGets(BufferedTree* t, const Model& want, const std::vector<std::string>& probes,
                      std::mt19937_64* rng, const std::string& ctx) {
  std::vector<std::string> keys = probes;
  for (int i = 0; i < 10 && !want.empty(); i++) {
    auto it = want.lower_bound(std::string(1, static_cast<char>((*rng)() % 128)));
    keys.push_back(it == want.end() ? want.begin()->first : it->first);
  }
  keys.push_back("zz-absent");
  for (const std::string& k : keys) {
    std::string_view got;
    Status s = t->Get(k, &got);
    auto it = want.find(k);
    if (it == want.end()) {
      BT_EXPECT(s.IsNotFound());
    } else {
      BT_OK(s);
      BT_EXPECT(got == it->second);
    }
  }
  return "";
}

#define REQUIRE_EMPTY(expr)        \
  do {                             \
    const std::string e_ = (expr); \
    INFO(e_);                      \
    REQUIRE(e_.empty());           \
  } while (0)

// The in-memory pages of both trees, with helpers to load them.
struct Pages {
  MemStore store;
  void Load(const std::vector<std::pair<std::string, std::string>>* entries) {
    auto w = store.BeginWrite();
    for (int tree = 0; tree < 2; tree++) {
      auto t = OpenTree(w.get(), tree);
      for (const auto& [k, v] : entries[tree]) REQUIRE(t->Put(k, v).ok());
      w->set_root(tree, t->root());
    }
    REQUIRE(w->Commit("", Durability::kNone).ok());
  }
};

BufferChange Change(int tree, std::string_view key, std::string_view value, bool erased,
                    bool was_live) {
  BufferChange c;
  c.tree = kNames[tree];
  c.key = key;
  c.value = value;
  c.erased = erased;
  c.was_live = was_live;
  return c;
}

TEST_CASE("buffered tree: reads look through the overlay, the generations and the pages",
          "[buffered_tree]") {
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2] = {
      {{"a", "A0"}, {"c", "C0"}, {"e", "E0"}, {"g", "G0"}}, {}};
  pages.Load(base);
  WriteBuffer wb;
  wb.Publish(1, {Change(0, "b", "B1", false, false), Change(0, "c", "", true, true)});
  REQUIRE(wb.Freeze() != nullptr);
  wb.Publish(2, {Change(0, "c", "C2", false, false), Change(0, "d", "D2", false, false)});

  auto r = pages.store.BeginRead();
  auto bt = OpenTree(r.get(), 0);
  const BufferView v1 = wb.View(1);
  const BufferView v2 = wb.View(2);
  BufferedTree at1(bt.get(), &v1, kNames[0], nullptr, false);
  BufferedTree at2(bt.get(), &v2, kNames[0], nullptr, false);
  std::string_view got;
  CHECK((at1.Get("c", &got).IsNotFound()));  // the tombstone hides the page's
  CHECK((at1.Get("d", &got).IsNotFound()));
  REQUIRE(at1.Get("b", &got).ok());
  CHECK(got == "B1");
  REQUIRE(at2.Get("c", &got).ok());
  CHECK(got == "C2");
  REQUIRE(at2.Get("a", &got).ok());
  CHECK(got == "A0");
  CHECK(at1.CountDelta() == 0);
  CHECK(at2.CountDelta() == 2);
  CHECK(at2.Put("x", "y").IsInvalidArgument());  // not writable
  CHECK(at2.Delete("a").IsInvalidArgument());

  // A write transaction on top of view 2.
  BufferedTree w(bt.get(), &v2, kNames[0], nullptr, true);
  CHECK(w.Empty());
  REQUIRE(w.Delete("e").ok());
  REQUIRE(w.Put("f", "F").ok());
  REQUIRE(w.Put("a", "A3", PutMode::kUpdate).ok());
  CHECK(w.Put("b", "no", PutMode::kInsert).IsAlreadyExists());  // live in the buffer
  CHECK(w.Put("c", "no", PutMode::kInsert).IsAlreadyExists());
  CHECK(w.Put("e", "no", PutMode::kUpdate).IsNotFound());  // deleted in the overlay
  CHECK(w.Delete("e").IsNotFound());
  CHECK(w.Get("e", &got).IsNotFound());
  REQUIRE(w.Get("a", &got).ok());
  CHECK(got == "A3");
  CHECK(w.CountDelta() == 2);  // 4 in pages + 2 = a b c d f g

  const Model want{{{"a", "A3"}, {"b", "B1"}, {"c", "C2"}, {"d", "D2"}, {"f", "F"}, {"g", "G0"}},
                   Less{nullptr}};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20; i++) REQUIRE_EMPTY(CheckScans(&w, want, &rng, "write"));
  REQUIRE_EMPTY(CheckSkips(&w, want, &rng, "write"));

  // Turning around on every kind of entry.
  BufferedTree::Cursor c(&w);
  REQUIRE(c.Seek("c").ok());
  CHECK(c.key() == "c");
  REQUIRE(c.Prev().ok());
  CHECK(c.key() == "b");
  REQUIRE(c.Next().ok());
  CHECK(c.key() == "c");
  REQUIRE(c.Next().ok());
  REQUIRE(c.Next().ok());
  CHECK(c.key() == "f");  // past the overlay's tombstone of e
  REQUIRE(c.Prev().ok());
  CHECK(c.key() == "d");
  REQUIRE(c.Seek("e").ok());
  CHECK(c.key() == "f");

  struct Seen {
    std::string key, value;
    bool erased, was_live;
  };
  std::vector<Seen> changes;
  w.ForEachChange([&](std::string_view k, std::string_view val, bool erased, bool was_live) {
    changes.push_back({std::string(k), std::string(val), erased, was_live});
  });
  REQUIRE(changes.size() == 3);
  // In the order first changed; sorted here.
  std::sort(changes.begin(), changes.end(),
            [](const Seen& x, const Seen& y) { return x.key < y.key; });
  CHECK((changes[0].key == "a" && changes[0].value == "A3" && !changes[0].erased &&
         changes[0].was_live));
  CHECK((changes[1].key == "e" && changes[1].erased && changes[1].was_live));
  CHECK((changes[2].key == "f" && changes[2].value == "F" && !changes[2].was_live));
  std::vector<BufferChange> out;
  w.AppendChanges(&out);
  REQUIRE(out.size() == 3);
  std::sort(out.begin(), out.end(),
            [](const BufferChange& x, const BufferChange& y) { return x.key < y.key; });
  CHECK(out[1].tree == kNames[0]);
  CHECK(out[1].key == "e");
  CHECK(out[1].erased);

  // Published, the commit reads the same through a new view.
  wb.Publish(3, out);
  const BufferView v3 = wb.View(3);
  BufferedTree at3(bt.get(), &v3, kNames[0], nullptr, false);
  REQUIRE_EMPTY(CheckScans(&at3, want, &rng, "after commit"));
  CHECK(at3.CountDelta() == 2);
  // The older reader still sees its snapshot.
  REQUIRE(at2.Get("e", &got).ok());
  CHECK(got == "E0");
}

TEST_CASE("buffered tree: Renew finds the tables that later commits and freezes made",
          "[buffered_tree]") {
  // A writer keeps its trees between transactions (Renew): a generation
  // that gained this tree's table since, a freeze and a drop must each show.
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2] = {{{"a", "A0"}}, {}};
  pages.Load(base);
  auto r = pages.store.BeginRead();
  auto bt = OpenTree(r.get(), 0);
  WriteBuffer wb;
  wb.Publish(1, {Change(1, "x", "X1", false, false)});  // another tree only
  BufferView v1 = wb.View(1);
  BufferedTree w(bt.get(), &v1, kNames[0], nullptr, true);
  w.Renew(&v1);  // a second transaction at the same state
  std::string_view got;
  CHECK(w.Get("b", &got).IsNotFound());

  wb.Publish(2, {Change(0, "b", "B2", false, false)});  // the same generation gains the table
  BufferView v2 = wb.View(2);
  w.Renew(&v2);
  REQUIRE(w.Get("b", &got).ok());
  CHECK(got == "B2");

  wb.Publish(3, {Change(0, "b", "B3", false, true)});  // same generations, same table
  BufferView v3 = wb.View(3);
  w.Renew(&v3);
  REQUIRE(w.Get("b", &got).ok());
  CHECK(got == "B3");

  std::shared_ptr<const BufferGeneration> g = wb.Freeze();
  REQUIRE(g != nullptr);
  wb.Publish(4, {Change(0, "c", "C4", false, false)});  // a new generation, newer
  BufferView v4 = wb.View(4);
  CHECK(v4.generations[0]->id() != g->id());
  w.Renew(&v4);
  REQUIRE(w.Get("c", &got).ok());
  REQUIRE(w.Get("b", &got).ok());
  CHECK(got == "B3");
  CHECK(w.CountDelta() == 2);

  REQUIRE(wb.Drop(g.get()).ok());  // as if merged: later views leave it out
  BufferView v5 = wb.View(4);
  w.Renew(&v5);
  CHECK(w.Get("b", &got).IsNotFound());  // these pages never got it
  REQUIRE(w.Get("c", &got).ok());
  CHECK(w.CountDelta() == 1);

  // As many generations as before, but other ones.
  std::shared_ptr<const BufferGeneration> g2 = wb.Freeze();
  REQUIRE(g2 != nullptr);
  wb.Publish(5, {Change(0, "d", "D5", false, false)});
  REQUIRE(wb.Drop(g2.get()).ok());
  BufferView v6 = wb.View(5);
  REQUIRE(v6.generations.size() == v5.generations.size());
  w.Renew(&v6);
  REQUIRE(w.Get("d", &got).ok());
  CHECK(w.Get("c", &got).IsNotFound());
  CHECK(w.CountDelta() == 1);
}

TEST_CASE("buffered tree: a writer's key filters are current until the buffer's change",
          "[buffered_tree]") {
  WriteBuffer wb;
  bool started = false;
  TreeFilters f = wb.FiltersForWrite(kNames[0], 10, &started);
  CHECK(started);
  CHECK(f.version == wb.filters_version());
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2] = {{}, {}};
  pages.Load(base);
  auto r = pages.store.BeginRead();
  auto bt = OpenTree(r.get(), 0);
  BufferView v = wb.View(0);
  BufferedTree w(bt.get(), &v, kNames[0], nullptr, true);
  CHECK_FALSE(w.FiltersCurrent(wb.filters_version()));  // none given yet
  w.UseFilters(f);
  CHECK(w.FiltersCurrent(wb.filters_version()));
  // Asking again changes nothing while one is building.
  TreeFilters again = wb.FiltersForWrite(kNames[0], 10, &started);
  CHECK_FALSE(started);
  CHECK(again.version == f.version);
  CHECK(w.FiltersCurrent(wb.filters_version()));
  // Another tree's start, a finished build and a drop each make it stale.
  const uint64_t before = wb.filters_version();
  wb.FiltersForWrite(kNames[1], 10, &started);
  CHECK(started);
  CHECK(wb.filters_version() != before);
  CHECK_FALSE(w.FiltersCurrent(wb.filters_version()));
  w.UseFilters(wb.FiltersForWrite(kNames[0], 10, &started));
  CHECK(w.FiltersCurrent(wb.filters_version()));
  REQUIRE(wb.FinishFilter(kNames[0], f.building.get(), 0));
  CHECK_FALSE(w.FiltersCurrent(wb.filters_version()));
  w.UseFilters(wb.FiltersForWrite(kNames[0], 10, &started));
  CHECK_FALSE(started);  // the ready one is not full
  CHECK(w.FiltersCurrent(wb.filters_version()));
  wb.DropFilters();
  CHECK_FALSE(w.FiltersCurrent(wb.filters_version()));
}

TEST_CASE("buffered tree: errors and limits are BTree's", "[buffered_tree]") {
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2] = {{{"k", "v"}}, {}};
  pages.Load(base);
  WriteBuffer wb;
  const BufferView view = wb.View(0);
  auto wtxn = pages.store.BeginWrite();  // a BTree to compare with
  BTree plain(wtxn.get(), wtxn->root(0), kCodec);
  auto r = pages.store.BeginRead();
  auto bt = OpenTree(r.get(), 0);
  BufferedTree t(bt.get(), &view, kNames[0], nullptr, true);

  const std::string long_key(kMaxKeySize + 1, 'k');
  const std::string max_key(kMaxKeySize, 'k');
  const std::string too_big(kMaxValueSize + 1, 'v');
  auto same = [](const Status& a, const Status& b) {
    INFO(a.ToString() << " vs " << b.ToString());
    CHECK(a.code() == b.code());
    CHECK(a.ToString() == b.ToString());
  };
  same(t.Put("", "v"), plain.Put("", "v"));
  same(t.Put(long_key, "v"), plain.Put(long_key, "v"));
  same(t.Put("k2", too_big), plain.Put("k2", too_big));
  same(t.Put("k", "x", PutMode::kInsert), plain.Put("k", "x", PutMode::kInsert));
  same(t.Put("nope", "x", PutMode::kUpdate), plain.Put("nope", "x", PutMode::kUpdate));
  same(t.Delete("nope"), plain.Delete("nope"));
  same(t.Delete(""), plain.Delete(""));
  same(t.Delete(long_key), plain.Delete(long_key));
  std::string_view a, b;
  same(t.Get("", &a), plain.Get("", &b));
  same(t.Get(long_key, &a), plain.Get(long_key, &b));
  same(t.Get("nope", &a), plain.Get("nope", &b));
  CHECK(t.Empty());  // errors change nothing
  CHECK(t.CountDelta() == 0);
  REQUIRE(t.Put(max_key, "m").ok());
  REQUIRE(t.Get(max_key, &a).ok());
  CHECK(a == "m");

  // A key inserted and deleted in one transaction leaves nothing behind; a
  // key deleted and inserted again keeps was_live.
  REQUIRE(t.Put("new", "1", PutMode::kInsert).ok());
  REQUIRE(t.Delete("new").ok());
  REQUIRE(t.Delete(max_key).ok());
  CHECK(t.Empty());
  REQUIRE(t.Delete("k").ok());
  CHECK(t.CountDelta() == -1);
  REQUIRE(t.Put("k", "again", PutMode::kInsert).ok());
  CHECK(t.CountDelta() == 0);
  int n = 0;
  t.ForEachChange([&](std::string_view k, std::string_view v, bool erased, bool was_live) {
    CHECK(k == "k");
    CHECK(v == "again");
    CHECK(!erased);
    CHECK(was_live);
    n++;
  });
  CHECK(n == 1);
}

TEST_CASE("buffered tree: a direct tree reads and writes the BTree itself", "[buffered_tree]") {
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2] = {{{"a", "1"}, {"c", "3"}}, {}};
  pages.Load(base);
  auto w = pages.store.BeginWrite();
  auto bt = OpenTree(w.get(), 0);
  BufferedTree t(bt.get());
  CHECK(t.direct());
  REQUIRE(t.Put("b", "2", PutMode::kInsert).ok());
  CHECK(t.Put("a", "x", PutMode::kInsert).IsAlreadyExists());
  REQUIRE(t.Delete("c").ok());
  CHECK(t.Delete("c").IsNotFound());
  CHECK(t.Put("", "v").IsInvalidArgument());
  CHECK(t.Empty());  // nothing held in an overlay: the BTree has it all
  CHECK(t.CountDelta() == 0);
  std::string_view v;
  REQUIRE(bt->Get("b", &v).ok());  // written through
  CHECK(v == "2");
  CHECK(bt->Get("c", &v).IsNotFound());
  std::vector<std::string> keys;
  BufferedTree::Cursor cur(&t);
  for (Status s = cur.SeekToFirst(); s.ok() && cur.Valid(); s = cur.Next())
    keys.emplace_back(cur.key());
  CHECK(keys == std::vector<std::string>{"a", "b"});
}

TEST_CASE("buffered tree: a cursor's Seek after a write sees the write", "[buffered_tree]") {
  // A write invalidates the tree's cursors and a Seek makes them valid
  // again: the overlay's layer must not keep the order it sorted before.
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2] = {{{"a", "A0"}, {"c", "C0"}}, {}};
  pages.Load(base);
  WriteBuffer wb;
  wb.Publish(1, {Change(0, "b", "B1", false, false)});
  auto r = pages.store.BeginRead();
  auto bt = OpenTree(r.get(), 0);
  const BufferView v = wb.View(1);
  BufferedTree t(bt.get(), &v, kNames[0], nullptr, true);
  REQUIRE(t.Put("d", "D").ok());
  BufferedTree::Cursor cur(&t);
  auto keys = [&](bool first) {
    std::vector<std::string> out;
    Status s = first ? cur.SeekToFirst() : cur.Seek("a");
    for (; s.ok() && cur.Valid(); s = cur.Next()) out.emplace_back(cur.key());
    REQUIRE(s.ok());
    return out;
  };
  CHECK(keys(true) == std::vector<std::string>{"a", "b", "c", "d"});
  REQUIRE(t.Delete("b").ok());
  REQUIRE(t.Delete("d").ok());
  REQUIRE(t.Put("e", "E").ok());
  CHECK(keys(false) == std::vector<std::string>{"a", "c", "e"});
  REQUIRE(t.Delete("c").ok());
  CHECK(keys(true) == std::vector<std::string>{"a", "e"});
  std::vector<std::string> back;
  Status s = cur.SeekToLast();
  for (; s.ok() && cur.Valid(); s = cur.Prev()) back.emplace_back(cur.key());
  REQUIRE(s.ok());
  CHECK(back == std::vector<std::string>{"e", "a"});
}

TEST_CASE("buffered tree: large values and many versions through every layer", "[buffered_tree]") {
  Pages pages;
  std::string big(100 << 10, '\0');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>(i * 7 + 1);
  std::vector<std::pair<std::string, std::string>> base[2] = {{{"big", big}, {"pkey00001", "p"}},
                                                              {}};
  pages.Load(base);
  WriteBuffer wb;
  std::string big2 = big;
  big2[12345] = 'X';
  uint64_t txid = 0;
  for (int i = 0; i < 500; i++) {
    std::string v = "v" + std::to_string(i);
    wb.Publish(++txid, {Change(0, "hot", v, false, i > 0)});
  }
  wb.Publish(++txid, {Change(0, "big2", big2, false, false)});
  auto r = pages.store.BeginRead();
  auto bt = OpenTree(r.get(), 0);
  const BufferView view = wb.View(txid);
  BufferedTree t(bt.get(), &view, kNames[0], nullptr, true);
  std::string big3 = big;
  big3[0] = 'Y';
  REQUIRE(t.Put("big3", big3, PutMode::kInsert).ok());
  const Model want{
      {{"big", big}, {"big2", big2}, {"big3", big3}, {"hot", "v499"}, {"pkey00001", "p"}},
      Less{nullptr}};
  std::mt19937_64 rng(5);
  REQUIRE_EMPTY(CheckScans(&t, want, &rng, "large"));
  REQUIRE_EMPTY(CheckGets(&t, want, {"big", "big2", "big3", "hot"}, &rng, "large"));
  for (uint64_t s = 1; s <= 500; s += 37) {
    const BufferView old = wb.View(s);
    BufferedTree at(bt.get(), &old, kNames[0], nullptr, false);
    std::string_view got;
    REQUIRE(at.Get("hot", &got).ok());
    CHECK(got == "v" + std::to_string(s - 1));
    CHECK(at.CountDelta() == 1);
  }
}

TEST_CASE("buffered tree: without buffered changes a cursor is the BTree's", "[buffered_tree]") {
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2];
  std::mt19937_64 rng(11);
  for (int i = 0; i < 3000; i++) {
    char k[16];
    std::snprintf(k, sizeof(k), i % 2 ? "p%08d" : "q%06d", i);  // half packed
    base[0].emplace_back(k, std::string(i % 50, static_cast<char>('a' + i % 26)));
    base[1].emplace_back(k, std::to_string(i));
  }
  pages.Load(base);
  WriteBuffer wb;
  // Another tree's changes do not make this one merge.
  wb.Publish(1, {Change(1, "zzz", "z", false, false)});
  auto r = pages.store.BeginRead();
  const BufferView view = wb.View(1);
  auto bt = OpenTree(r.get(), 0);
  auto plain = OpenTree(r.get(), 0);
  BufferedTree t(bt.get(), &view, kNames[0], nullptr, false);
  BTree::Cursor want(plain.get());
  BufferedTree::Cursor got(&t);
  REQUIRE(want.SeekToFirst().ok());
  REQUIRE(got.SeekToFirst().ok());
  size_t n = 0;
  while (want.Valid()) {
    REQUIRE(got.Valid());
    REQUIRE(got.key() == want.key());
    REQUIRE(got.value().data() == want.value().data());  // the page's bytes, not a copy
    bool a, b;
    REQUIRE(got.LeafBytes(&a).data() == want.LeafBytes(&b).data());
    REQUIRE(want.Next().ok());
    REQUIRE(got.Next().ok());
    n++;
  }
  REQUIRE(!got.Valid());
  CHECK(n == 3000);
  Model model{Less{nullptr}};
  for (const auto& [k, v] : base[0]) model[k] = v;
  REQUIRE_EMPTY(CheckScans(&t, model, &rng, "plain"));
  REQUIRE_EMPTY(CheckSkips(&t, model, &rng, "plain"));
  // The other tree merges its one buffered key (first in reverse order).
  auto bt1 = OpenTree(r.get(), 1);
  BufferedTree t1(bt1.get(), &view, kNames[1], Reverse, false);
  Model model1{Less{Reverse}};
  for (const auto& [k, v] : base[1]) model1[k] = v;
  model1["zzz"] = "z";
  REQUIRE_EMPTY(CheckScans(&t1, model1, &rng, "one buffered"));
  REQUIRE_EMPTY(CheckSkips(&t1, model1, &rng, "one buffered"));
}

TEST_CASE("buffered tree: SkipLeaf stops at buffered entries inside a leaf", "[buffered_tree]") {
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2];
  for (int i = 0; i < 4000; i += 2) {
    char k[16];
    std::snprintf(k, sizeof(k), "k%06d", i);
    base[0].emplace_back(k, "old" + std::to_string(i));
  }
  pages.Load(base);
  WriteBuffer wb;
  std::mt19937_64 rng(13);
  Model want{Less{nullptr}};
  for (const auto& [k, v] : base[0]) want[k] = v;
  std::vector<std::string> keep;  // the buffer's changes' bytes
  std::vector<BufferChange> ch;
  for (int i = 1; i < 4000; i += 1 + static_cast<int>(rng() % 60)) {
    char k[16];
    std::snprintf(k, sizeof(k), "k%06d", i);
    keep.emplace_back(k);
  }
  for (const std::string& k : keep) {
    const bool live = want.count(k) != 0;
    if (live && rng() % 3 == 0) {
      ch.push_back(Change(0, k, "", true, true));
      want.erase(k);
    } else {
      want[k] = "new" + k;
      ch.push_back(Change(0, k, want[k], false, live));
    }
  }
  wb.Publish(1, ch);
  auto r = pages.store.BeginRead();
  auto bt = OpenTree(r.get(), 0);
  const BufferView view = wb.View(1);
  BufferedTree t(bt.get(), &view, kNames[0], nullptr, true);
  for (int i = 0; i < 40; i++) {
    char k[16];
    std::snprintf(k, sizeof(k), "k%06d", static_cast<int>(rng() % 4000));
    if (want.count(k) && rng() % 2) {
      REQUIRE(t.Delete(k).ok());
      want.erase(k);
    } else {
      REQUIRE(t.Put(k, std::string("ovl") + k).ok());
      want[k] = std::string("ovl") + k;
    }
  }
  for (int i = 0; i < 30; i++) REQUIRE_EMPTY(CheckSkips(&t, want, &rng, "skips"));
  REQUIRE_EMPTY(CheckScans(&t, want, &rng, "skips"));
  // From the last entry backward, then SkipLeaf: forward again.
  BufferedTree::Cursor c(&t);
  REQUIRE(c.SeekToLast().ok());
  REQUIRE(c.Prev().ok());
  REQUIRE(c.Prev().ok());
  const std::string at(c.key());
  uint64_t skipped;
  REQUIRE(c.SkipLeaf(&skipped).ok());
  if (c.Valid()) CHECK(c.key() > at);
}

// --- the model ---

struct Version {
  uint64_t txid;
  bool erased;
  std::string value;
};

// Every change of every key of one tree, txid 0 being the initial pages.
struct History {
  std::map<std::string, std::vector<Version>> keys;
  const Version* Newest(const std::string& key, uint64_t s) const {
    auto it = keys.find(key);
    if (it == keys.end()) return nullptr;
    const Version* best = nullptr;
    for (const Version& v : it->second) {
      if (v.txid <= s) best = &v;
    }
    return best;
  }
  Model StateAt(uint64_t s, Comparator order) const {
    Model m{Less{order}};
    for (const auto& kv : keys) {
      const Version* v = Newest(kv.first, s);
      if (v != nullptr && !v->erased) m.emplace(kv.first, v->value);
    }
    return m;
  }
};

class TreeModel {
 public:
  explicit TreeModel(uint64_t seed) : rng_(seed) {}

  void Run(uint64_t txns) {
    Load();
    for (uint64_t i = 0; i < txns; i++) {
      WriteTxn();
      if (rng_() % 12 == 0) {
        auto g = wb_.Freeze();
        freezes_ += g != nullptr;
      }
      auto frozen = wb_.Frozen();
      if (frozen.size() > 2 || (!frozen.empty() && rng_() % 6 == 0)) MergeOldest();
      if (rng_() % 4 == 0) OpenReader();
      if (readers_.size() > 5) readers_.erase(readers_.begin() + rng_() % readers_.size());
      if (rng_() % 3 == 0) {
        for (auto& rd : readers_) CheckReader(rd.get());
      }
    }
    while (!wb_.Frozen().empty()) MergeOldest();
    auto g = wb_.Freeze();
    if (g != nullptr) MergeOldest();
    OpenReader();
    for (auto& rd : readers_) CheckReader(rd.get());
    std::fprintf(
        stderr,
        "buffered tree model: %llu txns (%llu committed), %llu freezes, %llu merges, "
        "%llu reader checks, %llu ops\n",
        static_cast<unsigned long long>(txns), static_cast<unsigned long long>(last_),
        static_cast<unsigned long long>(freezes_), static_cast<unsigned long long>(merges_),
        static_cast<unsigned long long>(reader_checks_), static_cast<unsigned long long>(ops_));
  }

 private:
  struct Reader {
    uint64_t snapshot;
    std::unique_ptr<MemTxn> txn;
    std::unique_ptr<BTree> trees[2];
    BufferView view;
    std::unique_ptr<BufferedTree> bt[2];
    std::optional<Model> want[2];
    int64_t pages_count[2];
  };

  std::string RandomKey(int tree) {
    const uint32_t r = rng_() % 1000;
    if (r < 4) return std::string(kMaxKeySize - rng_() % 2, static_cast<char>('a' + rng_() % 3));
    const uint64_t id = rng_() % 1500;
    char buf[16];
    if (tree == 0 && id % 3 == 0) {  // packed by the codec
      std::snprintf(buf, sizeof(buf), "p%08llu", static_cast<unsigned long long>(id));
      return buf;
    }
    std::string k(1 + id % 11, static_cast<char>('A' + id % 40));
    k += std::to_string(id);
    if (id % 17 == 0) k[0] = '\0';
    return k;
  }
  std::string RandomValue() {
    const uint32_t r = rng_() % 1000;
    const size_t len = r < 650   ? rng_() % 24
                       : r < 990 ? 24 + rng_() % 400
                       : r < 998 ? 3000
                                 : 100 << 10;
    std::string v(len, static_cast<char>(rng_()));
    for (size_t i = 0; i < len; i += 13) v[i] = static_cast<char>(rng_());
    return v;
  }

  void Load() {
    std::vector<std::pair<std::string, std::string>> base[2];
    for (int tree = 0; tree < 2; tree++) {
      for (int i = 0; i < 900; i++) {
        std::string k = RandomKey(tree);
        if (hist_[tree].keys.count(k)) continue;
        std::string v = RandomValue();
        hist_[tree].keys[k].push_back({0, false, v});
        base[tree].emplace_back(k, v);
      }
    }
    auto w = pages_.store.BeginWrite();
    for (int tree = 0; tree < 2; tree++) {
      auto t = OpenTree(w.get(), tree);
      for (const auto& [k, v] : base[tree]) REQUIRE(t->Put(k, v, PutMode::kInsert).ok());
      w->set_root(tree, t->root());
    }
    REQUIRE(w->Commit("", Durability::kNone).ok());
  }

  // The key of a random existing entry of `m`, or a random key.
  std::string SomeKey(const Model& m, int tree) {
    if (m.empty() || rng_() % 3 == 0) return RandomKey(tree);
    auto it = m.lower_bound(RandomKey(tree));
    return it == m.end() ? m.begin()->first : it->first;
  }

  void WriteTxn() {
    auto txn = pages_.store.BeginRead();  // the overlay never writes pages
    const BufferView view = wb_.View(last_);
    std::unique_ptr<BTree> trees[2];
    std::unique_ptr<BufferedTree> bt[2];
    Model before[2] = {hist_[0].StateAt(last_, OrderOf(0)), hist_[1].StateAt(last_, OrderOf(1))};
    Model m[2] = {before[0], before[1]};
    const int64_t pages_count[2] = {Count(0, merged_), Count(1, merged_)};
    for (int tree = 0; tree < 2; tree++) {
      trees[tree] = OpenTree(txn.get(), tree);
      bt[tree] = std::make_unique<BufferedTree>(trees[tree].get(), &view, kNames[tree],
                                                OrderOf(tree), true);
    }
    const std::string ctx = "txn after " + std::to_string(last_);
    const int ops = 1 + rng_() % (rng_() % 10 == 0 ? 200 : 25);
    for (int i = 0; i < ops; i++) {
      ops_++;
      const int tree = rng_() % 3 == 0 ? 1 : 0;
      BufferedTree* t = bt[tree].get();
      Model& mm = m[tree];
      const uint32_t op = rng_() % 100;
      if (op < 40) {
        std::string k = SomeKey(mm, tree);
        const auto mode = static_cast<PutMode>(rng_() % 3);
        std::string v = RandomValue();
        const bool live = mm.count(k) != 0;
        Status s = t->Put(k, v, mode);
        INFO(ctx << " put " << static_cast<int>(mode) << " " << s.ToString());
        if (mode == PutMode::kInsert && live) {
          REQUIRE(s.IsAlreadyExists());
        } else if (mode == PutMode::kUpdate && !live) {
          REQUIRE(s.IsNotFound());
        } else {
          REQUIRE(s.ok());
          mm[k] = v;
        }
      } else if (op < 62) {
        std::string k = SomeKey(mm, tree);
        Status s = t->Delete(k);
        INFO(ctx << " delete " << s.ToString());
        if (mm.erase(k)) {
          REQUIRE(s.ok());
        } else {
          REQUIRE(s.IsNotFound());
        }
      } else if (op < 85) {
        std::string k = SomeKey(mm, tree);
        std::string_view got;
        Status s = t->Get(k, &got);
        auto it = mm.find(k);
        INFO(ctx << " get " << s.ToString());
        if (it == mm.end()) {
          REQUIRE(s.IsNotFound());
        } else {
          REQUIRE(s.ok());
          REQUIRE(got == it->second);
        }
      } else if (op < 88) {
        CHECK(t->Put("", "x").IsInvalidArgument());
        CHECK(t->Put(std::string(kMaxKeySize + 1, 'x'), "x").IsInvalidArgument());
      } else if (op < 95) {
        REQUIRE(pages_count[tree] + t->CountDelta() == static_cast<int64_t>(mm.size()));
      } else if (op < 98) {
        REQUIRE_EMPTY(CheckScans(t, mm, &rng_, ctx));
      } else {
        REQUIRE_EMPTY(CheckRejects(t, mm, &rng_, ctx));
      }
    }
    if (rng_() % 10 == 0) return;  // abort: the overlay is dropped

    // The overlay's changes must turn `before` into `m`, with was_live.
    std::vector<BufferChange> changes;
    for (int tree = 0; tree < 2; tree++) {
      size_t n = 0;
      bt[tree]->ForEachChange(
          [&](std::string_view k, std::string_view v, bool erased, bool was_live) {
            const std::string key(k);
            REQUIRE(was_live == (before[tree].count(key) != 0));
            auto it = m[tree].find(key);
            REQUIRE(erased == (it == m[tree].end()));
            if (!erased) REQUIRE(v == it->second);
            REQUIRE(!(erased && !was_live));  // such a tombstone is left out
            n++;
          });
      // Every key whose state changed is among them.
      size_t differ = 0;
      for (const auto& [k, v] : m[tree]) {
        auto b = before[tree].find(k);
        differ += b == before[tree].end() || b->second != v;
      }
      for (const auto& [k, v] : before[tree]) differ += m[tree].count(k) == 0;
      REQUIRE(differ <= n);
      REQUIRE(bt[tree]->Empty() == (n == 0));
      bt[tree]->AppendChanges(&changes);
    }
    const uint64_t txid = ++last_;
    wb_.Publish(txid, changes);
    for (const BufferChange& c : changes) {
      const int tree = c.tree == kNames[0] ? 0 : 1;
      hist_[tree].keys[std::string(c.key)].push_back({txid, c.erased, std::string(c.value)});
    }
  }

  int64_t Count(int tree, uint64_t s) const {
    return static_cast<int64_t>(hist_[tree].StateAt(s, OrderOf(tree)).size());
  }

  // Merges the oldest frozen generation into the pages, as the engine's
  // merger would: each table in key order, the newest change of each key.
  void MergeOldest() {
    auto frozen = wb_.Frozen();
    if (frozen.empty()) return;
    const auto& g = frozen.front();
    auto w = pages_.store.BeginWrite();
    for (const auto& [name, table] : g->Tables()) {
      const int tree = name == kNames[0] ? 0 : 1;
      auto t = OpenTree(w.get(), tree);
      BufferTable::Iterator it(table, UINT64_MAX, OrderOf(tree));
      for (it.SeekToFirst(); it.Valid(); it.Next()) {
        Status s =
            it.version()->erased() ? t->Delete(it.key()) : t->Put(it.key(), it.version()->value());
        INFO(s.ToString());
        REQUIRE((s.ok() || (it.version()->erased() && s.IsNotFound())));
      }
      w->set_root(tree, t->root());
    }
    REQUIRE(w->Commit("", Durability::kNone).ok());
    merged_ = g->last_txid();
    REQUIRE(wb_.Drop(g.get()).ok());
    merges_++;
    // The pages now hold exactly the state at merged_.
    auto r = pages_.store.BeginRead();
    for (int tree = 0; tree < 2; tree++) {
      auto t = OpenTree(r.get(), tree);
      std::vector<storage::PageId> ids;
      TreeStats st;
      REQUIRE(t->Verify(&ids, &st).ok());
      REQUIRE(static_cast<int64_t>(st.entries) == Count(tree, merged_));
    }
  }

  // A reader at a random snapshot the current pages allow (>= merged_).
  void OpenReader() {
    auto rd = std::make_unique<Reader>();
    rd->snapshot = merged_ + rng_() % (last_ - merged_ + 1);
    rd->txn = pages_.store.BeginRead();
    rd->view = wb_.View(rd->snapshot);
    for (int tree = 0; tree < 2; tree++) {
      rd->trees[tree] = OpenTree(rd->txn.get(), tree);
      rd->bt[tree] = std::make_unique<BufferedTree>(rd->trees[tree].get(), &rd->view, kNames[tree],
                                                    OrderOf(tree), false);
      rd->pages_count[tree] = Count(tree, merged_);
    }
    readers_.push_back(std::move(rd));
  }

  void CheckReader(Reader* rd) {
    reader_checks_++;
    for (int tree = 0; tree < 2; tree++) {
      if (!rd->want[tree]) rd->want[tree] = hist_[tree].StateAt(rd->snapshot, OrderOf(tree));
      const Model& want = *rd->want[tree];
      BufferedTree* t = rd->bt[tree].get();
      const std::string ctx = "reader at " + std::to_string(rd->snapshot) + " tree " +
                              std::to_string(tree) + " (last " + std::to_string(last_) + ")";
      INFO(ctx);
      REQUIRE(rd->pages_count[tree] + t->CountDelta() == static_cast<int64_t>(want.size()));
      std::vector<std::string> probes;
      for (int i = 0; i < 10; i++) probes.push_back(RandomKey(tree));
      REQUIRE_EMPTY(CheckGets(t, want, probes, &rng_, ctx));
      REQUIRE_EMPTY(CheckScans(t, want, &rng_, ctx));
      if (rng_() % 4 == 0) REQUIRE_EMPTY(CheckSkips(t, want, &rng_, ctx));
      if (rng_() % 2 == 0) REQUIRE_EMPTY(CheckRejects(t, want, &rng_, ctx));
    }
  }

  std::mt19937_64 rng_;
  Pages pages_;
  WriteBuffer wb_;
  History hist_[2];
  uint64_t last_ = 0;    // the last commit
  uint64_t merged_ = 0;  // the pages hold every commit <= merged_
  std::vector<std::unique_ptr<Reader>> readers_;
  uint64_t freezes_ = 0, merges_ = 0, reader_checks_ = 0, ops_ = 0;
};

TEST_CASE("buffered tree model: transactions, commits, merges and old readers against a history",
          "[buffered_tree]") {
  const uint64_t seed = mmdoc::test::Seed("buffered tree model");
  TreeModel m(seed);
  m.Run(Sized(400));
}

TEST_CASE("concurrency: write buffer under buffered-tree readers of a BTree at older snapshots",
          "[buffered_tree][concurrency]") {
  const uint64_t seed = mmdoc::test::Seed("buffered tree concurrency");
  std::mt19937_64 rng(seed);
  // Pages that do not change, a reader txn per thread made up front (the
  // in-memory store is not thread-safe; its read txns are independent).
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2];
  History hist;
  for (int i = 0; i < 600; i++) {
    char k[16];
    std::snprintf(k, sizeof(k), i % 2 ? "p%08d" : "k%d", i * 3);
    base[0].emplace_back(k, "base" + std::to_string(i));
    hist.keys[k].push_back({0, false, base[0].back().second});
  }
  pages.Load(base);
  const int kReaders = 3;
  std::vector<std::unique_ptr<MemTxn>> txns;
  for (int i = 0; i < kReaders; i++) txns.push_back(pages.store.BeginRead());

  // The writer's script, made first so the readers can check against it.
  const uint64_t n = Sized(1500);
  std::vector<std::vector<std::pair<std::string, std::optional<std::string>>>> script(n + 1);
  std::vector<int64_t> live_count(n + 1);
  Model state = hist.StateAt(0, nullptr);
  live_count[0] = static_cast<int64_t>(state.size());
  std::vector<std::vector<bool>> was_live(n + 1);
  for (uint64_t txid = 1; txid <= n; txid++) {
    const int m = 1 + rng() % 10;
    for (int i = 0; i < m; i++) {
      char k[16];
      const int id = static_cast<int>(rng() % 2400);
      std::snprintf(k, sizeof(k), id % 2 ? "p%08d" : "k%d", id);
      const bool live = state.count(k) != 0;
      std::optional<std::string> v;
      if (!live || rng() % 3 != 0) v = "t" + std::to_string(txid) + "-" + std::to_string(i);
      if (!v && !live) continue;
      script[txid].emplace_back(k, v);
      was_live[txid].push_back(live);
      hist.keys[k].push_back({txid, !v, v ? *v : ""});
      if (v) {
        state[k] = *v;
      } else {
        state.erase(k);
      }
    }
    live_count[txid] = static_cast<int64_t>(state.size());
  }

  WriteBuffer wb;
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> checks{0};
  std::atomic<bool> done{false};
  std::mutex err_mu;
  std::string error;
  std::atomic<bool> failed{false};
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> l(err_mu);
    if (error.empty()) error = what;
    failed.store(true);
  };
  std::thread writer([&] {
    for (uint64_t txid = 1; txid <= n; txid++) {
      std::vector<BufferChange> ch;
      for (size_t i = 0; i < script[txid].size(); i++) {
        const auto& [k, v] = script[txid][i];
        // (a view of *v: `v ? *v : ""` would be a temporary string)
        const std::string_view value = v ? std::string_view(*v) : std::string_view();
        ch.push_back(Change(0, k, value, !v, was_live[txid][i]));
      }
      wb.Publish(txid, ch);
      published.store(txid, std::memory_order_release);
      if (txid % 97 == 0) wb.Freeze();  // no merges: the pages stay as they are
      // Let the readers keep up, so that they overlap the writer.
      while (checks.load() < txid / 20 && !failed.load()) std::this_thread::yield();
    }
    done.store(true);
  });
  auto reader = [&](int id) {
    std::mt19937_64 r(seed + 100 + id);
    auto bt = OpenTree(txns[id].get(), 0);
    // A view kept over many rounds, read while the writer goes on.
    std::optional<BufferView> kept;
    do {
      const uint64_t last = published.load(std::memory_order_acquire);
      BufferView v = wb.View(last - r() % (last + 1) / (r() % 2 ? 1 : 8));
      for (const BufferView* view : {&v, kept ? &*kept : nullptr}) {
        if (view == nullptr) continue;
        const uint64_t s = view->snapshot;
        const std::string ctx = "reader " + std::to_string(id) + " at " + std::to_string(s);
        BufferedTree t(bt.get(), view, kNames[0], nullptr, false);
        const Model want = hist.StateAt(s, nullptr);
        std::string err;
        if (live_count[0] + t.CountDelta() != live_count[s]) err = ctx + ": count";
        if (err.empty()) err = CheckGets(&t, want, {"k3", "p00000001", "k0"}, &r, ctx);
        if (err.empty()) err = CheckScans(&t, want, &r, ctx);
        if (!err.empty()) {
          fail(err);
          return;
        }
      }
      if (!kept || r() % 8 == 0) kept = v;
      checks++;
    } while (!done.load());
  };
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; i++) readers.emplace_back(reader, i);
  writer.join();
  for (auto& t : readers) t.join();
  std::fprintf(stderr, "buffered tree concurrency: %llu commits, %llu reader checks\n",
               static_cast<unsigned long long>(n), static_cast<unsigned long long>(checks.load()));
  INFO(error);
  REQUIRE(error.empty());
}

// Not run by default: `index_tests "[.bench]"` in a Release build. A scan
// of a tree with no buffered changes through BufferedTree::Cursor against
// BTree::Cursor, and, for scale, the same scan with a small buffer in
// front and with every key buffered.
TEST_CASE("buffered tree: scan cost with and without buffered changes", "[.][bench]") {
  Pages pages;
  std::vector<std::pair<std::string, std::string>> base[2];
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    char k[16];
    std::snprintf(k, sizeof(k), "k%08d", i);
    base[0].emplace_back(k, std::string(100, static_cast<char>('a' + i % 26)));
  }
  pages.Load(base);
  auto r = pages.store.BeginRead();
  auto bt = OpenTree(r.get(), 0);
  using Clock = std::chrono::steady_clock;
  auto time_scan = [&](auto make_cursor) {
    double best = 1e30;
    uint64_t sum = 0;
    for (int round = 0; round < 7; round++) {
      auto t0 = Clock::now();
      auto c = make_cursor();
      REQUIRE(c->SeekToFirst().ok());
      size_t k = 0;
      while (c->Valid()) {
        sum += c->value().size() + static_cast<uint8_t>(c->key()[1]);
        REQUIRE(c->Next().ok());
        k++;
      }
      REQUIRE(k >= static_cast<size_t>(n));
      best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
    }
    REQUIRE(sum > 0);
    return best / n;
  };
  WriteBuffer wb;
  const BufferView empty = wb.View(0);
  BufferedTree plain(bt.get(), &empty, kNames[0], nullptr, false);
  const double btree = time_scan([&] { return std::make_unique<BTree::Cursor>(bt.get()); });
  const double buffered = time_scan([&] { return std::make_unique<BufferedTree::Cursor>(&plain); });
  std::vector<std::string> keys;
  for (int i = 0; i < n; i += 1000) keys.push_back("k" + std::to_string(i) + "x");
  std::vector<BufferChange> ch;
  for (const auto& k : keys) ch.push_back(Change(0, k, "v", false, false));
  wb.Publish(1, ch);
  const BufferView some = wb.View(1);
  BufferedTree few(bt.get(), &some, kNames[0], nullptr, false);
  const double merged = time_scan([&] { return std::make_unique<BufferedTree::Cursor>(&few); });
  std::fprintf(stderr,
               "scan of %d entries, ns per entry (best of 7): BTree::Cursor %.1f, "
               "BufferedTree::Cursor with an empty buffer %.1f (%+.1f%%), with %zu buffered "
               "keys (merging) %.1f\n",
               n, btree, buffered, 100.0 * (buffered - btree) / btree, keys.size(), merged);
}

}  // namespace
}  // namespace mmdoc::index
