// The mmdoc file formats: the data file <db> and the log <db>-log.
//
// All integers are little-endian, encoded with storage/coding.h (never by
// casting structs over the map). A page is page_size bytes (4096 by default,
// fixed when the file is created); page N starts at byte N * page_size.
// Pages 0 and 1 are the two meta pages; pages >= 2 hold trees, overflow
// values and the free list.
//
// COMMON PAGE HEADER (every page, every type; 24 bytes)
//   offset size description
//   0      8    checksum: XXH3-64 of bytes [8, run_length*page_size) of the
//               run, seeded with the page number
//   8      8    txid of the transaction that wrote the page
//   16     1    page type (PageType below)
//   17     1    flags (type-specific; 0 unless a type says otherwise)
//   18     2    reserved for the type (index/ uses it; storage ignores it)
//   20     4    run length in pages: 1, or n for an overflow run of n pages
//   24     ...  body (type-specific)
//
// A page as index/ lays it out (see index/btree_page.h for the cell format):
//
//   +----------------+---------------------+----------------+------------+
//   | header (24 B)  | node header + slots | free space ... |   cells    |
//   +----------------+---------------------+----------------+------------+
//                     slot array grows ->          <- cells grow down from the end
//
// META PAGE (pages 0 and 1; the one with the larger txid among valid wins)
//   offset size description
//   0      24   common header (type kMeta, run length 1)
//   24     8    magic kMagic (bytes "mmdoc\0\r\n" read as LE u64: byte order,
//               text-mode and truncation damage all show up as a bad magic)
//   32     4    format version (kFormatVersion)
//   36     4    page size in bytes
//   40     8    page count: pages the file holds in use (high-water mark)
//   48     8    free-list root: first kFreeList page, 0 when none
//   56     8    free page count (entries over all free-list pages)
//   64     8    log epoch: log records with this epoch follow this checkpoint
//   72     8*kMetaRoots  root slots (0 = empty); index/ uses slot 0 for its
//               catalog tree
//   136    16   database id: random, chosen when the file is created; the
//               log's header carries it too (version 3)
//   152    4    flags: kMetaClean when the log holds nothing this checkpoint
//               lacks (written by the checkpoint at close) (version 3)
//   156    4    zero
//   160    8    log txid: the log records this checkpoint covers are those
//               with txids up to it; replay starts after it (version 3)
//   168    8    log offset: where the first record replay needs starts in
//               the log (its epoch is the log epoch above) (version 3)
//   176    ...  zero up to kMetaStampOffset
//   1024   32   the durable stamp (below); not covered by the checksum
//   1056   ...  zero
//   The meta's txid (header offset 8) is the checkpoint's transaction id.
//   Meta for txid T is written to page T % 2. The checksum covers bytes
//   [8, kMetaStampOffset) in version 3 and [8, page size) before.
//
// DURABLE STAMP (in the newest meta page, at kMetaStampOffset): written
//   after each sync that makes log records durable, so that a log replaced
//   by an older copy of itself, or cut short, is noticed at open even though
//   each record in it is intact. Only this region of a durable meta page
//   is ever rewritten; its bytes lie outside the checksum, so a torn write
//   of it leaves the meta valid.
//   offset size description
//   0      4    magic kStampMagic
//   4      4    zero
//   8      8    log epoch the records belong to (the meta's, else ignored)
//   16     8    txid of the last durable record
//   24     8    XXH3-64 of bytes [0, 24) of the stamp, seeded with the slot
//
// FREE-LIST PAGE (type kFreeList; a singly linked chain)
//   offset size description
//   24     8    next free-list page, 0 at the end
//   32     4    n: page numbers in this page
//   36     4    zero
//   40     8*n  free page numbers, ascending within a page
//
// OVERFLOW RUN (type kOverflow; run length n >= 1 pages): a value too large
//   to sit in a leaf. Body of the first page and all of the following pages
//   hold the bytes; index/ records the value length in the leaf.
//
// LOG FILE <db>-log: a header page, then PagerOptions::log_size bytes of
//   records, preallocated and zero-filled when created. The records area
//   is a ring (storage/log.h): records are appended after each other; one
//   that does not fit before the end of the area is preceded by a wrap
//   marker (a record with magic kLogWrapMagic and no payload, or nothing
//   when fewer than 32 bytes are left) and goes at the start under the next
//   epoch. A checkpoint that covers every record starts the log over at
//   kLogRecordsOffset under a new epoch (which tells old records from new):
//   the next one when its pages are the meta's before it, else the one
//   after, so that a scan from that older meta, which follows on into the
//   next epoch, never takes these records for its own.
//   LOG HEADER (version 3; a version 1 or 2 database's log has none and its
//   records start at offset 0):
//   offset size description
//   0      8    checksum: XXH3-64 of bytes [8, 64)
//   8      8    magic kLogMagic
//   16     4    format version (kFormatVersion)
//   20     4    zero
//   24     16   database id (the meta page's)
//   40     8    size of the records area in bytes
//   48     ...  zero up to kLogRecordsOffset
//   Each record, 8-byte aligned:
//   offset size description
//   0      8    checksum: XXH3-64 of bytes [8, 32 + payload length), seeded
//               with the epoch
//   8      4    payload length
//   12     4    record magic kLogRecordMagic
//   16     8    txid
//   24     8    epoch (equal to the meta's log epoch)
//   32     len  payload (opaque to storage; the engine's operations)
//   then zero padding to a multiple of 8.
//   A record is valid when its magic, epoch and checksum match and its txid
//   is one more than the previous record's (the first: meta txid + 1).
//   Open replays the records after the chosen meta, a clean one's too: the
//   next epoch's records after a clean meta mean that the meta that began
//   them, the newest, is damaged, and they replay on the same pages. A
//   valid record at the start of the records area (where every restart and
//   wrap writes first) beyond what that replay reaches means the data file
//   is older than its log: Corruption, unless accept_log_loss.
#ifndef MMDOC_STORAGE_FORMAT_H_
#define MMDOC_STORAGE_FORMAT_H_

