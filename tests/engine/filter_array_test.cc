// Filter: $regex, $elemMatch, $size, $all, $type, $not and $mod. Each
// operator against fixed documents, bad operands, and a randomized
// comparison with a model of MongoDB's semantics written here apart from
// filter.cc: Filter::Matches, the soundness of IndexBounds, and Find on a
// collection with indexes against one without.
#include <bson/bson.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/query.h"
#include "mmdoc/db.h"
#include "mmdoc/document.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

namespace mmdoc::engine {
namespace {

using test::J;

Filter F(const std::string& json) {
  auto f = Filter::Parse(J(json));
  INFO(json << ": " << f.status().ToString());
  REQUIRE(f.ok());
  return std::move(f).value();
}

bool M(const std::string& filter, const std::string& doc) {
  Document d = J(doc);
  return F(filter).Matches(d.data(), d.size());
}

// Filter::Parse of a filter built with libbson (what JSON cannot say: a
// "$regex" string key beside others, a numeric $type); destroys it.
Result<Filter> ParseBson(bson_t* b) {
  auto f = Filter::Parse(b);
  bson_destroy(b);
  return f;
}

bool MB(bson_t* filter, const std::string& doc) {
  auto f = ParseBson(filter);
  INFO(f.status().ToString());
  REQUIRE(f.ok());
  Document d = J(doc);
  return f.value().Matches(d.data(), d.size());
}

void Bad(const std::string& json, const std::string& needle) {
  auto f = Filter::Parse(J(json));
  INFO(json);
  REQUIRE_FALSE(f.ok());
  CHECK(f.status().IsInvalidArgument());
  INFO(f.status().message());
  CHECK(f.status().message().find(needle) != std::string::npos);
}

const std::vector<std::string> kDocs = {
    R"({"_id": 0, "a": "abc"})",
    R"({"_id": 1, "a": "xab"})",
    R"({"_id": 2, "a": ["q", "abd"]})",
    R"({"_id": 3, "a": 5})",
    R"({"_id": 4})",
    R"({"_id": 5, "a": null})",
    R"({"_id": 6, "a": [1, 2, 3]})",
    R"({"_id": 7, "a": [[1, 2], 7]})",
    R"({"_id": 8, "a": [{"b": 1, "c": "x"}, {"b": 5, "c": "y"}]})",
    R"({"_id": 9, "a": {"b": "abc"}})",
    R"({"_id": 10, "a": []})",
    R"({"_id": 11, "a": {"$regex": "^ab", "$options": ""}})",
    R"({"_id": 12, "a": "ABC"})",
    R"({"_id": 13, "a": 5.5})",
    R"({"_id": 14, "a": {"$numberLong": "-7"}})",
    R"({"_id": 15, "a": [[["abc"]]]})",
};

using Ids = std::vector<int>;

Ids Which(const std::string& filter) {
  Filter f = F(filter);
  Ids ids;
  for (size_t i = 0; i < kDocs.size(); i++) {
    Document d = J(kDocs[i]);
    if (f.Matches(d.data(), d.size())) ids.push_back(static_cast<int>(i));
  }
  return ids;
}

TEST_CASE("Filter: $regex matches strings, array elements and equal regex values", "[filter]") {
  CHECK(Which(R"({"a": {"$regex": "^ab"}})") == Ids{0, 2, 11});
  CHECK(Which(R"({"a": {"$regex": "ab"}})") == Ids{0, 1, 2});  // not /^ab/: another regex
  CHECK(Which(R"({"a": {"$regex": "^ab", "$options": "i"}})") == Ids{0, 2, 12});
  CHECK(Which(R"({"a": {"$regex": "^abc$"}})") == Ids{0});
  CHECK(Which(R"({"a.b": {"$regex": "c"}})") == Ids{9});
  // Nested arrays are not searched; numbers never match.
  CHECK(Which(R"({"a": {"$regex": "."}})") == Ids{0, 1, 2, 12});
  CHECK(Which(R"({"a": {"$regex": "5"}})").empty());
  // $not: the negation, so missing and non-strings match.
  CHECK(Which(R"({"a": {"$not": {"$regex": "^ab"}}})") ==
        Ids{1, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15});
  // $in / $nin with regexes and values.
  CHECK(Which(R"({"a": {"$in": [{"$regex": "^x"}, 5]}})") == Ids{1, 3});
  CHECK(Which(R"({"a": {"$nin": [{"$regex": "b"}, null]}})") ==
        Ids{3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  // $eq with a regex compares regex values (MongoDB).
  CHECK(Which(R"({"a": {"$eq": {"$regex": "^ab"}}})") == Ids{11});
  CHECK(Which(R"({"a": {"$eq": {"$regex": "^ab", "$options": "i"}}})").empty());
  // A regex inside a document constant compares as a value.
  CHECK(M(R"({"a": {"b": {"$regex": "x"}}})", R"({"a": {"b": {"$regex": "x"}}})"));
  CHECK_FALSE(M(R"({"a": {"b": {"$regex": "x"}}})", R"({"a": {"b": "x"}})"));
  // Symbols are strings to a regex.
  CHECK(M(R"({"a": {"$regex": "^s"}})", R"({"a": {"$symbol": "sym"}})"));
  // UTF-8 mode: '.' is one character.
  CHECK(M(R"({"a": {"$regex": "^.$"}})", "{\"a\": \"\xC3\xA9\"}"));
}

TEST_CASE("Filter: $regex and $options as a BSON client sends them", "[filter]") {
  bson_t b, sub;
  // {a: {$regex: "^AB", $options: "i"}}
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_UTF8(&sub, "$regex", "^AB");
  BSON_APPEND_UTF8(&sub, "$options", "i");
  bson_append_document_end(&b, &sub);
  CHECK(MB(&b, R"({"a": "abc"})"));
  // $options first, beside another operator.
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_UTF8(&sub, "$options", "i");
  BSON_APPEND_UTF8(&sub, "$ne", "abc");
  BSON_APPEND_UTF8(&sub, "$regex", "^AB");
  bson_append_document_end(&b, &sub);
  CHECK(MB(&b, R"({"a": "abd"})"));
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_UTF8(&sub, "$options", "i");
  BSON_APPEND_UTF8(&sub, "$ne", "abc");
  BSON_APPEND_UTF8(&sub, "$regex", "^AB");
  bson_append_document_end(&b, &sub);
  CHECK_FALSE(MB(&b, R"({"a": "abc"})"));
  // {$regex: /re/, $options: "m"}: the options apply.
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_REGEX(&sub, "$regex", "^b", "");
  BSON_APPEND_UTF8(&sub, "$options", "m");
  bson_append_document_end(&b, &sub);
  CHECK(MB(&b, "{\"a\": \"a\\nb\"}"));

  auto refused = [](bson_t* f, const std::string& needle) {
    auto r = ParseBson(f);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
    INFO(r.status().message());
    CHECK(r.status().message().find(needle) != std::string::npos);
  };
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_UTF8(&sub, "$options", "i");
  bson_append_document_end(&b, &sub);
  refused(&b, "$options needs a $regex");
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_UTF8(&sub, "$regex", "x");
  BSON_APPEND_UTF8(&sub, "$options", "iq");
  bson_append_document_end(&b, &sub);
  refused(&b, "invalid flag");
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_REGEX(&sub, "$regex", "x", "i");
  BSON_APPEND_UTF8(&sub, "$options", "m");
  bson_append_document_end(&b, &sub);
  refused(&b, "options set in both");
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_INT32(&sub, "$regex", 5);
  bson_append_document_end(&b, &sub);
  refused(&b, "$regex needs a string");
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  bson_append_utf8(&sub, "$regex", -1, "a\0b", 3);
  bson_append_document_end(&b, &sub);
  refused(&b, "NUL");
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_UTF8(&sub, "$regex", "(");
  bson_append_document_end(&b, &sub);
  refused(&b, "invalid regular expression /(/");
}

TEST_CASE("Filter: bad regexes are InvalidArgument naming them, at any depth", "[filter]") {
  for (const std::string& f :
       {std::string(R"({"name": {"$regex": "a(b"}})"),
        std::string(R"({"x": 1, "name": {"$regex": "a(b"}})"),
        std::string(R"({"$or": [{"x": 1}, {"name": {"$regex": "a(b"}}]})"),
        std::string(R"({"name": {"$not": {"$regex": "a(b"}}})"),
        std::string(R"({"name": {"$in": ["x", {"$regex": "a(b"}]}})"),
        std::string(R"({"name": {"$all": [{"$regex": "a(b"}]}})"),
        std::string(R"({"name": {"$elemMatch": {"$regex": "a(b"}}})"),
        std::string(R"({"name": {"$elemMatch": {"v": {"$regex": "a(b"}}}})")}) {
    Bad(f, "/a(b/");
  }
  Bad(R"({"name": {"$regex": "x", "$options": "l"}})", "invalid flag");  // libbson keeps 'l'
  // $ne and ranges refuse a regex (MongoDB); $not is the way.
  Bad(R"({"a": {"$ne": {"$regex": "x"}}})", "$ne");
  Bad(R"({"a": {"$gt": {"$regex": "x"}}})", "$gt");
  Bad(R"({"a": {"$lte": {"$regex": "x"}}})", "$lte");
}

TEST_CASE("Filter: $size, $type, $mod", "[filter]") {
  CHECK(Which(R"({"a": {"$size": 0}})") == Ids{10});
  CHECK(Which(R"({"a": {"$size": 2}})") == Ids{2, 7, 8});  // not the inner [1, 2] of 7
  CHECK(Which(R"({"a": {"$size": 3}})") == Ids{6});
  CHECK(Which(R"({"a": {"$size": 2.0}})") == Ids{2, 7, 8});
  CHECK(M(R"({"a.b": {"$size": 1}})", R"({"a": [{"b": 5}, {"b": [5]}]})"));
  CHECK(Which(R"({"a": {"$not": {"$size": 2}}})").size() == kDocs.size() - 3);

  CHECK(Which(R"({"a": {"$type": "string"}})") == Ids{0, 1, 2, 12});
  CHECK(Which(R"({"a": {"$type": "array"}})") == Ids{2, 6, 7, 8, 10, 15});
  CHECK(Which(R"({"a": {"$type": "number"}})") == Ids{3, 6, 7, 13, 14});
  CHECK(Which(R"({"a": {"$type": "int"}})") == Ids{3, 6, 7});
  CHECK(Which(R"({"a": {"$type": "long"}})") == Ids{14});
  CHECK(Which(R"({"a": {"$type": "double"}})") == Ids{13});
  CHECK(Which(R"({"a": {"$type": "object"}})") == Ids{8, 9});
  CHECK(Which(R"({"a": {"$type": "null"}})") == Ids{5});  // not missing
  CHECK(Which(R"({"a": {"$type": "regex"}})") == Ids{11});
  CHECK(Which(R"({"a.b": {"$type": "int"}})") == Ids{8});
  CHECK(M(R"({"a": {"$type": "bool"}})", R"({"a": [false]})"));
  CHECK(M(R"({"a": {"$type": "date"}})", R"({"a": {"$date": 5}})"));
  CHECK(M(R"({"a": {"$type": "objectId"}})", R"({"a": {"$oid": "0123456789abcdef01234567"}})"));
  CHECK(M(R"({"a": {"$type": "decimal"}})", R"({"a": {"$numberDecimal": "1.5"}})"));
  CHECK(M(R"({"a": {"$type": "minKey"}})", R"({"a": {"$minKey": 1}})"));
  CHECK(M(R"({"a": {"$type": "maxKey"}})", R"({"a": {"$maxKey": 1}})"));
  CHECK(M(R"({"a": {"$type": "binData"}})",
          R"({"a": {"$binary": {"base64": "AA==", "subType": "00"}}})"));
  CHECK(M(R"({"a": {"$type": "timestamp"}})", R"({"a": {"$timestamp": {"t": 1, "i": 1}}})"));
  CHECK(M(R"({"a": {"$type": "symbol"}})", R"({"a": {"$symbol": "s"}})"));
  CHECK_FALSE(M(R"({"a": {"$type": "string"}})", R"({"a": {"$symbol": "s"}})"));
  // Numeric codes and lists, from JSON and built with libbson.
  CHECK(Which(R"({"a": {"$type": 2}})") == Ids{0, 1, 2, 12});
  CHECK(Which(R"({"a": {"$type": [4, "long"]}})") == Ids{2, 6, 7, 8, 10, 14, 15});
  bson_t b, sub, arr;
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_DOUBLE(&sub, "$type", 2.0);
  bson_append_document_end(&b, &sub);
  CHECK(MB(&b, R"({"a": ["x"]})"));
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_ARRAY_BEGIN(&sub, "$type", &arr);
  BSON_APPEND_INT32(&arr, "0", 18);
  BSON_APPEND_UTF8(&arr, "1", "bool");
  bson_append_array_end(&sub, &arr);
  bson_append_document_end(&b, &sub);
  CHECK(MB(&b, R"({"a": true})"));
  for (int code : {-1, 127, 16}) {
    bson_init(&b);
    BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
    BSON_APPEND_INT32(&sub, "$type", code);
    bson_append_document_end(&b, &sub);
    CHECK(MB(&b, code == -1    ? R"({"a": {"$minKey": 1}})"
                 : code == 127 ? R"({"a": {"$maxKey": 1}})"
                               : R"({"a": 1})"));
  }

  CHECK(Which(R"({"a": {"$mod": [2, 1]}})") == Ids{3, 6, 7, 13});  // 5, 1 3, 7, 5.5->5; not -7
  CHECK(Which(R"({"a": {"$mod": [4, -3]}})") == Ids{14});          // C++ sign: -7 % 4 == -3
  CHECK(Which(R"({"a": {"$mod": [2.9, 0]}})") == Ids{6});          // divisor 2
  CHECK(Which(R"({"a": {"$mod": [-1, 0]}})") == Ids{3, 6, 7, 13, 14});
  CHECK(M(R"({"a": {"$mod": [-1, 0]}})", R"({"a": {"$numberLong": "-9223372036854775808"}})"));
  CHECK(M(R"({"a": {"$mod": [10, 4]}})", R"({"a": {"$numberDecimal": "-1.4E+1"}})") == false);
  CHECK(M(R"({"a": {"$mod": [10, -4]}})", R"({"a": {"$numberDecimal": "-1.49E+1"}})"));
  CHECK(M(R"({"a": {"$mod": [3, 2]}})", R"({"a": {"$numberDecimal": "5.999"}})"));
  CHECK_FALSE(M(R"({"a": {"$mod": [3, 0]}})", R"({"a": {"$numberDouble": "NaN"}})"));
  CHECK_FALSE(M(R"({"a": {"$mod": [3, 0]}})", R"({"a": 1e300})"));
  CHECK_FALSE(M(R"({"a": {"$mod": [3, 0]}})", R"({"a": "3"})"));
}

TEST_CASE("Filter: $all and $elemMatch", "[filter]") {
  CHECK(Which(R"({"a": {"$all": [1, 2]}})") == Ids{6});
  CHECK(Which(R"({"a": {"$all": [5]}})") == Ids{3});
  CHECK(Which(R"({"a": {"$all": [[1, 2]]}})") == Ids{7});
  CHECK(Which(R"({"a": {"$all": [{"$regex": "^ab"}, "q"]}})") == Ids{2});
  CHECK(Which(R"({"a": {"$all": []}})").empty());
  CHECK(Which(R"({"a": {"$all": [null]}})") == Ids{4, 5});
  CHECK(Which(R"({"a.b": {"$all": [1, 5]}})") == Ids{8});

  // Operator form: one element meets them all, itself (not its elements).
  CHECK(Which(R"({"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}})") == Ids{6});
  CHECK(Which(R"({"a": {"$elemMatch": {"$gte": 7}}})") == Ids{7});
  CHECK(Which(R"({"a": {"$elemMatch": {"$gt": 4, "$lt": 2}}})").empty());
  CHECK(Which(R"({"a": {"$elemMatch": {"$size": 2}}})") == Ids{7});
  CHECK(Which(R"({"a": {"$elemMatch": {"$type": "array"}}})") == Ids{7, 15});
  CHECK(Which(R"({"a": {"$elemMatch": {"$regex": "^ab"}}})") == Ids{2});
  CHECK(Which(R"({"a": {"$elemMatch": {"$ne": 1}}})") == Ids{2, 6, 7, 8, 15});
  CHECK(Which(R"({"a": {"$elemMatch": {"$not": {"$gt": 1}}}})") == Ids{2, 6, 7, 8, 15});
  CHECK(Which(R"({"a": {"$elemMatch": {"$in": [3, "q"]}}})") == Ids{2, 6});
  CHECK(Which(R"({"a": {"$elemMatch": {"$elemMatch": {"$eq": 2}}}})") == Ids{7});
  CHECK(Which(R"({"a": {"$elemMatch": {"$exists": true}}})") == Ids{2, 6, 7, 8, 15});
  // Document form: a sub-filter on each element that is a document.
  CHECK(Which(R"({"a": {"$elemMatch": {"b": 5, "c": "y"}}})") == Ids{8});
  CHECK(Which(R"({"a": {"$elemMatch": {"b": 1, "c": "y"}}})").empty());
  CHECK(Which(R"({"a": {"$elemMatch": {"b": {"$gt": 0}}}})") == Ids{8});
  CHECK(Which(R"({"a": {"$elemMatch": {}}})") == Ids{7, 8, 15});  // documents and arrays
  CHECK(Which(R"({"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": "y"}]}}})") == Ids{8});
  CHECK(Which(R"({"a": {"$elemMatch": {"0": 1}}})") == Ids{7});  // an array as a document
  // Versus the same fields without $elemMatch: any element for each.
  CHECK(Which(R"({"a.b": 1, "a.c": "y"})") == Ids{8});
  // Not an array: no match.
  CHECK(Which(R"({"a.b": {"$elemMatch": {"$eq": "abc"}}})").empty());
  CHECK(M(R"({"a.b": {"$elemMatch": {"$eq": 2}}})", R"({"a": [{"b": [1, 2]}]})"));
  // $all of $elemMatch.
  CHECK(Which(R"({"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"b": 5}}]}})") ==
        Ids{8});
  CHECK(Which(R"({"a": {"$all": [{"$elemMatch": {"b": 1, "c": "y"}}]}})").empty());
}

TEST_CASE("Filter: $not and $nor", "[filter]") {
  CHECK(Which(R"({"a": {"$not": {"$gt": 1}}})") == Ids{0, 1, 2, 4, 5, 8, 9, 10, 11, 12, 14, 15});
  CHECK(Which(R"({"a": {"$not": {"$gt": 1, "$lt": 6}}})") ==
        Ids{0, 1, 2, 4, 5, 7, 8, 9, 10, 11, 12, 14, 15});
  CHECK(Which(R"({"a": {"$not": {"$exists": true}}})") == Ids{4});
  CHECK(Which(R"({"a": {"$not": {"$not": {"$eq": 5}}}})") == Ids{3});
  CHECK(Which(R"({"$nor": [{"a": 5}, {"a": {"$type": "string"}}, {"a": {"$exists": false}}]})") ==
        Ids{5, 6, 7, 8, 9, 10, 11, 13, 14, 15});
}

TEST_CASE("Filter: bad operands of the array and element operators", "[filter]") {
  Bad(R"({"a": {"$size": -1}})", "$size may not be negative");
  Bad(R"({"a": {"$size": "x"}})", "$size needs a number");
  Bad(R"({"a": {"$size": 1.5}})", "$size needs a whole number");
  Bad(R"({"a": {"$size": null}})", "$size");
  Bad(R"({"a": {"$mod": [0, 1]}})", "$mod divisor cannot be 0");
  Bad(R"({"a": {"$mod": [0.5, 1]}})", "$mod divisor cannot be 0");  // truncated to 0
  Bad(R"({"a": {"$mod": [1]}})", "$mod needs two");
  Bad(R"({"a": {"$mod": [1, 2, 3]}})", "$mod has too many");
  Bad(R"({"a": {"$mod": 2}})", "$mod needs an array");
  Bad(R"({"a": {"$mod": ["2", 1]}})", "$mod divisor is not a number");
  Bad(R"({"a": {"$mod": [2, null]}})", "$mod remainder is not a number");
  Bad(R"({"a": {"$mod": [{"$numberDouble": "NaN"}, 1]}})", "$mod divisor is NaN");
  Bad(R"({"a": {"$mod": [1e19, 1]}})", "out of range");
  Bad(R"({"a": {"$type": "nope"}})", "unknown type name for $type: nope");
  Bad(R"({"a": {"$elemMatch": 1}})", "$elemMatch needs an object");
  Bad(R"({"a": {"$elemMatch": {"$gt": 1, "b": 1}}})", "cannot mix");
  Bad(R"({"a": {"$elemMatch": {"b": 1, "$gt": 1}}})", "$gt");
  Bad(R"({"a": {"$elemMatch": {"$foo": 1}}})", "unknown operator $foo");
  Bad(R"({"a": {"$elemMatch": {"$where": "1"}}})", "unsupported operator $where");
  Bad(R"({"a": {"$all": 1}})", "$all needs an array");
  Bad(R"({"a": {"$all": [{"$elemMatch": {"b": 1}}, 2]}})", "$all with $elemMatch");
  Bad(R"({"a": {"$all": [2, {"$elemMatch": {"b": 1}}]}})", "$elemMatch inside the value for a");
  Bad(R"({"a": {"$all": [{"$gt": 1}]}})", "$gt inside the value for a");
  Bad(R"({"a": {"$not": 5}})", "$not needs a regex or a document");
  Bad(R"({"a": {"$not": {}}})", "$not cannot be empty");
  Bad(R"({"a": {"$not": {"b": 1}}})", "$not needs a regex or a document");
  Bad(R"({"a": {"$eq": {"$size": 1}}})", "$size inside the value for a");
  Bad(R"({"$size": 1})", "$size");
  Bad(R"({"$not": {"a": 1}})", "$not");
  bson_t b, sub, arr;
  for (double code : {0.0, 20.0, 2.5, 126.0}) {
    bson_init(&b);
    BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
    BSON_APPEND_DOUBLE(&sub, "$type", code);
    bson_append_document_end(&b, &sub);
    auto f = ParseBson(&b);
    INFO(code);
    REQUIRE_FALSE(f.ok());
    CHECK(f.status().message().find("invalid numerical type code") != std::string::npos);
  }
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_ARRAY_BEGIN(&sub, "$type", &arr);
  bson_append_array_end(&sub, &arr);
  bson_append_document_end(&b, &sub);
  auto f = ParseBson(&b);
  REQUIRE_FALSE(f.ok());
  CHECK(f.status().message().find("at least one type") != std::string::npos);
}

// ------------------------------------------------------------ bounds

std::string KeyOf(const std::string& json) {
  std::string k;
  AppendKey(Value::FromJson(json).value().get(), &k);
  return k;
}

bool Inside(const std::string& k, const std::vector<KeyInterval>& v) {
  for (const KeyInterval& i : v) {
    if (!i.lo.empty() && (k < i.lo || (k == i.lo && !i.lo_inclusive))) continue;
    if (!i.hi.empty() && (k > i.hi || (k == i.hi && !i.hi_inclusive))) continue;
    return true;
  }
  return false;
}

TEST_CASE("Filter: IndexBounds of the new operators", "[filter]") {
  auto b = F(R"({"a": {"$regex": "^ab"}})").IndexBounds("a");
  REQUIRE(b);
  CHECK(Inside(KeyOf(R"("ab")"), *b));
  CHECK(Inside(KeyOf(R"("abzzz")"), *b));
  CHECK(Inside(KeyOf(R"({"$regex": "^ab", "$options": ""})"), *b));
  CHECK_FALSE(Inside(KeyOf(R"("a")"), *b));
  CHECK_FALSE(Inside(KeyOf(R"("ac")"), *b));
  CHECK_FALSE(Inside(KeyOf(R"("b")"), *b));
  CHECK_FALSE(Inside(KeyOf("5"), *b));
  // Case-insensitive or unanchored: all strings, no other type.
  for (const char* f :
       {R"({"a": {"$regex": "^ab", "$options": "i"}})", R"({"a": {"$regex": "b"}})"}) {
    b = F(f).IndexBounds("a");
    REQUIRE(b);
    CHECK(Inside(KeyOf(R"("zz")"), *b));
    CHECK_FALSE(Inside(KeyOf("5"), *b));
    CHECK_FALSE(Inside(KeyOf("null"), *b));
  }
  // A prefix of several UTF-8 bytes.
  b = F("{\"a\": {\"$regex\": \"^\\u00e9t\"}}").IndexBounds("a");
  REQUIRE(b);
  CHECK(Inside(KeyOf("\"\\u00e9t\\u00e9\""), *b));
  CHECK_FALSE(Inside(KeyOf("\"\\u00e9\""), *b));
  CHECK_FALSE(Inside(KeyOf("\"e\""), *b));
  b = F(R"({"a": {"$type": "string"}})").IndexBounds("a");
  REQUIRE(b);
  CHECK(Inside(KeyOf(R"("")"), *b));
  CHECK_FALSE(Inside(KeyOf("1"), *b));
  CHECK_FALSE(F(R"({"a": {"$type": "array"}})").IndexBounds("a"));
  CHECK_FALSE(F(R"({"a": {"$size": 1}})").IndexBounds("a"));
  CHECK_FALSE(F(R"({"a": {"$not": {"$gt": 1}}})").IndexBounds("a"));
  // $elemMatch's operators intersect even on a multikey index.
  b = F(R"({"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}})").IndexBounds("a", true);
  REQUIRE(b);
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].lo == KeyOf("1"));
  CHECK((*b)[0].hi == KeyOf("3"));
  // $all: a point of one element.
  b = F(R"({"a": {"$all": [3, 4]}})").IndexBounds("a", true);
  REQUIRE(b);
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].lo == (*b)[0].hi);
  // The document form bounds a field of the elements, unless null could
  // match (an element that is an array has no such field).
  b = F(R"({"a": {"$elemMatch": {"b": 5}}})").IndexBounds("a.b");
  REQUIRE(b);
  CHECK(Inside(KeyOf("5"), *b));
  CHECK_FALSE(F(R"({"a": {"$elemMatch": {"b": null}}})").IndexBounds("a.b"));
  CHECK_FALSE(F(R"({"a": {"$elemMatch": {"0": 5}}})").IndexBounds("a.0"));
  CHECK_FALSE(F(R"({"a": {"$elemMatch": {"b": 5}}})").IndexBounds("a"));
}

