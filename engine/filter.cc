// Filter: MongoDB filters parsed into a small tree, matched against BSON in
// place, and turned into index key intervals.
//
// Semantics (MongoDB's, as far as they go here):
//   - a path reaches values through VisitPath (query_path.h): arrays before
//     the last part fan out; a predicate holds when it holds for any value
//     reached; an array with no document in it reaches nothing ({"a.b":
//     null} matches {a: 4} and {a: [{}]}, not {a: [1]} or {a: []});
//   - at the end of the path, an array value matches when the whole array
//     matches or any of its elements does (one level only); $size and
//     $elemMatch look at the array itself only;
//   - range operators compare only within one canonical type bracket
//     ({$gt: 5} never matches a string); NaN only matches $eq/$gte/$lte NaN;
//     {$gt/$gte: MinKey} and {$lt/$lte: MaxKey} match every value, a
//     missing path and [] too (other arrays through their elements, so
//     not [MinKey] for $gt MinKey: its key is outside the bounds);
//   - {a: null} (and $in with null, $gte/$lte null) also match a missing
//     path; $ne/$nin are the negations of $eq/$in ({a: {$ne: null}} does not
//     match a missing a); $not is the negation of the operators it holds,
//     so it matches a missing path;
//   - $exists is true when the path reaches at least one value;
//   - a regex ({a: /re/}, $regex, in $in/$nin/$all, $not: /re/) matches a
//     string or symbol it finds (engine/regex.h: PCRE2, compiled once at
//     Parse), and a stored regex value with the same pattern and options;
//     {$eq: /re/} and a regex inside a document or array constant compare
//     as values; $ne and the range operators refuse a regex (as MongoDB);
//   - $elemMatch: an array with one element that meets every operator
//     ({$elemMatch: {$gt: 1, $lt: 5}}, each operator on the element itself,
//     never on its elements) or, as a document or array, the whole
//     sub-filter ({$elemMatch: {x: 1}});
//   - $all: every element as an equality (or regex, or $elemMatch: then all
//     must be); [] matches nothing. $size: an array of that many elements.
//     $type: the value or an element has the type ("array": the value is an
//     array). $mod [d, r]: a number (doubles and decimals truncated toward
//     zero) whose remainder by d is r, with C++'s sign rule (MongoDB's).
// What is not implemented is refused at Parse, never compared as bytes:
// other operators at any depth (inside $and/$or/$nor, and '$' keys inside
// document operands), and an undefined operand (as MongoDB: "cannot compare
// to undefined"). Code, symbol and DBPointer constants compare as values,
// as in MongoDB.
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
#include "regex.h"
#include "storage/coding.h"

