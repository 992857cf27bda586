// The write buffer (Options::write_buffer_size, engine/merger.cc): commits
// that write no pages, merges that run behind them, and the transactions
// that must move to pages part way (definitions, a new collection, an index
// turning multikey, deleting everything). The rest of the engine's suites
// run with the buffer on too when MMDOC_WRITE_BUFFER is set (.ci/run).
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/fault_fs.h"
#include "tests/support/fs_wrapper.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

namespace mmdoc::test {
namespace {

Options Buffered(uint64_t budget) {
  Options o;
  o.durability = Durability::kNone;
  o.write_buffer_size = budget;
  return o;
}

Document Doc(int id, int k, const std::string& v) {
  return J("{\"_id\": " + std::to_string(id) + ", \"k\": " + std::to_string(k) + ", \"v\": \"" + v +
           "\"}");
}

std::set<int> Ids(DB* db, const std::string& coll, const std::string& filter) {
  auto r = db->Find(coll, J(filter));
  INFO(filter << ": " << r.status().ToString());
  REQUIRE(r.ok());
  std::set<int> ids;
  for (const Document& d : r.value()) ids.insert(std::stoi(d.Get("_id").value().ToJson()));
  return ids;
}

TEST_CASE("write buffer: reads see the buffer and the pages as one, across merges and reopens") {
  const uint64_t seed = Seed("write buffer model");
  std::mt19937_64 rng(seed);
  // A small budget: a merge every few dozen commits.
  TestDB db(Buffered(16 << 10));
  REQUIRE(db->CreateIndex("c", "k").ok());
  std::map<int, int> model;  // _id -> k
  const int rounds = static_cast<int>(2000 * Scale());
  for (int i = 0; i < rounds; i++) {
    const int id = static_cast<int>(rng() % 300);
    const int k = static_cast<int>(rng() % 50);
    const int what = static_cast<int>(rng() % 10);
    if (what < 5) {
      Status s = db->Insert("c", Doc(id, k, std::string(rng() % 200, 'x')));
      CHECK((s.ok() || s.IsAlreadyExists()));
      if (s.ok()) model[id] = k;
    } else if (what < 8) {
      auto r = db->UpdateOne("c", J("{\"_id\": " + std::to_string(id) + "}"),
                             J("{\"$set\": {\"k\": " + std::to_string(k) + "}}"));
      REQUIRE(r.ok());
      if (model.count(id)) model[id] = k;
    } else {
      Status s = db->Delete("c", V(std::to_string(id)));
      CHECK((s.ok() || s.IsNotFound()));
      model.erase(id);
    }
    if (i % 97 == 0) {
      const int q = static_cast<int>(rng() % 50);
      std::set<int> want;
      for (auto& [mid, mk] : model)
        if (mk == q) want.insert(mid);
      CHECK(Ids(db.get(), "c", "{\"k\": " + std::to_string(q) + "}") == want);  // the index
      CHECK(db->Count("c").value() == model.size());
      auto g = db->Get("c", V(std::to_string(id)));
      CHECK(g.ok() == (model.count(id) == 1));
    }
    if (i % 701 == 700) db.Reopen();  // close merges everything
  }
  std::set<int> all;
  for (auto& [mid, mk] : model) all.insert(mid);
  CHECK(Ids(db.get(), "c", "{}") == all);
  CHECK(Ids(db.get(), "c", "{\"k\": {\"$gte\": 0}}") == all);
  db.Reopen();
  CHECK(Ids(db.get(), "c", "{}") == all);
}

// Waits until the merger has built a key filter for each of `trees` trees.
void WaitForFilters(DB* db, uint64_t trees) {
  for (int i = 0; i < 2000; i++) {
    auto st = db->Stats();
    REQUIRE(st.ok());
    if (st.value().key_filters_ready >= trees) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("the key filters were not built within 10 s");
}

// 0..n-1 in a shuffled order: the ids the key filter tests insert.
std::vector<int> Shuffled(int n, std::mt19937_64* rng) {
  std::vector<int> order(n);
  for (int i = 0; i < n; i++) order[i] = i;
  std::shuffle(order.begin(), order.end(), *rng);
  return order;
}

// Inserts documents order[from, to) (k = _id + 1000000), `batch` to a
// transaction.
void InsertShuffled(DB* db, const std::vector<int>& order, int from, int to, int batch) {
  for (int i = from; i < to; i += batch) {
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int j = i; j < std::min(to, i + batch); j++)
      REQUIRE(t.value()->Insert("c", Doc(order[j], order[j] + 1000000, "v")).ok());
    REQUIRE(t.value()->Commit().ok());
  }
}

TEST_CASE("write buffer: key filters are built in the background and let no duplicate in") {
  std::mt19937_64 rng(Seed("write buffer key filters"));
  TestDB db(Buffered(64 << 10));
  IndexOptions unique;
  unique.unique = true;
  REQUIRE(db->CreateIndex("c", "k", unique).ok());
  // More keys than the smallest filter holds, so a full filter is rebuilt.
  const int n = 40000;
  const std::vector<int> order = Shuffled(n, &rng);
  auto insert_range = [&](int from, int to) { InsertShuffled(db.get(), order, from, to, 500); };
  int k_offset = 1000000;  // k = _id + k_offset
  auto duplicates_refused = [&](int upto) {
    for (int r = 0; r < 200; r++) {
      const int id = order[rng() % upto];
      CHECK(db->Insert("c", Doc(id, -1 - r, "dup _id")).IsAlreadyExists());
      CHECK(db->Insert("c", Doc(n + 1 + r, id + k_offset, "dup k")).IsAlreadyExists());
    }
  };
  // A tree's first write starts its filter: the _id tree's and k's.
  insert_range(0, n / 2);
  WaitForFilters(db.get(), 2);
  duplicates_refused(n / 2);
  db.CheckNow();  // each live key is in its tree's ready filter
  // Built from the pages of a reopened database, once a tree is written: a
  // database only read builds none.
  db.Reopen();
  REQUIRE(db->Count("c").value() == static_cast<uint64_t>(n / 2));
  CHECK(db->Stats().value().key_filters_ready == 0);
  REQUIRE(db->Insert("c", Doc(-1, -1000, "first write")).ok());
  WaitForFilters(db.get(), 2);
  duplicates_refused(n / 2);
  insert_range(n / 2, n);
  WaitForFilters(db.get(), 2);
  duplicates_refused(n);
  db.CheckNow();
  // A definition writes pages itself: the filters start over. The index
  // built again holds keys that no filter was told of (k changed while
  // there was no index on it).
  REQUIRE(db->DropIndex("c", "k").ok());
  REQUIRE(db->UpdateMany("c", J("{}"), J("{\"$inc\": {\"k\": 1000000}}")).ok());
  k_offset = 2000000;
  REQUIRE(db->CreateIndex("c", "k", unique).ok());
  duplicates_refused(n);
  WaitForFilters(db.get(), 2);
  duplicates_refused(n);
  auto st = db->Stats();
  REQUIRE(st.ok());
  CHECK(st.value().key_filter_bytes > 0);
  // A compacted copy starts a new buffer: its first write starts them again.
  REQUIRE(db->Compact().ok());
  CHECK(db->Stats().value().key_filters_ready == 0);
  REQUIRE(db->Insert("c", Doc(-2, -2000, "after compact")).ok());
  WaitForFilters(db.get(), 2);
  duplicates_refused(n);
  CHECK(db->Count("c").value() == static_cast<uint64_t>(n + 2));
}

TEST_CASE("write buffer: a key filter build paused by merges resumes and misses no key") {
  std::mt19937_64 rng(Seed("write buffer paused filter build"));
  TestDB db(Buffered(64 << 10));
  IndexOptions unique;
  unique.unique = true;
  REQUIRE(db->CreateIndex("c", "k", unique).ok());
  const int n = 100000;
  const std::vector<int> order = Shuffled(n, &rng);
  InsertShuffled(db.get(), order, 0, n * 4 / 5, 500);
  // After a reopen the first write starts both filters; the writes that
  // follow at once freeze a 64 KiB generation every few hundred documents,
  // each pausing the scan of the trees' keys for its merge.
  db.Reopen();
  InsertShuffled(db.get(), order, n * 4 / 5, n, 20);
  WaitForFilters(db.get(), 2);
  db.CheckNow();  // each live key is in its tree's ready filter
  for (int r = 0; r < 500; r++) {
    const int id = order[rng() % n];
    CHECK(db->Insert("c", Doc(id, -1 - r, "dup _id")).IsAlreadyExists());
    CHECK(db->Insert("c", Doc(n + 1 + r, id + 1000000, "dup k")).IsAlreadyExists());
  }
  CHECK(db->Count("c").value() == static_cast<uint64_t>(n));
}

TEST_CASE("write buffer: a snapshot keeps its view while merges write the pages") {
  TestDB db(Buffered(4 << 10));
  for (int i = 0; i < 50; i++) REQUIRE(db->Insert("c", Doc(i, i, "before")).ok());
  auto snap = db->BeginRead();
  REQUIRE(snap.ok());
  // Enough to freeze and merge many generations behind the snapshot.
  for (int i = 0; i < 50; i++) {
    REQUIRE(db->UpdateOne("c", J("{\"_id\": " + std::to_string(i) + "}"),
                          J("{\"$set\": {\"v\": \"after\"}}"))
                .ok());
  }
  for (int i = 50; i < 400; i++) REQUIRE(db->Insert("c", Doc(i, i, std::string(100, 'y'))).ok());
  REQUIRE(db->Checkpoint().ok());  // merges all, then checkpoints
  Transaction* t = snap.value().get();
  CHECK(t->Count("c", Document()).value() == 50);
  for (int i = 0; i < 50; i++) {
    auto d = t->Get("c", V(std::to_string(i)));
    REQUIRE(d.ok());
    CHECK(d.value().Get("v").value().ToJson() == "\"before\"");
  }
  snap.value().reset();
  CHECK(db->Count("c").value() == 400);
  CHECK(db->Get("c", V("7")).value().Get("v").value().ToJson() == "\"after\"");
}

TEST_CASE("write buffer: a transaction that must write pages moves there with what it did") {
  TestDB db(Buffered(1 << 20));
  for (int i = 0; i < 20; i++) REQUIRE(db->Insert("c", Doc(i, i, "a")).ok());
  auto tr = db->Begin();
  REQUIRE(tr.ok());
  Transaction* t = tr.value().get();
  // Buffered so far: an insert, an update, a delete.
  REQUIRE(t->Insert("c", Doc(100, 100, "new")).ok());
  REQUIRE(t->UpdateOne("c", J("{\"_id\": 1}"), J("{\"$set\": {\"k\": 1000}}")).ok());
  REQUIRE(t->Delete("c", V("2")).ok());
  // A definition: the transaction goes on in pages, its changes with it.
  REQUIRE(t->CreateIndex("c", "k", IndexOptions{true}).ok());
  CHECK(t->Get("c", V("100")).ok());
  CHECK(t->Get("c", V("2")).status().IsNotFound());
  auto by_k = t->GetBy("c", "k", V("1000"));
  REQUIRE(by_k.ok());
  CHECK(by_k.value().Get("_id").value().ToJson() == "1");
  // A new collection and an array on an indexed field.
  REQUIRE(t->Insert("other", Doc(1, 1, "x")).ok());
  REQUIRE(t->Insert("c", J("{\"_id\": 200, \"k\": [7001, 7002], \"v\": \"arr\"}")).ok());
  REQUIRE(t->Commit().ok());
  CHECK(db->Count("c").value() == 21);
  CHECK(db->Count("other").value() == 1);
  CHECK(Ids(db.get(), "c", "{\"k\": 7002}") == std::set<int>{200});
  CHECK(db->Insert("c", Doc(300, 1000, "dup")).IsAlreadyExists());  // the unique index holds

  // A buffered transaction that turns an index multikey commits through
  // the pages; one that fails to is rolled back whole.
  auto t2 = db->Begin();
  REQUIRE(t2.ok());
  REQUIRE(t2.value()->Insert("c", Doc(400, 400, "m")).ok());
  REQUIRE(t2.value()->Insert("c", J("{\"_id\": 401, \"k\": [8001, 8002]}")).ok());
  REQUIRE(t2.value()->Commit().ok());
  CHECK(Ids(db.get(), "c", "{\"k\": {\"$in\": [400, 8001]}}") == std::set<int>{400, 401});
  auto t3 = db->Begin();
  REQUIRE(t3.ok());
  REQUIRE(t3.value()->Insert("c", Doc(500, 500, "gone")).ok());
  REQUIRE(t3.value()->CreateCollection("gone").ok());
  t3.value()->Abort();
  CHECK(db->Get("c", V("500")).status().IsNotFound());
  auto names = db->ListCollections();
  REQUIRE(names.ok());
  CHECK(names.value() == std::vector<std::string>{"c", "other"});
  // Deleting everything frees whole trees: also through the pages.
  CHECK(db->DeleteMany("other", Document()).value() == 1);
  db.Reopen();
  CHECK(db->Count("c").value() == 23);
  CHECK(db->Count("other").value() == 0);
}

TEST_CASE("write buffer: each write transaction starts from what the last one committed") {
  // The writer keeps its collection states between commits
  // (TransactionImpl::KeepBufferedState): counts, unique checks and reads
  // of the next transaction must see the last commit, through a new
  // generation, a merge or a run, and an aborted or failed one must leave
  // nothing behind.
  const uint64_t seed = Seed("write buffer kept state");
  std::mt19937_64 rng(seed);
  TestDB db(Buffered(8 << 10));  // a generation every few dozen commits
  REQUIRE(db->CreateIndex("a", "k", IndexOptions{true}).ok());
  REQUIRE(db->CreateCollection("b").ok());
  std::map<int, int> a;  // _id -> k (unique)
  std::set<int> b;
  const int rounds = static_cast<int>(3000 * Scale());
  for (int i = 0; i < rounds; i++) {
    auto tr = db->Begin();
    REQUIRE(tr.ok());
    Transaction* t = tr.value().get();
    INFO("round " << i);
    // The count a write txn starts with: the catalog's plus the buffer's.
    REQUIRE(t->Count("a", Document()).value() == a.size());
    std::map<int, int> na = a;
    std::set<int> nb = b;
    const int ops = 1 + static_cast<int>(rng() % 3);
    for (int j = 0; j < ops; j++) {
      const int id = static_cast<int>(rng() % 200);
      const int k = static_cast<int>(rng() % 200);
      switch (rng() % 4) {
        case 0: {
          bool taken = na.count(id) > 0;
          for (auto& [x, y] : na) taken = taken || y == k;
          Status s = t->Insert("a", Doc(id, k, "v"));
          REQUIRE(s.ok() != taken);
          if (s.ok()) na[id] = k;
          break;
        }
        case 1: {
          bool dup = false;
          for (auto& [x, y] : na) dup = dup || (y == k && x != id);
          auto r = t->UpdateOne("a", J("{\"_id\": " + std::to_string(id) + "}"),
                                J("{\"$set\": {\"k\": " + std::to_string(k) + "}}"));
          REQUIRE(r.ok() != (dup && na.count(id) > 0));
          if (r.ok() && na.count(id)) na[id] = k;
          break;
        }
        case 2: {
          Status s = t->Delete("a", V(std::to_string(id)));
          REQUIRE(s.ok() == (na.erase(id) == 1));
          break;
        }
        default: {
          Status s = t->Insert("b", Doc(id, k, "w"));
          REQUIRE(s.ok() == nb.insert(id).second);
        }
      }
    }
    if (rng() % 8 == 0) {
      t->Abort();
    } else {
      REQUIRE(t->Commit().ok());
      a = std::move(na);
      b = std::move(nb);
    }
    if (i % 61 == 0) {
      std::set<int> ids, ks;
      for (auto& [x, y] : a) {
        ids.insert(x);
        ks.insert(y);
      }
      CHECK(Ids(db.get(), "a", "{}") == ids);
      CHECK(Ids(db.get(), "a", "{\"k\": {\"$gte\": 0}}") == ids);  // the index
      CHECK(Ids(db.get(), "b", "{}") == b);
      CHECK(db->Count("b").value() == b.size());
    }
  }
  db.Reopen();
  CHECK(db->Count("a").value() == a.size());
  CHECK(db->Count("b").value() == b.size());
}

TEST_CASE("write buffer: a delete drops each index entry of its document, wherever it lies") {
  // A delete writes a tombstone for each index key of the document it read
  // without looking the key up (BufferedTree::DeleteLive). The keys lie in
  // the transaction's own overlay, the buffer, a run or the pages; an
  // array's repeated elements give one key; a non-unique entry carries the
  // _id. Every read by the index must agree with a model.
  const uint64_t seed = Seed("write buffer index deletes");
  std::mt19937_64 rng(seed);
  TestDB db(Buffered(8 << 10));
  REQUIRE(db->CreateIndex("c", "u", IndexOptions{true}).ok());
  REQUIRE(db->CreateIndex("c", "tags").ok());
  std::map<int, std::pair<int, std::vector<int>>> model;  // _id -> (u, tags)
  const auto doc = [](int id, int u, const std::vector<int>& tags) {
    std::string t;
    for (int x : tags) t += (t.empty() ? "" : ", ") + std::to_string(x);
    return J("{\"_id\": " + std::to_string(id) + ", \"u\": " + std::to_string(u) + ", \"tags\": [" +
             t + "]}");
  };
  const int rounds = static_cast<int>(1500 * Scale());
  for (int i = 0; i < rounds; i++) {
    INFO("round " << i);
    auto tr = db->Begin();
    REQUIRE(tr.ok());
    Transaction* t = tr.value().get();
    auto next = model;
    const int ops = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < ops; j++) {
      const int id = static_cast<int>(rng() % 120);
      if (rng() % 2 == 0) {
        const int u = static_cast<int>(rng() % 150);
        std::vector<int> tags;
        for (int n = static_cast<int>(rng() % 4); n > 0; n--)
          tags.push_back(static_cast<int>(rng() % 6));
        bool taken = next.count(id) > 0;
        for (auto& [x, d] : next) taken = taken || d.first == u;
        Status s = t->Insert("c", doc(id, u, tags));
        REQUIRE(s.ok() != taken);
        if (s.ok()) next[id] = {u, tags};
      } else {
        Status s = t->Delete("c", V(std::to_string(id)));
        REQUIRE(s.ok() == (next.erase(id) == 1));
      }
    }
    if (rng() % 6 == 0) {
      t->Abort();
    } else {
      REQUIRE(t->Commit().ok());
      model = std::move(next);
    }
    if (i % 37 == 0 || i == rounds - 1) {
      const int tag = static_cast<int>(rng() % 6);
      std::set<int> with_tag, all;
      for (auto& [x, d] : model) {
        all.insert(x);
        if (std::count(d.second.begin(), d.second.end(), tag) > 0) with_tag.insert(x);
        auto g = db->Find("c", J("{\"u\": " + std::to_string(d.first) + "}"));
        REQUIRE(g.ok());
        REQUIRE(g.value().size() == 1);
      }
      CHECK(Ids(db.get(), "c", "{\"tags\": " + std::to_string(tag) + "}") == with_tag);
      CHECK(Ids(db.get(), "c", "{\"u\": {\"$gte\": 0}}") == all);
    }
    if (i % 500 == 499) db.Reopen();
  }
}

TEST_CASE("write buffer: a close merges the runs a slice at a time, so the file grows by a slice") {
  // 150k documents in pages (compacted), then 15k updates at random through a 2 MiB
  // buffer: the runs the close merges touch most of the tree's leaves. In
  // one transaction each leaf would be copied while its old page waits for
  // the checkpoint; in slices with a checkpoint between them the copies
  // reuse the pages the slice before last replaced.
  const int n = 150000, updates = 15000;
  std::vector<int> ids(n);
  for (int i = 0; i < n; i++) ids[i] = i;
  std::mt19937_64 rng(Seed("close in slices"));
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::string pad(150, 'p');
  TestDB db(Buffered(0));
  for (int i = 0; i < n; i += 5000) {
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int j = i; j < i + 5000; j++) REQUIRE(t.value()->Insert("c", Doc(ids[j], j, pad)).ok());
    REQUIRE(t.value()->Commit().ok());
  }
  REQUIRE(db->Compact().ok());  // no free pages for the close's copies to hide in
  db.Close();
  db.options() = Buffered(2 << 20);
  REQUIRE(db.TryOpen().ok());
  const uint64_t before = db->Stats().value().page_count;
  for (int i = 0; i < updates; i++) {
    const int id = static_cast<int>(rng() % n);
    auto r = db->UpdateOne("c", J("{\"_id\": " + std::to_string(id) + "}"),
                           J("{\"$set\": {\"v\": \"u" + std::to_string(i) + "\"}}"));
    REQUIRE(r.ok());
    REQUIRE(r.value().matched == 1);
  }
  db.Close();
  db.options() = Buffered(0);
  REQUIRE(db.TryOpen().ok());
  const DBStats st = db->Stats().value();
  CHECK(st.runs == 0);
  const uint64_t tree = st.collections.at(0).data_pages;
  INFO("pages " << before << " -> " << st.page_count << ", the _id tree " << tree);
  // About two slices of 2 MiB (512 pages each), far from a copy of the tree.
  CHECK(st.page_count - before < tree / 3);
  CHECK(db->Count("c").value() == static_cast<uint64_t>(n));
}

