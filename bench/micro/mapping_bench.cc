// The typed mapping layer (mmdoc/mapping.h, seed 003's Morphia) against the
// raw BSON API on the same work: insert N documents {_id, key, value} in
// batches of 1000, then read each back by _id. The overhead in percent is
// (mapped time / raw time - 1); Morphia's authors measured about 4%.
//   mmdoc_mapping_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <bson/bson.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "mmdoc/db.h"
#include "mmdoc/mapping.h"

namespace {

struct Item {
  std::string id;
  std::string key;
  std::string value;
};

const mmdoc::Mapping<Item>& ItemMapping() {
  static const mmdoc::Mapping<Item> m =
      mmdoc::Mapping<Item>().Id(&Item::id).Field("key", &Item::key).Field("value", &Item::value);
  return m;
}

std::vector<Item> MakeItems(int n) {
  std::vector<Item> items;
  char buf[40];
  for (int i = 0; i < n; i++) {
    Item it;
    std::snprintf(buf, sizeof buf, "id-%08d-aaaaaaaaaaaaaaaaaaaaaaa", i);
    it.id = buf;
    std::snprintf(buf, sizeof buf, "key-%08d-bbbbbbbbbbbbbbbbbbbbbb", i);
    it.key = buf;
    std::snprintf(buf, sizeof buf, "val-%08d-cccccccccccccccccccccc", i);
    it.value = buf;
    items.push_back(std::move(it));
  }
  return items;
}

std::unique_ptr<mmdoc::DB> FreshDB(const std::string& name) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-log");
  mmdoc::Options o;
  o.durability = mmdoc::Durability::kNone;
  return std::move(mmdoc::DB::Open(path, o).value());
}

constexpr int kDocs = 20000;

// Raw API: build the BSON by hand, insert, read back and pull the fields out.
void BM_Raw(benchmark::State& state) {
  const std::vector<Item> items = MakeItems(kDocs);
  for (auto _ : state) {
    auto db = FreshDB("mmdoc-mapping-raw.mmdb");
    for (int i = 0; i < kDocs; i += 1000) {
      auto t = db->Begin().value();
      for (int j = i; j < i + 1000 && j < kDocs; j++) {
        bson_t b;
        bson_init(&b);
        BSON_APPEND_UTF8(&b, "_id", items[j].id.c_str());
        BSON_APPEND_UTF8(&b, "key", items[j].key.c_str());
        BSON_APPEND_UTF8(&b, "value", items[j].value.c_str());
        mmdoc::Status s =
            t->Insert("items", mmdoc::Document::FromTrustedBytes(std::string(
                                   reinterpret_cast<const char*>(bson_get_data(&b)), b.len)));
        bson_destroy(&b);
        if (!s.ok()) state.SkipWithError(s.ToString().c_str());
      }
      if (!t->Commit().ok()) state.SkipWithError("commit");
    }
    for (int j = 0; j < kDocs; j++) {
      auto d = db->Get("items", mmdoc::Value::String(items[j].id));
      if (!d.ok()) state.SkipWithError("get");
      Item out;
      bson_t b;
      d.value().View(&b);
      bson_iter_t it;
      uint32_t n;
      if (bson_iter_init_find(&it, &b, "key")) out.key = bson_iter_utf8(&it, &n);
      if (bson_iter_init_find(&it, &b, "value")) out.value = bson_iter_utf8(&it, &n);
      benchmark::DoNotOptimize(out);
    }
  }
  state.SetItemsProcessed(state.iterations() * kDocs);
}

// The same through TypedCollection<Item>.
void BM_Mapped(benchmark::State& state) {
  const std::vector<Item> items = MakeItems(kDocs);
  for (auto _ : state) {
    auto db = FreshDB("mmdoc-mapping-typed.mmdb");
    mmdoc::TypedCollection<Item> coll(db.get(), "items", ItemMapping());
    for (int i = 0; i < kDocs; i += 1000) {
      auto t = db->Begin().value();
      for (int j = i; j < i + 1000 && j < kDocs; j++) {
        if (!coll.Insert(t.get(), items[j]).ok()) state.SkipWithError("insert");
      }
      if (!t->Commit().ok()) state.SkipWithError("commit");
    }
    for (int j = 0; j < kDocs; j++) {
      auto d = coll.Get(mmdoc::Value::String(items[j].id));
      if (!d.ok()) state.SkipWithError("get");
      benchmark::DoNotOptimize(d.value());
    }
  }
  state.SetItemsProcessed(state.iterations() * kDocs);
}

BENCHMARK(BM_Raw)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mapped)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
