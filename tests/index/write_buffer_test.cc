// index::WriteBuffer: versions at snapshots, count deltas, generations,
// iterators, a randomized model test, and one writer publishing beside
// readers and a merger (run under TSan by CI: `ctest -R concurrency`).
//
// The model is a history per tree: every change of every key with its
// txid. What a snapshot S sees of a key is its newest change <= S; what a
// generation's table holds at S is, per key, its newest change in the
// generation's txid range up to S.
//
// Replay a failure with MMDOC_TEST_SEED=<seed printed on stderr>; make it
// bigger with MMDOC_TEST_SCALE.
#include "index/write_buffer.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_env.h"

namespace mmdoc::index {
namespace {

uint64_t Sized(uint64_t n) {
  return (test::kSanitized ? std::max<uint64_t>(n / 4, 1) : n) * test::Scale();
}

const std::string kTrees[2] = {"c:coll", std::string("i:coll\0field", 12)};

BufferChange Put(std::string_view tree, std::string_view key, std::string_view value,
                 bool was_live) {
  BufferChange c;
  c.tree = tree;
  c.key = key;
  c.value = value;
  c.was_live = was_live;
  return c;
}

BufferChange Erase(std::string_view tree, std::string_view key, bool was_live = true) {
  BufferChange c;
  c.tree = tree;
  c.key = key;
  c.erased = true;
  c.was_live = was_live;
  return c;
}

// Every key an Iterator yields with its version, walking forward.
std::vector<std::pair<std::string, const BufferVersion*>> Scan(const BufferTable* t, uint64_t s,
                                                               Comparator order = nullptr) {
  std::vector<std::pair<std::string, const BufferVersion*>> out;
  BufferTable::Iterator it(t, s, order);
  for (it.SeekToFirst(); it.Valid(); it.Next()) out.emplace_back(it.key(), it.version());
  return out;
}

std::vector<std::string> Keys(const BufferTable* t, uint64_t s, Comparator order = nullptr) {
  std::vector<std::string> out;
  for (auto& [k, v] : Scan(t, s, order)) out.push_back(k);
  return out;
}

TEST_CASE("write buffer: a snapshot sees each key's newest change at or before it",
          "[write_buffer]") {
  WriteBuffer wb;
  const std::string& c = kTrees[0];
  wb.Publish(3, {Put(c, "a", "a3", false), Put(c, "b", "b3", false)});
  wb.Publish(5, {Put(c, "a", "a5", true), Erase(c, "b")});
  wb.Publish(8, {Put(c, "b", "b8", false), Put(c, "c", "c8", false)});
  REQUIRE(wb.last_txid() == 8);

  BufferView v = wb.View(8);
  REQUIRE(v.generations.size() == 1);
  const BufferTable* t = v.generations[0]->Find(c);
  REQUIRE(t != nullptr);
  CHECK(v.generations[0]->Find(kTrees[1]) == nullptr);
  CHECK(t->first_txid() == 3);
  CHECK(t->last_txid() == 8);
  CHECK(t->keys() == 3);
  CHECK(t->changes() == 6);

  CHECK(t->Find("a", 2) == nullptr);
  CHECK(t->Find("a", 3)->value() == "a3");
  CHECK(t->Find("a", 4)->value() == "a3");
  CHECK(t->Find("a", 5)->value() == "a5");
  CHECK(t->Find("a", 100)->value() == "a5");
  CHECK(t->Find("a", 5)->older()->value() == "a3");
  CHECK(t->Find("a", 5)->older()->older() == nullptr);
  CHECK(t->Find("b", 4)->value() == "b3");
  CHECK(t->Find("b", 5)->erased());
  CHECK(t->Find("b", 5)->value().empty());
  CHECK(t->Find("b", 7)->txid() == 5);
  CHECK(t->Find("b", 8)->value() == "b8");
  CHECK(t->Find("c", 7) == nullptr);
  CHECK(t->Find("zz", 100) == nullptr);

  // Live keys: {a,b} at 3..4, {a} at 5..7, {a,b,c} from 8.
  CHECK(t->CountDelta(2) == 0);
  CHECK(t->CountDelta(3) == 2);
  CHECK(t->CountDelta(4) == 2);
  CHECK(t->CountDelta(5) == 1);
  CHECK(t->CountDelta(7) == 1);
  CHECK(t->CountDelta(8) == 3);
  CHECK(wb.View(6).CountDelta(c) == 1);

  // Iterators see keys with a change at the snapshot, tombstones included.
  CHECK(Keys(t, 2).empty());
  CHECK(Keys(t, 4) == std::vector<std::string>{"a", "b"});
  auto at5 = Scan(t, 5);
  REQUIRE(at5.size() == 2);
  CHECK(at5[1].second->erased());
  CHECK(Keys(t, 8) == std::vector<std::string>{"a", "b", "c"});

  // A view leaves out what it cannot see.
  CHECK(wb.View(2).generations.empty());
  CHECK(wb.View(2).Find(c, "a") == nullptr);
  CHECK(wb.View(4).Find(c, "a")->value() == "a3");
}

TEST_CASE("write buffer: many versions of one key", "[write_buffer]") {
  WriteBuffer wb;
  const std::string& c = kTrees[0];
  const uint64_t n = Sized(20000);
  bool live = false;
  for (uint64_t t = 1; t <= n; t++) {
    std::string v = "v" + std::to_string(t);
    if (t % 7 == 0) {
      wb.Publish(t, {Erase(c, "key", live)});
      live = false;
    } else {
      wb.Publish(t, {Put(c, "key", v, live)});
      live = true;
    }
  }
  BufferView view = wb.View(n);
  const BufferTable* t = view.generations[0]->Find(c);
  REQUIRE(t->keys() == 1);
  REQUIRE(t->changes() == n);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 300; i++) {
    uint64_t s = 1 + rng() % n;
    const BufferVersion* v = t->Find("key", s);
    REQUIRE(v != nullptr);
    REQUIRE(v->txid() == s);
    REQUIRE(v->erased() == (s % 7 == 0));
    if (!v->erased()) REQUIRE(v->value() == "v" + std::to_string(s));
    REQUIRE(t->CountDelta(s) == (s % 7 == 0 ? 0 : 1));
    BufferTable::Iterator it(t, s);
    it.Seek("key");
    REQUIRE(it.Valid());
    REQUIRE(it.version() == v);
    it.Next();
    REQUIRE(!it.Valid());
  }
  // The chain holds every version, newest first.
  uint64_t expect = n;
  for (const BufferVersion* v = t->Find("key", n); v != nullptr; v = v->older()) {
    REQUIRE(v->txid() == expect--);
  }
  REQUIRE(expect == 0);
}

TEST_CASE("write buffer: large values and memory accounting", "[write_buffer]") {
  WriteBuffer wb;
  const std::string& c = kTrees[0];
  std::string big(100 << 10, '\0');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>(i * 131 + 7);
  std::string huge(3 << 20, 'h');
  std::string long_key(kMaxKeySize, 'k');
  wb.Publish(1, {Put(c, "big", big, false), Put(c, long_key, "x", false)});
  wb.Publish(2, {Put(c, "huge", huge, false), Put(c, "empty", "", false)});
  BufferView v = wb.View(2);
  CHECK(v.Find(c, "big")->value() == big);
  CHECK(v.Find(c, "huge")->value() == huge);
  CHECK(v.Find(c, long_key)->value() == "x");
  CHECK(v.Find(c, "empty")->value().empty());
  CHECK(!v.Find(c, "empty")->erased());
  const size_t bytes = v.generations[0]->bytes();
  CHECK(bytes >= big.size() + huge.size() + long_key.size());
  CHECK(bytes < 2 * (big.size() + huge.size()) + (1 << 20));
  CHECK(wb.active_bytes() == bytes);
  CHECK(v.generations[0]->Find(c)->bytes() == bytes);
}

TEST_CASE("write buffer: a generation sizes its hash index by the one before it",
          "[write_buffer]") {
  // The first generation's index grows by doubling and keeps its smaller
  // arrays for readers; the next starts at the size the same keys need.
  WriteBuffer wb;
  const std::string& c = kTrees[0];
  auto fill = [&](uint64_t first_txid, const std::string& prefix) {
    for (int i = 0; i < 5000; i++) {
      wb.Publish(first_txid + static_cast<uint64_t>(i),
                 {Put(c, prefix + std::to_string(i), "v", false)});
    }
  };
  fill(1, "a");
  std::shared_ptr<const BufferGeneration> first = wb.Freeze();
  REQUIRE(first != nullptr);
  const size_t grown = first->Find(c)->bytes();
  fill(10001, "b");
  BufferView v = wb.View(20000);
  REQUIRE(v.generations.size() == 2);
  const BufferTable* second = v.generations[0]->Find(c);
  CHECK(second->keys() == 5000);
  CHECK(v.Find(c, "b4999") != nullptr);
  CHECK(v.Find(c, "a4999") != nullptr);
  // 16384 slots of 10 bytes: the grown one also holds 8192 + 4096 + ...
  CHECK(grown - second->bytes() >= 150000);
  // A tree the generation before never changed starts small.
  wb.Publish(20001, {Put(kTrees[1], "k", "v", false)});
  WriteBuffer fresh;
  fresh.Publish(1, {Put(kTrees[1], "k", "v", false)});
  CHECK(wb.View(20001).generations[0]->Find(kTrees[1])->bytes() ==
        fresh.View(1).generations[0]->Find(kTrees[1])->bytes());
}

int Reverse(std::string_view a, std::string_view b) { return b.compare(a); }

TEST_CASE("write buffer: iterators in a tree's order, both ways, with seeks", "[write_buffer]") {
  WriteBuffer wb;
  const std::string& c = kTrees[0];
  // Keys 0..N-1 in a scrambled order over many commits, so that the sorted
  // list is built from a base run and a tail run.
  const int n = 3000;
  std::vector<std::string> keys;
  for (int i = 0; i < n; i++) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "k%05d", i);
    keys.push_back(buf);
  }
  std::vector<std::string> order = keys;
  std::mt19937_64 rng(7);
  std::shuffle(order.begin(), order.end(), rng);
  uint64_t txid = 0;
  std::vector<uint64_t> first_seen(n);
  for (size_t i = 0; i < order.size();) {
    std::vector<BufferChange> ch;
    size_t m = 1 + rng() % 40;
    txid++;
    for (size_t j = 0; j < m && i < order.size(); j++, i++) {
      ch.push_back(Put(c, order[i], order[i], false));
      first_seen[std::stoi(order[i].substr(1))] = txid;
    }
    wb.Publish(txid, ch);
    if (rng() % 4 == 0) {
      // An iterator now and then makes the table extend its sorted list.
      BufferView v = wb.View(txid);
      BufferTable::Iterator it(v.generations[0]->Find(c), txid);
      it.SeekToFirst();
      REQUIRE(it.Valid());
    }
  }
  BufferView v = wb.View(txid);
  const BufferTable* t = v.generations[0]->Find(c);
  CHECK(Keys(t, txid) == keys);
  std::vector<std::string> rev(keys.rbegin(), keys.rend());
  CHECK(Keys(t, txid, Reverse) == rev);
  CHECK(Keys(t, txid) == keys);  // and back: the cache follows the order asked

  // At an older snapshot only the keys first written by then.
  const uint64_t mid = txid / 2;
  std::vector<std::string> at_mid;
  for (int i = 0; i < n; i++) {
    if (first_seen[i] <= mid) at_mid.push_back(keys[i]);
  }
  CHECK(Keys(t, mid) == at_mid);

  // Seeks and walks that turn around, against the sorted vector.
  for (int round = 0; round < 200; round++) {
    const uint64_t s = round % 2 ? mid : txid;
    const std::vector<std::string>& want = s == mid ? at_mid : keys;
    BufferTable::Iterator it(t, s);
    char buf[16];
    std::snprintf(buf, sizeof(buf), "k%05d%s", static_cast<int>(rng() % (n + 10)),
                  rng() % 2 ? "" : "x");
    it.Seek(buf);
    size_t pos = std::lower_bound(want.begin(), want.end(), std::string(buf)) - want.begin();
    for (int step = 0; step < 30; step++) {
      if (pos == want.size()) {
        REQUIRE(!it.Valid());
        break;
      }
      REQUIRE(it.Valid());
      REQUIRE(it.key() == want[pos]);
      REQUIRE(it.version()->value() == want[pos]);
      if (rng() % 3 == 0) {
        it.Prev();
        if (pos == 0) {
          REQUIRE(!it.Valid());
          break;
        }
        pos--;
      } else {
        it.Next();
        pos++;
      }
    }
  }
  BufferTable::Iterator last(t, txid);
  last.SeekToLast();
  REQUIRE(last.Valid());
  CHECK(last.key() == keys.back());
  last.Seek("zzz");
  CHECK(!last.Valid());
  // A table with nothing at the snapshot is empty whichever way.
  BufferTable::Iterator none(t, 0);
  none.SeekToFirst();
  CHECK(!none.Valid());
  none.SeekToLast();
  CHECK(!none.Valid());
  none.Seek("k");
  CHECK(!none.Valid());
}

