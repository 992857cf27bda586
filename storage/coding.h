// storage/coding.h: the fixed-width integer encodings, one codec for every
// layer (storage, index, engine, tools, bench).
//
// Little-endian: EncodeFixed16/32/64, DecodeFixed16/32/64, PutFixed32/64
// (append to a string) and GetFixed32/64 (consume from a string_view). Every
// integer in the on-disk formats is little-endian: the pages
// (storage/format.h), B+tree nodes (index/btree_page.h), catalog entries
// (index/catalog.h), the log, and the engine's log payload and collection
// metadata (engine/db_impl.h), as is BSON's int32 document length.
//
// Big-endian: EncodeBigEndian16/32/64, DecodeBigEndian64, PutBigEndian16/32/64.
// Only for bytes that must sort: the order-preserving key encoding
// (engine/keys.cc) and the packed GUID key (engine/key_codec.cc), whose keys
// the B+tree orders with memcmp. memcmp order of big-endian bytes is the
// numeric order of unsigned integers; of little-endian bytes it is not.
//
// Each helper builds the value byte by byte with shifts, so a format never
// depends on the host's byte order or alignment and no struct is ever cast
// over the map; GCC and Clang at -O2 turn each helper into one load or store
// (plus a bswap for big-endian on x86).
//
// Thread safety: pure functions; safe from any thread.
#ifndef MMDOC_STORAGE_CODING_H_
#define MMDOC_STORAGE_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace mmdoc::storage {

// ---------------------------------------------------------- little-endian

// REQUIRES: dst has room for 2 bytes.
inline void EncodeFixed16(uint8_t* dst, uint16_t v) {
  dst[0] = static_cast<uint8_t>(v);
  dst[1] = static_cast<uint8_t>(v >> 8);
}

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

// REQUIRES: src holds at least 2 bytes.
inline uint16_t DecodeFixed16(const uint8_t* src) {
  return static_cast<uint16_t>(static_cast<uint32_t>(src[0]) |
                               (static_cast<uint32_t>(src[1]) << 8));
}

// REQUIRES: src holds at least 4 bytes.
inline uint32_t DecodeFixed32(const uint8_t* src) {
  return static_cast<uint32_t>(src[0]) | (static_cast<uint32_t>(src[1]) << 8) |
         (static_cast<uint32_t>(src[2]) << 16) | (static_cast<uint32_t>(src[3]) << 24);
}

// REQUIRES: src holds at least 8 bytes.
inline uint64_t DecodeFixed64(const uint8_t* src) {
  return static_cast<uint64_t>(DecodeFixed32(src)) |
         (static_cast<uint64_t>(DecodeFixed32(src + 4)) << 32);
}

// Convenience overloads for char buffers (std::string data and the like).
inline void EncodeFixed16(char* dst, uint16_t v) {
  EncodeFixed16(reinterpret_cast<uint8_t*>(dst), v);
}
inline void EncodeFixed32(char* dst, uint32_t v) {
  EncodeFixed32(reinterpret_cast<uint8_t*>(dst), v);
}
inline void EncodeFixed64(char* dst, uint64_t v) {
  EncodeFixed64(reinterpret_cast<uint8_t*>(dst), v);
}
inline uint16_t DecodeFixed16(const char* src) {
  return DecodeFixed16(reinterpret_cast<const uint8_t*>(src));
}
inline uint32_t DecodeFixed32(const char* src) {
  return DecodeFixed32(reinterpret_cast<const uint8_t*>(src));
}
inline uint64_t DecodeFixed64(const char* src) {
  return DecodeFixed64(reinterpret_cast<const uint8_t*>(src));
}

// Appends v, little-endian, to *dst.
inline void PutFixed32(std::string* dst, uint32_t v) {
  char buf[4];
  EncodeFixed32(buf, v);
  dst->append(buf, sizeof buf);
}
inline void PutFixed64(std::string* dst, uint64_t v) {
  char buf[8];
  EncodeFixed64(buf, v);
  dst->append(buf, sizeof buf);
}

// Reads a little-endian value from the front of *in and removes its bytes.
// False, with *in and *v unchanged, when *in is too short.
inline bool GetFixed32(std::string_view* in, uint32_t* v) {
  if (in->size() < 4) return false;
  *v = DecodeFixed32(in->data());
  in->remove_prefix(4);
  return true;
}
inline bool GetFixed64(std::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  *v = DecodeFixed64(in->data());
  in->remove_prefix(8);
  return true;
}

// ---------------------------------------------------------- big-endian
// For sortable keys only (see the top of this file): the most significant
// byte first, so memcmp orders the encodings as the numbers.

// REQUIRES: dst has room for 2 bytes.
inline void EncodeBigEndian16(char* dst, uint16_t v) {
  dst[0] = static_cast<char>(v >> 8);
  dst[1] = static_cast<char>(v);
}

// REQUIRES: dst has room for 4 bytes.
inline void EncodeBigEndian32(char* dst, uint32_t v) {
  dst[0] = static_cast<char>(v >> 24);
  dst[1] = static_cast<char>(v >> 16);
  dst[2] = static_cast<char>(v >> 8);
  dst[3] = static_cast<char>(v);
}

// REQUIRES: dst has room for 8 bytes.
inline void EncodeBigEndian64(char* dst, uint64_t v) {
  EncodeBigEndian32(dst, static_cast<uint32_t>(v >> 32));
  EncodeBigEndian32(dst + 4, static_cast<uint32_t>(v));
}

// REQUIRES: src holds at least 8 bytes.
inline uint64_t DecodeBigEndian64(const char* src) {
  const auto* p = reinterpret_cast<const uint8_t*>(src);
  return (static_cast<uint64_t>(p[0]) << 56) | (static_cast<uint64_t>(p[1]) << 48) |
         (static_cast<uint64_t>(p[2]) << 40) | (static_cast<uint64_t>(p[3]) << 32) |
         (static_cast<uint64_t>(p[4]) << 24) | (static_cast<uint64_t>(p[5]) << 16) |
         (static_cast<uint64_t>(p[6]) << 8) | static_cast<uint64_t>(p[7]);
}

// Appends v, big-endian, to *dst.
inline void PutBigEndian16(std::string* dst, uint16_t v) {
  char buf[2];
  EncodeBigEndian16(buf, v);
  dst->append(buf, sizeof buf);
}
inline void PutBigEndian32(std::string* dst, uint32_t v) {
  char buf[4];
  EncodeBigEndian32(buf, v);
  dst->append(buf, sizeof buf);
}
inline void PutBigEndian64(std::string* dst, uint64_t v) {
  char buf[8];
  EncodeBigEndian64(buf, v);
  dst->append(buf, sizeof buf);
}

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_CODING_H_
