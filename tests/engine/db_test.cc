// Engine behaviour through the public API: documents, collections,
// indexes, queries, transactions. Every TestDB is checked with DB::Check
// when the test ends.
#include "mmdoc/db.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/query.h"
#include "tests/support/test_db.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;
using mmdoc::test::V;

namespace {

std::vector<std::string> Ids(const std::vector<Document>& docs) {
  std::vector<std::string> out;
  for (const Document& d : docs) out.push_back(d.Get("_id").value().ToJson());
  return out;
}

std::multiset<std::string> IdSet(const std::vector<Document>& docs) {
  auto v = Ids(docs);
  return std::multiset<std::string>(v.begin(), v.end());
}

Options Fast() {
  Options o;
  o.durability = Durability::kNone;
  return o;
}

}  // namespace

TEST_CASE("insert, get, replace, delete by _id", "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": "a", "x": 1})")).ok());
  auto got = db->Get("c", V(R"("a")"));
  REQUIRE(got.ok());
  CHECK(got.value().ToJson() == R"({ "_id" : "a", "x" : 1 })");

  REQUIRE(db->Replace("c", V(R"("a")"), J(R"({"y": 2})")).ok());
  got = db->Get("c", V(R"("a")"));
  REQUIRE(got.ok());
  CHECK(got.value().Get("y").value().ToJson() == "2");
  CHECK(got.value().Get("x").status().IsNotFound());

  CHECK(db->Replace("c", V(R"("zz")"), J("{}")).IsNotFound());
  CHECK(db->Replace("c", V(R"("a")"), J(R"({"_id": "b"})")).IsInvalidArgument());
  REQUIRE(db->Delete("c", V(R"("a")")).ok());
  CHECK(db->Get("c", V(R"("a")")).status().IsNotFound());
  CHECK(db->Delete("c", V(R"("a")")).IsNotFound());
  CHECK(db->Get("missing_collection", V("1")).status().IsNotFound());
}

TEST_CASE("Update by _id: operators or a replacement, NotFound, errors change nothing",
          "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": "a", "k": 1, "n": 1})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": "b", "k": 2, "n": 2})")).ok());
  auto doc = [&](const char* id) { return db->Get("c", V(id)).value().ToJson(); };

  REQUIRE(db->Update("c", V(R"("a")"), J(R"({"$set": {"k": 10}, "$inc": {"n": 5}})")).ok());
  CHECK(doc(R"("a")") == R"({ "_id" : "a", "k" : 10, "n" : 6 })");
  CHECK(db->GetBy("c", "k", V("10")).ok());
  CHECK(db->GetBy("c", "k", V("1")).status().IsNotFound());
  // A replacement keeps _id.
  REQUIRE(db->Update("c", V(R"("b")"), J(R"({"k": 20})")).ok());
  CHECK(doc(R"("b")") == R"({ "_id" : "b", "k" : 20 })");
  // An update that changes nothing is no error.
  REQUIRE(db->Update("c", V(R"("b")"), J(R"({"$set": {"k": 20}})")).ok());

  CHECK(db->Update("c", V(R"("zz")"), J(R"({"$set": {"k": 3}})")).IsNotFound());
  CHECK(db->Update("missing", V(R"("a")"), J(R"({"$set": {"k": 3}})")).IsNotFound());
  CHECK(db->Count("c").value() == 2);  // no upsert
  // Errors, each leaving both documents as they were.
  const std::string a = doc(R"("a")"), b = doc(R"("b")");
  Status dup = db->Update("c", V(R"("a")"), J(R"({"$set": {"k": 20}})"));
  CHECK(dup.IsAlreadyExists());
  CHECK(db->Update("c", V(R"("a")"), J(R"({"$set": {"_id": "x"}})")).IsInvalidArgument());
  CHECK(db->Update("c", V(R"("a")"), J(R"({"$inc": {"k": "x"}})")).IsInvalidArgument());
  CHECK(db->Update("c", V(R"("a")"), J(R"({"$bogus": {"k": 1}})")).IsInvalidArgument());
  Status positional = db->Update("c", V(R"("a")"), J(R"({"$set": {"arr.$": 1}})"));
  CHECK(positional.IsInvalidArgument());
  CHECK(positional.ToString().find("positional") != std::string::npos);
  CHECK(doc(R"("a")") == a);
  CHECK(doc(R"("b")") == b);

  // In a transaction: updates of one shape in a row, seen by the
  // transaction and, once committed, by everyone.
  auto t = db->Begin();
  REQUIRE(t.ok());
  for (int i = 0; i < 50; i++) {
    const std::string n = std::to_string(i);
    REQUIRE(t.value()
                ->Update("c", V(i % 2 ? R"("a")" : R"("b")"),
                         J(R"({"$set": {"n": )" + n + R"(, "s": "v)" + n + R"("}})"))
                .ok());
    CHECK(t.value()
              ->Get("c", V(i % 2 ? R"("a")" : R"("b")"))
              .value()
              .ToJson()
              .find(R"("s" : "v)" + n + R"(")") != std::string::npos);
  }
  REQUIRE(t.value()->Commit().ok());
  CHECK(doc(R"("a")") == R"({ "_id" : "a", "k" : 10, "n" : 49, "s" : "v49" })");
  CHECK(doc(R"("b")") == R"({ "_id" : "b", "k" : 20, "n" : 48, "s" : "v48" })");
}

TEST_CASE("a replacement may repeat _id but not change its type, as $set may not", "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "a": 1})")).ok());
  const std::string before = db->Get("c", V("1")).value().ToJson();
  // Found by an outside test: {_id: 1.0} replaced the document with _id 1
  // (compared as numbers), where $set {_id: 1.0} is refused.
  CHECK(db->Replace("c", V("1"), J(R"({"_id": 1.0, "k": 1})")).IsInvalidArgument());
  CHECK(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"_id": 1.0, "k": 1})"))
            .status()
            .IsInvalidArgument());
  CHECK(db->Update("c", V("1"), J(R"({"_id": 1.0, "k": 1})")).IsInvalidArgument());
  CHECK(db->Update("c", V("1"), J(R"({"$set": {"_id": 1.0}})")).IsInvalidArgument());
  CHECK(db->Get("c", V("1")).value().ToJson() == before);
  // The same _id, repeated, is fine.
  REQUIRE(db->Replace("c", V("1"), J(R"({"_id": 1, "k": 2})")).ok());
  REQUIRE(db->Update("c", V("1"), J(R"({"_id": 1, "k": 3})")).ok());
  CHECK(db->Get("c", V("1")).value().ToJson() == R"({ "_id" : 1, "k" : 3 })");
  // Found by an outside test: a replacement without _id, by an _id of
  // another number type (which finds the same document), gave the document
  // that type's _id. It keeps the stored one.
  REQUIRE(db->Replace("c", Value::Double(1.0), J(R"({"k": 4})")).ok());
  REQUIRE(db->Replace("c", Value::Int64(1), J(R"({"k": 5})")).ok());
  auto kept = db->Get("c", V("1"));
  REQUIRE(kept.ok());
  CHECK(kept.value().ToJson(JsonMode::kCanonical) ==
        R"({ "_id" : { "$numberInt" : "1" }, "k" : { "$numberInt" : "5" } })");
}

