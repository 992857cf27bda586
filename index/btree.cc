// index::BTree: lookups, copy-on-write insertion with splits, deletion with
// merges and rebalancing, Drop and Verify. The node format is in
// index/btree_page.h.
//
// Writes are recursive: each level descends to its child, and the child
// reports a Change (its possibly new page id after copy-on-write, a new
// right sibling when it split, and whether it fell under a quarter full).
// A level copies its own page (Txn::Modify) only when its child reports
// something, so a second write to the same leaf in a transaction touches no
// parent. Every decision that can fail without damage (NotFound,
// AlreadyExists) is made at the leaf before any page is changed.
//
// A full leaf first shares its cells with its emptier sibling when the two
// hold them at most 15/16 full (PlaceInFullLeaf), and splits only when it
// cannot: random inserts then leave leaves about 80% full instead of 70%,
// which a scan, the file and the page cache all pay for. A leaf at the
// tree's right edge taking a key past its last splits keeping itself full.
//
// The assert()s (Debug builds only) check what this file's own code
// guarantees whatever the pages hold: split points, child indexes, the
// cursor's stack, where a new key goes. Nothing read from a page is
// asserted on: a damaged page must give Corruption, never an abort
// (tests/index/corruption_test.cc writes to damaged trees).
#include "index/btree.h"

#include <algorithm>
#include <cassert>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "index/btree_page.h"
#include "storage/thread_cache.h"

namespace mmdoc::index {

using storage::PageId;
using storage::PageType;
using namespace node;  // NOLINT: the page format helpers

namespace {

// Deeper than any legal tree (fanout >= 3 at 4 KiB pages); a cycle in a
// damaged file stops here instead of overflowing the stack.
constexpr int kMaxDepth = 64;

inline int Bytewise(std::string_view a, std::string_view b) {
  size_t m = std::min(a.size(), b.size());
  int r = m == 0 ? 0 : std::memcmp(a.data(), b.data(), m);
  if (r != 0) return r;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

inline int Compare(Comparator cmp, std::string_view a, std::string_view b) {
  return cmp == nullptr ? Bytewise(a, b) : cmp(a, b);
}

Status PageError(PageId id, const char* what) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "page %" PRIu64, id);
  return Status::Corruption(buf, what);
}

// Checks the node header of page `id` so that the cell accessors below can
// bound-check cells against it.
Status CheckNode(const uint8_t* p, uint32_t ps, PageId id) {
  PageType t = Type(p);
  if (t != PageType::kBranch && t != PageType::kLeaf) {
    return PageError(id, "not a B+tree node (wrong page type)");
  }
  if (RunLength(p) != 1) {
    return PageError(id, "node with a run length other than 1");
  }
  uint32_t n = Count(p), upper = Upper(p);
  if (upper > ps || kSlotsOffset + kSlotSize * n > upper) {
    return PageError(id, "slot array and cell area overlap");
  }
  if (Frag(p) > ps - upper) return PageError(id, "dead bytes exceed the cell area");
  if (t == PageType::kBranch && n == 0 && Leftmost(p) == 0) {
    return PageError(id, "branch without children");
  }
  return Status::OK();
}

// The key of leaf cell i; empty when the cell is out of bounds.
inline std::string_view LeafKey(const uint8_t* p, uint32_t ps, uint32_t i) {
  uint32_t off = Slot(p, i);
  if (off < Upper(p) || off + kLeafCellHeader > ps) return {};
  uint32_t k = LeafKeyLen(p + off);
  if (k == 0 || k > kMaxKeySize || off + kLeafCellHeader + k > ps) return {};
  return {reinterpret_cast<const char*>(p + off + kLeafCellHeader), k};
}

// The key of branch cell i; empty when the cell is out of bounds.
inline std::string_view BranchKey(const uint8_t* p, uint32_t ps, uint32_t i) {
  uint32_t off = Slot(p, i);
  if (off < Upper(p) || off + kBranchCellHeader > ps) return {};
  uint32_t k = BranchKeyLen(p + off);
  if (k == 0 || k > kMaxKeySize || off + kBranchCellHeader + k > ps) return {};
  return {reinterpret_cast<const char*>(p + off + kBranchCellHeader), k};
}

inline std::string_view NodeKey(const uint8_t* p, uint32_t ps, uint32_t i) {
  return Type(p) == PageType::kLeaf ? LeafKey(p, ps, i) : BranchKey(p, ps, i);
}

struct LeafCell {
  std::string_view key;
  const uint8_t* value;  // inline bytes (when !overflow)
  uint32_t vlen;
  bool overflow;
  PageId overflow_id;
  uint32_t size;  // bytes of the cell
};

// Decodes leaf cell i with bounds checks; false when it is damaged.
inline bool DecodeLeaf(const uint8_t* p, uint32_t ps, uint32_t i, LeafCell* c) {
  c->key = LeafKey(p, ps, i);
  if (c->key.empty()) return false;
  uint32_t off = Slot(p, i);
  uint8_t flags = LeafFlags(p + off);
  c->vlen = LeafValueLen(p + off);
  c->overflow = (flags & kCellOverflow) != 0;
  uint64_t body = c->overflow ? kOverflowRef : uint64_t{c->vlen};
  uint64_t size = kLeafCellHeader + c->key.size() + body;
  if ((flags & ~kCellOverflow) != 0 || off + size > ps || c->vlen > kMaxValueSize) return false;
  c->size = static_cast<uint32_t>(size);
  c->value = p + off + kLeafCellHeader + c->key.size();
  c->overflow_id = c->overflow ? OverflowRef(c->value) : 0;
  return true;
}

// Bytes of cell i, or 0 when it is damaged.
inline uint32_t CellSize(const uint8_t* p, uint32_t ps, uint32_t i) {
  if (Type(p) == PageType::kLeaf) {
    LeafCell c;
    return DecodeLeaf(p, ps, i, &c) ? c.size : 0;
  }
  std::string_view k = BranchKey(p, ps, i);
  return k.empty() ? 0 : static_cast<uint32_t>(kBranchCellHeader + k.size());
}

// Child c of a branch (0: leftmost; c >= 1: the child of cell c-1).
inline bool ChildAt(const uint8_t* p, uint32_t ps, uint32_t c, PageId* child) {
  assert(c <= Count(p));  // a branch with n keys has n + 1 children
  if (c == 0) {
    *child = Leftmost(p);
  } else {
    uint32_t off = Slot(p, c - 1);
    if (off < Upper(p) || off + kBranchCellHeader > ps) return false;
    *child = BranchChild(p + off);
  }
  return *child >= 2;
}

inline void SetChild(uint8_t* w, uint32_t c, PageId child) {
  assert(c <= Count(w));  // a branch with n keys has n + 1 children
  if (c == 0) {
    SetLeftmost(w, child);
  } else {
    SetBranchChild(w + Slot(w, c - 1), child);
  }
}

// Two stored keys of the same size that both begin with a packed key's
// signature (KeyCodec): both are packed and order bytewise. Their first
// `sig` bytes are equal, so the rest decides, eight bytes at a time (read
// big-endian, so that the first differing byte decides, as under memcmp).
inline int PackedCompare(std::string_view a, std::string_view b, uint32_t sig) {
  size_t i = sig;
  for (; i + 8 <= a.size(); i += 8) {
    const uint64_t x = storage::DecodeBigEndian64(a.data() + i);
    const uint64_t y = storage::DecodeBigEndian64(b.data() + i);
    if (x != y) return x < y ? -1 : 1;
  }
  for (; i < a.size(); i++) {
    if (a[i] != b[i]) return static_cast<uint8_t>(a[i]) < static_cast<uint8_t>(b[i]) ? -1 : 1;
  }
  return 0;
}

// The first n (1..4) bytes of p, as a number for an equality test (read
// little-endian, so that the mask keeps the first n bytes on any host).
// REQUIRES: p has at least 4 bytes.
inline uint32_t Signature(const char* p, uint32_t n) {
  assert(n >= 1 && n <= 4);
  const uint32_t v = storage::DecodeFixed32(p);
  return n >= 4 ? v : v & ((1u << (8 * n)) - 1);
}

template <typename KeyAt, typename Cmp>
inline bool SearchWith(uint32_t n, KeyAt key_at, Cmp cmp, uint32_t* pos, bool* eq) {
  uint32_t lo = 0, hi = n;
  *eq = false;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    std::string_view k = key_at(mid);
    if (k.empty()) return false;
    int r = cmp(k);
    if (r < 0) {
      lo = mid + 1;
    } else if (r > 0) {
      hi = mid;
    } else {
      *pos = mid;
      *eq = true;
      return true;
    }
  }
  *pos = lo;
  return true;
}

