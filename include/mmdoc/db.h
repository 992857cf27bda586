// mmdoc: an embedded document store. Start here.
//
// A database is one file (plus its write-ahead log, <path>-log) holding
// collections of BSON documents. Every document has an _id (any BSON value
// but an array; an ObjectId is generated when a document has none) and
// lives in its collection's B+tree keyed by _id. Secondary indexes on a
// dotted field path or a compound key pattern, unique or not, sparse or
// partial, are kept in step with the documents in the same transaction.
// Queries take MongoDB's filter syntax and use an index when one constrains
// the filter, a full scan otherwise (Explain says which, its bounds and what
// it examined); a sort on _id, on a single-key indexed field or on a
// compound index's fields walks that index.
//
//   auto db = mmdoc::DB::Open("app.mmdb").value();
//   auto doc = mmdoc::Document::FromJson(R"({"name": "ada", "age": 36})").value();
//   mmdoc::Value id;
//   mmdoc::Status s = db->Insert("people", doc, &id);
//   auto found = db->Find("people", mmdoc::Document::FromJson(R"({"age": {"$gt": 30}})").value());
//
// (tests/install compiles and runs this example against an installed copy.)
//
// Filters: {field: value}, dotted paths and MongoDB's array rules; $eq $ne
// $gt $gte $lt $lte $in $nin $exists; $regex (with $options i m s x u, or a
// regex value {field: /re/}: PCRE2, as MongoDB; a case-sensitive ^prefix
// uses an index as a range); $elemMatch (operators or a sub-filter), $size,
// $all, $type (alias or number), $not, $mod; $and $or $nor. libbson's JSON
// reader, not the filter, limits two spellings: {"$regex": ..., "$options":
// ...} becomes a regex value (an option letter it does not know is dropped
// silently), and a document whose first key is "$type" is read as legacy
// binary unless its value is a name starting with g-z ({"$exists": true,
// "$type": "array"} works); BSON built directly has neither limit.
//
// What is refused rather than guessed (InvalidArgument naming the problem):
// a filter operator the filter does not implement ($where, $text, $expr,
// $jsonSchema, $bits*, $geo*, $near, $comment, unknown $ operators, at any
// depth: never matched by equality); a bad regex or option letter; a regex
// under $ne or $gt/$gte/$lt/$lte (as MongoDB); bad operands ($size: -1,
// $mod: [0, 1], $type: "nope", ...); an integer outside int64 in JSON
// (never wrapped); a field name repeated within one (sub)document (two _ids
// above all); a negative limit or skip; a projection that is not a list of
// field paths.
//
// Transactions: one writer at a time, any number of readers. A read
// transaction (BeginRead) sees a snapshot as of its start and never blocks
// or is blocked by the writer. A write transaction (Begin) sees its own
// changes; Commit makes them visible and durable as its Durability says;
// Abort (or destroying it uncommitted) discards them. The DB's own
// Insert/Get/... methods each run in a transaction of their own.
//
// Errors are Status values (mmdoc/status.h); nothing throws but a failed
// allocation (below). A database reports corruption as Corruption naming the
// page, and a failed write or sync during commit makes every later write fail
// with the same status until the database is reopened (reads go on). A disk
// that cannot hold a write fails it with Full; writes go on once there is room.
// Memory that runs out while a logged commit is published or the buffer is
// merged is an IOError that stops writes until a reopen (the commit is in the
// log); elsewhere in mmdoc a failed allocation throws std::bad_alloc. libbson,
// which holds documents, aborts the process on a failed allocation unless the
// application gives it an allocator that does something else
// (bson_mem_set_vtable; the mmdoc tool's reports it and exits with status 2).
//
// Thread safety: a DB may be used from many threads at once. A read
// Transaction and a Cursor belong to one thread at a time; a write
// Transaction to the thread that began it, to its end (the DB knows the
// writer by its thread). That thread gets Busy from Begin, the
// auto-committed writes, Check, Compact and Close (each would wait for its
// own writer forever). A process forked after Open may not use the DB (every
// call is InvalidArgument): it lets go of the files at the fork, so that it
// never keeps them locked, and may open the database itself once the
// parent has closed it.
#ifndef MMDOC_DB_H_
#define MMDOC_DB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mmdoc/document.h"
#include "mmdoc/durability.h"
#include "mmdoc/options.h"
#include "mmdoc/status.h"

