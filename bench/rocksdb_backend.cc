// RocksDB adapter: two column families, "docs" (_id -> BSON) and "key"
// (key -> _id), written in one WriteBatch per transaction.
//
// Settings (best-known for a point-lookup + scan workload that fits in
// memory): 512 MiB LRU block cache, 10-bit bloom filters (whole key),
// 64 MiB write buffers (4 of them), dynamic level bytes, no compression (the
// other engines store the bytes uncompressed), background jobs = cores.
// OptimizeForPointLookup is not used: it builds hash indexes that hurt the
// scan. A unique index is a promise, so Insert checks that neither the _id
// nor the key exists (Get, answered by the bloom filters when absent).
//
// Durability: none = sync=false (WAL on), fsync = sync=true, group =
// sync=true with concurrent writers (RocksDB's write group shares one WAL
// sync); periodic and msync do not exist in RocksDB.
//
// Key ranges, from one snapshot each: an iterator on the key family from
// Seek(from) (search_prefix bounded by ReadOptions::iterate_upper_bound =
// the prefix's end, so the iterator stops there; sort_limit taking 10),
// collecting the _ids, then one batched MultiGet of the documents. push =
// Get of the document, WithTagPushed, Put in the session's WriteBatch (a
// document at most once per batch: the batch does not read its own
// writes, as for update).
//
// compound (its own store): the key family holds GroupKey(g, n, _id) ->
// _id (bench/backend.h: order-preserving big-endian g and n), written in
// the insert's WriteBatch; a query is an iterator from Seek(GroupKey(G, A))
// bounded by iterate_upper_bound = GroupKey(G, B), taking `limit` entries,
// then one MultiGet of the documents, as the key ranges above.
//
// Seed 002's operations:
//   build_index   one iterator pass over docs collecting (key, _id), sort,
//                 write them with SstFileWriter and IngestExternalFile (move)
//                 into the empty key family: RocksDB's documented bulk-load
//                 path (no memtable, no WAL, no compaction of the new data)
//   delete_value  an iterator pass over docs; each match's two deletes go
//                 into the session's WriteBatch
//   delete_all    DeleteRange over each family's [first, last] key in the
//                 WriteBatch (range tombstones: RocksDB's replacement for
//                 iterate-and-delete; compaction reclaims the space later)
#include <dlfcn.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/backend.h"
#include "bench/backends.h"
#include "bench/bson_doc.h"

#ifndef MMDOC_ROCKSDB_RELEASE_DIR
#define MMDOC_ROCKSDB_RELEASE_DIR ""
#endif

namespace mmdoc::bench {
namespace {

Status RocksError(const char* what, const rocksdb::Status& s) {
  if (s.IsNotFound()) return Status::NotFound(what);
  return Status::IOError(what, s.ToString());
}

rocksdb::Slice Sl(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

class RocksDbBackend;

class RocksDbSession : public Session {
 public:
  explicit RocksDbSession(RocksDbBackend* backend) : backend_(backend) {}

  Status Begin() override {
    batch_.Clear();
    return Status::OK();
  }
  Status Commit() override;
  Status Insert(const DocRef& doc) override;
  Status UpdateValue(std::string_view id, std::string_view value) override;
  Status Delete(std::string_view id) override;
  Status GetById(std::string_view id, std::string* value) override;
  Status FindByKey(std::string_view key, std::string* value) override;
  Status ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) override;
  Status FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) override;
  Status FindKeysFrom(std::string_view from, int limit, std::vector<std::string>* values) override;
  Status GetDocument(std::string_view id, std::string* bson) override;
  Status PushTag(std::string_view id, std::string_view tag) override;
  Status BuildKeyIndex() override;
  Status DeleteByValue(std::string_view value, uint64_t* deleted) override;
  Status DeleteAll() override;
  Status Count(uint64_t* docs, uint64_t* key_entries) override;
  Status InsertGrouped(const GroupDocRef& doc) override;
  Status FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                        std::vector<std::string>* docs) override;

 private:
  // The `value` of each document of the key range [from, end) (end ""
  // = no end), at most limit (0 = no limit), in key order; whole: the
  // documents' bytes instead.
  Status KeyRange(std::string_view from, std::string_view end, int limit,
                  std::vector<std::string>* values, bool whole = false);

  RocksDbBackend* const backend_;
  rocksdb::WriteBatch batch_;
  // KeyRange's _ids and documents, kept between calls.
  std::vector<std::string> ids_;
  std::vector<rocksdb::Slice> id_slices_;
  std::vector<rocksdb::PinnableSlice> docs_;
  std::vector<rocksdb::Status> statuses_;
  rocksdb::PinnableSlice pinned_;
  rocksdb::PinnableSlice pinned2_;
  std::string scratch_;
};

