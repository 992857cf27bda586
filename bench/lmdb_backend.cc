// LMDB adapter: two named databases in one environment, "docs" (_id -> BSON)
// and "key" (key -> _id), written in one transaction.
//
// Best-known settings for this workload: MDB_WRITEMAP (writes go straight to
// the shared map; about twice as fast here, same guarantees), a map size
// that fits the run, MDB_NOTLS so a read transaction belongs to its session,
// and read transactions reused with mdb_txn_reset/mdb_txn_renew. The
// "lmdb-nordahead" variant adds MDB_NORDAHEAD, LMDB's better setup for
// inserting 10M here (232 s, against more than 12 minutes with readahead;
// at 1M and 4M readahead is faster). Likely the same cause as mmdoc's
// MADV_RANDOM (storage/pager.h): the kernel tracks dirtiness per page-cache
// folio, and readahead makes folios large.
//
// Durability: none = MDB_NOSYNC; msync = MDB_WRITEMAP with LMDB's sync (it
// msyncs the map, then the meta page); fsync = MDB_WRITEMAP off (LMDB then
// syncs with fdatasync, data pages then meta page: two syncs per commit).
// periodic and group do not exist in LMDB.
//
// Key ranges, in one read transaction each: search_prefix = a cursor on the
// key db at MDB_SET_RANGE(prefix), MDB_NEXT while the key is below the
// prefix's end (PrefixEnd), each document fetched from docs by its _id;
// sort_limit = MDB_SET_RANGE(from), then MDB_NEXT, 10 documents so. push =
// mdb_get of the document, WithTagPushed, mdb_put, in the write transaction.
//
// compound (its own store): the key db holds GroupKey(g, n, _id) -> _id
// (bench/backend.h: order-preserving big-endian g and n), put with the
// document in the write transaction; a query is a cursor on it from
// MDB_SET_RANGE(GroupKey(G, A)), MDB_NEXT while below GroupKey(G, B),
// `limit` entries, each document fetched by mdb_get.
//
// Seed 002's operations, each in the session's write transaction:
//   build_index   one cursor pass over docs collecting (key, _id), sort,
//                 then mdb_cursor_put(MDB_APPEND) into the empty key db
//                 (LMDB's bulk-load path: pages filled in order, no splits
//                 in the middle)
//   delete_value  a cursor pass over docs; each match's key entry is
//                 deleted with mdb_del and the document with mdb_cursor_del
//   delete_all    mdb_drop(del = 0) of both dbs (empties them, frees their
//                 pages, keeps the dbs)
#include <lmdb.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "bench/backend.h"
#include "bench/backends.h"
#include "bench/bson_doc.h"

