#include "storage/checksum.h"

#include <xxhash.h>

namespace mmdoc::storage {

uint64_t Checksum(const void* data, size_t n, uint64_t seed) {
  return XXH3_64bits_withSeed(data, n, seed);
}

}  // namespace mmdoc::storage
