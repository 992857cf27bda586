// mmdoc-readprobe: point reads (DB::Get by _id) from one thread and from
// several at once, on one database, alternating, so that a change to the
// read path is measured against itself in the same process and hour, and
// so that readers that slow each other down show (docs/write-path.md).
//
// It opens a new database with a write buffer, inserts --docs documents of
// the seed's shape (36-character _id, key and value; a unique index on key)
// in transactions of 1000, then runs --rounds rounds of --lookups random
// gets on one thread and on --threads threads (the lookups split between
// them), and prints each round's rate. The buffer is left as the inserts
// left it (unmerged changes, runs): the reads look through it.
//
//   mmdoc-readprobe [--docs 200000] [--lookups 1000000] [--threads 2]
//                   [--rounds 3] [--dir .]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/micro/proto_util.h"
#include "bench/micro/seed_doc.h"
#include "mmdoc/db.h"

namespace {

namespace proto = mmdoc::proto;

// `n` gets of random ids from `ids` on `threads` threads; ops/s.
double Lookups(mmdoc::DB* db, const std::vector<std::string>& ids, uint64_t n, int threads,
               uint64_t seed) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; t++) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 1000 + static_cast<uint64_t>(t));
      const uint64_t mine = n / static_cast<uint64_t>(threads);
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      for (uint64_t i = 0; i < mine; i++) {
        auto d = db->Get("docs", mmdoc::Value::String(ids[rng() % ids.size()]));
        proto::Check(d.status(), "get");
      }
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const double start = proto::Now();
  go.store(true);
  for (std::thread& w : workers) w.join();
  return static_cast<double>(n) / (proto::Now() - start);
}

}  // namespace

int main(int argc, char** argv) {
  mmdoc::proto::program = "mmdoc-readprobe";
  uint64_t docs = 200000, lookups = 1000000, rounds = 3;
  int threads = 2;
  std::string dir = ".";
  CLI::App app{"mmdoc-readprobe: point reads on one thread against several at once"};
  app.add_option("--docs", docs, "documents to load")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--lookups", lookups, "lookups per round")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--threads", threads, "reading threads")->check(CLI::Range(1, 64));
  app.add_option("--rounds", rounds, "rounds")->check(CLI::Range(uint64_t{1}, uint64_t{1000}));
  app.add_option("--dir", dir, "where the database goes");
  CLI11_PARSE(app, argc, argv);
  namespace fs = std::filesystem;
  const fs::path work = fs::path(dir) / ("readprobe-" + std::to_string(getpid()));
  fs::create_directories(work);
  mmdoc::Options o;
  o.durability = mmdoc::Durability::kNone;
  auto db = mmdoc::DB::Open((work / "db").string(), o);
  proto::Check(db.status(), "open");
  mmdoc::IndexOptions unique;
  unique.unique = true;
  proto::Check(db.value()->CreateIndex("docs", "key", unique), "create index");
  std::mt19937_64 rng(1);
  std::vector<std::string> ids;
  ids.reserve(docs);
  const double fill = proto::Now();
  while (ids.size() < docs) {
    auto t = db.value()->Begin();
    proto::Check(t.status(), "begin");
    for (int i = 0; i < 1000 && ids.size() < docs; i++) {
      ids.push_back(proto::Guid(rng));
      const mmdoc::Document d = proto::SeedDocument(ids.back(), rng);
      proto::Check(t.value()->Insert("docs", d), "insert");
    }
    proto::Check(t.value()->Commit(), "commit");
  }
  std::printf("inserted %" PRIu64 " documents in %.1f s\n", docs, proto::Now() - fill);
  std::printf("%5s %12s %12s %8s\n", "round", "1 thread/s", "threads/s", "scaling");
  for (uint64_t r = 0; r < rounds; r++) {
    const double one = Lookups(db.value().get(), ids, lookups, 1, 2 * r + 1);
    const double many = Lookups(db.value().get(), ids, lookups, threads, 2 * r + 2);
    std::printf("%5" PRIu64 " %12.0f %12.0f %7.2fx\n", r + 1, one, many, many / one);
    std::fflush(stdout);
  }
  db.value().reset();
  fs::remove_all(work);
  return 0;
}
