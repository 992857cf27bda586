// Upserts and the update operators through the public API: what an upsert
// inserts (MongoDB's rules for the filter's equality fields, $setOnInsert,
// replacements), UpdateResult::upserted_id, indexes kept in step, the
// positional $ bound to the filter, errors changing nothing, and the log
// replaying it all. Every TestDB is checked with DB::Check when it ends.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "mmdoc/db.h"
#include "tests/support/test_db.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;
using mmdoc::test::V;

namespace {

Options Fast() {
  Options o;
  o.durability = Durability::kNone;
  return o;
}

UpdateOptions Upsert() {
  UpdateOptions o;
  o.upsert = true;
  return o;
}

std::string Json(const Document& d) { return d.ToJson(); }

// The one document in collection c (fails the test otherwise).
Document Only(TestDB& db, const std::string& filter = "{}") {
  auto all = db->Find("c", J(filter));
  REQUIRE(all.ok());
  REQUIRE(all.value().size() == 1);
  return all.value()[0];
}

TEST_CASE("upsert: inserts the filter's equalities with the update applied", "[update][upsert]") {
  TestDB db(Fast());
  auto r = db->UpdateOne("c", J(R"({"_id": 5, "a": 1, "b": {"$gt": 3}, "c.d": {"$eq": "x"}})"),
                         J(R"({"$set": {"e": 2}, "$inc": {"n": 1}, "$setOnInsert": {"f": 3}})"),
                         Upsert());
  REQUIRE(r.ok());
  CHECK(r->matched == 0);
  CHECK(r->modified == 0);
  REQUIRE(r->upserted_id.has_value());
  CHECK(r->upserted_id->ToJson() == "5");
  // The update's new fields in MongoDB's order (names by bytes).
  CHECK(Json(Only(db)) ==
        Json(J(R"({"_id": 5, "a": 1, "c": {"d": "x"}, "e": 2, "f": 3, "n": 1})")));

  // Now it matches: an update, no insert, $setOnInsert ignored.
  r = db->UpdateOne("c", J(R"({"_id": 5, "a": 1})"),
                    J(R"({"$inc": {"n": 1}, "$setOnInsert": {"f": 99}})"), Upsert());
  REQUIRE(r.ok());
  CHECK(r->matched == 1);
  CHECK(r->modified == 1);
  CHECK_FALSE(r->upserted_id.has_value());
  CHECK(Json(Only(db)) ==
        Json(J(R"({"_id": 5, "a": 1, "c": {"d": "x"}, "e": 2, "f": 3, "n": 2})")));
}

TEST_CASE("upsert: the filter's equalities go in by path, not in the filter's order",
          "[update][upsert]") {
  // Found by an outside test: {b: 1, a: 1, "c.z": 1, "c.a": 2} upserted
  // {b, a, c: {z, a}}, so a later {c: {a: 2, z: 1}} (field order is part of
  // a document's value) did not find it. MongoDB sorts them by path.
  TestDB db(Fast());
  REQUIRE(db->UpdateOne("c", J(R"({"b": 1, "a": 1, "c.z": 1, "c.a": 2})"),
                        J(R"({"$set": {"m": 1}})"), Upsert())
              .ok());
  const std::string d = Json(Only(db));
  CHECK(d.substr(d.find(", ") + 2) == R"("a" : 1, "b" : 1, "c" : { "a" : 2, "z" : 1 }, "m" : 1 })");
  CHECK(db->Count("c", J(R"({"c": {"a": 2, "z": 1}})")).value() == 1);
}

TEST_CASE("upsert and update: _id from the update, or left as it is", "[update][upsert]") {
  // Found by an outside test: every update naming _id was refused. MongoDB
  // refuses only a change of an existing _id, or an upsert's _id other
  // than the filter's.
  TestDB db(Fast());
  struct Case {
    const char* filter;
    const char* update;
    const char* inserted;
  };
  for (const Case& c : {
           Case{R"({"name": "x"})", R"({"$setOnInsert": {"_id": 8}, "$set": {"n": 1}})",
                R"({"_id": 8, "name": "x", "n": 1})"},
           Case{R"({"name": "y"})", R"({"$set": {"_id": 9}})", R"({"_id": 9, "name": "y"})"},
           Case{R"({"_id": 7})", R"({"$set": {"_id": 7, "b": 1}})", R"({"_id": 7, "b": 1})"},
           Case{R"({"name": "z", "_id": 6})", R"({"$set": {"b": 1}})",
                R"({"_id": 6, "name": "z", "b": 1})"},
       }) {
    CAPTURE(c.filter, c.update);
    auto r = db->UpdateOne("c", J(c.filter), J(c.update), Upsert());
    REQUIRE(r.ok());
    REQUIRE(r->upserted_id.has_value());
    // _id first, as an insert stores it.
    CHECK(Json(db->Get("c", *r->upserted_id).value()) == Json(J(c.inserted)));
  }
  // Through FindOneAndUpdate too, returning the new document.
  FindAndModifyOptions after;
  after.upsert = true;
  after.return_after = true;
  auto f = db->FindOneAndUpdate("c", J(R"({"name": "w"})"), J(R"({"$set": {"_id": 5}})"), after);
  REQUIRE(f.ok());
  REQUIRE(f.value().has_value());
  CHECK(Json(*f.value()) == Json(J(R"({"_id": 5, "name": "w"})")));
  CHECK(db->Count("c").value() == 5);

  // Refused, nothing inserted: the filter's _id and the update's differ, or
  // the update's is no _id at all.
  for (const Case& c : {
           Case{R"({"_id": 7, "k": 1})", R"({"$set": {"_id": 70}})", "immutable field _id"},
           Case{R"({"_id": 70})", R"({"$setOnInsert": {"_id": 71}})", "immutable field _id"},
           Case{R"({"name": "v"})", R"({"$set": {"_id": [1]}})", "_id cannot be an array"},
           Case{R"({"name": "v"})", R"({"$push": {"_id": 1}})", "_id cannot be an array"},
       }) {
    CAPTURE(c.filter, c.update);
    auto r = db->UpdateOne("c", J(c.filter), J(c.update), Upsert());
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find(c.inserted) != std::string::npos);
  }
  CHECK(db->Count("c").value() == 5);