// Binary search over the n keys of a node. *pos is the first key >= key;
// *eq tells whether it is equal. False when a key is damaged. `sig` is
// nonzero when `key` is packed (BTree::StoredKey): node keys in the same
// packed form are then compared inline, any other key through cmp.
template <typename KeyAt>
inline bool Search(uint32_t n, std::string_view key, Comparator cmp, uint32_t sig, KeyAt key_at,
                   uint32_t* pos, bool* eq) {
  if (cmp == nullptr)
    return SearchWith(
        n, key_at, [key](std::string_view k) { return Bytewise(k, key); }, pos, eq);
  if (sig != 0) {
    const uint32_t want = Signature(key.data(), sig);
    return SearchWith(
        n, key_at,
        [key, cmp, sig, want](std::string_view k) {
          if (k.size() == key.size() && Signature(k.data(), sig) == want)
            return PackedCompare(k, key, sig);
          return cmp(k, key);
        },
        pos, eq);
  }
  return SearchWith(
      n, key_at, [key, cmp](std::string_view k) { return cmp(k, key); }, pos, eq);
}

inline bool LeafSearch(const uint8_t* p, uint32_t ps, std::string_view key, Comparator cmp,
                       uint32_t sig, uint32_t* pos, bool* eq) {
  return Search(
      Count(p), key, cmp, sig, [p, ps](uint32_t i) { return LeafKey(p, ps, i); }, pos, eq);
}

// The child index (0..n) whose subtree may hold `key`.
inline bool BranchSearch(const uint8_t* p, uint32_t ps, std::string_view key, Comparator cmp,
                         uint32_t sig, uint32_t* child_index) {
  uint32_t pos;
  bool eq;
  if (!Search(
          Count(p), key, cmp, sig, [p, ps](uint32_t i) { return BranchKey(p, ps, i); }, &pos,
          &eq)) {
    return false;
  }
  *child_index = eq ? pos + 1 : pos;
  return true;
}

Status ReadOverflow(storage::Txn* txn, PageId id, uint32_t vlen, std::string_view* value) {
  const uint8_t* q;
  MMDOC_RETURN_IF_ERROR(txn->Get(id, &q));
  uint64_t pages = OverflowPages(vlen, txn->page_size());
  if (Type(q) != PageType::kOverflow) return PageError(id, "overflow value: wrong page type");
  if (RunLength(q) != pages || id + pages > txn->page_count()) {
    return PageError(id, "overflow run length does not match the value length");
  }
  *value = {reinterpret_cast<const char*>(q + storage::kPageHeaderSize), vlen};
  return Status::OK();
}

Status LeafValue(storage::Txn* txn, const LeafCell& c, std::string_view* value) {
  if (c.overflow) return ReadOverflow(txn, c.overflow_id, c.vlen, value);
  *value = {reinterpret_cast<const char*>(c.value), c.vlen};
  return Status::OK();
}

// --- writing nodes (pages the txn returned from Allocate or Modify) ---

void InitNode(uint8_t* w, uint32_t ps, PageType type, PageId leftmost) {
  w[storage::kPageTypeOffset] = static_cast<uint8_t>(type);
  SetCount(w, 0);
  SetFrag(w, 0);
  SetUpper(w, ps);
  SetLeftmost(w, leftmost);
}

// Appends a cell after the last slot. REQUIRES: Gap(w) >= size + 2.
void AppendCell(uint8_t* w, const uint8_t* cell, uint32_t size) {
  uint32_t n = Count(w);
  uint32_t upper = Upper(w) - size;
  std::memcpy(w + upper, cell, size);
  SetSlot(w, n, static_cast<uint16_t>(upper));
  SetUpper(w, upper);
  SetCount(w, static_cast<uint16_t>(n + 1));
}

// Removes cell i of `size` bytes.
void RemoveCell(uint8_t* w, uint32_t i, uint32_t size) {
  uint32_t n = Count(w);
  assert(i < n);
  uint32_t off = Slot(w, i);
  std::memmove(w + kSlotsOffset + kSlotSize * i, w + kSlotsOffset + kSlotSize * (i + 1),
               kSlotSize * (n - i - 1));
  SetCount(w, static_cast<uint16_t>(n - 1));
  if (off == Upper(w)) {
    SetUpper(w, off + size);
  } else {
    SetFrag(w, static_cast<uint16_t>(Frag(w) + size));
  }
}

// Places a cell as cell i when there is contiguous room.
void PlaceCell(uint8_t* w, uint32_t i, const uint8_t* cell, uint32_t size) {
  uint32_t n = Count(w);
  assert(i <= n);
  uint32_t upper = Upper(w) - size;
  std::memcpy(w + upper, cell, size);
  std::memmove(w + kSlotsOffset + kSlotSize * (i + 1), w + kSlotsOffset + kSlotSize * i,
               kSlotSize * (n - i));
  SetSlot(w, i, static_cast<uint16_t>(upper));
  SetUpper(w, upper);
  SetCount(w, static_cast<uint16_t>(n + 1));
}

inline uint32_t EntryKeyLen(PageType t, const uint8_t* cell) {
  return t == PageType::kLeaf ? LeafKeyLen(cell) : BranchKeyLen(cell);
}
inline std::string_view EntryKey(PageType t, const uint8_t* cell) {
  uint32_t h = t == PageType::kLeaf ? kLeafCellHeader : kBranchCellHeader;
  return {reinterpret_cast<const char*>(cell + h), EntryKeyLen(t, cell)};
}

// A subtree's report to its parent after a write.
struct Change {
  PageId id = 0;       // the subtree's root page now (may be a copy)
  bool split = false;  // the subtree split: `right` goes after it
  PageId right = 0;
  std::string sep;         // lower bound of `right`'s keys
  bool underfull = false;  // under a quarter full (or empty): rebalance me
  // A leaf with no room for the new cell (Scratch(2), full_size bytes, to
  // go at full_pos): id is its writable copy; the parent places the cell
  // (PlaceInFullLeaf).
  bool full = false;
  uint32_t full_pos = 0;
  uint32_t full_size = 0;
};

}  // namespace

namespace {

// Writer scratch space: three pages ([0,ps) [ps,2ps): page copies for
// splits and merges; [2ps,3ps): the cell being inserted), allocated (not
// zeroed: every use writes before it reads) on first use and kept. One per
// thread, shared by every tree the thread writes: trees live for one
// transaction, and a single-write commit writes three (catalog, _id, an
// index), so a buffer per tree would be three 12 KiB allocations and frees
// per commit. Tree operations do not nest, but an
// operation that finds the buffer taken uses its tree's own instead.
struct ScratchPages {
  std::unique_ptr<uint8_t[]> pages;
  uint32_t ps = 0;
  bool busy = false;

