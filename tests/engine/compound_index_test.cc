// Compound, descending, sparse and partial indexes: randomized against an
// unindexed copy and a model, plus the plans, bounds and counts Explain
// reports, parallel arrays, unique keys and the catalog format.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/query.h"
#include "mmdoc/db.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;

namespace {

Options Fast() {
  Options o;
  o.durability = Durability::kNone;
  return o;
}

std::set<std::string> Ids(const std::vector<Document>& docs) {
  std::set<std::string> ids;
  for (const Document& d : docs) ids.insert(d.Get("_id").value().ToJson());
  return ids;
}

// A document's sort key under `sort`, as bytes that order as the sort does.
std::string SortBytes(const Document& d, const std::vector<SortSpec>& sort) {
  std::string key;
  for (const SortSpec& s : sort) {
    bson_value_t v;
    engine::SortKey(d.data(), d.size(), s.field, s.direction, &v);
    const size_t at = key.size();
    engine::AppendKey(&v, &key);
    if (s.direction < 0)
      for (size_t i = at; i < key.size(); i++) key[i] = static_cast<char>(~key[i]);
  }
  return key;
}

ExplainInfo Explain(DB* db, const std::string& coll, const std::string& filter,
                    const FindOptions& o = FindOptions()) {
  auto t = db->BeginRead();
  REQUIRE(t.ok());
  auto e = t.value()->Explain(coll, J(filter), o);
  INFO(filter << ": " << e.status().ToString());
  REQUIRE(e.ok());
  return e.value();
}

std::vector<Document> Find(DB* db, const std::string& coll, const std::string& filter,
                           const FindOptions& o = FindOptions()) {
  auto r = db->Find(coll, J(filter), o);
  INFO(coll << " " << filter << ": " << r.status().ToString());
  REQUIRE(r.ok());
  return r.value();
}

IndexOptions Unique() {
  IndexOptions o;
  o.unique = true;
  return o;
}

}  // namespace

TEST_CASE("compound index: equality prefix plus a range, bounds and counts in Explain",
          "[engine][compound]") {
  TestDB db(Fast());
  for (int i = 0; i < 200; i++) {
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"a\": " +
                              std::to_string(i % 10) + ", \"b\": " + std::to_string(i / 10) +
                              ", \"c\": " + std::to_string(i % 3) + "}"))
                .ok());
  }
  REQUIRE(db->CreateIndex("c", std::vector<IndexKey>{{"a", 1}, {"b", -1}}).ok());
  auto list = db->ListIndexes("c");
  REQUIRE(list.ok());
  REQUIRE(list.value().size() == 1);
  CHECK(list.value()[0].field == "a_1_b_-1");
  REQUIRE(list.value()[0].keys.size() == 2);
  CHECK(list.value()[0].keys[1].direction == -1);
  CHECK(list.value()[0].entries == 200);

  // a = 3 and 5 <= b < 9: four keys, four documents.
  ExplainInfo e = Explain(db.get(), "c", R"({"a": 3, "b": {"$gte": 5, "$lt": 9}})");
  CHECK(e.plan == "IXSCAN");
  CHECK(e.index == "a_1_b_-1");
  CHECK(e.keys_examined == 4);
  CHECK(e.docs_examined == 4);
  CHECK(e.returned == 4);
  CHECK(e.bounds == R"j({"a": ["[3, 3]"], "b": ["[5, 9)"]})j");
  const std::string json = e.ToJson();
  CHECK(json.find(R"("totalKeysExamined": 4, "totalDocsExamined": 4, "nReturned": 4)") !=
        std::string::npos);
  CHECK(json.find(R"("indexBounds": {"a": ["[3, 3]"])") != std::string::npos);
  // The rest of the filter is applied to the documents the index finds.
  e = Explain(db.get(), "c", R"({"a": 3, "b": {"$gte": 5}, "c": 0})");
  CHECK(e.keys_examined == 15);
  CHECK(e.docs_examined == 15);
  CHECK(e.returned == Find(db.get(), "c", R"({"a": 3, "b": {"$gte": 5}, "c": 0})").size());
  // $in on the first field, a range on the second: one interval per point.
  e = Explain(db.get(), "c", R"({"a": {"$in": [1, 2]}, "b": {"$lte": 1}})");
  CHECK(e.keys_examined == 4);
  CHECK(e.returned == 4);
  // Only the first field bounded; the second has no bound.
  e = Explain(db.get(), "c", R"({"a": 7})");
  CHECK(e.index == "a_1_b_-1");
  CHECK(e.keys_examined == 20);
  CHECK(e.bounds == R"({"a": ["[7, 7]"], "b": ["[MinKey, MaxKey]"]})");
  // No bound on the first field: a scan.
  e = Explain(db.get(), "c", R"({"b": 3})");
  CHECK(e.plan == "COLLSCAN");
  CHECK(e.docs_examined == 200);
  CHECK(e.keys_examined == 0);

  // The sort (b descending) follows the index after the equality on a,
  // and a limit stops the walk; reversed (b ascending) walks backward.
  FindOptions o;
  o.sort = {{"b", -1}};
  o.limit = 3;
  e = Explain(db.get(), "c", R"({"a": 4})", o);
  CHECK_FALSE(e.sorted_in_memory);
  CHECK(e.keys_examined == 3);
  auto docs = Find(db.get(), "c", R"({"a": 4})", o);
  REQUIRE(docs.size() == 3);
  CHECK(docs[0].Get("b").value().ToJson() == "19");
  CHECK(docs[2].Get("b").value().ToJson() == "17");
  o.sort = {{"a", -1}, {"b", 1}};
  e = Explain(db.get(), "c", "{}", o);
  CHECK(e.index == "a_1_b_-1");
  CHECK_FALSE(e.sorted_in_memory);
  docs = Find(db.get(), "c", "{}", o);
  REQUIRE(docs.size() == 3);
  CHECK(docs[0].Get("_id").value().ToJson() == "9");
  CHECK(docs[1].Get("_id").value().ToJson() == "19");
  // Of two indexes bounding the same fields, the one giving the sort.
  REQUIRE(db->CreateIndex("c", "a").ok());
  o.sort = {{"b", 1}};
  e = Explain(db.get(), "c", R"({"a": 4})", o);
  CHECK(e.index == "a_1_b_-1");
  CHECK_FALSE(e.sorted_in_memory);
  CHECK(e.keys_examined == 3);
  REQUIRE(db->DropIndex("c", "a").ok());
  // Mixed directions the index does not have: in memory.
  o.sort = {{"a", 1}, {"b", 1}};
  CHECK(Explain(db.get(), "c", "{}", o).sorted_in_memory);

  // Counts for the other plans.
  e = Explain(db.get(), "c", R"({"_id": 5})");
  CHECK(e.plan == "IDHACK");
  CHECK(e.keys_examined == 1);
  CHECK(e.docs_examined == 1);
  CHECK(e.returned == 1);
  e = Explain(db.get(), "c", R"({"c": 1})");
  CHECK(e.plan == "COLLSCAN");
  CHECK(e.docs_examined == 200);
  CHECK(e.returned == 67);
  CHECK(e.bounds.empty());

  // Dropped by name; the plans go back to scans.
  CHECK(db->DropIndex("c", "a").IsNotFound());
  REQUIRE(db->DropIndex("c", "a_1_b_-1").ok());
  CHECK(Explain(db.get(), "c", R"({"a": 3})").plan == "COLLSCAN");
}

