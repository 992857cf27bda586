// Update ($set/$unset/$inc, replacement), Projection, PrepareForInsert and
// CheckFieldNames. The other operators: update_ops_test.cc; upserts:
// upsert_test.cc.
#include "engine/update.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/query.h"
#include "mmdoc/document.h"

namespace mmdoc::engine {
namespace {

Document D(const std::string& json) {
  auto d = Document::FromJson(json);
  INFO(json << ": " << d.status().ToString());
  REQUIRE(d.ok());
  return d.value();
}

// Applies `update` to `doc`; returns the result as JSON, or "error: ...".
std::string Apply(const std::string& doc, const std::string& update) {
  auto u = Update::Parse(D(update));
  if (!u.ok()) return "parse error: " + u.status().message();
  Document d = D(doc);
  std::string out;
  Status s = u.value().Apply(d.data(), d.size(), &out);
  if (!s.ok()) return "error: " + s.message();
  return Document::FromTrustedBytes(out).ToJson();
}

std::string J(const std::string& json) { return D(json).ToJson(); }

bson_type_t TypeAt(const std::string& doc, const std::string& update, const char* path) {
  auto u = Update::Parse(D(update));
  REQUIRE(u.ok());
  Document d = D(doc);
  std::string out;
  REQUIRE(u.value().Apply(d.data(), d.size(), &out).ok());
  bson_value_t v;
  REQUIRE(LookupPath(reinterpret_cast<const uint8_t*>(out.data()), out.size(), path, &v));
  return v.value_type;
}

TEST_CASE("Update: $set keeps order, appends new fields, creates documents", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": 1, "b": 2})", R"({"$set": {"a": 10}})") ==
        J(R"({"_id": 1, "a": 10, "b": 2})"));
  CHECK(Apply(R"({"_id": 1, "a": 1})", R"({"$set": {"z": "x", "b": [1]}})") ==
        J(R"({"_id": 1, "a": 1, "b": [1], "z": "x"})"));
  CHECK(
      Apply(R"({"_id": 1, "a": {"x": 1, "y": 2}, "b": 0})", R"({"$set": {"a.x": 5, "a.w": 6}})") ==
      J(R"({"_id": 1, "a": {"x": 5, "y": 2, "w": 6}, "b": 0})"));
  CHECK(Apply(R"({"_id": 1})", R"({"$set": {"p.q.r": true}})") ==
        J(R"({"_id": 1, "p": {"q": {"r": true}}})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$set": {"a.1": "x"}})") ==
        J(R"({"_id": 1, "a": [1, "x", 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1]})", R"({"$set": {"a.3": 4}})") ==
        J(R"({"_id": 1, "a": [1, null, null, 4]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"b": 1}]})", R"({"$set": {"a.0.b": 2}})") ==
        J(R"({"_id": 1, "a": [{"b": 2}]})"));
  CHECK(Apply(R"({"_id": 1, "a": 5})", R"({"$set": {"a.b": 1}})").rfind("error:", 0) == 0);
  CHECK(Apply(R"({"_id": 1, "a": [1]})", R"({"$set": {"a.x": 1}})").rfind("error:", 0) == 0);
  CHECK(Apply(R"({"_id": 1, "a": 1})",
              R"({"$set": {"a": {"n": {"$oid": "0123456789abcdef01234567"}}}})") ==
        J(R"({"_id": 1, "a": {"n": {"$oid": "0123456789abcdef01234567"}}})"));
}

TEST_CASE("Update: new fields come in MongoDB's order, not the update's", "[update]") {
  // Found by an outside test. MongoDB 5.0+ applies an update's fields with
  // names in byte order and number names ("9", "10") by value, and so
  // appends the fields it creates; fields already there keep their place.
  for (bool fast : {true, false}) {
    CAPTURE(fast);
    auto u = Update::Parse(D(R"({"$set": {"z": 1, "a": 1, "m": 1, "n.10": 1, "n.9": 1}})"));
    REQUIRE(u.ok());
    Document d = D(R"({"_id": 1, "m": 0})");
    std::string out;
    REQUIRE(u.value().Apply(d.data(), d.size(), &out, fast).ok());
    CHECK(Document::FromTrustedBytes(out).ToJson() ==
          J(R"({"_id": 1, "m": 1, "a": 1, "n": {"9": 1, "10": 1}, "z": 1})"));
    // Top-level $set only: the byte splice, when fast, gives the same order.
    u = Update::Parse(D(R"({"$set": {"z": 1, "B": 1, "a": 1, "_x": 1}})"));
    REQUIRE(u.ok());
    REQUIRE(u.value().Apply(d.data(), d.size(), &out, fast).ok());
    CHECK(Document::FromTrustedBytes(out).ToJson() ==
          J(R"({"_id": 1, "m": 0, "B": 1, "_x": 1, "a": 1, "z": 1})"));
  }
  // Across operators and levels; in a new subdocument; numbers among names.
  CHECK(Apply(R"({"_id": 1, "s": {"k": 0}})",
              R"({"$inc": {"s.y": 1, "c": 2}, "$set": {"s.b": 3, "b.x": 0, "b.10": 0, "b.B": 0,
                  "b.2": 0}, "$max": {"a": 4}})") ==
        J(R"({"_id": 1, "s": {"k": 0, "b": 3, "y": 1}, "a": 4,
              "b": {"2": 0, "10": 0, "B": 0, "x": 0}, "c": 2})"));
  // "01" is a name, not a number.
  CHECK(Apply(R"({"_id": 1})", R"({"$set": {"n.2": 0, "n.01": 0, "n.10": 0}})") ==
        J(R"({"_id": 1, "n": {"01": 0, "2": 0, "10": 0}})"));
}