class RocksDbBackend : public Backend {
 public:
  ~RocksDbBackend() override { Close().ok(); }

  std::string name() const override { return "rocksdb"; }

  bool Supports(Durability d) const override {
    return d == Durability::kNone || d == Durability::kFsync || d == Durability::kGroup;
  }

  Status Open(const std::string& dir, const BackendConfig& config) override {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    options.IncreaseParallelism(cores > 1 ? cores : 2);
    options.max_background_jobs = cores > 1 ? cores : 2;
    rocksdb::ColumnFamilyOptions cf;
    cf.write_buffer_size = 64 << 20;
    cf.max_write_buffer_number = 4;
    cf.target_file_size_base = 64 << 20;
    cf.max_bytes_for_level_base = 256 << 20;
    cf.level_compaction_dynamic_level_bytes = true;
    cf.compression = rocksdb::kNoCompression;
    rocksdb::BlockBasedTableOptions table;
    cache_ = rocksdb::NewLRUCache(512 << 20);
    table.block_cache = cache_;
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.whole_key_filtering = true;
    cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    static_cast<rocksdb::ColumnFamilyOptions&>(options) = cf;
    options_ = options;
    dir_ = dir;
    key_index_ = config.key_index;
    group_index_ = config.group_index;

    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, cf}, {"docs", cf}, {"key", cf}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, dir, families, &handles, &db);
    if (!s.ok()) return RocksError("rocksdb open", s);
    db_.reset(db);
    handles_ = handles;
    write_options_.sync = config.durability != Durability::kNone;
    write_options_.disableWAL = false;
    durability_ = config.durability;
    return Status::OK();
  }

  std::string settings() const override {
    std::string s = RocksDbBuild();
    s += ": CFs docs(_id->bson)+key(key->_id) in one WriteBatch, LRU block "
         "cache 512 MiB, "
         "bloom 10 bits, write_buffer 64 MiB x4, dynamic level bytes, no "
         "compression, "
         "unique checks by Get, WAL on, sync=";
    s += write_options_.sync ? "true" : "false";
    if (durability_ == Durability::kGroup) s += " with concurrent writers (write groups)";
    if (group_index_) {
      s += ", compound store: key CF = (g, n, _id) -> _id, query = iterator from Seek((g, lo)) "
           "bounded by (g, hi), limit entries + one MultiGet";
    } else if (!key_index_) {
      s += ", no key index (until build_index)";
    }
    s += ", scan = iterator + byte pre-check + BSON parse";
    s += ", search_prefix/sort_limit = iterator on key CF from Seek (iterate_upper_bound = the "
         "prefix's end) + one MultiGet of the docs, from one snapshot, push = Get + append + Put";
    s += ", build_index = scan + sort + SstFileWriter + IngestExternalFile, "
         "delete_value = iterator scan + WriteBatch deletes, delete_all = "
         "DeleteRange per CF";
    return s;
  }

  Result<std::unique_ptr<Session>> NewSession() override {
    return std::unique_ptr<Session>(std::make_unique<RocksDbSession>(this));
  }

  Status Close() override {
    if (db_ == nullptr) return Status::OK();
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    handles_.clear();
    rocksdb::Status s = db_->Close();
    db_.reset();
    return s.ok() ? Status::OK() : RocksError("rocksdb close", s);
  }

  rocksdb::DB* db() const { return db_.get(); }
  rocksdb::ColumnFamilyHandle* docs() const { return handles_[1]; }
  rocksdb::ColumnFamilyHandle* keys() const { return handles_[2]; }
  const rocksdb::WriteOptions& write_options() const { return write_options_; }
  const rocksdb::ReadOptions& read_options() const { return read_options_; }
  const rocksdb::Options& options() const { return options_; }
  const std::string& dir() const { return dir_; }
  // Whether writes keep the key family (false until BuildKeyIndex in a
  // store opened without it).
  bool key_index() const { return key_index_.load(); }
  void set_key_index() { key_index_.store(true); }

 private:
  rocksdb::Options options_;
  std::string dir_;
  std::atomic<bool> key_index_{true};
  bool group_index_ = false;
  std::unique_ptr<rocksdb::DB> db_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::WriteOptions write_options_;
  rocksdb::ReadOptions read_options_;
  Durability durability_ = Durability::kNone;
};

Status RocksDbSession::Commit() {
  rocksdb::Status s = backend_->db()->Write(backend_->write_options(), &batch_);
  batch_.Clear();
  return s.ok() ? Status::OK() : RocksError("write", s);
}