TEST_CASE("compound index: bad key patterns and options are refused, naming the problem",
          "[engine][compound]") {
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "a": 1})")).ok());
  auto bad = [&](std::vector<IndexKey> keys, const std::string& what,
                 IndexOptions o = IndexOptions()) {
    Status s = db->CreateIndex("c", keys, o);
    INFO(s.ToString());
    CHECK(s.IsInvalidArgument());
    CHECK(s.ToString().find(what) != std::string::npos);
  };
  bad({}, "no fields");
  bad({{"a", 1}, {"a", -1}}, "twice");
  bad({{"a", 2}}, "1 or -1");
  bad({{"a", 1}, {"b..c", 1}}, "b..c");
  bad({{"$a", 1}}, "$a");
  IndexOptions p;
  p.partial_filter = J(R"({"a": {"$ne": 1}})");
  bad({{"a", 1}}, "$ne", p);
  p.partial_filter = J(R"({"$or": [{"a": 1}]})");
  bad({{"a", 1}}, "$or", p);
  p.partial_filter = J(R"({"a": {"$exists": false}})");
  bad({{"a", 1}}, "$exists: true", p);
  p.partial_filter = J(R"({"a": [1, 2]})");
  bad({{"a", 1}}, "array", p);
  CHECK(db->CreateIndex("c", std::vector<IndexKey>{{"_id", 1}}).IsAlreadyExists());
  auto list = db->ListIndexes("c");
  REQUIRE(list.ok());
  CHECK(list.value().empty());
  // One ascending key is the single-field index.
  REQUIRE(db->CreateIndex("c", std::vector<IndexKey>{{"a", 1}}).ok());
  CHECK(db->CreateIndex("c", "a").IsAlreadyExists());
  CHECK(IndexName({{"a", 1}, {"b.c", -1}}) == "a_1_b.c_-1");
}

TEST_CASE("compound index: parallel arrays are refused on insert, update and build",
          "[engine][compound]") {
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", std::vector<IndexKey>{{"a", 1}, {"b", 1}}).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "a": [1, 2], "b": 3})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 2, "a": 1, "b": [3, 4]})")).ok());
  Status s = db->Insert("c", J(R"({"_id": 3, "a": [1], "b": [2]})"));
  CHECK(s.IsInvalidArgument());
  CHECK(s.ToString().find("cannot index parallel arrays [a] [b]") != std::string::npos);
  CHECK(db->Get("c", Value::Int32(3)).status().IsNotFound());
  auto u = db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$set": {"b": [5]}})"));
  CHECK(u.status().IsInvalidArgument());
  CHECK(db->Get("c", Value::Int32(1)).value().Get("b").value().ToJson() == "3");
  // Two fields under one array are not parallel: {"x.p": 1, "x.q": 1}.
  REQUIRE(db->CreateIndex("d", std::vector<IndexKey>{{"x.p", 1}, {"x.q", -1}}).ok());
  REQUIRE(db->Insert("d", J(R"({"_id": 1, "x": [{"p": 1, "q": 2}, {"p": 3, "q": 4}]})")).ok());
  CHECK(Find(db.get(), "d", R"({"x.p": 3, "x.q": 4})").size() == 1);
  CHECK(Find(db.get(), "d", R"({"x.p": 1, "x.q": {"$gt": 3}})").size() == 1);
  // A build over documents with parallel arrays fails and leaves nothing.
  REQUIRE(db->Insert("e", J(R"({"_id": 1, "a": [1], "b": [2]})")).ok());
  s = db->CreateIndex("e", std::vector<IndexKey>{{"a", 1}, {"b", 1}});
  CHECK(s.IsInvalidArgument());
  CHECK(s.ToString().find("parallel arrays") != std::string::npos);
  auto list = db->ListIndexes("e");
  REQUIRE(list.ok());
  CHECK(list.value().empty());
}