namespace mmdoc {

class DBImpl;
class TransactionImpl;
class CursorImpl;

// How UpdateOne / UpdateMany run.
struct UpdateOptions {
  // When the filter matches no document, insert one (MongoDB's upsert): the
  // filter's equality fields ({a: 1}, {a: {$eq: 1}}, {"a.b": 1} as
  // {a: {b: 1}}, also inside $and; other operators such as $gt give
  // nothing) with the update applied to them, $setOnInsert included, or for
  // a replacement the replacement with the filter's _id; _id the filter's,
  // else one the update sets ($set, $setOnInsert), else an ObjectId.
  // Default: false.
  bool upsert = false;
};

// How FindOneAndUpdate / FindOneAndDelete pick their document and what
// FindOneAndUpdate returns (MongoDB's findOneAndUpdate options).
struct FindAndModifyOptions {
  // Of the matching documents, take the first in this order (as
  // FindOptions::sort_field and sort_direction); "" takes the first the
  // query finds. Default: "", 1.
  std::string sort_field;
  int sort_direction = 1;
  // FindOneAndUpdate returns the document as the update left it (MongoDB's
  // returnDocument: "after") instead of as it was. Default: false.
  bool return_after = false;
  // FindOneAndUpdate inserts when nothing matches, as UpdateOptions::upsert
  // says; it then returns the inserted document with return_after, else
  // nothing. Default: false.
  bool upsert = false;
  // The document returned is projected as FindOptions::projection says
  // ("a" keeps, "-a" drops); the change itself is not. Default: {}.
  std::vector<std::string> projection;
};

struct UpdateResult {
  uint64_t matched = 0;   // documents the filter matched
  uint64_t modified = 0;  // documents whose bytes changed
  // The _id of the document an upsert inserted (matched and modified are
  // then 0); empty when none was inserted.
  std::optional<Value> upserted_id;
};

// How a query ran (Explain, or a Cursor after it finished).
struct ExplainInfo {
  std::string plan;   // "IDHACK" (_id lookup), "IXSCAN" or "COLLSCAN"
  std::string index;  // name of the index used (IndexInfo::field); "" for COLLSCAN
  // The index key ranges scanned, per field of the index, as MongoDB's
  // indexBounds: {"a": ["[5, 5]"], "b": ["(3, MaxKey]"]}; "" without an
  // index.
  std::string bounds;
  uint64_t keys_examined = 0;
  uint64_t docs_examined = 0;
  uint64_t returned = 0;
  // The matches were collected and sorted in memory (a sort the plan's
  // index order does not give); false when unsorted or walked in order.
  bool sorted_in_memory = false;
  // The index bounds are exact for the whole filter (a non-multikey index,
  // equalities and one range on its leading fields, number or string
  // operands): the documents the walk fetched were not checked against
  // the filter again. False for any other plan.
  bool exact_bounds = false;
  // {"plan": ..., "index": ..., "indexBounds": ..., "keysExamined": ...,
  // "docsExamined": ..., "returned": ..., "sortedInMemory": ...,
  // "exactBounds": ...,
  // "totalKeysExamined": ..., "totalDocsExamined": ..., "nReturned": ...}
  // (the last three are MongoDB's names for the same counts).
  std::string ToJson() const;
};

struct IndexInfo {
  // The index's name, which DropIndex takes: for an index on one field,
  // ascending, the field's dotted path; otherwise MongoDB's default name,
  // each field and direction joined by '_' ("a_1_b_-1").
  std::string field;
  std::vector<IndexKey> keys;  // the key pattern, first field first
  bool unique = false;
  bool sparse = false;
  std::string partial_filter;  // Extended JSON; "" when none
  uint64_t entries = 0;
};

struct CollectionStats {
  std::string name;
  uint64_t documents = 0;
  uint64_t data_pages = 0;  // pages of the _id tree incl. overflow
  std::vector<IndexInfo> indexes;
  std::vector<uint64_t> index_pages;  // parallel to indexes
};

struct DBStats {
  std::vector<CollectionStats> collections;
  uint32_t page_size = 0;
  uint64_t file_size = 0;
  // The log file's size now (a growth a full disk cuts short is given
  // back), and Options::log_size, the most it grows to: it
  // starts at 1 MiB (less for a smaller budget) and doubles as the work
  // needs; a clean close lets the next session start it small again.
  uint64_t log_file_size = 0;
  uint64_t log_size = 0;
  uint64_t page_count = 0;
  uint64_t free_pages = 0;  // incl. pages waiting for readers/checkpoint
  double fill_factor = 0;   // used / capacity of tree pages
  uint64_t txid = 0;
  uint64_t readers = 0;
  uint64_t oldest_reader_txid = 0;  // a reader left open pins pages
  // With Options::write_buffer_size: the changes not yet merged into pages,
  // and the key filters that let inserts skip the trees' unique checks
  // (built in the background once a tree is written, and again after a
  // definition changes).
  uint64_t write_buffer_bytes = 0;
  uint64_t key_filter_bytes = 0;
  uint64_t key_filters_ready = 0;  // trees whose filter is built
  // Runs: merged generations waiting, each as a sorted tree of its own in
  // the file, to be merged into their trees a few at a time
  // (docs/write-path.md); the changes they hold; and those of them whose
  // merge is under way (it goes in slices, between generations).
  uint64_t runs = 0;
  uint64_t run_entries = 0;
  uint64_t runs_merging = 0;
  // Since Open: commits that found the log full of changes waiting for
  // their merge, and merged the whole buffer into pages on their own thread
  // first (a stall of up to seconds). The buffer is also handed to the
  // merger when its changes fill about half of Options::log_size, so in
  // steady work this stays 0; a commit whose record is a large part of the
  // log can still cause one.
  uint64_t log_full_merges = 0;
  // Since Open, the writer's other waits on the background merge:
  //  - merge_waits: commits that filled the buffer's budget while the
  //    generation before was still merging, and waited for that merge (the
  //    merger falling behind: writes then go at its pace), and the seconds
  //    they waited in all;
  //  - writer_checkpoints: checkpoints a commit ran itself, each a sync of
  //    the data file, because the merger had to skip its own while a writer
  //    held the token (docs/write-path.md).
  uint64_t merge_waits = 0;
  double merge_wait_seconds = 0;
  uint64_t writer_checkpoints = 0;
  std::string ToJson() const;
};

// What DB::Stats gathers.
struct StatsOptions {
  // Walk every tree for its pages, its index entries and the fill factor:
  // this reads the whole file. Without it Stats reads only the catalog, and
  // CollectionStats::data_pages and index_pages, IndexInfo::entries and
  // DBStats::fill_factor are 0 (what is cheap to poll: sizes, document
  // counts, the write buffer, runs and the writer's waits).
  bool count_pages = true;
};

// Iterates the documents a query returns. Positioned before the first; call
// Next() until it returns false, then check status().
//
// A cursor of a write transaction reads the transaction's own state as of
// each Next(): a document the transaction deletes, or changes so that it no
// longer matches, before the cursor reaches it is not returned, and one it
// inserts or changes ahead of the cursor may be (a query sorted in memory
// returns what it read when it began). A collection or index the cursor
// reads that its transaction drops ends it: Next() then returns false with
// InvalidArgument ("... was dropped in its transaction"), even if the
// collection or index is made again.
class Cursor {
 public:
  ~Cursor();
  // Advances; false at the end or on error (InvalidArgument once its
  // transaction has committed or aborted: the snapshot it read is gone; or
  // once its transaction dropped the collection or index it reads).
  bool Next();
  // The current document's BSON bytes, valid until Next() or the cursor's
  // transaction ends. REQUIRES: the last Next() returned true.
  std::string_view raw() const;
  // A copy of the current document. REQUIRES: the last Next() returned true.
  Document document() const;
  // OK, or the error that ended iteration early (Corruption naming a page,
  // IOError, InvalidArgument after its transaction ended or dropped what
  // the cursor reads).
  Status status() const;
  // How the query ran so far.
  ExplainInfo explain() const;

