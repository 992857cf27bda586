// Updates in MongoDB's syntax: an operator update or a replacement document,
// parsed once and applied to each document a filter matched; and the
// document an upsert inserts when the filter matched none.
//
// Operators (MongoDB's semantics, its manual "Update Operators"):
//   fields   $set $unset $inc $mul $min $max $rename $currentDate $setOnInsert
//   arrays   $push (with $each, $slice, $position, $sort), $addToSet (with
//            $each), $pop, $pull (a value, or a condition as a filter),
//            $pullAll, and the positional $ ("a.$", "a.$.x")
// Refused (InvalidArgument naming it): $bit, the all-positional $[] and the
// filtered $[<identifier>], unknown operators.
//
// Paths are dotted ("a.b.c"); a numeric part addresses an array element.
// Two paths of one update may not be equal or one a prefix of the other
// (MongoDB's "conflict"). An update may name _id but not change it. The
// fields it creates are appended in MongoDB 5.0+'s order: names by their
// bytes, number names ("9", "10") by value, whatever the update's order.
//
// Thread safety: a parsed Update is immutable once BindQuery (if it is
// called) has returned, and may then be applied from many threads.
#ifndef MMDOC_ENGINE_UPDATE_H_
#define MMDOC_ENGINE_UPDATE_H_

#include <bson/bson.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "mmdoc/document.h"
#include "mmdoc/status.h"

namespace mmdoc::engine {

// What applying an update needs to know besides the document.
struct UpdateContext {
  // The document is the one an upsert inserts: $setOnInsert applies (it is
  // a no-op otherwise).
  bool inserting = false;
  // The time $currentDate writes, in milliseconds since the Unix epoch; a
  // negative value reads the clock once per Apply. A timestamp gets these
  // seconds and an increment that grows with every Apply of the process
  // (1 when the time is given here, so results are reproducible).
  int64_t now_ms = -1;
  // false forces the general rewrite where a faster path would apply (tests
  // compare the two).
  bool fast_paths = true;
};

// A parsed update: operators on dotted paths, or a replacement document (no
// '$' keys at the top level).
class Update {
 public:
  // InvalidArgument, naming the operator or field, for: unknown operators
  // and $bit ("unsupported update operator $bit"); mixing operators and
  // plain fields; an operand of the wrong type ($inc/$mul of a non-number,
  // $push's $each not an array, $slice or $position not an integer, $pop
  // other than 1 or -1, $pullAll without an array, $rename to a non-string,
  // $currentDate other than a boolean or {$type: "date"|"timestamp"}); a
  // $pull condition the filter code refuses; a $rename from or to _id;
  // conflicting paths (also a $rename's source and target); a $rename to
  // itself or along its own path; more than one '$' in a path, '$' first,
  // or '$' on two different arrays. Values, regex values included, are stored as given
  // (filters refuse regex values instead).
  static Result<Update> Parse(const bson_t* update);
  static Result<Update> Parse(const Document& update);
  // Parse into *out, reusing the memory of its last parse (a writer that
  // parses an update per call keeps one). On an error *out is the empty
  // operator update, which changes nothing.
  static Status ParseInto(const bson_t* update, Update* out);
  Update();  // the empty replacement
  ~Update();
  Update(Update&&) noexcept;
  Update& operator=(Update&&) noexcept;

  // Whether a path names the positional $ ("a.$").
  bool has_positional() const;
  // Gives the positional $ the query the updated documents matched: the
  // element it names is the first element of the array (the path before
  // "$") that the filter's top-level predicates on that array ("a": ...,
  // "a.x": ...) all match. With one predicate this is MongoDB's rule; with
  // several MongoDB's answer is undocumented and this takes the first
  // element matching all. A negation ($ne, $nin, $not) names no element:
  // it holds for the whole array (MongoDB's manual, "Negations"); inside
  // $elemMatch it holds for one. InvalidArgument for a filter the filter
  // code refuses. A no-op without a positional $.
  Status BindQuery(const Document& filter);

  // Writes the updated document into *out (keeps _id first and unchanged).
  // InvalidArgument naming the field when it cannot apply: $set/$inc/...
  // through a non-document, $inc/$mul of a non-number, an int64 overflow,
  // $push/$addToSet/$pop/$pull/$pullAll of a non-array, a $rename whose
  // source or target lies in an array, a positional $ with no matching
  // element ("the positional operator did not find the match needed from
  // the query") or only a negation of the array to name it by; an update
  // that would change _id (its bytes, type included: $set {_id: 1.0} of
  // _id 1 is refused, $set {_id: 1} or $inc {_id: 0} is not; "the update
  // would change the immutable field _id"); or the result over
  // kMaxDocumentSize or nested too deep.
  // Apply(doc, len, out, fast_paths) is Apply with an UpdateContext of
  // those fast_paths (and the clock).
  Status Apply(const uint8_t* doc, size_t len, std::string* out, bool fast_paths = true) const;
  Status Apply(const uint8_t* doc, size_t len, const UpdateContext& context,
               std::string* out) const;

  // The document an upsert inserts when `filter` matched nothing, MongoDB's
  // rule: the filter's equalities ({a: v}, {a: {$eq: v}}, {a: {$in: [v]}},
  // also inside $and and a one-clause $or; dotted paths make subdocuments;
  // other operators give nothing) with the update applied as for an insert
  // ($setOnInsert applies), _id first: the filter's, else one the update
  // sets. A replacement gives the replacement, with the filter's _id
  // equality when it has no _id. Without _id when neither gives one
  // (inserting adds an ObjectId). InvalidArgument for two equalities on
  // one path or along one path ("a" and "a.b"), an update or replacement
  // whose _id differs from the filter's, an _id that is an array,
  // undefined or a regex, a positional $, or as Apply.
  Status UpsertDocument(const Document& filter, const UpdateContext& context,
                        std::string* out) const;

  bool is_replacement() const;
  // Whether applying this update can change the value at dotted path
  // `field` (so the keys of an index on it). Conservative: true for a
  // replacement and whenever an update path starts with the same top-level
  // field ("a.0.b" may change what "a.b" reaches through an array).
  bool MayChange(std::string_view field) const;

  struct Impl;

 private:
  enum Kind { kOperators };
  explicit Update(Kind);  // an empty operator update, for Parse to fill
  std::unique_ptr<Impl> impl_;
};

// A document's top-level _id element, type byte to the end of its value
// ("" without one): two documents have the same _id, type included, when
// these bytes are equal (MongoDB's immutable _id: 1.0 is not 1).
std::string_view IdElement(const uint8_t* doc, size_t len);

}  // namespace mmdoc::engine

#endif  // MMDOC_ENGINE_UPDATE_H_
