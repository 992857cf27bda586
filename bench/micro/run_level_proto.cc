// mmdoc-runproto: the prototype behind docs/write-path.md's "Sorted runs
// before the leaves". It measures, on the storage and index layers alone,
// the background side of the write buffer at a size where a generation
// holds fewer changes than the tree has leaves, in two designs:
//
//   merge   today's merger: each generation is merged into the trees in key
//           order (one copy of each leaf it touches), then checkpointed.
//   runs    each generation is written as a run: a new pair of trees in the
//           same file, built from its sorted changes (packed leaves, each
//           written once), then checkpointed; a key filter per run is kept
//           in memory. When `--runs` runs are waiting, all of them are
//           merged into the trees in key order (see --slices), and dropped.
//
// The data are writeproto's: a primary keyed by a 16-byte random id holding
// a 150-byte value, and a unique index keyed by a 16-byte random key
// holding the id. N entries are loaded first. Then `--gens` generations of
// `--gen` fresh inserts each go through the design (the foreground, which
// both designs share, is not modelled). Reported per insert: the background
// time, the bytes the process wrote (/proc/self/io write_bytes, which
// counts a page each time it is dirtied and later written), and the rate
// of point reads of loaded ids just before the runs are merged (every
// run's filter probed, then the tree), against the tree alone.
//
// `--slices S` merges the runs in S transactions over ranges of the key
// space, each checkpointed, so that the file holds about a slice's worth of
// freed leaves rather than a whole merge's. Reported: the file's pages (its
// high-water mark) and how many of them are free at the end.
//
//   mmdoc-runproto [--docs N] [--gens K] [--gen G] [--runs R] [--slices S]
//                  [--designs merge,runs] [--dir D]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/micro/proto_util.h"
#include "index/btree.h"
#include "index/key_filter.h"
#include "storage/pager.h"

