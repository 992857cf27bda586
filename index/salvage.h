// index::SalvageTree: reads what can still be read of a damaged B+tree.
//
// Walks the tree from its root in key order and calls emit(key, value) for
// every entry of every leaf it can reach through intact pages. A page that
// cannot be read (checksum, page number out of range) or whose structure is
// wrong (not a branch or leaf, a bad slot array, a cell past the page, a key
// length out of range, a bad overflow reference) is skipped with the whole
// subtree below it, and counted. Only pages reachable from the root through
// intact branch pages are read, so nothing is ever taken from a free page.
// Keys are emitted in their ordinary form (unpacked by `codec` when the tree
// stores keys through one) and strictly increasing bytewise: an entry that
// is not greater than the last one emitted is dropped, so each key comes out
// once.
//
// Thread safety: like BTree, one Txn and one thread.
#ifndef MMDOC_INDEX_SALVAGE_H_
#define MMDOC_INDEX_SALVAGE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "index/btree.h"
#include "mmdoc/status.h"
#include "storage/pager.h"

namespace mmdoc::index {

struct SalvageStats {
  uint64_t damaged_pages = 0;         // pages skipped (with their subtrees)
  uint64_t entries = 0;               // entries emitted
  std::vector<std::string> problems;  // one line per skipped page or entry
};

using SalvageEmit = std::function<void(std::string_view key, std::string_view value)>;

// OK unless the walk could not start (root 0 is an empty tree: OK, nothing
// emitted). Damage is reported in *stats, not as an error.
Status SalvageTree(storage::Txn* txn, storage::PageId root, const SalvageEmit& emit,
                   SalvageStats* stats, const KeyCodec* codec = nullptr);

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_SALVAGE_H_