// ------------------------------------------------------------ the model

// MongoDB's semantics, written from its manual apart from filter.cc. A
// value is a bson_value_t view; missing is nullptr.
using V = const bson_value_t*;

// Views of values inside the document being judged (a bson_value_t points
// into the document's bytes); cleared before each document.
std::deque<bson_value_t> g_arena;

std::vector<V> Elements(V v) {
  std::vector<V> out;
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) return out;
  while (bson_iter_next(&it)) {
    g_arena.push_back(*bson_iter_value(&it));
    out.push_back(&g_arena.back());
  }
  return out;
}

std::optional<V> Field(V doc, const std::string& name) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len) ||
      !bson_iter_find(&it, name.c_str()))
    return std::nullopt;
  g_arena.push_back(*bson_iter_value(&it));
  return &g_arena.back();
}

bool IsArray(V v) { return v != nullptr && v->value_type == BSON_TYPE_ARRAY; }
bool IsDoc(V v) { return v != nullptr && v->value_type == BSON_TYPE_DOCUMENT; }

// The values "a" or "a.b" reaches in a document (nullptr: missing). An
// array of "a" with no document in it reaches nothing: MongoDB's
// {"a.b": null} does not match {a: []} or {a: [1]}.
std::vector<V> Reached(V doc, const std::string& path) {
  auto a = Field(doc, "a");
  if (path == "a") return {a ? *a : nullptr};
  if (!a) return {nullptr};
  if (IsDoc(*a)) {
    auto b = Field(*a, "b");
    return {b ? *b : nullptr};
  }
  if (!IsArray(*a)) return {nullptr};
  std::vector<V> out;
  for (V e : Elements(*a)) {
    if (!IsDoc(e)) continue;
    auto b = Field(e, "b");
    out.push_back(b ? *b : nullptr);
  }
  return out;
}