#include <cstdint>

namespace mmdoc::storage {

using PageId = uint64_t;

// On-disk values: do not renumber.
enum class PageType : uint8_t {
  kFree = 0,  // never written as such; a zeroed page
  kMeta = 1,
  kBranch = 2,    // index/ interior node
  kLeaf = 3,      // index/ leaf node
  kOverflow = 4,  // large value run
  kFreeList = 5,
};

inline constexpr uint64_t kMagic = 0x0a0d00636f646d6dull;  // "mmdoc\0\r\n"
// Version 2: collection and index trees may hold packed keys
// (engine/key_codec.cc), which a version-1 reader would misorder. Version 3:
// the database id, the clean flag and the durable stamp in the meta page,
// and the log's header. Version 1 and 2 files open (their logs are read
// without a header) and are written back as version 3.
inline constexpr uint32_t kFormatVersion = 3;
inline constexpr uint32_t kMinFormatVersion = 1;              // oldest version Open accepts
inline constexpr uint32_t kLogRecordMagic = 0x4c4f4731;       // "1GOL" as LE bytes
inline constexpr uint32_t kLogWrapMagic = 0x50415257;         // "WRAP" as LE bytes
inline constexpr uint64_t kLogMagic = 0x0a474f4c636f646dull;  // "mdocLOG\n"
inline constexpr uint32_t kStampMagic = 0x504d5453;           // "STMP"
inline constexpr int kMetaRoots = 8;
inline constexpr uint32_t kMinPageSize = 4096;
inline constexpr uint32_t kMaxPageSize = 65536;

// Common page header offsets.
inline constexpr uint32_t kPageChecksumOffset = 0;
inline constexpr uint32_t kPageTxidOffset = 8;
inline constexpr uint32_t kPageTypeOffset = 16;
inline constexpr uint32_t kPageFlagsOffset = 17;
inline constexpr uint32_t kPageTypeReservedOffset = 18;
inline constexpr uint32_t kPageRunLengthOffset = 20;
inline constexpr uint32_t kPageHeaderSize = 24;

// Meta page offsets.
inline constexpr uint32_t kMetaMagicOffset = 24;
inline constexpr uint32_t kMetaVersionOffset = 32;
inline constexpr uint32_t kMetaPageSizeOffset = 36;
inline constexpr uint32_t kMetaPageCountOffset = 40;
inline constexpr uint32_t kMetaFreeListRootOffset = 48;
inline constexpr uint32_t kMetaFreeCountOffset = 56;
inline constexpr uint32_t kMetaLogEpochOffset = 64;
inline constexpr uint32_t kMetaRootsOffset = 72;
inline constexpr uint32_t kMetaDbIdOffset = 136;
inline constexpr uint32_t kMetaFlagsOffset = 152;
inline constexpr uint32_t kMetaLogTxidOffset = 160;
inline constexpr uint32_t kMetaLogOffsetOffset = 168;
inline constexpr uint32_t kMetaStampOffset = 1024;
inline constexpr uint32_t kMetaStampSize = 32;
// Meta flags.
inline constexpr uint32_t kMetaClean = 1;

// Free-list page offsets.
inline constexpr uint32_t kFreeListNextOffset = 24;
inline constexpr uint32_t kFreeListCountOffset = 32;
inline constexpr uint32_t kFreeListEntriesOffset = 40;

// Log header offsets.
inline constexpr uint32_t kLogHeaderChecksumOffset = 0;
inline constexpr uint32_t kLogHeaderMagicOffset = 8;
inline constexpr uint32_t kLogHeaderVersionOffset = 16;
inline constexpr uint32_t kLogHeaderDbIdOffset = 24;
inline constexpr uint32_t kLogHeaderRecordsSizeOffset = 40;
inline constexpr uint32_t kLogHeaderUsed = 48;
inline constexpr uint32_t kLogRecordsOffset = 4096;

// Log record offsets.
inline constexpr uint32_t kLogChecksumOffset = 0;
inline constexpr uint32_t kLogLengthOffset = 8;
inline constexpr uint32_t kLogMagicOffset = 12;
inline constexpr uint32_t kLogTxidOffset = 16;
inline constexpr uint32_t kLogEpochOffset = 24;
inline constexpr uint32_t kLogHeaderSize = 32;

// Bytes a record with a payload of `payload_size` bytes takes in the log
// (records start at multiples of 8).
inline constexpr uint64_t LogRecordSize(uint64_t payload_size) {
  return (kLogHeaderSize + payload_size + 7) & ~uint64_t{7};
}

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_FORMAT_H_
