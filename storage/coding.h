// storage/coding.h: little-endian fixed-width integer encoding.
//
// Every integer in the on-disk formats (storage/format.h) is written and read
// with these helpers, never by casting a struct over the map, so the format
// does not depend on the host's byte order or on alignment.
//
// Thread safety: pure functions; safe from any thread.
#ifndef MMDOC_STORAGE_CODING_H_
#define MMDOC_STORAGE_CODING_H_

#include <cstdint>
#include <cstring>

namespace mmdoc::storage {

// REQUIRES: dst has room for 4 bytes.
inline void EncodeFixed32(uint8_t* dst, uint32_t v) {
  dst[0] = static_cast<uint8_t>(v);
  dst[1] = static_cast<uint8_t>(v >> 8);
  dst[2] = static_cast<uint8_t>(v >> 16);
  dst[3] = static_cast<uint8_t>(v >> 24);
}

// REQUIRES: dst has room for 8 bytes.
inline void EncodeFixed64(uint8_t* dst, uint64_t v) {
  EncodeFixed32(dst, static_cast<uint32_t>(v));
  EncodeFixed32(dst + 4, static_cast<uint32_t>(v >> 32));
}

// REQUIRES: src holds at least 4 bytes.
inline uint32_t DecodeFixed32(const uint8_t* src) {
  return static_cast<uint32_t>(src[0]) | (static_cast<uint32_t>(src[1]) << 8) |
         (static_cast<uint32_t>(src[2]) << 16) |
         (static_cast<uint32_t>(src[3]) << 24);
}

// REQUIRES: src holds at least 8 bytes.
inline uint64_t DecodeFixed64(const uint8_t* src) {
  return static_cast<uint64_t>(DecodeFixed32(src)) |
         (static_cast<uint64_t>(DecodeFixed32(src + 4)) << 32);
}

// Convenience overloads for char buffers (std::string data and the like).
inline void EncodeFixed32(char* dst, uint32_t v) {
  EncodeFixed32(reinterpret_cast<uint8_t*>(dst), v);
}
inline void EncodeFixed64(char* dst, uint64_t v) {
  EncodeFixed64(reinterpret_cast<uint8_t*>(dst), v);
}
inline uint32_t DecodeFixed32(const char* src) {
  return DecodeFixed32(reinterpret_cast<const uint8_t*>(src));
}
inline uint64_t DecodeFixed64(const char* src) {
  return DecodeFixed64(reinterpret_cast<const uint8_t*>(src));
}

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_CODING_H_
