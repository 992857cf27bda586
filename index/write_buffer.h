// index::WriteBuffer: the changes committed to trees since their last merge
// into pages, each tagged with the commit id (txid) that made it, so that a
// snapshot at txid S sees, per key, the newest change with txid <= S. This is
// the buffer of docs/write-path.md, design 1: a commit puts its changes here
// instead of in pages; a background merge later writes them into the trees.
//
//   WriteBuffer       the active generation (commits publish into it) and
//                     the frozen ones, newest first, waiting to be merged.
//   BufferGeneration  one generation: a BufferTable per tree name.
//   BufferTable       one tree's changes in one generation: every change in
//                     commit order in an arena, a hash index from key to its
//                     newest change (each change links to the previous change
//                     of its key), and the net change of the number of live
//                     keys after each commit.
//   BufferView        what a transaction reads: the generations that were
//                     current when it began, newest first, and its snapshot.
//   BufferTable::Iterator  a table's keys in a tree's order at a snapshot.
//
// Keys are ordinary keys (as the caller passes them to BTree, never a
// KeyCodec's packed form), 1..kMaxKeySize bytes; values 0..kMaxValueSize
// bytes. The buffer does not check them: BufferedTree does, as BTree::Put.
//
// Snapshots. A reader at S must see every commit with txid <= S and nothing
// newer. The buffer ignores every change with txid > S; the caller must
// make sure that each commit <= S has been published (Publish returned) before
// View(S) is called, with a happens-before edge between the two (the
// engine's commit publication gives one). The generations of a view must
// match the pages the reader reads under it: a generation merged into the
// pages a reader sees must be out of its view, and one merged into pages it
// does not see must be in it (else the reader misses the generation's
// changes). Take the storage snapshot and View under one lock that the
// merger also holds while it publishes the merged pages and calls Drop.
//
// Thread safety: one writer, any number of readers.
//   Publish, Freeze      the single writer (the engine's serialized commit
//                        path), one call at a time.
//   Drop                 one thread at a time (the merger); may run beside
//                        the writer and the readers.
//   everything else      any thread, any time, also beside the writer: View,
//                        every method of BufferView, BufferGeneration,
//                        BufferTable and BufferVersion, and Iterators (one
//                        Iterator per thread).
// Reads take no lock per probe or step, in any generation: a table's hash
// index and arrays are published with release stores and read with acquire
// loads, and the memory they point to never moves or changes once
// published. Locks are taken once per View (the WriteBuffer's), per table
// lookup by tree name (the generation's) and per Iterator's first Seek (the
// table's, to fetch or extend its cached sorted key list); each is held
// briefly.
//
// Lifetimes. A generation lives as long as the WriteBuffer holds it or any
// BufferView or shared_ptr holds it; Drop only lets go of the WriteBuffer's
// reference. Every pointer and view the buffer returns (BufferTable*,
// BufferVersion*, keys, values) is valid while its generation lives.
// Nothing in a generation is freed before the generation is.
#ifndef MMDOC_INDEX_WRITE_BUFFER_H_
#define MMDOC_INDEX_WRITE_BUFFER_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/btree.h"
#include "index/key_filter.h"
#include "index/key_hash.h"
#include "mmdoc/status.h"
#include "storage/mutex.h"

namespace mmdoc::index {

// Negative, zero or positive as a < b, a == b, a > b in `order` (nullptr:
// bytewise, memcmp then shorter first), the order BTree gives a Comparator.
inline int CompareKeys(Comparator order, std::string_view a, std::string_view b) {
  if (order != nullptr) return order(a, b);
  return a.compare(b);
}

class BufferTable;
class BufferGeneration;
class WriteBuffer;
struct BufferKeyNode;  // a distinct key of a table (write_buffer.cc)

// One change of one key: a value, or a tombstone (erased), tagged with the
// commit that made it. Immutable; lives in its table's arena.
class BufferVersion {
 public:
  BufferVersion(const BufferVersion&) = delete;
  BufferVersion& operator=(const BufferVersion&) = delete;