TEST_CASE("_id: generated ObjectId, scalar types, duplicates", "[engine]") {
  TestDB db(Fast());
  Value id;
  REQUIRE(db->Insert("c", J(R"({"x": 1})"), &id).ok());
  CHECK(id.type() == BSON_TYPE_OID);
  auto got = db->Get("c", id);
  REQUIRE(got.ok());
  CHECK(got.value().Get("x").value().ToJson() == "1");
  // _id comes first in the stored document, as MongoDB stores it.
  CHECK(got.value().ToJson().rfind("{ \"_id\" : { \"$oid\"", 0) == 0);

  REQUIRE(db->Insert("c", J(R"({"_id": 42})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": {"$oid": "0123456789abcdef01234567"}})")).ok());
  REQUIRE(
      db->Insert(
            "c",
            J(R"({"_id": {"$binary": {"base64": "AAECAwQFBgcICQoLDA0ODw==", "subType": "04"}}})"))
          .ok());
  // 42, 42.0 and NumberLong(42) are the same _id, as in MongoDB.
  Status dup = db->Insert("c", J(R"({"_id": 42.0})"));
  CHECK(dup.IsAlreadyExists());
  CHECK(dup.ToString().find("42") != std::string::npos);
  CHECK(db->Insert("c", J(R"({"_id": {"$numberLong": "42"}})")).IsAlreadyExists());
  CHECK(db->Get("c", V("42.0")).ok());
  CHECK(db->Insert("c", J(R"({"_id": [1, 2]})")).IsInvalidArgument());
  CHECK(db->Count("c").value() == 4);
}

TEST_CASE("collections are created, listed and dropped", "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->CreateCollection("a").ok());
  CHECK(db->CreateCollection("a").IsAlreadyExists());
  CHECK(db->CreateCollection("").IsInvalidArgument());
  REQUIRE(db->Insert("b", J(R"({"_id": 1})")).ok());  // implicit create
  REQUIRE(db->CreateIndex("b", "x").ok());
  auto names = db->ListCollections();
  REQUIRE(names.ok());
  CHECK(names.value() == std::vector<std::string>{"a", "b"});
  REQUIRE(db->DropCollection("b").ok());
  CHECK(db->DropCollection("b").IsNotFound());
  CHECK(db->ListCollections().value() == std::vector<std::string>{"a"});
  CHECK(db->Count("b").value() == 0);
  db.Reopen();
  CHECK(db->ListCollections().value() == std::vector<std::string>{"a"});
}

TEST_CASE("secondary indexes: build, maintain, unique, drop, persist", "[engine]") {
  TestDB db(Fast());
  for (int i = 0; i < 200; i++)
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"k\": " +
                              std::to_string(i * 10) + ", \"g\": " + std::to_string(i % 7) +
                              ", \"sub\": {\"v\": " + std::to_string(i % 3) + "}}"))
                .ok());
  REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
  REQUIRE(db->CreateIndex("c", "g").ok());
  REQUIRE(db->CreateIndex("c", "sub.v").ok());
  CHECK(db->CreateIndex("c", "g").IsAlreadyExists());

  auto idx = db->ListIndexes("c");
  REQUIRE(idx.ok());
  REQUIRE(idx.value().size() == 3);
  CHECK(idx.value()[0].field == "k");
  CHECK(idx.value()[0].unique);
  CHECK(idx.value()[0].entries == 200);

  // Unique violation on insert and on update leaves nothing behind.
  Status s = db->Insert("c", J(R"({"_id": 1000, "k": 50})"));
  CHECK(s.IsAlreadyExists());
  CHECK(s.ToString().find("k") != std::string::npos);
  CHECK(db->Get("c", V("1000")).status().IsNotFound());
  auto u = db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$set": {"k": 20}})"));
  CHECK(u.status().IsAlreadyExists());
  CHECK(db->Get("c", V("1")).value().Get("k").value().ToJson() == "10");
  // Setting a unique field to its own value is not a violation.
  CHECK(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$set": {"k": 10, "z": 1}})")).ok());

  // Index used and right after updates and deletes.
  REQUIRE(db->UpdateOne("c", J(R"({"_id": 5})"), J(R"({"$set": {"g": 100}})")).ok());
  REQUIRE(db->Delete("c", V("6")).ok());
  auto tr = db->BeginRead();
  REQUIRE(tr.ok());
  auto ex = tr.value()->Explain("c", J(R"({"g": 100})"));
  REQUIRE(ex.ok());
  CHECK(ex.value().plan == "IXSCAN");
  CHECK(ex.value().index == "g");
  CHECK(ex.value().returned == 1);
  CHECK(ex.value().docs_examined == 1);
  ex = tr.value()->Explain("c", J(R"({"sub.v": 2, "g": {"$in": [1, 2]}})"));
  REQUIRE(ex.ok());
  CHECK(ex.value().plan == "IXSCAN");
  tr.value()->Abort();
  CHECK(db->Find("c", J(R"({"g": 6})")).value().size() == 27);  // 28 with i%7==6, less _id 6
  CHECK(db->Find("c", J(R"({"k": 60})")).value().empty());

  // Unique build over duplicates fails whole and names the value.
  s = db->CreateIndex("c", "g", IndexOptions{true});
  CHECK(s.IsAlreadyExists());  // an index on g exists
  REQUIRE(db->DropIndex("c", "g").ok());
  s = db->CreateIndex("c", "g", IndexOptions{true});
  CHECK(s.IsAlreadyExists());
  CHECK(s.ToString().find("duplicate") != std::string::npos);
  CHECK(db->ListIndexes("c").value().size() == 2);
  CHECK(db->DropIndex("c", "g").IsNotFound());

  db.Reopen();
  idx = db->ListIndexes("c");
  REQUIRE(idx.value().size() == 2);
  CHECK(db->Find("c", J(R"({"k": {"$gte": 100, "$lt": 130}})")).value().size() == 3);
}

TEST_CASE("a duplicate in a later unique index takes back the insert's earlier entries",
          "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "a").ok());  // not unique, written first
  REQUIRE(db->CreateIndex("c", "u", IndexOptions{true}).ok());
  REQUIRE(db->CreateIndex("c", "v", IndexOptions{true}).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "a": [1, 2], "u": 10, "v": [20, 21]})")).ok());
  auto txn = db->Begin();
  REQUIRE(txn.ok());
  Transaction& t = *txn.value();
  // Fails in "v" after its first key (22) and every key of "a" and "u" went in.
  Status s = t.Insert("c", J(R"({"_id": 2, "a": [3, 4], "u": 11, "v": [22, 21]})"));
  CHECK(s.IsAlreadyExists());
  CHECK(s.ToString().find("'v'") != std::string::npos);
  // Fails in "u": the entries of "a" come back out.
  s = t.Insert("c", J(R"({"_id": 3, "a": 5, "u": 10, "v": 30})"));
  CHECK(s.IsAlreadyExists());
  CHECK(s.ToString().find("'u'") != std::string::npos);
  // The transaction goes on: the failed documents' keys are free.
  REQUIRE(t.Insert("c", J(R"({"_id": 4, "a": 3, "u": 11, "v": 22})")).ok());
  REQUIRE(t.Commit().ok());
  CHECK(db->Get("c", V("2")).status().IsNotFound());
  CHECK(db->Get("c", V("3")).status().IsNotFound());
  auto idx = db->ListIndexes("c");
  REQUIRE(idx.ok());
  REQUIRE(idx.value().size() == 3);
  CHECK(idx.value()[0].entries == 3);  // a: 1, 2 (doc 1) and 3 (doc 4)
  CHECK(idx.value()[1].entries == 2);  // u: 10, 11
  CHECK(idx.value()[2].entries == 3);  // v: 20, 21, 22
  CHECK(Ids(db->Find("c", J(R"({"a": 3})")).value()) == std::vector<std::string>{"4"});
  CHECK(db->Find("c", J(R"({"a": {"$in": [4, 5]}})")).value().empty());
  CHECK(Ids(db->Find("c", J(R"({"v": 22})")).value()) == std::vector<std::string>{"4"});
  CHECK(db->Count("c", J("{}")).value() == 2);
}

TEST_CASE("missing fields are indexed as null", "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "k").ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 1})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 2, "k": null})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 3, "k": 0})")).ok());
  auto r = db->Find("c", J(R"({"k": null})"));
  REQUIRE(r.ok());
  CHECK(IdSet(r.value()) == std::multiset<std::string>{"1", "2"});
  // A unique index allows one document without the field, as MongoDB's does.
  REQUIRE(db->CreateIndex("u", "k", IndexOptions{true}).ok());
  REQUIRE(db->Insert("u", J(R"({"_id": 1})")).ok());
  CHECK(db->Insert("u", J(R"({"_id": 2})")).IsAlreadyExists());
}

TEST_CASE("arrays: element matching and multikey indexes", "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "t": [1, 2, 3]})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 2, "t": [3, 4]})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 3, "t": 5})")).ok());
  auto scan = db->Find("c", J(R"({"t": {"$gte": 3}})"));
  REQUIRE(db->CreateIndex("c", "t").ok());
  auto ix = db->Find("c", J(R"({"t": {"$gte": 3}})"));
  REQUIRE(scan.ok());
  REQUIRE(ix.ok());
  CHECK(IdSet(scan.value()) == std::multiset<std::string>{"1", "2", "3"});
  CHECK(IdSet(ix.value()) == IdSet(scan.value()));  // each document once
  REQUIRE(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$set": {"t": [9]}})")).ok());
  CHECK(IdSet(db->Find("c", J(R"({"t": 1})")).value()).empty());
  CHECK(IdSet(db->Find("c", J(R"({"t": 9})")).value()) == std::multiset<std::string>{"1"});
}

