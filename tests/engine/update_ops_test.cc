// The update operators beyond $set/$unset/$inc ($mul $min $max $rename
// $currentDate $setOnInsert $push $addToSet $pop $pull $pullAll, the
// positional $), case by case against MongoDB's manual, then at random
// against a model of their semantics written independently of update.cc.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/query.h"
#include "engine/update.h"
#include "mmdoc/document.h"
#include "tests/support/test_env.h"

namespace mmdoc::engine {
namespace {

Document D(const std::string& json) {
  auto d = Document::FromJson(json);
  INFO(json << ": " << d.status().ToString());
  REQUIRE(d.ok());
  return d.value();
}

std::string J(const std::string& json) { return D(json).ToJson(); }

// Applies `update` to `doc` (binding `filter` for the positional $); the
// result as JSON, or "parse error: ..." / "error: ...". With `reuse`, the
// update is parsed into it (Update::ParseInto) instead of a new Update.
std::string Apply(const std::string& doc, const std::string& update,
                  const std::string& filter = "{}", Update* reuse = nullptr) {
  Update fresh;
  Update* u = reuse;
  if (reuse != nullptr) {
    const Document doc_of_update = D(update);  // b points into it
    bson_t b;
    doc_of_update.View(&b);
    Status p = Update::ParseInto(&b, reuse);
    if (!p.ok()) return "parse error: " + p.message();
  } else {
    auto parsed = Update::Parse(D(update));
    if (!parsed.ok()) return "parse error: " + parsed.status().message();
    fresh = std::move(parsed.value());
    u = &fresh;
  }
  Status b = u->BindQuery(D(filter));
  if (!b.ok()) return "bind error: " + b.message();
  Document d = D(doc);
  std::string out, slow;
  UpdateContext ctx;
  ctx.now_ms = 1700000000123;
  Status s = u->Apply(d.data(), d.size(), ctx, &out);
  if (!s.ok()) return "error: " + s.message();
  return Document::FromTrustedBytes(out).ToJson();
}

bool IsError(const std::string& r) { return r.rfind("error:", 0) == 0; }
bool IsParseError(const std::string& r) { return r.rfind("parse error:", 0) == 0; }

void ExpectError(const std::string& doc, const std::string& update, const std::string& needle,
                 const std::string& filter = "{}") {
  std::string r = Apply(doc, update, filter);
  INFO(doc << " with " << update << ": " << r);
  CHECK((IsError(r) || IsParseError(r)));
  CHECK(r.find(needle) != std::string::npos);
}

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

TEST_CASE("Update: $mul with $inc's type promotion and overflow", "[update]") {
  CHECK(Apply(R"({"_id": 1, "n": 3})", R"({"$mul": {"n": 4}})") == J(R"({"_id": 1, "n": 12})"));
  CHECK(TypeAt(R"({"_id": 1, "n": 3})", R"({"$mul": {"n": 4}})", "n") == BSON_TYPE_INT32);
  // int32 * int32 past int32: int64, as $inc.
  CHECK(Apply(R"({"_id": 1, "n": 65536})", R"({"$mul": {"n": 65536}})") ==
        J(R"({"_id": 1, "n": {"$numberLong": "4294967296"}})"));
  CHECK(TypeAt(R"({"_id": 1, "n": 65536})", R"({"$mul": {"n": 65536}})", "n") == BSON_TYPE_INT64);
  CHECK(TypeAt(R"({"_id": 1, "n": 2})", R"({"$mul": {"n": {"$numberLong": "2"}}})", "n") ==
        BSON_TYPE_INT64);
  CHECK(TypeAt(R"({"_id": 1, "n": 2})", R"({"$mul": {"n": 1.5}})", "n") == BSON_TYPE_DOUBLE);
  CHECK(Apply(R"({"_id": 1, "n": 2})", R"({"$mul": {"n": 1.5}})") == J(R"({"_id": 1, "n": 3.0})"));
  // int64 overflow is refused, naming the field.
  ExpectError(R"({"_id": 1, "n": {"$numberLong": "4611686018427387904"}})", R"({"$mul": {"n": 2}})",
              "overflow in $mul: n");
  // A missing field becomes 0 of the multiplier's type.
  CHECK(Apply(R"({"_id": 1})", R"({"$mul": {"n": 5}})") == J(R"({"_id": 1, "n": 0})"));
  CHECK(TypeAt(R"({"_id": 1})", R"({"$mul": {"n": {"$numberLong": "5"}}})", "n") ==
        BSON_TYPE_INT64);
  CHECK(TypeAt(R"({"_id": 1})", R"({"$mul": {"a.n": 2.5}})", "a.n") == BSON_TYPE_DOUBLE);
  ExpectError(R"({"_id": 1, "s": "x"})", R"({"$mul": {"s": 2}})", "$mul on a non-number field: s");
  ExpectError(R"({"_id": 1, "n": 1})", R"({"$mul": {"n": "2"}})",
              "$mul needs a number for field: n");
  ExpectError(R"({"_id": 1, "n": 1})", R"({"$mul": {"n": {"$numberDecimal": "2"}}})", "$mul");
}

TEST_CASE("Update: $min and $max compare in BSON order across types", "[update]") {
  CHECK(Apply(R"({"_id": 1, "n": 5})", R"({"$min": {"n": 3}})") == J(R"({"_id": 1, "n": 3})"));
  CHECK(Apply(R"({"_id": 1, "n": 5})", R"({"$min": {"n": 7}})") == J(R"({"_id": 1, "n": 5})"));
  CHECK(Apply(R"({"_id": 1, "n": 5})", R"({"$max": {"n": 7}})") == J(R"({"_id": 1, "n": 7})"));
  CHECK(Apply(R"({"_id": 1})", R"({"$max": {"n": 7}})") == J(R"({"_id": 1, "n": 7})"));
  // Equal numbers of another type: unchanged (MongoDB keeps the old value).
  CHECK(TypeAt(R"({"_id": 1, "n": 5})", R"({"$min": {"n": 5.0}})", "n") == BSON_TYPE_INT32);
  // Numbers < strings < objects; null < numbers.
  CHECK(Apply(R"({"_id": 1, "n": 5})", R"({"$max": {"n": "a"}})") == J(R"({"_id": 1, "n": "a"})"));
  CHECK(Apply(R"({"_id": 1, "n": "a"})", R"({"$min": {"n": 100}})") ==
        J(R"({"_id": 1, "n": 100})"));
  CHECK(Apply(R"({"_id": 1, "n": null})", R"({"$min": {"n": 1}})") ==
        J(R"({"_id": 1, "n": null})"));
  CHECK(Apply(R"({"_id": 1, "d": {"$date": "2020-01-01T00:00:00Z"}})",
              R"({"$max": {"d": {"$date": "2021-01-01T00:00:00Z"}}})") ==
        J(R"({"_id": 1, "d": {"$date": "2021-01-01T00:00:00Z"}})"));
}

TEST_CASE("Update: $rename", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": 1, "b": 2})", R"({"$rename": {"a": "z"}})") ==
        J(R"({"_id": 1, "b": 2, "z": 1})"));
  // Onto an existing field: replaced in place, source removed.
  CHECK(Apply(R"({"_id": 1, "a": 1, "b": 2})", R"({"$rename": {"b": "a"}})") ==
        J(R"({"_id": 1, "a": 2})"));
  // Into and out of subdocuments.
  CHECK(Apply(R"({"_id": 1, "a": {"x": 1, "y": 2}})", R"({"$rename": {"a.x": "b.c"}})") ==
        J(R"({"_id": 1, "a": {"y": 2}, "b": {"c": 1}})"));
  // A missing source: nothing happens, even to the target.
  CHECK(Apply(R"({"_id": 1, "b": 2})", R"({"$rename": {"a": "b"}})") == J(R"({"_id": 1, "b": 2})"));
  // Arrays on the way are refused, as MongoDB does.
  ExpectError(R"({"_id": 1, "a": [{"x": 1}]})", R"({"$rename": {"a.0.x": "b"}})",
              "source lies inside an array");
  ExpectError(R"({"_id": 1, "a": 1, "b": [1]})", R"({"$rename": {"a": "b.0"}})",
              "target lies inside an array");
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$rename": {"a": "a"}})", "same field: a");
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$rename": {"a": "a.b"}})", "same path");
  ExpectError(R"({"_id": 1, "a": {"b": 1}})", R"({"$rename": {"a.b": "a"}})", "same path");
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$rename": {"a": 5}})", "needs a string");
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$rename": {"a": "_id"}})", "_id");
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$rename": {"a": "b"}, "$set": {"b": 1}})",
              "conflicting");
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$rename": {"a": "b.$"}})", "positional");
  // A whole subdocument moves; the renamed value may be an array.
  CHECK(Apply(R"({"_id": 1, "a": {"x": [1, 2]}, "c": 0})", R"({"$rename": {"a": "c"}})") ==
        J(R"({"_id": 1, "c": {"x": [1, 2]}})"));
}