TEST_CASE("write buffer: an iterator positioned before more commits keeps its snapshot",
          "[write_buffer]") {
  WriteBuffer wb;
  const std::string& c = kTrees[0];
  wb.Publish(1, {Put(c, "b", "b1", false), Put(c, "d", "d1", false), Put(c, "f", "f1", false)});
  BufferView v1 = wb.View(1);
  const BufferTable* t = v1.generations[0]->Find(c);
  BufferTable::Iterator it(t, 1);
  it.Seek("c");
  REQUIRE(it.key() == "d");
  // New keys around the position, a new version of the current key, and
  // a new iterator that extends the table's sorted list meanwhile.
  wb.Publish(2, {Put(c, "a", "a2", false), Put(c, "c", "c2", false), Put(c, "d", "d2", true),
                 Put(c, "e", "e2", false), Erase(c, "f")});
  CHECK(Keys(t, 2) == std::vector<std::string>{"a", "b", "c", "d", "e", "f"});
  CHECK(it.version()->value() == "d1");
  it.Next();
  REQUIRE(it.Valid());
  CHECK(it.key() == "f");
  CHECK(it.version()->value() == "f1");
  it.Prev();
  it.Prev();
  REQUIRE(it.Valid());
  CHECK(it.key() == "b");
  it.Prev();
  CHECK(!it.Valid());
  // The same at a fresh iterator of the old snapshot.
  CHECK(Keys(t, 1) == std::vector<std::string>{"b", "d", "f"});
  CHECK(v1.Find(c, "d")->value() == "d1");
  CHECK(wb.View(2).Find(c, "d")->value() == "d2");
}

