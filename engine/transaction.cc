// TransactionImpl: collections, documents and secondary indexes over one
// storage::Txn. See engine/db_impl.h for how documents map onto trees and
// what the log payload holds.

#include <algorithm>
#include <cassert>
#include <cstring>
#include <map>
#include <new>

#include "engine/db_impl.h"
#include "engine/key_pairs.h"
#include "engine/query_path.h"
#include "storage/coding.h"
#include "storage/thread_cache.h"

namespace mmdoc {

namespace {

// The log payload and CollectionMeta integers are little-endian
// (storage/coding.h; the formats are in engine/db_impl.h).
using storage::GetFixed32;
using storage::GetFixed64;
using storage::PutFixed32;
using storage::PutFixed64;

bool GetBytes(std::string_view* in, std::string_view* out) {
  uint32_t n;
  if (!GetFixed32(in, &n) || in->size() < n) return false;
  *out = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}

Status CheckCollectionName(std::string_view coll) {
  if (coll.empty()) return Status::InvalidArgument("collection name must not be empty");
  if (coll.find('\0') != std::string_view::npos)
    return Status::InvalidArgument("collection name must not contain a NUL byte");
  if (coll.size() > 200) return Status::InvalidArgument("collection name longer than 200 bytes");
  // Names are printed as JSON (stats, the server's listCollections).
  if (!bson_utf8_validate(coll.data(), coll.size(), false))
    return Status::InvalidArgument("collection name is not valid UTF-8");
  return Status::OK();
}

std::string KeyTooLarge(std::string_view what, size_t n) {
  return std::string(what) + " key is " + std::to_string(n) + " bytes; the limit is " +
         std::to_string(index::kMaxKeySize);
}

// The _id of a stored document (always its first field).
bool DocId(std::string_view doc, bson_value_t* id) {
  return engine::LookupPath(reinterpret_cast<const uint8_t*>(doc.data()), doc.size(), "_id", id);
}

// True when `filter` is exactly {_id: v} with v a plain value (not a
// document, array or regex): a point lookup on the _id tree that needs no
// filter parsing or cursor (MongoDB's IDHACK). Numbers of different types
// still match each other: the pk encoding makes 5 and 5.0 equal.
bool IdEquality(const Document& filter, bson_value_t* v) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, filter.data(), filter.size()) || !bson_iter_next(&it) ||
      std::strcmp(bson_iter_key(&it), "_id") != 0)
    return false;
  switch (bson_iter_type(&it)) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_REGEX:
    case BSON_TYPE_UNDEFINED:
      return false;
    default:
      break;
  }
  *v = *bson_iter_value(&it);
  return !bson_iter_next(&it);
}

// A field name the point plan takes: not empty, not an operator, not a
// dotted path (nor one with a NUL, which no BSON key holds).
bool PlainField(std::string_view f) {
  return !f.empty() && f[0] != '$' &&
         f.find_first_of(std::string_view(".\0", 2)) == std::string_view::npos;
}

// A filter {field: "string"} with a plain field name (PlainField): the
// point query CursorImpl::CreatePoint plans without parsing a filter.
bool PointFilter(const Document& filter, std::string_view* field, std::string_view* value) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, filter.data(), filter.size()) || !bson_iter_next(&it))
    return false;
  const uint32_t klen = bson_iter_key_len(&it);
  const char* key = bson_iter_key(&it);
  if (!PlainField(std::string_view(key, klen)) || !BSON_ITER_HOLDS_UTF8(&it)) return false;
  uint32_t len;
  const char* str = bson_iter_utf8(&it, &len);
  *field = std::string_view(key, klen);
  *value = std::string_view(str, len);
  return !bson_iter_next(&it);  // exactly one element
}

}  // namespace

std::string CollectionTreeName(std::string_view collection) {
  std::string s = "c:";
  s.append(collection);
  return s;
}

std::string IndexTreeName(std::string_view collection, std::string_view field) {
  std::string s = "i:";
  s.append(collection);
  s.push_back('\0');
  s.append(field);
  return s;
}

std::string CollectionMeta::Encode() const {
  std::string out;
  PutFixed64(&out, count);
  PutFixed32(&out, static_cast<uint32_t>(indexes.size()));
  for (const IndexMeta& i : indexes) {
    out.push_back(static_cast<char>((i.unique ? kUniqueFlag : 0) |
                                    (i.multikey ? kMultikeyFlag : 0) |
                                    (i.simple() ? 0 : kSpecFlag)));
    PutFixed32(&out, static_cast<uint32_t>(i.field.size()));
    out.append(i.field);
    if (!i.simple()) EncodeIndexSpec(i, &out);
  }
  return out;
}

bool CollectionMeta::Decode(std::string_view in, CollectionMeta* out) {
  uint32_t n;
  if (!GetFixed64(&in, &out->count) || !GetFixed32(&in, &n)) return false;
  out->indexes.clear();
  for (uint32_t i = 0; i < n; i++) {
    if (in.empty()) return false;
    IndexMeta m;
    const uint8_t flags = static_cast<uint8_t>(in[0]);
    m.unique = (flags & kUniqueFlag) != 0;
    m.multikey = (flags & kMultikeyFlag) != 0;
    in.remove_prefix(1);
    std::string_view f;
    if (!GetBytes(&in, &f)) return false;
    m.field.assign(f);
    m.keys.assign(1, IndexKey{m.field, 1});  // a simple index, as files before specs hold
    if ((flags & kSpecFlag) != 0 && (!DecodeIndexSpec(&in, &m) || m.field != f)) return false;
    out->indexes.push_back(std::move(m));
  }
  return in.empty();
}

namespace {

// Names the catalog state of `txn` (see CatalogCache).
bool CatalogKey(storage::Txn* txn, storage::PageId root, uint64_t* txid) {
  *txid = 0;
  if (root == 0) return true;
  const uint8_t* page;
  if (!txn->Get(root, &page).ok()) return false;
  *txid = storage::DecodeFixed64(page + storage::kPageTxidOffset);
  return true;
}

// Whether the catalog cache `c` describes the snapshot `txn` reads: the
// same catalog root page, carrying the same txid (see CatalogCache).
bool Describes(const CatalogCache* c, storage::Txn* txn) {
  const storage::PageId root = txn->root(index::kCatalogRootSlot);
  uint64_t txid;
  return c != nullptr && root == c->catalog_root && CatalogKey(txn, root, &txid) &&
         txid == c->catalog_txid;
}

// The cached state of `coll` when `c` describes the snapshot `txn` reads;
// null otherwise.
const CachedColl* CachedFor(storage::Txn* txn, const CatalogCache* c, std::string_view coll) {
  if (!Describes(c, txn)) return nullptr;
  auto hit = c->colls.find(coll);
  return hit == c->colls.end() ? nullptr : &hit->second;
}

// *name = CollectionTreeName(coll), or IndexTreeName(coll, field) for a
// field, left as it is when it already is (a thread's reads are mostly of
// one tree): a point read then builds no string.
void SetTreeName(std::string_view coll, std::string_view field, std::string* name) {
  const char* n = name->data();
  const size_t size = field.empty() ? coll.size() + 2 : coll.size() + field.size() + 3;
  if (name->size() == size && n[0] == (field.empty() ? 'c' : 'i') && n[1] == ':' &&
      std::memcmp(n + 2, coll.data(), coll.size()) == 0 &&
      (field.empty() || (n[2 + coll.size()] == '\0' &&
                         std::memcmp(n + 3 + coll.size(), field.data(), field.size()) == 0)))
    return;
  *name = field.empty() ? CollectionTreeName(coll) : IndexTreeName(coll, field);
}

}  // namespace

// The buffers DBImpl::Get and GetBy build keys and tree names in, one
// set per thread (distinct types: ThreadCache keeps one object per type).
struct GetBuffers {
  std::string key, tree;
};
struct GetByBuffers {
  std::string key, index_tree, tree;
};

// A point read on a snapshot's pages and write buffer together.
struct PointRead {
  // What the read reads: the shared snapshot, pinned in `slot` of the DB's
  // reader slots (shared_read.h), or, when every slot is taken, the
  // snapshot of its own below.
  storage::Txn* txn = nullptr;
  const index::BufferView* view = nullptr;
  const CatalogCache* cache = nullptr;
  DBImpl* pinned_by = nullptr;  // non-null while the shared one is pinned
  size_t slot = 0;

  // The snapshot of its own.
  std::shared_ptr<storage::Pager> own_pager;
  std::shared_ptr<const CatalogCache> own_cache;
  std::unique_ptr<storage::Txn> own_txn;
  // The thread's, so that its vector keeps its memory between reads; the
  // generations are let go when the read ends.
  index::BufferView& own_view = ThreadView();

  PointRead() = default;
  PointRead(const PointRead&) = delete;
  PointRead& operator=(const PointRead&) = delete;
  ~PointRead() {
    if (pinned_by != nullptr) pinned_by->EndPointRead(slot);
    own_view.generations.clear();
  }

  static index::BufferView& ThreadView() { return storage::ThreadCache<index::BufferView>::Get(); }

  // Looks `key` up in tree `name` (root `root`, runs `runs` of
  // CachedColl::runs): the newest buffered change first, then the runs,
  // then the pages. NotFound when absent or erased.
  Status Lookup(std::string_view name, storage::PageId root, const CachedColl& cc, size_t slot,
                std::string_view key, std::string_view* value) {
    const bool has_runs = slot < cc.runs.size() && !cc.runs[slot].empty();
    // Hashed only when a layer above the pages needs it.
    const uint64_t hash = view->generations.empty() && !has_runs ? 0 : index::KeyHash(key);
    if (!view->generations.empty()) {
      if (const index::BufferVersion* v = view->Find(name, key, hash)) {
        if (v->erased()) return Status::NotFound("");
        *value = v->value();
        return Status::OK();
      }
    }
    if (has_runs) {
      const std::vector<CachedRun>& runs = cc.runs[slot];
      for (const CachedRun& r : runs)
        if (r.filter != nullptr) r.filter->Prefetch(hash);
      for (const CachedRun& r : runs) {
        if (!index::RunMayHold(r.filter.get(), r.merged_below, key, hash)) continue;
        index::BTree run(txn, r.root, TreeKeyCodec());
        bool found;
        bool erased;
        MMDOC_RETURN_IF_ERROR(index::FindInRun(&run, key, &found, &erased, value));
        if (found) return erased ? Status::NotFound("") : Status::OK();
      }
    }
    index::BTree tree(txn, root, TreeKeyCodec());
    return tree.Get(key, value);  // NotFound for an oversized key too
  }
};

