// Every mmdoc-bench adapter returns the right documents for the same calls,
// so no engine is measured doing less work than another.
#include "bench/backend.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/bson_doc.h"
#include "bench/workload.h"
#include "tests/support/test_env.h"

namespace mmdoc::bench {
namespace {

std::unique_ptr<Backend> OpenBackend(const std::string& engine, const std::string& dir,
                                     Durability durability, uint64_t docs, bool key_index = true) {
  auto b = NewBackend(engine);
  REQUIRE(b.ok());
  BackendConfig config;
  config.key_index = key_index;
  config.durability = durability;
  config.expected_docs = docs;
  config.expected_bytes = docs * 200;
  config.max_sessions = 4;
  Status s = b.value()->Open(dir, config);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return std::move(b.value());
}

std::unique_ptr<Session> NewSessionOf(Backend* b) {
  auto s = b->NewSession();
  INFO(s.status().ToString());
  REQUIRE(s.ok());
  return std::move(s.value());
}

void InsertAll(Session* session, const Dataset& data, uint64_t begin, uint64_t end, int batch) {
  for (uint64_t i = begin; i < end;) {
    REQUIRE(session->Begin().ok());
    for (int k = 0; k < batch && i < end; ++k, ++i) {
      Status s = session->Insert(DocRef{data.id(i), data.key(i), data.bson(i)});
      INFO(s.ToString());
      REQUIRE(s.ok());
    }
    Status s = session->Commit();
    INFO(s.ToString());
    REQUIRE(s.ok());
  }
}

// The functional contract of backend.h, on one engine.
void CheckEngine(const std::string& engine, Durability durability) {
  test::TempDir dir;
  const uint64_t n = 300;
  Dataset data = Dataset::Generate(n, 11);
  auto backend = OpenBackend(engine, dir.path(), durability, n);
  INFO(engine << ": " << backend->settings());
  auto session = NewSessionOf(backend.get());
  InsertAll(session.get(), data, 0, n, 64);

  // Duplicates of the _id or of the key are refused, and a refused insert
  // leaves nothing behind.
  {
    REQUIRE(session->Begin().ok());
    std::string other = MakeDocument(data.id(7), "fresh-key", "v");
    CHECK(session->Insert(DocRef{data.id(7), "fresh-key", other}).IsAlreadyExists());
    std::string dup_key = MakeDocument("fresh-id", data.key(8), "v");
    CHECK(session->Insert(DocRef{"fresh-id", data.key(8), dup_key}).IsAlreadyExists());
    REQUIRE(session->Commit().ok());
    std::string v;
    CHECK(session->GetById("fresh-id", &v).IsNotFound());
    CHECK(session->FindByKey("fresh-key", &v).IsNotFound());
  }

  std::string value;
  for (uint64_t i = 0; i < n; ++i) {
    REQUIRE(session->GetById(data.id(i), &value).ok());
    REQUIRE(value == data.value(i));
    REQUIRE(session->FindByKey(data.key(i), &value).ok());
    REQUIRE(value == data.value(i));
  }
  CHECK(session->GetById("no-such-id", &value).IsNotFound());
  CHECK(session->FindByKey("no-such-key", &value).IsNotFound());
  CHECK(session->GetById(data.key(3), &value).IsNotFound());  // a key is not an _id

  bool found = false;
  REQUIRE(session->ScanByValue(data.value(n - 1), &found, nullptr).ok());
  CHECK(found);
  REQUIRE(session->ScanByValue(data.value(0), &found, nullptr).ok());
  CHECK(found);
  REQUIRE(session->ScanByValue(data.key(0), &found, nullptr).ok());  // key, not value
  CHECK_FALSE(found);

  // Update: the new value is seen by _id, by key and by the scan; the old
  // one is gone.
  REQUIRE(session->Begin().ok());
  REQUIRE(session->UpdateValue(data.id(3), data.new_value(0)).ok());
  CHECK(session->UpdateValue("no-such-id", data.new_value(1)).IsNotFound());
  REQUIRE(session->Commit().ok());
  REQUIRE(session->GetById(data.id(3), &value).ok());
  CHECK(value == data.new_value(0));
  REQUIRE(session->FindByKey(data.key(3), &value).ok());
  CHECK(value == data.new_value(0));
  REQUIRE(session->ScanByValue(data.new_value(0), &found, nullptr).ok());
  CHECK(found);
  REQUIRE(session->ScanByValue(data.value(3), &found, nullptr).ok());
  CHECK_FALSE(found);

  // Delete: gone by _id, by key and from the scan; neighbours stay.
  REQUIRE(session->Begin().ok());
  REQUIRE(session->Delete(data.id(5)).ok());
  REQUIRE(session->Commit().ok());
  CHECK(session->GetById(data.id(5), &value).IsNotFound());
  CHECK(session->FindByKey(data.key(5), &value).IsNotFound());
  REQUIRE(session->ScanByValue(data.value(5), &found, nullptr).ok());
  CHECK_FALSE(found);
  REQUIRE(session->Begin().ok());
  CHECK(session->Delete(data.id(5)).IsNotFound());
  REQUIRE(session->Commit().ok());
  REQUIRE(session->GetById(data.id(4), &value).ok());
  CHECK(value == data.value(4));
  REQUIRE(session->FindByKey(data.key(6), &value).ok());
  CHECK(value == data.value(6));

  // The key of a deleted document can be used again.
  {
    std::string doc = MakeDocument("reborn", data.key(5), "reborn-value");
    REQUIRE(session->Begin().ok());
    Status s = session->Insert(DocRef{"reborn", data.key(5), doc});
    INFO(s.ToString());
    CHECK(s.ok());
    REQUIRE(session->Commit().ok());
    REQUIRE(session->FindByKey(data.key(5), &value).ok());
    CHECK(value == "reborn-value");
  }

  // Sessions on other threads read the same store at once.
  std::vector<std::unique_ptr<Session>> readers;
  for (int t = 0; t < 3; ++t) readers.push_back(NewSessionOf(backend.get()));
  std::vector<int> wrong(readers.size(), 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < readers.size(); ++t) {
    threads.emplace_back([&, t] {
      std::string v;
      for (uint64_t i = 10; i < n; ++i) {
        if (!readers[t]->GetById(data.id(i), &v).ok() || v != data.value(i)) ++wrong[t];
        if (!readers[t]->FindByKey(data.key(i), &v).ok() || v != data.value(i)) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int w : wrong) CHECK(w == 0);
  readers.clear();
  session.reset();
  CHECK(backend->Close().ok());
}

// Begin, op, Commit; the op's status (Commit must succeed).
template <typename Op>
Status InTxn(Session* session, Op op) {
  REQUIRE(session->Begin().ok());
  Status s = op();
  Status c = session->Commit();
  INFO(c.ToString());
  REQUIRE(c.ok());
  return s;
}

void CheckCount(Session* session, uint64_t docs, uint64_t key_entries) {
  uint64_t d = 0, k = 0;
  Status s = session->Count(&d, &k);
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(d == docs);
  CHECK(k == key_entries);
}

// Seed 002's operations (insert_noindex, build_index, delete_value,
// delete_all) on one engine.
void CheckSeed002(const std::string& engine, Durability durability) {
  const uint64_t n = 300;
  Dataset data = Dataset::Generate(n, 12);
  std::string value;

  // Inserted without the key index: found by _id, a duplicate _id is still
  // refused, and the index is empty.
  {
    test::TempDir dir;
    auto backend = OpenBackend(engine, dir.path(), durability, n, false);
    INFO(engine << " without key index: " << backend->settings());
    auto session = NewSessionOf(backend.get());
    InsertAll(session.get(), data, 0, n, 64);
    for (uint64_t i = 0; i < n; ++i) {
      REQUIRE(session->GetById(data.id(i), &value).ok());
      REQUIRE(value == data.value(i));
    }
    std::string dup = MakeDocument(data.id(9), "other-key", "v");
    CHECK(InTxn(session.get(), [&] {
            return session->Insert(DocRef{data.id(9), "other-key", dup});
          }).IsAlreadyExists());
    CheckCount(session.get(), n, 0);

    // delete_value without the index, then the index over what is left.
    uint64_t deleted = 0;
    REQUIRE(
        InTxn(session.get(), [&] { return session->DeleteByValue(data.value(0), &deleted); }).ok());
    CHECK(deleted == 1);
    Status s = InTxn(session.get(), [&] { return session->BuildKeyIndex(); });
    INFO(s.ToString());
    REQUIRE(s.ok());
    CheckCount(session.get(), n - 1, n - 1);
    for (uint64_t i = 1; i < n; ++i) {
      REQUIRE(session->FindByKey(data.key(i), &value).ok());
      REQUIRE(value == data.value(i));
    }
    CHECK(session->FindByKey(data.key(0), &value).IsNotFound());
    // The built index is kept by later writes and enforces uniqueness.
    std::string taken = MakeDocument("new-id", data.key(1), "v");
    CHECK(InTxn(session.get(), [&] {
            return session->Insert(DocRef{"new-id", data.key(1), taken});
          }).IsAlreadyExists());
    std::string fresh = MakeDocument("new-id", "new-key", "new-value");
    REQUIRE(InTxn(session.get(), [&] {
              return session->Insert(DocRef{"new-id", "new-key", fresh});
            }).ok());
    REQUIRE(session->FindByKey("new-key", &value).ok());
    CHECK(value == "new-value");
    REQUIRE(InTxn(session.get(), [&] { return session->Delete(data.id(2)); }).ok());
    CHECK(session->FindByKey(data.key(2), &value).IsNotFound());
    CheckCount(session.get(), n - 1, n - 1);
    session.reset();
    CHECK(backend->Close().ok());
  }

  // A unique index cannot be built over a duplicate key, and nothing of it
  // is left behind.
  {
    test::TempDir dir;
    auto backend = OpenBackend(engine, dir.path(), durability, n, false);
    auto session = NewSessionOf(backend.get());
    InsertAll(session.get(), data, 0, 20, 64);
    std::string twin = MakeDocument("twin-id", data.key(3), "twin-value");
    REQUIRE(InTxn(session.get(), [&] {
              return session->Insert(DocRef{"twin-id", data.key(3), twin});
            }).ok());
    Status s = InTxn(session.get(), [&] { return session->BuildKeyIndex(); });
    INFO(s.ToString());
    CHECK(s.IsAlreadyExists());
    CheckCount(session.get(), 21, 0);
    session.reset();
    CHECK(backend->Close().ok());
  }

  // delete_value and delete_all with the index.
  test::TempDir dir;
  auto backend = OpenBackend(engine, dir.path(), durability, n);
  INFO(engine << ": " << backend->settings());
  auto session = NewSessionOf(backend.get());
  InsertAll(session.get(), data, 0, n, 64);
  // Two documents share a value, next to each other in _id order: both go
  // (a cursor that deletes must not skip the one after).
  std::string a = MakeDocument("shared-a", "shared-key-a", "shared-value");
  std::string b = MakeDocument("shared-b", "shared-key-b", "shared-value");
  REQUIRE(InTxn(session.get(), [&] {
            Status s = session->Insert(DocRef{"shared-a", "shared-key-a", a});
            return s.ok() ? session->Insert(DocRef{"shared-b", "shared-key-b", b}) : s;
          }).ok());
  uint64_t deleted = 0;
  REQUIRE(
      InTxn(session.get(), [&] { return session->DeleteByValue("shared-value", &deleted); }).ok());
  CHECK(deleted == 2);
  CHECK(session->GetById("shared-a", &value).IsNotFound());
  CHECK(session->GetById("shared-b", &value).IsNotFound());
  CHECK(session->FindByKey("shared-key-b", &value).IsNotFound());

  REQUIRE(
      InTxn(session.get(), [&] { return session->DeleteByValue(data.value(5), &deleted); }).ok());
  CHECK(deleted == 1);
  CHECK(session->GetById(data.id(5), &value).IsNotFound());
  CHECK(session->FindByKey(data.key(5), &value).IsNotFound());
  bool found = true;
  REQUIRE(session->ScanByValue(data.value(5), &found, nullptr).ok());
  CHECK_FALSE(found);
  for (uint64_t i : {uint64_t{4}, uint64_t{6}}) {
    REQUIRE(session->GetById(data.id(i), &value).ok());
    CHECK(value == data.value(i));
    REQUIRE(session->FindByKey(data.key(i), &value).ok());
    CHECK(value == data.value(i));
  }
  // A value nobody has, and a key (not a value): nothing deleted.
  REQUIRE(
      InTxn(session.get(), [&] { return session->DeleteByValue("no-such-value", &deleted); }).ok());
  CHECK(deleted == 0);
  REQUIRE(InTxn(session.get(), [&] { return session->DeleteByValue(data.key(7), &deleted); }).ok());
  CHECK(deleted == 0);
  CheckCount(session.get(), n - 1, n - 1);

  // delete_all: nothing left by count, _id, key or scan; the store and its
  // index still work.
  REQUIRE(InTxn(session.get(), [&] { return session->DeleteAll(); }).ok());
  CheckCount(session.get(), 0, 0);
  for (uint64_t i = 0; i < n; i += 37) {
    CHECK(session->GetById(data.id(i), &value).IsNotFound());
    CHECK(session->FindByKey(data.key(i), &value).IsNotFound());
  }
  REQUIRE(session->ScanByValue(data.value(8), &found, nullptr).ok());
  CHECK_FALSE(found);
  REQUIRE(InTxn(session.get(), [&] { return session->DeleteAll(); }).ok());
  InsertAll(session.get(), data, 0, 10, 4);
  REQUIRE(session->FindByKey(data.key(3), &value).ok());
  CHECK(value == data.value(3));
  std::string again = MakeDocument("again", data.key(3), "v");
  CHECK(InTxn(session.get(), [&] {
          return session->Insert(DocRef{"again", data.key(3), again});
        }).IsAlreadyExists());
  CheckCount(session.get(), 10, 10);
  session.reset();
  CHECK(backend->Close().ok());
}

// Key ranges (search_prefix, sort_limit) and push on one engine: the same
// documents in the same order as the dataset sorted by key, and the same
// `tags` arrays, whatever the engine.
void CheckKeyRangesAndPush(const std::string& engine) {
  const uint64_t n = 300;
  Dataset data = Dataset::Generate(n, 13);
  test::TempDir dir;
  auto backend = OpenBackend(engine, dir.path(), Durability::kNone, n);
  INFO(engine << ": " << backend->settings());
  auto session = NewSessionOf(backend.get());
  InsertAll(session.get(), data, 0, n, 64);
  std::vector<uint64_t> by_key(n);
  for (uint64_t i = 0; i < n; ++i) by_key[i] = i;
  std::sort(by_key.begin(), by_key.end(),
            [&](uint64_t a, uint64_t b) { return data.key(a) < data.key(b); });
  // The values of the documents whose key is in [from, end) ("" = no
  // end), at most limit (0 = all), in key order.
  auto expect = [&](std::string_view from, std::string_view end, size_t limit) {
    std::vector<std::string> out;
    for (uint64_t i : by_key) {
      if (data.key(i) < from || (!end.empty() && data.key(i) >= end)) continue;
      if (limit != 0 && out.size() == limit) break;
      out.emplace_back(data.value(i));
    }
    return out;
  };

  std::vector<std::string> values;
  // 1 hex digit matches ~n/16 documents, 3 digits (the phase's) a few, one
  // that no key has none; a dash is a character like any other.
  for (std::string prefix :
       {std::string(data.key(0).substr(0, 1)), std::string(data.key(0).substr(0, 3)),
        std::string(data.key(5).substr(0, 9)), std::string("zzz"), std::string(data.key(7))}) {
    INFO("prefix " << prefix);
    Status s = session->FindKeyPrefix(prefix, &values);
    INFO(s.ToString());
    REQUIRE(s.ok());
    CHECK(values == expect(prefix, PrefixEnd(prefix), 0));
  }
  REQUIRE(session->FindKeyPrefix(data.key(0).substr(0, 1), &values).ok());
  CHECK(values.size() > 5);
  REQUIRE(session->FindKeyPrefix("zzz", &values).ok());
  CHECK(values.empty());

  // Pages of 10 from a key, from between keys, from before the first and
  // near the end (a short page), and past the last (empty).
  const std::string last(data.key(by_key[n - 1]));
  for (std::string from : {std::string(data.key(9)), std::string(data.key(9)) + "!",
                           std::string(""), std::string(data.key(by_key[n - 4])), last + "~"}) {
    INFO("from " << from);
    Status s = session->FindKeysFrom(from, 10, &values);
    INFO(s.ToString());
    REQUIRE(s.ok());
    CHECK(values == expect(from, "", 10));
  }
  REQUIRE(session->FindKeysFrom(data.key(by_key[n - 4]), 10, &values).ok());
  CHECK(values.size() == 4);

  // push: the array is created, then appended to in a later transaction;
  // other documents and the key index are untouched; a missing _id is
  // NotFound.
  std::string doc;
  std::vector<std::string> tags;
  REQUIRE(InTxn(session.get(), [&] {
            Status s = session->PushTag(data.id(3), "t0");
            return s.ok() ? session->PushTag(data.id(4), "t1") : s;
          }).ok());
  REQUIRE(InTxn(session.get(), [&] { return session->PushTag(data.id(3), "t2"); }).ok());
  CHECK(InTxn(session.get(), [&] { return session->PushTag("no-such-id", "t3"); }).IsNotFound());
  REQUIRE(session->GetDocument(data.id(3), &doc).ok());
  REQUIRE(TagsOf(doc, &tags));
  CHECK(tags == std::vector<std::string>{"t0", "t2"});
  REQUIRE(session->GetDocument(data.id(4), &doc).ok());
  REQUIRE(TagsOf(doc, &tags));
  CHECK(tags == std::vector<std::string>{"t1"});
  REQUIRE(session->GetDocument(data.id(5), &doc).ok());
  CHECK(doc == data.bson(5));
  CHECK(session->GetDocument("no-such-id", &doc).IsNotFound());
  std::string value;
  REQUIRE(session->FindByKey(data.key(3), &value).ok());
  CHECK(value == data.value(3));
  REQUIRE(session->FindKeyPrefix(data.key(3), &values).ok());
  CHECK(values == std::vector<std::string>{std::string(data.value(3))});
  CheckCount(session.get(), n, n);

  // mmdoc says how it ran them: both through the key index, the page
  // walked in key order rather than sorted in memory.
  std::string plans;
  Status s = session->ExplainKeyQueries(data.key(0).substr(0, 3), data.key(9), &plans);
  if (engine == "mmdoc") {
    INFO(s.ToString() << "\n" << plans);
    REQUIRE(s.ok());
    CHECK(plans.find("search_prefix: {\"plan\": \"IXSCAN\", \"index\": \"key\"") !=
          std::string::npos);
    CHECK(plans.find("sort_limit: {\"plan\": \"IXSCAN\", \"index\": \"key\"") != std::string::npos);
    CHECK(plans.find("\"sortedInMemory\": true") == std::string::npos);
  } else {
    CHECK(s.IsNotSupported());
  }
  session.reset();
  CHECK(backend->Close().ok());
}

// The compound phase's query on one engine: the documents of one group with
// n in [lo, hi), in n order (negative n first), at most the limit, as the
// bytes that went in, whatever the engine.
void CheckCompound(const std::string& engine) {
  test::TempDir dir;
  auto b = NewBackend(engine);
  REQUIRE(b.ok());
  std::unique_ptr<Backend> backend = std::move(b.value());
  BackendConfig config;
  config.key_index = false;
  config.group_index = true;
  config.expected_docs = 1000;
  config.expected_bytes = 1000 * 200;
  config.max_sessions = 2;
  Status s = backend->Open(dir.path(), config);
  INFO(engine << ": " << s.ToString());
  REQUIRE(s.ok());
  INFO(backend->settings());
  auto session = NewSessionOf(backend.get());
  // 300 documents in 3 groups; n distinct in [-200, 200] (401 is prime),
  // the extremes of int32 too.
  struct Doc {
    std::string id;
    int32_t g, n;
    std::string bson;
  };
  std::vector<Doc> docs;
  for (int i = 0; i < 300; ++i) {
    Doc d{"id" + std::to_string(i), i % 3, (i * 7919) % 401 - 200, ""};
    if (i == 10) d.n = INT32_MIN;
    if (i == 13) d.n = INT32_MAX;
    d.bson = MakeGroupDocument(d.id, d.g, d.n, "payload" + std::to_string(i));
    docs.push_back(std::move(d));
  }
  for (size_t i = 0; i < docs.size(); i += 128) {
    REQUIRE(session->Begin().ok());
    for (size_t j = i; j < std::min(docs.size(), i + 128); ++j) {
      s = session->InsertGrouped(GroupDocRef{docs[j].id, docs[j].g, docs[j].n, docs[j].bson});
      INFO(s.ToString());
      REQUIRE(s.ok());
    }
    REQUIRE(session->Commit().ok());
  }
  auto expect = [&](int32_t g, int32_t lo, int32_t hi, size_t limit) {
    std::vector<const Doc*> match;
    for (const Doc& d : docs) {
      if (d.g == g && d.n >= lo && d.n < hi) match.push_back(&d);
    }
    std::sort(match.begin(), match.end(), [](const Doc* a, const Doc* b) { return a->n < b->n; });
    std::vector<std::string> out;
    for (size_t i = 0; i < match.size() && i < limit; ++i) out.push_back(match[i]->bson);
    return out;
  };
  struct Query {
    int32_t g, lo, hi;
    int limit;
  } queries[] = {
      {0, -50, 50, 10},               // a range the limit cuts
      {1, -50, 50, 1000},             // the whole range
      {1, INT32_MIN, INT32_MAX, 10},  // the group's first, INT32_MIN among them
      {1, 0, INT32_MAX, 1000},        // INT32_MAX itself is excluded
      {2, -200, 201, 1000},           // the whole group
      {0, 7, 8, 10},                  // one n or none
      {0, 5, 5, 10},                  // empty range
      {3, INT32_MIN, INT32_MAX, 10},  // no such group
  };
  // lo and hi exactly at stored n: lo included, hi excluded.
  std::vector<Query> all(std::begin(queries), std::end(queries));
  all.push_back({docs[30].g, docs[30].n, docs[60].n, 1000});
  all.push_back({docs[60].g, docs[60].n, docs[30].n, 1000});
  std::vector<std::string> got;
  for (const Query& q : all) {
    INFO("g " << q.g << " n in [" << q.lo << ", " << q.hi << ") limit " << q.limit);
    s = session->FindGroupRange(q.g, q.lo, q.hi, q.limit, &got);
    INFO(s.ToString());
    REQUIRE(s.ok());
    CHECK(got == expect(q.g, q.lo, q.hi, static_cast<size_t>(q.limit)));
  }
  REQUIRE(session->FindGroupRange(0, -50, 50, 10, &got).ok());
  CHECK(got.size() == 10);
  REQUIRE(session->FindGroupRange(1, INT32_MIN, INT32_MAX, 10, &got).ok());
  REQUIRE(!got.empty());
  CHECK(got[0] == docs[10].bson);

  // How the engines with a plan to show run it: through the (g, n) index
  // in n order, no sort step.
  std::string plan;
  s = session->ExplainGroupRange(1, -50, 50, 10, &plan);
  INFO(s.ToString() << "\n" << plan);
  if (engine == "mmdoc") {
    REQUIRE(s.ok());
    CHECK(plan.find("{\"plan\": \"IXSCAN\", \"index\": \"g_1_n_1\"") != std::string::npos);
    CHECK(plan.find("\"sortedInMemory\": false") != std::string::npos);
  } else if (engine.rfind("sqlite", 0) == 0) {
    REQUIRE(s.ok());
    CHECK(plan.find("USING INDEX grouped_g_n (g=? AND n>? AND n<?)") != std::string::npos);
    CHECK(plan.find("TEMP B-TREE") == std::string::npos);
  } else if (engine == "postgres") {
    REQUIRE(s.ok());
    CHECK(plan.find("Index Scan using grouped_g_n") != std::string::npos);
    CHECK(plan.find("Sort") == std::string::npos);
  } else {
    CHECK(s.IsNotSupported());
  }
  session.reset();
  CHECK(backend->Close().ok());
}

bool Built(const std::string& engine) {
  auto b = NewBackend(engine);
  if (b.status().IsNotSupported()) {
    WARN(engine << " not built into mmdoc_bench_lib: " << b.status().ToString());
    return false;
  }
  return true;
}

TEST_CASE("bench adapters return the right documents", "[bench]") {
  for (const char* engine :
       {"mmdoc", "lmdb", "lmdb-nowritemap", "lmdb-nordahead", "rocksdb", "sqlite", "sqlite-norowid",
        "postgres", "postgres-tcp", "mmdoc-remote"}) {
    DYNAMIC_SECTION(engine) {
      if (Built(engine)) CheckEngine(engine, Durability::kNone);
    }
  }
}

TEST_CASE("bench adapters find key prefixes and pages by key, and push to arrays", "[bench]") {
  for (const char* engine :
       {"mmdoc", "lmdb", "rocksdb", "sqlite", "sqlite-norowid", "postgres", "mmdoc-remote"}) {
    DYNAMIC_SECTION(engine) {
      if (Built(engine)) CheckKeyRangesAndPush(engine);
    }
  }
}

TEST_CASE("bench adapters answer the compound index query", "[bench]") {
  for (const char* engine :
       {"mmdoc", "lmdb", "rocksdb", "sqlite", "sqlite-norowid", "postgres", "mmdoc-remote"}) {
    DYNAMIC_SECTION(engine) {
      if (Built(engine)) CheckCompound(engine);
    }
  }
}

TEST_CASE("bench adapters work in their durable modes", "[bench]") {
  for (const char* engine : {"mmdoc", "lmdb", "rocksdb", "sqlite", "postgres", "mmdoc-remote"}) {
    if (!Built(engine)) continue;
    for (Durability d :
         {Durability::kPeriodic, Durability::kMsync, Durability::kFsync, Durability::kGroup}) {
      DYNAMIC_SECTION(engine << " " << DurabilityName(d)) {
        auto b = NewBackend(engine);
        if (b.value()->Supports(d)) CheckEngine(engine, d);
      }
    }
  }
}

TEST_CASE("bench adapters build the key index and delete by value and all", "[bench]") {
  for (const char* engine : {"mmdoc", "lmdb", "lmdb-nowritemap", "lmdb-nordahead", "rocksdb",
                             "sqlite", "sqlite-norowid", "postgres", "mmdoc-remote"}) {
    if (!Built(engine)) continue;
    for (Durability d : {Durability::kNone, Durability::kPeriodic, Durability::kMsync,
                         Durability::kFsync, Durability::kGroup}) {
      if (!NewBackend(engine).value()->Supports(d)) continue;
      DYNAMIC_SECTION(engine << " " << DurabilityName(d)) { CheckSeed002(engine, d); }
    }
  }
}

TEST_CASE("bench mmdoc adapter maps items through both APIs", "[bench]") {
  if (!Built("mmdoc")) return;
  test::TempDir dir;
  auto backend = OpenBackend("mmdoc", dir.path(), Durability::kNone, 100);
  REQUIRE(backend->HasMapping());
  auto session = NewSessionOf(backend.get());
  REQUIRE(session->ResetMapping().ok());
  Dataset data = Dataset::Generate(50, 5);
  // The same items through each API (each into its own collection).
  for (MappingApi api : {MappingApi::kRaw, MappingApi::kTyped}) {
    REQUIRE(session->Begin().ok());
    for (uint64_t i = 0; i < 50; ++i) {
      MappedItem item{std::string(data.id(i)), std::string(data.key(i)),
                      std::string(data.value(i))};
      REQUIRE(session->MappedInsert(api, item).ok());
    }
    REQUIRE(session->Commit().ok());
  }
  for (MappingApi api : {MappingApi::kRaw, MappingApi::kTyped}) {
    INFO((api == MappingApi::kRaw ? "raw" : "typed"));
    MappedItem out;
    for (uint64_t i = 0; i < 50; ++i) {
      REQUIRE(session->MappedGet(api, data.id(i), &out).ok());
      CHECK(out.id == data.id(i));
      CHECK(out.key == data.key(i));
      CHECK(out.value == data.value(i));
    }
    CHECK(session->MappedGet(api, "no-such-id", &out).IsNotFound());
    // A duplicate _id is refused through either API.
    MappedItem dup{std::string(data.id(0)), "k", "v"};
    REQUIRE(session->Begin().ok());
    CHECK(session->MappedInsert(api, dup).IsAlreadyExists());
    REQUIRE(session->Commit().ok());
  }
  // Reset empties both collections.
  REQUIRE(session->ResetMapping().ok());
  MappedItem out;
  CHECK(session->MappedGet(MappingApi::kRaw, data.id(0), &out).IsNotFound());
  CHECK(session->MappedGet(MappingApi::kTyped, data.id(0), &out).IsNotFound());
  // The workload's own collection is untouched by all this.
  CheckCount(session.get(), 0, 0);
  session.reset();
  CHECK(backend->Close().ok());
}

// mmdoc-remote-w0's writes come back with no status (w:0), so the contract
// above cannot hold for it; what must: after Commit every write of the batch
// is applied and seen by any session, and the reads are the same.
TEST_CASE("bench remote adapter with w:0 writes applies every batch by Commit", "[bench]") {
  if (!Built("mmdoc-remote-w0")) return;
  test::TempDir dir;
  const uint64_t n = 400;
  Dataset data = Dataset::Generate(n, 13);
  auto backend = OpenBackend("mmdoc-remote-w0", dir.path(), Durability::kNone, n);
  INFO(backend->settings());
  CHECK(backend->settings().find("w:0") != std::string::npos);
  auto writer = NewSessionOf(backend.get());
  auto reader = NewSessionOf(backend.get());
  InsertAll(writer.get(), data, 0, n, 100);
  CheckCount(reader.get(), n, n);
  std::string value;
  REQUIRE(reader->FindByKey(data.key(n - 1), &value).ok());
  CHECK(value == data.value(n - 1));
  REQUIRE(InTxn(writer.get(), [&] {
            Status s = writer->UpdateValue(data.id(1), data.new_value(1));
            if (s.ok()) s = writer->Delete(data.id(2));
            return s.ok() ? writer->PushTag(data.id(3), "t") : s;
          }).ok());
  REQUIRE(reader->GetById(data.id(1), &value).ok());
  CHECK(value == data.new_value(1));
  CHECK(reader->GetById(data.id(2), &value).IsNotFound());
  std::string doc;
  std::vector<std::string> tags;
  REQUIRE(reader->GetDocument(data.id(3), &doc).ok());
  REQUIRE(TagsOf(doc, &tags));
  CHECK(tags == std::vector<std::string>{"t"});
  // A w:0 duplicate goes unnoticed by the writer and changes nothing.
  REQUIRE(InTxn(writer.get(), [&] {
            return writer->Insert(DocRef{data.id(4), data.key(4), data.bson(5)});
          }).ok());
  CheckCount(reader.get(), n - 1, n - 1);
  writer.reset();
  reader.reset();
  CHECK(backend->Close().ok());
}

TEST_CASE("bench peers have no typed mapping layer", "[bench]") {
  for (const char* engine : {"lmdb", "rocksdb", "sqlite", "postgres", "mmdoc-remote"}) {
    if (!Built(engine)) continue;
    INFO(engine);
    test::TempDir dir;
    auto backend = OpenBackend(engine, dir.path(), Durability::kNone, 10);
    CHECK_FALSE(backend->HasMapping());
    auto session = NewSessionOf(backend.get());
    CHECK(session->ResetMapping().IsNotSupported());
    session.reset();
    CHECK(backend->Close().ok());
  }
}

TEST_CASE("bench backends report the modes DESIGN.md maps", "[bench]") {
  auto supports = [](const char* engine, Durability d) {
    return NewBackend(engine).value()->Supports(d);
  };
  CHECK(supports("lmdb", Durability::kNone));
  CHECK(supports("lmdb", Durability::kMsync));
  CHECK(supports("lmdb", Durability::kFsync));
  CHECK_FALSE(supports("lmdb", Durability::kPeriodic));
  CHECK_FALSE(supports("lmdb", Durability::kGroup));
  CHECK(supports("rocksdb", Durability::kGroup));
  CHECK_FALSE(supports("rocksdb", Durability::kMsync));
  CHECK_FALSE(supports("rocksdb", Durability::kPeriodic));
  CHECK(supports("sqlite", Durability::kFsync));
  CHECK_FALSE(supports("sqlite", Durability::kGroup));
  if (Built("postgres")) {
    // synchronous_commit off / on; group = on with concurrent writers.
    CHECK(supports("postgres", Durability::kNone));
    CHECK(supports("postgres", Durability::kFsync));
    CHECK(supports("postgres", Durability::kGroup));
    CHECK_FALSE(supports("postgres", Durability::kPeriodic));
    CHECK_FALSE(supports("postgres", Durability::kMsync));
  }
  CHECK(NewBackend("no-such-engine").status().IsInvalidArgument());
}

TEST_CASE("bench dataset is the same for the same seed", "[bench]") {
  Dataset a = Dataset::Generate(50, 3), b = Dataset::Generate(50, 3), c = Dataset::Generate(50, 4);
  for (uint64_t i = 0; i < 50; ++i) {
    CHECK(a.id(i) == b.id(i));
    CHECK(a.bson(i) == b.bson(i));
    CHECK(a.id(i).size() == kGuidLength);
    CHECK(a.id(i)[8] == '-');
    std::string_view v;
    REQUIRE(FieldOf(a.bson(i).data(), a.bson(i).size(), "value", &v));
    CHECK(v == a.value(i));
  }
  CHECK(a.id(0) != c.id(0));
  CHECK(a.id(0) != a.key(0));
}

TEST_CASE("bench BSON helpers set and read fields", "[bench]") {
  std::string doc = MakeDocument("i", "k", "v");
  std::string out;
  REQUIRE(WithValue(doc, "new", &out));
  std::string_view f;
  REQUIRE(FieldOf(out.data(), out.size(), "value", &f));
  CHECK(f == "new");
  REQUIRE(FieldOf(out.data(), out.size(), "key", &f));
  CHECK(f == "k");
  CHECK(out == MakeDocument("i", "k", "new"));
  CHECK_FALSE(FieldOf(doc.data(), 3, "value", &f));
}

TEST_CASE("bench BSON helper pushes to a tags array", "[bench]") {
  std::string doc = MakeDocument("i", "k", "v"), once, twice;
  std::vector<std::string> tags;
  REQUIRE(TagsOf(doc, &tags));
  CHECK(tags.empty());
  REQUIRE(WithTagPushed(doc, "a", &once));
  REQUIRE(WithTagPushed(once, "b", &twice));
  REQUIRE(TagsOf(twice, &tags));
  CHECK(tags == std::vector<std::string>{"a", "b"});
  // The other fields are kept, in order; the array comes last.
  std::string_view f;
  REQUIRE(FieldOf(twice.data(), twice.size(), "value", &f));
  CHECK(f == "v");
  CHECK(twice.compare(4, doc.size() - 5, doc, 4, doc.size() - 5) == 0);
  CHECK(PrefixEnd("abc") == "abd");
  CHECK(PrefixEnd("ab\xff") == "ac");
  CHECK(PrefixEnd("\xff") == "");
  CHECK_FALSE(WithTagPushed(std::string_view(doc.data(), 3), "a", &once));
}

TEST_CASE("bench latency histogram quantiles", "[bench]") {
  Histogram h;
  for (uint64_t i = 1; i <= 1000; ++i) h.Add(i * 1000);  // 1..1000 us
  CHECK(h.count() == 1000);
  CHECK(h.QuantileUs(0.5) == Approx(500).epsilon(0.04));
  CHECK(h.QuantileUs(0.99) == Approx(990).epsilon(0.04));
  Histogram empty;
  CHECK(empty.QuantileUs(0.5) == 0);
}

}  // namespace
}  // namespace mmdoc::bench