TEST_CASE("write buffer: freeze, views and drop", "[write_buffer]") {
  WriteBuffer wb;
  const std::string& c = kTrees[0];
  const std::string& ix = kTrees[1];
  CHECK(wb.Freeze() == nullptr);  // nothing to merge
  CHECK(wb.View(10).generations.empty());
  wb.Publish(1, {Put(c, "a", "a1", false), Put(ix, "x", "", false)});
  wb.Publish(2, {Put(c, "b", "b2", false)});
  std::shared_ptr<const BufferGeneration> g1 = wb.Freeze();
  REQUIRE(g1 != nullptr);
  CHECK(g1->frozen());
  CHECK(g1->first_txid() == 1);
  CHECK(g1->last_txid() == 2);
  auto tables = g1->Tables();
  REQUIRE(tables.size() == 2);
  CHECK(tables[0].first == c);
  CHECK(tables[1].first == ix);
  CHECK(wb.active_bytes() == 0);

  wb.Publish(3, {Put(c, "a", "a3", true), Erase(ix, "x")});
  BufferView v3 = wb.View(3);
  REQUIRE(v3.generations.size() == 2);
  CHECK(!v3.generations[0]->frozen());
  CHECK(v3.generations[1] == g1);
  CHECK(v3.Find(c, "a")->value() == "a3");  // the newer generation wins
  CHECK(v3.Find(c, "b")->value() == "b2");  // the older one still answers
  CHECK(v3.Find(ix, "x")->erased());
  CHECK(v3.CountDelta(c) == 2);
  CHECK(v3.CountDelta(ix) == 0);
  CHECK(v3.Tables(c).size() == 2);
  CHECK(v3.Tables(ix).size() == 2);
  CHECK(wb.View(2).generations.size() == 1);  // the active one starts at 3

  std::shared_ptr<const BufferGeneration> g2 = wb.Freeze();
  wb.Publish(4, {Put(c, "z", "z4", false)});
  auto frozen = wb.Frozen();
  REQUIRE(frozen.size() == 2);
  CHECK(frozen[0] == g1);  // oldest first: the merge order
  CHECK(frozen[1] == g2);

  // Drop: later views leave the generation out; earlier ones keep it alive.
  const BufferGeneration* raw = g1.get();
  g1.reset();
  frozen.clear();
  REQUIRE(wb.Drop(raw).ok());
  CHECK(wb.Drop(raw).IsInvalidArgument());
  BufferView v4 = wb.View(4);
  CHECK(v4.generations.size() == 2);
  CHECK(v4.Find(c, "b") == nullptr);
  CHECK(v3.Find(c, "b")->value() == "b2");
  const BufferTable* old = v3.generations[1]->Find(c);
  CHECK(Keys(old, 3) == std::vector<std::string>{"a", "b"});
  CHECK(wb.Drop(v4.generations[0].get()).IsInvalidArgument());  // the active one
}