 private:
  friend class Transaction;
  explicit Cursor(std::unique_ptr<CursorImpl> impl);
  std::unique_ptr<CursorImpl> impl_;
};

// A read snapshot or the write transaction, from DB::BeginRead or DB::Begin.
// Destroy its Cursors before it, and it before its DB unless it was
// committed or aborted.
//
// Every collection argument names a collection; reading one that does not
// exist behaves as reading an empty one, and the first Insert creates it.
// Every read may also fail with Corruption (naming the page) or IOError;
// every write with the error that ended an earlier commit (rule 8 of
// storage/pager.h: reopen to clear it).
class Transaction {
 public:
  ~Transaction();  // aborts if not committed

  bool read_only() const;

  // --- reads ---
  // The document with this _id. NotFound when there is none.
  Result<Document> Get(std::string_view collection, const Value& id);
  // The document whose `field` equals `value` (the first Find({field:
  // value}) returns): the lookup by a unique key, one index lookup and one
  // fetch when `field` has a unique index. NotFound when none matches;
  // InvalidArgument for a malformed field path.
  Result<Document> GetBy(std::string_view collection, std::string_view field, const Value& value);
  // The documents matching `filter` (MongoDB syntax; {} matches all), in
  // options.sort's order (mmdoc/options.h says which sorts walk an index
  // and which run in memory).
  // InvalidArgument for an operator or value the filter does not implement
  // (named), a malformed filter, or bad options (a negative limit or skip,
  // a sort direction other than 1 or -1, a sort field given twice, both
  // sort and sort_field, a projection that is not field paths), or an
  // in-memory sort that would hold more than options.max_sort_bytes ("sort
  // exceeded memory limit of N bytes": add an index, a limit or a
  // narrower filter).
  Result<std::unique_ptr<Cursor>> Find(std::string_view collection, const Document& filter,
                                       const FindOptions& options = FindOptions());
  // How many documents match `filter`. Errors as Find.
  Result<uint64_t> Count(std::string_view collection, const Document& filter);
  // The distinct values of `field` (a dotted path) among the documents
  // matching `filter`, as MongoDB's distinct: an array contributes each of
  // its elements, a missing field nothing, and values equal under BSON
  // comparison (1, 1.0, NumberLong(1)) count once, as the first one met.
  // Sorted in BSON order. Reads every matching document (an index helps
  // only the filter). Errors as Find; InvalidArgument for a bad field.
  Result<std::vector<Value>> Distinct(std::string_view collection, std::string_view field,
                                      const Document& filter);
  // The plan Find would use, with the counts of actually running it.
  // Errors as Find.
  Result<ExplainInfo> Explain(std::string_view collection, const Document& filter,
                              const FindOptions& options = FindOptions());
  // The collections, sorted by name.
  Result<std::vector<std::string>> ListCollections();
  // The collection's indexes. NotFound when the collection does not exist.
  Result<std::vector<IndexInfo>> ListIndexes(std::string_view collection);

