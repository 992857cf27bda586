// Document and Value: JSON/BSON parsing, the limits of mmdoc/document.h,
// robustness against garbled BSON, and Value's copy/move.
#include "mmdoc/document.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/test_env.h"

namespace mmdoc {
namespace {

std::string Nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  for (int i = 0; i < depth; ++i) s += "}";
  return s;
}

// A BSON document of `depth` nested levels built with libbson directly
// (libbson's JSON parser stops a little short of 100 levels).
std::string NestedBson(int depth) {
  struct Level {
    bson_t b;
  };
  std::vector<Level> levels(depth);
  auto stack = [&levels](int i) { return &levels[i].b; };
  bson_init(stack(0));
  for (int i = 1; i < depth; ++i) bson_append_document_begin(stack(i - 1), "a", 1, stack(i));
  BSON_APPEND_INT32(stack(depth - 1), "x", 1);
  for (int i = depth - 1; i >= 1; --i) bson_append_document_end(stack(i - 1), stack(i));
  std::string out(reinterpret_cast<const char*>(bson_get_data(stack(0))), stack(0)->len);
  bson_destroy(stack(0));
  return out;
}

Document Parse(const std::string& json) {
  auto r = Document::FromJson(json);
  INFO(json << " -> " << r.status().ToString());
  REQUIRE(r.ok());
  return std::move(r).value();
}

TEST_CASE("Document: default is the empty document", "[document]") {
  Document d;
  CHECK(d.size() == 5);
  CHECK(d.ToJson() == "{ }");
  CHECK(d == Document::FromJson("{}").value());
}

TEST_CASE("Document: FromJson round-trips relaxed extended JSON", "[document]") {
  Document d = Parse(
      R"({"_id": {"$oid": "0123456789abcdef01234567"}, "n": 42, "l": {"$numberLong": "9007199254740993"},
          "d": 1.5, "s": "h\u00e9llo", "b": true, "z": null, "a": [1, "x", {"k": 2}],
          "t": {"$date": "2020-01-02T03:04:05Z"}, "nul": "a\u0000b", "": 7})");
  std::string json = d.ToJson();
  CHECK(json.find('\n') == std::string::npos);
  CHECK(json.find(R"("$oid" : "0123456789abcdef01234567")") != std::string::npos);
  CHECK(json.find(R"("l" : 9007199254740993)") != std::string::npos);
  CHECK(Parse(json) == d);  // relaxed JSON parses back to the same bytes
}

TEST_CASE("Document: FromJson rejects bad input", "[document]") {
  auto bad = [](const std::string& json, const std::string& needle) {
    auto r = Document::FromJson(json);
    INFO(json.substr(0, 80));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
    INFO(r.status().message());
    CHECK(r.status().message().find(needle) != std::string::npos);
  };
  bad("", "invalid JSON");
  bad("   ", "invalid JSON");
  bad("{\"a\": 1", "invalid JSON");
  bad("{\"a\": }", "invalid JSON");
  bad("{\"a\": 1} x", "invalid JSON");
  bad("{\"a\": 1} {\"b\": 2}", "more than one document");
  bad("[1, 2]", "object");
  bad("  [1]", "object");
  bad("42", "object");
  bad("\"s\"", "object");
  bad(std::string("{\"a\": \"\xff\"}"), "invalid JSON");
  bad(std::string("{\"\xc3\": 1}"), "invalid JSON");
  bad(std::string("{\"a\": \"\xed\xa0\x80\"}"), "invalid JSON");  // surrogate
  bad(Nested(101), "");
  bad(Nested(200), "");
}

// The value at "a" of `json`, or a failed test.
bson_value_t ValueOfA(const Document& d) {
  bson_iter_t it;
  bson_t b;
  d.View(&b);
  REQUIRE(bson_iter_init_find(&it, &b, "a"));
  return *bson_iter_value(&it);
}

