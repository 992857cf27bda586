// index::Catalog over the in-memory MemTxn.
#include "index/catalog.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/index/mem_txn.h"

namespace mmdoc::index {
namespace {

using test::MemStore;

void CheckAll(Catalog* cat, MemStore* store) {
  std::vector<storage::PageId> pages;
  Status s = cat->Verify(&pages);
  INFO(s.ToString());
  REQUIRE(s.ok());
  std::sort(pages.begin(), pages.end());
  (void)store;
  REQUIRE(std::adjacent_find(pages.begin(), pages.end()) == pages.end());
}

TEST_CASE("catalog create, open, meta, list, drop", "[catalog]") {
  MemStore store;
  {
    auto w = store.BeginWrite();
    Catalog cat(w.get());
    REQUIRE(cat.Create("users", "meta-u").ok());
    REQUIRE(cat.Create("users.email", "meta-e").ok());
    REQUIRE(cat.Create("orders", "").ok());
    CHECK(cat.Create("users", "again").IsAlreadyExists());
    BTree* t;
    REQUIRE(cat.Open("users", &t).ok());
    BTree* t2;
    REQUIRE(cat.Open("users", &t2).ok());
    CHECK(t == t2);
    for (int i = 0; i < 2000; i++) REQUIRE(t->Put("u" + std::to_string(i), "doc").ok());
    CHECK(cat.Open("nope", &t2).IsNotFound());
    REQUIRE(cat.Flush().ok());
    CheckAll(&cat, &store);
    REQUIRE(w->Commit("", Durability::kNone).ok());
  }
  {
    auto w = store.BeginWrite();
    Catalog cat(w.get());
    std::vector<std::string> names;
    REQUIRE(cat.List("", &names).ok());
    CHECK(names == std::vector<std::string>{"orders", "users", "users.email"});
    REQUIRE(cat.List("users", &names).ok());
    CHECK(names == std::vector<std::string>{"users", "users.email"});
    REQUIRE(cat.List("x", &names).ok());
    CHECK(names.empty());
    std::string meta;
    REQUIRE(cat.GetMeta("users", &meta).ok());
    CHECK(meta == "meta-u");
    REQUIRE(cat.SetMeta("users", "meta-u2").ok());
    REQUIRE(cat.GetMeta("users", &meta).ok());  // before Flush writes it
    CHECK(meta == "meta-u2");
    // A tree never opened in this txn: Flush writes its metadata alone.
    REQUIRE(cat.SetMeta("orders", "meta-o2").ok());
    CHECK(cat.SetMeta("nope", "x").IsNotFound());
    CHECK(cat.GetMeta("nope", &meta).IsNotFound());
    BTree* t;
    REQUIRE(cat.Open("users", &t).ok());
    std::string_view v;
    REQUIRE(t->Get("u1999", &v).ok());
    CHECK(v == "doc");
    // Changes through an open tree survive SetMeta before Flush.
    REQUIRE(t->Put("extra", "e").ok());
    REQUIRE(cat.SetMeta("users", "meta-u3").ok());
    REQUIRE(cat.Flush().ok());
    REQUIRE(w->Commit("", Durability::kNone).ok());
  }
  {
    auto w = store.BeginWrite();
    Catalog cat(w.get());
    BTree* t;
    REQUIRE(cat.Open("users", &t).ok());
    std::string_view v;
    REQUIRE(t->Get("extra", &v).ok());
    std::string meta;
    REQUIRE(cat.GetMeta("users", &meta).ok());
    CHECK(meta == "meta-u3");
    REQUIRE(cat.GetMeta("orders", &meta).ok());
    CHECK(meta == "meta-o2");
    CheckAll(&cat, &store);
    // Metadata set, then the tree dropped: Flush has nothing left to write.
    REQUIRE(cat.SetMeta("users", "meta-u4").ok());
    REQUIRE(cat.Drop("users").ok());
    CHECK(cat.Drop("users").IsNotFound());
    REQUIRE(cat.Drop("orders").ok());
    REQUIRE(cat.Drop("users.email").ok());
    std::vector<std::string> names;
    REQUIRE(cat.List("", &names).ok());
    CHECK(names.empty());
    REQUIRE(cat.Flush().ok());
    CheckAll(&cat, &store);
    REQUIRE(w->Commit("", Durability::kNone).ok());
  }
  CHECK(store.LivePages().empty());
  CHECK(store.root(0) == 0);
}

TEST_CASE("catalog changes abort with the txn", "[catalog]") {
  MemStore store;
  {
    auto w = store.BeginWrite();
    Catalog cat(w.get());
    REQUIRE(cat.Create("a", "").ok());
    REQUIRE(cat.Flush().ok());
    REQUIRE(w->Commit("", Durability::kNone).ok());
  }
  {
    auto w = store.BeginWrite();
    Catalog cat(w.get());
    REQUIRE(cat.Create("b", "").ok());
    REQUIRE(cat.Drop("a").ok());
    REQUIRE(cat.Flush().ok());
    w->Abort();
  }
  auto r = store.BeginRead();
  Catalog cat(r.get());
  std::vector<std::string> names;
  REQUIRE(cat.List("", &names).ok());
  CHECK(names == std::vector<std::string>{"a"});
  std::vector<storage::PageId> pages;
  REQUIRE(cat.Verify(&pages).ok());
  std::sort(pages.begin(), pages.end());
  CHECK(pages == store.LivePages());
}

}  // namespace
}  // namespace mmdoc::index
