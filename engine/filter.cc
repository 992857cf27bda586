// Filter: MongoDB filters parsed into a small tree, matched against BSON in
// place, and turned into index key intervals.
//
// Semantics (MongoDB's, as far as they go here):
//   - a path reaches values through VisitPath (query_path.h): arrays before
//     the last part fan out; a predicate holds when it holds for any value
//     reached;
//   - at the end of the path, an array value matches when the whole array
//     matches or any of its elements does (one level only);
//   - range operators compare only within one canonical type bracket
//     ({$gt: 5} never matches a string); NaN only matches $eq/$gte/$lte NaN;
//     {$gt/$gte: MinKey} and {$lt/$lte: MaxKey} match every value (arrays
//     through their elements, so not [], and not a missing path);
//   - {a: null} (and $in with null, $gte/$lte null) also match a missing
//     path; $ne/$nin are the negations of $eq/$in ({a: {$ne: null}} does not
//     match a missing a);
//   - $exists is true when the path reaches at least one value.
// What is not implemented is refused at Parse, never compared as bytes:
// other operators at any depth (inside $and/$or/$nor, and '$' keys inside
// document operands), regex values anywhere in a constant (libbson's JSON
// reader makes {"$regex": ...} one; a later issue adds $regex), and an
// undefined operand (as MongoDB: "cannot compare to undefined"). Code,
// symbol and DBPointer constants compare as values, as in MongoDB.
#include <bson/bson.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MMDOC_AVX2_SEARCH 1
#endif
#include <string>

#include "query.h"
#include "query_path.h"
#include "storage/coding.h"

namespace mmdoc::engine {

struct Filter::Node {
  enum Kind { kAnd, kOr, kNor, kPred };
  enum Op { kEq, kNe, kGt, kGte, kLt, kLte, kIn, kNin, kExists };
  Kind kind = kAnd;
  std::vector<std::unique_ptr<Node>> children;  // kAnd, kOr, kNor
  // kPred:
  std::string path;
  Op op = kEq;
  Value operand;                // kEq..kLte
  std::vector<Value> operands;  // kIn, kNin
  bool exists = true;           // kExists
};

namespace {

using Node = Filter::Node;
using Intervals = std::vector<KeyInterval>;

// ---------------------------------------------------------------- parse

bool ParseOp(std::string_view name, Node::Op* op) {
  static const struct {
    const char* name;
    Node::Op op;
  } kOps[] = {{"$eq", Node::kEq},   {"$ne", Node::kNe},   {"$gt", Node::kGt},
              {"$gte", Node::kGte}, {"$lt", Node::kLt},   {"$lte", Node::kLte},
              {"$in", Node::kIn},   {"$nin", Node::kNin}, {"$exists", Node::kExists}};
  for (const auto& o : kOps) {
    if (name == o.name) {
      *op = o.op;
      return true;
    }
  }
  return false;
}

std::string_view Key(const bson_iter_t* it) {
  return std::string_view(bson_iter_key(it), bson_iter_key_len(it));
}

// MongoDB query operators this filter does not implement. They are named
// "unsupported" (not "unknown") so that nobody hunts for a typo.
bool IsMongoOperator(std::string_view name) {
  static const char* const kNames[] = {
      "$all",           "$alwaysFalse", "$alwaysTrue", "$bitsAllClear", "$bitsAllSet",
      "$bitsAnyClear",  "$bitsAnySet",  "$comment",    "$elemMatch",    "$expr",
      "$geoIntersects", "$geoWithin",   "$jsonSchema", "$mod",          "$near",
      "$nearSphere",    "$not",         "$options",    "$regex",        "$sampleRate",
      "$size",          "$text",        "$type",       "$where"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

Status NotImplemented(std::string_view name, std::string_view where = {}) {
  std::string m = IsMongoOperator(name) ? "unsupported operator " : "unknown operator ";
  m.append(name);
  if (!where.empty()) {
    m += " inside the value for ";
    m.append(where);
  }
  return Status::InvalidArgument(m);
}

// A constant compared with stored values, at any depth. Refused where
// comparing bytes would give a wrong answer: a regex (MongoDB matches it as
// a pattern, which is not implemented yet), and a '$' key (an operator
// where only a value can be; no stored document has one).
Status CheckConstant(const bson_value_t* v, std::string_view path) {
  if (v->value_type == BSON_TYPE_REGEX) {
    return Status::InvalidArgument("regular expression values are not supported in filters", path);
  }
  if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) return Status::OK();
  const bool array = v->value_type == BSON_TYPE_ARRAY;
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
    return Status::InvalidArgument("invalid BSON in the filter on", path);
  }
  while (bson_iter_next(&it)) {
    if (!array && bson_iter_key_len(&it) > 0 && bson_iter_key(&it)[0] == '$')
      return NotImplemented(Key(&it), path);
    MMDOC_RETURN_IF_ERROR(CheckConstant(bson_iter_value(&it), path));
  }
  return Status::OK();
}

// The operand of $eq/$ne/ranges, an implicit equality or an $in/$nin
// element. MongoDB refuses undefined there ("cannot compare to undefined").
Status CheckOperand(const bson_value_t* v, std::string_view path) {
  if (v->value_type == BSON_TYPE_UNDEFINED)
    return Status::InvalidArgument("cannot compare to undefined", path);
  return CheckConstant(v, path);
}

Status CheckPath(std::string_view path) {
  // "a..b", ".a" and "a." cannot name anything.
  if (path.empty() || path.front() == '.' || path.back() == '.' ||
      path.find("..") != std::string_view::npos) {
    return Status::InvalidArgument("bad field path in filter", path);
  }
  return Status::OK();
}

Result<std::unique_ptr<Node>> ParseDoc(bson_iter_t* it);

Result<std::unique_ptr<Node>> ParseLogical(std::string_view name, Node::Kind kind,
                                           bson_iter_t* it) {
  bson_iter_t arr;
  if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &arr)) {
    return Status::InvalidArgument(std::string(name) + " needs an array of documents");
  }
  auto node = std::make_unique<Node>();
  node->kind = kind;
  while (bson_iter_next(&arr)) {
    bson_iter_t sub;
    if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &sub)) {
      return Status::InvalidArgument(std::string(name) + " needs an array of documents");
    }
    auto child = ParseDoc(&sub);
    if (!child.ok()) return child.status();
    node->children.push_back(std::move(child).value());
  }
  if (node->children.empty()) {
    return Status::InvalidArgument(std::string(name) + " needs a non-empty array");
  }
  return node;
}