TEST_CASE("Update: $unset", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": 1, "b": 2})", R"({"$unset": {"a": ""}})") ==
        J(R"({"_id": 1, "b": 2})"));
  CHECK(Apply(R"({"_id": 1, "a": {"x": 1, "y": 2}})", R"({"$unset": {"a.x": 1}})") ==
        J(R"({"_id": 1, "a": {"y": 2}})"));
  CHECK(Apply(R"({"_id": 1, "a": 1})", R"({"$unset": {"q": 1, "a.b.c": 1}})") ==
        J(R"({"_id": 1, "a": 1})"));
}

TEST_CASE("Update: $inc with MongoDB type promotion", "[update]") {
  CHECK(Apply(R"({"_id": 1, "n": 1})", R"({"$inc": {"n": 2}})") == J(R"({"_id": 1, "n": 3})"));
  CHECK(TypeAt(R"({"_id": 1, "n": 1})", R"({"$inc": {"n": 2}})", "n") == BSON_TYPE_INT32);
  CHECK(TypeAt(R"({"_id": 1, "n": 2147483647})", R"({"$inc": {"n": 1}})", "n") == BSON_TYPE_INT64);
  CHECK(Apply(R"({"_id": 1, "n": 2147483647})", R"({"$inc": {"n": 1}})") ==
        J(R"({"_id": 1, "n": 2147483648})"));
  CHECK(TypeAt(R"({"_id": 1, "n": {"$numberLong": "1"}})", R"({"$inc": {"n": 1}})", "n") ==
        BSON_TYPE_INT64);
  CHECK(TypeAt(R"({"_id": 1, "n": 1})", R"({"$inc": {"n": {"$numberLong": "1"}}})", "n") ==
        BSON_TYPE_INT64);
  CHECK(TypeAt(R"({"_id": 1, "n": 1})", R"({"$inc": {"n": 0.5}})", "n") == BSON_TYPE_DOUBLE);
  CHECK(Apply(R"({"_id": 1, "n": 1})", R"({"$inc": {"n": 0.5}})") == J(R"({"_id": 1, "n": 1.5})"));
  CHECK(Apply(R"({"_id": 1, "n": 1.5})", R"({"$inc": {"n": -2}})") ==
        J(R"({"_id": 1, "n": -0.5})"));
  CHECK(Apply(R"({"_id": 1})", R"({"$inc": {"a.n": 5}})") == J(R"({"_id": 1, "a": {"n": 5}})"));
  CHECK(Apply(R"({"_id": 1, "n": {"$numberLong": "9223372036854775807"}})", R"({"$inc": {"n": 1}})")
            .find("overflow") != std::string::npos);
  std::string e = Apply(R"({"_id": 1, "s": "x"})", R"({"$inc": {"s": 1}})");
  CHECK(e.rfind("error:", 0) == 0);
  CHECK(e.find("s") != std::string::npos);
  CHECK(Apply(R"({"_id": 1, "s": null})", R"({"$inc": {"s": 1}})").rfind("error:", 0) == 0);
  CHECK(Apply(R"({"_id": 1, "n": 1})", R"({"$inc": {"n": "1"}})").rfind("parse error:", 0) == 0);
}

TEST_CASE("Update: combined operators", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": 1, "b": 2, "c": 3})",
              R"({"$set": {"a": 0}, "$unset": {"b": 1}, "$inc": {"c": 1, "d": 1}})") ==
        J(R"({"_id": 1, "a": 0, "c": 4, "d": 1})"));
}

