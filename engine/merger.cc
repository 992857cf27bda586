// DBImpl's write buffer (docs/write-path.md): the writer token, snapshots
// of the pages and the buffer taken together, merges of frozen generations
// into the pages, and the merger thread. See engine/db_impl.h for the
// design and the lock order.

#include <algorithm>
#include <chrono>
#include <new>
#include <utility>

#include "engine/db_impl.h"
#include "storage/format.h"

namespace mmdoc {

// First come, first served: a writer that commits in a loop cannot keep
// Compact or Check waiting.
void DBImpl::AcquireWriterToken() {
  storage::MutexLock l(&token_mu_);
  const uint64_t ticket = token_next_++;
  while (token_held_ || token_serving_ != ticket) token_cv_.Wait();
  token_held_ = true;
}

bool DBImpl::TryAcquireWriterToken() {
  storage::MutexLock l(&token_mu_);
  if (token_held_ || token_serving_ != token_next_) return false;
  token_next_++;
  token_held_ = true;
  return true;
}

void DBImpl::ReleaseWriterToken() {
  {
    storage::MutexLock l(&token_mu_);
    token_held_ = false;
    token_serving_++;
  }
  token_cv_.SignalAll();
}

Status DBImpl::Snapshot(std::shared_ptr<storage::Pager>* p, std::unique_ptr<storage::Txn>* txn,
                        index::BufferView* view, std::shared_ptr<const CatalogCache>* cache,
                        bool internal, std::shared_ptr<index::WriteBuffer>* wb) {
  storage::MutexLock l(&cache_mu_);
  auto r = internal ? pager_->BeginInternalRead() : pager_->BeginRead();
  if (!r.ok()) return r.status();
  *p = pager_;
  *txn = std::move(r.value());
  *cache = cache_;
  if (wbuf_) wbuf_->View(wbuf_->last_txid(), view);
  if (wb != nullptr) *wb = wbuf_;
  return Status::OK();
}

Status DBImpl::PrepareCommits(storage::Pager* p) {
  if (prepared_ == p) return Status::OK();
  MMDOC_RETURN_IF_ERROR(p->PrepareCommits());
  prepared_ = p;
  return Status::OK();
}

void DBImpl::FreezeActive() {
  std::shared_ptr<index::WriteBuffer> wb = buffer();
  // With the writer token held no record is being appended, so the head
  // is where the first record after this generation goes.
  const storage::Pager::LogPosition next = pager()->LogHead();
  std::shared_ptr<const index::BufferGeneration> gen = wb->Freeze();
  if (gen == nullptr) return;
  active_log_bytes_ = 0;
  next_record_[gen.get()] = next;
  merge_cv_.Signal();
}

void DBImpl::PublishBuffered(index::WriteBuffer* wb, uint64_t txid,
                             const std::vector<index::BufferChange>& changes,
                             uint64_t record_payload) {
  active_log_bytes_ += storage::LogRecordSize(record_payload);
  // Half the log, less a margin for the space a wrap leaves at its end.
  const bool log_full = active_log_bytes_ >= options_.log_size / 2 - options_.log_size / 16;
  if (wb->Publish(txid, changes) < buffer_budget_ && !log_full) return;
  // Full: hand it to the merger, once the one before it is merged, so the
  // buffer holds at most two generations (twice the budget). When the log
  // is what filled up, also once that merge's checkpoint has let go of its
  // records: the log then holds this generation and the next only.
  bool checkpoint = false;
  {
    storage::MutexLock l(&gen_mu_);
    const auto start = std::chrono::steady_clock::now();
    bool waited = false;
    while ((!wb->Frozen().empty() || (log_full && merge_checkpoint_pending_)) &&
           merge_error_.ok() && !stop_merger_) {
      waited = true;
      merged_cv_.Wait();
    }
    if (waited) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now() - start);
      merge_waits_.fetch_add(1, std::memory_order_relaxed);
      merge_wait_ns_.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
    }
    if (!merge_error_.ok() || stop_merger_) return;
    checkpoint = merge_checkpoint_skipped_;
    if (!checkpoint) {
      FreezeActive();
      return;
    }
  }
  // The merger merged the last generation while this writer held the token
  // and could not checkpoint: the log still holds its records. Let go of
  // them here, whether the log or the budget filled this generation: with a
  // small budget a merge can end before each next commit publishes, every
  // merge's checkpoint is skipped, and the log fills behind them. Should it
  // fail, the pager's sticky error fails the next commit.
  {
    storage::MutexLock m(&merge_mu_);
    (void)pager()->Checkpoint();
  }
  writer_checkpoints_.fetch_add(1, std::memory_order_relaxed);
  storage::MutexLock l(&gen_mu_);
  merge_checkpoint_skipped_ = false;
  FreezeActive();
}

