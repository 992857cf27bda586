// Document and Value: JSON/BSON parsing, the limits of mmdoc/document.h,
// robustness against garbled BSON, and Value's copy/move.
#include "mmdoc/document.h"

#include <catch2/catch.hpp>
#include <cstring>
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

}  // namespace
}  // namespace mmdoc