  // --- writes (each: NotSupported in a read-only transaction) ---
  // Inserts `doc`, with a generated ObjectId _id when it has none, and
  // returns the _id in *id when id is not null. AlreadyExists (naming the
  // _id) for a duplicate _id, or (naming the index and value) a unique
  // index violation; InvalidArgument for an array _id, a field name that
  // starts with '$' or repeats within one document, a key over 1024 bytes,
  // or a document over 16 MiB once _id is added.
  Status Insert(std::string_view collection, const Document& doc, Value* id = nullptr);
  // Replaces the whole document with this _id; `doc`'s own _id, if it has
  // one, must be the stored one, type included (1.0 is not 1:
  // InvalidArgument). NotFound when there is none; otherwise as Insert.
  Status Replace(std::string_view collection, const Value& id, const Document& doc);
  // Applies `update` to the first document matching `filter` / to every
  // one; with options.upsert, inserts one when none matches (UpdateOptions).
  // `update` is a replacement document (no '$' keys) or MongoDB's update
  // operators, with MongoDB's semantics:
  //   $set $unset $inc $mul $min $max (BSON order across types) $rename
  //   $currentDate (true, or {$type: "date"|"timestamp"}) $setOnInsert
  //   $push (with $each, $slice, $position, $sort) $addToSet (with $each)
  //   $pop (1 / -1) $pull (a value; a condition such as {$gte: 6}; a query
  //   on document elements) $pullAll, and the positional $ ("a.$",
  //   "a.$.x"): the first element of array a that the filter's top-level
  //   predicates on a ("a": ..., "a.x": ..., "a": {$elemMatch: ...}) match;
  //   a negation there ($ne, $nin, $not; not inside $elemMatch) holds for
  //   the whole array and names no element (MongoDB's rule).
  // Fields an update creates come in MongoDB 5.0+'s order: names by their
  // bytes, number names ("9", "10") by value. An update may name _id ($set
  // to its own value, $setOnInsert); an upsert may take _id from it.
  // Not supported (InvalidArgument naming it): $bit, $[] and
  // $[<identifier>], the positional $ in an upsert's insert.
  // Errors: InvalidArgument for a bad filter (as Find) or update, naming the
  // field: an unknown operator, a bad operand, conflicting paths (equal,
  // or one inside the other), $inc/$mul of a non-number (Decimal128
  // included: not supported there) or an int64 overflow, $push/$addToSet/$pop/$pull/$pullAll of a
  // non-array, a $rename to itself or along its own path or through an array, a path through a
  // non-document, a positional $ the filter gives no element for (or only
  // a negation), a change of _id (of its bytes: 1.0 for 1 too) or an
  // upsert's _id other than the filter's, a replacement document given to
  // UpdateMany (MongoDB's rule);
  // AlreadyExists for a unique index violation or an upsert's
  // duplicate _id. Nothing is changed when UpdateOne returns an error;
  // UpdateMany may have updated earlier documents in this transaction
  // (DB::UpdateMany, in a transaction of its own, changes nothing).
  Result<UpdateResult> UpdateOne(std::string_view collection, const Document& filter,
                                 const Document& update,
                                 const UpdateOptions& options = UpdateOptions());
  Result<UpdateResult> UpdateMany(std::string_view collection, const Document& filter,
                                  const Document& update,
                                  const UpdateOptions& options = UpdateOptions());
  // Updates the first document `filter` matches (in options.sort_field's
  // order when set) and returns it as it was, or as the update left it
  // with options.return_after; an empty optional when nothing matched (and
  // no upsert). The same update, errors and positional $ as UpdateOne;
  // InvalidArgument also for a bad sort field. Nothing changes on error.
  Result<std::optional<Document>> FindOneAndUpdate(
      std::string_view collection, const Document& filter, const Document& update,
      const FindAndModifyOptions& options = FindAndModifyOptions());
  // Deletes the first document `filter` matches (in options.sort_field's
  // order when set) and returns it; an empty optional when nothing matched.
  // InvalidArgument for a bad filter or sort field; nothing is deleted then.
  Result<std::optional<Document>> FindOneAndDelete(
      std::string_view collection, const Document& filter,
      const FindAndModifyOptions& options = FindAndModifyOptions());
  // Applies `update` (operators or a replacement document, as UpdateOne)
  // to the document with this _id: UpdateOne({_id: id}, update) without a
  // filter to build or read. NotFound when there is none; otherwise errors
  // as UpdateOne's (a positional $ has no query to name its element).
  // Updates of one shape in a row ({$set: {a: .., b: ..}} with scalar
  // values) parse once: the next takes only its values.
  Status Update(std::string_view collection, const Value& id, const Document& update);
  // Deletes the document with this _id. NotFound when there is none.
  Status Delete(std::string_view collection, const Value& id);
  // Deletes the first document matching `filter` / every one, and returns
  // how many. InvalidArgument for a bad filter (as Find); nothing is deleted
  // then. DeleteMany with a filter that matches everything ({}) empties the
  // collection as a truncate does: its pages (and its changes still in the
  // write buffer) are freed whole, not deleted document by document.
  Result<uint64_t> DeleteOne(std::string_view collection, const Document& filter);
  Result<uint64_t> DeleteMany(std::string_view collection, const Document& filter);
  // AlreadyExists when it exists; InvalidArgument for an empty name or one
  // containing '\0'.
  Status CreateCollection(std::string_view collection);
  // Drops the collection and its indexes. NotFound when it does not exist.
  Status DropCollection(std::string_view collection);
  // Builds an index on `field` (a dotted path) from the documents already
  // there. AlreadyExists when an index on the field exists, or, with
  // unique, naming the value two documents share (nothing of the index is
  // left behind); InvalidArgument for a malformed path or a key over 1024
  // bytes.
  Status CreateIndex(std::string_view collection, std::string_view field,
                     const IndexOptions& options = IndexOptions());
  // Builds an index on the key pattern `keys` ({{"a", 1}, {"b", -1}}: a
  // compound index, MongoDB's {a: 1, b: -1}), named as IndexInfo::field
  // says; one ascending key is the same index as CreateIndex(field). A
  // document gets one entry per combination of its fields' keys; at most
  // one of the fields may hold an array (fields under one array, "a.x" and
  // "a.y", count as one), as MongoDB: a document with arrays in two is
  // refused, on insert or update too ("cannot index parallel arrays").
  // One index per key pattern: a sparse or partial index takes the
  // pattern's name too, so a second index on it (MongoDB would take one
  // under another name) is AlreadyExists.
  // Errors as above, and InvalidArgument for no keys, over 32 of them, a
  // field given twice, a direction other than 1 or -1, or a bad
  // options.partial_filter (naming the operator).
  Status CreateIndex(std::string_view collection, const std::vector<IndexKey>& keys,
                     const IndexOptions& options = IndexOptions());
  // Drops the index named `field` (IndexInfo::field). NotFound when the
  // collection has no such index.
  Status DropIndex(std::string_view collection, std::string_view field);

