// index::Run: runs read through a BufferedTree and merged into their tree,
// against a model. Randomized: a base tree, a few runs of puts and erases
// over it (some of keys the tree holds, some of keys no layer has), a
// buffer generation and a writer's overlay on top; every read path (Get,
// Put's liveness check, CountDelta, cursors both ways from random seeks)
// must agree with the model, and MergeRunsInto must leave the tree equal to
// it, merged whole or in slices, and merged again.
//
// Replay a failure with MMDOC_TEST_SEED=<seed printed on stderr>; make it
// bigger with MMDOC_TEST_SCALE.
#include "index/run.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "index/btree.h"
#include "index/buffered_tree.h"
#include "index/write_buffer.h"
#include "tests/index/mem_txn.h"
#include "tests/support/test_env.h"

namespace mmdoc::index {
namespace {

using test::MemStore;
using Model = std::map<std::string, std::string>;
const std::string kName = "c:coll";

std::string Key(uint64_t i) {
  char b[16];
  std::snprintf(b, sizeof(b), "k%06llu", static_cast<unsigned long long>(i));
  return b;
}

// The changes of one run or generation: key -> value, or nullopt for an
// erase.
using Changes = std::map<std::string, std::optional<std::string>>;

// Applies `ch` to `m` and returns the net change in live keys.
int64_t Apply(const Changes& ch, Model* m) {
  int64_t d = 0;
  for (const auto& [k, v] : ch) {
    const bool was = m->count(k) > 0;
    if (v.has_value()) {
      (*m)[k] = *v;
      d += was ? 0 : 1;
    } else {
      m->erase(k);
      d -= was ? 1 : 0;
    }
  }
  return d;
}

Changes RandomChanges(std::mt19937_64& rng, const Model& live, uint64_t universe, int n,
                      const std::string& tag) {
  Changes ch;
  for (int i = 0; i < n; i++) {
    const std::string k = Key(rng() % universe);
    if (rng() % 3 == 0 && live.count(k)) {
      ch[k] = std::nullopt;
    } else if (rng() % 10 == 0) {
      ch[k] = std::nullopt;  // an erase of a key that may be absent
    } else {
      ch[k] = tag + k + std::string(rng() % 3 == 0 ? 300 : 5, 'v');
    }
  }
  return ch;
}

int64_t Entries(BTree* tree) {
  int64_t n = 0;
  BTree::Cursor c(tree);
  REQUIRE(c.SeekToFirst().ok());
  while (c.Valid()) {
    n++;
    REQUIRE(c.Next().ok());
  }
  return n;
}

TEST_CASE("runs: reads through runs and their merge agree with a model", "[run]") {
  const uint64_t seed = mmdoc::test::Seed("runs model");
  const int rounds = static_cast<int>(30 * mmdoc::test::Scale());
  for (int round = 0; round < rounds; round++) {
    INFO("round " << round << " (seed " << seed << ")");
    std::mt19937_64 rng(seed + static_cast<uint64_t>(round));
    const uint64_t universe = 50 + rng() % 2000;
    MemStore store;
    Model model;
    // The base tree, root slot 0; runs in slots 1.. (oldest first).
    const int nruns = static_cast<int>(rng() % 5);
    std::vector<int64_t> deltas;
    std::vector<std::shared_ptr<KeyFilter>> filters;
    {
      auto w = store.BeginWrite();
      BTree base(w.get(), 0);
      for (uint64_t i = 0; i < universe; i++) {
        if (rng() % 2 != 0) continue;
        model[Key(i)] = "base" + Key(i);
        REQUIRE(base.Put(Key(i), model[Key(i)]).ok());
      }
      w->set_root(0, base.root());
      std::string stored;
      for (int r = 0; r < nruns; r++) {
        const Changes ch = RandomChanges(rng, model, universe, 1 + static_cast<int>(rng() % 300),
                                         "r" + std::to_string(r));
        deltas.push_back(Apply(ch, &model));
        BTree run(w.get(), 0);
        auto f = std::make_shared<KeyFilter>(ch.size());
        for (const auto& [k, v] : ch) {
          EncodeRunValue(!v.has_value(), v.value_or(""), &stored);
          REQUIRE(run.Put(k, stored).ok());
          // Sometimes no filter: a run read after a reopen has none.
          f->Add(k);
        }
        filters.push_back(rng() % 4 == 0 ? nullptr : f);
        w->set_root(1 + r, run.root());
      }
      REQUIRE(w->Commit("", Durability::kNone).ok());
    }
    // Sometimes a merge of the oldest runs is under way: stopped at
    // `merged_below`, their changes below it are in the tree, and reads
    // may skip those runs there.
    std::string merged_below;
    const int merging = nruns == 0 || rng() % 2 ? 0 : 1 + static_cast<int>(rng() % nruns);
    if (merging > 0) {
      auto w = store.BeginWrite();
      BTree tree(w.get(), w->root(0));
      std::vector<std::unique_ptr<BTree>> owned;
      std::vector<BTree*> runs;
      for (int i = merging - 1; i >= 0; i--) {
        owned.push_back(std::make_unique<BTree>(w.get(), w->root(1 + i)));
        runs.push_back(owned.back().get());
      }
      const int budget = 1 + static_cast<int>(rng() % 200);
      int changes = 0;
      RunMerge m;
      REQUIRE(MergeRunsInto(
                  &tree, runs, "",
                  [&](bool* pause) {
                    *pause = ++changes >= budget;
                    return Status::OK();
                  },
                  &m)
                  .ok());
      merged_below = m.done ? Key(universe) : m.next;  // done: past every key
      deltas[0] -= m.live_delta;                       // as the engine moves the count
      w->set_root(0, tree.root());
      REQUIRE(w->Commit("", Durability::kNone).ok());
    }
    const Model in_pages = model;
    // A generation above the runs.
    WriteBuffer wb;
    const Changes gen = RandomChanges(rng, model, universe, static_cast<int>(rng() % 100), "g");
    std::vector<BufferChange> published;
    for (const auto& [k, v] : gen) {
      BufferChange c;
      c.tree = kName;
      c.key = k;
      c.value = v.has_value() ? std::string_view(*v) : std::string_view();
      c.erased = !v.has_value();
      c.was_live = model.count(k) > 0;
      published.push_back(c);
    }
    const int64_t gen_delta = Apply(gen, &model);
    if (!published.empty()) wb.Publish(1, published);
    const BufferView view = wb.View(1);

    auto r = store.BeginRead();
    BTree base(r.get(), r->root(0));
    std::vector<std::unique_ptr<BTree>> run_trees;
    std::vector<RunRef> refs;  // newest first
    for (int i = nruns - 1; i >= 0; i--) {
      run_trees.push_back(std::make_unique<BTree>(r.get(), r->root(1 + i)));
      refs.push_back(RunRef{run_trees.back().get(), filters[static_cast<size_t>(i)].get(),
                            deltas[static_cast<size_t>(i)],
                            i < merging ? std::string_view(merged_below) : std::string_view()});
    }
    BufferedTree t(&base, &view, kName, nullptr, /*writable=*/true);
    t.UseRuns(refs);

    // Point reads, and Put's liveness check (through runs and filters).
    for (uint64_t i = 0; i < universe; i++) {
      const std::string k = Key(i);
      std::string_view got;
      Status s = t.Get(k, &got);
      auto it = model.find(k);
      if (it == model.end()) {
        CHECK(s.IsNotFound());
      } else {
        REQUIRE(s.ok());
        CHECK(got == it->second);
      }
    }
    CHECK(Entries(&base) + t.CountDelta() == static_cast<int64_t>(model.size()));
    (void)gen_delta;

    // Cursors: forward, backward, and walks from random seeks.
    BufferedTree::Cursor c(&t);
    REQUIRE(c.SeekToFirst().ok());
    for (const auto& [k, v] : model) {
      REQUIRE(c.Valid());
      CHECK(c.key() == k);
      CHECK(c.value() == v);
      REQUIRE(c.Next().ok());
    }
    CHECK(!c.Valid());
    REQUIRE(c.SeekToLast().ok());
    for (auto it = model.rbegin(); it != model.rend(); ++it) {
      REQUIRE(c.Valid());
      CHECK(c.key() == it->first);
      REQUIRE(c.Prev().ok());
    }
    CHECK(!c.Valid());
    for (int s = 0; s < 20; s++) {
      const std::string target = Key(rng() % (universe + 1));
      REQUIRE(c.Seek(target).ok());
      auto it = model.lower_bound(target);
      for (int step = 0; step < 10; step++) {
        if (it == model.end()) {
          CHECK(!c.Valid());
          break;
        }
        REQUIRE(c.Valid());
        CHECK(c.key() == it->first);
        if (step == 5 && it != model.begin()) {  // turn around once
          REQUIRE(c.Prev().ok());
          --it;
          REQUIRE(c.Valid());
          CHECK(c.key() == it->first);
        }
        REQUIRE(c.Next().ok());
        ++it;
      }
    }
    // Scans that skip every leaf without a needle, as the engine's do: they
    // find exactly the newest values holding it. "base" sits in old values
    // that runs hid (skipping a run's leaf must not bring them back); a
    // key's name in every version of that key.
    for (int s = 0; s < 6; s++) {
      const std::string needle = s == 0   ? std::string("base")
                                 : s == 1 ? "r" + std::to_string(rng() % 5)
                                          : Key(rng() % universe);
      INFO("needle " << needle);
      std::vector<std::pair<std::string, std::string>> got, want;
      for (const auto& [k, v] : model)
        if (v.find(needle) != std::string::npos) want.emplace_back(k, v);
      const char* checked = nullptr;
      Status st = c.SeekToFirst();
      while (st.ok() && c.Valid()) {
        bool all_inline;
        const std::string_view leaf = c.LeafBytes(&all_inline);
        if (leaf.data() != checked) {
          if (all_inline && leaf.find(needle) == std::string_view::npos) {
            uint64_t skipped = 0;
            st = c.SkipLeaf(&skipped);
            continue;
          }
          checked = leaf.data();
        }
        bool hidden = false;
        REQUIRE(c.Hidden(&hidden).ok());
        if (!hidden && c.value().find(needle) != std::string_view::npos)
          got.emplace_back(c.key(), c.value());
        st = c.Next();
      }
      REQUIRE(st.ok());
      CHECK(got == want);
    }
    // Inserts see every layer's live keys.
    for (int s = 0; s < 50; s++) {
      const std::string k = Key(rng() % universe);
      const Status put = t.Put(k, "new", PutMode::kInsert);
      CHECK(put.IsAlreadyExists() == (model.count(k) > 0));
      if (put.ok()) model[k] = "new";
    }
    r.reset();

    // The merge of the runs alone leaves the tree as the pages plus runs.
    {
      auto w = store.BeginWrite();
      BTree tree(w.get(), w->root(0));
      std::vector<std::unique_ptr<BTree>> owned;
      std::vector<BTree*> runs;
      for (int i = nruns - 1; i >= 0; i--) {
        owned.push_back(std::make_unique<BTree>(w.get(), w->root(1 + i)));
        runs.push_back(owned.back().get());
      }
      const int64_t entries_before = Entries(&tree);
      // In slices of random size, each resumed where the last stopped.
      std::string from;
      int64_t delta = 0;
      for (;;) {
        const int budget = 1 + static_cast<int>(rng() % 60);
        int changes = 0;
        RunMerge m;
        REQUIRE(MergeRunsInto(
                    &tree, runs, from,
                    [&](bool* pause) {
                      *pause = ++changes >= budget;
                      return Status::OK();
                    },
                    &m)
                    .ok());
        delta += m.live_delta;
        if (m.done) break;
        REQUIRE(m.next > from);
        from = m.next;
      }
      CHECK(entries_before + delta == static_cast<int64_t>(in_pages.size()));
      // Merged again from any key, the runs change nothing.
      RunMerge again;
      REQUIRE(MergeRunsInto(
                  &tree, runs, rng() % 2 ? Key(rng() % universe) : std::string(),
                  [](bool*) { return Status::OK(); }, &again)
                  .ok());
      CHECK(again.done);
      CHECK(again.live_delta == 0);
      BTree::Cursor m(&tree);
      auto it = in_pages.begin();
      REQUIRE(m.SeekToFirst().ok());
      for (; m.Valid(); ++it) {
        REQUIRE(it != in_pages.end());
        CHECK(m.key() == it->first);
        CHECK(m.value() == it->second);
        REQUIRE(m.Next().ok());
      }
      CHECK(it == in_pages.end());
      w->Abort();
    }
  }
}

TEST_CASE("runs: a run entry without its tag is damage, not a value", "[run]") {
  bool erased;
  std::string_view v;
  CHECK(DecodeRunValue("", &erased, &v).IsCorruption());
  CHECK(DecodeRunValue("xvalue", &erased, &v).IsCorruption());
  REQUIRE(DecodeRunValue("pvalue", &erased, &v).ok());
  CHECK((!erased && v == "value"));
  REQUIRE(DecodeRunValue("e", &erased, &v).ok());
  CHECK(erased);
}

}  // namespace
}  // namespace mmdoc::index
