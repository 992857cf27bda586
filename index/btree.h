// index::BTree: a copy-on-write B+tree over storage pages, and its Cursor.
//
// One implementation serves every tree in a database: the catalog, each
// collection's _id primary index and every secondary index. Keys are byte
// strings of 1..kMaxKeySize bytes ordered by a Comparator (bytewise by
// default); values are byte strings of 0..kMaxValueSize bytes, stored inline
// in the leaf when small and in an overflow run (contiguous pages) when
// large, so a value is always one contiguous span and is returned without
// copying. The node layout is documented at the top of index/btree_page.h.
//
// Copy-on-write: the first change to a page in a write transaction copies it
// (storage::Txn::Modify), so a page reachable from a reader's snapshot or
// the durable meta is never changed (pager.h rule 1). Each change can move
// the root; the owner reads root() after writing and stores it (the Catalog
// does this for named trees).
//
// Thread safety: a BTree and its cursors belong to one Txn and one thread.
#ifndef MMDOC_INDEX_BTREE_H_
#define MMDOC_INDEX_BTREE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mmdoc/status.h"
#include "storage/pager.h"

namespace mmdoc::index {

// Negative, zero or positive as a < b, a == b, a > b. Must be a strict weak
// order that never changes for a tree's lifetime. nullptr means bytewise
// (memcmp, then shorter first).
using Comparator = int (*)(std::string_view a, std::string_view b);

// A compact stored form for some keys, chosen by the tree's owner (the
// engine stores a canonical GUID string key in 19 bytes instead of 39).
// Callers always pass and receive keys in their ordinary form: the tree
// packs keys on the way in (Get, Put, Delete, Cursor::Seek) and unpacks
// them in Cursor::key(). `compare` orders stored keys, packed or not,
// exactly as their ordinary forms order bytewise, so a tree may hold both
// forms and finds a key whichever form it was stored in. Sizes (kMaxKeySize)
// are checked on the ordinary form.
struct KeyCodec {
  static constexpr size_t kMaxForm = 64;  // most bytes pack/unpack write
  // Writes the packed form of `key` to buf and returns its size, or returns
  // 0 when `key` has none (it is stored as it is).
  size_t (*pack)(std::string_view key, char* buf);
  // Writes the ordinary form of the packed key `stored` to buf and returns
  // its size, or returns 0 when `stored` is not a packed key.
  size_t (*unpack)(std::string_view stored, char* buf);
  Comparator compare;  // over stored keys; not nullptr
  // Optional, so that a search can compare two packed keys inline instead
  // of calling `compare` (0 = not used): every packed key is `packed_size`
  // bytes long and begins with the same `signature_size` (1..4) bytes, no
  // other stored key of that size begins with them, and two packed keys
  // order bytewise.
  uint32_t packed_size = 0;
  uint32_t signature_size = 0;
};

inline constexpr size_t kMaxKeySize = 1024;
inline constexpr size_t kMaxValueSize = 64u << 20;

enum class PutMode {
  kUpsert,  // insert or overwrite
  kInsert,  // AlreadyExists when the key is present
  kUpdate,  // NotFound when the key is absent
};

struct TreeStats {
  uint64_t entries = 0;
  uint64_t depth = 0;  // 0 for an empty tree
  uint64_t branch_pages = 0;
  uint64_t leaf_pages = 0;
  uint64_t overflow_pages = 0;  // pages in overflow runs
  uint64_t used_bytes = 0;      // bytes in use in branch and leaf pages
  uint64_t capacity_bytes = 0;  // usable bytes of branch and leaf pages
};

class BTree {
 public:
  // The tree whose root is `root` (0: empty) in `txn`. Not owned: txn must
  // outlive the BTree.
  BTree(storage::Txn* txn, storage::PageId root, Comparator cmp = nullptr);
  // The same with keys stored as `codec` says. Not owned: codec must
  // outlive the BTree.
  BTree(storage::Txn* txn, storage::PageId root, const KeyCodec& codec);
  BTree(const BTree&) = delete;
  BTree& operator=(const BTree&) = delete;

  // Moves the tree to `txn`, another transaction in which the tree has the
  // same root (a later read of the same committed state, or the write txn
  // after the one that committed this root). Cursors on it must be gone.
  void Rebind(storage::Txn* txn) { txn_ = txn; }

