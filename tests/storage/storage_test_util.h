// Helpers shared by the storage tests (tests/storage/*_test.cc): open a
// pager with small test sizes, write recognizable pages, read them back.
#ifndef MMDOC_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
#define MMDOC_TESTS_STORAGE_STORAGE_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>

#include "storage/coding.h"
#include "storage/pager.h"

namespace mmdoc::storage::testutil {

inline PagerOptions SmallOptions() {
  PagerOptions o;
  o.log_size = 256 << 10;
  o.initial_map_size = 4 << 20;
  return o;
}

inline std::unique_ptr<Pager> OpenOrDie(
    const std::string& path, const PagerOptions& o = SmallOptions()) {
  auto r = Pager::Open(path, o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  std::unique_ptr<Pager> p = std::move(r.value());
  Status s = p->Recover([](uint64_t, std::string_view) {
    return Status::Corruption("unexpected log record");
  });
  INFO(s.ToString());
  REQUIRE(s.ok());
  return p;
}

// Fills the body of a page run with a pattern derived from `tag`.
inline void FillBody(uint8_t* page, uint64_t bytes, uint64_t tag) {
  for (uint64_t i = kPageHeaderSize; i + 8 <= bytes; i += 8) {
    EncodeFixed64(page + i, tag * 1000003 + i);
  }
}
inline bool BodyMatches(const uint8_t* page, uint64_t bytes, uint64_t tag) {
  for (uint64_t i = kPageHeaderSize; i + 8 <= bytes; i += 8) {
    if (DecodeFixed64(page + i) != tag * 1000003 + i) return false;
  }
  return true;
}

// Begins a write txn, allocates one page tagged `tag`, stores it in root
// slot `slot`, commits. Returns the page id.
inline PageId WriteTagged(Pager* p, int slot, uint64_t tag,
                          Durability d = Durability::kNone,
                          PageType type = PageType::kLeaf, uint32_t n = 1) {
  auto w = p->BeginWrite();
  INFO(w.status().ToString());
  REQUIRE(w.ok());
  PageId id;
  uint8_t* pg;
  REQUIRE(w.value()->Allocate(type, n, &id, &pg).ok());
  FillBody(pg, uint64_t{n} * w.value()->page_size(), tag);
  PageId old = w.value()->root(slot);
  if (old != 0) REQUIRE(w.value()->Free(old).ok());
  w.value()->set_root(slot, id);
  std::string payload = "tag " + std::to_string(tag);
  Status s = w.value()->Commit(payload, d);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return id;
}

}  // namespace mmdoc::storage::testutil

#endif  // MMDOC_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
