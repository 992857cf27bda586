// What defines a secondary index (IndexMeta: its key pattern, unique,
// sparse, partial filter, multikey), its name, its encoding in the catalog
// and the log, and the index keys a document gives it.
//
// An index whose pattern is one ascending field, neither sparse nor
// partial, is "simple": it is named by its field, stored exactly as before
// compound indexes existed (so older files open unchanged), and planned as
// before. Every other index carries its spec after its name (flag kSpecFlag).
//
// Compound keys: the per-field AppendKey encodings (engine/keys.cc: each
// prefix-free and memcmp-ordered) concatenated, a descending field's bytes
// complemented. Complementing a prefix-free encoding keeps it prefix-free
// and reverses the order of distinct values, so memcmp of two compound keys
// orders by the first field, then the second, each in its direction.
//
// Thread safety: pure functions; IndexMeta is a value.
#ifndef MMDOC_ENGINE_INDEX_SPEC_H_
#define MMDOC_ENGINE_INDEX_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/query.h"
#include "engine/update.h"
#include "mmdoc/db.h"
#include "mmdoc/options.h"
#include "mmdoc/status.h"

namespace mmdoc {

struct IndexMeta {
  std::string field;  // the name: the field's path for a simple index
  std::vector<IndexKey> keys;
  bool unique = false;
  // Some document gave this index more than one key (a simple index), or
  // held an array at one of its fields (any other index, as MongoDB): ANDed
  // predicates on a field are then not intersected, and the index gives no
  // sort order.
  bool multikey = false;
  bool sparse = false;
  std::string partial;  // the partial filter's BSON; empty when none
  std::shared_ptr<const engine::Filter> partial_filter;  // parsed `partial`

  // One ascending field, not sparse, not partial (see the file comment).
  bool simple() const;
};

// Do not renumber: flag bits of an index in the catalog and the log.
constexpr uint8_t kUniqueFlag = 1;
constexpr uint8_t kMultikeyFlag = 2;  // catalog only
constexpr uint8_t kSpecFlag = 4;      // the spec (EncodeIndexSpec) follows

// IndexName (mmdoc/db.h) is defined in index_spec.cc.

// Checks the key pattern and options and fills *out (multikey false).
// InvalidArgument naming the problem: no keys, more than 32, a bad field
// path, a field twice, _id alone (AlreadyExists: always indexed), a
// direction other than 1 or -1, a bad partial filter.
Status MakeIndexMeta(const std::vector<IndexKey>& keys, const IndexOptions& options,
                     IndexMeta* out);
// The options the index was made with.
IndexOptions IndexMetaOptions(const IndexMeta& m);
// InvalidArgument naming the problem for a path an index cannot take.
Status CheckIndexFieldPath(std::string_view field);

// The spec of a non-simple index: u8 key count | per key (u8 1 ascending,
// 0 descending | u32 length | path) | u8 sparse | u32 length | partial
// filter BSON (length 0: none).
void EncodeIndexSpec(const IndexMeta& m, std::string* out);
// Reads what EncodeIndexSpec wrote from the front of *in into m (keys,
// sparse, partial; the name is set from the keys). False when malformed.
bool DecodeIndexSpec(std::string_view* in, IndexMeta* m);

// The keys of `doc` in index m, sorted and distinct (without the pk a
// non-unique index's entries append): none when the document is outside a
// partial index or a sparse one. *array (when not null) is set when the
// document holds an array at one of the index's fields. InvalidArgument
// ("cannot index parallel arrays [a] [b]") when two fields hold arrays
// that are not one array reached by both.
Status IndexEntryKeys(const IndexMeta& m, const uint8_t* doc, size_t len,
                      std::vector<std::string>* keys, bool* array = nullptr);

// The document's values at the index's fields, for error messages: the
// value for one field, {"a": 1, "b": null} for several. With `key`, the
// index key at fault: for one ascending field the value it encodes (the
// array element, not the array) when engine::DescribeKey can decode it.
std::string DescribeIndexKey(const IndexMeta& m, std::string_view doc, std::string_view key = {});

// Whether an update may change the document's keys in index m (a field of
// the key, or anything, for a partial index, that may move the document in
// or out of it).
bool IndexMayChange(const IndexMeta& m, const engine::Update& update);

// IndexInfo's fields but entries.
void FillIndexInfo(const IndexMeta& m, IndexInfo* info);

}  // namespace mmdoc

#endif  // MMDOC_ENGINE_INDEX_SPEC_H_
