// index::KeyHash: the hash of a key that a transaction's overlay, the write
// buffer's tables and the key filters all use, so that an operation hashes
// its key once and hands the hash down through the layers it looks in.
//
// In memory only: nothing stored on disk depends on it.
#ifndef MMDOC_INDEX_KEY_HASH_H_
#define MMDOC_INDEX_KEY_HASH_H_

#include <cstdint>
#include <string_view>

#include "storage/checksum.h"

namespace mmdoc::index {

inline uint64_t KeyHash(std::string_view key) {
  return storage::Checksum(key.data(), key.size(), 0);
}

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_KEY_HASH_H_