Status RocksDbSession::Insert(const DocRef& doc) {
  rocksdb::DB* db = backend_->db();
  const auto& ro = backend_->read_options();
  pinned_.Reset();
  rocksdb::Status s = db->Get(ro, backend_->docs(), Sl(doc.id), &pinned_);
  if (s.ok()) return Status::AlreadyExists("_id", doc.id);
  if (!s.IsNotFound()) return RocksError("insert check _id", s);
  pinned_.Reset();
  if (!backend_->key_index()) {
    batch_.Put(backend_->docs(), Sl(doc.id), Sl(doc.bson));
    return Status::OK();
  }
  s = db->Get(ro, backend_->keys(), Sl(doc.key), &pinned_);
  if (s.ok()) return Status::AlreadyExists("key", doc.key);
  if (!s.IsNotFound()) return RocksError("insert check key", s);
  pinned_.Reset();
  batch_.Put(backend_->docs(), Sl(doc.id), Sl(doc.bson));
  batch_.Put(backend_->keys(), Sl(doc.key), Sl(doc.id));
  return Status::OK();
}

Status RocksDbSession::UpdateValue(std::string_view id, std::string_view value) {
  pinned_.Reset();
  rocksdb::Status s =
      backend_->db()->Get(backend_->read_options(), backend_->docs(), Sl(id), &pinned_);
  if (!s.ok()) return RocksError("update get", s);
  bool ok = WithValue(std::string_view(pinned_.data(), pinned_.size()), value, &scratch_);
  pinned_.Reset();
  if (!ok) return Status::Corruption("bad BSON");
  // The key is unchanged, so the key index needs no change.
  batch_.Put(backend_->docs(), Sl(id), scratch_);
  return Status::OK();
}

Status RocksDbSession::Delete(std::string_view id) {
  pinned_.Reset();
  rocksdb::Status s =
      backend_->db()->Get(backend_->read_options(), backend_->docs(), Sl(id), &pinned_);
  if (!s.ok()) return RocksError("delete get", s);
  std::string_view key;
  bool ok = FieldOf(pinned_.data(), pinned_.size(), "key", &key);
  if (ok && backend_->key_index()) batch_.Delete(backend_->keys(), Sl(key));
  pinned_.Reset();
  if (!ok) return Status::Corruption("bad BSON");
  batch_.Delete(backend_->docs(), Sl(id));
  return Status::OK();
}

Status RocksDbSession::GetById(std::string_view id, std::string* value) {
  pinned_.Reset();
  rocksdb::Status s =
      backend_->db()->Get(backend_->read_options(), backend_->docs(), Sl(id), &pinned_);
  if (!s.ok()) return RocksError("get _id", s);
  std::string_view field;
  if (!FieldOf(pinned_.data(), pinned_.size(), "value", &field)) {
    return Status::Corruption("bad BSON");
  }
  value->assign(field);
  return Status::OK();
}

Status RocksDbSession::FindByKey(std::string_view key, std::string* value) {
  // Both reads from one snapshot, as the other engines' read transactions.
  rocksdb::DB* db = backend_->db();
  const rocksdb::Snapshot* snap = db->GetSnapshot();
  rocksdb::ReadOptions ro = backend_->read_options();
  ro.snapshot = snap;
  pinned_.Reset();
  pinned2_.Reset();
  rocksdb::Status s = db->Get(ro, backend_->keys(), Sl(key), &pinned2_);
  if (s.ok()) s = db->Get(ro, backend_->docs(), pinned2_, &pinned_);
  Status st;
  std::string_view field;
  if (!s.ok()) {
    st = RocksError("find key", s);
  } else if (!FieldOf(pinned_.data(), pinned_.size(), "value", &field)) {
    st = Status::Corruption("bad BSON");
  } else {
    value->assign(field);
  }
  db->ReleaseSnapshot(snap);
  return st;
}

Status RocksDbSession::ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) {
  std::unique_ptr<rocksdb::Iterator> it(
      backend_->db()->NewIterator(backend_->read_options(), backend_->docs()));
  *found = false;
  uint64_t bytes = 0;
  const FieldEquals matches("value", value);
  bool bad = false;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice v = it->value();
    bytes += v.size();
    if (matches(v.data(), v.size(), &bad)) *found = true;
    if (bad) return Status::Corruption("bad BSON");
  }
  if (scanned_bytes != nullptr) *scanned_bytes = bytes;
  if (!it->status().ok()) return RocksError("scan", it->status());
  return Status::OK();
}