TEST_CASE("write buffer: deleting every document frees the collection's runs unmerged") {
  // 40k documents in pages, then inserts, updates and deletes through a
  // small buffer, so that runs of both trees hold changes all over them.
  // DeleteMany({}) frees the trees whole, and their runs with them: merging
  // the runs in first would copy most of the trees' leaves only to free
  // them (at 1M documents that set the bench's peak memory,
  // docs/write-path.md).
  const int n = 40000;
  std::mt19937_64 rng(Seed("delete all, runs unmerged"));
  const std::string pad(150, 'p');
  TestDB db(Buffered(0));
  REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
  for (int i = 0; i < n; i += 5000) {
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int j = i; j < i + 5000; j++) REQUIRE(t.value()->Insert("c", Doc(j, j, pad)).ok());
    REQUIRE(t.value()->Commit().ok());
  }
  REQUIRE(db->Insert("other", Doc(1, 1, "kept")).ok());
  db.Close();
  db.options().write_buffer_size = 512 << 10;
  REQUIRE(db.TryOpen().ok());
  std::set<int> live;
  for (int i = 0; i < n; i++) live.insert(i);
  for (int i = 0; i < 3000; i++) {
    const int id = static_cast<int>(rng() % n);
    if (i % 10 == 0) {
      REQUIRE(db->DeleteMany("c", J("{\"_id\": " + std::to_string(id) + "}")).ok());
      live.erase(id);
    } else if (i % 10 == 1) {
      REQUIRE(db->Insert("c", Doc(n + i, n + i, "new")).ok());
      live.insert(n + i);
    } else {
      REQUIRE(db->UpdateOne("c", J("{\"_id\": " + std::to_string(id) + "}"),
                            J("{\"$set\": {\"v\": \"u" + std::to_string(i) + "\"}}"))
                  .ok());
    }
  }
  REQUIRE(db->Insert("other", Doc(2, 2, "kept")).ok());
  // The merger may just have merged every run, or be merging some: update
  // on until runs wait that no merge will take before the delete (fewer
  // than engine/db_impl.h's kRunsBeforeMerge, 4, start none).
  DBStats st = db->Stats().value();
  for (int round = 0; round < 500 && !(st.runs > 0 && st.runs < 4 && st.runs_merging == 0);
       round++) {
    for (int i = 0; i < 20; i++) {
      const int id = static_cast<int>(rng() % n);
      if (live.count(id) == 0) continue;
      REQUIRE(db->UpdateOne("c", J("{\"_id\": " + std::to_string(id) + "}"),
                            J("{\"$set\": {\"v\": \"again\"}}"))
                  .ok());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    st = db->Stats().value();
  }
  INFO("runs " << st.runs << ", merging " << st.runs_merging);
  REQUIRE(st.runs > 0);
  REQUIRE(st.runs < 4);
  REQUIRE(st.runs_merging == 0);

  // Rolled back, it leaves every document as it was, and the runs
  // unmerged (the buffer's last changes are now runs of their own).
  {
    auto t = db->Begin();
    REQUIRE(t.ok());
    CHECK(t.value()->DeleteMany("c", Document()).value() == live.size());
    CHECK(t.value()->Count("c", Document()).value() == 0);
    t.value()->Abort();
  }
  CHECK(db->Count("c").value() == live.size());
  CHECK(db->Stats().value().runs >= st.runs);

  CHECK(db->DeleteMany("c", Document()).value() == live.size());
  CHECK(db->Stats().value().runs == 0);
  CHECK(db->Count("c").value() == 0);
  CHECK(db->Get("c", V("7")).status().IsNotFound());
  // The unique index's runs went with it: its keys are free again.
  REQUIRE(db->Insert("c", Doc(7, 7, "again")).ok());
  CHECK(db->Count("other").value() == 2);
  db.CheckNow();
  db.Reopen();
  CHECK(db->Count("c").value() == 1);
  CHECK(db->Count("other").value() == 2);

  // Not the transaction's first write: the runs are merged first, and the
  // count takes in what the transaction did before.
  auto t = db->Begin();
  REQUIRE(t.ok());
  REQUIRE(t.value()->Insert("c", Doc(8, 8, "mine")).ok());
  CHECK(t.value()->DeleteMany("c", Document()).value() == 2);
  REQUIRE(t.value()->Insert("c", Doc(9, 8, "after")).ok());
  REQUIRE(t.value()->Commit().ok());
  CHECK(Ids(db.get(), "c", "{}") == std::set<int>{9});
}