  uint8_t* Reserve(uint32_t page_size) {
    if (ps != page_size) {
      pages.reset(new uint8_t[3 * size_t{page_size}]);
      ps = page_size;
    }
    return pages.get();
  }
};
ScratchPages& ThreadScratch() { return storage::ThreadCache<ScratchPages>::Get(); }

}  // namespace

struct BTree::Impl {
  BTree* t;
  storage::Txn* txn;
  uint32_t ps;
  uint32_t key_sig = 0;   // of the key Put or Delete searches for (StoredKey)
  bool replaced = false;  // Put found its key
  uint8_t* scratch;
  bool leased = false;  // scratch is this thread's ThreadScratch()

  explicit Impl(BTree* tree) : t(tree), txn(tree->txn_), ps(tree->txn_->page_size()) {
    // The node layout's static_asserts (btree_page.h) hold for these.
    assert(ps >= storage::kMinPageSize && ps <= storage::kMaxPageSize);
    ScratchPages& mine = ThreadScratch();
    if (!mine.busy) {
      scratch = mine.Reserve(ps);
      mine.busy = leased = true;
    } else {
      if (t->scratch_ps_ != ps) {
        t->scratch_.reset(new uint8_t[3 * size_t{ps}]);
        t->scratch_ps_ = ps;
      }
      scratch = t->scratch_.get();
    }
  }
  ~Impl() {
    if (leased) ThreadScratch().busy = false;
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Scratch page k (2: the cell being inserted).
  uint8_t* Scratch(int k) const { return scratch + size_t{ps} * k; }

  bool Underfull(const uint8_t* w) const { return Count(w) == 0 || Used(w, ps) < Usable(ps) / 4; }

  Status GetNode(PageId id, int depth, const uint8_t** p) {
    if (depth > kMaxDepth) return PageError(id, "tree too deep (a cycle?)");
    MMDOC_RETURN_IF_ERROR(txn->Get(id, p));
    Status s = CheckNode(*p, ps, id);
    return s.ok() ? s : txn->Explain(std::move(s));
  }

  // Rewrites w with its own cells packed at the end (frag becomes 0).
  Status Compact(uint8_t* w, PageId id) {
    uint8_t* s = Scratch(1);
    std::memcpy(s, w, ps);
    uint32_t n = Count(s);
    InitNode(w, ps, Type(s), Leftmost(s));
    for (uint32_t i = 0; i < n; i++) {
      uint32_t size = CellSize(s, ps, i);
      if (size == 0) return PageError(id, "cell out of bounds");
      // Damaged slots that share cells add up to more than a page holds.
      if (Gap(w) < size + kSlotSize) return PageError(id, "cells overlap");
      AppendCell(w, s + Slot(s, i), size);
    }
    return Status::OK();
  }

  // Inserts a cell as cell i if it fits (compacting when that helps).
  Status TryInsert(uint8_t* w, PageId id, uint32_t i, const uint8_t* cell, uint32_t size,
                   bool* fitted) {
    *fitted = false;
    // A damaged node (RemoveCell trusted its cell's size) must not turn
    // Gap's subtraction or the slot shift below into a wild write.
    if (i > Count(w) || Upper(w) > ps || Upper(w) < kSlotsOffset + kSlotSize * Count(w)) {
      return PageError(id, "slot array and cell area overlap");
    }
    if (Gap(w) < size + 2) {
      if (Gap(w) + Frag(w) < size + 2) return Status::OK();
      MMDOC_RETURN_IF_ERROR(Compact(w, id));
      // Room the dead-byte count promised and compaction did not find.
      if (Gap(w) < size + 2) return PageError(id, "dead bytes miscounted");
    }
    PlaceCell(w, i, cell, size);
    *fitted = true;
    return Status::OK();
  }

  // Writable copies of siblings lid and rid (*lw, *rw), their bytes kept in
  // Scratch(0) and Scratch(1), and their cells gathered into entries_ with
  // `mid` (unless empty) between them: the start of a redistribution.
  Status GatherPair(PageId lid, PageId rid, Entry mid, PageId* nlid, PageId* nrid, uint8_t** lw,
                    uint8_t** rw) {
    MMDOC_RETURN_IF_ERROR(txn->Modify(lid, nlid, lw));
    MMDOC_RETURN_IF_ERROR(txn->Modify(rid, nrid, rw));
    std::memcpy(Scratch(0), *lw, ps);
    std::memcpy(Scratch(1), *rw, ps);
    t->entries_.clear();
    MMDOC_RETURN_IF_ERROR(CollectCells(Scratch(0), *nlid));
    if (mid.size > 0) t->entries_.push_back(mid);
    return CollectCells(Scratch(1), *nrid);
  }

  // Appends the cells of a validated node to entries_.
  Status CollectCells(const uint8_t* s, PageId id) {
    uint32_t n = Count(s);
    for (uint32_t i = 0; i < n; i++) {
      uint32_t size = CellSize(s, ps, i);
      if (size == 0) return PageError(id, "cell out of bounds");
      t->entries_.push_back({s + Slot(s, i), size});
    }
    return Status::OK();
  }

  // Picks where entries_ divides into two nodes of type `type`, both of
  // which must fit: leaves get [0,m) and [m,n); branches get [0,m), push
  // entry m up and get (m,n). Balances bytes unless `append` (sequential
  // inserts: keep the left node full).
  Status ChooseSplit(PageType type, bool append, PageId id, uint32_t* split) {
    const uint32_t n = static_cast<uint32_t>(t->entries_.size());
    if (n < (type == PageType::kLeaf ? 2u : 3u))
      return PageError(id, "cannot split a node this small");
    if (!FindSplit(type, append, split)) return PageError(id, "no legal split point");
    return Status::OK();
  }

  // ChooseSplit's search: false when no division fits both nodes.
  bool FindSplit(PageType type, bool append, uint32_t* split) {
    const auto& e = t->entries_;
    uint32_t n = static_cast<uint32_t>(e.size());
    bool leaf = type == PageType::kLeaf;
    if (n < (leaf ? 2u : 3u)) return false;
    uint32_t total = 0;
    for (const Entry& x : e) total += x.size + 2;
    uint32_t usable = Usable(ps);
    uint32_t lo = 1, hi = leaf ? n - 1 : n - 2;
    uint32_t best = 0;
    uint64_t best_diff = UINT64_MAX;
    uint32_t left = 0;
    for (uint32_t m = 0; m < lo; m++) left += e[m].size + 2;
    for (uint32_t m = lo; m <= hi; m++) {
      uint32_t right = total - left - (leaf ? 0 : e[m].size + 2);
      if (left <= usable && right <= usable) {
        if (append) {
          best = m;  // the largest legal m
        } else {
          uint64_t diff = left > right ? left - right : right - left;
          if (diff < best_diff) {
            best_diff = diff;
            best = m;
          }
        }
      }
      left += e[m].size + 2;
    }
    if (best == 0) return false;
    // Both halves keep at least one entry (a branch also gives one up).
    assert(best >= lo && best <= hi);
    *split = best;
    return true;
  }

  // After entries_[0, total) were divided at m into nodes l and r (a
  // branch's entry m went up): every entry is in one of them, neither is
  // empty, and each one's slots and cells fit its page.
  void AssertSplit(const uint8_t* l, const uint8_t* r, PageType type, uint32_t m,
                   uint32_t total) const {
    const uint32_t pushed_up = type == PageType::kLeaf ? 0 : 1;
    assert(Count(l) == m && Count(r) + m + pushed_up == total);
    assert(Count(l) > 0 && Count(r) > 0);
    assert(kSlotsOffset + kSlotSize * Count(l) <= Upper(l) && Upper(l) <= ps);
    assert(kSlotsOffset + kSlotSize * Count(r) <= Upper(r) && Upper(r) <= ps);
    (void)l, (void)r, (void)m, (void)total, (void)pushed_up;
  }

  // Builds node w (type, leftmost) from entries_[from, to).
  void Fill(uint8_t* w, PageType type, PageId leftmost, uint32_t from, uint32_t to) {
    InitNode(w, ps, type, leftmost);
    for (uint32_t i = from; i < to; i++) AppendCell(w, t->entries_[i].cell, t->entries_[i].size);
  }

  // Node w (page id) has no room for `cell` as cell i: splits it into w and
  // a new right sibling, reported in *out.
  Status SplitInsert(uint8_t* w, PageId id, uint32_t i, const uint8_t* cell, uint32_t size,
                     bool append, Change* out) {
    uint8_t* s = Scratch(0);
    std::memcpy(s, w, ps);
    PageType type = Type(s);
    auto& e = t->entries_;
    e.clear();
    uint32_t n = Count(s);
    assert(i <= n);
    for (uint32_t j = 0; j <= n; j++) {
      if (j == i) e.push_back({cell, size});
      if (j == n) break;
      uint32_t sz = CellSize(s, ps, j);
      if (sz == 0) return PageError(id, "cell out of bounds");
      e.push_back({s + Slot(s, j), sz});
    }
    uint32_t m = 0;
    MMDOC_RETURN_IF_ERROR(ChooseSplit(type, append, id, &m));
    PageId rid;
    uint8_t* r;
    MMDOC_RETURN_IF_ERROR(txn->Allocate(type, 1, &rid, &r));
    uint32_t total = static_cast<uint32_t>(e.size());
    Fill(w, type, Leftmost(s), 0, m);
    if (type == PageType::kLeaf) {
      Fill(r, type, 0, m, total);
    } else {
      Fill(r, type, BranchChild(e[m].cell), m + 1, total);
    }
    AssertSplit(w, r, type, m, total);
    out->split = true;
    out->right = rid;
    out->sep.assign(EntryKey(type, e[m].cell));
    return Status::OK();
  }

  uint32_t BuildBranchCell(PageId child, std::string_view key) {
    uint8_t* c = Scratch(2);
    EncodeBranchHeader(c, child, static_cast<uint16_t>(key.size()));
    std::memcpy(c + kBranchCellHeader, key.data(), key.size());
    return static_cast<uint32_t>(kBranchCellHeader + key.size());
  }

  // Inserts branch cell (child, key) as cell i of w, splitting when full.
  Status InsertBranchCell(uint8_t* w, PageId id, uint32_t i, PageId child, std::string_view key,
                          bool append, Change* out) {
    uint32_t size = BuildBranchCell(child, key);
    bool fitted;
    MMDOC_RETURN_IF_ERROR(TryInsert(w, id, i, Scratch(2), size, &fitted));
    if (fitted) return Status::OK();
    return SplitInsert(w, id, i, Scratch(2), size, append, out);
  }

  // A new root over out->id and out->right after the old root split.
  Status GrowRoot(const Change& ch) {
    PageId id;
    uint8_t* w;
    MMDOC_RETURN_IF_ERROR(txn->Allocate(PageType::kBranch, 1, &id, &w));
    InitNode(w, ps, PageType::kBranch, ch.id);
    uint32_t size = BuildBranchCell(ch.right, ch.sep);
    AppendCell(w, Scratch(2), size);
    // One key, two children, and a separator of at most kMaxKeySize fits.
    assert(Count(w) == 1 && kSlotsOffset + kSlotSize <= Upper(w));
    t->root_ = id;
    return Status::OK();
  }

  // Copy-on-write of node `id` whose bytes are `p`: the copy skips the
  // node's free space between the slot array and the cells.
  Status ModifyNode(PageId id, const uint8_t* p, PageId* nid, uint8_t** w) {
    return txn->ModifySkipping(id, kSlotsOffset + kSlotSize * Count(p), Upper(p), nid, w);
  }

  // --- Put ---

  // `has_parent`: a full leaf is left to the parent (Change::full), except
  // for an append at the tree's right edge, which splits keeping the left
  // leaf full.
  Status PutLeaf(PageId id, const uint8_t* p, std::string_view key, std::string_view value,
                 PutMode mode, bool rightmost, bool has_parent, Change* out) {
    uint32_t pos;
    bool found;
    if (!LeafSearch(p, ps, key, t->cmp_, key_sig, &pos, &found))
      return PageError(id, "cell out of bounds");
    if (found && mode == PutMode::kInsert) return Status::AlreadyExists("key already exists");
    if (!found && mode == PutMode::kUpdate) return Status::NotFound("key not found");
    replaced = found;
    // A new key goes between its neighbors, so the leaf stays sorted: the
    // search compared both (whatever the other keys hold).
    assert(found || pos == 0 || Compare(t->cmp_, LeafKey(p, ps, pos - 1), key) < 0);
    assert(found || pos == Count(p) || Compare(t->cmp_, LeafKey(p, ps, pos), key) > 0);
    LeafCell old{};
    if (found && !DecodeLeaf(p, ps, pos, &old)) return PageError(id, "cell out of bounds");

    // Build the new cell (and its overflow run) before touching the leaf.
    bool overflow = kLeafCellHeader + key.size() + value.size() + 2 > MaxInlineCell(ps);
    uint8_t* c = Scratch(2);
    EncodeLeafHeader(c, static_cast<uint16_t>(key.size()), overflow ? kCellOverflow : 0,
                     static_cast<uint32_t>(value.size()));
    std::memcpy(c + kLeafCellHeader, key.data(), key.size());
    uint32_t size;
    if (overflow) {
      uint64_t pages = OverflowPages(value.size(), ps);
      PageId oid;
      uint8_t* o;
      MMDOC_RETURN_IF_ERROR(
          txn->Allocate(PageType::kOverflow, static_cast<uint32_t>(pages), &oid, &o));
      if (!value.empty()) std::memcpy(o + storage::kPageHeaderSize, value.data(), value.size());
      SetOverflowRef(c + kLeafCellHeader + key.size(), oid);
      size = static_cast<uint32_t>(kLeafCellHeader + key.size() + kOverflowRef);
    } else {
      if (!value.empty()) std::memcpy(c + kLeafCellHeader + key.size(), value.data(), value.size());
      size = static_cast<uint32_t>(kLeafCellHeader + key.size() + value.size());
    }

    PageId nid;
    uint8_t* w;
    MMDOC_RETURN_IF_ERROR(ModifyNode(id, p, &nid, &w));
    out->id = nid;
    if (found) {
      if (old.overflow) MMDOC_RETURN_IF_ERROR(txn->Free(old.overflow_id));
      if (old.size == size) {
        std::memcpy(w + Slot(w, pos), c, size);
        return Status::OK();
      }
      RemoveCell(w, pos, old.size);
    }
    bool fitted;
    MMDOC_RETURN_IF_ERROR(TryInsert(w, nid, pos, c, size, &fitted));
    if (fitted) return Status::OK();
    bool append = rightmost && !found && pos == Count(w);
    if (has_parent && !append) {
      out->full = true;
      out->full_pos = pos;
      out->full_size = size;
      return Status::OK();
    }
    return SplitInsert(w, nid, pos, c, size, append, out);
  }

  // Child c of parent w is a full leaf (ch: its writable copy and the cell
  // waiting in Scratch(2)). Random inserts that split every full leaf in
  // two leave leaves about 70% full, and a scan reads every byte of them.
  // So when the emptier sibling has room, the two share the cells evenly
  // instead (when both end at most 15/16 full), and the leaf splits only
  // when its sibling is about as full: 79% instead of 71% for 1M random
  // documents (bench/micro/fill_probe.cc). May split w, reported in *out.
  Status PlaceInFullLeaf(uint8_t* w, PageId wid, uint32_t c, const Change& ch, int depth,
                         Change* out) {
    const uint32_t n = Count(w);
    const uint8_t* leaf;
    MMDOC_RETURN_IF_ERROR(GetNode(ch.id, depth, &leaf));
    uint32_t sc = c;  // the sibling: the emptier of the two beside the leaf
    const uint8_t* sib = nullptr;
    PageId sid = 0;
    for (uint32_t k : {c + 1, c - 1}) {
      if (k > n) continue;  // c - 1 wraps past n when c == 0
      PageId id;
      const uint8_t* q;
      if (!ChildAt(w, ps, k, &id)) return PageError(wid, "cell out of bounds");
      MMDOC_RETURN_IF_ERROR(GetNode(id, depth, &q));
      if (Type(q) != PageType::kLeaf) return PageError(id, "siblings of different types");
      if (sib == nullptr || Used(q, ps) < Used(sib, ps)) {
        sib = q;
        sid = id;
        sc = k;
      }
    }
    bool share = false;
    if (sib != nullptr) {
      const uint64_t total = uint64_t{Used(leaf, ps)} + Used(sib, ps) + ch.full_size + kSlotSize;
      share = total * 16 <= uint64_t{Usable(ps)} * 2 * 15;
    }
    const uint32_t lc = std::min(c, sc);
    if (share) {  // large cells may leave no division that fits both
      auto& e = t->entries_;
      e.clear();
      MMDOC_RETURN_IF_ERROR(CollectCells(lc == c ? leaf : sib, lc == c ? ch.id : sid));
      MMDOC_RETURN_IF_ERROR(CollectCells(lc == c ? sib : leaf, lc == c ? sid : ch.id));
      const uint32_t at = ch.full_pos + (lc == c ? 0 : Count(sib));
      if (at > e.size()) return PageError(ch.id, "cell out of bounds");
      e.insert(e.begin() + at, Entry{Scratch(2), ch.full_size});
      uint32_t m;
      share = FindSplit(PageType::kLeaf, false, &m);
    }
    if (share) {
      PageId lid = lc == c ? ch.id : sid, rid = lc == c ? sid : ch.id;
      PageId nlid, nrid;
      uint8_t* lw;
      uint8_t* rw;
      MMDOC_RETURN_IF_ERROR(GatherPair(lid, rid, Entry{nullptr, 0}, &nlid, &nrid, &lw, &rw));
      auto& e = t->entries_;
      const uint32_t at = ch.full_pos + (lc == c ? 0 : Count(Scratch(0)));
      if (at > e.size()) return PageError(ch.id, "cell out of bounds");
      e.insert(e.begin() + at, Entry{Scratch(2), ch.full_size});
      uint32_t m = 0;
      MMDOC_RETURN_IF_ERROR(ChooseSplit(PageType::kLeaf, false, nlid, &m));
      const uint32_t count = static_cast<uint32_t>(e.size());
      Fill(lw, PageType::kLeaf, 0, 0, m);
      Fill(rw, PageType::kLeaf, 0, m, count);
      AssertSplit(lw, rw, PageType::kLeaf, m, count);
      const std::string sep(EntryKey(PageType::kLeaf, e[m].cell));
      std::string_view old_sep = BranchKey(w, ps, lc);
      if (old_sep.empty()) return PageError(wid, "cell out of bounds");
      SetChild(w, lc, nlid);
      RemoveCell(w, lc, kBranchCellHeader + static_cast<uint32_t>(old_sep.size()));
      return InsertBranchCell(w, wid, lc, nrid, sep, false, out);
    }
    uint8_t* lw;
    PageId same;
    MMDOC_RETURN_IF_ERROR(txn->Modify(ch.id, &same, &lw));  // written already: in place
    if (same != ch.id) return PageError(ch.id, "a written leaf moved");
    Change split;
    MMDOC_RETURN_IF_ERROR(
        SplitInsert(lw, ch.id, ch.full_pos, Scratch(2), ch.full_size, false, &split));
    return InsertBranchCell(w, wid, c, split.right, split.sep, false, out);
  }

  Status PutRec(PageId id, int depth, std::string_view key, std::string_view value, PutMode mode,
                bool rightmost, Change* out) {
    const uint8_t* p;
    MMDOC_RETURN_IF_ERROR(GetNode(id, depth, &p));
    if (Type(p) == PageType::kLeaf) {
      return PutLeaf(id, p, key, value, mode, rightmost, depth > 0, out);
    }
    uint32_t c;
    PageId child;
    if (!BranchSearch(p, ps, key, t->cmp_, key_sig, &c) || !ChildAt(p, ps, c, &child)) {
      return PageError(id, "cell out of bounds");
    }
    uint32_t n = Count(p);
    Change ch;
    MMDOC_RETURN_IF_ERROR(PutRec(child, depth + 1, key, value, mode, rightmost && c == n, &ch));
    out->id = id;
    if (!ch.split && !ch.full && ch.id == child) return Status::OK();
    uint8_t* w;
    MMDOC_RETURN_IF_ERROR(ModifyNode(id, p, &out->id, &w));
    SetChild(w, c, ch.id);
    if (ch.full) return PlaceInFullLeaf(w, out->id, c, ch, depth + 1, out);
    if (!ch.split) return Status::OK();
    return InsertBranchCell(w, out->id, c, ch.right, ch.sep, rightmost && c == n, out);
  }

  // --- Delete ---

  // Child c of parent w fell under a quarter full: merge it with a sibling
  // or move cells over from one. May split w (when a longer separator does
  // not fit), reported in *out.
  Status Rebalance(uint8_t* w, PageId wid, uint32_t c, Change* out) {
    if (Count(w) == 0) return Status::OK();  // no sibling; w is underfull too
    uint32_t lc = c > 0 ? c - 1 : 0, rc = lc + 1, j = lc;
    // Siblings lc and rc exist and separator j lies between them.
    assert(c <= Count(w) && rc <= Count(w) && j < Count(w));
    PageId lid, rid;
    if (!ChildAt(w, ps, lc, &lid) || !ChildAt(w, ps, rc, &rid)) {
      return PageError(wid, "cell out of bounds");
    }
    std::string_view sep = BranchKey(w, ps, j);
    if (sep.empty()) return PageError(wid, "cell out of bounds");
    const uint8_t* l;
    const uint8_t* r;
    MMDOC_RETURN_IF_ERROR(GetNode(lid, 0, &l));
    MMDOC_RETURN_IF_ERROR(GetNode(rid, 0, &r));
    PageType type = Type(l);
    if (Type(r) != type) return PageError(rid, "siblings of different types");
    bool leaf = type == PageType::kLeaf;
    uint32_t usable = Usable(ps);
    uint32_t mid_size = leaf ? 0 : kBranchCellHeader + static_cast<uint32_t>(sep.size()) + 2;
    uint32_t sep_size = kBranchCellHeader + static_cast<uint32_t>(sep.size());
    uint32_t mid_cell = 0;
    if (!leaf) mid_cell = BuildBranchCell(Leftmost(r), sep);  // sep pulled down

    if (Used(l, ps) + Used(r, ps) + mid_size <= usable) {
      // Merge r into l and drop separator j.
      PageId nlid;
      uint8_t* lw;
      MMDOC_RETURN_IF_ERROR(txn->Modify(lid, &nlid, &lw));
      if (Gap(lw) < Used(r, ps) + mid_size) MMDOC_RETURN_IF_ERROR(Compact(lw, nlid));
      if (!leaf) AppendCell(lw, Scratch(2), mid_cell);
      uint32_t rn = Count(r);
      for (uint32_t i = 0; i < rn; i++) {
        uint32_t size = CellSize(r, ps, i);
        if (size == 0 || Gap(lw) < size + 2) return PageError(rid, "cell out of bounds");
        AppendCell(lw, r + Slot(r, i), size);
      }
      MMDOC_RETURN_IF_ERROR(txn->Free(rid));
      SetChild(w, lc, nlid);
      RemoveCell(w, j, sep_size);
      return Status::OK();
    }

    // Redistribute the cells of l (and the separator) and r evenly.
    PageId nlid, nrid;
    uint8_t* lw;
    uint8_t* rw;
    const Entry mid = leaf ? Entry{nullptr, 0} : Entry{Scratch(2), mid_cell};
    MMDOC_RETURN_IF_ERROR(GatherPair(lid, rid, mid, &nlid, &nrid, &lw, &rw));
    const uint8_t* sl = Scratch(0);
    uint32_t m = 0;
    MMDOC_RETURN_IF_ERROR(ChooseSplit(type, false, nlid, &m));
    uint32_t total = static_cast<uint32_t>(t->entries_.size());
    Fill(lw, type, Leftmost(sl), 0, m);
    if (leaf) {
      Fill(rw, type, 0, m, total);
    } else {
      Fill(rw, type, BranchChild(t->entries_[m].cell), m + 1, total);
    }
    AssertSplit(lw, rw, type, m, total);
    std::string new_sep(EntryKey(type, t->entries_[m].cell));
    SetChild(w, lc, nlid);
    RemoveCell(w, j, sep_size);
    return InsertBranchCell(w, wid, j, nrid, new_sep, false, out);
  }

  Status DelRec(PageId id, int depth, std::string_view key, Change* out) {
    const uint8_t* p;
    MMDOC_RETURN_IF_ERROR(GetNode(id, depth, &p));
    if (Type(p) == PageType::kLeaf) {
      uint32_t pos;
      bool found;
      LeafCell cell;
      if (!LeafSearch(p, ps, key, t->cmp_, key_sig, &pos, &found))
        return PageError(id, "cell out of bounds");
      if (!found) return Status::NotFound("key not found");
      if (!DecodeLeaf(p, ps, pos, &cell)) return PageError(id, "cell out of bounds");
      uint8_t* w;
      MMDOC_RETURN_IF_ERROR(ModifyNode(id, p, &out->id, &w));
      if (cell.overflow) MMDOC_RETURN_IF_ERROR(txn->Free(cell.overflow_id));
      RemoveCell(w, pos, cell.size);
      out->underfull = Underfull(w);
      return Status::OK();
    }
    uint32_t c;
    PageId child;
    if (!BranchSearch(p, ps, key, t->cmp_, key_sig, &c) || !ChildAt(p, ps, c, &child)) {
      return PageError(id, "cell out of bounds");
    }
    Change ch;
    MMDOC_RETURN_IF_ERROR(DelRec(child, depth + 1, key, &ch));
    out->id = id;
    if (!ch.split && !ch.underfull && ch.id == child) return Status::OK();
    uint8_t* w;
    MMDOC_RETURN_IF_ERROR(ModifyNode(id, p, &out->id, &w));
    SetChild(w, c, ch.id);
    if (ch.split) {
      MMDOC_RETURN_IF_ERROR(InsertBranchCell(w, out->id, c, ch.right, ch.sep, false, out));
    } else if (ch.underfull) {
      MMDOC_RETURN_IF_ERROR(Rebalance(w, out->id, c, out));
    }
    if (!out->split) out->underfull = Underfull(w);
    return Status::OK();
  }

  // --- Drop and Verify ---

  Status DropRec(PageId id, int depth) {
    const uint8_t* p;
    MMDOC_RETURN_IF_ERROR(GetNode(id, depth, &p));
    uint32_t n = Count(p);
    if (Type(p) == PageType::kLeaf) {
      for (uint32_t i = 0; i < n; i++) {
        LeafCell c;
        if (!DecodeLeaf(p, ps, i, &c)) return PageError(id, "cell out of bounds");
        if (c.overflow) MMDOC_RETURN_IF_ERROR(txn->Free(c.overflow_id));
      }
    } else {
      for (uint32_t i = 0; i <= n; i++) {
        PageId child;
        if (!ChildAt(p, ps, i, &child)) return PageError(id, "cell out of bounds");
        MMDOC_RETURN_IF_ERROR(DropRec(child, depth + 1));
      }
    }
    return txn->Free(id);
  }

  struct VerifyState {
    std::vector<PageId>* pages;
    TreeStats stats;
    int leaf_depth = -1;
  };

  Status VerifyRec(PageId id, int depth, const std::string_view* lo, const std::string_view* hi,
                   VerifyState* v) {
    const uint8_t* p;
    MMDOC_RETURN_IF_ERROR(GetNode(id, depth, &p));
    if (v->pages) v->pages->push_back(id);
    bool leaf = Type(p) == PageType::kLeaf;
    uint32_t n = Count(p);
    if (depth > 0 && n == 0) {
      return PageError(id, leaf ? "empty non-root leaf" : "non-root branch without keys");
    }
    uint64_t cell_bytes = 0;
    std::string_view prev;
    for (uint32_t i = 0; i < n; i++) {
      std::string_view k = NodeKey(p, ps, i);
      uint32_t size = CellSize(p, ps, i);
      if (k.empty() || size == 0) return PageError(id, "cell out of bounds");
      cell_bytes += size;
      if (i > 0 && Compare(t->cmp_, prev, k) >= 0) return PageError(id, "keys out of order");
      if (lo && Compare(t->cmp_, k, *lo) < 0) return PageError(id, "key below the parent's bound");
      if (hi && Compare(t->cmp_, k, *hi) >= 0) return PageError(id, "key above the parent's bound");
      prev = k;
    }
    if (cell_bytes + Frag(p) != ps - Upper(p)) return PageError(id, "cells overlap");
    v->stats.used_bytes += kSlotSize * n + cell_bytes;
    v->stats.capacity_bytes += Usable(ps);
    if (leaf) {
      if (v->leaf_depth < 0) v->leaf_depth = depth;
      if (v->leaf_depth != depth) return PageError(id, "leaves at different depths");
      v->stats.leaf_pages++;
      v->stats.entries += n;
      for (uint32_t i = 0; i < n; i++) {
        LeafCell c;
        if (!DecodeLeaf(p, ps, i, &c)) return PageError(id, "cell out of bounds");
        if (!c.overflow) continue;
        std::string_view value;
        MMDOC_RETURN_IF_ERROR(ReadOverflow(txn, c.overflow_id, c.vlen, &value));
        uint64_t pages = OverflowPages(c.vlen, ps);
        v->stats.overflow_pages += pages;
        if (v->pages) {
          for (uint64_t k = 0; k < pages; k++) v->pages->push_back(c.overflow_id + k);
        }
      }
      return Status::OK();
    }
    v->stats.branch_pages++;
    for (uint32_t c = 0; c <= n; c++) {
      PageId child;
      if (!ChildAt(p, ps, c, &child)) return PageError(id, "bad child page number");
      std::string_view clo, chi;
      const std::string_view* plo = lo;
      const std::string_view* phi = hi;
      if (c > 0) {
        clo = BranchKey(p, ps, c - 1);
        plo = &clo;
      }
      if (c < n) {
        chi = BranchKey(p, ps, c);
        phi = &chi;
      }
      MMDOC_RETURN_IF_ERROR(VerifyRec(child, depth + 1, plo, phi, v));
    }
    return Status::OK();
  }
};

BTree::BTree(storage::Txn* txn, PageId root, Comparator cmp) : txn_(txn), root_(root), cmp_(cmp) {}

BTree::BTree(storage::Txn* txn, PageId root, const KeyCodec& codec)
    : txn_(txn), root_(root), cmp_(codec.compare), codec_(&codec) {}

std::string_view BTree::StoredKey(std::string_view key, char* buf, uint32_t* signature) const {
  *signature = 0;
  if (codec_ != nullptr) {
    size_t n = codec_->pack(key, buf);
    assert(n <= KeyCodec::kMaxForm);  // the codec's promise; buf holds that
    if (n != 0) {
      if (n == codec_->packed_size && n >= 4 && codec_->signature_size >= 1 &&
          codec_->signature_size <= 4) {
        *signature = codec_->signature_size;
      }
      return {buf, n};
    }
  }
  return key;
}

Status BTree::Get(std::string_view key, std::string_view* value) {
  if (key.empty() || key.size() > kMaxKeySize) return Status::NotFound("key not found");
  PageId id = root_;
  if (id == 0) return Status::NotFound("key not found");
  char buf[KeyCodec::kMaxForm];
  uint32_t sig;
  key = StoredKey(key, buf, &sig);
  const uint32_t ps = txn_->page_size();
  for (int depth = 0; depth <= kMaxDepth; depth++) {
    const uint8_t* p;
    MMDOC_RETURN_IF_ERROR(txn_->Get(id, &p));
    if (Status s = CheckNode(p, ps, id); !s.ok()) return txn_->Explain(std::move(s));
    if (Type(p) == PageType::kLeaf) {
      uint32_t pos;
      bool found;
      if (!LeafSearch(p, ps, key, cmp_, sig, &pos, &found))
        return PageError(id, "cell out of bounds");
      if (!found) return Status::NotFound("key not found");
      LeafCell c;
      if (!DecodeLeaf(p, ps, pos, &c)) return PageError(id, "cell out of bounds");
      return LeafValue(txn_, c, value);
    }
    uint32_t c;
    if (!BranchSearch(p, ps, key, cmp_, sig, &c) || !ChildAt(p, ps, c, &id)) {
      return PageError(id, "cell out of bounds");
    }
  }
  return PageError(id, "tree too deep (a cycle?)");
}

namespace {
Status CheckKeyValue(std::string_view key, std::string_view value) {
  if (key.empty()) return Status::InvalidArgument("empty key (keys are 1..1024 bytes)");
  if (key.size() > kMaxKeySize) {
    return Status::InvalidArgument("key longer than kMaxKeySize (1024 bytes)");
  }
  if (value.size() > kMaxValueSize) {
    return Status::InvalidArgument("value longer than kMaxValueSize (64 MiB)");
  }
  return Status::OK();
}
}  // namespace

Status BTree::Put(std::string_view key, std::string_view value, PutMode mode, bool* replaced) {
  if (replaced != nullptr) *replaced = false;
  MMDOC_RETURN_IF_ERROR(CheckKeyValue(key, value));
  char buf[KeyCodec::kMaxForm];
  uint32_t sig;
  key = StoredKey(key, buf, &sig);
  Impl impl(this);
  impl.key_sig = sig;
  if (root_ == 0) {
    if (mode == PutMode::kUpdate) return Status::NotFound("key not found");
    PageId id;
    uint8_t* w;
    MMDOC_RETURN_IF_ERROR(txn_->Allocate(PageType::kLeaf, 1, &id, &w));
    InitNode(w, impl.ps, PageType::kLeaf, 0);
    root_ = id;
  }
  Change ch;
  MMDOC_RETURN_IF_ERROR(impl.PutRec(root_, 0, key, value, mode, true, &ch));
  if (replaced != nullptr) *replaced = impl.replaced;
  root_ = ch.id;
  if (ch.split) return impl.GrowRoot(ch);
  return Status::OK();
}

Status BTree::Delete(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeySize || root_ == 0) {
    return Status::NotFound("key not found");
  }
  char buf[KeyCodec::kMaxForm];
  uint32_t sig;
  key = StoredKey(key, buf, &sig);
  Impl impl(this);
  impl.key_sig = sig;
  Change ch;
  MMDOC_RETURN_IF_ERROR(impl.DelRec(root_, 0, key, &ch));
  root_ = ch.id;
  if (ch.split) return impl.GrowRoot(ch);
  // Shrink: a root branch with one child hands the root to it; an empty
  // root leaf makes the tree empty.
  for (;;) {
    const uint8_t* p;
    MMDOC_RETURN_IF_ERROR(impl.GetNode(root_, 0, &p));
    if (Count(p) != 0) return Status::OK();
    PageId next = Type(p) == PageType::kBranch ? Leftmost(p) : 0;
    MMDOC_RETURN_IF_ERROR(txn_->Free(root_));
    root_ = next;
    if (next == 0) return Status::OK();
  }
}

