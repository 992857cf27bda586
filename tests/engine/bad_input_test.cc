// Bad input through the API: each case gets a clear
// error (the right code, a message naming the problem) and nothing
// committed before it is lost: every test starts from committed data and
// checks it after the error (and TestDB runs DB::Check at the end).
#include <bson/bson.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "mmdoc/db.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

namespace mmdoc::test {
namespace {

bool Has(const Status& s, const std::string& part) {
  return s.ToString().find(part) != std::string::npos;
}

// Commits three documents and a unique index on k.
void Seed3(TestDB& db) {
  IndexOptions u;
  u.unique = true;
  REQUIRE(db->CreateIndex("c", "k", u).ok());
  for (int i = 1; i <= 3; i++)
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"k\": " + std::to_string(i) +
                              ", \"s\": \"x\"}"))
                .ok());
}

void ExpectSeed3(TestDB& db) {
  REQUIRE(db->Count("c").value() == 3);
  for (int i = 1; i <= 3; i++) {
    auto d = db->Get("c", Value::Int32(i));
    REQUIRE(d.ok());
    CHECK(d.value() == J("{\"_id\": " + std::to_string(i) + ", \"k\": " + std::to_string(i) +
                         ", \"s\": \"x\"}"));
  }
}

std::string Nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; i++) s += "{\"a\": ";
  s += "1";
  for (int i = 0; i < depth; i++) s += "}";
  return s;
}

TEST_CASE("bad input: invalid JSON and invalid UTF-8") {
  for (const char* bad : {"", "{", "{\"a\": }", "{\"a\": 1,}", "[1, 2]", "17", "{\"a\": 1} x",
                          "{'a': 1}", "{\"a\": tru}", "{\"a\": 1e999999}"}) {
    auto d = Document::FromJson(bad);
    INFO(bad << ": " << d.status().ToString());
    CHECK(!d.ok());
    CHECK(d.status().IsInvalidArgument());
  }
  auto u = Document::FromJson("{\"a\": \"\xff\xfe\"}");
  CHECK(u.status().IsInvalidArgument());
  auto u2 = Document::FromJson("{\"\xc3\x28\": 1}");
  CHECK(u2.status().IsInvalidArgument());
  CHECK(!Value::FromJson("{").ok());
}