// {"$currentDate": {field: {"$type": type}}}, built as BSON: libbson's JSON
// reader takes {"$type": "..."} for the legacy form of binary data.
Result<Update> CurrentDateType(const char* field, const char* type) {
  bson_t b, op, spec;
  bson_init(&b);
  bson_append_document_begin(&b, "$currentDate", -1, &op);
  bson_append_document_begin(&op, field, -1, &spec);
  bson_append_utf8(&spec, "$type", -1, type, -1);
  bson_append_document_end(&op, &spec);
  bson_append_document_end(&b, &op);
  auto u = Update::Parse(&b);
  bson_destroy(&b);
  return u;
}

std::string ApplyCurrentDateType(const std::string& doc, const char* type) {
  auto u = CurrentDateType("d", type);
  if (!u.ok()) return "parse error: " + u.status().message();
  Document d = D(doc);
  UpdateContext ctx;
  ctx.now_ms = 1700000000123;
  std::string out;
  Status s = u.value().Apply(d.data(), d.size(), ctx, &out);
  if (!s.ok()) return "error: " + s.message();
  return Document::FromTrustedBytes(out).ToJson();
}

TEST_CASE("Update: $currentDate", "[update]") {
  CHECK(Apply(R"({"_id": 1})", R"({"$currentDate": {"d": true}})") ==
        J(R"({"_id": 1, "d": {"$date": {"$numberLong": "1700000000123"}}})"));
  CHECK(ApplyCurrentDateType(R"({"_id": 1, "d": 5})", "date") ==
        J(R"({"_id": 1, "d": {"$date": {"$numberLong": "1700000000123"}}})"));
  CHECK(ApplyCurrentDateType(R"({"_id": 1})", "timestamp") ==
        J(R"({"_id": 1, "d": {"$timestamp": {"t": 1700000000, "i": 1}}})"));
  ExpectError(R"({"_id": 1})", R"({"$currentDate": {"d": 1}})", "$currentDate takes true");
  CHECK(ApplyCurrentDateType(R"({"_id": 1})", "string").find("$currentDate takes true") !=
        std::string::npos);
  // Without a time given, the clock: a date close to now.
  auto u = Update::Parse(D(R"({"$currentDate": {"d": true}})"));
  REQUIRE(u.ok());
  Document d = D(R"({"_id": 1})");
  std::string out;
  REQUIRE(u.value().Apply(d.data(), d.size(), &out).ok());
  bson_value_t v;
  REQUIRE(LookupPath(reinterpret_cast<const uint8_t*>(out.data()), out.size(), "d", &v));
  CHECK(v.value_type == BSON_TYPE_DATE_TIME);
  CHECK(v.value.v_datetime > 1700000000000);
}

TEST_CASE("Update: $setOnInsert applies only when inserting", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": 1})", R"({"$setOnInsert": {"a": 2, "b": 3}})") ==
        J(R"({"_id": 1, "a": 1})"));
  auto u = Update::Parse(D(R"({"$setOnInsert": {"a": 2, "b.c": 3}, "$set": {"x": 1}})"));
  REQUIRE(u.ok());
  std::string out;
  UpdateContext ctx;
  ctx.inserting = true;
  Document d = D(R"({"_id": 1, "a": 1})");
  REQUIRE(u.value().Apply(d.data(), d.size(), ctx, &out).ok());
  CHECK(Document::FromTrustedBytes(out).ToJson() ==
        J(R"({"_id": 1, "a": 2, "b": {"c": 3}, "x": 1})"));
  ExpectError(R"({"_id": 1})", R"({"$setOnInsert": {"a": 1}, "$set": {"a": 2}})", "conflicting");
  // Not inserting, it leaves _id alone: MongoDB allows it.
  CHECK(Apply(R"({"_id": 1})", R"({"$setOnInsert": {"_id": 2}})") == J(R"({"_id": 1})"));
}