TEST_CASE("Update: bad updates", "[update]") {
  auto bad = [](const std::string& json, const std::string& needle) {
    auto u = Update::Parse(D(json));
    INFO(json);
    REQUIRE_FALSE(u.ok());
    CHECK(u.status().IsInvalidArgument());
    INFO(u.status().message());
    CHECK(u.status().message().find(needle) != std::string::npos);
  };
  bad(R"({"$foo": {"a": 1}})", "unknown update operator $foo");
  bad(R"({"$set": {"b": 1}, "$bit": {"a": {"and": 1}}})", "unsupported update operator $bit");
  bad(R"({"$set": {"a.$[]": 1}})", "a.$[]");
  bad(R"({"$set": {"a.$[x]": 1}})", "not supported");
  bad(R"({"$set": {"a.$.b.$": 1}})", "more than one positional");
  bad(R"({"$set": {"a.$b": 1}})", "a.$b");
  bad(R"({"$inc": {"a": {"$regex": "x"}}})", "$inc needs a number");
  bad(R"({"$set": {"a": 1}, "b": 2})", "mix");
  bad(R"({"$set": 5})", "$set");
  bad(R"({"$rename": {"_id": "a"}})", "$rename cannot move the immutable field _id");
  bad(R"({"$rename": {"a": "_id.x"}})", "$rename cannot replace the immutable field _id");
  bad(R"({"$set": {"a": 1, "a.b": 2}})", "conflicting");
  bad(R"({"$set": {"a.b": 1}, "$unset": {"a": 1}})", "conflicting");
  bad(R"({"$set": {"a": 1}, "$inc": {"a": 1}})", "conflicting");
  bad(R"({"$set": {"a..b": 1}})", "path");
  bad(R"({"$set": {"": 1}})", "an empty update path is not valid");
  bad(R"({"$unset": {"": 1}})", "an empty update path is not valid");
  bad(R"({"$set": {"a": {"$x": 1}}})", "$x");
  bad(R"({"a": {"$x": 1}})", "field names must not start with '$': $x");
}

TEST_CASE("Update: _id may be named, not changed", "[update]") {
  // Found by an outside test: any update naming _id was refused. MongoDB
  // refuses only one that would change it; unchanged means the same bytes
  // here (type included), so the stored _id and its key stay as they were.
  auto apply = [](const std::string& doc, const std::string& update, bool fast) {
    auto u = Update::Parse(D(update));
    if (!u.ok()) return "parse error: " + u.status().message();
    Document d = D(doc);
    std::string out;
    Status s = u.value().Apply(d.data(), d.size(), &out, fast);
    if (!s.ok()) return "error: " + s.message();
    return Document::FromTrustedBytes(out).ToJson();
  };
  for (bool fast : {true, false}) {
    CAPTURE(fast);
    const std::string doc = R"({"_id": 1, "a": 1})";
    CHECK(apply(doc, R"({"$set": {"_id": 1, "a": 2}})", fast) == J(R"({"_id": 1, "a": 2})"));
    CHECK(apply(doc, R"({"$set": {"a": 2, "_id": 1}})", fast) == J(R"({"_id": 1, "a": 2})"));
    for (const char* same :
         {R"({"$inc": {"_id": 0}})", R"({"$min": {"_id": 5}})", R"({"$max": {"_id": 0}})",
          R"({"$mul": {"_id": 1}})", R"({"$setOnInsert": {"_id": 2}})"}) {
      CAPTURE(same);
      CHECK(apply(doc, same, fast) == J(doc));
    }
    CHECK(apply(R"({"_id": {"x": 1, "y": 2}})", R"({"$set": {"_id.x": 1}})", fast) ==
          J(R"({"_id": {"x": 1, "y": 2}})"));
    for (const char* change :
         {R"({"$set": {"_id": 2, "a": 2}})", R"({"$set": {"_id": 1.0}})",
          R"({"$set": {"_id": {"$numberLong": "1"}}})", R"({"$inc": {"_id": 1}})",
          R"({"$inc": {"_id": 0.0}})", R"({"$max": {"_id": 5}})", R"({"$unset": {"_id": 1}})",
          R"({"$currentDate": {"_id": true}})"}) {
      CAPTURE(change);
      CHECK(apply(doc, change, fast) == "error: the update would change the immutable field _id");
    }
    CHECK(apply(R"({"_id": {"x": 1}})", R"({"$set": {"_id.y": 1}})", fast) ==
          "error: the update would change the immutable field _id");
  }
}