TEST_CASE("compound index: unique over all the fields, missing as null", "[engine][compound]") {
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", std::vector<IndexKey>{{"a", 1}, {"b", -1}}, Unique()).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "a": 1, "b": 1})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 2, "a": 1, "b": 2})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 3, "a": 2, "b": 1})")).ok());
  Status s = db->Insert("c", J(R"({"_id": 4, "a": 1.0, "b": 2})"));
  CHECK(s.IsAlreadyExists());
  CHECK(s.ToString().find("a_1_b_-1") != std::string::npos);
  CHECK(s.ToString().find(R"({"a": 1.0, "b": 2})") != std::string::npos);
  REQUIRE(db->Insert("c", J(R"({"_id": 5})")).ok());
  CHECK(db->Insert("c", J(R"({"_id": 6, "a": null})")).IsAlreadyExists());
  CHECK(db->UpdateOne("c", J(R"({"_id": 3})"), J(R"({"$set": {"a": 1, "b": 2}})"))
            .status()
            .IsAlreadyExists());
  REQUIRE(db->UpdateOne("c", J(R"({"_id": 3})"), J(R"({"$set": {"b": 3}})")).ok());
  // A unique point lookup on every field: one key.
  ExplainInfo e = Explain(db.get(), "c", R"({"a": 1, "b": 2})");
  CHECK(e.index == "a_1_b_-1");
  CHECK(e.keys_examined == 1);
  CHECK(e.returned == 1);
  // A build over duplicates fails, naming them, and leaves nothing.
  REQUIRE(db->Insert("d", J(R"({"_id": 1, "a": 1, "b": "x"})")).ok());
  REQUIRE(db->Insert("d", J(R"({"_id": 2, "a": 1, "b": "x"})")).ok());
  s = db->CreateIndex("d", std::vector<IndexKey>{{"a", 1}, {"b", 1}}, Unique());
  CHECK(s.IsAlreadyExists());
  CHECK(s.ToString().find(R"("b": "x")") != std::string::npos);
  CHECK(db->ListIndexes("d").value().empty());
}

TEST_CASE("sparse and partial indexes: uniqueness among indexed documents only",
          "[engine][compound]") {
  TestDB db(Fast());
  IndexOptions o = Unique();
  o.sparse = true;
  REQUIRE(db->CreateIndex("c", "email", o).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 1})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 2})")).ok());  // both missing: not indexed
  REQUIRE(db->Insert("c", J(R"({"_id": 3, "email": null})")).ok());
  CHECK(db->Insert("c", J(R"({"_id": 4, "email": null})")).IsAlreadyExists());
  REQUIRE(db->Insert("c", J(R"({"_id": 5, "email": "a"})")).ok());
  CHECK(db->Insert("c", J(R"({"_id": 6, "email": "a"})")).IsAlreadyExists());
  CHECK(db->ListIndexes("c").value()[0].entries == 2);
  // {email: null} could match documents without it: not from the index.
  ExplainInfo e = Explain(db.get(), "c", R"({"email": null})");
  CHECK(e.plan == "COLLSCAN");
  CHECK(e.returned == 3);
  CHECK(Explain(db.get(), "c", R"({"email": {"$exists": false}})").plan == "COLLSCAN");
  CHECK(Explain(db.get(), "c", R"({"email": "a"})").index == "email");
  FindOptions sort;
  sort.sort = {{"email", 1}};
  CHECK(Explain(db.get(), "c", "{}", sort).plan == "COLLSCAN");
  CHECK(Find(db.get(), "c", "{}", sort).size() == 4);

  IndexOptions p = Unique();
  p.partial_filter = J(R"({"active": true, "n": {"$gt": 5}})");
  REQUIRE(db->CreateIndex("d", std::vector<IndexKey>{{"user", 1}}, p).ok());
  REQUIRE(db->Insert("d", J(R"({"_id": 1, "user": "u", "active": false, "n": 9})")).ok());
  REQUIRE(db->Insert("d", J(R"({"_id": 2, "user": "u", "active": true, "n": 9})")).ok());
  CHECK(db->Insert("d", J(R"({"_id": 3, "user": "u", "active": true, "n": 6})")).IsAlreadyExists());
  REQUIRE(db->Insert("d", J(R"({"_id": 4, "user": "u", "active": true, "n": 5})")).ok());
  // An update moves a document into the index: the unique check applies.
  CHECK(db->UpdateOne("d", J(R"({"_id": 4})"), J(R"({"$inc": {"n": 1}})"))
            .status()
            .IsAlreadyExists());
  REQUIRE(db->UpdateOne("d", J(R"({"_id": 2})"), J(R"({"$set": {"active": false}})")).ok());
  REQUIRE(db->UpdateOne("d", J(R"({"_id": 4})"), J(R"({"$inc": {"n": 1}})")).ok());
  CHECK(db->ListIndexes("d").value()[0].entries == 1);
  CHECK(db->ListIndexes("d").value()[0].partial_filter.find("active") != std::string::npos);
  // Used only when the query implies the partial filter.
  CHECK(Explain(db.get(), "d", R"({"user": "u"})").plan == "COLLSCAN");
  CHECK(Explain(db.get(), "d", R"({"user": "u", "active": true})").plan == "COLLSCAN");
  e = Explain(db.get(), "d", R"({"user": "u", "active": true, "n": {"$gte": 6}})");
  CHECK(e.plan == "IXSCAN");
  CHECK(e.returned == 1);
  e = Explain(db.get(), "d", R"({"$and": [{"user": "u"}, {"active": true}, {"n": 6.5}]})");
  CHECK(e.plan == "IXSCAN");
  CHECK(Explain(db.get(), "d", R"({"user": "u", "active": true, "n": {"$gte": 5}})").plan ==
        "COLLSCAN");
  CHECK(Explain(db.get(), "d", R"({"user": "u", "active": true, "n": {"$gt": "a"}})").plan ==
        "COLLSCAN");
  CHECK(Find(db.get(), "d", R"({"user": "u"})").size() == 3);
}

