// DB, Transaction and Cursor (the public API) over DBImpl, plus opening,
// recovery, the consistency checker, statistics and compaction.

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "engine/db_impl.h"
#include "storage/coding.h"
#include "storage/file_system.h"
#include "storage/format.h"
#include "storage/meta.h"

namespace mmdoc {

namespace {

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string ExplainInfo::ToJson() const {
  return "{\"plan\": " + JsonString(plan) + ", \"index\": " + JsonString(index) +
         (bounds.empty() ? std::string() : ", \"indexBounds\": " + bounds) +
         ", \"keysExamined\": " + std::to_string(keys_examined) +
         ", \"docsExamined\": " + std::to_string(docs_examined) +
         ", \"returned\": " + std::to_string(returned) +
         ", \"sortedInMemory\": " + (sorted_in_memory ? "true" : "false") +
         ", \"exactBounds\": " + (exact_bounds ? "true" : "false") +
         ", \"totalKeysExamined\": " + std::to_string(keys_examined) +
         ", \"totalDocsExamined\": " + std::to_string(docs_examined) +
         ", \"nReturned\": " + std::to_string(returned) + "}";
}

std::string DBStats::ToJson() const {
  std::string s = "{\"page_size\": " + std::to_string(page_size) +
                  ", \"file_size\": " + std::to_string(file_size) +
                  ", \"log_file_size\": " + std::to_string(log_file_size) +
                  ", \"log_size\": " + std::to_string(log_size) +
                  ", \"page_count\": " + std::to_string(page_count) +
                  ", \"free_pages\": " + std::to_string(free_pages);
  char fill[32];
  std::snprintf(fill, sizeof fill, "%.3f", fill_factor);
  s += ", \"fill_factor\": " + std::string(fill) + ", \"txid\": " + std::to_string(txid) +
       ", \"readers\": " + std::to_string(readers) +
       ", \"oldest_reader_txid\": " + std::to_string(oldest_reader_txid) +
       ", \"write_buffer_bytes\": " + std::to_string(write_buffer_bytes) +
       ", \"key_filter_bytes\": " + std::to_string(key_filter_bytes) +
       ", \"key_filters_ready\": " + std::to_string(key_filters_ready) +
       ", \"runs\": " + std::to_string(runs) + ", \"run_entries\": " + std::to_string(run_entries) +
       ", \"runs_merging\": " + std::to_string(runs_merging) +
       ", \"log_full_merges\": " + std::to_string(log_full_merges) +
       ", \"merge_waits\": " + std::to_string(merge_waits);
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.6f", merge_wait_seconds);
  s += ", \"merge_wait_seconds\": " + std::string(waited) +
       ", \"writer_checkpoints\": " + std::to_string(writer_checkpoints) + ", \"collections\": [";
  for (size_t i = 0; i < collections.size(); i++) {
    const CollectionStats& c = collections[i];
    if (i) s += ", ";
    s += "{\"name\": " + JsonString(c.name) + ", \"documents\": " + std::to_string(c.documents) +
         ", \"data_pages\": " + std::to_string(c.data_pages) + ", \"indexes\": [";
    for (size_t j = 0; j < c.indexes.size(); j++) {
      if (j) s += ", ";
      s += "{\"field\": " + JsonString(c.indexes[j].field) +
           ", \"unique\": " + (c.indexes[j].unique ? "true" : "false") +
           ", \"entries\": " + std::to_string(c.indexes[j].entries) +
           ", \"pages\": " + std::to_string(c.index_pages[j]) + "}";
    }
    s += "]}";
  }
  return s + "]}";
}

// ---------------------------------------------------------------- DBImpl --

DBImpl::DBImpl(std::string path, const Options& options)
    : path_(std::move(path)), options_(options) {
  const char* v = std::getenv("MMDOC_VERIFY");
  paranoid_ = options.paranoid_checks || (v != nullptr && std::strcmp(v, "1") == 0);
}

DBImpl::~DBImpl() { (void)Close(); }

Status DBImpl::Close() {
  InstallSharedRead(nullptr);  // its read txn would hold the pages the close merges into
  Status s;
  if (buffered() && merger_.joinable()) {  // not opened: nothing to merge
    // Everything buffered goes into the pages, so the pager's closing
    // checkpoint leaves the database clean; if that fails, the log keeps it.
    StopMerger();
    WriterTokenHold token(this);
    s = MergeAll(/*checkpoint=*/false);
  }
  std::shared_ptr<storage::Pager> p = pager();
  if (p == nullptr) return s;
  Status c = p->Close();
  return s.ok() ? c : s;
}

Status DBImpl::OpenPager() {
  storage::PagerOptions po;
  po.create_if_missing = options_.create_if_missing;
  po.page_size = options_.page_size;
  po.paranoid_checks = paranoid_;
  po.accept_log_loss = options_.accept_log_loss;
  po.lock_timeout_ms = options_.lock_timeout_ms;
  po.read_only = options_.read_only;
  po.fs = options_.file_system;
  po.log_size = options_.log_size;
  po.sync_interval_ms = options_.sync_interval_ms;
  std::copy(new_db_id_, new_db_id_ + 2, po.new_db_id);
  auto p = storage::Pager::Open(path_, po);
  if (!p.ok()) return p.status();
  std::shared_ptr<storage::Pager> pager = std::move(p.value());
  {
    storage::MutexLock l(&cache_mu_);
    pager_ = pager;
    SnapshotChanged();
  }
  if (buffered()) {
    Status s = pager->RecoverIntoMemory([this](uint64_t txid, std::string_view payload) {
      return ReplayIntoBuffer(txid, payload);
    });
    if (!s.IsNotSupported()) return s;
    // A record changes pages (a definition): the log is replayed again,
    // into pages, from a buffer that never saw it.
    storage::MutexLock l(&cache_mu_);
    wbuf_ = std::make_shared<index::WriteBuffer>();
    SnapshotChanged();
    active_log_bytes_ = 0;
  }
  return pager->Recover(
      [this](uint64_t txid, std::string_view payload) { return Replay(txid, payload); });
}

// Waiting for the writer from the thread that holds it would wait forever.
Status DBImpl::NotWriting(const char* what) {
  if (writer_thread_.load() != std::this_thread::get_id()) return Status::OK();
  return Status::Busy(std::string(what) +
                      ": a write transaction is open in this thread; commit or abort it first");
}

namespace {

// A child's count is one higher than its parent's was at the fork.
void CountFork() { DBImpl::forks_.fetch_add(1, std::memory_order_relaxed); }

// What every DB call checks first: closed, or in a child forked after the
// open; then UnusableError says which.
bool Unusable(const DBImpl* impl) { return impl == nullptr || impl->Forked(); }
Status UnusableError(const DBImpl* impl) {
  return impl == nullptr ? DBImpl::ClosedError() : impl->ForkedError();
}

}  // namespace

std::atomic<uint64_t> DBImpl::forks_{0};

Status DBImpl::ForkedError() const {
  return Status::InvalidArgument(path_,
                                 "opened before this process was forked: only the process that "
                                 "opened it may use it; open it here once that one has closed it");
}

Result<std::unique_ptr<DBImpl>> DBImpl::Open(const std::string& path, const Options& options,
                                             const uint64_t* new_db_id) {
  static std::once_flag fork_handler;
  std::call_once(fork_handler, [] { (void)pthread_atfork(nullptr, nullptr, CountFork); });
  if (path.empty()) return Status::InvalidArgument("database path is empty");
  // The system calls would stop at the NUL: another file, and the log's
  // name (path + "-log") the same as the data file's.
  if (path.find('\0') != std::string::npos)
    return Status::InvalidArgument("database path contains a NUL byte");
  if (options.sync_interval_ms == 0)
    return Status::InvalidArgument("sync_interval_ms must be positive");
  if (!IsDurability(options.durability))
    return Status::InvalidArgument("Options::durability is not a known mode");
  Result<std::string> resolved = FileSystemOf(options)->Resolve(path);
  if (!resolved.ok()) return resolved.status();
  std::unique_ptr<DBImpl> db(new DBImpl(*resolved, options));
  db->forks_at_open_ = forks_.load(std::memory_order_relaxed);
  if (new_db_id != nullptr) std::copy(new_db_id, new_db_id + 2, db->new_db_id_);
  uint64_t budget = options.write_buffer_size;
  // The variable replaces the default only: a size the caller chose stays.
  if (const char* env = std::getenv("MMDOC_WRITE_BUFFER");
      env != nullptr && budget == kDefaultWriteBufferSize)
    budget = std::strtoull(env, nullptr, 10);
  // A read-only open reads through a buffer too: the log replays into it,
  // and reads see the runs a killed session left; it is never merged.
  if (options.read_only && budget == 0) budget = kDefaultWriteBufferSize;
  if (budget > 0) {
    storage::MutexLock l(&db->cache_mu_);
    db->wbuf_ = std::make_shared<index::WriteBuffer>();
    db->buffer_budget_ = budget;
    db->SnapshotChanged();
  }
  MMDOC_RETURN_IF_ERROR(db->OpenPager());
  // A compaction killed midway left it. Read-only too: a shared lock keeps
  // compactions out as well, and the copy is not the database (on a
  // read-only file system it stays).
  db->RemoveCompactionCopy();
  if (options.read_only) return db;
  // Runs left by a buffered session: a database opened without a buffer
  // merges them now (its writes go straight to the trees); with one, the
  // merger merges them first, since their key filters are gone.
  // (A catalog too damaged to list is left for the reads and DB::Check
  // to report, as before.)
  bool runs = false;
  if (!db->HasRuns(&runs).ok()) runs = false;
  if (runs && budget == 0) MMDOC_RETURN_IF_ERROR(db->MergeRunsNow(1));
  if (runs && budget > 0) {
    storage::MutexLock l(&db->gen_mu_);
    db->runs_due_ = true;
    db->runs_min_ = 1;
  }
  if (budget > 0) {
    if (db->buffer()->active_bytes() >= budget) {
      // The log replayed into a full buffer: the merger starts with it.
      storage::MutexLock l(&db->gen_mu_);
      db->FreezeActive();
    }
    DBImpl* raw = db.get();
    try {
      db->merger_ = std::thread([raw] { raw->MergerLoop(); });
    } catch (const std::system_error& e) {  // no memory or threads left: an error, not a throw
      return Status::IOError("cannot start the write buffer's merger thread", e.what());
    }
  }
  return db;
}

Status DBImpl::Replay(uint64_t txid, std::string_view payload) {
  auto t = Begin(WriteOptions(), /*replaying=*/true);
  if (!t.ok()) return t.status();
  if (!runs_merged_for_replay_) {
    // The records replay into the trees, so the runs go in first.
    std::vector<std::string> dropped;
    bool more;
    Status m = t.value()->MergeRuns(1, /*budget=*/0, &dropped, &more);
    if (!m.ok()) return m;
    runs_merged_for_replay_ = true;
  }
  Status s = t.value()->ApplyLog(payload);
  if (s.IsFull() || s.IsIOError()) return s;  // the disk's failure, not the log's
  if (!s.ok()) return Status::Corruption("log record " + std::to_string(txid), s.ToString());
  return t.value()->Commit();
}

Status DBImpl::ReplayIntoBuffer(uint64_t txid, std::string_view payload) {
  // Open runs this before the merger starts, so no writer token is needed.
  std::shared_ptr<storage::Pager> p;
  std::unique_ptr<storage::Txn> txn;
  index::BufferView view;
  std::shared_ptr<const CatalogCache> cache;
  MMDOC_RETURN_IF_ERROR(Snapshot(&p, &txn, &view, &cache));
  TransactionImpl t(this, std::move(p), std::move(txn), /*read_only=*/false, Durability::kNone,
                    /*replaying=*/true);
  t.SetView(std::move(view));
  Status s = t.ApplyLog(payload);
  if (s.ok()) {
    s = t.CommitIntoBuffer(txid);
  } else {
    t.Abort();
  }
  if (s.ok()) active_log_bytes_ += storage::LogRecordSize(payload.size());
  if (s.ok() || s.IsNotSupported()) return s;
  return Status::Corruption("log record " + std::to_string(txid), s.ToString());
}

Result<std::unique_ptr<TransactionImpl>> DBImpl::Begin(const WriteOptions& wo, bool replaying) {
  if (read_only() && !replaying) return ReadOnlyError();
  MMDOC_RETURN_IF_ERROR(NotWriting("Begin"));
  const Durability d = wo.durability.value_or(options_.durability);
  // Checked before anything is logged: the log would keep a commit that
  // then failed on its mode.
  if (!IsDurability(d))
    return Status::InvalidArgument("WriteOptions::durability is not a known mode");
  writers_asked_.fetch_add(1);
  auto served = [&] {
    writers_served_.fetch_add(1);
    if (compact_waiting_.load() != 0) {
      storage::MutexLock l(&turn_mu_);  // not between Compact's check and its Wait
      turn_cv_.SignalAll();
    }
  };
  if (buffered() && !replaying) {
    // A buffered write txn reads a snapshot and writes no page until it
    // must (TransactionImpl::ToPages); writers take turns with the token.
    AcquireWriterToken();
    served();
    std::shared_ptr<storage::Pager> p;
    std::unique_ptr<storage::Txn> txn;
    index::BufferView view;
    std::shared_ptr<const CatalogCache> cache;
    std::shared_ptr<index::WriteBuffer> wb;
    Status s = Snapshot(&p, &txn, &view, &cache, false, &wb);
    if (s.ok()) s = p->BackgroundError();
    if (!s.ok()) {
      ReleaseWriterToken();
      return s;
    }
    writer_thread_.store(std::this_thread::get_id());
    auto t = std::make_unique<TransactionImpl>(this, std::move(p), std::move(txn), false, d, false,
                                               &cache);
    t->HoldToken();
    t->SetView(std::move(view));
    t->ReuseBufferedState(TakeWriteState(), std::move(wb));
    return t;
  }
  for (;;) {
    std::shared_ptr<storage::Pager> p = pager();
    auto txn = p->BeginWrite();
    if (!txn.ok()) {
      if (p != pager()) continue;  // compacted while waiting: begin on the new file
      served();
      return txn.status();
    }
    writer_thread_.store(std::this_thread::get_id());
    served();
    return std::make_unique<TransactionImpl>(this, std::move(p), std::move(txn.value()), false, d,
                                             replaying);
  }
}

Result<std::unique_ptr<TransactionImpl>> DBImpl::BeginRead() {
  if (buffered()) {
    std::shared_ptr<storage::Pager> p;
    std::unique_ptr<storage::Txn> txn;
    index::BufferView view;
    std::shared_ptr<const CatalogCache> cache;
    MMDOC_RETURN_IF_ERROR(Snapshot(&p, &txn, &view, &cache));
    std::unique_ptr<TransactionImpl> t;
    {
      storage::MutexLock l(&cache_mu_);
      if (!spare_reads_.empty()) {
        t = std::move(spare_reads_.back());
        spare_reads_.pop_back();
      }
    }
    if (t && t->pager() == p.get()) {
      t->Renew(std::move(txn), std::move(cache));
    } else {
      t = std::make_unique<TransactionImpl>(this, std::move(p), std::move(txn), true,
                                            Durability::kNone, false, &cache);
    }
    t->SetView(std::move(view));
    return t;
  }
  std::shared_ptr<storage::Pager> pager;
  std::unique_ptr<TransactionImpl> spare;
  std::shared_ptr<const CatalogCache> cache;
  {
    storage::MutexLock l(&cache_mu_);
    pager = pager_;
    cache = cache_;
    if (!spare_reads_.empty()) {
      spare = std::move(spare_reads_.back());
      spare_reads_.pop_back();
    }
  }
  auto txn = pager->BeginRead();
  if (!txn.ok()) return txn.status();
  if (spare && spare->pager() == pager.get()) {
    spare->Renew(std::move(txn.value()), std::move(cache));
    return spare;
  }
  return std::make_unique<TransactionImpl>(this, std::move(pager), std::move(txn.value()), true,
                                           Durability::kNone, false);
}

void DBImpl::KeepWriteState(std::unique_ptr<WriteState> s) {
  std::unique_ptr<WriteState> old;  // freed outside the lock
  storage::MutexLock l(&cache_mu_);
  old = std::move(kept_write_);
  kept_write_ = std::move(s);
}

std::unique_ptr<WriteState> DBImpl::TakeWriteState() {
  storage::MutexLock l(&cache_mu_);
  return std::move(kept_write_);
}

void DBImpl::EndRead(std::unique_ptr<TransactionImpl> t) {
  t->Abort();  // ends the snapshot; a reader that missed the cache fills it
  storage::MutexLock l(&cache_mu_);
  // A reader of a file Compact replaced is not renewed.
  if (spare_reads_.size() < kSpareReads && t->pager() == pager_.get()) {
    spare_reads_.push_back(std::move(t));
  }
}

Status DBImpl::Check(CheckReport* report) {
  CheckReport local;
  CheckReport& r = report ? *report : local;
  r = CheckReport();
  MMDOC_RETURN_IF_ERROR(NotWriting("Check"));
  if (buffered() && !read_only()) {
    // The pages, with every buffered change merged into them and none
    // arriving meanwhile. (Read-only: the pages and the buffer as they are.)
    WriterTokenHold token(this);
    // A merge that finds the disk full leaves the pages as they were.
    Status m = MergeAll(/*checkpoint=*/false);
    return m.ok() || m.IsFull() ? CheckPages(&r) : m;
  }
  return CheckPages(&r);
}

Status DBImpl::CheckPages(CheckReport* report) {
  CheckReport& r = *report;
  // A snapshot that keeps writers out, so the pager's free and pending lists
  // describe exactly the state the trees are walked in; it writes nothing.
  std::shared_ptr<storage::Pager> pager = this->pager();
  auto snap = pager->BeginQuiescent();
  if (!snap.ok()) return snap.status();
  auto tr = std::make_unique<TransactionImpl>(this, pager, std::move(snap.value()),
                                              /*read_only=*/true, Durability::kNone,
                                              /*replaying=*/false);
  TransactionImpl* t = tr.get();
  if (buffered()) {
    // Empty after Check's merge; what a merge that found the disk full left
    // buffered is walked with the pages, not skipped.
    std::shared_ptr<index::WriteBuffer> wb = buffer();
    index::BufferView view;
    wb->View(wb->last_txid(), &view);
    t->SetView(std::move(view));
  }
  auto problem = [&r](std::string p) { r.problems.push_back(std::move(p)); };

  Status s = pager->Verify();
  if (!s.ok()) problem(s.ToString());

  std::vector<storage::PageId> pages;
  s = t->catalog()->Verify(&pages);
  if (!s.ok()) problem("catalog: " + s.ToString());

  if (s.ok()) {
    std::vector<storage::PageId> accounted;
    Status a = pager->AccountedPages(&accounted);
    if (!a.ok()) problem(a.ToString());
    pages.insert(pages.end(), accounted.begin(), accounted.end());
    std::sort(pages.begin(), pages.end());
    const uint64_t count = t->txn()->page_count();
    r.pages_checked = pages.size();
    uint64_t expect = 2;
    int reported = 0;
    for (size_t i = 0; i < pages.size() && reported < 20; i++) {
      if (i > 0 && pages[i] == pages[i - 1]) {
        problem("page " + std::to_string(pages[i]) + " is reachable or free more than once");
        reported++;
        continue;
      }
      if (pages[i] < 2 || pages[i] >= count) {
        problem("page " + std::to_string(pages[i]) + " is out of range (page count " +
                std::to_string(count) + ")");
        reported++;
        continue;
      }
      if (pages[i] > expect) {
        problem("pages " + std::to_string(expect) + ".." + std::to_string(pages[i] - 1) +
                " are neither reachable nor free (leaked)");
        reported++;
      }
      expect = pages[i] + 1;
    }
    if (reported < 20 && expect < count)
      problem("pages " + std::to_string(expect) + ".." + std::to_string(count - 1) +
              " are neither reachable nor free (leaked)");
  }

  // Documents against indexes.
  auto names = t->ListCollections();
  if (!names.ok()) {
    problem(names.status().ToString());
  } else {
    for (const std::string& name : names.value()) {
      CollState* c;
      Status cs = t->ListedCollection(name, &c);
      if (!cs.ok()) {
        problem("collection " + name + ": " + cs.ToString());
        continue;
      }
      std::vector<uint64_t> expected(c->meta.indexes.size(), 0);
      uint64_t docs = 0;
      // A key filter must hold every live key (a missing one lets a
      // duplicate in): each key is looked up in its tree's ready filter.
      std::vector<index::TreeFilters> filters(c->meta.indexes.size() + 1);
      if (buffered()) {
        filters[0] = KeyFilters(CollectionTreeName(name));
        for (size_t i = 0; i < c->meta.indexes.size(); i++)
          filters[i + 1] = KeyFilters(IndexTreeName(name, c->meta.indexes[i].field));
      }
      auto filtered = [&](size_t tree, std::string_view key) {
        const index::KeyFilter* f = filters[tree].ready.get();
        return f == nullptr || f->MayContain(key);
      };
      index::BufferedTree::Cursor cur(c->primary.get());
      std::vector<std::string> keys;
      Status it;
      for (it = cur.SeekToFirst(); it.ok() && cur.Valid(); it = cur.Next()) {
        docs++;
        std::string_view d = cur.value();
        auto doc = Document::FromBson(reinterpret_cast<const uint8_t*>(d.data()), d.size());
        if (!doc.ok()) {
          problem("collection " + name + ": invalid stored document: " + doc.status().ToString());
          continue;
        }
        bson_value_t id;
        std::string pk;
        if (!engine::LookupPath(doc.value().data(), doc.value().size(), "_id", &id)) {
          problem("collection " + name + ": document without _id");
          continue;
        }
        engine::AppendKey(&id, &pk);
        if (pk != cur.key())
          problem("collection " + name +
                  ": document stored under the wrong key: " + Value::FromBsonValue(&id).ToJson());
        if (!filtered(0, cur.key()))
          problem("collection " + name + ": the key filter lacks _id " +
                  Value::FromBsonValue(&id).ToJson());
        for (size_t i = 0; i < c->meta.indexes.size(); i++) {
          const IndexMeta& m = c->meta.indexes[i];
          Status ks = IndexEntryKeys(m, doc.value().data(), doc.value().size(), &keys);
          if (!ks.ok()) {
            problem("collection " + name + ": document " + Value::FromBsonValue(&id).ToJson() +
                    " cannot be in index '" + m.field + "': " + ks.ToString());
            continue;
          }
          for (std::string& k : keys) {
            expected[i]++;
            if (!m.unique) k.append(pk);
            std::string_view owner;
            Status g = c->index_trees[i]->Get(k, &owner);
            if (!g.ok() || owner != pk) {
              problem("collection " + name + ": document " + Value::FromBsonValue(&id).ToJson() +
                      " missing from index '" + m.field + "'");
            }
            if (!filtered(i + 1, k))
              problem("collection " + name + ": the key filter of index '" + m.field +
                      "' lacks the key of " + Value::FromBsonValue(&id).ToJson());
            r.index_entries_checked++;
          }
        }
      }
      if (!it.ok()) problem("collection " + name + ": " + it.ToString());
      r.documents_checked += docs;
      if (docs != c->meta.count)
        problem("collection " + name + ": holds " + std::to_string(docs) +
                " documents but its count says " + std::to_string(c->meta.count));
      for (size_t i = 0; i < c->meta.indexes.size(); i++) {
        index::TreeStats st;
        Status v = c->index_trees[i]->tree()->Verify(nullptr, &st);
        if (!v.ok()) continue;  // reported by the catalog walk
        // (With runs left by a failed merge, they hold entries too.)
        const uint64_t entries = static_cast<uint64_t>(static_cast<int64_t>(st.entries) +
                                                       c->index_trees[i]->CountDelta());
        if (entries != expected[i])
          problem("collection " + name + ": index '" + c->meta.indexes[i].field + "' has " +
                  std::to_string(entries) + " entries, documents give " +
                  std::to_string(expected[i]));
      }
    }
  }
  t->Abort();
  if (r.problems.empty()) return Status::OK();
  std::string first = r.problems.front();
  if (r.problems.size() > 1) first += " (and " + std::to_string(r.problems.size() - 1) + " more)";
  return Status::Corruption("check failed", first);
}

Result<DBStats> DBImpl::Stats(const StatsOptions& options) {
  DBStats st;
  // Readers as the caller sees them: taken before our own snapshot opens.
  storage::PagerStats ps = pager()->Stats();
  auto tr = BeginRead();
  if (!tr.ok()) return tr.status();
  TransactionImpl* t = tr.value().get();
  st.page_size = t->txn()->page_size();
  st.file_size = ps.file_size;
  st.log_file_size = ps.log_file_size;
  st.log_size = options_.log_size;
  st.page_count = ps.page_count;
  st.free_pages = ps.free_pages + ps.pending_pages;
  st.txid = ps.txid;
  st.readers = ps.readers;
  st.oldest_reader_txid = ps.oldest_reader_txid;
  if (buffered()) {
    std::shared_ptr<index::WriteBuffer> wb = buffer();
    st.write_buffer_bytes = wb->active_bytes();
    for (const auto& g : wb->Frozen()) st.write_buffer_bytes += g->bytes();
    st.key_filter_bytes = wb->filter_bytes();
    st.key_filters_ready = wb->filters_ready();
    st.log_full_merges = log_full_merges_.load(std::memory_order_relaxed);
    st.merge_waits = merge_waits_.load(std::memory_order_relaxed);
    st.merge_wait_seconds =
        static_cast<double>(merge_wait_ns_.load(std::memory_order_relaxed)) / 1e9;
    st.writer_checkpoints = writer_checkpoints_.load(std::memory_order_relaxed);
  }
  uint64_t used = 0, cap = 0;
  auto names = t->ListCollections();
  if (!names.ok()) return names.status();
  for (const std::string& name : names.value()) {
    CollState* c;
    MMDOC_RETURN_IF_ERROR(t->ListedCollection(name, &c));
    CollectionStats cs;
    cs.name = name;
    cs.documents = c->meta.count;
    for (const auto& runs : c->runs) {
      st.runs += runs.size();
      for (const CachedRun& run : runs) {
        st.run_entries += run.entries;
        st.runs_merging += run.merging ? 1 : 0;
      }
    }
    index::TreeStats ts;
    if (options.count_pages) MMDOC_RETURN_IF_ERROR(c->primary->tree()->Verify(nullptr, &ts));
    cs.data_pages = ts.branch_pages + ts.leaf_pages + ts.overflow_pages;
    used += ts.used_bytes;
    cap += ts.capacity_bytes;
    for (size_t i = 0; i < c->meta.indexes.size(); i++) {
      index::TreeStats is;
      IndexInfo info;
      FillIndexInfo(c->meta.indexes[i], &info);
      if (options.count_pages) {
        MMDOC_RETURN_IF_ERROR(c->index_trees[i]->tree()->Verify(nullptr, &is));
        info.entries = static_cast<uint64_t>(static_cast<int64_t>(is.entries) +
                                             c->index_trees[i]->CountDelta());
      }
      cs.indexes.push_back(info);
      cs.index_pages.push_back(is.branch_pages + is.leaf_pages + is.overflow_pages);
      used += is.used_bytes;
      cap += is.capacity_bytes;
    }
    st.collections.push_back(std::move(cs));
  }
  st.fill_factor = cap ? static_cast<double>(used) / static_cast<double>(cap) : 0.0;
  return st;
}

Status DBImpl::CopyInto(TransactionImpl* src, const std::string& tmp,
                        std::shared_ptr<storage::Pager>* copy) {
  // Every collection and index definition, documents in _id order (so
  // pages fill), in transactions of 10,000 documents.
  Options o = options_;
  o.create_if_missing = true;
  o.durability = Durability::kNone;
  o.accept_log_loss = false;
  o.write_buffer_size = 0;
  uint64_t id[2];
  CopyId(pager().get(), id);
  auto dst = DBImpl::Open(tmp, o, id);
  if (!dst.ok()) return dst.status();
  auto names = src->ListCollections();
  if (!names.ok()) return names.status();
  for (const std::string& name : names.value()) {
    CollState* c;
    MMDOC_RETURN_IF_ERROR(src->ListedCollection(name, &c));
    auto w = dst.value()->Begin(WriteOptions());
    if (!w.ok()) return w.status();
    MMDOC_RETURN_IF_ERROR(w.value()->CreateCollection(name));
    MMDOC_RETURN_IF_ERROR(w.value()->Commit());
    index::BufferedTree::Cursor cur(c->primary.get());
    Status s = cur.SeekToFirst();
    while (s.ok() && cur.Valid()) {
      auto wt = dst.value()->Begin(WriteOptions());
      if (!wt.ok()) return wt.status();
      for (int n = 0; n < 10000 && s.ok() && cur.Valid(); n++, s = cur.Next()) {
        std::string_view d = cur.value();
        auto doc = Document::FromBson(reinterpret_cast<const uint8_t*>(d.data()), d.size());
        if (!doc.ok()) return Status::Corruption("compact: invalid stored document");
        MMDOC_RETURN_IF_ERROR(wt.value()->Insert(name, doc.value(), nullptr));
      }
      MMDOC_RETURN_IF_ERROR(wt.value()->Commit());
    }
    MMDOC_RETURN_IF_ERROR(s);
    for (const IndexMeta& m : c->meta.indexes) {
      auto wi = dst.value()->Begin(WriteOptions());
      if (!wi.ok()) return wi.status();
      MMDOC_RETURN_IF_ERROR(wi.value()->CreateIndex(name, m.keys, IndexMetaOptions(m)));
      MMDOC_RETURN_IF_ERROR(wi.value()->Commit());
    }
  }
  *copy = dst.value()->pager();
  return Status::OK();
}

Status DBImpl::Compact() {
  if (read_only()) return ReadOnlyError();
  MMDOC_RETURN_IF_ERROR(NotWriting("Compact"));
  {
    // The writers waiting now go first (see turn_mu_); later ones wait.
    storage::MutexLock l(&turn_mu_);
    compact_waiting_.fetch_add(1);
    const uint64_t waiting = writers_asked_.load();
    while (writers_served_.load() < waiting) turn_cv_.Wait();
    compact_waiting_.fetch_sub(1);
  }
  if (!buffered()) {
    // One compaction at a time: a second one copying the file the first
    // is replacing would put back a copy without the commits between.
    storage::MutexLock m(&merge_mu_);
    return CompactPages();
  }
  // Every buffered change into the pages, and writers kept out until the
  // copy has replaced the file.
  WriterTokenHold token(this);
  Status s = MergeAll(/*checkpoint=*/false);
  if (s.ok()) {
    storage::MutexLock m(&merge_mu_);
    s = CompactPages();
  }
  return s;
}

namespace {

// Whether the file at `path` is a database (or a log) whose id is `id`, or
// a data file nothing was written to yet (all zeros where the metas go).
bool CarriesId(storage::FileSystem* fs, const std::string& path, bool log, const uint64_t id[2]) {
  auto f = fs->Open(path, storage::OpenMode::kExisting);
  if (!f.ok()) return false;
  auto size = f.value()->Size();
  if (!size.ok()) return false;
  const uint64_t n = std::min<uint64_t>(size.value(), 2ull * storage::kMaxPageSize);
  std::vector<uint8_t> head(n);
  if (n > 0 && !f.value()->ReadAt(0, head.data(), n).ok()) return false;
  if (log) {
    return n >= storage::kLogHeaderDbIdOffset + 16 &&
           storage::DecodeFixed64(head.data() + storage::kLogHeaderDbIdOffset) == id[0] &&
           storage::DecodeFixed64(head.data() + storage::kLogHeaderDbIdOffset + 8) == id[1];
  }
  // (PickMeta reads no more than the two largest meta pages; the size is
  // for its check of the page count.)
  storage::Meta meta;
  storage::PageId slot;
  if (storage::PickMeta(head.data(), size.value(), path, &meta, &slot).ok()) {
    return meta.db_id[0] == id[0] && meta.db_id[1] == id[1];
  }
  return std::all_of(head.begin(), head.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

void DBImpl::CopyId(storage::Pager* p, uint64_t id[2]) {
  p->DatabaseId(id);
  id[0] ^= 0x636f6d7061637421ull;  // "compact!": any fixed change will do
}

void DBImpl::RemoveCompactionCopy() {
  storage::FileSystem* fs = FileSystem();
  const std::string tmp = path_ + ".compact";
  if (!fs->Exists(tmp) && !fs->Exists(tmp + "-log")) return;
  // With the database's lock held no other process is compacting it, so a
  // copy is a leftover; unless something holds it open as a database of
  // its own, which is left alone.
  if (fs->Exists(tmp)) {
    auto f = fs->Open(tmp, storage::OpenMode::kExisting);
    if (!f.ok() || !f.value()->TryLock().ok()) return;
  }
  // The copy's log can outlive its data file: MoveTo renames the data file
  // first, which then carries the database's own id.
  uint64_t copy[2], own[2];
  CopyId(pager().get(), copy);
  pager()->DatabaseId(own);
  const bool data = fs->Exists(tmp);
  if (data && !CarriesId(fs, tmp, false, copy)) return;
  // Beside the copy's data file, the log is the copy's (its header may not
  // be written yet); alone, it must say whose it is.
  const std::string log = tmp + "-log";
  if (fs->Exists(log) &&
      (data || CarriesId(fs, log, true, copy) || CarriesId(fs, log, true, own))) {
    (void)fs->Remove(log);
  }
  if (data) (void)fs->Remove(tmp);
}

Status DBImpl::CompactPages() {
  std::shared_ptr<storage::Pager> old = pager();
  MMDOC_RETURN_IF_ERROR(old->BackgroundError());
  // Writers wait from here until the copy has replaced the file; readers go
  // on, and those that began before keep the old file until they end.
  auto snap = old->BeginQuiescent();
  if (!snap.ok()) return snap.status();
  TransactionImpl src(this, old, std::move(snap.value()), /*read_only=*/true, Durability::kNone,
                      /*replaying=*/false);
  const std::string tmp = path_ + ".compact";
  RemoveCompactionCopy();  // what a compaction cut short left
  storage::FileSystem* fs = FileSystem();
  for (const std::string& f : {tmp, tmp + "-log"}) {
    if (fs->Exists(f)) {
      return Status::InvalidArgument(
          f, "exists and is not left by a compaction of " + path_ +
                 ": compaction writes its copy under that name; move the file away first");
    }
  }
  std::shared_ptr<storage::Pager> copy;
  Status s = CopyInto(&src, tmp, &copy);
  // The copy replaces files its owner may have kept private.
  if (s.ok()) s = fs->MatchAccess(path_, tmp);
  if (s.ok()) {
    const std::string log = path_ + "-log";
    s = fs->MatchAccess(fs->Exists(log) ? log : path_, tmp + "-log");
  }
  // The copy takes the database's name while both files stay locked, so no
  // other process opens either in between (storage::Pager::MoveTo).
  if (s.ok()) s = copy->MoveTo(path_);
  if (!s.ok() && !(copy && copy->path() == path_)) {
    copy.reset();
    RemoveCompactionCopy();  // a failed compaction (a full disk) leaves nothing behind
    return s;
  }
  // The catalog cache and the spare readers describe the old file: a page
  // number and txid of the old catalog could name a different state here.
  std::vector<std::unique_ptr<TransactionImpl>> spares;
  std::unique_ptr<WriteState> kept;
  {
    storage::MutexLock l(&cache_mu_);
    pager_ = copy;
    cache_ = nullptr;
    // The copy counts txids afresh; the old buffer is empty.
    if (wbuf_) wbuf_ = std::make_shared<index::WriteBuffer>();
    SnapshotChanged();
    active_log_bytes_ = 0;
    prepared_ = nullptr;
    spares.swap(spare_reads_);
    kept = std::move(kept_write_);
  }
  InstallSharedRead(nullptr);  // a snapshot of the old file
  old->Retire();               // before src ends and lets the writers waiting on it in
  return s;
}

// ------------------------------------------------------ public wrappers --

Cursor::Cursor(std::unique_ptr<CursorImpl> impl) : impl_(std::move(impl)) {}
Cursor::~Cursor() = default;
bool Cursor::Next() { return impl_->Next(); }
std::string_view Cursor::raw() const { return impl_->raw(); }
Document Cursor::document() const { return Document::FromTrustedBytes(std::string(impl_->raw())); }
Status Cursor::status() const { return impl_->status(); }
ExplainInfo Cursor::explain() const { return impl_->explain(); }

Transaction::Transaction(std::unique_ptr<TransactionImpl> impl) : impl_(std::move(impl)) {}
Transaction::~Transaction() {
  // A read transaction this ends goes back to its DB to be renewed by a
  // later BeginRead (it holds no snapshot meanwhile). One the caller
  // already finished does not touch the DB again: it may be gone.
  if (!impl_ || impl_->finished()) return;
  impl_->Uncount();
  if (impl_->read_only()) {
    DBImpl* db = impl_->db();
    db->EndRead(std::move(impl_));
  }
}
bool Transaction::read_only() const { return impl_->read_only(); }
Result<Document> Transaction::Get(std::string_view c, const Value& id) { return impl_->Get(c, id); }
Result<Document> Transaction::GetBy(std::string_view c, std::string_view field,
                                    const Value& value) {
  return impl_->GetBy(c, field, value);
}
Result<std::unique_ptr<Cursor>> Transaction::Find(std::string_view c, const Document& filter,
                                                  const FindOptions& options) {
  auto r = impl_->Find(c, filter, options);
  if (!r.ok()) return r.status();
  return std::unique_ptr<Cursor>(new Cursor(std::move(r.value())));
}
Result<uint64_t> Transaction::Count(std::string_view c, const Document& filter) {
  return impl_->Count(c, filter);
}
Result<std::vector<Value>> Transaction::Distinct(std::string_view c, std::string_view field,
                                                 const Document& filter) {
  return impl_->Distinct(c, field, filter);
}
Result<ExplainInfo> Transaction::Explain(std::string_view c, const Document& filter,
                                         const FindOptions& options) {
  auto r = impl_->Find(c, filter, options);
  if (!r.ok()) return r.status();
  while (r.value()->Next()) {
  }
  MMDOC_RETURN_IF_ERROR(r.value()->status());
  return r.value()->explain();
}
Result<std::vector<std::string>> Transaction::ListCollections() { return impl_->ListCollections(); }
Result<std::vector<IndexInfo>> Transaction::ListIndexes(std::string_view c) {
  return impl_->ListIndexes(c);
}
Status Transaction::Insert(std::string_view c, const Document& doc, Value* id) {
  return impl_->Insert(c, doc, id);
}
Status Transaction::Replace(std::string_view c, const Value& id, const Document& doc) {
  return impl_->Replace(c, id, doc);
}
Result<UpdateResult> Transaction::UpdateOne(std::string_view c, const Document& filter,
                                            const Document& update, const UpdateOptions& o) {
  return impl_->Update(c, filter, update, /*many=*/false, o);
}
Result<UpdateResult> Transaction::UpdateMany(std::string_view c, const Document& filter,
                                             const Document& update, const UpdateOptions& o) {
  return impl_->Update(c, filter, update, /*many=*/true, o);
}
Status Transaction::Update(std::string_view c, const Value& id, const Document& update) {
  return impl_->Update(c, id, update);
}
Status Transaction::Delete(std::string_view c, const Value& id) { return impl_->Delete(c, id); }
Result<std::optional<Document>> Transaction::FindOneAndUpdate(std::string_view c,
                                                              const Document& filter,
                                                              const Document& update,
                                                              const FindAndModifyOptions& o) {
  return impl_->FindOneAndModify(c, filter, &update, o);
}
Result<std::optional<Document>> Transaction::FindOneAndDelete(std::string_view c,
                                                              const Document& filter,
                                                              const FindAndModifyOptions& o) {
  return impl_->FindOneAndModify(c, filter, nullptr, o);
}
Result<uint64_t> Transaction::DeleteOne(std::string_view c, const Document& filter) {
  return impl_->DeleteMany(c, filter, /*many=*/false);
}
Result<uint64_t> Transaction::DeleteMany(std::string_view c, const Document& filter) {
  return impl_->DeleteMany(c, filter, /*many=*/true);
}
Status Transaction::CreateCollection(std::string_view c) { return impl_->CreateCollection(c); }
Status Transaction::DropCollection(std::string_view c) { return impl_->DropCollection(c); }
Status Transaction::CreateIndex(std::string_view c, std::string_view f, const IndexOptions& o) {
  return impl_->CreateIndex(c, f, o);
}
Status Transaction::CreateIndex(std::string_view c, const std::vector<IndexKey>& keys,
                                const IndexOptions& o) {
  return impl_->CreateIndex(c, keys, o);
}
Status Transaction::DropIndex(std::string_view c, std::string_view f) {
  return impl_->DropIndex(c, f);
}
// A transaction the caller finished lets go of its file at once: it may
// outlive its DB, which then must close.
Status Transaction::Commit() {
  Status s = impl_->Commit();
  if (impl_->finished()) {
    impl_->Uncount();
    impl_->ReleasePager();
  }
  return s;
}
void Transaction::Abort() {
  impl_->Abort();
  impl_->Uncount();
  impl_->ReleasePager();
}

DB::DB(std::unique_ptr<DBImpl> impl) : impl_(std::move(impl)), path_(impl_->path()) {}
DB::~DB() {
  // In a child forked after the open: its threads are gone and its locks
  // and files are the parent's, so neither closed nor freed.
  if (impl_ && impl_->Forked()) (void)impl_.release();
}

Status DB::Close() {
  if (!impl_) return close_status_;
  if (impl_->Forked()) {
    close_status_ = impl_->ForkedError();
    (void)impl_.release();  // as ~DB: nothing of the parent's touched
    return close_status_;
  }
  // Closing under them would free what they read (and the write one's
  // own thread would wait for itself): the caller finishes them first.
  if (const int open = impl_->OpenTransactions(); open > 0) {
    return Status::Busy(
        path_, std::to_string(open) + (open == 1 ? " transaction is still open: commit, abort or "
                                                   "destroy it first"
                                                 : " transactions are still open: commit, abort or "
                                                   "destroy them first"));
  }
  close_status_ = impl_->Close();
  impl_.reset();  // the files and the lock
  return close_status_;
}

Result<std::unique_ptr<DB>> DB::Open(std::string_view path, const Options& options) {
  auto impl = DBImpl::Open(std::string(path), options);
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<DB>(new DB(std::move(impl.value())));
}

Result<std::unique_ptr<Transaction>> DB::Begin(const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  auto t = impl_->Begin(o);
  if (!t.ok()) return t.status();
  t.value()->CountOpen();
  return std::unique_ptr<Transaction>(new Transaction(std::move(t.value())));
}

Result<std::unique_ptr<Transaction>> DB::BeginRead() {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  auto t = impl_->BeginRead();
  if (!t.ok()) return t.status();
  t.value()->CountOpen();
  return std::unique_ptr<Transaction>(new Transaction(std::move(t.value())));
}

namespace {

// Runs fn(TransactionImpl*) -> Result<T> in a read transaction that goes
// back to the DB afterwards (DBImpl::EndRead), as a Transaction's
// destructor hands back its own: the next read renews it instead of
// building one.
template <typename Fn>
auto InRead(DBImpl* db, Fn fn) -> decltype(fn(nullptr)) {
  auto t = db->BeginRead();
  if (!t.ok()) return t.status();
  auto r = fn(t.value().get());
  db->EndRead(std::move(t.value()));
  return r;
}

// Runs fn in a write transaction of its own and commits it.
template <typename Fn>
Status InWrite(DBImpl* db, const WriteOptions& o, Fn fn) {
  auto t = db->Begin(o);
  if (!t.ok()) return t.status();
  Status s = fn(t.value().get());
  if (!s.ok()) {
    t.value()->Abort();
    return s;
  }
  return t.value()->Commit();
}

}  // namespace

Status DB::Insert(std::string_view c, const Document& doc, Value* id, const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), o, [&](TransactionImpl* t) { return t->Insert(c, doc, id); });
}

Result<Document> DB::Get(std::string_view c, const Value& id) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return impl_->Get(c, id);
}

Result<Document> DB::GetBy(std::string_view c, std::string_view field, const Value& value) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return impl_->GetBy(c, field, value);
}

Status DB::Replace(std::string_view c, const Value& id, const Document& doc,
                   const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), o, [&](TransactionImpl* t) { return t->Replace(c, id, doc); });
}

