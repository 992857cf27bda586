// Partial index filters: the allowed subset, and that FilterImplies never
// says yes when some document matches the query but not the partial filter
// (randomized against Filter::Matches), while saying yes often enough to
// matter.
#include "engine/partial_filter.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/index_spec.h"
#include "engine/query.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

namespace mmdoc::engine {
namespace {

using mmdoc::test::J;

bool Implies(const std::string& query, const std::string& partial) {
  Document q = J(query), p = J(partial);
  return FilterImplies(std::string_view(reinterpret_cast<const char*>(q.data()), q.size()),
                       std::string_view(reinterpret_cast<const char*>(p.data()), p.size()));
}

Status Check(const std::string& partial) {
  Document p = J(partial);
  return CheckPartialFilter(p.data(), p.size());
}

TEST_CASE("partial filter: MongoDB's subset is accepted, the rest refused", "[partial]") {
  for (const char* ok : {R"({"a": 1})", R"({"a": {"$eq": "x"}, "b": {"$exists": true}})",
                         R"({"a": {"$gt": 1, "$lte": 5}})", R"({"a": {"$type": "string"}})",
                         R"({"$and": [{"a": 1}, {"b": {"$lt": 2}}]})"}) {
    INFO(ok);
    CHECK(Check(ok).ok());
  }
  for (const char* bad :
       {"{}", R"({"a": {"$ne": 1}})", R"({"a": {"$in": [1]}})", R"({"$or": [{"a": 1}]})",
        R"({"a": {"$exists": false}})", R"({"a": {"b": 1}})", R"({"a": [1]})",
        R"({"a": {"$regex": "x"}})", R"({"a": {"$not": {"$gt": 1}}})", R"({"$and": [1]})"}) {
    INFO(bad);
    CHECK(Check(bad).IsInvalidArgument());
  }
}

TEST_CASE("partial filter: which queries imply it", "[partial]") {
  CHECK(Implies(R"({"a": 1, "b": 2})", R"({"a": 1})"));
  CHECK(Implies(R"({"a": 1.0})", R"({"a": 1})"));
  CHECK(Implies(R"({"a": {"$gt": 6}})", R"({"a": {"$gt": 5}})"));
  CHECK(Implies(R"({"a": {"$gte": 6}})", R"({"a": {"$gt": 5}})"));
  CHECK(Implies(R"({"a": 7})", R"({"a": {"$gte": 7}})"));
  CHECK(Implies(R"({"$and": [{"a": {"$lt": 3}}, {"b": "x"}]})", R"({"a": {"$lte": 3}})"));
  CHECK(Implies(R"({"a": "x"})", R"({"a": {"$exists": true}})"));
  CHECK(Implies(R"({"a": {"$type": "int"}})", R"({"a": {"$type": "int"}})"));
  CHECK_FALSE(Implies(R"({"a": {"$gte": 5}})", R"({"a": {"$gt": 5}})"));
  CHECK_FALSE(Implies(R"({"a": 5})", R"({"a": {"$gt": 5}})"));
  CHECK_FALSE(Implies(R"({"a": {"$gt": "a"}})", R"({"a": {"$gt": 5}})"));
  CHECK_FALSE(Implies(R"({"a": null})", R"({"a": {"$exists": true}})"));
  CHECK_FALSE(Implies(R"({"$or": [{"a": 1}, {"a": 1}]})", R"({"a": 1})"));
  CHECK_FALSE(Implies(R"({"a": {"$not": {"$lt": 1}}})", R"({"a": {"$gte": 1}})"));
  CHECK_FALSE(Implies(R"({"a": {"b": 1}})", R"({"a.b": 1})"));
  CHECK_FALSE(Implies(R"({"a": 1})", R"({"a": 1, "b": 1})"));
}

TEST_CASE(
    "partial filter: an implied filter matches every document the query does "
    "(randomized)",
    "[partial]") {
  const uint64_t seed = mmdoc::test::Seed("partial filter");
  std::mt19937_64 rng(seed);
  const std::vector<std::string> values = {"0",
                                           "1",
                                           "1.0",
                                           "2",
                                           "-1",
                                           "2.5",
                                           R"("a")",
                                           R"("b")",
                                           "true",
                                           "false",
                                           "null",
                                           R"({"$numberLong": "1"})",
                                           R"({"$date": 5})"};
  const std::vector<std::string> doc_values = {
      "0",    "1",    "2",      "3",  "1.5",    R"("a")",      R"("c")",
      "true", "null", "[1, 3]", "[]", "[null]", R"({"x": 1})", R"([2, "b"])"};
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  auto cond = [&](bool partial) {
    const std::string f = rng() % 2 ? "a" : "b";
    static const char* const kOps[] = {"$gt", "$gte", "$lt", "$lte", "$eq"};
    switch (rng() % (partial ? 5 : 7)) {
      case 0:
        return "\"" + f + "\": " + pick(values);
      case 1:
        return "\"" + f + "\": {\"$exists\": true}";
      case 2:
        return "\"" + f + "\": {\"$type\": \"" + (rng() % 2 ? "number" : "string") + "\"}";
      case 5:
        return "\"" + f + "\": {\"$ne\": " + pick(values) + "}";
      case 6:
        return "\"$or\": [{\"" + f + "\": " + pick(values) + "}, {\"b\": 1}]";
      default: {
        std::string ops;
        const int n = 1 + static_cast<int>(rng() % 2);
        for (int i = 0; i < n; i++) {
          if (i > 0) ops += ", ";
          ops += std::string("\"") + kOps[rng() % 5] + "\": " + pick(values);
        }
        return "\"" + f + "\": {" + ops + "}";
      }
    }
  };
  auto filter = [&](bool partial) {
    std::string s = "{" + cond(partial);
    if (rng() % 2) s += ", \"$and\": [{" + cond(partial) + "}]";
    return s + "}";
  };
  int implied = 0, matched_implied = 0;
  const int rounds = static_cast<int>(3000 * mmdoc::test::Scale());
  for (int r = 0; r < rounds; r++) {
    const std::string partial = filter(true);
    if (!Check(partial).ok()) continue;
    std::string query = filter(false);
    if (rng() % 3 == 0) query = partial;  // a query that repeats it
    if (!Implies(query, partial)) continue;
    implied++;
    auto q = Filter::Parse(J(query));
    auto p = Filter::Parse(J(partial));
    if (!q.ok()) continue;
    REQUIRE(p.ok());
    for (int d = 0; d < 20; d++) {
      std::string doc = "{";
      if (rng() % 4) doc += "\"a\": " + pick(doc_values);
      if (rng() % 4) doc += std::string(doc.size() > 1 ? ", " : "") + "\"b\": " + pick(doc_values);
      doc += "}";
      Document dd = J(doc);
      if (!q.value().Matches(dd.data(), dd.size())) continue;
      matched_implied++;
      INFO("seed " << seed << ": query " << query << " partial " << partial << " doc " << doc);
      CHECK(p.value().Matches(dd.data(), dd.size()));
    }
  }
  INFO("seed " << seed);
  CHECK(implied > rounds / 10);
  CHECK(matched_implied > rounds / 10);
}

// The fuzz corpus's seeds (tests/fuzz/corpus/index): partial filter, query,
// document, as fuzz_index reads them.
TEST_CASE("partial filter: the fuzz corpus seeds", "[partial]") {
  const std::string dir = std::string(MMDOC_SOURCE_DIR) + "/tests/fuzz/corpus/index/";
  for (const char* name : {"implied", "and-type", "parallel"}) {
    std::ifstream in(dir + name, std::ios::binary);
    REQUIRE(in);
    std::string partial, query, doc;
    std::getline(in, partial);
    std::getline(in, query);
    std::getline(in, doc, '\0');
    INFO(name);
    IndexOptions o;
    o.partial_filter = J(partial);
    IndexMeta m;
    REQUIRE(MakeIndexMeta({{"a", 1}, {"b.c", -1}}, o, &m).ok());
    Document d = J(doc);
    std::vector<std::string> keys;
    Status s = IndexEntryKeys(m, d.data(), d.size(), &keys);
    if (std::string(name) == "parallel") {
      CHECK(s.ToString().find("cannot index parallel arrays [a] [b]") != std::string::npos);
      continue;
    }
    REQUIRE(s.ok());
    CHECK_FALSE(keys.empty());
    CHECK(Implies(query, partial));
  }
}

}  // namespace
}  // namespace mmdoc::engine