TEST_CASE("compound, sparse and partial indexes agree with a scan and a model (randomized)",
          "[engine][compound]") {
  const uint64_t seed = mmdoc::test::Seed("compound index");
  std::mt19937_64 rng(seed);
  TestDB db(Fast());
  const std::vector<std::string> scalars = {"0",      "1",    "1.0",    "2",
                                            "3",      "-1.5", R"("x")", R"("xy")",
                                            R"("y")", "null", "true",   R"({"$numberLong": "2"})"};
  const std::vector<std::string> arrays = {"[]", "[1, 2]", "[3]", R"(["x", 0])", "[null]"};
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  // a, b: any value, arrays included; c: a number or missing; s: mostly
  // missing (sparse); u: unique; d, e: never arrays (their index gives
  // sorts).
  auto random_field = [&](const std::string& name) -> std::string {
    if (name == "d") {
      const int r = static_cast<int>(rng() % 6);
      return r == 0 ? "" : r == 1 ? "null" : std::to_string(r - 2);
    }
    if (name == "e") return rng() % 8 == 0 ? "" : pick(scalars);
    if (name == "c") {
      const int r = static_cast<int>(rng() % 5);
      return r == 0 ? "" : std::to_string(r - 1);
    }
    if (name == "s") return rng() % 3 == 0 ? pick(scalars) : "";
    const int r = static_cast<int>(rng() % 10);
    if (r == 0) return "";
    if (r <= 2) return pick(arrays);
    return pick(scalars);
  };
  for (const char* coll : {"ix", "plain"}) REQUIRE(db->CreateCollection(coll).ok());
  REQUIRE(db->CreateIndex("ix", std::vector<IndexKey>{{"a", 1}, {"b", -1}}).ok());
  IndexOptions sparse;
  sparse.sparse = true;
  REQUIRE(db->CreateIndex("ix", std::vector<IndexKey>{{"c", 1}, {"a", 1}}, sparse).ok());
  REQUIRE(db->CreateIndex("ix", std::vector<IndexKey>{{"s", -1}}, sparse).ok());
  IndexOptions partial;
  partial.partial_filter = J(R"({"c": {"$gte": 1}})");
  REQUIRE(db->CreateIndex("ix", std::vector<IndexKey>{{"b", 1}}, partial).ok());
  REQUIRE(db->CreateIndex("ix", std::vector<IndexKey>{{"u", 1}, {"a", -1}}, Unique()).ok());
  REQUIRE(db->CreateIndex("ix", std::vector<IndexKey>{{"d", 1}, {"e", -1}}).ok());

  std::map<int, Document> model;
  int parallel = 0;
  auto make = [&](int id) {
    std::string d = "{\"_id\": " + std::to_string(id) + ", \"u\": " + std::to_string(id);
    for (const char* f : {"a", "b", "c", "s", "d", "e"}) {
      const std::string v = random_field(f);
      if (!v.empty()) d += std::string(", \"") + f + "\": " + v;
    }
    return J(d + "}");
  };
  auto write = [&](int id, const Document& doc) {
    const bool exists = model.count(id) != 0;
    Status s = exists ? db->Replace("ix", Value::Int32(id), doc) : db->Insert("ix", doc);
    if (s.IsInvalidArgument()) {
      INFO(doc.ToJson() << ": " << s.ToString());
      CHECK(s.ToString().find("cannot index parallel arrays") != std::string::npos);
      parallel++;
      return;
    }
    REQUIRE(s.ok());
    s = exists ? db->Replace("plain", Value::Int32(id), doc) : db->Insert("plain", doc);
    REQUIRE(s.ok());
    model[id] = doc;
  };
  const int n = static_cast<int>(300 * mmdoc::test::Scale());
  for (int i = 0; i < n; i++) write(i, make(i));

  const std::vector<std::string> templates = {
      R"({"a": V})",
      R"({"a": V, "b": V})",
      R"({"a": V, "b": {"$gt": V}})",
      R"({"a": V, "b": {"$lte": V}})",
      R"({"a": {"$in": [V, V]}, "b": {"$gte": V}})",
      R"({"a": V, "b": {"$in": [V, V]}})",
      R"({"a": {"$gt": V}})",
      R"({"a": {"$gte": V, "$lt": V}})",
      R"({"a": {"$regex": "^x"}, "b": V})",
      R"({"a": {"$ne": V}})",
      R"({"c": C, "a": V})",
      R"({"c": C, "a": {"$lt": V}})",
      R"({"c": C})",
      R"({"c": null})",
      R"({"c": {"$exists": false}})",
      R"({"c": {"$in": [null, C]}})",
      R"({"c": {"$exists": true}, "a": V})",
      R"({"b": V, "c": {"$gte": 1}})",
      R"({"b": {"$gt": V}, "c": {"$gte": 2}})",
      R"({"b": V, "c": {"$gt": 0}})",
      R"({"b": V, "c": C})",
      R"({"b": V})",
      R"({"s": V})",
      R"({"s": null})",
      R"({"s": {"$exists": false}})",
      R"({"s": {"$lt": V}})",
      R"({"s": {"$ne": V}})",
      R"({"u": U, "a": V})",
      R"({"u": {"$lt": U}, "a": V})",
      R"({"$or": [{"a": V}, {"b": V}]})",
      R"({"a": {"$elemMatch": {"$gt": V}}})",
      R"({"a": V, "b": {"$exists": false}})",
      R"({"d": D})",
      R"({"d": D, "e": V})",
      R"({"d": D, "e": {"$gte": V}})",
      R"({"d": {"$in": [D, D]}, "e": {"$lt": V}})",
      R"({"d": {"$gt": D}})",
      R"({"d": null, "e": {"$ne": V}})",
      R"({"e": V})",
      "{}",
  };
  const std::vector<std::vector<SortSpec>> sorts = {
      {},
      {{"a", 1}, {"b", -1}},
      {{"a", -1}, {"b", 1}},
      {{"b", -1}},
      {{"b", 1}},
      {{"a", 1}},
      {{"c", 1}, {"a", 1}},
      {{"c", -1}, {"a", -1}},
      {{"a", 1}, {"c", 1}},
      {{"s", -1}},
      {{"s", 1}},
      {{"u", 1}},
      {{"d", 1}, {"e", -1}},
      {{"d", -1}, {"e", 1}},
      {{"d", 1}},
      {{"e", -1}},
      {{"e", 1}},
      {{"d", 1}, {"e", 1}},
  };
  auto fill = [&](std::string t) {
    for (size_t at; (at = t.find('V')) != std::string::npos;) t.replace(at, 1, pick(scalars));
    for (size_t at; (at = t.find('C')) != std::string::npos;)
      t.replace(at, 1, std::to_string(rng() % 4));
    for (size_t at; (at = t.find('D')) != std::string::npos;)
      t.replace(at, 1, rng() % 5 == 0 ? "null" : std::to_string(rng() % 4));
    for (size_t at; (at = t.find('U')) != std::string::npos;)
      t.replace(at, 1, std::to_string(rng() % n));
    return t;
  };
  int indexed = 0, in_order = 0;
  const int rounds = static_cast<int>(400 * mmdoc::test::Scale());
  for (int round = 0; round < rounds; round++) {
    // Some writes between queries: replacements, updates, deletes.
    for (int w = 0; w < 3; w++) {
      const int id = static_cast<int>(rng() % (n + 20));
      const int what = static_cast<int>(rng() % 4);
      if (what == 0 && model.count(id)) {
        REQUIRE(db->Delete("ix", Value::Int32(id)).ok());
        REQUIRE(db->Delete("plain", Value::Int32(id)).ok());
        model.erase(id);
      } else if (what == 1 && model.count(id)) {
        static const char* const kFields[] = {"a", "b", "c", "s", "d", "e"};
        const char* f = kFields[rng() % 6];
        std::string v = random_field(f);
        const std::string upd = v.empty() ? std::string("{\"$unset\": {\"") + f + "\": 1}}"
                                          : std::string("{\"$set\": {\"") + f + "\": " + v + "}}";
        const std::string filter = "{\"_id\": " + std::to_string(id) + "}";
        auto r = db->UpdateOne("ix", J(filter), J(upd));
        if (!r.ok()) {
          INFO(upd << ": " << r.status().ToString());
          CHECK(r.status().ToString().find("parallel arrays") != std::string::npos);
          parallel++;
        } else {
          REQUIRE(db->UpdateOne("plain", J(filter), J(upd)).ok());
          model[id] = db->Get("plain", Value::Int32(id)).value();
        }
      } else {
        write(id, make(id));
      }
    }
    const std::string filter = fill(templates[rng() % templates.size()]);
    FindOptions o;
    o.sort = sorts[rng() % sorts.size()];
    if (rng() % 2) o.limit = static_cast<int64_t>(1 + rng() % 10);
    INFO("seed " << seed << " round " << round << " filter " << filter << " sort "
                 << (o.sort.empty() ? "" : o.sort[0].field) << " limit " << o.limit);
    auto f = engine::Filter::Parse(J(filter));
    REQUIRE(f.ok());
    std::vector<Document> expected;
    for (const auto& [id, d] : model)
      if (f.value().Matches(d.data(), d.size())) expected.push_back(d);
    const std::vector<Document> got = Find(db.get(), "ix", filter, o);
    const std::vector<Document> scan = Find(db.get(), "plain", filter, o);
    ExplainInfo e = Explain(db.get(), "ix", filter, o);
    INFO("plan " << e.ToJson());
    if (e.plan == "IXSCAN") indexed++;
    if (!o.sort.empty() && !e.sorted_in_memory) in_order++;
    CHECK(e.returned == got.size());
    if (o.sort.empty() && o.limit == 0) {
      CHECK(Ids(got) == Ids(expected));
      CHECK(Ids(scan) == Ids(expected));
      continue;
    }
    if (o.sort.empty()) {
      CHECK(got.size() == std::min<size_t>(expected.size(), o.limit));
      std::set<std::string> all = Ids(expected);
      for (const std::string& id : Ids(got)) CHECK(all.count(id) == 1);
      continue;
    }
    // Sorted: the same sequence of sort keys; without a limit the same
    // documents (ties come in no defined order).
    REQUIRE(got.size() == scan.size());
    for (size_t i = 0; i < got.size(); i++)
      CHECK(SortBytes(got[i], o.sort) == SortBytes(scan[i], o.sort));
    if (o.limit == 0) CHECK(Ids(got) == Ids(expected));
  }
  INFO("seed " << seed);
  // The run exercised what it is for.
  CHECK(indexed > rounds / 5);
  CHECK(in_order > rounds / 20);
  CHECK(parallel > 0);
  db.CheckNow();
  db.Reopen();
  for (const std::string& filter :
       {std::string(R"({"a": 1, "b": {"$gte": 0}})"), std::string(R"({"c": 2, "a": "x"})")}) {
    CHECK(Ids(Find(db.get(), "ix", filter)) == Ids(Find(db.get(), "plain", filter)));
  }
  REQUIRE(db->Compact().ok());
  auto list = db->ListIndexes("ix");
  REQUIRE(list.ok());
  REQUIRE(list.value().size() == 6);
  CHECK(list.value()[1].sparse);
  CHECK_FALSE(list.value()[3].partial_filter.empty());
  CHECK(Ids(Find(db.get(), "ix", R"({"a": 1, "b": {"$gte": 0}})")) ==
        Ids(Find(db.get(), "plain", R"({"a": 1, "b": {"$gte": 0}})")));
}