Status RocksDbSession::KeyRange(std::string_view from, std::string_view end, int limit,
                                std::vector<std::string>* values, bool whole) {
  values->clear();
  rocksdb::DB* db = backend_->db();
  const rocksdb::Snapshot* snap = db->GetSnapshot();
  rocksdb::ReadOptions ro = backend_->read_options();
  ro.snapshot = snap;
  rocksdb::Slice upper = Sl(end);
  if (!end.empty()) ro.iterate_upper_bound = &upper;
  size_t n = 0;
  Status st;
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, backend_->keys()));
    for (it->Seek(Sl(from)); it->Valid(); it->Next()) {
      if (limit > 0 && n == static_cast<size_t>(limit)) break;
      if (ids_.size() == n) ids_.emplace_back();
      ids_[n++].assign(it->value().data(), it->value().size());
    }
    if (!it->status().ok()) st = RocksError("key range", it->status());
  }
  if (st.ok() && n > 0) {
    id_slices_.resize(n);
    for (size_t i = 0; i < n; ++i) id_slices_[i] = Sl(ids_[i]);
    if (docs_.size() < n) docs_.resize(n);
    statuses_.resize(n);
    db->MultiGet(ro, backend_->docs(), n, id_slices_.data(), docs_.data(), statuses_.data());
    std::string_view field;
    for (size_t i = 0; i < n && st.ok(); ++i) {
      if (!statuses_[i].ok()) {
        st = RocksError("key range get", statuses_[i]);
      } else if (whole) {
        values->emplace_back(docs_[i].data(), docs_[i].size());
      } else if (!FieldOf(docs_[i].data(), docs_[i].size(), "value", &field)) {
        st = Status::Corruption("bad BSON");
      } else {
        values->emplace_back(field);
      }
    }
    for (size_t i = 0; i < n; ++i) docs_[i].Reset();
  }
  db->ReleaseSnapshot(snap);
  return st;
}

Status RocksDbSession::FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) {
  const std::string end = PrefixEnd(prefix);
  return KeyRange(prefix, end, 0, values);
}

Status RocksDbSession::FindKeysFrom(std::string_view from, int limit,
                                    std::vector<std::string>* values) {
  return KeyRange(from, "", limit, values);
}

Status RocksDbSession::InsertGrouped(const GroupDocRef& doc) {
  pinned_.Reset();
  rocksdb::Status s =
      backend_->db()->Get(backend_->read_options(), backend_->docs(), Sl(doc.id), &pinned_);
  if (s.ok()) return Status::AlreadyExists("_id", doc.id);
  if (!s.IsNotFound()) return RocksError("insert check _id", s);
  pinned_.Reset();
  batch_.Put(backend_->docs(), Sl(doc.id), Sl(doc.bson));
  batch_.Put(backend_->keys(), GroupKey(doc.g, doc.n, doc.id), Sl(doc.id));
  return Status::OK();
}

Status RocksDbSession::FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                                      std::vector<std::string>* docs) {
  if (lo >= hi) {
    docs->clear();
    return Status::OK();
  }
  return KeyRange(GroupKey(g, lo), GroupKey(g, hi), limit, docs, true);
}

Status RocksDbSession::GetDocument(std::string_view id, std::string* bson) {
  rocksdb::Status s = backend_->db()->Get(backend_->read_options(), backend_->docs(), Sl(id), bson);
  return s.ok() ? Status::OK() : RocksError("get document", s);
}

Status RocksDbSession::PushTag(std::string_view id, std::string_view tag) {
  pinned_.Reset();
  rocksdb::Status s =
      backend_->db()->Get(backend_->read_options(), backend_->docs(), Sl(id), &pinned_);
  if (!s.ok()) return RocksError("push get", s);
  bool ok = WithTagPushed(std::string_view(pinned_.data(), pinned_.size()), tag, &scratch_);
  pinned_.Reset();
  if (!ok) return Status::Corruption("bad BSON");
  // The key is unchanged, so the key index needs no change.
  batch_.Put(backend_->docs(), Sl(id), scratch_);
  return Status::OK();
}

