// index::BufferedTree: the tree a transaction reads and writes once a
// WriteBuffer stands in front of the pages (docs/write-path.md, design 1).
//
// Four layers, newest first:
//   1. the overlay: this transaction's own uncommitted changes (a write
//      transaction only);
//   2. the buffer: the tree's tables in a BufferView, newest generation
//      first, each at the view's snapshot;
//   3. the tree's runs (index/run.h) at the storage snapshot, newest first,
//      each behind its key filter;
//   4. the BTree over the transaction's storage snapshot (root 0: empty).
// A key's newest layer wins; a tombstone (an erased change) hides the key
// from every layer below. Reads look through the layers in that order;
// cursors merge them in key order. Writes go to the overlay only: the BTree
// is never written here. At commit the caller hands the overlay's changes
// (ForEachChange, AppendChanges) to WriteBuffer::Publish.
//
// The API mirrors BTree's (Get, Put, Delete, Cursor), with the same errors,
// so the engine can use a BufferedTree where it used a BTree. Keys are
// ordinary keys, as BTree callers pass them.
//
// Cost: when neither the overlay nor the buffer holds a change of this tree
// at the snapshot, Get is BTree::Get and a Cursor is a BTree::Cursor behind
// one predictable branch per call. Otherwise Get adds one map lookup (the
// overlay, when not empty) and one hash probe per buffer table before the
// BTree; a cursor merges the layers (a comparison of keys per layer a step).
//
// Lifetimes. What Get and Cursor::value()/key() return is valid:
//   from the BTree or a run: until the transaction ends (neither is written);
//   from the buffer: while the BufferView lives (it holds the generations);
//   from the overlay: until this tree is next written (Put, Delete) or
//     destroyed.
// BTree::Get's rule, "valid until the txn ends or this tree is next
// written", covers all three while the view outlives the transaction.
//
// Thread safety: a BufferedTree and its cursors belong to one transaction
// and one thread, as a BTree does. The WriteBuffer may publish newer commits
// meanwhile from another thread: they are newer than the snapshot and
// unseen.
#ifndef MMDOC_INDEX_BUFFERED_TREE_H_
#define MMDOC_INDEX_BUFFERED_TREE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "index/btree.h"
#include "index/key_filter.h"
#include "index/overlay.h"
#include "index/run.h"
#include "index/write_buffer.h"
#include "mmdoc/status.h"

namespace mmdoc::index {

class BufferedTree {
 public:
  // `tree`: the tree's pages at the transaction's storage snapshot. Not
  // owned; must outlive this object. Never written through this object.
  // `view`: the buffer at the transaction's snapshot; must match the pages
  // (write_buffer.h, "Snapshots"). Not owned; must outlive this object and
  // every view of a value read from the buffer.
  // `name`: the tree's name in the buffer (the catalog name).
  // `order`: the order of ORDINARY keys: nullptr (bytewise) for a tree
  // opened with a KeyCodec -- not tree->comparator(), which orders stored
  // keys -- else the comparator the tree was opened with.
  // `writable`: a write transaction; Put and Delete are allowed.
  BufferedTree(BTree* tree, const BufferView* view, std::string_view name, Comparator order,
               bool writable);
  // A tree with no buffer in front (a database without a write buffer, or
  // a transaction that writes pages): every call goes straight to `tree`,
  // writes included, behind one branch. Not owned; must outlive this.
  explicit BufferedTree(BTree* tree);
  ~BufferedTree();
  BufferedTree(const BufferedTree&) = delete;
  BufferedTree& operator=(const BufferedTree&) = delete;

  BTree* tree() const { return tree_; }
  // Whether writes go straight to tree() (the second constructor).
  bool direct() const { return view_ == nullptr; }
  const std::string& name() const { return name_; }
  uint64_t snapshot() const { return view_ == nullptr ? 0 : view_->snapshot; }
  Comparator order() const { return order_; }

  // Finds `key` through the layers. OK with *value pointing at the value
  // (see Lifetimes); NotFound when absent or hidden by a tombstone (and for
  // an empty or oversized key, as BTree::Get); Corruption when a page is
  // damaged.
  Status Get(std::string_view key, std::string_view* value);
  // Records key -> value in the overlay as `mode` says, looking through
  // every layer: kInsert fails with AlreadyExists when the key is live,
  // kUpdate with NotFound when it is not. InvalidArgument (naming the limit,
  // exactly as BTree::Put) for an empty key, a key over kMaxKeySize or a
  // value over kMaxValueSize, and for a tree that is not writable.
  // Corruption from the BTree's pages. Errors change nothing.
  Status Put(std::string_view key, std::string_view value, PutMode mode = PutMode::kUpsert);
  // Starts loading what a Put of `key` will read and write in memory (the
  // buffer's hash slots, the key filters), so that a writer putting into
  // several trees overlaps their cache misses instead of taking them one by
  // one. A hint: changes nothing.
  void Prefetch(std::string_view key) const;
  // Records a tombstone for `key` in the overlay; NotFound when the key is
  // not live (or empty or oversized, as BTree::Delete). InvalidArgument for
  // a tree that is not writable.
  Status Delete(std::string_view key);