TEST_CASE("Document: numbers libbson would change are refused, naming them", "[document]") {
  // libbson 1.23 read 18446744073709551616 as 0 (and
  // every integer from 2^64 on modulo 2^64), a decimal it cannot represent
  // as NaN, a bad $numberDouble as 0 and a $timestamp field past 2^32-1
  // modulo 2^32. Integers outside int64 are refused rather than stored as
  // doubles: nothing is rounded without the caller saying so.
  auto bad = [](const std::string& json, const std::string& needle) {
    for (int as_value = json[0] == '{' ? 0 : 1; as_value < 2; as_value++) {
      INFO(json << (as_value ? " (Value)" : ""));
      Status s;
      if (as_value) {
        s = Value::FromJson(json).status();
      } else {
        s = Document::FromJson(json).status();
      }
      REQUIRE_FALSE(s.ok());
      CHECK(s.IsInvalidArgument());
      INFO(s.message());
      CHECK(s.message().find(needle) != std::string::npos);
    }
  };
  const std::string range = " is out of range (int64)";
  bad(R"({"a": 18446744073709551616})", "integer 18446744073709551616" + range);
  bad(R"({"a": 18446744073709551617})", "integer 18446744073709551617" + range);
  bad(R"({"a": 36893488147419103233})", "integer 36893488147419103233" + range);
  bad(R"({"a": -18446744073709551616})", "integer -18446744073709551616" + range);
  bad(R"({"a": 123456789012345678901234567890})", "123456789012345678901234567890");
  bad("18446744073709551616", "integer 18446744073709551616" + range);
  bad(R"({"a": [1, {"b": [18446744073709551616]}]})", "18446744073709551616");
  bad(R"({"x": "18446744073709551616", "a": 18446744073709551616})", "18446744073709551616");
  // Filters, updates and dates are documents too.
  bad(R"({"n": {"$lt": 18446744073709551617}})", "18446744073709551617");
  bad(R"({"$inc": {"n": 18446744073709551616}})", "18446744073709551616");
  bad(R"({"a": {"$date": 18446744073709551616}})", "18446744073709551616");
  // libbson refuses these itself; the message names them.
  bad(R"({"a": 9223372036854775808})", "9223372036854775808");
  bad(R"({"a": 18446744073709551615})", "18446744073709551615");
  bad(R"({"a": -9223372036854775809})", "-9223372036854775809");
  bad(R"({"a": 1e400})", "1e400");
  bad(R"({"a": -1e400})", "-1e400");
  bad(R"({"a": {"$numberLong": "9223372036854775808"}})", "9223372036854775808");
  bad(R"({"a": {"$numberLong": "18446744073709551616"}})", "18446744073709551616");
  bad(R"({"a": {"$numberLong": "-9223372036854775809"}})", "-9223372036854775809");
  bad(R"({"a": {"$numberInt": "2147483648"}})", "2147483648");
  bad(R"({"a": {"$numberInt": "-2147483649"}})", "-2147483649");
  bad(R"({"a": {"$numberDouble": "1e400"}})", "1e400");
  // Decimals libbson turns into NaN without the text saying so.
  const std::string dec = " is out of range or not a number (decimal128)";
  bad(R"({"a": {"$numberDecimal": "1e9999"}})", "decimal 1e9999" + dec);
  bad(R"({"a": {"$numberDecimal": "-1e9999"}})", "decimal -1e9999" + dec);
  bad(R"({"a": {"$numberDecimal": "1E6145"}})", "1E6145");
  bad(R"({"a": {"$numberDecimal": "1e-6177"}})", "1e-6177");
  bad(R"({"a": {"$numberDecimal": "abc"}})", "abc");
  bad(R"({"a": {"$numberDecimal": ""}})", dec);
  bad(R"({"a": {"$numberDecimal": "12345678901234567890123456789012345"}})",
      "12345678901234567890123456789012345");
  bad(R"({"a": {"$numberDecim\u0061l": "1e9999"}})", "1e9999");  // escaped key
  bad(R"({"a": [{"$numberDecimal": "1e9999"}]})", "1e9999");
  // A $numberDouble libbson would read as 0 or a prefix.
  bad(R"({"a": {"$numberDouble": "abc"}})", "abc");
  bad(R"({"a": {"$numberDouble": "1.5x"}})", "1.5x");
  bad(R"({"a": {"$numberDouble": ""}})", "$numberDouble");
  bad(R"({"a": {"$numberDouble": "0x10"}})", "0x10");
  // Doubles that libbson reads as 0: below the smallest denormal.
  bad(R"({"a": 1e-400})", "number 1e-400 is out of range (double)");
  bad(R"({"a": -2e-324})", "-2e-324");
  bad(R"({"a": [0.1e-99999]})", "0.1e-99999");
  bad(R"({"a": {"$numberDouble": "1e-400"}})", "1e-400");
  // Words libbson reads as the number 0: prefixes of NaN.
  bad(R"({"a": n})", "invalid JSON: unexpected word 'n'");
  bad(R"({"a": N})", "'N'");
  bad(R"({"a": Na, "b": 1})", "'Na'");
  bad(R"({"a": [1, -n]})", "'n'");
  bad(R"({"$set": {"z": Na}})", "'Na'");
  bad(R"({"a": 1x})", "'x'");
  bad("n", "'n'");
  // Regex flags libbson would drop without a word.
  bad(R"({"a": {"$regex": "x", "$options": "z"}})", "invalid flag 'z' in regex options");
  bad(R"({"a": {"$regex": "x", "$options": "ig"}})", "'g'");
  bad(R"({"a": {"$regularExpression": {"pattern": "x", "options": "q"}}})", "'q'");
  // $timestamp fields are uint32.
  bad(R"({"a": {"$timestamp": {"t": 4294967296, "i": 1}}})",
      "timestamp field 4294967296 is out of range (uint32)");
  bad(R"({"a": {"$timestamp": {"t": 1, "i": 4294967296}}})", "4294967296");
  bad(R"({"a": {"$timestamp": {"t": 1, "i": 18446744073709551616}}})", "18446744073709551616");

  // What stays accepted, as exactly what it says.
  auto type_of_a = [](const std::string& json) {
    Document d = Parse(json);
    return ValueOfA(d).value_type;
  };
  CHECK(type_of_a(R"({"a": 9223372036854775807})") == BSON_TYPE_INT64);
  CHECK(ValueOfA(Parse(R"({"a": -9223372036854775808})")).value.v_int64 == INT64_MIN);
  CHECK(type_of_a(R"({"a": 18446744073709551616.0})") == BSON_TYPE_DOUBLE);
  CHECK(type_of_a(R"({"a": 18446744073709551616e0})") == BSON_TYPE_DOUBLE);
  CHECK(type_of_a(R"({"a": 1e308})") == BSON_TYPE_DOUBLE);
  CHECK(type_of_a(R"({"a": -0})") == BSON_TYPE_INT32);
  CHECK(ValueOfA(Parse(R"({"a": 1e-310})")).value.v_double == 1e-310);  // a denormal
  CHECK(ValueOfA(Parse(R"({"a": 0.0e-999})")).value.v_double == 0);
  for (const char* w : {"true", "false", "null", "NaN", "nan", "Infinity", "-Infinity"}) {
    INFO(w);
    CHECK(Document::FromJson(std::string(R"({"a": )") + w + "}").ok());
  }
  CHECK(std::isnan(ValueOfA(Parse(R"({"a": NaN})")).value.v_double));
  CHECK(std::string(ValueOfA(Parse(R"({"a": {"$regex": "x", "$options": "imsxu"}})"))
                        .value.v_regex.options) == "imsux");                     // libbson's order
  CHECK(Document::FromJson(R"({"options": "z", "b": {"options": "q"}})").ok());  // plain fields
  // Numbers inside strings and keys are text.
  for (const char* ok :
       {R"({"a": "18446744073709551616"})", R"({"a": "x\"18446744073709551616"})",
        R"({"18446744073709551616": 1, "a": 2})", R"({"a": "\\", "b": 1})",
        R"({"a": "\\\"18446744073709551616\\", "b": "$numberDecimal"})",
        R"({"a": "$timestamp", "b": 4294967296})",
        R"({"a": {"$timestamp": {"t": 4294967295, "i": 4294967295}}, "b": 4294967296})"}) {
    INFO(ok);
    CHECK(Document::FromJson(ok).ok());
  }
  for (const char* d : {"NaN", "-nan", "Infinity", "-Infinity", "inf", "1.5", "-0", "1e6144",
                        "0e9999", "1\\u0030"}) {
    INFO(d);
    CHECK(type_of_a(std::string(R"({"a": {"$numberDecimal": ")") + d + "\"}}") ==
          BSON_TYPE_DECIMAL128);
  }
  for (const char* d : {"1.0", "-0.0", "1e+20", "5e-324", "Infinity", "-Infinity", "NaN", "2", ".5",
                        "1.", "-1E-2"}) {
    INFO(d);
    CHECK(type_of_a(std::string(R"({"a": {"$numberDouble": ")") + d + "\"}}") == BSON_TYPE_DOUBLE);
  }
}