int Rank(V v) {
  switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
      return 1;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
      return 2;
    default:
      return 100 + v->value_type;
  }
}

bool Nan(V v) { return v->value_type == BSON_TYPE_DOUBLE && std::isnan(v->value.v_double); }

bool Eq(V v, V x) { return CompareValues(v, x) == 0; }

// One whole value against a comparison (no MinKey/MaxKey operands here).
bool Cmp(V v, const std::string& op, V x) {
  if (op == "$eq") return Eq(v, x);
  if (op == "$ne") return !Eq(v, x);
  if (Rank(v) != Rank(x)) return false;
  if (Nan(v) || Nan(x)) return Nan(v) && Nan(x) && (op == "$gte" || op == "$lte");
  int c = CompareValues(v, x);
  if (op == "$gt") return c > 0;
  if (op == "$gte") return c >= 0;
  if (op == "$lt") return c < 0;
  return c <= 0;
}

// A predicate at the end of a path: the value, or one of its elements.
bool ValueOrElement(V v, const std::function<bool(V)>& p) {
  if (v == nullptr) return false;
  if (p(v)) return true;
  if (!IsArray(v)) return false;
  for (V e : Elements(v)) {
    if (p(e)) return true;
  }
  return false;
}

bool EqAt(V v, V x) {
  if (v == nullptr) return x->value_type == BSON_TYPE_NULL;
  return ValueOrElement(v, [x](V e) { return Eq(e, x); });
}