Status DBImpl::BeginPointRead(PointRead* r) {
  // Once this read has seen a current state installed, any state installed
  // from then on holds every commit that returned before the read began,
  // stale or not: a writer committing faster than states are built does
  // not make the read go round again. Two rounds at most, then a snapshot
  // of its own.
  bool settled = false;
  for (int round = 0; round < 2; round++) {
    const SharedRead* s;
    size_t slot;
    if (!reads_->Pin(&s, &slot)) break;  // every slot taken
    if (s != nullptr && (settled || Current(*s))) {
      // A file overwritten under readers alone is noticed within 64 reads
      // of a slot and CheckReadable's interval; once noticed, every read fails.
      if (s->pager->file_lost() || reads_->OneIn64(slot)) {
        if (Status here = s->pager->CheckReadable(); !here.ok()) {
          reads_->Unpin(slot);
          return here;
        }
      }
      r->txn = s->txn.get();
      r->view = &s->view;
      r->cache = s->cache.get();
      r->pinned_by = this;
      r->slot = slot;
      return Status::OK();
    }
    if (s != nullptr) reads_->Unpin(slot);
    // None, or stale: the first reader to get here installs a new one.
    std::vector<std::unique_ptr<SharedRead>> dead;  // freed after the lock
    storage::MutexLock l(reads_->mu());
    const SharedRead* now = reads_->installed();
    if (now == nullptr || !Current(*now)) {
      auto next = BuildSharedRead();
      if (!next.ok()) return next.status();
      reads_->Install(std::move(next.value()), &dead);
    }
    settled = true;
  }
  MMDOC_RETURN_IF_ERROR(OwnPointRead(r));
  r->txn = r->own_txn.get();
  r->view = &r->own_view;
  r->cache = r->own_cache.get();
  return Status::OK();
}

Status DBImpl::OwnPointRead(PointRead* r) {
  if (buffered()) return Snapshot(&r->own_pager, &r->own_txn, &r->own_view, &r->own_cache);
  PagerAndCache(&r->own_pager, &r->own_cache);
  auto read = r->own_pager->BeginRead();
  if (!read.ok()) return read.status();
  r->own_txn = std::move(read.value());
  return Status::OK();
}

Result<std::unique_ptr<TransactionImpl>> DBImpl::ReadOn(PointRead* r) {
  // The general path takes a snapshot of its own: a transaction keeps it.
  if (r->pinned_by != nullptr) {
    r->pinned_by = nullptr;
    EndPointRead(r->slot);
    MMDOC_RETURN_IF_ERROR(OwnPointRead(r));
  }
  auto t = std::make_unique<TransactionImpl>(this, std::move(r->own_pager), std::move(r->own_txn),
                                             true, Durability::kNone, false, &r->own_cache);
  if (buffered()) t->SetView(std::move(r->own_view));
  return t;
}

Result<Document> DBImpl::Get(std::string_view coll, const Value& id) {
  PointRead r;
  MMDOC_RETURN_IF_ERROR(BeginPointRead(&r));
  if (const CachedColl* cc = CachedFor(r.txn, r.cache, coll)) {
    // The key and tree name are built in buffers each thread keeps, so
    // that a lookup allocates only the document it returns.
    GetBuffers& b = storage::ThreadCache<GetBuffers>::Get();
    std::string& pk = b.key;
    std::string& name = b.tree;
    pk.clear();
    engine::AppendKey(id.get(), &pk);
    SetTreeName(coll, "", &name);
    std::string_view doc;
    Status s = r.Lookup(name, cc->primary_root, *cc, 0, pk, &doc);
    if (s.IsNotFound()) return Status::NotFound("no document with _id", id.ToJson());
    if (!s.ok()) return s;
    return Document::FromTrustedBytes(std::string(doc));
  }
  // A collection the cache does not know (or none): the general path.
  auto t = ReadOn(&r);
  if (!t.ok()) return t.status();
  return t.value()->Get(coll, id);
}

Result<Document> DBImpl::GetBy(std::string_view coll, std::string_view field, const Value& value) {
  if (field == "_id") return Get(coll, value);
  PointRead r;
  MMDOC_RETURN_IF_ERROR(BeginPointRead(&r));
  const CachedColl* cc = CachedFor(r.txn, r.cache, coll);
  // A string looked up through a unique index on a plain field name: what
  // CursorImpl::CreatePoint and NextFromPoint do for {field: "string"},
  // without the transaction, the filter and the cursor.
  if (cc != nullptr && value.type() == BSON_TYPE_UTF8 && PlainField(field)) {
    const std::vector<IndexMeta>& indexes = cc->meta.indexes;
    for (size_t i = 0; i < indexes.size(); i++) {
      if (indexes[i].field != field || !indexes[i].unique || !indexes[i].simple()) continue;
      GetByBuffers& b = storage::ThreadCache<GetByBuffers>::Get();
      std::string& key = b.key;
      key.clear();
      engine::AppendKey(value.get(), &key);
      std::string& index_name = b.index_tree;  // read only when buffered
      std::string& coll_name = b.tree;
      if (!r.view->generations.empty()) {
        SetTreeName(coll, field, &index_name);
        SetTreeName(coll, "", &coll_name);
      }
      std::string_view pk, doc;
      Status s = r.Lookup(index_name, cc->index_roots[i], *cc, i + 1, key, &pk);
      if (s.ok()) {
        s = r.Lookup(coll_name, cc->primary_root, *cc, 0, pk, &doc);
        if (s.IsNotFound())
          return Status::Corruption("index entry points at a missing document", field);
      }
      const bson_value_t* v = value.get();
      if (s.ok() &&
          !PointMatches(doc, field, std::string_view(v->value.v_utf8.str, v->value.v_utf8.len)))
        s = Status::NotFound("");
      if (s.IsNotFound())
        return Status::NotFound("no document with " + std::string(field), value.ToJson());
      if (!s.ok()) return s;
      return Document::FromTrustedBytes(std::string(doc));
    }
  }
  auto t = ReadOn(&r);
  if (!t.ok()) return t.status();
  return t.value()->GetBy(coll, field, value);
}

TransactionImpl::TransactionImpl(DBImpl* db, std::shared_ptr<storage::Pager> pager,
                                 std::unique_ptr<storage::Txn> txn, bool read_only,
                                 Durability durability, bool replaying,
                                 std::shared_ptr<const CatalogCache>* cache)
    : db_(db),
      pager_(std::move(pager)),
      txn_(std::move(txn)),
      read_only_(read_only),
      durability_(durability),
      replaying_(replaying) {
  if (cache != nullptr) {
    AdoptCache(std::move(*cache));  // taken with txn_, of pager_
  } else if (!replaying_) {
    std::shared_ptr<storage::Pager> current;
    std::shared_ptr<const CatalogCache> c;
    db_->PagerAndCache(&current, &c);
    // A cache of another file (compacted meanwhile) may name the same
    // pages and txids as a different state.
    if (current == pager_) AdoptCache(std::move(c));
  }
  // A buffered DB's writer takes its kept state after SetView
  // (ReuseBufferedState); its merges write pages with a catalog of their own.
  if (db_->buffered()) return;
  if (!read_only_ && !replaying_ && cache_) ReuseWriteState(db_->TakeWriteState());
  if (!read_only_ && !catalog_)
    catalog_ = std::make_unique<index::Catalog>(txn_.get(), &TreeKeyCodec());
}

void TransactionImpl::ReuseWriteState(std::unique_ptr<WriteState> s) {
  // A different cache object: something committed after that state's txn
  // (or the file was compacted), so its roots may be stale.
  if (!s || s->cache != cache_) return;
  for (const auto& [name, c] : s->colls) {
    // The cache was built from these states (NextCache); a mismatch would
    // be a bug, and starting afresh is always right.
    auto hit = cache_->colls.find(name);
    if (hit == cache_->colls.end() || hit->second.primary_root != c->primary->tree()->root() ||
        hit->second.index_roots.size() != c->index_trees.size())
      return;
    for (size_t i = 0; i < c->index_trees.size(); i++)
      if (hit->second.index_roots[i] != c->index_trees[i]->tree()->root()) return;
  }
  catalog_ = std::move(s->catalog);
  catalog_->Rebind(txn_.get());
  colls_ = std::move(s->colls);
  bufs_ = std::move(s->buffers);
  if (bufs_) bufs_->log.clear();
}

void TransactionImpl::ReuseBufferedState(std::unique_ptr<WriteState> s,
                                         std::shared_ptr<index::WriteBuffer> wb) {
  assert(buffered() && colls_.empty() && wb != nullptr);
  wbuf_ = std::move(wb);
  // The same cache object: no merge or page commit published since, so the
  // trees' roots and runs are the ones the states were built on.
  if (!s || s->cache == nullptr || s->cache != cache_) return;
  for (auto& [name, c] : s->colls) {
    auto hit = cache_->colls.find(name);
    if (hit == cache_->colls.end() || hit->second.index_roots.size() != c->index_trees.size() ||
        hit->second.primary_root != c->primary->tree()->root())
      return;  // the whole state is dropped, so the counts set so far do not matter
    c->meta.count = hit->second.meta.count;
  }
  for (auto& [name, c] : s->colls) {
    for (auto& t : c->owned) t->Rebind(txn_.get());
    c->meta_dirty = false;
    // While unchanged, the filters this writer got are current.
    const uint64_t filters = wbuf_->filters_version();
    for (size_t i = 0; i <= c->index_trees.size(); i++) {
      index::BufferedTree* t = i == 0 ? c->primary.get() : c->index_trees[i - 1].get();
      t->Renew(&view_);
      if (!t->FiltersCurrent(filters)) {
        t->UseFilters(db_->KeyFiltersForWrite(t->name(), c->meta.count));
      }
    }
    CountBuffered(c.get());
  }
  colls_ = std::move(s->colls);
  bufs_ = std::move(s->buffers);
  if (bufs_) bufs_->log.clear();
  s->colls.clear();
  s->cache.reset();
  state_shell_ = std::move(s);
}

void TransactionImpl::KeepBufferedState() {
  if (ddl_ || shape_changed_ || replaying_ || cache_ == nullptr || !poisoned_.ok()) return;
  std::unique_ptr<WriteState> keep =
      state_shell_ ? std::move(state_shell_) : std::make_unique<WriteState>();
  keep->cache = cache_;
  keep->colls.swap(colls_);
  for (auto it = keep->colls.begin(); it != keep->colls.end();)
    it = it->second->exists ? std::next(it) : keep->colls.erase(it);
  keep->buffers = std::move(bufs_);
  db_->KeepWriteState(std::move(keep));
}

