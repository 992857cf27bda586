// Partial indexes' filters (MongoDB's partialFilterExpression): which
// filters may define one, and whether a query's filter implies one, so that
// every document the query can match is in the index.
//
// Thread safety: pure functions.
#ifndef MMDOC_ENGINE_PARTIAL_FILTER_H_
#define MMDOC_ENGINE_PARTIAL_FILTER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mmdoc/status.h"

namespace mmdoc::engine {

// OK when the BSON filter is in MongoDB's allowed subset: {f: v} and
// {f: {$eq: v}} (v not a document, array or regex), {$exists: true},
// $gt $gte $lt $lte, $type, and $and of such filters. InvalidArgument
// naming the operator ("unsupported expression in partial filter: $or")
// otherwise.
Status CheckPartialFilter(const uint8_t* bson, size_t len);

// Whether every document matching the query filter `query` (BSON) matches
// the partial filter `partial` (BSON that CheckPartialFilter accepted): each
// of partial's conditions is implied by one condition of the query's
// top-level conjunction (its fields and $and) on the same path: the same
// equality or $type; a range at least as strict, of the same type bracket;
// an equality inside the range; for $exists: true, any equality to a
// non-null value, range on such a value, $exists: true or $type. Anything
// else (an $or, a condition under $not, a nested path) counts as not
// implied: the index is then not used, which is never wrong.
bool FilterImplies(std::string_view query, std::string_view partial);

}  // namespace mmdoc::engine

#endif  // MMDOC_ENGINE_PARTIAL_FILTER_H_
