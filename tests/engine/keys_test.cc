// CompareValues, AppendKey, LookupPath, SortKey and IndexKeys. The central
// property: memcmp order of AppendKey encodings equals CompareValues order,
// for randomized values of every type including the awkward numbers.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/query.h"
#include "mmdoc/document.h"
#include "tests/support/test_env.h"

namespace mmdoc::engine {
namespace {

Value V(const std::string& json) {
  auto v = Value::FromJson(json);
  INFO(json << ": " << v.status().ToString());
  REQUIRE(v.ok());
  return v.value();
}

std::string Key(const Value& v) {
  std::string k;
  AppendKey(v.get(), &k);
  return k;
}

int Sign(int x) { return (x > 0) - (x < 0); }

int KeyOrder(const Value& a, const Value& b) {
  std::string ka = Key(a), kb = Key(b);
  return Sign(ka.compare(kb));
}

void CheckPair(const Value& a, const Value& b) {
  int c = Sign(CompareValues(a.get(), b.get()));
  INFO(a.ToJson() << " vs " << b.ToJson());
  CHECK(Sign(CompareValues(b.get(), a.get())) == -c);
  CHECK(KeyOrder(a, b) == c);
}

Value Dec(const std::string& s) {
  bson_value_t v;
  v.value_type = BSON_TYPE_DECIMAL128;
  bson_decimal128_from_string(s.c_str(), &v.value.v_decimal128);
  return Value::FromBsonValue(&v);
}

TEST_CASE("CompareValues: type order", "[keys]") {
  std::vector<Value> ascending = {
      V(R"({"$minKey": 1})"),
      V(R"({"$undefined": true})"),
      Value::Null(),
      Value::Double(-INFINITY),
      Value::Int32(1),
      Value::String(""),
      V("{}"),
      V("[]"),
      V(R"({"$binary": {"base64": "", "subType": "00"}})"),
      V(R"({"$oid": "000000000000000000000000"})"),
      Value::Bool(false),
      V(R"({"$date": {"$numberLong": "-5"}})"),
      V(R"({"$timestamp": {"t": 0, "i": 0}})"),
      V(R"({"$regularExpression": {"pattern": "", "options": ""}})"),
      V(R"({"$maxKey": 1})"),
  };
  for (size_t i = 0; i < ascending.size(); ++i) {
    for (size_t j = 0; j < ascending.size(); ++j) {
      INFO(ascending[i].ToJson() << " vs " << ascending[j].ToJson());
      CHECK(Sign(CompareValues(ascending[i].get(), ascending[j].get())) ==
            Sign(static_cast<int>(i) - static_cast<int>(j)));
      CheckPair(ascending[i], ascending[j]);
    }
  }
}

TEST_CASE("CompareValues: numbers across types, exactly", "[keys]") {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  CHECK(CompareValues(Value::Int64(kMax).get(), Value::Double(9.223372036854776e18).get()) < 0);
  CHECK(CompareValues(Value::Int64(kMin).get(), Value::Double(-9.223372036854776e18).get()) == 0);
  CHECK(CompareValues(Value::Int64((1LL << 53) + 1).get(),
                      Value::Double(9007199254740992.0).get()) > 0);
  CHECK(CompareValues(Value::Int32(1).get(), Value::Double(1.0).get()) == 0);
  CHECK(CompareValues(Value::Int64(1).get(), Value::Int32(1).get()) == 0);
  CHECK(CompareValues(Value::Int32(2).get(), Value::Double(1.5).get()) > 0);
  CHECK(CompareValues(Value::Int32(-2).get(), Value::Double(-1.5).get()) < 0);
  CHECK(CompareValues(Value::Double(-0.0).get(), Value::Int32(0).get()) == 0);
  CHECK(CompareValues(Value::Double(NAN).get(), Value::Double(-INFINITY).get()) < 0);
  CHECK(CompareValues(Value::Double(NAN).get(), Value::Double(NAN).get()) == 0);
  CHECK(CompareValues(Value::Double(NAN).get(), Value::Int64(kMin).get()) < 0);
  CHECK(CompareValues(Dec("1.5").get(), Value::Double(1.5).get()) == 0);
  CHECK(CompareValues(Dec("NaN").get(), Value::Double(NAN).get()) == 0);
  CHECK(CompareValues(Dec("-Infinity").get(), Value::Int64(kMin).get()) < 0);
  // Equal values, identical keys.
  CHECK(Key(Value::Int32(1)) == Key(Value::Double(1.0)));
  CHECK(Key(Value::Int64(1)) == Key(Value::Double(1.0)));
  CHECK(Key(Value::Double(-0.0)) == Key(Value::Double(0.0)));
  CHECK(Key(Value::Int64(kMin)) == Key(Value::Double(-9.223372036854776e18)));
  CHECK(Key(Value::Int64(kMax)) != Key(Value::Double(9.223372036854776e18)));
  CHECK(Key(Value::String("a")) == Key(V(R"({"$symbol": "a"})")));
}

TEST_CASE("AppendKey: strings with NUL order bytewise", "[keys]") {
  Value a = Value::String("a");
  Value a0b = Value::String(std::string("a\0b", 3));
  Value ab = Value::String("ab");
  CHECK(CompareValues(a.get(), a0b.get()) < 0);
  CHECK(CompareValues(a0b.get(), ab.get()) < 0);
  CheckPair(a, a0b);
  CheckPair(a0b, ab);
  CheckPair(a, ab);
  CheckPair(Value::String(std::string("\0", 1)), Value::String(""));
  CheckPair(V(R"(["a", 1])"), V(R"(["a\u0000", 0])"));
  CheckPair(V(R"({"a": 1})"), V(R"({"a\u0001": 0})"));
}

TEST_CASE("AppendKey: a string's bytes, as stored keys have them", "[keys]") {
  // The key of a string without a NUL (built in one copy) must be the bytes
  // the general path builds, which files already hold: its rank, the bytes,
  // two NULs. A string with a NUL takes the general path.
  const std::string with_nul = Key(Value::String(std::string("a\0b", 3)));
  REQUIRE(with_nul.size() == 7);
  const char rank = with_nul[0];
  CHECK(with_nul.substr(1) == std::string("a\0\xFF"
                                          "b\0\0",
                                          6));
  CHECK(Key(Value::String("ab")) == std::string(1, rank) + "ab" + std::string(2, '\0'));
  CHECK(Key(Value::String("")) == std::string(1, rank) + std::string(2, '\0'));
  const std::string guid = "0f8fad5b-d9cb-469f-a165-70867728950e";
  std::string k = "prefix";
  AppendKey(Value::String(guid).get(), &k);
  CHECK(k == "prefix" + std::string(1, rank) + guid + std::string(2, '\0'));
}

TEST_CASE("AppendKey: containers", "[keys]") {
  CheckPair(V("[]"), V("[1]"));
  CheckPair(V("[1, 2]"), V("[1, 2, 3]"));
  CheckPair(V("[1, \"a\"]"), V("[1, 2]"));
  CheckPair(V("[[1]]"), V("[[1], 1]"));
  CheckPair(V(R"({"a": 1})"), V(R"({"a": 1.0})"));
  CheckPair(V(R"({"a": 1})"), V(R"({"b": 1})"));
  CheckPair(V(R"({"a": 2})"), V(R"({"b": 1})"));
  CheckPair(V(R"({"a": "x"})"), V(R"({"b": 1})"));  // type before name
  CheckPair(V(R"({"a": 1})"), V(R"({"a": 1, "b": 1})"));
  CheckPair(V(R"({})"), V(R"({"a": {"$minKey": 1}})"));
  CHECK(Key(V(R"({"a": [1, {"b": 2}]})")) ==
        Key(V(R"({"a": [1.0, {"b": {"$numberLong": "2"}}]})")));
}

// ------------------------------------------------------------ randomized

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  Value Any(int depth = 0) {
    bson_t b;
    bson_init(&b);
    AppendRandom(&b, "v", depth);
    bson_iter_t it;
    bson_iter_init_find(&it, &b, "v");
    Value v = Value::FromBsonValue(bson_iter_value(&it));
    bson_destroy(&b);
    return v;
  }