void TransactionImpl::AdoptCache(std::shared_ptr<const CatalogCache> c) {
  if (Describes(c.get(), txn_.get())) cache_ = std::move(c);
}

index::Catalog* TransactionImpl::Cat() {
  if (!catalog_) catalog_ = std::make_unique<index::Catalog>(txn_.get(), &TreeKeyCodec());
  return catalog_.get();
}

bool TransactionImpl::Reusable() const {
  // Collections found in the cache own their trees (CollState::owned); any
  // other tree belongs to catalog_, which Abort frees.
  return read_only_ && !replaying_ && cache_ != nullptr && !cache_miss_;
}

void TransactionImpl::Renew(std::unique_ptr<storage::Txn> txn,
                            std::shared_ptr<const CatalogCache> cache) {
  assert(read_only_ && finished_);
  std::shared_ptr<const CatalogCache> old = std::move(cache_);
  cache_ = nullptr;
  txn_ = std::move(txn);
  finished_ = false;
  cache_miss_ = false;
  poisoned_ = Status::OK();
  AdoptCache(std::move(cache));
  // Trees over the buffer read the old view: the caller sets a new one.
  if (cache_ == nullptr || cache_ != old || has_view_) {
    colls_.clear();
    has_view_ = false;
    view_ = index::BufferView();
    return;
  }
  // The same catalog state (AdoptCache checked this snapshot's catalog
  // against it): every kept collection's trees have the same roots.
  for (auto& [name, c] : colls_)
    for (auto& t : c->owned) t->Rebind(txn_.get());
}

TransactionImpl::~TransactionImpl() { Abort(); }

void TransactionImpl::NewBuffers() { bufs_ = std::make_unique<WriteBuffers>(); }

void TransactionImpl::SetView(index::BufferView view) {
  assert(colls_.empty());
  view_ = std::move(view);
  has_view_ = true;
}

void TransactionImpl::EndWrite() {
  if (!read_only_ && merging_ == nullptr && !background_) db_->WriterDone();
}

void TransactionImpl::ReleaseToken() {
  db_->DropStaleRead();  // what this txn committed made it stale
  if (!holds_token_) return;
  holds_token_ = false;
  db_->ReleaseWriterToken();
}

Status TransactionImpl::Writable() {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  if (db_->Forked()) return db_->ForkedError();
  if (read_only_) return Status::NotSupported("write in a read-only transaction");
  writes_++;  // even a write that fails may have changed a tree and undone it
  return poisoned_;
}

Status TransactionImpl::Poison(Status s) {
  if (!s.ok() && poisoned_.ok()) poisoned_ = s;
  return s;
}

void TransactionImpl::Log(LogOp op, std::string_view coll, std::string_view arg) {
  if (replaying_) return;
  Buf().log.push_back(static_cast<char>(op));
  PutFixed32(&Buf().log, static_cast<uint32_t>(coll.size()));
  Buf().log.append(coll);
  PutFixed32(&Buf().log, static_cast<uint32_t>(arg.size()));
  Buf().log.append(arg);
}

std::unique_ptr<index::BufferedTree> TransactionImpl::Layer(index::BTree* t, std::string_view name,
                                                            uint64_t keys) {
  if (!has_view_) return std::make_unique<index::BufferedTree>(t);
  auto tree =
      std::make_unique<index::BufferedTree>(t, &view_, name, /*order=*/nullptr, !read_only_);
  if (!read_only_) tree->UseFilters(db_->KeyFiltersForWrite(name, keys));
  if (replaying_) tree->TrustWrites();  // recovery into the buffer
  return tree;
}

Status TransactionImpl::Collection(std::string_view coll, bool create, CollState** out) {
  auto it = colls_.find(coll);
  if (it != colls_.end() && (it->second->exists || !create)) {
    *out = it->second.get();
    return Status::OK();
  }
  MMDOC_RETURN_IF_ERROR(CheckCollectionName(coll));
  auto c = std::make_unique<CollState>();
  c->name.assign(coll);
  const std::string tree_name = CollectionTreeName(coll);
  // The cache describes the catalog this txn began on: after a definition
  // (ddl_) its entry may name trees the txn has dropped since, whose pages
  // are free (a collection dropped and then written again would adopt and
  // free them a second time). The catalog, which the txn keeps current, is
  // asked instead, as NextCache does not trust the cache then either.
  if (cache_ && !ddl_) {
    auto hit = cache_->colls.find(coll);
    if (hit != cache_->colls.end()) {
      c->exists = true;
      c->meta = hit->second.meta;
      if (read_only_ || has_view_) {
        auto own = [&](storage::PageId root) {
          c->owned.push_back(std::make_unique<index::BTree>(txn_.get(), root, TreeKeyCodec()));
          return c->owned.back().get();
        };
        c->primary = Layer(own(hit->second.primary_root), tree_name, c->meta.count);
        for (size_t i = 0; i < c->meta.indexes.size(); i++)
          c->index_trees.push_back(Layer(own(hit->second.index_roots[i]),
                                         IndexTreeName(coll, c->meta.indexes[i].field),
                                         c->meta.count));
      } else {
        c->primary =
            Layer(Cat()->Adopt(tree_name, hit->second.primary_root), tree_name, c->meta.count);
        for (size_t i = 0; i < c->meta.indexes.size(); i++) {
          const std::string name = IndexTreeName(coll, c->meta.indexes[i].field);
          c->index_trees.push_back(
              Layer(Cat()->Adopt(name, hit->second.index_roots[i]), name, c->meta.count));
        }
      }
      MMDOC_RETURN_IF_ERROR(LoadRuns(c.get(), &hit->second));
      CountBuffered(c.get());
      *out = (colls_[c->name] = std::move(c)).get();
      return Status::OK();
    }
  }
  std::string meta;
  Status s = Cat()->GetMeta(tree_name, &meta);
  if (s.IsNotFound()) {
    if (!create) {
      *out = (colls_[c->name] = std::move(c)).get();
      return Status::OK();
    }
    if (read_only_) return Status::NotSupported("write in a read-only transaction");
    if (buffered()) {  // a new collection's catalog entry is a page change
      MMDOC_RETURN_IF_ERROR(ToPages());
      return Collection(coll, create, out);
    }
    ddl_ = true;
    c->meta = CollectionMeta();
    s = Cat()->Create(tree_name, c->meta.Encode());
    if (!s.ok()) return Poison(s);
    c->meta_dirty = false;
  } else if (!s.ok()) {
    return s;
  } else if (!CollectionMeta::Decode(meta, &c->meta)) {
    return Status::Corruption("catalog entry of collection is damaged", coll);
  } else {
    cache_miss_ = true;
  }
  c->exists = true;
  index::BTree* t;
  MMDOC_RETURN_IF_ERROR(Cat()->Open(tree_name, &t));
  c->primary = Layer(t, tree_name, c->meta.count);
  for (const IndexMeta& m : c->meta.indexes) {
    const std::string name = IndexTreeName(coll, m.field);
    MMDOC_RETURN_IF_ERROR(Cat()->Open(name, &t));
    c->index_trees.push_back(Layer(t, name, c->meta.count));
  }
  MMDOC_RETURN_IF_ERROR(LoadRuns(c.get(), nullptr));
  CountBuffered(c.get());
  *out = (colls_[c->name] = std::move(c)).get();
  return Status::OK();
}

void TransactionImpl::CountBuffered(CollState* c) {
  if (c->primary->direct()) return;
  c->buffered_count = c->primary->CountDelta();
  c->meta.count = static_cast<uint64_t>(static_cast<int64_t>(c->meta.count) + c->buffered_count);
}

Status TransactionImpl::ListedCollection(std::string_view coll, CollState** out) {
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, out));
  if (!(*out)->exists || (*out)->primary == nullptr)
    return Status::Corruption("catalog lists a collection it cannot look up (damaged catalog tree)",
                              coll);
  return Status::OK();
}

// ---------------------------------------------------------------- reads --

Status TransactionImpl::FindById(std::string_view coll, const Value& id, CollState** c,
                                 std::string* pk, std::string_view* doc) {
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, c));
  Status s;
  if ((*c)->exists) {
    engine::AppendKey(id.get(), pk);
    s = pk->size() > index::kMaxKeySize ? Status::NotFound("") : (*c)->primary->Get(*pk, doc);
  }
  if (!(*c)->exists || s.IsNotFound()) return Status::NotFound("no document with _id", id.ToJson());
  return s;
}

Result<Document> TransactionImpl::Get(std::string_view coll, const Value& id) {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  CollState* c;
  std::string pk;
  std::string_view v;
  MMDOC_RETURN_IF_ERROR(FindById(coll, id, &c, &pk, &v));
  return Document::FromTrustedBytes(std::string(v));
}

