// The on-page format of index/ B+tree nodes (private to index/).
//
// Every node is one storage page. The first 24 bytes are the common page
// header owned by storage (storage/format.h: checksum, txid, type, flags,
// 2 reserved bytes, run length); the node format starts at offset 24.
//
// Byte order: every integer field below is little-endian ("le" in the
// tables), written and read only through the accessors in this header,
// which are built on storage/coding.h, never by casting structs over the
// page. Key and value bytes are opaque to the node format: the tree orders
// keys with its Comparator (the engine's keys hold big-endian integers on
// purpose so that they sort bytewise: engine/keys.cc).
//
// NODE HEADER (branch and leaf alike; 16 bytes)
//   offset size type   description
//   16     1    u8     page type: kBranch (2) or kLeaf (3)          [storage]
//   18     2    u16 le zero (reserved; index/ does not use it yet)  [storage]
//   24     2    u16 le n: number of cells (and of slots)
//   26     2    u16 le frag: bytes of dead cells inside the cell area (left
//                      behind by removed or resized cells; reclaimed by
//                      compaction)
//   28     4    u32 le upper: offset of the lowest byte of the cell area;
//                      cells live in [upper, page_size). page_size when the
//                      node has no cells (hence 4 bytes: 65536 is a legal
//                      page size).
//   32     8    u64 le branch: the leftmost child page (keys < the key of
//                      cell 0); leaf: zero
//   40     2*n  u16 le slot array: slot i is the offset of cell i. Slots are
//                      in key order; cells are in any order.
//
// A page:
//
//   0        24         40                  40+2n        upper        page_size
//   +--------+----------+-------------------+-------------+------------+
//   | common | node hdr | slot 0 | slot 1 ..| free space  |   cells    |
//   +--------+----------+-------------------+-------------+------------+
//                        slot array grows ->     <- cells grow down from the
//                        end
//
// Invariant (checked by Verify): 40 + 2n <= upper <= page_size, every cell
// lies inside [upper, page_size), and the sizes of all cells plus frag equal
// page_size - upper (so cells cannot overlap). A branch with n cells has
// n + 1 children: the leftmost one and one per cell.
//
// LEAF CELL (7-byte header)
//   offset size type   description
//   0      2    u16 le key length k, 1..kMaxKeySize
//   2      1    u8     flags: bit 0 (kCellOverflow) = the value is in an
//                      overflow run
//   3      4    u32 le value length v, 0..kMaxValueSize
//   7      k           key bytes
//   7+k    v           value bytes                    (inline value)
//   7+k    8    u64 le first page of the overflow run (kCellOverflow)
//
// A value is stored inline when the whole cell plus its slot takes at most
// a quarter of the usable page (MaxInlineCell); otherwise it goes to an
// overflow run of ceil((24 + v) / page_size) contiguous kOverflow pages,
// whose bytes start at offset 24 of the first page and continue through the
// following pages, so the value is one contiguous span in the map.
//
// BRANCH CELL (10-byte header)
//   offset size type   description
//   0      8    u64 le child page: keys >= this cell's key and < the next
//                      cell's key
//   8      2    u16 le key length k, 1..kMaxKeySize
//   10     k           key bytes (the separator: the first key of the
//                      child's subtree at the time it was made; a lower
//                      bound)
//
// Sizes: with kMaxKeySize = 1024 and the inline limit above, the largest
// cell (plus slot) is 1041 bytes, so even a 4096-byte page holds three of
// them and any page split or merge has a legal split point (asserted below).
#ifndef MMDOC_INDEX_BTREE_PAGE_H_
#define MMDOC_INDEX_BTREE_PAGE_H_

#include <cstdint>
#include <string_view>

#include "index/btree.h"
#include "storage/coding.h"
#include "storage/format.h"