TEST_CASE("bad input: invalid BSON, bad lengths and bad types") {
  auto good = J(R"({"a": 1, "b": "xy"})").bytes();
  auto Bad = [](std::string b) {
    return Document::FromBson(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  };
  CHECK(Bad("").status().IsInvalidArgument());
  CHECK(Bad(std::string(4, '\0')).status().IsInvalidArgument());
  std::string b = good;
  b[0] = static_cast<char>(b[0] + 5);  // length says more than there is
  CHECK(Bad(b).status().IsInvalidArgument());
  b = good;
  b[0] = static_cast<char>(b[0] - 1);  // length says less
  CHECK(Bad(b).status().IsInvalidArgument());
  b = good;
  b.back() = 1;  // no terminating NUL
  CHECK(Bad(b).status().IsInvalidArgument());
  b = good;
  b[4] = static_cast<char>(0x77);  // no such element type
  CHECK(Bad(b).status().IsInvalidArgument());
  b = good;
  b[14] = static_cast<char>(0x7f);  // string length past the end
  CHECK(Bad(b).status().IsInvalidArgument());
  b = good;
  b[b.size() - 3] = static_cast<char>(0xff);  // invalid UTF-8 in a string
  CHECK(Bad(b).status().IsInvalidArgument());
  CHECK(Bad(good).ok());
}

TEST_CASE("bad input: a subdocument or array whose last byte is not 0") {
  // bson_iter stops on such a byte as on the end, and bson_iter_recurse does
  // not check it, so only the validator's own check refuses these.
  struct Case {
    const char* json;
    const char* next_key;  // the key after the nested value; "" when it is last
  };
  for (const Case& c : {Case{R"({"_id": 2, "sub": {"x": 1}, "after": "y"})", "after"},
                        Case{R"({"_id": 2, "arr": [1, 2], "after": "y"})", "after"},
                        Case{R"({"_id": 2, "e": {}, "after": 1})", "after"},
                        Case{R"({"_id": 2, "deep": {"a": {"b": [{}]}}})", ""}}) {
    CAPTURE(c.json);
    std::string b = J(c.json).bytes();
    // The nested value's last byte sits before the next element's type byte,
    // or before the outer document's own last byte.
    const size_t last = *c.next_key != 0 ? b.find(c.next_key) - 2 : b.size() - 2;
    REQUIRE(b[last] == 0);
    b[last] = '@';
    auto d = Document::FromBson(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    CHECK(d.status().IsInvalidArgument());
    CHECK(d.status().ToString().find("0 byte") != std::string::npos);
  }
}

TEST_CASE("bad input: a document over 16 MiB, and just under it") {
  TestDB db;
  Seed3(db);
  std::string big(16u << 20, 'x');
  bson_t b = BSON_INITIALIZER;
  BSON_APPEND_UTF8(&b, "v", big.c_str());
  auto d = Document::FromBson(&b);
  bson_destroy(&b);
  if (d.ok()) {
    Status s = db->Insert("c", d.value());
    INFO(s.ToString());
    CHECK(s.IsInvalidArgument());
    CHECK(Has(s, "16"));
  } else {
    CHECK(d.status().IsInvalidArgument());
  }
  // Just under the limit once _id is added: stored and read back.
  std::string almost((16u << 20) - 100, 'y');
  bson_t a = BSON_INITIALIZER;
  BSON_APPEND_INT32(&a, "_id", 9);
  BSON_APPEND_UTF8(&a, "v", almost.c_str());
  auto ok = Document::FromBson(&a);
  bson_destroy(&a);
  REQUIRE(ok.ok());
  REQUIRE(db->Insert("c", ok.value()).ok());
  CHECK(db->Get("c", Value::Int32(9)).value() == ok.value());
  REQUIRE(db->Delete("c", Value::Int32(9)).ok());
  ExpectSeed3(db);
}

TEST_CASE("bad input: nesting deeper than 100 levels") {
  TestDB db;
  Seed3(db);
  // libbson counts the top level too: 98 nested objects parse, 100 do not.
  CHECK(Document::FromJson(Nested(98)).ok());
  CHECK(!Document::FromJson(Nested(100)).ok());
  auto d = Document::FromJson(Nested(150));
  INFO(d.status().ToString());
  CHECK(d.status().IsInvalidArgument());
  // Deep BSON built directly is rejected by FromBson too.
  bson_t docs[160];
  bson_init(&docs[0]);
  for (int i = 1; i < 160; i++) bson_init(&docs[i]);
  for (int i = 159; i > 0; i--) BSON_APPEND_DOCUMENT(&docs[i - 1], "a", &docs[i]);
  auto deep = Document::FromBson(&docs[0]);
  for (auto& x : docs) bson_destroy(&x);
  CHECK(deep.status().IsInvalidArgument());
  ExpectSeed3(db);
}

TEST_CASE("bad input: an update path that would nest deeper than 100 levels") {
  // Found by fuzz_update: $inc (and $set) create the missing parents of a
  // dotted path, so the path alone could build a document too deep to read.
  TestDB db;
  Seed3(db);
  std::string path = "a";
  for (int i = 0; i < 120; i++) path += ".b";
  for (const char* op : {"$inc", "$set"}) {
    auto r = db->UpdateOne("c", J(R"({"_id": 1})"),
                           J(std::string("{\"") + op + "\": {\"" + path + "\": 1}}"));
    INFO(op << ": " << r.status().ToString());
    CHECK(r.status().IsInvalidArgument());
    CHECK(Has(r.status(), "deeper than 100"));
  }
  // A path that stays within the limit still works.
  std::string ok_path = "a";
  for (int i = 0; i < 50; i++) ok_path += ".b";
  CHECK(db->UpdateOne("c", J(R"({"_id": 2})"), J("{\"$inc\": {\"" + ok_path + "\": 1}}")).ok());
  CHECK(db->UpdateOne("c", J(R"({"_id": 2})"), J("{\"$unset\": {\"a\": 1}}")).ok());
  ExpectSeed3(db);
}

TEST_CASE("bad input: $ field names on insert, replace and update") {
  TestDB db;
  Seed3(db);
  auto d = Document::FromJson(R"({"_id": 7, "$bad": 1})");
  if (d.ok()) {
    Status s = db->Insert("c", d.value());
    INFO(s.ToString());
    CHECK(s.IsInvalidArgument());
    CHECK(Has(s, "$bad"));
    CHECK(db->Replace("c", Value::Int32(1), d.value()).IsInvalidArgument());
  }
  auto nested = Document::FromJson(R"({"_id": 7, "a": {"$x": 1}})");
  if (nested.ok()) CHECK(db->Insert("c", nested.value()).IsInvalidArgument());
  CHECK(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$set": {"$y": 1}})"))
            .status()
            .IsInvalidArgument());
  CHECK(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$set": {"a": {"$y": 1}}})"))
            .status()
            .IsInvalidArgument());
  CHECK(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"a": 1, "$set": {"b": 1}})"))
            .status()
            .IsInvalidArgument());
  ExpectSeed3(db);
}