// --- the model ---

struct Version {
  uint64_t txid;
  bool erased;
  std::string value;
};

// Every change of every key of one tree.
struct History {
  std::map<std::string, std::vector<Version>> keys;

  // The newest change of `key` with txid in [lo, hi], or nullptr.
  const Version* Newest(const std::string& key, uint64_t lo, uint64_t hi) const {
    auto it = keys.find(key);
    if (it == keys.end()) return nullptr;
    const Version* best = nullptr;
    for (const Version& v : it->second) {
      if (v.txid >= lo && v.txid <= hi) best = &v;
    }
    return best;
  }
  bool Live(const std::string& key, uint64_t s) const {
    const Version* v = Newest(key, 0, s);
    return v != nullptr && !v->erased;
  }
  int64_t LiveCount(uint64_t s) const {
    int64_t n = 0;
    for (const auto& kv : keys) n += Live(kv.first, s);
    return n;
  }
};

struct ScriptChange {
  int tree;
  std::string key;
  std::string value;
  bool erased;
  bool was_live;
};

// Random commits over two trees, with the was_live each change needs.
class Script {
 public:
  explicit Script(uint64_t seed) : rng_(seed) {}

  std::vector<ScriptChange> NextCommit(uint64_t txid) {
    std::vector<ScriptChange> out;
    const int n = rng_() % 20 == 0 ? 30 + rng_() % 50 : 1 + rng_() % 8;
    for (int i = 0; i < n; i++) {
      ScriptChange c;
      c.tree = rng_() % 4 == 0 ? 1 : 0;
      c.key = RandomKey(c.tree);
      History& h = hist[c.tree];
      c.was_live = h.Live(c.key, txid);  // this commit's earlier changes too
      c.erased = c.was_live ? rng_() % 3 == 0 : rng_() % 12 == 0;
      if (!c.erased) c.value = RandomValue(txid);
      h.keys[c.key].push_back({txid, c.erased, c.value});
      out.push_back(std::move(c));
    }
    return out;
  }

