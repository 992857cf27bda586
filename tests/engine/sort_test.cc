// Sorts: index-backed sorts against the in-memory sort of an unindexed
// copy (randomized).
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
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

Options Fast() {
  Options o;
  o.durability = Durability::kNone;
  return o;
}

// The sort value of `doc` on `field` (MongoDB's rule), as engine::SortKey.
Value KeyOf(const Document& doc, const std::string& field, int dir) {
  bson_value_t v;
  engine::SortKey(doc.data(), doc.size(), field, dir, &v);
  return Value::FromBsonValue(&v);
}

// A result as its runs of equal sort keys: the key, then the _ids of the
// run as a multiset (the order among equal keys is not defined).
struct Run {
  Value key;
  std::multiset<std::string> ids;
};

std::vector<Run> Runs(const std::vector<Document>& docs, const std::string& field, int dir) {
  std::vector<Run> runs;
  for (const Document& d : docs) {
    Value k = KeyOf(d, field, dir);
    if (runs.empty() || engine::CompareValues(runs.back().key.get(), k.get()) != 0)
      runs.push_back(Run{k, {}});
    runs.back().ids.insert(d.Get("_id").value().ToJson());
  }
  return runs;
}

std::string Show(const std::vector<Run>& runs) {
  std::string s;
  for (const Run& r : runs) {
    s += r.key.ToJson() + ":";
    for (const std::string& id : r.ids) s += " " + id;
    s += "\n";
  }
  return s;
}

bool SameRuns(const std::vector<Run>& a, const std::vector<Run>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (engine::CompareValues(a[i].key.get(), b[i].key.get()) != 0 || a[i].ids != b[i].ids)
      return false;
  }
  return true;
}

// The sort keys of a result, in order.
std::vector<std::string> Keys(const std::vector<Document>& docs, const std::string& field,
                              int dir) {
  std::vector<std::string> out;
  for (const Document& d : docs) {
    Value k = KeyOf(d, field, dir);
    std::string enc;
    engine::AppendKey(k.get(), &enc);  // equal values, equal bytes
    out.push_back(enc);
  }
  return out;
}

std::vector<Document> Find(TestDB& db, const std::string& coll, const std::string& filter,
                           const FindOptions& o) {
  auto r = db->Find(coll, J(filter), o);
  INFO(coll << " " << filter << ": " << r.status().ToString());
  REQUIRE(r.ok());
  return r.value();
}

ExplainInfo Explain(TestDB& db, const std::string& coll, const std::string& filter,
                    const FindOptions& o) {
  auto t = db->BeginRead();
  REQUIRE(t.ok());
  auto e = t.value()->Explain(coll, J(filter), o);
  INFO(filter << ": " << e.status().ToString());
  REQUIRE(e.ok());
  return e.value();
}

}  // namespace

TEST_CASE("sort: an index gives the order, forward and backward, and stops at the limit",
          "[engine][sort]") {
  TestDB db(Fast());
  for (int i = 0; i < 500; i++) {
    std::string d = "{\"_id\": " + std::to_string(i) + ", \"k\": " + std::to_string(i % 7) + "}";
    REQUIRE(db->Insert("c", J(d)).ok());
  }
  REQUIRE(db->CreateIndex("c", "k").ok());
  FindOptions o;
  o.sort_field = "_id";
  o.sort_direction = -1;
  o.limit = 1;
  ExplainInfo e = Explain(db, "c", "{}", o);
  CHECK(e.plan == "IXSCAN");
  CHECK(e.index == "_id");
  CHECK_FALSE(e.sorted_in_memory);
  CHECK(e.docs_examined == 1);
  CHECK(e.ToJson().find("\"sortedInMemory\": false") != std::string::npos);
  auto docs = Find(db, "c", "{}", o);
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].Get("_id").value().ToJson() == "499");

  o.sort_field = "k";
  o.sort_direction = 1;
  o.limit = 3;
  o.skip = 70;  // k = 0 has 72 documents
  e = Explain(db, "c", R"({"k": {"$lte": 3}})", o);
  CHECK(e.plan == "IXSCAN");
  CHECK(e.index == "k");
  CHECK_FALSE(e.sorted_in_memory);
  CHECK(e.docs_examined == 73);
  docs = Find(db, "c", R"({"k": {"$lte": 3}})", o);
  REQUIRE(docs.size() == 3);
  CHECK(docs[1].Get("k").value().ToJson() == "0");
  CHECK(docs[2].Get("k").value().ToJson() == "1");

  // Bounds on another index: that index finds, the sort runs in memory.
  REQUIRE(db->CreateIndex("c", "u").ok());
  e = Explain(db, "c", R"({"u": null})", o);
  CHECK(e.index == "u");
  CHECK(e.sorted_in_memory);
  // A multikey index cannot give an array's sort key.
  REQUIRE(db->Insert("c", J(R"({"_id": 1000, "k": [9, -1]})")).ok());
  e = Explain(db, "c", "{}", o);
  CHECK(e.plan == "COLLSCAN");
  CHECK(e.sorted_in_memory);
}