// {path: {$op: v, ...}}: one predicate per operator, ANDed.
Status ParseOperators(std::string_view path, bson_iter_t* ops, Node* and_node) {
  while (bson_iter_next(ops)) {
    std::string_view name = Key(ops);
    auto pred = std::make_unique<Node>();
    pred->kind = Node::kPred;
    pred->path.assign(path);
    if (name.empty() || name[0] != '$') {
      return Status::InvalidArgument("cannot mix operators and fields in the filter on", path);
    }
    if (!ParseOp(name, &pred->op)) return NotImplemented(name);
    const bson_value_t* v = bson_iter_value(ops);
    switch (pred->op) {
      case Node::kIn:
      case Node::kNin: {
        bson_iter_t arr;
        if (!BSON_ITER_HOLDS_ARRAY(ops) || !bson_iter_recurse(ops, &arr)) {
          return Status::InvalidArgument(std::string(name) + " needs an array");
        }
        while (bson_iter_next(&arr)) {
          MMDOC_RETURN_IF_ERROR(CheckOperand(bson_iter_value(&arr), path));
          pred->operands.push_back(Value::FromBsonValue(bson_iter_value(&arr)));
        }
        break;
      }
      case Node::kExists:
        if (v->value_type == BSON_TYPE_BOOL) {
          pred->exists = v->value.v_bool;
        } else if (BSON_ITER_HOLDS_NUMBER(ops)) {
          pred->exists = bson_iter_as_double(ops) != 0;
        } else {
          return Status::InvalidArgument("$exists needs a boolean");
        }
        break;
      default:
        MMDOC_RETURN_IF_ERROR(CheckOperand(v, path));
        pred->operand = Value::FromBsonValue(v);
        break;
    }
    and_node->children.push_back(std::move(pred));
  }
  return Status::OK();
}