TEST_CASE("write buffer: a scan that skips runs' leaves finds only the newest versions") {
  // Documents "old" in pages, then changes through a 64 KiB buffer, so that
  // runs wait beside the tree: most become "new" (a run's leaf often holds
  // no "old"), a few "old" again, some are deleted and inserted again. A
  // scan for "old" skips the runs' leaves without it, and must not then
  // take the tree's older "old" for a document a run changed or deleted.
  const int n = 4000;
  std::mt19937_64 rng(Seed("scan skips runs"));
  const std::string pad(100, 'p');
  auto doc = [&](int id, const char* v) {
    return J("{\"_id\": " + std::to_string(id) + ", \"v\": \"" + v + "\", \"p\": \"" + pad + "\"}");
  };
  TestDB db(Buffered(0));
  std::map<int, std::string> model;  // _id -> v
  {
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int i = 0; i < n; i++) {
      REQUIRE(t.value()->Insert("c", doc(i, "old")).ok());
      model[i] = "old";
    }
    REQUIRE(t.value()->Commit().ok());
  }
  REQUIRE(db->Compact().ok());
  db.Close();
  db.options() = Buffered(64 << 10);
  REQUIRE(db.TryOpen().ok());
  auto want = [&](const std::string& v) {
    std::set<int> ids;
    for (const auto& [id, value] : model)
      if (value == v) ids.insert(id);
    return ids;
  };
  int with_runs = 0;
  const int rounds = static_cast<int>(300 * Scale());
  for (int round = 0; round < rounds; round++) {
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int j = 0; j < 20; j++) {
      const int id = static_cast<int>(rng() % n);
      const int what = static_cast<int>(rng() % 20);
      auto it = model.find(id);
      if (it == model.end()) {
        REQUIRE(t.value()->Insert("c", doc(id, "new")).ok());
        model[id] = "new";
      } else if (what < 2) {
        REQUIRE(t.value()->Delete("c", Value::Int32(id)).ok());
        model.erase(it);
      } else {
        const char* v = what == 2 ? "old" : "new";
        REQUIRE(t.value()->Replace("c", Value::Int32(id), doc(id, v)).ok());
        it->second = v;
      }
    }
    REQUIRE(t.value()->Commit().ok());
    if (round % 10 != 9) continue;
    if (db->Stats().value().runs > 0) with_runs++;
    CHECK(Ids(db.get(), "c", R"({"v": "old"})") == want("old"));
    CHECK(Ids(db.get(), "c", R"({"v": "new"})") == want("new"));
  }
  INFO(with_runs << " of " << rounds / 10 << " checks had runs");
  CHECK(with_runs > 0);
}

