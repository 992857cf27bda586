// A buffered database's runs (index/run.h, docs/write-path.md "Sorted runs
// before the leaves"): their catalog names, loading them with a collection,
// and merging them into their trees.
//
// A merge of a frozen generation writes, for each tree it changed, a run
// (TransactionImpl::MergeGeneration). Reads look through a tree's runs,
// newest first, between the buffer and the tree. When a tree holds
// kRunsBeforeMerge runs, the merger thread merges them into it in slices
// (DBImpl::run_slice_bytes), each a write txn committed with
// Pager::CommitRewrite: the pages hold the same records before and after,
// so the log is not involved. Every path that writes pages itself merges
// the runs first (DBImpl::MergeAll), and so does recovery into pages
// (DBImpl::Replay).
#include <algorithm>
#include <set>

#include "engine/db_impl.h"
#include "index/run.h"
#include "storage/coding.h"

namespace mmdoc {

namespace {

// A run's trees are read as the engine's trees are: through the key codec.
std::unique_ptr<index::BTree> RunTreeAt(storage::Txn* txn, storage::PageId root) {
  return std::make_unique<index::BTree>(txn, root, TreeKeyCodec());
}

// Readers without a buffer (DB::Check after a failed merge, a compaction's
// source) still read through the runs: they see the buffer as empty.
const index::BufferView& NoBuffer() {
  static const index::BufferView* v = new index::BufferView();
  return *v;
}

}  // namespace

std::string RunPrefix(std::string_view collection) {
  std::string s = "r:";
  s.append(collection);
  s.push_back('\0');
  return s;
}

std::string RunName(std::string_view collection, uint64_t seq, std::string_view tree) {
  std::string s = RunPrefix(collection);
  char b[8];
  storage::EncodeBigEndian64(b, seq);
  s.append(b, 8);
  s.append(tree);
  return s;
}

bool RunTree(std::string_view name, std::string_view* tree) {
  if (name.substr(0, 2) != "r:") return false;
  const size_t nul = name.find('\0', 2);
  if (nul == name.npos || name.size() < nul + 1 + 8 + 3) return false;
  *tree = name.substr(nul + 1 + 8);
  return true;
}

std::string EncodeRunMeta(const CachedRun& run) {
  std::string s;
  storage::PutFixed64(&s, static_cast<uint64_t>(run.count_delta));
  storage::PutFixed64(&s, run.entries);
  if (run.merging) {
    s.push_back('m');
    s.append(run.merged_below);
  }
  return s;
}

bool DecodeRunMeta(std::string_view in, CachedRun* run) {
  uint64_t d;
  if (!storage::GetFixed64(&in, &d) || !storage::GetFixed64(&in, &run->entries)) return false;
  run->count_delta = static_cast<int64_t>(d);
  run->merging = !in.empty();
  if (run->merging && in[0] != 'm') return false;
  run->merged_below.assign(run->merging ? in.substr(1) : std::string_view());
  return true;
}

// The tree of collection state `c` that tree name `tree` names: 0 for the
// _id tree, 1 + i for index i; -1 for none.
int TransactionImpl::TreeSlot(const CollState* c, std::string_view tree) const {
  if (tree == CollectionTreeName(c->name)) return 0;
  for (size_t i = 0; i < c->meta.indexes.size(); i++)
    if (tree == IndexTreeName(c->name, c->meta.indexes[i].field)) return static_cast<int>(i) + 1;
  return -1;
}

Status TransactionImpl::LoadRuns(CollState* c, const CachedColl* cached) {
  // No runs (the common case) is an empty vector: nothing to allocate.
  c->runs.clear();
  if (cached != nullptr) {
    if (cached->runs.size() == c->meta.indexes.size() + 1) c->runs = cached->runs;
  } else {
    std::vector<std::string> names;
    MMDOC_RETURN_IF_ERROR(Cat()->List(RunPrefix(c->name), &names));
    if (!names.empty()) c->runs.resize(c->meta.indexes.size() + 1);
    for (const std::string& name : names) {  // oldest first
      std::string_view tree;
      std::string meta;
      CachedRun run;
      index::BTree* t;
      int slot = -1;
      if (RunTree(name, &tree)) slot = TreeSlot(c, tree);
      if (slot < 0) return Status::Corruption("a run of a tree that is gone", c->name);
      MMDOC_RETURN_IF_ERROR(Cat()->GetMeta(name, &meta));
      if (!DecodeRunMeta(meta, &run))
        return Status::Corruption("catalog entry of a run is damaged", c->name);
      MMDOC_RETURN_IF_ERROR(Cat()->Open(name, &t));
      run.name = name;
      run.root = t->root();
      run.filter = db_->RunFilter(name);
      c->runs[slot].insert(c->runs[slot].begin(), std::move(run));
    }
  }
  // A transaction that writes pages reads no run: it merges them first
  // (MergeRuns), or it is a merge and writes new ones.
  if (!read_only_ && !has_view_) return Status::OK();
  for (size_t slot = 0; slot < c->runs.size(); slot++) {
    if (c->runs[slot].empty()) continue;
    std::unique_ptr<index::BufferedTree>& bt = slot == 0 ? c->primary : c->index_trees[slot - 1];
    if (bt->direct()) {
      bt = std::make_unique<index::BufferedTree>(bt->tree(), &NoBuffer(), bt->name(),
                                                 /*order=*/nullptr, /*writable=*/false);
    }
    std::vector<index::RunRef> refs;
    for (const CachedRun& r : c->runs[slot]) {
      c->owned.push_back(RunTreeAt(txn_.get(), r.root));
      refs.push_back(
          index::RunRef{c->owned.back().get(), r.filter.get(), r.count_delta, r.merged_below});
    }
    bt->UseRuns(std::move(refs));
  }
  return Status::OK();
}

Status TransactionImpl::MergeRuns(size_t min_runs, uint64_t budget,
                                  std::vector<std::string>* dropped, bool* more,
                                  std::string_view skip) {
  *more = false;
  std::vector<std::string> names;
  MMDOC_RETURN_IF_ERROR(Cat()->List("r:", &names));
  std::set<std::string> colls;
  for (const std::string& n : names) colls.insert(n.substr(2, n.find('\0', 2) - 2));
  if (!skip.empty()) colls.erase(std::string(skip));
  uint64_t written = 0;  // bytes of pages written back so far
  bool paused = false;
  const auto between = [&](bool* pause) {
    // Private page copies are bounded, as in a generation's merge.
    if (txn_->private_bytes() > kMergePrivateBytes) {
      written += txn_->private_bytes();
      MMDOC_RETURN_IF_ERROR(txn_->WriteBack());
    }
    *pause = budget != 0 && written + txn_->private_bytes() >= budget;
    return Status::OK();
  };
  for (const std::string& coll : colls) {
    CollState* c;
    Status s = Collection(coll, false, &c);
    if (s.ok() && !c->exists) s = Status::Corruption("runs of a collection that is gone", coll);
    if (!s.ok()) return Poison(s);
    for (size_t slot = 0; slot < c->runs.size(); slot++) {
      std::vector<CachedRun>& runs = c->runs[slot];
      if (runs.empty()) continue;
      // The runs to merge, runs[first..] (the oldest): those of a merge
      // under way, else all of them. A whole merge starts again from the
      // first key, as a change merged twice lands once.
      size_t first = runs.size();
      while (first > 0 && runs[first - 1].merging) first--;
      std::string from;
      if (budget == 0 || first == runs.size()) {
        if (runs.size() < min_runs) continue;
        first = 0;
      } else {
        from = runs.back().merged_below;
      }
      if (paused) {
        *more = true;
        break;
      }
      index::BTree* tree = slot == 0 ? c->primary->tree() : c->index_trees[slot - 1]->tree();
      std::vector<index::BTree*> trees;
      for (size_t i = first; i < runs.size(); i++) {
        index::BTree* t;
        s = Cat()->Open(runs[i].name, &t);
        if (!s.ok()) return Poison(s);
        trees.push_back(t);
      }
      index::RunMerge m;
      s = index::MergeRunsInto(tree, trees, from, between, &m);
      if (!s.ok()) return Poison(s);
      if (slot == 0) {
        c->meta.count = static_cast<uint64_t>(static_cast<int64_t>(c->meta.count) + m.live_delta);
        c->meta_dirty = true;
      }
      if (m.done) {
        for (size_t i = first; i < runs.size(); i++) {
          s = Cat()->Drop(runs[i].name);
          if (!s.ok()) return Poison(s);
          dropped->push_back(runs[i].name);
        }
        runs.resize(first);
        // Runs written while it went on may be due already: no new
        // generation need come to start their merge.
        if (budget != 0 && runs.size() >= min_runs) *more = true;
        continue;
      }
      // Stopped: the tree now holds what the runs add below m.next, so
      // their count moves to the tree's.
      paused = true;
      *more = true;
      runs.back().count_delta -= m.live_delta;
      for (size_t i = first; i < runs.size(); i++) {
        runs[i].merging = true;
        runs[i].merged_below = m.next;
        s = Cat()->SetMeta(runs[i].name, EncodeRunMeta(runs[i]));
        if (!s.ok()) return Poison(s);
      }
    }
    bool left = false;
    for (const auto& runs : c->runs) left = left || !runs.empty();
    if (!left) c->runs.clear();
    if (paused) break;
  }
  return Status::OK();
}

Status TransactionImpl::CommitRewrite() {
  Status s = FlushCatalog();
  std::shared_ptr<CatalogCache> next;
  if (s.ok()) next = NextCache();
  if (s.ok()) s = db_->PublishRewrite(txn_.get(), std::move(next));
  return FinishMerge(s);
}

std::shared_ptr<const index::KeyFilter> DBImpl::RunFilter(std::string_view name) {
  storage::MutexLock l(&run_mu_);
  auto it = run_filters_.find(name);
  return it == run_filters_.end() ? nullptr : it->second;
}

void DBImpl::AddRunFilter(std::string name, std::shared_ptr<const index::KeyFilter> f) {
  storage::MutexLock l(&run_mu_);
  run_filters_[std::move(name)] = std::move(f);
}

void DBImpl::DropRunFilters(const std::vector<std::string>& names) {
  storage::MutexLock l(&run_mu_);
  for (const std::string& n : names) run_filters_.erase(n);
}

Status DBImpl::PublishRewrite(storage::Txn* txn, std::shared_ptr<const CatalogCache> next) {
  storage::MutexLock l(&cache_mu_);
  MMDOC_RETURN_IF_ERROR(pager_->CommitRewrite(txn));
  cache_ = std::move(next);
  SnapshotChanged();
  return Status::OK();
}

Status DBImpl::MergeRunsNow(size_t min_runs, uint64_t budget, bool* more, std::string_view skip) {
  bool left = false;
  if (more == nullptr) more = &left;
  *more = false;
  // A write txn is not begun for nothing: it would mark the file in use.
  bool any = false;
  MMDOC_RETURN_IF_ERROR(HasRuns(&any));
  if (!any) return Status::OK();
  std::shared_ptr<storage::Pager> p = pager();
  auto w = p->BeginWrite(storage::PageWrites::kWriteAt);
  if (!w.ok()) return w.status();
  TransactionImpl t(this, p, std::move(w.value()), /*read_only=*/false, Durability::kNone,
                    /*replaying=*/false);
  t.SetBackground();
  std::vector<std::string> dropped;
  Status s = t.MergeRuns(min_runs, budget, &dropped, more, skip);
  if (!s.ok()) {
    t.Abort();
    return s;
  }
  if (dropped.empty() && !*more) {
    t.Abort();
    return Status::OK();
  }
  MMDOC_RETURN_IF_ERROR(t.CommitRewrite());
  DropRunFilters(dropped);
  return Status::OK();
}

Status DBImpl::HasRuns(bool* any) {
  std::shared_ptr<storage::Pager> p = pager();
  auto r = p->BeginRead();
  if (!r.ok()) return r.status();
  index::Catalog cat(r.value().get(), &TreeKeyCodec());
  std::vector<std::string> names;
  MMDOC_RETURN_IF_ERROR(cat.List("r:", &names));
  *any = !names.empty();
  return Status::OK();
}

}  // namespace mmdoc