namespace mmdoc::bench {
namespace {

Status LmdbError(const char* what, int rc) {
  if (rc == MDB_NOTFOUND) return Status::NotFound(what);
  if (rc == MDB_KEYEXIST) return Status::AlreadyExists(what);
  if (rc == MDB_MAP_FULL) return Status::Full(what, mdb_strerror(rc));
  return Status::IOError(what, mdb_strerror(rc));
}

MDB_val Val(std::string_view s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }

std::string_view View(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

class LmdbBackend;

class LmdbSession : public Session {
 public:
  explicit LmdbSession(LmdbBackend* backend);
  ~LmdbSession() override;

  Status Begin() override;
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
  // Starts (or renews) this session's read transaction.
  Status StartRead();
  void EndRead() { mdb_txn_reset(read_txn_); }
  // The `value` of each document of the key range [from, end) (end ""
  // = no end), at most limit (0 = no limit), in key order; whole: the
  // documents' bytes instead.
  Status KeyRange(std::string_view from, std::string_view end, int limit,
                  std::vector<std::string>* values, bool whole = false);

  LmdbBackend* const backend_;
  MDB_txn* write_txn_ = nullptr;
  MDB_txn* read_txn_ = nullptr;
  std::string scratch_;
};

class LmdbBackend : public Backend {
 public:
  LmdbBackend(bool writemap, bool nordahead) : writemap_(writemap), nordahead_(nordahead) {}
  ~LmdbBackend() override { Close().ok(); }

  std::string name() const override {
    if (!writemap_) return "lmdb-nowritemap";
    return nordahead_ ? "lmdb-nordahead" : "lmdb";
  }

  bool Supports(Durability d) const override {
    switch (d) {
      case Durability::kNone:
      case Durability::kFsync:
        return true;
      case Durability::kMsync:
        return writemap_;
      default:
        return false;
    }
  }

  Status Open(const std::string& dir, const BackendConfig& config) override {
    int rc = mdb_env_create(&env_);
    if (rc != 0) return LmdbError("mdb_env_create", rc);
    // Address space is cheap; pages are allocated only when written. A
    // document costs ~450 bytes in the two trees; leave room for the
    // copy-on-write pages of big transactions.
    map_size_ =
        std::max<uint64_t>(1ull << 30, config.expected_docs * 2048 + config.expected_bytes * 4);
    mdb_env_set_mapsize(env_, map_size_);
    mdb_env_set_maxdbs(env_, 4);
    mdb_env_set_maxreaders(env_, std::max(126, config.max_sessions + 8));
    unsigned flags = MDB_NOTLS;
    bool use_writemap = writemap_;
    if (config.durability == Durability::kFsync) use_writemap = false;
    if (config.durability == Durability::kMsync) use_writemap = true;
    if (use_writemap) flags |= MDB_WRITEMAP;
    if (config.durability == Durability::kNone) flags |= MDB_NOSYNC;
    if (nordahead_) flags |= MDB_NORDAHEAD;
    flags_ = flags;
    key_index_ = config.key_index;
    group_index_ = config.group_index;
    rc = mdb_env_open(env_, dir.c_str(), flags, 0644);
    if (rc != 0) return LmdbError("mdb_env_open", rc);
    MDB_txn* txn;
    rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc != 0) return LmdbError("mdb_txn_begin", rc);
    if ((rc = mdb_dbi_open(txn, "docs", MDB_CREATE, &docs_)) != 0 ||
        (rc = mdb_dbi_open(txn, "key", MDB_CREATE, &keys_)) != 0) {
      mdb_txn_abort(txn);
      return LmdbError("mdb_dbi_open", rc);
    }
    rc = mdb_txn_commit(txn);
    if (rc != 0) return LmdbError("mdb_txn_commit", rc);
    return Status::OK();
  }

  std::string settings() const override {
    std::string s = "LMDB " + std::to_string(MDB_VERSION_MAJOR) + "." +
                    std::to_string(MDB_VERSION_MINOR) + "." + std::to_string(MDB_VERSION_PATCH) +
                    ": ";
    s += (flags_ & MDB_WRITEMAP) ? "MDB_WRITEMAP" : "no MDB_WRITEMAP";
    if (flags_ & MDB_NOSYNC) s += "|MDB_NOSYNC";
    if (flags_ & MDB_NORDAHEAD) s += "|MDB_NORDAHEAD";
    if (!(flags_ & MDB_NOSYNC)) {
      s += (flags_ & MDB_WRITEMAP) ? " (sync = msync map + meta)"
                                   : " (sync = fdatasync data + meta)";
    }
    s += "|MDB_NOTLS, map " + std::to_string(map_size_ >> 20) +
         " MiB, dbs docs(_id->bson)+key(key->_id) in one txn, read txns "
         "reset/renewed";
    if (group_index_) {
      s += ", compound store: key db = (g, n, _id) -> _id, query = cursor from "
           "MDB_SET_RANGE((g, lo)) while below (g, hi), limit entries + mdb_get of each doc";
    } else if (!key_index_) {
      s += ", no key index (until build_index)";
    }
    s += ", scan = cursor + byte pre-check + BSON parse, search_prefix/sort_limit = cursor "
         "on key db from MDB_SET_RANGE + mdb_get of each doc, push = mdb_get + append + "
         "mdb_put, build_index = scan + "
         "sort + MDB_APPEND, delete_value = cursor scan + mdb_cursor_del, "
         "delete_all = mdb_drop(0) of both dbs";
    return s;
  }

  Result<std::unique_ptr<Session>> NewSession() override {
    return std::unique_ptr<Session>(std::make_unique<LmdbSession>(this));
  }

  Status Close() override {
    if (env_ != nullptr) {
      mdb_env_close(env_);
      env_ = nullptr;
    }
    return Status::OK();
  }

  MDB_env* env() const { return env_; }
  MDB_dbi docs() const { return docs_; }
  MDB_dbi keys() const { return keys_; }
  // Whether writes keep the key db (false until BuildKeyIndex in a store
  // opened without it).
  bool key_index() const { return key_index_.load(); }
  void set_key_index() { key_index_.store(true); }

 private:
  const bool writemap_;
  const bool nordahead_;
  std::atomic<bool> key_index_{true};
  bool group_index_ = false;
  MDB_env* env_ = nullptr;
  MDB_dbi docs_ = 0;
  MDB_dbi keys_ = 0;
  unsigned flags_ = 0;
  uint64_t map_size_ = 0;
};

LmdbSession::LmdbSession(LmdbBackend* backend) : backend_(backend) {}

LmdbSession::~LmdbSession() {
  if (write_txn_ != nullptr) mdb_txn_abort(write_txn_);
  if (read_txn_ != nullptr) mdb_txn_abort(read_txn_);
}

Status LmdbSession::Begin() {
  int rc = mdb_txn_begin(backend_->env(), nullptr, 0, &write_txn_);
  if (rc != 0) {
    write_txn_ = nullptr;
    return LmdbError("mdb_txn_begin", rc);
  }
  return Status::OK();
}

Status LmdbSession::Commit() {
  int rc = mdb_txn_commit(write_txn_);
  write_txn_ = nullptr;
  return rc == 0 ? Status::OK() : LmdbError("mdb_txn_commit", rc);
}

Status LmdbSession::Insert(const DocRef& doc) {
  MDB_val k = Val(doc.id), v = Val(doc.bson);
  int rc = mdb_put(write_txn_, backend_->docs(), &k, &v, MDB_NOOVERWRITE);
  if (rc != 0) return LmdbError("insert _id", rc);
  if (!backend_->key_index()) return Status::OK();
  MDB_val ik = Val(doc.key), iv = Val(doc.id);
  rc = mdb_put(write_txn_, backend_->keys(), &ik, &iv, MDB_NOOVERWRITE);
  if (rc != 0) {
    // A refused insert leaves nothing behind: take the document back out.
    Status s = LmdbError("insert key", rc);
    rc = mdb_del(write_txn_, backend_->docs(), &k, nullptr);
    return rc == 0 ? s : LmdbError("insert undo", rc);
  }
  return Status::OK();
}

Status LmdbSession::UpdateValue(std::string_view id, std::string_view value) {
  MDB_val k = Val(id), v;
  int rc = mdb_get(write_txn_, backend_->docs(), &k, &v);
  if (rc != 0) return LmdbError("update get", rc);
  if (!WithValue(View(v), value, &scratch_)) return Status::Corruption("bad BSON");
  // The key is unchanged, so the key index needs no change.
  MDB_val nv = Val(scratch_);
  rc = mdb_put(write_txn_, backend_->docs(), &k, &nv, 0);
  return rc == 0 ? Status::OK() : LmdbError("update put", rc);
}

Status LmdbSession::Delete(std::string_view id) {
  MDB_val k = Val(id), v;
  int rc = mdb_get(write_txn_, backend_->docs(), &k, &v);
  if (rc != 0) return LmdbError("delete get", rc);
  std::string_view key;
  if (!FieldOf(v.mv_data, v.mv_size, "key", &key)) return Status::Corruption("bad BSON");
  scratch_.assign(key);  // v points into the map; the deletes may move it
  MDB_val ik = Val(scratch_);
  if (backend_->key_index()) {
    rc = mdb_del(write_txn_, backend_->keys(), &ik, nullptr);
    if (rc != 0) return LmdbError("delete key", rc);
  }
  rc = mdb_del(write_txn_, backend_->docs(), &k, nullptr);
  return rc == 0 ? Status::OK() : LmdbError("delete _id", rc);
}

Status LmdbSession::StartRead() {
  int rc = read_txn_ == nullptr ? mdb_txn_begin(backend_->env(), nullptr, MDB_RDONLY, &read_txn_)
                                : mdb_txn_renew(read_txn_);
  return rc == 0 ? Status::OK() : LmdbError("read txn", rc);
}

Status LmdbSession::GetById(std::string_view id, std::string* value) {
  MMDOC_RETURN_IF_ERROR(StartRead());
  MDB_val k = Val(id), v;
  int rc = mdb_get(read_txn_, backend_->docs(), &k, &v);
  Status s;
  std::string_view field;
  if (rc != 0) {
    s = LmdbError("get _id", rc);
  } else if (!FieldOf(v.mv_data, v.mv_size, "value", &field)) {
    s = Status::Corruption("bad BSON");
  } else {
    value->assign(field);
  }
  EndRead();
  return s;
}

Status LmdbSession::FindByKey(std::string_view key, std::string* value) {
  MMDOC_RETURN_IF_ERROR(StartRead());
  MDB_val ik = Val(key), id, v;
  int rc = mdb_get(read_txn_, backend_->keys(), &ik, &id);
  if (rc == 0) rc = mdb_get(read_txn_, backend_->docs(), &id, &v);
  Status s;
  std::string_view field;
  if (rc != 0) {
    s = LmdbError("find key", rc);
  } else if (!FieldOf(v.mv_data, v.mv_size, "value", &field)) {
    s = Status::Corruption("bad BSON");
  } else {
    value->assign(field);
  }
  EndRead();
  return s;
}

Status LmdbSession::ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) {
  MMDOC_RETURN_IF_ERROR(StartRead());
  MDB_cursor* cur;
  int rc = mdb_cursor_open(read_txn_, backend_->docs(), &cur);
  if (rc != 0) {
    EndRead();
    return LmdbError("mdb_cursor_open", rc);
  }
  *found = false;
  uint64_t bytes = 0;
  MDB_val k, v;
  Status s;
  const FieldEquals matches("value", value);
  bool bad = false;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    bytes += v.mv_size;
    if (matches(v.mv_data, v.mv_size, &bad)) *found = true;
    if (bad) {
      s = Status::Corruption("bad BSON");
      break;
    }
  }
  if (s.ok() && rc != MDB_NOTFOUND) s = LmdbError("scan", rc);
  mdb_cursor_close(cur);
  EndRead();
  if (scanned_bytes != nullptr) *scanned_bytes = bytes;
  return s;
}

