// FindOneAndUpdate and FindOneAndDelete through the public API: which
// document they pick (the first match, or the first in a sort order), the
// version they return, upserts, errors that change nothing, the same calls
// inside a transaction, and replay after a crash. Every TestDB ends with
// DB::Check.
#include <catch2/catch.hpp>
#include <cerrno>
#include <string>

#include "mmdoc/db.h"
#include "tests/support/fault_fs.h"
#include "tests/support/test_db.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;
using mmdoc::test::V;

namespace {

// Three documents whose `n` order is the reverse of their _id order.
void Fill(TestDB& db) {
  REQUIRE(db->Insert("c", J(R"({"_id": 1, "n": 30, "tag": "a"})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 2, "n": 20, "tag": "a"})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 3, "n": 10, "tag": "b"})")).ok());
}

int64_t N(const Document& d) {
  auto v = d.Get("n");
  REQUIRE(v.ok());
  return v.value().get()->value_type == BSON_TYPE_INT32 ? v.value().get()->value.v_int32
                                                        : v.value().get()->value.v_int64;
}

FindAndModifyOptions SortedByN(int direction = 1) {
  FindAndModifyOptions o;
  o.sort_field = "n";
  o.sort_direction = direction;
  return o;
}

}  // namespace

TEST_CASE("FindOneAndUpdate returns the document before, or after with return_after") {
  TestDB db;
  Fill(db);
  auto before = db->FindOneAndUpdate("c", J(R"({"tag": "a"})"), J(R"({"$inc": {"n": 1}})"));
  REQUIRE(before.ok());
  REQUIRE(before.value().has_value());
  CHECK(N(*before.value()) == 30);  // the first match: _id 1
  CHECK(N(db->Get("c", V("1")).value()) == 31);

  FindAndModifyOptions after;
  after.return_after = true;
  auto r = db->FindOneAndUpdate("c", J(R"({"_id": 1})"), J(R"({"$set": {"tag": "z"}})"), after);
  REQUIRE(r.ok());
  REQUIRE(r.value().has_value());
  CHECK(r.value()->ToJson() == db->Get("c", V("1")).value().ToJson());
  CHECK(N(*r.value()) == 31);
}

TEST_CASE("FindOneAndUpdate and FindOneAndDelete take the first in the sort order") {
  TestDB db;
  Fill(db);
  auto lowest =
      db->FindOneAndUpdate("c", J("{}"), J(R"({"$set": {"picked": true}})"), SortedByN(1));
  REQUIRE(lowest.ok());
  CHECK(N(*lowest.value()) == 10);
  CHECK(db->Get("c", V("3")).value().Get("picked").ok());
  CHECK(!db->Get("c", V("1")).value().Get("picked").ok());

  auto highest = db->FindOneAndDelete("c", J(R"({"tag": "a"})"), SortedByN(-1));
  REQUIRE(highest.ok());
  REQUIRE(highest.value().has_value());
  CHECK(N(*highest.value()) == 30);
  CHECK(db->Get("c", V("1")).status().IsNotFound());
  CHECK(db->Count("c").value() == 2);
}

TEST_CASE("FindOneAndUpdate and FindOneAndDelete with no match return nothing") {
  TestDB db;
  Fill(db);
  auto u = db->FindOneAndUpdate("c", J(R"({"tag": "none"})"), J(R"({"$set": {"x": 1}})"));
  REQUIRE(u.ok());
  CHECK(!u.value().has_value());
  auto d = db->FindOneAndDelete("c", J(R"({"n": {"$gt": 100}})"));
  REQUIRE(d.ok());
  CHECK(!d.value().has_value());
  CHECK(db->Count("c").value() == 3);
  // A missing collection is no match either.
  auto m = db->FindOneAndDelete("nope", J("{}"));
  REQUIRE(m.ok());
  CHECK(!m.value().has_value());
}

TEST_CASE("FindOneAndUpdate with upsert inserts, and returns the new document after") {
  TestDB db;
  Fill(db);
  FindAndModifyOptions o;
  o.upsert = true;
  auto before =
      db->FindOneAndUpdate("c", J(R"({"_id": 7, "tag": "u"})"), J(R"({"$set": {"n": 70}})"), o);
  REQUIRE(before.ok());
  CHECK(!before.value().has_value());  // nothing was there before
  CHECK(N(db->Get("c", V("7")).value()) == 70);

  o.return_after = true;
  auto after =
      db->FindOneAndUpdate("c", J(R"({"tag": "new"})"), J(R"({"$setOnInsert": {"n": 5}})"), o);
  REQUIRE(after.ok());
  REQUIRE(after.value().has_value());
  CHECK(N(*after.value()) == 5);
  auto id = after.value()->Get("_id");
  REQUIRE(id.ok());
  CHECK(db->Get("c", id.value()).value().ToJson() == after.value()->ToJson());
  CHECK(db->Count("c").value() == 5);
}

