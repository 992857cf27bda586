// mmdoc adapter: collection "docs" with a unique index on "key"; documents
// {_id, key, value} stored as the workload's BSON bytes.
//
//   search_id     DB::Get(_id)
//   search_key    DB::GetBy(key, k): the unique key index, then _id (the
//                 same lookups as Find({key: k}) with limit 1, without the
//                 filter, read transaction and cursor objects)
//   search_value  Find({value: v}) in a read transaction (a full scan:
//                 `value` has no index)
//   update        Transaction::Update(_id, {$set: {value: v}}) (the update
//                 by _id; push below measures UpdateOne by a filter), or
//                 ("mmdoc-replace") Transaction::Get + Replace
//   search_prefix Find({key: {$regex: "^abc"}}) in a read transaction: a
//                 case-sensitive ^prefix on the indexed key is an index
//                 range [abc, abd) (Explain: IXSCAN)
//   sort_limit    Find({key: {$gte: g}}, sort key, limit 10) in a read
//                 transaction: the sort walks the key index from g and
//                 stops at 10 (IXSCAN, not sorted in memory)
//   push          Transaction::UpdateOne({_id: id}, {$push: {tags: t}})
//   delete        Transaction::Delete(_id) (the index entry goes with it)
//   build_index   Transaction::CreateIndex(key, unique) on the loaded
//                 collection (the engine sorts the keys, then fills the tree)
//   delete_value  Transaction::DeleteMany({value: v}) (a full scan)
//   delete_all    Transaction::DeleteMany({}) (frees the collection's pages
//                 whole, as a truncate does)
//   compound      its own store: collection docs with the compound index
//                 CreateIndex({{g, 1}, {n, 1}}) from the start, inserts by
//                 Transaction::Insert; the query Find({g: G, n: {$gte: A,
//                 $lt: B}}, sort n, limit) in a read transaction walks that
//                 index from (G, A) and stops at the limit (Explain:
//                 IXSCAN on g_1_n_1, not sorted in memory)
//   mapping       TypedCollection<MappedItem> (mmdoc/mapping.h) against the
//                 same work written by hand with libbson +
//                 Transaction::Insert / DB::Get
//
// Every durability mode maps to mmdoc's own (Options::durability).
#include <bson/bson.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/backend.h"
#include "bench/backends.h"
#include "bench/bson_doc.h"
#include "mmdoc/db.h"
#include "mmdoc/mapping.h"