TEST_CASE("Update: the top-level splice gives the general rewrite's bytes", "[update]") {
  // {$set/$unset of top-level fields} takes a byte-splicing fast path;
  // Apply(..., fast_paths = false) is the general rewrite. Every shape:
  // replaced in place, grown, shrunk, type changed, missing (appended),
  // unset, duplicated keys in the document, empty documents.
  const std::vector<std::string> docs = {
      R"({"_id": 1})",
      R"({"_id": 1, "a": 1, "b": "xyz", "c": {"d": [1, 2]}})",
      R"({"_id": "k", "value": "0123456789abcdef", "key": "k2", "n": 2.5})",
      R"({"_id": 2, "a": [1, {"b": 2}], "z": null})",
  };
  const std::vector<std::string> updates = {
      R"({"$set": {"a": 2}})",
      R"({"$set": {"b": "a much longer string than before"}})",
      R"({"$set": {"b": ""}})",
      R"({"$set": {"value": "fedcba9876543210"}})",
      R"({"$set": {"a": {"x": [1, 2, {"y": null}]}, "new1": 1, "new2": "s"}})",
      R"({"$unset": {"a": 1, "missing": 1}})",
      R"({"$set": {"c": 1}, "$unset": {"b": ""}})",
      R"({"$set": {}})",
      R"({"$unset": {"_id2": 1}, "$set": {"z": {"$numberLong": "5"}}})",
  };
  for (const std::string& dj : docs) {
    for (const std::string& uj : updates) {
      auto u = Update::Parse(D(uj));
      REQUIRE(u.ok());
      Document d = D(dj);
      std::string fast, slow;
      REQUIRE(u.value().Apply(d.data(), d.size(), &fast).ok());
      REQUIRE(u.value().Apply(d.data(), d.size(), &slow, false).ok());
      INFO(dj << " with " << uj << ": " << Document::FromTrustedBytes(slow).ToJson());
      CHECK(fast == slow);
      CHECK(Document::FromBson(reinterpret_cast<const uint8_t*>(fast.data()), fast.size()).ok());
    }
  }
  // Duplicate keys (valid BSON, not producible from JSON): both replaced.
  bson_t b;
  bson_init(&b);
  BSON_APPEND_INT32(&b, "_id", 1);
  BSON_APPEND_INT32(&b, "a", 1);
  BSON_APPEND_INT32(&b, "a", 2);
  auto u = Update::Parse(D(R"({"$set": {"a": "s"}})"));
  REQUIRE(u.ok());
  std::string fast, slow;
  REQUIRE(u.value().Apply(bson_get_data(&b), b.len, &fast).ok());
  REQUIRE(u.value().Apply(bson_get_data(&b), b.len, &slow, false).ok());
  bson_destroy(&b);
  CHECK(fast == slow);
}

TEST_CASE("Update: the top-level splice with more than 64 fields", "[update]") {
  // The splice marks the fields it found by their place in the update: a
  // mask up to 64, a vector past it.
  std::string doc = R"({"_id": 1)", update = R"({"$set": {)";
  for (int i = 0; i < 80; i++) {
    if (i % 3 == 0) doc += ", \"f" + std::to_string(i) + "\": " + std::to_string(i);
    update += std::string(i == 0 ? "" : ", ") + "\"f" + std::to_string(i) + "\": \"v\"";
  }
  doc += "}";
  update += "}}";
  auto u = Update::Parse(D(update));
  REQUIRE(u.ok());
  Document d = D(doc);
  std::string fast, slow;
  REQUIRE(u.value().Apply(d.data(), d.size(), &fast).ok());
  REQUIRE(u.value().Apply(d.data(), d.size(), &slow, false).ok());
  CHECK(fast == slow);
  CHECK(Document::FromTrustedBytes(fast).ToJson().find(R"("f79" : "v")") != std::string::npos);
}

TEST_CASE("Update: ParseInto one Update gives what a new Parse gives", "[update]") {
  // A writer parses every update into one object; each parse must leave
  // nothing of the one before (operands, modifiers, filters, renames, the
  // positional $, a replacement).
  struct Case {
    std::string update, filter;
  };
  const std::vector<Case> cases = {
      {R"({"$push": {"a": {"$each": [{"k": 2}, {"k": 1}], "$sort": {"k": 1}, "$slice": 3}}})",
       "{}"},
      {R"({"$set": {"a.$.k": 9}})", R"({"a.k": 1})"},
      {R"({"$set": {"b": 1}})", "{}"},
      {R"({"$pull": {"a": {"k": {"$gte": 2}}}})", "{}"},
      {R"({"$rename": {"b": "c"}, "$currentDate": {"d": {"$type": "timestamp"}}})", "{}"},
      {R"({"x": 1, "y": [1, 2]})", "{}"},
      {R"({"$set": {"a": 1, "a.b": 2}})", "{}"},  // refused: conflicting
      {R"({"$inc": {"n": 2}, "$unset": {"b": 1}, "$pop": {"a": -1}})", "{}"},
      {R"({"$addToSet": {"a": {"$each": [3, 3, 4]}}, "$min": {"n": 0}})", "{}"},
      {R"({"$set": {"a.$": 5}})", R"({"a": {"k": 2}})"},
      {R"({"$push": {"a": {"$each": [7], "$position": 0}}, "$mul": {"n": 3}})", "{}"},
  };
  const std::string doc = R"({"_id": 1, "a": [{"k": 2}, {"k": 1}], "b": 2, "n": 5})";
  auto run = [&](Update* u, const Case& c) -> std::string {
    if (!u->BindQuery(D(c.filter)).ok()) return "bind error";
    Document d = D(doc);
    UpdateContext ctx;
    ctx.now_ms = 1700000000123;
    std::string out;
    Status s = u->Apply(d.data(), d.size(), ctx, &out);
    std::string r = s.ok() ? Document::FromTrustedBytes(out).ToJson() : "error: " + s.message();
    for (const char* f : {"a", "a.k", "b", "n", "x"}) r += u->MayChange(f) ? " 1" : " 0";
    return r + (u->is_replacement() ? " replacement" : "") +
           (u->has_positional() ? " positional" : "");
  };
  Update reused;
  // Every case right after every case.
  for (size_t i = 0; i < cases.size(); i++) {
    for (size_t j = 0; j < cases.size(); j++) {
      for (size_t k : {i, j}) {
        const Case& c = cases[k];
        INFO(cases[i].update << " then " << cases[j].update << ": now " << c.update);
        auto fresh = Update::Parse(D(c.update));
        const Document update = D(c.update);  // b points into it
        bson_t b;
        update.View(&b);
        Status s = Update::ParseInto(&b, &reused);
        REQUIRE(s.ok() == fresh.ok());
        if (!s.ok()) {
          CHECK(s.ToString() == fresh.status().ToString());
          // What an error leaves changes nothing.
          Document d = D(doc);
          std::string out;
          REQUIRE(reused.Apply(d.data(), d.size(), &out).ok());
          CHECK(Document::FromTrustedBytes(out).ToJson() == d.ToJson());
          continue;
        }
        CHECK(run(&reused, c) == run(&fresh.value(), c));
      }
    }
  }
}