TEST_CASE("queries give the same answers with and without indexes", "[engine]") {
  TestDB db(Fast());
  const char* docs[] = {
      R"({"_id": 1, "a": 1, "b": "x", "n": {"c": 1}})",
      R"({"_id": 2, "a": 2.5, "b": "y", "n": {"c": 2}})",
      R"({"_id": 3, "a": {"$numberLong": "3"}, "b": "z"})",
      R"({"_id": 4, "a": "str", "b": null})",
      R"({"_id": 5, "b": "x", "n": {"c": [1, 5]}})",
      R"({"_id": 6, "a": [2, 7], "b": true})",
      R"({"_id": 7, "a": null, "n": {"c": {"d": 1}}})",
      R"({"_id": 8, "a": -1, "b": {"$oid": "0123456789abcdef01234567"}})",
      R"({"_id": 9, "a": 1.0, "b": "xx"})",
      R"({"_id": "s", "a": true})",
  };
  for (const char* d : docs) {
    REQUIRE(db->Insert("plain", J(d)).ok());
    REQUIRE(db->Insert("indexed", J(d)).ok());
  }
  REQUIRE(db->CreateIndex("indexed", "a").ok());
  REQUIRE(db->CreateIndex("indexed", "b").ok());
  REQUIRE(db->CreateIndex("indexed", "n.c").ok());
  const char* filters[] = {
      "{}",
      R"({"a": 1})",
      R"({"a": {"$gt": 1}})",
      R"({"a": {"$gte": 1, "$lt": 3}})",
      R"({"a": {"$lte": 2.5}})",
      R"({"a": {"$ne": 1}})",
      R"({"a": {"$in": [1, "str", null]}})",
      R"({"a": {"$nin": [1, 2.5]}})",
      R"({"a": {"$exists": true}})",
      R"({"a": {"$exists": false}})",
      R"({"a": null})",
      R"({"a": {"$gt": "a"}})",
      R"({"b": "x"})",
      R"({"b": {"$gte": "x", "$lte": "y"}})",
      R"({"n.c": 1})",
      R"({"n.c": {"$gt": 1}})",
      R"({"n.c": {"d": 1}})",
      R"({"$or": [{"a": 1}, {"b": "z"}]})",
      R"({"$or": [{"a": 1}, {"a": 7}]})",
      R"({"$and": [{"a": {"$gt": 0}}, {"a": {"$lt": 3}}]})",
      R"({"a": {"$gt": 0}, "b": "x"})",
      R"({"_id": {"$in": [1, 3, "s", 100]}})",
      R"({"_id": {"$gt": 4}})",
  };
  for (const char* f : filters) {
    INFO(f);
    auto p = db->Find("plain", J(f));
    auto i = db->Find("indexed", J(f));
    REQUIRE(p.ok());
    REQUIRE(i.ok());
    CHECK(IdSet(p.value()) == IdSet(i.value()));
    CHECK(db->Count("plain", J(f)).value() == p.value().size());
  }
  CHECK(db->Find("plain", J(R"({"a": {"$foo": 1}})")).status().IsInvalidArgument());
}

TEST_CASE("sort, skip, limit, projection", "[engine]") {
  TestDB db(Fast());
  for (int i = 0; i < 20; i++)
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) +
                              ", \"v\": " + std::to_string((i * 7) % 20) + ", \"w\": \"" +
                              std::to_string(i) + "\"}"))
                .ok());
  FindOptions o;
  o.sort_field = "v";
  o.sort_direction = -1;
  o.skip = 2;
  o.limit = 3;
  o.projection = {"v"};
  auto r = db->Find("c", J("{}"), o);
  REQUIRE(r.ok());
  REQUIRE(r.value().size() == 3);
  CHECK(r.value()[0].Get("v").value().ToJson() == "17");
  CHECK(r.value()[2].Get("v").value().ToJson() == "15");
  CHECK(r.value()[0].Get("w").status().IsNotFound());
  CHECK(r.value()[0].Get("_id").ok());
  FindOptions lim;
  lim.limit = 5;
  CHECK(db->Find("c", J(R"({"v": {"$gte": 0}})"), lim).value().size() == 5);
  // A sort field is a field path, as in MongoDB.
  for (const char* bad : {"$v", "a..b", ".v", "v.", "a.$b"}) {
    INFO(bad);
    FindOptions s;
    s.sort_field = bad;
    auto f = db->Find("c", J("{}"), s);
    CHECK(f.status().IsInvalidArgument());
    CHECK(f.status().ToString().find(bad) != std::string::npos);
  }
}

// The _ids (as JSON) Find returns from `coll` sorted on `field`.
std::vector<std::string> SortedIds(TestDB& db, const std::string& coll, const std::string& field,
                                   int direction, const std::string& filter = "{}") {
  FindOptions o;
  o.sort_field = field;
  o.sort_direction = direction;
  auto r = db->Find(coll, J(filter), o);
  INFO(field << " " << direction << ": " << r.status().ToString());
  REQUIRE(r.ok());
  return Ids(r.value());
}

using Order = std::vector<std::string>;

TEST_CASE("sort: an array sorts by its smallest element ascending, largest descending",
          "[engine]") {
  // MongoDB's rule (the sort key of an array is its
  // smallest element for an ascending sort, its largest for a descending
  // one; [] sorts below null and a missing field, which sort as null).
  TestDB db(Fast());
  for (const char* d :
       {R"({"_id": 1, "t": "b"})", R"({"_id": 2, "t": ["a", "z"]})", R"({"_id": 3, "t": []})"})
    REQUIRE(db->Insert("c", J(d)).ok());
  CHECK(SortedIds(db, "c", "t", 1) == Order{"3", "2", "1"});
  CHECK(SortedIds(db, "c", "t", -1) == Order{"2", "1", "3"});
  REQUIRE(db->Insert("c", J(R"({"_id": 4})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 5, "t": null})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 6, "t": [null, "c"]})")).ok());
  CHECK(SortedIds(db, "c", "t", 1) == Order{"3", "4", "5", "6", "2", "1"});
  CHECK(SortedIds(db, "c", "t", -1) == Order{"2", "6", "1", "4", "5", "3"});
  // Type brackets: MinKey < [] < null < numbers < strings < documents <
  // arrays (as elements) < ... < booleans < dates < MaxKey.
  for (const char* d :
       {R"({"_id": 10, "m": [true, 5]})", R"({"_id": 11, "m": {"$maxKey": 1}})",
        R"({"_id": 12, "m": "s"})", R"({"_id": 13, "m": [{"x": 1}, [0]]})",
        R"({"_id": 14, "m": {"$minKey": 1}})", R"({"_id": 15, "m": [{"$date": 7}, "r"]})",
        R"({"_id": 16, "m": [[], []]})", R"({"_id": 17, "m": [[1, 2], [1]]})"})
    REQUIRE(db->Insert("m", J(d)).ok());
  // Ascending keys: 10 -> 5, 11 -> MaxKey, 12 -> "s", 13 -> {x: 1},
  // 14 -> MinKey, 15 -> "r", 16 -> [], 17 -> [1].
  CHECK(SortedIds(db, "m", "m", 1) == Order{"14", "10", "15", "12", "13", "16", "17", "11"});
  // Descending keys: 10 -> true, 13 -> [0], 15 -> date, 16 -> [],
  // 17 -> [1, 2].
  CHECK(SortedIds(db, "m", "m", -1) == Order{"11", "15", "10", "17", "13", "16", "12", "14"});
  // Through arrays of subdocuments ("a.b"): an element without b counts as
  // null; elements that are not documents count for nothing.
  for (const char* d :
       {R"({"_id": 21, "a": [{"b": 5}, {"b": 1}]})", R"({"_id": 22, "a": {"b": 3}})",
        R"({"_id": 23, "a": [{"b": 2}, {"c": 9}]})", R"({"_id": 24, "a": [{"b": [0, 9]}]})",
        R"({"_id": 25, "a": [7, {"b": 4}]})", R"({"_id": 26, "a": [{"b": []}, {"b": 6}]})",
        R"({"_id": 27, "a": [1, 2]})"})
    REQUIRE(db->Insert("n", J(d)).ok());
  // Ascending: 21 -> 1, 22 -> 3, 23 -> null, 24 -> 0, 25 -> 4, 26 -> [],
  // 27 -> null.
  CHECK(SortedIds(db, "n", "a.b", 1) == Order{"26", "23", "27", "24", "21", "22", "25"});
  // Descending: 21 -> 5, 22 -> 3, 23 -> 2, 24 -> 9, 25 -> 4, 26 -> 6.
  CHECK(SortedIds(db, "n", "a.b", -1) == Order{"24", "26", "21", "25", "22", "23", "27"});
  // A position picks one element of an array (MongoDB's sort keys do not
  // also look for a field "0" in each element): 21 -> 5, 22 -> null,
  // 23 -> 2, 24 -> 0, 25 -> null, 26 -> [], 27 -> null.
  CHECK(SortedIds(db, "n", "a.0.b", 1) == Order{"26", "22", "25", "27", "24", "23", "21"});
  // The key comes from the whole document, whatever the filter matched,
  // and whatever plan found the documents.
  REQUIRE(db->CreateIndex("n", "a.b").ok());
  CHECK(SortedIds(db, "n", "a.b", 1, R"({"a.b": {"$gte": 0}})") ==
        Order{"26", "23", "24", "21", "22", "25"});
}