TEST_CASE("bad input: a DBRef below the top level is stored, found and indexed, other $ keys not") {
  // Found by an outside test: a mongodump with DBRefs could not be
  // imported. MongoDB stores {$ref, $id[, $db]} below the top level.
  TestDB db;
  REQUIRE(db->Insert("c", J(R"({"_id": 1})")).ok());
  const char* ref =
      R"({"$ref": "users", "$id": {"$oid": "5f0000000000000000000001"}, "$db": "app"})";
  REQUIRE(db->Insert("c", J(std::string(R"({"_id": 7, "author": )") + ref + "}")).ok());
  REQUIRE(
      db->Insert("c", J(R"({"_id": 8, "refs": [{"$ref": "users", "$id": 2, "note": "x"}]})")).ok());
  CHECK(
      db->UpdateOne("c", J(R"({"_id": 1})"), J(std::string(R"({"$set": {"author": )") + ref + "}}"))
          .ok());
  REQUIRE(db->CreateIndex("c", "author.$id").ok());
  // Compared as a value, by its fields, and through the index.
  for (const std::string& filter :
       {std::string(R"({"author": )") + ref + "}",
        std::string(R"({"author": {"$eq": )") + ref + "}}",
        std::string(R"({"author": {"$in": [)") + ref + "]}}",
        std::string(R"({"author.$id": {"$oid": "5f0000000000000000000001"}})"),
        std::string(R"({"author.$ref": "users"})")}) {
    CAPTURE(filter);
    auto n = db->Count("c", J(filter));
    REQUIRE(n.ok());
    CHECK(n.value() == 2);
  }
  CHECK(db->Count("c", J(R"({"refs.$id": 2})")).value() == 1);
  CHECK(db->Distinct("c", "author.$ref", J("{}")).value().size() == 1);
  CHECK(db->CreateIndex("c", "author.$x").IsInvalidArgument());
  CHECK(db->CreateIndex("c", "$id").IsInvalidArgument());
  CHECK(db->Get("c", V("7")).value().ToJson().find("\"$ref\"") != std::string::npos);
  // Not a DBRef: refused, and nothing stored.
  for (const char* bad :
       {R"({"_id": 9, "$ref": "users", "$id": 1})",                 // at the top level
        R"({"_id": 9, "a": {"$id": 1, "$ref": "users"}})",          // $id before $ref
        R"({"_id": 9, "a": {"$ref": "users", "x": 1, "$id": 1}})",  // $id not right after
        R"({"_id": 9, "a": {"$ref": 5, "$id": 1}})",                // $ref not a string
        R"({"_id": 9, "a": {"$ref": "u", "$id": 1, "$db": 3}})",    // $db not a string
        R"({"_id": 9, "a": {"$ref": "u", "$id": 1, "$x": 3}})",     // another $ key
        R"({"_id": 9, "a": [{"$ref": "u"}]})",
        R"({"_id": 9, "c": {"$code": "x", "$scope": {"$x": 1}}})"}) {  // a scope is stored
    CAPTURE(bad);
    auto d = Document::FromJson(bad);
    if (!d.ok()) continue;  // the JSON reader refused it itself
    Status s = db->Insert("c", d.value());
    CHECK(s.IsInvalidArgument());
    CHECK(Has(s, "must not start with '$'"));
  }
  CHECK_FALSE(db->Get("c", V("9")).ok());
  // A filter document starting with another $ key is still operators.
  CHECK(
      db->Count("c", J(R"({"author": {"$id": 1, "$ref": "users"}})")).status().IsInvalidArgument());
}