TEST_CASE("Document: wrapper strings libbson reads too kindly are refused, naming them",
          "[document]") {
  // Found by an outside test: each of these became another value.
  for (const auto& [json, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"({"o": {"$oid": "0g0203040506070809zz0b0c"}})", "24 hexadecimal"},
           {R"({"o": {"$oid": "-10203040506070809000b0c"}})", "24 hexadecimal"},
           {R"({"o": {"$dbPointer": {"$ref": "c", "$id": {"$oid": "zz0203040506070809000b0c"}}}})",
            "24 hexadecimal"},
           {R"({"b": {"$binary": {"base64": "AAAA", "subType": "100"}}})", "subType"},
           {R"({"b": {"$binary": {"base64": "AAAA", "subType": "-1"}}})", "subType"},
           {R"({"b": {"$binary": {"base64": "AAAA", "subType": ""}}})", "subType"},
           {R"({"n": {"$numberInt": " +05"}})", "not an integer"},
           {R"({"n": {"$numberInt": "05"}})", "not an integer"},
           {R"({"n": {"$numberLong": " 5"}})", "not an integer"},
           {R"({"n": {"$numberLong": "1e3"}})", "not an integer"},
           {R"({"d": {"$date": "2020-02-30T00:00:00Z"}})", "exist"},
           {R"({"d": {"$date": "2019-02-29T00:00:00Z"}})", "exist"},
           {R"({"d": {"$date": "2020-04-31T00:00:00Z"}})", "exist"},
           {R"({"d": {"$date": "2020-13-01T00:00:00Z"}})", "exist"},
           {R"({"d": {"$date": "2020-01-01T24:00:00Z"}})", "exist"},
           {R"({"d": {"$date": "2020-01-01T00:60:00Z"}})", "exist"},
           {R"({"u": {"$undefined": false}})", "must be true"}}) {
    INFO(json);
    auto d = Document::FromJson(json);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().IsInvalidArgument());
    CHECK(d.status().ToString().find(needle) != std::string::npos);
  }
  // Their well-formed neighbours read as before.
  for (const char* json :
       {R"({"o": {"$oid": "5F0000000000000000000001"}})",
        R"({"b": {"$binary": {"base64": "AAAA", "subType": "80"}}})",
        R"({"b": {"$binary": {"base64": "AAAA", "subType": "4"}}})",
        R"({"n": {"$numberInt": "-2147483648"}, "m": {"$numberLong": "0"}})",
        R"({"d": {"$date": "2020-02-29T23:59:59.999Z"}, "e": {"$date": "2000-02-29T00:00:00Z"}})",
        R"({"d": {"$date": {"$numberLong": "-5"}}})", R"({"u": {"$undefined": true}})",
        R"({"t": {"$type": "date"}})"}) {
    INFO(json);
    CHECK(Document::FromJson(json).ok());
  }
}

TEST_CASE("Document: RFC 3339 dates with a colon in the offset or a finer fraction", "[document]") {
  // Found by an outside test: what Python's isoformat(), JavaScript and Go
  // write was refused. A BSON date holds milliseconds: a finer fraction is
  // cut, as mongoimport does.
  auto ms = [](const char* date) {
    auto d = Document::FromJson(std::string(R"({"d": {"$date": ")") + date + "\"}}");
    INFO(date << ": " << d.status().ToString());
    REQUIRE(d.ok());
    return d.value().Get("d").value().get()->value.v_datetime;
  };
  CHECK(ms("2020-01-01T10:00:00+01:00") == ms("2020-01-01T09:00:00Z"));
  CHECK(ms("2020-01-01T10:00:00+01:00") == ms("2020-01-01T10:00:00+0100"));
  CHECK(ms("2020-01-01T10:00:00.1234-05:30") == ms("2020-01-01T15:30:00.123Z"));
  CHECK(ms("2020-01-01T10:00:00.123456789Z") == ms("2020-01-01T10:00:00.123Z"));
  CHECK(ms("1969-12-31T23:59:59.9999+00:00") == -1);
  // With a $type key beside it, both rewrites apply.
  CHECK(
      Document::FromJson(R"({"t": {"$type": "date"}, "d": {"$date": "2020-01-01T00:00:00+00:00"}})")
          .ok());
  // What is still no date stays refused, by libbson or by the calendar.
  for (const char* bad : {"2020-01-01T10:00:00+01:0", "2020-01-01T10:00:00+1:00",
                          "2020-02-30T00:00:00+01:00", "2020-01-01T10:00:00.12.3Z"}) {
    INFO(bad);
    CHECK_FALSE(Document::FromJson(std::string(R"({"d": {"$date": ")") + bad + "\"}}").ok());
  }
}

TEST_CASE("Document: '$' keys are allowed (filters and updates need them)", "[document]") {
  CHECK(Parse(R"({"a": {"$gt": 1}})").ToJson() == R"({ "a" : { "$gt" : 1 } })");
  CHECK(Parse(R"({"$set": {"a": 1}})").size() > 5);
  CHECK(Parse(R"({"a": {"b": [{"$bar": 1}]}})").size() > 5);
  // Extended JSON still becomes typed values.
  bson_t b;
  Document oid = Parse(R"({"a": {"$oid": "0123456789abcdef01234567"}})");
  oid.View(&b);
  bson_iter_t it;
  REQUIRE(bson_iter_init_find(&it, &b, "a"));
  CHECK(bson_iter_type(&it) == BSON_TYPE_OID);
}

TEST_CASE("Document: a \"$type\" key is the query operator unless it is binary's subtype",
          "[document]") {
  // libbson alone reads {"$type": 2} or {"$type": "date"} as the start of
  // legacy binary and fails; MongoDB's $type operator and $currentDate use them.
  CHECK(Parse(R"({"a": {"$type": 2}})").ToJson() == R"({ "a" : { "$type" : 2 } })");
  CHECK(Parse(R"({"a": {"$type": "date"}})").ToJson() == R"({ "a" : { "$type" : "date" } })");
  CHECK(Parse(R"({"a": {"$type": ["array", 16]}, "b": {"$not": {"$type": "double"}}})").ToJson() ==
        R"({ "a" : { "$type" : [ "array", 16 ] }, "b" : { "$not" : { "$type" : "double" } } })");
  CHECK(
      Parse(R"({"$currentDate": {"d": {"$type": "date"}}, "$set": {"x": [{"$type": 1}]}})")
          .ToJson() ==
      R"({ "$currentDate" : { "d" : { "$type" : "date" } }, "$set" : { "x" : [ { "$type" : 1 } ] } })");
  // The escaped spelling is the same key.
  CHECK(Parse(R"({"a": {"\u0024type": 2}})").ToJson() == R"({ "a" : { "$type" : 2 } })");
  // Beside "$binary", in either order, it is still binary's subtype.
  for (const char* json : {R"({"a": {"$binary": "AAAA", "$type": "80"}})",
                           R"({"a": {"$type": "80", "$binary": "AAAA"}})"}) {
    INFO(json);
    bson_t b;
    Document d = Parse(json);
    d.View(&b);
    bson_iter_t it;
    REQUIRE(bson_iter_init_find(&it, &b, "a"));
    CHECK(bson_iter_type(&it) == BSON_TYPE_BINARY);
  }
  // Values and keys that merely hold the text are untouched.
  CHECK(Parse(R"({"k": "$type", "$typeX": {"$type": "$type"}})").ToJson() ==
        R"({ "k" : "$type", "$typeX" : { "$type" : "$type" } })");
  // Still one document, still checked.
  CHECK_FALSE(Document::FromJson(R"({"a": {"$type": 2}} {})").ok());
  CHECK_FALSE(Document::FromJson(R"({"a": {"$type": 2})").ok());
  CHECK(Value::FromJson(R"({"$type": "date"})").ok());
}