  // Commits (write) or ends (read). After Commit the transaction is
  // finished. Errors: IOError or Full from writing or syncing the log, or
  // the error that ended an earlier commit; the transaction's changes are
  // then not visible (except in kGroup mode, where a commit is visible
  // before its sync returns, as durability.h says).
  Status Commit();
  // Discards a write transaction's changes; ends a read transaction.
  void Abort();

 private:
  friend class DB;
  explicit Transaction(std::unique_ptr<TransactionImpl> impl);
  std::unique_ptr<TransactionImpl> impl_;
};

// The name CreateIndex gives an index on `keys` (IndexInfo::field): the
// field for one ascending key, else MongoDB's default ("a_1_b_-1").
std::string IndexName(const std::vector<IndexKey>& keys);

// What DB::Check found.
struct CheckReport {
  std::vector<std::string> problems;  // empty when consistent
  uint64_t pages_checked = 0;
  uint64_t documents_checked = 0;
  uint64_t index_entries_checked = 0;
};

class DB {
 public:
  // Opens (or, with create_if_missing, creates) the database at `path`, takes
  // an exclusive lock, and recovers committed transactions from the log. A new
  // database is created whole: after a crash at any moment its path either does
  // not exist or holds an empty database. Opening a database that was closed
  // cleanly writes nothing to it until the first write (it removes what a
  // compaction killed midway left: path.compact and its log). A symbolic link
  // at path is followed: the database, its log and a compaction's copy live
  // beside the file it names, which path() returns; a relative path is made
  // absolute, so a later chdir does not move the database. Errors: Busy (another
  // process or handle has it open), NotFound (no file, and
  // !create_if_missing; a link to nothing), Corruption (naming the page; a
  // file that is empty or all zeros when it may not be created over; a
  // missing data file beside a log that is not empty; or, naming the log, a database
  // not closed cleanly whose log is missing, another database's, damaged, cut
  // short or an older copy of itself: see Options::accept_log_loss), Full (no
  // room to create it, or to replay its log into pages), InvalidArgument (bad
  // options, path is a directory), IOError.
  static Result<std::unique_ptr<DB>> Open(std::string_view path,
                                          const Options& options = Options());
  ~DB();  // Close(), its status unseen; REQUIRES: as Close, no unfinished transactions