TEST_CASE("bad input: duplicate field names on insert, replace and update") {
  TestDB db;
  Seed3(db);
  Status s = db->Insert("c", J(R"({"_id": 7, "_id": 8})"));
  INFO(s.ToString());
  CHECK(s.IsInvalidArgument());
  CHECK(Has(s, "duplicate field name: _id"));
  CHECK(Has(db->Insert("c", J(R"({"_id": 7, "a": {"b": [{"c": 1, "c": 1}]}})")), "c"));
  CHECK(db->Insert("c", J(R"({"k": 7, "k": 7})")).IsInvalidArgument());
  CHECK(
      db->Replace("c", Value::Int32(1), J(R"({"k": 1, "s": "x", "s": "y"})")).IsInvalidArgument());
  // Two _ids in a replacement: refused, not stored with one dropped.
  CHECK(Has(db->Replace("c", Value::Int32(1), J(R"({"_id": 1, "_id": 2, "k": 9})")),
            "duplicate field name: _id"));
  CHECK(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"k": 1, "s": "x", "s": "y"})"))
            .status()
            .IsInvalidArgument());
  CHECK(db->UpdateMany("c", J("{}"), J(R"({"$set": {"t": {"u": 1, "u": 2}}})"))
            .status()
            .IsInvalidArgument());
  {
    auto t = db->Begin().value();
    CHECK(t->Insert("c", J(R"({"_id": 7, "x": 1, "x": 1})")).IsInvalidArgument());
    REQUIRE(t->Commit().ok());
  }
  CHECK(db->Get("c", Value::Int32(7)).status().IsNotFound());
  ExpectSeed3(db);
}

TEST_CASE("bad input: an index key over the maximum key size") {
  TestDB db;
  Seed3(db);
  const std::string long_k(2000, 'k');
  Status s = db->Insert("c", J("{\"_id\": 4, \"k\": \"" + long_k + "\"}"));
  INFO(s.ToString());
  CHECK(s.IsInvalidArgument());
  CHECK(Has(s, "1024"));
  // A long _id too.
  CHECK(db->Insert("c", J("{\"_id\": \"" + long_k + "\"}")).IsInvalidArgument());
  // An update that would make the key too long.
  CHECK(!db->UpdateOne("c", J(R"({"_id": 1})"), J("{\"$set\": {\"k\": \"" + long_k + "\"}}")).ok());
  // An index build over a document whose field is too long.
  REQUIRE(db->Insert("c", J("{\"_id\": 5, \"z\": \"" + long_k + "\"}")).ok());
  CHECK(!db->CreateIndex("c", "z").ok());
  CHECK(db->ListIndexes("c").value().size() == 1);
  REQUIRE(db->Delete("c", Value::Int32(5)).ok());
  ExpectSeed3(db);
}

TEST_CASE("bad input: duplicate _id and unique-index violations, in and out of transactions") {
  TestDB db;
  Seed3(db);
  Status s = db->Insert("c", J(R"({"_id": 2, "k": 99})"));
  CHECK(s.IsAlreadyExists());
  CHECK(Has(s, "2"));
  s = db->Insert("c", J(R"({"_id": 9, "k": 3})"));
  CHECK(s.IsAlreadyExists());
  CHECK(Has(s, "k"));
  CHECK(db->Replace("c", Value::Int32(1), J(R"({"_id": 1, "k": 2})")).IsAlreadyExists());
  CHECK(db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$set": {"k": 3}})"))
            .status()
            .IsAlreadyExists());
  CHECK(db->UpdateMany("c", J("{}"), J(R"({"$set": {"k": 50}})")).status().IsAlreadyExists());
  {
    // In a transaction: the failed insert leaves the others in it.
    auto t = db->Begin().value();
    REQUIRE(t->Insert("c", J(R"({"_id": 10, "k": 10, "s": "x"})")).ok());
    CHECK(t->Insert("c", J(R"({"_id": 11, "k": 10})")).IsAlreadyExists());
    CHECK(t->Insert("c", J(R"({"_id": 10, "k": 12})")).IsAlreadyExists());
    REQUIRE(t->Delete("c", Value::Int32(10)).ok());
    REQUIRE(t->Commit().ok());
  }
  ExpectSeed3(db);
}

TEST_CASE("bad input: a unique index build over duplicates leaves nothing behind") {
  TestDB db;
  Seed3(db);
  REQUIRE(db->Insert("c", J(R"({"_id": 4, "k": 4, "g": 1})")).ok());
  REQUIRE(db->Insert("c", J(R"({"_id": 5, "k": 5, "g": 1})")).ok());
  IndexOptions u;
  u.unique = true;
  Status s = db->CreateIndex("c", "g", u);
  INFO(s.ToString());
  CHECK(s.IsAlreadyExists());
  CHECK(Has(s, "g"));
  CHECK(db->ListIndexes("c").value().size() == 1);
  {
    auto t = db->Begin().value();
    CHECK(t->CreateIndex("c", "g", u).IsAlreadyExists());
    REQUIRE(t->Insert("c", J(R"({"_id": 6, "k": 6})")).ok());
    REQUIRE(t->Commit().ok());
  }
  CHECK(db->ListIndexes("c").value().size() == 1);
  CHECK(db->Count("c").value() == 6);
  db.Reopen();
  CHECK(db->ListIndexes("c").value().size() == 1);
  for (int i = 4; i <= 6; i++) REQUIRE(db->Delete("c", Value::Int32(i)).ok());
  ExpectSeed3(db);
}