std::string Str(V v) {
  if (v->value_type == BSON_TYPE_UTF8) return std::string(v->value.v_utf8.str, v->value.v_utf8.len);
  return std::string(v->value.v_symbol.symbol, v->value.v_symbol.len);
}

// Regexes with their meaning spelled out.
struct ModelRegex {
  const char* json;  // the regex value, as the filter writes it
  const char* pattern;
  std::function<bool(const std::string&)> matches;
};

const std::vector<ModelRegex>& Regexes() {
  static const std::vector<ModelRegex> kRegexes = {
      {R"({"$regex": "^a", "$options": ""})", "^a",
       [](const std::string& s) { return s.rfind("a", 0) == 0; }},
      {R"({"$regex": "^ab", "$options": ""})", "^ab",
       [](const std::string& s) { return s.rfind("ab", 0) == 0; }},
      {R"({"$regex": "b$", "$options": ""})", "b$",
       [](const std::string& s) { return !s.empty() && s.back() == 'b'; }},
      {R"({"$regex": "^A", "$options": "i"})", nullptr,
       [](const std::string& s) { return !s.empty() && (s[0] == 'a' || s[0] == 'A'); }},
      {R"({"$regex": "a", "$options": ""})", "a",
       [](const std::string& s) { return s.find('a') != std::string::npos; }},
      {R"({"$regex": "^ab?c", "$options": ""})", "^ab?c",
       [](const std::string& s) { return s.rfind("ac", 0) == 0 || s.rfind("abc", 0) == 0; }},
      {R"({"$regex": "^$", "$options": ""})", "^$", [](const std::string& s) { return s.empty(); }},
      {R"({"$regex": "^a.c", "$options": ""})", "^a.c",
       [](const std::string& s) { return s.size() >= 3 && s[0] == 'a' && s[2] == 'c'; }},
  };
  return kRegexes;
}

