// bench::Backend: one interface over every engine mmdoc-bench measures.
//
// An engine (mmdoc, LMDB, RocksDB, SQLite) keeps the seed workload's
// documents {_id, key, value} (GUID strings) as the same BSON bytes, keyed by
// _id, plus a unique secondary index on `key`; `value` is not indexed. An
// adapter does what the engine's documentation recommends for that (its
// best-known settings) and says so in settings().
//
//   auto backend = bench::NewBackend("lmdb").value();
//   BackendConfig config;  // durability, expected size, ...
//   Status s = backend->Open(dir, config);
//   auto session = backend->NewSession().value();   // one per thread
//   s = session->Begin();
//   s = session->Insert(doc);   // ... B documents per transaction
//   s = session->Commit();
//   std::string value;
//   s = session->GetById(id, &value);
//
// Writes (Insert, UpdateValue, PushTag, Delete, DeleteByValue, DeleteAll,
// BuildKeyIndex) run inside Begin/Commit; reads run each in a snapshot of
// their own (as an auto-committed single read does).
//
// The compound phase's store (BackendConfig::group_index) holds other
// documents, {_id, g, n, payload} (GroupDocRef), with a compound index on
// (g asc, n asc) instead of the key index: InsertGrouped stores them and
// FindGroupRange is the query {g: G, n: {$gte: A, $lt: B}} sorted by n with
// a limit, through that index.
//
// Seed 002's operations: a store opened with BackendConfig::key_index =
// false keeps the documents without the `key` index (insert_noindex), and
// BuildKeyIndex builds it over what is stored (build_index); DeleteByValue
// deletes by the unindexed `value` (a scan per call); DeleteAll empties the
// store. Seed 003's typed mapping is mmdoc's own: Backend::HasMapping says
// whether an engine has one, and the Mapped* calls use it.
//
// A Session belongs to one thread at a time; a Backend serves many sessions
// from many threads at once. Close (or destruction) requires every session
// to be gone.
#ifndef MMDOC_BENCH_BACKEND_H_
#define MMDOC_BENCH_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mmdoc/durability.h"
#include "mmdoc/status.h"

namespace mmdoc::bench {

// One document of the workload: the three GUID strings and its BSON bytes
// {_id: id, key: key, value: value}, built once (MakeBson) and handed to
// every engine unchanged.
struct DocRef {
  std::string_view id;
  std::string_view key;
  std::string_view bson;
};

// One document of the compound phase, {_id: id, g: g, n: n, payload: p}
// (g and n int32), its BSON bytes (MakeGroupDocument) built once and handed
// to every engine unchanged.
struct GroupDocRef {
  std::string_view id;
  int32_t g = 0;
  int32_t n = 0;
  std::string_view bson;
};

struct BackendConfig {
  // What a commit waits for; an engine that lacks the mode reports it
  // through Backend::Supports and is never opened with it.
  Durability durability = Durability::kNone;
  // How many documents and BSON bytes the run will store (for map sizes
  // and cache sizes); upper bounds are fine.
  uint64_t expected_docs = 0;
  uint64_t expected_bytes = 0;
  // Concurrent sessions the run will use (reader slots, connections).
  int max_sessions = 1;
  // Periodic flush interval for Durability::kPeriodic.
  uint32_t sync_interval_ms = 100;
  // mmdoc only: Options::log_size (0 = the library's default).
  uint64_t mmdoc_log_bytes = 0;
  // mmdoc only: Options::page_size (0 = the library's default).
  uint32_t mmdoc_page_size = 0;
  // mmdoc's Options::write_buffer_size (not mmdoc-pages', which is 0).
  uint64_t mmdoc_buffer_bytes = 64ull << 20;
  // Whether the store has the unique index on `key` from the start. false:
  // the documents alone (what insert_noindex measures); BuildKeyIndex adds
  // the index later.
  bool key_index = true;
  // The compound phase's store (key_index false): it holds GroupDocRef
  // documents with a compound index on (g asc, n asc) from the start.
  bool group_index = false;
};

// One document of the mapping phase as an application's own struct.
struct MappedItem {
  std::string id;
  std::string key;
  std::string value;
};

// How the mapping phase reaches the engine: its raw BSON API (the caller
// builds and reads BSON with libbson) or its typed mapping layer.
enum class MappingApi { kRaw, kTyped };

class Session {
 public:
  virtual ~Session() = default;