namespace mmdoc::engine {

struct Filter::Node {
  enum Kind { kAnd, kOr, kNor, kPred };
  enum Op {
    kEq,
    kNe,
    kGt,
    kGte,
    kLt,
    kLte,
    kIn,
    kNin,
    kExists,
    kRegex,
    kType,
    kSize,
    kMod,
    kElemMatch,
  };
  Kind kind = kAnd;
  // kAnd, kOr, kNor; kElemMatch: its one sub-filter (a kAnd).
  std::vector<std::unique_ptr<Node>> children;
  // kPred (inside an operator-form $elemMatch, path is only for messages:
  // the predicate applies to each element as a whole value):
  std::string path;
  Op op = kEq;
  Value operand;                                      // kEq..kLte
  std::vector<Value> operands;                        // kIn, kNin
  std::vector<std::shared_ptr<const Regex>> regexes;  // kRegex (one); kIn, kNin
  bool exists = true;                                 // kExists
  uint32_t types = 0;                                 // kType: bits, TypeBit
  int64_t size = 0;                                   // kSize
  int64_t divisor = 1, remainder = 0;                 // kMod
  bool elem_values = false;  // kElemMatch: operator form (children[0] per element value)
};

namespace {

using Node = Filter::Node;
using Intervals = std::vector<KeyInterval>;

// ---------------------------------------------------------------- parse

bool ParseOp(std::string_view name, Node::Op* op) {
  static const struct {
    const char* name;
    Node::Op op;
  } kOps[] = {{"$eq", Node::kEq},         {"$ne", Node::kNe},
              {"$gt", Node::kGt},         {"$gte", Node::kGte},
              {"$lt", Node::kLt},         {"$lte", Node::kLte},
              {"$in", Node::kIn},         {"$nin", Node::kNin},
              {"$exists", Node::kExists}, {"$regex", Node::kRegex},
              {"$type", Node::kType},     {"$size", Node::kSize},
              {"$mod", Node::kMod},       {"$elemMatch", Node::kElemMatch}};
  for (const auto& o : kOps) {
    if (name == o.name) {
      *op = o.op;
      return true;
    }
  }
  return false;
}

// Operators that take the place of a field's value but are parsed apart
// from the table above (they expand into several nodes or a negation).
bool IsSpecialOp(std::string_view name) {
  return name == "$all" || name == "$not" || name == "$options";
}

std::string_view Key(const bson_iter_t* it) {
  return std::string_view(bson_iter_key(it), bson_iter_key_len(it));
}

// MongoDB query operators this filter does not implement. They are named
// "unsupported" (not "unknown") so that nobody hunts for a typo.
bool IsMongoOperator(std::string_view name) {
  static const char* const kNames[] = {
      "$alwaysFalse",   "$alwaysTrue", "$bitsAllClear", "$bitsAllSet",
      "$bitsAnyClear",  "$bitsAnySet", "$comment",      "$expr",
      "$geoIntersects", "$geoWithin",  "$jsonSchema",   "$near",
      "$nearSphere",    "$sampleRate", "$text",         "$where"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

Status NotImplemented(std::string_view name, std::string_view where = {}) {
  Node::Op op;
  std::string m = ParseOp(name, &op) || IsSpecialOp(name) ? "operator "
                  : IsMongoOperator(name)                 ? "unsupported operator "
                                                          : "unknown operator ";
  m.append(name);
  if (!where.empty()) {
    m += " inside the value for ";
    m.append(where);
  } else if (m[0] == 'o') {
    m += " where a field name belongs";
  }
  return Status::InvalidArgument(m);
}

// A constant compared with stored values, at any depth. Refused where
// comparing bytes would give a wrong answer: a '$' key (an operator where
// only a value can be; no stored document has one). A regex inside a
// document or array is compared as a value, as MongoDB does.
Status CheckConstant(const bson_value_t* v, std::string_view path) {
  if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) return Status::OK();
  const bool array = v->value_type == BSON_TYPE_ARRAY;
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
    return Status::InvalidArgument("invalid BSON in the filter on", path);
  }
  std::string_view prev;
  while (bson_iter_next(&it)) {
    if (!array && bson_iter_key_len(&it) > 0 && bson_iter_key(&it)[0] == '$' &&
        !DbRefKey(&it, prev))
      return NotImplemented(Key(&it), path);
    prev = Key(&it);
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
  // Nor can a part starting with '$' (no stored field does) but a DBRef's.
  if (!DollarPartsAreDbRef(path)) {
    return Status::InvalidArgument("a field path in a filter cannot have a part starting with '$'",
                                   path);
  }
  return Status::OK();
}

std::unique_ptr<Node> NewPred(std::string_view path, Node::Op op) {
  auto pred = std::make_unique<Node>();
  pred->kind = Node::kPred;
  pred->path.assign(path);
  pred->op = op;
  return pred;
}

// A regex value as a pattern: {a: /re/}, an element of $in/$nin/$all, or
// $not: /re/.
Result<std::shared_ptr<const Regex>> CompileRegexValue(const bson_value_t* v) {
  const char* opts = v->value.v_regex.options ? v->value.v_regex.options : "";
  return Regex::Compile(v->value.v_regex.regex, opts);
}

Result<std::unique_ptr<Node>> RegexPred(std::string_view path, const bson_value_t* v) {
  auto re = CompileRegexValue(v);
  if (!re.ok()) return Status::InvalidArgument(re.status().message(), path);
  auto pred = NewPred(path, Node::kRegex);
  pred->regexes.push_back(std::move(re).value());
  return pred;
}

// {path: v} as a predicate under `parent`: a pattern match for a regex
// value, else equality.
Status AddValuePred(std::string_view path, const bson_value_t* v, Node* parent) {
  if (v->value_type == BSON_TYPE_REGEX) {
    auto pred = RegexPred(path, v);
    if (!pred.ok()) return pred.status();
    parent->children.push_back(std::move(pred).value());
    return Status::OK();
  }
  MMDOC_RETURN_IF_ERROR(CheckOperand(v, path));
  auto pred = NewPred(path, Node::kEq);
  pred->operand = Value::FromBsonValue(v);
  parent->children.push_back(std::move(pred));
  return Status::OK();
}

// {$regex: "re" or /re/, $options: "..."} (the two keys anywhere among the
// field's operators, as a BSON client sends them; libbson's JSON reader
// makes the pair one regex value instead).
Result<std::unique_ptr<Node>> ParseRegexOp(std::string_view path, const bson_value_t* regex,
                                           const bson_value_t* options) {
  std::string_view opts;
  if (options != nullptr) {
    if (options->value_type != BSON_TYPE_UTF8)
      return Status::InvalidArgument("$options needs a string", path);
    opts = std::string_view(options->value.v_utf8.str, options->value.v_utf8.len);
  }
  std::string_view pattern;
  if (regex->value_type == BSON_TYPE_UTF8) {
    pattern = std::string_view(regex->value.v_utf8.str, regex->value.v_utf8.len);
  } else if (regex->value_type == BSON_TYPE_REGEX) {
    pattern = regex->value.v_regex.regex;
    std::string_view own = regex->value.v_regex.options ? regex->value.v_regex.options : "";
    if (options != nullptr && !own.empty())
      return Status::InvalidArgument("options set in both $regex and $options", path);
    if (options == nullptr) opts = own;
  } else {
    return Status::InvalidArgument("$regex needs a string or a regular expression", path);
  }
  auto re = Regex::Compile(pattern, opts);
  if (!re.ok()) return Status::InvalidArgument(re.status().message(), path);
  auto pred = NewPred(path, Node::kRegex);
  pred->regexes.push_back(std::move(re).value());
  return pred;
}

// ---- integers from BSON numbers ($size, $mod, $type codes)

// *out = v truncated toward zero, when v is a finite number whose
// truncation fits int64. Decimal128 exactly, through its digits.
bool TruncatedInt64(const bson_value_t* v, int64_t* out) {
  switch (v->value_type) {
    case BSON_TYPE_INT32:
      *out = v->value.v_int32;
      return true;
    case BSON_TYPE_INT64:
      *out = v->value.v_int64;
      return true;
    case BSON_TYPE_DOUBLE: {
      double d = std::trunc(v->value.v_double);
      if (!std::isfinite(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0)
        return false;
      *out = static_cast<int64_t>(d);
      return true;
    }
    case BSON_TYPE_DECIMAL128: {
      // "[-]digits[.digits][E[+-]exp]", or NaN/Infinity.
      char buf[BSON_DECIMAL128_STRING];
      bson_decimal128_to_string(&v->value.v_decimal128, buf);
      const char* p = buf;
      bool neg = *p == '-';
      if (neg) p++;
      std::string digits;
      int exp = 0;
      for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
        if (*p == '.') {
          exp = 0;
          for (const char* q = p + 1; *q >= '0' && *q <= '9'; q++) exp--;
        } else {
          digits.push_back(*p);
        }
      }
      if (digits.empty()) return false;  // NaN, Infinity
      if (*p == 'E')
        exp += std::atoi(p + 1);
      else if (*p != '\0')
        return false;
      // Drop the fraction's digits, then scale up by what exponent is left.
      if (exp < 0)
        digits.resize(digits.size() > static_cast<size_t>(-exp) ? digits.size() + exp : 0);
      __int128 x = 0;
      const __int128 kLimit = static_cast<__int128>(1) << 63;
      for (char c : digits) {
        x = x * 10 + (c - '0');
        if (x > kLimit) return false;
      }
      for (; exp > 0 && x != 0; exp--) {
        x *= 10;
        if (x > kLimit) return false;
      }
      if (neg) x = -x;
      if (x >= kLimit) return false;
      *out = static_cast<int64_t>(x);
      return true;
    }
    default:
      return false;
  }
}

bool IsNumber(const bson_value_t* v) { return CanonicalRank(v->value_type) == kRankNumber; }

// Whether v is a number with no fraction (2.0 yes, 2.5 and NaN no), and
// then *out its value.
bool WholeInt64(const bson_value_t* v, int64_t* out) {
  if (!TruncatedInt64(v, out)) return false;
  if (v->value_type == BSON_TYPE_DOUBLE) return static_cast<double>(*out) == v->value.v_double;
  if (v->value_type == BSON_TYPE_DECIMAL128) {
    bson_value_t back;
    back.value_type = BSON_TYPE_INT64;
    back.value.v_int64 = *out;
    return CompareValues(&back, v) == 0;
  }
  return true;
}

// ---- $type

// Bit of a BSON type in Node::types: its type code (1..19), MinKey and
// MaxKey above them.
constexpr uint32_t kMinKeyBit = 1u << 20;
constexpr uint32_t kMaxKeyBit = 1u << 21;
constexpr uint32_t kNumberBits = (1u << BSON_TYPE_DOUBLE) | (1u << BSON_TYPE_INT32) |
                                 (1u << BSON_TYPE_INT64) | (1u << BSON_TYPE_DECIMAL128);

uint32_t TypeBit(bson_type_t t) {
  if (t == BSON_TYPE_MINKEY) return kMinKeyBit;
  if (t == BSON_TYPE_MAXKEY) return kMaxKeyBit;
  int code = static_cast<int>(t);
  return code >= 1 && code <= 19 ? 1u << code : 0;
}

// MongoDB's $type aliases.
uint32_t TypeAliasBits(std::string_view name) {
  static const struct {
    const char* name;
    int code;
  } kAliases[] = {{"double", 1},      {"string", 2},     {"object", 3},
                  {"array", 4},       {"binData", 5},    {"undefined", 6},
                  {"objectId", 7},    {"bool", 8},       {"date", 9},
                  {"null", 10},       {"regex", 11},     {"dbPointer", 12},
                  {"javascript", 13}, {"symbol", 14},    {"javascriptWithScope", 15},
                  {"int", 16},        {"timestamp", 17}, {"long", 18},
                  {"decimal", 19},    {"minKey", -1},    {"maxKey", 127}};
  if (name == "number") return kNumberBits;
  for (const auto& a : kAliases) {
    if (name == a.name) {
      return a.code == -1 ? kMinKeyBit : a.code == 127 ? kMaxKeyBit : 1u << a.code;
    }
  }
  return 0;
}

Status TypeBits(const bson_value_t* v, std::string_view path, uint32_t* bits) {
  if (v->value_type == BSON_TYPE_UTF8) {
    std::string name(v->value.v_utf8.str, v->value.v_utf8.len);
    uint32_t b = TypeAliasBits(name);
    if (b == 0) return Status::InvalidArgument("unknown type name for $type: " + name, path);
    *bits |= b;
    return Status::OK();
  }
  if (IsNumber(v)) {
    int64_t code;
    if (!WholeInt64(v, &code) || !((code >= 1 && code <= 19) || code == -1 || code == 127)) {
      return Status::InvalidArgument("invalid numerical type code for $type", path);
    }
    *bits |= code == -1 ? kMinKeyBit : code == 127 ? kMaxKeyBit : 1u << code;
    return Status::OK();
  }
  return Status::InvalidArgument("$type needs a type name, a type number or an array of them",
                                 path);
}

Status ParseType(const bson_iter_t* op, std::string_view path, Node* pred) {
  const bson_value_t* v = bson_iter_value(const_cast<bson_iter_t*>(op));
  if (v->value_type != BSON_TYPE_ARRAY) return TypeBits(v, path, &pred->types);
  bson_iter_t arr;
  if (!bson_iter_recurse(op, &arr)) return Status::InvalidArgument("bad $type array", path);
  while (bson_iter_next(&arr))
    MMDOC_RETURN_IF_ERROR(TypeBits(bson_iter_value(&arr), path, &pred->types));
  if (pred->types == 0) return Status::InvalidArgument("$type needs at least one type", path);
  return Status::OK();
}

// ---- $size, $mod

Status ParseSize(const bson_value_t* v, std::string_view path, Node* pred) {
  if (!IsNumber(v)) return Status::InvalidArgument("$size needs a number", path);
  int64_t n;
  if (!WholeInt64(v, &n)) return Status::InvalidArgument("$size needs a whole number", path);
  if (n < 0) return Status::InvalidArgument("$size may not be negative", path);
  pred->size = n;
  return Status::OK();
}

Status ParseMod(const bson_iter_t* op, std::string_view path, Node* pred) {
  bson_iter_t arr;
  if (!BSON_ITER_HOLDS_ARRAY(op) || !bson_iter_recurse(op, &arr)) {
    return Status::InvalidArgument("$mod needs an array [divisor, remainder]", path);
  }
  int64_t parts[2];
  int n = 0;
  while (bson_iter_next(&arr)) {
    if (n == 2) return Status::InvalidArgument("$mod has too many elements", path);
    const bson_value_t* v = bson_iter_value(&arr);
    const char* what = n == 0 ? "divisor" : "remainder";
    if (!IsNumber(v))
      return Status::InvalidArgument(std::string("$mod ") + what + " is not a number", path);
    if (!TruncatedInt64(v, &parts[n])) {
      return Status::InvalidArgument(
          std::string("$mod ") + what + " is NaN, infinite or out of range", path);
    }
    n++;
  }
  if (n < 2) return Status::InvalidArgument("$mod needs two elements [divisor, remainder]", path);
  if (parts[0] == 0) return Status::InvalidArgument("$mod divisor cannot be 0", path);
  pred->divisor = parts[0];
  pred->remainder = parts[1];
  return Status::OK();
}

// ---- operators of one field

Result<std::unique_ptr<Node>> ParseDoc(bson_iter_t* it);
Status ParseOperators(std::string_view path, bson_iter_t* ops, Node* and_node);

// Whether a document (what `it` holds) has a first key that starts with '$'
// and is not a DBRef (compared as a value, as MongoDB does).
bool FirstKeyIsOperator(const bson_iter_t* it) {
  bson_iter_t sub;
  if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &sub)) return false;
  return bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$' && !DbRefKey(&sub, "");
}

bool FirstKeyIs(const bson_iter_t* it, std::string_view key) {
  bson_iter_t sub;
  if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &sub)) return false;
  return bson_iter_next(&sub) && Key(&sub) == key;
}