Status BTree::Drop() {
  if (root_ == 0) return Status::OK();
  Impl impl(this);
  MMDOC_RETURN_IF_ERROR(impl.DropRec(root_, 0));
  root_ = 0;
  return Status::OK();
}

Status BTree::Verify(std::vector<PageId>* pages, TreeStats* stats) {
  Impl::VerifyState v;
  v.pages = pages;
  if (root_ != 0) {
    Impl impl(this);
    MMDOC_RETURN_IF_ERROR(impl.VerifyRec(root_, 0, nullptr, nullptr, &v));
    v.stats.depth = static_cast<uint64_t>(v.leaf_depth) + 1;
  }
  if (stats) *stats = v.stats;
  return Status::OK();
}

// --- Cursor ---

BTree::Cursor::Cursor(BTree* tree) : tree_(tree) {
  path_.reserve(8);  // one allocation covers any real depth
}

bool BTree::Cursor::Valid() const { return valid_; }
std::string_view BTree::Cursor::key() const {
  // Unpacked on first use: a scan reads values only, and unpacking every
  // packed _id would be a large share of a full scan.
  if (!key_ready_) {
    key_ready_ = true;
    if (tree_->codec_ != nullptr) {
      size_t n = tree_->codec_->unpack(key_, key_buf_);
      if (n != 0) key_ = {key_buf_, n};
    }
  }
  return key_;
}
std::string_view BTree::Cursor::value() const { return value_; }