bool RegexSingle(const ModelRegex& r, V v) {
  if (v->value_type == BSON_TYPE_UTF8 || v->value_type == BSON_TYPE_SYMBOL)
    return r.matches(Str(v));
  if (v->value_type == BSON_TYPE_REGEX) {
    return r.pattern != nullptr && std::string(v->value.v_regex.regex) == r.pattern &&
           std::string(v->value.v_regex.options) == "";
  }
  return false;
}

bool TypeIs(V v, const std::string& alias) {
  bson_type_t t = v->value_type;
  if (alias == "number")
    return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
  static const std::vector<std::pair<std::string, bson_type_t>> kTypes = {
      {"string", BSON_TYPE_UTF8},       {"int", BSON_TYPE_INT32},
      {"long", BSON_TYPE_INT64},        {"double", BSON_TYPE_DOUBLE},
      {"array", BSON_TYPE_ARRAY},       {"object", BSON_TYPE_DOCUMENT},
      {"null", BSON_TYPE_NULL},         {"bool", BSON_TYPE_BOOL},
      {"regex", BSON_TYPE_REGEX},       {"date", BSON_TYPE_DATE_TIME},
      {"decimal", BSON_TYPE_DECIMAL128}};
  for (auto& [name, type] : kTypes) {
    if (name == alias) return t == type;
  }
  return false;
}