// Top-level operators: a $elemMatch whose document starts with one of these
// is a sub-filter (MongoDB's rule), not the operator form.
bool IsTopLevelOperator(std::string_view name) {
  return name == "$and" || name == "$or" || name == "$nor" || IsMongoOperator(name);
}

Status ParseElemMatch(std::string_view path, const bson_iter_t* op, Node* pred) {
  const bson_value_t* v = bson_iter_value(const_cast<bson_iter_t*>(op));
  if (v->value_type == BSON_TYPE_REGEX) {
    // {$elemMatch: {$regex: ...}} as libbson's JSON reader delivers it.
    auto re = RegexPred(path, v);
    if (!re.ok()) return re.status();
    auto node = std::make_unique<Node>();
    node->children.push_back(std::move(re).value());
    pred->elem_values = true;
    pred->children.push_back(std::move(node));
    return Status::OK();
  }
  bson_iter_t sub;
  if (!BSON_ITER_HOLDS_DOCUMENT(op) || !bson_iter_recurse(op, &sub)) {
    return Status::InvalidArgument("$elemMatch needs an object", path);
  }
  bson_iter_t peek = sub;
  if (bson_iter_next(&peek) && bson_iter_key(&peek)[0] == '$' && !IsTopLevelOperator(Key(&peek))) {
    // {$elemMatch: {$gt: 1, $lt: 5}}: each operator on the element itself.
    auto node = std::make_unique<Node>();
    MMDOC_RETURN_IF_ERROR(ParseOperators(path, &sub, node.get()));
    pred->elem_values = true;
    pred->children.push_back(std::move(node));
    return Status::OK();
  }
  // {$elemMatch: {x: 1, y: {$gt: 2}}}: a filter over each element.
  auto node = ParseDoc(&sub);
  if (!node.ok()) return node.status();
  pred->children.push_back(std::move(node).value());
  return Status::OK();
}

