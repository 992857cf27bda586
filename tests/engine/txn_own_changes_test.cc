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
