// A write transaction that changes what it has already read or defined:
// a collection dropped and written again, and cursors left open while the
// same transaction writes, drops an index or drops the collection they
// read. Each test runs in whatever write buffer mode MMDOC_WRITE_BUFFER
// gives (CI runs all three); every TestDB is checked with DB::Check when
// the test ends.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;

namespace {

int IntField(const Document& d, const char* field) {
  return std::stoi(d.Get(field).value().ToJson());
}

std::string Doc(int id, int a) {
  return "{\"_id\": " + std::to_string(id) + ", \"a\": " + std::to_string(a) +
         ", \"b\": " + std::to_string(id % 5) + "}";
}

// "{_id:a, ...}", for a failure's message.
std::string Str(const std::map<int, int>& docs) {
  std::string out = "{";
  for (const auto& [id, a] : docs) out += std::to_string(id) + ":" + std::to_string(a) + " ";
  return out + "}";
}

// _id -> a of every document `filter` matches, read through `t`.
std::map<int, int> ReadAll(Transaction* t, const std::string& coll,
                           const std::string& filter = "{}") {
  auto cur = t->Find(coll, J(filter));
  REQUIRE(cur.ok());
  std::map<int, int> out;
  while (cur.value()->Next()) {
    Document d = cur.value()->document();
    out[IntField(d, "_id")] = IntField(d, "a");
  }
  INFO(coll << " " << filter);
  REQUIRE(cur.value()->status().ok());
  return out;
}

void FillC(DB* db, int n, bool index) {
  if (index) REQUIRE(db->CreateIndex("c", "a").ok());
  auto t = db->Begin();
  REQUIRE(t.ok());
  for (int i = 0; i < n; i++) REQUIRE(t.value()->Insert("c", J(Doc(i, i))).ok());
  REQUIRE(t.value()->Commit().ok());
}

// The model of one collection: its indexes and documents (_id -> a).
struct ModelColl {
  std::set<std::string> indexes;
  std::map<int, int> docs;
};
using Model = std::map<std::string, ModelColl>;

// Every collection, document and index of the model, and a lookup by a
// (through its index when there is one), as `t` reads them.
void CheckModel(Transaction* t, const Model& m) {
  auto names = t->ListCollections();
  REQUIRE(names.ok());
  std::set<std::string> want;
  for (const auto& [name, c] : m) want.insert(name);
  CHECK(std::set<std::string>(names.value().begin(), names.value().end()) == want);
  for (const std::string coll : {"c", "d"}) {
    auto it = m.find(coll);
    const std::map<int, int> docs = it == m.end() ? std::map<int, int>() : it->second.docs;
    INFO("collection " << coll);
    CHECK(Str(ReadAll(t, coll)) == Str(docs));
    for (int a = 0; a < 10; a += 3) {
      std::map<int, int> hits;
      for (const auto& [id, v] : docs)
        if (v == a) hits[id] = v;
      CHECK(Str(ReadAll(t, coll, "{\"a\": " + std::to_string(a) + "}")) == Str(hits));
    }
    if (it == m.end()) continue;
    auto idx = t->ListIndexes(coll);
    REQUIRE(idx.ok());
    std::set<std::string> fields;
    for (const IndexInfo& i : idx.value()) fields.insert(i.field);
    CHECK(fields == it->second.indexes);
  }
}

void CheckModel(DB* db, const Model& m) {
  auto r = db->BeginRead();
  REQUIRE(r.ok());
  CheckModel(r.value().get(), m);
}

}  // namespace