  // An existing document: named but unchanged is fine, changed is refused
  // and leaves it (and every other document) as it was.
  auto r = db->UpdateOne("c", J(R"({"_id": 9})"), J(R"({"$set": {"_id": 9, "a": 2}})"));
  REQUIRE(r.ok());
  CHECK(r->modified == 1);
  r = db->UpdateOne("c", J(R"({"_id": 9})"), J(R"({"$inc": {"_id": 0}, "$min": {"a": 5}})"));
  REQUIRE(r.ok());
  CHECK(r->matched == 1);
  CHECK(r->modified == 0);
  CHECK(Json(db->Get("c", V("9")).value()) == Json(J(R"({"_id": 9, "name": "y", "a": 2})")));
  r = db->UpdateOne("c", J(R"({"_id": 9})"), J(R"({"$set": {"_id": 10, "a": 3}})"));
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message() == "the update would change the immutable field _id");
  // UpdateMany: _id 7 keeps its _id, _id 8 would not; nothing changes.
  r = db->UpdateMany("c", J(R"({"_id": {"$in": [7, 8]}})"), J(R"({"$set": {"_id": 7, "m": 1}})"));
  CHECK(r.status().IsInvalidArgument());
  CHECK(db->Count("c", J(R"({"m": 1})")).value() == 0);
  auto f2 = db->FindOneAndUpdate("c", J(R"({"_id": 8})"), J(R"({"$inc": {"_id": 1}})"));
  CHECK(f2.status().IsInvalidArgument());
  CHECK(Json(db->Get("c", V("9")).value()) == Json(J(R"({"_id": 9, "name": "y", "a": 2})")));
  CHECK(Json(db->Get("c", V("8")).value()) == Json(J(R"({"_id": 8, "name": "x", "n": 1})")));
  CHECK(db->Count("c").value() == 5);
  // A replacement may repeat _id, as before.
  REQUIRE(db->UpdateOne("c", J(R"({"_id": 7})"), J(R"({"_id": 7, "r": 1})")).ok());
  CHECK(Json(db->Get("c", V("7")).value()) == Json(J(R"({"_id": 7, "r": 1})")));
}