  static std::vector<BufferChange> Changes(const std::vector<ScriptChange>& s) {
    std::vector<BufferChange> out;
    for (const ScriptChange& c : s) {
      BufferChange b;
      b.tree = kTrees[c.tree];
      b.key = c.key;
      b.value = c.value;
      b.erased = c.erased;
      b.was_live = c.was_live;
      out.push_back(b);
    }
    return out;
  }

  History hist[2];

 private:
  std::string RandomKey(int tree) {
    const uint32_t r = rng_() % 1000;
    if (r < 3) return std::string(kMaxKeySize, static_cast<char>('a' + rng_() % 3));
    // A few hundred keys a tree: keys come back, with many versions.
    const uint64_t id = rng_() % (tree == 0 ? 400 : 150);
    std::string k(1 + id % 13, static_cast<char>('a' + id % 26));
    k[0] = static_cast<char>(id % 7 == 0 ? '\0' : 'A' + id % 5);
    k += std::to_string(id);
    return k;
  }
  std::string RandomValue(uint64_t txid) {
    const uint32_t r = rng_() % 1000;
    size_t len = r < 700 ? rng_() % 20 : r < 995 ? 20 + rng_() % 300 : 2000 + rng_() % 20000;
    std::string v = std::to_string(txid) + ":";
    while (v.size() < len) v.push_back(static_cast<char>(rng_()));
    return v;
  }
  std::mt19937_64 rng_;
};

// What the merged generations put in pages: the live keys of each tree as
// of `upto`, as a merger would compute them from the buffer.
struct Base {
  uint64_t upto = 0;
  std::map<std::string, std::string> live[2];
};

// Applies a frozen generation to a base, reading it as a merge would: each
// table in key order, the newest change of each key.
std::shared_ptr<const Base> Merge(const Base& old, const BufferGeneration& g) {
  auto b = std::make_shared<Base>(old);
  b->upto = g.last_txid();
  for (const auto& [name, table] : g.Tables()) {
    const int tree = name == kTrees[0] ? 0 : 1;
    BufferTable::Iterator it(table, UINT64_MAX);
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      if (it.version()->erased()) {
        b->live[tree].erase(std::string(it.key()));
      } else {
        b->live[tree][std::string(it.key())] = std::string(it.version()->value());
      }
    }
  }
  return b;
}

// The end of the generation that begins at `first`: the first freeze point
// >= first, or `fallback` for the active generation.
uint64_t GenerationEnd(const std::vector<uint64_t>& freezes, uint64_t first, uint64_t fallback) {
  auto it = std::lower_bound(freezes.begin(), freezes.end(), first);
  return it == freezes.end() ? fallback : *it;
}

// For checks that also run on reader threads, where Catch2's assertions
// may not be used: the first failure is returned as a message instead.
#define WB_EXPECT(cond)                                                                 \
  do {                                                                                  \
    if (!(cond)) return ctx + ": " #cond " failed at line " + std::to_string(__LINE__); \
  } while (0)

