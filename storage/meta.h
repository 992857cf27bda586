// The meta page (storage/format.h, META PAGE): its one encoder, decoder and
// validator, rule 4's choice between the two meta pages, and the durable
// stamp kept in the newest one.
//
// Thread safety: pure functions.
#ifndef MMDOC_STORAGE_META_H_
#define MMDOC_STORAGE_META_H_

#include <cstdint>
#include <string>

#include "mmdoc/status.h"
#include "storage/format.h"

namespace mmdoc::storage {

struct Meta {
  uint64_t txid = 0;  // the checkpoint's transaction id; slot = txid % 2
  uint32_t version = kFormatVersion;
  uint32_t page_size = 0;
  uint64_t page_count = 0;
  PageId freelist_root = 0;
  uint64_t free_count = 0;
  uint64_t log_epoch = 0;
  PageId roots[kMetaRoots] = {};
  // Version 3 (zero and false when read from an older file):
  uint64_t db_id[2] = {0, 0};
  bool clean = false;  // the log holds nothing this checkpoint lacks
  // Replay starts after log_txid, at log_offset in the log (a version 1 or
  // 2 file: after txid, at offset 0).
  uint64_t log_txid = 0;
  uint64_t log_offset = 0;
};

// What the durable stamp says: log records of `epoch` up to `txid` were
// made durable.
struct Stamp {
  uint64_t epoch = 0;
  uint64_t txid = 0;
};

// Writes `m` as meta page `slot` (0 or 1) into `page` (m.page_size bytes,
// all of them written), checksum included.
void EncodeMeta(const Meta& m, PageId slot, uint8_t* page);

// Decodes meta page `slot`, read as a page of `page_size` bytes. False, with
// the reason in *why ("page N: bad magic", ...), when it is not a valid meta
// page of that size: magic, version, page size, type, run length, checksum.
bool DecodeMeta(const uint8_t* page, uint32_t page_size, PageId slot, Meta* m, std::string* why);

// Rule 4: of the two meta pages at the start of a file of `size` bytes
// (`base` maps at least that much), the valid one with the larger txid,
// trying every legal page size. Corruption naming `path` and why each page
// is invalid when neither is; also when the chosen meta's page count is
// below 2 or beyond the end of the file.
Status PickMeta(const uint8_t* base, uint64_t size, const std::string& path, Meta* m, PageId* slot);

// Writes the stamp into meta page `slot` (its stamp region only).
void EncodeStamp(const Stamp& st, PageId slot, uint8_t* page);
// The stamp of meta page `slot`; false when there is none or it is torn.
bool DecodeStamp(const uint8_t* page, PageId slot, Stamp* st);

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_META_H_
