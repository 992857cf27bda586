// Point reads (DB::Get, DB::GetBy) share one snapshot between commits,
// pinned through reader slots (engine/shared_read.h). These tests check
// what that must not change: a read sees every commit that returned before
// it began, never a document half-written or of another key, and never an
// older value than the same thread saw before; a snapshot left by the reads
// does not keep pages from reuse once something commits; compaction and
// close let go of it. Test names contain "concurrency": CI runs them under
// ThreadSanitizer.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"
#include "tests/support/thread_errors.h"

namespace mmdoc::test {
namespace {

// {_id: k, v: version, key: "k<k>", pad: ...}; the padding makes documents
// of different sizes, so that a torn read would show.
Document Versioned(int32_t k, int64_t v, size_t pad) {
  auto d = Document::FromJson("{\"_id\": " + std::to_string(k) + ", \"v\": " + std::to_string(v) +
                              ", \"key\": \"k" + std::to_string(k) + "\", \"pad\": \"" +
                              std::string(pad, static_cast<char>('a' + v % 26)) + "\"}");
  return d.value();
}

// The document's v, after checking it is key k's and whole; -1 if not.
int64_t VersionOf(const Document& d, int32_t k) {
  auto id = d.Get("_id");
  auto v = d.Get("v");
  auto pad = d.Get("pad");
  if (!id.ok() || !v.ok() || !pad.ok() || id.value() != Value::Int32(k)) return -1;
  const bson_value_t* p = pad.value().get();
  const bson_value_t* n = v.value().get();
  const int64_t version = n->value_type == BSON_TYPE_INT32 ? n->value.v_int32 : n->value.v_int64;
  for (uint32_t i = 0; i < p->value.v_utf8.len; i++)
    if (p->value.v_utf8.str[i] != static_cast<char>('a' + version % 26)) return -1;
  return version;
}

// A writer replaces documents with rising versions and, once each commit
// has returned, publishes the version; readers on several threads read by
// _id and by a unique key and require at least the version published
// before their read began, of the right key, whole, and never older than
// they saw before.
void ReadersSeeEveryReturnedCommit(Options o, bool compact) {
  const int32_t keys = 64;
  const int64_t commits = (kTsan ? 600 : 3000) * static_cast<int64_t>(Scale());
  TestDB db(o);
  IndexOptions unique;
  unique.unique = true;
  REQUIRE(db->CreateIndex("docs", "key", unique).ok());
  for (int32_t k = 0; k < keys; k++) REQUIRE(db->Insert("docs", Versioned(k, 0, 10)).ok());

  std::vector<std::atomic<int64_t>> published(keys);
  for (auto& p : published) p.store(0);
  std::atomic<bool> done{false};
  ThreadErrors problems;
  std::thread writer([&] {
    std::mt19937_64 rng(7);
    for (int64_t v = 1; v <= commits && !problems.any(); v++) {
      const int32_t k = static_cast<int32_t>(rng() % keys);
      Status s = db->Replace("docs", Value::Int32(k), Versioned(k, v, rng() % 3000));
      if (!s.ok()) {
        problems.Add("replace: " + s.ToString());
        break;
      }
      published[k].store(v, std::memory_order_release);
      if (compact && v % 500 == 0) {
        s = db->Compact();
        if (!s.ok()) problems.Add("compact: " + s.ToString());
      }
    }
    done = true;
  });
  std::vector<std::thread> readers;
  std::atomic<uint64_t> reads{0};
  for (int t = 0; t < 3; t++) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::vector<int64_t> seen(keys, 0);
      while (!done.load() && !problems.any()) {
        const int32_t k = static_cast<int32_t>(rng() % keys);
        const int64_t floor = published[k].load(std::memory_order_acquire);
        const bool by_key = rng() % 2 == 0;
        auto d = by_key ? db->GetBy("docs", "key", Value::String("k" + std::to_string(k)))
                        : db->Get("docs", Value::Int32(k));
        if (!d.ok()) {
          problems.Add("read " + std::to_string(k) + ": " + d.status().ToString());
          return;
        }
        const int64_t v = VersionOf(d.value(), k);
        if (v < 0) {
          problems.Add("read " + std::to_string(k) +
                       ": torn or another key's: " + d.value().ToJson().substr(0, 80));
        } else if (v < floor) {
          problems.Add("read " + std::to_string(k) + ": version " + std::to_string(v) +
                       " after commit " + std::to_string(floor) + " returned");
        } else if (v < seen[k]) {
          problems.Add("read " + std::to_string(k) + ": version " + std::to_string(v) +
                       " after this thread saw " + std::to_string(seen[k]));
        }
        seen[k] = std::max(seen[k], v);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  writer.join();
  for (std::thread& r : readers) r.join();
  problems.Check();
  std::fprintf(stderr, "shared point reads: %lld commits, %llu reads beside them\n",
               static_cast<long long>(commits), static_cast<unsigned long long>(reads.load()));
  for (int32_t k = 0; k < keys; k++) {
    auto d = db->Get("docs", Value::Int32(k));
    REQUIRE(d.ok());
    REQUIRE(VersionOf(d.value(), k) == published[k].load());
  }
}

TEST_CASE("concurrency shared point reads: readers see every returned commit, whole") {
  Options o;
  o.durability = Durability::kNone;
  SECTION("with the default write buffer") { ReadersSeeEveryReturnedCommit(o, false); }
  SECTION("with a small buffer: merges and runs under the reads") {
    o.write_buffer_size = 64 << 10;
    ReadersSeeEveryReturnedCommit(o, false);
  }
  SECTION("without a buffer") {
    o.write_buffer_size = 0;
    ReadersSeeEveryReturnedCommit(o, false);
  }
  SECTION("while the file is compacted") { ReadersSeeEveryReturnedCommit(o, true); }
}

TEST_CASE("concurrency shared point reads: the snapshot they leave pins no pages after a commit") {
  for (const uint64_t buffer : {uint64_t{0}, uint64_t{64} << 20}) {
    INFO("write buffer " << buffer);
    Options o;
    o.durability = Durability::kNone;
    o.write_buffer_size = buffer;
    TestDB db(o);
    REQUIRE(db->Insert("docs", Versioned(1, 1, 100)).ok());
    REQUIRE(db->Get("docs", Value::Int32(1)).ok());
    // The read's snapshot stays for the next reads, as a library reader:
    // the caller's count does not show it, the oldest snapshot does.
    auto held = db->Stats().value();
    CHECK(held.readers == 0);
    CHECK(held.oldest_reader_txid != 0);
    // A commit lets go of it (without a buffer, the commit's own pages are
    // then free for the next one).
    REQUIRE(db->Replace("docs", Value::Int32(1), Versioned(1, 2, 100)).ok());
    // With a buffer the write starts the merger's key-filter build, whose
    // snapshot is brief (long under TSan): wait it out, not the state.
    auto after = db->Stats().value();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (after.oldest_reader_txid != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      after = db->Stats().value();
    }
    CHECK(after.readers == 0);
    CHECK(after.oldest_reader_txid == 0);
    auto d = db->Get("docs", Value::Int32(1));
    REQUIRE(d.ok());
    CHECK(VersionOf(d.value(), 1) == 2);
  }
}

TEST_CASE("concurrency shared point reads: rewrites beside point reads reuse pages") {
  // Without a buffer every commit copies the pages it changes; if the
  // snapshot the reads left kept the old copies, the file would grow with
  // every rewrite.
  Options o;
  o.durability = Durability::kNone;
  o.write_buffer_size = 0;
  TestDB db(o);
  for (int32_t k = 0; k < 50; k++) REQUIRE(db->Insert("docs", Versioned(k, 0, 2000)).ok());
  auto grown = [&](int rounds) {
    const uint64_t before = db->Stats().value().page_count;
    for (int i = 1; i <= rounds; i++) {
      for (int32_t k = 0; k < 50; k++) {
        REQUIRE(db->Get("docs", Value::Int32(k)).ok());
        REQUIRE(db->Replace("docs", Value::Int32(k), Versioned(k, i, 2000)).ok());
      }
    }
    return db->Stats().value().page_count - before;
  };
  (void)grown(3);  // the free list and pending pages settle
  const uint64_t growth = grown(20);
  INFO("pages added over 1000 rewrites beside reads: " << growth);
  CHECK(growth < 50);
}

TEST_CASE("concurrency shared point reads: close and reopen after reads, with the state left") {
  TempDir dir;
  const std::string path = dir.File("db");
  {
    auto db = DB::Open(path).value();
    REQUIRE(db->Insert("docs", Versioned(1, 1, 10)).ok());
    REQUIRE(db->Get("docs", Value::Int32(1)).ok());
    REQUIRE(db->Close().ok());
  }
  auto db = DB::Open(path).value();
  auto d = db->Get("docs", Value::Int32(1));
  REQUIRE(d.ok());
  CHECK(VersionOf(d.value(), 1) == 1);
  RequireCheckPasses(db.get());
}

}  // namespace
}  // namespace mmdoc::test