Status LmdbSession::KeyRange(std::string_view from, std::string_view end, int limit,
                             std::vector<std::string>* values, bool whole) {
  values->clear();
  MMDOC_RETURN_IF_ERROR(StartRead());
  MDB_cursor* cur;
  int rc = mdb_cursor_open(read_txn_, backend_->keys(), &cur);
  if (rc != 0) {
    EndRead();
    return LmdbError("mdb_cursor_open", rc);
  }
  Status s;
  MDB_val k = Val(from), id, doc;
  std::string_view field;
  // LMDB refuses an empty key: "" starts at the first.
  for (rc = mdb_cursor_get(cur, &k, &id, from.empty() ? MDB_FIRST : MDB_SET_RANGE); rc == 0;
       rc = mdb_cursor_get(cur, &k, &id, MDB_NEXT)) {
    if (!end.empty() && View(k) >= end) break;
    if (limit > 0 && values->size() == static_cast<size_t>(limit)) break;
    rc = mdb_get(read_txn_, backend_->docs(), &id, &doc);
    if (rc != 0) break;
    if (whole) {
      values->emplace_back(View(doc));
      continue;
    }
    if (!FieldOf(doc.mv_data, doc.mv_size, "value", &field)) {
      s = Status::Corruption("bad BSON");
      break;
    }
    values->emplace_back(field);
  }
  if (s.ok() && rc != 0 && rc != MDB_NOTFOUND) s = LmdbError("key range", rc);
  mdb_cursor_close(cur);
  EndRead();
  return s;
}