TEST_CASE("write buffer: a power cut between a close's slices loses nothing acknowledged") {
  std::mt19937_64 rng(Seed("close slices power cut"));
  const int rounds = static_cast<int>(3 * Scale());
  const int n = 40000;
  const std::string pad(150, 'p');
  for (int round = 0; round < rounds; round++) {
    TempDir dir;
    const std::string path = dir.File("db");
    FaultFileSystem fs;
    Options o = Buffered(0);
    o.file_system = &fs;
    {
      auto db = DB::Open(path, o);
      REQUIRE(db.ok());
      for (int i = 0; i < n; i += 5000) {
        auto t = db.value()->Begin();
        REQUIRE(t.ok());
        for (int j = i; j < i + 5000; j++) {
          REQUIRE(t.value()->Insert("c", Doc(static_cast<int>((j * 7919LL) % n), j, pad)).ok());
        }
        REQUIRE(t.value()->Commit().ok());
      }
      REQUIRE(db.value()->Compact().ok());
    }
    // Updates through a 1 MiB buffer, each commit durable; the close then
    // merges their runs into the tree in slices of 1 MiB, a checkpoint
    // after each, and the power fails at one of those checkpoints.
    o.write_buffer_size = 1 << 20;
    o.durability = Durability::kFsync;
    std::map<int, int> want;  // _id -> k of its last acknowledged update
    uint64_t syncs_before_close = 0;
    const uint64_t fail_at = 1 + rng() % 14;  // a close here makes about 16
    {
      auto db = DB::Open(path, o);
      REQUIRE(db.ok());
      for (int c = 0; c < 40; c++) {
        auto t = db.value()->Begin();
        REQUIRE(t.ok());
        std::map<int, int> batch;
        for (int i = 0; i < 150; i++) {
          const int id = static_cast<int>(rng() % n), k = 1000000 + c * 1000 + i;
          auto r = t.value()->UpdateOne("c", J("{\"_id\": " + std::to_string(id) + "}"),
                                        J("{\"$set\": {\"k\": " + std::to_string(k) + "}}"));
          REQUIRE(r.ok());
          batch[id] = k;
        }
        REQUIRE(t.value()->Commit().ok());
        for (const auto& [id, k] : batch) want[id] = k;
      }
      syncs_before_close = fs.Count(FaultFileSystem::Op::kSync, "db");
      fs.FailNth(FaultFileSystem::Op::kSync, fail_at, EIO, "db");
    }
    const uint64_t close_syncs = fs.Count(FaultFileSystem::Op::kSync, "db") - syncs_before_close;
    INFO("round " << round << ": the data file's sync " << fail_at << " of the close failed; "
                  << close_syncs << " tried");
    CHECK(close_syncs >= fail_at);  // the cut fell inside the close's slices
    fs.SimulatePowerLoss(rng);
    o.file_system = nullptr;
    o.write_buffer_size = round % 2 == 0 ? (1 << 20) : 0;  // reopened with a buffer or without
    auto db = DB::Open(path, o);
    INFO(db.status().ToString());
    REQUIRE(db.ok());
    CHECK(db.value()->Count("c").value() == static_cast<uint64_t>(n));
    for (const auto& [id, k] : want) {
      auto d = db.value()->Get("c", Value::Int32(id));
      REQUIRE(d.ok());
      CHECK(d.value().Get("k").value().ToJson() == std::to_string(k));
    }
    RequireCheckPasses(db.value().get());
  }
}

