// Filter: parsing, MongoDB matching semantics over documents of mixed
// types, and the soundness of IndexBounds (randomized: every matching
// document has an index key inside the bounds).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/query.h"
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

Filter F(const std::string& json) {
  auto f = Filter::Parse(D(json));
  INFO(json << ": " << f.status().ToString());
  REQUIRE(f.ok());
  return std::move(f).value();
}

bool M(const std::string& filter, const std::string& doc) {
  Document d = D(doc);
  return F(filter).Matches(d.data(), d.size());
}

// The documents every operator is checked against.
const std::vector<std::string> kDocs = {
    R"({"_id": 0, "a": 5})",
    R"({"_id": 1, "a": 5.0})",
    R"({"_id": 2, "a": {"$numberLong": "7"}})",
    R"({"_id": 3, "a": 2.5})",
    R"({"_id": 4, "a": "5"})",
    R"({"_id": 5, "a": null})",
    R"({"_id": 6})",
    R"({"_id": 7, "a": [1, 5, "x"]})",
    R"({"_id": 8, "a": {"b": 5}})",
    R"({"_id": 9, "a": true})",
    R"({"_id": 10, "a": {"$oid": "0123456789abcdef01234567"}})",
    R"({"_id": 11, "a": {"$date": 1000}})",
    R"({"_id": 12, "a": []})",
    R"({"_id": 13, "a": [[5]]})",
    R"({"_id": 14, "a": [{"b": 1}, {"b": 6}]})",
    R"({"_id": 15, "a": {"$numberDouble": "NaN"}})",
};

// The _ids of kDocs that `filter` matches.
std::vector<int> Which(const std::string& filter) {
  Filter f = F(filter);
  std::vector<int> ids;
  for (size_t i = 0; i < kDocs.size(); ++i) {
    Document d = D(kDocs[i]);
    if (f.Matches(d.data(), d.size())) ids.push_back(static_cast<int>(i));
  }
  return ids;
}

using Ids = std::vector<int>;

TEST_CASE("Filter: MayMatchIn finds the needle at every offset, both search paths", "[filter]") {
  // {v: s} has the needle int32(len+1) s NUL. Hays of 0..300 bytes hold it
  // at each possible offset, or a near miss (first and last character
  // right, one byte between wrong), among bytes that share its first byte.
  std::mt19937_64 rng(5);
  for (bool sse2 : {false, true}) {
    DisableAvx2SearchForTesting(sse2);
    for (size_t slen : {1u, 2u, 15u, 36u, 40u}) {
      std::string s;
      for (size_t i = 0; i < slen; i++) s.push_back(static_cast<char>('a' + rng() % 3));
      Filter f = F("{\"v\": \"" + s + "\"}");
      REQUIRE(f.HasNeedle());
      std::string needle(4, '\0');
      const uint32_t l = static_cast<uint32_t>(slen + 1);
      std::memcpy(&needle[0], &l, 4);
      needle += s;
      needle.push_back('\0');
      for (size_t len = 0; len <= 300; len += 1 + len / 16) {
        for (int variant = 0; variant < 3; variant++) {
          std::string hay(len, '\0');
          for (char& c : hay) c = rng() % 4 == 0 ? needle[0] : static_cast<char>('a' + rng() % 3);
          if (variant > 0 && len >= needle.size()) {
            const size_t at = rng() % (len - needle.size() + 1);
            hay.replace(at, needle.size(), needle);
            if (variant == 2 && slen > 1) hay[at + 4] = 'z';  // near miss
          }
          const bool want =
              std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
          INFO("sse2 " << sse2 << " slen " << slen << " len " << len << " variant " << variant);
          CHECK(f.MayMatchIn(reinterpret_cast<const uint8_t*>(hay.data()), hay.size()) == want);
        }
      }
    }
  }
  DisableAvx2SearchForTesting(false);
  // No needle (not a string equality): every span may match.
  CHECK_FALSE(F(R"({"v": {"$gt": 1}})").HasNeedle());
  CHECK(F(R"({"v": {"$gt": 1}})").MayMatchIn(nullptr, 0));
}