TEST_CASE("upsert: a regex in the filter is a pattern, not a value to insert", "[update][upsert]") {
  TestDB db(Fast());
  auto r = db->UpdateOne("c", J(R"({"_id": 8, "name": {"$regex": "^a"}, "k": 1})"),
                         J(R"({"$set": {"n": 1}})"), Upsert());
  REQUIRE(r.ok());
  REQUIRE(r->upserted_id.has_value());
  CHECK(Json(Only(db)) == Json(J(R"({"_id": 8, "k": 1, "n": 1})")));
}

TEST_CASE("upsert: a one-element $all or $in is an equality, a longer one is not",
          "[update][upsert]") {
  // Found by an outside test: {x: {$all: [1]}} left x out (MongoDB
  // rewrites a one-element $all into x: 1, as it does $in).
  struct Case {
    const char* filter;
    const char* inserted;
  };
  for (const Case& c :
       {Case{R"({"_id": 1, "x": {"$all": [1]}})", R"({"_id": 1, "x": 1, "n": 1})"},
        Case{R"({"_id": 1, "x": {"$all": [[1, 2]]}})", R"({"_id": 1, "x": [1, 2], "n": 1})"},
        Case{R"({"_id": 1, "x": {"$in": ["s"]}})", R"({"_id": 1, "x": "s", "n": 1})"},
        Case{R"({"_id": 1, "x": {"$all": [{"$elemMatch": {"y": 1}}]}})", R"({"_id": 1, "n": 1})"},
        Case{R"({"_id": 1, "x": {"$all": [{"$regex": "^a"}]}})", R"({"_id": 1, "n": 1})"}}) {
    CAPTURE(c.filter);
    TestDB db(Fast());
    auto r = db->UpdateOne("c", J(c.filter), J(R"({"$set": {"n": 1}})"), Upsert());
    REQUIRE(r.ok());
    REQUIRE(r->upserted_id.has_value());
    CHECK(Json(Only(db)) == Json(J(c.inserted)));
  }
  // A longer $all is an $and of equalities (MongoDB's rewrite): two on one
  // path, which no upserted document can hold (MongoDB's upsert_fields test).
  // A replacement takes only _id from the filter, so only _id's counts there.
  TestDB db(Fast());
  for (const char* filter : {R"({"_id": {"$all": [1, 2]}})", R"({"x": {"$all": [1, 2]}})"}) {
    CAPTURE(filter);
    auto r = db->UpdateOne("c", J(filter), J(R"({"$set": {"n": 1}})"), Upsert());
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().ToString().find("two equalities") != std::string::npos);
  }
  CHECK(db->UpdateOne("c", J(R"({"_id": {"$all": [1, 2]}})"), J(R"({"n": 1})"), Upsert())
            .status()
            .IsInvalidArgument());
  REQUIRE(db->UpdateOne("c", J(R"({"x": {"$all": [1, 2]}})"), J(R"({"n": 1})"), Upsert()).ok());
  CHECK(db->Count("c").value() == 1);
}