// Random objects and arrays whose keys include "$type" (beside, never in,
// legacy binary), written as JSON and built with libbson side by side: the
// parsed bytes must be the built ones.
TEST_CASE("Document: random JSON with $type keys parses to the BSON it spells", "[document]") {
  std::mt19937_64 rng(test::Seed("document $type keys"));
  const char* const kKeys[] = {"a", "$type", "b", "c"};
  const char* const kStrings[] = {"80", "date", "array", "x", "$type", "ff"};
  // Appends a random value as JSON to *json and to `b` under `key`.
  std::function<void(bson_t*, const std::string&, std::string*, int)> value =
      [&](bson_t* b, const std::string& key, std::string* json, int depth) {
        const int kind = static_cast<int>(rng() % (depth < 4 ? 6 : 3));
        if (kind == 0) {
          const int32_t n = static_cast<int32_t>(rng() % 40) - 5;
          *json += std::to_string(n);
          BSON_APPEND_INT32(b, key.c_str(), n);
        } else if (kind == 1) {
          const char* str = kStrings[rng() % 6];
          *json += std::string("\"") + str + "\"";
          BSON_APPEND_UTF8(b, key.c_str(), str);
        } else if (kind == 2) {
          *json += R"({"$binary": "AAAA", "$type": "80"})";
          const uint8_t zeros[3] = {0, 0, 0};
          bson_append_binary(b, key.c_str(), -1, BSON_SUBTYPE_USER, zeros, 3);
        } else if (kind == 3 || kind == 4) {
          bson_t child;
          bson_append_document_begin(b, key.c_str(), -1, &child);
          *json += "{";
          bool first = true;
          for (const char* k : kKeys) {
            if (rng() % 2 != 0) continue;
            if (!first) *json += ", ";
            first = false;
            *json += std::string("\"") + k + "\": ";
            value(&child, k, json, depth + 1);
          }
          *json += "}";
          bson_append_document_end(b, &child);
        } else {
          bson_t child;
          bson_append_array_begin(b, key.c_str(), -1, &child);
          *json += "[";
          const int n = static_cast<int>(rng() % 4);
          for (int i = 0; i < n; i++) {
            if (i > 0) *json += ", ";
            value(&child, std::to_string(i), json, depth + 1);
          }
          *json += "]";
          bson_append_array_end(b, &child);
        }
      };
  for (int round = 0; round < 2000; round++) {
    bson_t want;
    bson_init(&want);
    std::string json = "{";
    for (int i = 0; i < 3; i++) {
      if (i > 0) json += ", ";
      const std::string key = std::string("k") + std::to_string(i);
      json += "\"" + key + "\": ";
      value(&want, key, &json, 1);
    }
    json += "}";
    auto got = Document::FromJson(json);
    INFO(json);
    REQUIRE(got.ok());
    CHECK(got.value().bytes() ==
          std::string(reinterpret_cast<const char*>(bson_get_data(&want)), want.len));
    bson_destroy(&want);
  }
}

TEST_CASE("Document: size limit", "[document]") {
  std::string big(kMaxDocumentSize, 'x');
  auto r = Document::FromJson("{\"a\": \"" + big + "\"}");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message().find("16 MiB") != std::string::npos);
  // Just under the limit is fine.
  std::string fits(kMaxDocumentSize - 100, 'x');
  CHECK(Document::FromJson("{\"a\": \"" + fits + "\"}").ok());
}

TEST_CASE("Document: JSON carries 98 levels, and says so past them", "[document]") {
  auto nested = [](int levels) {
    std::string s = "1";
    for (int i = 0; i < levels; i++) s = "{\"a\": " + s + "}";  // `levels` objects
    return s;
  };
  CHECK(Document::FromJson(nested(98)).ok());
  auto r = Document::FromJson(nested(99));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("nested deeper than the 98 levels") != std::string::npos);
}

TEST_CASE("Document: nesting limit for BSON input", "[document]") {
  std::string ok = NestedBson(kMaxNestingDepth);
  auto r = Document::FromBson(reinterpret_cast<const uint8_t*>(ok.data()), ok.size());
  CHECK(r.ok());
  std::string deep = NestedBson(kMaxNestingDepth + 1);
  r = Document::FromBson(reinterpret_cast<const uint8_t*>(deep.data()), deep.size());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("deeper") != std::string::npos);
  // Very deep input must not exhaust the stack anywhere.
  std::string very = NestedBson(100000);
  r = Document::FromBson(reinterpret_cast<const uint8_t*>(very.data()), very.size());
  CHECK_FALSE(r.ok());
}