TEST_CASE("bad input: wrong types and unknown operators in filters and updates") {
  TestDB db;
  Seed3(db);
  for (const char* f :
       {R"({"k": {"$foo": 1}})", R"({"$where": "1"})", R"({"k": {"$in": 5}})", R"({"$and": 5})",
        R"({"$or": []})", R"({"k": {"$exists": {"a": 1}}, "x": {"$bad": 1}})",
        R"({"k": {"$gt": 1, "$nin": "x"}})"}) {
    auto r = db->Find("c", J(f));
    INFO(f << ": " << r.status().ToString());
    CHECK(r.status().IsInvalidArgument());
    CHECK(!db->Count("c", J(f)).ok());
    CHECK(db->DeleteMany("c", J(f)).status().IsInvalidArgument());
  }
  for (const char* u :
       {R"({"$foo": {"a": 1}})", R"({"$set": 5})", R"({"$inc": {"k": "x"}})", R"({"$unset": 1})",
        R"({"$set": {"_id": 9}})", R"({"$set": {"": 1}})", R"({"$set": {"a..b": 1}})"}) {
    auto r = db->UpdateOne("c", J(R"({"_id": 1})"), J(u));
    INFO(u << ": " << r.status().ToString());
    CHECK(!r.ok());
    CHECK((r.status().IsInvalidArgument() || r.status().IsNotSupported()));
  }
  // An index field path with an empty part or a part starting with '$',
  // as MongoDB refuses it; no index is left behind.
  for (const char* f : {"$v", "a..b", ".v", "v.", "a.$b", "a.b.$"}) {
    INFO(f);
    CHECK(db->CreateIndex("c", f).IsInvalidArgument());
  }
  CHECK(db->ListIndexes("c").value().size() == 1);  // Seed3's k
  // $inc on a string field fails at apply time.
  CHECK(!db->UpdateOne("c", J(R"({"_id": 1})"), J(R"({"$inc": {"s": 1}})")).ok());
  // An array _id.
  CHECK(db->Insert("c", J(R"({"_id": [1, 2]})")).IsInvalidArgument());
  // Empty, NUL and invalid UTF-8 collection names (the last found by an
  // independent test: `stats --json` then printed invalid JSON).
  CHECK(db->CreateCollection("").IsInvalidArgument());
  CHECK(db->CreateCollection(std::string("a\0b", 3)).IsInvalidArgument());
  CHECK(db->CreateCollection("a\xff"
                             "b")
            .IsInvalidArgument());
  CHECK(db->Insert("a\xc3", J(R"({"_id": 1})")).IsInvalidArgument());
  CHECK(db->CreateCollection("caf\xc3\xa9").ok());
  ExpectSeed3(db);
}