  // --- writes, between Begin and Commit ---
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  // Stores doc under doc.id and indexes doc.key. AlreadyExists when the _id
  // or the key is taken.
  virtual Status Insert(const DocRef& doc) = 0;
  // Reads the document with this _id, sets its `value` and writes it back
  // (the key index stays consistent). NotFound when absent.
  virtual Status UpdateValue(std::string_view id, std::string_view value) = 0;
  // Deletes the document with this _id and its key index entry. NotFound
  // when absent.
  virtual Status Delete(std::string_view id) = 0;

  // --- reads, each in its own snapshot ---
  // The `value` field of the document with this _id; NotFound when absent.
  virtual Status GetById(std::string_view id, std::string* value) = 0;
  // The `value` field of the document whose `key` is key, found through
  // the key index; NotFound when absent.
  virtual Status FindByKey(std::string_view key, std::string* value) = 0;
  // Reads every stored document, parses its BSON and compares its `value`
  // field with value (no index, no early stop: a full scan). *found tells
  // whether any matched; *scanned_bytes (if non-null) gets the BSON bytes
  // read.
  virtual Status ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) = 0;

  // --- key ranges (search_prefix, sort_limit), each in its own snapshot ---
  // The `value` fields of every document whose key starts with prefix, in
  // key order: a range of the key index, then each document (its BSON
  // parsed for `value`). *values is replaced; none found is not an error.
  virtual Status FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) = 0;
  // The `value` fields of the first `limit` documents (fewer at the end)
  // whose key is >= from, in key order, found the same way: pagination by
  // key. *values is replaced.
  virtual Status FindKeysFrom(std::string_view from, int limit,
                              std::vector<std::string>* values) = 0;
  // The whole document with this _id (its BSON bytes); NotFound when absent.
  // Untimed checks read it (push's `tags`).
  virtual Status GetDocument(std::string_view id, std::string* bson) = 0;

  // How the engine runs FindKeyPrefix(prefix) and FindKeysFrom(from, 10):
  // its own explanation of each plan, one line each (mmdoc: Explain's
  // JSON). NotSupported for an engine that does not say.
  virtual Status ExplainKeyQueries(std::string_view prefix, std::string_view from,
                                   std::string* plans) {
    (void)prefix;
    (void)from;
    (void)plans;
    return Status::NotSupported("no query plans to explain");
  }

  // --- push, between Begin and Commit ---
  // Appends the string tag to the document's `tags` array, creating the
  // array when the document has none (MongoDB's $push). NotFound when
  // absent. A document is pushed to at most once per transaction: the
  // workload's pushes are, and RocksDB's WriteBatch does not read its own
  // writes.
  virtual Status PushTag(std::string_view id, std::string_view tag) = 0;

  // --- seed 002: index builds and bulk deletes, between Begin and Commit ---
  // Builds the unique index on `key` from every stored document (a store
  // opened with key_index = false), so FindByKey works afterwards.
  // AlreadyExists when two documents share a key (nothing is built).
  virtual Status BuildKeyIndex() = 0;
  // Deletes every document whose `value` field equals value, with its key
  // index entry: a full scan, since `value` has no index. *deleted gets how
  // many were deleted (0 is not an error).
  virtual Status DeleteByValue(std::string_view value, uint64_t* deleted) = 0;
  // Deletes every document and every key index entry. The store stays
  // usable, with its index (inserts work afterwards).
  virtual Status DeleteAll() = 0;
  // Untimed check, outside Begin/Commit: the documents stored and the
  // entries of the key index (0 when the store has no key index).
  virtual Status Count(uint64_t* docs, uint64_t* key_entries) = 0;

  // --- compound: a store opened with BackendConfig::group_index ---
  // Stores doc under doc.id and indexes it by (g, n), between Begin and
  // Commit. NotSupported from an engine without the phase (then n/a).
  virtual Status InsertGrouped(const GroupDocRef& doc) {
    (void)doc;
    return Status::NotSupported("no compound index");
  }
  // The whole documents (their BSON bytes) with g == g and lo <= n < hi,
  // in n order, the first `limit` of them: a range of the (g, n) index,
  // then each document, in one snapshot. *docs is replaced.
  virtual Status FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                                std::vector<std::string>* docs) {
    (void)g;
    (void)lo;
    (void)hi;
    (void)limit;
    (void)docs;
    return Status::NotSupported("no compound index");
  }
  // How the engine runs FindGroupRange(g, lo, hi, limit), in its own words
  // (mmdoc: Explain's JSON). NotSupported for an engine that does not say.
  virtual Status ExplainGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                                   std::string* plan) {
    (void)g;
    (void)lo;
    (void)hi;
    (void)limit;
    (void)plan;
    return Status::NotSupported("no query plans to explain");
  }

  // --- seed 003: the typed mapping layer (Backend::HasMapping) ---
  // Creates the mapping phase's two collections empty (dropping earlier
  // ones): one written and read through the raw API, one through the typed
  // layer. Outside Begin/Commit.
  virtual Status ResetMapping() { return Status::NotSupported("no typed mapping layer"); }
  // Inserts item into api's collection through api (between Begin and
  // Commit).
  virtual Status MappedInsert(MappingApi api, const MappedItem& item) {
    (void)api;
    (void)item;
    return Status::NotSupported("no typed mapping layer");
  }
  // Reads the document with this _id from api's collection, through api,
  // into *out (its own snapshot).
  virtual Status MappedGet(MappingApi api, std::string_view id, MappedItem* out) {
    (void)api;
    (void)id;
    (void)out;
    return Status::NotSupported("no typed mapping layer");
  }
};