  uint64_t txid() const { return txid_; }
  bool erased() const { return erased_; }
  // The value; empty for a tombstone.
  std::string_view value() const { return {value_, value_size_}; }
  // The previous change of the same key in the same table (a smaller or
  // equal txid), or nullptr.
  const BufferVersion* older() const { return older_; }

 private:
  friend class BufferTable;
  BufferVersion() = default;
  uint64_t txid_ = 0;
  const BufferVersion* older_ = nullptr;
  const char* value_ = "";  // never nullptr: callers may memcpy from it
  uint32_t value_size_ = 0;
  bool erased_ = false;
};

// A change as the writer hands it to WriteBuffer::Publish.
struct BufferChange {
  std::string_view tree;   // the tree's name ("c:coll", "i:coll\0field", ...)
  std::string_view key;    // ordinary form, 1..kMaxKeySize bytes
  std::string_view value;  // ignored when erased
  bool erased = false;     // a tombstone: the key is deleted
  // Whether the key was live in the tree, looking through every layer,
  // just before this change. Only the caller knows; the table's count
  // delta is computed from it.
  bool was_live = false;
  // KeyHash(key) when the caller has it; 0: Publish computes it (a key
  // whose hash is 0 is then hashed again, to the same 0).
  uint64_t hash = 0;
};

// One tree's changes in one generation. Created by the generation on the
// first change published to its tree; read-only to everyone but the writer.
class BufferTable {
 public:
  ~BufferTable();
  BufferTable(const BufferTable&) = delete;
  BufferTable& operator=(const BufferTable&) = delete;

  // The newest change of `key` with txid <= snapshot, or nullptr when the
  // table holds none. O(1): one hash probe, then a walk down the key's
  // versions past those newer than `snapshot`.
  const BufferVersion* Find(std::string_view key, uint64_t snapshot) const {
    return Find(key, KeyHash(key), snapshot);
  }
  // The same, given `hash` = KeyHash(key).
  const BufferVersion* Find(std::string_view key, uint64_t hash, uint64_t snapshot) const;
  // Starts loading the hash slot a Find or Add of `hash` reads and the
  // one an Add writes, so that a writer's misses overlap (BufferedTree::
  // Prefetch). A hint: any thread, no effect on what is found.
  void Prefetch(uint64_t hash) const;
  // The net change in the number of live keys of the tree made by this
  // table's commits with txid <= snapshot (0 when none). O(log commits).
  int64_t CountDelta(uint64_t snapshot) const;

  uint64_t first_txid() const { return first_txid_; }  // its first commit
  uint64_t last_txid() const;                          // its last commit
  size_t keys() const;                                 // distinct keys, all snapshots
  size_t changes() const;                              // changes, all snapshots
  size_t bytes() const;                                // memory held: arena, hash index, arrays

  // A key with its newest change at a snapshot (Select).
  struct Entry {
    std::string_view key;
    const BufferVersion* version;
  };
  // For a scan that rejects documents by their bytes: the keys whose newest
  // change at `snapshot` is a value that may_match(value) accepts, each
  // with that change, sorted in `order` into *out; *rejected gets the
  // number of values refused. The values are read in the order their keys
  // were first changed, the table's memory order, not in key order: for a
  // filter that refuses most values this costs a fraction of an Iterator's
  // walk. Only keys after `after` count, unless it is empty. Returns false,
  // with *out and *rejected unspecified, as soon as more than `limit`
  // values are accepted (walk with an Iterator instead).
  bool Select(uint64_t snapshot, Comparator order,
              const std::function<bool(std::string_view)>& may_match, std::string_view after,
              size_t limit, std::vector<Entry>* out, uint64_t* rejected) const;
  class Iterator;

 private:
  friend class BufferGeneration;
  struct Rep;         // the arena, hash index, arrays (write_buffer.cc)
  struct SortedView;  // the cached sorted key list: kRuns sorted runs
  static constexpr int kRuns = 2;
  // `expected_keys`: the distinct keys it will likely hold (its tree's count
  // in the generation before), for which its hash index is made at once.
  BufferTable(uint64_t first_txid, size_t expected_keys);