TEST_CASE("Update: replacement", "[update]") {
  auto u = Update::Parse(D(R"({"x": 1})"));
  REQUIRE(u.ok());
  CHECK(u.value().is_replacement());
  CHECK_FALSE(Update::Parse(D(R"({"$set": {"x": 1}})")).value().is_replacement());
  CHECK(Apply(R"({"_id": 7, "a": 1, "b": 2})", R"({"c": 3})") == J(R"({"_id": 7, "c": 3})"));
  CHECK(Apply(R"({"_id": 7, "a": 1})", R"({"c": 3, "_id": 7})") == J(R"({"_id": 7, "c": 3})"));
  CHECK(Apply(R"({"_id": 7, "a": 1})", R"({"_id": 8})").find("_id") != std::string::npos);
  CHECK(Apply(R"({"_id": 7, "a": 1})", R"({})") == J(R"({"_id": 7})"));
}

TEST_CASE("Update: result over 16 MiB is refused", "[update]") {
  std::string big(kMaxDocumentSize / 2 + 10, 'x');
  Document d = D("{\"_id\": 1, \"a\": \"" + big + "\"}");
  bson_t b;
  bson_init(&b);
  bson_t set;
  bson_append_document_begin(&b, "$set", 4, &set);
  bson_append_utf8(&set, "b", 1, big.data(), static_cast<int>(big.size()));
  bson_append_document_end(&b, &set);
  auto u = Update::Parse(&b);
  bson_destroy(&b);
  REQUIRE(u.ok());
  std::string out;
  Status s = u.value().Apply(d.data(), d.size(), &out);
  CHECK(s.IsInvalidArgument());
  CHECK(s.message().find("16 MiB") != std::string::npos);
}

// ------------------------------------------------------------ projection

std::string Project(const std::vector<std::string>& fields, const std::string& doc) {
  auto p = Projection::Parse(fields);
  REQUIRE(p.ok());
  Document d = D(doc);
  std::string out;
  p.value().Apply(d.data(), d.size(), &out);
  return Document::FromTrustedBytes(out).ToJson();
}

TEST_CASE("Projection", "[update]") {
  const std::string doc =
      R"({"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "f": 5}, 6], "g": 7})";
  CHECK(Project({"g", "a"}, doc) == J(R"({"_id": 1, "a": 1, "g": 7})"));
  CHECK(Project({"b.d"}, doc) == J(R"({"_id": 1, "b": {"d": 3}})"));
  CHECK(Project({"e.c"}, doc) == J(R"({"_id": 1, "e": [{"c": 4}]})"));
  // Arrays in arrays are projected into, as find's projection does (found
  // by an outside test: they were dropped); their scalars go.
  CHECK(
      Project({"e.c"},
              R"({"_id": 1, "e": [{"c": 4, "f": 5}, [{"c": 7, "f": 8}, 9, [[{"c": 1}]]], [6]]})") ==
      J(R"({"_id": 1, "e": [{"c": 4}, [{"c": 7}, [[{"c": 1}]]], []]})"));
  CHECK(Project({"zz"}, doc) == J(R"({"_id": 1})"));
  CHECK(Project({}, doc) == J(doc));
  CHECK(Projection::Parse({}).value().empty());
  CHECK_FALSE(Projection::Parse({"a..b"}).ok());
  CHECK_FALSE(Projection::Parse({""}).ok());
  // _id: kept unless dropped, whichever kind the projection is.
  CHECK(Project({"a", "-_id"}, doc) == J(R"({"a": 1})"));
  CHECK(Project({"_id"}, doc) == J(R"({"_id": 1})"));
  // Parts of _id, as any field's (found by an outside test: _id came whole).
  const std::string compound = R"({"_id": {"x": 1, "y": 2}, "a": 1})";
  CHECK(Project({"_id.x"}, compound) == J(R"({"_id": {"x": 1}})"));
  CHECK(Project({"_id.x", "a"}, compound) == J(R"({"_id": {"x": 1}, "a": 1})"));
  CHECK(Project({"_id.z"}, compound) == J(R"({"_id": {}})"));
  CHECK(Project({"_id.x"}, doc) == J(R"({})"));  // a scalar _id has no x
  CHECK(Project({"-_id.x"}, compound) == J(R"({"_id": {"y": 2}, "a": 1})"));
}