std::string_view BTree::Cursor::LeafBytes(bool* all_inline) const {
  const uint8_t* page = path_.back().page;
  const uint32_t ps = tree_->txn_->page_size();
  const uint32_t upper = std::min(Upper(page), ps);
  const uint32_t n = Count(page);
  bool inl = true;
  for (uint32_t i = 0; i < n && inl; i++) {
    const uint32_t off = Slot(page, i);
    inl =
        off >= upper && off + kLeafCellHeader <= ps && (LeafFlags(page + off) & kCellOverflow) == 0;
  }
  *all_inline = inl;
  return {reinterpret_cast<const char*>(page) + upper, ps - upper};
}

Status BTree::Cursor::SkipLeaf(uint64_t* skipped) {
  Frame& leaf = path_.back();
  const int n = static_cast<int>(Count(leaf.page));
  *skipped = leaf.index < n ? static_cast<uint64_t>(n - leaf.index) : 1;
  if (leaf.index < n) leaf.index = n - 1;
  return Next();
}

Status BTree::Cursor::Load() {
  // The stack is root .. leaf, no deeper than the descents allow, and the
  // leaf frame is at one of its cells.
  assert(!path_.empty() && path_.size() <= static_cast<size_t>(kMaxDepth) + 1);
  const Frame& f = path_.back();
  assert(f.index >= 0 && static_cast<uint32_t>(f.index) < Count(f.page));
  LeafCell c;
  if (!DecodeLeaf(f.page, tree_->txn_->page_size(), static_cast<uint32_t>(f.index), &c)) {
    valid_ = false;
    return PageError(f.id, "cell out of bounds");
  }
  Status s = LeafValue(tree_->txn_, c, &value_);
  if (!s.ok()) {
    valid_ = false;
    return s;
  }
  key_ = c.key;  // the stored form until key() unpacks it
  key_ready_ = false;
  valid_ = true;
  return Status::OK();
}