  // Writer only. Appends one change; readers at older snapshots may see
  // its version in a key's chain but skip it (its txid is too new).
  // `hash`: KeyHash(key).
  void Add(uint64_t txid, std::string_view key, uint64_t hash, std::string_view value, bool erased,
           bool was_live);
  // Writer only. Ends the commit `txid`'s changes to this table: records
  // the count delta and key count as of txid.
  void EndCommit(uint64_t txid);
  // The sorted key list covering at least the keys of commits <= snapshot,
  // in `order`: the cached one, or the cache extended first.
  std::shared_ptr<const SortedView> Sorted(uint64_t snapshot, Comparator order) const;

  const uint64_t first_txid_;
  std::unique_ptr<Rep> rep_;
};

// The distinct keys of one table that have a change with txid <= snapshot,
// in `order`, each with its newest such change (a tombstone included: the
// caller decides what a tombstone hides). Positioned nowhere until a Seek.
//
// `order` orders ordinary keys: nullptr (bytewise, memcmp then shorter
// first) for a tree with a KeyCodec or none, else the tree's comparator.
// Every Iterator over one table should use the same order: the table caches
// one sorted key list, and another order sorts anew.
//
// The first Seek takes the table's sorted key list (sorting the keys
// published since it was last extended: O(k log k) for k new keys, plus a
// merge); after that, Seek is O(log n) and Next/Prev O(1) amortized, with no
// lock. The Iterator reads that list, so it stays valid and unchanged while
// the writer publishes more; changes newer than `snapshot` are ignored.
// key() and version() point into the table and stay valid as long as its
// generation lives, even after the Iterator moves.
class BufferTable::Iterator {
 public:
  // Not owned: the table's generation must outlive the Iterator.
  Iterator(const BufferTable* table, uint64_t snapshot, Comparator order = nullptr);
  ~Iterator();
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;

  void Seek(std::string_view target);  // first key >= target
  void SeekToFirst();
  void SeekToLast();
  void Next();  // REQUIRES: Valid()
  void Prev();  // REQUIRES: Valid()
  bool Valid() const { return node_ != nullptr; }
  std::string_view key() const;  // REQUIRES: Valid()
  // The newest change of key() with txid <= snapshot; never nullptr.
  // REQUIRES: Valid()
  const BufferVersion* version() const { return version_; }

 private:
  void Take();  // fetches the table's sorted key list, once
  bool Less(const BufferKeyNode* a, const BufferKeyNode* b) const;
  // Points at the smallest (largest) of the runs' candidates; false when
  // none is left.
  bool PickForward();
  bool PickBackward();
  void SettleForward();  // moves forward to a key with a visible change
  void SettleBackward();

  const BufferTable* table_;
  const uint64_t snapshot_;
  const Comparator order_;
  bool taken_ = false;
  std::shared_ptr<const SortedView> view_;  // nullptr: no key at the snapshot
  // pos_[r]: index in run r of the first key not less than the current
  // key (or of the end when there is none); the current key is run cur_'s
  // key at pos_[cur_].
  size_t pos_[kRuns] = {0, 0};
  int cur_ = 0;
  const BufferKeyNode* node_ = nullptr;  // nullptr: not Valid()
  const BufferVersion* version_ = nullptr;
};

// One generation of the buffer: a table per tree name. Tables are created
// on the first change published to their tree; a frozen generation gets no
// more changes.
class BufferGeneration {
 public:
  BufferGeneration();
  // A generation that follows `previous`: each of its tables starts with a
  // hash index sized for the keys the same tree had there, so that filling
  // it neither rehashes on the writer's thread nor keeps the smaller arrays
  // that readers may still hold (about half of a grown index's memory).
  explicit BufferGeneration(const BufferGeneration* previous);
  ~BufferGeneration();
  // Unique among the generations of the process (never reused, unlike an
  // address), so a writer can tell whether a view's generations changed.
  uint64_t id() const { return id_; }
  BufferGeneration(const BufferGeneration&) = delete;
  BufferGeneration& operator=(const BufferGeneration&) = delete;

  // The table of tree `name`, or nullptr when no commit in this generation
  // changed it. Valid while the generation lives.
  const BufferTable* Find(std::string_view name) const;
  // Every table with its tree's name, in name order (for the merge).
  std::vector<std::pair<std::string, const BufferTable*>> Tables() const;