// $all: an equality (or regex) per element, ANDed into and_node; or, when
// the first element is {$elemMatch: ...}, all must be and each is one.
// [] matches nothing (an $or of no branches).
Status ParseAll(std::string_view path, const bson_iter_t* op, Node* and_node) {
  bson_iter_t arr;
  if (!BSON_ITER_HOLDS_ARRAY(op) || !bson_iter_recurse(op, &arr)) {
    return Status::InvalidArgument("$all needs an array", path);
  }
  bson_iter_t peek = arr;
  if (!bson_iter_next(&peek)) {
    auto none = std::make_unique<Node>();
    none->kind = Node::kOr;
    and_node->children.push_back(std::move(none));
    return Status::OK();
  }
  const bool elem_match = FirstKeyIs(&peek, "$elemMatch");
  while (bson_iter_next(&arr)) {
    if (elem_match) {
      bson_iter_t sub;
      if (!FirstKeyIs(&arr, "$elemMatch") || !bson_iter_recurse(&arr, &sub)) {
        return Status::InvalidArgument(
            "$all with $elemMatch needs every element to be {$elemMatch: ...}", path);
      }
      bson_iter_t count = sub;
      bson_iter_next(&count);
      if (bson_iter_next(&count)) {
        return Status::InvalidArgument("$all: an element {$elemMatch: ...} has other keys", path);
      }
      MMDOC_RETURN_IF_ERROR(ParseOperators(path, &sub, and_node));
      continue;
    }
    MMDOC_RETURN_IF_ERROR(AddValuePred(path, bson_iter_value(&arr), and_node));
  }
  return Status::OK();
}