  storage::PageId root() const { return root_; }
  storage::Txn* txn() const { return txn_; }
  Comparator comparator() const { return cmp_; }

  // Finds `key`. OK with *value pointing at the value bytes (valid until the
  // txn ends or this tree is next written); NotFound when absent;
  // Corruption when a page is damaged.
  Status Get(std::string_view key, std::string_view* value);
  // Writes key -> value as `mode` says. InvalidArgument (naming the limit)
  // for an empty key, a key over kMaxKeySize or a value over kMaxValueSize.
  // *replaced (when given): the key was present. REQUIRES: txn()->writable()
  Status Put(std::string_view key, std::string_view value, PutMode mode = PutMode::kUpsert,
             bool* replaced = nullptr);
  // Removes `key`; NotFound when absent. Merges or rebalances underfull
  // pages and frees emptied ones. REQUIRES: txn()->writable()
  Status Delete(std::string_view key);
  // Frees every page of the tree; root() becomes 0. REQUIRES: writable.
  Status Drop();

  // Checks the whole tree: page types, key order within pages and against
  // the separators of the parents, sizes, fill of non-root pages, overflow
  // runs. Appends every page it reaches (each page of a run) to *pages when
  // non-null, and fills *stats when non-null. Corruption with the page
  // number and what is wrong.
  Status Verify(std::vector<storage::PageId>* pages, TreeStats* stats);

  class Cursor;

  // Errors: InvalidArgument, NotFound and AlreadyExists from Put/Delete
  // leave the tree unchanged. Any other error (Corruption, Full, IOError)
  // may leave a write half done: abort the transaction.

 private:
  friend class Cursor;
  struct Impl;  // the algorithms (index/btree.cc)
  friend struct Impl;
  struct Entry {  // a cell being moved by a split, merge or rebalance
    const uint8_t* cell;
    uint32_t size;
  };

  // The stored form of `key`: packed into buf when the codec packs it.
  // *signature is the codec's signature_size when the key was packed and
  // the codec describes its packed form (searches then compare two packed
  // keys inline), else 0.
  std::string_view StoredKey(std::string_view key, char* buf, uint32_t* signature) const;

  storage::Txn* txn_;
  storage::PageId root_;
  Comparator cmp_;
  const KeyCodec* codec_ = nullptr;
  // Writer scratch space (three pages, see ScratchPages in btree.cc) for
  // the rare write that finds its thread's shared one in use.
  std::unique_ptr<uint8_t[]> scratch_;
  uint32_t scratch_ps_ = 0;     // ps scratch_ was sized for
  std::vector<Entry> entries_;  // cells being redistributed
};

// Iterates a BTree in key order, both ways. Positioned nowhere until a Seek.
// key()/value() stay valid until the cursor moves, the tree is written, or
// the txn ends. Writing the tree invalidates every cursor on it (re-Seek).
class BTree::Cursor {
 public:
  explicit Cursor(BTree* tree);
  Cursor(const Cursor&) = delete;  // key() may point into key_buf_
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

  // Whole-leaf access, for a scan that can reject a leaf by its bytes.
  // The current leaf's cell area: every inline value of the leaf lies
  // inside it, between keys and cell headers. *all_inline is false when a
  // value of the leaf is elsewhere (an overflow run) or a cell lies outside
  // the area (a damaged page; reading it entry by entry reports that).
  // REQUIRES: Valid()
  std::string_view LeafBytes(bool* all_inline) const;
  // Moves past the rest of the current leaf to the first entry of the next
  // one (or to !Valid() at the end). *skipped gets the entries passed over,
  // the current one included. REQUIRES: Valid()
  Status SkipLeaf(uint64_t* skipped);

 private:
  struct Frame {
    const uint8_t* page;
    storage::PageId id;
    int index;
  };
  BTree* tree_;
  std::vector<Frame> path_;  // root .. leaf
  bool valid_ = false;
  // key_ is the stored key until key() first unpacks it into key_buf_.
  mutable bool key_ready_ = false;
  mutable std::string_view key_;
  std::string_view value_;
  mutable char key_buf_[KeyCodec::kMaxForm];  // key() of a packed key
  Status Load();                              // fills key_/value_ from the leaf frame
  void PrefetchAhead() const;                 // hints the leaf and its sibling (see .cc)
};

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_BTREE_H_
