// The query layer: BSON values compared and encoded in MongoDB's order,
// dotted-path lookup, filters, projections and sort (updates: update.h).
// Pure functions over BSON bytes; knows nothing of pages, trees or
// transactions.
//
// Type order (MongoDB): MinKey < Undefined,Null < Numbers (int32, int64,
// double, decimal128 compared numerically) < Symbol,String < Object < Array
// < Binary < ObjectId < Bool < Date < Timestamp < Regex < MaxKey.
// Strings compare bytewise (simple binary collation).
//
// Thread safety: parsed Filter/Update/Projection objects are immutable and
// may be shared between threads.
#ifndef MMDOC_ENGINE_QUERY_H_
#define MMDOC_ENGINE_QUERY_H_

#include <bson/bson.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mmdoc/document.h"
#include "mmdoc/status.h"

namespace mmdoc::engine {

// <0, 0, >0 in MongoDB's order (numbers numerically across types; NaN is
// below every other number and equal to itself).
int CompareValues(const bson_value_t* a, const bson_value_t* b);

// Appends the order-preserving key encoding of `v` to *out: for any values
// a, b: memcmp order of their encodings == CompareValues(a, b) order, and
// equal values (1, 1.0, NumberLong(1)) encode to identical bytes while
// distinct values never do. Works for every BSON type including documents
// and arrays (element by element). Never fails.
void AppendKey(const bson_value_t* v, std::string* out);
// The key of a null value (missing fields are indexed as null).
void AppendNullKey(std::string* out);
// A key or interval bound (AppendKey's bytes, or a prefix of them) as
// Extended JSON for Explain: the value for the common types; a bound that
// is only a type's first byte as "<first string>" and the like; "<key>"
// for types it does not decode. *value (when given) says whether the text
// is the value itself rather than such a placeholder.
std::string DescribeKey(std::string_view key, bool* value = nullptr);

// Finds the value at a dotted path ("a.b.c"; a numeric part indexes into an
// array, "a.0"). Returns false when absent. *out points into `doc`.
// Does not descend into arrays for non-numeric parts (see IndexKeys).
bool LookupPath(const uint8_t* doc, size_t len, std::string_view path, bson_value_t* out);

// The value a sort on `path` orders the document by (a view into doc),
// MongoDB's rule: the values the path reaches, as for index keys (arrays
// met along the path fan out to their document elements; a missing field,
// or an array with no document element, is null), with an array at the
// end giving its elements and [] giving undefined (below null); of these
// the smallest for an ascending sort (direction > 0), the largest for a
// descending one. A numeric part picks that position of an array and
// nothing else (MongoDB's sort keys; filters also try a field of that name
// in each element).
void SortKey(const uint8_t* doc, size_t len, std::string_view path, int direction,
             bson_value_t* out);

// The index keys of a document for an index on `path`, MongoDB style:
// missing -> one null key; a scalar or document -> its key; an array -> one
// key per distinct element (an empty array -> one null key); arrays met
// along the path fan out too ({"a":[{"b":1},{"b":2}]} on "a.b" -> 1, 2).
// Keys are AppendKey encodings, sorted and distinct. They replace what
// *keys held, reusing its strings' memory.
void IndexKeys(const uint8_t* doc, size_t len, std::string_view path,
               std::vector<std::string>* keys);

// An interval of encoded keys for an index scan. An empty lo means from the
// start, an empty hi means to the end.
struct KeyInterval {
  std::string lo;
  bool lo_inclusive = true;
  std::string hi;
  bool hi_inclusive = true;
};

// Tests only: makes the needle search use its SSE2 path even where the CPU
// has AVX2, so both paths can be checked on one machine.
void DisableAvx2SearchForTesting(bool disable);

// A parsed filter in MongoDB's syntax: {field: value} (equality),
// {field: /re/} (a pattern), {field: {$eq,$gt,$gte,$lt,$lte,$ne,$in,$nin,
// $exists,$regex/$options,$elemMatch,$size,$all,$type,$not,$mod: ...}},
// implicit AND of fields, {$and/$or/$nor: [...]}, dotted paths. Array
// semantics as MongoDB: {a: 5} matches a == 5 and a == [.., 5, ..]; filter.cc
// says operator by operator. A regex is compiled once, here (regex.h).
class Filter {
 public:
  // InvalidArgument naming the operator or field for MongoDB operators not
  // implemented here ("unsupported operator $where"; $expr, $text,
  // $jsonSchema, $bits*, $geo*, $near, $comment, ...), unknown operators
  // ("unknown operator $foo"), at any depth, and any operator inside a
  // document operand; a bad regex or option letter (naming the pattern); a
  // regex under $ne or a range operator (MongoDB refuses them too); a bad
  // operand ($size: -1, $mod: [0, 1], $type: "nope", $elemMatch: 1, ...);
  // an undefined operand; $in/$and/$or without an array, etc. None of these
  // is ever matched by comparing bytes.
  static Result<Filter> Parse(const bson_t* filter);
  static Result<Filter> Parse(const Document& filter);
  Filter();  // matches everything
  ~Filter();
  Filter(Filter&&) noexcept;
  Filter& operator=(Filter&&) noexcept;