TEST_CASE("Filter: equality over mixed types", "[filter]") {
  CHECK(Which("{}").size() == kDocs.size());
  CHECK(Which(R"({"a": 5})") == Ids{0, 1, 7});
  CHECK(Which(R"({"a": {"$numberLong": "5"}})") == Ids{0, 1, 7});
  CHECK(Which(R"({"a": "5"})") == Ids{4});
  CHECK(Which(R"({"a": null})") == Ids{5, 6});
  CHECK(Which(R"({"a": [1, 5, "x"]})") == Ids{7});
  CHECK(Which(R"({"a": [5]})") == Ids{13});
  CHECK(Which(R"({"a": []})") == Ids{12});
  CHECK(Which(R"({"a": {"b": 5}})") == Ids{8});
  CHECK(Which(R"({"a": true})") == Ids{9});
  CHECK(Which(R"({"a": {"$oid": "0123456789abcdef01234567"}})") == Ids{10});
  CHECK(Which(R"({"a": {"$date": 1000}})") == Ids{11});
  CHECK(Which(R"({"a": {"$numberDouble": "NaN"}})") == Ids{15});
  CHECK(Which(R"({"a.b": 5})") == Ids{8});
  CHECK(Which(R"({"a.b": 6})") == Ids{14});
  CHECK(Which(R"({"a.1": 5})") == Ids{7});
  CHECK(Which(R"({"a": {"$eq": 5}})") == Ids{0, 1, 7});
  CHECK(Which(R"({"a": {"$eq": null}})") == Ids{5, 6});
}

TEST_CASE("Filter: range operators stay inside a type bracket", "[filter]") {
  CHECK(Which(R"({"a": {"$gt": 5}})") == Ids{2});
  CHECK(Which(R"({"a": {"$gte": 5}})") == Ids{0, 1, 2, 7});
  CHECK(Which(R"({"a": {"$lt": 5}})") == Ids{3, 7});
  CHECK(Which(R"({"a": {"$lte": 2.5}})") == Ids{3, 7});
  CHECK(Which(R"({"a": {"$gt": "4"}})") == Ids{4, 7});
  CHECK(Which(R"({"a": {"$gte": null}})") == Ids{5, 6});
  CHECK(Which(R"({"a": {"$gt": null}})").empty());
  CHECK(Which(R"({"a": {"$gt": false}})") == Ids{9});
  CHECK(Which(R"({"a": {"$gte": {"$date": 0}}})") == Ids{11});
  CHECK(Which(R"({"a": {"$gt": {"b": 4}}})") == Ids{8, 14});  // {"b": 6} > {"b": 4}
  CHECK(Which(R"({"a": {"$gte": {"$numberDouble": "NaN"}}})") == Ids{15});
  CHECK(Which(R"({"a": {"$gt": {"$numberDouble": "-Infinity"}}})") == Ids{0, 1, 2, 3, 7});
  CHECK(Which(R"({"a.b": {"$gt": 5}})") == Ids{14});
  // Each range predicate may be met by a different element.
  CHECK(Which(R"({"a": {"$gt": 4, "$lt": 2}})") == Ids{7});
  CHECK(Which(R"({"a": {"$gt": 4, "$lt": 6}})") == Ids{0, 1, 7});
  // MinKey and MaxKey bound everything: missing and [] too (MongoDB).
  CHECK(Which(R"({"a": {"$gte": {"$minKey": 1}}})").size() == kDocs.size());
  CHECK(Which(R"({"a": {"$gt": {"$minKey": 1}}})").size() == kDocs.size());
  CHECK(Which(R"({"a": {"$lte": {"$maxKey": 1}}})").size() == kDocs.size());
  CHECK(Which(R"({"a": {"$lt": {"$maxKey": 1}}})").size() == kDocs.size());
  CHECK(Which(R"({"a": {"$not": {"$gt": {"$minKey": 1}}}})").empty());
}

