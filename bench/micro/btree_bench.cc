// Micro-benchmark of index::BTree against std::map and LMDB: random point
// lookups in, and random inserts into, a tree of 1M entries with 16- and
// 36-byte random keys and 16-byte values. Every contender gets the same
// keys in the same order.
//
//   mmdoc  index::BTree over storage::Pager in a temp dir, Durability::kNone,
//          inserts committed 1000 per write txn, lookups in one read txn
//   map    std::map<std::string, std::string>
//   lmdb   mdb_put / mdb_get, MDB_WRITEMAP | MDB_NOSYNC, 1000 puts per txn
//
// Lookup benchmarks load the 1M entries once (untimed) and time Get of
// random present keys. Insert benchmarks time loading 1M entries into an
// empty store (items/s = inserts per second).
//
//   mmdoc_btree_bench --benchmark_repetitions=3
//                     --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <lmdb.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "index/btree.h"
#include "storage/pager.h"

namespace {

using mmdoc::Status;
using mmdoc::index::BTree;
namespace storage = mmdoc::storage;

constexpr size_t kEntries = 1000000;
constexpr size_t kBatch = 1000;
const std::string kValue(16, 'v');

void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "btree_bench: %s: %s\n", what, detail.c_str());
  std::abort();
}
void Check(const Status& s, const char* what) {
  if (!s.ok()) Die(what, s.ToString());
}

const std::vector<std::string>& Keys(size_t size) {
  static std::map<size_t, std::vector<std::string>> cache;
  auto& keys = cache[size];
  if (keys.empty()) {
    std::mt19937_64 rng(size * 7919 + 1);
    keys.resize(kEntries);
    for (auto& k : keys) {
      k.resize(size);
      for (size_t i = 0; i < size; i += 8) {
        uint64_t r = rng();
        std::memcpy(k.data() + i, &r, std::min<size_t>(8, size - i));
      }
    }
  }
  return keys;
}

