// index::Catalog: many named trees in one file.
//
// The catalog is itself a BTree whose root lives in meta root slot 0
// (kCatalogRootSlot). It maps a tree name to an entry: the tree's root page
// and an opaque metadata string its owner keeps beside it (the engine keeps
// collection and index definitions there). Trees are created, opened and
// dropped inside a write transaction and the change commits or aborts with
// it.
//
// Catalog entry value encoding: u64 root (little-endian) then the metadata
// bytes.
//
// Thread safety: one Catalog per Txn, used by one thread.
#ifndef MMDOC_INDEX_CATALOG_H_
#define MMDOC_INDEX_CATALOG_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "index/btree.h"

namespace mmdoc::index {

inline constexpr int kCatalogRootSlot = 0;

class Catalog {
 public:
  // Reads the catalog root from txn->root(kCatalogRootSlot). Not owned.
  // Named trees opened without a comparator store their keys as `codec`
  // says (nullptr: as they are, bytewise order); the catalog's own tree
  // always stores names as they are.
  explicit Catalog(storage::Txn* txn, const KeyCodec* codec = nullptr);
  ~Catalog();

  // Creates an empty tree `name` with `meta`. AlreadyExists when present.
  Status Create(std::string_view name, std::string_view meta, Comparator cmp = nullptr);
  // The open tree `name` (the same object on every call within this
  // Catalog); NotFound when absent. Owned by the Catalog.
  Status Open(std::string_view name, BTree** tree, Comparator cmp = nullptr);
  // Registers tree `name` as open with a root the caller already knows
  // (from a cache of an earlier read of this same catalog state), skipping
  // the catalog lookup. The tree is flushed like one from Open.
  // REQUIRES: `root` is the root stored in `name`'s entry in this txn.
  BTree* Adopt(std::string_view name, storage::PageId root, Comparator cmp = nullptr);
  // Frees every page of tree `name` and removes it. NotFound when absent.
  // A BTree* that Open returned for `name` becomes invalid.
  Status Drop(std::string_view name);
  Status GetMeta(std::string_view name, std::string* meta);
  // Sets the metadata of tree `name`; written into its entry by Flush,
  // together with its root (GetMeta sees it at once).
  Status SetMeta(std::string_view name, std::string_view meta);
  // Names starting with `prefix`, in order.
  Status List(std::string_view prefix, std::vector<std::string>* names);

  // Stores the roots of every tree opened and changed through this catalog
  // and the metadata SetMeta gave into their entries (one Put per changed
  // entry), and the catalog's own root into the meta slot.
  // Call before committing. REQUIRES: writable txn.
  Status Flush();

  // Verifies the catalog tree and every tree in it (BTree::Verify),
  // appending all reachable pages to *pages.
  // Trees not opened through this Catalog are checked in the codec's order
  // (bytewise without one); the second form asks `comparator_for(name,
  // meta)` for their comparator.
  Status Verify(std::vector<storage::PageId>* pages);
  using ComparatorFor = std::function<Comparator(std::string_view name, std::string_view meta)>;
  Status Verify(std::vector<storage::PageId>* pages, const ComparatorFor& comparator_for);

  BTree* tree() { return &tree_; }

  // Moves the catalog and every tree opened through it to `txn`, a later
  // transaction that starts from the state this one's txn committed (so
  // every root is the same). BTrees it returned stay valid.
  void Rebind(storage::Txn* txn);

 private:
  // A tree of this catalog: `cmp` when given, else the catalog's codec.
  std::unique_ptr<BTree> MakeTree(storage::PageId root, Comparator cmp) const;

  // The metadata SetMeta gave `name` in this txn, or nullptr.
  std::string* PendingMeta(std::string_view name);
  // Writes name's entry with `root` and `meta` (each nullptr: as stored)
  // when either differs from what is stored.
  Status FlushEntry(std::string_view name, const storage::PageId* root, const std::string* meta);

  storage::Txn* txn_;
  const KeyCodec* codec_;
  BTree tree_;
  std::map<std::string, std::unique_ptr<BTree>, std::less<>> open_;
  // SetMeta's metadata until Flush (few: one per collection written).
  std::vector<std::pair<std::string, std::string>> pending_meta_;
  std::string entry_buf_;  // FlushEntry's new entry
};

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_CATALOG_H_
