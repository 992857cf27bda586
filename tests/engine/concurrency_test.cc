// Concurrency: snapshot readers beside one writer, several writer
// threads in group and fsync mode, group commit under simulated power loss,
// and periodic mode's background flush. Every test name contains
// "concurrency": CI runs exactly these under ThreadSanitizer
// (.ci/run, ctest -R concurrency).
//
// Catch2 v2 assertions are not thread-safe, so worker threads never call
// REQUIRE/CHECK: they record problems in an Errors object that the test's
// own thread checks after joining them.
//
// Sizes scale with MMDOC_TEST_SCALE (mmdoc::test::Scale()); seeds are printed
// and replay with MMDOC_TEST_SEED.
#include <bson/bson.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mmdoc/db.h"
#include "storage/file_system.h"
#include "tests/support/fault_fs.h"
#include "tests/support/fs_wrapper.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"
#include "tests/support/thread_errors.h"

namespace mmdoc::test {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

using Errors = ThreadErrors;

// A FileSystem that passes everything to the POSIX one, counts the syncs of
// the log and can make each of them take at least `delay` (a slow disk), so
// that concurrent commits reliably overlap a sync.
class CountingFileSystem final : public test::FileSystemWrapper {
 public:
  explicit CountingFileSystem(std::chrono::microseconds delay = std::chrono::microseconds(0))
      : delay_(delay) {}

  uint64_t log_syncs() const { return log_syncs_.load(); }

  Result<std::unique_ptr<storage::File>> Open(const std::string& path, OpenMode mode) override {
    auto f = base()->Open(path, mode);
    if (!f.ok()) return f.status();
    const bool is_log = path.size() >= 4 && path.compare(path.size() - 4, 4, "-log") == 0;
    return std::unique_ptr<storage::File>(new CountingFile(this, std::move(f.value()), is_log));
  }

 private:
  class CountingFile final : public test::FileWrapper {
   public:
    CountingFile(CountingFileSystem* fs, std::unique_ptr<storage::File> real, bool is_log)
        : FileWrapper(std::move(real)), fs_(fs), is_log_(is_log) {}
    Status Sync() override {
      if (is_log_) {
        fs_->log_syncs_.fetch_add(1);
        if (fs_->delay_.count() > 0) std::this_thread::sleep_for(fs_->delay_);
      }
      return real()->Sync();
    }

   private:
    CountingFileSystem* fs_;
    bool is_log_;
  };