TEST_CASE("bad input: a bad regex or unsupported operator in a write's filter changes nothing") {
  // {"$nin": [{"$regex": ...}]} once compared a regex value by equality,
  // matched every document, and delete --many removed them all. Regexes
  // match now; a bad one, or a bad operand, must still change nothing.
  TestDB db;
  Seed3(db);
  for (const char* f :
       {R"({"s": {"$nin": [{"$regex": "^x("}]}})", R"({"s": {"$ne": {"$regex": "y"}}})",
        R"({"s": {"$not": {"$eq": {"$foo": 1}}}})", R"({"$nor": [{"s": {"$regex": "[y"}}]})",
        R"({"k": {"$gt": 0}, "s": {"$nin": ["y", {"$regex": "z", "$options": "l"}]}})",
        R"({"_id": {"$regex": "("}})", R"({"_id": {"$nin": [{"$regex": "\\"}]}})",
        R"({"$or": [{"k": {"$lt": 0}}, {"$where": "true"}]})", R"({"k": {"$size": -1}})",
        R"({"k": {"$mod": [0, 0]}})", R"({"k": {"$type": "nope"}})", R"({"s": {"$elemMatch": 1}})",
        R"({"s": {"$eq": {"$foo": 1}}})"}) {
    INFO(f);
    for (bool many : {true, false}) {
      auto d = many ? db->DeleteMany("c", J(f)) : db->DeleteOne("c", J(f));
      INFO(d.status().ToString());
      CHECK(d.status().IsInvalidArgument());
      const Document set = J(R"({"$set": {"s": "changed"}})"), replace = J(R"({"k": 9})");
      auto u = many ? db->UpdateMany("c", J(f), set) : db->UpdateOne("c", J(f), set);
      CHECK(u.status().IsInvalidArgument());
      u = many ? db->UpdateMany("c", J(f), replace) : db->UpdateOne("c", J(f), replace);
      CHECK(u.status().IsInvalidArgument());
    }
    {
      auto t = db->Begin().value();
      CHECK(t->DeleteMany("c", J(f)).status().IsInvalidArgument());
      CHECK(t->UpdateMany("c", J(f), J(R"({"$inc": {"k": 1}})")).status().IsInvalidArgument());
      REQUIRE(t->Commit().ok());
    }
    CHECK(db->Find("c", J(f)).status().IsInvalidArgument());
    CHECK(db->Count("c", J(f)).status().IsInvalidArgument());
    ExpectSeed3(db);
  }
  // A regex is a value MongoDB stores; $set and insert keep it as given.
  REQUIRE(db->UpdateOne("c", J(R"({"_id": 2})"),
                        J(R"({"$set": {"r": {"$regex": "^x", "$options": "i"}}})"))
              .ok());
  auto two = db->Get("c", Value::Int32(2));
  REQUIRE(two.ok());
  CHECK(two.value().Get("r").value().type() == BSON_TYPE_REGEX);
  REQUIRE(db->UpdateOne("c", J(R"({"_id": 2})"), J(R"({"$unset": {"r": 1}})")).ok());
  ExpectSeed3(db);
}

TEST_CASE("bad input: a path that is a directory, under a file, or under a missing directory") {
  TempDir dir;
  auto d = DB::Open(dir.path(), Options());
  INFO(d.status().ToString());
  CHECK(!d.ok());
  CHECK(d.status().IsInvalidArgument());

  const std::string file = dir.File("plain");
  std::ofstream(file) << "x";
  auto under_file = DB::Open(file + "/db", Options());
  INFO(under_file.status().ToString());
  CHECK(!under_file.ok());
  CHECK(Has(under_file.status(), file));

  auto missing = DB::Open(dir.File("no/such/dir/db"), Options());
  INFO(missing.status().ToString());
  CHECK(!missing.ok());

  Options no_create;
  no_create.create_if_missing = false;
  CHECK(DB::Open(dir.File("absent"), no_create).status().IsNotFound());

  // A file that is not a database.
  std::ofstream(dir.File("text")) << std::string(10000, 'z');
  auto text = DB::Open(dir.File("text"), Options());
  INFO(text.status().ToString());
  CHECK(text.status().IsCorruption());
  // Bad options.
  Options bad;
  bad.page_size = 1000;
  CHECK(DB::Open(dir.File("p"), bad).status().IsInvalidArgument());
}

TEST_CASE("bad input: a second open of the same database is Busy") {
  TestDB db;
  Seed3(db);
  auto second = DB::Open(db.path(), Options());
  CHECK(second.status().IsBusy());
  ExpectSeed3(db);
}

TEST_CASE("bad input: a durability mode out of range is refused before anything is logged") {
  TestDB db;
  Seed3(db);
  const auto bad = static_cast<Durability>(9);
  WriteOptions wo;
  wo.durability = bad;
  Status s = db->Insert("c", J(R"({"_id": "failed"})"), nullptr, wo);
  CHECK(s.IsInvalidArgument());
  CHECK(Has(s, "durability"));
  CHECK(db->Begin(wo).status().IsInvalidArgument());
  // The database goes on as before, and the refused write never returns.
  REQUIRE(db->Insert("c", J(R"({"_id": "ok"})")).ok());
  db.Reopen();
  CHECK(db->Get("c", Value::String("failed")).status().IsNotFound());
  CHECK(db->Get("c", Value::String("ok")).ok());
  Options o;
  o.durability = bad;
  auto other = DB::Open(db.path() + "-other", o);
  CHECK(other.status().IsInvalidArgument());
  CHECK(Has(other.status(), "durability"));
  REQUIRE(db->Delete("c", Value::String("ok")).ok());
  ExpectSeed3(db);
}

}  // namespace
}  // namespace mmdoc::test