TEST_CASE("a transaction drops a collection and writes it again", "[engine][txn]") {
  const int n = GENERATE(1, 300);
  const bool index = GENERATE(false, true);
  INFO(n << " documents, index " << index);
  TestDB db;
  FillC(db.get(), n, index);

  SECTION("drop, insert") {
    auto t = db->Begin();
    REQUIRE(t.ok());
    REQUIRE(t.value()->DropCollection("c").ok());
    REQUIRE(t.value()->Insert("c", J(Doc(100000, 7))).ok());
    REQUIRE(t.value()->Insert("c", J(Doc(100001, 8))).ok());
    CHECK(ReadAll(t.value().get(), "c") == std::map<int, int>{{100000, 7}, {100001, 8}});
    REQUIRE(t.value()->Commit().ok());
    CHECK(db->Count("c").value() == 2);
    CHECK(db->ListIndexes("c").value().empty());
    db.Reopen();
    CHECK(db->Get("c", Value::Int32(100001)).ok());
    CHECK(db->Count("c").value() == 2);
  }
  SECTION("drop, create index, insert") {
    auto t = db->Begin();
    REQUIRE(t.ok());
    REQUIRE(t.value()->DropCollection("c").ok());
    REQUIRE(t.value()->CreateIndex("c", "a").ok());
    REQUIRE(t.value()->Insert("c", J(Doc(100000, 7))).ok());
    CHECK(ReadAll(t.value().get(), "c", "{\"a\": 7}") == std::map<int, int>{{100000, 7}});
    REQUIRE(t.value()->Commit().ok());
    db.Reopen();
    CHECK(db->Find("c", J("{\"a\": 7}")).value().size() == 1);
    CHECK(db->Count("c").value() == 1);
  }
  SECTION("drop, insert, drop") {
    auto t = db->Begin();
    REQUIRE(t.ok());
    REQUIRE(t.value()->DropCollection("c").ok());
    REQUIRE(t.value()->Insert("c", J(Doc(100000, 7))).ok());
    REQUIRE(t.value()->DropCollection("c").ok());
    CHECK(t.value()->DropCollection("c").IsNotFound());
    REQUIRE(t.value()->Commit().ok());
    CHECK(db->ListCollections().value().empty());
    db.Reopen();
    CHECK(db->ListCollections().value().empty());
  }
}

TEST_CASE("drops, inserts and index definitions in one transaction agree with a model",
          "[engine][txn][model]") {
  const uint64_t seed = mmdoc::test::Seed("drop and redefine in one transaction");
  std::mt19937_64 rng(seed);
  auto rnd = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  TestDB db;
  Model committed;
  const int txns = static_cast<int>(40 * mmdoc::test::Scale());
  for (int round = 0; round < txns; round++) {
    auto began = db->Begin();
    REQUIRE(began.ok());
    Transaction* t = began.value().get();
    Model m = committed;
    std::string trace;  // this transaction's operations so far
    const int ops = 1 + rnd(8);
    for (int op = 0; op < ops; op++) {
      const std::string coll = rnd(3) == 0 ? "d" : "c";
      const std::string field = rnd(2) == 0 ? "a" : "b";
      const bool exists = m.count(coll) > 0;
      INFO("seed " << seed << " round " << round << " op " << op << " on " << coll << " after "
                   << trace);
      switch (rnd(7)) {
        case 0:
        case 1:
        case 2: {  // a few inserts (the first creates the collection)
          for (int k = 1 + rnd(30); k > 0; k--) {
            const int id = rnd(200);
            const int a = rnd(10);
            Status s = t->Insert(coll, J(Doc(id, a)));
            trace += " insert " + coll + " " + std::to_string(id) + ";";
            INFO(s.ToString());
            if (m.count(coll) && m[coll].docs.count(id)) {
              CHECK(s.IsAlreadyExists());
            } else {
              REQUIRE(s.ok());
              m[coll].docs[id] = a;
            }
          }
          break;
        }
        case 3: {
          const int id =
              exists && !m[coll].docs.empty() && rnd(4) != 0
                  ? std::next(m[coll].docs.begin(), rnd(static_cast<int>(m[coll].docs.size())))
                        ->first
                  : rnd(200);
          Status s = t->Delete(coll, Value::Int32(id));
          trace += " delete " + coll + " " + std::to_string(id) + ";";
          if (exists && m[coll].docs.erase(id)) {
            REQUIRE(s.ok());
          } else {
            CHECK(s.IsNotFound());
          }
          break;
        }
        case 4: {
          Status s = t->DropCollection(coll);
          trace += " drop " + coll + ";";
          if (exists) {
            REQUIRE(s.ok());
            m.erase(coll);
          } else {
            CHECK(s.IsNotFound());
          }
          break;
        }
        case 5: {
          Status s = t->CreateIndex(coll, field);
          trace += " create index " + coll + "." + field + ";";
          if (exists && m[coll].indexes.count(field)) {
            CHECK(s.IsAlreadyExists());
          } else {
            REQUIRE(s.ok());
            m[coll].indexes.insert(field);
          }
          break;
        }
        case 6: {
          Status s = t->DropIndex(coll, field);
          trace += " drop index " + coll + "." + field + ";";
          if (exists && m[coll].indexes.erase(field)) {
            REQUIRE(s.ok());
          } else {
            CHECK(s.IsNotFound());
          }
          break;
        }
      }
    }
    INFO("seed " << seed << " round " << round << ": " << trace);
    CheckModel(t, m);  // the transaction sees its own changes
    if (rnd(8) == 0) {
      t->Abort();
    } else {
      REQUIRE(t->Commit().ok());
      committed = m;
    }
    began.value().reset();
    CheckModel(db.get(), committed);
    if (rnd(10) == 0) {
      db.Reopen();
      CheckModel(db.get(), committed);
    }
  }
  db.Reopen();
  CheckModel(db.get(), committed);
}

