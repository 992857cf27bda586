// Options for mmdoc::DB (per database) and for single calls.
//
// Options is given to DB::Open; WriteOptions to Begin and to each
// auto-committed write; FindOptions to Find. Every field has an in-class
// default stated on its "Default:" line.
#ifndef MMDOC_OPTIONS_H_
#define MMDOC_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mmdoc/document.h"
#include "mmdoc/durability.h"

namespace mmdoc {

class FileSystem;  // mmdoc/file_system.h

// Options::write_buffer_size's default: RocksDB's memtable size.
constexpr uint64_t kDefaultWriteBufferSize = uint64_t{64} << 20;

struct Options {
  // --- Parameters that affect behavior ---

  // Create the database files when they do not exist. Default: true.
  bool create_if_missing = true;
  // What a commit waits for before it returns (see mmdoc/durability.h for
  // what each mode survives). Overridable per write. Default: kFsync.
  Durability durability = Durability::kFsync;
  // Run DB::Check() after every commit and verify every page checksum on
  // every read. Slow; for tests and debugging. Also switched on by the
  // environment variable MMDOC_VERIFY=1. Default: false.
  bool paranoid_checks = false;
  // Open a database that was not closed cleanly even when its log is
  // missing, belongs to another database, is damaged, cut short, or an
  // older copy of itself: at its last checkpoint plus what the log still
  // holds. The commits the log lost are gone; without this, Open refuses
  // with Corruption naming the log. Default: false.
  bool accept_log_loss = false;
  // How long Open waits for the database while another process (or another
  // DB handle in this one) has it open, before it fails with Busy. One
  // process at a time holds a database, for as long as it keeps it open;
  // a waiter polls the lock (pauses growing to 50 ms), so it gets the file
  // soon after the holder closes it, though not in the order waiters came.
  // Default: 0 (Busy at once).
  uint32_t lock_timeout_ms = 0;
  // Open an existing database for reading only, under a shared lock: any
  // number of processes (and handles) may read it at once, but not while
  // one has it open for writing (each waits for the other as above). The
  // files are opened read-only, so a read-only file or file system will do.
  // Nothing of the database is written, the close included (a copy a
  // killed Compact left is removed, as by any open): every write,
  // CreateIndex, Checkpoint, Flush and Compact fails with NotSupported. A database not
  // closed cleanly has its log's commits replayed into memory at every
  // such open (a commit that made or dropped a collection or an index
  // cannot be: NotSupported, until a read-write open replays it).
  // Default: false.
  bool read_only = false;
  // The file-system seam (mmdoc/file_system.h): every file the database
  // touches goes through it. nullptr means the POSIX one. Not owned; must
  // outlive the DB. Default: nullptr.
  FileSystem* file_system = nullptr;

  // --- Parameters that affect performance ---