std::optional<int64_t> Trunc(V v) {
  switch (v->value_type) {
    case BSON_TYPE_INT32:
      return v->value.v_int32;
    case BSON_TYPE_INT64:
      return v->value.v_int64;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: {
      double d = v->value.v_double;
      if (v->value_type == BSON_TYPE_DECIMAL128) {
        char buf[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        d = std::strtod(buf, nullptr);
      }
      if (!std::isfinite(d) || std::fabs(d) > 1e18) return std::nullopt;
      return static_cast<int64_t>(std::trunc(d));
    }
    default:
      return std::nullopt;
  }
}

// A random filter on "a" or "a.b" and the model's verdict for a document.
struct Case {
  std::string json;
  std::function<bool(V doc)> model;
};

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  int N(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  std::string Scalar() {
    static const char* kValues[] = {"0",
                                    "1",
                                    "2",
                                    "5",
                                    "-3",
                                    "2.5",
                                    "-2.5",
                                    "7.9",
                                    R"({"$numberLong": "10"})",
                                    R"({"$numberDecimal": "5.5"})",
                                    R"({"$numberDouble": "NaN"})",
                                    R"("")",
                                    R"("a")",
                                    R"("ab")",
                                    R"("abc")",
                                    R"("ac")",
                                    R"("Ab")",
                                    R"("xab")",
                                    R"("b")",
                                    "null",
                                    "true",
                                    R"({"$date": 5})",
                                    R"({"$regex": "^ab", "$options": ""})",
                                    R"({"$regex": "^a", "$options": ""})"};
    return kValues[N(sizeof(kValues) / sizeof(kValues[0]))];
  }
  std::string Any(int depth = 0) {
    switch (N(depth < 2 ? 6 : 3)) {
      case 3:
      case 5: {
        std::string s = "[";
        for (int i = N(4), k = 0; k < i; k++) s += (k ? ", " : "") + Any(depth + 1);
        return s + "]";
      }
      case 4: {
        std::string s = "{";
        for (int i = N(3), k = 0; k < i; k++)
          s += std::string(k ? ", " : "") + "\"" + "bcd"[k] + "\": " + Any(depth + 1);
        return s + "}";
      }
      default:
        return Scalar();
    }
  }
  std::string Doc(int id) {
    std::string s = "{\"_id\": " + std::to_string(id);
    if (N(6)) s += ", \"a\": " + Any();
    return s + "}";
  }

  // A value parsed for the model; kept alive by the generator.
  V Parsed(const std::string& json) {
    values_.push_back(test::V(json));
    return values_.back().get();
  }

  Case Make() {
    const std::string path = N(4) ? "a" : "a.b";
    Case c = Leaf(path);
    if (N(5) == 0) {  // $not of it
      c = Not(path);
    }
    return c;
  }

 private:
  using Single = std::function<bool(V)>;
  // An operator expression {...} and its meaning for one value at the end
  // of the path ("at") and for one whole value ("single", for $elemMatch).
  struct Op {
    std::string json;
    std::function<bool(V)> at;  // nullptr for missing
    Single single;
    // Over all the values the path reaches: at for any of them, unless set
    // ($all is one equality per element, each met by any value reached).
    std::function<bool(const std::vector<V>&)> over = nullptr;
  };

  static std::function<bool(const std::vector<V>&)> Over(const Op& op) {
    if (op.over) return op.over;
    auto at = op.at;
    return [at](const std::vector<V>& reached) {
      for (V v : reached)
        if (at(v)) return true;
      return false;
    };
  }

  Op Operator() {
    switch (N(9)) {
      case 0: {
        const ModelRegex& r = Regexes()[N(static_cast<int>(Regexes().size()))];
        std::string json = r.json;
        json = json.substr(1, json.size() - 2);  // "$regex": ..., "$options": ...
        auto single = [&r](V v) { return RegexSingle(r, v); };
        return {json, [single](V v) { return ValueOrElement(v, single); }, single};
      }
      case 1: {
        int n = N(4);
        auto single = [n](V v) { return IsArray(v) && static_cast<int>(Elements(v).size()) == n; };
        return {"\"$size\": " + std::to_string(n),
                [single](V v) { return v != nullptr && single(v); }, single};
      }
      case 2: {
        static const char* kAliases[] = {"string", "number", "int",  "long",  "double", "array",
                                         "object", "null",   "bool", "regex", "decimal"};
        std::string alias = kAliases[N(11)];
        auto single = [alias](V v) { return TypeIs(v, alias); };
        return {"\"$exists\": true, \"$type\": \"" + alias + "\"",
                [single](V v) { return ValueOrElement(v, single); }, single};
      }
      case 3: {
        int64_t d = N(2) ? 1 + N(4) : -(1 + N(3));
        int64_t r = N(3) - 1;
        auto single = [d, r](V v) {
          auto x = Trunc(v);
          return x && (d == -1 ? 0 : *x % d) == r;
        };
        return {
            "\"$mod\": [" + std::to_string(d) + (N(2) ? ".7" : "") + ", " + std::to_string(r) + "]",
            [single](V v) { return ValueOrElement(v, single); }, single};
      }
      case 4: {
        // $all of scalars and regexes.
        std::string json = "\"$all\": [";
        std::vector<Single> parts;
        std::vector<std::function<bool(V)>> ats;
        for (int i = 1 + N(2), k = 0; k < i; k++) {
          json += k ? ", " : "";
          if (N(3) == 0) {
            const ModelRegex& r = Regexes()[N(static_cast<int>(Regexes().size()))];
            json += r.json;
            Single s = [&r](V v) { return RegexSingle(r, v); };
            parts.push_back(s);
            ats.push_back([s](V v) { return ValueOrElement(v, s); });
          } else {
            std::string x = Scalar();
            if (x[0] == '{' && x.find("$regex") != std::string::npos) x = "1";
            json += x;
            V xv = Parsed(x);
            parts.push_back([xv](V v) { return Eq(v, xv); });
            ats.push_back([xv](V v) { return EqAt(v, xv); });
          }
        }
        json += "]";
        auto over = [ats](const std::vector<V>& reached) {
          for (auto& a : ats) {
            bool any = false;
            for (V v : reached) any = any || a(v);
            if (!any) return false;
          }
          return true;
        };
        return {json, nullptr,
                [parts](V v) {
                  for (auto& p : parts)
                    if (!p(v)) return false;
                  return true;
                },
                over};
      }
      case 5:
      case 6: {
        // $elemMatch, operator form: comparisons, sometimes with a $type.
        static const char* kCmp[] = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"};
        std::string json = "\"$elemMatch\": {";
        std::vector<Single> parts;
        for (int i = 1 + N(2), k = 0; k < i; k++) {
          std::string op = kCmp[N(6)];
          std::string x = Scalar();
          if (x.find("$regex") != std::string::npos) x = "2";
          V xv = Parsed(x);
          json += (k ? ", \"" : "\"") + op + "\": " + x;
          parts.push_back([op, xv](V v) { return Cmp(v, op, xv); });
        }
        json += "}";
        Single single = [parts](V v) {
          if (!IsArray(v)) return false;
          for (V e : Elements(v)) {
            bool all = true;
            for (auto& p : parts) all = all && p(e);
            if (all) return true;
          }
          return false;
        };
        return {json, [single](V v) { return v != nullptr && single(v); }, single};
      }
      case 7: {
        // $elemMatch, document form: {b: x} or {b: {$op: x}}.
        static const char* kCmp[] = {"$eq", "$gt", "$gte", "$lt", "$lte"};
        std::string op = kCmp[N(5)];
        std::string x = Scalar();
        if (x.find("$regex") != std::string::npos) x = "null";
        V xv = Parsed(x);
        const bool plain = N(2) == 0;
        if (plain) op = "$eq";
        std::string json =
            "\"$elemMatch\": {\"b\": " + (plain ? x : "{\"" + op + "\": " + x + "}") + "}";
        auto field_holds = [op, xv](V b) {
          if (b == nullptr)
            return op == "$eq" || op == "$gte" || op == "$lte" ? xv->value_type == BSON_TYPE_NULL
                                                               : false;
          if (op == "$eq") return EqAt(b, xv);
          if (IsArray(b) && !IsArray(xv)) {
            for (V e : Elements(b))
              if (Cmp(e, op, xv)) return true;
            return false;
          }
          if (Cmp(b, op, xv)) return true;
          if (!IsArray(b)) return false;
          for (V e : Elements(b))
            if (Cmp(e, op, xv)) return true;
          return false;
        };
        Single single = [field_holds](V v) {
          if (!IsArray(v)) return false;
          for (V e : Elements(v)) {
            if (IsDoc(e)) {
              auto b = Field(e, "b");
              if (field_holds(b ? *b : nullptr)) return true;
            } else if (IsArray(e)) {
              if (field_holds(nullptr)) return true;
            }
          }
          return false;
        };
        return {json, [single](V v) { return v != nullptr && single(v); }, single};
      }
      default: {
        // $in with regexes and values.
        std::string json = "\"$in\": [";
        std::vector<std::function<bool(V)>> ats;
        for (int i = N(3), k = 0; k < i; k++) {
          json += k ? ", " : "";
          if (N(2)) {
            const ModelRegex& r = Regexes()[N(static_cast<int>(Regexes().size()))];
            json += r.json;
            ats.push_back(
                [&r](V v) { return ValueOrElement(v, [&r](V e) { return RegexSingle(r, e); }); });
          } else {
            std::string x = Scalar();
            if (x.find("$regex") != std::string::npos) x = "null";
            json += x;
            V xv = Parsed(x);
            ats.push_back([xv](V v) { return EqAt(v, xv); });
          }
        }
        json += "]";
        auto at = [ats](V v) {
          for (auto& a : ats)
            if (a(v)) return true;
          return false;
        };
        return {json, at, nullptr};
      }
    }
  }

  Case Leaf(const std::string& path) {
    Op op = Operator();
    std::string json = "{\"" + path + "\": {" + op.json + "}}";
    auto over = Over(op);
    return {json, [path, over](V doc) { return over(Reached(doc, path)); }};
  }

  // (With a regex, {$not: {"$regex": ...}} is $not: /re/: libbson's JSON
  // reader makes the inner document a regex value.)
  Case Not(const std::string& path) {
    Op op = Operator();
    std::string json = "{\"" + path + "\": {\"$not\": {" + op.json + "}}}";
    auto over = Over(op);
    return {json, [path, over](V doc) { return !over(Reached(doc, path)); }};
  }

  std::mt19937_64 rng_;
  std::deque<Value> values_;  // Parsed views point into these
};

V DocValue(const Document& d, bson_value_t* holder) {
  holder->value_type = BSON_TYPE_DOCUMENT;
  holder->value.v_doc.data = const_cast<uint8_t*>(d.data());
  holder->value.v_doc.data_len = static_cast<uint32_t>(d.size());
  return holder;
}

bool AnyKeyInside(const Document& d, const std::string& path, const std::vector<KeyInterval>& b) {
  std::vector<std::string> keys;
  IndexKeys(d.data(), d.size(), path, &keys);
  for (const std::string& k : keys) {
    if (Inside(k, b)) return true;
  }
  return false;
}

TEST_CASE("Filter: new operators agree with the model, and their bounds are sound (randomized)",
          "[filter]") {
  const uint64_t seed = test::Seed("array operators model");
  Gen gen(seed);
  std::vector<Document> docs;
  for (int i = 0; i < 300; i++) docs.push_back(J(gen.Doc(i)));
  int matched = 0, bounded = 0;
  for (int f = 0; f < static_cast<int>(600 * test::Scale()); f++) {
    Case c = gen.Make();
    Filter filter = F(c.json);
    for (const Document& d : docs) {
      bson_value_t holder;
      g_arena.clear();
      const bool want = c.model(DocValue(d, &holder));
      INFO("seed " << seed << " filter " << c.json << " doc " << d.ToJson());
      REQUIRE(filter.Matches(d.data(), d.size()) == want);
      matched += want;
    }
    for (const char* path : {"a", "a.b"}) {
      for (bool multikey : {true, false}) {
        auto bounds = filter.IndexBounds(path, multikey);
        if (!bounds) continue;
        bounded++;
        for (const Document& d : docs) {
          if (!filter.Matches(d.data(), d.size())) continue;
          std::vector<std::string> keys;
          IndexKeys(d.data(), d.size(), path, &keys);
          if (!multikey && keys.size() > 1) continue;
          INFO("seed " << seed << " filter " << c.json << " path " << path << " multikey "
                       << multikey << " doc " << d.ToJson());
          REQUIRE(AnyKeyInside(d, path, *bounds));
        }
      }
    }
  }
  INFO("matched " << matched << " bounded " << bounded);
  CHECK(matched > 1000);
  CHECK(bounded > 100);
}

TEST_CASE("Filter: new operators give the same answers with and without indexes (randomized)",
          "[filter][engine]") {
  const uint64_t seed = test::Seed("array operators indexed");
  Gen gen(seed);
  Options o;
  o.durability = Durability::kNone;
  test::TestDB db(o);
  std::vector<Document> docs;
  for (int i = 0; i < 200; i++) {
    docs.push_back(J(gen.Doc(i)));
    REQUIRE(db->Insert("plain", docs.back()).ok());
    REQUIRE(db->Insert("indexed", docs.back()).ok());
  }
  REQUIRE(db->CreateIndex("indexed", "a").ok());
  REQUIRE(db->CreateIndex("indexed", "a.b").ok());
  int ixscans = 0;
  for (int f = 0; f < static_cast<int>(150 * test::Scale()); f++) {
    Case c = gen.Make();
    std::set<std::string> want;
    for (const Document& d : docs) {
      bson_value_t holder;
      g_arena.clear();
      if (c.model(DocValue(d, &holder))) want.insert(d.Get("_id").value().ToJson());
    }
    INFO("seed " << seed << " filter " << c.json);
    for (const char* coll : {"plain", "indexed"}) {
      auto r = db->Find(coll, J(c.json));
      REQUIRE(r.ok());
      std::set<std::string> got;
      for (const Document& d : r.value()) got.insert(d.Get("_id").value().ToJson());
      std::string diff;  // the documents the two disagree on
      for (const Document& d : docs) {
        const std::string id = d.Get("_id").value().ToJson();
        if (got.count(id) != want.count(id)) diff += " " + d.ToJson();
      }
      INFO(coll << ":" << diff);
      CHECK(got == want);
    }
    auto e = db->BeginRead().value()->Explain("indexed", J(c.json));
    REQUIRE(e.ok());
    ixscans += e.value().plan == "IXSCAN";
  }
  CHECK(ixscans > 0);
}

TEST_CASE("Filter: a nested $elemMatch gives the same answer with an index on the array",
          "[filter][engine]") {
  // A multikey index keys [2, [3]] by 2 and by the whole inner array [3], so
  // a nested $elemMatch has no bounds in the inner array's elements.
  Options o;
  o.durability = Durability::kNone;
  test::TestDB db(o);
  for (const char* d : {R"({"_id": 1, "a": [2, [3]], "b": [{"c": [2, [3]]}]})",
                        R"({"_id": 2, "a": [[1, 2], [3]], "b": [{"c": [[1, 2], [3]]}]})",
                        R"({"_id": 3, "a": [3, 1], "b": [{"c": [3, 1]}]})"}) {
    REQUIRE(db->Insert("plain", J(d)).ok());
    REQUIRE(db->Insert("indexed", J(d)).ok());
  }
  REQUIRE(db->CreateIndex("indexed", "a").ok());
  REQUIRE(db->CreateIndex("indexed", "b.c").ok());
  struct Case {
    const char* filter;
    uint64_t count;
  };
  for (const Case& c : {Case{R"({"a": {"$elemMatch": {"$elemMatch": {"$eq": 3}}}})", 2},
                        Case{R"({"a": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}})", 2},
                        Case{R"({"a": {"$all": [{"$elemMatch": {"$elemMatch": {"$eq": 1}}}]}})", 1},
                        Case{R"({"a": {"$elemMatch": {"$elemMatch": {"$eq": 3}, "$size": 1}}})", 2},
                        Case{R"({"b.c": {"$elemMatch": {"$elemMatch": {"$eq": 3}}}})", 2},
                        Case{R"({"a": {"$elemMatch": {"$eq": 3}}})", 1}}) {
    CAPTURE(c.filter);
    CHECK(db->Count("plain", J(c.filter)).value() == c.count);
    CHECK(db->Count("indexed", J(c.filter)).value() == c.count);
  }
}

TEST_CASE("Filter: a prefix regex on an indexed field scans only its range", "[filter][engine]") {
  Options o;
  o.durability = Durability::kNone;
  test::TestDB db(o);
  for (int i = 0; i < 200; i++) {
    const std::string name = (i % 4 == 0 ? "user" : "other") + std::to_string(i);
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(i) + ", \"name\": \"" + name + "\"}"))
                .ok());
  }
  REQUIRE(db->CreateIndex("c", "name").ok());
  auto t = db->BeginRead().value();
  auto e = t->Explain("c", J(R"({"name": {"$regex": "^user1"}})"));
  REQUIRE(e.ok());
  CHECK(e.value().plan == "IXSCAN");
  CHECK(e.value().index == "name");
  // user12, user16 and user100..user196 step 4: exactly the matches.
  CHECK(e.value().returned == e.value().keys_examined);
  CHECK(e.value().returned == 2 + 25);
  auto all = t->Explain("c", J(R"({"name": {"$regex": "^user", "$options": "i"}})"));
  REQUIRE(all.ok());
  CHECK(all.value().plan == "IXSCAN");  // every string key, each checked
  CHECK(all.value().keys_examined == 200);
  CHECK(all.value().returned == 50);
  auto none = t->Explain("c", J(R"({"name": {"$regex": "^zzz"}})"));
  REQUIRE(none.ok());
  CHECK(none.value().keys_examined == 0);
  CHECK(none.value().returned == 0);
}