// Checks a view at snapshot s over `base` against the histories: point
// reads, count deltas, and each table's keys at s in both directions and
// after random seeks. `end_of(first)` is the last txid of the generation
// that starts at `first`. Returns "" or what failed.
template <typename EndOf>
std::string CheckView(const BufferView& v, const Base& base, const History* hist, EndOf end_of,
                      std::mt19937_64* rng) {
  const uint64_t s = v.snapshot;
  std::string ctx = "snapshot " + std::to_string(s);
  WB_EXPECT(s >= base.upto);
  for (int tree = 0; tree < 2; tree++) {
    const std::string& name = kTrees[tree];
    const History& h = hist[tree];
    ctx = "tree " + std::to_string(tree) + " snapshot " + std::to_string(s);
    WB_EXPECT(static_cast<int64_t>(base.live[tree].size()) + v.CountDelta(name) == h.LiveCount(s));
    // Point reads: the buffer first, then the base.
    for (int i = 0; i < 30 && !h.keys.empty(); i++) {
      auto it = h.keys.lower_bound(std::string(1, static_cast<char>((*rng)() % 128)));
      if (it == h.keys.end()) it = h.keys.begin();
      const std::string& key = it->first;
      const Version* want = h.Newest(key, 0, s);
      const BufferVersion* got = v.Find(name, key);
      std::optional<std::string> value;
      if (got != nullptr) {
        WB_EXPECT(want != nullptr);
        WB_EXPECT(got->txid() == want->txid);
        if (!got->erased()) value = std::string(got->value());
      } else {
        WB_EXPECT(want == nullptr || want->txid <= base.upto);
        auto b = base.live[tree].find(key);
        if (b != base.live[tree].end()) value = b->second;
      }
      if (want == nullptr || want->erased) {
        WB_EXPECT(!value);
      } else {
        WB_EXPECT(value == want->value);
      }
    }
    // Each generation's table, against its share of the history.
    for (const auto& g : v.generations) {
      const uint64_t lo = g->first_txid();
      const uint64_t hi = std::min(s, end_of(lo));
      std::vector<std::pair<std::string, const Version*>> want;
      for (const auto& kv : h.keys) {
        const Version* ver = h.Newest(kv.first, lo, hi);
        if (ver != nullptr) want.emplace_back(kv.first, ver);
      }
      const BufferTable* t = g->Find(name);
      if (t == nullptr) {
        WB_EXPECT(want.empty());
        continue;
      }
      auto same = [](const BufferTable::Iterator& it,
                     const std::pair<std::string, const Version*>& w) {
        return it.Valid() && it.key() == w.first && it.version()->txid() == w.second->txid &&
               it.version()->erased() == w.second->erased &&
               it.version()->value() == w.second->value;
      };
      BufferTable::Iterator it(t, s);
      size_t i = 0;
      for (it.SeekToFirst(); i < want.size(); i++, it.Next()) WB_EXPECT(same(it, want[i]));
      WB_EXPECT(!it.Valid());
      i = want.size();
      for (it.SeekToLast(); i > 0; i--, it.Prev()) WB_EXPECT(same(it, want[i - 1]));
      WB_EXPECT(!it.Valid());
      for (int round = 0; round < 5; round++) {
        std::string target(1 + (*rng)() % 3, static_cast<char>('@' + (*rng)() % 8));
        it.Seek(target);
        size_t pos = 0;
        while (pos < want.size() && want[pos].first < target) pos++;
        for (int step = 0; step < 12; step++) {
          if (pos == want.size()) {
            WB_EXPECT(!it.Valid());
            break;
          }
          WB_EXPECT(same(it, want[pos]));
          if ((*rng)() % 3 == 0) {
            it.Prev();
            if (pos == 0) {
              WB_EXPECT(!it.Valid());
              break;
            }
            pos--;
          } else {
            it.Next();
            pos++;
          }
        }
      }
    }
  }
  return "";
}

TEST_CASE("write buffer: a generation finds each of many trees' tables", "[write_buffer]") {
  // More trees than a generation lists for lock-free lookups: the rest are
  // found under its lock.
  WriteBuffer wb;
  std::vector<std::string> trees;
  for (int i = 0; i < 20; i++) trees.push_back("c:coll" + std::to_string(i));
  uint64_t txid = 0;
  for (const std::string& t : trees) wb.Publish(++txid, {Put(t, "k", t, false)});
  BufferView v = wb.View(txid);
  REQUIRE(v.generations.size() == 1);
  for (const std::string& t : trees) {
    const BufferTable* table = v.generations[0]->Find(t);
    REQUIRE(table != nullptr);
    CHECK(table->Find("k", txid)->value() == t);
    CHECK(v.Find(t, "k")->value() == t);
  }
  CHECK(v.generations[0]->Find("c:coll") == nullptr);  // a prefix of every name
  CHECK(v.generations[0]->Find("c:coll20") == nullptr);
  CHECK(v.generations[0]->Find("") == nullptr);

  // A view filled into one that held other generations holds only its own.
  wb.Freeze();
  wb.Publish(++txid, {Put(trees[0], "k", "newer", true)});
  BufferView reused = wb.View(txid);
  REQUIRE(reused.generations.size() == 2);
  wb.View(txid - 1, &reused);
  CHECK(reused.snapshot == txid - 1);
  REQUIRE(reused.generations.size() == 1);
  CHECK(reused.Find(trees[0], "k")->value() == trees[0]);
  wb.View(txid, &reused);
  REQUIRE(reused.generations.size() == 2);
  CHECK(reused.Find(trees[0], "k")->value() == "newer");
}

TEST_CASE("concurrency: readers find the tables of trees a writer is adding",
          "[write_buffer][concurrency]") {
  // Each commit writes a tree no commit wrote before (past the listed ones
  // too); a reader at any published snapshot must find the table of every
  // tree written at or before it, with its value.
  const int trees = 24;
  const int rounds = static_cast<int>(Sized(40));
  for (int round = 0; round < rounds; round++) {
    WriteBuffer wb;
    std::atomic<bool> done{false};
    std::atomic<int> errors{0};
    std::atomic<int> started{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; r++) {
      readers.emplace_back([&] {
        started++;
        while (!done.load()) {
          const BufferView v = wb.View(wb.last_txid());
          for (uint64_t t = 1; t <= v.snapshot; t++) {
            const std::string name = "c:t" + std::to_string(t);
            const BufferVersion* found = v.Find(name, "k");
            if (found == nullptr || found->value() != name) errors++;
          }
          if (v.Find("c:t0", "k") != nullptr) errors++;
        }
      });
    }
    while (started.load() < 2) std::this_thread::yield();
    for (int t = 1; t <= trees; t++) {
      const std::string name = "c:t" + std::to_string(t);
      wb.Publish(static_cast<uint64_t>(t), {Put(name, "k", name, false)});
      std::this_thread::yield();
    }
    done = true;
    for (auto& th : readers) th.join();
    REQUIRE(errors.load() == 0);
  }
}