namespace {
// Descends from page `id` along the first (or last) edge to a leaf, pushing
// frames; the leaf frame's index is its first (or last) cell.
template <typename Frame>
Status DescendEdge(storage::Txn* txn, std::vector<Frame>* path, PageId id, bool last) {
  const uint32_t ps = txn->page_size();
  for (;;) {
    if (path->size() > static_cast<size_t>(kMaxDepth)) return PageError(id, "tree too deep");
    const uint8_t* p;
    MMDOC_RETURN_IF_ERROR(txn->Get(id, &p));
    if (Status s = CheckNode(p, ps, id); !s.ok()) return txn->Explain(std::move(s));
    uint32_t n = Count(p);
    if (Type(p) == PageType::kLeaf) {
      path->push_back({p, id, last ? static_cast<int>(n) - 1 : 0});
      return Status::OK();
    }
    uint32_t c = last ? n : 0;
    path->push_back({p, id, static_cast<int>(c)});
    if (!ChildAt(p, ps, c, &id)) return PageError(path->back().id, "cell out of bounds");
  }
}
}  // namespace

Status BTree::Cursor::SeekToFirst() {
  path_.clear();
  valid_ = false;
  if (tree_->root_ == 0) return Status::OK();
  MMDOC_RETURN_IF_ERROR(DescendEdge(tree_->txn_, &path_, tree_->root_, false));
  PrefetchAhead();  // a forward scan is likely
  if (Count(path_.back().page) == 0) return Next();
  return Load();
}

