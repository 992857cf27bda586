// mmdoc-fillprobe: what a collection scan costs by how full its leaves
// are. Loads --docs documents of the seed's shape (36-character _id, key
// and value; a unique index on key) in transactions of 1000, as random
// inserts leave a tree (about 70% full), closes it (every change merged),
// copies the file and compacts the copy (leaves packed full), then times
// whole scans (Count of a filter no document matches) on the two,
// alternating, --rounds rounds of --scans scans each. Prints each store's
// fill factor and pages, and each round's mean time a scan.
//
//   mmdoc-fillprobe [--docs 1000000] [--scans 10] [--rounds 3] [--dir .]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "bench/micro/proto_util.h"
#include "bench/micro/seed_doc.h"
#include "mmdoc/db.h"

namespace {

namespace proto = mmdoc::proto;

std::unique_ptr<mmdoc::DB> OpenStore(const std::string& path) {
  mmdoc::Options o;
  o.durability = mmdoc::Durability::kNone;
  auto db = mmdoc::DB::Open(path, o);
  proto::Check(db.status(), "open");
  return std::move(db.value());
}

void Describe(const char* name, mmdoc::DB* db) {
  auto st = db->Stats();
  proto::Check(st.status(), "stats");
  uint64_t pages = 0;
  for (const mmdoc::CollectionStats& c : st.value().collections) pages += c.data_pages;
  std::printf("%-9s fill factor %.1f%%, %" PRIu64 " pages of documents\n", name,
              100 * st.value().fill_factor, pages);
}

// The mean time of `n` whole scans, in ms.
double Scans(mmdoc::DB* db, const mmdoc::Document& none, int n) {
  const double start = proto::Now();
  for (int i = 0; i < n; i++) {
    auto c = db->Count("docs", none);
    proto::Check(c.status(), "count");
    if (c.value() != 0) proto::Check(mmdoc::Status::Corruption("a needle matched"), "count");
  }
  return (proto::Now() - start) * 1000 / n;
}

}  // namespace

int main(int argc, char** argv) {
  proto::program = "mmdoc-fillprobe";
  uint64_t docs = 1000000;
  int scans = 10, rounds = 3;
  std::string dir = ".";
  CLI::App app{"mmdoc-fillprobe: whole scans of a loaded tree against a compacted copy"};
  app.add_option("--docs", docs, "documents to load")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--scans", scans, "scans per round and file")->check(CLI::Range(1, 1000000));
  app.add_option("--rounds", rounds, "rounds, alternating the files")->check(CLI::Range(1, 1000));
  app.add_option("--dir", dir, "where the two databases go");
  CLI11_PARSE(app, argc, argv);
  namespace fs = std::filesystem;
  const fs::path work = fs::path(dir) / ("fillprobe-" + std::to_string(getpid()));
  fs::create_directories(work);
  const std::string loaded = (work / "loaded").string(), packed = (work / "packed").string();
  {
    auto db = OpenStore(loaded);
    mmdoc::IndexOptions unique;
    unique.unique = true;
    proto::Check(db->CreateIndex("docs", "key", unique), "create index");
    std::mt19937_64 rng(1);
    for (uint64_t n = 0; n < docs;) {
      auto t = db->Begin();
      proto::Check(t.status(), "begin");
      for (int i = 0; i < 1000 && n < docs; i++, n++) {
        const mmdoc::Document d = proto::SeedDocument(proto::Guid(rng), rng);
        proto::Check(t.value()->Insert("docs", d), "insert");
      }
      proto::Check(t.value()->Commit(), "commit");
    }
    proto::Check(db->Close(), "close");
  }
  fs::copy_file(loaded, packed);
  fs::copy_file(loaded + "-log", packed + "-log");
  auto a = OpenStore(loaded);
  auto b = OpenStore(packed);
  proto::Check(b->Compact(), "compact");
  Describe("loaded", a.get());
  Describe("compacted", b.get());
  auto none = mmdoc::Document::FromJson(R"({"value": "no such value"})");
  proto::Check(none.status(), "filter");
  Scans(a.get(), none.value(), 1);  // each map's pages touched once first
  Scans(b.get(), none.value(), 1);
  std::printf("%5s %12s %12s %8s\n", "round", "loaded ms", "compacted ms", "ratio");
  for (int r = 0; r < rounds; r++) {
    const double x = Scans(a.get(), none.value(), scans);
    const double y = Scans(b.get(), none.value(), scans);
    std::printf("%5d %12.1f %12.1f %7.2fx\n", r + 1, x, y, x / y);
    std::fflush(stdout);
  }
  a.reset();
  b.reset();
  fs::remove_all(work);
  return 0;
}