TEST_CASE("compound index: created in the log survives a crash (replay)", "[engine][compound]") {
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "a": 1, "b": 2, "s": 1})")).ok());
  IndexOptions o = Unique();
  o.sparse = true;
  o.partial_filter = J(R"({"a": {"$gt": 0}})");
  REQUIRE(db->CreateIndex("c", std::vector<IndexKey>{{"a", -1}, {"b", 1}}, o).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 2, "a": 2, "b": 2})")).ok());
  // Reopen replays the log when not closed cleanly; a clean close writes
  // the catalog. Both must keep the spec.
  db.Reopen();
  auto list = db->ListIndexes("c");
  REQUIRE(list.ok());
  REQUIRE(list.value().size() == 1);
  const IndexInfo& i = list.value()[0];
  CHECK(i.field == "a_-1_b_1");
  CHECK(i.unique);
  CHECK(i.sparse);
  CHECK(i.partial_filter.find("$gt") != std::string::npos);
  CHECK(i.entries == 2);
  CHECK(db->Insert("c", J(R"({"_id": 3, "a": 2, "b": 2})")).IsAlreadyExists());
}

TEST_CASE("a database written before compound indexes opens and its indexes work",
          "[engine][compound]") {
  // tests/engine/fixtures/v3_single_field_indexes.mmdb: written by mmdoc
  // at c1b791e (format 3, before index specs), closed cleanly: collection
  // "people" with 3 documents, a unique index on email, indexes on tags
  // and age; truncated to its 10 pages.
  test::TempDir dir;
  const std::string path = dir.File("old.mmdb");
  {
    std::ifstream in(
        std::string(MMDOC_SOURCE_DIR) + "/tests/engine/fixtures/v3_single_field_indexes.mmdb",
        std::ios::binary);
    REQUIRE(in.good());
    std::ofstream out(path, std::ios::binary);
    out << in.rdbuf();
  }
  auto opened = DB::Open(path);
  REQUIRE(opened.ok());
  std::unique_ptr<DB> db = std::move(opened).value();
  test::RequireCheckPasses(db.get());
  auto list = db->ListIndexes("people");
  REQUIRE(list.ok());
  REQUIRE(list.value().size() == 3);
  CHECK(list.value()[0].field == "email");
  CHECK(list.value()[0].unique);
  REQUIRE(list.value()[0].keys.size() == 1);
  CHECK(list.value()[0].keys[0].field == "email");
  CHECK(Explain(db.get(), "people", R"({"tags": "x"})").index == "tags");
  CHECK(Find(db.get(), "people", R"({"age": {"$gt": 20}})").size() == 1);
  CHECK(db->Insert("people", J(R"({"_id": 4, "email": "a@x"})")).IsAlreadyExists());
  // Written back with a compound index beside the old ones.
  REQUIRE(db->CreateIndex("people", std::vector<IndexKey>{{"age", -1}, {"email", 1}}).ok());
  REQUIRE(db->Insert("people", J(R"({"_id": 5, "email": "e@x", "age": 50})")).ok());
  db.reset();
  opened = DB::Open(path);
  REQUIRE(opened.ok());
  db = std::move(opened).value();
  test::RequireCheckPasses(db.get());
  CHECK(Explain(db.get(), "people", R"({"age": 50, "email": {"$gt": "a"}})").index ==
        "age_-1_email_1");
  CHECK(db->ListIndexes("people").value().size() == 4);
}