TEST_CASE("Filter: $ne, $in, $nin, $exists", "[filter]") {
  CHECK(Which(R"({"a": {"$ne": 5}})") == Ids{2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(Which(R"({"a": {"$ne": null}})") == Ids{0, 1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(Which(R"({"a": {"$in": [7, "5", true]}})") == Ids{2, 4, 9});
  CHECK(Which(R"({"a": {"$in": [null]}})") == Ids{5, 6});
  CHECK(Which(R"({"a": {"$in": []}})").empty());
  CHECK(Which(R"({"a": {"$in": ["x"]}})") == Ids{7});
  CHECK(Which(R"({"a": {"$nin": [5, null]}})") == Ids{2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(Which(R"({"a": {"$exists": true}})").size() == kDocs.size() - 1);
  CHECK(Which(R"({"a": {"$exists": false}})") == Ids{6});
  CHECK(Which(R"({"a.b": {"$exists": true}})") == Ids{8, 14});
  CHECK(Which(R"({"a": {"$exists": 0}})") == Ids{6});
}

TEST_CASE("Filter: logical operators", "[filter]") {
  CHECK(Which(R"({"a": 5, "_id": 1})") == Ids{1});
  CHECK(M(R"({"a.b.c": 1, "a.b.d": 2})", R"({"a": {"b": {"c": 1, "d": 2}}})"));
  CHECK_FALSE(M(R"({"a.b.c": 1, "a.b.d": 3})", R"({"a": {"b": {"c": 1, "d": 2}}})"));
  // An array with no document in it gives "a.b" no value at all, not a
  // missing one (MongoDB's null_query_semantics); a scalar gives a missing one.
  CHECK_FALSE(M(R"({"a.b": null})", R"({"a": [1, 2]})"));
  CHECK(M(R"({"a.b": {"$ne": null}})", R"({"a": [1, 2]})"));
  CHECK(M(R"({"a.b": null})", R"({"a": 4})"));
  CHECK(M(R"({"a.b": 2})", R"({"a": [{"b": [1, 2]}]})"));
  CHECK(M(R"({"a.0.b": 2})", R"({"a": [{"b": 2}]})"));
  CHECK(Which(R"({"$and": [{"a": {"$gte": 5}}, {"a": {"$lt": 6}}]})") == Ids{0, 1, 7});
  CHECK(Which(R"({"$or": [{"a": "5"}, {"_id": 9}]})") == Ids{4, 9});
  CHECK(Which(R"({"$nor": [{"a": {"$exists": true}}]})") == Ids{6});
  CHECK(Which(R"({"$or": [{"$and": [{"a": 5}, {"_id": {"$gt": 0}}]}, {"a": true}]})") ==
        Ids{1, 7, 9});
}

TEST_CASE("Filter: bad filters are InvalidArgument naming the problem", "[filter]") {
  auto bad = [](const std::string& json, const std::string& needle) {
    auto f = Filter::Parse(D(json));
    INFO(json);
    REQUIRE_FALSE(f.ok());
    CHECK(f.status().IsInvalidArgument());
    INFO(f.status().message());
    CHECK(f.status().message().find(needle) != std::string::npos);
  };
  bad(R"({"a": {"$foo": 1}})", "unknown operator $foo");
  bad(R"({"$foo": [{"a": 1}]})", "unknown operator $foo");
  bad(R"({"a": {"$not": 1}})", "$not");
  bad(R"({"a": {"$where": "x"}})", "unsupported operator $where");
  bad(R"({"a": {"$in": 5}})", "$in");
  bad(R"({"a": {"$nin": {"x": 1}}})", "$nin");
  bad(R"({"$and": {"a": 1}})", "$and");
  bad(R"({"$or": []})", "$or");
  bad(R"({"$or": [1]})", "$or");
  bad(R"({"a": {"$gt": 1, "b": 2}})", "mix");
  bad(R"({"a": {"$exists": "yes"}})", "$exists");
  bad(R"({"a..b": 1})", "path");
  bad(R"({"": 1})", "path");
  // A part starting with '$' names no stored field (an outside test found
  // these matching nothing instead), but a DBRef's does.
  bad(R"({"a.$foo": 1})", "starting with '$'");
  bad(R"({"a.$": 1})", "starting with '$'");
  bad(R"({"a.b.$x.c": {"$gt": 1}})", "starting with '$'");
  CHECK(F(R"({"a.$id": 1, "a.$ref": "c", "a.$db": "d"})").MatchesAll() == false);
  Filter all;
  CHECK(all.MatchesAll());
  CHECK(F("{}").MatchesAll());
  CHECK_FALSE(F(R"({"a": 1})").MatchesAll());
}

// Filter::Parse of `b`, which the test built with libbson (to hold what
// JSON cannot say, such as a real "$regex" key).
Result<Filter> ParseBson(bson_t* b) {
  auto f = Filter::Parse(b);
  bson_destroy(b);
  return f;
}

TEST_CASE("Filter: unsupported operators and value types are refused, never matched", "[filter]") {
  auto refused = [](const std::string& json, const std::string& needle) {
    auto f = Filter::Parse(D(json));
    INFO(json);
    REQUIRE_FALSE(f.ok());
    CHECK(f.status().IsInvalidArgument());
    INFO(f.status().message());
    CHECK(f.status().message().find(needle) != std::string::npos);
  };
  // libbson's JSON reader turns {"$regex": ...} into a BSON regex value.
  // Once that was compared by equality (so matched nothing, and $nin/$ne
  // matched everything); now it is a pattern where MongoDB makes it one
  // (filter_array_test.cc), a value under $eq and inside constants, and
  // refused where MongoDB refuses it: $ne and the range operators.
  for (const char* re : {R"({"$regex": "^user"})", R"({"$regex": "^u", "$options": "i"})",
                         R"({"$options": "i", "$regex": "^u"})",
                         R"({"$regularExpression": {"pattern": "x", "options": ""}})"}) {
    const std::string r = re;
    for (const char* op : {"$ne", "$gt", "$gte", "$lt", "$lte"}) {
      refused(std::string(R"({"name": {")") + op + "\": " + r + "}}", op);
      refused(R"({"$or": [{"a": 1}, {"name": {")" + std::string(op) + "\": " + r + "}}]}", op);
      refused(R"({"$and": [{"$nor": [{"name": {")" + std::string(op) + "\": " + r + "}}]}]}", op);
    }
  }
  // Operators MongoDB has and this filter does not, at every depth.
  for (const char* op : {"$where", "$text", "$expr", "$jsonSchema", "$comment", "$foo"}) {
    const std::string o = op;
    const std::string arg = R"({"$search": "x"})";
    refused("{\"" + o + "\": " + arg + "}", o);
    refused(R"({"$and": [{")" + o + "\": " + arg + "}]}", o);
    refused(R"({"$or": [{"a": 1}, {")" + o + "\": " + arg + "}]}", o);
    refused(R"({"$nor": [{"$or": [{")" + o + "\": " + arg + "}]}]}", o);
    refused(R"({"a": {"$elemMatch": {")" + o + "\": " + arg + "}}}", o);
  }
  for (const char* op : {"$where", "$text", "$expr", "$bitsAllSet", "$bitsAnyClear", "$geoWithin",
                         "$near", "$foo"}) {
    const std::string o = op;
    refused(R"({"a": {")" + o + R"(": [1, 2]}})", o);
    refused(R"({"a": {"$gt": 1, ")" + o + R"(": {"b": 1}}})", o);
    refused(R"({"$or": [{"a": 1}, {"b.c": {")" + o + R"(": 1}}]})", o);
    refused(R"({"a": {"$not": {")" + o + R"(": 1}}})", o);
  }
  // Any operator inside a document operand: a stored document has no '$'
  // keys.
  // ($type is left out: libbson's JSON reader takes {"$type": 1} for binary.)
  for (const char* op : {"$elemMatch", "$size", "$all", "$not", "$mod", "$gt", "$where", "$text",
                         "$expr", "$bitsAllSet", "$geoWithin", "$near", "$foo"}) {
    const std::string o = op;
    refused(R"({"a": {"$eq": {")" + o + R"(": 1}}})", o);
    refused(R"({"a": {"$ne": {"b": {")" + o + R"(": 1}}}})", o);
    refused(R"({"a": {"$in": [1, {")" + o + R"(": 1}]}})", o);
    refused(R"({"a": {"$nin": [[{")" + o + R"(": 1}]]}})", o);
    refused(R"({"a": {"$all": [[{")" + o + R"(": 1}]]}})", o);
    refused(R"({"a": {"b": {")" + o + R"(": 1}}})", o);
    refused(R"({"a": [{")" + o + R"(": 1}]})", o);
  }
  refused(R"({"$where": "this.a > 1"})", "unsupported operator $where");
  refused(R"({"a": {"$foo": 1}})", "unknown operator $foo");
  // MongoDB: "cannot compare to undefined".
  refused(R"({"a": {"$undefined": true}})", "undefined");
  refused(R"({"a": {"$ne": {"$undefined": true}}})", "undefined");
  refused(R"({"a": {"$lte": {"$undefined": true}}})", "undefined");
  refused(R"({"a": {"$in": [1, {"$undefined": true}]}})", "undefined");
  refused(R"({"a": {"$nin": [{"$undefined": true}]}})", "undefined");
  refused(R"({"a": {"$all": [{"$undefined": true}]}})", "undefined");

  // Real "$regex" / "$options" keys (what a BSON client sends) and a regex
  // value built directly.
  bson_t b, sub, arr;
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_UTF8(&sub, "$regex", "^u");
  bson_append_document_end(&b, &sub);
  auto f = ParseBson(&b);
  REQUIRE(f.ok());
  CHECK(f.value().Matches(D(R"({"a": "user"})").data(), D(R"({"a": "user"})").size()));
  CHECK_FALSE(f.value().Matches(D(R"({"a": "xu"})").data(), D(R"({"a": "xu"})").size()));
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_UTF8(&sub, "$options", "i");
  bson_append_document_end(&b, &sub);
  f = ParseBson(&b);
  REQUIRE_FALSE(f.ok());
  CHECK(f.status().message().find("$options needs a $regex") != std::string::npos);
  // {$nin: [/x/]}: no document with an x in its string.
  bson_init(&b);
  BSON_APPEND_DOCUMENT_BEGIN(&b, "a", &sub);
  BSON_APPEND_ARRAY_BEGIN(&sub, "$nin", &arr);
  BSON_APPEND_REGEX(&arr, "0", "x", "");
  bson_append_array_end(&sub, &arr);
  bson_append_document_end(&b, &sub);
  f = ParseBson(&b);
  REQUIRE(f.ok());
  CHECK_FALSE(f.value().Matches(D(R"({"a": "axe"})").data(), D(R"({"a": "axe"})").size()));
  CHECK(f.value().Matches(D(R"({"a": "abc"})").data(), D(R"({"a": "abc"})").size()));
}