namespace {

Result<UpdateResult> UpdateIn(DBImpl* db, std::string_view c, const Document& filter,
                              const Document& update, bool many, const UpdateOptions& uo,
                              const WriteOptions& o) {
  UpdateResult r;
  Status s = InWrite(db, o, [&](TransactionImpl* t) {
    auto u = t->Update(c, filter, update, many, uo);
    if (!u.ok()) return u.status();
    r = u.value();
    return Status::OK();
  });
  if (!s.ok()) return s;
  return r;
}

Result<uint64_t> DeleteIn(DBImpl* db, std::string_view c, const Document& filter, bool many,
                          const WriteOptions& o) {
  uint64_t n = 0;
  Status s = InWrite(db, o, [&](TransactionImpl* t) {
    auto d = t->DeleteMany(c, filter, many);
    if (!d.ok()) return d.status();
    n = d.value();
    return Status::OK();
  });
  if (!s.ok()) return s;
  return n;
}

}  // namespace

Result<UpdateResult> DB::UpdateOne(std::string_view c, const Document& filter,
                                   const Document& update, const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return UpdateIn(impl_.get(), c, filter, update, /*many=*/false, UpdateOptions(), o);
}

Result<UpdateResult> DB::UpdateMany(std::string_view c, const Document& filter,
                                    const Document& update, const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return UpdateIn(impl_.get(), c, filter, update, /*many=*/true, UpdateOptions(), o);
}