  // Put kUpdate and Delete of a key the caller knows is live: one it has
  // just read through this tree, or an index key of a document it has just
  // read (the index holds each live document's keys). The same result,
  // without a look through the layers below.
  Status UpdateLive(std::string_view key, std::string_view value);
  Status DeleteLive(std::string_view key);

  // Gives a writable tree its key filters (WriteBuffer::Filters): a key
  // that Put makes live is added to both; `ready` then answers "not live"
  // for a key it proves absent without a descent of the BTree, when the
  // snapshot is at or after its `ready_at`. Call before the first Put.
  void UseFilters(TreeFilters filters) { filters_ = std::move(filters); }
  // Gives the tree its runs, newest first (each tree and filter must
  // outlive this object). Call before the first read. REQUIRES: not
  // direct(): writes straight to the tree would fall behind the runs.
  void UseRuns(std::vector<RunRef> runs) { runs_ = std::move(runs); }
  const std::vector<RunRef>& runs() const { return runs_; }
  // For a replay of records that were checked when committed (recovery
  // into the buffer): Put kInsert takes a key the overlay lacks as absent
  // below, and Put kUpdate and Delete take it as live, without a descent.
  void TrustWrites() { trusted_ = true; }

  // Starts the tree over for the next write transaction of the same
  // writer, at `view`: the overlay is emptied and the buffer's tables are
  // those of `view` (the same ones, found without a lookup, while its
  // generations are those of the last view and each had one); the BTree
  // and the runs stay. The key filters stay too: give new ones (UseFilters)
  // unless FiltersCurrent. REQUIRES: writable and not direct(); the BTree
  // and the runs are those of view's storage snapshot (rebound by the
  // caller).
  void Renew(const BufferView* view);
  // Whether the filters given last are still the buffer's for this tree
  // (`version`: WriteBuffer::filters_version() now) and need no new one
  // started, so a writer may keep them instead of asking again.
  bool FiltersCurrent(uint64_t version) const {
    return filters_.version == version &&
           (filters_.building != nullptr || (filters_.ready != nullptr && !filters_.ready->full()));
  }

  // The net change in the number of live keys that the buffer (at the
  // snapshot), the runs and the overlay make to the BTree's: the tree holds
  // BTree entries + CountDelta() live keys.
  int64_t CountDelta() const;

  // Whether the overlay is empty: the transaction changed nothing here.
  bool Empty() const { return overlay_.empty(); }
  // Calls fn(key, value, erased, was_live) for each key the transaction
  // changed, with its final state (value is empty when erased) and whether
  // it was live before the transaction (the WriteBuffer's count delta needs
  // it). In the order the keys were first changed.
  template <typename Fn>
  void ForEachChange(Fn&& fn) const {
    overlay_.ForEach([&](const Overlay::Entry& e) {
      fn(overlay_.key(e), overlay_.value(e), e.erased, e.was_live);
    });
  }
  // Appends the overlay's changes as BufferChanges of this tree (views into
  // the overlay and name(): valid until the tree is next written or
  // destroyed), ready for WriteBuffer::Publish.
  void AppendChanges(std::vector<BufferChange>* out) const;

  class Cursor;

 private:
  // Each takes `hash` = KeyHash(key): a point operation hashes its key once
  // for every layer it looks in.
  //
  // Whether `key` is live in the buffer, the runs and the BTree (not the
  // overlay).
  Status LiveBelow(std::string_view key, uint64_t hash, bool* live);
  // Looks `key` up in the runs: *found when one holds it (*erased, *value
  // from the newest that does).
  Status FindInRuns(std::string_view key, uint64_t hash, bool* found, bool* erased,
                    std::string_view* value);
  // Delete, given the key's hash.
  Status DeleteHashed(std::string_view key, uint64_t hash);
  // Whether a cursor must merge: the overlay, the buffer or a run has a
  // change.
  bool Layered() const { return !overlay_.empty() || !tables_.empty() || !runs_.empty(); }