// A filter document: implicit AND of its fields.
Result<std::unique_ptr<Node>> ParseDoc(bson_iter_t* it) {
  auto node = std::make_unique<Node>();
  node->kind = Node::kAnd;
  while (bson_iter_next(it)) {
    std::string_view key = Key(it);
    if (!key.empty() && key[0] == '$') {
      Node::Kind kind;
      if (key == "$and") {
        kind = Node::kAnd;
      } else if (key == "$or") {
        kind = Node::kOr;
      } else if (key == "$nor") {
        kind = Node::kNor;
      } else {
        return NotImplemented(key);
      }
      auto child = ParseLogical(key, kind, it);
      if (!child.ok()) return child.status();
      node->children.push_back(std::move(child).value());
      continue;
    }
    MMDOC_RETURN_IF_ERROR(CheckPath(key));
    // A document whose first key starts with '$' is a set of operators;
    // any other value (documents included) is an equality.
    bson_iter_t sub;
    if (BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &sub)) {
      bson_iter_t peek = sub;
      if (bson_iter_next(&peek) && bson_iter_key(&peek)[0] == '$') {
        MMDOC_RETURN_IF_ERROR(ParseOperators(key, &sub, node.get()));
        continue;
      }
    }
    MMDOC_RETURN_IF_ERROR(CheckOperand(bson_iter_value(it), key));
    auto pred = std::make_unique<Node>();
    pred->kind = Node::kPred;
    pred->path.assign(key);
    pred->op = Node::kEq;
    pred->operand = Value::FromBsonValue(bson_iter_value(it));
    node->children.push_back(std::move(pred));
  }
  return node;
}

// ---------------------------------------------------------------- match

bool IsNaN(const bson_value_t* v) {
  if (v->value_type == BSON_TYPE_DOUBLE) return std::isnan(v->value.v_double);
  if (v->value_type == BSON_TYPE_DECIMAL128) {
    // IEEE 754-2008 decimal: NaN when the combination field is 11111.
    return (v->value.v_decimal128.high & 0x7c00000000000000ull) == 0x7c00000000000000ull;
  }
  return false;
}

bool Equal(const bson_value_t* a, const bson_value_t* b) { return CompareValues(a, b) == 0; }

// One value (never an array element expansion) against a range operator.
bool RangeHolds(const bson_value_t* v, Node::Op op, const bson_value_t* operand) {
  bson_type_t ot = operand->value_type;
  if (ot == BSON_TYPE_MINKEY && (op == Node::kGt || op == Node::kGte)) {
    return op == Node::kGte || v->value_type != BSON_TYPE_MINKEY;
  }
  if (ot == BSON_TYPE_MAXKEY && (op == Node::kLt || op == Node::kLte)) {
    return op == Node::kLte || v->value_type != BSON_TYPE_MAXKEY;
  }
  if (CanonicalRank(v->value_type) != CanonicalRank(ot)) return false;
  if (IsNaN(v) || IsNaN(operand)) {
    return IsNaN(v) && IsNaN(operand) && (op == Node::kGte || op == Node::kLte);
  }
  int c = CompareValues(v, operand);
  switch (op) {
    case Node::kGt:
      return c > 0;
    case Node::kGte:
      return c >= 0;
    case Node::kLt:
      return c < 0;
    default:
      return c <= 0;
  }
}

// Whether a value reached at the end of the path (nullptr: missing)
// satisfies a positive predicate ($eq, ranges, one $in value).
bool Holds(const bson_value_t* v, Node::Op op, const bson_value_t* operand) {
  if (v == nullptr) {
    // Missing compares as null.
    bool null_op = operand->value_type == BSON_TYPE_NULL;
    return null_op && (op == Node::kEq || op == Node::kGte || op == Node::kLte);
  }
  // A range compares a whole array only with an array operand: otherwise
  // the $gt MinKey / $lt MaxKey "everything" rule would match arrays as a
  // whole, which their element keys cannot show to an index.
  bool whole = op == Node::kEq ? Equal(v, operand)
               : v->value_type == BSON_TYPE_ARRAY && operand->value_type != BSON_TYPE_ARRAY
                   ? false
                   : RangeHolds(v, op, operand);
  if (whole) return true;
  if (v->value_type != BSON_TYPE_ARRAY) return false;
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
    return false;
  }
  while (bson_iter_next(&it)) {
    const bson_value_t* e = bson_iter_value(&it);
    if (op == Node::kEq ? Equal(e, operand) : RangeHolds(e, op, operand)) return true;
  }
  return false;
}