Result<UpdateResult> DB::UpdateOne(std::string_view c, const Document& filter,
                                   const Document& update, const UpdateOptions& uo,
                                   const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return UpdateIn(impl_.get(), c, filter, update, /*many=*/false, uo, o);
}

Result<UpdateResult> DB::UpdateMany(std::string_view c, const Document& filter,
                                    const Document& update, const UpdateOptions& uo,
                                    const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return UpdateIn(impl_.get(), c, filter, update, /*many=*/true, uo, o);
}

Status DB::Update(std::string_view c, const Value& id, const Document& update,
                  const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), o, [&](TransactionImpl* t) { return t->Update(c, id, update); });
}

Status DB::Delete(std::string_view c, const Value& id, const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), o, [&](TransactionImpl* t) { return t->Delete(c, id); });
}

Result<uint64_t> DB::DeleteOne(std::string_view c, const Document& filter, const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return DeleteIn(impl_.get(), c, filter, /*many=*/false, o);
}

Result<uint64_t> DB::DeleteMany(std::string_view c, const Document& filter, const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return DeleteIn(impl_.get(), c, filter, /*many=*/true, o);
}

Result<std::optional<Document>> DB::FindOneAndUpdate(std::string_view c, const Document& filter,
                                                     const Document& update,
                                                     const FindAndModifyOptions& fo,
                                                     const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  std::optional<Document> doc;
  Status s = InWrite(impl_.get(), o, [&](TransactionImpl* t) {
    auto r = t->FindOneAndModify(c, filter, &update, fo);
    if (!r.ok()) return r.status();
    doc = std::move(r.value());
    return Status::OK();
  });
  if (!s.ok()) return s;
  return doc;
}