// The fuzz corpus's seeds for this syntax (tests/fuzz/corpus/filter): each
// is a filter and a document it matches, or (regress-bad-operands) a filter
// that must be refused.
TEST_CASE("Filter: the fuzz corpus seeds for the new operators", "[filter]") {
  const std::string dir = std::string(MMDOC_SOURCE_DIR) + "/tests/fuzz/corpus/filter/";
  for (const char* name :
       {"regex", "regex-in", "elemmatch", "size-all", "type-mod-not", "regress-bad-operands"}) {
    std::ifstream in(dir + name, std::ios::binary);
    REQUIRE(in);
    std::string filter, doc;
    std::getline(in, filter);
    std::getline(in, doc, '\0');
    INFO(name << ": " << filter << " / " << doc);
    if (std::string(name).rfind("regress-", 0) == 0) {
      // Refused when read as JSON (a regex flag libbson would drop) or as a filter.
      auto json = Document::FromJson(filter);
      CHECK((json.ok() ? Filter::Parse(json.value()).status() : json.status()).IsInvalidArgument());
      continue;
    }
    auto f = Filter::Parse(J(filter));
    REQUIRE(f.ok());
    Document d = J(doc);
    CHECK(f.value().Matches(d.data(), d.size()));
  }
}

TEST_CASE("Filter: $gt MinKey and $lt MaxKey find a missing field and [] with or without an index",
          "[filter][engine]") {
  // Found by an outside test: both left out the missing field and [],
  // which MongoDB matches (its index keys them as null, inside the bounds).
  Options o;
  o.durability = Durability::kNone;
  test::TestDB db(o);
  for (const char* d :
       {R"({"_id": 1, "a": 1})", R"({"_id": 2})", R"({"_id": 3, "a": []})",
        R"({"_id": 4, "a": null})", R"({"_id": 5, "a": [[]]})",
        R"({"_id": 6, "a": {"$minKey": 1}})", R"({"_id": 7, "a": {"$maxKey": 1}})"}) {
    for (const char* c : {"plain", "indexed", "sparse"}) REQUIRE(db->Insert(c, J(d)).ok());
  }
  REQUIRE(db->CreateIndex("indexed", "a").ok());
  IndexOptions sparse;
  sparse.sparse = true;
  REQUIRE(db->CreateIndex("sparse", "a", sparse).ok());
  struct Case {
    const char* filter;
    uint64_t count;
  };
  for (const Case& c :
       {Case{R"({"a": {"$gt": {"$minKey": 1}}})", 6}, Case{R"({"a": {"$gte": {"$minKey": 1}}})", 7},
        Case{R"({"a": {"$lt": {"$maxKey": 1}}})", 6}, Case{R"({"a": {"$lte": {"$maxKey": 1}}})", 7},
        Case{R"({"a": {"$gt": {"$minKey": 1}, "$lt": {"$maxKey": 1}}})", 5},
        Case{R"({"a": {"$not": {"$gt": {"$minKey": 1}}}})", 1},
        // Not [] or [[]]: an array with no document in it gives "a.b" no
        // value, not a missing one (MongoDB's null_query_semantics).
        Case{R"({"a.b": {"$gt": {"$minKey": 1}}})", 5},
        Case{R"({"a.b": {"$not": {"$gt": {"$minKey": 1}}}})", 2}}) {
    CAPTURE(c.filter);
    for (const char* coll : {"plain", "indexed", "sparse"}) {
      CAPTURE(coll);
      CHECK(db->Count(coll, J(c.filter)).value() == c.count);
      auto found = db->Find(coll, J(c.filter));
      REQUIRE(found.ok());
      CHECK(found.value().size() == c.count);
    }
  }
}