bool AnyHolds(const uint8_t* doc, size_t len, const Node& n, Node::Op op,
              const bson_value_t* operand) {
  auto fn = [op, operand](const bson_value_t* v) { return Holds(v, op, operand); };
  return VisitPath(doc, len, n.path, fn);
}

bool InHolds(const uint8_t* doc, size_t len, const Node& n) {
  auto fn = [&n](const bson_value_t* v) {
    for (const Value& o : n.operands) {
      if (Holds(v, Node::kEq, o.get())) return true;
    }
    return false;
  };
  return VisitPath(doc, len, n.path, fn);
}

bool MatchNode(const Node& n, const uint8_t* doc, size_t len) {
  switch (n.kind) {
    case Node::kAnd:
      for (const auto& c : n.children) {
        if (!MatchNode(*c, doc, len)) return false;
      }
      return true;
    case Node::kOr:
      for (const auto& c : n.children) {
        if (MatchNode(*c, doc, len)) return true;
      }
      return false;
    case Node::kNor:
      for (const auto& c : n.children) {
        if (MatchNode(*c, doc, len)) return false;
      }
      return true;
    case Node::kPred:
      break;
  }
  switch (n.op) {
    case Node::kEq:
    case Node::kGt:
    case Node::kGte:
    case Node::kLt:
    case Node::kLte:
      return AnyHolds(doc, len, n, n.op, n.operand.get());
    case Node::kNe:
      return !AnyHolds(doc, len, n, Node::kEq, n.operand.get());
    case Node::kIn:
      return InHolds(doc, len, n);
    case Node::kNin:
      return !InHolds(doc, len, n);
    case Node::kExists: {
      auto present = [](const bson_value_t* v) { return v != nullptr; };
      return VisitPath(doc, len, n.path, present) == n.exists;
    }
  }
  return false;
}

// ---------------------------------------------------------------- bounds

// Compares interval ends. An empty key is -inf as a lower end and +inf as
// an upper end.
int CompareLo(const KeyInterval& a, const KeyInterval& b) {
  if (a.lo.empty() || b.lo.empty())
    return a.lo.empty() == b.lo.empty() ? 0 : (a.lo.empty() ? -1 : 1);
  int c = a.lo.compare(b.lo);
  if (c != 0) return c;
  return a.lo_inclusive == b.lo_inclusive ? 0 : (a.lo_inclusive ? -1 : 1);
}

int CompareHi(const KeyInterval& a, const KeyInterval& b) {
  if (a.hi.empty() || b.hi.empty())
    return a.hi.empty() == b.hi.empty() ? 0 : (a.hi.empty() ? 1 : -1);
  int c = a.hi.compare(b.hi);
  if (c != 0) return c;
  return a.hi_inclusive == b.hi_inclusive ? 0 : (a.hi_inclusive ? 1 : -1);
}

bool NonEmpty(const KeyInterval& i) {
  if (i.lo.empty() || i.hi.empty()) return true;
  int c = i.lo.compare(i.hi);
  return c < 0 || (c == 0 && i.lo_inclusive && i.hi_inclusive);
}

// Whether b starts at or before the end of a (so they overlap or touch).
bool Touches(const KeyInterval& a, const KeyInterval& b) {
  if (a.hi.empty() || b.lo.empty()) return true;
  int c = b.lo.compare(a.hi);
  return c < 0 || (c == 0 && (a.hi_inclusive || b.lo_inclusive));
}