// The rule, modelled independently: the values `path` reaches in `doc`
// (a missing field: null; an array at the end: its elements, or undefined
// for []; arrays before the end: each document element, others skipped).
void ModelCandidates(const bson_value_t* v, const std::vector<std::string>& parts, size_t i,
                     std::vector<Value>* out) {
  static const Value kUndefined = V(R"({"$undefined": true})");
  if (i == parts.size()) {
    if (v->value_type != BSON_TYPE_ARRAY) {
      out->push_back(Value::FromBsonValue(v));
      return;
    }
    bson_iter_t it;
    REQUIRE(bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len));
    bool any = false;
    while (bson_iter_next(&it)) {
      any = true;
      out->push_back(Value::FromBsonValue(bson_iter_value(&it)));
    }
    if (!any) out->push_back(kUndefined);
    return;
  }
  auto in_doc = [&](const uint8_t* data, uint32_t len) {
    bson_iter_t it;
    REQUIRE(bson_iter_init_from_data(&it, data, len));
    if (bson_iter_find(&it, parts[i].c_str())) {
      ModelCandidates(bson_iter_value(&it), parts, i + 1, out);
    } else {
      out->push_back(Value::Null());
    }
  };
  if (v->value_type == BSON_TYPE_DOCUMENT) {
    in_doc(v->value.v_doc.data, v->value.v_doc.data_len);
  } else if (v->value_type == BSON_TYPE_ARRAY) {
    bson_iter_t it;
    REQUIRE(bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len));
    bool any = false;
    while (bson_iter_next(&it)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
      any = true;
      const bson_value_t* e = bson_iter_value(&it);
      in_doc(e->value.v_doc.data, e->value.v_doc.data_len);
    }
    if (!any) out->push_back(Value::Null());
  } else {
    out->push_back(Value::Null());
  }
}

TEST_CASE("sort: arrays, missing fields and mixed types follow MongoDB (randomized)", "[engine]") {
  const uint64_t seed = mmdoc::test::Seed("sort model");
  std::mt19937_64 rng(seed);
  TestDB db(Fast());
  const char* scalars[] = {"0",
                           "1",
                           "-2.5",
                           "7",
                           R"({"$numberLong": "3"})",
                           R"("")",
                           R"("a")",
                           R"("b")",
                           "null",
                           "true",
                           "false",
                           R"({"$date": 5})",
                           R"({"x": 1})",
                           R"({"x": [2]})",
                           R"({"$minKey": 1})",
                           R"({"$maxKey": 1})",
                           R"({"$oid": "0123456789abcdef01234567"})",
                           R"({"$numberDouble": "NaN"})"};
  auto scalar = [&] { return std::string(scalars[rng() % (sizeof(scalars) / sizeof(*scalars))]); };
  std::function<std::string(int)> value = [&](int depth) {
    switch (rng() % (depth < 2 ? 4 : 2)) {
      case 2: {
        std::string s = "[";
        for (int n = static_cast<int>(rng() % 4), i = 0; i < n; i++)
          s += (i ? ", " : "") + value(depth + 1);
        return s + "]";
      }
      case 3: {  // an array of subdocuments, for "a.b"
        std::string s = "[";
        for (int n = static_cast<int>(rng() % 4), i = 0; i < n; i++) {
          s += i ? ", " : "";
          s += rng() % 4 ? "{\"b\": " + value(depth + 1) + "}" : rng() % 2 ? "{}" : scalar();
        }
        return s + "]";
      }
      default:
        return rng() % 3 ? scalar() : "{\"b\": " + value(depth + 1) + "}";
    }
  };
  const int n = static_cast<int>(200 * mmdoc::test::Scale());
  std::vector<Document> docs;
  for (int i = 0; i < n; i++) {
    std::string d = "{\"_id\": " + std::to_string(i);
    if (rng() % 6) d += ", \"a\": " + value(0);
    d += "}";
    docs.push_back(J(d));
    REQUIRE(db->Insert("c", docs.back()).ok());
  }
  for (const std::string path : {"a", "a.b", "a.b.b", "a.1"}) {
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
      size_t dot = path.find('.', start);
      parts.push_back(path.substr(start, dot == std::string::npos ? dot : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    for (int dir : {1, -1}) {
      // The model's key per document, then a stable sort in _id order.
      std::vector<std::pair<Value, std::string>> keyed;
      for (const Document& d : docs) {
        std::vector<Value> cands;
        bson_value_t whole;
        whole.value_type = BSON_TYPE_DOCUMENT;
        whole.value.v_doc.data = const_cast<uint8_t*>(d.data());
        whole.value.v_doc.data_len = static_cast<uint32_t>(d.size());
        if (parts.size() == 2 && parts[1] == "1") {
          // "a.1": a position into an array, or the field "1" of a document.
          auto v = d.Get(path);
          cands.push_back(v.ok() ? v.value() : Value::Null());
          if (v.ok() && v.value().type() == BSON_TYPE_ARRAY) {
            cands.clear();
            ModelCandidates(v.value().get(), {}, 0, &cands);
          }
        } else {
          ModelCandidates(&whole, parts, 0, &cands);
        }
        REQUIRE(!cands.empty());
        Value best = cands[0];
        for (const Value& c : cands) {
          int cmp = engine::CompareValues(c.get(), best.get());
          if (dir > 0 ? cmp < 0 : cmp > 0) best = c;
        }
        keyed.emplace_back(best, d.Get("_id").value().ToJson());
      }
      std::stable_sort(keyed.begin(), keyed.end(), [dir](const auto& x, const auto& y) {
        int cmp = engine::CompareValues(x.first.get(), y.first.get());
        return dir > 0 ? cmp < 0 : cmp > 0;
      });
      Order want;
      for (const auto& k : keyed) want.push_back(k.second);
      INFO("seed " << seed << " path " << path << " direction " << dir);
      CHECK(SortedIds(db, "c", path, dir) == want);
    }
  }
}

TEST_CASE("a negative limit or skip is InvalidArgument, not a huge number", "[engine]") {
  // -1 used to wrap to 2^64-1 (limit "none", skip "all").
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "w", IndexOptions{true}).ok());
  for (int i = 0; i < 5; i++)
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"w\": \"" + std::to_string(i) +
                              "\"}"))
                .ok());
  // A scan, an _id lookup, and the point plan for {field: "string"}.
  for (const char* filter : {"{}", R"({"_id": 1})", R"({"w": "1"})"}) {
    for (int which = 0; which < 2; which++) {
      FindOptions o;
      (which == 0 ? o.limit : o.skip) = -1;
      const std::string want = which == 0 ? "limit must be >= 0" : "skip must be >= 0";
      INFO(filter << " " << want);
      auto r = db->Find("c", J(filter), o);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().IsInvalidArgument());
      CHECK(r.status().message().find(want) != std::string::npos);
      CHECK(db->Find("c", J(filter), FindOptions()).ok());
      auto t = db->BeginRead().value();
      CHECK(t->Find("c", J(filter), o).status().IsInvalidArgument());
      CHECK(t->Explain("c", J(filter), o).status().IsInvalidArgument());
      o.sort_field = "w";
      CHECK(t->Find("c", J(filter), o).status().IsInvalidArgument());
    }
  }
  FindOptions big;
  big.limit = INT64_MAX;
  big.skip = 1;
  CHECK(db->Find("c", J("{}"), big).value().size() == 4);
}