TEST_CASE("Projection: a path below another one is a collision, as MongoDB 4.4's", "[update]") {
  // Found by an outside test: {b: 1, "b.c": 1} came back as {b: 1}.
  for (const std::vector<std::string>& fields :
       std::vector<std::vector<std::string>>{{"b", "b.c"},
                                             {"b.c", "a", "b"},
                                             {"-b", "-b.c.d"},
                                             {"_id.x", "-_id"},
                                             {"_id", "_id.x"}}) {
    auto p = Projection::Parse(fields);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().IsInvalidArgument());
    CHECK(p.status().message().find("path collision at") != std::string::npos);
  }
  // Not a collision: a shared prefix that is not a whole part, or one path twice.
  CHECK(Projection::Parse({"b", "bc", "b-c"}).ok());
  CHECK(Projection::Parse({"a.b", "a.c"}).ok());
  CHECK(Projection::Parse({"a", "a"}).ok());
}

TEST_CASE("Projection: dropping fields, as MongoDB's {field: 0}", "[update]") {
  const std::string doc =
      R"({"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "f": 5}, 6, [{"c": 7, "f": 8}]], "g": 7})";
  CHECK(Project({"-a", "-g"}, doc) ==
        J(R"({"_id": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "f": 5}, 6, [{"c": 7, "f": 8}]]})"));
  CHECK(
      Project({"-b.d"}, doc) ==
      J(R"({"_id": 1, "a": 1, "b": {"c": 2}, "e": [{"c": 4, "f": 5}, 6, [{"c": 7, "f": 8}]], "g": 7})"));
  // In an array each document loses the field; other elements stay.
  CHECK(Project({"-e.c"}, doc) ==
        J(R"({"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 5}, 6, [{"f": 8}]], "g": 7})"));
  // A path through a scalar or a missing field drops nothing.
  CHECK(Project({"-a.x", "-zz.y"}, doc) == J(doc));
  CHECK(Project({"-b", "-e", "-a", "-g"}, doc) == J(R"({"_id": 1})"));
  CHECK(
      Project({"-_id"}, doc) ==
      J(R"({"a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "f": 5}, 6, [{"c": 7, "f": 8}]], "g": 7})"));
  CHECK(Project({"-_id", "-b", "-e", "-g"}, doc) == J(R"({"a": 1})"));
  CHECK(Project({"_id", "-a", "-b", "-e"}, doc) == J(R"({"_id": 1, "g": 7})"));  // {_id: 1, a: 0}
  CHECK_FALSE(Projection::Parse({"-_id"}).value().empty());
  // Keeping and dropping fields other than _id in one projection.
  auto mixed = Projection::Parse({"a", "-b"});
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.status().IsInvalidArgument());
  CHECK(mixed.status().message().find("cannot both keep and drop") != std::string::npos);
  CHECK_FALSE(Projection::Parse({"_id", "-_id"}).ok());
  CHECK_FALSE(Projection::Parse({"-"}).ok());
  CHECK_FALSE(Projection::Parse({"-a..b"}).ok());
  CHECK_FALSE(Projection::Parse({"-$a"}).ok());
}

TEST_CASE("Projection: bad field paths are InvalidArgument naming the field", "[update]") {
  // these used to be accepted and project to {_id}.
  auto bad = [](const std::string& field, const std::string& needle) {
    auto p = Projection::Parse({"a", field});
    INFO("'" << field << "'");
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().IsInvalidArgument());
    INFO(p.status().message());
    CHECK(p.status().message().find(needle) != std::string::npos);
    CHECK(p.status().message().find(field) != std::string::npos);
  };
  bad("-b", "cannot both keep and drop fields");
  bad("$a", "$a");
  bad("a.$", "a.$");
  bad("a.$b", "a.$b");
  bad("a..b", "a..b");
  bad(".a", ".a");
  bad("a.", "a.");
  auto empty = Projection::Parse({""});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().IsInvalidArgument());
  // Names that merely contain these characters are fields.
  CHECK(Projection::Parse({"a-b", "a$", "_id", "x.y-z"}).ok());
}