 private:
  uint64_t Next() { return rng_(); }

  double EdgeDouble() {
    static const double kEdges[] = {0.0,
                                    -0.0,
                                    NAN,
                                    INFINITY,
                                    -INFINITY,
                                    1.0,
                                    -1.0,
                                    0.5,
                                    1.5,
                                    9007199254740992.0,
                                    9007199254740993.0,
                                    -9007199254740992.0,
                                    9.223372036854776e18,
                                    -9.223372036854776e18,
                                    1.8446744073709552e19,
                                    5e-324,
                                    -5e-324,
                                    2.2250738585072014e-308,
                                    1.7976931348623157e308,
                                    -1.7976931348623157e308,
                                    4611686018427387904.0,
                                    1e300,
                                    1e-300};
    switch (Next() % 4) {
      case 0:
        return kEdges[Next() % (sizeof(kEdges) / sizeof(kEdges[0]))];
      case 1:
        return static_cast<double>(static_cast<int64_t>(Next() % 2001) - 1000);
      case 2: {
        uint64_t bits = Next();
        double d;
        std::memcpy(&d, &bits, 8);
        return d;
      }
      default:
        return (static_cast<double>(Next() % 20001) - 10000) / 8;
    }
  }

  int64_t EdgeInt() {
    const int64_t kMax = std::numeric_limits<int64_t>::max();
    const int64_t kMin = std::numeric_limits<int64_t>::min();
    static const int64_t kEdges[] = {0,
                                     1,
                                     -1,
                                     kMax,
                                     kMin,
                                     kMax - 1,
                                     kMin + 1,
                                     (1LL << 53),
                                     (1LL << 53) + 1,
                                     -(1LL << 53) - 1,
                                     (1LL << 62),
                                     INT32_MAX,
                                     INT32_MIN};
    switch (Next() % 3) {
      case 0:
        return kEdges[Next() % (sizeof(kEdges) / sizeof(kEdges[0]))];
      case 1:
        return static_cast<int64_t>(Next() % 2001) - 1000;
      default:
        return static_cast<int64_t>(Next());
    }
  }