TEST_CASE("update operators and delete by filter", "[engine]") {
  TestDB db(Fast());
  for (int i = 0; i < 10; i++)
    REQUIRE(
        db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"n\": " + std::to_string(i) + "}"))
            .ok());
  auto u = db->UpdateMany("c", J(R"({"n": {"$gte": 5}})"),
                          J(R"({"$inc": {"n": 100}, "$set": {"s.t": "x"}})"));
  REQUIRE(u.ok());
  CHECK(u.value().matched == 5);
  CHECK(u.value().modified == 5);
  CHECK(db->Get("c", V("7")).value().Get("n").value().ToJson() == "107");
  CHECK(db->Get("c", V("7")).value().Get("s.t").value().ToJson() == "\"x\"");
  u = db->UpdateOne("c", J(R"({"_id": 7})"), J(R"({"$unset": {"s": ""}})"));
  REQUIRE(u.ok());
  CHECK(db->Get("c", V("7")).value().Get("s").status().IsNotFound());
  CHECK(db->UpdateOne("c", J("{}"), J(R"({"$inc": {"n": "x"}})")).status().IsInvalidArgument());
  CHECK(db->UpdateOne("c", J("{}"), J(R"({"$bogus": {"n": 1}})")).status().IsInvalidArgument());
  // MongoDB's rule: a replacement updates one document, never many alike.
  for (const char* replacement : {R"({"status": "x"})", "{}"}) {
    auto many = db->UpdateMany("c", J("{}"), J(replacement));
    CHECK(many.status().IsInvalidArgument());
    CHECK(many.status().ToString().find("replacement") != std::string::npos);
  }
  CHECK(db->Count("c", J(R"({"n": {"$exists": true}})")).value() == 10);
  auto d = db->DeleteMany("c", J(R"({"n": {"$lt": 3}})"));
  REQUIRE(d.ok());
  CHECK(d.value() == 3);
  d = db->DeleteOne("c", J("{}"));
  CHECK(d.value() == 1);
  CHECK(db->Count("c").value() == 6);
}

TEST_CASE("transactions: abort discards, snapshots are isolated", "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "v": "old"})")).ok());
  {
    auto t = db->Begin();
    REQUIRE(t.ok());
    REQUIRE(t.value()->Insert("c", J(R"({"_id": 2})")).ok());
    CHECK(t.value()->Get("c", V("2")).ok());  // sees its own write
    t.value()->Abort();
  }
  CHECK(db->Get("c", V("2")).status().IsNotFound());
  {
    auto t = db->Begin();
    REQUIRE(t.value()->Insert("c", J(R"({"_id": 3})")).ok());
  }  // destroyed uncommitted: aborted
  CHECK(db->Get("c", V("3")).status().IsNotFound());

  auto snap = db->BeginRead();
  REQUIRE(snap.ok());
  REQUIRE(db->Replace("c", V("1"), J(R"({"v": "new"})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 4})")).ok());
  CHECK(snap.value()->Get("c", V("1")).value().Get("v").value().ToJson() == "\"old\"");
  CHECK(snap.value()->Get("c", V("4")).status().IsNotFound());
  CHECK(snap.value()->Count("c", J("{}")).value() == 1);
  CHECK(snap.value()->Insert("c", J("{}")).IsNotSupported());
  snap.value()->Abort();
  CHECK(db->Get("c", V("1")).value().Get("v").value().ToJson() == "\"new\"");

  // A multi-operation transaction commits as one.
  auto t = db->Begin(WriteOptions{Durability::kFsync});
  REQUIRE(t.value()->Insert("c", J(R"({"_id": 10})")).ok());
  REQUIRE(t.value()->Insert("c", J(R"({"_id": 11})")).ok());
  REQUIRE(t.value()->Delete("c", V("4")).ok());
  REQUIRE(t.value()->Commit().ok());
  CHECK(t.value()->Insert("c", J("{}")).IsInvalidArgument());  // finished
  db.Reopen();
  CHECK(db->Count("c").value() == 3);
}

TEST_CASE("large documents use overflow pages, limits are enforced", "[engine]") {
  TestDB db(Fast());
  std::string big(10u << 20, 'x');
  REQUIRE(db->Insert("c", J("{\"_id\": 1, \"s\": \"" + big + "\"}")).ok());
  auto got = db->Get("c", V("1"));
  REQUIRE(got.ok());
  CHECK(got.value().size() > big.size());
  std::string huge(17u << 20, 'y');
  auto d = Document::FromJson("{\"s\": \"" + huge + "\"}");
  CHECK(d.status().IsInvalidArgument());
  // An index key over the limit is refused with a clear error.
  REQUIRE(db->CreateIndex("c", "k").ok());
  Status s = db->Insert("c", J("{\"_id\": 2, \"k\": \"" + std::string(2000, 'k') + "\"}"));
  CHECK(s.IsInvalidArgument());
  CHECK(s.ToString().find("limit") != std::string::npos);
  CHECK(db->Get("c", V("2")).status().IsNotFound());
  REQUIRE(db->Delete("c", V("1")).ok());
}

TEST_CASE("reopen keeps everything, compact shrinks the file", "[engine]") {
  TestDB db(Fast());
  for (int i = 0; i < 3000; i++)
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"pad\": \"" +
                              std::string(200, 'p') + "\"}"))
                .ok());
  REQUIRE(db->CreateIndex("c", "pad").ok());
  REQUIRE(db->DeleteMany("c", J(R"({"_id": {"$gte": 100}})")).ok());
  db.Reopen();
  CHECK(db->Count("c").value() == 100);
  auto before = db->Stats();
  REQUIRE(before.ok());
  REQUIRE(db->Compact().ok());
  auto after = db->Stats();
  REQUIRE(after.ok());
  CHECK(after.value().file_size < before.value().file_size);
  CHECK(db->Count("c").value() == 100);
  CHECK(db->ListIndexes("c").value().size() == 1);
  db.Reopen();
  CHECK(db->Get("c", V("42")).ok());
}

TEST_CASE("a database named like a compaction's copy is not removed, nor overwritten", "[engine]") {
  // Found by an independent test: opening "foo" deleted a closed database
  // "foo.compact" as if a killed compaction had left it.
  test::TempDir dir;
  const std::string path = dir.File("foo"), other = path + ".compact";
  {
    auto o = DB::Open(other, Fast()).value();
    REQUIRE(o->Insert("c", J(R"({"_id": "precious"})")).ok());
    REQUIRE(o->Close().ok());
  }
  {
    auto db = DB::Open(path, Fast()).value();
    REQUIRE(db->Insert("c", J(R"({"_id": 1})")).ok());
    const Status s = db->Compact();
    INFO(s.ToString());
    CHECK(s.IsInvalidArgument());
    CHECK(s.ToString().find(other) != std::string::npos);
    CHECK(db->Get("c", Value::Int32(1)).ok());
    test::RequireCheckPasses(db.get());
  }
  auto o = DB::Open(other, Fast());
  REQUIRE(o.ok());
  CHECK(o.value()->Get("c", V(R"("precious")")).ok());
  CHECK(o.value()->Count("c").value() == 1);
  // (A killed compaction's own copy still goes at the next open:
  // tools/crash kill: a compaction killed midway ...)
}

TEST_CASE("compact keeps the files' permissions and owner", "[engine]") {
  // Found by an independent test: the copy got the umask's 0644 and the
  // caller's owner, so a private database became world-readable.
  test::TempDir dir;
  const std::string path = dir.File("private");
  auto db = DB::Open(path, Fast()).value();
  for (int i = 0; i < 100; i++)
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + "}")).ok());
  for (const std::string& f : {path, path + "-log"}) {
    REQUIRE(::chmod(f.c_str(), 0600) == 0);
    // As root (CI), another owner too; elsewhere the mode only.
    if (::geteuid() == 0) REQUIRE(::chown(f.c_str(), 65534, 65534) == 0);
  }
  REQUIRE(db->Compact().ok());
  CHECK(db->Insert("c", J(R"({"_id": "after"})")).ok());
  for (const std::string& f : {path, path + "-log"}) {
    INFO(f);
    struct stat st;
    REQUIRE(::stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);
    if (::geteuid() == 0) CHECK(st.st_uid == 65534);
  }
  test::RequireCheckPasses(db.get());
}

TEST_CASE("a second open of the same file is refused", "[engine]") {
  TestDB db(Fast());
  auto second = DB::Open(db.path(), Fast());
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().IsBusy());
  CHECK(second.status().ToString().find(db.path()) != std::string::npos);
}