// $not: /re/ or {$op: ..., ...}: the negation of the operators together.
Status ParseNot(std::string_view path, const bson_iter_t* op, Node* and_node) {
  auto inner = std::make_unique<Node>();  // kAnd
  const bson_value_t* v = bson_iter_value(const_cast<bson_iter_t*>(op));
  if (v->value_type == BSON_TYPE_REGEX) {
    auto pred = RegexPred(path, v);
    if (!pred.ok()) return pred.status();
    inner->children.push_back(std::move(pred).value());
  } else {
    bson_iter_t sub;
    if (!BSON_ITER_HOLDS_DOCUMENT(op) || !bson_iter_recurse(op, &sub)) {
      return Status::InvalidArgument("$not needs a regex or a document of operators", path);
    }
    bson_iter_t peek = sub;
    if (!bson_iter_next(&peek)) return Status::InvalidArgument("$not cannot be empty", path);
    if (!FirstKeyIsOperator(op)) {
      return Status::InvalidArgument("$not needs a regex or a document of operators", path);
    }
    MMDOC_RETURN_IF_ERROR(ParseOperators(path, &sub, inner.get()));
  }
  auto nor = std::make_unique<Node>();
  nor->kind = Node::kNor;
  nor->children.push_back(std::move(inner));
  and_node->children.push_back(std::move(nor));
  return Status::OK();
}

// {path: {$op: v, ...}}: one predicate per operator, ANDed.
Status ParseOperators(std::string_view path, bson_iter_t* ops, Node* and_node) {
  // $regex and $options make one predicate, wherever each sits.
  bson_value_t regex, options;
  bool has_regex = false, has_options = false;
  bson_iter_t scan = *ops;
  while (bson_iter_next(&scan)) {
    if (Key(&scan) == "$regex") {
      regex = *bson_iter_value(&scan);
      has_regex = true;
    } else if (Key(&scan) == "$options") {
      options = *bson_iter_value(&scan);
      has_options = true;
    }
  }
  if (has_options && !has_regex) return Status::InvalidArgument("$options needs a $regex", path);
  if (has_regex) {
    auto pred = ParseRegexOp(path, &regex, has_options ? &options : nullptr);
    if (!pred.ok()) return pred.status();
    and_node->children.push_back(std::move(pred).value());
  }
  while (bson_iter_next(ops)) {
    std::string_view name = Key(ops);
    if (name.empty() || name[0] != '$') {
      return Status::InvalidArgument("cannot mix operators and fields in the filter on", path);
    }
    if (name == "$regex" || name == "$options") continue;  // above
    if (name == "$all") {
      MMDOC_RETURN_IF_ERROR(ParseAll(path, ops, and_node));
      continue;
    }
    if (name == "$not") {
      MMDOC_RETURN_IF_ERROR(ParseNot(path, ops, and_node));
      continue;
    }
    auto pred = NewPred(path, Node::kEq);
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
          const bson_value_t* e = bson_iter_value(&arr);
          if (e->value_type == BSON_TYPE_REGEX) {
            auto re = CompileRegexValue(e);
            if (!re.ok()) return Status::InvalidArgument(re.status().message(), path);
            pred->regexes.push_back(std::move(re).value());
            continue;
          }
          MMDOC_RETURN_IF_ERROR(CheckOperand(e, path));
          pred->operands.push_back(Value::FromBsonValue(e));
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
      case Node::kType:
        MMDOC_RETURN_IF_ERROR(ParseType(ops, path, pred.get()));
        break;
      case Node::kSize:
        MMDOC_RETURN_IF_ERROR(ParseSize(v, path, pred.get()));
        break;
      case Node::kMod:
        MMDOC_RETURN_IF_ERROR(ParseMod(ops, path, pred.get()));
        break;
      case Node::kElemMatch:
        MMDOC_RETURN_IF_ERROR(ParseElemMatch(path, ops, pred.get()));
        break;
      case Node::kRegex:
        break;  // handled above
      default:
        // {$eq: /re/} compares regex values (MongoDB); $ne and the ranges
        // refuse one, as MongoDB does.
        if (v->value_type == BSON_TYPE_REGEX && pred->op != Node::kEq) {
          return Status::InvalidArgument("cannot compare a regular expression with " +
                                             std::string(name) + " (use $not or $regex)",
                                         path);
        }
        MMDOC_RETURN_IF_ERROR(CheckOperand(v, path));
        pred->operand = Value::FromBsonValue(v);
        break;
    }
    and_node->children.push_back(std::move(pred));
  }
  return Status::OK();
}

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
    // any other value (documents included) is an equality, and a regex
    // value is a pattern to match.
    if (FirstKeyIsOperator(it)) {
      bson_iter_t sub;
      bson_iter_recurse(it, &sub);
      MMDOC_RETURN_IF_ERROR(ParseOperators(key, &sub, node.get()));
      continue;
    }
    MMDOC_RETURN_IF_ERROR(AddValuePred(key, bson_iter_value(it), node.get()));
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

// Calls fn(element) for each element of array value v; true when one
// returned true.
template <typename Fn>
bool AnyElement(const bson_value_t* v, Fn&& fn) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) return false;
  while (bson_iter_next(&it)) {
    if (fn(bson_iter_value(&it))) return true;
  }
  return false;
}

// {$gt/$gte: MinKey} or {$lt/$lte: MaxKey}: true of every value, a missing
// path and [] among them (both keyed as null, inside the bounds).
bool MatchesAll(Node::Op op, const bson_value_t* operand) {
  const bson_type_t t = operand->value_type;
  return ((op == Node::kGt || op == Node::kGte) && t == BSON_TYPE_MINKEY) ||
         ((op == Node::kLt || op == Node::kLte) && t == BSON_TYPE_MAXKEY);
}

bool IsEmptyArray(const bson_value_t* v) {
  return v->value_type == BSON_TYPE_ARRAY && v->value.v_doc.data_len <= 5;
}