TEST_CASE("Update: $push $sort by a field compares its value whole", "[update]") {
  // Found by an outside test: the field's value was taken as a find's sort
  // takes it (an array by its smallest element, paths through arrays), so
  // $slice then kept the wrong elements. MongoDB's $push compares the value
  // whole (an array after every number), through documents and positions.
  CHECK(Apply(R"({"_id": 1, "a": [{"x": [5, 1]}, {"x": 3}, {"x": [2, 4]}]})",
              R"({"$push": {"a": {"$each": [], "$sort": {"x": 1}}}})") ==
        J(R"({"_id": 1, "a": [{"x": 3}, {"x": [2, 4]}, {"x": [5, 1]}]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"x": [{"z": 3}]}, {"x": [{"z": 1}]}]})",
              R"({"$push": {"a": {"$each": [], "$sort": {"x.z": 1}}}})") ==
        J(R"({"_id": 1, "a": [{"x": [{"z": 3}]}, {"x": [{"z": 1}]}]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"x": [1, 9]}, {"x": 5}]})",
              R"({"$push": {"a": {"$each": [{"x": 2}], "$sort": {"x": 1}, "$slice": 2}}})") ==
        J(R"({"_id": 1, "a": [{"x": 2}, {"x": 5}]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"x": [{"z": 3}]}, {"x": [{"z": 1}]}]})",
              R"({"$push": {"a": {"$each": [], "$sort": {"x.0.z": 1}}}})") ==
        J(R"({"_id": 1, "a": [{"x": [{"z": 1}]}, {"x": [{"z": 3}]}]})"));
}

TEST_CASE("Update: $push, $each, $position, $slice, $sort", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": [1, 2]})", R"({"$push": {"a": 3}})") ==
        J(R"({"_id": 1, "a": [1, 2, 3]})"));
  CHECK(Apply(R"({"_id": 1})", R"({"$push": {"a": 3}})") == J(R"({"_id": 1, "a": [3]})"));
  CHECK(Apply(R"({"_id": 1})", R"({"$push": {"x.a": [3]}})") ==
        J(R"({"_id": 1, "x": {"a": [[3]]}})"));
  CHECK(Apply(R"({"_id": 1, "a": [1]})", R"({"$push": {"a": {"$each": [2, 3]}}})") ==
        J(R"({"_id": 1, "a": [1, 2, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1]})", R"({"$push": {"a": {"$each": []}}})") ==
        J(R"({"_id": 1, "a": [1]})"));
  // $position: from the start; negative from the end; past the end appends.
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})",
              R"({"$push": {"a": {"$each": [8, 9], "$position": 0}}})") ==
        J(R"({"_id": 1, "a": [8, 9, 1, 2, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})",
              R"({"$push": {"a": {"$each": [9], "$position": -1}}})") ==
        J(R"({"_id": 1, "a": [1, 2, 9, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})",
              R"({"$push": {"a": {"$each": [9], "$position": -10}}})") ==
        J(R"({"_id": 1, "a": [9, 1, 2, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})",
              R"({"$push": {"a": {"$each": [9], "$position": 10}}})") ==
        J(R"({"_id": 1, "a": [1, 2, 3, 9]})"));
  // $slice: positive keeps the first N, negative the last N, 0 empties.
  CHECK(
      Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$push": {"a": {"$each": [4], "$slice": 2}}})") ==
      J(R"({"_id": 1, "a": [1, 2]})"));
  CHECK(
      Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$push": {"a": {"$each": [4], "$slice": -2}}})") ==
      J(R"({"_id": 1, "a": [3, 4]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})",
              R"({"$push": {"a": {"$each": [4], "$slice": 0}}})") == J(R"({"_id": 1, "a": []})"));
  CHECK(Apply(R"({"_id": 1, "a": [1]})", R"({"$push": {"a": {"$each": [4], "$slice": 10}}})") ==
        J(R"({"_id": 1, "a": [1, 4]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1]})", R"({"$push": {"a": {"$each": [4], "$slice": 1.0}}})") ==
        J(R"({"_id": 1, "a": [1]})"));
  // $sort of whole values, then documents by a field, applied before $slice.
  CHECK(Apply(R"({"_id": 1, "a": [3, 1]})",
              R"({"$push": {"a": {"$each": [2, "s"], "$sort": -1, "$slice": 3}}})") ==
        J(R"({"_id": 1, "a": ["s", 3, 2]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"s": 5, "k": 1}, {"s": 2, "k": 2}]})",
              R"({"$push": {"a": {"$each": [{"s": 3, "k": 3}], "$sort": {"s": 1}}}})") ==
        J(R"({"_id": 1, "a": [{"s": 2, "k": 2}, {"s": 3, "k": 3}, {"s": 5, "k": 1}]})"));
  // The manual's example: top 3 scores.
  CHECK(Apply(R"({"_id": 5, "quizzes": [{"wk": 1, "score": 10}, {"wk": 2, "score": 8}]})",
              R"({"$push": {"quizzes": {"$each": [{"wk": 5, "score": 8}, {"wk": 6, "score": 7}],
                                       "$sort": {"score": -1}, "$slice": 3}}})") ==
        J(R"({"_id": 5, "quizzes": [{"wk": 1, "score": 10}, {"wk": 2, "score": 8},
                                    {"wk": 5, "score": 8}]})"));
  // Errors: a non-array field, bad modifiers.
  ExpectError(R"({"_id": 1, "a": 5})", R"({"$push": {"a": 1}})", "$push of a non-array field: a");
  ExpectError(R"({"_id": 1, "a": "s"})", R"({"$push": {"a": {"$each": [1]}}})", "non-array");
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$each": 1}}})", "$each must be an array");
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$each": [1], "$slice": 1.5}}})", "$slice");
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$each": [1], "$slice": "1"}}})", "$slice");
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$each": [1], "$position": 0.5}}})",
              "$position");
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$each": [1], "$sort": 2}}})", "$sort");
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$each": [1], "$sort": {}}}})", "$sort");
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$each": [1], "$foo": 1}}})",
              "unrecognized clause in $push: $foo");
  // Without $each a document is a value, and '$' field names are refused.
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$slice": 1}}})", "$slice");
  ExpectError(R"({"_id": 1})", R"({"$push": {"a": {"$each": [{"$x": 1}]}}})", "$x");
}

TEST_CASE("Update: $addToSet", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": [1, 2]})", R"({"$addToSet": {"a": 2}})") ==
        J(R"({"_id": 1, "a": [1, 2]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2]})", R"({"$addToSet": {"a": 2.0}})") ==
        J(R"({"_id": 1, "a": [1, 2]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2]})", R"({"$addToSet": {"a": [2]}})") ==
        J(R"({"_id": 1, "a": [1, 2, [2]]})"));
  CHECK(Apply(R"({"_id": 1})", R"({"$addToSet": {"a": {"$each": [3, 3, 4]}}})") ==
        J(R"({"_id": 1, "a": [3, 4]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"x": 1, "y": 2}]})",
              R"({"$addToSet": {"a": {"$each": [{"y": 2, "x": 1}, {"x": 1, "y": 2}]}}})") ==
        J(R"({"_id": 1, "a": [{"x": 1, "y": 2}, {"y": 2, "x": 1}]})"));
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$addToSet": {"a": 1}})",
              "$addToSet of a non-array field: a");
  ExpectError(R"({"_id": 1})", R"({"$addToSet": {"a": {"$each": [1], "$slice": 1}}})",
              "nothing but $each");
  ExpectError(R"({"_id": 1})", R"({"$addToSet": {"a": {"$each": 1}}})", "must be an array");
}