TEST_CASE("Open waits lock_timeout_ms for a held database", "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": 1})")).ok());
  Options wait = Fast();
  wait.lock_timeout_ms = 150;
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = DB::Open(db.path(), wait);
  const auto waited = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().IsBusy());
  CHECK(refused.status().ToString().find("waited 150 ms") != std::string::npos);
  CHECK(waited >= std::chrono::milliseconds(150));
  CHECK(waited < std::chrono::seconds(5));

  // Let go while a second opener waits: it gets the database and sees the commit.
  wait.lock_timeout_ms = 20000;
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    db.Close();
  });
  const auto t1 = std::chrono::steady_clock::now();
  auto second = DB::Open(db.path(), wait);
  const auto took = std::chrono::steady_clock::now() - t1;
  closer.join();
  REQUIRE(second.ok());
  CHECK(took >= std::chrono::milliseconds(150));
  CHECK(took < std::chrono::seconds(10));
  CHECK(*second.value()->Count("c") == 1);
  test::RequireCheckPasses(second.value().get());
}

TEST_CASE("Result's * reads a temporary and a const one, as std::optional's", "[engine]") {
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": 1})")).ok());
  const uint64_t n = *db->Count("c");  // moved out of the temporary
  CHECK(n == 1);
  const Result<uint64_t> kept = db->Count("c");
  CHECK(*kept == 1);
  CHECK((*db->Get("c", V("1"))) == J(R"({"_id": 1})"));
}

TEST_CASE("a path that is empty or holds a NUL byte is refused, and no file made", "[engine]") {
  test::TempDir dir;
  CHECK(DB::Open("").status().IsInvalidArgument());
  const std::string named = dir.File("a.mmdb");
  // The system calls would stop at the NUL: data file and log both "a.mmdb".
  auto db = DB::Open(named + std::string("\0b", 2));
  REQUIRE_FALSE(db.ok());
  CHECK(db.status().IsInvalidArgument());
  CHECK(db.status().ToString().find("NUL") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(named));
}

TEST_CASE("DB::Get reads the same through the catalog cache and without it", "[engine]") {
  // DB::Get reads the _id tree directly when the catalog cache is current
  // and through a transaction otherwise (cold after open, stale after DDL).
  TestDB db(Fast());
  for (int i = 0; i < 200; i++)
    REQUIRE(
        db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"v\": " + std::to_string(i) + "}"))
            .ok());
  auto check_all = [&] {
    for (int i = 0; i < 200; i += 7) {
      auto d = db->Get("c", V(std::to_string(i)));
      INFO(i);
      REQUIRE(d.ok());
      CHECK(d.value() ==
            J("{\"_id\": " + std::to_string(i) + ", \"v\": " + std::to_string(i) + "}"));
    }
    CHECK(db->Get("c", V("1000")).status().IsNotFound());
    CHECK(db->Get("c", V("\"0\"")).status().IsNotFound());  // the string "0" is not 0
    CHECK(db->Get("nope", V("1")).status().IsNotFound());
    CHECK(db->Get("c", Value::String(std::string(2000, 'k'))).status().IsNotFound());
  };
  check_all();  // warm: the inserts published the cache
  db.Reopen();
  check_all();  // the first read is cold and publishes; the rest are warm
  // DDL changes the catalog: reads must see the new state, not the cache.
  REQUIRE(db->DropCollection("c").ok());
  CHECK(db->Get("c", V("7")).status().IsNotFound());
  REQUIRE(db->Insert("c", J(R"({"_id": 7, "v": "new"})")).ok());
  CHECK(db->Get("c", V("7")).value() == J(R"({"_id": 7, "v": "new"})"));
  // A snapshot taken before a write does not see it; DB::Get after does.
  auto snap = db->BeginRead();
  REQUIRE(snap.ok());
  REQUIRE(db->Replace("c", V("7"), J(R"({"v": "newer"})")).ok());
  CHECK(snap.value()->Get("c", V("7")).value() == J(R"({"_id": 7, "v": "new"})"));
  CHECK(db->Get("c", V("7")).value() == J(R"({"_id": 7, "v": "newer"})"));
}

TEST_CASE("DeleteMany({}) empties the collection and its indexes", "[engine]") {
  // A filter that matches everything frees the trees instead of deleting
  // entry by entry; the collection, its indexes and their options stay.
  TestDB db(Fast());
  IndexOptions unique;
  unique.unique = true;
  REQUIRE(db->CreateIndex("c", "k", unique).ok());
  REQUIRE(db->CreateIndex("c", "tags").ok());
  for (int i = 0; i < 3000; i++)
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"k\": " + std::to_string(i) +
                              ", \"tags\": [\"a\", \"b" + std::to_string(i % 7) + "\"]}"))
                .ok());
  REQUIRE(db->Insert("other", J(R"({"_id": 1})")).ok());
  auto before = db->Stats();
  REQUIRE(before.ok());
  auto n = db->DeleteMany("c", J("{}"));
  REQUIRE(n.ok());
  CHECK(n.value() == 3000);
  CHECK(db->Count("c").value() == 0);
  CHECK(db->Find("c", J(R"({"k": 5})")).value().empty());
  CHECK(db->Find("c", J(R"({"tags": "a"})")).value().empty());
  CHECK(db->ListIndexes("c").value().size() == 2);
  CHECK(db->Count("other").value() == 1);
  // Deleting from an empty or missing collection deletes nothing.
  CHECK(db->DeleteMany("c", J("{}")).value() == 0);
  CHECK(db->DeleteMany("nope", J("{}")).value() == 0);
  // The unique index still holds, and its old keys are free again.
  REQUIRE(db->Insert("c", J(R"({"_id": 5, "k": 5, "tags": ["a"]})")).ok());
  CHECK(db->Insert("c", J(R"({"_id": 6, "k": 5})")).IsAlreadyExists());
  CHECK(db->Find("c", J(R"({"tags": "a"})")).value().size() == 1);
  // An aborted truncation changes nothing.
  {
    auto t = db->Begin();
    REQUIRE(t.ok());
    CHECK(t.value()->DeleteMany("c", J("{}")).value() == 1);
    t.value()->Abort();
  }
  CHECK(db->Count("c").value() == 1);
  db.Reopen();
  CHECK(db->Count("c").value() == 1);
  CHECK(db->Get("c", V("5")).ok());
}