  std::string SmallString() {
    static const char kAlphabet[] = {'\0', '\x01', 'a', 'b', '\x7f', 'z'};
    std::string s;
    size_t len = Next() % 4;
    for (size_t i = 0; i < len; ++i) s.push_back(kAlphabet[Next() % sizeof(kAlphabet)]);
    return s;
  }

  void AppendRandom(bson_t* b, const std::string& key, int depth) {
    const char* k = key.c_str();
    int kl = static_cast<int>(key.size());
    switch (Next() % (depth < 3 ? 16 : 14)) {
      case 0:
        bson_append_int32(b, k, kl, static_cast<int32_t>(EdgeInt()));
        break;
      case 1:
        bson_append_int64(b, k, kl, EdgeInt());
        break;
      case 2:
      case 3:
        bson_append_double(b, k, kl, EdgeDouble());
        break;
      case 4: {
        std::string s = SmallString();
        bson_append_utf8(b, k, kl, s.data(), static_cast<int>(s.size()));
        break;
      }
      case 5:
        bson_append_null(b, k, kl);
        break;
      case 6:
        bson_append_bool(b, k, kl, Next() % 2);
        break;
      case 7: {
        bson_oid_t oid;
        for (auto& byte : oid.bytes) byte = static_cast<uint8_t>(Next() % 3);
        bson_append_oid(b, k, kl, &oid);
        break;
      }
      case 8:
        bson_append_date_time(b, k, kl, EdgeInt());
        break;
      case 9: {
        uint8_t data[3] = {static_cast<uint8_t>(Next() % 2), 0, 1};
        bson_append_binary(b, k, kl, static_cast<bson_subtype_t>(Next() % 2), data,
                           static_cast<uint32_t>(Next() % 4));
        break;
      }
      case 10:
        switch (Next() % 4) {
          case 0:
            bson_append_minkey(b, k, kl);
            break;
          case 1:
            bson_append_maxkey(b, k, kl);
            break;
          case 2:
            bson_append_undefined(b, k, kl);
            break;
          default:
            bson_append_timestamp(b, k, kl, static_cast<uint32_t>(Next() % 3),
                                  static_cast<uint32_t>(Next() % 3));
        }
        break;
      case 11: {
        const char* patterns[] = {"", "a", "ab"};
        const char* opts[] = {"", "i", "im"};
        bson_append_regex(b, k, kl, patterns[Next() % 3], opts[Next() % 3]);
        break;
      }
      case 12: {
        bson_value_t v;
        v.value_type = BSON_TYPE_DECIMAL128;
        const char* decs[] = {"1", "1.5", "-2", "NaN", "Infinity", "0", "-0", "1E+400"};
        bson_decimal128_from_string(decs[Next() % 8], &v.value.v_decimal128);
        bson_append_value(b, k, kl, &v);
        break;
      }
      case 13: {
        std::string code = SmallString();
        bson_append_code(b, k, kl, code.c_str());
        break;
      }
      case 14: {
        bson_t sub;
        bson_append_document_begin(b, k, kl, &sub);
        int n = static_cast<int>(Next() % 3);
        for (int i = 0; i < n; ++i) {
          std::string name = Next() % 2 ? "a" : "b";
          AppendRandom(&sub, name, depth + 1);
        }
        bson_append_document_end(b, &sub);
        break;
      }
      default: {
        bson_t sub;
        bson_append_array_begin(b, k, kl, &sub);
        int n = static_cast<int>(Next() % 3);
        for (int i = 0; i < n; ++i) AppendRandom(&sub, std::to_string(i), depth + 1);
        bson_append_array_end(b, &sub);
      }
    }
  }