TEST_CASE("Update: $pop", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$pop": {"a": 1}})") ==
        J(R"({"_id": 1, "a": [1, 2]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$pop": {"a": -1}})") ==
        J(R"({"_id": 1, "a": [2, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": []})", R"({"$pop": {"a": 1}})") == J(R"({"_id": 1, "a": []})"));
  CHECK(Apply(R"({"_id": 1})", R"({"$pop": {"a": 1}})") == J(R"({"_id": 1})"));
  CHECK(Apply(R"({"_id": 1, "x": 5})", R"({"$pop": {"x.a": 1}})") == J(R"({"_id": 1, "x": 5})"));
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$pop": {"a": 1}})", "$pop of a non-array field: a");
  ExpectError(R"({"_id": 1})", R"({"$pop": {"a": 2}})", "$pop takes 1 or -1 for field: a");
  ExpectError(R"({"_id": 1})", R"({"$pop": {"a": "1"}})", "$pop");
}

TEST_CASE("Update: $pull by value, by condition, by query on documents", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 1, 3]})", R"({"$pull": {"a": 1}})") ==
        J(R"({"_id": 1, "a": [2, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2.0, {"$numberLong": "2"}]})", R"({"$pull": {"a": 2}})") ==
        J(R"({"_id": 1, "a": [1]})"));
  CHECK(Apply(R"({"_id": 1, "a": [[1], 1, [1, 2]]})", R"({"$pull": {"a": [1]}})") ==
        J(R"({"_id": 1, "a": [1, [1, 2]]})"));
  // The manual's {$gte: 6}.
  CHECK(Apply(R"({"_id": 1, "votes": [3, 5, 6, 7, 7, 8]})",
              R"({"$pull": {"votes": {"$gte": 6}}})") == J(R"({"_id": 1, "votes": [3, 5]})"));
  CHECK(Apply(R"({"_id": 1, "a": ["x", 1, "y"]})", R"({"$pull": {"a": {"$in": ["x", "y"]}}})") ==
        J(R"({"_id": 1, "a": [1]})"));
  // A document without operators is a query on the document elements.
  CHECK(Apply(R"({"_id": 1, "r": [{"item": "A", "score": 5}, {"item": "B", "score": 8}, 8]})",
              R"({"$pull": {"r": {"score": 8, "item": "B"}}})") ==
        J(R"({"_id": 1, "r": [{"item": "A", "score": 5}, 8]})"));
  CHECK(Apply(R"({"_id": 1, "r": [{"s": 1}, {"s": 9}]})",
              R"({"$pull": {"r": {"s": {"$gt": 5}}}})") == J(R"({"_id": 1, "r": [{"s": 1}]})"));
  CHECK(Apply(R"({"_id": 1, "r": [{"s": 1}, 2]})", R"({"$pull": {"r": {}}})") ==
        J(R"({"_id": 1, "r": [2]})"));
  CHECK(Apply(R"({"_id": 1})", R"({"$pull": {"a": 1}})") == J(R"({"_id": 1})"));
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$pull": {"a": 1}})", "$pull of a non-array field: a");
  // What the filter code refuses, $pull refuses, naming the field.
  ExpectError(R"({"_id": 1, "a": []})", R"({"$pull": {"a": {"$where": "x"}}})", "$pull condition");
  ExpectError(R"({"_id": 1, "a": []})", R"({"$pull": {"a": {"$frob": 1}}})", "a");
}

TEST_CASE("Update: $pullAll", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": [0, 2, 5, 5, 1, 0]})", R"({"$pullAll": {"a": [0, 5]}})") ==
        J(R"({"_id": 1, "a": [2, 1]})"));
  CHECK(Apply(R"({"_id": 1, "a": [[1], 1]})", R"({"$pullAll": {"a": [[1]]}})") ==
        J(R"({"_id": 1, "a": [1]})"));
  ExpectError(R"({"_id": 1, "a": [1]})", R"({"$pullAll": {"a": 1}})",
              "$pullAll needs an array for field: a");
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$pullAll": {"a": [1]}})", "non-array field: a");
}