TEST_CASE("write buffer model: snapshots, freezes and drops against a history", "[write_buffer]") {
  const uint64_t seed = test::Seed("write buffer model");
  std::mt19937_64 rng(seed);
  Script script(seed + 1);
  WriteBuffer wb;
  std::vector<std::vector<ScriptChange>> commits(1);
  std::vector<uint64_t> freezes;
  auto base = std::make_shared<const Base>();
  struct Open {
    BufferView view;
    std::shared_ptr<const Base> base;
  };
  std::vector<Open> open;
  const uint64_t n = Sized(1500);
  uint64_t checks = 0, drops = 0;
  for (uint64_t txid = 1; txid <= n; txid++) {
    commits.push_back(script.NextCommit(txid));
    wb.Publish(txid, Script::Changes(commits.back()));
    if (rng() % 60 == 0 && wb.Freeze() != nullptr) freezes.push_back(txid);
    auto frozen = wb.Frozen();
    if (frozen.size() > 2 || (!frozen.empty() && rng() % 80 == 0)) {
      base = Merge(*base, *frozen.front());
      REQUIRE(wb.Drop(frozen.front().get()).ok());
      drops++;
    }
    if (rng() % 10 == 0) {
      // A view at a past snapshot the current base allows.
      const uint64_t s = base->upto + rng() % (txid - base->upto + 1);
      open.push_back({wb.View(s), base});
    }
    if (open.size() > 6) open.erase(open.begin() + rng() % open.size());
    if (rng() % 8 == 0) {
      for (const Open& o : open) {
        const std::string err = CheckView(
            o.view, *o.base, script.hist,
            [&](uint64_t first) { return GenerationEnd(freezes, first, UINT64_MAX); }, &rng);
        INFO(err);
        REQUIRE(err.empty());
        checks++;
      }
    }
  }
  std::fprintf(stderr, "write buffer model: %llu commits, %zu freezes, %llu drops, %llu checks\n",
               static_cast<unsigned long long>(n), freezes.size(),
               static_cast<unsigned long long>(drops), static_cast<unsigned long long>(checks));
}

TEST_CASE("concurrency: write buffer readers at older snapshots beside one writer and a merger",
          "[write_buffer][concurrency]") {
  const uint64_t seed = test::Seed("write buffer concurrency");
  // The whole script first: the readers check against it without locks.
  Script script(seed);
  const uint64_t n = Sized(2000);
  std::vector<std::vector<ScriptChange>> commits(1);
  std::vector<uint64_t> freezes;
  std::mt19937_64 plan(seed + 1);
  for (uint64_t txid = 1; txid <= n; txid++) {
    commits.push_back(script.NextCommit(txid));
    if (plan() % 40 == 0) freezes.push_back(txid);
  }
  const History* hist = script.hist;

  WriteBuffer wb;
  std::atomic<uint64_t> published{0};
  std::atomic<bool> writer_done{false};
  // A view and the base it goes with are taken together, as an engine
  // takes its storage snapshot and View under one lock.
  std::mutex mu;
  std::shared_ptr<const Base> base = std::make_shared<Base>();
  // The first failure on any thread (Catch2 asserts on the main one only).
  std::mutex err_mu;
  std::string error;
  std::atomic<bool> failed{false};
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> l(err_mu);
    if (error.empty()) error = what;
    failed.store(true);
  };
  std::atomic<uint64_t> checks{0};

  std::thread writer([&] {
    for (uint64_t txid = 1; txid <= n; txid++) {
      wb.Publish(txid, Script::Changes(commits[txid]));
      published.store(txid, std::memory_order_release);
      if (std::binary_search(freezes.begin(), freezes.end(), txid) && wb.Freeze() == nullptr) {
        fail("Freeze found nothing to freeze at " + std::to_string(txid));
      }
      // Let the readers keep up, so that they overlap the writer.
      while (checks.load() < txid / 25 && !failed.load()) std::this_thread::yield();
    }
    writer_done.store(true);
  });
  std::thread merger([&] {
    uint64_t merged = 0;
    for (;;) {
      auto frozen = wb.Frozen();
      if (frozen.empty()) {
        if (writer_done.load()) break;
        std::this_thread::yield();
        continue;
      }
      std::shared_ptr<const Base> next;
      {
        std::lock_guard<std::mutex> l(mu);
        next = base;
      }
      next = Merge(*next, *frozen.front());
      std::lock_guard<std::mutex> l(mu);
      base = next;
      if (!wb.Drop(frozen.front().get()).ok()) fail("Drop of the oldest frozen generation");
      merged++;
    }
    if (merged != freezes.size()) fail("merged " + std::to_string(merged) + " generations");
  });
  auto reader = [&](uint64_t rseed) {
    std::mt19937_64 rng(rseed);
    // One view is kept across rounds while its generations are dropped.
    std::optional<std::pair<BufferView, std::shared_ptr<const Base>>> kept;
    do {
      BufferView v;
      std::shared_ptr<const Base> b;
      {
        std::lock_guard<std::mutex> l(mu);
        b = base;
        const uint64_t last = published.load(std::memory_order_acquire);
        const uint64_t s = b->upto + rng() % (last - b->upto + 1);
        v = wb.View(s);
      }
      auto end_of = [&](uint64_t first) { return GenerationEnd(freezes, first, UINT64_MAX); };
      std::string err = CheckView(v, *b, hist, end_of, &rng);
      if (err.empty() && kept) err = CheckView(kept->first, *kept->second, hist, end_of, &rng);
      if (!err.empty()) {
        fail(err);
        return;
      }
      if (!kept || rng() % 10 == 0) kept.emplace(std::move(v), std::move(b));
      checks++;
    } while (!writer_done.load());
  };
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; i++) readers.emplace_back(reader, seed + 10 + i);
  writer.join();
  merger.join();
  for (auto& r : readers) r.join();
  std::fprintf(stderr, "write buffer concurrency: %llu commits, %zu freezes, %llu reader checks\n",
               static_cast<unsigned long long>(n), freezes.size(),
               static_cast<unsigned long long>(checks.load()));
  INFO(error);
  REQUIRE(error.empty());
  CHECK(wb.Frozen().empty());
}