// Find({f: "s"}) on an indexed plain field, or _id, takes the point plan
// (no filter tree; fetched documents checked by a direct comparison). It
// must return what the general plan ({f: {$eq: "s"}}) and a full scan of
// an unindexed copy of the field return, for scalars, arrays, nested
// arrays, other types and missing fields, with unique and multikey indexes.
TEST_CASE("point plan: {field: string} agrees with the general plan (randomized)", "[engine]") {
  const uint64_t seed = mmdoc::test::Seed("point plan");
  std::mt19937_64 rng(seed);
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "m", IndexOptions{false}).ok());
  REQUIRE(db->CreateIndex("c", "u", IndexOptions{true}).ok());
  const char* words[] = {"a", "b", "c", "", "abcdefghijklmnopqrstuvwxyz0123456789"};
  auto word = [&] { return std::string("\"") + words[rng() % 5] + "\""; };
  auto value = [&]() -> std::string {
    switch (rng() % 7) {
      case 0:
      case 1:
        return word();
      case 2:
        return "[" + word() + ", " + word() + "]";
      case 3:
        return "[[" + word() + "], 1]";
      case 4:
        return "{\"x\": " + word() + "}";
      case 5:
        return "7";
      default:
        return "";  // missing
    }
  };
  const int n = 200 * static_cast<int>(mmdoc::test::Scale());
  for (int i = 0; i < n; i++) {
    std::string v = value();
    std::string doc = "{\"_id\": \"id" + std::to_string(i % 37) + "-" + std::to_string(i) +
                      "\", \"u\": \"u" + std::to_string(i) + "\"";
    if (!v.empty()) doc += ", \"m\": " + v + ", \"copy\": " + v;
    doc += "}";
    REQUIRE(db->Insert("c", J(doc)).ok());
  }
  auto tr = db->BeginRead();
  REQUIRE(tr.ok());
  for (const char* w : words) {
    const std::string s = std::string("\"") + w + "\"";
    INFO("seed " << seed << " value " << s);
    auto point = db->Find("c", J("{\"m\": " + s + "}"));
    auto general = db->Find("c", J("{\"m\": {\"$eq\": " + s + "}}"));
    auto scan = db->Find("c", J("{\"copy\": " + s + "}"));
    REQUIRE(point.ok());
    REQUIRE(general.ok());
    REQUIRE(scan.ok());
    CHECK(IdSet(point.value()) == IdSet(general.value()));
    CHECK(IdSet(point.value()) == IdSet(scan.value()));
    auto ex = tr.value()->Explain("c", J("{\"m\": " + s + "}"));
    REQUIRE(ex.ok());
    CHECK(ex.value().plan == "IXSCAN");
    CHECK(ex.value().index == "m");
    CHECK(ex.value().returned == point.value().size());
  }
  // Unique index and _id: one document or none; limit and skip still apply.
  for (int i = 0; i < 20; i++) {
    const int k = static_cast<int>(rng() % (n + 5));
    auto u = db->Find("c", J("{\"u\": \"u" + std::to_string(k) + "\"}"));
    REQUIRE(u.ok());
    REQUIRE(u.value().size() == (k < n ? 1u : 0u));
    // One key looked up, one document fetched: Explain counts both.
    auto ux = tr.value()->Explain("c", J("{\"u\": \"u" + std::to_string(k) + "\"}"));
    REQUIRE(ux.ok());
    CHECK(ux.value().plan == "IXSCAN");
    CHECK(ux.value().keys_examined == (k < n ? 1u : 0u));
    CHECK(ux.value().docs_examined == (k < n ? 1u : 0u));
    if (k < n) {
      const std::string id = "\"id" + std::to_string(k % 37) + "-" + std::to_string(k) + "\"";
      CHECK(u.value()[0].Get("_id").value().ToJson() == id);
      auto by_id = db->Find("c", J("{\"_id\": " + id + "}"));
      REQUIRE(by_id.ok());
      REQUIRE(by_id.value().size() == 1);
      CHECK(by_id.value()[0] == u.value()[0]);
      auto ex = tr.value()->Explain("c", J("{\"_id\": " + id + "}"));
      REQUIRE(ex.ok());
      CHECK(ex.value().plan == "IDHACK");
    }
  }
  FindOptions skip;
  skip.skip = 1;
  auto skipped = db->Find("c", J(R"({"u": "u0"})"), skip);
  REQUIRE(skipped.ok());
  CHECK(skipped.value().empty());
  // No index on the field: the general plan, same answers.
  auto unindexed = db->Find("c", J(R"({"copy": "a"})"));
  REQUIRE(unindexed.ok());
  CHECK(IdSet(unindexed.value()) == IdSet(db->Find("c", J(R"({"m": "a"})")).value()));
  CHECK(db->Find("nope", J(R"({"m": "a"})")).value().empty());
}

TEST_CASE("read transactions begun after others ended see every commit since", "[engine]") {
  // The DB keeps ended read transactions and renews them with the
  // collection state they had (DBImpl::EndRead): a renewed one must never
  // read through the trees of an older state, whatever changed between.
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
  std::map<int, int> model;  // _id -> v
  std::mt19937_64 rng(11);
  auto doc = [](int id, int v) {
    return J("{\"_id\": " + std::to_string(id) + ", \"k\": \"k" + std::to_string(id) +
             "\", \"v\": " + std::to_string(v) + "}");
  };
  // v of the document with _id `id` found by {k: "k<id>"} (the point plan
  // when k is indexed, a scan when not); -1 when there is none.
  auto read_v = [&](int id) {
    auto t = db->BeginRead();
    REQUIRE(t.ok());
    FindOptions o;
    o.limit = 1;
    auto cur = t.value()->Find("c", J("{\"k\": \"k" + std::to_string(id) + "\"}"), o);
    REQUIRE(cur.ok());
    if (!cur.value()->Next()) {
      REQUIRE(cur.value()->status().ok());
      return -1;
    }
    return std::stoi(cur.value()->document().Get("v").value().ToJson());
  };
  auto count = [&]() {
    auto t = db->BeginRead();
    REQUIRE(t.ok());
    auto n = t.value()->Count("c", J("{}"));
    REQUIRE(n.ok());
    return n.value();
  };
  for (int round = 0; round < 400; round++) {
    const int id = static_cast<int>(rng() % 40);
    auto it = model.find(id);
    if (it == model.end()) {
      REQUIRE(db->Insert("c", doc(id, round)).ok());
      model[id] = round;
    } else if (rng() % 3 == 0) {
      REQUIRE(db->Delete("c", Value::Int32(id)).ok());
      model.erase(it);
    } else {
      REQUIRE(db->UpdateOne("c", J("{\"_id\": " + std::to_string(id) + "}"),
                            J("{\"$set\": {\"v\": " + std::to_string(round) + "}}"))
                  .ok());
      it->second = round;
    }
    if (round == 100) REQUIRE(db->DropIndex("c", "k").ok());
    if (round == 150) REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
    if (round == 250) {
      REQUIRE(db->DropCollection("c").ok());
      model.clear();
      CHECK(read_v(id) == -1);
      REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
    }
    const int probe = static_cast<int>(rng() % 40);
    auto want = [&](int i) { return model.count(i) ? model[i] : -1; };
    CHECK(read_v(id) == want(id));
    CHECK(read_v(probe) == want(probe));
    CHECK(count() == model.size());
  }

  // More readers open at once than the DB keeps spare, each on its own
  // commit; each still sees its snapshot, and the ones begun after they
  // all ended see the last commit.
  std::vector<std::unique_ptr<Transaction>> open;
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 12; i++) {
    REQUIRE(db->Insert("c", doc(1000 + i, i)).ok());
    open.push_back(db->BeginRead().value());
    sizes.push_back(model.size() + static_cast<size_t>(i) + 1);
  }
  for (size_t i = 0; i < open.size(); i++) CHECK(open[i]->Count("c", J("{}")).value() == sizes[i]);
  open.clear();
  for (int i = 0; i < 12; i++) CHECK(read_v(1000 + i) == i);
  CHECK(count() == model.size() + 12);
}

TEST_CASE("write transactions begun after others ended see every commit since", "[engine]") {
  // A committed write transaction leaves its catalog and trees to the next
  // one (DBImpl::KeepWriteState); that one may use them only when nothing
  // has changed since: not after an abort, DDL, a compaction, or a commit
  // that did not take them. Each round writes through a fresh transaction
  // and checks the result against a model.
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
  std::map<std::string, std::map<int, int>> model;  // collection -> _id -> v
  std::mt19937_64 rng(12);
  auto doc = [](int id, int v) {
    return J("{\"_id\": " + std::to_string(id) + ", \"k\": \"k" + std::to_string(id) +
             "\", \"v\": " + std::to_string(v) + "}");
  };
  auto check = [&](const std::string& coll) {
    auto t = db->BeginRead().value();
    CHECK(t->Count(coll, J("{}")).value() == model[coll].size());
    for (const auto& [id, v] : model[coll]) {
      // Through the k index when there is one, and by _id.
      auto cur = t->Find(coll, J("{\"k\": \"k" + std::to_string(id) + "\"}")).value();
      REQUIRE(cur->Next());
      CHECK(cur->document().Get("v").value().ToJson() == std::to_string(v));
      CHECK(t->Get(coll, Value::Int32(id)).ok());
    }
  };
  for (int round = 0; round < 300; round++) {
    const std::string coll = rng() % 4 == 0 ? "d" : "c";
    std::map<int, int>& m = model[coll];
    const int id = static_cast<int>(rng() % 30);
    auto t = db->Begin().value();
    const bool insert = m.count(id) == 0;
    const bool remove = !insert && rng() % 3 == 0;
    if (insert) {
      REQUIRE(t->Insert(coll, doc(id, round)).ok());
    } else if (remove) {
      REQUIRE(t->Delete(coll, Value::Int32(id)).ok());
    } else {
      REQUIRE(t->UpdateOne(coll, J("{\"_id\": " + std::to_string(id) + "}"),
                           J("{\"$set\": {\"v\": " + std::to_string(round) + "}}"))
                  .ok());
    }
    if (rng() % 5 == 0) {
      t->Abort();  // its writes are gone; the next txn must not see them
    } else {
      REQUIRE(t->Commit().ok());
      if (remove) {
        m.erase(id);
      } else {
        m[id] = round;
      }
    }
    switch (round % 60) {
      case 20:
        REQUIRE(db->DropIndex("c", "k").ok());
        break;
      case 30:
        REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
        break;
      case 40:
        REQUIRE(db->Compact().ok());
        // A reader that fills the emptied catalog cache before the next
        // write: the state kept before Compact names the old file.
        check(coll);
        break;
      case 50:
        REQUIRE(db->DropCollection("d").ok());
        model.erase("d");
        break;
    }
    check("c");
    check("d");
  }
  db.CheckNow();
}