// Sorts and merges into non-overlapping intervals.
Intervals Normalize(Intervals v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](const KeyInterval& i) { return !NonEmpty(i); }),
          v.end());
  std::sort(v.begin(), v.end(),
            [](const KeyInterval& a, const KeyInterval& b) { return CompareLo(a, b) < 0; });
  Intervals out;
  for (KeyInterval& i : v) {
    if (!out.empty() && Touches(out.back(), i)) {
      if (CompareHi(i, out.back()) > 0) {
        out.back().hi = std::move(i.hi);
        out.back().hi_inclusive = i.hi_inclusive;
      }
    } else {
      out.push_back(std::move(i));
    }
  }
  return out;
}

Intervals Intersect(const Intervals& a, const Intervals& b) {
  Intervals out;
  for (const KeyInterval& x : a) {
    for (const KeyInterval& y : b) {
      KeyInterval i = CompareLo(x, y) >= 0 ? x : y;  // the later start
      const KeyInterval& end = CompareHi(x, y) <= 0 ? x : y;
      i.hi = end.hi;
      i.hi_inclusive = end.hi_inclusive;
      if (NonEmpty(i)) out.push_back(std::move(i));
    }
  }
  return Normalize(std::move(out));
}

KeyInterval Point(std::string key) {
  KeyInterval i;
  i.lo = key;
  i.hi = std::move(key);
  return i;
}

KeyInterval PointOf(const bson_value_t* v) {
  std::string k;
  AppendKey(v, &k);
  return Point(std::move(k));
}

// Keys an equality with `v` can match: v itself; for an array operand also
// a key of a document whose value *is* that array (its first element, or
// null for []), since arrays are indexed by element.
void EqualityBounds(const bson_value_t* v, Intervals* out) {
  out->push_back(PointOf(v));
  if (v->value_type != BSON_TYPE_ARRAY) return;
  bson_iter_t it;
  if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
      bson_iter_next(&it)) {
    out->push_back(PointOf(bson_iter_value(&it)));
  } else {
    std::string null_key;
    AppendNullKey(&null_key);
    out->push_back(Point(std::move(null_key)));
  }
}

std::optional<Intervals> PredBounds(const Node& n) {
  Intervals out;
  switch (n.op) {
    case Node::kEq:
      EqualityBounds(n.operand.get(), &out);
      return Normalize(std::move(out));
    case Node::kIn:
      for (const Value& v : n.operands) EqualityBounds(v.get(), &out);
      return Normalize(std::move(out));
    case Node::kGt:
    case Node::kGte:
    case Node::kLt:
    case Node::kLte:
      break;
    default:
      return std::nullopt;  // $ne, $nin, $exists
  }
  const bson_value_t* v = n.operand.get();
  int rank = CanonicalRank(v->value_type);
  // A whole-array comparison is not visible in the element keys.
  if (rank == kRankArray) return std::nullopt;
  if (rank == kRankNull) {  // null's bracket holds null (and missing) only
    if (n.op == Node::kGt || n.op == Node::kLt) return out;
    return Intervals{PointOf(v)};
  }
  KeyInterval i;
  bool up = n.op == Node::kGt || n.op == Node::kGte;
  bool inclusive = n.op == Node::kGte || n.op == Node::kLte;
  std::string key;
  AppendKey(v, &key);
  if (up) {
    i.lo = std::move(key);
    i.lo_inclusive = inclusive;
    // The bracket's end; MinKey's "bracket" is everything.
    if (rank != kRankMinKey) {
      i.hi.assign(1, KeyRankByte(rank + 1));
      i.hi_inclusive = false;
    }
  } else {
    i.hi = std::move(key);
    i.hi_inclusive = inclusive;
    if (rank != kRankMaxKey) i.lo.assign(1, KeyRankByte(rank));
  }
  out.push_back(std::move(i));
  return Normalize(std::move(out));
}

// Prefers points (fewest first), then any range: used when ANDed bounds may
// not be intersected.
bool Better(const Intervals& a, const Intervals& b) {
  auto points = [](const Intervals& v) {
    for (const KeyInterval& i : v) {
      if (i.lo.empty() || i.lo != i.hi) return false;
    }
    return true;
  };
  bool pa = points(a), pb = points(b);
  if (pa != pb) return pa;
  return a.size() < b.size();
}