Status BTree::Cursor::SeekToLast() {
  path_.clear();
  valid_ = false;
  if (tree_->root_ == 0) return Status::OK();
  MMDOC_RETURN_IF_ERROR(DescendEdge(tree_->txn_, &path_, tree_->root_, true));
  if (path_.back().index < 0) return Prev();
  return Load();
}

Status BTree::Cursor::Seek(std::string_view target) {
  path_.clear();
  valid_ = false;
  PageId id = tree_->root_;
  if (id == 0) return Status::OK();
  char buf[KeyCodec::kMaxForm];
  uint32_t sig;
  target = tree_->StoredKey(target, buf, &sig);
  storage::Txn* txn = tree_->txn_;
  const uint32_t ps = txn->page_size();
  for (;;) {
    if (path_.size() > static_cast<size_t>(kMaxDepth)) return PageError(id, "tree too deep");
    const uint8_t* p;
    MMDOC_RETURN_IF_ERROR(txn->Get(id, &p));
    if (Status s = CheckNode(p, ps, id); !s.ok()) return txn->Explain(std::move(s));
    if (Type(p) == PageType::kLeaf) {
      uint32_t pos;
      bool eq;
      if (!LeafSearch(p, ps, target, tree_->cmp_, sig, &pos, &eq)) {
        return PageError(id, "cell out of bounds");
      }
      path_.push_back({p, id, static_cast<int>(pos)});
      if (pos >= Count(p)) {
        path_.back().index = static_cast<int>(Count(p)) - 1;
        valid_ = true;
        return Next();
      }
      return Load();
    }
    uint32_t c;
    if (!BranchSearch(p, ps, target, tree_->cmp_, sig, &c))
      return PageError(id, "cell out of bounds");
    path_.push_back({p, id, static_cast<int>(c)});
    if (!ChildAt(p, ps, c, &id)) return PageError(path_.back().id, "cell out of bounds");
  }
}