namespace mmdoc::bench {
namespace {

constexpr char kCollection[] = "docs";
// The mapping phase's collections: the same items through each API.
constexpr char kRawCollection[] = "mapped_raw";
constexpr char kTypedCollection[] = "mapped_typed";

// {field: s} as a filter.
Document StringFilter(const char* field, std::string_view s) {
  bson_t b;
  bson_init(&b);
  bson_append_utf8(&b, field, -1, s.data(), static_cast<int>(s.size()));
  std::string bytes(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return Document::FromTrustedBytes(std::move(bytes));
}

// {$set: {value: v}}
Document SetValue(std::string_view v) {
  bson_t b, child;
  bson_init(&b);
  bson_append_document_begin(&b, "$set", 4, &child);
  bson_append_utf8(&child, "value", 5, v.data(), static_cast<int>(v.size()));
  bson_append_document_end(&b, &child);
  std::string bytes(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return Document::FromTrustedBytes(std::move(bytes));
}

// {key: {op: s}}, e.g. {key: {$regex: "^abc"}} or {key: {$gte: g}}.
Document KeyFilter(const char* op, std::string_view s) {
  bson_t b, child;
  bson_init(&b);
  bson_append_document_begin(&b, "key", 3, &child);
  bson_append_utf8(&child, op, -1, s.data(), static_cast<int>(s.size()));
  bson_append_document_end(&b, &child);
  std::string bytes(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return Document::FromTrustedBytes(std::move(bytes));
}

// {key: {$regex: "^<prefix>"}}; the workload's prefixes are hex digits,
// which a regex takes literally.
Document PrefixFilter(std::string_view prefix) {
  std::string re = "^";
  re.append(prefix);
  return KeyFilter("$regex", re);
}

FindOptions SortByKey(int limit) {
  FindOptions o;
  o.sort_field = "key";
  o.limit = limit;
  return o;
}

// {g: g, n: {$gte: lo, $lt: hi}}: the compound phase's query.
Document GroupRangeFilter(int32_t g, int32_t lo, int32_t hi) {
  bson_t b, child;
  bson_init(&b);
  bson_append_int32(&b, "g", 1, g);
  bson_append_document_begin(&b, "n", 1, &child);
  bson_append_int32(&child, "$gte", 4, lo);
  bson_append_int32(&child, "$lt", 3, hi);
  bson_append_document_end(&b, &child);
  std::string bytes(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return Document::FromTrustedBytes(std::move(bytes));
}

FindOptions SortByN(int limit) {
  FindOptions o;
  o.sort_field = "n";
  o.limit = limit;
  return o;
}

// {$push: {tags: t}}
Document PushTagUpdate(std::string_view t) {
  bson_t b, child;
  bson_init(&b);
  bson_append_document_begin(&b, "$push", 5, &child);
  bson_append_utf8(&child, "tags", 4, t.data(), static_cast<int>(t.size()));
  bson_append_document_end(&b, &child);
  std::string bytes(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return Document::FromTrustedBytes(std::move(bytes));
}

// The `value` of every document a cursor returns, into *values.
Status ValuesOf(Cursor* c, std::vector<std::string>* values) {
  values->clear();
  std::string_view field;
  while (c->Next()) {
    std::string_view doc = c->raw();
    if (!FieldOf(doc.data(), doc.size(), "value", &field)) return Status::Corruption("bad BSON");
    values->emplace_back(field);
  }
  return c->status();
}

const Mapping<MappedItem>& ItemMapping() {
  static const Mapping<MappedItem> m = Mapping<MappedItem>()
                                           .Id(&MappedItem::id)
                                           .Field("key", &MappedItem::key)
                                           .Field("value", &MappedItem::value);
  return m;
}

Status ValueOf(std::string_view doc, std::string* value) {
  std::string_view field;
  if (!FieldOf(doc.data(), doc.size(), "value", &field)) return Status::Corruption("bad BSON");
  value->assign(field);
  return Status::OK();
}

class MmdocSession : public Session {
 public:
  MmdocSession(DB* db, bool replace) : db_(db), replace_(replace) {}

  Status Begin() override {
    auto txn = db_->Begin();
    if (!txn.ok()) return txn.status();
    txn_ = std::move(txn.value());
    return Status::OK();
  }

  Status Commit() override {
    Status s = txn_->Commit();
    txn_.reset();
    return s;
  }

  Status Insert(const DocRef& doc) override {
    return txn_->Insert(kCollection, Document::FromTrustedBytes(std::string(doc.bson)));
  }

  Status UpdateValue(std::string_view id, std::string_view value) override {
    if (replace_) {
      Value key = Value::String(id);
      auto doc = txn_->Get(kCollection, key);
      if (!doc.ok()) return doc.status();
      if (!WithValue(doc.value().bytes(), value, &scratch_)) {
        return Status::Corruption("bad BSON");
      }
      return txn_->Replace(kCollection, key, Document::FromTrustedBytes(scratch_));
    }
    return txn_->Update(kCollection, Value::String(id), SetValue(value));
  }

  Status Delete(std::string_view id) override {
    return txn_->Delete(kCollection, Value::String(id));
  }

  Status GetById(std::string_view id, std::string* value) override {
    auto doc = db_->Get(kCollection, Value::String(id));
    if (!doc.ok()) return doc.status();
    return ValueOf(doc.value().bytes(), value);
  }

  Status FindByKey(std::string_view key, std::string* value) override {
    auto doc = db_->GetBy(kCollection, "key", Value::String(key));
    if (!doc.ok()) return doc.status();
    return ValueOf(doc.value().bytes(), value);
  }

  Status ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) override {
    auto txn = db_->BeginRead();
    if (!txn.ok()) return txn.status();
    auto cursor = txn.value()->Find(kCollection, StringFilter("value", value));
    if (!cursor.ok()) return cursor.status();
    Cursor& c = *cursor.value();
    *found = false;
    while (c.Next()) *found = true;
    // mmdoc parses the documents itself; the byte count is not exposed.
    if (scanned_bytes != nullptr) *scanned_bytes = 0;
    return c.status();
  }

  Status FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) override {
    auto txn = db_->BeginRead();
    if (!txn.ok()) return txn.status();
    auto cursor = txn.value()->Find(kCollection, PrefixFilter(prefix));
    if (!cursor.ok()) return cursor.status();
    return ValuesOf(cursor.value().get(), values);
  }

  Status FindKeysFrom(std::string_view from, int limit, std::vector<std::string>* values) override {
    auto txn = db_->BeginRead();
    if (!txn.ok()) return txn.status();
    auto cursor = txn.value()->Find(kCollection, KeyFilter("$gte", from), SortByKey(limit));
    if (!cursor.ok()) return cursor.status();
    return ValuesOf(cursor.value().get(), values);
  }

  Status GetDocument(std::string_view id, std::string* bson) override {
    auto doc = db_->Get(kCollection, Value::String(id));
    if (!doc.ok()) return doc.status();
    bson->assign(doc.value().bytes());
    return Status::OK();
  }

  Status ExplainKeyQueries(std::string_view prefix, std::string_view from,
                           std::string* plans) override {
    auto txn = db_->BeginRead();
    if (!txn.ok()) return txn.status();
    auto a = txn.value()->Explain(kCollection, PrefixFilter(prefix));
    if (!a.ok()) return a.status();
    auto b = txn.value()->Explain(kCollection, KeyFilter("$gte", from), SortByKey(10));
    if (!b.ok()) return b.status();
    *plans = "search_prefix: " + a.value().ToJson() + "\nsort_limit: " + b.value().ToJson();
    return Status::OK();
  }

  Status InsertGrouped(const GroupDocRef& doc) override {
    return txn_->Insert(kCollection, Document::FromTrustedBytes(std::string(doc.bson)));
  }

  Status FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                        std::vector<std::string>* docs) override {
    docs->clear();
    auto txn = db_->BeginRead();
    if (!txn.ok()) return txn.status();
    auto cursor = txn.value()->Find(kCollection, GroupRangeFilter(g, lo, hi), SortByN(limit));
    if (!cursor.ok()) return cursor.status();
    Cursor& c = *cursor.value();
    while (c.Next()) docs->emplace_back(c.raw());
    return c.status();
  }

  Status ExplainGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                           std::string* plan) override {
    auto txn = db_->BeginRead();
    if (!txn.ok()) return txn.status();
    auto e = txn.value()->Explain(kCollection, GroupRangeFilter(g, lo, hi), SortByN(limit));
    if (!e.ok()) return e.status();
    *plan = e.value().ToJson();
    return Status::OK();
  }

  Status PushTag(std::string_view id, std::string_view tag) override {
    auto r = txn_->UpdateOne(kCollection, StringFilter("_id", id), PushTagUpdate(tag));
    if (!r.ok()) return r.status();
    if (r.value().matched == 0) return Status::NotFound("push", id);
    return Status::OK();
  }

  Status BuildKeyIndex() override {
    IndexOptions unique;
    unique.unique = true;
    return txn_->CreateIndex(kCollection, "key", unique);
  }

  Status DeleteByValue(std::string_view value, uint64_t* deleted) override {
    auto n = txn_->DeleteMany(kCollection, StringFilter("value", value));
    if (!n.ok()) return n.status();
    *deleted = n.value();
    return Status::OK();
  }

  Status DeleteAll() override {
    auto n = txn_->DeleteMany(kCollection, Document());
    return n.status();
  }

  Status Count(uint64_t* docs, uint64_t* key_entries) override {
    auto txn = db_->BeginRead();
    if (!txn.ok()) return txn.status();
    auto n = txn.value()->Count(kCollection, Document());
    if (!n.ok()) return n.status();
    *docs = n.value();
    auto indexes = txn.value()->ListIndexes(kCollection);
    if (!indexes.ok()) return indexes.status();
    *key_entries = 0;
    for (const IndexInfo& i : indexes.value()) {
      if (i.field == "key") *key_entries = i.entries;
    }
    return Status::OK();
  }

  Status ResetMapping() override {
    for (const char* c : {kRawCollection, kTypedCollection}) {
      Status s = db_->DropCollection(c);
      if (!s.ok() && !s.IsNotFound()) return s;
      MMDOC_RETURN_IF_ERROR(db_->CreateCollection(c));
    }
    typed_ = std::make_unique<TypedCollection<MappedItem>>(db_, kTypedCollection, ItemMapping());
    return Status::OK();
  }

  Status MappedInsert(MappingApi api, const MappedItem& item) override {
    if (api == MappingApi::kTyped) return typed_->Insert(txn_.get(), item);
    // What an application writes without the mapping layer: libbson by
    // hand, then Document::FromBson, which checks the bytes (the typed
    // layer checks its strings' UTF-8 as it encodes them).
    bson_t b;
    bson_init(&b);
    bson_append_utf8(&b, "_id", 3, item.id.data(), static_cast<int>(item.id.size()));
    bson_append_utf8(&b, "key", 3, item.key.data(), static_cast<int>(item.key.size()));
    bson_append_utf8(&b, "value", 5, item.value.data(), static_cast<int>(item.value.size()));
    auto doc = Document::FromBson(&b);
    bson_destroy(&b);
    if (!doc.ok()) return doc.status();
    return txn_->Insert(kRawCollection, doc.value());
  }

  Status MappedGet(MappingApi api, std::string_view id, MappedItem* out) override {
    if (api == MappingApi::kTyped) {
      auto r = typed_->Get(Value::String(id));
      if (!r.ok()) return r.status();
      *out = std::move(r.value());
      return Status::OK();
    }
    auto d = db_->Get(kRawCollection, Value::String(id));
    if (!d.ok()) return d.status();
    bson_t b;
    if (!bson_init_static(&b, d.value().data(), d.value().size()))
      return Status::Corruption("bad BSON");
    bson_iter_t it;
    if (!bson_iter_init(&it, &b)) return Status::Corruption("bad BSON");
    while (bson_iter_next(&it)) {
      if (!BSON_ITER_HOLDS_UTF8(&it)) continue;
      const char* k = bson_iter_key(&it);
      uint32_t n = 0;
      const char* v = bson_iter_utf8(&it, &n);
      if (std::strcmp(k, "_id") == 0) {
        out->id.assign(v, n);
      } else if (std::strcmp(k, "key") == 0) {
        out->key.assign(v, n);
      } else if (std::strcmp(k, "value") == 0) {
        out->value.assign(v, n);
      }
    }
    return Status::OK();
  }

 private:
  DB* const db_;
  const bool replace_;
  std::unique_ptr<Transaction> txn_;
  std::string scratch_;
  std::unique_ptr<TypedCollection<MappedItem>> typed_;
};

class MmdocBackend : public Backend {
 public:
  MmdocBackend(bool replace, bool buffered) : replace_(replace), buffered_(buffered) {}
  ~MmdocBackend() override { Close().ok(); }

  std::string name() const override {
    if (!buffered_) return "mmdoc-pages";
    return replace_ ? "mmdoc-replace" : "mmdoc";
  }
  bool Supports(Durability) const override { return true; }

  Status Open(const std::string& dir, const BackendConfig& config) override {
    Options options;
    options.create_if_missing = true;
    options.durability = config.durability;
    options.sync_interval_ms = config.sync_interval_ms;
    if (config.mmdoc_log_bytes != 0) options.log_size = config.mmdoc_log_bytes;
    if (config.mmdoc_page_size != 0) options.page_size = config.mmdoc_page_size;
    options.write_buffer_size = buffered_ ? config.mmdoc_buffer_bytes : 0;
    buffer_bytes_ = options.write_buffer_size;
    durability_ = config.durability;
    sync_interval_ms_ = config.sync_interval_ms;
    auto db = DB::Open(dir + "/bench.mmdb", options);
    if (!db.ok()) return db.status();
    db_ = std::move(db.value());
    // The settings report what the file has, not what was asked for.
    auto stats = db_->Stats();
    if (!stats.ok()) return stats.status();
    log_size_ = stats.value().log_size;
    page_size_ = stats.value().page_size;
    MMDOC_RETURN_IF_ERROR(db_->CreateCollection(kCollection));
    group_index_ = config.group_index;
    if (group_index_) {
      MMDOC_RETURN_IF_ERROR(db_->CreateIndex(kCollection, {{"g", 1}, {"n", 1}}));
    }
    key_index_ = config.key_index;
    if (!key_index_) return Status::OK();
    IndexOptions unique;
    unique.unique = true;
    return db_->CreateIndex(kCollection, "key", unique);
  }

  std::string settings() const override {
    std::string s = key_index_     ? "mmdoc: collection docs, unique index on key"
                    : group_index_ ? "mmdoc: collection docs {_id, g, n, payload}, compound "
                                     "index g_1_n_1"
                                   : "mmdoc: collection docs, no index on key (until "
                                     "build_index)";
    s += ", durability=";
    s += DurabilityName(durability_);
    if (durability_ == Durability::kPeriodic) {
      s += " (" + std::to_string(sync_interval_ms_) + " ms)";
    }
    s += ", log " + std::to_string(log_size_ >> 20) + " MiB";
    s += ", page " + std::to_string(page_size_);
    if (buffer_bytes_ != 0) s += ", write buffer " + std::to_string(buffer_bytes_ >> 20) + " MiB";
    s += replace_ ? ", update = Get + Replace" : ", update = Update(_id, $set)";
    s += ", search_key = DB::GetBy, search_prefix = Find({key: {$regex: ^prefix}}) (an index "
         "range), sort_limit = Find({key: {$gte}}, sort key, limit 10) (an index walk), push = "
         "UpdateOne($push), build_index = CreateIndex(unique), "
         "delete_value = DeleteMany({value}), delete_all = DeleteMany({}), compound = "
         "Find({g, n: {$gte, $lt}}, sort n, limit) (a walk of g_1_n_1)";
    return s;
  }

  Result<std::unique_ptr<Session>> NewSession() override {
    return std::unique_ptr<Session>(std::make_unique<MmdocSession>(db_.get(), replace_));
  }

  bool HasMapping() const override { return true; }

  std::string State() const override {
    if (!buffered_ || db_ == nullptr) return "";
    // Without the page walk: it would read the whole file just before the
    // phase it describes.
    StatsOptions cheap;
    cheap.count_pages = false;
    auto stats = db_->Stats(cheap);
    if (!stats.ok()) return "stats: " + stats.status().ToString();
    const DBStats& st = stats.value();
    char b[160];
    std::snprintf(b, sizeof b,
                  "buffer %.1f MiB unmerged, %llu runs (%llu being merged), %.1f MiB of key "
                  "filters",
                  static_cast<double>(st.write_buffer_bytes) / (1 << 20),
                  static_cast<unsigned long long>(st.runs),
                  static_cast<unsigned long long>(st.runs_merging),
                  static_cast<double>(st.key_filter_bytes) / (1 << 20));
    return b;
  }

  bool Waits(WriterWaits* w) const override {
    if (!buffered_ || db_ == nullptr) return false;
    StatsOptions cheap;
    cheap.count_pages = false;
    auto stats = db_->Stats(cheap);
    if (!stats.ok()) return false;
    const DBStats& st = stats.value();
    w->merge_waits = st.merge_waits;
    w->merge_wait_seconds = st.merge_wait_seconds;
    w->checkpoints = st.writer_checkpoints;
    w->log_full_merges = st.log_full_merges;
    return true;
  }

  Status Close() override {
    db_.reset();
    return Status::OK();
  }

 private:
  const bool replace_;
  const bool buffered_;
  uint64_t buffer_bytes_ = 0;
  bool key_index_ = true;
  bool group_index_ = false;
  std::unique_ptr<DB> db_;
  Durability durability_ = Durability::kFsync;
  uint32_t sync_interval_ms_ = 100;
  uint64_t log_size_ = 0;
  uint32_t page_size_ = 0;
};

}  // namespace

std::unique_ptr<Backend> NewMmdocBackend(bool replace, bool buffered) {
  return std::make_unique<MmdocBackend>(replace, buffered);
}

}  // namespace mmdoc::bench