std::optional<Intervals> NodeBounds(const Node& n, std::string_view path, bool multikey) {
  switch (n.kind) {
    case Node::kPred:
      if (n.path != path) return std::nullopt;
      return PredBounds(n);
    case Node::kNor:
      return std::nullopt;
    case Node::kOr: {
      Intervals all;
      for (const auto& c : n.children) {
        auto b = NodeBounds(*c, path, multikey);
        if (!b) return std::nullopt;  // a branch that does not constrain path
        all.insert(all.end(), b->begin(), b->end());
      }
      return Normalize(std::move(all));
    }
    case Node::kAnd: {
      std::optional<Intervals> acc;
      for (const auto& c : n.children) {
        auto b = NodeBounds(*c, path, multikey);
        if (!b) continue;
        if (!acc) {
          acc = std::move(b);
        } else if (!multikey) {
          acc = Intersect(*acc, *b);
        } else if (Better(*b, *acc)) {
          acc = std::move(b);
        }
      }
      return acc;
    }
  }
  return std::nullopt;
}

// Bit k of mask: a candidate start at p + k (its first and next-to-last
// bytes match). Whether any candidate is the needle.
inline bool CheckCandidates(const uint8_t* p, uint32_t mask, const uint8_t* nd, size_t n) {
  for (; mask != 0; mask &= mask - 1) {
    if (std::memcmp(p + __builtin_ctz(mask), nd, n) == 0) return true;
  }
  return false;
}

#if defined(MMDOC_AVX2_SEARCH)
// The same test at 32 positions per step, for CPUs with AVX2 (checked at
// run time; the build targets plain x86-64). A scan searches whole B+tree
// leaves of a few KB, where this halves the work of the search.
std::atomic<bool> g_avx2_disabled{false};

__attribute__((target("avx2"))) inline uint32_t CandidatesAvx2(const uint8_t* p, size_t n,
                                                               __m256i first, __m256i tail) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + n - 2));
  return static_cast<uint32_t>(_mm256_movemask_epi8(
      _mm256_and_si256(_mm256_cmpeq_epi8(a, first), _mm256_cmpeq_epi8(b, tail))));
}

__attribute__((target("avx2"))) bool ContainsAvx2(const uint8_t* hay, size_t last,
                                                  const uint8_t* nd, size_t n) {
  // REQUIRES: last + 1 >= 32 (the hay holds 32 candidate starts).
  const __m256i first = _mm256_set1_epi8(static_cast<char>(nd[0]));
  const __m256i tail = _mm256_set1_epi8(static_cast<char>(nd[n - 2]));
  size_t i = 0;
  // 64 starts per step; candidates (both bytes right) are rare.
  for (; i + 64 <= last + 1; i += 64) {
    const uint32_t m0 = CandidatesAvx2(hay + i, n, first, tail);
    const uint32_t m1 = CandidatesAvx2(hay + i + 32, n, first, tail);
    if ((m0 | m1) != 0 &&
        (CheckCandidates(hay + i, m0, nd, n) || CheckCandidates(hay + i + 32, m1, nd, n)))
      return true;
  }
  for (; i + 32 <= last + 1; i += 32) {
    if (CheckCandidates(hay + i, CandidatesAvx2(hay + i, n, first, tail), nd, n)) return true;
  }
  if (i > last) return false;
  // One overlapping block ends exactly at `last`; drop the starts already
  // checked.
  const size_t p = last + 1 - 32;
  return CheckCandidates(hay + p, CandidatesAvx2(hay + p, n, first, tail) >> (i - p) << (i - p), nd,
                         n);
}

bool UseAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has && !g_avx2_disabled.load(std::memory_order_relaxed);
}
#endif