  std::mt19937_64 rng_;
};

TEST_CASE("AppendKey: memcmp order equals CompareValues order (randomized)", "[keys]") {
  uint64_t seed = test::Seed("key order");
  Gen gen(seed);
  std::mt19937_64 pick(seed ^ 0x9e3779b97f4a7c15ull);
  const int n = static_cast<int>(300 * test::Scale());
  std::vector<Value> values;
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) {
    values.push_back(gen.Any());
    keys.push_back(Key(values.back()));
  }
  int failures = 0;
  for (int i = 0; i < n && failures < 10; ++i) {
    for (int j = 0; j < n && failures < 10; ++j) {
      int c = Sign(CompareValues(values[i].get(), values[j].get()));
      int k = Sign(keys[i].compare(keys[j]));
      if (c != k) {
        ++failures;
        FAIL_CHECK(values[i].ToJson() << " vs " << values[j].ToJson() << ": compare " << c
                                      << ", keys " << k << " (seed " << seed << ")");
      }
    }
  }
  // Transitivity spot check: sort by CompareValues, keys must be sorted.
  std::vector<size_t> idx(n);
  for (int i = 0; i < n; ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return CompareValues(values[a].get(), values[b].get()) < 0;
  });
  for (int i = 1; i < n; ++i) CHECK(keys[idx[i - 1]] <= keys[idx[i]]);
}