Status DBImpl::MergeOldest() {
  std::shared_ptr<storage::Pager> p = pager();
  std::shared_ptr<index::WriteBuffer> wb = buffer();
  std::vector<std::shared_ptr<const index::BufferGeneration>> frozen = wb->Frozen();
  if (frozen.empty()) return Status::OK();
  const index::BufferGeneration* gen = frozen.front().get();
  storage::Pager::LogPosition next;
  {
    storage::MutexLock l(&gen_mu_);
    auto it = next_record_.find(gen);
    if (it == next_record_.end())
      return Status::Corruption("write buffer: a frozen generation without its log position");
    next = it->second;
  }
  // Its pages are written with WriteAt, not stores through the map: the
  // checkpoint's writeback then takes no TLB shootdown from the readers'
  // cores (storage::PageWrites).
  auto w = p->BeginWrite(storage::PageWrites::kWriteAt);
  if (!w.ok()) return w.status();
  TransactionImpl t(this, p, std::move(w.value()), /*read_only=*/false, Durability::kNone,
                    /*replaying=*/false);
  MMDOC_RETURN_IF_ERROR(t.MergeGeneration(gen, next));
  storage::MutexLock l(&gen_mu_);
  next_record_.erase(gen);
  if (t.runs_due()) runs_due_ = true;
  return Status::OK();
}

Status DBImpl::PublishMerge(storage::Txn* txn, const index::BufferGeneration* gen,
                            storage::Pager::LogPosition next_record,
                            std::shared_ptr<const CatalogCache> next) {
  storage::MutexLock l(&cache_mu_);
  MMDOC_RETURN_IF_ERROR(pager_->CommitMerge(txn, gen->last_txid(), next_record));
  cache_ = std::move(next);
  SnapshotChanged();
  return wbuf_->Drop(gen);
}

Status DBImpl::CheckpointAfterMerge() {
  std::shared_ptr<index::WriteBuffer> wb = buffer();
  std::shared_ptr<storage::Pager> p = pager();
  // While any record is unmerged the checkpoint keeps the log from it, and
  // commits append beside it. With none, it starts the log over, which
  // must not race an append: take the writer token, or leave it for later.
  const bool appending = !wb->Frozen().empty() || wb->active_bytes() > 0;
  if (!appending && !TryAcquireWriterToken()) {
    // A writer that waits for the log checkpoints in its place.
    storage::MutexLock l(&gen_mu_);
    merge_checkpoint_skipped_ = true;
    return Status::OK();
  }
  Status s = p->Checkpoint();
  if (!appending) ReleaseWriterToken();
  if (s.ok()) {
    storage::MutexLock l(&gen_mu_);
    merge_checkpoint_skipped_ = false;
  }
  return s;
}

Status DBImpl::MergeAll(bool checkpoint, std::string_view keep_runs_of) {
  storage::MutexLock m(&merge_mu_);
  {
    storage::MutexLock l(&gen_mu_);
    FreezeActive();
  }
  std::shared_ptr<index::WriteBuffer> wb = buffer();
  Status s;
  while (s.ok() && !wb->Frozen().empty()) s = MergeOldest();
  merged_cv_.SignalAll();
  // The runs in slices, each followed by a checkpoint, as the merger
  // does: the checkpoint lets the next slice reuse the pages the last one
  // replaced (rule 5b), so the file grows by about two slices, not by a
  // copy of every leaf the runs touch.
  const uint64_t slice = std::max<uint64_t>(run_slice_bytes(), kMinCloseSliceBytes);
  for (bool more = true; s.ok() && more;) {
    s = MergeRunsNow(1, slice, &more, keep_runs_of);
    if (s.ok() && more) s = pager()->Checkpoint();
  }
  if (s.ok()) {
    storage::MutexLock l(&gen_mu_);
    runs_due_ = false;
    runs_min_ = kRunsBeforeMerge;
  }
  if (s.ok() && checkpoint) s = pager()->Checkpoint();
  return s;
}

