// Model-based randomized test of index::BTree against std::map.
//
// Mixed inserts/upserts/updates/deletes/gets and range scans both ways from
// random seek points; keys of 1..kMaxKeySize bytes skewed short (deep trees,
// shared prefixes), values of 0 bytes to several pages (rarely). Commits
// every ~N operations (aborting some, which the model undoes), verifies the
// tree and the page accounting after every commit, and compares the full
// contents periodically. Grow and shrink phases exercise splits and merges.
//
// Replay a failure with MMDOC_TEST_SEED=<seed printed on stderr>; make it
// bigger with MMDOC_TEST_SCALE.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "index/btree.h"
#include "tests/index/mem_txn.h"
#include "tests/index/model_backends.h"
#include "tests/support/test_env.h"

namespace mmdoc::index {
namespace {

class Model {
 public:
  Model(test::Backend* backend, uint64_t seed) : be_(backend), rng_(seed) {}

  std::string RandomKey() {
    uint32_t r = rng_() % 1000;
    size_t len;
    if (long_keys_ && r < 500) {
      len = 100 + rng_() % (kMaxKeySize - 99);
    } else if (r < 700) {
      len = 1 + rng_() % 12;
    } else if (r < 930) {
      len = 13 + rng_() % 40;
    } else if (r < 990) {
      len = 53 + rng_() % 300;
    } else {
      len = 353 + rng_() % (kMaxKeySize - 352);
    }
    std::string k(len, '\0');
    // A small alphabet in front makes shared prefixes and near misses.
    for (size_t i = 0; i < len; i++) {
      k[i] = static_cast<char>(i < 3 ? 'a' + rng_() % 4 : rng_() % 256);
    }
    return k;
  }

  std::string RandomValue() {
    uint32_t r = rng_() % 1000;
    size_t len;
    if (r < 600) {
      len = rng_() % 24;
    } else if (r < 950) {
      len = 24 + rng_() % 300;
    } else if (r < 997) {
      len = 300 + rng_() % 3000;
    } else {
      len = 3000 + rng_() % 40000;
    }
    std::string v(len, static_cast<char>(rng_()));
    for (size_t i = 0; i < len; i += 61) v[i] = static_cast<char>(rng_());
    return v;
  }

  // A key that is present when the model is not empty.
  std::string ExistingKey() {
    if (m_.empty()) return RandomKey();
    auto it = m_.lower_bound(RandomKey());
    if (it == m_.end()) it = m_.begin();
    return it->first;
  }

  void Remember(const std::string& k) {
    auto it = m_.find(k);
    if (it == m_.end()) {
      undo_.emplace_back(k, std::nullopt);
    } else {
      undo_.emplace_back(k, it->second);
    }
  }

  void Begin() {
    txn_ = be_->BeginWrite();
    tree_.emplace(txn_, txn_->root(0));
  }

  void Commit() {
    if (rng_() % 10 == 0) {
      be_->Abort();
      for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
        if (it->second) {
          m_[it->first] = *it->second;
        } else {
          m_.erase(it->first);
        }
      }
      aborts_++;
    } else {
      txn_->set_root(0, tree_->root());
      Status s = be_->Commit();
      INFO(s.ToString());
      REQUIRE(s.ok());
    }
    undo_.clear();
    commits_++;
    tree_.reset();
    if (rng_() % 20 == 0) be_->Reopen();
    Begin();
    std::vector<storage::PageId> pages;
    Status s = tree_->Verify(&pages, &stats_);
    INFO(s.ToString());
    REQUIRE(s.ok());
    REQUIRE(stats_.entries == m_.size());
    max_depth_ = std::max(max_depth_, stats_.depth);
    be_->CheckAccounting(&pages);
    if (commits_ % 10 == 0) CompareAll();
  }

  void CompareAll() {
    BTree::Cursor c(&*tree_);
    REQUIRE(c.SeekToFirst().ok());
    for (const auto& [k, v] : m_) {
      REQUIRE(c.Valid());
      REQUIRE(c.key() == k);
      REQUIRE(c.value() == v);
      REQUIRE(c.Next().ok());
    }
    REQUIRE(!c.Valid());
    REQUIRE(c.SeekToLast().ok());
    for (auto it = m_.rbegin(); it != m_.rend(); ++it) {
      REQUIRE(c.Valid());
      REQUIRE(c.key() == it->first);
      REQUIRE(c.Prev().ok());
    }
    REQUIRE(!c.Valid());
  }

  void Scan() {
    std::string start = rng_() % 2 ? RandomKey() : ExistingKey();
    BTree::Cursor c(&*tree_);
    REQUIRE(c.Seek(start).ok());
    auto it = m_.lower_bound(start);
    int steps = rng_() % 40;
    if (rng_() % 2) {
      for (int i = 0; i < steps && it != m_.end(); i++, ++it) {
        REQUIRE(c.Valid());
        REQUIRE(c.key() == it->first);
        REQUIRE(c.value() == it->second);
        REQUIRE(c.Next().ok());
      }
      if (it == m_.end()) REQUIRE(!c.Valid());
    } else {
      if (it == m_.end()) {
        REQUIRE(!c.Valid());
        REQUIRE(c.SeekToLast().ok());
      }
      if (m_.empty()) return;
      if (it == m_.end()) --it;
      for (int i = 0; i < steps; i++) {
        REQUIRE(c.Valid());
        REQUIRE(c.key() == it->first);
        REQUIRE(c.value() == it->second);
        REQUIRE(c.Prev().ok());
        if (it == m_.begin()) {
          REQUIRE(!c.Valid());
          break;
        }
        --it;
      }
    }
  }