Status LmdbSession::FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) {
  const std::string end = PrefixEnd(prefix);
  return KeyRange(prefix, end, 0, values);
}

Status LmdbSession::FindKeysFrom(std::string_view from, int limit,
                                 std::vector<std::string>* values) {
  return KeyRange(from, "", limit, values);
}

Status LmdbSession::InsertGrouped(const GroupDocRef& doc) {
  MDB_val k = Val(doc.id), v = Val(doc.bson);
  int rc = mdb_put(write_txn_, backend_->docs(), &k, &v, MDB_NOOVERWRITE);
  if (rc != 0) return LmdbError("insert _id", rc);
  const std::string key = GroupKey(doc.g, doc.n, doc.id);
  MDB_val ik = Val(key), iv = Val(doc.id);
  rc = mdb_put(write_txn_, backend_->keys(), &ik, &iv, 0);
  return rc == 0 ? Status::OK() : LmdbError("insert (g, n)", rc);
}

Status LmdbSession::FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                                   std::vector<std::string>* docs) {
  if (lo >= hi) {
    docs->clear();
    return Status::OK();
  }
  return KeyRange(GroupKey(g, lo), GroupKey(g, hi), limit, docs, true);
}

Status LmdbSession::GetDocument(std::string_view id, std::string* bson) {
  MMDOC_RETURN_IF_ERROR(StartRead());
  MDB_val k = Val(id), v;
  int rc = mdb_get(read_txn_, backend_->docs(), &k, &v);
  if (rc == 0) bson->assign(View(v));
  EndRead();
  return rc == 0 ? Status::OK() : LmdbError("get document", rc);
}