// Lookup order: a random permutation of the keys.
const std::vector<uint32_t>& Order() {
  static std::vector<uint32_t> order;
  if (order.empty()) {
    order.resize(kEntries);
    for (uint32_t i = 0; i < kEntries; i++) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  }
  return order;
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string t = std::string(base && *base ? base : "/tmp") + "/mmdoc-bench-XXXXXX";
    if (mkdtemp(t.data()) == nullptr) Die("mkdtemp", t);
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// --- mmdoc ---

struct MmdocStore {
  TempDir dir;
  std::unique_ptr<storage::Pager> pager;

  MmdocStore() {
    storage::PagerOptions o;
    auto p = storage::Pager::Open(dir.path() + "/bench.mmdb", o);
    if (!p.ok()) Die("Pager::Open", p.status().ToString());
    pager = std::move(p.value());
    Check(pager->Recover([](uint64_t, std::string_view) { return Status::OK(); }), "Recover");
  }
  ~MmdocStore() { pager.reset(); }

  void Load(const std::vector<std::string>& keys) {
    for (size_t i = 0; i < keys.size(); i += kBatch) {
      auto w = pager->BeginWrite();
      if (!w.ok()) Die("BeginWrite", w.status().ToString());
      storage::Txn* txn = w.value().get();
      BTree t(txn, txn->root(0));
      size_t end = std::min(keys.size(), i + kBatch);
      for (size_t j = i; j < end; j++) Check(t.Put(keys[j], kValue), "Put");
      txn->set_root(0, t.root());
      Check(txn->Commit("", mmdoc::Durability::kNone), "Commit");
    }
  }
};

// --- LMDB ---

struct LmdbStore {
  TempDir dir;
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;

  LmdbStore() {
    int rc = mdb_env_create(&env);
    if (rc == 0) rc = mdb_env_set_mapsize(env, size_t{8} << 30);
    if (rc == 0) rc = mdb_env_open(env, dir.path().c_str(), MDB_WRITEMAP | MDB_NOSYNC, 0644);
    MDB_txn* txn;
    if (rc == 0) rc = mdb_txn_begin(env, nullptr, 0, &txn);
    if (rc == 0) rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
    if (rc == 0) rc = mdb_txn_commit(txn);
    if (rc != 0) Die("lmdb open", mdb_strerror(rc));
  }
  ~LmdbStore() { mdb_env_close(env); }

  void Load(const std::vector<std::string>& keys) {
    for (size_t i = 0; i < keys.size(); i += kBatch) {
      MDB_txn* txn;
      int rc = mdb_txn_begin(env, nullptr, 0, &txn);
      size_t end = std::min(keys.size(), i + kBatch);
      for (size_t j = i; rc == 0 && j < end; j++) {
        MDB_val k{keys[j].size(), const_cast<char*>(keys[j].data())};
        MDB_val v{kValue.size(), const_cast<char*>(kValue.data())};
        rc = mdb_put(txn, dbi, &k, &v, 0);
      }
      if (rc == 0) rc = mdb_txn_commit(txn);
      if (rc != 0) Die("lmdb put", mdb_strerror(rc));
    }
  }
};

// --- lookups ---

void BM_Lookup_Mmdoc(benchmark::State& state) {
  const auto& keys = Keys(state.range(0));
  static std::map<size_t, std::unique_ptr<MmdocStore>> stores;
  auto& store = stores[state.range(0)];
  if (!store) {
    store = std::make_unique<MmdocStore>();
    store->Load(keys);
  }
  auto r = store->pager->BeginRead();
  if (!r.ok()) Die("BeginRead", r.status().ToString());
  BTree t(r.value().get(), r.value()->root(0));
  const auto& order = Order();
  size_t i = 0;
  for (auto _ : state) {
    std::string_view v;
    Status s = t.Get(keys[order[i]], &v);
    if (!s.ok()) Die("Get", s.ToString());
    benchmark::DoNotOptimize(v.data());
    if (++i == kEntries) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Lookup_Map(benchmark::State& state) {
  const auto& keys = Keys(state.range(0));
  static std::map<size_t, std::map<std::string, std::string>> maps;
  auto& m = maps[state.range(0)];
  if (m.empty()) {
    for (const auto& k : keys) m.emplace(k, kValue);
  }
  const auto& order = Order();
  size_t i = 0;
  for (auto _ : state) {
    auto it = m.find(keys[order[i]]);
    if (it == m.end()) Die("map", "missing key");
    benchmark::DoNotOptimize(it->second.data());
    if (++i == kEntries) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Lookup_Lmdb(benchmark::State& state) {
  const auto& keys = Keys(state.range(0));
  static std::map<size_t, std::unique_ptr<LmdbStore>> stores;
  auto& store = stores[state.range(0)];
  if (!store) {
    store = std::make_unique<LmdbStore>();
    store->Load(keys);
  }
  MDB_txn* txn;
  int rc = mdb_txn_begin(store->env, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) Die("lmdb txn", mdb_strerror(rc));
  const auto& order = Order();
  size_t i = 0;
  for (auto _ : state) {
    const std::string& key = keys[order[i]];
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    MDB_val v;
    rc = mdb_get(txn, store->dbi, &k, &v);
    if (rc != 0) Die("mdb_get", mdb_strerror(rc));
    benchmark::DoNotOptimize(v.mv_data);
    if (++i == kEntries) i = 0;
  }
  mdb_txn_abort(txn);
  state.SetItemsProcessed(state.iterations());
}

// --- inserts (1M random keys into an empty store per iteration) ---

void BM_Insert_Mmdoc(benchmark::State& state) {
  const auto& keys = Keys(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    auto store = std::make_unique<MmdocStore>();
    state.ResumeTiming();
    store->Load(keys);
    state.PauseTiming();
    store.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kEntries);
}

void BM_Insert_Map(benchmark::State& state) {
  const auto& keys = Keys(state.range(0));
  for (auto _ : state) {
    std::map<std::string, std::string> m;
    for (const auto& k : keys) m.emplace(k, kValue);
    state.PauseTiming();
    m.clear();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kEntries);
}

void BM_Insert_Lmdb(benchmark::State& state) {
  const auto& keys = Keys(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    auto store = std::make_unique<LmdbStore>();
    state.ResumeTiming();
    store->Load(keys);
    state.PauseTiming();
    store.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kEntries);
}

BENCHMARK(BM_Lookup_Mmdoc)->Arg(16)->Arg(36);
BENCHMARK(BM_Lookup_Map)->Arg(16)->Arg(36);
BENCHMARK(BM_Lookup_Lmdb)->Arg(16)->Arg(36);
BENCHMARK(BM_Insert_Mmdoc)->Arg(16)->Arg(36)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Insert_Map)->Arg(16)->Arg(36)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Insert_Lmdb)->Arg(16)->Arg(36)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