TEST_CASE("AppendKey: numbers randomized against exact comparison", "[keys]") {
  uint64_t seed = test::Seed("numeric keys");
  std::mt19937_64 rng(seed);
  auto random_number = [&rng]() -> Value {
    int64_t i = static_cast<int64_t>(rng());
    switch (rng() % 6) {
      case 0:
        return Value::Int64(i >> (rng() % 64));
      case 1:
        return Value::Int32(static_cast<int32_t>(i));
      case 2:
        return Value::Double(static_cast<double>(i >> (rng() % 64)));
      case 3:
        return Value::Double(std::ldexp(static_cast<double>(i), -static_cast<int>(rng() % 80)));
      case 4: {
        // Neighbours of a large integer: the doubles around it.
        double d = static_cast<double>(i);
        return Value::Double(rng() % 2 ? std::nextafter(d, INFINITY)
                                       : std::nextafter(d, -INFINITY));
      }
      default: {
        uint64_t bits = rng();
        double d;
        std::memcpy(&d, &bits, 8);
        return Value::Double(d);
      }
    }
  };
  const int n = static_cast<int>(20000 * test::Scale());
  for (int t = 0; t < n; ++t) {
    Value a = random_number(), b = random_number();
    int c = Sign(CompareValues(a.get(), b.get()));
    // Independent oracle: long double holds every int64 and double exactly
    // on x86-64/aarch64 Linux.
    auto ld = [](const Value& v) -> long double {
      const bson_value_t* x = v.get();
      if (x->value_type == BSON_TYPE_INT32) return x->value.v_int32;
      if (x->value_type == BSON_TYPE_INT64) return x->value.v_int64;
      return x->value.v_double;
    };
    long double la = ld(a), lb = ld(b);
    int oracle;
    if (std::isnan(la) || std::isnan(lb)) {
      oracle = std::isnan(la) && std::isnan(lb) ? 0 : (std::isnan(la) ? -1 : 1);
    } else {
      oracle = (la > lb) - (la < lb);
    }
    INFO(a.ToJson() << " vs " << b.ToJson() << " seed " << seed);
    if (std::numeric_limits<long double>::digits >= 64) REQUIRE(c == oracle);
    REQUIRE(KeyOrder(a, b) == c);
  }
}

// ------------------------------------------------------------ paths

Document D(const std::string& json) {
  auto d = Document::FromJson(json);
  INFO(json << ": " << d.status().ToString());
  REQUIRE(d.ok());
  return d.value();
}

TEST_CASE("LookupPath", "[keys]") {
  Document d = D(R"({"a": {"b": [5, {"c": "x"}], "n": null}, "z": 1})");
  bson_value_t v;
  REQUIRE(LookupPath(d.data(), d.size(), "z", &v));
  CHECK(v.value_type == BSON_TYPE_INT32);
  REQUIRE(LookupPath(d.data(), d.size(), "a.b.1.c", &v));
  CHECK(std::string(v.value.v_utf8.str) == "x");
  REQUIRE(LookupPath(d.data(), d.size(), "a.b.0", &v));
  CHECK(v.value.v_int32 == 5);
  REQUIRE(LookupPath(d.data(), d.size(), "a.n", &v));
  CHECK(v.value_type == BSON_TYPE_NULL);
  CHECK_FALSE(LookupPath(d.data(), d.size(), "a.b.c", &v));
  CHECK_FALSE(LookupPath(d.data(), d.size(), "z.y", &v));
  CHECK_FALSE(LookupPath(d.data(), d.size(), "q", &v));
  CHECK_FALSE(LookupPath(d.data(), d.size(), "a.b.2", &v));
  CHECK_FALSE(LookupPath(d.data(), d.size(), "", &v));
  CHECK_FALSE(LookupPath(d.data(), d.size(), "a.", &v));
}

// SortKey of `json` on `path` as JSON ("undefined" for the [] key).
std::string SortKeyOf(const std::string& json, const std::string& path, int direction) {
  Document d = D(json);
  bson_value_t v;
  SortKey(d.data(), d.size(), path, direction, &v);
  if (v.value_type == BSON_TYPE_UNDEFINED) return "undefined";
  return Value::FromBsonValue(&v).ToJson();
}

