// storage/checksum.h: the XXH3-64 checksums of pages and log records.
//
// Page checksum (format.h): XXH3-64 of bytes [8, run_length * page_size) of
// a run, seeded with the page number of its first page, so a page written to
// the wrong place fails too. Log record checksum: XXH3-64 of bytes
// [8, 32 + payload length), seeded with the log epoch.
//
// Thread safety: pure functions; safe from any thread.
#ifndef MMDOC_STORAGE_CHECKSUM_H_
#define MMDOC_STORAGE_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace mmdoc::storage {

// XXH3-64 of data[0, n) with the given seed.
uint64_t Checksum(const void* data, size_t n, uint64_t seed);

// The checksum a page run starting at `page` (page number `id`, `run_bytes`
// = run_length * page_size bytes long) must carry at offset 0.
// REQUIRES: run_bytes >= 8.
inline uint64_t PageChecksum(const uint8_t* page, size_t run_bytes, uint64_t id) {
  return Checksum(page + 8, run_bytes - 8, id);
}

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_CHECKSUM_H_