Result<Document> TransactionImpl::GetBy(std::string_view coll, std::string_view field,
                                        const Value& value) {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  if (field.empty() || field.find('\0') != std::string_view::npos)
    return Status::InvalidArgument("bad field path", field);
  // {field: "string"} (Find's point plan) or {field: {$eq: value}}, so that
  // a document value is compared, not read as operators.
  bson_t b, eq;
  bson_init(&b);
  const int klen = static_cast<int>(field.size());
  bool ok;
  if (value.type() == BSON_TYPE_UTF8) {
    ok = bson_append_value(&b, field.data(), klen, value.get());
  } else {
    ok = bson_append_document_begin(&b, field.data(), klen, &eq) &&
         bson_append_value(&eq, "$eq", 3, value.get()) && bson_append_document_end(&b, &eq);
  }
  std::string bytes(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  if (!ok) return Status::InvalidArgument("value cannot be compared", value.ToJson());
  FindOptions options;
  options.limit = 1;
  auto cur = Find(coll, Document::FromTrustedBytes(std::move(bytes)), options);
  if (!cur.ok()) return cur.status();
  if (!cur.value()->Next()) {
    MMDOC_RETURN_IF_ERROR(cur.value()->status());
    return Status::NotFound("no document with " + std::string(field), value.ToJson());
  }
  return Document::FromTrustedBytes(std::string(cur.value()->raw()));
}

Result<std::unique_ptr<CursorImpl>> TransactionImpl::Find(std::string_view coll,
                                                          const Document& filter,
                                                          const FindOptions& options) {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  CollState* c = nullptr;
  std::string_view point_field, point_value;
  if (PointFilter(filter, &point_field, &point_value)) {
    MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
    auto cur = CursorImpl::CreatePoint(this, c, point_field, point_value, options);
    if (cur != nullptr) return cur;
  }
  auto f = engine::Filter::Parse(filter);
  if (!f.ok()) return f.status();
  if (c == nullptr) MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
  return CursorImpl::Create(this, c, std::move(f.value()), options);
}

Result<uint64_t> TransactionImpl::Count(std::string_view coll, const Document& filter) {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  auto f = engine::Filter::Parse(filter);
  if (!f.ok()) return f.status();
  CollState* c;
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
  if (!c->exists) return uint64_t{0};
  if (f.value().MatchesAll()) return c->meta.count;
  auto cur = CursorImpl::Create(this, c, std::move(f.value()), FindOptions());
  if (!cur.ok()) return cur.status();
  uint64_t n = 0;
  while (cur.value()->Next()) n++;
  MMDOC_RETURN_IF_ERROR(cur.value()->status());
  return n;
}

Result<std::vector<Value>> TransactionImpl::Distinct(std::string_view coll, std::string_view field,
                                                     const Document& filter) {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  for (size_t start = 0;;) {  // a dotted path: no empty part, no '$' but a DBRef's below the top
    const size_t dot = field.find('.', start);
    const std::string_view part = field.substr(start, dot == field.npos ? dot : dot - start);
    const bool dbref = start > 0 && engine::IsDbRefField(part);
    if (part.empty() || (part[0] == '$' && !dbref) || part.find('\0') != part.npos)
      return Status::InvalidArgument("bad distinct field", field);
    if (dot == field.npos) break;
    start = dot + 1;
  }
  auto f = engine::Filter::Parse(filter);
  if (!f.ok()) return f.status();
  CollState* c;
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
  std::vector<Value> out;
  if (!c->exists) return out;
  auto cur = CursorImpl::Create(this, c, std::move(f.value()), FindOptions());
  if (!cur.ok()) return cur.status();
  // Keyed by the order-preserving encoding: equal values (1, 1.0) share
  // one key, and the map's order is BSON order. The first value seen stays.
  std::map<std::string, Value> seen;
  std::string key;
  auto add = [&](const bson_value_t* v) {
    key.clear();
    engine::AppendKey(v, &key);
    if (seen.find(key) == seen.end()) seen.emplace(key, Value::FromBsonValue(v));
  };
  auto visit = [&](const bson_value_t* v) {
    if (v == nullptr) return false;  // missing: nothing
    if (v->value_type != BSON_TYPE_ARRAY) {
      add(v);
      return false;
    }
    bson_iter_t it;  // an array: each element ([] gives nothing)
    if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
      while (bson_iter_next(&it)) add(bson_iter_value(&it));
    }
    return false;
  };
  while (cur.value()->Next()) {
    std::string_view d = cur.value()->raw();
    engine::VisitPath(reinterpret_cast<const uint8_t*>(d.data()), d.size(), field, visit);
  }
  MMDOC_RETURN_IF_ERROR(cur.value()->status());
  out.reserve(seen.size());
  for (auto& [k, v] : seen) out.push_back(std::move(v));
  return out;
}

Result<std::vector<std::string>> TransactionImpl::ListCollections() {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  std::vector<std::string> names;
  MMDOC_RETURN_IF_ERROR(Cat()->List("c:", &names));
  for (std::string& n : names) n.erase(0, 2);
  return names;
}

Result<std::vector<IndexInfo>> TransactionImpl::ListIndexes(std::string_view coll) {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  CollState* c;
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
  if (!c->exists) return Status::NotFound("no such collection", coll);
  std::vector<IndexInfo> out;
  for (size_t i = 0; i < c->meta.indexes.size(); i++) {
    IndexInfo info;
    FillIndexInfo(c->meta.indexes[i], &info);
    index::TreeStats st;
    MMDOC_RETURN_IF_ERROR(c->index_trees[i]->tree()->Verify(nullptr, &st));
    info.entries =
        static_cast<uint64_t>(static_cast<int64_t>(st.entries) + c->index_trees[i]->CountDelta());
    out.push_back(std::move(info));
  }
  return out;
}

// --------------------------------------------------------------- writes --

void TransactionImpl::NoteKeyCount(CollState* c, size_t i, size_t nkeys) {
  if (nkeys > 1 && !c->meta.indexes[i].multikey) {
    c->meta.indexes[i].multikey = true;
    c->meta_dirty = true;
    shape_changed_ = true;  // a buffered commit has to write it into the catalog
  }
}

Status TransactionImpl::ComputeKeys(CollState* c, std::string_view doc, KeySets* out,
                                    const std::vector<char>* skip) {
  if (out->size() < c->meta.indexes.size()) out->resize(c->meta.indexes.size());
  for (size_t i = 0; i < c->meta.indexes.size(); i++) {
    if (doc.empty() || (skip != nullptr && (*skip)[i])) {
      (*out)[i].clear();
      continue;
    }
    IndexMeta& m = c->meta.indexes[i];
    if (m.simple()) {  // the common case, without IndexEntryKeys' checks
      // Writes over the last call's keys, reusing their memory.
      engine::IndexKeys(reinterpret_cast<const uint8_t*>(doc.data()), doc.size(), m.field,
                        &(*out)[i]);
      continue;
    }
    (*out)[i].clear();
    bool array = false;
    MMDOC_RETURN_IF_ERROR(IndexEntryKeys(m, reinterpret_cast<const uint8_t*>(doc.data()),
                                         doc.size(), &(*out)[i], &array));
    // Set early (an insert that then fails leaves it set): a multikey flag
    // too many only costs plan quality, one too few gives wrong answers.
    if (array && !m.multikey) {
      m.multikey = true;
      c->meta_dirty = true;
      shape_changed_ = true;
    }
  }
  return Status::OK();
}

Status TransactionImpl::CheckKeySizes(CollState* c, std::string_view pk, const KeySets& new_keys) {
  for (size_t i = 0; i < c->meta.indexes.size(); i++) {
    const IndexMeta& m = c->meta.indexes[i];
    for (const std::string& k : new_keys[i]) {
      size_t n = m.unique ? k.size() : k.size() + pk.size();
      if (n > index::kMaxKeySize)
        return Status::InvalidArgument("index key too large on index '" + m.field + "'",
                                       KeyTooLarge("index", n));
    }
  }
  return Status::OK();
}

Status TransactionImpl::CheckKeys(CollState* c, std::string_view pk, std::string_view new_doc,
                                  const KeySets& new_keys, const KeySets* old_keys) {
  MMDOC_RETURN_IF_ERROR(CheckKeySizes(c, pk, new_keys));
  for (size_t i = 0; i < c->meta.indexes.size(); i++) {
    const IndexMeta& m = c->meta.indexes[i];
    if (!m.unique) continue;
    for (const std::string& k : new_keys[i]) {
      if (old_keys != nullptr &&
          std::binary_search((*old_keys)[i].begin(), (*old_keys)[i].end(), k))
        continue;
      std::string_view owner;
      Status s = c->index_trees[i]->Get(k, &owner);
      if (s.ok() && owner != pk)
        return Status::AlreadyExists("duplicate key in unique index '" + m.field + "'",
                                     DescribeIndexKey(m, new_doc, k));
      if (!s.ok() && !s.IsNotFound()) return s;
    }
  }
  return Status::OK();
}

// A duplicate in a unique index is found by the index's own Put (kInsert),
// not by a lookup before writing, which would search each unique index a
// second time. A Put that finds a duplicate changes nothing, so only the entries this
// insert wrote before it are taken back out (UndoInsert).
Status TransactionImpl::InsertPrepared(CollState* c, std::string_view bson, std::string_view pk) {
  // Each tree's unique check and filter update is a cache miss or two at a
  // large buffer: started together here, they overlap (and the primary's
  // with computing the keys) instead of coming one after another.
  // Trees that write pages (no buffer) have nothing to prefetch.
  const bool prefetch = !c->primary->direct();
  if (prefetch) c->primary->Prefetch(pk);
  MMDOC_RETURN_IF_ERROR(ComputeKeys(c, bson, &Buf().new_keys));
  MMDOC_RETURN_IF_ERROR(CheckKeySizes(c, pk, Buf().new_keys));
  std::string& entry = Buf().entry;
  for (size_t i = 0; prefetch && i < c->meta.indexes.size(); i++) {
    for (const std::string& key : Buf().new_keys[i]) {
      entry.assign(key);
      if (!c->meta.indexes[i].unique) entry.append(pk);
      c->index_trees[i]->Prefetch(entry);
    }
  }
  Status s = c->primary->Put(pk, bson, index::PutMode::kInsert);
  if (s.IsAlreadyExists()) {
    bson_value_t id;
    DocId(bson, &id);
    return Status::AlreadyExists("duplicate _id", Value::FromBsonValue(&id).ToJson());
  }
  if (!s.ok()) return Poison(s);
  for (size_t i = 0; i < c->meta.indexes.size(); i++) {
    const IndexMeta& m = c->meta.indexes[i];
    const std::vector<std::string>& keys = Buf().new_keys[i];
    for (size_t j = 0; j < keys.size(); j++) {
      entry.assign(keys[j]);
      if (!m.unique) entry.append(pk);
      // A replay into the buffer knows the entry is new (TrustWrites).
      s = c->index_trees[i]->Put(entry, pk,
                                 m.unique || (replaying_ && has_view_) ? index::PutMode::kInsert
                                                                       : index::PutMode::kUpsert);
      if (s.IsAlreadyExists()) {
        MMDOC_RETURN_IF_ERROR(UndoInsert(c, pk, i, j));
        return Status::AlreadyExists("duplicate key in unique index '" + m.field + "'",
                                     DescribeIndexKey(m, bson, keys[j]));
      }
      if (!s.ok()) return Poison(s);
    }
  }
  for (size_t i = 0; i < c->meta.indexes.size(); i++) NoteKeyCount(c, i, Buf().new_keys[i].size());
  c->meta.count++;
  c->meta_dirty = true;
  return Status::OK();
}

Status TransactionImpl::UndoInsert(CollState* c, std::string_view pk, size_t index, size_t keys) {
  std::string& entry = Buf().entry;
  for (size_t i = 0; i <= index; i++) {
    const IndexMeta& m = c->meta.indexes[i];
    const size_t n = i < index ? Buf().new_keys[i].size() : keys;
    for (size_t j = 0; j < n; j++) {
      entry.assign(Buf().new_keys[i][j]);
      if (!m.unique) entry.append(pk);
      Status s = c->index_trees[i]->Delete(entry);
      if (!s.ok()) return Poison(s);
    }
  }
  Status s = c->primary->Delete(pk);
  if (!s.ok()) return Poison(s);
  return Status::OK();
}