TEST_CASE("upsert: a replacement takes only _id from its filter, and that one whole",
          "[update][upsert]") {
  // Found by an outside test: filters whose other fields conflict were
  // refused for a replacement, which ignores them (MongoDB's upsert3 test).
  TestDB db(Fast());
  for (const char* filter : {R"({"_id": 1, "x": [1, {"x": 1}], "x.x": 1})", R"({"x": 1, "x.x": 1})",
                             R"({"$and": [{"x": 1}, {"x": 2}]})"}) {
    CAPTURE(filter);
    REQUIRE(db->DeleteMany("c", J("{}")).ok());
    auto r = db->UpdateOne("c", J(filter), J(R"({"y": 1})"), Upsert());
    REQUIRE(r.ok());
    REQUIRE(r->upserted_id.has_value());
    const std::string d = Json(Only(db));
    CHECK(d.find("\"y\" : 1") != std::string::npos);
    CHECK(d.find("\"x\"") == std::string::npos);
  }
  // An _id given by its parts is refused for a replacement; an operator
  // update builds it.
  CHECK(db->UpdateOne("c", J(R"({"_id.x": 1, "_id.y": 2})"), J(R"({"y": 1})"), Upsert())
            .status()
            .IsInvalidArgument());
  auto built =
      db->UpdateOne("c", J(R"({"_id.x": 1, "_id.y": 2})"), J(R"({"$set": {"y": 1}})"), Upsert());
  REQUIRE(built.ok());
  REQUIRE(built->upserted_id.has_value());
  CHECK(built->upserted_id->ToJson() == R"({ "x" : 1, "y" : 2 })");
}

TEST_CASE("upsert: an ObjectId _id when the filter has no _id equality", "[update][upsert]") {
  TestDB db(Fast());
  auto r = db->UpdateMany("c", J(R"({"_id": {"$gt": 1}, "k": "x", "$and": [{"m": 2}]})"),
                          J(R"({"$push": {"tags": "t"}})"), Upsert());
  REQUIRE(r.ok());
  REQUIRE(r->upserted_id.has_value());
  CHECK(r->upserted_id->type() == BSON_TYPE_OID);
  Document d = Only(db);
  CHECK(d.Get("_id").value() == *r->upserted_id);
  CHECK(d.Get("k").value().ToJson() == "\"x\"");
  CHECK(d.Get("m").value().ToJson() == "2");
  CHECK(d.Get("tags").value().ToJson() == Value::FromJson(R"(["t"])").value().ToJson());
  // Without upsert nothing is inserted.
  r = db->UpdateOne("c", J(R"({"k": "nothing"})"), J(R"({"$set": {"z": 1}})"));
  REQUIRE(r.ok());
  CHECK(r->matched == 0);
  CHECK_FALSE(r->upserted_id.has_value());
  CHECK(db->Count("c").value() == 1);
}

TEST_CASE("upsert: a replacement gets the filter's _id", "[update][upsert]") {
  TestDB db(Fast());
  auto r = db->UpdateOne("c", J(R"({"_id": "k", "x": 1})"), J(R"({"y": 2})"), Upsert());
  REQUIRE(r.ok());
  CHECK(r->upserted_id->ToJson() == "\"k\"");
  CHECK(Json(Only(db)) == Json(J(R"({"_id": "k", "y": 2})")));
  // A replacement _id that differs from the filter's is refused.
  r = db->UpdateOne("c", J(R"({"_id": "other"})"), J(R"({"_id": "third", "y": 2})"), Upsert());
  CHECK(r.status().IsInvalidArgument());
  CHECK(db->Count("c").value() == 1);
  // Its own _id when the filter has none.
  r = db->UpdateOne("c", J(R"({"y": 3})"), J(R"({"_id": 9, "z": 1})"), Upsert());
  REQUIRE(r.ok());
  CHECK(r->upserted_id->ToJson() == "9");
}

TEST_CASE("upsert: errors insert nothing", "[update][upsert]") {
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "u", IndexOptions{true}).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "u": 7})")).ok());
  // Two equalities on one path.
  auto r = db->UpdateOne("c", J(R"({"a": 1, "a.b": 2})"), J(R"({"$set": {"z": 1}})"), Upsert());
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message().find("a.b") != std::string::npos);
  // A unique index violation by the inserted document.
  r = db->UpdateOne("c", J(R"({"k": 1})"), J(R"({"$set": {"u": 7}})"), Upsert());
  CHECK(r.status().IsAlreadyExists());
  // An update that cannot apply to the built document.
  r = db->UpdateOne("c", J(R"({"a": 5})"), J(R"({"$push": {"a": 1}})"), Upsert());
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message().find("non-array field: a") != std::string::npos);
  // The positional $ has no element in an insert.
  r = db->UpdateOne("c", J(R"({"a": 5})"), J(R"({"$set": {"a.$": 1}})"), Upsert());
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message().find("positional") != std::string::npos);
  // '$' field names in an equality value cannot be stored.
  r = db->UpdateOne("c", J(R"({"a": {"b": {"$gt": 1}}})"), J(R"({"$set": {"z": 1}})"), Upsert());
  CHECK(r.status().IsInvalidArgument());
  CHECK(db->Count("c").value() == 1);
}