  // Whether the document matches. Reads the bytes in place; no allocation
  // in the common case.
  bool Matches(const uint8_t* doc, size_t len) const;
  // True when the filter is {} (matches all).
  bool MatchesAll() const;
  // The BSON the filter was parsed from (empty for Filter()), which
  // partial indexes compare with their own filter (partial_filter.h).
  std::string_view source() const { return source_; }
  // Whether the filter has bytes every match contains (see needle_), and
  // whether they occur in [bytes, bytes + len). When they do not, no
  // document lying wholly inside those bytes matches: a scan rejects a
  // whole B+tree leaf with one search.
  bool HasNeedle() const { return !needle_.empty(); }
  bool MayMatchIn(const uint8_t* bytes, size_t len) const;

  // Key intervals (sorted, non-overlapping) that contain the index key of
  // every matching document's value at `path` (null for missing), or
  // nullopt when the filter does not constrain `path` in a way an index can
  // use (no predicate on it; $ne/$nin/$exists:false only; inside an $or that
  // has branches on other paths). Candidates found this way are always
  // re-checked with Matches, so the intervals may be wider than needed.
  // Assumes the index may be multikey (a document may have several keys),
  // where predicates ANDed on the path may each be met by a different array
  // element ({"a": [1, 10]} matches {"a": {"$gt": 5, "$lt": 3}}): then the
  // bounds of one conjunct are used, not their intersection.
  std::optional<std::vector<KeyInterval>> IndexBounds(std::string_view path) const;
  // With multikey == false (no document has more than one key in this
  // index) ANDed predicates on the path intersect their bounds.
  std::optional<std::vector<KeyInterval>> IndexBounds(std::string_view path, bool multikey) const;
  // Whether every document whose value at each of `paths` (top-level
  // fields) has its one key inside IndexBounds(path, false) matches the
  // filter, so that an index walk of those bounds on a non-multikey index
  // needs no re-check. Conservative: true only for ANDs of $eq, $in (no
  // regex), $gt, $gte, $lt, $lte on those paths with int32, int64, double
  // (not NaN) or string operands, whose key encodings keep CompareValues'
  // order and equality (keys.cc), and whose bounds are their type's
  // bracket; a number range with no lower bound is not exact (NaN sorts
  // below every number but matches no range).
  bool BoundsAreExact(const std::vector<std::string_view>& paths) const;

  struct Node;

 private:
  // Bytes every matching document must contain, or empty. For an ANDed
  // string equality the value's BSON encoding (int32 length, bytes, NUL) is
  // the same wherever it sits (a field, an array element, a symbol), so
  // Matches rejects a document lacking it with one memmem before parsing:
  // a full scan then costs about what reading the bytes does.
  std::string needle_;
  std::string source_;
  std::unique_ptr<Node> root_;  // null: matches everything (no allocation
                                // for the filter a point cursor never uses)
  const Node& Root() const;
};

// Updates (operators, replacements, upserts): engine/update.h.

// MongoDB's projections as dotted paths: "a" keeps a field (with _id),
// "-a" drops one and keeps the rest (MongoDB's {a: 0}); "-_id" drops _id
// in either kind.
class Projection {
 public:
  // InvalidArgument naming the field for an empty path, an empty part
  // ("a..b", ".a", "a."), a part starting with '$' ("$a", "a.$"), and for
  // fields kept and dropped in one projection (but _id, as MongoDB).
  static Result<Projection> Parse(const std::vector<std::string>& fields);
  Projection();
  ~Projection();
  Projection(Projection&&) noexcept;
  Projection& operator=(Projection&&) noexcept;
  bool empty() const;
  void Apply(const uint8_t* doc, size_t len, std::string* out) const;

 private:
  std::vector<std::string> fields_;   // kept (an inclusion)
  std::vector<std::string> dropped_;  // dropped (an exclusion), _id aside
  bool drop_id_ = false;
};

// InvalidArgument ("field names must not start with '$': $foo") when a key
// at any depth of the (valid) document starts with '$' (a DBRef's keys below
// the top level excepted: DbRefKey), and ("duplicate
// field name: a") when a (sub)document at any depth has a field name twice
// (array keys are positions and are not compared). Documents accept both
// because filters and updates need them; stored documents must not have
// them (MongoDB refuses them too). PrepareForInsert and Update::Parse call
// this; so should any other path that stores a caller's document
// (Replace). Allocates nothing unless a (sub)document has over 256 fields.
Status CheckFieldNames(const uint8_t* doc, size_t len);
// The same answer by libbson's walk alone (CheckFieldNames takes a faster
// one for plain documents): for tests and the fuzzer to compare the two.
Status CheckFieldNamesSlowly(const uint8_t* doc, size_t len);

// Whether the '$' key of the element `it` holds is a DBRef's, in its place
// ({$ref: "coll", $id: value[, $db: "db"], ...}: $ref a string right before
// $id, $db a string right after it), given the key before it (empty at the
// first). MongoDB stores these below the top level, and a filter compares
// a document that starts so as a value.
bool DbRefKey(const bson_iter_t* it, std::string_view prev);

// Whether a dotted path's parts after the first that start with '$' are all
// a DBRef's ($id, $ref, $db): the only such fields a document stores.
bool DollarPartsAreDbRef(std::string_view path);
inline bool IsDbRefField(std::string_view part) {
  return part == "$id" || part == "$ref" || part == "$db";
}

// Adds an ObjectId _id as the first field when the document has none; moves
// an existing _id first. InvalidArgument when _id is an array, undefined or
// a regex, a key starts with '$', a field name repeats, or the result is
// over kMaxDocumentSize.
// *id receives the _id.
Status PrepareForInsert(const Document& in, std::string* out_bson, Value* id);

}  // namespace mmdoc::engine

#endif  // MMDOC_ENGINE_QUERY_H_