namespace {

using mmdoc::Durability;
using mmdoc::Status;
using mmdoc::index::BTree;
using mmdoc::index::KeyFilter;
using mmdoc::index::PutMode;
namespace storage = mmdoc::storage;
using mmdoc::proto::Check;
using mmdoc::proto::Now;
using mmdoc::proto::RandomBytes;

constexpr int kPrimary = 1, kIndex = 2;  // root slots

uint64_t WriteBytes() {
  std::ifstream io("/proc/self/io");
  std::string k;
  uint64_t v = 0;
  while (io >> k >> v) {
    if (k == "write_bytes:") return v;
  }
  return 0;
}

// One generation's changes, each tree's sorted by its key.
struct Generation {
  std::vector<std::pair<std::string, std::string>> primary, index;
};

Generation MakeGeneration(std::mt19937_64& rng, size_t n) {
  Generation g;
  for (size_t i = 0; i < n; i++) {
    std::string id = RandomBytes(rng, 16), key = RandomBytes(rng, 16);
    g.primary.emplace_back(id, RandomBytes(rng, 150));
    g.index.emplace_back(std::move(key), std::move(id));
  }
  std::sort(g.primary.begin(), g.primary.end());
  std::sort(g.index.begin(), g.index.end());
  return g;
}

// A run: a pair of trees in the file, with a filter per tree. The roots
// live here, not in the meta's slots (the prototype never reopens).
struct Run {
  storage::PageId primary = 0, index = 0;
  std::unique_ptr<KeyFilter> primary_filter, index_filter;
};

// Puts sorted changes into `tree`, in key order.
void PutSorted(BTree* tree, const std::vector<std::pair<std::string, std::string>>& kv) {
  for (const auto& [k, v] : kv) Check(tree->Put(k, v, PutMode::kUpsert), "put");
}

// Puts `g` into the trees in one write transaction; checkpoints when asked
// (a merge does; the load leaves it to the log's budget).
void MergeIntoTrees(storage::Pager* p, const Generation& g, bool checkpoint = true) {
  auto w = p->BeginWrite();
  Check(w.status(), "begin merge");
  storage::Txn* t = w.value().get();
  BTree primary(t, t->root(kPrimary)), index(t, t->root(kIndex));
  PutSorted(&primary, g.primary);
  PutSorted(&index, g.index);
  t->set_root(kPrimary, primary.root());
  t->set_root(kIndex, index.root());
  Check(t->Commit({}, Durability::kNone), "commit merge");
  if (checkpoint) Check(p->Checkpoint(), "checkpoint");
}

Run WriteRun(storage::Pager* p, const Generation& g) {
  auto w = p->BeginWrite();
  Check(w.status(), "begin run");
  storage::Txn* t = w.value().get();
  BTree primary(t, 0), index(t, 0);
  PutSorted(&primary, g.primary);  // ascending: each leaf fills, then splits off
  PutSorted(&index, g.index);
  Check(t->Commit({}, Durability::kNone), "commit run");
  Check(p->Checkpoint(), "checkpoint");
  Run r;
  r.primary = primary.root();
  r.index = index.root();
  r.primary_filter = std::make_unique<KeyFilter>(g.primary.size());
  r.index_filter = std::make_unique<KeyFilter>(g.index.size());
  for (const auto& kv : g.primary) r.primary_filter->Add(kv.first);
  for (const auto& kv : g.index) r.index_filter->Add(kv.first);
  return r;
}

// Merges every run into the trees in key order (a k-way merge of their
// cursors; the keys are distinct, so no run's change hides another's) in
// `slices` write transactions, each over a range of the key space and
// followed by a checkpoint, so that the leaves one slice frees can take the
// next slices' copies; then drops the runs' trees.
void MergeRuns(storage::Pager* p, std::vector<Run>* runs, int slices) {
  for (int s = 0; s < slices; s++) {
    // Keys are lowercase letters: the slices split 'a'..'z' evenly.
    const std::string lo =
        s == 0 ? std::string() : std::string(1, static_cast<char>('a' + 26 * s / slices));
    const std::string hi = std::string(1, static_cast<char>('a' + 26 * (s + 1) / slices));
    const bool last = s + 1 == slices;
    auto w = p->BeginWrite();
    Check(w.status(), "begin runs merge");
    storage::Txn* t = w.value().get();
    for (int which : {kPrimary, kIndex}) {
      BTree base(t, t->root(which));
      std::vector<std::unique_ptr<BTree>> trees;
      std::vector<std::unique_ptr<BTree::Cursor>> cursors;
      for (const Run& r : *runs) {
        trees.push_back(std::make_unique<BTree>(t, which == kPrimary ? r.primary : r.index));
        cursors.push_back(std::make_unique<BTree::Cursor>(trees.back().get()));
        Check(cursors.back()->Seek(lo), "run seek");
      }
      std::string key, value;
      for (;;) {
        BTree::Cursor* least = nullptr;
        for (auto& c : cursors) {
          if (c->Valid() && (last || c->key() < hi) &&
              (least == nullptr || c->key() < least->key()))
            least = c.get();
        }
        if (least == nullptr) break;
        key.assign(least->key());
        value.assign(least->value());
        Check(least->Next(), "run next");
        Check(base.Put(key, value, PutMode::kUpsert), "merge put");
      }
      cursors.clear();
      if (last) {
        for (auto& tree : trees) Check(tree->Drop(), "drop run");
      }
      t->set_root(which, base.root());
    }
    Check(t->Commit({}, Durability::kNone), "commit runs merge");
    Check(p->Checkpoint(), "checkpoint");
  }
  runs->clear();
}

// Point reads of `ids` (all live in the base tree): each run's filter, a
// descent of the run's tree when the filter says maybe, then the tree.
double Lookups(storage::Pager* p, const std::vector<Run>& runs, const std::vector<std::string>& ids,
               size_t* probes) {
  auto r = p->BeginRead();
  Check(r.status(), "begin read");
  storage::Txn* t = r.value().get();
  BTree primary(t, t->root(kPrimary));
  std::vector<std::unique_ptr<BTree>> trees;
  for (auto it = runs.rbegin(); it != runs.rend(); ++it)
    trees.push_back(std::make_unique<BTree>(t, it->primary));
  const double start = Now();
  size_t found = 0;
  *probes = 0;
  for (const std::string& id : ids) {
    std::string_view v;
    bool hit = false;
    for (size_t i = 0; i < trees.size() && !hit; i++) {
      if (!runs[runs.size() - 1 - i].primary_filter->MayContain(id)) continue;
      ++*probes;
      hit = trees[i]->Get(id, &v).ok();
    }
    if (!hit) hit = primary.Get(id, &v).ok();
    found += hit;
  }
  const double secs = Now() - start;
  if (found != ids.size()) {
    std::fprintf(stderr, "runproto: %zu of %zu reads found\n", found, ids.size());
    std::exit(1);
  }
  return secs;
}

std::unique_ptr<storage::Pager> OpenPager(const std::string& path) {
  storage::PagerOptions o;
  o.log_size = 64ull << 20;
  auto p = storage::Pager::Open(path, o);
  Check(p.status(), "open");
  Check(p.value()->Recover([](uint64_t, std::string_view) { return Status::OK(); }), "recover");
  return std::move(p.value());
}

}  // namespace