  BTree* const tree_;
  const BufferView* view_;
  const std::string name_;
  const Comparator order_;
  const bool writable_;
  // The buffer's tables of this tree with a change at the snapshot, newest
  // first (fixed until Renew: commits published later are newer than the
  // snapshot).
  std::vector<const BufferTable*> tables_;
  std::vector<uint64_t> table_gens_;  // the ids of the generations tables_ was found in
  std::vector<RunRef> runs_;          // UseRuns; newest first
  Overlay overlay_;
  int64_t overlay_delta_ = 0;  // the overlay's share of CountDelta
  TreeFilters filters_;        // UseFilters; none by default
  bool trusted_ = false;       // TrustWrites
};

// Iterates a BufferedTree in key order (its `order`), both ways, merging
// the layers: each key once, with its newest layer's value; keys whose
// newest change is a tombstone are skipped. Positioned nowhere until a
// Seek. The same interface and rules as BTree::Cursor: every call that
// moves returns the BTree's errors (Corruption); key()/value() stay valid
// until the cursor moves (and see Lifetimes above); writing the tree (Put,
// Delete) invalidates every cursor on it (re-Seek).
class BufferedTree::Cursor {
 public:
  explicit Cursor(BufferedTree* tree);
  ~Cursor();
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;
  // First entry with key >= target.
  Status Seek(std::string_view target);
  Status SeekToFirst();
  Status SeekToLast();
  // REQUIRES: Valid()
  Status Next();
  Status Prev();
  bool Valid() const;
  std::string_view key() const;    // REQUIRES: Valid()
  std::string_view value() const;  // REQUIRES: Valid()

  // BTree::Cursor's whole-leaf access, for a scan that can reject a group
  // of entries by their bytes. The group: when the current entry comes from
  // the BTree or a run, its leaf (as BTree::Cursor::LeafBytes says; a run's
  // leaf holds its entries' values after their tags); when it comes from
  // the overlay or the buffer, that entry alone (its value, and
  // *all_inline = true). REQUIRES: Valid()
  std::string_view LeafBytes(bool* all_inline) const;
  // Moves past the rest of the current group, to the next entry after it
  // in the merged order (or to !Valid() at the end). From an overlay or
  // buffer entry: Next. From a BTree or run entry: that tree's cursor moves
  // past the rest of its leaf (BTree::Cursor::SkipLeaf), while entries of
  // other layers that sort inside that leaf are still visited, each in
  // turn: the cursor stops at the first of them, and Next goes on to the
  // next of them or to the tree's next leaf. (Turning back with Prev, or a
  // Seek, brings the leaf's entries back.) *skipped gets the entries passed
  // over: 1, or the tree's count, which may include entries hidden by newer
  // layers. REQUIRES: Valid()
  //
  // A run's entries hide the older layers' entries of the same keys, and a
  // run's leaf that was skipped no longer does: after such a SkipLeaf the
  // cursor may stand on an entry that one of the skipped entries replaced or
  // erased. The caller asks Hidden before it uses an entry.
  Status SkipLeaf(uint64_t* skipped);
  // *hidden: the current entry is one that an entry passed over by a run's
  // SkipLeaf or by RejectInBuffer replaced or erased (looked up in those
  // runs, through their key filters, and tables); move on with Next. Always
  // false without either since the last Seek. REQUIRES: Valid()
  Status Hidden(bool* hidden);

  // A test of a scan's filter on bytes: false when no document within
  // `bytes` can match (the test LeafBytes's caller makes).
  using BytesFilter = std::function<bool(std::string_view bytes)>;
  // For such a scan: the buffer's entries whose values `may_match` refuses
  // are passed over unseen, each counted in *rejected. A table's values are
  // then read once, in the buffer's memory order, rather than one by one in
  // key order through the merge; a table whose values the filter mostly
  // accepts is walked as usual. An older entry that a passed-over one
  // replaced or erased is found by Hidden, which the caller asks before it
  // uses an entry. The tables first yield `select_after` entries as usual
  // (0: none), so that a scan which stops early, as one with a limit does,
  // does not read whole tables; moving back before where the tables
  // started to select walks them as usual. Call before the first Seek; it
  // holds for the cursor's life. `rejected` must outlive the cursor.
  static constexpr size_t kSelectAfter = 256;
  void RejectInBuffer(BytesFilter may_match, uint64_t* rejected,
                      size_t select_after = kSelectAfter);

 private:
  class Merge;       // the layers and the merge (buffered_tree.cc)
  Merge* Prepare();  // before a Seek: the Merge, or nullptr for the BTree alone
  BufferedTree* tree_;
  BTree::Cursor base_;            // the BTree's; the whole cursor when !merged_
  bool merged_ = false;           // chosen at each Seek: the tree has layers
  std::unique_ptr<Merge> merge_;  // made at the first Seek that merges
  BytesFilter reject_;            // RejectInBuffer's; empty: none
  uint64_t* rejected_ = nullptr;
  size_t select_after_ = 0;
};

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_BUFFERED_TREE_H_