TEST_CASE("upsert: inside a transaction, and replayed from the log", "[update][upsert]") {
  TestDB db(Fast());
  {
    auto t = db->Begin();
    REQUIRE(t.ok());
    auto r = t.value()->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$inc": {"n": 1}})"), Upsert());
    REQUIRE(r.ok());
    CHECK(r->upserted_id.has_value());
    // The same transaction sees it: a second upsert matches.
    r = t.value()->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$inc": {"n": 1}})"), Upsert());
    REQUIRE(r.ok());
    CHECK(r->matched == 1);
    CHECK_FALSE(r->upserted_id.has_value());
    auto gen = t.value()->UpdateOne("c", J(R"({"g": 1})"), J(R"({"$currentDate": {"when": true}})"),
                                    Upsert());
    REQUIRE(gen.ok());
    REQUIRE(t.value()->Commit().ok());
  }
  db.Reopen();
  CHECK(Json(db->Get("c", V("1")).value()) == Json(J(R"({"_id": 1, "n": 2})")));
  Document g = Only(db, R"({"g": 1})");
  CHECK(g.Get("when").value().type() == BSON_TYPE_DATE_TIME);
}

TEST_CASE("update operators through the DB keep indexes in step", "[update]") {
  TestDB db(Fast());
  REQUIRE(db->CreateIndex("c", "tags").ok());
  REQUIRE(db->CreateIndex("c", "n").ok());
  REQUIRE(db->CreateIndex("c", "m").ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "tags": ["a", "b"], "n": 3})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 2, "tags": ["b"], "n": 10})")).ok());
  REQUIRE(
      db->UpdateMany("c", J("{}"), J(R"({"$addToSet": {"tags": "c"}, "$mul": {"n": 2}})")).ok());
  CHECK(db->Count("c", J(R"({"tags": "c"})")).value() == 2);
  CHECK(db->Count("c", J(R"({"n": 20})")).value() == 1);
  REQUIRE(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$pull": {"tags": {"$in": ["a", "c"]}}})"))
              .ok());
  CHECK(db->Count("c", J(R"({"tags": "a"})")).value() == 0);
  REQUIRE(db->UpdateOne("c", J(R"({"_id": 2})"), J(R"({"$rename": {"n": "m"}})")).ok());
  CHECK(db->Count("c", J(R"({"m": 20})")).value() == 1);
  CHECK(db->Count("c", J(R"({"n": 20})")).value() == 0);
  // The positional $: the element the filter matched.
  REQUIRE(
      db->UpdateOne("c", J(R"({"_id": 2, "tags": "c"})"), J(R"({"$set": {"tags.$": "z"}})")).ok());
  CHECK(Json(db->Get("c", V("2")).value()) ==
        Json(J(R"({"_id": 2, "tags": ["b", "z"], "m": 20})")));
  CHECK(db->Count("c", J(R"({"tags": "z"})")).value() == 1);
  // By _id only: no element for the positional $.
  auto r = db->UpdateOne("c", J(R"({"_id": 2})"), J(R"({"$set": {"tags.$": "y"}})"));
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message().find("tags.$") != std::string::npos);
  // Errors change nothing: $push on a non-array of one of two documents.
  REQUIRE(db->Insert("c", J(R"({"_id": 3, "tags": "scalar"})")).ok());
  r = db->UpdateMany("c", J("{}"), J(R"({"$push": {"tags": "new"}})"));
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message().find("tags") != std::string::npos);
  CHECK(db->Count("c", J(R"({"tags": "new"})")).value() == 0);
}

}  // namespace