// Whether a value reached at the end of the path (nullptr: missing)
// satisfies a positive predicate ($eq, ranges, one $in value).
bool Holds(const bson_value_t* v, Node::Op op, const bson_value_t* operand) {
  if (v == nullptr) {
    // Missing compares as null.
    bool null_op = operand->value_type == BSON_TYPE_NULL;
    return (null_op && (op == Node::kEq || op == Node::kGte || op == Node::kLte)) ||
           MatchesAll(op, operand);
  }
  if (IsEmptyArray(v) && MatchesAll(op, operand)) return true;
  // A range compares a whole array only with an array operand: otherwise
  // the $gt MinKey / $lt MaxKey "everything" rule would match arrays as a
  // whole, which their element keys cannot show to an index.
  bool whole = op == Node::kEq ? Equal(v, operand)
               : v->value_type == BSON_TYPE_ARRAY && operand->value_type != BSON_TYPE_ARRAY
                   ? false
                   : RangeHolds(v, op, operand);
  if (whole) return true;
  if (v->value_type != BSON_TYPE_ARRAY) return false;
  return AnyElement(v, [op, operand](const bson_value_t* e) {
    return op == Node::kEq ? Equal(e, operand) : RangeHolds(e, op, operand);
  });
}

// A regex against one value: a string or symbol it matches, or a regex
// value with the same pattern and options (MongoDB).
bool RegexHolds(const Regex& re, const bson_value_t* v) {
  switch (v->value_type) {
    case BSON_TYPE_UTF8:
      return re.Matches(std::string_view(v->value.v_utf8.str, v->value.v_utf8.len));
    case BSON_TYPE_SYMBOL:
      return re.Matches(std::string_view(v->value.v_symbol.symbol, v->value.v_symbol.len));
    case BSON_TYPE_REGEX:
      return re.pattern() == v->value.v_regex.regex &&
             re.options() == (v->value.v_regex.options ? v->value.v_regex.options : "");
    default:
      return false;
  }
}

// C++'s remainder, without the overflow of INT64_MIN % -1.
int64_t SafeMod(int64_t a, int64_t d) { return d == -1 ? 0 : a % d; }

bool MatchValue(const Node& n, const bson_value_t* v);
bool MatchNode(const Node& n, const uint8_t* doc, size_t len);

// Whether the element-wise `$in` (its values or regexes) holds for one
// value as a whole.
bool InHoldsSingle(const Node& n, const bson_value_t* v) {
  for (const Value& o : n.operands) {
    if (Equal(v, o.get())) return true;
  }
  for (const auto& re : n.regexes) {
    if (RegexHolds(*re, v)) return true;
  }
  return false;
}

// A predicate on one whole value, never through its elements (MongoDB's
// matchesSingleElement): what the operator form of $elemMatch applies to
// each element, and what $type/$regex/$mod apply to a value and to each of
// an array's elements.
bool SingleHolds(const Node& n, const bson_value_t* v) {
  switch (n.op) {
    case Node::kEq:
      return Equal(v, n.operand.get());
    case Node::kNe:
      return !Equal(v, n.operand.get());
    case Node::kGt:
    case Node::kGte:
    case Node::kLt:
    case Node::kLte:
      return RangeHolds(v, n.op, n.operand.get());
    case Node::kIn:
      return InHoldsSingle(n, v);
    case Node::kNin:
      return !InHoldsSingle(n, v);
    case Node::kExists:
      return n.exists;
    case Node::kRegex:
      return RegexHolds(*n.regexes[0], v);
    case Node::kType:
      return (n.types & TypeBit(v->value_type)) != 0;
    case Node::kSize: {
      if (v->value_type != BSON_TYPE_ARRAY) return false;
      int64_t count = 0;
      AnyElement(v, [&count](const bson_value_t*) {
        count++;
        return false;
      });
      return count == n.size;
    }
    case Node::kMod: {
      int64_t x;
      return IsNumber(v) && TruncatedInt64(v, &x) && SafeMod(x, n.divisor) == n.remainder;
    }
    case Node::kElemMatch: {
      if (v->value_type != BSON_TYPE_ARRAY) return false;
      const Node& sub = *n.children[0];
      if (n.elem_values)
        return AnyElement(v, [&sub](const bson_value_t* e) { return MatchValue(sub, e); });
      return AnyElement(v, [&sub](const bson_value_t* e) {
        // A document, or an array read as one ({"0": ..., "1": ...}).
        if (e->value_type != BSON_TYPE_DOCUMENT && e->value_type != BSON_TYPE_ARRAY) return false;
        return MatchNode(sub, e->value.v_doc.data, e->value.v_doc.data_len);
      });
    }
  }
  return false;
}

// A filter node against one whole value (the operator form of $elemMatch).
bool MatchValue(const Node& n, const bson_value_t* v) {
  switch (n.kind) {
    case Node::kAnd:
      for (const auto& c : n.children) {
        if (!MatchValue(*c, v)) return false;
      }
      return true;
    case Node::kOr:
      for (const auto& c : n.children) {
        if (MatchValue(*c, v)) return true;
      }
      return false;
    case Node::kNor:
      for (const auto& c : n.children) {
        if (MatchValue(*c, v)) return false;
      }
      return true;
    case Node::kPred:
      return SingleHolds(n, v);
  }
  return false;
}

// $in against a value the path reaches (nullptr: missing): a value equal
// as $eq is, or a regex that matches the value or one of its elements.
bool InPathHolds(const Node& n, const bson_value_t* v) {
  for (const Value& o : n.operands) {
    if (Holds(v, Node::kEq, o.get())) return true;
  }
  if (v == nullptr || n.regexes.empty()) return false;
  auto any_regex = [&n](const bson_value_t* e) {
    for (const auto& re : n.regexes) {
      if (RegexHolds(*re, e)) return true;
    }
    return false;
  };
  return any_regex(v) || (v->value_type == BSON_TYPE_ARRAY && AnyElement(v, any_regex));
}

