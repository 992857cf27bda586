// Model-based randomized test of the engine: random inserts, updates,
// replaces, deletes, queries and transactions (some aborted) run against
// mmdoc and against an in-memory model; documents, index lookups and counts
// must agree after every operation, across reopens. The seed is printed;
// MMDOC_TEST_SEED replays a failure, MMDOC_TEST_SCALE makes it longer.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>

#include "mmdoc/db.h"
#include "tests/support/test_db.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;
using mmdoc::test::V;

namespace {

struct ModelDoc {
  int key;                // unique index
  int val;                // non-unique index
  std::vector<int> tags;  // multikey index
  bool has_val = true;
};

using Model = std::map<int, ModelDoc>;

std::string ToJson(int id, const ModelDoc& d) {
  std::string s = "{\"_id\": " + std::to_string(id) + ", \"key\": " + std::to_string(d.key);
  if (d.has_val) s += ", \"val\": " + std::to_string(d.val);
  s += ", \"tags\": [";
  for (size_t i = 0; i < d.tags.size(); i++) s += (i ? ", " : "") + std::to_string(d.tags[i]);
  return s + "]}";
}

bool KeyTaken(const Model& m, int key, int except_id) {
  for (auto& [id, d] : m)
    if (id != except_id && d.key == key) return true;
  return false;
}

std::set<int> Query(DB* db, const std::string& filter) {
  auto r = db->Find("c", J(filter));
  INFO(filter << ": " << r.status().ToString());
  REQUIRE(r.ok());
  std::set<int> ids;
  for (const Document& d : r.value()) ids.insert(std::stoi(d.Get("_id").value().ToJson()));
  return ids;
}

}  // namespace

TEST_CASE("engine agrees with an in-memory model", "[engine][model]") {
  const uint64_t seed = mmdoc::test::Seed("engine model");
  std::mt19937_64 rng(seed);
  auto rnd = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  Options o;
  o.durability = Durability::kNone;
  o.log_size = 256 << 10;  // small log: checkpoints happen during the test
  TestDB db(o);
  REQUIRE(db->CreateIndex("c", "key", IndexOptions{true}).ok());
  REQUIRE(db->CreateIndex("c", "val").ok());
  REQUIRE(db->CreateIndex("c", "tags").ok());
  Model model;
  const int kIds = 400;
  const uint64_t ops = 6000 * mmdoc::test::Scale();
  for (uint64_t op = 0; op < ops; op++) {
    INFO("op " << op << " seed " << seed);
    // A transaction of 1..4 operations, committed or (1 in 8) aborted.
    auto t = db->Begin();
    REQUIRE(t.ok());
    Model pending = model;
    int n = 1 + rnd(4);
    for (int k = 0; k < n; k++) {
      int id = rnd(kIds);
      int choice = rnd(10);
      if (choice < 4) {
        ModelDoc d{rnd(kIds * 2), rnd(20), {}, rnd(10) != 0};
        for (int j = rnd(4); j > 0; j--) d.tags.push_back(rnd(30));
        Status s = t.value()->Insert("c", J(ToJson(id, d)));
        bool expect_ok = !pending.count(id) && !KeyTaken(pending, d.key, -1);
        INFO(ToJson(id, d) << " -> " << s.ToString());
        REQUIRE(s.ok() == expect_ok);
        if (!s.ok()) CHECK(s.IsAlreadyExists());
        if (s.ok()) pending[id] = d;
      } else if (choice < 6) {
        Status s = t.value()->Delete("c", V(std::to_string(id)));
        REQUIRE(s.ok() == (pending.count(id) == 1));
        pending.erase(id);
      } else if (choice < 8) {
        int nv = rnd(20);
        auto u = t.value()->UpdateOne("c", J("{\"_id\": " + std::to_string(id) + "}"),
                                      J("{\"$inc\": {\"val\": " + std::to_string(nv) + "}}"));
        REQUIRE(u.ok());
        CHECK(u.value().matched == pending.count(id));
        if (pending.count(id)) {
          ModelDoc& d = pending[id];
          d.val = d.has_val ? d.val + nv : nv;
          d.has_val = true;
        }
      } else {
        int nk = rnd(kIds * 2);
        const Document set_key = J("{\"$set\": {\"key\": " + std::to_string(nk) + "}}");
        bool exists = pending.count(id) == 1;
        bool conflict = exists && KeyTaken(pending, nk, id);
        // By a filter, or by _id (NotFound when there is none).
        Status s;
        if (rnd(2) == 0) {
          s = t.value()
                  ->UpdateOne("c", J("{\"_id\": " + std::to_string(id) + "}"), set_key)
                  .status();
        } else {
          s = t.value()->Update("c", V(std::to_string(id)), set_key);
          if (!exists) REQUIRE(s.IsNotFound());
          if (!exists) s = Status::OK();
        }
        INFO("set key " << nk << " on " << id << ": " << s.ToString());
        REQUIRE(s.ok() == !conflict);
        if (!s.ok()) REQUIRE(s.IsAlreadyExists());
        if (s.ok() && exists) pending[id].key = nk;
      }
    }
    if (rnd(8) == 0) {
      t.value()->Abort();
    } else {
      REQUIRE(t.value()->Commit().ok());
      model = pending;
    }

    // Compare: a random document, a key lookup, a val range, a tag.
    int id = rnd(kIds);
    auto got = db->Get("c", V(std::to_string(id)));
    REQUIRE(got.ok() == (model.count(id) == 1));
    if (got.ok()) {
      // Field by field: $inc of a missing field appends it, so the order
      // of fields may differ from the model's JSON.
      const Document want = J(ToJson(id, model[id]));
      for (const char* f : {"_id", "key", "val", "tags"}) {
        INFO(f << " of " << got.value().ToJson());
        auto a = got.value().Get(f);
        auto b = want.Get(f);
        REQUIRE(a.ok() == b.ok());
        if (a.ok()) CHECK(a.value().ToJson() == b.value().ToJson());
      }
    }
    if (!model.empty() && rnd(2) == 0) {
      auto it = model.begin();
      std::advance(it, rnd(static_cast<int>(model.size())));
      CHECK(Query(db.get(), "{\"key\": " + std::to_string(it->second.key) + "}") ==
            std::set<int>{it->first});
    }
    int lo = rnd(30), hi = lo + rnd(15);
    std::set<int> expect;
    for (auto& [i, d] : model)
      if (d.has_val && d.val >= lo && d.val < hi) expect.insert(i);
    CHECK(Query(db.get(), "{\"val\": {\"$gte\": " + std::to_string(lo) +
                              ", \"$lt\": " + std::to_string(hi) + "}}") == expect);
    int tag = rnd(30);
    expect.clear();
    for (auto& [i, d] : model)
      for (int x : d.tags)
        if (x == tag) expect.insert(i);
    CHECK(Query(db.get(), "{\"tags\": " + std::to_string(tag) + "}") == expect);
    expect.clear();
    for (auto& [i, d] : model)
      if (!d.has_val) expect.insert(i);
    if (rnd(10) == 0) CHECK(Query(db.get(), R"({"val": {"$exists": false}})") == expect);
    CHECK(db->Count("c").value() == model.size());

    if (op % 500 == 499) db.CheckNow();
    if (rnd(300) == 0) db.Reopen();
  }
}