TEST_CASE("transactions the caller finished may be destroyed after their DB", "[engine]") {
  // A read transaction ended by its destructor goes back to its DB; one
  // already committed or aborted must not touch the DB again (under ASan a
  // use after free; here it once hung on the freed DB's mutex).
  TestDB db(Fast());
  REQUIRE(db->Insert("c", J(R"({"_id": 1})")).ok());
  auto aborted = db->BeginRead().value();
  CHECK(aborted->Count("c", J("{}")).value() == 1);
  aborted->Abort();
  auto committed = db->BeginRead().value();
  CHECK(committed->Count("c", J("{}")).value() == 1);
  REQUIRE(committed->Commit().ok());
  auto written = db->Begin().value();
  REQUIRE(written->Insert("c", J(R"({"_id": 2})")).ok());
  REQUIRE(written->Commit().ok());
  db.Reopen();  // the DB those came from is gone
  aborted.reset();
  committed.reset();
  written.reset();
  CHECK(db->Count("c", J("{}")).value() == 2);
}

TEST_CASE("a scan for a string finds it in every leaf and in overflow documents", "[engine]") {
  // A scan rejects a whole leaf when the value's bytes are nowhere in it;
  // documents stored in overflow runs are not in the leaf's bytes and must
  // still be read. Explain still counts every document as examined.
  TestDB db(Fast());
  std::mt19937_64 rng(3);
  std::set<int> want;
  const int n = 3000;
  auto txn = db->Begin().value();
  for (int i = 0; i < n; i++) {
    const bool hit = rng() % 97 == 0;
    const bool big = rng() % 41 == 0;  // ~6 KB: an overflow run
    std::string pad(big ? 6000 : 10 + rng() % 60, 'p');
    std::string v = hit ? "needle-value" : "other-" + std::to_string(rng() % 1000);
    if (hit) want.insert(i);
    REQUIRE(txn->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"pad\": \"" + pad +
                               "\", \"v\": \"" + v + "\"}"))
                .ok());
  }
  // Big documents (overflow runs) that match.
  for (int i = n; i < n + 5; i++) {
    want.insert(i);
    REQUIRE(txn->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"pad\": \"" +
                               std::string(7000, 'q') + "\", \"v\": \"needle-value\"}"))
                .ok());
  }
  REQUIRE(txn->Commit().ok());
  auto tr = db->BeginRead().value();
  auto cur = tr->Find("c", J(R"({"v": "needle-value"})")).value();
  std::set<int> got;
  while (cur->Next()) got.insert(std::stoi(cur->document().Get("_id").value().ToJson()));
  REQUIRE(cur->status().ok());
  CHECK(got == want);
  auto ex = tr->Explain("c", J(R"({"v": "needle-value"})"));
  REQUIRE(ex.ok());
  CHECK(ex.value().plan == "COLLSCAN");
  CHECK(ex.value().docs_examined == static_cast<uint64_t>(n + 5));
  CHECK(ex.value().returned == want.size());
  // A value no document holds: every leaf rejected, nothing returned.
  CHECK(tr->Count("c", J(R"({"v": "absent-value"})")).value() == 0);
}

TEST_CASE("GetBy returns what Find limit 1 returns (randomized)", "[engine]") {
  // DB::GetBy looks a string up through a unique index directly when the
  // catalog cache is current; every other case (no unique index, another
  // type, dotted path, cold cache) goes through Find. Both must answer as
  // Find({field: {$eq: value}}) with limit 1 does.
  const uint64_t seed = mmdoc::test::Seed("getby");
  std::mt19937_64 rng(seed);
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "u", IndexOptions{true}).ok());
  REQUIRE(db->CreateIndex("c", "m", IndexOptions{false}).ok());
  const int n = 150 * static_cast<int>(mmdoc::test::Scale());
  std::vector<std::string> probes = {R"("")",           "7",    "7.0",    R"({"x": "a"})",
                                     R"(["u1", "u2"])", "null", R"("a")", R"("zz")"};
  for (int i = 0; i < n; i++) {
    const std::string u = "\"u" + std::to_string(i) + "\"";
    std::string doc = "{\"_id\": \"id" + std::to_string(i) + "\"";
    switch (rng() % 6) {
      case 0:  // multikey: two strings of its own, unique across documents
        doc += ", \"u\": [" + u + ", \"w" + std::to_string(i) + "\"]";
        break;
      case 1:  // a number (7 once; the rest unique)
        doc += ", \"u\": " + std::to_string(i == 0 ? 7 : 1000 + i);
        break;
      case 2:  // missing: indexed as null, and unique allows one null
        if (i % 50 == 0 && i > 0) break;
        [[fallthrough]];
      default:
        doc += ", \"u\": " + u;
    }
    const char* m[] = {R"("a")", R"("b")", R"(["a", "zz"])", "7"};
    doc += std::string(", \"m\": ") + m[rng() % 4] + ", \"copy\": " + u + "}";
    auto s = db->Insert("c", J(doc));
    REQUIRE((s.ok() || s.IsAlreadyExists()));  // a second null is refused
    probes.push_back(u);
    if (rng() % 8 == 0) probes.push_back("\"w" + std::to_string(i) + "\"");
  }
  probes.push_back("\"" + std::string(2000, 'k') + "\"");  // longer than any key
  FindOptions one;
  one.limit = 1;
  auto check_all = [&](const char* when) {
    auto tr = db->BeginRead();
    REQUIRE(tr.ok());
    for (const char* field : {"u", "m", "copy", "_id", "u.0"}) {
      for (size_t k = 0; k < probes.size(); k += 1 + rng() % 3) {
        INFO("seed " << seed << ", " << when << ": " << field << " = " << probes[k]);
        const Value v = V(probes[k]);
        Document filter = J(std::string("{\"") + field + "\": {\"$eq\": " + probes[k] + "}}");
        auto want = db->Find("c", filter, one);
        REQUIRE(want.ok());
        for (auto got : {db->GetBy("c", field, v), tr.value()->GetBy("c", field, v)}) {
          if (want.value().empty()) {
            CHECK(got.status().IsNotFound());
          } else {
            REQUIRE(got.ok());
            CHECK(got.value() == want.value()[0]);
          }
        }
      }
    }
    CHECK(db->GetBy("nope", "u", V(R"("u1")")).status().IsNotFound());
    CHECK(db->GetBy("c", "", V(R"("u1")")).status().IsInvalidArgument());
    CHECK(db->GetBy("c", std::string_view("u\0x", 3), V(R"("u1")")).status().IsInvalidArgument());
    CHECK(db->GetBy("c", "$u", V(R"("u1")")).status().IsInvalidArgument());
  };
  check_all("warm");
  db.Reopen();
  check_all("after reopen");
  // DDL: the cache is rebuilt; without the unique index every lookup goes
  // through Find (a scan), with the same answers.
  REQUIRE(db->DropIndex("c", "u").ok());
  check_all("index dropped");
  REQUIRE(db->CreateIndex("c", "u", IndexOptions{true}).ok());
  check_all("index rebuilt");
}

TEST_CASE("an index lookup of a string finds a Symbol holding it, as a scan does", "[engine]") {
  // MongoDB orders a Symbol with the strings: {a: "b"} matches {a: Symbol("b")}.
  for (const bool unique : {false, true}) {
    TestDB db(Fast());
    REQUIRE(db->Insert("c", J(R"({"_id": 1, "a": {"$symbol": "b"}})")).ok());
    if (!unique) REQUIRE(db->Insert("c", J(R"({"_id": 2, "a": "b"})")).ok());
    const size_t n = unique ? 1 : 2;
    CHECK(db->Find("c", J(R"({"a": "b"})")).value().size() == n);
    REQUIRE(db->CreateIndex("c", "a", IndexOptions{unique}).ok());
    CHECK(db->Find("c", J(R"({"a": "b"})")).value().size() == n);
    CHECK(db->Find("c", J(R"({"a": {"$eq": "b"}})")).value().size() == n);
    CHECK(db->Count("c", J(R"({"a": "b"})")).value() == n);
    auto one = db->GetBy("c", "a", Value::String("b"));
    REQUIRE(one.ok());
    CHECK(one.value().Get("_id").value().ToJson() == "1");
  }
}