// Not run by default: `index_tests "[.bench]"` in a Release build. The
// writer's cost per change, probes, and what cursors pay for the sorted key
// list: its first build over a full generation, and its extension by one
// small commit (the case of a cursor opened after every commit).
TEST_CASE("write buffer: publish, probe and sort costs", "[.][bench]") {
  using Clock = std::chrono::steady_clock;
  auto ns_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  };
  const std::string& c = kTrees[0];
  const int n = 300000;
  std::mt19937_64 rng(1);
  std::vector<std::string> keys(n);
  for (auto& k : keys) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
    k = buf;
  }
  const std::string value(150, 'v');
  WriteBuffer wb;
  uint64_t txid = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < n; i += 1000) {
    std::vector<BufferChange> ch;
    for (int j = i; j < i + 1000; j++) ch.push_back(Put(c, keys[j], value, false));
    wb.Publish(++txid, ch);
  }
  const double publish = ns_since(t0) / n;
  BufferView v = wb.View(txid);
  const BufferTable* t = v.generations[0]->Find(c);
  t0 = Clock::now();
  size_t hits = 0;
  for (int i = 0; i < n; i++) hits += t->Find(keys[(uint64_t{7919} * i) % n], txid) != nullptr;
  const double hit = ns_since(t0) / n;
  t0 = Clock::now();
  for (int i = 0; i < n; i++) hits += t->Find(keys[i].substr(1) + "x", txid) != nullptr;
  const double miss = ns_since(t0) / n;
  REQUIRE(hits == static_cast<size_t>(n));
  t0 = Clock::now();
  {
    BufferTable::Iterator it(t, txid);
    it.SeekToFirst();
    REQUIRE(it.Valid());
  }
  const double first_sort = ns_since(t0) / 1e6;
  t0 = Clock::now();
  size_t seen = 0;
  {
    BufferTable::Iterator it(t, txid);
    for (it.SeekToFirst(); it.Valid(); it.Next()) seen++;
  }
  const double scan = ns_since(t0) / n;
  REQUIRE(seen == static_cast<size_t>(n));
  // One new key a commit, an iterator after each.
  const int m = 2000;
  t0 = Clock::now();
  for (int i = 0; i < m; i++) {
    std::string k = "new" + std::to_string(i);
    wb.Publish(++txid, {Put(c, k, value, false)});
    BufferTable::Iterator it(t, txid);
    it.Seek(k);
    REQUIRE(it.Valid());
  }
  const double extend = ns_since(t0) / m / 1000;
  std::fprintf(stderr,
               "write buffer, %d changes of 16-byte keys and 150-byte values in commits of "
               "1000:\n  publish %.0f ns/change, %.1f MiB (%.0f bytes/change)\n  Find hit %.0f "
               "ns, miss %.0f ns\n  first iterator (sorts %d keys) %.1f ms; iteration %.1f "
               "ns/key\n  commit of 1 key + a Seek, %d times: %.1f us each\n",
               n, publish, wb.active_bytes() / 1048576.0, 1.0 * wb.active_bytes() / n, hit, miss, n,
               first_sort, scan, m, extend);
}

}  // namespace
}  // namespace mmdoc::index
