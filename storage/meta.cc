#include "storage/meta.h"

#include <cstring>

#include "storage/checksum.h"
#include "storage/coding.h"

namespace mmdoc::storage {

namespace {

std::string PageMsg(PageId id, const std::string& what) {
  return "page " + std::to_string(id) + ": " + what;
}

bool LegalPageSize(uint32_t ps) {
  return ps >= kMinPageSize && ps <= kMaxPageSize && (ps & (ps - 1)) == 0;
}

}  // namespace

void EncodeMeta(const Meta& m, PageId slot, uint8_t* page) {
  const uint32_t ps = m.page_size;
  std::memset(page, 0, ps);
  EncodeFixed64(page + kPageTxidOffset, m.txid);
  page[kPageTypeOffset] = static_cast<uint8_t>(PageType::kMeta);
  EncodeFixed32(page + kPageRunLengthOffset, 1);
  EncodeFixed64(page + kMetaMagicOffset, kMagic);
  EncodeFixed32(page + kMetaVersionOffset, kFormatVersion);
  EncodeFixed32(page + kMetaPageSizeOffset, ps);
  EncodeFixed64(page + kMetaPageCountOffset, m.page_count);
  EncodeFixed64(page + kMetaFreeListRootOffset, m.freelist_root);
  EncodeFixed64(page + kMetaFreeCountOffset, m.free_count);
  EncodeFixed64(page + kMetaLogEpochOffset, m.log_epoch);
  for (int i = 0; i < kMetaRoots; i++) {
    EncodeFixed64(page + kMetaRootsOffset + 8 * i, m.roots[i]);
  }
  EncodeFixed64(page + kMetaDbIdOffset, m.db_id[0]);
  EncodeFixed64(page + kMetaDbIdOffset + 8, m.db_id[1]);
  EncodeFixed32(page + kMetaFlagsOffset, m.clean ? kMetaClean : 0);
  EncodeFixed64(page + kMetaLogTxidOffset, m.log_txid);
  EncodeFixed64(page + kMetaLogOffsetOffset, m.log_offset);
  EncodeFixed64(page + kPageChecksumOffset, PageChecksum(page, kMetaStampOffset, slot));
}

bool DecodeMeta(const uint8_t* pg, uint32_t ps, PageId slot, Meta* m, std::string* why) {
  if (DecodeFixed64(pg + kMetaMagicOffset) != kMagic) {
    *why = PageMsg(slot, "bad magic");
    return false;
  }
  const uint32_t version = DecodeFixed32(pg + kMetaVersionOffset);
  if (version < kMinFormatVersion || version > kFormatVersion) {
    *why = PageMsg(slot, "unsupported format version " + std::to_string(version));
    return false;
  }
  if (DecodeFixed32(pg + kMetaPageSizeOffset) != ps) {
    *why = PageMsg(slot, "page size mismatch");
    return false;
  }
  if (pg[kPageTypeOffset] != static_cast<uint8_t>(PageType::kMeta) ||
      DecodeFixed32(pg + kPageRunLengthOffset) != 1) {
    *why = PageMsg(slot, "not a meta page");
    return false;
  }
  // Version 3 leaves the stamp region out of the checksum.
  const uint32_t summed = version >= 3 ? kMetaStampOffset : ps;
  if (DecodeFixed64(pg + kPageChecksumOffset) != PageChecksum(pg, summed, slot)) {
    *why = PageMsg(slot, "checksum mismatch");
    return false;
  }
  m->txid = DecodeFixed64(pg + kPageTxidOffset);
  m->version = version;
  m->page_size = ps;
  m->page_count = DecodeFixed64(pg + kMetaPageCountOffset);
  m->freelist_root = DecodeFixed64(pg + kMetaFreeListRootOffset);
  m->free_count = DecodeFixed64(pg + kMetaFreeCountOffset);
  m->log_epoch = DecodeFixed64(pg + kMetaLogEpochOffset);
  for (int i = 0; i < kMetaRoots; i++) {
    m->roots[i] = DecodeFixed64(pg + kMetaRootsOffset + 8 * i);
  }
  if (version >= 3) {
    m->db_id[0] = DecodeFixed64(pg + kMetaDbIdOffset);
    m->db_id[1] = DecodeFixed64(pg + kMetaDbIdOffset + 8);
    m->clean = (DecodeFixed32(pg + kMetaFlagsOffset) & kMetaClean) != 0;
    m->log_txid = DecodeFixed64(pg + kMetaLogTxidOffset);
    m->log_offset = DecodeFixed64(pg + kMetaLogOffsetOffset);
  } else {
    m->db_id[0] = m->db_id[1] = 0;
    m->clean = false;
    m->log_txid = m->txid;
    m->log_offset = 0;
  }
  return true;
}

void EncodeStamp(const Stamp& st, PageId slot, uint8_t* page) {
  uint8_t buf[kMetaStampSize] = {};
  EncodeFixed32(buf, kStampMagic);
  EncodeFixed64(buf + 8, st.epoch);
  EncodeFixed64(buf + 16, st.txid);
  EncodeFixed64(buf + 24, Checksum(buf, 24, slot));
  std::memcpy(page + kMetaStampOffset, buf, sizeof buf);
}

bool DecodeStamp(const uint8_t* page, PageId slot, Stamp* st) {
  const uint8_t* p = page + kMetaStampOffset;
  if (DecodeFixed32(p) != kStampMagic || DecodeFixed64(p + 24) != Checksum(p, 24, slot)) {
    return false;
  }
  st->epoch = DecodeFixed64(p + 8);
  st->txid = DecodeFixed64(p + 16);
  return true;
}

Status PickMeta(const uint8_t* base, uint64_t size, const std::string& path, Meta* m,
                PageId* slot) {
  bool found = false;
  std::string why[2];
  // The page size the error message uses: page 0's, else the default.
  uint32_t hint = kMinPageSize;
  if (size >= kMetaPageSizeOffset + 4 && DecodeFixed64(base + kMetaMagicOffset) == kMagic) {
    hint = DecodeFixed32(base + kMetaPageSizeOffset);
    if (!LegalPageSize(hint)) hint = kMinPageSize;
  }
  for (uint32_t ps = kMinPageSize; ps <= kMaxPageSize; ps *= 2) {
    for (PageId id = 0; id < 2; id++) {
      std::string reason;
      Meta cand;
      bool ok;
      if ((id + 1) * ps > size) {
        ok = false;
        reason = PageMsg(id, "beyond the end of the file");
      } else {
        ok = DecodeMeta(base + id * ps, ps, id, &cand, &reason);
      }
      if (ps == hint) why[id] = reason;
      if (!ok) continue;
      if (!found || cand.txid > m->txid) {
        *m = cand;
        *slot = id;
        found = true;
      }
    }
  }
  if (!found) {
    return Status::Corruption(path, "no valid meta page: " + why[0] + "; " + why[1]);
  }
  if (m->page_count < 2) {
    return Status::Corruption(path, PageMsg(*slot, "meta page count < 2"));
  }
  if (m->page_count > size / m->page_size) {
    return Status::Corruption(
        path, "file is shorter than its meta page says: " + std::to_string(size) +
                  " bytes, meta page " + std::to_string(*slot) + " says " +
                  std::to_string(m->page_count) + " pages of " + std::to_string(m->page_size));
  }
  return Status::OK();
}

}  // namespace mmdoc::storage
