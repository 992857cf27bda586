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

TEST_CASE("sort: an in-memory sort refuses to hold more than max_sort_bytes, a limit keeps top-k",
          "[engine][sort]") {
  TestDB db(Fast());
  const std::string pad(1000, 'p');
  for (int i = 0; i < 300; i++) {
    std::string d = "{\"_id\": " + std::to_string(i) +
                    ", \"x\": " + std::to_string((i * 37) % 101) + ", \"pad\": \"" + pad + "\"}";
    REQUIRE(db->Insert("c", J(d)).ok());
  }
  FindOptions o;
  o.sort_field = "x";
  o.max_sort_bytes = 100 << 10;  // a third of the documents
  auto r = db->Find("c", J("{}"), o);
  REQUIRE(r.status().IsInvalidArgument());
  CHECK(r.status().ToString().find("sort exceeded memory limit of 102400 bytes") !=
        std::string::npos);
  // The default (100 MiB) holds them all; so does 0 (no limit).
  FindOptions all;
  all.sort_field = "x";
  auto full = db->Find("c", J("{}"), all);
  REQUIRE(full.ok());
  REQUIRE(full.value().size() == 300);
  all.max_sort_bytes = 0;
  REQUIRE(db->Find("c", J("{}"), all).ok());
  // With a limit only skip + limit documents are held: the same documents
  // as the full sort's slice, ties in the same order.
  for (auto [skip, limit] : {std::pair<int, int>{0, 10}, {5, 20}, {30, 40}, {0, 1}}) {
    o.skip = skip;
    o.limit = limit;
    auto part = db->Find("c", J("{}"), o);
    INFO("skip " << skip << " limit " << limit << ": " << part.status().ToString());
    REQUIRE(part.ok());
    std::vector<std::string> want;
    for (int i = skip; i < std::min(300, skip + limit); i++)
      want.push_back(full.value()[i].Get("_id").value().ToJson());
    std::vector<std::string> got;
    for (const Document& d : part.value()) got.push_back(d.Get("_id").value().ToJson());
    CHECK(got == want);
  }
  o.skip = 0;
  o.limit = 200;  // 200 documents do not fit in 100 KiB either
  CHECK(db->Find("c", J("{}"), o).status().IsInvalidArgument());
  // An index-backed sort holds nothing.
  REQUIRE(db->CreateIndex("c", "x").ok());
  o.limit = 0;
  auto indexed = db->Find("c", J("{}"), o);
  REQUIRE(indexed.ok());
  CHECK(indexed.value().size() == 300);
}

TEST_CASE("sort: several keys follow a model (randomized)", "[engine][sort]") {
  const uint64_t seed = mmdoc::test::Seed("multi sort");
  std::mt19937_64 rng(seed);
  TestDB db(Fast());
  // Values whose sort key the model knows: numbers, strings, null, missing
  // and arrays of numbers (smallest ascending, largest descending; [] as
  // undefined, below null).
  auto value = [&]() -> std::string {
    switch (rng() % 6) {
      case 0:
        return "";
      case 1:
        return "null";
      case 2:
        return "\"s" + std::to_string(rng() % 3) + "\"";
      case 3: {
        std::string s = "[";
        for (int n = static_cast<int>(rng() % 3), i = 0; i < n; i++)
          s += (i ? ", " : "") + std::to_string(rng() % 4);
        return s + "]";
      }
      default:
        return std::to_string(rng() % 4);
    }
  };
  const char* fields[] = {"a", "b", "c"};
  const int n = static_cast<int>(200 * mmdoc::test::Scale());
  std::vector<Document> docs;
  for (int i = 0; i < n; i++) {
    std::string d = "{\"_id\": " + std::to_string(i);
    for (const char* f : fields) {
      std::string v = value();
      if (!v.empty()) d += std::string(", \"") + f + "\": " + v;
    }
    docs.push_back(J(d + "}"));
    REQUIRE(db->Insert("c", docs.back()).ok());
  }
  REQUIRE(db->CreateIndex("c", "a").ok());  // multikey: no help with the order
  auto model_key = [](const Document& d, const std::string& f, int dir) -> Value {
    auto v = d.Get(f);
    if (!v.ok()) return Value::Null();
    if (v.value().type() != BSON_TYPE_ARRAY) return v.value();
    auto arr = d.Get(f).value().ToJson();  // "[ 1, 2 ]" style: parse the numbers
    std::vector<int> nums;
    for (char ch : arr)
      if (ch >= '0' && ch <= '9') nums.push_back(ch - '0');
    if (nums.empty()) return mmdoc::test::V(R"({"$undefined": true})");
    return Value::Int32(dir > 0 ? *std::min_element(nums.begin(), nums.end())
                                : *std::max_element(nums.begin(), nums.end()));
  };
  for (int round = 0; round < 40; round++) {
    FindOptions o;
    std::vector<std::string> order = {"a", "b", "c"};
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(1 + rng() % 3);
    std::string what;
    for (const std::string& f : order) {
      o.sort.push_back(SortSpec{f, rng() % 2 ? 1 : -1});
      what += f + ":" + std::to_string(o.sort.back().direction) + " ";
    }
    if (rng() % 2) o.limit = static_cast<int64_t>(rng() % 30);
    if (rng() % 2) o.skip = static_cast<int64_t>(rng() % 30);
    // The model: a stable sort of the _id order on the keys in turn.
    std::vector<const Document*> want(docs.size());
    for (size_t i = 0; i < docs.size(); i++) want[i] = &docs[i];
    std::stable_sort(want.begin(), want.end(), [&](const Document* x, const Document* y) {
      for (const SortSpec& k : o.sort) {
        Value kx = model_key(*x, k.field, k.direction);
        Value ky = model_key(*y, k.field, k.direction);
        int c = engine::CompareValues(kx.get(), ky.get());
        if (c != 0) return k.direction > 0 ? c < 0 : c > 0;
      }
      return false;
    });
    std::vector<std::string> want_ids;
    for (size_t i = static_cast<size_t>(o.skip);
         i < want.size() && (o.limit == 0 || want_ids.size() < static_cast<size_t>(o.limit)); i++)
      want_ids.push_back(want[i]->Get("_id").value().ToJson());
    auto got = Find(db, "c", "{}", o);
    std::vector<std::string> got_ids;
    for (const Document& d : got) got_ids.push_back(d.Get("_id").value().ToJson());
    INFO("seed " << seed << " sort " << what << " skip " << o.skip << " limit " << o.limit);
    CHECK(got_ids == want_ids);
  }
  // Bad sorts are refused.
  FindOptions bad;
  bad.sort = {{"a", 1}, {"a", -1}};
  CHECK(db->Find("c", J("{}"), bad).status().IsInvalidArgument());
  bad.sort = {{"a", 2}};
  CHECK(db->Find("c", J("{}"), bad).status().IsInvalidArgument());
  bad.sort = {{"a", 1}};
  bad.sort_field = "b";
  CHECK(db->Find("c", J("{}"), bad).status().IsInvalidArgument());
}