TEST_CASE("exact index bounds skip the re-check and agree with a scan and a model (randomized)",
          "[engine][compound]") {
  const uint64_t seed = mmdoc::test::Seed("exact bounds");
  std::mt19937_64 rng(seed);
  TestDB db(Fast());
  // Numbers of every type with equal and nearly equal values (2^53 and
  // 2^53 + 1 are one double apart from nothing), NaN and the infinities,
  // strings, null, a decimal128 and a bool; arrays only in the second half.
  const std::vector<std::string> scalars = {
      "0",
      "1",
      "1.0",
      R"({"$numberLong": "1"})",
      "2",
      "2.5",
      "-1",
      "-0.0",
      R"({"$numberDouble": "NaN"})",
      R"({"$numberDouble": "Infinity"})",
      R"({"$numberDouble": "-Infinity"})",
      R"({"$numberLong": "9007199254740993"})",
      "9007199254740992.0",
      R"({"$numberLong": "9007199254740992"})",
      R"({"$numberDecimal": "2"})",
      R"("")",
      R"("x")",
      R"("xy")",
      R"("y")",
      "null",
      "true",
  };
  const std::vector<std::string> arrays = {"[]", "[1, 2]", "[3]", R"(["x", 0])", "[[1]]", "[null]"};
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  bool with_arrays = false;
  // g, h: a group (a few scalars); n, s: anything; h mostly missing.
  auto random_field = [&](const std::string& name) -> std::string {
    const int r = static_cast<int>(rng() % 12);
    if (r == 0) return "";
    if (name == "h" && r < 8) return "";
    if (with_arrays && r == 1) return pick(arrays);
    if (name == "g" || name == "h") return pick({"0", "1", "1.0", R"("a")", "null"});
    return pick(scalars);
  };
  for (const char* coll : {"ix", "plain"}) REQUIRE(db->CreateCollection(coll).ok());
  REQUIRE(db->CreateIndex("ix", std::vector<IndexKey>{{"g", 1}, {"n", 1}}).ok());
  REQUIRE(db->CreateIndex("ix", "s").ok());
  IndexOptions sparse;
  sparse.sparse = true;
  REQUIRE(db->CreateIndex("ix", std::vector<IndexKey>{{"h", 1}, {"n", 1}}, sparse).ok());

  std::map<int, Document> model;
  auto make = [&](int id) {
    std::string d = "{\"_id\": " + std::to_string(id);
    for (const char* f : {"g", "n", "s", "h", "x"}) {
      const std::string v = random_field(f);
      if (!v.empty()) d += std::string(", \"") + f + "\": " + v;
    }
    return J(d + "}");
  };
  auto write = [&](int id, const Document& doc) {
    const bool exists = model.count(id) != 0;
    Status s = exists ? db->Replace("ix", Value::Int32(id), doc) : db->Insert("ix", doc);
    INFO(doc.ToJson() << ": " << s.ToString());
    if (s.IsInvalidArgument() && s.ToString().find("parallel arrays") != std::string::npos) return;
    REQUIRE(s.ok());
    s = exists ? db->Replace("plain", Value::Int32(id), doc) : db->Insert("plain", doc);
    REQUIRE(s.ok());
    model[id] = doc;
  };
  const int n = static_cast<int>(300 * mmdoc::test::Scale());
  for (int i = 0; i < n; i++) write(i, make(i));

  const std::vector<std::string> templates = {
      R"({"g": G, "n": {"$gte": V, "$lt": V}})",
      R"({"g": G, "n": {"$gt": V}})",
      R"({"g": G, "n": {"$lt": V}})",
      R"({"g": G, "n": {"$lte": V}})",
      R"({"g": G, "n": V})",
      R"({"g": G, "n": {"$in": [V, V]}})",
      R"({"g": {"$in": [G, G]}, "n": {"$gte": V}})",
      R"({"g": G})",
      R"({"g": G, "n": {"$gte": V}, "x": V})",
      R"({"g": G, "n": {"$gt": V, "$lte": V}, "s": {"$gte": V}})",
      R"({"$and": [{"g": G}, {"n": {"$gte": V}}, {"n": {"$lt": V}}]})",
      R"({"g": G, "n": {"$regex": "^x"}})",
      R"({"g": G, "n": {"$ne": V}})",
      R"({"g": G, "n": {"$exists": false}})",
      R"({"g": G, "n": {"$not": {"$lt": V}}})",
      R"({"s": V})",
      R"({"s": {"$gt": V}})",
      R"({"s": {"$lte": V}})",
      R"({"s": {"$gte": V, "$lt": V}})",
      R"({"s": {"$in": [V, V, V]}})",
      R"({"h": G, "n": {"$gte": V}})",
      R"({"h": G, "n": {"$lt": V, "$gt": V}})",
      R"({"n": {"$gte": V}})",
  };
  auto fill = [&](std::string t) {
    for (size_t at; (at = t.find('V')) != std::string::npos;) t.replace(at, 1, pick(scalars));
    for (size_t at; (at = t.find('G')) != std::string::npos;)
      t.replace(at, 1, pick({"0", "1", "1.0", R"({"$numberLong": "1"})", R"("a")", "null"}));
    return t;
  };
  int exact = 0, exact_after_arrays = 0;
  const int rounds = static_cast<int>(600 * mmdoc::test::Scale());
  for (int round = 0; round < rounds; round++) {
    // Arrays from the second half on: the indexes turn multikey mid-run.
    with_arrays = round >= rounds / 2;
    for (int w = 0; w < 3; w++) {
      const int id = static_cast<int>(rng() % (n + 20));
      if (rng() % 4 == 0 && model.count(id)) {
        REQUIRE(db->Delete("ix", Value::Int32(id)).ok());
        REQUIRE(db->Delete("plain", Value::Int32(id)).ok());
        model.erase(id);
      } else {
        write(id, make(id));
      }
    }
    const std::string filter = fill(templates[rng() % templates.size()]);
    FindOptions o;
    if (rng() % 2) {
      o.sort = {{"n", 1}};
      o.limit = static_cast<int64_t>(1 + rng() % 10);
    }
    INFO("seed " << seed << " round " << round << " filter " << filter << " limit " << o.limit);
    auto f = engine::Filter::Parse(J(filter));
    REQUIRE(f.ok());
    std::vector<Document> expected;
    for (const auto& [id, d] : model)
      if (f.value().Matches(d.data(), d.size())) expected.push_back(d);
    const std::vector<Document> got = Find(db.get(), "ix", filter, o);
    const std::vector<Document> scan = Find(db.get(), "plain", filter, o);
    ExplainInfo e = Explain(db.get(), "ix", filter, o);
    INFO("plan " << e.ToJson());
    CHECK(e.returned == got.size());
    if (e.exact_bounds) {
      // Every document fetched was a match: returned, or (sorted in
      // memory) one of the matches the limit drops.
      CHECK(e.plan == "IXSCAN");
      if (!e.sorted_in_memory) CHECK(e.docs_examined == e.returned);
      if (o.limit == 0) CHECK(e.docs_examined == expected.size());
      exact++;
      if (with_arrays) exact_after_arrays++;
    }
    if (o.limit == 0) {
      CHECK(Ids(got) == Ids(expected));
      CHECK(Ids(scan) == Ids(expected));
      continue;
    }
    REQUIRE(got.size() == std::min<size_t>(expected.size(), o.limit));
    REQUIRE(got.size() == scan.size());
    for (size_t i = 0; i < got.size(); i++)
      CHECK(SortBytes(got[i], o.sort) == SortBytes(scan[i], o.sort));
    std::set<std::string> all = Ids(expected);
    for (const std::string& id : Ids(got)) CHECK(all.count(id) == 1);
  }
  INFO("seed " << seed << " exact " << exact << " after arrays " << exact_after_arrays);
  CHECK(exact > rounds / 10);

  // The bench's query takes the fast path while the index is not
  // multikey, and not once it is.
  REQUIRE(db->CreateCollection("q").ok());
  REQUIRE(db->CreateIndex("q", std::vector<IndexKey>{{"g", 1}, {"n", 1}}).ok());
  for (int i = 0; i < 100; i++) {
    REQUIRE(db->Insert("q", J("{\"_id\": " + std::to_string(i) + ", \"g\": " +
                              std::to_string(i % 4) + ", \"n\": " + std::to_string(i) + "}"))
                .ok());
  }
  FindOptions o;
  o.sort = {{"n", 1}};
  o.limit = 10;
  const std::string query = R"({"g": 1, "n": {"$gte": 20, "$lt": 60}})";
  ExplainInfo e = Explain(db.get(), "q", query, o);
  CHECK(e.exact_bounds);
  CHECK_FALSE(e.sorted_in_memory);
  CHECK(e.docs_examined == 10);
  CHECK(e.returned == 10);
  CHECK(e.ToJson().find("\"exactBounds\": true") != std::string::npos);
  // Bounds of two types intersect to nothing, as the filter matches
  // nothing (a number is never below a string for $lt).
  CHECK(Find(db.get(), "q", R"({"g": 1, "n": {"$gte": 20, "$lt": "z"}})").empty());
  // Anything the bounds do not express keeps the check.
  CHECK_FALSE(Explain(db.get(), "q", R"({"g": 1, "n": {"$gte": 20}, "x": 1})").exact_bounds);
  CHECK_FALSE(Explain(db.get(), "q", R"({"g": 1, "n": {"$lt": 20}})").exact_bounds);
  CHECK_FALSE(Explain(db.get(), "q", R"({"g": null, "n": {"$gte": 20}})").exact_bounds);
  CHECK_FALSE(Explain(db.get(), "q", R"({"g": 1, "n": {"$regex": "^x"}})").exact_bounds);
  REQUIRE(db->Insert("q", J(R"({"_id": 100, "g": 1, "n": [30, 70]})")).ok());
  e = Explain(db.get(), "q", query, o);
  CHECK_FALSE(e.exact_bounds);
  CHECK(Find(db.get(), "q", query, o).size() == 10);
}