// A positive predicate against what the path reaches, for any of the
// values reached (nullptr: missing).
bool PathHolds(const Node& n, const bson_value_t* v) {
  switch (n.op) {
    case Node::kEq:
    case Node::kGt:
    case Node::kGte:
    case Node::kLt:
    case Node::kLte:
      return Holds(v, n.op, n.operand.get());
    case Node::kIn:
      return InPathHolds(n, v);
    case Node::kRegex:
    case Node::kType:
    case Node::kMod:
      // The value, or (MongoDB's array rule) one of its elements.
      if (v == nullptr) return false;
      if (SingleHolds(n, v)) return true;
      return v->value_type == BSON_TYPE_ARRAY &&
             AnyElement(v, [&n](const bson_value_t* e) { return SingleHolds(n, e); });
    case Node::kSize:
    case Node::kElemMatch:
      return v != nullptr && SingleHolds(n, v);  // the array itself only
    default:
      return false;  // negations: MatchNode
  }
}

bool AnyHolds(const uint8_t* doc, size_t len, const Node& n) {
  auto fn = [&n](const bson_value_t* v) { return PathHolds(n, v); };
  return VisitPath<DeadEnd::kNothing>(doc, len, n.path, fn);
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
    case Node::kNe: {
      auto eq = [&n](const bson_value_t* v) { return Holds(v, Node::kEq, n.operand.get()); };
      return !VisitPath<DeadEnd::kNothing>(doc, len, n.path, eq);
    }
    case Node::kNin: {
      auto in = [&n](const bson_value_t* v) { return InPathHolds(n, v); };
      return !VisitPath<DeadEnd::kNothing>(doc, len, n.path, in);
    }
    case Node::kExists: {
      auto present = [](const bson_value_t* v) { return v != nullptr; };
      return VisitPath<DeadEnd::kNothing>(doc, len, n.path, present) == n.exists;
    }
    default:
      return AnyHolds(doc, len, n);
  }
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
  // One interval (an $eq, a range) is already sorted and merged: no second
  // vector, which every query's planning paid for each bound.
  if (v.size() == 1 && NonEmpty(v[0])) return v;
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

// All keys of one canonical type rank.
KeyInterval Bracket(int rank) {
  KeyInterval i;
  i.lo.assign(1, KeyRankByte(rank));
  i.hi.assign(1, KeyRankByte(rank + 1));
  i.hi_inclusive = false;
  return i;
}

// Keys of the values a regex matches: strings (and symbols) starting with
// its literal prefix (all strings when it has none: "i", unanchored, ...),
// and the regex value itself.
void RegexBounds(const Regex& re, Intervals* out) {
  std::string prefix = re.LiteralPrefix();
  if (prefix.empty()) {
    out->push_back(Bracket(kRankString));
  } else {
    // The keys of strings starting with prefix start with its key less the
    // terminator (escaping works byte by byte); they end before the least
    // byte string above all such: drop trailing 0xFF bytes, add one to the
    // last (the rank byte, first, is never 0xFF).
    bson_value_t v;
    v.value_type = BSON_TYPE_UTF8;
    v.value.v_utf8.str = prefix.data();
    v.value.v_utf8.len = static_cast<uint32_t>(prefix.size());
    KeyInterval i;
    AppendKey(&v, &i.lo);
    i.lo.resize(i.lo.size() - 2);  // the 0x00 0x00 terminator
    i.hi = i.lo;
    while (static_cast<unsigned char>(i.hi.back()) == 0xFF) i.hi.pop_back();
    i.hi.back() = static_cast<char>(static_cast<unsigned char>(i.hi.back()) + 1);
    i.hi_inclusive = false;
    out->push_back(std::move(i));
  }
  bson_value_t rv;
  rv.value_type = BSON_TYPE_REGEX;
  rv.value.v_regex.regex = const_cast<char*>(re.pattern().c_str());
  rv.value.v_regex.options = const_cast<char*>(re.options().c_str());
  out->push_back(PointOf(&rv));
}

std::optional<Intervals> ValueBounds(const Node& n);