TEST_CASE("Document: FromBson validates", "[document]") {
  Document good = Parse(R"({"a": 1, "b": "x", "c": {"d": [1, 2]}})");
  auto from = [](const std::string& bytes) {
    return Document::FromBson(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  };
  CHECK(from(good.bytes()).ok());
  CHECK(from(good.bytes()).value() == good);
  CHECK_FALSE(from("").ok());
  CHECK_FALSE(from(std::string("\x05\x00\x00\x00", 4)).ok());
  CHECK_FALSE(from(good.bytes().substr(0, good.size() - 1)).ok());
  std::string wrong_len = good.bytes();
  wrong_len[0]++;
  CHECK_FALSE(from(wrong_len).ok());
  // Premature end-of-document byte with bytes after it.
  std::string early("\x10\x00\x00\x00\x00\x10x\x00\x01\x00\x00\x00\x00\x00\x00\x00", 16);
  CHECK_FALSE(from(early).ok());
  // Unknown element type.
  std::string bad_type("\x0c\x00\x00\x00\x42x\x00\x01\x00\x00\x00\x00", 12);
  CHECK_FALSE(from(bad_type).ok());
  // Invalid UTF-8 inside a string value.
  bson_t b;
  bson_init(&b);
  bson_append_utf8(&b, "s", 1, "\xff\xfe", 2);
  CHECK_FALSE(Document::FromBson(&b).ok());
  bson_destroy(&b);
  // Empty keys are legal.
  bson_init(&b);
  bson_append_int32(&b, "", 0, 1);
  CHECK(Document::FromBson(&b).ok());  // MongoDB allows empty field names
  bson_destroy(&b);
  CHECK_FALSE(Document::FromBson(nullptr).ok());
  // Regex flags: known ones, sorted, each once (found by an outside test:
  // "z" was stored, and its JSON export did not read back). Raw bytes, as
  // libbson's bson_append_regex sorts and drops flags itself.
  auto regex = [](const std::string& options) {
    const std::string body = std::string("\x0br\0a\0", 5) + options + std::string(1, '\0');
    std::string doc(4, '\0');
    doc += body + std::string(1, '\0');
    const auto n = static_cast<uint32_t>(doc.size());
    for (int i = 0; i < 4; i++) doc[i] = static_cast<char>(n >> (8 * i));
    return doc;
  };
  // Arrays keyed "0", "1", ... (found by the same test: other keys were
  // stored, and the export renumbered them).
  auto array = [](const std::string& key) {
    // {"a": [<int32 7 keyed "0">, <int32 8 keyed key>]}
    std::string elems = std::string(
                            "\x10"
                            "0\0\x07\0\0\0",
                            7) +
                        "\x10" + key + std::string("\0\x08\0\0\0", 5);
    std::string arr(4, '\0');
    arr += elems + std::string(1, '\0');
    for (int i = 0; i < 4; i++) arr[i] = static_cast<char>(arr.size() >> (8 * i));
    std::string doc(4, '\0');
    doc += std::string(
               "\x04"
               "a\0",
               3) +
           arr + std::string(1, '\0');
    for (int i = 0; i < 4; i++) doc[i] = static_cast<char>(doc.size() >> (8 * i));
    return doc;
  };
  CHECK(from(array("1")).ok());
  for (const char* bad : {"2", "0", "01", "x", ""}) {
    INFO("key " << bad);
    auto d = from(array(bad));
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().message().find("array element keyed") != std::string::npos);
  }
  CHECK(from(regex("")).ok());
  CHECK(from(regex("ilmsux")).ok());
  for (const char* bad : {"z", "mi", "ii", "iz"}) {
    INFO(bad);
    auto d = from(regex(bad));
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().message().find("regex options") != std::string::npos);
  }
}

TEST_CASE("Document: random mutations of valid BSON never crash", "[document]") {
  uint64_t seed = test::Seed("document mutation");
  std::mt19937_64 rng(seed);
  Document base = Parse(
      R"({"_id": {"$oid": "0123456789abcdef01234567"}, "a": [1, {"b": "xy", "c": [true, null]}],
          "d": {"$binary": {"base64": "AAEC", "subType": "00"}}, "e": {"$numberDecimal": "1.5"},
          "f": {"$regularExpression": {"pattern": "ab+", "options": "i"}}, "g": 2.5,
          "h": {"$timestamp": {"t": 1, "i": 2}}, "i": {"$code": "x", "$scope": {"y": 1}},
          "j": {"$date": 5}, "k": {"$numberLong": "7"}, "l": "s"})");
  const int iterations = static_cast<int>(20000 * test::Scale());
  int accepted = 0;
  for (int n = 0; n < iterations; ++n) {
    std::string bytes = base.bytes();
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[pos] = static_cast<char>(rng());
          break;
        case 1:
          bytes[pos] ^= static_cast<char>(1u << (rng() % 8));
          break;
        case 2:
          bytes.erase(pos, 1 + rng() % 3);
          break;
        case 3:
          bytes.insert(pos, 1, static_cast<char>(rng()));
          break;
      }
      if (bytes.empty()) bytes.push_back('\0');
    }
    if (rng() % 2 && bytes.size() >= 4) {  // keep the length right half the time
      uint32_t len = static_cast<uint32_t>(bytes.size());
      std::memcpy(&bytes[0], &len, 4);
    }
    auto r = Document::FromBson(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    // The JSON writer walks bytes not known to be valid too (salvage).
    std::string json;
    (void)BsonToJson(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                     JsonMode::kCanonical, &json);
    if (r.ok()) {
      ++accepted;
      // Whatever is accepted must be usable.
      (void)r.value().ToJson();
      (void)r.value().Get("a.1.b");
    } else {
      CHECK(r.status().IsInvalidArgument());
    }
  }
  INFO("accepted " << accepted);
  SUCCEED();
}

TEST_CASE("Document: Get by dotted path", "[document]") {
  Document d = Parse(R"({"a": {"b": [10, {"c": "x"}]}, "n": null})");
  CHECK(d.Get("a.b.0").value().ToJson() == "10");
  CHECK(d.Get("a.b.1.c").value().ToJson() == "\"x\"");
  CHECK(d.Get("a.b").value().ToJson() == "[ 10, { \"c\" : \"x\" } ]");
  CHECK(d.Get("n").value().type() == BSON_TYPE_NULL);
  CHECK(d.Get("a.x").status().IsNotFound());
  CHECK(d.Get("a.b.c").status().IsNotFound());  // no fan-out in Get
  CHECK(d.Get("a.b.5").status().IsNotFound());
  CHECK(d.Get("").status().IsNotFound());
}

TEST_CASE("Value: constructors and ToJson", "[document]") {
  CHECK(Value().type() == BSON_TYPE_NULL);
  CHECK(Value().ToJson() == "null");
  CHECK(Value::Null().ToJson() == "null");
  CHECK(Value::String("abc").ToJson() == "\"abc\"");
  CHECK(Value::String(std::string("a\0b", 3)).get()->value.v_utf8.len == 3);
  CHECK(Value::Int32(42).ToJson() == "42");
  CHECK(Value::Int64(-5).type() == BSON_TYPE_INT64);
  CHECK(Value::Int64(-5).ToJson() == "-5");
  CHECK(Value::Double(1.5).ToJson() == "1.5");
  CHECK(Value::Bool(true).ToJson() == "true");
  bson_oid_t oid;
  bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
  CHECK(Value::ObjectId(oid).ToJson() == R"({ "$oid" : "0123456789abcdef01234567" })");
  CHECK(Value::Int32(1) != Value::Double(1.0));
  CHECK(Value::Int32(1) == Value::Int32(1));
}

