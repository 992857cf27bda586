// mmdoc-layoutbench: what the layout of the file costs mmdoc's reads. Loads
// the seed's documents twice, the way mmdoc-bench's insert phase did before
// the write buffer (random _id order, batches of 1000, unique index on key,
// each commit writing its pages: write_buffer_size 0), compacts the
// second store (DB::Compact: full leaves in key order), then alternates
// rounds of point reads by _id and full scans over the two, so that both
// see the same machine at nearly the same time. Prints each round and the
// medians; a ratio is the compacted store's rate over the other's (for the
// medians, the median of the rounds' ratios).
//
//   mmdoc-layoutbench --docs 1000000 --rounds 7
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/workload.h"
#include "mmdoc/db.h"

namespace mmdoc::bench {
namespace {

constexpr char kColl[] = "docs";

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

Result<std::unique_ptr<DB>> Load(const std::string& path, const Dataset& data) {
  Options o;
  o.create_if_missing = true;
  o.durability = Durability::kNone;
  o.write_buffer_size = 0;  // the layout the pages' own inserts leave
  auto db = DB::Open(path, o);
  if (!db.ok()) return db.status();
  DB* d = db.value().get();
  MMDOC_RETURN_IF_ERROR(d->CreateCollection(kColl));
  IndexOptions unique;
  unique.unique = true;
  MMDOC_RETURN_IF_ERROR(d->CreateIndex(kColl, "key", unique));
  for (uint64_t b = 0; b < data.size(); b += 1000) {
    auto t = d->Begin();
    if (!t.ok()) return t.status();
    for (uint64_t i = b; i < std::min<uint64_t>(b + 1000, data.size()); i++) {
      MMDOC_RETURN_IF_ERROR(
          t.value()->Insert(kColl, Document::FromTrustedBytes(std::string(data.bson(i)))));
    }
    MMDOC_RETURN_IF_ERROR(t.value()->Commit());
  }
  return db;
}

// Point reads by _id per second (ids drawn with `seed`).
Result<double> PointReads(DB* db, const Dataset& data, uint64_t n, uint64_t seed) {
  std::mt19937_64 rnd(seed);
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < n; i++) {
    auto d = db->Get(kColl, Value::String(data.id(rnd() % data.size())));
    if (!d.ok()) return d.status();
  }
  return static_cast<double>(n) / Seconds(t0);
}

// Full scans per second: Find({value: v}) on the unindexed field, as
// mmdoc-bench's search_value phase does.
Result<double> Scans(DB* db, const Dataset& data, int n) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) {
    const uint64_t which = static_cast<uint64_t>(i) * 7919 % data.size();
    std::string filter = R"({"value": ")" + std::string(data.value(which)) + "\"}";
    auto f = Document::FromJson(filter);
    if (!f.ok()) return f.status();
    auto found = db->Find(kColl, f.value());
    if (!found.ok()) return found.status();
    if (found.value().size() != 1) return Status::Corruption("scan did not find its document");
  }
  return n / Seconds(t0);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  CLI::App app{
      "mmdoc-layoutbench: mmdoc's point reads and scans on the file as the "
      "seed's inserts leave it and on a compacted copy, rounds alternating"};
  uint64_t docs = 1000000, lookups = 1000000;
  int rounds = 5, scans = 5;
  std::string dir = ".";
  app.add_option("--docs", docs, "documents in each store")->capture_default_str();
  app.add_option("--rounds", rounds, "rounds (each reads both stores)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--lookups", lookups, "point reads per store per round")->capture_default_str();
  app.add_option("--scans", scans, "full scans per store per round")->capture_default_str();
  app.add_option("--dir", dir, "directory for the two stores (removed at the end)");
  CLI11_PARSE(app, argc, argv);
  if (docs == 0) {
    std::fprintf(stderr, "mmdoc-layoutbench: --docs must be positive\n");
    return 2;
  }

  const Dataset data = Dataset::Generate(docs, 1);
  const std::string base = dir + "/mmdoc-layoutbench-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  if (ec) {
    std::fprintf(stderr, "mmdoc-layoutbench: cannot create %s: %s\n", base.c_str(),
                 ec.message().c_str());
    return 2;
  }
  int rc = 0;
  {
    auto fail = [&](const Status& s) {
      std::fprintf(stderr, "mmdoc-layoutbench: %s\n", s.ToString().c_str());
      rc = 2;
    };
    auto loaded = Load(base + "/loaded.mmdb", data);
    auto packed = Load(base + "/compacted.mmdb", data);
    if (!loaded.ok() || !packed.ok()) {
      fail(loaded.ok() ? packed.status() : loaded.status());
    } else {
      DB* a = loaded.value().get();
      DB* b = packed.value().get();
      auto t0 = std::chrono::steady_clock::now();
      Status s = b->Compact();
      const double compact_s = Seconds(t0);
      auto sa = a->Stats();
      auto sb = b->Stats();
      if (!s.ok() || !sa.ok() || !sb.ok()) {
        fail(!s.ok() ? s : !sa.ok() ? sa.status() : sb.status());
      } else {
        std::printf(
            "%llu documents; as loaded: %.0f MiB, fill %.2f; compacted (%.1f "
            "s): %.0f MiB, "
            "fill %.2f\n",
            static_cast<unsigned long long>(docs), sa.value().file_size / 1048576.0,
            sa.value().fill_factor, compact_s, sb.value().file_size / 1048576.0,
            sb.value().fill_factor);
        std::vector<double> pa, pb, ca, cb, pr, cr;  // rates; per-round ratios
        for (int r = 0; r < rounds && rc == 0; r++) {
          auto ra = PointReads(a, data, lookups, 100 + r);
          auto rb = PointReads(b, data, lookups, 100 + r);
          auto xa = Scans(a, data, scans);
          auto xb = Scans(b, data, scans);
          for (const auto* x : {&ra, &rb, &xa, &xb}) {
            if (!x->ok() && rc == 0) fail(x->status());
          }
          if (rc != 0) break;
          pa.push_back(ra.value());
          pb.push_back(rb.value());
          ca.push_back(xa.value());
          cb.push_back(xb.value());
          pr.push_back(pb.back() / pa.back());
          cr.push_back(cb.back() / ca.back());
          std::printf(
              "round %d: point reads %.1fk vs %.1fk/s (%.2fx), scans %.2f vs "
              "%.2f/s (%.2fx)\n",
              r + 1, pa.back() / 1e3, pb.back() / 1e3, pr.back(), ca.back(), cb.back(), cr.back());
        }
        if (rc == 0) {
          // The ratio is the median of the rounds' ratios (each round's two
          // stores ran back to back), not the ratio of the medians.
          std::printf(
              "median: point reads %.1fk vs %.1fk/s (%.2fx), scans %.2f vs "
              "%.2f/s (%.2fx)\n",
              Median(pa) / 1e3, Median(pb) / 1e3, Median(pr), Median(ca), Median(cb), Median(cr));
        }
      }
    }
  }
  std::filesystem::remove_all(base, ec);
  return rc;
}

}  // namespace
}  // namespace mmdoc::bench

int main(int argc, char** argv) { return mmdoc::bench::Main(argc, argv); }