// Keys a document matching predicate n has in an index on n's path (n on
// the values the path reaches, as PathHolds; or on one whole value, as
// SingleHolds: the same bounds serve both, since an array's element keys
// are the index keys of the array). nullopt: no bounds.
std::optional<Intervals> PredBounds(const Node& n) {
  Intervals out;
  switch (n.op) {
    case Node::kEq:
      EqualityBounds(n.operand.get(), &out);
      return Normalize(std::move(out));
    case Node::kIn:
      for (const Value& v : n.operands) EqualityBounds(v.get(), &out);
      for (const auto& re : n.regexes) RegexBounds(*re, &out);
      return Normalize(std::move(out));
    case Node::kRegex:
      RegexBounds(*n.regexes[0], &out);
      return Normalize(std::move(out));
    case Node::kType:
      // An array's keys are its elements': no bounds for "array".
      if (n.types & (1u << BSON_TYPE_ARRAY)) return std::nullopt;
      for (int t = 1; t <= 19; t++) {
        if (n.types & (1u << t)) out.push_back(Bracket(CanonicalRank(static_cast<bson_type_t>(t))));
      }
      if (n.types & kMinKeyBit) out.push_back(Bracket(kRankMinKey));
      if (n.types & kMaxKeyBit) out.push_back(Bracket(kRankMaxKey));
      return Normalize(std::move(out));
    case Node::kMod:
      return Intervals{Bracket(kRankNumber)};
    case Node::kElemMatch:
      // The operator form: the element that matches is one key, so the
      // bounds of its operators intersect even in a multikey index.
      if (n.elem_values) return ValueBounds(*n.children[0]);
      return std::nullopt;
    case Node::kGt:
    case Node::kGte:
    case Node::kLt:
    case Node::kLte:
      break;
    default:
      return std::nullopt;  // $ne, $nin, $exists, $size
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

// Keys of one whole value matching n (the operator form of $elemMatch):
// ANDed bounds intersect, since they all hold for that one value.
std::optional<Intervals> ValueBounds(const Node& n) {
  switch (n.kind) {
    case Node::kPred:
      // A nested $elemMatch holds for an element that is itself an array,
      // whose key is that whole array, not the elements it looks at.
      if (n.op == Node::kElemMatch) return std::nullopt;
      return PredBounds(n);
    case Node::kNor:
      return std::nullopt;
    case Node::kOr: {
      Intervals all;
      for (const auto& c : n.children) {
        auto b = ValueBounds(*c);
        if (!b) return std::nullopt;
        all.insert(all.end(), b->begin(), b->end());
      }
      return Normalize(std::move(all));
    }
    case Node::kAnd: {
      std::optional<Intervals> acc;
      for (const auto& c : n.children) {
        auto b = ValueBounds(*c);
        if (!b) continue;
        acc = acc ? Intersect(*acc, *b) : std::move(b);
      }
      return acc;
    }
  }
  return std::nullopt;
}

bool ContainsKey(const Intervals& v, const std::string& k) {
  for (const KeyInterval& i : v) {
    if (!i.lo.empty() && (k < i.lo || (k == i.lo && !i.lo_inclusive))) continue;
    if (!i.hi.empty() && (k > i.hi || (k == i.hi && !i.hi_inclusive))) continue;
    return true;
  }
  return false;
}

std::optional<Intervals> NodeBounds(const Node& n, std::string_view path, bool multikey);

// {a: {$elemMatch: {x: ...}}} on an index on "a.x": the matching element
// is a document whose keys at "x" are among the document's keys at "a.x",
// so the sub-filter's bounds on "x" hold. Not when the rest of the path has
// a numeric part (positions mean something else inside an element), nor
// when the bounds hold null: an element that is an array (matched as a
// document {"0": ...}) has no "x", so it matches only as null, a key the
// document need not have at "a.x".
std::optional<Intervals> ElemMatchDocBounds(const Node& n, std::string_view path, bool multikey) {
  if (path.size() <= n.path.size() + 1 || path.compare(0, n.path.size(), n.path) != 0 ||
      path[n.path.size()] != '.') {
    return std::nullopt;
  }
  std::string_view rest = path.substr(n.path.size() + 1);
  for (size_t start = 0; start <= rest.size();) {
    size_t dot = rest.find('.', start);
    if (dot == std::string_view::npos) dot = rest.size();
    if (IsNumeric(rest.substr(start, dot - start))) return std::nullopt;
    start = dot + 1;
  }
  auto b = NodeBounds(*n.children[0], rest, multikey);
  if (!b) return std::nullopt;
  std::string null_key;
  AppendNullKey(&null_key);
  if (ContainsKey(*b, null_key)) return std::nullopt;
  return b;
}

std::optional<Intervals> NodeBounds(const Node& n, std::string_view path, bool multikey) {
  switch (n.kind) {
    case Node::kPred:
      if (n.op == Node::kElemMatch && !n.elem_values) return ElemMatchDocBounds(n, path, multikey);
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

// ---------------------------------------------------------------- exactness

// An operand whose bounds hold exactly the values it matches: its key
// keeps CompareValues' order and equality (keys.cc; a decimal128 is keyed
// as a double), and it is none of null (its key is also []'s and
// missing's), NaN, MinKey/MaxKey (ranges past their bracket), an array or
// a document.
bool ExactOperand(const bson_value_t* v) {
  switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_UTF8:
      return true;
    case BSON_TYPE_DOUBLE:
      return !std::isnan(v->value.v_double);
    default:
      return false;
  }
}

// What the predicates on one path are, for Filter::BoundsAreExact.
struct PathUse {
  bool point = false;   // an $eq or $in: its points are the bounds
  bool num_lo = false;  // a $gt/$gte on a number
  bool num_hi = false;  // a $lt/$lte on a number
};

bool ExactNode(const Node& n, const std::vector<std::string_view>& paths,
               std::vector<PathUse>* use) {
  if (n.kind == Node::kAnd) {
    for (const auto& c : n.children) {
      if (!ExactNode(*c, paths, use)) return false;
    }
    return true;
  }
  if (n.kind != Node::kPred) return false;
  // A dotted path may pass through arrays and numeric parts, which keys
  // and matching read differently.
  if (n.path.find('.') != std::string::npos) return false;
  auto at = std::find(paths.begin(), paths.end(), std::string_view(n.path));
  if (at == paths.end()) return false;
  PathUse& u = (*use)[at - paths.begin()];
  switch (n.op) {
    case Node::kEq:
      u.point = true;
      return ExactOperand(n.operand.get());
    case Node::kIn:
      u.point = true;
      if (!n.regexes.empty()) return false;
      for (const Value& v : n.operands) {
        if (!ExactOperand(v.get())) return false;
      }
      return true;
    case Node::kGt:
    case Node::kGte:
      if (IsNumber(n.operand.get())) u.num_lo = true;
      return ExactOperand(n.operand.get());
    case Node::kLt:
    case Node::kLte:
      if (IsNumber(n.operand.get())) u.num_hi = true;
      return ExactOperand(n.operand.get());
    default:
      return false;
  }
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
  f.source_.assign(reinterpret_cast<const char*>(bson_get_data(filter)), filter->len);
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

bool Filter::BoundsAreExact(const std::vector<std::string_view>& paths) const {
  if (root_ == nullptr) return false;
  std::vector<PathUse> use(paths.size());
  if (!ExactNode(*root_, paths, &use)) return false;
  for (const PathUse& u : use) {
    // [number bracket start, x) holds NaN's key, which no range matches;
    // a lower bound or a point leaves it out.
    if (u.num_hi && !u.num_lo && !u.point) return false;
  }
  return true;
}

}  // namespace mmdoc::engine