TEST_CASE("Update: the positional $", "[update]") {
  CHECK(Apply(R"({"_id": 1, "grades": [85, 80, 80]})", R"({"$set": {"grades.$": 82}})",
              R"({"_id": 1, "grades": 80})") == J(R"({"_id": 1, "grades": [85, 82, 80]})"));
  CHECK(Apply(R"({"_id": 1, "g": [{"grade": 80, "mean": 75}, {"grade": 85, "mean": 90}]})",
              R"({"$set": {"g.$.std": 6}, "$inc": {"g.$.mean": 1}})", R"({"g.grade": 85})") ==
        J(R"({"_id": 1, "g": [{"grade": 80, "mean": 75}, {"grade": 85, "mean": 91, "std": 6}]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 7, 9]})", R"({"$inc": {"a.$": 100}})",
              R"({"a": {"$gt": 5}})") == J(R"({"_id": 1, "a": [1, 107, 9]})"));
  // Several predicates on the array: the first element matching all.
  CHECK(Apply(R"({"_id": 1, "a": [1, 7, 4]})", R"({"$set": {"a.$": 0}})",
              R"({"a": {"$gt": 2, "$lt": 5}})") == J(R"({"_id": 1, "a": [1, 7, 0]})"));
  // An element that is an array is compared whole.
  CHECK(Apply(R"({"_id": 1, "a": [[5], 5]})", R"({"$set": {"a.$": 0}})", R"({"a": 5})") ==
        J(R"({"_id": 1, "a": [[5], 0]})"));
  CHECK(Apply(R"({"_id": 1, "a": {"b": [1, 2]}})", R"({"$push": {"a.b.$": 9}})", R"({"a.b": 2})")
            .find("non-array field: a.b.$") != std::string::npos);
  CHECK(Apply(R"({"_id": 1, "a": {"b": [1, [2]]}})", R"({"$push": {"a.b.$": 9}})",
              R"({"a.b": [2]})") == J(R"({"_id": 1, "a": {"b": [1, [2, 9]]}})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"x": [1]}, {"x": [2]}]})", R"({"$unset": {"a.$.x": 1}})",
              R"({"a.x": 2})") == J(R"({"_id": 1, "a": [{"x": [1]}, {}]})"));
  // $elemMatch names one element by several fields (MongoDB's manual,
  // "Update Embedded Documents Using Multiple Field Matches"), or by
  // several operators on a scalar element.
  CHECK(Apply(R"({"_id": 1, "a": [{"b": 2, "c": 1}, {"b": 2, "c": 2}, {"b": 1, "c": 2}]})",
              R"({"$set": {"a.$.c": 9}})", R"({"a": {"$elemMatch": {"b": 2, "c": 2}}})") ==
        J(R"({"_id": 1, "a": [{"b": 2, "c": 1}, {"b": 2, "c": 9}, {"b": 1, "c": 2}]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 7, 4]})", R"({"$set": {"a.$": 0}})",
              R"({"a": {"$elemMatch": {"$gt": 2, "$lt": 5}}})") ==
        J(R"({"_id": 1, "a": [1, 7, 0]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"b": 1}, {"b": 2, "c": 3}]})", R"({"$set": {"a.$.d": 1}})",
              R"({"a.c": 3, "a": {"$elemMatch": {"b": {"$gte": 1}}}})") ==
        J(R"({"_id": 1, "a": [{"b": 1}, {"b": 2, "c": 3, "d": 1}]})"));
  ExpectError(R"({"_id": 1, "a": [{"b": 1}]})", R"({"$set": {"a.$.c": 9}})", "positional",
              R"({"a": {"$elemMatch": {"b": 2}}})");
  // No predicate on the array, no matching element, not an array.
  ExpectError(R"({"_id": 1, "a": [1]})", R"({"$set": {"a.$": 0}})", "positional operator", "{}");
  ExpectError(R"({"_id": 1, "a": [1]})", R"({"$set": {"a.$": 0}})", "a.$", R"({"_id": 1})");
  ExpectError(R"({"_id": 1, "a": [1]})", R"({"$set": {"a.$": 0}})", "positional", R"({"a": 2})");
  ExpectError(R"({"_id": 1, "a": 1})", R"({"$set": {"a.$": 0}})", "positional", R"({"a": 1})");
  // "a.$" and "a.0" naming the same element conflict; other elements do not.
  ExpectError(R"({"_id": 1, "a": [1, 2]})", R"({"$set": {"a.$": 0, "a.0": 5}})", "conflicting",
              R"({"a": 1})");
  CHECK(Apply(R"({"_id": 1, "a": [1, 2]})", R"({"$set": {"a.$": 0, "a.0": 5}})", R"({"a": 2})") ==
        J(R"({"_id": 1, "a": [5, 0]})"));
  ExpectError(R"({"_id": 1})", R"({"$set": {"a.$": 0, "b.$": 1}})", "two different arrays");
  ExpectError(R"({"_id": 1})", R"({"$set": {"a.$": 0, "a": 1}})", "conflicting");
  CHECK(Update::Parse(D(R"({"$set": {"a.$": 1}})")).value().has_positional());
  CHECK_FALSE(Update::Parse(D(R"({"$set": {"a.b": 1}})")).value().has_positional());
}

TEST_CASE("Update: the positional $ names no element from a negation", "[update]") {
  // Found by an outside test: element 0 was updated. {a: {$ne: 5}} says no
  // element is 5; taken element by element it named the first one that is
  // not (MongoDB's manual, $ (update), "Negations": refused).
  ExpectError(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$set": {"a.$": 9}})",
              "positional operator cannot name an element from a negation ($ne, $nin, $not)",
              R"({"a": {"$ne": 5}})");
  ExpectError(R"({"_id": 2, "a": [{"x": 1}, {"x": 2}]})", R"({"$set": {"a.$.y": 9}})", "negation",
              R"({"_id": 2, "a.x": {"$nin": [7]}})");
  ExpectError(R"({"_id": 3, "a": [1, 2, 3]})", R"({"$inc": {"a.$": 100}})", "a.$",
              R"({"_id": 3, "a": {"$not": {"$gt": 5}}})");
  // Beside a negation, another predicate on the array names the element.
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$set": {"a.$": 0}})",
              R"({"a": {"$ne": 5, "$gte": 2}})") == J(R"({"_id": 1, "a": [1, 0, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"x": 1}, {"x": 2}]})", R"({"$set": {"a.$.y": 9}})",
              R"({"a.x": {"$nin": [7]}, "a": {"$elemMatch": {"x": 2}}})") ==
        J(R"({"_id": 1, "a": [{"x": 1}, {"x": 2, "y": 9}]})"));
  // Inside $elemMatch a negation holds for the one element it names.
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$set": {"a.$": 0}})",
              R"({"a": {"$elemMatch": {"$ne": 1}}})") == J(R"({"_id": 1, "a": [1, 0, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"x": 1}, {"x": 2}]})", R"({"$set": {"a.$.y": 9}})",
              R"({"a": {"$elemMatch": {"x": {"$not": {"$lt": 2}}}}})") ==
        J(R"({"_id": 1, "a": [{"x": 1}, {"x": 2, "y": 9}]})"));
  // A negation of another field leaves the array's predicate alone.
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3], "b": 0})", R"({"$set": {"a.$": 0}})",
              R"({"b": {"$ne": 1}, "a": 3})") == J(R"({"_id": 1, "a": [1, 2, 0], "b": 0})"));
}

TEST_CASE("Update: the positional $ takes its element through $and, past whole-array predicates",
          "[update]") {
  // Found by an outside test: each was refused ("did not find the match
  // needed from the query") where MongoDB sets the element.
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$set": {"a.$": 9}})",
              R"({"$and": [{"a": 2}]})") == J(R"({"_id": 1, "a": [1, 9, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3], "c": 1})", R"({"$set": {"a.$": 9}})",
              R"({"$and": [{"a": 2}, {"$and": [{"c": 1}]}]})") ==
        J(R"({"_id": 1, "a": [1, 9, 3], "c": 1})"));
  const char* two = R"({"_id": 1, "a": [{"b": 1}, {"b": 2}]})";
  const char* second_set = R"({"_id": 1, "a": [{"b": 1}, {"b": 2, "c": 9}]})";
  for (const char* filter :
       {R"({"a.b": 2, "a": {"$size": 2}})", R"({"a.b": 2, "a": {"$type": "array"}})",
        R"({"a.b": 2, "a": {"$exists": true}})", R"({"a.b": 2, "a.0.b": 1})",
        R"({"a": {"$size": 2}, "$and": [{"a.b": {"$gt": 1}}]})"}) {
    CAPTURE(filter);
    CHECK(Apply(two, R"({"$set": {"a.$.c": 9}})", filter) == J(second_set));
  }
  // Alone, such a predicate names no element.
  ExpectError(two, R"({"$set": {"a.$.c": 9}})", "positional", R"({"a": {"$size": 2}})");
  ExpectError(two, R"({"$set": {"a.$.c": 9}})", "positional", R"({"a.1.b": 2})");
}