Result<std::optional<Document>> DB::FindOneAndDelete(std::string_view c, const Document& filter,
                                                     const FindAndModifyOptions& fo,
                                                     const WriteOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  std::optional<Document> doc;
  Status s = InWrite(impl_.get(), o, [&](TransactionImpl* t) {
    auto r = t->FindOneAndModify(c, filter, nullptr, fo);
    if (!r.ok()) return r.status();
    doc = std::move(r.value());
    return Status::OK();
  });
  if (!s.ok()) return s;
  return doc;
}

Result<std::vector<Document>> DB::Find(std::string_view c, const Document& filter,
                                       const FindOptions& options) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InRead(impl_.get(), [&](TransactionImpl* t) -> Result<std::vector<Document>> {
    auto cur = t->Find(c, filter, options);
    if (!cur.ok()) return cur.status();
    std::vector<Document> out;
    while (cur.value()->Next())
      out.push_back(Document::FromTrustedBytes(std::string(cur.value()->raw())));
    MMDOC_RETURN_IF_ERROR(cur.value()->status());
    return out;
  });
}

Result<uint64_t> DB::Count(std::string_view c, const Document& filter) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InRead(impl_.get(), [&](TransactionImpl* t) { return t->Count(c, filter); });
}

Result<std::vector<Value>> DB::Distinct(std::string_view c, std::string_view field,
                                        const Document& filter) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InRead(impl_.get(), [&](TransactionImpl* t) { return t->Distinct(c, field, filter); });
}