Status TransactionImpl::Insert(std::string_view coll, const Document& doc, Value* id) {
  MMDOC_RETURN_IF_ERROR(Writable());
  std::string& bson = Buf().doc;
  std::string& pk = Buf().pk;
  auto prepare = [&]() -> Status {
    MMDOC_RETURN_IF_ERROR(engine::PrepareForInsert(doc, &bson, id));
    bson_value_t idv;
    if (!DocId(bson, &idv)) return Status::InvalidArgument("document without _id");
    pk.clear();
    engine::AppendKey(&idv, &pk);
    if (pk.size() > index::kMaxKeySize)
      return Status::InvalidArgument("_id too large", KeyTooLarge("_id", pk.size()));
    return Status::OK();
  };
  MMDOC_RETURN_IF_ERROR(prepare());
  CollState* c;
  const uint64_t states = states_;
  MMDOC_RETURN_IF_ERROR(Collection(coll, true, &c));
  // Creating the collection may have moved a buffered txn onto the pages
  // (ToPages), which redoes its inserts through Buf(): bson and pk then
  // hold the last of them, not this document.
  if (states_ != states) MMDOC_RETURN_IF_ERROR(prepare());
  MMDOC_RETURN_IF_ERROR(InsertPrepared(c, bson, pk));
  Log(LogOp::kInsert, coll, bson);
  return Status::OK();
}

Status TransactionImpl::ReplaceAt(CollState* c, std::string_view pk, std::string_view old_doc,
                                  std::string_view new_doc, const engine::Update* update) {
  const std::vector<char>* skip = nullptr;
  if (update != nullptr) {
    skip_index_.assign(c->meta.indexes.size(), 0);
    for (size_t i = 0; i < c->meta.indexes.size(); i++)
      skip_index_[i] = !IndexMayChange(c->meta.indexes[i], *update);
    skip = &skip_index_;
  }
  // Keys first: old_doc may point into a page the primary Put rewrites.
  MMDOC_RETURN_IF_ERROR(ComputeKeys(c, old_doc, &Buf().old_keys, skip));
  MMDOC_RETURN_IF_ERROR(ComputeKeys(c, new_doc, &Buf().new_keys, skip));
  MMDOC_RETURN_IF_ERROR(CheckKeys(c, pk, new_doc, Buf().new_keys, &Buf().old_keys));
  std::string& entry = Buf().entry;
  for (size_t i = 0; i < c->meta.indexes.size(); i++) {
    if (skip != nullptr && (*skip)[i]) continue;  // keys unchanged
    const IndexMeta& m = c->meta.indexes[i];
    const std::vector<std::string>& olds = Buf().old_keys[i];
    const std::vector<std::string>& news = Buf().new_keys[i];
    NoteKeyCount(c, i, news.size());
    if (olds == news) continue;
    for (const std::string& k : olds) {
      if (std::binary_search(news.begin(), news.end(), k)) continue;
      entry.assign(k);
      if (!m.unique) entry.append(pk);
      // A key of the document just read: live, with no descent to prove it.
      Status s = c->index_trees[i]->DeleteLive(entry);
      if (!s.ok())
        return Poison(s.IsNotFound() ? Status::Corruption("index entry missing", m.field) : s);
    }
    for (const std::string& k : news) {
      if (std::binary_search(olds.begin(), olds.end(), k)) continue;
      entry.assign(k);
      if (!m.unique) entry.append(pk);
      Status s = c->index_trees[i]->Put(
          entry, pk, m.unique ? index::PutMode::kInsert : index::PutMode::kUpsert);
      if (!s.ok()) return Poison(s);
    }
  }
  // Its old document was just read here: live, with no second look.
  Status s = c->primary->UpdateLive(pk, new_doc);
  if (!s.ok()) return Poison(s);
  return Status::OK();
}

Status TransactionImpl::Replace(std::string_view coll, const Value& id, const Document& doc) {
  MMDOC_RETURN_IF_ERROR(Writable());
  CollState* c;
  std::string pk;
  std::string_view old;
  MMDOC_RETURN_IF_ERROR(FindById(coll, id, &c, &pk, &old));
  // The caller's document as given: a second _id must be refused, not
  // dropped with the first below.
  MMDOC_RETURN_IF_ERROR(engine::CheckFieldNames(doc.data(), doc.size()));
  // The new document gets the same _id, first. One it names must be the
  // stored one, type included ({_id: 1.0} does not replace _id 1), as an
  // update's must.
  const std::string_view new_id = engine::IdElement(doc.data(), doc.size());
  if (!new_id.empty() &&
      new_id != engine::IdElement(reinterpret_cast<const uint8_t*>(old.data()), old.size()))
    return Status::InvalidArgument("replacement changes _id", id.ToJson());
  bson_t b;
  doc.View(&b);
  bson_t* with_id = bson_new();
  // The stored _id, not `id`: 1.0 finds the document with _id 1, whose _id
  // stays 1 (found by an outside test: it became 1.0).
  bson_t stored;
  bson_iter_t it;
  if (bson_init_static(&stored, reinterpret_cast<const uint8_t*>(old.data()), old.size()) &&
      bson_iter_init_find(&it, &stored, "_id")) {
    bson_append_iter(with_id, "_id", 3, &it);
  } else {
    bson_append_value(with_id, "_id", 3, id.get());
  }
  bson_iter_init(&it, &b);
  while (bson_iter_next(&it)) {
    if (std::strcmp(bson_iter_key(&it), "_id") == 0) continue;
    bson_append_iter(with_id, bson_iter_key(&it), -1, &it);
  }
  std::string bson(reinterpret_cast<const char*>(bson_get_data(with_id)), with_id->len);
  bson_destroy(with_id);
  if (bson.size() > kMaxDocumentSize)
    return Status::InvalidArgument("document larger than 16 MiB", std::to_string(bson.size()));
  MMDOC_RETURN_IF_ERROR(ReplaceAt(c, pk, old, bson));
  Log(LogOp::kReplace, coll, bson);
  return Status::OK();
}

template <typename Fn>
Status TransactionImpl::ForEachMatch(std::string_view coll, const Document& filter, bool many,
                                     CollState** c, Fn fn) {
  bson_value_t idv;
  const bool by_id = IdEquality(filter, &idv);
  engine::Filter f;
  if (!by_id) {
    auto parsed = engine::Filter::Parse(filter);
    if (!parsed.ok()) return parsed.status();
    f = std::move(parsed.value());
  }
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, c));
  if (!(*c)->exists) return Status::OK();
  if (by_id) {
    // Not copied first: fn reads it in place, as ReplaceAt and DeleteAt allow.
    std::string& pk = Buf().pk;
    pk.clear();
    engine::AppendKey(&idv, &pk);
    if (pk.size() > index::kMaxKeySize) return Status::OK();
    std::string_view doc;
    Status s = (*c)->primary->Get(pk, &doc);
    if (s.IsNotFound()) return Status::OK();
    MMDOC_RETURN_IF_ERROR(s);
    return fn(std::string_view(pk), doc);
  }
  FindOptions fo;
  if (!many) fo.limit = 1;
  auto cur = CursorImpl::Create(this, *c, std::move(f), fo);
  if (!cur.ok()) return cur.status();
  std::vector<std::pair<std::string, std::string>> targets;  // pk, doc
  while (cur.value()->Next()) {
    std::string_view d = cur.value()->raw();
    bson_value_t id;
    if (!DocId(d, &id)) return Status::Corruption("stored document without _id");
    std::string pk;
    engine::AppendKey(&id, &pk);
    targets.emplace_back(std::move(pk), std::string(d));
  }
  MMDOC_RETURN_IF_ERROR(cur.value()->status());
  for (const auto& [pk, doc] : targets) MMDOC_RETURN_IF_ERROR(fn(pk, doc));
  return Status::OK();
}

Status TransactionImpl::ParseUpdate(const Document& update, std::unique_ptr<engine::Update>* own,
                                    engine::Update** u) {
  // Parsed into the writer's kept Update, which then allocates nothing; a
  // large update into one of its own, so that the kept one stays small.
  constexpr size_t kKeptUpdateBytes = 64 << 10;
  std::unique_ptr<engine::Update>& slot = update.size() <= kKeptUpdateBytes ? Buf().update : *own;
  if (slot == nullptr) slot = std::make_unique<engine::Update>();
  *u = slot.get();
  bson_t b;
  update.View(&b);
  return engine::Update::ParseInto(&b, *u);
}

Status TransactionImpl::UpdateAt(CollState* c, std::string_view coll, std::string_view pk,
                                 std::string_view doc, const engine::Update& u, UpdateResult* r) {
  r->matched++;
  std::string& out = Buf().doc;
  out.clear();
  const engine::UpdateContext context;
  MMDOC_RETURN_IF_ERROR(
      u.Apply(reinterpret_cast<const uint8_t*>(doc.data()), doc.size(), context, &out));
  if (out == doc) return Status::OK();
  MMDOC_RETURN_IF_ERROR(ReplaceAt(c, pk, doc, out, &u));
  Log(LogOp::kReplace, coll, out);
  r->modified++;
  return Status::OK();
}

Result<UpdateResult> TransactionImpl::Update(std::string_view coll, const Document& filter,
                                             const Document& update, bool many,
                                             const UpdateOptions& options) {
  MMDOC_RETURN_IF_ERROR(Writable());
  std::unique_ptr<engine::Update> own;
  engine::Update* parsed;
  MMDOC_RETURN_IF_ERROR(ParseUpdate(update, &own, &parsed));
  engine::Update& u = *parsed;
  // MongoDB's rule: one replacement document would make every match alike.
  if (many && u.is_replacement()) {
    return Status::InvalidArgument(
        "UpdateMany takes update operators ($set, ...), not a replacement document");
  }
  MMDOC_RETURN_IF_ERROR(u.BindQuery(filter));  // for the positional $
  const engine::UpdateContext context;
  CollState* c;
  UpdateResult r;
  MMDOC_RETURN_IF_ERROR(ForEachMatch(coll, filter, many, &c,
                                     [&](std::string_view pk, std::string_view doc) -> Status {
                                       return UpdateAt(c, coll, pk, doc, u, &r);
                                     }));
  if (options.upsert && r.matched == 0) {
    // Nothing matched: insert what the filter and the update describe
    // (Insert logs it, so replay inserts the same document, _id included).
    std::string doc;
    MMDOC_RETURN_IF_ERROR(u.UpsertDocument(filter, context, &doc));
    Value id;
    MMDOC_RETURN_IF_ERROR(Insert(coll, Document::FromTrustedBytes(std::move(doc)), &id));
    r.upserted_id = std::move(id);
  }
  return r;
}