int main(int argc, char** argv) {
  mmdoc::proto::program = "mmdoc-runproto";
  size_t docs = 1000000, gens = 8, gen = 125000, runs_max = 8;
  int slices = 1;
  std::string designs = "merge,runs";
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--docs") docs = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--gens") gens = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--gen") gen = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--runs") runs_max = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--slices") slices = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--dir") dir = argv[i + 1];
    if (a == "--designs") designs = argv[i + 1];
  }
  std::printf(
      "runproto: %zu loaded, %zu generations of %zu inserts, runs merged %zu at a time in %d "
      "slices\n",
      docs, gens, gen, runs_max, slices);
  std::printf("%-6s %10s %13s %15s %10s %9s %12s %12s %11s\n", "design", "us/insert",
              "inserts/s bg", "written/insert", "pages MiB", "free MiB", "reads/s tree",
              "reads/s runs", "run probes");
  for (const std::string design : {"merge", "runs"}) {
    if (("," + designs + ",").find("," + design + ",") == std::string::npos) continue;
    const std::string path = dir + "/runproto-" + design + ".db";
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
    auto p = OpenPager(path);
    std::mt19937_64 rng(1);
    std::vector<std::string> read_ids;
    {
      // The load, in batches of 1000 as the bench's insert phase commits.
      std::vector<std::string> all_ids;
      for (size_t done = 0; done < docs;) {
        const size_t n = std::min<size_t>(1000, docs - done);
        Generation g = MakeGeneration(rng, n);
        for (const auto& kv : g.primary) {
          if (rng() % 64 == 0) all_ids.push_back(kv.first);
        }
        MergeIntoTrees(p.get(), g, /*checkpoint=*/false);
        done += n;
      }
      Check(p->Checkpoint(), "checkpoint after load");
      std::shuffle(all_ids.begin(), all_ids.end(), rng);
      read_ids = std::move(all_ids);
    }
    std::vector<Run> runs;
    double busy = 0, read_runs = 0, read_tree = 0;
    size_t probes = 0;
    const uint64_t written0 = WriteBytes();
    for (size_t k = 0; k < gens; k++) {
      Generation g = MakeGeneration(rng, gen);
      const double start = Now();
      if (design == "merge") {
        MergeIntoTrees(p.get(), g);
      } else {
        runs.push_back(WriteRun(p.get(), g));
      }
      busy += Now() - start;
      if (design == "runs" && (runs.size() == runs_max || k + 1 == gens)) {
        if (runs.size() == runs_max && read_runs == 0) {
          size_t none;
          read_tree = Lookups(p.get(), {}, read_ids, &none);
          read_runs = Lookups(p.get(), runs, read_ids, &probes);
        }
        const double s = Now();
        MergeRuns(p.get(), &runs, slices);
        busy += Now() - s;
      }
    }
    const double inserts = static_cast<double>(gens * gen);
    const double written = static_cast<double>(WriteBytes() - written0);
    if (design == "merge") {
      size_t none;
      read_tree = Lookups(p.get(), {}, read_ids, &none);
    }
    // Every insert reached the trees, once.
    for (int which : {kPrimary, kIndex}) {
      auto r = p->BeginRead();
      Check(r.status(), "begin count");
      BTree tree(r.value().get(), r.value()->root(which));
      BTree::Cursor c(&tree);
      size_t n = 0;
      for (Check(c.SeekToFirst(), "count"); c.Valid(); Check(c.Next(), "count")) n++;
      if (n != docs + gens * gen) {
        std::fprintf(stderr, "runproto: %s holds %zu entries, not %zu\n", design.c_str(), n,
                     docs + gens * gen);
        return 1;
      }
    }
    const double reads = static_cast<double>(read_ids.size());
    // The file's high-water mark, and what of it is free after the last
    // merge's checkpoint (the file itself grows in large steps).
    const storage::PagerStats st = p->Stats();
    double page_mib;
    {
      auto r = p->BeginRead();
      Check(r.status(), "begin read");
      page_mib = static_cast<double>(r.value()->page_size()) / (1 << 20);
    }
    const double mib = static_cast<double>(st.page_count) * page_mib;
    const double free_mib = static_cast<double>(st.free_pages + st.pending_pages) * page_mib;
    std::printf("%-6s %10.2f %13.0f %15.0f %10.0f %9.0f %12.0f %12.0f %11zu\n", design.c_str(),
                busy * 1e6 / inserts, inserts / busy, written / inserts, mib, free_mib,
                reads / read_tree, read_runs > 0 ? reads / read_runs : 0.0, probes);
    std::fflush(stdout);
    p.reset();
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
  }
  return 0;
}