TEST_CASE("an index cursor of a write transaction sees the transaction's deletes",
          "[engine][txn][cursor]") {
  TestDB db;
  FillC(db.get(), 100, /*index=*/true);
  auto t = db->Begin();
  REQUIRE(t.ok());

  SECTION("forward") {
    auto cur = t.value()->Find("c", J(R"({"a": {"$gte": 0}})"));
    REQUIRE(cur.ok());
    CHECK(cur.value()->explain().plan == "IXSCAN");
    std::vector<int> ids;
    REQUIRE(cur.value()->Next());
    ids.push_back(IntField(cur.value()->document(), "_id"));
    REQUIRE(t.value()->Delete("c", Value::Int32(50)).ok());
    // The one the cursor stands on, and one ahead that it then finds.
    REQUIRE(t.value()->Delete("c", Value::Int32(0)).ok());
    REQUIRE(t.value()->Insert("c", J(Doc(1000, 1000))).ok());
    while (cur.value()->Next()) {
      ids.push_back(IntField(cur.value()->document(), "_id"));
      if (ids.back() == 70) REQUIRE(t.value()->Delete("c", Value::Int32(71)).ok());
    }
    INFO(cur.value()->status().ToString());
    REQUIRE(cur.value()->status().ok());
    std::vector<int> want;
    for (int i = 0; i < 100; i++)
      if (i != 50 && i != 71) want.push_back(i);
    want.push_back(1000);
    CHECK(ids == want);
  }
  SECTION("backward, an index that gives the sort") {
    FindOptions o;
    o.sort_field = "a";
    o.sort_direction = -1;
    auto cur = t.value()->Find("c", J(R"({"a": {"$gte": 0}})"), o);
    REQUIRE(cur.ok());
    CHECK_FALSE(cur.value()->explain().sorted_in_memory);
    std::vector<int> ids;
    while (cur.value()->Next()) {
      const int id = IntField(cur.value()->document(), "_id");
      ids.push_back(id);
      if (id == 99) REQUIRE(t.value()->Delete("c", Value::Int32(98)).ok());
      if (id == 60) REQUIRE(t.value()->Delete("c", Value::Int32(60)).ok());
      if (id == 1) REQUIRE(t.value()->Delete("c", Value::Int32(0)).ok());
    }
    INFO(cur.value()->status().ToString());
    REQUIRE(cur.value()->status().ok());
    std::vector<int> want;
    for (int i = 99; i >= 1; i--)
      if (i != 98) want.push_back(i);
    CHECK(ids == want);
  }
  SECTION("a scan of _id") {
    auto cur = t.value()->Find("c", J("{}"));
    REQUIRE(cur.ok());
    std::vector<int> ids;
    while (cur.value()->Next()) {
      const int id = IntField(cur.value()->document(), "_id");
      ids.push_back(id);
      if (id == 10) {
        REQUIRE(t.value()->Delete("c", Value::Int32(10)).ok());
        REQUIRE(t.value()->Delete("c", Value::Int32(11)).ok());
        REQUIRE(t.value()->Replace("c", Value::Int32(12), J(R"({"a": -1})")).ok());
      }
    }
    REQUIRE(cur.value()->status().ok());
    std::vector<int> want;
    for (int i = 0; i < 100; i++)
      if (i != 11) want.push_back(i);
    CHECK(ids == want);
  }
  REQUIRE(t.value()->Commit().ok());
}