TEST_CASE("Value: FromJson", "[document]") {
  CHECK(Value::FromJson("42").value().type() == BSON_TYPE_INT32);
  CHECK(Value::FromJson("1.5").value().type() == BSON_TYPE_DOUBLE);
  CHECK(Value::FromJson("\"abc\"").value().ToJson() == "\"abc\"");
  CHECK(Value::FromJson("true").value().type() == BSON_TYPE_BOOL);
  CHECK(Value::FromJson("null").value().type() == BSON_TYPE_NULL);
  CHECK(Value::FromJson(R"({"$oid": "0123456789abcdef01234567"})").value().type() == BSON_TYPE_OID);
  CHECK(Value::FromJson(R"({"$numberLong": "12"})").value().type() == BSON_TYPE_INT64);
  CHECK(Value::FromJson(R"({"$date": 0})").value().type() == BSON_TYPE_DATE_TIME);
  CHECK(Value::FromJson(R"({"a": [1, 2]})").value().type() == BSON_TYPE_DOCUMENT);
  CHECK(Value::FromJson("[1, 2]").value().type() == BSON_TYPE_ARRAY);
  CHECK(Value::FromJson(" [1, 2] ").value().ToJson() == "[ 1, 2 ]");
  for (const char* bad : {"", "x", "1,", "1, \"w\": 2", "1} {\"v\": 2", "{", "[1,", "\"\xff\""}) {
    INFO(bad);
    auto r = Value::FromJson(bad);
    CHECK_FALSE(r.ok());
    if (!r.ok()) CHECK(r.status().IsInvalidArgument());
  }
}

TEST_CASE("Value: copies and moves keep a valid view", "[document]") {
  // Short strings live inside std::string (SSO), so a stale view would
  // point into the old object.
  Value a = Value::String("hi");
  Value b = a;
  Value c = std::move(a);
  CHECK(std::string(b.get()->value.v_utf8.str) == "hi");
  CHECK(std::string(c.get()->value.v_utf8.str) == "hi");
  CHECK(a.type() == BSON_TYPE_NULL);  // NOLINT: moved-from is a valid null
  Value d;
  d = c;
  CHECK(std::string(d.get()->value.v_utf8.str) == "hi");
  Value e;
  e = std::move(d);
  CHECK(std::string(e.get()->value.v_utf8.str) == "hi");
  std::vector<Value> many;
  for (int i = 0; i < 100; ++i) many.push_back(Value::String(std::to_string(i)));
  for (int i = 0; i < 100; ++i) {
    CHECK(std::string(many[i].get()->value.v_utf8.str, many[i].get()->value.v_utf8.len) ==
          std::to_string(i));
  }
  Value doc = Value::FromJson(R"({"k": "v"})").value();
  Value doc2 = doc;
  doc = Value();
  CHECK(doc2.ToJson() == R"({ "k" : "v" })");
}

// ------------------------------------------------------- Extended JSON out

std::string LibbsonJson(const Document& d, JsonMode mode) {
  bson_t b;
  d.View(&b);
  char* json = mode == JsonMode::kCanonical ? bson_as_canonical_extended_json(&b, nullptr)
                                            : bson_as_relaxed_extended_json(&b, nullptr);
  REQUIRE(json != nullptr);
  std::string out(json);
  bson_free(json);
  return out;
}

Document FromBuilt(bson_t* b) {
  auto d = Document::FromBson(b);
  bson_destroy(b);
  REQUIRE(d.ok());
  return std::move(d).value();
}

// A random string: ASCII, control characters, NUL and multi-byte UTF-8.
std::string RandomText(std::mt19937_64& rng) {
  static const char* const kPieces[] = {"a",  "Z",  " ",  "\"",     "\\",     "/",         "\n",
                                        "\t", "\b", "\f", "\r",     "\x01",   "\x1f",      "\x7f",
                                        "{",  "$",  "é",  "\u4e16", "\u00a0", "\U0001F600"};
  std::string s;
  const int n = static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) s += kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
  if (rng() % 8 == 0) s.push_back('\0');
  return s;
}

// Appends a random value of any type but double (libbson prints doubles
// differently on purpose) and NaN-free, under `key`, nesting up to `depth`.
void AppendRandomValue(bson_t* b, const std::string& key, std::mt19937_64& rng, int depth) {
  const char* k = key.c_str();
  const int klen = static_cast<int>(key.size());
  bson_oid_t oid;
  bson_oid_init_from_string(&oid, "5f1a2b3c4d5e6f7081920a1b");
  switch (rng() % (depth > 0 ? 20 : 18)) {
    case 0:
      bson_append_int32(b, k, klen, static_cast<int32_t>(rng()));
      break;
    case 1:
      bson_append_int64(b, k, klen, static_cast<int64_t>(rng()) >> (rng() % 64));
      break;
    case 2: {
      std::string s = RandomText(rng);
      bson_append_utf8(b, k, klen, s.data(), static_cast<int>(s.size()));
      break;
    }
    case 3: {
      // Dates before 1970, in 1970..9999 (with and without milliseconds)
      // and after 9999: the relaxed/canonical split is at the ends.
      static const int64_t kDates[] = {-62135596800000, -1000,          -1, 0, 1000, 1500000000123,
                                       253402300799999, 253402300800000};
      int64_t ms = rng() % 2 ? kDates[rng() % 8]
                             : static_cast<int64_t>(rng() % 253402300800000ull) / 1000 * 1000;
      if (ms > 253402300799999) ms = 253402300799999;  // libbson's relaxed differs beyond
      bson_append_date_time(b, k, klen, ms);
      break;
    }
    case 4:
      bson_append_oid(b, k, klen, &oid);
      break;
    case 5: {
      uint8_t data[7];
      for (uint8_t& x : data) x = static_cast<uint8_t>(rng());
      static const bson_subtype_t kSubtypes[] = {BSON_SUBTYPE_BINARY, BSON_SUBTYPE_UUID,
                                                 BSON_SUBTYPE_MD5, BSON_SUBTYPE_USER,
                                                 BSON_SUBTYPE_BINARY_DEPRECATED};
      bson_append_binary(b, k, klen, kSubtypes[rng() % 5], data, static_cast<uint32_t>(rng() % 8));
      break;
    }
    case 6: {
      std::string pattern = RandomText(rng);
      pattern.erase(std::remove(pattern.begin(), pattern.end(), '\0'), pattern.end());
      bson_append_regex(b, k, klen, pattern.c_str(), rng() % 2 ? "imsx" : "");
      break;
    }
    case 7:
      bson_append_timestamp(b, k, klen, static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()));
      break;
    case 8:
      bson_append_minkey(b, k, klen);
      break;
    case 9:
      bson_append_maxkey(b, k, klen);
      break;
    case 10: {
      static const char* const kDecimals[] = {"1.50",
                                              "-0",
                                              "1E+6144",
                                              "-Infinity",
                                              "NaN",
                                              "0.000001",
                                              "12345678901234567890123456789012"};
      bson_decimal128_t d;
      bson_decimal128_from_string(kDecimals[rng() % 7], &d);
      bson_append_decimal128(b, k, klen, &d);
      break;
    }
    case 11:
      bson_append_bool(b, k, klen, rng() % 2);
      break;
    case 12:
      bson_append_null(b, k, klen);
      break;
    case 13:
      bson_append_undefined(b, k, klen);
      break;
    case 14: {
      std::string code = RandomText(rng);
      bson_append_code(b, k, klen, code.c_str());
      break;
    }
    case 15: {
      std::string sym = RandomText(rng);
      bson_append_symbol(b, k, klen, sym.data(), static_cast<int>(sym.size()));
      break;
    }
    case 16:
      bson_append_dbpointer(b, k, klen, "db.coll", &oid);
      break;
    case 17: {
      bson_t scope;
      bson_init(&scope);
      BSON_APPEND_INT32(&scope, "x", 1);
      bson_append_code_with_scope(b, k, klen, "f()", &scope);
      bson_destroy(&scope);
      break;
    }
    default: {  // a subdocument or an array, possibly empty
      const bool array = rng() % 2;
      bson_t child;
      if (array) {
        bson_append_array_begin(b, k, klen, &child);
      } else {
        bson_append_document_begin(b, k, klen, &child);
      }
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) {
        std::string child_key = array ? std::to_string(i) : RandomText(rng) + std::to_string(i);
        child_key.erase(std::remove(child_key.begin(), child_key.end(), '\0'), child_key.end());
        AppendRandomValue(&child, child_key, rng, depth - 1);
      }
      if (array) {
        bson_append_array_end(b, &child);
      } else {
        bson_append_document_end(b, &child);
      }
      break;
    }
  }
}