  bool frozen() const { return frozen_.load(std::memory_order_acquire); }
  bool empty() const { return last_txid() == 0; }
  // Its first and last commit; 0 while it is empty.
  uint64_t first_txid() const { return first_txid_.load(std::memory_order_acquire); }
  uint64_t last_txid() const { return last_txid_.load(std::memory_order_acquire); }
  // Memory held by its tables (keys, values, versions, hash indexes,
  // arrays), for the buffer's budget.
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  friend class WriteBuffer;
  // Writer only: adds one commit's changes, in order.
  void Publish(uint64_t txid, const std::vector<BufferChange>& changes);
  // Writer only: no more changes after this (WriteBuffer::Freeze).
  void Freeze() { frozen_.store(true, std::memory_order_release); }
  BufferTable* TableForWrite(std::string_view name, uint64_t txid) MMDOC_EXCLUDES(mu_);

  const uint64_t id_;
  // The keys of each tree in the generation before, by name (see the
  // constructor); read by the writer only.
  std::vector<std::pair<std::string, size_t>> expected_keys_;
  // Writer only: the tables it last wrote, by name, so that a commit finds
  // its tables without the lock (tables are never removed).
  std::vector<std::pair<std::string, BufferTable*>> written_;
  std::vector<BufferTable*> touched_;  // writer only: Publish's, kept for its memory
  mutable storage::Mutex mu_;
  std::map<std::string, std::unique_ptr<BufferTable>, std::less<>> tables_ MMDOC_GUARDED_BY(mu_);
  // The first tables made, for Find without the lock (a point read finds its
  // table in a string compare or two): each entry is written once, under
  // mu_, before listed_count_ counts it.
  static constexpr size_t kListed = 8;
  std::array<std::pair<std::string, const BufferTable*>, kListed> listed_;
  std::atomic<size_t> listed_count_{0};
  // Written by the writer only; read by anyone.
  std::atomic<bool> frozen_{false};
  std::atomic<uint64_t> first_txid_{0};
  std::atomic<uint64_t> last_txid_{0};
  std::atomic<size_t> bytes_{0};
};

// What a transaction reads from the buffer: the generations current when it
// began, newest first, and its snapshot. Holding the view keeps them alive.
// Copyable (copies share the generations).
struct BufferView {
  uint64_t snapshot = 0;
  // Newest first; only generations with a change <= snapshot.
  std::vector<std::shared_ptr<const BufferGeneration>> generations;

  // The tables of tree `name` with a change <= snapshot, newest generation
  // first (empty: the buffer changes nothing of that tree at the snapshot).
  std::vector<const BufferTable*> Tables(std::string_view name) const;
  // The same, into *out (cleared first; its memory is reused).
  void Tables(std::string_view name, std::vector<const BufferTable*>* out) const;
  // The newest change of `key` (of hash KeyHash(key)) in tree `name` at the
  // snapshot, or nullptr.
  const BufferVersion* Find(std::string_view name, std::string_view key, uint64_t hash) const;
  const BufferVersion* Find(std::string_view name, std::string_view key) const {
    return Find(name, key, KeyHash(key));
  }
  // The net change of tree `name`'s live keys at the snapshot.
  int64_t CountDelta(std::string_view name) const;
};

class WriteBuffer {
 public:
  WriteBuffer();
  ~WriteBuffer();
  WriteBuffer(const WriteBuffer&) = delete;
  WriteBuffer& operator=(const WriteBuffer&) = delete;

  // Publishes the changes of commit `txid`, in order, into the active
  // generation (each key and value is copied). A key may appear more than
  // once; the later change is newer. Readers at snapshots < txid never see
  // them; readers at txid may begin once Publish returns.
  // REQUIRES: the writer's thread; txid > 0 and >= every txid published
  // before. Returns active_bytes() after it.
  size_t Publish(uint64_t txid, const std::vector<BufferChange>& changes) MMDOC_EXCLUDES(mu_);