TEST_CASE("a cursor whose index or collection its transaction drops ends with an error",
          "[engine][txn][cursor]") {
  TestDB db;
  FillC(db.get(), 2000, /*index=*/true);
  auto t = db->Begin();
  REQUIRE(t.ok());
  const bool by_index = GENERATE(true, false);
  const bool drop_collection = GENERATE(true, false);
  const bool insert_after = GENERATE(false, true);
  INFO("index walk " << by_index << ", drops the collection " << drop_collection
                     << ", inserts after " << insert_after);
  auto cur = t.value()->Find("c", J(by_index ? R"({"a": {"$gte": 5}})" : "{}"));
  REQUIRE(cur.ok());
  CHECK(cur.value()->explain().plan == (by_index ? "IXSCAN" : "COLLSCAN"));
  for (int i = 0; i < 10; i++) REQUIRE(cur.value()->Next());
  REQUIRE((drop_collection ? t.value()->DropCollection("c") : t.value()->DropIndex("c", "a")).ok());
  if (insert_after) {
    for (int i = 0; i < 5; i++) REQUIRE(t.value()->Insert("c", J(Doc(100000 + i, 1))).ok());
  }
  if (!drop_collection && !by_index) {
    // The scan reads the _id tree, which dropping an index leaves: it goes on.
    int n = 10;
    while (cur.value()->Next()) n++;
    REQUIRE(cur.value()->status().ok());
    CHECK(n == 2000 + (insert_after ? 5 : 0));
  } else {
    CHECK_FALSE(cur.value()->Next());
    CHECK(cur.value()->status().IsInvalidArgument());
    CHECK_THAT(cur.value()->status().ToString(), Catch::Contains("dropped in its transaction"));
    CHECK_FALSE(cur.value()->Next());  // and stays so
  }
  cur.value().reset();
  REQUIRE(t.value()->Commit().ok());
  CHECK(db->Count("c").value() ==
        uint64_t{drop_collection ? 0u : 2000u} + (insert_after ? 5u : 0u));
}

TEST_CASE("a cursor goes on across its transaction's other definitions", "[engine][txn][cursor]") {
  // With a write buffer these move the transaction onto the pages
  // (TransactionImpl::ToPages), replacing the trees the cursor read.
  TestDB db;
  FillC(db.get(), 500, /*index=*/true);
  REQUIRE(db->Insert("d", J(Doc(1, 1))).ok());
  auto t = db->Begin();
  REQUIRE(t.ok());
  const int what = GENERATE(0, 1, 2, 3);
  const bool by_index = GENERATE(true, false);
  INFO("definition " << what << ", index walk " << by_index);
  auto cur = t.value()->Find("c", J(by_index ? R"({"a": {"$gte": 0}})" : "{}"));
  REQUIRE(cur.ok());
  int n = 0;
  for (; n < 10; n++) REQUIRE(cur.value()->Next());
  switch (what) {
    case 0:
      REQUIRE(t.value()->Insert("new", J("{}")).ok());
      break;
    case 1:
      REQUIRE(t.value()->CreateIndex("c", "b").ok());
      break;
    case 2:
      REQUIRE(t.value()->DropCollection("d").ok());
      break;
    case 3:
      REQUIRE(t.value()->CreateIndex("d", "a").ok());
      REQUIRE(t.value()->DropIndex("d", "a").ok());
      break;
  }
  while (cur.value()->Next()) n++;
  INFO(cur.value()->status().ToString());
  REQUIRE(cur.value()->status().ok());
  CHECK(n == 500);
  cur.value().reset();
  REQUIRE(t.value()->Commit().ok());
}

TEST_CASE("the first insert into a new collection after other writes inserts its document",
          "[engine][txn]") {
  // With a write buffer a new collection moves the transaction onto the
  // pages, which redoes its earlier inserts: the new one must not be
  // replaced by the last of them.
  TestDB db;
  REQUIRE(db->Insert("d", J(Doc(1, 1))).ok());
  auto t = db->Begin();
  REQUIRE(t.ok());
  REQUIRE(t.value()->Insert("d", J(Doc(2, 2))).ok());
  REQUIRE(t.value()->Insert("d", J(Doc(3, 3))).ok());
  Value id;
  REQUIRE(t.value()->Insert("c", J(R"({"a": 7})"), &id).ok());
  CHECK(ReadAll(t.value().get(), "d") == std::map<int, int>{{1, 1}, {2, 2}, {3, 3}});
  auto got = t.value()->Get("c", id);
  REQUIRE(got.ok());
  CHECK(IntField(got.value(), "a") == 7);
  REQUIRE(t.value()->Commit().ok());
  CHECK(db->Count("c").value() == 1);
  CHECK(db->Get("c", id).ok());
}