Status TransactionImpl::DeleteAt(CollState* c, std::string_view pk, std::string_view old_doc) {
  MMDOC_RETURN_IF_ERROR(ComputeKeys(c, old_doc, &Buf().old_keys));
  std::string& entry = Buf().entry;
  for (size_t i = 0; i < c->meta.indexes.size(); i++) {
    const IndexMeta& m = c->meta.indexes[i];
    for (const std::string& k : Buf().old_keys[i]) {
      entry.assign(k);
      if (!m.unique) entry.append(pk);
      // A key of the document just read: live, with no descent to prove it.
      Status s = c->index_trees[i]->DeleteLive(entry);
      if (!s.ok())
        return Poison(s.IsNotFound() ? Status::Corruption("index entry missing", m.field) : s);
    }
  }
  Status s = c->primary->DeleteLive(pk);  // old_doc was just read here
  if (!s.ok()) return Poison(s);
  c->meta.count--;
  c->meta_dirty = true;
  return Status::OK();
}

Status TransactionImpl::Update(std::string_view coll, const Value& id, const Document& update) {
  MMDOC_RETURN_IF_ERROR(Writable());
  std::unique_ptr<engine::Update> own;
  engine::Update* u;
  MMDOC_RETURN_IF_ERROR(ParseUpdate(update, &own, &u));
  // No query names an array element: a positional $ fails in Apply, as
  // UpdateOne's does with the filter {_id: id}.
  MMDOC_RETURN_IF_ERROR(u->BindQuery(Document()));
  CollState* c;
  std::string& pk = Buf().pk;  // its memory kept between calls
  pk.clear();
  std::string_view old;
  MMDOC_RETURN_IF_ERROR(FindById(coll, id, &c, &pk, &old));
  UpdateResult r;
  return UpdateAt(c, coll, pk, old, *u, &r);
}

Status TransactionImpl::Delete(std::string_view coll, const Value& id) {
  MMDOC_RETURN_IF_ERROR(Writable());
  CollState* c;
  std::string& pk = Buf().pk;  // its memory kept between calls
  pk.clear();
  std::string_view old;
  MMDOC_RETURN_IF_ERROR(FindById(coll, id, &c, &pk, &old));
  MMDOC_RETURN_IF_ERROR(DeleteAt(c, pk, old));
  Log(LogOp::kDelete, coll, pk);
  return Status::OK();
}

Result<std::optional<Document>> TransactionImpl::FindOneAndModify(
    std::string_view coll, const Document& filter, const Document* update,
    const FindAndModifyOptions& options) {
  MMDOC_RETURN_IF_ERROR(Writable());
  // Parsed first, so that a bad update or projection changes nothing.
  engine::Projection projection;
  if (!options.projection.empty()) {
    auto p = engine::Projection::Parse(options.projection);
    if (!p.ok()) return p.status();
    projection = std::move(p.value());
  }
  // The document returned, projected (without a projection, as it is).
  auto shaped = [&projection](Document d) {
    if (projection.empty()) return std::optional<Document>(std::move(d));
    std::string out;
    projection.Apply(d.data(), d.size(), &out);
    return std::optional<Document>(Document::FromTrustedBytes(std::move(out)));
  };
  std::optional<engine::Update> u;
  if (update != nullptr) {
    auto parsed = engine::Update::Parse(*update);
    if (!parsed.ok()) return parsed.status();
    u.emplace(std::move(parsed.value()));
    MMDOC_RETURN_IF_ERROR(u->BindQuery(filter));  // for the positional $
  }
  // The target: the first match in the requested order, by its _id.
  FindOptions fo;
  fo.sort_field = options.sort_field;
  fo.sort_direction = options.sort_direction;
  fo.limit = 1;
  std::optional<Document> before;
  {
    auto cur = Find(coll, filter, fo);
    if (!cur.ok()) return cur.status();
    if (cur.value()->Next()) before = Document::FromTrustedBytes(std::string(cur.value()->raw()));
    MMDOC_RETURN_IF_ERROR(cur.value()->status());
  }
  const engine::UpdateContext context;
  if (!before) {
    if (u && options.upsert) {
      std::string doc;
      MMDOC_RETURN_IF_ERROR(u->UpsertDocument(filter, context, &doc));
      Value id;
      MMDOC_RETURN_IF_ERROR(Insert(coll, Document::FromTrustedBytes(std::move(doc)), &id));
      if (options.return_after) {
        auto stored = Get(coll, id);  // as Insert stored it (_id first)
        if (!stored.ok()) return stored.status();
        return shaped(std::move(stored.value()));
      }
    }
    return std::optional<Document>();
  }
  bson_value_t id;
  if (!DocId(before->bytes(), &id)) return Status::Corruption("stored document without _id");
  const Value id_value = Value::FromBsonValue(&id);
  if (!u) {
    MMDOC_RETURN_IF_ERROR(Delete(coll, id_value));
    return shaped(std::move(*before));
  }
  CollState* c;
  std::string pk;
  std::string_view doc;
  MMDOC_RETURN_IF_ERROR(FindById(coll, id_value, &c, &pk, &doc));
  std::string& out = Buf().doc;
  out.clear();
  MMDOC_RETURN_IF_ERROR(
      u->Apply(reinterpret_cast<const uint8_t*>(doc.data()), doc.size(), context, &out));
  if (out != doc) {
    MMDOC_RETURN_IF_ERROR(ReplaceAt(c, pk, doc, out, &*u));
    Log(LogOp::kReplace, coll, out);
  }
  return shaped(options.return_after ? Document::FromTrustedBytes(out) : std::move(*before));
}

Result<uint64_t> TransactionImpl::DeleteMany(std::string_view coll, const Document& filter,
                                             bool many) {
  MMDOC_RETURN_IF_ERROR(Writable());
  CollState* c;
  if (many) {
    auto f = engine::Filter::Parse(filter);
    if (!f.ok()) return f.status();
    if (f.value().MatchesAll()) return DeleteAll(coll);
  }
  uint64_t n = 0;
  MMDOC_RETURN_IF_ERROR(ForEachMatch(coll, filter, many, &c,
                                     [&](std::string_view pk, std::string_view doc) -> Status {
                                       MMDOC_RETURN_IF_ERROR(DeleteAt(c, pk, doc));
                                       Log(LogOp::kDelete, coll, pk);
                                       n++;
                                       return Status::OK();
                                     }));
  return n;
}

Result<uint64_t> TransactionImpl::DeleteAll(std::string_view coll) {
  // Frees whole trees, so it writes pages (ToPages). The collection's runs
  // are freed with them instead of merged in first, which would copy every
  // leaf about to be freed (and grow the file by as much while the
  // replaced pages wait for a checkpoint). That needs this to be the txn's
  // first write: its earlier operations are redone in pages, which must
  // hold the runs' changes.
  if (buffered()) MMDOC_RETURN_IF_ERROR(ToPages(Buf().log.empty() ? coll : std::string_view()));
  CollState* c;
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
  if (!c->exists) return uint64_t{0};
  // The trees are emptied by freeing their pages instead of deleting entry
  // by entry with rebalancing; each stays registered in the catalog with
  // root 0, the empty tree. One log record says so: naming every document
  // held the whole list of _ids in memory (45 MB for a million) and in the
  // log. The buffer is in pages here (ToPages), so the catalog's count and
  // the _id tree's runs' make the collection's.
  int64_t live = static_cast<int64_t>(c->meta.count);
  if (!c->runs.empty())
    for (const CachedRun& r : c->runs[0]) live += r.count_delta;
  const uint64_t n = live > 0 ? static_cast<uint64_t>(live) : 0;
  for (const auto& slot : c->runs)
    for (const CachedRun& r : slot) {
      Status s = Cat()->Drop(r.name);
      if (!s.ok()) return Poison(s);
      freed_runs_.push_back(r.name);
    }
  c->runs.clear();
  for (auto& t : c->index_trees) {
    Status s = t->tree()->Drop();
    if (!s.ok()) return Poison(s);
  }
  Status s = c->primary->tree()->Drop();
  if (!s.ok()) return Poison(s);
  c->meta.count = 0;
  c->meta_dirty = true;
  Log(LogOp::kDeleteAll, coll, {});
  return n;
}

Status TransactionImpl::CreateCollection(std::string_view coll) {
  MMDOC_RETURN_IF_ERROR(Writable());
  if (buffered()) MMDOC_RETURN_IF_ERROR(ToPages());
  MMDOC_RETURN_IF_ERROR(CheckCollectionName(coll));
  CollState* c;
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
  if (c->exists) return Status::AlreadyExists("collection exists", coll);
  MMDOC_RETURN_IF_ERROR(Collection(coll, true, &c));
  Log(LogOp::kCreateCollection, coll, {});
  return Status::OK();
}

Status TransactionImpl::DropCollectionState(CollState* c) {
  ddl_ = true;
  dropped_[CollectionTreeName(c->name)] = ++states_;
  for (const IndexMeta& m : c->meta.indexes) {
    Status s = Cat()->Drop(IndexTreeName(c->name, m.field));
    if (!s.ok()) return Poison(s);
  }
  Status s = Cat()->Drop(CollectionTreeName(c->name));
  if (!s.ok()) return Poison(s);
  colls_.erase(c->name);
  return Status::OK();
}

Status TransactionImpl::DropCollection(std::string_view coll) {
  MMDOC_RETURN_IF_ERROR(Writable());
  if (buffered()) MMDOC_RETURN_IF_ERROR(ToPages());
  CollState* c;
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
  if (!c->exists) return Status::NotFound("no such collection", coll);
  MMDOC_RETURN_IF_ERROR(DropCollectionState(c));
  Log(LogOp::kDropCollection, coll, {});
  return Status::OK();
}

Status TransactionImpl::CreateIndex(std::string_view coll, std::string_view field,
                                    const IndexOptions& o) {
  return CreateIndex(coll, std::vector<IndexKey>{IndexKey{std::string(field), 1}}, o);
}