Status DB::CreateCollection(std::string_view c) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), WriteOptions(),
                 [&](TransactionImpl* t) { return t->CreateCollection(c); });
}

Status DB::DropCollection(std::string_view c) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), WriteOptions(),
                 [&](TransactionImpl* t) { return t->DropCollection(c); });
}

Result<std::vector<std::string>> DB::ListCollections() {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InRead(impl_.get(), [](TransactionImpl* t) { return t->ListCollections(); });
}

Status DB::CreateIndex(std::string_view c, std::string_view f, const IndexOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), WriteOptions(),
                 [&](TransactionImpl* t) { return t->CreateIndex(c, f, o); });
}

Status DB::CreateIndex(std::string_view c, const std::vector<IndexKey>& keys,
                       const IndexOptions& o) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), WriteOptions(),
                 [&](TransactionImpl* t) { return t->CreateIndex(c, keys, o); });
}

Status DB::DropIndex(std::string_view c, std::string_view f) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InWrite(impl_.get(), WriteOptions(),
                 [&](TransactionImpl* t) { return t->DropIndex(c, f); });
}

Result<std::vector<IndexInfo>> DB::ListIndexes(std::string_view c) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return InRead(impl_.get(), [&](TransactionImpl* t) { return t->ListIndexes(c); });
}

Status DB::Check(CheckReport* report) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return impl_->Check(report);
}
Result<DBStats> DB::Stats(const StatsOptions& options) {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return impl_->Stats(options);
}
Status DB::Flush() {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return impl_->Flush();
}
Status DB::Checkpoint() {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return impl_->Checkpoint();
}
Status DB::Compact() {
  if (Unusable(impl_.get())) return UnusableError(impl_.get());
  return impl_->Compact();
}
const std::string& DB::path() const { return path_; }

}  // namespace mmdoc