TEST_CASE("Update: operators on paths through arrays and non-documents", "[update]") {
  CHECK(Apply(R"({"_id": 1, "a": [[1], [2]]})", R"({"$push": {"a.1": 3}})") ==
        J(R"({"_id": 1, "a": [[1], [2, 3]]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1]})", R"({"$push": {"a.2": 3}})") ==
        J(R"({"_id": 1, "a": [1, null, [3]]})"));
  ExpectError(R"({"_id": 1, "a": 5})", R"({"$push": {"a.b": 1}})", "non-document field: a");
  ExpectError(R"({"_id": 1, "a": 5})", R"({"$max": {"a.b": 1}})", "non-document field: a");
  // Removing operators through a scalar change nothing.
  CHECK(Apply(R"({"_id": 1, "a": 5})", R"({"$pull": {"a.b": 1}, "$pullAll": {"c.d": [1]}})") ==
        J(R"({"_id": 1, "a": 5})"));
}

TEST_CASE("Update: $unset of an array element leaves null, and \"01\" is no index", "[update]") {
  // MongoDB's $unset page: an element is replaced by null, not removed, so
  // the array's keys stay 0..n-1.
  CHECK(Apply(R"({"_id": 1, "a": [1, 2, 3]})", R"({"$unset": {"a.0": ""}})") ==
        J(R"({"_id": 1, "a": [null, 2, 3]})"));
  CHECK(Apply(R"({"_id": 1, "b": [1, 2, 3]})", R"({"$unset": {"b.$": ""}})", R"({"b": 2})") ==
        J(R"({"_id": 1, "b": [1, null, 3]})"));
  CHECK(Apply(R"({"_id": 1, "a": [{"x": 1, "y": 2}]})", R"({"$unset": {"a.0.x": ""}})") ==
        J(R"({"_id": 1, "a": [{"y": 2}]})"));
  CHECK(Apply(R"({"_id": 1, "a": [1]})", R"({"$unset": {"a.5": ""}})") ==
        J(R"({"_id": 1, "a": [1]})"));
  // A leading zero would write a second element "1".
  for (const char* u : {R"({"$set": {"a.01": 7}})", R"({"$inc": {"a.00": 1}})",
                        R"({"$push": {"a.01": 1}})", R"({"$set": {"a.01.b": 1}})"}) {
    CAPTURE(u);
    ExpectError(R"({"_id": 1, "a": [1, 2]})", u, "cannot create field 0");
  }
  CHECK(Apply(R"({"_id": 1, "a": {"01": 1}})", R"({"$set": {"a.01": 7}})") ==
        J(R"({"_id": 1, "a": {"01": 7}})"));
}

TEST_CASE("Update: the operators' paths conflict as MongoDB's do", "[update]") {
  for (const char* u :
       {R"({"$push": {"a": 1}, "$pull": {"a": 1}})", R"({"$push": {"a.b": 1}, "$set": {"a": 1}})",
        R"({"$min": {"a": 1}, "$max": {"a": 1}})",
        R"({"$rename": {"a": "b"}, "$rename": {"c": "b"}})",
        R"({"$rename": {"x": "a.b"}, "$unset": {"a": 1}})",
        R"({"$setOnInsert": {"a": 1}, "$currentDate": {"a": true}})"}) {
    auto p = Update::Parse(D(u));
    INFO(u);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().IsInvalidArgument());
    CHECK(p.status().message().find("conflicting") != std::string::npos);
  }
}

// ------------------------------------------------------------------ model

// A model of the array and number operators on documents of the shape
// {_id, a: [scalars], n: number, s: string, m: ...}, written from MongoDB's
// manual rather than from update.cc. Values are ints (int32 / int64),
// doubles and short strings; comparisons in BSON order (numbers before
// strings, numbers by value).
struct MV {
  enum T { kInt32, kInt64, kDouble, kString } t = kInt32;
  int64_t i = 0;
  double d = 0;
  std::string s;
  bool number() const { return t != kString; }
};

int Cmp(const MV& x, const MV& y) {
  if (x.number() != y.number()) return x.number() ? -1 : 1;
  if (!x.number()) return x.s < y.s ? -1 : x.s > y.s ? 1 : 0;
  if (x.t == MV::kDouble || y.t == MV::kDouble) {
    double a = x.t == MV::kDouble ? x.d : static_cast<double>(x.i);
    double b = y.t == MV::kDouble ? y.d : static_cast<double>(y.i);
    return a < b ? -1 : a > b ? 1 : 0;
  }
  return x.i < y.i ? -1 : x.i > y.i ? 1 : 0;
}

std::string Json(const MV& v) {
  switch (v.t) {
    case MV::kInt32:
      return std::to_string(v.i);
    case MV::kInt64:
      return "{\"$numberLong\": \"" + std::to_string(v.i) + "\"}";
    case MV::kDouble: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "{\"$numberDouble\": \"%.17g\"}", v.d);
      return buf;
    }
    case MV::kString:
      return "\"" + v.s + "\"";
  }
  return "";
}

// A field: missing, a scalar, or an array of scalars.
struct MField {
  std::string name;
  bool array = false;
  MV v;
  std::vector<MV> elems;
};

struct MDoc {
  std::vector<MField> fields;  // after _id, in order

  MField* Find(const std::string& name) {
    for (MField& f : fields) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }
  void Erase(const std::string& name) {
    for (size_t i = 0; i < fields.size(); i++) {
      if (fields[i].name == name) fields.erase(fields.begin() + static_cast<ptrdiff_t>(i));
    }
  }
  // Sets in place, or appends at the end.
  void Put(const MField& f) {
    if (MField* old = Find(f.name)) {
      *old = f;
    } else {
      fields.push_back(f);
    }
  }
  std::string ToJson() const {
    std::string j = "{\"_id\": 1";
    for (const MField& f : fields) {
      j += ", \"" + f.name + "\": ";
      if (!f.array) {
        j += Json(f.v);
        continue;
      }
      j += "[";
      for (size_t i = 0; i < f.elems.size(); i++) j += (i ? ", " : "") + Json(f.elems[i]);
      j += "]";
    }
    return j + "}";
  }
};

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  uint64_t Below(uint64_t n) { return g() % n; }
  bool Coin() { return Below(2) == 0; }
};