TEST_CASE("Filter: code, symbol and DBPointer values match by equality", "[filter]") {
  // MongoDB compares these like any other value ($where is what runs
  // code): a symbol is in the string bracket, code and DBPointer in their
  // own.
  const std::string code = R"({"$code": "x+1"})";
  const std::string sym = R"({"$symbol": "x+1"})";
  const std::string ptr =
      R"({"$dbPointer": {"$ref": "c", "$id": {"$oid": "0123456789abcdef01234567"}}})";
  CHECK(M(R"({"a": )" + code + "}", R"({"a": )" + code + "}"));
  CHECK_FALSE(M(R"({"a": )" + code + "}", R"({"a": "x+1"})"));
  // (Not inside arrays: libbson 1.23's JSON reader writes a garbage key for
  // a $code element of an array.)
  CHECK(M(R"({"a": {"$ne": "x+1"}})", R"({"a": )" + code + "}"));
  CHECK(M(R"({"a": )" + sym + "}", R"({"a": "x+1"})"));
  CHECK(M(R"({"a": "x+1"})", R"({"a": )" + sym + "}"));
  CHECK(M(R"({"a": {"$gt": "e"}})", R"({"a": )" + sym + "}"));
  CHECK(M(R"({"a": )" + ptr + "}", R"({"a": )" + ptr + "}"));
  CHECK(M(R"({"a": {"$ne": )" + ptr + "}}", R"({"a": )" + code + "}"));
  CHECK_FALSE(M(R"({"a": {"$gt": "a"}})", R"({"a": )" + code + "}"));
}