Status BTree::Cursor::Next() {
  if (path_.empty()) {
    valid_ = false;
    return Status::OK();
  }
  Frame& leaf = path_.back();
  if (leaf.index + 1 < static_cast<int>(Count(leaf.page))) {
    leaf.index++;
    return Load();
  }
  // Climb to the first ancestor with a child to the right, then go down
  // its leftmost edge. Empty leaves (only a damaged tree has them) are
  // skipped.
  for (;;) {
    path_.pop_back();
    while (!path_.empty() && path_.back().index >= static_cast<int>(Count(path_.back().page))) {
      path_.pop_back();
    }
    if (path_.empty()) {
      valid_ = false;
      return Status::OK();
    }
    Frame& f = path_.back();
    f.index++;
    PageId child;
    if (!ChildAt(f.page, tree_->txn_->page_size(), static_cast<uint32_t>(f.index), &child)) {
      valid_ = false;
      return PageError(f.id, "cell out of bounds");
    }
    Status s = DescendEdge(tree_->txn_, &path_, child, false);
    if (!s.ok()) {
      valid_ = false;
      return s;
    }
    PrefetchAhead();
    if (Count(path_.back().page) > 0) return Load();
  }
}

// A forward scan has just entered a leaf. Leaves sit anywhere in the file,
// so the hardware prefetcher cannot guess the next one and each cache line
// would be a serial miss (a scan ran at ~0.4 GB/s): ask for all of this
// leaf's lines at once, and for its right sibling's, which then arrive while
// this leaf's cells are read. Measured at 200k documents: leaf only 1.3-1.8x
// the scan rate without hints, leaf + sibling 2.3-3.3x, + two siblings no
// better. The sibling's lines are asked into L2 only (prefetcht2), likely
// leaving L1's fill buffers to the lines being read: on an Intel Xeon scans
// ran 9-13% faster (bench/results/scan-sibling-l2-2026-12-07.txt). Only a
// hint: a sibling that cannot be located is skipped.
void BTree::Cursor::PrefetchAhead() const {
  const uint32_t ps = tree_->txn_->page_size();
  for (uint32_t off = 0; off < ps; off += 64) __builtin_prefetch(path_.back().page + off);
  if (path_.size() < 2) return;
  const Frame& parent = path_[path_.size() - 2];
  if (parent.index + 1 > static_cast<int>(Count(parent.page))) return;
  PageId next;
  const uint8_t* p;
  if (ChildAt(parent.page, ps, static_cast<uint32_t>(parent.index + 1), &next) &&
      tree_->txn_->Get(next, &p).ok()) {
    for (uint32_t off = 0; off < ps; off += 64) __builtin_prefetch(p + off, 0, 1);
  }
}

Status BTree::Cursor::Prev() {
  if (path_.empty()) {
    valid_ = false;
    return Status::OK();
  }
  Frame& leaf = path_.back();
  if (leaf.index > 0) {
    leaf.index--;
    return Load();
  }
  for (;;) {
    path_.pop_back();
    while (!path_.empty() && path_.back().index <= 0) path_.pop_back();
    if (path_.empty()) {
      valid_ = false;
      return Status::OK();
    }
    Frame& f = path_.back();
    f.index--;
    PageId child;
    if (!ChildAt(f.page, tree_->txn_->page_size(), static_cast<uint32_t>(f.index), &child)) {
      valid_ = false;
      return PageError(f.id, "cell out of bounds");
    }
    Status s = DescendEdge(tree_->txn_, &path_, child, true);
    if (!s.ok()) {
      valid_ = false;
      return s;
    }
    if (path_.back().index >= 0) return Load();
  }
}

}  // namespace mmdoc::index