MV RandomValue(Rng* r) {
  MV v;
  switch (r->Below(6)) {
    case 0:
      v.t = MV::kInt64;
      v.i = static_cast<int64_t>(r->Below(7)) - 2;
      break;
    case 1:
      v.t = MV::kDouble;
      v.d = static_cast<double>(r->Below(9)) / 2 - 1;
      break;
    case 2:
      v.t = MV::kString;
      v.s = std::string(1, static_cast<char>('a' + r->Below(3)));
      break;
    default:
      v.t = MV::kInt32;
      v.i = static_cast<int64_t>(r->Below(7)) - 2;
  }
  return v;
}

// A number that may overflow when multiplied or added.
MV RandomNumber(Rng* r) {
  MV v = RandomValue(r);
  if (v.t == MV::kString) v.t = MV::kInt32;
  if (r->Below(4) == 0) {
    v.t = r->Coin() ? MV::kInt32 : MV::kInt64;
    v.i = v.t == MV::kInt32 ? (r->Coin() ? INT32_MAX : INT32_MIN + 1)
                            : (r->Coin() ? INT64_MAX / 2 + 1 : INT64_MIN / 3);
  }
  return v;
}

std::string Arr(const std::vector<MV>& vs) {
  std::string j = "[";
  for (size_t i = 0; i < vs.size(); i++) j += (i ? ", " : "") + Json(vs[i]);
  return j + "]";
}

// $inc / $mul in the model; false on an int64 overflow.
bool ModelArith(bool mul, const MV& x, const MV& y, MV* out) {
  if (x.t == MV::kDouble || y.t == MV::kDouble) {
    double a = x.t == MV::kDouble ? x.d : static_cast<double>(x.i);
    double b = y.t == MV::kDouble ? y.d : static_cast<double>(y.i);
    out->t = MV::kDouble;
    out->d = mul ? a * b : a + b;
    return true;
  }
  // 128-bit arithmetic: no overflow in the model itself.
  __int128 r = mul ? static_cast<__int128>(x.i) * y.i : static_cast<__int128>(x.i) + y.i;
  if (x.t == MV::kInt32 && y.t == MV::kInt32 && r >= INT32_MIN && r <= INT32_MAX) {
    out->t = MV::kInt32;
  } else if (r >= INT64_MIN && r <= INT64_MAX) {
    out->t = MV::kInt64;
  } else {
    return false;
  }
  out->i = static_cast<int64_t>(r);
  return true;
}

// One random update and what the model says it does to *doc; returns the
// update's JSON, and sets *error when MongoDB refuses it for this document.
std::string RandomUpdate(Rng* r, MDoc* doc, bool* error) {
  *error = false;
  const std::vector<std::string> names = {"a", "n", "s", "m"};
  const std::string f = names[r->Below(names.size())];
  MField* cur = doc->Find(f);
  auto needs_array = [&]() {
    if (cur != nullptr && !cur->array) *error = true;
    return !*error;
  };
  switch (r->Below(11)) {
    case 0: {  // $push with modifiers
      std::vector<MV> add;
      size_t k = r->Below(4);
      for (size_t i = 0; i < k; i++) add.push_back(RandomValue(r));
      bool each = k != 1 || r->Coin();
      std::string op = each ? "{\"$each\": " + Arr(add) : Json(add[0]);
      bool pos = each && r->Coin(), slice = each && r->Coin(), sort = each && r->Below(3) == 0;
      int64_t position = static_cast<int64_t>(r->Below(9)) - 4;
      int64_t sl = static_cast<int64_t>(r->Below(9)) - 4;
      int dir = r->Coin() ? 1 : -1;
      if (pos) op += ", \"$position\": " + std::to_string(position);
      if (slice) op += ", \"$slice\": " + std::to_string(sl);
      if (sort) op += ", \"$sort\": " + std::to_string(dir);
      if (each) op += "}";
      if (needs_array()) {
        MField nf{f, true, {}, cur ? cur->elems : std::vector<MV>()};
        std::vector<MV>& e = nf.elems;
        int64_t size = static_cast<int64_t>(e.size());
        int64_t at = size;
        if (pos)
          at = position >= 0 ? std::min(position, size) : std::max<int64_t>(0, size + position);
        e.insert(e.begin() + at, add.begin(), add.end());
        if (sort) {
          std::stable_sort(e.begin(), e.end(),
                           [&](const MV& x, const MV& y) { return Cmp(x, y) * dir < 0; });
        }
        if (slice) {
          size_t keep = static_cast<size_t>(sl < 0 ? -sl : sl);
          if (e.size() > keep) {
            if (sl >= 0) {
              e.resize(keep);
            } else {
              e.erase(e.begin(), e.end() - static_cast<ptrdiff_t>(keep));
            }
          }
        }
        doc->Put(nf);
      }
      return "{\"$push\": {\"" + f + "\": " + op + "}}";
    }
    case 1: {  // $addToSet
      std::vector<MV> add;
      size_t k = 1 + r->Below(3);
      for (size_t i = 0; i < k; i++) add.push_back(RandomValue(r));
      bool each = k > 1 || r->Coin();
      if (needs_array()) {
        MField nf{f, true, {}, cur ? cur->elems : std::vector<MV>()};
        for (const MV& v : add) {
          bool present = false;
          for (const MV& e : nf.elems) present = present || Cmp(e, v) == 0;
          if (!present) nf.elems.push_back(v);
        }
        doc->Put(nf);
      }
      return "{\"$addToSet\": {\"" + f +
             "\": " + (each ? "{\"$each\": " + Arr(add) + "}" : Json(add[0])) + "}}";
    }
    case 2: {  // $pop
      int dir = r->Coin() ? 1 : -1;
      if (cur != nullptr && needs_array() && !cur->elems.empty()) {
        if (dir > 0) {
          cur->elems.pop_back();
        } else {
          cur->elems.erase(cur->elems.begin());
        }
      }
      return "{\"$pop\": {\"" + f + "\": " + std::to_string(dir) + "}}";
    }
    case 3: {  // $pull by value or by a comparison
      MV v = RandomValue(r);
      const char* ops[] = {"", "$gte", "$lt", "$ne"};
      std::string op = ops[r->Below(4)];
      if (cur != nullptr && needs_array()) {
        std::vector<MV> kept;
        for (const MV& e : cur->elems) {
          int c = Cmp(e, v);
          bool comparable = e.number() == v.number();
          bool pull = op.empty()     ? c == 0
                      : op == "$gte" ? comparable && c >= 0
                      : op == "$lt"  ? comparable && c < 0
                                     : c != 0;
          if (!pull) kept.push_back(e);
        }
        cur->elems = kept;
      }
      std::string operand = op.empty() ? Json(v) : "{\"" + op + "\": " + Json(v) + "}";
      return "{\"$pull\": {\"" + f + "\": " + operand + "}}";
    }
    case 4: {  // $pullAll
      std::vector<MV> vs;
      for (size_t i = 0, k = r->Below(3); i < k; i++) vs.push_back(RandomValue(r));
      if (cur != nullptr && needs_array()) {
        std::vector<MV> kept;
        for (const MV& e : cur->elems) {
          bool pull = false;
          for (const MV& v : vs) pull = pull || Cmp(e, v) == 0;
          if (!pull) kept.push_back(e);
        }
        cur->elems = kept;
      }
      return "{\"$pullAll\": {\"" + f + "\": " + Arr(vs) + "}}";
    }
    case 5:
    case 6: {  // $min / $max
      bool min = r->Coin();
      MV v = RandomValue(r);
      if (cur == nullptr) {
        doc->Put(MField{f, false, v, {}});
      } else if (!cur->array) {  // arrays sort after numbers and strings
        int c = Cmp(v, cur->v);
        if (min ? c < 0 : c > 0) cur->v = v;
      } else if (min) {
        *cur = MField{f, false, v, {}};
      }
      return std::string("{\"") + (min ? "$min" : "$max") + "\": {\"" + f + "\": " + Json(v) + "}}";
    }
    case 7:
    case 8: {  // $inc / $mul
      bool mul = r->Coin();
      MV v = RandomNumber(r);
      if (cur == nullptr) {
        MV created = v;
        if (mul) created.i = 0, created.d = 0;
        doc->Put(MField{f, false, created, {}});
      } else if (cur->array || !cur->v.number()) {
        *error = true;
      } else {
        MV out;
        if (ModelArith(mul, cur->v, v, &out)) {
          cur->v = out;
        } else {
          *error = true;
        }
      }
      return std::string("{\"") + (mul ? "$mul" : "$inc") + "\": {\"" + f + "\": " + Json(v) + "}}";
    }
    case 9: {  // $rename
      std::string to = names[r->Below(names.size())];
      if (to == f) to = "z";
      if (cur != nullptr) {
        MField moved = *cur;
        moved.name = to;
        doc->Erase(f);
        doc->Put(moved);
      }
      return "{\"$rename\": {\"" + f + "\": \"" + to + "\"}}";
    }
    default: {  // $set / $unset
      if (r->Coin()) {
        doc->Erase(f);
        return "{\"$unset\": {\"" + f + "\": 1}}";
      }
      MField nf{f, r->Coin(), RandomValue(r), {}};
      if (nf.array) {
        for (size_t i = 0, k = r->Below(4); i < k; i++) nf.elems.push_back(RandomValue(r));
      }
      doc->Put(nf);
      return "{\"$set\": {\"" + f + "\": " + (nf.array ? Arr(nf.elems) : Json(nf.v)) + "}}";
    }
  }
}

