// The on-page format of index/ B+tree nodes (private to index/).
//
// Every node is one storage page. The first 24 bytes are the common page
// header owned by storage (storage/format.h: checksum, txid, type, flags,
// 2 reserved bytes, run length); the node format starts at offset 24. All
// integers are little-endian and are read and written with the memcpy-based
// helpers below, never by casting structs over the page.
//
// NODE HEADER (branch and leaf alike; 16 bytes)
//   offset size description
//   16     1    page type: kBranch (2) or kLeaf (3)              [storage]
//   18     2    zero (reserved; index/ does not use it yet)      [storage]
//   24     2    n: number of cells (and of slots)
//   26     2    frag: bytes of dead cells inside the cell area (left behind
//               by removed or resized cells; reclaimed by compaction)
//   28     4    upper: offset of the lowest byte of the cell area; cells live
//               in [upper, page_size). page_size when the node has no cells.
//   32     8    branch: the leftmost child page (keys < the key of cell 0);
//               leaf: zero
//   40     2*n  slot array: slot i is the u16 offset of cell i. Slots are in
//               key order; cells are in any order.
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
// page_size - upper (so cells cannot overlap).
//
// LEAF CELL (7-byte header)
//   offset size description
//   0      2    key length k, 1..kMaxKeySize
//   2      1    flags: bit 0 (kCellOverflow) = the value is in an overflow run
//   3      4    value length v, 0..kMaxValueSize
//   7      k    key bytes
//   7+k    v    value bytes                       (inline value)
//   7+k    8    first page of the overflow run    (kCellOverflow)
//
// A value is stored inline when the whole cell plus its slot takes at most
// a quarter of the usable page (MaxInlineCell); otherwise it goes to an
// overflow run of ceil((24 + v) / page_size) contiguous kOverflow pages,
// whose bytes start at offset 24 of the first page and continue through the
// following pages, so the value is one contiguous span in the map.
//
// BRANCH CELL (10-byte header)
//   offset size description
//   0      8    child page: keys >= this cell's key and < the next cell's key
//   8      2    key length k, 1..kMaxKeySize
//   10     k    key bytes (the separator: the first key of the child's
//               subtree at the time it was made; a lower bound)
//
// Sizes: with kMaxKeySize = 1024 and the inline limit above, the largest
// cell (plus slot) is 1041 bytes, so even a 4096-byte page holds three of
// them and any page split or merge has a legal split point.
#ifndef MMDOC_INDEX_BTREE_PAGE_H_
#define MMDOC_INDEX_BTREE_PAGE_H_

#include <cstdint>
#include <cstring>
#include <string_view>

#include "storage/format.h"

namespace mmdoc::index::node {

inline constexpr uint32_t kCountOffset = 24;
inline constexpr uint32_t kFragOffset = 26;
inline constexpr uint32_t kUpperOffset = 28;
inline constexpr uint32_t kLeftmostOffset = 32;
inline constexpr uint32_t kSlotsOffset = 40;

inline constexpr uint32_t kLeafCellHeader = 7;
inline constexpr uint32_t kBranchCellHeader = 10;
inline constexpr uint8_t kCellOverflow = 1;
inline constexpr uint32_t kOverflowRef = 8;  // bytes of an overflow page id

// Little-endian helpers (memcpy compiles to single loads and stores on
// little-endian machines; mmdoc targets those).
inline uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void Store16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline void Store32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void Store64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

inline storage::PageType Type(const uint8_t* p) {
  return static_cast<storage::PageType>(p[storage::kPageTypeOffset]);
}
inline uint32_t Count(const uint8_t* p) { return Load16(p + kCountOffset); }
inline uint32_t Frag(const uint8_t* p) { return Load16(p + kFragOffset); }
inline uint32_t Upper(const uint8_t* p) { return Load32(p + kUpperOffset); }
inline uint64_t Leftmost(const uint8_t* p) {
  return Load64(p + kLeftmostOffset);
}
inline uint32_t Slot(const uint8_t* p, uint32_t i) {
  return Load16(p + kSlotsOffset + 2 * i);
}
inline uint32_t RunLength(const uint8_t* p) {
  return Load32(p + storage::kPageRunLengthOffset);
}

// Usable bytes of a node page (everything after the node header).
inline uint32_t Usable(uint32_t page_size) { return page_size - kSlotsOffset; }
// Largest leaf cell (plus its slot) stored with an inline value.
inline uint32_t MaxInlineCell(uint32_t page_size) {
  return Usable(page_size) / 4;
}
// Bytes of slots and live cells.
inline uint32_t Used(const uint8_t* p, uint32_t page_size) {
  return 2 * Count(p) + (page_size - Upper(p) - Frag(p));
}
// Contiguous free bytes between the slot array and the cell area.
inline uint32_t Gap(const uint8_t* p) {
  return Upper(p) - kSlotsOffset - 2 * Count(p);
}

// Pages of an overflow run holding v bytes.
inline uint64_t OverflowPages(uint64_t v, uint32_t page_size) {
  return (storage::kPageHeaderSize + v + page_size - 1) / page_size;
}

}  // namespace mmdoc::index::node

#endif  // MMDOC_INDEX_BTREE_PAGE_H_