  // Freezes the active generation and makes a new, empty one active.
  // Returns the generation frozen (the caller merges it into pages, then
  // calls Drop), or nullptr when the active one is empty (nothing to merge;
  // it stays active). REQUIRES: the writer's thread.
  std::shared_ptr<const BufferGeneration> Freeze() MMDOC_EXCLUDES(mu_);

  // Forgets a frozen generation once it has been merged into pages: later
  // Views leave it out. Views and shared_ptrs holding it keep it alive.
  // InvalidArgument when `generation` is not one of the frozen ones. Merge
  // and drop the oldest first (a newer generation's changes win over an
  // older one's). REQUIRES: one thread at a time (the merger).
  Status Drop(const BufferGeneration* generation) MMDOC_EXCLUDES(mu_);

  // The generations with a change <= snapshot, newest first, and the
  // snapshot. Any thread. REQUIRES: every commit <= snapshot published.
  BufferView View(uint64_t snapshot) const MMDOC_EXCLUDES(mu_);
  // The same into *out, whose memory it reuses (a point read per call).
  void View(uint64_t snapshot, BufferView* out) const MMDOC_EXCLUDES(mu_);

  // The frozen generations not yet dropped, oldest first (the merge order).
  std::vector<std::shared_ptr<const BufferGeneration>> Frozen() const MMDOC_EXCLUDES(mu_);
  // The active generation's memory (BufferGeneration::bytes), for the
  // writer's decision to Freeze.
  size_t active_bytes() const MMDOC_EXCLUDES(mu_);
  // The last txid published (0: none).
  uint64_t last_txid() const { return last_txid_.load(std::memory_order_acquire); }

  // --- Key filters (index/key_filter.h), one per tree name ---
  //
  // A ready filter holds every key live in its tree at its commit
  // `ready_at` and every key that became live since. A write transaction
  // starts a tree's filter when it first opens the tree and none is ready
  // or building (or the ready one is full): no other write transaction is
  // open then, and each one from then on, this one included, adds the keys
  // it makes live (BufferedTree::UseFilters). The builder then adds the
  // tree's keys at any later snapshot and hands the filter over. A
  // transaction that writes pages itself bypasses the filters: it calls
  // DropFilters first.

  // Tree `name`'s filters for a write transaction, starting a building one
  // (sized for about `keys` keys, or twice a full ready one's) when it has
  // none; *started says whether it did. REQUIRES: no other write
  // transaction open (the engine's writer token).
  TreeFilters FiltersForWrite(std::string_view name, uint64_t keys, bool* started)
      MMDOC_EXCLUDES(mu_);
  // Changes whenever any tree's filters do (a start, a FinishFilter, a
  // DropFilters): filters handed out at this version are still current.
  uint64_t filters_version() const { return filters_version_.load(std::memory_order_acquire); }
  // Tree `name`'s filters, as they are (for DB::Check).
  TreeFilters Filters(std::string_view name) const MMDOC_EXCLUDES(mu_);
  // The filters being built, by tree name.
  std::vector<std::pair<std::string, std::shared_ptr<KeyFilter>>> BuildingFilters() const
      MMDOC_EXCLUDES(mu_);
  // `f`, given every key of its tree at commit `at`, becomes the ready
  // filter; false (and nothing changes) when it is no longer name's
  // building one.
  bool FinishFilter(const std::string& name, const KeyFilter* f, uint64_t at) MMDOC_EXCLUDES(mu_);
  // Forgets every filter. REQUIRES: the writer.
  void DropFilters() MMDOC_EXCLUDES(mu_);
  // Memory held by the filters, and how many are ready.
  size_t filter_bytes() const MMDOC_EXCLUDES(mu_);
  size_t filters_ready() const MMDOC_EXCLUDES(mu_);

 private:
  mutable storage::Mutex mu_;
  std::shared_ptr<BufferGeneration> active_ MMDOC_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<BufferGeneration>> frozen_ MMDOC_GUARDED_BY(mu_);  // newest first
  std::atomic<uint64_t> last_txid_{0};  // written by the writer only
  std::map<std::string, TreeFilters, std::less<>> filters_ MMDOC_GUARDED_BY(mu_);
  std::atomic<uint64_t> filters_version_{1};  // changed under mu_
};

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_WRITE_BUFFER_H_