TEST_CASE("write buffer: a log full of unmerged records merges and goes on") {
  // Never full by itself: the log fills first. Not the default size, which
  // MMDOC_WRITE_BUFFER would replace.
  Options o = Buffered(32 << 20);
  o.log_size = 64 << 10;
  o.durability = Durability::kFsync;
  TestDB db(o);
  std::string big(20000, 'b');
  for (int i = 0; i < 60; i++) REQUIRE(db->Insert("c", Doc(i, i, big)).ok());
  // A record larger than the whole log commits by a checkpoint.
  REQUIRE(db->Insert("c", Doc(1000, 1000, std::string(200000, 'h'))).ok());
  CHECK(db->Count("c").value() == 61);
  db.Reopen();
  CHECK(db->Count("c").value() == 61);
  CHECK(db->Get("c", V("1000")).value().Get("v").value().ToJson().size() == 200002);
}

TEST_CASE("write buffer: a log smaller than the buffer freezes it, and the writer never merges") {
  // The buffer's budget is never reached; the log's records are, many times
  // over. Each generation is frozen at half the log and merged by the
  // merger, so no commit finds the log full and merges on its own thread.
  // Not the default size, which MMDOC_WRITE_BUFFER would replace: the
  // budget, not the log, would then freeze each generation.
  Options o = Buffered(32 << 20);
  o.log_size = 256 << 10;
  TestDB db(o);
  REQUIRE(db->CreateIndex("c", "k").ok());
  const std::string v(1000, 'v');
  int id = 0;
  for (int t = 0; t < 500; t++) {
    auto txn = db->Begin();
    REQUIRE(txn.ok());
    for (int i = 0; i < 4; i++, id++) REQUIRE(txn.value()->Insert("c", Doc(id, id % 7, v)).ok());
    REQUIRE(txn.value()->Commit().ok());
  }
  auto st = db->Stats();
  REQUIRE(st.ok());
  CHECK(st.value().log_full_merges == 0);
  CHECK(st.value().write_buffer_bytes < (4u << 20));  // the rest went to the file
  CHECK(db->Count("c").value() == 2000);
  CHECK(Ids(db.get(), "c", "{\"k\": 3}").size() == 286);  // ids 3, 10, ..., 1998
  db.Reopen();
  CHECK(db->Count("c").value() == 2000);
  CHECK(db->Get("c", Value::Int32(1999)).ok());
}