// How long a writer waited on its engine's background work (counters).
struct WriterWaits {
  uint64_t merge_waits = 0;  // commits that waited for the merge before
  double merge_wait_seconds = 0;
  uint64_t checkpoints = 0;      // checkpoints a commit ran itself
  uint64_t log_full_merges = 0;  // commits that merged everything first
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Engine name as given to NewBackend ("lmdb", "sqlite-norowid", ...).
  virtual std::string name() const = 0;
  // Whether the engine has this durability mode at all.
  virtual bool Supports(Durability d) const = 0;
  // Creates a fresh store in the (existing, empty) directory dir.
  virtual Status Open(const std::string& dir, const BackendConfig& config) = 0;
  // The settings in use, one line, e.g. "MDB_WRITEMAP|MDB_NOSYNC, map 4 GiB".
  virtual std::string settings() const = 0;
  // A session for one thread (connections, reader slots, statements).
  virtual Result<std::unique_ptr<Session>> NewSession() = 0;
  // Whether the store lives in this process, so that the bench's peak
  // memory is the engine's; false for a server the bench talks to (its
  // peak is then not measured, and shown as unknown).
  virtual bool InProcess() const { return true; }
  // Whether the engine has a typed mapping layer (structs <-> documents)
  // that Session::Mapped* measure against its raw API. Only mmdoc has one.
  virtual bool HasMapping() const { return false; }
  // What the store holds besides its trees at this moment, one line
  // ("" when nothing): mmdoc's unmerged write buffer and runs, reported
  // beside the read phases so that a reader knows what they read through.
  virtual std::string State() const { return ""; }
  // The writer's waits on the engine's own background work since the store
  // opened, into *w; false when the engine does not count them (all but
  // mmdoc: its merges and checkpoints, DBStats::merge_waits and after).
  virtual bool Waits(WriterWaits* w) const {
    (void)w;
    return false;
  }
  // Closes the store (flushes what the engine flushes on close).
  virtual Status Close() = 0;
};

// "mmdoc", "lmdb", "rocksdb", "sqlite", and variants: "mmdoc-replace"
// (update by Get + Replace), "mmdoc-pages" (no write buffer: each commit
// writes its pages),
// "lmdb-nowritemap" (LMDB's default), "lmdb-nordahead" (MDB_NORDAHEAD: no
// readahead, like mmdoc's data map), "sqlite-norowid" (a WITHOUT ROWID
// table); "mmdoc-remote" and "mmdoc-remote-w0": mmdoc through `mmdoc serve`
// and libmongoc, writes w:1 or w:0.
// NotSupported for a name not built in, InvalidArgument for an unknown one.
Result<std::unique_ptr<Backend>> NewBackend(std::string_view name);
// The smallest string above every string that starts with prefix (the
// exclusive end of a prefix's key range): prefix with its last byte below
// 0xff incremented and what follows dropped; "" when there is none (all
// 0xff: the range runs to the end).
std::string PrefixEnd(std::string_view prefix);
// The (g, n) index key of the compound phase's peers (LMDB, RocksDB):
// g and n as big-endian uint32 with the sign bit flipped, so bytewise order
// is numeric order, then id (which keeps keys unique). Without id: the
// start of that (g, n).
std::string GroupKey(int32_t g, int32_t n, std::string_view id = "");
// Every engine name NewBackend knows (the default set comes first).
std::vector<std::string> BackendNames();
// The engines a plain run compares: mmdoc (when built), lmdb, rocksdb, sqlite.
std::vector<std::string> DefaultBackendNames();

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_BACKEND_H_