  // Page size of a new database (4096..65536, a power of two); an existing
  // file keeps its own. Default: 4096.
  uint32_t page_size = 4096;
  // The write-ahead log's budget. The log starts at a sixteenth of it (at
  // most 1 MiB) and doubles as commits need, up to log_size; a full log
  // triggers a checkpoint. A larger budget means fewer checkpoints and a
  // longer replay after a crash. With a write buffer, the log holds the
  // buffer's unmerged changes: a generation is handed to the merger when
  // its records fill about half of it, so a write_buffer_size much larger
  // than the records half the log holds (about a quarter of the buffer's
  // bytes for small documents) needs a larger log too. Default: 64 MiB.
  uint64_t log_size = 64ull << 20;
  // Background log flush interval for Durability::kPeriodic. Default: 100.
  uint32_t sync_interval_ms = 100;
  // Memory for commits not yet written into pages (docs/write-path.md). A
  // commit appends its log record and puts its changes in this buffer,
  // which reads see; a background thread writes a full buffer into the
  // file as one sorted run per tree (packed leaves, each written once),
  // while commits fill the next. Reads look through the runs; once a tree
  // has four, the thread merges them into it, one copy of each leaf for all
  // their changes, a slice at a time. Close, Checkpoint, Check, Compact and
  // definitions merge everything first. The buffer holds at most about
  // twice this (one generation being written, one filling), and only what
  // was written: a database that writes little holds little. The same
  // thread keeps a key filter per tree (about 2.5 bytes per key, up to
  // twice the keys), built in the background once the tree is written, so
  // that an insert's unique checks skip the trees' descents. The log's
  // budget (log_size) also bounds the buffer: a generation whose records
  // fill about half the log is handed to the merger as if full. After a
  // crash, Open replays the log into the buffer and writes no page (a log
  // holding a definition is replayed into pages). 0: no buffer and no
  // background thread; every commit writes its pages itself, copying each
  // leaf it changes (at 1M documents point reads 5-18% faster, inserts 2.4x
  // and updates 1.4x slower, scans 1.6x slower, the file 1.7-1.9x larger;
  // docs/write-path.md). The environment variable MMDOC_WRITE_BUFFER=BYTES
  // replaces the default for every database opened with it (0 turns the
  // buffer off), so that a program or a test suite can be run either way.
  // Half the default (32 MiB) measured about 100 MiB less peak memory at
  // 500k documents and 70 MiB at 1M, for a fifth to a third fewer inserts a
  // second (docs/write-path.md, "A 32 MiB buffer"). Default: 64 MiB.
  uint64_t write_buffer_size = kDefaultWriteBufferSize;
};

struct WriteOptions {
  // Overrides Options::durability for this commit (MongoDB's write
  // concern). Default: unset (the database's mode).
  std::optional<Durability> durability;
};

// One key of a sort: a dotted field path and 1 (ascending) or -1.
struct SortSpec {
  std::string field;
  int direction = 1;
};

// Sorting follows MongoDB: values of different types in BSON type order
// (MinKey < null < numbers < strings < documents < arrays < binary <
// ObjectId < bool < date < timestamp < regex < MaxKey), numbers by value
// (1 == 1.0), a missing field as null, an array by its smallest element
// ascending and its largest descending, [] below null; keys after the
// first break ties of the ones before. Documents whose keys all tie come
// in no defined order.
//
// Which sorts use an index: a one-key sort on _id, or on a top-level field
// with a single-field index that holds no document under two keys (no
// array of two or more elements was ever indexed on it), walks that index
// in the sort's direction and stops at skip + limit, when the filter gives
// no index bounds or its bounds are on that same index. A sort on the fields
// of a compound index (IndexKey) that follow the fields the filter pins to
// one value each, in the index's directions or all reversed, walks that
// index likewise, when no indexed document held an array at its fields
// (and, with no bounds on it, the index is not sparse and any partial
// filter is implied by the query's). Every other sort
// collects the matches and sorts them in memory
// (ExplainInfo::sorted_in_memory): with a limit it holds only the first
// skip + limit documents, and it refuses (InvalidArgument "sort exceeded
// memory limit ...") to hold more than max_sort_bytes.
struct FindOptions {
  // Sort keys, the first most significant; empty means _id order for a
  // scan, index order for an index scan. Default: {}.
  std::vector<SortSpec> sort;
  // A one-key sort, for callers of one key: the same as sort =
  // {{sort_field, sort_direction}}. Giving both sort and sort_field is
  // InvalidArgument. Default: "", 1.
  std::string sort_field;
  int sort_direction = 1;
  // The most bytes an in-memory sort may hold (the documents it keeps and
  // their keys); 0 means no limit. MongoDB's limit is the same 100 MiB.
  // Default: 100 MiB.
  uint64_t max_sort_bytes = 100ull << 20;
  // Return at most this many documents; 0 means no limit. Signed so that a
  // caller's -1 is refused (InvalidArgument "limit must be >= 0") rather
  // than wrapped to no limit. Default: 0.
  int64_t limit = 0;
  // Skip this many matching documents first; negative is InvalidArgument.
  // Default: 0.
  int64_t skip = 0;
  // Return only these dotted fields (and _id), or, written "-a", all but
  // these (MongoDB's {a: 0}: in arrays, each document loses the field);
  // "-_id" drops _id from either kind. Empty means whole documents. An
  // empty path or part ("a..b"), a part starting with '$', and fields both
  // kept and dropped (but _id, as MongoDB) are InvalidArgument naming the
  // field. Default: {}.
  std::vector<std::string> projection;
};

// One field of an index's key pattern (MongoDB's {a: 1, b: -1}): a dotted
// path and 1 (ascending) or -1 (descending).
struct IndexKey {
  std::string field;
  int direction = 1;
};

struct IndexOptions {
  // Reject two indexed documents with the same key (AlreadyExists): the
  // same value at the field, or for a compound index the same values at
  // all its fields (a missing field and an empty array count as null, where
  // MongoDB keys [] apart). With sparse or partial_filter, documents left
  // out of the index are not compared.
  // Default: false.
  bool unique = false;
  // Leave out documents that have none of the index's fields (a field that
  // is null is there). Queries that could match a document without them
  // ({a: null}, {a: {$exists: false}}, no bound on the fields, a sort
  // alone) do not use the index. Default: false.
  bool sparse = false;
  // MongoDB's partialFilterExpression: index only the documents matching
  // it. It may hold equalities ({f: v}, {f: {$eq: v}}; v not a document,
  // array or regex), {$exists: true}, $gt $gte $lt $lte, $type, and a
  // top-level $and of these; anything else is InvalidArgument. A query
  // uses the index only when its filter implies this one: each condition
  // appears in the query's top-level conjunction identically, or as a
  // stricter range or an equality inside it on the same field.
  // Default: {} (every document).
  Document partial_filter = Document();
};

}  // namespace mmdoc

#endif  // MMDOC_OPTIONS_H_