  void Step(bool shrink) {
    uint32_t op = rng_() % 100;
    uint32_t del = shrink ? 45 : 12;
    if (op < del) {
      std::string k = rng_() % 8 == 0 ? RandomKey() : ExistingKey();
      Status s = tree_->Delete(k);
      if (m_.count(k)) {
        INFO(s.ToString());
        REQUIRE(s.ok());
        Remember(k);
        m_.erase(k);
      } else {
        REQUIRE(s.IsNotFound());
      }
    } else if (op < del + 30) {
      std::string k = rng_() % 4 == 0 ? ExistingKey() : RandomKey();
      std::string v = RandomValue();
      uint32_t mode = rng_() % 3;
      Status s = tree_->Put(k, v, static_cast<PutMode>(mode));
      bool present = m_.count(k) != 0;
      if (mode == 1 && present) {
        REQUIRE(s.IsAlreadyExists());
      } else if (mode == 2 && !present) {
        REQUIRE(s.IsNotFound());
      } else {
        INFO(s.ToString());
        REQUIRE(s.ok());
        Remember(k);
        m_[k] = std::move(v);
      }
    } else if (op < del + 40) {
      std::string k = ExistingKey();
      Status s = tree_->Put(k, RandomValue(), PutMode::kUpdate);
      if (m_.count(k)) {
        REQUIRE(s.ok());
        std::string_view got;
        REQUIRE(tree_->Get(k, &got).ok());
        Remember(k);
        m_[k] = std::string(got);
      } else {
        REQUIRE(s.IsNotFound());
      }
    } else if (op < 97) {
      std::string k = rng_() % 2 ? ExistingKey() : RandomKey();
      std::string_view got;
      Status s = tree_->Get(k, &got);
      auto it = m_.find(k);
      if (it == m_.end()) {
        REQUIRE(s.IsNotFound());
      } else {
        INFO(s.ToString());
        REQUIRE(s.ok());
        REQUIRE(got == it->second);
      }
    } else {
      Scan();
    }
  }

  void Run(uint64_t ops) {
    Begin();
    uint64_t next_commit = 1 + rng_() % 3000;
    bool shrink = false;
    for (uint64_t i = 0; i < ops; i++) {
      if (i % 20000 == 0) {
        shrink = rng_() % 2;
        long_keys_ = rng_() % 4 == 0;  // deep trees: a few keys per branch
      }
      if (m_.size() > 12000) shrink = true;
      Step(shrink);
      if (i == next_commit) {
        Commit();
        next_commit = i + 1 + rng_() % 3000;
      }
    }
    Commit();
    CompareAll();
    // Empty the tree: every page must come back.
    for (auto it = m_.begin(); it != m_.end();) {
      REQUIRE(tree_->Delete(it->first).ok());
      Remember(it->first);
      it = m_.erase(it);
    }
    REQUIRE(tree_->root() == 0);
    txn_->set_root(0, 0);
    REQUIRE(be_->Commit().ok());
    tree_.reset();
    Begin();
    std::vector<storage::PageId> pages;
    REQUIRE(tree_->Verify(&pages, nullptr).ok());
    REQUIRE(pages.empty());
    be_->CheckAccounting(&pages);
    be_->Abort();
    std::fprintf(stderr, "btree model: %llu ops, %llu commits (%llu aborted), max depth %llu\n",
                 static_cast<unsigned long long>(ops), static_cast<unsigned long long>(commits_),
                 static_cast<unsigned long long>(aborts_),
                 static_cast<unsigned long long>(max_depth_));
  }

 private:
  test::Backend* be_;
  std::mt19937_64 rng_;
  std::map<std::string, std::string> m_;
  std::vector<std::pair<std::string, std::optional<std::string>>> undo_;
  storage::Txn* txn_ = nullptr;
  std::optional<BTree> tree_;
  TreeStats stats_;
  uint64_t commits_ = 0, aborts_ = 0;
  uint64_t max_depth_ = 0;
  bool long_keys_ = false;
};

uint64_t Ops(uint64_t release_ops) {
  uint64_t ops = mmdoc::test::kAsan ? release_ops / 5 : release_ops;
  return ops * mmdoc::test::Scale();
}

TEST_CASE("btree model (in-memory txn)", "[btree][model]") {
  uint64_t seed = mmdoc::test::Seed("btree model mem");
  test::MemBackend be;
  Model m(&be, seed);
  m.Run(Ops(1000000));
}

#ifndef MMDOC_INDEX_NO_PAGER
TEST_CASE("btree model (pager)", "[btree][model][pager]") {
  uint64_t seed = mmdoc::test::Seed("btree model");
  mmdoc::test::TempDir dir;
  test::PagerBackend be(dir.File("model.mmdb"));
  Model m(&be, seed);
  m.Run(Ops(1000000));
}
#endif

}  // namespace
}  // namespace mmdoc::index