  // Closes the database: merges the write buffer into the pages, writes a
  // clean checkpoint (the log is then not needed) and releases the files
  // and the lock, so that another process may open it at once. Busy, and
  // nothing closed, while a Transaction from Begin or BeginRead is neither
  // committed, aborted nor destroyed. OK when it closed cleanly. Otherwise
  // the error that stopped it (Full, IOError, or
  // the error an earlier commit or checkpoint met, which every write since
  // has returned): every commit that succeeded is still in the log, and the
  // next Open replays it; an IOError naming a file moved, replaced,
  // overwritten or removed while open means that file is no longer the
  // database's. Every later call but Close (which returns the same status
  // again) and path() fails with InvalidArgument. REQUIRES: no call of this
  // DB running on another thread (a call that is running when Close frees
  // what it reads may crash, as with mdb_env_close): stop the threads that
  // use the DB, or wait for them, first.
  Status Close();
  DB(const DB&) = delete;
  DB& operator=(const DB&) = delete;

  // A write transaction. Waits while another thread's write transaction is
  // open. Busy when this thread has one open; the error that ended an
  // earlier commit; Full when the first write of a session cannot allocate.
  Result<std::unique_ptr<Transaction>> Begin(const WriteOptions& options = WriteOptions());
  // A read-only snapshot of the last commit. Never waits for the writer.
  Result<std::unique_ptr<Transaction>> BeginRead();