namespace mmdoc::index::node {

// Node header.
inline constexpr uint32_t kCountOffset = 24;
inline constexpr uint32_t kFragOffset = 26;
inline constexpr uint32_t kUpperOffset = 28;
inline constexpr uint32_t kLeftmostOffset = 32;
inline constexpr uint32_t kSlotsOffset = 40;
inline constexpr uint32_t kSlotSize = 2;

// Leaf cell.
inline constexpr uint32_t kLeafKeyLenOffset = 0;
inline constexpr uint32_t kLeafFlagsOffset = 2;
inline constexpr uint32_t kLeafValueLenOffset = 3;
inline constexpr uint32_t kLeafCellHeader = 7;
inline constexpr uint8_t kCellOverflow = 1;
inline constexpr uint32_t kOverflowRef = 8;  // bytes of an overflow page id

// Branch cell.
inline constexpr uint32_t kBranchChildOffset = 0;
inline constexpr uint32_t kBranchKeyLenOffset = 8;
inline constexpr uint32_t kBranchCellHeader = 10;

// The tables above, field by field: each field ends where the next begins.
static_assert(kCountOffset == storage::kPageHeaderSize,
              "the node header follows the common page header");
static_assert(kFragOffset == kCountOffset + 2 && kUpperOffset == kFragOffset + 2 &&
                  kLeftmostOffset == kUpperOffset + 4 && kSlotsOffset == kLeftmostOffset + 8,
              "node header fields: u16 n, u16 frag, u32 upper, u64 leftmost");
static_assert(kSlotsOffset - kCountOffset == 16, "the node header is 16 bytes");
static_assert(kLeafFlagsOffset == kLeafKeyLenOffset + 2 &&
                  kLeafValueLenOffset == kLeafFlagsOffset + 1 &&
                  kLeafCellHeader == kLeafValueLenOffset + 4,
              "leaf cell header: u16 key length, u8 flags, u32 value length");
static_assert(kBranchKeyLenOffset == kBranchChildOffset + 8 &&
                  kBranchCellHeader == kBranchKeyLenOffset + 2,
              "branch cell header: u64 child, u16 key length");
// Field widths against the page sizes storage allows.
static_assert(storage::kMaxPageSize - 1 <= UINT16_MAX,
              "a u16 slot must reach every byte of the largest page");
static_assert(storage::kMaxPageSize - kSlotsOffset <= UINT16_MAX,
              "u16 frag and n must count up to the largest page's cell area");
static_assert(storage::kMaxPageSize <= UINT32_MAX, "u32 upper must hold page_size (an empty node)");
static_assert(kMaxKeySize <= UINT16_MAX, "key lengths are u16");
static_assert(kMaxValueSize <= UINT32_MAX, "value lengths are u32");

// Usable bytes of a node page (everything after the node header).
constexpr uint32_t Usable(uint32_t page_size) { return page_size - kSlotsOffset; }
// Largest leaf cell (plus its slot) stored with an inline value.
constexpr uint32_t MaxInlineCell(uint32_t page_size) { return Usable(page_size) / 4; }

// The largest cell of each kind plus its slot: a leaf cell whose value
// overflows (a larger inline one would have overflowed) and a branch cell.
inline constexpr uint32_t kMaxLeafCell = kLeafCellHeader + kMaxKeySize + kOverflowRef + kSlotSize;
inline constexpr uint32_t kMaxBranchCell = kBranchCellHeader + kMaxKeySize + kSlotSize;
// A split divides n + 1 cells into two nodes, each of which must fit; with
// three of the largest cells per node that always has a solution.
static_assert(3 * kMaxLeafCell <= Usable(storage::kMinPageSize) &&
                  3 * kMaxBranchCell <= Usable(storage::kMinPageSize) &&
                  3 * MaxInlineCell(storage::kMinPageSize) <= Usable(storage::kMinPageSize),
              "the smallest page must hold three of the largest cells");

// --- node header (all little-endian) ---

inline storage::PageType Type(const uint8_t* p) {
  return static_cast<storage::PageType>(p[storage::kPageTypeOffset]);
}
inline uint32_t RunLength(const uint8_t* p) {
  return storage::DecodeFixed32(p + storage::kPageRunLengthOffset);
}
inline uint32_t Count(const uint8_t* p) { return storage::DecodeFixed16(p + kCountOffset); }
inline uint32_t Frag(const uint8_t* p) { return storage::DecodeFixed16(p + kFragOffset); }
inline uint32_t Upper(const uint8_t* p) { return storage::DecodeFixed32(p + kUpperOffset); }
inline uint64_t Leftmost(const uint8_t* p) { return storage::DecodeFixed64(p + kLeftmostOffset); }
inline uint32_t Slot(const uint8_t* p, uint32_t i) {
  return storage::DecodeFixed16(p + kSlotsOffset + kSlotSize * i);
}

inline void SetCount(uint8_t* p, uint16_t n) { storage::EncodeFixed16(p + kCountOffset, n); }
inline void SetFrag(uint8_t* p, uint16_t frag) { storage::EncodeFixed16(p + kFragOffset, frag); }
inline void SetUpper(uint8_t* p, uint32_t upper) {
  storage::EncodeFixed32(p + kUpperOffset, upper);
}
inline void SetLeftmost(uint8_t* p, uint64_t child) {
  storage::EncodeFixed64(p + kLeftmostOffset, child);
}
inline void SetSlot(uint8_t* p, uint32_t i, uint16_t offset) {
  storage::EncodeFixed16(p + kSlotsOffset + kSlotSize * i, offset);
}

// --- cells (c points at the first byte of a cell; all little-endian) ---

inline uint32_t LeafKeyLen(const uint8_t* c) {
  return storage::DecodeFixed16(c + kLeafKeyLenOffset);
}
inline uint8_t LeafFlags(const uint8_t* c) { return c[kLeafFlagsOffset]; }
inline uint32_t LeafValueLen(const uint8_t* c) {
  return storage::DecodeFixed32(c + kLeafValueLenOffset);
}
inline void EncodeLeafHeader(uint8_t* c, uint16_t key_len, uint8_t flags, uint32_t value_len) {
  storage::EncodeFixed16(c + kLeafKeyLenOffset, key_len);
  c[kLeafFlagsOffset] = flags;
  storage::EncodeFixed32(c + kLeafValueLenOffset, value_len);
}
// The overflow page id stored where an inline value would start.
inline uint64_t OverflowRef(const uint8_t* at) { return storage::DecodeFixed64(at); }
inline void SetOverflowRef(uint8_t* at, uint64_t id) { storage::EncodeFixed64(at, id); }

inline uint64_t BranchChild(const uint8_t* c) {
  return storage::DecodeFixed64(c + kBranchChildOffset);
}
inline uint32_t BranchKeyLen(const uint8_t* c) {
  return storage::DecodeFixed16(c + kBranchKeyLenOffset);
}
inline void SetBranchChild(uint8_t* c, uint64_t child) {
  storage::EncodeFixed64(c + kBranchChildOffset, child);
}
inline void EncodeBranchHeader(uint8_t* c, uint64_t child, uint16_t key_len) {
  SetBranchChild(c, child);
  storage::EncodeFixed16(c + kBranchKeyLenOffset, key_len);
}

// --- space ---

// Bytes of slots and live cells.
inline uint32_t Used(const uint8_t* p, uint32_t page_size) {
  return kSlotSize * Count(p) + (page_size - Upper(p) - Frag(p));
}
// Contiguous free bytes between the slot array and the cell area.
inline uint32_t Gap(const uint8_t* p) { return Upper(p) - kSlotsOffset - kSlotSize * Count(p); }

// Pages of an overflow run holding v bytes.
inline uint64_t OverflowPages(uint64_t v, uint32_t page_size) {
  return (storage::kPageHeaderSize + v + page_size - 1) / page_size;
}

}  // namespace mmdoc::index::node

#endif  // MMDOC_INDEX_BTREE_PAGE_H_