// ------------------------------------------------------------ bounds

bool InInterval(const std::string& k, const KeyInterval& i) {
  if (!i.lo.empty() && (k < i.lo || (k == i.lo && !i.lo_inclusive))) return false;
  if (!i.hi.empty() && (k > i.hi || (k == i.hi && !i.hi_inclusive))) return false;
  return true;
}

bool AnyKeyInside(const Document& d, const std::string& path,
                  const std::vector<KeyInterval>& bounds) {
  std::vector<std::string> keys;
  IndexKeys(d.data(), d.size(), path, &keys);
  for (const auto& k : keys) {
    for (const auto& i : bounds) {
      if (InInterval(k, i)) return true;
    }
  }
  return false;
}

std::string Key(const std::string& json) {
  std::string k;
  AppendKey(Value::FromJson(json).value().get(), &k);
  return k;
}

TEST_CASE("Filter: IndexBounds shapes", "[filter]") {
  auto b = F(R"({"a": 5})").IndexBounds("a");
  REQUIRE(b);
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].lo == Key("5"));
  CHECK((*b)[0].hi == Key("5"));
  CHECK_FALSE(F(R"({"a": 5})").IndexBounds("b"));
  CHECK_FALSE(F(R"({"a": {"$ne": 5}})").IndexBounds("a"));
  CHECK_FALSE(F(R"({"a": {"$nin": [5]}})").IndexBounds("a"));
  CHECK_FALSE(F(R"({"a": {"$exists": false}})").IndexBounds("a"));
  CHECK_FALSE(F(R"({"$or": [{"a": 1}, {"b": 2}]})").IndexBounds("a"));
  CHECK_FALSE(F("{}").IndexBounds("a"));
  b = F(R"({"a": {"$in": [3, 1, 3.0, 2]}})").IndexBounds("a");
  REQUIRE(b);
  REQUIRE(b->size() == 3);
  CHECK((*b)[0].lo == Key("1"));
  CHECK((*b)[2].lo == Key("3"));
  b = F(R"({"$or": [{"a": 1}, {"a": {"$gte": 0, "$lte": 2}}]})").IndexBounds("a", false);
  REQUIRE(b);
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].lo == Key("0"));
  CHECK((*b)[0].hi == Key("2"));
  b = F(R"({"a": {"$gt": 5}})").IndexBounds("a");
  REQUIRE(b);
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].lo == Key("5"));
  CHECK_FALSE((*b)[0].lo_inclusive);
  CHECK((*b)[0].hi < Key(R"("")"));  // stays inside the numbers
  CHECK((*b)[0].hi > Key(R"({"$numberDouble": "Infinity"})"));
  b = F(R"({"a": null})").IndexBounds("a");
  REQUIRE(b);
  std::string null_key;
  AppendNullKey(&null_key);
  CHECK((*b)[0].lo == null_key);
  // Intersection when the index is not multikey; one conjunct otherwise.
  b = F(R"({"a": {"$gte": 1, "$lt": 3}})").IndexBounds("a", false);
  REQUIRE(b);
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].lo == Key("1"));
  CHECK((*b)[0].hi == Key("3"));
  b = F(R"({"a": {"$gt": 4, "$lt": 2}})").IndexBounds("a", false);
  REQUIRE(b);
  CHECK(b->empty());
  b = F(R"({"a": {"$gt": 4, "$lt": 2}})").IndexBounds("a");
  REQUIRE(b);
  CHECK(b->size() == 1);
  b = F(R"({"a": {"$gte": 1}, "b": 2, "$and": [{"a": 2}]})").IndexBounds("a");
  REQUIRE(b);  // prefers the point
  REQUIRE(b->size() == 1);
  CHECK((*b)[0].lo == Key("2"));
  CHECK((*b)[0].hi == Key("2"));
}