  // --- single operations, each in a transaction of its own (errors as
  // Transaction's, and Begin's for writes) ---
  Status Insert(std::string_view collection, const Document& doc, Value* id = nullptr,
                const WriteOptions& options = WriteOptions());
  Result<Document> Get(std::string_view collection, const Value& id);
  Result<Document> GetBy(std::string_view collection, std::string_view field, const Value& value);
  Status Replace(std::string_view collection, const Value& id, const Document& doc,
                 const WriteOptions& options = WriteOptions());
  Result<UpdateResult> UpdateOne(std::string_view collection, const Document& filter,
                                 const Document& update,
                                 const WriteOptions& options = WriteOptions());
  Result<UpdateResult> UpdateMany(std::string_view collection, const Document& filter,
                                  const Document& update,
                                  const WriteOptions& options = WriteOptions());
  // With UpdateOptions (upsert).
  Result<UpdateResult> UpdateOne(std::string_view collection, const Document& filter,
                                 const Document& update, const UpdateOptions& update_options,
                                 const WriteOptions& options = WriteOptions());
  Result<UpdateResult> UpdateMany(std::string_view collection, const Document& filter,
                                  const Document& update, const UpdateOptions& update_options,
                                  const WriteOptions& options = WriteOptions());
  Status Update(std::string_view collection, const Value& id, const Document& update,
                const WriteOptions& options = WriteOptions());
  Status Delete(std::string_view collection, const Value& id,
                const WriteOptions& options = WriteOptions());
  Result<uint64_t> DeleteOne(std::string_view collection, const Document& filter,
                             const WriteOptions& options = WriteOptions());
  Result<uint64_t> DeleteMany(std::string_view collection, const Document& filter,
                              const WriteOptions& options = WriteOptions());
  // Transaction::FindOneAndUpdate / FindOneAndDelete, each in a transaction
  // of its own: the find and the change see one snapshot.
  Result<std::optional<Document>> FindOneAndUpdate(
      std::string_view collection, const Document& filter, const Document& update,
      const FindAndModifyOptions& find_options = FindAndModifyOptions(),
      const WriteOptions& options = WriteOptions());
  Result<std::optional<Document>> FindOneAndDelete(
      std::string_view collection, const Document& filter,
      const FindAndModifyOptions& find_options = FindAndModifyOptions(),
      const WriteOptions& options = WriteOptions());
  // All matching documents, read from one snapshot.
  Result<std::vector<Document>> Find(std::string_view collection, const Document& filter,
                                     const FindOptions& options = FindOptions());
  Result<uint64_t> Count(std::string_view collection, const Document& filter = Document());
  Result<std::vector<Value>> Distinct(std::string_view collection, std::string_view field,
                                      const Document& filter = Document());
  Status CreateCollection(std::string_view collection);
  Status DropCollection(std::string_view collection);
  Result<std::vector<std::string>> ListCollections();
  Status CreateIndex(std::string_view collection, std::string_view field,
                     const IndexOptions& options = IndexOptions());
  Status CreateIndex(std::string_view collection, const std::vector<IndexKey>& keys,
                     const IndexOptions& options = IndexOptions());
  Status DropIndex(std::string_view collection, std::string_view field);
  Result<std::vector<IndexInfo>> ListIndexes(std::string_view collection);

