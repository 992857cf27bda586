// Helpers shared by the storage tests (tests/storage/*_test.cc): open a
// pager with small test sizes, write recognizable pages, read them back.
#ifndef MMDOC_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
#define MMDOC_TESTS_STORAGE_STORAGE_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "storage/coding.h"
#include "storage/file_system.h"
#include "storage/pager.h"

namespace mmdoc::storage::testutil {

inline PagerOptions SmallOptions() {
  PagerOptions o;
  o.log_size = 256 << 10;
  o.initial_map_size = 4 << 20;
  return o;
}

inline std::unique_ptr<Pager> OpenOrDie(const std::string& path,
                                        const PagerOptions& o = SmallOptions()) {
  auto r = Pager::Open(path, o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  std::unique_ptr<Pager> p = std::move(r.value());
  Status s = p->Recover(
      [](uint64_t, std::string_view) { return Status::Corruption("unexpected log record"); });
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

inline std::string Payload(int slot, uint64_t tag, PageType type, uint32_t n) {
  return std::to_string(slot) + " " + std::to_string(tag) + " " +
         std::to_string(static_cast<int>(type)) + " " + std::to_string(n);
}

// Begins a write txn, allocates one page tagged `tag`, stores it in root
// slot `slot`, commits. Returns the page id.
inline PageId WriteTagged(Pager* p, int slot, uint64_t tag, Durability d = Durability::kNone,
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
  Status s = w.value()->Commit(Payload(slot, tag, type, n), d);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return id;
}

// Redoes a WriteTagged record during Recover (no Catch assertions: it may
// run on any thread).
inline Status ApplyTagged(Pager* p, std::string_view payload,
                          std::vector<uint64_t>* tags = nullptr) {
  int slot, type;
  unsigned long long tag;
  unsigned n;
  std::string text(payload);
  if (std::sscanf(text.c_str(), "%d %llu %d %u", &slot, &tag, &type, &n) != 4) {
    return Status::Corruption("bad test payload", text);
  }
  auto w = p->BeginWrite();
  if (!w.ok()) return w.status();
  PageId id;
  uint8_t* pg;
  MMDOC_RETURN_IF_ERROR(w.value()->Allocate(static_cast<PageType>(type), n, &id, &pg));
  FillBody(pg, uint64_t{n} * w.value()->page_size(), tag);
  PageId old = w.value()->root(slot);
  if (old != 0) MMDOC_RETURN_IF_ERROR(w.value()->Free(old));
  w.value()->set_root(slot, id);
  if (tags) tags->push_back(tag);
  return p->CommitReplayed(w.value().get());
}

// Opens and recovers with ApplyTagged; *tags receives the replayed tags.
inline std::unique_ptr<Pager> OpenAndReplay(const std::string& path, const PagerOptions& o,
                                            std::vector<uint64_t>* tags) {
  auto r = Pager::Open(path, o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  std::unique_ptr<Pager> p = std::move(r.value());
  Status s = p->Recover(
      [&](uint64_t, std::string_view payload) { return ApplyTagged(p.get(), payload, tags); });
  INFO(s.ToString());
  REQUIRE(s.ok());
  return p;
}

// True when root `slot` of the current snapshot holds a page tagged `tag`.
inline bool RootHasTag(Pager* p, int slot, uint64_t tag) {
  auto r = p->BeginRead();
  if (!r.ok()) return false;
  const uint8_t* pg;
  if (!r.value()->Get(r.value()->root(slot), &pg).ok()) return false;
  uint32_t n = DecodeFixed32(pg + kPageRunLengthOffset);
  return BodyMatches(pg, uint64_t{n} * r.value()->page_size(), tag);
}

// Reads or overwrites bytes of a file through the default file system.
inline std::string ReadBytes(const std::string& path, uint64_t off, size_t n) {
  auto f = FileSystem::Default()->Open(path, OpenMode::kExisting);
  REQUIRE(f.ok());
  std::string buf(n, '\0');
  REQUIRE(f.value()->ReadAt(off, buf.data(), n).ok());
  return buf;
}
inline void WriteBytes(const std::string& path, uint64_t off, const std::string& bytes) {
  auto f = FileSystem::Default()->Open(path, OpenMode::kExisting);
  REQUIRE(f.ok());
  REQUIRE(f.value()->WriteAt(off, bytes.data(), bytes.size()).ok());
}
inline void FlipByte(const std::string& path, uint64_t off) {
  std::string b = ReadBytes(path, off, 1);
  b[0] = static_cast<char>(b[0] ^ 0x5a);
  WriteBytes(path, off, b);
}

}  // namespace mmdoc::storage::testutil

#endif  // MMDOC_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