TEST_CASE("Filter: a dotted path through an array with no document in it reaches nothing",
          "[filter][engine]") {
  // Found by an outside test: {"a.b": null} matched {a: []} and {a: [1]}, and
  // {"a.b": {$ne: null}} matched neither, so a delete by such a filter took
  // the wrong documents. The documents and answers are those of MongoDB's
  // null_query_semantics test (less its undefined values).
  Options o;
  o.durability = Durability::kNone;
  test::TestDB db(o);
  for (const char* d :
       {R"({"_id": "empty_subobject", "a": {}})", R"({"_id": "null", "a": null})",
        R"({"_id": "number", "a": 4})", R"({"_id": "b_not_null", "a": {"b": "hi"}})",
        R"({"_id": "b_null", "a": {"b": null}})", R"({"_id": "no_a"})",
        R"({"_id": "double_array", "a": [[]]})", R"({"_id": "empty_array", "a": []})",
        R"({"_id": "objects_null_missing", "a": [{"b": null}, {"b": null}, {}]})",
        R"({"_id": "objects_no_null", "a": [{"b": 1}, {"b": 3}, {"b": "s"}]})",
        R"({"_id": "objects_some_null", "a": [{"b": null}, {"b": 3}]})",
        R"({"_id": "objects_some_missing", "a": [{"b": 3}, {}]})",
        R"({"_id": "values_all_null", "a": [null, null]})",
        R"({"_id": "values_no_null", "a": [1, "s", 4]})",
        R"({"_id": "values_with_null", "a": [1, "s", null, 4]})"}) {
    for (const char* c : {"plain", "indexed"}) REQUIRE(db->Insert(c, J(d)).ok());
  }
  REQUIRE(db->CreateIndex("indexed", "a.b").ok());
  auto ids_of = [](const std::vector<Document>& docs) {
    std::set<std::string> ids;
    for (const Document& d : docs) {
      const Value id = d.Get("_id").value();
      ids.emplace(id.get()->value.v_utf8.str, id.get()->value.v_utf8.len);
    }
    return ids;
  };
  const std::set<std::string> null_ids = {"empty_subobject",
                                          "null",
                                          "number",
                                          "b_null",
                                          "no_a",
                                          "objects_null_missing",
                                          "objects_some_missing",
                                          "objects_some_null"};
  const std::set<std::string> not_null_ids = {
      "b_not_null",      "double_array",   "empty_array",     "objects_no_null",
      "values_all_null", "values_no_null", "values_with_null"};
  const std::set<std::string> no_b_ids = {
      "no_a",        "empty_subobject", "null",           "number",          "double_array",
      "empty_array", "values_all_null", "values_no_null", "values_with_null"};
  struct Case {
    const char* filter;
    const std::set<std::string>* ids;
  };
  for (const Case& c :
       {Case{R"({"a.b": null})", &null_ids}, Case{R"({"a.b": {"$in": [null, 75]}})", &null_ids},
        Case{R"({"$or": [{"a.b": null}, {"a.b": 75}]})", &null_ids},
        Case{R"({"a.b": {"$ne": null}})", &not_null_ids},
        Case{R"({"a.b": {"$nin": [null, 75]}})", &not_null_ids},
        Case{R"({"a.b": {"$exists": false}})", &no_b_ids}}) {
    CAPTURE(c.filter);
    for (const char* coll : {"plain", "indexed"}) {
      CAPTURE(coll);
      auto found = db->Find(coll, J(c.filter));
      REQUIRE(found.ok());
      CHECK(ids_of(found.value()) == *c.ids);
      CHECK(db->Count(coll, J(c.filter)).value() == c.ids->size());
    }
  }
  // A numeric part: the element at that place, or a document element's field.
  auto found = db->Find("plain", J(R"({"a.1": null})"));
  REQUIRE(found.ok());
  CHECK(ids_of(found.value()) ==
        std::set<std::string>{"empty_subobject", "null", "number", "b_not_null", "b_null", "no_a",
                              "objects_null_missing", "objects_some_missing", "objects_no_null",
                              "objects_some_null", "values_all_null"});
}

TEST_CASE("Filter: a regex that runs out of PCRE2's match limit fails the query, not the match",
          "[filter][engine]") {
  // Found by an outside test: the limit read as "no match", so find, count,
  // $not and $pull answered without the documents it hit.
  Options o;
  o.durability = Durability::kNone;
  test::TestDB db(o);
  for (int n : {5, 10, 30, 100}) {
    REQUIRE(db->Insert("c", J("{\"_id\": " + std::to_string(n) + ", \"s\": \"" +
                              std::string(static_cast<size_t>(n), 'a') + "b\", \"t\": [\"" +
                              std::string(static_cast<size_t>(n), 'a') + "b\"]}"))
                .ok());
  }
  const std::string re = R"("^(a+)+$|b")";
  for (const std::string& filter :
       {R"({"s": {"$regex": )" + re + "}}", R"({"s": {"$not": {"$regex": )" + re + "}}}",
        R"({"s": {"$in": [{"$regex": )" + re + "}]}}"}) {
    CAPTURE(filter);
    auto n = db->Count("c", J(filter));
    REQUIRE_FALSE(n.ok());
    CHECK(n.status().IsInvalidArgument());
    CHECK(n.status().ToString().find("match limit") != std::string::npos);
    CHECK_FALSE(db->Find("c", J(filter)).ok());
  }
  auto r = db->UpdateMany("c", J("{}"), J(R"({"$pull": {"t": {"$regex": )" + re + "}}}"));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().ToString().find("match limit") != std::string::npos);
  CHECK(db->Count("c", J(R"({"t": {"$size": 1}})")).value() == 4);  // nothing pulled
  // A regex that does not run out still answers, on the same thread.
  CHECK(db->Count("c", J(R"({"s": {"$regex": "b$"}})")).value() == 4);
}

}  // namespace
}  // namespace mmdoc::engine