// Random values from a small pool, so that filters and documents collide.
class Pool {
 public:
  explicit Pool(uint64_t seed) : rng_(seed) {}
  std::string Scalar() {
    static const char* kValues[] = {"0",
                                    "1",
                                    "2",
                                    "5",
                                    "-1",
                                    "1.5",
                                    "2.0",
                                    R"({"$numberLong": "2"})",
                                    R"({"$numberDouble": "NaN"})",
                                    R"({"$numberDouble": "Infinity"})",
                                    "\"\"",
                                    "\"a\"",
                                    "\"b\"",
                                    "null",
                                    "true",
                                    "false",
                                    R"({"$date": 5})",
                                    R"({"x": 1})",
                                    R"({"x": 2})",
                                    R"({"$oid": "0123456789abcdef01234567"})",
                                    R"({"$minKey": 1})",
                                    R"({"$maxKey": 1})"};
    return kValues[rng_() % (sizeof(kValues) / sizeof(kValues[0]))];
  }
  std::string AnyValue(int depth = 0) {
    switch (rng_() % (depth < 2 ? 5 : 3)) {
      case 3: {
        std::string s = "[";
        int n = static_cast<int>(rng_() % 4);
        for (int i = 0; i < n; ++i) s += (i ? ", " : "") + AnyValue(depth + 1);
        return s + "]";
      }
      case 4: {
        std::string s = "{";
        int n = static_cast<int>(rng_() % 3);
        for (int i = 0; i < n; ++i)
          s += std::string(i ? ", " : "") + "\"b\": " + AnyValue(depth + 1);
        return s + "}";
      }
      default:
        return Scalar();
    }
  }
  std::string Doc() {
    std::string s = "{\"_id\": 1";
    if (rng_() % 5) s += ", \"a\": " + AnyValue();
    if (rng_() % 2) s += ", \"c\": " + Scalar();
    return s + "}";
  }
  std::string Path() { return rng_() % 4 ? "a" : "a.b"; }
  std::string Pred() {
    static const char* kOps[] = {"$eq", "$gt", "$gte", "$lt",    "$lte",
                                 "$ne", "$in", "$nin", "$exists"};
    std::string op = kOps[rng_() % 9];
    if (rng_() % 4 == 0) return AnyValue();  // implicit equality
    std::string arg;
    if (op == "$in" || op == "$nin") {
      arg = "[";
      int n = static_cast<int>(rng_() % 3);
      for (int i = 0; i < n; ++i) arg += (i ? ", " : "") + AnyValue(1);
      arg += "]";
    } else if (op == "$exists") {
      arg = rng_() % 2 ? "true" : "false";
    } else {
      arg = AnyValue(1);
    }
    std::string s = "{\"" + op + "\": " + arg;
    if (rng_() % 3 == 0) s += ", \"$lt\": " + Scalar();  // a second conjunct
    return s + "}";
  }
  std::string Filter(int depth = 0) {
    switch (rng_() % (depth < 2 ? 5 : 3)) {
      case 3:
      case 4: {
        const char* kLogic[] = {"$and", "$or", "$nor"};
        std::string s = std::string("{\"") + kLogic[rng_() % 3] + "\": [";
        int n = 1 + static_cast<int>(rng_() % 2);
        for (int i = 0; i < n; ++i) s += (i ? ", " : "") + Filter(depth + 1);
        return s + "]}";
      }
      default: {
        std::string s = "{\"" + Path() + "\": " + Pred();
        if (rng_() % 3 == 0) s += ", \"c\": " + Scalar();
        return s + "}";
      }
    }
  }