  // Checks everything: every page's checksum and tree structure, every
  // index entry points at a document with that value, every document is in
  // every index, and every page is reachable or free exactly once. OK when
  // consistent; Corruption with the first problem otherwise (all problems
  // in *report when given). Reads a snapshot that keeps writers waiting.
  // With a write buffer it first merges the buffer into the trees, as a
  // background merge would (a disk too full for that leaves it buffered,
  // and the buffered documents are checked with the pages); otherwise it
  // writes nothing. Busy when this thread has a write transaction open.
  Status Check(CheckReport* report = nullptr);
  // Sizes and counts of the last commit.
  Result<DBStats> Stats(const StatsOptions& options = StatsOptions());
  // Makes every commit so far durable (syncs the log). IOError.
  Status Flush();
  // Writes the current state into the data file and restarts the log.
  // IOError, Full; Busy as Begin.
  Status Checkpoint();
  // Rewrites the database into a compact copy and swaps it in atomically;
  // the file shrinks to what it holds. Waits for the writer and keeps
  // writers waiting until the copy is in place (they then write to it);
  // readers go on, and a snapshot that began before keeps reading what it
  // began on. Other processes cannot open the database at any point of the
  // swap (Busy). Errors: Busy (this thread holds the write transaction),
  // Full (no room for the copy, which is then removed), IOError.
  Status Compact();

  const std::string& path() const;

  // --- Salvage: reading what is left of a damaged database ---
  // Calls emit(bson) once for every intact document of `collection`, in _id
  // order, skipping each subtree whose page fails its checksum or structure
  // (counted in report->damaged_pages). Never reads a free page, so no stale
  // document comes out; a damaged catalog page loses only what it hides.
  // OK when the walk ran (damage is reported in *report, not as an error);
  // NotFound, with 0 recovered, when the collection does not exist; an
  // error only when no snapshot could be read. `bson` is valid during the
  // call. Works on any database that Open accepts (Open fails when both
  // metas, the free list or the file length are damaged).
  struct SalvageReport {
    uint64_t recovered = 0;      // documents emitted
    uint64_t lost = 0;           // catalog count - recovered, when known
    bool lost_known = false;     // false: the catalog count was unreadable
    uint64_t damaged_pages = 0;  // pages skipped with their subtrees
    std::vector<std::string> problems;
  };
  Status Salvage(std::string_view collection,
                 const std::function<void(std::string_view bson)>& emit, SalvageReport* report);

 private:
  explicit DB(std::unique_ptr<DBImpl> impl);
  std::unique_ptr<DBImpl> impl_;  // null once closed
  std::string path_;
  Status close_status_;
};

}  // namespace mmdoc

#endif  // MMDOC_DB_H_
