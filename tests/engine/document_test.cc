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
  for (int i = 1; i < depth; ++i)
    bson_append_document_begin(stack(i - 1), "a", 1, stack(i));
  BSON_APPEND_INT32(stack(depth - 1), "x", 1);
  for (int i = depth - 1; i >= 1; --i)
    bson_append_document_end(stack(i - 1), stack(i));
  std::string out(reinterpret_cast<const char*>(bson_get_data(stack(0))),
                  stack(0)->len);
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

TEST_CASE("Document: FromJson round-trips relaxed extended JSON",
          "[document]") {
  Document d = Parse(
      R"({"_id": {"$oid": "0123456789abcdef01234567"}, "n": 42, "l": {"$numberLong": "9007199254740993"},
          "d": 1.5, "s": "h\u00e9llo", "b": true, "z": null, "a": [1, "x", {"k": 2}],
          "t": {"$date": "2020-01-02T03:04:05Z"}, "nul": "a\u0000b", "": 7})");
  std::string json = d.ToJson();
  CHECK(json.find('\n') == std::string::npos);
  CHECK(json.find(R"("$oid" : "0123456789abcdef01234567")") !=
        std::string::npos);
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

TEST_CASE("Document: '$' keys are allowed (filters and updates need them)",
          "[document]") {
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
  auto r = Document::FromBson(reinterpret_cast<const uint8_t*>(ok.data()),
                              ok.size());
  CHECK(r.ok());
  std::string deep = NestedBson(kMaxNestingDepth + 1);
  r = Document::FromBson(reinterpret_cast<const uint8_t*>(deep.data()),
                         deep.size());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("deeper") != std::string::npos);
  // Very deep input must not exhaust the stack anywhere.
  std::string very = NestedBson(100000);
  r = Document::FromBson(reinterpret_cast<const uint8_t*>(very.data()),
                         very.size());
  CHECK_FALSE(r.ok());
}

TEST_CASE("Document: FromBson validates", "[document]") {
  Document good = Parse(R"({"a": 1, "b": "x", "c": {"d": [1, 2]}})");
  auto from = [](const std::string& bytes) {
    return Document::FromBson(reinterpret_cast<const uint8_t*>(bytes.data()),
                              bytes.size());
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
  std::string early(
      "\x10\x00\x00\x00\x00\x10x\x00\x01\x00\x00\x00\x00\x00\x00\x00", 16);
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

TEST_CASE("Document: random mutations of valid BSON never crash",
          "[document]") {
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
    if (rng() % 2 &&
        bytes.size() >= 4) {  // keep the length right half the time
      uint32_t len = static_cast<uint32_t>(bytes.size());
      std::memcpy(&bytes[0], &len, 4);
    }
    auto r = Document::FromBson(reinterpret_cast<const uint8_t*>(bytes.data()),
                                bytes.size());
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
  CHECK(Value::ObjectId(oid).ToJson() ==
        R"({ "$oid" : "0123456789abcdef01234567" })");
  CHECK(Value::Int32(1) != Value::Double(1.0));
  CHECK(Value::Int32(1) == Value::Int32(1));
}

TEST_CASE("Value: FromJson", "[document]") {
  CHECK(Value::FromJson("42").value().type() == BSON_TYPE_INT32);
  CHECK(Value::FromJson("1.5").value().type() == BSON_TYPE_DOUBLE);
  CHECK(Value::FromJson("\"abc\"").value().ToJson() == "\"abc\"");
  CHECK(Value::FromJson("true").value().type() == BSON_TYPE_BOOL);
  CHECK(Value::FromJson("null").value().type() == BSON_TYPE_NULL);
  CHECK(Value::FromJson(R"({"$oid": "0123456789abcdef01234567"})")
            .value()
            .type() == BSON_TYPE_OID);
  CHECK(Value::FromJson(R"({"$numberLong": "12"})").value().type() ==
        BSON_TYPE_INT64);
  CHECK(Value::FromJson(R"({"$date": 0})").value().type() ==
        BSON_TYPE_DATE_TIME);
  CHECK(Value::FromJson(R"({"a": [1, 2]})").value().type() ==
        BSON_TYPE_DOCUMENT);
  CHECK(Value::FromJson("[1, 2]").value().type() == BSON_TYPE_ARRAY);
  CHECK(Value::FromJson(" [1, 2] ").value().ToJson() == "[ 1, 2 ]");
  for (const char* bad :
       {"", "x", "1,", "1, \"w\": 2", "1} {\"v\": 2", "{", "[1,", "\"\xff\""}) {
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
  for (int i = 0; i < 100; ++i)
    many.push_back(Value::String(std::to_string(i)));
  for (int i = 0; i < 100; ++i) {
    CHECK(std::string(many[i].get()->value.v_utf8.str,
                      many[i].get()->value.v_utf8.len) == std::to_string(i));
  }
  Value doc = Value::FromJson(R"({"k": "v"})").value();
  Value doc2 = doc;
  doc = Value();
  CHECK(doc2.ToJson() == R"({ "k" : "v" })");
}

}  // namespace
}  // namespace mmdoc