 private:
  std::mt19937_64 rng_;
};

TEST_CASE("Filter: IndexBounds are sound (randomized)", "[filter]") {
  uint64_t seed = test::Seed("index bounds soundness");
  Pool pool(seed);
  const int filters = static_cast<int>(400 * test::Scale());
  std::vector<Document> docs;
  for (int i = 0; i < 300; ++i) docs.push_back(D(pool.Doc()));
  int bounded = 0, matched = 0;
  for (int f = 0; f < filters; ++f) {
    std::string json = pool.Filter();
    Filter filter = F(json);
    for (const char* path : {"a", "a.b"}) {
      for (bool multikey : {true, false}) {
        auto bounds = filter.IndexBounds(path, multikey);
        if (!bounds) continue;
        ++bounded;
        for (const Document& d : docs) {
          if (!filter.Matches(d.data(), d.size())) continue;
          ++matched;
          std::vector<std::string> keys;
          IndexKeys(d.data(), d.size(), path, &keys);
          // The intersection is only promised for single-key documents.
          if (!multikey && keys.size() > 1) continue;
          INFO("filter " << json << " path " << path << " multikey " << multikey << " doc "
                         << d.ToJson() << " seed " << seed);
          REQUIRE(AnyKeyInside(d, path, *bounds));
        }
      }
    }
  }
  INFO("bounded " << bounded << " matched " << matched);
  CHECK(bounded > 0);
  CHECK(matched > 0);
}

