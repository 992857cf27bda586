#include "storage/free_list.h"

#include <cstring>
#include <set>
#include <string>

#include "storage/checksum.h"
#include "storage/coding.h"

namespace mmdoc::storage {

namespace {

std::string PageMsg(PageId id, const std::string& what) {
  return "page " + std::to_string(id) + ": " + what;
}

}  // namespace

// ------------------------------------------------------------- FreeSet --

bool FreeSet::insert(PageId id) {
  if (id / 64 >= words_.size()) {
    words_.resize(std::max<size_t>(id / 64 + 1, words_.size() * 5 / 4));
  }
  uint64_t& w = words_[id / 64];
  const uint64_t bit = uint64_t{1} << (id % 64);
  if (w & bit) return false;
  w |= bit;
  count_++;
  if (id / 64 < first_word_) first_word_ = id / 64;
  return true;
}

PageId FreeSet::Next(PageId from) const {
  size_t i = std::max<size_t>(from / 64, first_word_);
  if (i >= words_.size()) return 0;
  uint64_t w = words_[i];
  if (i == from / 64) w &= ~uint64_t{0} << (from % 64);
  while (w == 0) {
    if (++i >= words_.size()) return 0;
    w = words_[i];
  }
  return i * 64 + static_cast<PageId>(__builtin_ctzll(w));
}

PageId FreeSet::TakeRun(uint32_t n) {
  PageId start = 0, prev = 0;
  uint32_t len = 0;
  for (PageId id = Next(0); id != 0; id = Next(id + 1)) {
    if (len > 0 && id == prev + 1) {
      len++;
    } else {
      start = id;
      len = 1;
    }
    prev = id;
    if (len == n) {
      for (PageId p = start; p < start + n; p++) Erase(p);
      return start;
    }
  }
  return 0;
}

std::vector<PageId> FreeSet::ToVector() const {
  std::vector<PageId> v;
  v.reserve(count_);
  ForEach([&](PageId id) { v.push_back(id); });
  return v;
}

void FreeSet::Erase(PageId id) {
  words_[id / 64] &= ~(uint64_t{1} << (id % 64));
  count_--;
  while (first_word_ < words_.size() && words_[first_word_] == 0) first_word_++;
}

// -------------------------------------------------------- PendingPages --

void PendingPages::Add(uint64_t txid, const std::vector<PageId>& pages, bool for_checkpoint) {
  if (pages.empty()) return;
  auto& v = for_checkpoint ? checkpoint_[txid] : readers_[txid];
  v.insert(v.end(), pages.begin(), pages.end());
  (for_checkpoint ? checkpoint_count_ : readers_count_) += pages.size();
}

void PendingPages::CheckpointDone(uint64_t txid) {
  while (!checkpoint_.empty() && checkpoint_.begin()->first <= txid) {
    const auto& src = checkpoint_.begin()->second;
    auto& v = readers_[checkpoint_.begin()->first];
    v.insert(v.end(), src.begin(), src.end());
    readers_count_ += src.size();
    checkpoint_count_ -= src.size();
    checkpoint_.erase(checkpoint_.begin());
  }
}

void PendingPages::Release(uint64_t oldest_reader, FreeSet* free) {
  while (!readers_.empty() && readers_.begin()->first <= oldest_reader) {
    for (PageId id : readers_.begin()->second) free->insert(id);
    readers_count_ -= readers_.begin()->second.size();
    readers_.erase(readers_.begin());
  }
}

// ------------------------------------------------ the persisted list --

void EncodeFreeListPage(uint8_t* pg, uint32_t ps, PageId id, uint64_t txid, PageId next,
                        const PageId* entries, uint64_t n) {
  std::memset(pg, 0, ps);
  EncodeFixed64(pg + kPageTxidOffset, txid);
  pg[kPageTypeOffset] = static_cast<uint8_t>(PageType::kFreeList);
  EncodeFixed32(pg + kPageRunLengthOffset, 1);
  EncodeFixed64(pg + kFreeListNextOffset, next);
  EncodeFixed32(pg + kFreeListCountOffset, static_cast<uint32_t>(n));
  for (uint64_t j = 0; j < n; j++) {
    EncodeFixed64(pg + kFreeListEntriesOffset + 8 * j, entries[j]);
  }
  EncodeFixed64(pg + kPageChecksumOffset, PageChecksum(pg, ps, id));
}

Status LoadFreeList(PageId root, uint32_t page_size, uint64_t page_count,
                    const std::function<Status(PageId, const uint8_t**)>& get, FreeSet* free,
                    std::vector<PageId>* pages) {
  std::set<PageId> seen;
  for (PageId id = root; id != 0;) {
    if (id < 2 || id >= page_count) {
      return Status::Corruption(PageMsg(
          id, "free-list page out of range (page count " + std::to_string(page_count) + ")"));
    }
    if (!seen.insert(id).second) {
      return Status::Corruption(PageMsg(id, "free-list chain loops"));
    }
    const uint8_t* pg;
    MMDOC_RETURN_IF_ERROR(get(id, &pg));
    if (pg[kPageTypeOffset] != static_cast<uint8_t>(PageType::kFreeList)) {
      return Status::Corruption(
          PageMsg(id, "not a free-list page (type " + std::to_string(pg[kPageTypeOffset]) + ")"));
    }
    const uint32_t n = DecodeFixed32(pg + kFreeListCountOffset);
    if (n > FreeListCapacity(page_size)) {
      return Status::Corruption(PageMsg(id, "bad free-list count"));
    }
    for (uint32_t i = 0; i < n; i++) {
      PageId e = DecodeFixed64(pg + kFreeListEntriesOffset + 8 * i);
      if (e < 2 || e >= page_count) {
        return Status::Corruption(
            PageMsg(id, "free-list entry " + std::to_string(e) + " out of range"));
      }
      if (!free->insert(e)) {
        return Status::Corruption(
            PageMsg(id, "free list holds page " + std::to_string(e) + " twice"));
      }
    }
    pages->push_back(id);
    id = DecodeFixed64(pg + kFreeListNextOffset);
  }
  for (PageId id : *pages) {
    if (free->count(id)) {
      return Status::Corruption(PageMsg(id, "free-list page is listed as free"));
    }
  }
  return Status::OK();
}

}  // namespace mmdoc::storage