// ------------------------------------------------------------ insert

TEST_CASE("PrepareForInsert", "[update]") {
  std::string out;
  Value id;
  REQUIRE(PrepareForInsert(D(R"({"a": 1, "_id": "k", "b": 2})"), &out, &id).ok());
  CHECK(Document::FromTrustedBytes(out).ToJson() == J(R"({"_id": "k", "a": 1, "b": 2})"));
  CHECK(id.ToJson() == "\"k\"");
  REQUIRE(PrepareForInsert(D(R"({"a": 1})"), &out, &id).ok());
  CHECK(id.type() == BSON_TYPE_OID);
  bson_value_t v;
  REQUIRE(LookupPath(reinterpret_cast<const uint8_t*>(out.data()), out.size(), "_id", &v));
  CHECK(CompareValues(&v, id.get()) == 0);
  std::string out2;
  Value id2;
  REQUIRE(PrepareForInsert(D(R"({"a": 1})"), &out2, &id2).ok());
  CHECK(id2 != id);  // fresh ObjectIds
  CHECK(PrepareForInsert(D(R"({"_id": [1]})"), &out, &id).IsInvalidArgument());
  CHECK(PrepareForInsert(D(R"({"_id": {"$undefined": true}})"), &out, &id).IsInvalidArgument());
  CHECK(PrepareForInsert(D(R"({"_id": {"$regularExpression": {"pattern": "a", "options": ""}}})"),
                         &out, &id)
            .IsInvalidArgument());
  Status s = PrepareForInsert(D(R"({"a": {"b": [{"$foo": 1}]}})"), &out, &id);
  CHECK(s.IsInvalidArgument());
  CHECK(s.message() == "field names must not start with '$': $foo");
  CHECK(PrepareForInsert(D(R"({"_id": {"x": 1}})"), &out, &id).ok());
}

TEST_CASE("CheckFieldNames", "[update]") {
  Document ok = D(R"({"a": {"b": [1, {"c": 2}]}})");
  CHECK(CheckFieldNames(ok.data(), ok.size()).ok());
  Document bad = D(R"({"a": {"b": [1, {"$c": 2}]}})");
  CHECK(CheckFieldNames(bad.data(), bad.size()).IsInvalidArgument());
}

// A random document of every BSON type, with names that sometimes start
// with '$' or repeat, `depth` levels deep at most.
void RandomDoc(std::mt19937_64* rng, bson_t* b, int depth, bool array) {
  const int n = static_cast<int>((*rng)() % (depth > 2 ? 4 : 20));
  const char* names[] = {"a", "b", "$c", "_id", "", "$ref", "$id", "x.y"};
  for (int i = 0; i < n; i++) {
    std::string key = array ? std::to_string(i) : names[(*rng)() % 8];
    if (!array && (*rng)() % 2) key += std::to_string(i);
    const char* k = key.c_str();
    bson_t child;
    switch ((*rng)() % 16) {
      case 0:
        BSON_APPEND_DOUBLE(b, k, 1.5);
        break;
      case 1:
        BSON_APPEND_UTF8(b, k, "text");
        break;
      case 2:
      case 3:
        if (depth < 5) {
          const bool arr = (*rng)() % 2;
          if (arr)
            BSON_APPEND_ARRAY_BEGIN(b, k, &child);
          else
            BSON_APPEND_DOCUMENT_BEGIN(b, k, &child);
          RandomDoc(rng, &child, depth + 1, arr);
          if (arr)
            bson_append_array_end(b, &child);
          else
            bson_append_document_end(b, &child);
        }
        break;
      case 4:
        BSON_APPEND_INT32(b, k, 7);
        break;
      case 5:
        BSON_APPEND_INT64(b, k, 7);
        break;
      case 6:
        BSON_APPEND_BOOL(b, k, true);
        break;
      case 7:
        BSON_APPEND_NULL(b, k);
        break;
      case 8:
        BSON_APPEND_DATE_TIME(b, k, 1);
        break;
      case 9: {
        bson_oid_t oid;
        bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
        BSON_APPEND_OID(b, k, &oid);
        break;
      }
      case 10:
        BSON_APPEND_BINARY(b, k, BSON_SUBTYPE_BINARY, reinterpret_cast<const uint8_t*>("ab"), 2);
        break;
      case 11:
        BSON_APPEND_REGEX(b, k, "a.*", "i");
        break;
      case 12:
        BSON_APPEND_TIMESTAMP(b, k, 1, 2);
        break;
      case 13:
        BSON_APPEND_CODE(b, k, "f()");
        break;
      case 14:
        BSON_APPEND_MINKEY(b, k);
        break;
      default: {
        bson_t scope;
        bson_init(&scope);
        BSON_APPEND_INT32(&scope, (*rng)() % 2 ? "$s" : "s", 1);
        BSON_APPEND_CODE_WITH_SCOPE(b, k, "g()", &scope);
        bson_destroy(&scope);
      }
    }
  }
}

