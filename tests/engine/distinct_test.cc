// Distinct: MongoDB's distinct against a model (randomized).
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/query.h"
#include "mmdoc/db.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;

namespace {

// Adds v (an array: each element) to *out unless an equal value is there.
void ModelAdd(const bson_value_t* v, std::vector<Value>* out) {
  if (v->value_type == BSON_TYPE_ARRAY) {
    bson_iter_t it;
    REQUIRE(bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len));
    while (bson_iter_next(&it)) {
      const bson_value_t* e = bson_iter_value(&it);
      bool dup = false;
      for (const Value& o : *out) dup = dup || engine::CompareValues(o.get(), e) == 0;
      if (!dup) out->push_back(Value::FromBsonValue(e));
    }
    return;
  }
  for (const Value& o : *out) {
    if (engine::CompareValues(o.get(), v) == 0) return;
  }
  out->push_back(Value::FromBsonValue(v));
}

}  // namespace

TEST_CASE("distinct: arrays give their elements, missing gives nothing, 1 == 1.0 (randomized)",
          "[engine][distinct]") {
  const uint64_t seed = mmdoc::test::Seed("distinct");
  std::mt19937_64 rng(seed);
  TestDB db(Options{});
  const char* values[] = {"1",    "1.0",     R"({"$numberLong": "1"})",
                          "2.5",  R"("a")",  R"("b")",
                          "null", "true",    R"({"x": 1})",
                          "[]",   "[1, 2]",  R"([[1], "a", null])",
                          "[3]",  R"(["b"])"};
  const size_t nvalues = sizeof(values) / sizeof(*values);
  const int n = static_cast<int>(150 * mmdoc::test::Scale());
  std::vector<Document> docs;
  {
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int i = 0; i < n; i++) {
      std::string d = "{\"_id\": " + std::to_string(i) + ", \"u\": " + std::to_string(i % 10);
      if (rng() % 4) d += std::string(", \"t\": ") + values[rng() % nvalues];
      d += "}";
      docs.push_back(J(d));
      REQUIRE(t.value()->Insert("c", docs.back()).ok());
    }
    REQUIRE(t.value()->Commit().ok());
  }
  REQUIRE(db->CreateIndex("c", "t").ok());
  for (const std::string filter :
       {"{}", R"({"u": {"$gte": 7}})", R"({"t": {"$gt": 1}})", R"({"u": 100})"}) {
    auto f = engine::Filter::Parse(J(filter));
    REQUIRE(f.ok());
    std::vector<Value> want;
    for (const Document& d : docs) {
      if (!f.value().Matches(d.data(), d.size())) continue;
      auto v = d.Get("t");
      if (v.ok()) ModelAdd(v.value().get(), &want);
    }
    auto got = db->Distinct("c", "t", J(filter));
    INFO("seed " << seed << " filter " << filter << ": " << got.status().ToString());
    REQUIRE(got.ok());
    CHECK(got.value().size() == want.size());
    for (const Value& w : want) {
      bool found = false;
      for (const Value& g : got.value())
        found = found || engine::CompareValues(g.get(), w.get()) == 0;
      INFO(w.ToJson());
      CHECK(found);
    }
    for (size_t i = 1; i < got.value().size(); i++)
      CHECK(engine::CompareValues(got.value()[i - 1].get(), got.value()[i].get()) < 0);
  }
  // Through arrays of subdocuments; a missing collection has none.
  REQUIRE(db->Insert("s", J(R"({"a": [{"b": 1}, {"b": [2, 1.0]}, {"c": 3}]})")).ok());
  REQUIRE(db->Insert("s", J(R"({"a": {"b": "x"}})")).ok());
  auto sub = db->Distinct("s", "a.b");
  REQUIRE(sub.ok());
  std::vector<std::string> got;
  for (const Value& v : sub.value()) got.push_back(v.ToJson());
  CHECK(got == std::vector<std::string>{"1", "2", "\"x\""});
  auto none = db->Distinct("nope", "a");
  REQUIRE(none.ok());
  CHECK(none.value().empty());
  CHECK(db->Distinct("s", "a..b").status().IsInvalidArgument());
  CHECK(db->Distinct("s", "$a").status().IsInvalidArgument());
  CHECK(db->Distinct("s", "a", J(R"({"$where": 1})")).status().IsInvalidArgument());
}