// Whether needle occurs in hay. The needle is an encoded string (int32
// length, bytes, NUL; at least 5 bytes): compare its first byte (the length)
// and its last character at 16 positions at once and memcmp only where both
// match. Not the trailing NUL, which follows every string of that length.
// (glibc's memmem is much slower on short documents.)
bool Contains(const uint8_t* hay, size_t len, const std::string& needle) {
  const size_t n = needle.size();
  if (len < n) return false;
  const uint8_t* nd = reinterpret_cast<const uint8_t*>(needle.data());
  const size_t last = len - n;  // the last possible start
#if defined(MMDOC_AVX2_SEARCH)
  if (last + 1 >= 32 && UseAvx2()) return ContainsAvx2(hay, last, nd, n);
#endif
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i first = _mm_set1_epi8(static_cast<char>(nd[0]));
  const __m128i tail = _mm_set1_epi8(static_cast<char>(nd[n - 2]));
  // Bit k of the result: a candidate start at p + k.
  auto candidates = [&](size_t p) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hay + p));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hay + p + n - 2));
    return static_cast<unsigned>(
        _mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, tail))));
  };
  auto check = [&](size_t p, unsigned mask) { return CheckCandidates(hay + p, mask, nd, n); };
  if (last + 1 >= 16) {
    for (; i + 16 <= last + 1; i += 16) {
      if (check(i, candidates(i))) return true;
    }
    if (i <= last) {
      // One overlapping block ends exactly at `last`; drop the starts
      // already checked.
      size_t p = last + 1 - 16;
      return check(p, candidates(p) >> (i - p) << (i - p));
    }
    return false;
  }
#endif
  for (; i <= last; i++) {
    if (hay[i] == nd[0] && hay[i + n - 2] == nd[n - 2] && std::memcmp(hay + i, nd, n) == 0) {
      return true;
    }
  }
  return false;
}

// The longest string operand of an equality that every match must satisfy
// (reached from the root through ANDs only), as its encoded bytes.
void FindNeedle(const Node& n, std::string* needle) {
  if (n.kind == Node::kAnd) {
    for (const auto& c : n.children) FindNeedle(*c, needle);
    return;
  }
  if (n.kind != Node::kPred || n.op != Node::kEq) return;
  const bson_value_t* v = n.operand.get();
  if (v->value_type != BSON_TYPE_UTF8) return;
  uint32_t len = v->value.v_utf8.len;
  if (len + 5 <= needle->size()) return;
  uint32_t with_nul = len + 1;  // BSON lengths are little-endian
  needle->clear();
  storage::PutFixed32(needle, with_nul);
  needle->append(v->value.v_utf8.str, len);
  needle->push_back('\0');
}

}  // namespace

Filter::Filter() = default;

const Node& Filter::Root() const {
  static const Node kMatchAll;  // an empty $and
  return root_ ? *root_ : kMatchAll;
}
Filter::~Filter() = default;
Filter::Filter(Filter&&) noexcept = default;
Filter& Filter::operator=(Filter&&) noexcept = default;

Result<Filter> Filter::Parse(const bson_t* filter) {
  bson_iter_t it;
  if (filter == nullptr || !bson_iter_init(&it, filter)) {
    return Status::InvalidArgument("filter is not a BSON document");
  }
  auto root = ParseDoc(&it);
  if (!root.ok()) return root.status();
  Filter f;
  f.root_ = std::move(root).value();
  FindNeedle(*f.root_, &f.needle_);
  return f;
}

Result<Filter> Filter::Parse(const Document& filter) {
  bson_t b;
  filter.View(&b);
  return Parse(&b);
}

bool Filter::Matches(const uint8_t* doc, size_t len) const {
  if (!needle_.empty() && !Contains(doc, len, needle_)) return false;
  return MatchNode(Root(), doc, len);
}

void DisableAvx2SearchForTesting(bool disable) {
#if defined(MMDOC_AVX2_SEARCH)
  g_avx2_disabled.store(disable);
#else
  (void)disable;
#endif
}

bool Filter::MayMatchIn(const uint8_t* bytes, size_t len) const {
  return needle_.empty() || Contains(bytes, len, needle_);
}

bool Filter::MatchesAll() const { return Root().kind == Node::kAnd && Root().children.empty(); }

std::optional<std::vector<KeyInterval>> Filter::IndexBounds(std::string_view path) const {
  return IndexBounds(path, true);
}

std::optional<std::vector<KeyInterval>> Filter::IndexBounds(std::string_view path,
                                                            bool multikey) const {
  return NodeBounds(Root(), path, multikey);
}

}  // namespace mmdoc::engine