Status LmdbSession::PushTag(std::string_view id, std::string_view tag) {
  MDB_val k = Val(id), v;
  int rc = mdb_get(write_txn_, backend_->docs(), &k, &v);
  if (rc != 0) return LmdbError("push get", rc);
  if (!WithTagPushed(View(v), tag, &scratch_)) return Status::Corruption("bad BSON");
  // The key is unchanged, so the key index needs no change.
  MDB_val nv = Val(scratch_);
  rc = mdb_put(write_txn_, backend_->docs(), &k, &nv, 0);
  return rc == 0 ? Status::OK() : LmdbError("push put", rc);
}

Status LmdbSession::BuildKeyIndex() {
  // (key, _id) of every document, copied out of the map, then sorted.
  KeyIdPairs pairs;
  MDB_cursor* cur;
  int rc = mdb_cursor_open(write_txn_, backend_->docs(), &cur);
  if (rc != 0) return LmdbError("mdb_cursor_open", rc);
  MDB_val k, v;
  Status s;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (!pairs.Add(v.mv_data, v.mv_size, View(k))) {
      s = Status::Corruption("bad BSON");
      break;
    }
  }
  mdb_cursor_close(cur);
  if (s.ok() && rc != MDB_NOTFOUND) s = LmdbError("build_index scan", rc);
  MMDOC_RETURN_IF_ERROR(s);
  MMDOC_RETURN_IF_ERROR(pairs.SortUnique());
  rc = mdb_cursor_open(write_txn_, backend_->keys(), &cur);
  if (rc != 0) return LmdbError("mdb_cursor_open", rc);
  for (size_t i = 0; i < pairs.size(); ++i) {
    MDB_val ik = Val(pairs.key(i));
    MDB_val iv = Val(pairs.id(i));
    rc = mdb_cursor_put(cur, &ik, &iv, MDB_APPEND);
    if (rc != 0) break;
  }
  mdb_cursor_close(cur);
  if (rc != 0) return LmdbError("build_index put", rc);
  backend_->set_key_index();
  return Status::OK();
}

Status LmdbSession::DeleteByValue(std::string_view value, uint64_t* deleted) {
  *deleted = 0;
  MDB_cursor* cur;
  int rc = mdb_cursor_open(write_txn_, backend_->docs(), &cur);
  if (rc != 0) return LmdbError("mdb_cursor_open", rc);
  const bool key_index = backend_->key_index();
  MDB_val k, v;
  Status s;
  // After mdb_cursor_del the cursor rests on the next document, which
  // MDB_NEXT then returns (LMDB marks the cursor C_DEL), so none is skipped.
  const FieldEquals matches("value", value);
  bool bad = false;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    std::string_view key;
    bool hit = matches(v.mv_data, v.mv_size, &bad);
    if (bad) {
      s = Status::Corruption("bad BSON");
      break;
    }
    if (!hit) continue;
    if (!FieldOf(v.mv_data, v.mv_size, "key", &key)) {
      s = Status::Corruption("bad BSON");
      break;
    }
    scratch_.assign(key);  // v points into the map; the deletes may move it
    if (key_index) {
      MDB_val ik = Val(scratch_);
      rc = mdb_del(write_txn_, backend_->keys(), &ik, nullptr);
      if (rc != 0) break;
    }
    rc = mdb_cursor_del(cur, 0);
    if (rc != 0) break;
    ++*deleted;
  }
  mdb_cursor_close(cur);
  if (s.ok() && rc != MDB_NOTFOUND) s = LmdbError("delete_value", rc);
  return s;
}

Status LmdbSession::DeleteAll() {
  int rc = mdb_drop(write_txn_, backend_->docs(), 0);
  if (rc == 0) rc = mdb_drop(write_txn_, backend_->keys(), 0);
  return rc == 0 ? Status::OK() : LmdbError("mdb_drop", rc);
}

Status LmdbSession::Count(uint64_t* docs, uint64_t* key_entries) {
  MMDOC_RETURN_IF_ERROR(StartRead());
  MDB_stat st;
  int rc = mdb_stat(read_txn_, backend_->docs(), &st);
  if (rc == 0) {
    *docs = st.ms_entries;
    rc = mdb_stat(read_txn_, backend_->keys(), &st);
    *key_entries = st.ms_entries;
  }
  EndRead();
  return rc == 0 ? Status::OK() : LmdbError("mdb_stat", rc);
}

}  // namespace

std::unique_ptr<Backend> NewLmdbBackend(bool writemap, bool nordahead) {
  return std::make_unique<LmdbBackend>(writemap, nordahead);
}

}  // namespace mmdoc::bench
