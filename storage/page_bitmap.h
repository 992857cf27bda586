// storage::VerifiedBitmap: which pages this process has verified (rule 7 of
// storage/pager.h: a page's checksum is checked the first time it is read).
//
// Thread safety: Reserve is called by the writer only; Test, Set and Clear
// from any thread without a lock. Two levels, so the bitmap can grow while
// readers test bits: a chunk is published with a release store before any
// snapshot that covers its pages.
#ifndef MMDOC_STORAGE_PAGE_BITMAP_H_
#define MMDOC_STORAGE_PAGE_BITMAP_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

namespace mmdoc::storage {

class VerifiedBitmap {
 public:
  static constexpr int kChunkShift = 20;  // 2^20 pages per chunk (128 KiB)
  static constexpr uint64_t kChunkWords = (1ull << kChunkShift) / 64;
  static constexpr size_t kChunks = 4096;  // covers 2^32 pages

  VerifiedBitmap() : top_(new std::atomic<std::atomic<uint64_t>*>[kChunks]) {
    for (size_t i = 0; i < kChunks; i++) top_[i].store(nullptr);
  }
  ~VerifiedBitmap() {
    for (size_t i = 0; i < kChunks; i++) delete[] top_[i].load();
  }
  VerifiedBitmap(const VerifiedBitmap&) = delete;
  VerifiedBitmap& operator=(const VerifiedBitmap&) = delete;

  // Makes bits for pages [0, pages) available. Writer only.
  void Reserve(uint64_t pages) {
    uint64_t chunks =
        std::min<uint64_t>(kChunks, (pages + (1ull << kChunkShift) - 1) >> kChunkShift);
    for (uint64_t c = 0; c < chunks; c++) {
      if (top_[c].load(std::memory_order_relaxed) != nullptr) continue;
      auto* chunk = new std::atomic<uint64_t>[kChunkWords];
      for (uint64_t w = 0; w < kChunkWords; w++) chunk[w].store(0);
      top_[c].store(chunk, std::memory_order_release);
    }
  }
  bool Test(uint64_t id) const {
    std::atomic<uint64_t>* w = Word(id);
    return w != nullptr && (w->load(std::memory_order_relaxed) & (1ull << (id & 63))) != 0;
  }
  void Set(uint64_t id) {
    if (std::atomic<uint64_t>* w = Word(id)) {
      w->fetch_or(1ull << (id & 63), std::memory_order_relaxed);
    }
  }
  void Clear(uint64_t id) {
    if (std::atomic<uint64_t>* w = Word(id)) {
      w->fetch_and(~(1ull << (id & 63)), std::memory_order_relaxed);
    }
  }

 private:
  std::atomic<uint64_t>* Word(uint64_t id) const {
    uint64_t c = id >> kChunkShift;
    if (c >= kChunks) return nullptr;
    std::atomic<uint64_t>* chunk = top_[c].load(std::memory_order_acquire);
    if (chunk == nullptr) return nullptr;
    return &chunk[(id & ((1ull << kChunkShift) - 1)) >> 6];
  }
  std::unique_ptr<std::atomic<std::atomic<uint64_t>*>[]> top_;
};

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_PAGE_BITMAP_H_