TEST_CASE("CheckFieldNames: the fast walk gives libbson's answer", "[update]") {
  // Random documents, then the same bytes damaged: the fast walk may only
  // say "not sure", never a different answer, and never reads out of bounds.
  std::mt19937_64 rng(Catch::rngSeed());
  int fast = 0;
  for (int round = 0; round < 3000; round++) {
    bson_t b;
    bson_init(&b);
    RandomDoc(&rng, &b, 1, false);
    std::string bytes(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
    bson_destroy(&b);
    for (int damage = 0; damage < 4; damage++) {
      if (damage == 1 && !bytes.empty())
        bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
      if (damage == 2) bytes.resize(rng() % (bytes.size() + 1));
      if (damage == 3 && !bytes.empty()) bytes[rng() % bytes.size()] = 0;
      const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
      Status quick = CheckFieldNames(p, bytes.size());
      Status slow = CheckFieldNamesSlowly(p, bytes.size());
      INFO("round " << round << ", damage " << damage);
      CHECK(quick.ToString() == slow.ToString());
      if (damage == 0 && quick.ok()) fast++;
    }
  }
  CHECK(fast > 100);  // the comparison covered documents that pass, not only refusals
}

// {"k0": 0, ..., "k<n-1>": n-1}, then `extra` (JSON members) if any.
std::string ManyFields(int n, const std::string& extra) {
  std::string s = "{";
  for (int i = 0; i < n; i++)
    s += (i ? ", \"k" : "\"k") + std::to_string(i) + "\": " + std::to_string(i);
  if (!extra.empty()) s += (n ? ", " : "") + extra;
  return s + "}";
}

TEST_CASE("CheckFieldNames: duplicate field names at any depth", "[update]") {
  // {"_id": 1, "_id": 2} was stored as given; get
  // returned both, find and $set each saw a different one.
  auto dup = [](const std::string& json, const std::string& name) {
    Document d = D(json);
    Status s = CheckFieldNames(d.data(), d.size());
    INFO(json.substr(0, 200) << ": " << s.ToString());
    CHECK(s.IsInvalidArgument());
    CHECK(s.message() == "duplicate field name: " + name);
    std::string out;
    Value id;
    CHECK(PrepareForInsert(d, &out, &id).IsInvalidArgument());
  };
  dup(R"({"_id": 1, "_id": 2})", "_id");
  dup(R"({"_id": 1, "a": 1, "b": 2, "a": 1})", "a");
  dup(R"({"a": {"x": 1, "y": {"z": 1, "z": {"q": 1}}}})", "z");
  dup(R"({"a": [1, {"b": 1, "c": 2, "b": 3}]})", "b");
  dup(R"({"a": [[{"": 1, "": 2}]]})", R"("")");
  // Past the linear scan's reach: the first, a middle and the last key.
  for (int n : {15, 16, 17, 40, 255, 256, 257, 600}) {
    dup(ManyFields(n, R"("k0": 9)"), "k0");
    dup(ManyFields(n, "\"k" + std::to_string(n / 2) + "\": 9"), "k" + std::to_string(n / 2));
    dup(ManyFields(n, R"("z": 1, "z": 2)"), "z");
    dup("{\"a\": [" + ManyFields(n, R"("z": 1, "z": 2)") + "]}", "z");
    Document fine = D(ManyFields(n, R"("z": {"k1": 1}, "y": [1, 1])"));
    CHECK(CheckFieldNames(fine.data(), fine.size()).ok());
  }
  // The same name at different levels or in sibling documents is fine, as
  // are an array's keys (never names).
  Document fine = D(R"({"a": {"a": {"a": 1}}, "b": [{"a": 1}, {"a": 2}], "c": {"a": 1}})");
  CHECK(CheckFieldNames(fine.data(), fine.size()).ok());
  bson_t b, arr;
  bson_init(&b);
  BSON_APPEND_ARRAY_BEGIN(&b, "a", &arr);
  BSON_APPEND_INT32(&arr, "0", 1);
  BSON_APPEND_INT32(&arr, "0", 2);
  bson_append_array_end(&b, &arr);
  CHECK(CheckFieldNames(bson_get_data(&b), b.len).ok());
  bson_destroy(&b);
  // Updates: a replacement, a $set value.
  for (const char* u : {R"({"x": 1, "x": 2})", R"({"$set": {"a": {"b": 1, "b": 2}}})",
                        R"({"$set": {"a": [{"b": 1, "b": 2}]}})"}) {
    auto p = Update::Parse(D(u));
    INFO(u);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().message().find("duplicate field name") != std::string::npos);
  }
  // Filters may name a field twice (both conditions hold).
  CHECK(Filter::Parse(D(R"({"a": {"$gt": 1}, "a": {"$lt": 5}})")).ok());
}

}  // namespace
}  // namespace mmdoc::engine
