// Planning a scan of one secondary index that is not simple (index_spec.h):
// compound, descending, sparse or partial. CursorImpl (cursor.cc) picks
// among the candidate plans and runs the chosen one.
//
// A compound index is scanned by its leading fields: each bounded by one or
// more points (equality, $in) multiplies the key prefixes; the first field
// bounded by a range (or with no bound, or once the prefixes would pass
// kMaxIntervals) ends the scan's bounds, and the rest of the filter is
// applied to the documents. Intervals are in key space (index_spec.h's
// compound encoding) and are read with prefix semantics: a bound that is a
// prefix P of keys includes (inclusive) or excludes (exclusive) every key
// starting with P.
//
// Thread safety: pure functions.
#ifndef MMDOC_ENGINE_INDEX_PLAN_H_
#define MMDOC_ENGINE_INDEX_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "engine/index_spec.h"
#include "engine/query.h"
#include "mmdoc/options.h"

namespace mmdoc {

struct IndexScanPlan {
  std::vector<engine::KeyInterval> intervals;  // sorted, disjoint
  size_t bounded = 0;                          // leading fields the intervals bound
  size_t pinned = 0;                           // leading fields bounded to exactly one value
  bool points = false;                         // every bounded field is bounded by points only
  // Per field of the index, its value intervals (the first `bounded`;
  // the rest nullopt), for DescribeBounds.
  std::vector<std::optional<std::vector<engine::KeyInterval>>> field_bounds;
};

// The scan of index m that finds every document `filter` can match, or
// nullopt when there is none: no bound on the first field; a partial index
// whose filter the query does not imply; a sparse index when a document
// with none of its fields could match (every bound the filter gives
// includes null).
std::optional<IndexScanPlan> PlanIndexScan(const IndexMeta& m, const engine::Filter& filter);

// Whether walking all of index m meets every document `filter` can match:
// not sparse, and a partial filter the query implies.
bool IndexHoldsAllMatches(const IndexMeta& m, const engine::Filter& filter);

// Whether walking index m in key order (*direction 1) or in reverse (-1)
// gives `sort`'s order, when its first `pinned` fields are fixed to one
// value each: not multikey, and the sort's keys, less those on pinned
// fields, are the next fields of the index in order, each with the index's
// direction times *direction.
bool IndexGivesSort(const IndexMeta& m, size_t pinned, const std::vector<SortSpec>& sort,
                    int* direction);

// ExplainInfo::bounds: per field, its value intervals as MongoDB's
// indexBounds writes them ("[MinKey, MaxKey]" for a field without).
std::string DescribeBounds(
    const std::vector<IndexKey>& keys,
    const std::vector<std::optional<std::vector<engine::KeyInterval>>>& field_bounds);

}  // namespace mmdoc

#endif  // MMDOC_ENGINE_INDEX_PLAN_H_