TEST_CASE("FindOneAndUpdate and FindOneAndDelete return the document projected") {
  TestDB db;
  Fill(db);
  FindAndModifyOptions o;
  o.projection = {"-tag"};
  auto before = db->FindOneAndUpdate("c", J(R"({"_id": 1})"), J(R"({"$set": {"n": 31}})"), o);
  REQUIRE(before.ok());
  REQUIRE(before.value().has_value());
  CHECK(before.value()->ToJson() == J(R"({"_id": 1, "n": 30})").ToJson());
  o.return_after = true;
  o.projection = {"n", "-_id"};
  auto after = db->FindOneAndUpdate("c", J(R"({"_id": 1})"), J(R"({"$inc": {"n": 1}})"), o);
  REQUIRE(after.ok());
  CHECK(after.value()->ToJson() == J(R"({"n": 32})").ToJson());
  o.upsert = true;
  o.projection = {"tag"};
  auto upserted =
      db->FindOneAndUpdate("c", J(R"({"_id": 9})"), J(R"({"$set": {"tag": "u", "n": 1}})"), o);
  REQUIRE(upserted.ok());
  CHECK(upserted.value()->ToJson() == J(R"({"_id": 9, "tag": "u"})").ToJson());
  FindAndModifyOptions d;
  d.projection = {"-n"};
  auto deleted = db->FindOneAndDelete("c", J(R"({"_id": 2})"), d);
  REQUIRE(deleted.ok());
  CHECK(deleted.value()->ToJson() == J(R"({"_id": 2, "tag": "a"})").ToJson());
  // The stored documents are whole; a bad projection changes nothing.
  CHECK(db->Get("c", V("1")).value().ToJson() == J(R"({"_id": 1, "n": 32, "tag": "a"})").ToJson());
  d.projection = {"n", "-tag"};
  CHECK(db->FindOneAndDelete("c", J(R"({"_id": 3})"), d).status().IsInvalidArgument());
  CHECK(db->Count("c").value() == 3);
}

TEST_CASE("FindOneAndUpdate and FindOneAndDelete errors change nothing") {
  TestDB db;
  Fill(db);
  IndexOptions unique;
  unique.unique = true;
  REQUIRE(db->CreateIndex("c", "n", unique).ok());
  const std::string all = db->Find("c", J("{}")).value()[0].ToJson();
  CHECK(db->FindOneAndUpdate("c", J("{}"), J(R"({"$bogus": {"n": 1}})"))
            .status()
            .IsInvalidArgument());
  CHECK(db->FindOneAndUpdate("c", J(R"({"n": {"$nope": 1}})"), J(R"({"$set": {"n": 1}})"))
            .status()
            .IsInvalidArgument());
  CHECK(db->FindOneAndDelete("c", J(R"({"n": {"$nope": 1}})")).status().IsInvalidArgument());
  FindAndModifyOptions bad_sort;
  bad_sort.sort_field = "$x";
  CHECK(db->FindOneAndDelete("c", J("{}"), bad_sort).status().IsInvalidArgument());
  // A unique index violation: _id 1 would take n = 20 from _id 2.
  CHECK(db->FindOneAndUpdate("c", J(R"({"_id": 1})"), J(R"({"$set": {"n": 20}})"))
            .status()
            .IsAlreadyExists());
  CHECK(db->Count("c").value() == 3);
  CHECK(db->Find("c", J("{}")).value()[0].ToJson() == all);
  CHECK(N(db->Get("c", V("1")).value()) == 30);
}

TEST_CASE("FindOneAndUpdate and FindOneAndDelete in a transaction see its own writes") {
  TestDB db;
  Fill(db);
  {
    auto t = db->Begin();
    REQUIRE(t.ok());
    REQUIRE(t.value()->Insert("c", J(R"({"_id": 4, "n": 1})")).ok());
    auto d = t.value()->FindOneAndDelete("c", J("{}"), SortedByN(1));
    REQUIRE(d.ok());
    CHECK(N(*d.value()) == 1);  // the document this transaction inserted
    FindAndModifyOptions after;
    after.return_after = true;
    auto u =
        t.value()->FindOneAndUpdate("c", J(R"({"_id": 3})"), J(R"({"$inc": {"n": 5}})"), after);
    REQUIRE(u.ok());
    CHECK(N(*u.value()) == 15);
    t.value()->Abort();
  }
  CHECK(db->Count("c").value() == 3);
  CHECK(N(db->Get("c", V("3")).value()) == 10);
}

TEST_CASE("FindOneAndUpdate and FindOneAndDelete replay after a crash") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  test::FaultFileSystem fs;
  {
    Options o;
    o.file_system = &fs;
    auto db = DB::Open(path, o);
    REQUIRE(db.ok());
    REQUIRE(db.value()->Insert("c", J(R"({"_id": 2, "n": 20})")).ok());
    REQUIRE(db.value()->Insert("c", J(R"({"_id": 3, "n": 10})")).ok());
    REQUIRE(
        db.value()->FindOneAndUpdate("c", J(R"({"_id": 2})"), J(R"({"$set": {"n": 99}})")).ok());
    REQUIRE(db.value()->FindOneAndDelete("c", J(R"({"_id": 3})")).ok());
    // The crash: the close's checkpoint cannot write, so reopening replays
    // the log.
    fs.FailAll(EIO);
  }
  fs.ClearFaults();
  auto db = DB::Open(path, Options());
  REQUIRE(db.ok());
  CHECK(N(db.value()->Get("c", V("2")).value()) == 99);
  CHECK(db.value()->Get("c", V("3")).status().IsNotFound());
  CHECK(db.value()->Count("c").value() == 1);
  test::RequireCheckPasses(db.value().get());
}