Status TransactionImpl::CreateIndex(std::string_view coll, const std::vector<IndexKey>& keys,
                                    const IndexOptions& o) {
  MMDOC_RETURN_IF_ERROR(Writable());
  IndexMeta spec;
  MMDOC_RETURN_IF_ERROR(MakeIndexMeta(keys, o, &spec));
  if (buffered()) MMDOC_RETURN_IF_ERROR(ToPages());
  const std::string name = spec.field;
  CollState* c;
  MMDOC_RETURN_IF_ERROR(Collection(coll, true, &c));
  for (const IndexMeta& m : c->meta.indexes)
    if (m.field == name) return Status::AlreadyExists("index exists", name);
  const std::string tree_name = IndexTreeName(coll, name);
  ddl_ = true;
  Status s = Cat()->Create(tree_name, {});
  if (!s.ok()) return Poison(s);
  index::BTree* tree;
  s = Cat()->Open(tree_name, &tree);
  if (!s.ok()) return Poison(s);
  c->meta.indexes.push_back(spec);
  c->index_trees.push_back(Layer(tree, tree_name, c->meta.count));
  if (!c->runs.empty()) c->runs.resize(c->meta.indexes.size() + 1);  // a new tree has none
  const size_t i = c->meta.indexes.size() - 1;
  // Build from the documents already there. On a violation, drop the
  // half-built tree so nothing of the index is left behind.
  auto undo = [&](Status err) -> Status {
    c->meta.indexes.pop_back();
    c->index_trees.pop_back();
    if (!c->runs.empty()) c->runs.resize(c->meta.indexes.size() + 1);
    Status d = Cat()->Drop(tree_name);
    if (!d.ok()) return Poison(d);
    return err;
  };
  std::vector<std::string> doc_keys;
  index::BufferedTree::Cursor cur(c->primary.get());
  // Gather (key, pk) first: writing the index while a cursor walks the
  // primary tree is fine (different trees), but collecting keeps the
  // sort-then-insert path that fills index pages compactly.
  KeyPairs entries;
  entries.Reserve(std::min<uint64_t>(c->meta.count, uint64_t{1} << 24));  // a hint, capped
  for (s = cur.SeekToFirst(); s.ok() && cur.Valid(); s = cur.Next()) {
    std::string_view doc = cur.value();
    bool array = false;
    Status k = IndexEntryKeys(spec, reinterpret_cast<const uint8_t*>(doc.data()), doc.size(),
                              &doc_keys, &array);
    if (!k.ok()) return undo(k);
    if (spec.simple()) {
      NoteKeyCount(c, i, doc_keys.size());
    } else if (array) {
      c->meta.indexes[i].multikey = true;
    }
    const std::string_view pk = cur.key();
    for (std::string& k : doc_keys) {
      if (!o.unique) k.append(pk);
      if (k.size() > index::kMaxKeySize)
        return undo(Status::InvalidArgument("index key too large on index '" + name + "'",
                                            KeyTooLarge("index", k.size())));
      entries.Add(k, pk, !o.unique);
    }
  }
  if (!s.ok()) return undo(s);
  entries.Sort();
  for (size_t j = 1; o.unique && j < entries.size(); j++) {
    if (entries.key(j) != entries.key(j - 1)) continue;
    std::string_view doc;
    Status g = c->primary->Get(entries.id(j), &doc);
    std::string val = g.ok() ? DescribeIndexKey(spec, doc, entries.key(j)) : "?";
    return undo(
        Status::AlreadyExists("cannot build unique index on '" + name + "': duplicate value", val));
  }
  for (size_t j = 0; j < entries.size(); j++) {
    s = c->index_trees[i]->Put(entries.key(j), entries.id(j), index::PutMode::kUpsert);
    if (!s.ok()) return Poison(s);
  }
  c->meta_dirty = true;
  std::string arg(
      1, static_cast<char>((o.unique ? kUniqueFlag : 0) | (spec.simple() ? 0 : kSpecFlag)));
  if (spec.simple()) {
    arg.append(name);
  } else {
    EncodeIndexSpec(spec, &arg);
  }
  Log(LogOp::kCreateIndex, coll, arg);
  return Status::OK();
}