  std::chrono::microseconds delay_;
  std::atomic<uint64_t> log_syncs_{0};
};

// --- documents ---

std::string RandomText(std::mt19937_64& rng, size_t n) {
  std::string s(n, 'a');
  for (char& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

Document FromBson(bson_t* b) {
  auto d = Document::FromBson(b);
  bson_destroy(b);
  return d.value();
}

// {_id: id, balance: balance, last: last, pad: pad}
Document Account(int32_t id, int64_t balance, int64_t last, const std::string& pad) {
  bson_t b = BSON_INITIALIZER;
  BSON_APPEND_INT32(&b, "_id", id);
  BSON_APPEND_INT64(&b, "balance", balance);
  BSON_APPEND_INT64(&b, "last", last);
  BSON_APPEND_UTF8(&b, "pad", pad.c_str());
  return FromBson(&b);
}

// {_id: name, n: n}
Document Counter(const std::string& name, int64_t n) {
  bson_t b = BSON_INITIALIZER;
  BSON_APPEND_UTF8(&b, "_id", name.c_str());
  BSON_APPEND_INT64(&b, "n", n);
  return FromBson(&b);
}

// {_id: id, seq: seq, w: writer, pad: pad}
Document Entry(const std::string& id, int64_t seq, int32_t writer, const std::string& pad) {
  bson_t b = BSON_INITIALIZER;
  BSON_APPEND_UTF8(&b, "_id", id.c_str());
  BSON_APPEND_INT64(&b, "seq", seq);
  BSON_APPEND_INT32(&b, "w", writer);
  BSON_APPEND_UTF8(&b, "pad", pad.c_str());
  return FromBson(&b);
}

// {$inc: {balance: delta}, $set: {last: last}}
Document IncBalance(int64_t delta, int64_t last) {
  bson_t b = BSON_INITIALIZER, inc, set;
  BSON_APPEND_DOCUMENT_BEGIN(&b, "$inc", &inc);
  BSON_APPEND_INT64(&inc, "balance", delta);
  bson_append_document_end(&b, &inc);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "$set", &set);
  BSON_APPEND_INT64(&set, "last", last);
  bson_append_document_end(&b, &set);
  return FromBson(&b);
}

Document IdIs(int32_t id) {
  bson_t b = BSON_INITIALIZER;
  BSON_APPEND_INT32(&b, "_id", id);
  return FromBson(&b);
}

// An int64 (or int32) field; false when missing or of another type.
bool IntField(const Document& d, const char* field, int64_t* out) {
  auto v = d.Get(field);
  if (!v.ok()) return false;
  const bson_value_t* bv = v.value().get();
  if (bv->value_type == BSON_TYPE_INT64) {
    *out = bv->value.v_int64;
  } else if (bv->value_type == BSON_TYPE_INT32) {
    *out = bv->value.v_int32;
  } else {
    return false;
  }
  return true;
}

bool StringField(const Document& d, const char* field, std::string* out) {
  auto v = d.Get(field);
  if (!v.ok() || v.value().get()->value_type != BSON_TYPE_UTF8) return false;
  const bson_value_t* bv = v.value().get();
  out->assign(bv->value.v_utf8.str, bv->value.v_utf8.len);
  return true;
}

// Reads a counter's n in a transaction; 0 when the counter does not exist.
Status ReadCounter(Transaction* t, const std::string& name, int64_t* n) {
  auto d = t->Get("meta", Value::String(name));
  if (d.status().IsNotFound()) {
    *n = 0;
    return Status::OK();
  }
  if (!d.ok()) return d.status();
  if (!IntField(d.value(), "n", n)) return Status::Corruption("counter without n");
  return Status::OK();
}

// Every document of a collection in one snapshot: _id (as JSON) -> bytes.
Status ReadAll(Transaction* t, const std::string& coll, std::map<std::string, std::string>* out) {
  out->clear();
  auto c = t->Find(coll, Document());
  if (!c.ok()) return c.status();
  while (c.value()->Next()) {
    Document d = c.value()->document();
    auto id = d.Get("_id");
    if (!id.ok()) return Status::Corruption("document without _id");
    (*out)[id.value().ToJson()] = d.bytes();
  }
  return c.value()->status();
}

// ===========================================================================
// 1. Readers in snapshots beside one writer: transfers keep the sum.
// ===========================================================================

// Accounts 0..n-1 start at kStart each. Every commit c (1, 2, ...) moves
// money between accounts, sets last = c on each account it touches and sets
// the "commits" counter to c. In any snapshot: the balances sum to
// n * kStart, none is negative, and the largest `last` equals the counter
// (the snapshot holds all of commit c and nothing of c + 1).
constexpr int64_t kStart = 1000;

struct Bank {
  int32_t n = 0;
  int64_t total = 0;
};

// Checks one snapshot; returns "" or the problem. *commits gets the counter.
std::string CheckBankSnapshot(Transaction* t, const Bank& bank, std::mt19937_64& rng,
                              int64_t* commits) {
  int64_t c = 0;
  Status s = ReadCounter(t, "commits", &c);
  if (!s.ok()) return "counter: " + s.ToString();
  std::map<std::string, std::string> all;
  s = ReadAll(t, "accounts", &all);
  if (!s.ok()) return "find: " + s.ToString();
  if (static_cast<int32_t>(all.size()) != bank.n) {
    return "snapshot of commit " + std::to_string(c) + " has " + std::to_string(all.size()) +
           " accounts";
  }
  int64_t sum = 0, max_last = 0;
  for (const auto& [id, bytes] : all) {
    Document d = Document::FromTrustedBytes(bytes);
    int64_t bal = 0, last = 0;
    if (!IntField(d, "balance", &bal) || !IntField(d, "last", &last)) {
      return "malformed account " + d.ToJson();
    }
    if (bal < 0) return "negative balance in " + d.ToJson();
    sum += bal;
    max_last = std::max(max_last, last);
  }
  if (sum != bank.total) {
    return "snapshot of commit " + std::to_string(c) + ": sum " + std::to_string(sum) +
           " != " + std::to_string(bank.total) + " (part of a commit seen)";
  }
  if (max_last != c) {
    return "snapshot of commit " + std::to_string(c) + " holds an account last changed by commit " +
           std::to_string(max_last);
  }
  // Point reads in the same snapshot agree with the scan.
  for (int i = 0; i < 3; i++) {
    const int32_t id = static_cast<int32_t>(rng() % bank.n);
    auto d = t->Get("accounts", Value::Int32(id));
    if (!d.ok()) return "get " + std::to_string(id) + ": " + d.status().ToString();
    auto it = all.find(Value::Int32(id).ToJson());
    if (it == all.end() || it->second != d.value().bytes()) {
      return "get " + std::to_string(id) + " disagrees with the scan in one snapshot";
    }
  }
  // The snapshot does not move while it is open, whatever the writer did.
  std::this_thread::yield();
  std::map<std::string, std::string> again;
  s = ReadAll(t, "accounts", &again);
  if (!s.ok()) return "find again: " + s.ToString();
  if (again != all) return "snapshot of commit " + std::to_string(c) + " changed while open";
  *commits = c;
  return "";
}

TEST_CASE("concurrency: readers in snapshots see whole commits while one writer transfers") {
  const uint64_t seed = Seed("concurrency readers/writer");
  std::mt19937_64 rng(seed);
  Options o;
  o.durability = Durability::kNone;  // the question here is visibility, not the disk
  TestDB db(o);

  Bank bank;
  bank.n = 40;
  bank.total = bank.n * kStart;
  {
    auto t = db->Begin().value();
    for (int32_t i = 0; i < bank.n; i++) {
      // Some accounts are large (overflow pages), so commits rewrite runs.
      const size_t pad = rng() % 5 == 0 ? 3000 + rng() % 6000 : 10 + rng() % 200;
      REQUIRE(t->Insert("accounts", Account(i, kStart, 0, RandomText(rng, pad))).ok());
    }
    REQUIRE(t->Insert("meta", Counter("commits", 0)).ok());
    REQUIRE(t->Commit().ok());
  }

  const int readers = 4;
  const uint64_t commits = (kTsan ? 200 : 400) * Scale();
  Errors errors;
  std::atomic<int64_t> committed{0};
  std::atomic<uint64_t> aborted{0};

  // One transfer transaction (or an aborted one); commit number c + 1.
  auto writer_step = [&](std::mt19937_64& wrng) -> bool {
    auto tr = db->Begin();
    if (!tr.ok()) {
      errors.Add("begin: " + tr.status().ToString());
      return false;
    }
    Transaction* t = tr.value().get();
    int64_t c = 0;
    Status s = ReadCounter(t, "commits", &c);
    const int64_t next = c + 1;
    const int transfers = wrng() % 8 == 0 ? 2 + static_cast<int>(wrng() % 4) : 1;
    for (int k = 0; k < transfers && s.ok(); k++) {
      const int32_t a = static_cast<int32_t>(wrng() % bank.n);
      const int32_t b = static_cast<int32_t>((a + 1 + wrng() % (bank.n - 1)) % bank.n);
      auto da = t->Get("accounts", Value::Int32(a));
      if (!da.ok()) {
        s = da.status();
        break;
      }
      int64_t bal = 0;
      IntField(da.value(), "balance", &bal);
      const int64_t amount = bal == 0 ? 0 : static_cast<int64_t>(wrng() % (bal + 1));
      if (wrng() % 2) {
        // Read-modify-write with Replace (the pad changes size too).
        std::string pad;
        StringField(da.value(), "pad", &pad);
        if (wrng() % 4 == 0) pad = RandomText(wrng, wrng() % 3 == 0 ? 4000 : 50);
        s = t->Replace("accounts", Value::Int32(a), Account(a, bal - amount, next, pad));
      } else {
        s = t->UpdateOne("accounts", IdIs(a), IncBalance(-amount, next)).status();
      }
      if (s.ok()) s = t->UpdateOne("accounts", IdIs(b), IncBalance(amount, next)).status();
    }
    if (s.ok()) s = t->Replace("meta", Value::String("commits"), Counter("commits", next));
    if (!s.ok()) {
      errors.Add("transfer: " + s.ToString());
      return false;
    }
    if (wrng() % 10 == 0) {
      t->Abort();
      aborted++;
      return true;
    }
    s = t->Commit();
    if (!s.ok()) {
      errors.Add("commit: " + s.ToString());
      return false;
    }
    committed.store(next);
    return true;
  };

  // The writer alone, for a baseline rate.
  std::mt19937_64 wrng(seed ^ 0x77);
  const uint64_t alone = commits / 4;
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < alone; i++) REQUIRE(writer_step(wrng));
  const double alone_secs = SecondsSince(t0);
  errors.Check();

  // A snapshot held open across the whole concurrent phase.
  auto held = db->BeginRead().value();
  int64_t held_commit = 0;
  REQUIRE(ReadCounter(held.get(), "commits", &held_commit).ok());
  std::map<std::string, std::string> held_docs;
  REQUIRE(ReadAll(held.get(), "accounts", &held_docs).ok());

  std::atomic<bool> writer_done{false};
  std::atomic<uint64_t> snapshots{0};
  std::vector<std::thread> threads;
  std::vector<std::set<int64_t>> seen(readers);
  for (int r = 0; r < readers; r++) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rrng(seed + 1000 + r);
      int64_t prev = -1;
      // At least a few snapshots each, then until the writer is done.
      for (int k = 0; !writer_done.load() || k < 3; k++) {
        auto tr = db->BeginRead();
        if (!tr.ok()) {
          errors.Add("begin read: " + tr.status().ToString());
          return;
        }
        int64_t c = -1;
        std::string e = CheckBankSnapshot(tr.value().get(), bank, rrng, &c);
        if (!e.empty()) {
          errors.Add(e);
          return;
        }
        // Snapshots a thread takes one after another never go back in time.
        if (c < prev) {
          errors.Add("snapshot went back from commit " + std::to_string(prev) + " to " +
                     std::to_string(c));
          return;
        }
        prev = c;
        seen[r].insert(c);
        snapshots++;
        // Sometimes hold the snapshot for a while across writer commits.
        if (rrng() % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  t0 = Clock::now();
  for (uint64_t i = 0; i < commits; i++) {
    if (!writer_step(wrng)) break;
  }
  const double with_secs = SecondsSince(t0);
  writer_done = true;
  for (auto& th : threads) th.join();
  errors.Check();

  // The held snapshot saw none of the concurrent commits.
  int64_t c_now = 0;
  REQUIRE(ReadCounter(held.get(), "commits", &c_now).ok());
  REQUIRE(c_now == held_commit);
  std::map<std::string, std::string> held_again;
  REQUIRE(ReadAll(held.get(), "accounts", &held_again).ok());
  REQUIRE(held_again == held_docs);
  held.reset();

  // Progress: the writer finished all its transactions while readers held
  // snapshots open all the time (the held one included).
  const int64_t total = committed.load();
  REQUIRE(static_cast<uint64_t>(total) + aborted.load() == alone + commits);
  std::set<int64_t> distinct;
  for (const auto& s : seen) distinct.insert(s.begin(), s.end());
  std::fprintf(stderr,
               "concurrency readers/writer: %llu commits (%llu aborted); writer alone %.0f "
               "txn/s, with %d readers %.0f txn/s (ratio %.2f); %llu reader snapshots over %zu "
               "distinct commits\n",
               static_cast<unsigned long long>(total),
               static_cast<unsigned long long>(aborted.load()), alone / alone_secs, readers,
               commits / with_secs, (commits / with_secs) / (alone / alone_secs),
               static_cast<unsigned long long>(snapshots.load()), distinct.size());
  // Readers ran concurrently with the writer, not only before or after it.
  REQUIRE(distinct.size() >= 2);

  auto t = db->BeginRead().value();
  int64_t c_end = -1;
  std::string e = CheckBankSnapshot(t.get(), bank, rng, &c_end);
  INFO(e);
  REQUIRE(e.empty());
  REQUIRE(c_end == total);
}

// ===========================================================================
// 2. An old snapshot keeps the pages it can reach (rule 5).
// ===========================================================================

TEST_CASE("concurrency: an old snapshot reads the same documents while a writer rewrites them") {
  const uint64_t seed = Seed("concurrency old snapshot");
  std::mt19937_64 rng(seed);
  Options o;
  o.durability = Durability::kNone;
  o.log_size = 256 << 10;  // log-full checkpoints during the rewrites
  TestDB db(o);

  const int32_t n = 60;
  {
    auto t = db->Begin().value();
    for (int32_t i = 0; i < n; i++) {
      const size_t pad = rng() % 4 == 0 ? 5000 + rng() % 20000 : 20 + rng() % 400;
      REQUIRE(t->Insert("docs", Account(i, i, 0, RandomText(rng, pad))).ok());
    }
    REQUIRE(t->Commit().ok());
  }

  auto before = db->Stats().value();
  REQUIRE(before.readers == 0);
  auto old = db->BeginRead().value();
  std::map<std::string, std::string> first;
  REQUIRE(ReadAll(old.get(), "docs", &first).ok());
  REQUIRE(first.size() == static_cast<size_t>(n));
  {
    auto st = db->Stats().value();
    REQUIRE(st.readers >= 1);
    REQUIRE(st.oldest_reader_txid == before.txid);
  }

  // A writer rewrites, deletes and re-inserts the same documents (and
  // checkpoints now and then); short-lived readers come and go beside it.
  const uint64_t rewrites = (kTsan ? 150 : 400) * Scale();
  Errors errors;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::mt19937_64 wrng(seed ^ 0x5);
    for (uint64_t k = 0; k < rewrites && !errors.any(); k++) {
      if (wrng() % 50 == 0) {
        Status s = db->Checkpoint();
        if (!s.ok()) errors.Add("checkpoint: " + s.ToString());
        continue;
      }
      auto tr = db->Begin();
      if (!tr.ok()) {
        errors.Add("begin: " + tr.status().ToString());
        break;
      }
      Transaction* t = tr.value().get();
      for (int j = 0; j < 1 + static_cast<int>(wrng() % 4); j++) {
        const int32_t id = static_cast<int32_t>(wrng() % n);
        const size_t pad = wrng() % 4 == 0 ? 5000 + wrng() % 20000 : 20 + wrng() % 400;
        Status s;
        if (wrng() % 5 == 0) {
          s = t->Delete("docs", Value::Int32(id));
          if (s.ok()) s = t->Insert("docs", Account(id, -1, k, RandomText(wrng, pad)));
        } else {
          s = t->Replace("docs", Value::Int32(id), Account(id, -1, k, RandomText(wrng, pad)));
        }
        if (!s.ok()) {
          errors.Add("rewrite: " + s.ToString());
          return;
        }
      }
      Status s = t->Commit();
      if (!s.ok()) {
        errors.Add("commit: " + s.ToString());
        return;
      }
    }
    done = true;
  });
  std::thread churn([&] {
    while (!done.load() && !errors.any()) {
      auto tr = db->BeginRead();
      if (!tr.ok()) {
        errors.Add("begin read: " + tr.status().ToString());
        return;
      }
      auto cnt = tr.value()->Count("docs", Document());
      if (!cnt.ok() || cnt.value() != static_cast<uint64_t>(n)) {
        errors.Add("count in a fresh snapshot: " + cnt.status().ToString());
        return;
      }
      auto st = db->Stats();
      if (!st.ok() || st.value().readers < 2 || st.value().oldest_reader_txid != before.txid) {
        errors.Add("stats do not show the old reader");
        return;
      }
    }
  });
  // Meanwhile this thread re-reads the old snapshot, over and over.
  uint64_t rereads = 0;
  while (!done.load() && !errors.any()) {
    std::map<std::string, std::string> again;
    Status s = ReadAll(old.get(), "docs", &again);
    INFO(s.ToString());
    REQUIRE(s.ok());
    REQUIRE(again == first);
    rereads++;
  }
  writer.join();
  churn.join();
  errors.Check();

  std::map<std::string, std::string> last;
  REQUIRE(ReadAll(old.get(), "docs", &last).ok());
  REQUIRE(last == first);
  auto pinned = db->Stats().value();
  REQUIRE(pinned.readers == 1);
  REQUIRE(pinned.oldest_reader_txid == before.txid);
  REQUIRE(pinned.txid > before.txid);
  old.reset();
  auto released = db->Stats().value();
  REQUIRE(released.readers == 0);
  // DB::Stats counts readers before opening its own snapshot: none is open.
  REQUIRE(released.oldest_reader_txid == 0);
  // With the reader gone, a commit frees what it pinned for reuse.
  REQUIRE(db->Replace("docs", Value::Int32(0), Account(0, 0, 0, "x")).ok());
  auto after = db->Stats().value();
  std::fprintf(stderr,
               "concurrency old snapshot: %llu rewrite txns, %llu re-reads of the old snapshot; "
               "pages %llu -> %llu while pinned (free %llu), free %llu after it closed\n",
               static_cast<unsigned long long>(rewrites), static_cast<unsigned long long>(rereads),
               static_cast<unsigned long long>(before.page_count),
               static_cast<unsigned long long>(pinned.page_count),
               static_cast<unsigned long long>(pinned.free_pages),
               static_cast<unsigned long long>(after.free_pages));
}

// ===========================================================================
// 3. Several writer threads: serialized, every commit acknowledged.
// ===========================================================================

struct WritersResult {
  uint64_t commits = 0;
  uint64_t log_syncs = 0;
  double seconds = 0;
};

// `writers` threads each run `per_writer` transactions that read the shared
// counter, write it back plus one, and insert a document of their own (one
// in ten is aborted instead). A side thread calls Stats, Flush and
// Checkpoint meanwhile. The counter must end at the number of commits.
WritersResult RunWriters(Durability mode, int writers, uint64_t per_writer, uint64_t seed) {
  // A sync takes at least 1 ms (a slow disk; 5 ms under TSan, where a
  // transaction itself takes about a millisecond), so commits overlap syncs.
  CountingFileSystem fs(std::chrono::microseconds(kTsan ? 5000 : 1000));
  Options o;
  o.durability = mode;
  o.file_system = &fs;
  o.log_size = 1 << 20;
  TestDB db(o);
  REQUIRE(db->Insert("meta", Counter("counter", 0)).ok());
  const uint64_t syncs_before = fs.log_syncs();

  Errors errors;
  std::atomic<uint64_t> commits{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int w = 0; w < writers; w++) {
    threads.emplace_back([&, w] {
      std::mt19937_64 wrng(seed + w);
      for (uint64_t i = 0; i < per_writer; i++) {
        auto tr = db->Begin();
        if (!tr.ok()) {
          errors.Add("begin: " + tr.status().ToString());
          return;
        }
        Transaction* t = tr.value().get();
        int64_t n = 0;
        Status s = ReadCounter(t, "counter", &n);
        if (s.ok()) s = t->Replace("meta", Value::String("counter"), Counter("counter", n + 1));
        const std::string id = "w" + std::to_string(w) + "-" + std::to_string(i);
        if (s.ok()) s = t->Insert("docs", Entry(id, n + 1, w, RandomText(wrng, 30)));
        if (!s.ok()) {
          errors.Add("txn: " + s.ToString());
          return;
        }
        if (wrng() % 10 == 0) {
          t->Abort();
          continue;
        }
        s = t->Commit();
        if (!s.ok()) {
          errors.Add("commit not acknowledged: " + s.ToString());
          return;
        }
        commits++;
      }
    });
  }
  std::thread side([&] {
    std::mt19937_64 srng(seed ^ 0x51de);
    while (!done.load()) {
      Status s;
      switch (srng() % 3) {
        case 0:
          s = db->Stats().status();
          break;
        case 1:
          s = db->Flush();
          break;
        default:
          s = db->Checkpoint();
          break;
      }
      if (!s.ok()) errors.Add("side thread: " + s.ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  for (auto& th : threads) th.join();
  WritersResult r;
  r.seconds = SecondsSince(t0);
  done = true;
  side.join();
  errors.Check();
  r.commits = commits.load();
  r.log_syncs = fs.log_syncs() - syncs_before;

  int64_t n = 0;
  {
    auto t = db->BeginRead().value();
    REQUIRE(ReadCounter(t.get(), "counter", &n).ok());
  }
  REQUIRE(static_cast<uint64_t>(n) == r.commits);
  REQUIRE(db->Count("docs").value() == r.commits);
  // Every counter value was taken by exactly one commit.
  auto docs = db->Find("docs", Document()).value();
  std::set<int64_t> seqs;
  for (const auto& d : docs) {
    int64_t s = 0;
    REQUIRE(IntField(d, "seq", &s));
    seqs.insert(s);
  }
  REQUIRE(seqs.size() == r.commits);
  REQUIRE(*seqs.begin() == 1);
  REQUIRE(*seqs.rbegin() == n);
  db.Reopen();
  REQUIRE(db->Count("docs").value() == r.commits);
  return r;
}

TEST_CASE("concurrency: writer threads in group mode are serialized and share syncs") {
  const uint64_t seed = Seed("concurrency group writers");
  const int writers = 8;
  const uint64_t per = 40 * Scale();
  WritersResult r = RunWriters(Durability::kGroup, writers, per, seed);
  std::fprintf(stderr,
               "concurrency group writers: %d threads, %llu commits, %llu log syncs (%.2f "
               "commits per sync), %.0f commits/s with a 1 ms sync\n",
               writers, static_cast<unsigned long long>(r.commits),
               static_cast<unsigned long long>(r.log_syncs),
               r.log_syncs ? static_cast<double>(r.commits) / r.log_syncs : 0.0,
               r.commits / r.seconds);
  // One sync covers the commits queued while the previous one ran: with 8
  // writers and a 1 ms sync there are far fewer syncs than commits.
  REQUIRE(r.log_syncs > 0);
  REQUIRE(r.log_syncs * 3 <= r.commits * 2);
}

TEST_CASE("concurrency: writer threads in fsync mode are serialized, one sync per commit") {
  const uint64_t seed = Seed("concurrency fsync writers");
  const int writers = 4;
  const uint64_t per = 25 * Scale();
  WritersResult r = RunWriters(Durability::kFsync, writers, per, seed);
  std::fprintf(stderr,
               "concurrency fsync writers: %d threads, %llu commits, %llu log syncs, %.0f "
               "commits/s with a 1 ms sync\n",
               writers, static_cast<unsigned long long>(r.commits),
               static_cast<unsigned long long>(r.log_syncs), r.commits / r.seconds);
  REQUIRE(r.log_syncs >= r.commits);
}

// ===========================================================================
// 4 and 5. Power loss with concurrent writers (group and periodic modes).
// ===========================================================================

// Writer threads on a FaultFileSystem. Each transaction reads the "seq"
// counter, sets it to seq + 1 and inserts the document "w<w>-<i>" with
// that seq; one in eight also rewrites one of the writer's older documents
// (same seq, new pad), one in ten is aborted. Since transactions are
// serialized, seq numbers the commits in commit order, and after a crash the
// database must hold exactly the commits with seq <= its counter (a prefix
// of the commit order, no holes).
struct Attempt {
  std::string id;
  std::string bytes;   // the document as inserted
  bool acked = false;  // Commit returned OK
};

struct PowerLossRun {
  std::map<int64_t, std::vector<Attempt>> attempts;  // by seq
  std::map<std::string, std::string> rewrites;       // id -> last rewritten bytes
  std::set<int64_t> acked_before_crash;              // seqs
  uint64_t commits = 0;
  uint64_t failed = 0;
};

class SeqWriters {
 public:
  SeqWriters(DB* db, int writers, uint64_t seed) : db_(db), writers_(writers), seed_(seed) {}

  // Each writer sleeps this long after each commit (default: not at all).
  void set_pause(std::chrono::microseconds p) { pause_ = p; }

  // Starts the writers; each stops after max_per_writer transactions, at
  // its first error, or when Stop() is called.
  void Start(uint64_t max_per_writer) {
    for (int w = 0; w < writers_; w++) {
      threads_.emplace_back([this, w, max_per_writer] { Loop(w, max_per_writer); });
    }
  }
  void Join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  void Stop() { stop_ = true; }
  uint64_t commits() const { return commits_.load(); }

  // The crash point: under the lock writers take to record an
  // acknowledgement, `crash` runs (it stops the disk) and the set of
  // commits acknowledged so far is copied. Every one of them returned from
  // Commit() before the disk stopped, so each must survive.
  template <typename Fn>
  void CrashNow(Fn crash) {
    std::lock_guard<std::mutex> l(mu_);
    crash();
    crashed_ = true;
    run_.acked_before_crash = acked_;
  }
  PowerLossRun Result() {
    std::lock_guard<std::mutex> l(mu_);
    run_.commits = commits_.load();
    return run_;
  }

 private:
  void Loop(int w, uint64_t max) {
    std::mt19937_64 rng(seed_ + 7919 * w);
    for (uint64_t i = 0; i < max && !stop_.load(); i++) {
      auto tr = db_->Begin();
      if (!tr.ok()) return;  // the disk stopped (sticky error)
      Transaction* t = tr.value().get();
      int64_t seq = 0;
      if (!ReadCounter(t, "seq", &seq).ok()) return;
      seq++;
      const std::string id = "w" + std::to_string(w) + "-" + std::to_string(i);
      const std::string pad =
          RandomText(rng, rng() % 6 == 0 ? 3000 + rng() % 5000 : 10 + rng() % 100);
      Document doc = Entry(id, seq, w, pad);
      Status s = t->Replace("meta", Value::String("seq"), Counter("seq", seq));
      if (s.IsNotFound()) s = t->Insert("meta", Counter("seq", seq));
      if (s.ok()) s = t->Insert("docs", doc);
      std::string rewritten_id, rewritten;
      if (s.ok() && i > 0 && rng() % 8 == 0) {
        // Rewrite an older document of this writer that committed.
        std::lock_guard<std::mutex> l(mu_);
        auto it = mine_[w].empty() ? mine_[w].end() : mine_[w].begin();
        if (it != mine_[w].end()) {
          std::advance(it, rng() % mine_[w].size());
          rewritten_id = it->first;
          Document old = Document::FromTrustedBytes(it->second);
          int64_t old_seq = 0;
          IntField(old, "seq", &old_seq);
          rewritten = Entry(rewritten_id, old_seq, w, RandomText(rng, 20)).bytes();
        }
      }
      if (s.ok() && !rewritten_id.empty()) {
        s = t->Replace("docs", Value::String(rewritten_id), Document::FromTrustedBytes(rewritten));
      }
      if (!s.ok()) return;  // an I/O error inside the transaction
      if (rng() % 10 == 0) {
        t->Abort();
        continue;
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        run_.attempts[seq].push_back(Attempt{id, doc.bytes(), false});
      }
      s = t->Commit();
      {
        std::lock_guard<std::mutex> l(mu_);
        if (!s.ok()) {
          run_.failed++;
          return;
        }
        commits_++;
        for (auto& a : run_.attempts[seq]) {
          if (a.id == id) a.acked = true;
        }
        mine_[w][id] = doc.bytes();
        if (!rewritten_id.empty()) mine_[w][rewritten_id] = rewritten;
        if (!crashed_) acked_.insert(seq);
      }
      if (pause_.count() > 0) std::this_thread::sleep_for(pause_);
    }
  }

  DB* db_;
  const int writers_;
  const uint64_t seed_;
  std::vector<std::thread> threads_;
  std::chrono::microseconds pause_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> commits_{0};
  std::mutex mu_;  // guards everything below
  bool crashed_ = false;
  std::set<int64_t> acked_;
  std::map<int, std::map<std::string, std::string>> mine_;
  PowerLossRun run_;
};

// After a crash and reopen: the database holds exactly the attempted
// commits with seq <= its counter, each with its inserted content (rewrites
// only change pad); `must_have` lists seqs that must be there. Returns ""
// or the problem; *counter gets the counter.
std::string CheckPrefix(DB* db, const PowerLossRun& run, const std::set<int64_t>& must_have,
                        int64_t* counter) {
  auto t = db->BeginRead().value();
  int64_t s = 0;
  Status st = ReadCounter(t.get(), "seq", &s);
  if (!st.ok()) return "counter: " + st.ToString();
  *counter = s;
  std::map<std::string, std::string> docs;
  st = ReadAll(t.get(), "docs", &docs);
  if (!st.ok()) return "read: " + st.ToString();
  for (int64_t m : must_have) {
    if (m > s) {
      return "acknowledged commit seq " + std::to_string(m) + " lost: the database is at seq " +
             std::to_string(s);
    }
  }
  std::set<std::string> expected_ids;
  for (const auto& [seq, list] : run.attempts) {
    if (seq > s) continue;
    if (list.size() != 1) continue;  // ambiguous (never expected in these tests)
    expected_ids.insert(Value::String(list[0].id).ToJson());
  }
  for (const auto& id : expected_ids) {
    if (!docs.count(id))
      return "document " + id + " of a commit <= seq " + std::to_string(s) + " missing";
  }
  for (const auto& [id, bytes] : docs) {
    Document d = Document::FromTrustedBytes(bytes);
    int64_t seq = 0;
    if (!IntField(d, "seq", &seq)) return "malformed " + d.ToJson();
    if (seq > s) {
      return "document " + d.ToJson() + " of a commit after the counter " + std::to_string(s);
    }
    auto it = run.attempts.find(seq);
    bool known = false;
    if (it != run.attempts.end()) {
      for (const auto& a : it->second) known |= Value::String(a.id).ToJson() == id;
    }
    if (!known) return "document " + d.ToJson() + " was never written";
  }
  if (static_cast<int64_t>(docs.size()) != s) {
    // Every commit inserted exactly one document.
    return std::to_string(docs.size()) + " documents at counter " + std::to_string(s);
  }
  return "";
}

void OpenCheckAndVerify(const std::string& path, Options o, const PowerLossRun& run,
                        const std::set<int64_t>& must_have, int64_t* counter) {
  auto db = DB::Open(path, o);
  INFO("open after power loss: " << db.status().ToString());
  REQUIRE(db.ok());
  RequireCheckPasses(db.value().get());
  std::string e = CheckPrefix(db.value().get(), run, must_have, counter);
  INFO(e);
  REQUIRE(e.empty());
}

TEST_CASE(
    "concurrency: group commit with many writers keeps every acknowledged commit "
    "after power loss") {
  const uint64_t seed = Seed("concurrency group power loss");
  const uint64_t runs = (kTsan ? 10 : 50) * Scale();
  const int writers = 6;
  mmdoc::test::RamDir dir;
  uint64_t total_acked = 0, total_survivors = 0, total_commits = 0, total_failed = 0;
  auto start = Clock::now();
  for (uint64_t run = 0; run < runs; run++) {
    std::mt19937_64 rng(seed + run * 0x9E3779B97F4A7C15ull);
    INFO("run " << run << " (seed " << seed << ")");
    const std::string path = dir.File("db" + std::to_string(run));
    FaultFileSystem fs;
    Options o;
    o.durability = Durability::kGroup;
    o.file_system = &fs;
    o.log_size = 64 << 10;  // log-full checkpoints happen during the run
    PowerLossRun result;
    {
      auto db = DB::Open(path, o);
      REQUIRE(db.ok());
      SeqWriters w(db.value().get(), writers, rng());
      // Crash after a random number of commits, while every writer is busy.
      const uint64_t crash_after = 1 + rng() % 150;
      w.Start(UINT64_MAX);
      auto wait_start = Clock::now();
      while (w.commits() < crash_after && SecondsSince(wait_start) < 20) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      // The disk stops taking writes and syncs: the power is gone (what
      // the writers write to the page cache after this is lost or not).
      w.CrashNow([&] { fs.FailAll(EIO); });
      w.Stop();
      w.Join();
      result = w.Result();
      db.value().reset();  // a close whose checkpoint fails
    }
    fs.ClearFaults();
    fs.SimulatePowerLoss(rng);
    if (rng() % 2) o.file_system = nullptr;
    int64_t counter = 0;
    OpenCheckAndVerify(path, o, result, result.acked_before_crash, &counter);
    total_acked += result.acked_before_crash.size();
    total_survivors += static_cast<uint64_t>(counter);
    total_commits += result.commits;
    total_failed += result.failed;
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
  }
  std::fprintf(stderr,
               "concurrency group power loss: %llu runs with %d writers in %.1f s: %llu commits "
               "acknowledged before the crash points, all kept; %llu commits survived; %llu "
               "commits acknowledged in all, %llu failed at the crash\n",
               static_cast<unsigned long long>(runs), writers, SecondsSince(start),
               static_cast<unsigned long long>(total_acked),
               static_cast<unsigned long long>(total_survivors),
               static_cast<unsigned long long>(total_commits),
               static_cast<unsigned long long>(total_failed));
}

TEST_CASE("concurrency: periodic mode flushes in the background and then loses nothing") {
  const uint64_t seed = Seed("concurrency periodic flush");
  std::mt19937_64 rng(seed);
  const uint32_t interval_ms = 50;
  const uint64_t runs = (kTsan ? 3 : 6) * Scale();
  mmdoc::test::RamDir dir;
  for (uint64_t run = 0; run < runs; run++) {
    INFO("run " << run << " (seed " << seed << ")");
    const std::string path = dir.File("db" + std::to_string(run));
    FaultFileSystem fs;
    Options o;
    o.durability = Durability::kPeriodic;
    o.sync_interval_ms = interval_ms;
    o.file_system = &fs;
    o.log_size = 4 << 20;  // no log-full checkpoint: only the flusher syncs
    PowerLossRun result;
    uint64_t syncs_during = 0;
    double commit_secs = 0, flush_wait = 0;
    {
      auto db = DB::Open(path, o);
      REQUIRE(db.ok());
      const uint64_t syncs0 = fs.Count(FaultFileSystem::Op::kSync, "-log");
      SeqWriters w(db.value().get(), 3, rng());
      // Commits spread over a few intervals, so flushes run beside them.
      w.set_pause(std::chrono::microseconds(3000));
      auto t0 = Clock::now();
      w.Start(30 * Scale());
      w.Join();
      commit_secs = SecondsSince(t0);
      const uint64_t syncs1 = fs.Count(FaultFileSystem::Op::kSync, "-log");
      syncs_during = syncs1 - syncs0;
      // Commits did not sync: at most one flush per interval ran meanwhile.
      INFO(syncs_during << " log syncs during " << commit_secs << " s of commits");
      REQUIRE(syncs_during <= commit_secs * 1000 / interval_ms + 2);
      REQUIRE(syncs_during < w.commits());
      // Wait past the interval for a flush that started after the last
      // commit (a flush that ran between the last commit and syncs1 did the
      // job already; then none follows and the wait ends at the timeout).
      t0 = Clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
      while (fs.Count(FaultFileSystem::Op::kSync, "-log") == syncs1 && SecondsSince(t0) < 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      flush_wait = SecondsSince(t0);
      // The flush has returned once Flush() finds nothing left to sync.
      w.CrashNow([&] { fs.FailAll(EIO); });
      result = w.Result();
      db.value().reset();
    }
    fs.ClearFaults();
    REQUIRE(result.failed == 0);
    fs.SimulatePowerLoss(rng);
    // Nothing committed before the flush may be lost.
    std::set<int64_t> all;
    for (const auto& [seq, list] : result.attempts) all.insert(seq);
    int64_t counter = 0;
    OpenCheckAndVerify(path, o, result, all, &counter);
    REQUIRE(static_cast<uint64_t>(counter) == result.commits);
    std::fprintf(stderr,
                 "concurrency periodic flush: run %llu: %llu commits in %.3f s with %llu log "
                 "syncs; a flush came %.3f s after the last commit; none lost\n",
                 static_cast<unsigned long long>(run),
                 static_cast<unsigned long long>(result.commits), commit_secs,
                 static_cast<unsigned long long>(syncs_during), flush_wait);
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
  }
}

TEST_CASE(
    "concurrency: periodic mode between flushes opens at an earlier intact commit, "
    "and close flushes") {
  const uint64_t seed = Seed("concurrency periodic power loss");
  const uint64_t runs = (kTsan ? 6 : 20) * Scale();
  mmdoc::test::RamDir dir;
  uint64_t lost_runs = 0, lost_commits = 0, closed_runs = 0;
  for (uint64_t run = 0; run < runs; run++) {
    std::mt19937_64 rng(seed + run * 0x9E3779B97F4A7C15ull);
    INFO("run " << run << " (seed " << seed << ")");
    const std::string path = dir.File("db" + std::to_string(run));
    FaultFileSystem fs;
    Options o;
    o.durability = Durability::kPeriodic;
    o.sync_interval_ms = 3600 * 1000;  // no flush during the run
    o.file_system = &fs;
    o.log_size = 64 << 10;  // but log-full checkpoints make some durable
    const bool close_cleanly = run % 3 == 0;
    PowerLossRun result;
    {
      auto db = DB::Open(path, o);
      REQUIRE(db.ok());
      SeqWriters w(db.value().get(), 4, rng());
      w.Start(1 + rng() % (40 * Scale()));
      w.Join();
      if (close_cleanly) {
        result = w.Result();
        db.value().reset();  // Close flushes (checkpoints)
      } else {
        w.CrashNow([&] { fs.FailAll(EIO); });
        result = w.Result();
        db.value().reset();
      }
    }
    fs.ClearFaults();
    REQUIRE(result.failed == 0);
    fs.SimulatePowerLoss(rng);
    std::set<int64_t> must;
    if (close_cleanly) {
      for (const auto& [seq, list] : result.attempts) must.insert(seq);
    }
    int64_t counter = 0;
    OpenCheckAndVerify(path, o, result, must, &counter);
    if (close_cleanly) {
      REQUIRE(static_cast<uint64_t>(counter) == result.commits);
      closed_runs++;
    } else if (static_cast<uint64_t>(counter) < result.commits) {
      lost_runs++;
      lost_commits += result.commits - counter;
    }
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
  }
  std::fprintf(stderr,
               "concurrency periodic power loss: %llu runs (%llu closed cleanly, nothing lost); "
               "%llu crashes lost recent commits (%llu commits), each opened at an intact "
               "earlier commit\n",
               static_cast<unsigned long long>(runs), static_cast<unsigned long long>(closed_runs),
               static_cast<unsigned long long>(lost_runs),
               static_cast<unsigned long long>(lost_commits));
}

TEST_CASE("concurrency: writers beside index DDL reuse only current write state") {
  // A committed write txn leaves its trees to the next (WriteState); the
  // next writer may begin between another's pager commit and its
  // publishing the catalog cache, and DDL commits keep nothing. Two
  // threads commit single inserts while a third builds and drops an index;
  // every insert must be found, and the file must check.
  const uint64_t seed = Seed("concurrency write state");
  const int per = static_cast<int>(400 * Scale());
  TestDB db([] {
    Options o;
    o.durability = Durability::kNone;
    return o;
  }());
  Errors errors;
  std::atomic<bool> done{false};
  auto writer = [&](int w) {
    std::mt19937_64 rng(seed + static_cast<uint64_t>(w));
    for (int i = 0; i < per && !errors.any(); i++) {
      const int id = w * 1000000 + i;
      std::string d = "{\"_id\": " + std::to_string(id) + ", \"k\": " + std::to_string(id) +
                      ", \"r\": " + std::to_string(rng() % 100) + "}";
      // Not J(): it uses Catch's INFO, which is not thread-safe.
      auto doc = Document::FromJson(d);
      Status s = doc.ok() ? db->Insert("c", doc.value()) : doc.status();
      if (!s.ok()) errors.Add("insert " + std::to_string(id) + ": " + s.ToString());
    }
  };
  std::thread ddl([&] {
    while (!done.load() && !errors.any()) {
      Status s = db->CreateIndex("c", "k", IndexOptions{true});
      if (!s.ok() && !s.IsAlreadyExists()) errors.Add("create index: " + s.ToString());
      s = db->DropIndex("c", "k");
      if (!s.ok() && !s.IsNotFound()) errors.Add("drop index: " + s.ToString());
    }
  });
  std::thread a(writer, 1), b(writer, 2);
  a.join();
  b.join();
  done.store(true);
  ddl.join();
  errors.Check();
  REQUIRE(db->Count("c").value() == static_cast<uint64_t>(2 * per));
  for (int w = 1; w <= 2; w++)
    for (int i = 0; i < per; i++) REQUIRE(db->Get("c", Value::Int32(w * 1000000 + i)).ok());
  REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
  CHECK(db->Count("c", J(R"({"k": {"$gte": 2000000}})")).value() == static_cast<uint64_t>(per));
  db.CheckNow();
}

// ------------------------------------------------------------ compaction --

Document IdDoc(int id, const std::string& pad) {
  auto d = Document::FromJson("{\"_id\": " + std::to_string(id) + ", \"pad\": \"" + pad + "\"}");
  return d.value();
}

TEST_CASE("concurrency: Compact beside threads reading with Get, Find and snapshots") {
  // Compact replaces the file under readers: a Get in flight, a cursor
  // half-way through a scan and an open snapshot must all go on reading
  // what they began on, with no crash and no false Corruption.
  const uint64_t seed = Seed("concurrency compact readers");
  const int docs = 2000;
  const int rounds = static_cast<int>(6 * Scale());
  TestDB db([] {
    Options o;
    o.durability = Durability::kNone;
    return o;
  }());
  std::mt19937_64 rng(seed);
  {
    auto t = db->Begin().value();
    for (int i = 0; i < docs; i++) REQUIRE(t->Insert("c", IdDoc(i, RandomText(rng, 50))).ok());
    REQUIRE(t->Commit().ok());
  }
  REQUIRE(db->DeleteMany("c", J(R"({"_id": {"$gte": 1000}})")).value() == 1000);
  Errors errors;
  std::atomic<bool> done{false};
  auto getter = [&](uint64_t r) {
    std::mt19937_64 g(seed + r);
    while (!done.load() && !errors.any()) {
      const int id = static_cast<int>(g() % 1000);
      auto got = db->Get("c", Value::Int32(id));
      if (!got.ok()) errors.Add("get " + std::to_string(id) + ": " + got.status().ToString());
    }
  };
  auto scanner = [&] {
    while (!done.load() && !errors.any()) {
      auto t = db->BeginRead();
      if (!t.ok()) {
        errors.Add("begin read: " + t.status().ToString());
        return;
      }
      auto cur = t.value()->Find("c", Document());
      if (!cur.ok()) {
        errors.Add("find: " + cur.status().ToString());
        return;
      }
      uint64_t n = 0;
      while (cur.value()->Next()) {
        n++;
        if (n % 100 == 0) std::this_thread::yield();  // let Compact run mid-scan
      }
      if (!cur.value()->status().ok()) errors.Add("scan: " + cur.value()->status().ToString());
      if (n != 1000) errors.Add("scan returned " + std::to_string(n) + " of 1000");
      auto again = t.value()->Get("c", Value::Int32(999));
      if (!again.ok()) errors.Add("snapshot get: " + again.status().ToString());
    }
  };
  std::thread g1(getter, 1), g2(getter, 2), sc(scanner);
  for (int i = 0; i < rounds && !errors.any(); i++) {
    Status s = db->Compact();
    if (!s.ok()) errors.Add("compact: " + s.ToString());
  }
  done.store(true);
  g1.join();
  g2.join();
  sc.join();
  errors.Check();
  CHECK(db->Count("c").value() == 1000);
  db.CheckNow();
}

TEST_CASE("concurrency: Compact with a snapshot or cursor open in the same thread") {
  TestDB db;
  for (int i = 0; i < 500; i++) REQUIRE(db->Insert("c", IdDoc(i, std::string(300, 'x'))).ok());
  auto snap = db->BeginRead().value();
  auto cur = snap->Find("c", Document()).value();
  for (int i = 0; i < 100; i++) REQUIRE(cur->Next());
  REQUIRE(db->Compact().ok());
  REQUIRE(db->Insert("c", IdDoc(1000, "after")).ok());
  // The cursor ends where its snapshot ends, not early; Get on the old
  // snapshot is not a false Corruption; new reads see the new file.
  uint64_t rest = 0;
  while (cur->Next()) rest++;
  CHECK(cur->status().ok());
  CHECK(rest == 400);
  auto old = snap->Get("c", Value::Int32(499));
  INFO(old.status().ToString());
  CHECK(old.ok());
  CHECK(snap->Get("c", Value::Int32(1000)).status().IsNotFound());
  CHECK(db->Count("c").value() == 501);
  cur.reset();
  snap.reset();
  db.CheckNow();
}

TEST_CASE(
    "concurrency: Compact, Check or Begin with a write transaction open in the same thread is "
    "Busy") {
  TestDB db;
  REQUIRE(db->Insert("c", IdDoc(1, "a")).ok());
  auto w = db->Begin().value();
  REQUIRE(w->Insert("c", IdDoc(2, "b")).ok());
  // Each would wait for this thread's own writer forever.
  CHECK(db->Compact().IsBusy());
  CHECK(db->Check().IsBusy());
  CHECK(db->Begin().status().IsBusy());
  CHECK(db->Insert("c", IdDoc(3, "c")).IsBusy());
  REQUIRE(w->Commit().ok());
  REQUIRE(db->Compact().ok());
  CHECK(db->Count("c").value() == 2);
  db.CheckNow();
}

TEST_CASE(
    "concurrency: two Compacts and a Checkpoint wait for writers in other threads and lose no "
    "commit") {
  // Writers commit while two threads compact (each copies and swaps) and a
  // third checkpoints: a Compact waits for the writer in progress and for
  // the other Compact, writers wait for it, and every acknowledged insert
  // is in the compacted file. With and without the write buffer (found by
  // an outside test: without it, two Compacts ran at once and the second
  // put back a copy that lacked the commits made meanwhile).
  const uint64_t seed = Seed("concurrency compact writers");
  const int per = static_cast<int>(150 * Scale());
  const uint64_t buffer = GENERATE(uint64_t{0}, Options().write_buffer_size);
  INFO("write buffer " << buffer);
  TestDB db([buffer] {
    Options o;
    o.durability = Durability::kNone;
    o.write_buffer_size = buffer;
    return o;
  }());
  Errors errors;
  std::atomic<int> compactions{0};
  std::atomic<bool> done{false};
  auto writer = [&](int w) {
    std::mt19937_64 rng(seed + static_cast<uint64_t>(w));
    for (int i = 0; i < per && !errors.any(); i++) {
      const int id = w * 100000 + i;
      if (rng() % 4 == 0) {
        // A transaction held open across a yield, so Compact must wait.
        auto t = db->Begin();
        if (!t.ok()) {
          errors.Add("begin: " + t.status().ToString());
          return;
        }
        Status s = t.value()->Insert("c", IdDoc(id, RandomText(rng, 20)));
        std::this_thread::yield();
        if (s.ok()) s = t.value()->Commit();
        if (!s.ok()) errors.Add("txn insert " + std::to_string(id) + ": " + s.ToString());
      } else {
        Status s = db->Insert("c", IdDoc(id, RandomText(rng, 20)));
        if (!s.ok()) errors.Add("insert " + std::to_string(id) + ": " + s.ToString());
      }
    }
  };
  auto compactor = [&] {
    while (!done.load() && !errors.any()) {
      Status s = db->Compact();
      if (!s.ok()) errors.Add("compact: " + s.ToString());
      compactions++;
    }
  };
  std::thread c1(compactor), c2(compactor);
  std::thread checkpointer([&] {
    while (!done.load() && !errors.any()) {
      Status s = db->Checkpoint();
      if (!s.ok()) errors.Add("checkpoint: " + s.ToString());
      std::this_thread::yield();
    }
  });
  std::thread a(writer, 1), b(writer, 2);
  a.join();
  b.join();
  done.store(true);
  c1.join();
  c2.join();
  checkpointer.join();
  errors.Check();
  CHECK(compactions.load() > 0);
  REQUIRE(db->Count("c").value() == static_cast<uint64_t>(2 * per));
  for (int w = 1; w <= 2; w++)
    for (int i = 0; i < per; i++) REQUIRE(db->Get("c", Value::Int32(w * 100000 + i)).ok());
  db.Reopen();
  REQUIRE(db->Count("c").value() == static_cast<uint64_t>(2 * per));
  db.CheckNow();
}

// Calls a hook before and after every rename.
class RenameHookFileSystem final : public test::FileSystemWrapper {
 public:
  std::function<void(const std::string& when)> hook;
  Status Rename(const std::string& from, const std::string& to) override {
    if (hook) hook("before renaming " + from);
    Status s = base()->Rename(from, to);
    if (hook) hook("after renaming " + from);
    return s;
  }
};

TEST_CASE("concurrency: no other handle can open the database at any point of Compact's swap") {
  // Another process (here: another handle, whose lock conflicts the same
  // way) that opened the file between Compact's renames used to take the
  // lock on the old file, commit into it and lose the commit with it.
  RenameHookFileSystem fs;
  Options o;
  o.file_system = &fs;
  TestDB db(o);
  for (int i = 0; i < 200; i++) REQUIRE(db->Insert("c", IdDoc(i, "x")).ok());
  std::vector<std::string> opened;
  int checked = 0;
  fs.hook = [&](const std::string& when) {
    checked++;
    auto other = DB::Open(db.path(), Options());
    if (!other.status().IsBusy()) opened.push_back(when + ": " + other.status().ToString());
  };
  REQUIRE(db->Compact().ok());
  fs.hook = nullptr;
  CHECK(checked >= 4);  // before and after both renames
  CHECK(opened.empty());
  for (const std::string& o2 : opened) INFO(o2);
  REQUIRE(db->Insert("c", IdDoc(1000, "after")).ok());
  db.Reopen();
  CHECK(db->Count("c").value() == 201);
}

}  // namespace
}  // namespace mmdoc::test