Status DBImpl::MergeBuffered(const char* what) {
  if (!buffered()) return Status::OK();
  if (read_only()) return ReadOnlyError();
  MMDOC_RETURN_IF_ERROR(NotWriting(what));
  WriterTokenHold token(this);
  return MergeAll(/*checkpoint=*/false);
}

Status DBImpl::Checkpoint() {
  if (read_only()) return ReadOnlyError();
  if (!buffered()) {
    for (;;) {
      std::shared_ptr<storage::Pager> p = pager();
      Status s = p->Checkpoint();
      // A compaction replaced the file meanwhile: checkpoint the copy.
      if (s.IsBusy() && p != pager()) continue;
      return s;
    }
  }
  MMDOC_RETURN_IF_ERROR(NotWriting("Checkpoint"));
  WriterTokenHold token(this);
  return MergeAll(/*checkpoint=*/true);
}

Status DBImpl::RetryFailedMerge() {
  {
    if (!merge_failed_.load(std::memory_order_acquire)) return Status::OK();
    storage::MutexLock l(&gen_mu_);
    if (merge_error_.ok()) return Status::OK();
  }
  MMDOC_RETURN_IF_ERROR(MergeAll(/*checkpoint=*/false));
  storage::MutexLock l(&gen_mu_);
  merge_error_ = Status::OK();
  merge_failed_.store(false, std::memory_order_release);
  return Status::OK();
}

namespace {

// The merger thread has no caller to throw to. A merge that runs out of
// memory unwinds (its txn aborts) and fails the pager: no write or
// checkpoint follows that could build on half-made state in memory, and
// the next Open replays every commit from the log.
Status MergeOutOfMemory(storage::Pager* pager) {
  Status s = Status::IOError("merging the write buffer: out of memory",
                             "every commit is in the log; close and reopen the database");
  pager->Fail(s);
  return s;
}

}  // namespace

void DBImpl::MergerLoop() {
  for (;;) {
    bool merge;
    bool build;
    bool runs = false;
    size_t runs_min = kRunsBeforeMerge;
    {
      // After a failed merge it waits for a commit to merge successfully
      // (RetryFailedMerge) before it merges again.
      storage::MutexLock l(&gen_mu_);
      for (;;) {
        if (stop_merger_) return;
        merge = merge_error_.ok() && !buffer()->Frozen().empty();
        if (merge || filters_due_ || (runs_due_ && merge_error_.ok())) break;
        merge_cv_.Wait();
      }
      if (merge) merge_checkpoint_pending_ = true;
      // Generations first, then runs: a writer may be waiting for a merge.
      if (!merge && runs_due_ && merge_error_.ok()) {
        runs = true;
        runs_min = runs_min_;
        runs_due_ = false;
        runs_min_ = kRunsBeforeMerge;
      }
      build = filters_due_ && !merge && !runs;
      if (build) filters_due_ = false;
    }
    if (runs) {
      // One slice, then back to the top: a generation frozen meanwhile is
      // merged before the next slice.
      Status s;
      bool more = false;
      {
        storage::MutexLock m(&merge_mu_);
        try {
          s = MergeRunsNow(runs_min, run_slice_bytes(), &more);
          if (s.ok()) s = CheckpointAfterMerge();
        } catch (const std::bad_alloc&) {
          s = MergeOutOfMemory(pager().get());
        }
      }
      {
        storage::MutexLock l(&gen_mu_);
        if (!s.ok()) MergeFailed(s);
        if (s.ok() && more) {
          runs_due_ = true;
          runs_min_ = std::min(runs_min_, runs_min);
        }
      }
      merged_cv_.SignalAll();  // a writer waits for a merge, or its failure
      DropStaleRead();         // the slice made the shared snapshot stale
      continue;
    }
    if (merge) {
      Status s;
      {
        storage::MutexLock m(&merge_mu_);
        try {
          s = MergeOldest();
          if (s.ok()) s = CheckpointAfterMerge();
        } catch (const std::bad_alloc&) {
          s = MergeOutOfMemory(pager().get());
        }
      }
      {
        storage::MutexLock l(&gen_mu_);
        merge_checkpoint_pending_ = false;
        if (!s.ok()) MergeFailed(s);
      }
      merged_cv_.SignalAll();
      DropStaleRead();  // the merge made the shared snapshot stale
    }
    // Merges come first: a writer may be waiting for one.
    if (build) {
      bool paused = false;
      try {
        (void)BuildKeyFilters(&paused);
      } catch (const std::bad_alloc&) {
        // The filter is left building and never handed over: reads go on
        // with the ready one, or none.
      }
      if (paused) {
        storage::MutexLock l(&gen_mu_);
        filters_due_ = true;
      }
    }
  }
}