TEST_CASE("SortKey: the smallest value ascending, the largest descending", "[keys]") {
  CHECK(SortKeyOf(R"({"a": [3, 1, 2]})", "a", 1) == "1");
  CHECK(SortKeyOf(R"({"a": [3, 1, 2]})", "a", -1) == "3");
  CHECK(SortKeyOf(R"({"a": ["a", 5, null]})", "a", 1) == "null");
  CHECK(SortKeyOf(R"({"a": ["a", 5, null]})", "a", -1) == "\"a\"");
  CHECK(SortKeyOf(R"({"a": []})", "a", 1) == "undefined");
  CHECK(SortKeyOf(R"({"a": []})", "a", -1) == "undefined");
  CHECK(SortKeyOf(R"({"a": [[2, 1], [0]]})", "a", 1) == "[ 0 ]");
  CHECK(SortKeyOf(R"({"b": 1})", "a", 1) == "null");
  CHECK(SortKeyOf(R"({"a": 7})", "a.b", -1) == "null");
  CHECK(SortKeyOf(R"({"a": [{"b": 2}, {"c": 1}, 9]})", "a.b", 1) == "null");
  CHECK(SortKeyOf(R"({"a": [{"b": 2}, {"c": 1}, 9]})", "a.b", -1) == "2");
  CHECK(SortKeyOf(R"({"a": [1, 2]})", "a.b", -1) == "null");
  CHECK(SortKeyOf(R"({"a": [{"b": [4, 8]}, {"b": {"c": [6]}}]})", "a.b.c", -1) == "6");
  CHECK(SortKeyOf(R"({"a": [{"b": [4, 8]}, {"b": {"c": [6]}}]})", "a.b.c", 1) == "null");
  // A position, not a field "1" in each element.
  CHECK(SortKeyOf(R"({"a": [{"1": 0}, {"b": 5}]})", "a.1.b", 1) == "5");
  CHECK(SortKeyOf(R"({"a": [{"1": 0}, [3, 4]]})", "a.1", -1) == "4");
  CHECK(SortKeyOf(R"({"a": [{"1": 0}]})", "a.1", 1) == "null");
  CHECK(SortKeyOf(R"({"a": {"1": [0, 1]}})", "a.1", -1) == "1");
}

// The keys of one call into a new vector; each call also writes into one
// vector kept across calls, as a writer's does, which must agree.
std::vector<std::string> Keys(const std::string& json, const std::string& path) {
  Document d = D(json);
  std::vector<std::string> keys;
  IndexKeys(d.data(), d.size(), path, &keys);
  static std::vector<std::string> reused;
  IndexKeys(d.data(), d.size(), path, &reused);
  CHECK(reused == keys);
  return keys;
}

std::vector<std::string> KeysOf(const std::vector<std::string>& values) {
  std::vector<std::string> keys;
  for (const auto& v : values) keys.push_back(Key(V(v)));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

TEST_CASE("IndexKeys: MongoDB multikey rules", "[keys]") {
  CHECK(Keys(R"({"a": 1})", "a") == KeysOf({"1"}));
  CHECK(Keys(R"({"b": 1})", "a") == KeysOf({"null"}));
  CHECK(Keys(R"({"a": null})", "a") == KeysOf({"null"}));
  CHECK(Keys(R"({"a": [3, 1, 3, 1.0]})", "a") == KeysOf({"1", "3"}));
  CHECK(Keys(R"({"a": []})", "a") == KeysOf({"null"}));
  CHECK(Keys(R"({"a": [[1], 2]})", "a") == KeysOf({"[1]", "2"}));
  CHECK(Keys(R"({"a": {"b": 1}})", "a") == KeysOf({R"({"b": 1})"}));
  CHECK(Keys(R"({"a": [{"b": 1}, {"b": 2}]})", "a.b") == KeysOf({"1", "2"}));
  CHECK(Keys(R"({"a": [{"b": 1}, {"c": 2}]})", "a.b") == KeysOf({"1", "null"}));
  CHECK(Keys(R"({"a": [{"b": [1, 2]}, {"b": 3}]})", "a.b") == KeysOf({"1", "2", "3"}));
  CHECK(Keys(R"({"a": 5})", "a.b") == KeysOf({"null"}));
  CHECK(Keys(R"({"a": [7, 8]})", "a.1") == KeysOf({"8"}));
  CHECK(Keys(R"({"a": {"b": {"c": "x"}}})", "a.b.c") == KeysOf({R"("x")"}));
}

}  // namespace
}  // namespace mmdoc::engine