Status TransactionImpl::DropIndex(std::string_view coll, std::string_view field) {
  MMDOC_RETURN_IF_ERROR(Writable());
  if (buffered()) MMDOC_RETURN_IF_ERROR(ToPages());
  ddl_ = true;
  CollState* c;
  MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
  if (!c->exists) return Status::NotFound("no such collection", coll);
  for (size_t i = 0; i < c->meta.indexes.size(); i++) {
    if (c->meta.indexes[i].field != field) continue;
    dropped_[IndexTreeName(coll, field)] = ++states_;
    Status s = Cat()->Drop(IndexTreeName(coll, field));
    if (!s.ok()) return Poison(s);
    c->meta.indexes.erase(c->meta.indexes.begin() + i);
    c->index_trees.erase(c->index_trees.begin() + i);
    // Definitions merge every run first (ToPages), so none is lost here.
    if (c->runs.size() > i + 1) c->runs.erase(c->runs.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    c->meta_dirty = true;
    Log(LogOp::kDropIndex, coll, field);
    return Status::OK();
  }
  return Status::NotFound("no index on field", field);
}

// --------------------------------------------------------------- commit --

Status TransactionImpl::Commit() {
  if (finished_) return Status::InvalidArgument("transaction already finished");
  if (db_->Forked()) return db_->ForkedError();  // its pages and log are the parent's
  if (read_only_) {
    Abort();
    return Status::OK();
  }
  if (!poisoned_.ok()) {
    Status s = poisoned_;
    Abort();
    return s;
  }
  if (buffered()) return CommitBuffered();
  return CommitPages();
}

Status TransactionImpl::CommitBuffered() {
  if (shape_changed_) {
    // An index turned multikey: the catalog records it, in pages.
    Status s = ToPages();
    if (!s.ok()) {
      Abort();
      return s;
    }
    return CommitPages();
  }
  EndWrite();
  Status s;
  std::vector<index::BufferChange>& changes = Buf().changes;  // KeepBufferedState keeps it
  changes.clear();
  AppendChanges(&changes);
  // Operations that undid each other leave nothing to log: a record that
  // no generation holds would never be merged.
  if (!changes.empty()) {
    uint64_t txid = 0;
    storage::Pager::CommitTicket ticket;
    s = db_->RetryFailedMerge();
    if (s.ok()) s = db_->PrepareCommits(pager_.get());
    if (s.ok()) s = pager_->AppendUnsynced(Buf().log, durability_, &txid, &ticket);
    if (s.IsBusy()) {
      // The log is full of records waiting for their merge: merge them all
      // and checkpoint, then append again.
      db_->NoteLogFullMerge();
      s = db_->MergeAll(/*checkpoint=*/true);
      if (s.ok()) s = pager_->AppendUnsynced(Buf().log, durability_, &txid, &ticket);
      if (s.IsBusy()) {
        // Larger than the whole log: committed by a checkpoint instead.
        s = ToPages();
        if (!s.ok()) {
          Abort();
          return s;
        }
        return CommitPages();
      }
    }
    // Group commit publishes first and lets the next writer append while it
    // syncs; the other modes publish only what is durable as they promise.
    const bool group = durability_ == Durability::kGroup;
    if (s.ok() && !group) s = pager_->SyncCommit(durability_, ticket);
    assert(wbuf_ != nullptr);  // set by Begin (ReuseBufferedState)
    if (s.ok()) s = PublishLogged(txid, changes);
    finished_ = true;
    if (s.ok()) KeepBufferedState();
    colls_.clear();
    catalog_.reset();
    txn_.reset();
    ReleaseToken();
    if (s.ok() && group) s = pager_->SyncCommit(durability_, ticket);
  } else {
    finished_ = true;
    KeepBufferedState();
    colls_.clear();
    catalog_.reset();
    txn_.reset();
    ReleaseToken();
  }
  if (!s.ok()) return s;
  if (db_->paranoid()) return db_->Check(nullptr);
  return Status::OK();
}

Status TransactionImpl::PublishLogged(uint64_t txid,
                                      const std::vector<index::BufferChange>& changes) {
  try {
    db_->PublishBuffered(wbuf_.get(), txid, changes, Buf().log.size());
    return Status::OK();
  } catch (const std::bad_alloc&) {
    // Readers never see a commit published in part (the buffer's last txid
    // moves only at the end), but the next commit would show it: the pager
    // takes no more writes, and the next Open replays this one whole.
    Status s = Status::IOError(
        "out of memory after commit " + std::to_string(txid) + " was logged",
        "the next Open applies it; this database takes no more writes: close and reopen it");
    pager_->Fail(s);
    return s;
  }
}

void TransactionImpl::AppendChanges(std::vector<index::BufferChange>* changes) {
  for (auto& [name, c] : colls_) {
    if (!c->exists) continue;
    c->primary->AppendChanges(changes);
    for (auto& t : c->index_trees) t->AppendChanges(changes);
  }
}

Status TransactionImpl::CommitIntoBuffer(uint64_t txid) {
  assert(replaying_ && buffered());
  Status s = poisoned_;
  if (s.ok() && finished_) s = Status::InvalidArgument("transaction already finished");
  if (s.ok() && shape_changed_) s = Status::NotSupported("log record changes pages");
  if (!s.ok()) {
    Abort();
    return s;
  }
  EndWrite();
  std::vector<index::BufferChange> changes;
  AppendChanges(&changes);
  if (!changes.empty()) db_->PublishReplayed(txid, changes);
  finished_ = true;
  colls_.clear();
  catalog_.reset();
  txn_.reset();
  return Status::OK();
}

Status TransactionImpl::ToPages(std::string_view keep_runs_of) {
  assert(buffered());
  // Recovery into the buffer cannot write pages: the caller replays the
  // whole log into pages instead.
  if (replaying_) return Poison(Status::NotSupported("log record changes pages"));
  const std::string payload = std::move(Buf().log);
  Buf().log.clear();
  states_++;  // open cursors look their trees up again
  colls_.clear();
  catalog_.reset();
  cache_.reset();
  txn_.reset();  // the read snapshot
  has_view_ = false;
  view_ = index::BufferView();
  shape_changed_ = false;
  db_->DropKeyFilters();  // the keys this txn writes into pages bypass them
  Status s = db_->MergeAll(/*checkpoint=*/false, keep_runs_of);
  if (!s.ok()) return Poison(s);
  auto w = pager_->BeginWrite();
  if (!w.ok()) return Poison(w.status());
  txn_ = std::move(w.value());
  std::shared_ptr<storage::Pager> current;
  std::shared_ptr<const CatalogCache> c;
  db_->PagerAndCache(&current, &c);
  if (current == pager_) AdoptCache(std::move(c));
  catalog_ = std::make_unique<index::Catalog>(txn_.get(), &TreeKeyCodec());
  s = ApplyLog(payload, /*own=*/true);
  if (!s.ok()) return Poison(s);
  return Status::OK();
}

Status TransactionImpl::MergeGeneration(const index::BufferGeneration* gen,
                                        storage::Pager::LogPosition next_record) {
  merging_ = gen;
  const uint64_t through = gen->last_txid();
  Status s;
  std::string stored;
  std::vector<std::pair<std::string, std::shared_ptr<const index::KeyFilter>>> filters;
  // Each table becomes a run of its tree (engine/runs.cc): its changes in
  // key order fill each leaf of a new tree, instead of copying about one
  // leaf of the tree per change.
  for (const auto& [name, table] : gen->Tables()) {
    const std::string_view n = name;
    CollState* c = nullptr;
    const size_t nul = n.find('\0');
    const std::string_view coll = n.substr(2, nul == n.npos ? n.npos : nul - 2);
    if (n.size() > 2 && (n.substr(0, 2) == "c:" || n.substr(0, 2) == "i:")) {
      s = Collection(coll, false, &c);
      if (!s.ok()) return Poison(s);
    }
    const int slot = c != nullptr && c->exists ? TreeSlot(c, n) : -1;
    if (slot < 0)  // as likely a file copied over this one: Explain tells
      return Poison(txn_->Explain(
          Status::Corruption("write buffer holds changes of a tree that is gone", coll)));
    index::BufferTable::Iterator it(table, through);
    it.SeekToFirst();
    if (!it.Valid()) continue;
    const std::string run_name = RunName(coll, through, n);
    index::BTree* run;
    s = Cat()->Create(run_name, {});
    if (s.ok()) s = Cat()->Open(run_name, &run);
    if (!s.ok()) return Poison(s);
    auto filter =
        std::make_shared<index::KeyFilter>(table->keys(), index::KeyFilter::kRunBitsPerKey);
    uint64_t entries = 0;
    for (; it.Valid(); it.Next()) {
      const index::BufferVersion* v = it.version();
      index::EncodeRunValue(v->erased(), v->value(), &stored);
      s = run->Put(it.key(), stored, index::PutMode::kUpsert);
      filter->Add(it.key());
      entries++;
      // The merge's private page copies are bounded: written out between
      // two changes, when no page pointer is held.
      if (s.ok() && txn_->private_bytes() > kMergePrivateBytes) s = txn_->WriteBack();
      if (!s.ok()) return Poison(s);
    }
    CachedRun r;
    r.name = run_name;
    r.root = run->root();
    r.count_delta = table->CountDelta(through);
    r.entries = entries;
    r.filter = filter;
    s = Cat()->SetMeta(run_name, EncodeRunMeta(r));
    if (!s.ok()) return Poison(s);
    filters.emplace_back(run_name, filter);
    if (c->runs.empty()) c->runs.resize(c->meta.indexes.size() + 1);
    std::vector<CachedRun>& runs = c->runs[static_cast<size_t>(slot)];
    runs.insert(runs.begin(), std::move(r));
    if (runs.size() >= kRunsBeforeMerge) runs_due_ = true;
  }
  // Readers that miss the catalog cache find the filters by name.
  for (auto& [name, f] : filters) db_->AddRunFilter(name, std::move(f));
  s = FlushCatalog();
  if (!s.ok()) return Poison(s);
  std::shared_ptr<CatalogCache> next = NextCache();
  return FinishMerge(db_->PublishMerge(txn_.get(), gen, next_record, std::move(next)));
}

Status TransactionImpl::FinishMerge(Status s) {
  finished_ = true;
  colls_.clear();
  catalog_.reset();
  if (!s.ok()) txn_->Abort();
  txn_.reset();
  return s;
}

Status TransactionImpl::FlushCatalog() {
  for (auto& [name, c] : colls_) {
    if (!c->exists || !c->meta_dirty) continue;
    MMDOC_RETURN_IF_ERROR(Cat()->SetMeta(CollectionTreeName(name), c->meta.Encode()));
  }
  return Cat()->Flush();
}

Status TransactionImpl::CommitPages() {
  EndWrite();
  Status s = FlushCatalog();
  std::shared_ptr<CatalogCache> next;
  if (s.ok() && !replaying_) next = NextCache();
  if (s.ok()) {
    if (replaying_) {
      s = pager_->CommitReplayed(txn_.get());
    } else {
      s = txn_->Commit(Buf().log, durability_);
    }
  }
  finished_ = true;
  if (!s.ok()) {
    colls_.clear();
    catalog_.reset();
    txn_->Abort();
    txn_.reset();
    ReleaseToken();
    return s;
  }
  txn_.reset();
  if (!freed_runs_.empty()) db_->DropRunFilters(freed_runs_);
  if (next) {
    db_->PublishCache(next, pager_.get());
    // A commit that created or dropped nothing leaves its trees to the next
    // write txn (ReuseWriteState); the states hold what this txn committed.
    // (A buffered DB's next write txn reads through the buffer instead.)
    if (!ddl_ && !db_->buffered()) {
      auto keep = std::make_unique<WriteState>();
      keep->cache = std::move(next);
      for (auto it = colls_.begin(); it != colls_.end();) {
        if (!it->second->exists) {
          it = colls_.erase(it);
        } else {
          it->second->meta_dirty = false;
          ++it;
        }
      }
      keep->catalog = std::move(catalog_);
      keep->colls = std::move(colls_);
      keep->buffers = std::move(bufs_);
      db_->KeepWriteState(std::move(keep));
    }
  }
  colls_.clear();
  catalog_.reset();
  ReleaseToken();
  if (db_->paranoid() && !replaying_) {
    Status c = db_->Check(nullptr);
    if (!c.ok()) return c;
  }
  return Status::OK();
}

std::shared_ptr<CatalogCache> TransactionImpl::NextCache() {
  auto next = std::make_shared<CatalogCache>();
  next->catalog_root = Cat()->tree()->root();
  if (!CatalogKey(txn_.get(), next->catalog_root, &next->catalog_txid)) return nullptr;
  // Entries of collections this txn did not load are still right unless it
  // changed the catalog's shape (DDL); then start afresh.
  if (cache_ && !ddl_) next->colls = cache_->colls;
  for (auto& [name, c] : colls_) {
    if (!c->exists) continue;
    CachedColl& e = next->colls[name];
    e.primary_root = c->primary->tree()->root();
    e.meta = c->meta;
    e.meta.count = static_cast<uint64_t>(static_cast<int64_t>(c->meta.count) - c->buffered_count);
    e.index_roots.clear();
    for (const auto& t : c->index_trees) e.index_roots.push_back(t->tree()->root());
    e.runs = c->runs;
  }
  return next;
}

void TransactionImpl::Abort() {
  if (finished_) return;
  // A reader that had to look collections up in the catalog leaves what it
  // found for the next transaction.
  if (read_only_ && cache_miss_ && catalog_) {
    std::shared_ptr<CatalogCache> next = NextCache();
    if (next) db_->PublishCache(std::move(next), pager_.get());
  }
  finished_ = true;
  if (!read_only_) EndWrite();
  // A read transaction that may be renewed (DBImpl::EndRead) keeps the
  // collections it loaded from the cache.
  if (!Reusable()) colls_.clear();
  catalog_.reset();
  if (txn_) {
    txn_->Abort();
    txn_.reset();
  }
  ReleaseToken();
}

Status TransactionImpl::ApplyLog(std::string_view payload, bool own) {
  while (!payload.empty()) {
    auto op = static_cast<LogOp>(static_cast<uint8_t>(payload[0]));
    payload.remove_prefix(1);
    std::string_view coll, arg;
    if (!GetBytes(&payload, &coll) || !GetBytes(&payload, &arg))
      return Status::Corruption("log record payload is truncated");
    Status s;
    switch (op) {
      case LogOp::kInsert: {
        auto d = Document::FromBson(reinterpret_cast<const uint8_t*>(arg.data()), arg.size());
        if (!d.ok())
          return Status::Corruption("log record holds invalid BSON", d.status().ToString());
        s = Insert(coll, d.value(), nullptr);
        break;
      }
      case LogOp::kReplace: {
        bson_value_t id;
        if (!DocId(arg, &id)) return Status::Corruption("log record replace without _id");
        std::string pk;
        engine::AppendKey(&id, &pk);
        CollState* c;
        MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
        std::string_view old;
        if (!c->exists)
          return Status::Corruption("log replays a replace into a missing collection");
        MMDOC_RETURN_IF_ERROR(c->primary->Get(pk, &old));
        s = ReplaceAt(c, pk, old, arg);
        if (s.ok()) Log(LogOp::kReplace, coll, arg);  // ToPages redoes its own log
        break;
      }
      case LogOp::kDelete: {
        CollState* c;
        MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
        std::string_view old;
        if (!c->exists) return Status::Corruption("log replays a delete from a missing collection");
        MMDOC_RETURN_IF_ERROR(c->primary->Get(arg, &old));
        s = DeleteAt(c, arg, old);
        if (s.ok()) Log(LogOp::kDelete, coll, arg);
        break;
      }
      case LogOp::kDeleteAll: {
        CollState* c;
        MMDOC_RETURN_IF_ERROR(Collection(coll, false, &c));
        if (!c->exists) return Status::Corruption("log replays a delete from a missing collection");
        s = DeleteAll(coll).status();  // logs itself, for ToPages
        break;
      }
      case LogOp::kCreateCollection:
        s = CreateCollection(coll);
        break;
      case LogOp::kDropCollection:
        s = DropCollection(coll);
        break;
      case LogOp::kCreateIndex: {
        if (arg.empty()) return Status::Corruption("log record create index without field");
        const uint8_t flags = static_cast<uint8_t>(arg[0]);
        if ((flags & kSpecFlag) == 0) {
          IndexOptions o;
          o.unique = flags != 0;
          s = CreateIndex(coll, arg.substr(1), o);
          break;
        }
        IndexMeta m;
        std::string_view spec = arg.substr(1);
        if (!DecodeIndexSpec(&spec, &m) || !spec.empty())
          return Status::Corruption("log record create index with a bad spec");
        IndexOptions o = IndexMetaOptions(m);
        o.unique = (flags & kUniqueFlag) != 0;
        s = CreateIndex(coll, m.keys, o);
        break;
      }
      case LogOp::kDropIndex:
        s = DropIndex(coll, arg);
        break;
      default:
        return Status::Corruption("log record has unknown operation",
                                  std::to_string(static_cast<int>(op)));
    }
    // NotSupported: replay into the buffer met a record that changes pages.
    // Full and IOError: the disk failed the replay, the log is not damaged.
    if (!s.ok()) {
      return own || s.IsNotSupported() || s.IsFull() || s.IsIOError()
                 ? s
                 : Status::Corruption("log replay failed", s.ToString());
    }
  }
  return Status::OK();
}

}  // namespace mmdoc