Status RocksDbSession::BuildKeyIndex() {
  // (key, _id) of every document, then sorted (the bytewise comparator
  // orders keys as KeyIdPairs does).
  KeyIdPairs pairs;
  {
    std::unique_ptr<rocksdb::Iterator> it(
        backend_->db()->NewIterator(backend_->read_options(), backend_->docs()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      rocksdb::Slice v = it->value(), k = it->key();
      if (!pairs.Add(v.data(), v.size(), std::string_view(k.data(), k.size())))
        return Status::Corruption("bad BSON");
    }
    if (!it->status().ok()) return RocksError("build_index scan", it->status());
  }
  MMDOC_RETURN_IF_ERROR(pairs.SortUnique());
  if (pairs.size() > 0) {
    std::string path = backend_->dir() + "/key-index.sst";
    rocksdb::SstFileWriter writer(rocksdb::EnvOptions(), backend_->options(), backend_->keys(),
                                  /*invalidate_page_cache=*/false);
    rocksdb::Status s = writer.Open(path);
    for (size_t i = 0; s.ok() && i < pairs.size(); ++i) {
      s = writer.Put(Sl(pairs.key(i)), Sl(pairs.id(i)));
    }
    if (s.ok()) s = writer.Finish();
    if (!s.ok()) return RocksError("build_index sst", s);
    rocksdb::IngestExternalFileOptions ingest;
    ingest.move_files = true;
    ingest.write_global_seqno = false;
    s = backend_->db()->IngestExternalFile(backend_->keys(), {path}, ingest);
    if (!s.ok()) return RocksError("build_index ingest", s);
  }
  backend_->set_key_index();
  return Status::OK();
}

Status RocksDbSession::DeleteByValue(std::string_view value, uint64_t* deleted) {
  *deleted = 0;
  const bool key_index = backend_->key_index();
  std::unique_ptr<rocksdb::Iterator> it(
      backend_->db()->NewIterator(backend_->read_options(), backend_->docs()));
  const FieldEquals matches("value", value);
  bool bad = false;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    rocksdb::Slice v = it->value();
    std::string_view key;
    bool hit = matches(v.data(), v.size(), &bad);
    if (bad) return Status::Corruption("bad BSON");
    if (!hit) continue;
    if (!FieldOf(v.data(), v.size(), "key", &key)) return Status::Corruption("bad BSON");
    if (key_index) batch_.Delete(backend_->keys(), Sl(key));
    batch_.Delete(backend_->docs(), it->key());
    ++*deleted;
  }
  if (!it->status().ok()) return RocksError("delete_value", it->status());
  return Status::OK();
}

Status RocksDbSession::DeleteAll() {
  for (rocksdb::ColumnFamilyHandle* cf : {backend_->docs(), backend_->keys()}) {
    std::unique_ptr<rocksdb::Iterator> it(
        backend_->db()->NewIterator(backend_->read_options(), cf));
    it->SeekToFirst();
    if (!it->Valid()) {
      if (!it->status().ok()) return RocksError("delete_all", it->status());
      continue;  // empty
    }
    std::string first = it->key().ToString();
    it->SeekToLast();
    if (!it->Valid()) return RocksError("delete_all", it->status());
    // The end is exclusive: the smallest key after the last one.
    std::string end = it->key().ToString();
    end.push_back('\0');
    batch_.DeleteRange(cf, first, end);
  }
  return Status::OK();
}

Status RocksDbSession::Count(uint64_t* docs, uint64_t* key_entries) {
  rocksdb::DB* db = backend_->db();
  const rocksdb::Snapshot* snap = db->GetSnapshot();
  rocksdb::ReadOptions ro = backend_->read_options();
  ro.snapshot = snap;
  Status st;
  uint64_t* out[] = {docs, key_entries};
  rocksdb::ColumnFamilyHandle* cfs[] = {backend_->docs(), backend_->keys()};
  for (int i = 0; i < 2 && st.ok(); ++i) {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cfs[i]));
    *out[i] = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++*out[i];
    if (!it->status().ok()) st = RocksError("count", it->status());
  }
  db->ReleaseSnapshot(snap);
  return st;
}

}  // namespace

std::unique_ptr<Backend> NewRocksDbBackend() { return std::make_unique<RocksDbBackend>(); }

std::string RocksDbBuild() {
  std::string out = "rocksdb " + rocksdb::GetRocksVersionAsString(true);
  // The library that defines DB::Open is the one this process runs.
  auto open =
      static_cast<rocksdb::Status (*)(const rocksdb::Options&, const std::string&, rocksdb::DB**)>(
          &rocksdb::DB::Open);
  Dl_info info;
  std::string path = "?";
  if (dladdr(reinterpret_cast<void*>(open), &info) != 0 && info.dli_fname != nullptr) {
    char resolved[PATH_MAX];
    path = realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
  }
  std::string release_dir = MMDOC_ROCKSDB_RELEASE_DIR;
  if (!release_dir.empty() && path.compare(0, release_dir.size(), release_dir) == 0) {
    out += " release build (" + path + ")";
  } else if (path.compare(0, 9, "/usr/lib/") == 0) {
    out += " debian build (assertions on) (" + path + ")";
  } else {
    out += " unknown build (" + path + ")";
  }
  return out;
}

}  // namespace mmdoc::bench