TEST_CASE("sort: index-backed sorts agree with the in-memory sort (randomized)", "[engine][sort]") {
  const uint64_t seed = mmdoc::test::Seed("index sort");
  std::mt19937_64 rng(seed);
  TestDB db(Fast());
  // Values of k that keep its index single-key: scalars of every type, [],
  // one-element arrays, and missing.
  const char* values[] = {"0",
                          "1",
                          "1.0",
                          "2",
                          "-3.5",
                          R"({"$numberLong": "2"})",
                          R"("a")",
                          R"("b")",
                          "null",
                          "[]",
                          "[4]",
                          "[[1, 2]]",
                          "[null]",
                          "true",
                          R"({"$date": 5})",
                          R"({"x": 1})",
                          R"({"$minKey": 1})",
                          R"({"$maxKey": 1})",
                          R"({"$undefined": true})",
                          R"({"$numberDouble": "NaN"})",
                          ""};
  const size_t nvalues = sizeof(values) / sizeof(*values);
  const int n = static_cast<int>(300 * mmdoc::test::Scale());
  std::vector<int> us(n);
  for (int i = 0; i < n; i++) us[i] = i;
  std::shuffle(us.begin(), us.end(), rng);
  for (int i = 0; i < n; i++) {
    std::string d =
        "{\"_id\": " + std::to_string(rng() % (4 * n)) + ", \"u\": " + std::to_string(us[i]);
    const std::string k = values[rng() % nvalues];
    if (!k.empty()) d += ", \"k\": " + k;
    d += "}";
    Status s = db->Insert("ix", J(d));
    if (s.IsAlreadyExists()) continue;  // a repeated _id
    REQUIRE(s.ok());
    REQUIRE(db->Insert("plain", J(d)).ok());
  }
  REQUIRE(db->CreateIndex("ix", "k").ok());
  REQUIRE(db->CreateIndex("ix", "u", IndexOptions{true}).ok());
  const std::vector<std::string> filters = {
      "{}",
      R"({"k": {"$gte": 1}})",
      R"({"k": {"$lt": 2}})",
      R"({"k": {"$in": [1, "a", null]}})",
      R"({"k": null})",
      R"({"k": {"$exists": false}})",
      R"({"k": []})",
      R"({"k": {"$ne": 2}})",
      R"({"k": {"$gt": 0, "$lte": "b"}})",
      R"({"u": {"$gte": 40}})",
      R"({"u": {"$in": [1, 5, 9, 200]}})",
      R"({"_id": {"$lt": 300}})",
      R"({"_id": {"$in": [3, 7, 11, 100]}})",
      R"({"$or": [{"k": 1}, {"k": {"$gt": "a"}}]})",
  };
  for (const std::string field : {"k", "u", "_id"}) {
    for (int dir : {1, -1}) {
      for (const std::string& filter : filters) {
        FindOptions o;
        o.sort_field = field;
        o.sort_direction = dir;
        INFO("seed " << seed << " sort " << field << " " << dir << " filter " << filter);
        ExplainInfo e = Explain(db, "ix", filter, o);
        INFO("plan " << e.ToJson());
        // {} or bounds on the sort's own field: walked in order.
        if (filter == "{}" || filter.find("\"" + field + "\"") != std::string::npos)
          CHECK_FALSE(e.sorted_in_memory);
        auto got = Find(db, "ix", filter, o);
        auto want = Find(db, "plain", filter, o);
        if (field != "_id") CHECK(Explain(db, "plain", filter, o).sorted_in_memory);
        auto got_runs = Runs(got, field, dir);
        auto want_runs = Runs(want, field, dir);
        INFO("got\n" << Show(got_runs) << "want\n" << Show(want_runs));
        CHECK(SameRuns(got_runs, want_runs));
        // The model: every key of a run is not after the next one's.
        for (size_t i = 1; i < got_runs.size(); i++) {
          int c = engine::CompareValues(got_runs[i - 1].key.get(), got_runs[i].key.get());
          CHECK(c * dir < 0);
        }
        // Skip and limit cut the same keys out of the order.
        for (int round = 0; round < 4; round++) {
          o.skip = static_cast<int64_t>(rng() % (want.size() + 2));
          o.limit = static_cast<int64_t>(rng() % 20);
          INFO("skip " << o.skip << " limit " << o.limit);
          auto g = Find(db, "ix", filter, o);
          auto w = Find(db, "plain", filter, o);
          CHECK(Keys(g, field, dir) == Keys(w, field, dir));
          std::set<std::string> all;
          for (const Document& d : want) all.insert(d.Get("_id").value().ToJson());
          for (const Document& d : g) CHECK(all.count(d.Get("_id").value().ToJson()) == 1);
        }
      }
    }
  }
}
