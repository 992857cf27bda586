#include "index/key_filter.h"

namespace mmdoc::index {

namespace {

constexpr int kProbes = 6;  // bits per key, all in one 512-bit block

// Six 9-bit positions in the block, from bits of h the block index does
// not use (remixed, so that they are not the block index's bits).
uint64_t Positions(uint64_t h) { return (h ^ (h >> 31)) * 0x9e3779b97f4a7c15ull; }

}  // namespace

KeyFilter::KeyFilter(uint64_t capacity, uint64_t bits_per_key)
    : capacity_(capacity), blocks_(capacity * bits_per_key / 512 + 1), table_(new Block[blocks_]) {
  for (uint64_t b = 0; b < blocks_; b++)
    for (auto& w : table_[b].words) w.store(0, std::memory_order_relaxed);
}

KeyFilter::~KeyFilter() = default;

void KeyFilter::AddHash(uint64_t h) {
  Block& b = table_[BlockOf(h)];
  uint64_t p = Positions(h);
  for (int i = 0; i < kProbes; i++, p >>= 9) {
    const uint64_t bit = p & 511;
    b.words[bit >> 6].fetch_or(uint64_t{1} << (bit & 63), std::memory_order_relaxed);
  }
  added_.fetch_add(1, std::memory_order_relaxed);
}

bool KeyFilter::MayContainHash(uint64_t h) const {
  const Block& b = table_[BlockOf(h)];
  uint64_t p = Positions(h);
  for (int i = 0; i < kProbes; i++, p >>= 9) {
    const uint64_t bit = p & 511;
    if ((b.words[bit >> 6].load(std::memory_order_relaxed) & (uint64_t{1} << (bit & 63))) == 0)
      return false;
  }
  return true;
}

}  // namespace mmdoc::index