TEST_CASE("Update: operators against a model of MongoDB's semantics", "[update]") {
  Rng rng(test::Seed("update operators model"));
  const uint64_t rounds = 300 * test::Scale();
  uint64_t errors = 0, applied = 0;
  // Every other update is parsed into this one object, as a writer does
  // (Update::ParseInto), after updates of every other shape and errors.
  Update reused;
  for (uint64_t round = 0; round < rounds; round++) {
    MDoc model;
    std::string current = model.ToJson();
    for (int step = 0; step < 30; step++) {
      MDoc before = model;
      bool error = false;
      std::string update = RandomUpdate(&rng, &model, &error);
      std::string got = Apply(current, update, "{}", rng.Coin() ? &reused : nullptr);
      INFO("document " << current << "\nupdate " << update << "\ngot " << got);
      REQUIRE_FALSE(IsParseError(got));
      if (error) {
        CHECK(IsError(got));
        errors++;
        model = before;  // nothing changed
        continue;
      }
      applied++;
      REQUIRE(got == J(model.ToJson()));
      current = got;
    }
  }
  // Both outcomes were exercised.
  CHECK(errors > rounds);
  CHECK(applied > rounds * 10);
}

// A writer parses every update into one Update (ParseInto), and an update
// of the last one's shape ({$set: {top-level names: scalars}}) only takes
// its values. Updates of a few shapes, in random order, with values that
// keep or break that shape: each gives what a fresh parse gives.
TEST_CASE("Update: ParseInto of updates of one shape in a row agrees with a fresh parse",
          "[update]") {
  Rng rng(test::Seed("update rebind"));
  const std::vector<std::string> shapes = {
      R"({"$set": {"a": V}})",
      R"({"$set": {"a": V}})",
      R"({"$set": {"a": V, "b": V}})",
      R"({"$set": {"b": V, "a": V}})",
      R"({"$set": {"a": V, "a": V}})",
      R"({"$set": {"a": V, "b": V, "c": V}})",
      R"({"$set": {"_id": V}})",
      R"({"$set": {"a.b": V}})",
      R"({"$set": {"$x": V}})",
      R"({"$set": {}})",
      R"({"$unset": {"a": V}})",
      R"({"$set": {"a": V}, "$inc": {"n": 1}})",
      R"({"$inc": {"n": 1}, "$set": {"a": V}})",
      R"({"$set": {"a": V}, "$set": {"b": V}})",
      R"({"a": V})",
  };
  const std::vector<std::string> values = {
      "1",
      "-7",
      "2.5",
      "\"s\"",
      "\"\"",
      "null",
      "true",
      "false",
      R"({"$numberLong": "9"})",
      R"({"d": 1})",
      "[1, 2]",
      "{}",
      "[]",
      R"({"x.y": 1})",
      R"({"$bad": 1})",
  };
  const std::vector<std::string> docs = {
      R"({"_id": 1, "a": 0, "n": 1})",
      R"({"_id": 1, "b": "x", "a": [1]})",
      R"({"_id": 1})",
      R"({"_id": "s", "c": {"d": 1}, "a": {"b": 2}, "n": 2.5})",
  };
  Update reused;
  uint64_t ok = 0, errors = 0;
  for (uint64_t step = 0; step < 3000 * test::Scale(); step++) {
    std::string update = shapes[rng.Below(shapes.size())];
    // Scalars mostly, so that shapes repeat with new values.
    for (size_t at; (at = update.find('V')) != std::string::npos;) {
      update.replace(at, 1, values[rng.Below(rng.Coin() ? 8 : values.size())]);
    }
    const std::string& doc = docs[rng.Below(docs.size())];
    std::string fresh = Apply(doc, update);
    std::string again = Apply(doc, update, "{}", &reused);
    INFO("step " << step << ": " << doc << " with " << update);
    REQUIRE(again == fresh);
    (IsError(fresh) || IsParseError(fresh) ? errors : ok)++;
  }
  CHECK(ok > 1000 * test::Scale());
  CHECK(errors > 100 * test::Scale());
}

}  // namespace
}  // namespace mmdoc::engine
