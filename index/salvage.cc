#include "index/salvage.h"

#include <unordered_set>

#include "index/btree.h"
#include "index/btree_page.h"

namespace mmdoc::index {
namespace {

constexpr int kMaxDepth = 64;  // far deeper than any real tree

struct Walker {
  storage::Txn* txn;
  const SalvageEmit& emit;
  SalvageStats* stats;
  const KeyCodec* codec;  // nullptr: keys are stored as they are
  uint32_t page_size;
  std::unordered_set<storage::PageId> visited;
  std::string last;  // last key emitted
  bool any = false;

  void Damaged(storage::PageId id, const std::string& what) {
    stats->damaged_pages++;
    stats->problems.push_back("page " + std::to_string(id) + ": " + what);
  }

  // The node's structure (the slot array and cells stay inside the page);
  // "" when sound.
  std::string NodeProblem(const uint8_t* p) const {
    const storage::PageType t = node::Type(p);
    if (t != storage::PageType::kBranch && t != storage::PageType::kLeaf) return "not a tree page";
    if (node::RunLength(p) != 1) return "run length is not 1";
    const uint32_t n = node::Count(p), upper = node::Upper(p);
    if (node::kSlotsOffset + 2ull * n > upper || upper > page_size) return "bad slot array";
    const bool leaf = t == storage::PageType::kLeaf;
    for (uint32_t i = 0; i < n; i++) {
      const uint32_t off = node::Slot(p, i);
      const uint32_t hdr = leaf ? node::kLeafCellHeader : node::kBranchCellHeader;
      if (off < upper || uint64_t{off} + hdr > page_size) return "cell outside the cell area";
      const uint32_t klen = leaf ? node::LeafKeyLen(p + off) : node::BranchKeyLen(p + off);
      if (klen == 0 || klen > kMaxKeySize) return "bad key length";
      uint64_t end = uint64_t{off} + hdr + klen;
      if (leaf) {
        const bool overflow = node::LeafFlags(p + off) & node::kCellOverflow;
        const uint32_t vlen = node::LeafValueLen(p + off);
        if (vlen > kMaxValueSize) return "bad value length";
        end += overflow ? node::kOverflowRef : vlen;
      }
      if (end > page_size) return "cell past the end of the page";
    }
    return "";
  }

  void Visit(storage::PageId id, int depth) {
    if (depth > kMaxDepth) return Damaged(id, "tree deeper than any real one (a cycle?)");
    if (!visited.insert(id).second) return Damaged(id, "reached twice");
    const uint8_t* p;
    Status s = txn->Get(id, &p);
    if (!s.ok()) return Damaged(id, s.ToString());
    std::string problem = NodeProblem(p);
    if (!problem.empty()) return Damaged(id, problem);
    const uint32_t n = node::Count(p);
    if (node::Type(p) == storage::PageType::kBranch) {
      Visit(node::Leftmost(p), depth + 1);
      for (uint32_t i = 0; i < n; i++) Visit(node::BranchChild(p + node::Slot(p, i)), depth + 1);
      return;
    }
    for (uint32_t i = 0; i < n; i++) {
      const uint8_t* cell = p + node::Slot(p, i);
      const uint32_t klen = node::LeafKeyLen(cell);
      const uint32_t vlen = node::LeafValueLen(cell);
      std::string_view key(reinterpret_cast<const char*>(cell + node::kLeafCellHeader), klen);
      char unpacked[KeyCodec::kMaxForm];
      if (codec != nullptr) {
        size_t u = codec->unpack(key, unpacked);
        if (u != 0) key = std::string_view(unpacked, u);
      }
      std::string_view value;
      const uint8_t* v = cell + node::kLeafCellHeader + klen;
      if (node::LeafFlags(cell) & node::kCellOverflow) {
        const storage::PageId run = node::OverflowRef(v);
        const uint8_t* op;
        Status os = txn->Get(run, &op);
        if (!os.ok()) {
          Damaged(run, "overflow run: " + os.ToString());
          continue;
        }
        if (node::Type(op) != storage::PageType::kOverflow ||
            node::RunLength(op) != node::OverflowPages(vlen, page_size)) {
          Damaged(run, "overflow run of the wrong type or length");
          continue;
        }
        value =
            std::string_view(reinterpret_cast<const char*>(op + storage::kPageHeaderSize), vlen);
      } else {
        value = std::string_view(reinterpret_cast<const char*>(v), vlen);
      }
      if (any && key <= std::string_view(last)) {
        stats->problems.push_back("page " + std::to_string(id) + ": key out of order, skipped");
        continue;
      }
      last.assign(key);
      any = true;
      stats->entries++;
      emit(key, value);
    }
  }
};

}  // namespace

Status SalvageTree(storage::Txn* txn, storage::PageId root, const SalvageEmit& emit,
                   SalvageStats* stats, const KeyCodec* codec) {
  if (root == 0) return Status::OK();
  Walker w{txn, emit, stats, codec, txn->page_size(), {}, {}, false};
  w.Visit(root, 0);
  return Status::OK();
}

}  // namespace mmdoc::index