TEST_CASE("Document: ToJson prints what libbson prints, but for doubles", "[document][json]") {
  uint64_t seed = test::Seed("json writer");
  std::mt19937_64 rng(seed);
  const int iterations = static_cast<int>(3000 * test::Scale());
  for (int n = 0; n < iterations; ++n) {
    bson_t* b = bson_new();
    const int fields = static_cast<int>(rng() % 6);
    for (int i = 0; i < fields; ++i) AppendRandomValue(b, "k" + std::to_string(i), rng, 3);
    Document d = FromBuilt(b);
    for (JsonMode mode : {JsonMode::kRelaxed, JsonMode::kCanonical}) {
      const std::string json = d.ToJson(mode);
      INFO("seed " << seed << " iteration " << n << " mode " << static_cast<int>(mode));
      REQUIRE(json == LibbsonJson(d, mode));
      std::string raw;
      CHECK(BsonToJson(d.data(), d.size(), mode, &raw));
      CHECK(raw == json);
    }
  }
}

TEST_CASE("Document: canonical JSON reads back as the same bytes", "[document][json]") {
  // Every type, and the values where types change in relaxed mode.
  Document d = Parse(R"json({"_id": {"$oid": "5f1a2b3c4d5e6f7081920a1b"},
      "i32": 5, "i32min": -2147483648, "i64small": {"$numberLong": "5"},
      "i64big": {"$numberLong": "-9223372036854775808"}, "i64max": {"$numberLong": "9223372036854775807"},
      "d5": 5.0, "d999": 9.99, "d01": 0.1, "d1e300": 1e300, "dneg0": -0.0, "dmin": 5e-324,
      "dmax": 1.7976931348623157e308, "dnan": {"$numberDouble": "NaN"},
      "dinf": {"$numberDouble": "Infinity"}, "dninf": {"$numberDouble": "-Infinity"},
      "dec": {"$numberDecimal": "1.50"}, "decnan": {"$numberDecimal": "NaN"},
      "before1970": {"$date": {"$numberLong": "-62135596800000"}},
      "after9999": {"$date": {"$numberLong": "253402300800001"}},
      "ms": {"$date": "2017-07-14T02:40:00.123Z"},
      "bin": {"$binary": {"base64": "AQID", "subType": "80"}},
      "uuid": {"$binary": {"base64": "yO2rw/c4TKO2jauSqRR4ow==", "subType": "04"}},
      "old": {"$binary": {"base64": "AQ==", "subType": "02"}},
      "re": {"$regularExpression": {"pattern": "a\"b/c\\d", "options": "imx"}},
      "ts": {"$timestamp": {"t": 4294967295, "i": 1}}, "min": {"$minKey": 1}, "max": {"$maxKey": 1},
      "u": {"$undefined": true}, "code": {"$code": "f()"}, "cws": {"$code": "g()", "$scope": {"x": 1.0}},
      "sym": {"$symbol": "s"}, "dbp": {"$dbPointer": {"$ref": "db.c", "$id": {"$oid": "5f1a2b3c4d5e6f7081920a1b"}}},
      "s": "tab\t nul\u0000 é \u4e16", "t": true, "n": null,
      "nested": {"a": [1, {"$numberLong": "2"}, 3.0, [], {}, [[{"b": {"$numberLong": "1"}}]]]}})json");
  const std::string canonical = d.ToJson(JsonMode::kCanonical);
  Document back = Parse(canonical);
  CHECK(back.bytes() == d.bytes());
  CHECK(back.ToJson(JsonMode::kCanonical) == canonical);
  // Relaxed loses exactly what MongoDB's rule says: small int64 becomes int32.
  Document relaxed = Parse(d.ToJson());
  CHECK(relaxed.Get("i64small").value().type() == BSON_TYPE_INT32);
  CHECK(relaxed.Get("i64big").value().type() == BSON_TYPE_INT64);
  for (const char* same : {"d5", "d999", "d01", "d1e300", "dneg0", "dmin", "dmax", "dinf",
                           "before1970", "after9999", "ms", "nested.a.2"}) {
    INFO(same);
    CHECK(relaxed.Get(same).value() == d.Get(same).value());
  }
}