index::TreeFilters DBImpl::KeyFiltersForWrite(std::string_view name, uint64_t keys) {
  bool started = false;
  index::TreeFilters f = buffer()->FiltersForWrite(name, keys, &started);
  if (started) {
    storage::MutexLock l(&gen_mu_);
    filters_due_ = true;
    merge_cv_.Signal();
  }
  return f;
}

Status DBImpl::BuildKeyFilters(bool* paused) {
  *paused = false;
  std::shared_ptr<index::WriteBuffer> wb = buffer();
  const auto building = wb->BuildingFilters();
  if (building.empty()) return Status::OK();
  // Any snapshot after the filters started will do: every write txn since
  // adds the keys it makes live. So does a scan resumed at a later one:
  // a key live then and before paused_at_ was either added before the
  // pause or made live since.
  std::shared_ptr<storage::Pager> p;
  std::unique_ptr<storage::Txn> txn;
  index::BufferView view;
  std::shared_ptr<const CatalogCache> cache;
  MMDOC_RETURN_IF_ERROR(Snapshot(&p, &txn, &view, &cache, /*internal=*/true));
  const uint64_t at = view.snapshot;
  const std::shared_ptr<index::KeyFilter> resume_filter = std::move(paused_filter_);
  paused_filter_.reset();
  TransactionImpl t(this, std::move(p), std::move(txn), /*read_only=*/true, Durability::kNone,
                    /*replaying=*/false);
  t.SetView(std::move(view));
  Status s;
  for (const auto& [name, filter] : building) {
    // "c:COLL" or "i:COLL\0FIELD" (CollectionTreeName, IndexTreeName).
    const std::string_view n = name;
    const size_t nul = n.find('\0');
    if (n.size() < 3 || (n[0] != 'c' && n[0] != 'i') || n[1] != ':') continue;
    CollState* c;
    s = t.Collection(n.substr(2, nul == n.npos ? n.npos : nul - 2), false, &c);
    if (!s.ok()) break;
    index::BufferedTree* tree = nullptr;
    if (c->exists && n[0] == 'c') tree = c->primary.get();
    for (size_t i = 0; c->exists && nul != n.npos && i < c->meta.indexes.size(); i++)
      if (c->meta.indexes[i].field == n.substr(nul + 1)) tree = c->index_trees[i].get();
    if (tree == nullptr) continue;  // dropped since: its filter is never used
    index::BufferedTree::Cursor cur(tree);
    const bool resume = resume_filter == filter;
    uint64_t added = 0;
    for (s = resume ? cur.Seek(paused_at_) : cur.SeekToFirst(); s.ok() && cur.Valid();
         s = cur.Next()) {
      filter->Add(cur.key());
      if (++added % 4096 != 0) continue;
      storage::MutexLock l(&gen_mu_);
      if (stop_merger_) {
        s = Status::Busy("closing");
        break;  // (not past the loop's Next, which would overwrite s)
      }
      if (merge_error_.ok() && !wb->Frozen().empty()) {
        paused_filter_ = filter;
        paused_at_.assign(cur.key());  // (added again on resuming: harmless)
        *paused = true;
        s = Status::Busy("a generation to merge");
        break;
      }
    }
    if (!s.ok()) break;  // a filter not finished stays a building one: it proves nothing
    wb->FinishFilter(name, filter.get(), at);
  }
  t.Abort();
  return s;
}

void DBImpl::StopMerger() {
  {
    storage::MutexLock l(&gen_mu_);
    stop_merger_ = true;
  }
  merge_cv_.SignalAll();
  merged_cv_.SignalAll();
  if (merger_.joinable()) merger_.join();
}

}  // namespace mmdoc
