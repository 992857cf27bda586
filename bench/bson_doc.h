// The workload's documents as BSON bytes, built and read with libbson.
//
// Every engine stores the bytes MakeDocument returns and reads fields back
// with FieldOf, so each does the same parsing work per document.
#ifndef MMDOC_BENCH_BSON_DOC_H_
#define MMDOC_BENCH_BSON_DOC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mmdoc/status.h"

namespace mmdoc::bench {

// BSON bytes of {_id: id, key: key, value: value} (UTF-8 string fields, in
// that order).
std::string MakeDocument(std::string_view id, std::string_view key, std::string_view value);

// BSON bytes of the compound phase's {_id: id, g: g, n: n, payload:
// payload} (g and n int32, the strings UTF-8), in that order.
std::string MakeGroupDocument(std::string_view id, int32_t g, int32_t n, std::string_view payload);

// The string field `name` of the BSON document at data; false when the
// bytes are not a document, the field is absent or not a string. *out
// points into data.
bool FieldOf(const void* data, size_t size, const char* name, std::string_view* out);

// Whether a document's string field `name` equals `want`, deciding most
// documents without parsing them: a match must contain want's BSON string
// encoding (int32 length, bytes, NUL), so one byte search rejects a
// document without it, and only the rest are parsed with FieldOf. mmdoc's
// query engine does the same inside Find; every peer's scan uses this, so
// scans compare how fast each store hands over its documents, not matching
// code. *bad is set for a candidate that is not a BSON document.
class FieldEquals {
 public:
  FieldEquals(const char* name, std::string_view want);
  bool operator()(const void* data, size_t size, bool* bad) const;

 private:
  const char* name_;
  std::string want_;
  std::string needle_;
};

// The (key, _id) pairs of a scan of the documents, sorted by key for a
// bulk build of the key index (LMDB's MDB_APPEND, RocksDB's SstFileWriter).
// The bytes live in one arena: no allocation per pair.
class KeyIdPairs {
 public:
  // Adds the `key` field of BSON document `doc` with its _id; false when
  // doc is not a document or has no string `key`.
  bool Add(const void* doc, size_t size, std::string_view id);
  // Sorts by key, bytewise; AlreadyExists naming a key two documents share.
  Status SortUnique();
  size_t size() const { return entries_.size(); }
  std::string_view key(size_t i) const;
  std::string_view id(size_t i) const;

 private:
  struct Entry {
    size_t key, key_len, id, id_len;  // offsets into arena_
  };
  std::string arena_;
  std::vector<Entry> entries_;
};

// The document with its `value` field set to value (other fields kept, in
// order). False when doc is not a BSON document.
bool WithValue(std::string_view doc, std::string_view value, std::string* out);

// The document with the string tag appended to its `tags` array, the
// array created (as the last field) when the document has none: what
// MongoDB's {$push: {tags: tag}} does, for the peers' read-modify-write.
// False when doc is not a BSON document or its `tags` is not an array.
bool WithTagPushed(std::string_view doc, std::string_view tag, std::string* out);

// The strings of the document's `tags` array, in order (empty when the
// document has none); false when doc is not a BSON document, or `tags` is
// not an array of strings.
bool TagsOf(std::string_view doc, std::vector<std::string>* tags);

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_BSON_DOC_H_