TEST_CASE("Filter: string equality prefilter never drops a match", "[filter]") {
  // Matches first looks for the operand's encoded bytes (length, bytes,
  // NUL); these are the places a string can sit.
  CHECK(M(R"({"a": "xyz"})", R"({"_id": 1, "a": "xyz"})"));
  CHECK(M(R"({"a": "xyz"})", R"({"_id": 1, "a": ["q", "xyz"]})"));
  CHECK(M(R"({"a.b": "xyz"})", R"({"_id": 1, "a": [{"b": "r"}, {"b": "xyz"}]})"));
  CHECK(M(R"({"a": {"$eq": ""}})", R"({"_id": 1, "a": ""})"));
  CHECK(M(R"({"a": "xyz", "b": {"$gt": 1}})", R"({"_id": 1, "b": 2, "a": "xyz"})"));
  // The bytes elsewhere do not make a match; their absence rules one out.
  CHECK(!M(R"({"a": "xyz"})", R"({"_id": 1, "b": "xyz", "a": "xy"})"));
  CHECK(!M(R"({"a": "xyz"})", R"({"_id": 1, "a": "xyzw"})"));
  CHECK(!M(R"({"a": "xyz"})", R"({"_id": 1, "a": {"c": "xyz"}})"));
  CHECK(M(R"({"$or": [{"a": "xyz"}, {"b": 1}]})", R"({"_id": 1, "b": 1})"));
}

TEST_CASE("Filter: prefilter agrees with the full match (randomized)", "[filter]") {
  // {a: s} takes the byte prefilter, {a: {$in: [s]}} does not; both mean
  // the same. Strings of every length land at every offset, so the
  // 16-byte blocks, the overlapping last block and the scalar path are all
  // crossed.
  uint64_t seed = test::Seed("prefilter");
  std::mt19937_64 rng(seed);
  const int rounds = static_cast<int>(3000 * test::Scale());
  auto str = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; i++) s.push_back("ab%"[rng() % 3]);
    return s;
  };
  int matched = 0;
  for (int r = 0; r < rounds; r++) {
    std::string target = str(rng() % 40);
    bson_t b;
    bson_init(&b);
    BSON_APPEND_INT32(&b, "_id", r);
    int fields = static_cast<int>(rng() % 6);
    for (int f = 0; f < fields; f++) {
      std::string key = (rng() % 3 == 0) ? "a" : std::string(1 + rng() % 5, 'k');
      std::string v = (rng() % 4 == 0) ? target : str(rng() % 40);
      BSON_APPEND_UTF8(&b, key.c_str(), v.c_str());
    }
    auto doc = Document::FromBson(&b);
    bson_destroy(&b);
    REQUIRE(doc.ok());
    bson_t eq, in, arr, op;
    bson_init(&eq);
    BSON_APPEND_UTF8(&eq, "a", target.c_str());
    bson_init(&in);
    BSON_APPEND_DOCUMENT_BEGIN(&in, "a", &op);
    BSON_APPEND_ARRAY_BEGIN(&op, "$in", &arr);
    BSON_APPEND_UTF8(&arr, "0", target.c_str());
    bson_append_array_end(&op, &arr);
    bson_append_document_end(&in, &op);
    auto fe = Filter::Parse(&eq);
    auto fi = Filter::Parse(&in);
    bson_destroy(&eq);
    bson_destroy(&in);
    REQUIRE(fe.ok());
    REQUIRE(fi.ok());
    bool want = fi.value().Matches(doc.value().data(), doc.value().size());
    INFO("seed " << seed << " doc " << doc.value().ToJson() << " target '" << target << "'");
    REQUIRE(fe.value().Matches(doc.value().data(), doc.value().size()) == want);
    matched += want;
  }
  CHECK(matched > rounds / 10);
}

TEST_CASE("Filter: intervals are sorted and disjoint", "[filter]") {
  uint64_t seed = test::Seed("interval shape");
  Pool pool(seed);
  for (int f = 0; f < static_cast<int>(500 * test::Scale()); ++f) {
    std::string json = pool.Filter();
    auto b = F(json).IndexBounds("a", f % 2 == 0);
    if (!b) continue;
    for (size_t i = 1; i < b->size(); ++i) {
      INFO(json);
      const KeyInterval& prev = (*b)[i - 1];
      const KeyInterval& cur = (*b)[i];
      REQUIRE_FALSE(prev.hi.empty());
      REQUIRE(prev.hi <= cur.lo);
      if (prev.hi == cur.lo) CHECK_FALSE((prev.hi_inclusive || cur.lo_inclusive));
    }
  }
}

}  // namespace
}  // namespace mmdoc::engine
