// Collection scans for a needle over documents held in the write buffer
// (arg 1, the default 64 MiB) or in pages (arg 0, no buffer): the first
// match of a filter half the documents pass, the first match of one that
// about one in 3,000 passes, and a whole scan for that one. Run a Release
// build:
//   mmdoc_scan_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "mmdoc/db.h"

namespace {

constexpr int kDocs = 100000;

// A store of kDocs documents {_id, g: "half-a"|"half-b", r: "rare"|"none",
// p: 200 bytes}, made once per argument.
mmdoc::DB* Store(bool buffered) {
  static std::unique_ptr<mmdoc::DB> dbs[2];
  std::unique_ptr<mmdoc::DB>& db = dbs[buffered ? 1 : 0];
  if (db) return db.get();
  const std::string path =
      (std::filesystem::temp_directory_path() / (buffered ? "scan-bench-b" : "scan-bench-p"))
          .string();
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-log");
  mmdoc::Options o;
  o.durability = mmdoc::Durability::kNone;
  if (!buffered) o.write_buffer_size = 0;
  db = std::move(mmdoc::DB::Open(path, o).value());
  const std::string pad(200, 'p');
  char json[400];
  for (int i = 0; i < kDocs; i += 1000) {  // in batches, as an application writes
    auto txn = std::move(db->Begin().value());
    for (int j = i; j < i + 1000; j++) {
      std::snprintf(json, sizeof json, R"({"_id": %d, "g": "half-%c", "r": "%s", "p": "%s"})", j,
                    j % 2 == 0 ? 'a' : 'b', j % 3000 == 1000 ? "rare" : "none", pad.c_str());
      if (!txn->Insert("c", mmdoc::Document::FromJson(json).value()).ok()) std::abort();
    }
    if (!txn->Commit().ok()) std::abort();
  }
  const mmdoc::DBStats stats = db->Stats().value();
  std::fprintf(stderr, "%s: %.1f MiB in the write buffer, %llu runs\n",
               buffered ? "buffered" : "pages", stats.write_buffer_bytes / 1048576.0,
               static_cast<unsigned long long>(stats.runs));
  return db.get();
}

// Reads the first `limit` matches (0: all) of `filter`; the count found.
int64_t Run(mmdoc::DB* db, const char* filter, int64_t limit) {
  mmdoc::FindOptions opts;
  opts.limit = limit;
  auto txn = db->BeginRead();
  if (!txn.ok()) std::abort();
  auto cursor = txn.value()->Find("c", mmdoc::Document::FromJson(filter).value(), opts);
  if (!cursor.ok()) std::abort();
  int64_t n = 0;
  while (cursor.value()->Next()) n++;
  return n;
}

void BM_FirstOfHalf(benchmark::State& state) {
  mmdoc::DB* db = Store(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(Run(db, R"({"g": "half-b"})", 1));
}

void BM_FirstOfRare(benchmark::State& state) {
  mmdoc::DB* db = Store(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(Run(db, R"({"r": "rare"})", 1));
}

void BM_AllOfRare(benchmark::State& state) {
  mmdoc::DB* db = Store(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(Run(db, R"({"r": "rare"})", 0));
}

}  // namespace

BENCHMARK(BM_FirstOfHalf)->Arg(1)->Arg(0);
BENCHMARK(BM_FirstOfRare)->Arg(1)->Arg(0);
BENCHMARK(BM_AllOfRare)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
