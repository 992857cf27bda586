// Every mmdoc-bench adapter returns the right documents for the same calls,
// so no engine is measured doing less work than another.
#include "bench/backend.h"

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/bson_doc.h"
#include "bench/workload.h"
#include "tests/support/test_env.h"

namespace mmdoc::bench {
namespace {

std::unique_ptr<Backend> OpenBackend(const std::string& engine,
                                     const std::string& dir,
                                     Durability durability, uint64_t docs) {
  auto b = NewBackend(engine);
  REQUIRE(b.ok());
  BackendConfig config;
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

void InsertAll(Session* session, const Dataset& data, uint64_t begin,
               uint64_t end, int batch) {
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
    CHECK(session->Insert(DocRef{data.id(7), "fresh-key", other})
              .IsAlreadyExists());
    std::string dup_key = MakeDocument("fresh-id", data.key(8), "v");
    CHECK(session->Insert(DocRef{"fresh-id", data.key(8), dup_key})
              .IsAlreadyExists());
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
  CHECK(session->GetById(data.key(3), &value)
            .IsNotFound());  // a key is not an _id

  bool found = false;
  REQUIRE(session->ScanByValue(data.value(n - 1), &found, nullptr).ok());
  CHECK(found);
  REQUIRE(session->ScanByValue(data.value(0), &found, nullptr).ok());
  CHECK(found);
  REQUIRE(session->ScanByValue(data.key(0), &found, nullptr)
              .ok());  // key, not value
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
        if (!readers[t]->GetById(data.id(i), &v).ok() || v != data.value(i))
          ++wrong[t];
        if (!readers[t]->FindByKey(data.key(i), &v).ok() || v != data.value(i))
          ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int w : wrong) CHECK(w == 0);
  readers.clear();
  session.reset();
  CHECK(backend->Close().ok());
}

bool Built(const std::string& engine) {
  auto b = NewBackend(engine);
  if (b.status().IsNotSupported()) {
    WARN(engine << " not built into mmdoc_bench_lib: "
                << b.status().ToString());
    return false;
  }
  return true;
}

TEST_CASE("bench adapters return the right documents", "[bench]") {
  for (const char* engine : {"mmdoc", "lmdb", "lmdb-nowritemap", "rocksdb",
                             "sqlite", "sqlite-norowid"}) {
    DYNAMIC_SECTION(engine) {
      if (Built(engine)) CheckEngine(engine, Durability::kNone);
    }
  }
}

TEST_CASE("bench adapters work in their durable modes", "[bench]") {
  for (const char* engine : {"mmdoc", "lmdb", "rocksdb", "sqlite"}) {
    if (!Built(engine)) continue;
    for (Durability d : {Durability::kPeriodic, Durability::kMsync,
                         Durability::kFsync, Durability::kGroup}) {
      DYNAMIC_SECTION(engine << " " << DurabilityName(d)) {
        auto b = NewBackend(engine);
        if (b.value()->Supports(d)) CheckEngine(engine, d);
      }
    }
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
  CHECK(NewBackend("no-such-engine").status().IsInvalidArgument());
}

TEST_CASE("bench dataset is the same for the same seed", "[bench]") {
  Dataset a = Dataset::Generate(50, 3), b = Dataset::Generate(50, 3),
          c = Dataset::Generate(50, 4);
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