TEST_CASE("Value: doubles print as the shortest text that reads back", "[document][json]") {
  const std::pair<double, const char*> kCases[] = {
      {5.0, "5.0"},
      {9.99, "9.99"},
      {0.1, "0.1"},
      {1e300, "1e+300"},
      {-0.0, "-0.0"},
      {0.0, "0.0"},
      {1e16, "1e+16"},
      {123456789.0, "123456789.0"},
      {1.5, "1.5"},
      {-2.25, "-2.25"},
      {1e-7, "1e-07"},
      {5e-324, "5e-324"},
      {0.30000000000000004, "0.30000000000000004"},
      {1.7976931348623157e308, "1.7976931348623157e+308"}};
  for (const auto& [d, text] : kCases) {
    INFO(text);
    CHECK(Value::Double(d).ToJson() == text);
    CHECK(Value::Double(d).ToJson(JsonMode::kCanonical) ==
          std::string("{ \"$numberDouble\" : \"") + text + "\" }");
  }
  CHECK(Value::Double(std::numeric_limits<double>::quiet_NaN()).ToJson() ==
        R"({ "$numberDouble" : "NaN" })");
  CHECK(Value::Double(-std::numeric_limits<double>::infinity()).ToJson() ==
        R"({ "$numberDouble" : "-Infinity" })");
  CHECK(Value::Int64(5).ToJson() == "5");
  CHECK(Value::Int64(5).ToJson(JsonMode::kCanonical) == R"({ "$numberLong" : "5" })");
  CHECK(Value::Int32(-5).ToJson(JsonMode::kCanonical) == R"({ "$numberInt" : "-5" })");

  // Random doubles (every bit pattern but NaN): each mode reads back as the
  // same bits, and one significant digit fewer would not.
  uint64_t seed = test::Seed("shortest doubles");
  std::mt19937_64 rng(seed);
  const int iterations = static_cast<int>(20000 * test::Scale());
  for (int n = 0; n < iterations; ++n) {
    uint64_t bits = rng();
    double d;
    if (n % 4 == 1) {  // near 1
      bits = (bits & 0x800fffffffffffffull) | (uint64_t{rng() % 64 + 990} << 52);
    } else if (n % 4 == 2) {  // integral
      d = static_cast<double>(static_cast<int64_t>(rng()) >> (rng() % 64));
      std::memcpy(&bits, &d, sizeof(d));
    }
    std::memcpy(&d, &bits, sizeof(d));
    if (std::isnan(d) || std::isinf(d)) continue;
    INFO("seed " << seed << " bits " << bits);
    Value v = Value::Double(d);
    const std::string text = v.ToJson();
    auto relaxed = Value::FromJson(text);
    REQUIRE(relaxed.ok());
    CHECK(relaxed.value() == v);
    auto canonical = Value::FromJson(v.ToJson(JsonMode::kCanonical));
    REQUIRE(canonical.ok());
    CHECK(canonical.value() == v);
    // The significant digits, and whether fewer would do. (An integral
    // double that to_chars writes in fixed notation, all its digits, is
    // the shortest text; 19598812644682952.0 is shorter than
    // 1.9598812644682952e+16.)
    const bool integral_fixed = text.find('e') == std::string::npos && text.size() >= 2 &&
                                text.compare(text.size() - 2, 2, ".0") == 0;
    if (integral_fixed) {
      CHECK(std::to_string(static_cast<long double>(d)).find(text.substr(0, text.size() - 2)) == 0);
      continue;
    }
    std::string digits;
    for (char c : text.substr(0, text.find('e'))) {
      if (c >= '0' && c <= '9' && !(digits.empty() && c == '0')) digits.push_back(c);
    }
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    if (digits.size() > 1) {
      char shorter[40];
      std::snprintf(shorter, sizeof(shorter), "%.*e", static_cast<int>(digits.size()) - 2, d);
      CHECK(std::strtod(shorter, nullptr) != d);
    }
  }
}

TEST_CASE("Document: regex options print sorted, once each, as Extended JSON says",
          "[document][json]") {
  // Found by an outside test: BSON holding "xsmi" printed it so, and the
  // JSON reader (which sorts) then gave other bytes than the canonical text.
  bson_t b;
  bson_init(&b);
  bson_append_regex(&b, "r", 1, "a.b", "xsmii");
  auto d = Document::FromBson(&b);
  bson_destroy(&b);
  REQUIRE(d.ok());
  for (JsonMode mode : {JsonMode::kRelaxed, JsonMode::kCanonical}) {
    const std::string json = d.value().ToJson(mode);
    INFO(json);
    CHECK(json.find("\"options\" : \"imsx\"") != std::string::npos);
    auto back = Document::FromJson(json);
    REQUIRE(back.ok());
    CHECK(back.value().ToJson(mode) == json);
  }
}

TEST_CASE("Document: relaxed dates are ISO-8601 only from 1970 to 9999", "[document][json]") {
  CHECK(Value::FromJson(R"({"$date": 0})").value().ToJson() ==
        R"({ "$date" : "1970-01-01T00:00:00Z" })");
  CHECK(Value::FromJson(R"({"$date": {"$numberLong": "253402300799999"}})").value().ToJson() ==
        R"({ "$date" : "9999-12-31T23:59:59.999Z" })");
  // libbson prints a five-digit year here that no reader reads back.
  CHECK(Value::FromJson(R"({"$date": {"$numberLong": "253402300800000"}})").value().ToJson() ==
        R"({ "$date" : { "$numberLong" : "253402300800000" } })");
  CHECK(Value::FromJson(R"({"$date": {"$numberLong": "-1"}})").value().ToJson() ==
        R"({ "$date" : { "$numberLong" : "-1" } })");
  CHECK(Value::FromJson(R"({"$date": 0})").value().ToJson(JsonMode::kCanonical) ==
        R"({ "$date" : { "$numberLong" : "0" } })");
}

TEST_CASE("Document: BsonToJson refuses bytes that are not a valid document", "[document][json]") {
  std::string out;
  const std::string bad_utf8("\x10\x00\x00\x00\x02s\x00\x03\x00\x00\x00\xff\xfe\x00\x00", 16);
  CHECK_FALSE(BsonToJson(reinterpret_cast<const uint8_t*>(bad_utf8.data()), bad_utf8.size(),
                         JsonMode::kRelaxed, &out));
  const std::string deep = NestedBson(kMaxNestingDepth + 1);
  CHECK_FALSE(BsonToJson(reinterpret_cast<const uint8_t*>(deep.data()), deep.size(),
                         JsonMode::kRelaxed, &out));
  const std::string ok = NestedBson(kMaxNestingDepth);
  CHECK(
      BsonToJson(reinterpret_cast<const uint8_t*>(ok.data()), ok.size(), JsonMode::kRelaxed, &out));
  Document d = Parse(R"({"a": [1, 2], "b": "x"})");
  std::string cut = d.bytes().substr(0, d.size() - 1);
  CHECK_FALSE(BsonToJson(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(),
                         JsonMode::kRelaxed, &out));
  CHECK_FALSE(BsonToJson(nullptr, 0, JsonMode::kRelaxed, &out));
  CHECK(BsonToJson(Document().data(), Document().size(), JsonMode::kCanonical, &out));
  CHECK(out == "{ }");
}

}  // namespace
}  // namespace mmdoc
