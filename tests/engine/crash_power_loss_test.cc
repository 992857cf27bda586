// Simulated power loss at the engine level: a random
// workload of transactions over a collection with a unique secondary index
// (and a compound partial one)
// runs on tests/support/fault_fs.h; at a random crash point the disk stops
// taking writes (FailNth on a write, sync or msync somewhere in a commit or
// a checkpoint, or FailAll after K commits), the DB is closed without a
// successful checkpoint, and SimulatePowerLoss leaves each unsynced page
// kept, reverted or torn. Then the database must open, DB::Check must pass
// and its content must be the model after some prefix of the committed
// transactions:
//   msync, fsync, group  every acknowledged commit (the prefix is all of
//                        them, or all plus the one whose commit failed:
//                        each transaction is all or nothing);
//   none, periodic       any prefix (an intact earlier commit);
//   periodic, short T    every commit older than a completed flush.
// A small log (16 KiB) makes log-full checkpoints happen inside the runs.
// At MMDOC_TEST_SCALE=1: 1,000 crash points per mode (250 under ASan).
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/fault_fs.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

namespace mmdoc::test {
namespace {

using Op = FaultFileSystem::Op;
using State = std::map<int32_t, std::string>;  // _id -> BSON bytes

#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kRunsPerMode = 250;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr uint64_t kRunsPerMode = 250;
#else
constexpr uint64_t kRunsPerMode = 1000;
#endif
#else
constexpr uint64_t kRunsPerMode = 1000;
#endif

const char* kColl = "c";

Document Doc(int32_t id, int64_t k, const std::string& v) {
  bson_t b = BSON_INITIALIZER;
  BSON_APPEND_INT32(&b, "_id", id);
  BSON_APPEND_INT64(&b, "k", k);
  BSON_APPEND_UTF8(&b, "v", v.c_str());
  auto d = Document::FromBson(&b);
  bson_destroy(&b);
  return d.value();
}

Document Filter(int32_t id) {
  bson_t b = BSON_INITIALIZER;
  BSON_APPEND_INT32(&b, "_id", id);
  auto d = Document::FromBson(&b);
  bson_destroy(&b);
  return d.value();
}

Document SetV(const std::string& v) {
  bson_t b = BSON_INITIALIZER, set;
  BSON_APPEND_DOCUMENT_BEGIN(&b, "$set", &set);
  BSON_APPEND_UTF8(&set, "v", v.c_str());
  bson_append_document_end(&b, &set);
  auto d = Document::FromBson(&b);
  bson_destroy(&b);
  return d.value();
}

std::string RandomValue(std::mt19937_64& rng) {
  // Mostly small; one in six large enough for an overflow run.
  size_t n = rng() % 6 == 0 ? 2000 + rng() % 9000 : 1 + rng() % 120;
  std::string v(n, 'a');
  for (char& c : v) c = static_cast<char>('a' + rng() % 26);
  return v;
}

// The whole content of the collection, or an error.
Result<State> ReadState(DB* db) {
  auto docs = db->Find(kColl, Document());
  if (!docs.ok()) return docs.status();
  State s;
  for (const Document& d : docs.value()) {
    auto id = d.Get("_id");
    if (!id.ok() || id.value().type() != BSON_TYPE_INT32)
      return Status::Corruption("unexpected _id in " + d.ToJson());
    s[id.value().get()->value.v_int32] = d.bytes();
  }
  return s;
}

std::string Describe(const State& s) {
  std::string out = std::to_string(s.size()) + " docs:";
  for (const auto& [id, bytes] : s)
    out += " " + std::to_string(id) + "/" + std::to_string(bytes.size());
  return out;
}

struct RunResult {
  std::vector<State> committed;  // [0] = after setup; one per acknowledged commit
  std::optional<State> failed;   // the transaction whose commit failed, if any
};

// One workload on a fresh database in `path` until the crash point. Returns
// the states after each acknowledged commit.
RunResult Workload(const std::string& path, Durability mode, FaultFileSystem* fs,
                   std::mt19937_64& rng, uint32_t sync_interval_ms) {
  RunResult rr;
  Options o;
  o.file_system = fs;
  o.durability = mode;
  o.log_size = 16 << 10;
  o.sync_interval_ms = sync_interval_ms;
  auto opened = DB::Open(path, o);
  REQUIRE(opened.ok());
  std::unique_ptr<DB> db = std::move(opened.value());

  // Setup, durable whatever the mode (a per-write override).
  {
    WriteOptions wo;
    wo.durability = Durability::kFsync;
    auto t = db->Begin(wo);
    REQUIRE(t.ok());
    REQUIRE(t.value()->CreateCollection(kColl).ok());
    IndexOptions unique;
    unique.unique = true;
    REQUIRE(t.value()->CreateIndex(kColl, "k", unique).ok());
    // A compound, descending, partial index: replayed and checked too.
    IndexOptions partial;
    partial.partial_filter = Document::FromJson(R"({"k": {"$gte": 3}})").value();
    REQUIRE(
        t.value()->CreateIndex(kColl, std::vector<IndexKey>{{"k", -1}, {"_id", 1}}, partial).ok());
    REQUIRE(t.value()->Commit().ok());
  }
  State model;
  rr.committed.push_back(model);

  const int txns = 1 + static_cast<int>(rng() % 48);
  const int style = static_cast<int>(rng() % 4);
  if (style != 0) {
    // Fail one call of some kind somewhere in the run; everything after
    // the first failed commit is never attempted.
    static const Op kOps[] = {Op::kWrite, Op::kSync, Op::kMapSync};
    Op op = kOps[rng() % 3];
    fs->FailNth(op, 1 + rng() % (op == Op::kSync ? 12 : 60), EIO);
  }
  int32_t next_id = 1;
  int64_t next_k = 1;
  for (int i = 0; i < txns; i++) {
    if (rng() % 16 == 0) {
      if (!db->Checkpoint().ok()) break;
      continue;
    }
    auto tr = db->Begin();
    if (!tr.ok()) break;
    Transaction* t = tr.value().get();
    State next = model;
    bool op_failed = false;
    const int ops = rng() % 4 == 0 ? 2 + static_cast<int>(rng() % 5) : 1;
    for (int j = 0; j < ops && !op_failed; j++) {
      const int what = static_cast<int>(rng() % 10);
      auto pick = [&]() -> int32_t {
        auto it = next.begin();
        std::advance(it, rng() % next.size());
        return it->first;
      };
      Status s;
      if (what < 4 || next.empty()) {
        Document d = Doc(next_id, next_k++, RandomValue(rng));
        s = t->Insert(kColl, d);
        if (s.ok()) next[next_id++] = d.bytes();
      } else if (what == 4) {
        // A unique-index violation: rejected, the transaction goes on.
        int32_t other = pick();
        auto k = Document::FromTrustedBytes(next[other]).Get("k");
        Document d = Doc(next_id, k.value().get()->value.v_int64, "dup");
        s = t->Insert(kColl, d);
        REQUIRE(s.IsAlreadyExists());
        continue;
      } else if (what < 7) {
        int32_t id = pick();
        std::string v = RandomValue(rng);
        auto u = t->UpdateOne(kColl, Filter(id), SetV(v));
        s = u.status();
        if (s.ok()) {
          auto k = Document::FromTrustedBytes(next[id]).Get("k");
          next[id] = Doc(id, k.value().get()->value.v_int64, v).bytes();
        }
      } else if (what < 8) {
        int32_t id = pick();
        Document d = Doc(id, next_k++, RandomValue(rng));
        s = t->Replace(kColl, Value::Int32(id), d);
        if (s.ok()) next[id] = d.bytes();
      } else if (rng() % 25 == 0) {
        // Every document: the trees freed whole, one log record.
        auto n = t->DeleteMany(kColl, Document());
        s = n.status();
        if (s.ok()) {
          REQUIRE(n.value() == next.size());
          next.clear();
        }
      } else {
        int32_t id = pick();
        s = t->Delete(kColl, Value::Int32(id));
        if (s.ok()) next.erase(id);
      }
      if (!s.ok()) op_failed = true;
    }
    if (op_failed) break;  // an I/O error mid-transaction: stop here
    Status c = t->Commit();
    if (!c.ok()) {
      INFO(c.ToString());
      REQUIRE((c.IsIOError() || c.IsFull()));
      rr.failed = next;
      break;
    }
    model = next;
    rr.committed.push_back(model);
  }
  // The crash: nothing more reaches the disk (the close's checkpoint
  // fails), then the power goes.
  fs->FailAll(EIO);
  db.reset();
  fs->ClearFaults();
  return rr;
}

const char* ModeName(Durability d) {
  switch (d) {
    case Durability::kNone:
      return "none";
    case Durability::kPeriodic:
      return "periodic";
    case Durability::kMsync:
      return "msync";
    case Durability::kFsync:
      return "fsync";
    case Durability::kGroup:
      return "group";
  }
  return "?";
}

// Runs kRunsPerMode * Scale() crash points in `mode`. `strict`: every
// acknowledged commit must survive.
void CrashPoints(Durability mode, bool strict, uint32_t sync_interval_ms = 3600 * 1000) {
  const uint64_t seed = Seed(std::string("crash_power_loss ") + ModeName(mode));
  const uint64_t runs = kRunsPerMode * Scale();
  mmdoc::test::RamDir dir;
  uint64_t exact = 0, earlier = 0, failed_applied = 0, failed_commits = 0;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t run = 0; run < runs; run++) {
    std::mt19937_64 rng(seed + run * 0x9E3779B97F4A7C15ull);
    const std::string path = dir.File("db" + std::to_string(run));
    INFO("mode " << ModeName(mode) << ", run " << run << " (seed " << seed << ")");
    FaultFileSystem fs;
    RunResult rr = Workload(path, mode, &fs, rng, sync_interval_ms);
    if (rr.failed) failed_commits++;
    fs.SimulatePowerLoss(rng);

    // Reopen, half the time through the real file system.
    Options o;
    if (rng() % 2) o.file_system = &fs;
    o.durability = mode;
    o.log_size = 16 << 10;
    State got;
    {
      auto db = DB::Open(path, o);
      INFO("open: " << db.status().ToString());
      REQUIRE(db.ok());
      RequireCheckPasses(db.value().get());
      auto st = ReadState(db.value().get());
      INFO("read: " << st.status().ToString());
      REQUIRE(st.ok());
      got = std::move(st.value());
    }
    const State& last = rr.committed.back();
    bool ok = false;
    if (got == last) {
      ok = true;
      exact++;
    } else if (rr.failed && got == *rr.failed) {
      ok = true;
      failed_applied++;
    } else if (!strict) {
      for (const State& s : rr.committed) {
        if (s == got) {
          ok = true;
          earlier++;
          break;
        }
      }
    }
    INFO("got " << Describe(got) << "\nlast acknowledged " << Describe(last) << " after "
                << rr.committed.size() - 1 << " commits");
    REQUIRE(ok);
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(
      stderr,
      "crash_power_loss %s: %llu crash points in %.1f s: %llu at the last commit, "
      "%llu with the failed commit, %llu at an earlier commit; %llu failed commits\n",
      ModeName(mode), static_cast<unsigned long long>(runs), secs,
      static_cast<unsigned long long>(exact), static_cast<unsigned long long>(failed_applied),
      static_cast<unsigned long long>(earlier), static_cast<unsigned long long>(failed_commits));
}

TEST_CASE("crash power loss: fsync keeps every acknowledged commit") {
  CrashPoints(Durability::kFsync, true);
}

TEST_CASE("crash power loss: msync keeps every acknowledged commit") {
  CrashPoints(Durability::kMsync, true);
}

TEST_CASE("crash power loss: group keeps every acknowledged commit") {
  CrashPoints(Durability::kGroup, true);
}

TEST_CASE("crash power loss: none opens at an intact earlier commit") {
  CrashPoints(Durability::kNone, false);
}

TEST_CASE("crash power loss: periodic between flushes opens at an intact earlier commit") {
  CrashPoints(Durability::kPeriodic, false);
}

// With a short interval, the background flush makes commits durable on its
// own: everything committed before a wait of several intervals survives.
TEST_CASE("crash power loss: periodic loses nothing older than a flush") {
  const uint64_t seed = Seed("crash_power_loss periodic flush");
  TempDir dir;
  const uint64_t runs = 20 * Scale();
  for (uint64_t run = 0; run < runs; run++) {
    std::mt19937_64 rng(seed + run);
    INFO("run " << run << " (seed " << seed << ")");
    const std::string path = dir.File("db" + std::to_string(run));
    FaultFileSystem fs;
    Options o;
    o.file_system = &fs;
    o.durability = Durability::kPeriodic;
    o.sync_interval_ms = 5;
    State before_wait;
    {
      auto db = DB::Open(path, o).value();
      // Counted before the inserts: the flusher may well have synced them
      // all before the wait below starts (it skips a sync when nothing is
      // new), so only "at least one sync since the first insert" is sure.
      const uint64_t syncs = fs.Count(Op::kSync, "-log");
      const uint64_t data_syncs = fs.Count(Op::kSync, path);
      const int n = 1 + static_cast<int>(rng() % 20);
      for (int i = 0; i < n; i++) {
        Document d = Doc(i, i, RandomValue(rng));
        REQUIRE(db->Insert(kColl, d).ok());
        before_wait[i] = d.bytes();
      }
      // 20 intervals: room for a loaded machine (or ASan) to schedule it.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      // The flusher synced the log, or a checkpoint (a write buffer's
      // merge) made every commit durable in the data file first and left
      // it nothing to sync.
      CHECK((fs.Count(Op::kSync, "-log") > syncs || fs.Count(Op::kSync, path) > data_syncs));
      // More commits that may or may not survive.
      for (int i = n; i < n + 5; i++) REQUIRE(db->Insert(kColl, Doc(i, i, "late")).ok());
      fs.FailAll(EIO);
      db.reset();
      fs.ClearFaults();
    }
    fs.SimulatePowerLoss(rng);
    auto db = DB::Open(path, Options()).value();
    REQUIRE(db->Check().ok());
    State got = ReadState(db.get()).value();
    for (const auto& [id, bytes] : before_wait) {
      INFO("_id " << id);
      REQUIRE(got.count(id) == 1);
      CHECK(got[id] == bytes);
    }
  }
}

}  // namespace
}  // namespace mmdoc::test