TEST_CASE("write buffer: a budget far below the log lets go of the log at each freeze") {
  // Each transaction waits a moment after its first write, holding the
  // writer token, so that the merger ends the merge of the generation
  // frozen just before with nothing in the buffer and cannot take the token
  // for its checkpoint. The writer must make up for that checkpoint when it next
  // freezes for the budget, as it does when the log fills: otherwise no
  // record is ever let go and the log fills behind merged generations. The
  // race is made likely, not certain: without that make-up checkpoint this
  // failed in 5 of 10 runs.
  Options o = Buffered(64 << 10);
  o.log_size = 256 << 10;
  TestDB db(o);
  const std::string v(1000, 'v');
  int id = 0;
  for (int t = 0; t < 300; t++) {
    auto txn = db->Begin();
    REQUIRE(txn.ok());
    for (int i = 0; i < 4; i++, id++) {
      REQUIRE(txn.value()->Insert("c", Doc(id, id % 7, v)).ok());
      if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    REQUIRE(txn.value()->Commit().ok());
  }
  auto st = db->Stats();
  REQUIRE(st.ok());
  CHECK(st.value().log_full_merges == 0);
  CHECK(db->Count("c").value() == 1200);
  db.Reopen();
  CHECK(db->Count("c").value() == 1200);
}

// A file system whose data file takes `delay` for each write: merges slow
// enough that a writer fills the next generation before one ends.
class SlowDataFileSystem final : public FileSystemWrapper {
 public:
  explicit SlowDataFileSystem(std::chrono::microseconds delay) : delay_(delay) {}

  Result<std::unique_ptr<storage::File>> Open(const std::string& path, OpenMode mode) override {
    auto f = base()->Open(path, mode);
    if (!f.ok() || (path.size() >= 4 && path.compare(path.size() - 4, 4, "-log") == 0)) return f;
    return std::unique_ptr<storage::File>(new SlowFile(std::move(f.value()), delay_));
  }

 private:
  class SlowFile final : public FileWrapper {
   public:
    SlowFile(std::unique_ptr<storage::File> real, std::chrono::microseconds delay)
        : FileWrapper(std::move(real)), delay_(delay) {}
    Status WriteAt(uint64_t offset, const void* buf, size_t n) override {
      std::this_thread::sleep_for(delay_);
      return real()->WriteAt(offset, buf, n);
    }

   private:
    const std::chrono::microseconds delay_;
  };
  const std::chrono::microseconds delay_;
};

// A 16 KiB budget and a 1 MiB log over `fs`.
Options SlowMerges(SlowDataFileSystem* fs) {
  Options o = Buffered(16 << 10);
  o.file_system = fs;
  o.log_size = 1 << 20;
  return o;
}

StatsOptions Cheap() {
  StatsOptions o;
  o.count_pages = false;
  return o;
}

TEST_CASE("write buffer: DBStats counts the commits that waited for a merge, and how long") {
  // Each page write of a merge takes 2 ms; a commit takes microseconds and
  // a generation is 16 KiB: a commit freezing the next generation finds
  // the merge of the one before still running and waits for it.
  SlowDataFileSystem fs(std::chrono::milliseconds(2));
  TestDB db(SlowMerges(&fs));
  auto before = db->Stats(Cheap());
  REQUIRE(before.ok());
  CHECK(before.value().merge_waits == 0);
  CHECK(before.value().merge_wait_seconds == 0);
  CHECK(before.value().writer_checkpoints == 0);
  const std::string v(1000, 'v');
  for (int i = 0; i < 400; i++) REQUIRE(db->Insert("c", Doc(i, i % 7, v)).ok());
  auto st = db->Stats(Cheap());
  REQUIRE(st.ok());
  INFO(st.value().ToJson());
  CHECK(st.value().merge_waits >= 1);
  CHECK(st.value().merge_waits <= 400);
  CHECK(st.value().merge_wait_seconds > 0);
  CHECK(st.value().log_full_merges == 0);
  // Without the page walk: the counts and the buffer, no pages or entries.
  // (The merger goes on between the two calls: pages may change, the
  // document count may not.)
  auto full = db->Stats();
  REQUIRE(full.ok());
  REQUIRE(st.value().collections.size() == 1);
  REQUIRE(full.value().collections.size() == 1);
  const CollectionStats& c = st.value().collections[0];
  CHECK(c.documents == 400);
  CHECK(full.value().collections[0].documents == 400);
  CHECK(c.data_pages == 0);
  CHECK(full.value().collections[0].data_pages > 0);
  REQUIRE(c.indexes.size() == full.value().collections[0].indexes.size());
  CHECK(st.value().fill_factor == 0);
  CHECK(full.value().fill_factor > 0);
  CHECK(st.value().page_count > 0);
}

TEST_CASE("write buffer: DBStats counts the checkpoints a commit makes up for the merger") {
  // A commit of 20 KiB freezes the whole 16 KiB generation. The writer then
  // holds the token while the merge of it ends, so the merger, with nothing
  // buffered, skips its checkpoint; the next freeze makes it up on the
  // writer's thread. The merge's end is waited for, and the merger's try
  // given 100 ms: tried up to five times against a slow machine.
  SlowDataFileSystem fs(std::chrono::microseconds(500));
  TestDB db(SlowMerges(&fs));
  const std::string v(2000, 'v');
  int id = 0;
  auto big_commit = [&] {
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int i = 0; i < 10; i++, id++) REQUIRE(t.value()->Insert("c", Doc(id, id % 7, v)).ok());
    REQUIRE(t.value()->Commit().ok());
  };
  uint64_t made_up = 0;
  for (int attempt = 0; attempt < 5 && made_up == 0; attempt++) {
    big_commit();
    {
      auto t = db->Begin();
      REQUIRE(t.ok());
      REQUIRE(t.value()->Insert("c", Doc(id, id % 7, v)).ok());
      id++;
      const auto start = std::chrono::steady_clock::now();
      while (db->Stats(Cheap()).value().write_buffer_bytes > 0 &&
             std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      REQUIRE(t.value()->Commit().ok());
    }
    big_commit();  // freezes for the budget, after the merge before it
    made_up = db->Stats(Cheap()).value().writer_checkpoints;
  }
  CHECK(made_up >= 1);
  CHECK(db->Stats(Cheap()).value().log_full_merges == 0);
  CHECK(db->Count("c").value() == static_cast<uint64_t>(id));
  db.Reopen();
  CHECK(db->Count("c").value() == static_cast<uint64_t>(id));
}

// A document of the recovery test: k indexed, u under a unique index.
struct Row {
  int k = 0, u = 0;
  std::string v;
  bool operator==(const Row& o) const { return k == o.k && u == o.u && v == o.v; }
};
using Rows = std::map<int, Row>;

Document RowDoc(int id, const Row& r) {
  return J("{\"_id\": " + std::to_string(id) + ", \"k\": " + std::to_string(r.k) +
           ", \"u\": " + std::to_string(r.u) + ", \"v\": \"" + r.v + "\"}");
}

// Every document, read by a scan and checked against both indexes.
Rows ReadRows(DB* db) {
  auto all = db->Find("c", Document());
  INFO(all.status().ToString());
  REQUIRE(all.ok());
  Rows rows;
  for (const Document& d : all.value()) {
    Row r;
    r.k = std::stoi(d.Get("k").value().ToJson());
    r.u = std::stoi(d.Get("u").value().ToJson());
    r.v = d.Get("v").value().ToJson();
    r.v = r.v.substr(1, r.v.size() - 2);
    rows[std::stoi(d.Get("_id").value().ToJson())] = r;
  }
  CHECK(db->Count("c").value() == rows.size());
  for (int k = 0; k < 8; k++) {
    std::set<int> want;
    for (const auto& [id, r] : rows)
      if (r.k == k) want.insert(id);
    CHECK(Ids(db, "c", "{\"k\": " + std::to_string(k) + "}") == want);
  }
  for (const auto& [id, r] : rows) {
    auto by_u = db->GetBy("c", "u", V(std::to_string(r.u)));
    REQUIRE(by_u.ok());
    CHECK(by_u.value().Get("_id").value().ToJson() == std::to_string(id));
  }
  return rows;
}

// Random single-document commits on `rows` (the model), each acknowledged
// one applied to it; stops at the first failure.
void RandomCommits(DB* db, std::mt19937_64& rng, int n, int* next_id, Rows* rows) {
  for (int i = 0; i < n; i++) {
    const int what = static_cast<int>(rng() % 10);
    if (what < 5 || rows->empty()) {
      const int id = (*next_id)++;
      Row r{static_cast<int>(rng() % 8), id, std::string(rng() % 120, 'a' + rng() % 26)};
      if (!db->Insert("c", RowDoc(id, r)).ok()) return;
      (*rows)[id] = r;
      continue;
    }
    auto it = rows->begin();
    std::advance(it, rng() % rows->size());
    if (what < 8) {
      const int k = static_cast<int>(rng() % 8);
      auto u = db->UpdateOne("c", J("{\"_id\": " + std::to_string(it->first) + "}"),
                             J("{\"$set\": {\"k\": " + std::to_string(k) + "}}"));
      if (!u.ok()) return;
      it->second.k = k;
    } else {
      if (!db->Delete("c", V(std::to_string(it->first))).ok()) return;
      rows->erase(it);
    }
  }
}

// The power goes: nothing more reaches the disk, then unsynced pages are
// kept, reverted or torn.
void PowerLoss(FaultFileSystem* fs, std::unique_ptr<DB>* db, std::mt19937_64& rng) {
  fs->FailAll(EIO);
  db->reset();
  fs->ClearFaults();
  fs->SimulatePowerLoss(rng);
}

// Unsets MMDOC_WRITE_BUFFER while it lives; the setting comes back however
// the test ends.
struct UnsetBufferEnv {
  std::string saved;
  bool had;
  UnsetBufferEnv() {
    const char* env = std::getenv("MMDOC_WRITE_BUFFER");
    had = env != nullptr;
    if (had) saved = env;
    unsetenv("MMDOC_WRITE_BUFFER");
  }
  ~UnsetBufferEnv() {
    if (had) setenv("MMDOC_WRITE_BUFFER", saved.c_str(), 1);
  }
};

std::unique_ptr<DB> OpenOrFail(const std::string& path, const Options& o) {
  auto db = DB::Open(path, o);
  INFO(path << ": " << db.status().ToString());
  REQUIRE(db.ok());
  return std::move(db.value());
}

TEST_CASE("write buffer: recovery replays the log into the buffer, as replay into pages would") {
  const uint64_t seed = Seed("write buffer recovery");
  // The unbuffered opens below must replay into pages, whatever CI's
  // buffered passes set.
  UnsetBufferEnv unset_env;
  TempDir dir;
  const int runs = static_cast<int>(40 * Scale());
  int into_buffer = 0, other = 0;  // other: nothing to replay, or a definition in the log
  for (int run = 0; run < runs; run++) {
    INFO("run " << run << " (seed " << seed << ")");
    std::mt19937_64 rng(seed + static_cast<uint64_t>(run));
    const std::string path = dir.File("db" + std::to_string(run));
    // Mostly a buffer larger than the log, which a replayed log cannot
    // fill: Stats then sees it before a merge empties it.
    Options o = Buffered(rng() % 3 == 0 ? (4 + rng() % 60) << 10 : 1 << 20);
    o.durability = Durability::kFsync;
    o.log_size = 64 << 10;
    int next_id = 0;
    Rows rows;
    {
      FaultFileSystem fs;
      o.file_system = &fs;
      std::unique_ptr<DB> db = OpenOrFail(path, o);
      REQUIRE(db->CreateIndex("c", "k").ok());
      REQUIRE(db->CreateIndex("c", "u", IndexOptions{true}).ok());
      REQUIRE(db->Checkpoint().ok());  // the definitions leave the log
      RandomCommits(db.get(), rng, static_cast<int>(rng() % 200), &next_id, &rows);
      // Sometimes a definition in the log: recovery then replays into pages.
      if (rng() % 4 == 0) REQUIRE(db->CreateIndex("c", "v").ok());
      RandomCommits(db.get(), rng, static_cast<int>(rng() % 100), &next_id, &rows);
      PowerLoss(&fs, &db, rng);
      o.file_system = nullptr;
    }
    // Two copies of what the power cut left: one replayed into pages, one
    // into the buffer. They must agree, and fsync kept every commit.
    for (const char* copy : {"-pages", "-buffer"}) {
      std::filesystem::copy_file(path, path + copy);
      std::filesystem::copy_file(path + "-log", path + copy + "-log");
    }
    Options pages = o;
    pages.write_buffer_size = 0;
    {
      std::unique_ptr<DB> db = OpenOrFail(path + "-pages", pages);
      CHECK(ReadRows(db.get()) == rows);
      RequireCheckPasses(db.get());
    }
    {
      FaultFileSystem fs;
      o.file_system = &fs;
      std::unique_ptr<DB> db = OpenOrFail(path + "-buffer", o);
      // Reads before any merge see the replayed records in the buffer.
      if (db->Stats().value().write_buffer_bytes > 0) {
        into_buffer++;
      } else {
        other++;
      }
      CHECK(ReadRows(db.get()) == rows);
      // More commits after the replayed records, then another power cut:
      // the log keeps both sessions' records until they are merged.
      RandomCommits(db.get(), rng, static_cast<int>(rng() % 100), &next_id, &rows);
      PowerLoss(&fs, &db, rng);
      o.file_system = nullptr;
    }
    std::unique_ptr<DB> db = OpenOrFail(path + "-buffer", o);
    CHECK(ReadRows(db.get()) == rows);
    RequireCheckPasses(db.get());
  }
  std::fprintf(stderr, "write buffer recovery: %d of %d runs replayed into the buffer\n",
               into_buffer, into_buffer + other);
  // The model alone would pass with every replay into pages.
  CHECK(into_buffer > runs / 4);
}

TEST_CASE(
    "write buffer: runs: reads, counts, power cuts, unbuffered opens and salvage see them, merges "
    "under way too") {
  const uint64_t seed = Seed("write buffer runs");
  UnsetBufferEnv unset_env;  // the unbuffered open must be one, whatever CI sets
  TempDir dir;
  const int rounds = static_cast<int>(12 * Scale());
  int runs_while_open = 0, runs_after_cut = 0, merging_while_open = 0, merging_after_cut = 0;
  for (int round = 0; round < rounds; round++) {
    INFO("round " << round << " (seed " << seed << ")");
    std::mt19937_64 rng(seed + static_cast<uint64_t>(round));
    const std::string path = dir.File("db" + std::to_string(round));
    // A generation every few dozen commits: runs form, and every fourth of
    // a tree merges them into it.
    Options o = Buffered((4 + rng() % 12) << 10);
    o.durability = Durability::kFsync;
    o.log_size = 256 << 10;
    int next_id = 0;
    Rows rows;
    {
      FaultFileSystem fs;
      o.file_system = &fs;
      std::unique_ptr<DB> db = OpenOrFail(path, o);
      REQUIRE(db->CreateIndex("c", "k").ok());
      REQUIRE(db->CreateIndex("c", "u", IndexOptions{true}).ok());
      REQUIRE(db->Checkpoint().ok());  // the definitions leave the log
      const int chunks = 5 + static_cast<int>(rng() % 10);
      for (int i = 0; i < chunks; i++) {
        for (int part = 0; part < 4; part++) {
          RandomCommits(db.get(), rng, 10, &next_id, &rows);
          auto part_st = db->Stats();
          REQUIRE(part_st.ok());
          if (part_st.value().runs_merging > 0) merging_while_open++;
        }
        auto st = db->Stats();
        REQUIRE(st.ok());
        if (st.value().runs > 0) runs_while_open++;
        CHECK(st.value().collections.at(0).documents == rows.size());
        if (i % 4 == 3) CHECK(ReadRows(db.get()) == rows);
      }
      PowerLoss(&fs, &db, rng);
      o.file_system = nullptr;
    }
    for (const char* copy : {"-pages", "-buffer"}) {
      std::filesystem::copy_file(path, path + copy);
      std::filesystem::copy_file(path + "-log", path + copy + "-log");
    }
    {
      // Salvage reads the pages and their runs, not the log: a copy without
      // its log holds what the last checkpoint left, and reads and salvage
      // of it must agree (the merger may merge its runs meanwhile).
      std::filesystem::copy_file(path, path + "-nolog");
      Options nolog = o;
      nolog.accept_log_loss = true;
      std::unique_ptr<DB> db = OpenOrFail(path + "-nolog", nolog);
      if (db->Stats().value().runs > 0) runs_after_cut++;
      if (db->Stats().value().runs_merging > 0) merging_after_cut++;
      std::set<int> salvaged;
      DB::SalvageReport report;
      Status s = db->Salvage(
          "c",
          [&](std::string_view bson) {
            auto d = Document::FromBson(reinterpret_cast<const uint8_t*>(bson.data()), bson.size());
            REQUIRE(d.ok());
            salvaged.insert(std::stoi(d.value().Get("_id").value().ToJson()));
          },
          &report);
      INFO(s.ToString());
      REQUIRE(s.ok());
      std::set<int> read;
      for (const auto& [id, r] : ReadRows(db.get())) read.insert(id);
      CHECK(salvaged == read);
      CHECK(report.lost == 0);
      CHECK(report.problems.empty());
    }
    const Rows at_cut = rows;
    {
      // fsync kept every commit.
      std::unique_ptr<DB> db = OpenOrFail(path + "-buffer", o);
      CHECK(ReadRows(db.get()) == rows);
      RandomCommits(db.get(), rng, 60, &next_id, &rows);
      CHECK(ReadRows(db.get()) == rows);
      RequireCheckPasses(db.get());
    }
    Options pages = o;
    pages.write_buffer_size = 0;
    std::unique_ptr<DB> db = OpenOrFail(path + "-pages", pages);
    CHECK(db->Stats().value().runs == 0);  // merged at open: writes go to the trees
    CHECK(ReadRows(db.get()) == at_cut);
    RequireCheckPasses(db.get());
  }
  std::fprintf(stderr,
               "write buffer runs: runs seen in %d stats while open (%d merging), after %d of %d "
               "cuts (%d merging)\n",
               runs_while_open, merging_while_open, runs_after_cut, rounds, merging_after_cut);
  CHECK(runs_while_open > 0);
  CHECK(runs_after_cut > 0);
  // Merges go in slices of about a buffer's size, so some are seen under
  // way (how many while open depends on timing: under load, few).
  CHECK(merging_while_open + merging_after_cut > 0);
}

TEST_CASE("concurrency: write buffer: writers, readers and merges agree on every snapshot") {
  const uint64_t seed = Seed("concurrency write buffer");
  TestDB db(Buffered(32 << 10));
  const int per = static_cast<int>(300 * Scale());
  std::atomic<bool> done{false};
  std::atomic<int> problems{0};
  // Each writer moves one unit from one account to another: the total
  // never changes, in any snapshot, whichever layer holds the accounts.
  for (int i = 0; i < 20; i++) REQUIRE(db->Insert("acc", Doc(i, 100, "")).ok());
  auto writer = [&](int w) {
    std::mt19937_64 rng(seed + static_cast<uint64_t>(w));
    for (int n = 0; n < per; n++) {
      const int a = static_cast<int>(rng() % 20), b = static_cast<int>(rng() % 20);
      if (a == b) continue;
      auto t = db->Begin();
      if (!t.ok()) {
        problems++;
        return;
      }
      bool ok = t.value()
                    ->UpdateOne("acc", J("{\"_id\": " + std::to_string(a) + "}"),
                                J("{\"$inc\": {\"k\": -1}}"))
                    .ok() &&
                t.value()
                    ->UpdateOne("acc", J("{\"_id\": " + std::to_string(b) + "}"),
                                J("{\"$inc\": {\"k\": 1}}"))
                    .ok() &&
                t.value()->Insert("log", Doc(w * 100000 + n, a, std::string(50, 'l'))).ok();
      if (!ok || !t.value()->Commit().ok()) problems++;
    }
  };
  auto reader = [&] {
    while (!done.load()) {
      auto t = db->BeginRead();
      if (!t.ok()) {
        problems++;
        return;
      }
      auto docs = t.value()->Find("acc", Document());
      if (!docs.ok()) {
        problems++;
        return;
      }
      int64_t sum = 0;
      int n = 0;
      while (docs.value()->Next()) {
        sum += docs.value()->document().Get("k").value().get()->value.v_int32;
        n++;
      }
      auto counted = t.value()->Count("log", Document());
      const uint64_t logged = counted.ok() ? counted.value() : 0;
      uint64_t scanned = 0;
      auto all = t.value()->Find("log", Document());
      if (all.ok())
        while (all.value()->Next()) scanned++;
      if (sum != 2000 || n != 20 || logged != scanned) problems++;
    }
  };
  std::thread r1(reader), r2(reader);
  std::thread w1(writer, 1), w2(writer, 2);
  w1.join();
  w2.join();
  done.store(true);
  r1.join();
  r2.join();
  CHECK(problems.load() == 0);
}

}  // namespace
}  // namespace mmdoc::test
