// Update (update.h): operator updates and replacements, and the document
// an upsert inserts; and beside it Projection, PrepareForInsert and
// CheckFieldNames (query.h), which share its path tree.
//
// A stored document has no '$' keys and no field name twice in one
// (sub)document, at any depth: CheckFieldNames, run on what Insert and
// Replace store, on replacements and on every value an operator stores
// ($set, $setOnInsert, $min, $max, $push, $addToSet). An operator update of
// such a document keeps it so (each path is applied once, in place or
// appended when absent), so its results are not walked again.
//
// Operator updates are applied in one pass over the original document: the
// update's paths form a tree (PathTree), and Rewrite copies the document
// element by element, replacing, dropping or descending where the tree says,
// then appends the fields the tree still holds (in MongoDB's order: see
// SortChildren) at the end of their subdocument. So untouched fields keep
// their order and bytes. What one pass cannot see is worked out first
// (ApplyState): the values $rename moves and the element the positional $
// names.
//
// Arrays: a numeric path part addresses an array element ("a.1"); $set past
// the end pads with nulls, as MongoDB does. Operators that create a field
// ($set, $inc, $mul, $min, $max, $currentDate, $push, $addToSet, and
// $setOnInsert when inserting) through a scalar are InvalidArgument; those
// that only remove ($unset, $pop, $pull, $pullAll) are no-ops on a missing
// field or through anything absent (MongoDB's "non-viable path" rule).
// $inc and $mul: int32 with int32 stays int32 unless the result overflows
// (then int64); with an int64 the result is int64 (overflow is
// InvalidArgument); with a double it is a double. $mul of a missing field
// creates it as 0 of the multiplier's type; $inc creates it as the delta.
// Decimal128 is not supported by $inc or $mul.
// Values are stored as given, regex values included (MongoDB stores them;
// only a filter would read one as a pattern, and filters refuse them).
#include "update.h"

#include <bson/bson.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "query.h"
#include "query_path.h"
#include "regex.h"
#include "storage/coding.h"

namespace mmdoc::engine {
namespace {

std::string_view Key(const bson_iter_t* it) {
  return std::string_view(bson_iter_key(it), bson_iter_key_len(it));
}

Status Duplicate(std::string_view name) {
  return Status::InvalidArgument("duplicate field name", name.empty() ? "\"\"" : name);
}

// Keys of one document level up to this many are compared with each key
// before them; a level with more is checked once more by sorting its keys.
constexpr size_t kLinearKeys = 16;

// Whether the document `level` iterates (from its start) repeats a key.
// Sorts views of its keys: on the stack for up to 256 keys (no allocation
// for any but very wide documents). Not recursive, so the buffer is never
// on the stack twice.
Status CheckWideLevel(bson_iter_t level) {
  constexpr size_t kOnStack = 256;
  std::string_view stack_keys[kOnStack];
  std::vector<std::string_view> heap_keys;
  size_t n = 0;
  while (bson_iter_next(&level)) {
    if (n < kOnStack) {
      stack_keys[n] = Key(&level);
    } else {
      if (heap_keys.empty()) heap_keys.assign(stack_keys, stack_keys + n);
      heap_keys.push_back(Key(&level));
    }
    n++;
  }
  std::string_view* begin = heap_keys.empty() ? stack_keys : heap_keys.data();
  std::string_view* end = begin + n;
  std::sort(begin, end);
  std::string_view* d = std::adjacent_find(begin, end);
  return d == end ? Status::OK() : Duplicate(*d);
}

// The '$' and duplicate checks of CheckFieldNames over the container `it`
// iterates (an array's keys are positions, not names: not compared). Below
// the top level a DBRef's keys are allowed, as MongoDB stores them.
Status CheckNamesIn(bson_iter_t* it, bool is_array, bool top) {
  const bson_iter_t start = *it;
  std::string_view first[kLinearKeys];
  size_t n = 0;  // keys in first[]; past kLinearKeys, CheckWideLevel ran
  std::string_view prev;
  while (bson_iter_next(it)) {
    const std::string_view key = Key(it);
    if (!key.empty() && key[0] == '$' && (top || is_array || !DbRefKey(it, prev))) {
      return Status::InvalidArgument("field names must not start with '$'", key);
    }
    prev = key;
    if (!is_array && n <= kLinearKeys) {
      if (n < kLinearKeys) {
        for (size_t i = 0; i < n; i++) {
          if (first[i] == key) return Duplicate(key);
        }
        first[n] = key;
      } else {
        MMDOC_RETURN_IF_ERROR(CheckWideLevel(start));
      }
      n++;
    }
    bson_iter_t child;
    const bool array = BSON_ITER_HOLDS_ARRAY(it);
    if ((array || BSON_ITER_HOLDS_DOCUMENT(it)) && bson_iter_recurse(it, &child)) {
      MMDOC_RETURN_IF_ERROR(CheckNamesIn(&child, array, false));
    } else if (BSON_ITER_HOLDS_CODEWSCOPE(it)) {  // a scope is a stored document too
      uint32_t code_len = 0, scope_len = 0;
      const uint8_t* scope = nullptr;
      bson_iter_codewscope(it, &code_len, &scope_len, &scope);
      if (scope != nullptr && bson_iter_init_from_data(&child, scope, scope_len)) {
        MMDOC_RETURN_IF_ERROR(CheckNamesIn(&child, false, false));
      }
    }
  }
  return Status::OK();
}

// CheckFieldNames' common case without libbson's per-element checks (884
// of a batch-1 insert's 11,552 instructions went to them): true when the (sub)document of `len`
// bytes at `p`, at nesting level `depth`, is well formed, holds only the
// types below, and has no name starting with '$' and, unless an array, no
// name twice among at most kLinearKeys. False means "not sure", never
// "bad": the libbson walk then decides and names the problem. Every
// element the libbson walk would see is seen here, so true is its answer.
bool PlainNames(const uint8_t* p, size_t len, bool is_array, int depth) {
  if (depth > kMaxNestingDepth || len < 5 || storage::DecodeFixed32(p) != len || p[len - 1] != 0)
    return false;
  const size_t end = len - 1;  // the terminating NUL
  std::string_view first[kLinearKeys];
  size_t n = 0;
  size_t i = 4;
  while (i < end) {
    const uint8_t type = p[i++];
    const auto* nul = static_cast<const uint8_t*>(std::memchr(p + i, 0, end - i));
    if (nul == nullptr) return false;
    const std::string_view key(reinterpret_cast<const char*>(p + i), nul - (p + i));
    i += key.size() + 1;
    if (!key.empty() && key[0] == '$') return false;
    if (!is_array) {
      if (n == kLinearKeys) return false;
      for (size_t k = 0; k < n; k++) {
        if (first[k] == key) return false;
      }
      first[n++] = key;
    }
    const size_t rest = end - i;
    size_t size;
    switch (type) {
      case BSON_TYPE_DOUBLE:
      case BSON_TYPE_DATE_TIME:
      case BSON_TYPE_TIMESTAMP:
      case BSON_TYPE_INT64:
        size = 8;
        break;
      case BSON_TYPE_INT32:
        size = 4;
        break;
      case BSON_TYPE_BOOL:
        size = 1;
        break;
      case BSON_TYPE_NULL:
      case BSON_TYPE_UNDEFINED:
      case BSON_TYPE_MINKEY:
      case BSON_TYPE_MAXKEY:
        size = 0;
        break;
      case BSON_TYPE_OID:
        size = 12;
        break;
      case BSON_TYPE_DECIMAL128:
        size = 16;
        break;
      case BSON_TYPE_UTF8:
      case BSON_TYPE_CODE:
      case BSON_TYPE_SYMBOL: {
        if (rest < 4) return false;
        const uint32_t l = storage::DecodeFixed32(p + i);
        if (l < 1 || l > rest - 4 || p[i + 4 + l - 1] != 0) return false;
        size = 4 + size_t{l};
        break;
      }
      case BSON_TYPE_DOCUMENT:
      case BSON_TYPE_ARRAY: {
        if (rest < 5) return false;
        const uint32_t l = storage::DecodeFixed32(p + i);
        if (l > rest || !PlainNames(p + i, l, type == BSON_TYPE_ARRAY, depth + 1)) return false;
        size = l;
        break;
      }
      default:  // binary, regex, DBPointer, code with scope: the libbson walk
        return false;
    }
    if (size > rest) return false;
    i += size;
  }
  return true;
}

// A value an operator stores: below the top level wherever it goes.
Status CheckValueNames(const bson_value_t* v) {
  if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) {
    return Status::OK();
  }
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
    return Status::InvalidArgument("invalid BSON document");
  }
  return CheckNamesIn(&it, v->value_type == BSON_TYPE_ARRAY, false);
}

// Nesting levels inside a value (a scalar is 0, {} is 1).
int ValueDepth(const bson_value_t* v) {
  if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) return 0;
  int deepest = 0;
  bson_iter_t it;
  if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
    while (bson_iter_next(&it)) deepest = std::max(deepest, ValueDepth(bson_iter_value(&it)));
  }
  return 1 + deepest;
}

std::string Bytes(const bson_t* b) {
  return std::string(reinterpret_cast<const char*>(bson_get_data(b)), b->len);
}

Status SizeOk(size_t size) {
  if (size > kMaxDocumentSize) {
    return Status::InvalidArgument("document is larger than 16 MiB (" + std::to_string(size) +
                                   " bytes)");
  }
  return Status::OK();
}

// Splits "a.b.c"; InvalidArgument for empty parts.
Status SplitPath(std::string_view path, std::vector<std::string>* parts) {
  parts->clear();
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string_view part = path.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (part.empty()) return Status::InvalidArgument("bad field path", path);
    parts->emplace_back(part);
    if (dot == std::string_view::npos) return Status::OK();
    start = dot + 1;
  }
}

// A value in a document, by view (bson_value_t itself carries an alignment
// attribute that standard containers warn about).
struct View {
  bson_value_t v;
};

// The operand of an operator as the one-element document {"": value}.
std::string OperandDoc(const bson_value_t* v) {
  bson_t b;
  bson_init(&b);
  bson_append_value(&b, "", 0, v);
  std::string s = Bytes(&b);
  bson_destroy(&b);
  return s;
}

// The paths of an update or projection as a tree, children in the order
// they were first named (an update's then sorted: SortChildren). A
// positional $ is a child named "$".
struct PathTree {
  enum Op {
    kNone,
    kSet,
    kUnset,
    kInc,
    kMul,
    kMin,
    kMax,
    kCurrentDate,
    kSetOnInsert,
    kPush,
    kAddToSet,
    kPop,
    kPull,
    kPullAll,
    kRenameFrom,  // the source of a $rename: removed when the value moves
    kRenameTo,    // its target: set to the value found at the source
  };
  // (Reset, below, gives each field its initial value again.)
  Op op = kNone;
  // The operand as the one-element document {"": value}, built from the
  // update's bytes; raw_type() and raw() are its element's type byte and
  // value bytes, for Apply's top-level splice. $push/$addToSet with $each:
  // the $each array.
  std::string value_doc;
  std::string path;
  std::vector<std::pair<std::string, std::unique_ptr<PathTree>>> children;

  // $push/$addToSet: value_doc holds an array of values to add ($each).
  bool each = false;
  // $push modifiers.
  bool has_slice = false;
  int64_t slice = 0;
  bool has_position = false;
  int64_t position = 0;
  int sort = 0;  // $sort: 1 / -1 on whole elements; 0: none or sort_fields
  std::vector<std::pair<std::string, int>> sort_fields;  // $sort: {f: 1, ...}
  int pop = 0;                                           // $pop: 1 (last) or -1 (first)
  bool timestamp = false;                                // $currentDate: a timestamp, not a date
  // $pull: equal to value_doc's value; a condition on the element
  // ({$gte: 6}: pull_filter on {"x": element}); or a query on elements
  // that are documents ({score: 8}: pull_filter on the element).
  enum PullKind { kPullEqual, kPullWrapped, kPullObject } pull_kind = kPullEqual;
  std::unique_ptr<Filter> pull_filter;

  uint8_t raw_type() const { return static_cast<uint8_t>(value_doc[4]); }
  std::string_view raw() const {
    // [len:4][type][""\0][value][\0]
    return std::string_view(value_doc).substr(6, value_doc.size() - 7);
  }
  // The operand (points into value_doc).
  bson_value_t value() const {
    bson_iter_t it;
    bson_iter_init_from_data(&it, reinterpret_cast<const uint8_t*>(value_doc.data()),
                             value_doc.size());
    bson_iter_next(&it);
    return *bson_iter_value(&it);
  }

  PathTree* Find(std::string_view name) const {
    for (const auto& c : children) {
      if (c.first == name) return c.second.get();
    }
    return nullptr;
  }
  // The child `name`, added when missing: taken from *pool when it has a
  // node (see Reset), allocated otherwise.
  PathTree* Child(std::string_view name, std::vector<std::unique_ptr<PathTree>>* pool = nullptr) {
    if (PathTree* c = Find(name)) return c;
    std::unique_ptr<PathTree> node;
    if (pool != nullptr && !pool->empty()) {
      node = std::move(pool->back());
      pool->pop_back();
    } else {
      node = std::make_unique<PathTree>();
    }
    children.emplace_back(std::string(name), std::move(node));
    return children.back().second.get();
  }

  // Back to a new node's state, keeping the memory of its strings and its
  // child list; its children, each reset, go to *pool for Child to reuse
  // (a writer parses an update per call: Update::ParseInto). Names every
  // field above: a field added there belongs here too.
  void Reset(std::vector<std::unique_ptr<PathTree>>* pool) {
    for (auto& c : children) {
      c.second->Reset(pool);
      pool->push_back(std::move(c.second));
    }
    children.clear();
    op = kNone;
    value_doc.clear();
    path.clear();
    each = false;
    has_slice = false;
    slice = 0;
    has_position = false;
    position = 0;
    sort = 0;
    sort_fields.clear();
    pop = 0;
    timestamp = false;
    pull_kind = kPullEqual;
    pull_filter.reset();
  }
};

// Adds `path` to the tree; InvalidArgument when it equals, contains or lies
// inside a path already there (MongoDB's "conflict" error).
// Gives a $set leaf its operand: the element `fields` is at, as the
// one-element document {"": value}. An element runs from its type byte
// (just before its key) to where the iterator found the next element
// (next_off; the subdocument's final NUL after the last one).
void SetOperand(const bson_iter_t& fields, size_t key_len, PathTree* leaf) {
  const char* key = bson_iter_key(&fields);
  const char* end = reinterpret_cast<const char*>(fields.raw) + fields.next_off;
  const char* value = key + key_len + 1;
  std::string& d = leaf->value_doc;
  const uint32_t len = static_cast<uint32_t>(4 + 2 + (end - value) + 1);
  d.resize(len);
  char* w = d.data();
  storage::EncodeFixed32(w, len);
  w[4] = key[-1];  // the element's type byte
  w[5] = '\0';     // its key, ""
  std::memcpy(w + 6, value, end - value);
  w[len - 1] = '\0';
}

// A value with no names inside it to check, and no depth.
bool IsScalar(bson_type_t t) { return t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY; }

Status AddPath(PathTree* root, std::string_view path, PathTree** leaf,
               std::vector<std::unique_ptr<PathTree>>* pool = nullptr) {
  std::vector<std::string> parts;
  if (path.find('.') == std::string_view::npos) {
    if (path.empty()) return Status::InvalidArgument("bad field path", path);
  } else {
    MMDOC_RETURN_IF_ERROR(SplitPath(path, &parts));
  }
  PathTree* n = root;
  for (size_t i = 0; i < std::max<size_t>(parts.size(), 1); i++) {
    n = n->Child(parts.empty() ? path : std::string_view(parts[i]), pool);
    if (n->op != PathTree::kNone) {
      return Status::InvalidArgument("conflicting update paths " + n->path + " and " +
                                     std::string(path));
    }
  }
  if (!n->children.empty()) {
    return Status::InvalidArgument("conflicting update paths", path);
  }
  n->path.assign(path);
  *leaf = n;
  return Status::OK();
}

bool IsNumber(bson_type_t t) {
  return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE;
}

double AsDouble(const bson_value_t* v) {
  return v->value_type == BSON_TYPE_DOUBLE  ? v->value.v_double
         : v->value_type == BSON_TYPE_INT64 ? static_cast<double>(v->value.v_int64)
                                            : static_cast<double>(v->value.v_int32);
}

// current + operand ($inc) or current * operand ($mul) with MongoDB's type
// promotion, into *out.
Status Arith(bool mul, const bson_value_t* current, const bson_value_t* operand,
             const std::string& path, bson_value_t* out) {
  const char* name = mul ? "$mul" : "$inc";
  bson_type_t a = current->value_type, b = operand->value_type;
  if (a == BSON_TYPE_DECIMAL128 || b == BSON_TYPE_DECIMAL128) {
    return Status::InvalidArgument(std::string(name) + " of a Decimal128 is not supported", path);
  }
  if (!IsNumber(a)) {
    return Status::InvalidArgument(std::string(name) + " on a non-number field", path);
  }
  if (a == BSON_TYPE_DOUBLE || b == BSON_TYPE_DOUBLE) {
    out->value_type = BSON_TYPE_DOUBLE;
    out->value.v_double =
        mul ? AsDouble(current) * AsDouble(operand) : AsDouble(current) + AsDouble(operand);
    return Status::OK();
  }
  int64_t x = a == BSON_TYPE_INT64 ? current->value.v_int64 : current->value.v_int32;
  int64_t y = b == BSON_TYPE_INT64 ? operand->value.v_int64 : operand->value.v_int32;
  int64_t r;
  if (mul ? __builtin_mul_overflow(x, y, &r) : __builtin_add_overflow(x, y, &r)) {
    return Status::InvalidArgument("integer overflow in " + std::string(name), path);
  }
  if (a == BSON_TYPE_INT32 && b == BSON_TYPE_INT32 && r >= INT32_MIN && r <= INT32_MAX) {
    out->value_type = BSON_TYPE_INT32;
    out->value.v_int32 = static_cast<int32_t>(r);
  } else {
    out->value_type = BSON_TYPE_INT64;
    out->value.v_int64 = r;
  }
  return Status::OK();
}

void Append(bson_t* out, std::string_view key, const bson_value_t* v) {
  bson_append_value(out, key.data(), static_cast<int>(key.size()), v);
}

// _id's rule for a stored document, MongoDB's: any value but an array,
// undefined or a regex.
Status CheckIdValue(const bson_value_t* id) {
  switch (id->value_type) {
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_REGEX:
      return Status::InvalidArgument("_id cannot be an array, undefined or a regex");
    default:
      return Status::OK();
  }
}

// The document with `id` as its first field and no other _id, into *out
// (`id` may point into *out: it is read before *out is written).
Status WithIdFirst(const uint8_t* doc, size_t len, const bson_value_t* id, std::string* out) {
  bson_t result;
  bson_init(&result);
  Append(&result, "_id", id);
  bson_iter_t it;
  if (bson_iter_init_from_data(&it, doc, len)) {
    while (bson_iter_next(&it)) {
      if (Key(&it) == "_id") continue;
      bson_append_iter(&result, bson_iter_key(&it), static_cast<int>(bson_iter_key_len(&it)), &it);
    }
  }
  Status s = SizeOk(result.len);
  if (s.ok()) *out = Bytes(&result);
  bson_destroy(&result);
  return s;
}

}  // namespace

std::string_view IdElement(const uint8_t* doc, size_t len) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, doc, len) || !FindKey(&it, "_id")) return {};
  const char* start = bson_iter_key(&it) - 1;
  return std::string_view(start, reinterpret_cast<const char*>(it.raw) + it.next_off - start);
}

namespace {

// MongoDB's immutable _id: an update may name it ($set to its own value,
// $inc by 0, $setOnInsert on a match) but not change it, or the stored
// document would leave its primary key. Compared as bytes, type included:
// $set {_id: 1.0} of _id 1 is refused rather than stored as a double.
// A document without _id (an upsert's from a filter without one) takes any.
Status IdUnchanged(const uint8_t* before, size_t before_len, const std::string& after) {
  const std::string_view old_id = IdElement(before, before_len);
  if (old_id.empty()) return Status::OK();
  if (IdElement(reinterpret_cast<const uint8_t*>(after.data()), after.size()) != old_id) {
    return Status::InvalidArgument("the update would change the immutable field _id");
  }
  return Status::OK();
}

// What applying an update to one document needs beyond the tree, worked
// out before the one pass (Update::Impl::Prepare).
struct ApplyState {
  bool inserting = false;
  int64_t now_ms = 0;
  uint32_t timestamp_increment = 1;
  // The tree node whose child "$" stands for element positional_key of the
  // array at that node's path.
  const PathTree* positional_parent = nullptr;
  std::string positional_key;
  // $rename targets and the values their sources hold (views into the
  // document); a target not listed has no source in this document.
  std::vector<std::pair<const PathTree*, View>> renamed;

  const bson_value_t* Renamed(const PathTree* target) const {
    for (const auto& [node, value] : renamed) {
      if (node == target) return &value.v;
    }
    return nullptr;
  }
};

// Whether anything at or below `n` creates a field, as opposed to only
// removing or changing what is there.
bool Creates(const PathTree& n, const ApplyState& st) {
  switch (n.op) {
    case PathTree::kSet:
    case PathTree::kInc:
    case PathTree::kMul:
    case PathTree::kMin:
    case PathTree::kMax:
    case PathTree::kCurrentDate:
    case PathTree::kPush:
    case PathTree::kAddToSet:
      return true;
    case PathTree::kSetOnInsert:
      return st.inserting;
    case PathTree::kRenameTo:
      return st.Renamed(&n) != nullptr;
    case PathTree::kUnset:
    case PathTree::kPop:
    case PathTree::kPull:
    case PathTree::kPullAll:
    case PathTree::kRenameFrom:
      return false;
    case PathTree::kNone:
      break;
  }
  for (const auto& c : n.children) {
    if (Creates(*c.second, st)) return true;
  }
  return false;
}

const char* OpName(PathTree::Op op) {
  switch (op) {
    case PathTree::kPush:
      return "$push";
    case PathTree::kAddToSet:
      return "$addToSet";
    case PathTree::kPop:
      return "$pop";
    case PathTree::kPull:
      return "$pull";
    case PathTree::kPullAll:
      return "$pullAll";
    default:
      return "update";
  }
}

// The elements of array `arr` (views into its bytes).
void Elements(const bson_value_t* arr, std::vector<View>* out) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, arr->value.v_doc.data, arr->value.v_doc.data_len)) return;
  while (bson_iter_next(&it)) out->push_back(View{*bson_iter_value(&it)});
}

void AppendArray(bson_t* out, std::string_view key, const std::vector<View>& elems) {
  bson_t arr;
  bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &arr);
  char buf[16];
  for (size_t i = 0; i < elems.size(); i++) {
    const char* k;
    size_t klen = bson_uint32_to_string(static_cast<uint32_t>(i), &k, buf, sizeof buf);
    bson_append_value(&arr, k, static_cast<int>(klen), &elems[i].v);
  }
  bson_append_array_end(out, &arr);
}

bool Equal(const bson_value_t* a, const bson_value_t* b) { return CompareValues(a, b) == 0; }

bool PullMatches(const PathTree& n, const bson_value_t* e) {
  switch (n.pull_kind) {
    case PathTree::kPullEqual: {
      bson_value_t v = n.value();
      return Equal(&v, e);
    }
    case PathTree::kPullObject:
      return e->value_type == BSON_TYPE_DOCUMENT &&
             n.pull_filter->Matches(e->value.v_doc.data, e->value.v_doc.data_len);
    case PathTree::kPullWrapped: {
      bson_t w;
      bson_init(&w);
      bson_append_value(&w, "x", 1, e);
      bool m = n.pull_filter->Matches(bson_get_data(&w), w.len);
      bson_destroy(&w);
      return m;
    }
  }
  return false;
}

// $push's $sort of the elements: whole values (sort = 1 / -1) or documents
// by fields. A field's value is the one its path names through documents
// and array positions, compared whole (an array as an array, after every
// number), null when missing: MongoDB's rule here, not a find's sort (which
// takes an array's smallest or largest element). Non-documents sort as if
// every field were null. Stable, so equal elements keep their order.
void SortElements(const PathTree& n, std::vector<View>* elems) {
  if (n.sort != 0) {
    std::stable_sort(elems->begin(), elems->end(), [&](const View& a, const View& b) {
      return CompareValues(&a.v, &b.v) * n.sort < 0;
    });
    return;
  }
  const size_t nf = n.sort_fields.size();
  std::vector<View> keys(elems->size() * nf);
  for (size_t i = 0; i < elems->size(); i++) {
    const bson_value_t& e = (*elems)[i].v;
    for (size_t f = 0; f < nf; f++) {
      bson_value_t& k = keys[i * nf + f].v;
      if (e.value_type != BSON_TYPE_DOCUMENT ||
          !LookupPath(e.value.v_doc.data, e.value.v_doc.data_len, n.sort_fields[f].first, &k)) {
        k.value_type = BSON_TYPE_NULL;
      }
    }
  }
  std::vector<size_t> order(elems->size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    for (size_t f = 0; f < nf; f++) {
      int c = CompareValues(&keys[a * nf + f].v, &keys[b * nf + f].v) * n.sort_fields[f].second;
      if (c != 0) return c < 0;
    }
    return false;
  });
  std::vector<View> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) sorted.push_back((*elems)[i]);
  elems->swap(sorted);
}

// |v| for a negative int64, without overflow.
uint64_t Magnitude(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : v; }

// The array operators on the elements of the array (none when missing).
void EditArray(const PathTree& n, std::vector<View>* elems) {
  const bson_value_t operand = n.value();
  std::vector<View> values;  // to add or to pull
  if (n.each || n.op == PathTree::kPullAll) {
    Elements(&operand, &values);
  } else {
    values.push_back(View{operand});
  }
  switch (n.op) {
    case PathTree::kPush: {
      const size_t size = elems->size();
      size_t pos = size;
      if (n.has_position) {
        if (n.position >= 0) {
          pos = std::min<uint64_t>(static_cast<uint64_t>(n.position), size);
        } else {
          uint64_t back = Magnitude(n.position);
          pos = back >= size ? 0 : size - back;
        }
      }
      elems->insert(elems->begin() + static_cast<ptrdiff_t>(pos), values.begin(), values.end());
      if (n.sort != 0 || !n.sort_fields.empty()) SortElements(n, elems);
      if (n.has_slice) {
        uint64_t keep = Magnitude(n.slice);
        if (elems->size() > keep) {
          if (n.slice >= 0) {
            elems->resize(keep);
          } else {
            elems->erase(elems->begin(), elems->end() - static_cast<ptrdiff_t>(keep));
          }
        }
      }
      return;
    }
    case PathTree::kAddToSet:
      for (const View& v : values) {
        bool present = false;
        for (const View& e : *elems) {
          if (Equal(&e.v, &v.v)) {
            present = true;
            break;
          }
        }
        if (!present) elems->push_back(v);
      }
      return;
    case PathTree::kPop:
      if (elems->empty()) return;
      if (n.pop > 0) {
        elems->pop_back();
      } else {
        elems->erase(elems->begin());
      }
      return;
    case PathTree::kPull:
      elems->erase(std::remove_if(elems->begin(), elems->end(),
                                  [&](const View& e) { return PullMatches(n, &e.v); }),
                   elems->end());
      return;
    case PathTree::kPullAll:
      elems->erase(std::remove_if(elems->begin(), elems->end(),
                                  [&](const View& e) {
                                    for (const View& v : values) {
                                      if (Equal(&e.v, &v.v)) return true;
                                    }
                                    return false;
                                  }),
                   elems->end());
      return;
    default:
      return;
  }
}

// Applies the leaf `n` to field `key`, whose value is *cur (null when the
// field is missing): appends the field's new value to `out`, or nothing
// when the field is (or stays) absent.
Status ApplyLeaf(const PathTree& n, std::string_view key, const bson_value_t* cur,
                 const ApplyState& st, bson_t* out) {
  auto keep = [&] {
    if (cur != nullptr) Append(out, key, cur);
    return Status::OK();
  };
  switch (n.op) {
    case PathTree::kSetOnInsert:
      if (!st.inserting) return keep();
      [[fallthrough]];
    case PathTree::kSet: {
      bson_value_t v = n.value();
      Append(out, key, &v);
      return Status::OK();
    }
    case PathTree::kUnset:
    case PathTree::kRenameFrom:
      return Status::OK();
    case PathTree::kRenameTo: {
      const bson_value_t* v = st.Renamed(&n);
      if (v == nullptr) return keep();
      Append(out, key, v);
      return Status::OK();
    }
    case PathTree::kInc:
    case PathTree::kMul: {
      bson_value_t operand = n.value();
      bson_value_t r = operand;
      if (cur != nullptr) {
        MMDOC_RETURN_IF_ERROR(Arith(n.op == PathTree::kMul, cur, &operand, n.path, &r));
      } else if (n.op == PathTree::kMul) {  // 0 of the multiplier's type
        if (r.value_type == BSON_TYPE_DOUBLE) r.value.v_double = 0;
        if (r.value_type == BSON_TYPE_INT64) r.value.v_int64 = 0;
        if (r.value_type == BSON_TYPE_INT32) r.value.v_int32 = 0;
      }
      Append(out, key, &r);
      return Status::OK();
    }
    case PathTree::kMin:
    case PathTree::kMax: {
      bson_value_t operand = n.value();
      const bson_value_t* v = &operand;
      if (cur != nullptr) {
        int c = CompareValues(&operand, cur);
        if (n.op == PathTree::kMin ? c >= 0 : c <= 0) v = cur;
      }
      Append(out, key, v);
      return Status::OK();
    }
    case PathTree::kCurrentDate: {
      bson_value_t v;
      if (n.timestamp) {
        v.value_type = BSON_TYPE_TIMESTAMP;
        v.value.v_timestamp.timestamp = static_cast<uint32_t>(st.now_ms / 1000);
        v.value.v_timestamp.increment = st.timestamp_increment;
      } else {
        v.value_type = BSON_TYPE_DATE_TIME;
        v.value.v_datetime = st.now_ms;
      }
      Append(out, key, &v);
      return Status::OK();
    }
    case PathTree::kPush:
    case PathTree::kAddToSet:
    case PathTree::kPop:
    case PathTree::kPull:
    case PathTree::kPullAll: {
      std::vector<View> elems;
      if (cur == nullptr) {
        if (n.op != PathTree::kPush && n.op != PathTree::kAddToSet) return Status::OK();
      } else if (cur->value_type != BSON_TYPE_ARRAY) {
        return Status::InvalidArgument(std::string(OpName(n.op)) + " of a non-array field", n.path);
      } else {
        Elements(cur, &elems);
      }
      EditArray(n, &elems);
      AppendArray(out, key, elems);
      return Status::OK();
    }
    case PathTree::kNone:
      break;
  }
  return keep();
}

Status Create(const PathTree& n, std::string_view key, const ApplyState& st, bson_t* out);

Status PositionalUnmatched(std::string_view path) {
  return Status::InvalidArgument(
      "the positional operator did not find the match needed from the query", path);
}

// Appends the fields of `n` not yet in the container (is_array: elements
// "0".."len-1" exist; numeric names beyond pad with null).
Status AppendMissing(const PathTree& n, const std::vector<const PathTree*>& seen, bool is_array,
                     uint32_t array_len, const std::string& where, const ApplyState& st,
                     bson_t* out) {
  if (!is_array) {
    for (const auto& [name, child] : n.children) {
      if (std::find(seen.begin(), seen.end(), child.get()) != seen.end()) continue;
      if (name == "$") return PositionalUnmatched(where + ".$");
      MMDOC_RETURN_IF_ERROR(Create(*child, name, st, out));
    }
    return Status::OK();
  }
  std::vector<std::pair<uint64_t, const PathTree*>> extra;
  for (const auto& [name, child] : n.children) {
    if (std::find(seen.begin(), seen.end(), child.get()) != seen.end()) continue;
    if (name == "$") return PositionalUnmatched(where + ".$");
    if (!Creates(*child, st)) continue;
    // "01" is not an index (it would add a second element "1"); MongoDB
    // cannot create such a field in an array either.
    if (!IsNumeric(name) || name.size() > 7 || (name.size() > 1 && name[0] == '0')) {
      return Status::InvalidArgument("cannot create field " + name + " in array", where);
    }
    extra.emplace_back(std::stoull(name), child.get());
  }
  std::sort(extra.begin(), extra.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  uint64_t next = array_len;
  for (const auto& [index, child] : extra) {
    for (; next < index; ++next) {
      std::string k = std::to_string(next);
      bson_append_null(out, k.data(), static_cast<int>(k.size()));
    }
    MMDOC_RETURN_IF_ERROR(Create(*child, std::to_string(index), st, out));
    next = index + 1;
  }
  return Status::OK();
}

// Creates field `key` from scratch: a value ($set, $inc on a missing field,
// ...) or a new subdocument holding the fields below.
Status Create(const PathTree& n, std::string_view key, const ApplyState& st, bson_t* out) {
  if (n.op != PathTree::kNone) return ApplyLeaf(n, key, nullptr, st, out);
  if (!Creates(n, st)) return Status::OK();
  bson_t sub;
  bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &sub);
  Status s = AppendMissing(n, {}, false, 0, std::string(key), st, &sub);
  bson_append_document_end(out, &sub);
  return s;
}

// Copies the container `it` iterates into `out`, applying the tree `n`.
Status Rewrite(bson_iter_t* it, const PathTree& n, bool is_array, const std::string& where,
               const ApplyState& st, bson_t* out) {
  std::vector<const PathTree*> seen;
  uint32_t count = 0;
  const bool positional = is_array && &n == st.positional_parent;
  while (bson_iter_next(it)) {
    ++count;
    std::string_view key = Key(it);
    const PathTree* c = n.Find(key);
    if (positional && key == st.positional_key) {
      if (c != nullptr) {
        return Status::InvalidArgument("conflicting update paths " + c->path + " and " +
                                       n.Find("$")->path);
      }
      c = n.Find("$");
    }
    if (c == nullptr) {
      bson_append_iter(out, key.data(), static_cast<int>(key.size()), it);
      continue;
    }
    seen.push_back(c);
    if (c->op != PathTree::kNone) {
      const uint32_t before = out->len;
      MMDOC_RETURN_IF_ERROR(ApplyLeaf(*c, key, bson_iter_value(it), st, out));
      // An array keeps its indexes: $unset of an element leaves null there,
      // as MongoDB does, rather than a gap in the keys.
      if (is_array && out->len == before) {
        bson_append_null(out, key.data(), static_cast<int>(key.size()));
      }
      continue;
    }
    std::string sub_where = where.empty() ? std::string(key) : where + "." + std::string(key);
    bool sub_array = BSON_ITER_HOLDS_ARRAY(it);
    bson_iter_t sub_it;
    if ((!sub_array && !BSON_ITER_HOLDS_DOCUMENT(it)) || !bson_iter_recurse(it, &sub_it)) {
      if (!Creates(*c, st)) {  // $unset below a scalar: nothing to remove
        bson_append_iter(out, key.data(), static_cast<int>(key.size()), it);
        continue;
      }
      return Status::InvalidArgument("cannot create a field inside the non-document field",
                                     sub_where);
    }
    bson_t sub;
    if (sub_array) {
      bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &sub);
    } else {
      bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &sub);
    }
    Status s = Rewrite(&sub_it, *c, sub_array, sub_where, st, &sub);
    if (sub_array) {
      bson_append_array_end(out, &sub);
    } else {
      bson_append_document_end(out, &sub);
    }
    MMDOC_RETURN_IF_ERROR(s);
  }
  return AppendMissing(n, seen, is_array, count, where, st, out);
}

}  // namespace

Status CheckFieldNames(const uint8_t* doc, size_t len) {
  if (PlainNames(doc, len, /*is_array=*/false, 1)) return Status::OK();
  return CheckFieldNamesSlowly(doc, len);
}

Status CheckFieldNamesSlowly(const uint8_t* doc, size_t len) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, doc, len)) {
    return Status::InvalidArgument("invalid BSON document");
  }
  return CheckNamesIn(&it, false, true);
}

bool DollarPartsAreDbRef(std::string_view path) {
  for (size_t at = path.find(".$"); at != std::string_view::npos; at = path.find(".$", at + 1)) {
    if (!IsDbRefField(path.substr(at + 1, path.find('.', at + 1) - (at + 1)))) return false;
  }
  return true;
}

bool DbRefKey(const bson_iter_t* it, std::string_view prev) {
  const std::string_view key = Key(it);
  if (key == "$ref") {
    bson_iter_t next = *it;
    return BSON_ITER_HOLDS_UTF8(it) && bson_iter_next(&next) && Key(&next) == "$id";
  }
  if (key == "$id") return prev == "$ref";
  if (key == "$db") return prev == "$id" && BSON_ITER_HOLDS_UTF8(it);
  return false;
}

// ------------------------------------------------------------------ Update

struct Update::Impl {
  bool replacement = false;
  std::string replacement_doc;  // BSON
  PathTree tree;
  bool top_level = false;  // only $set/$unset of top-level fields
  bool names_id = false;   // a path is _id or below it: Apply checks it is unchanged
  // The positional $: the path before it, its node in the tree, and the
  // predicates of the bound query on that array, as a filter on {"x":
  // element} (null: the query has none).
  std::string positional_prefix;
  const PathTree* positional_node = nullptr;
  std::unique_ptr<Filter> positional_filter;
  // The query's {array: {$elemMatch: ...}}, as a filter on {"x": [element]}.
  std::unique_ptr<Filter> positional_elem_match;
  // The query has a negation ($ne, $nin, $not) on the array, left out of
  // positional_filter: it holds for the whole array, not for one element.
  bool positional_negated = false;
  // $rename: each source path and its target's node.
  std::vector<std::pair<std::string, const PathTree*>> renames;
  // Nodes of an earlier parse, for ParseInto's to reuse.
  std::vector<std::unique_ptr<PathTree>> pool;
  // When the last parse was {$set: {top-level fields: scalars}}, its leaves
  // in the update's order: the next update of that shape (the same names,
  // scalar values) only takes its values (Rebind), as a prepared statement
  // takes its parameters.
  std::vector<PathTree*> set_leaves;

  // Fills an empty operator update (Reset) from `update`.
  Status Parse(const bson_t* update);
  // Takes update's values when it has the last parse's shape (set_leaves);
  // false, with the leaves' values undefined, when it has not.
  bool Rebind(const bson_t* update);
  // An empty operator update, keeping the memory of the last parse.
  void Reset() {
    replacement = false;
    replacement_doc.clear();
    tree.Reset(&pool);
    top_level = false;
    names_id = false;
    positional_prefix.clear();
    positional_node = nullptr;
    positional_filter.reset();
    positional_elem_match.reset();
    positional_negated = false;
    renames.clear();
    set_leaves.clear();
  }

  Status Prepare(const uint8_t* doc, size_t len, const UpdateContext& ctx, ApplyState* st) const;
  Status ApplyOperators(const uint8_t* doc, size_t len, const ApplyState& st,
                        std::string* out) const;
};

namespace {

// Applies an update of top-level $set/$unset only by copying the document's
// elements as bytes and splicing in the new ones, without libbson building
// a new document, which cost most of a one-field update. Gives the same bytes as Rewrite: fields
// keep their place, $set of a missing field appends it in the tree's order.
void SpliceTopLevel(const PathTree& tree, const uint8_t* doc, size_t len, std::string* out) {
  out->clear();
  out->reserve(len + 64);
  out->append(4, '\0');  // length, filled in below
  // Which of the tree's fields the document has, by their place in
  // tree.children: a mask, or a vector past 64 fields.
  const size_t fields = tree.children.size();
  uint64_t seen_mask = 0;
  std::vector<bool> seen_many(fields > 64 ? fields : 0);
  bson_iter_t it;
  bson_iter_init_from_data(&it, doc, len);
  // An element runs from its type byte (just before its key) to the next
  // element's type byte, or to the document's final NUL.
  const uint8_t* start = nullptr;
  const PathTree* node = nullptr;
  size_t key_len = 0;
  auto flush = [&](const uint8_t* end) {
    if (start == nullptr) return;
    if (node == nullptr) {
      out->append(reinterpret_cast<const char*>(start), end - start);
    } else if (node->op == PathTree::kSet) {
      out->push_back(static_cast<char>(node->raw_type()));
      out->append(reinterpret_cast<const char*>(start) + 1, key_len + 1);
      out->append(node->raw());
    }  // kUnset: dropped
  };
  while (bson_iter_next(&it)) {
    const char* key = bson_iter_key(&it);
    const uint8_t* elem = reinterpret_cast<const uint8_t*>(key) - 1;
    flush(elem);
    start = elem;
    key_len = bson_iter_key_len(&it);
    node = nullptr;
    const std::string_view name(key, key_len);
    for (size_t i = 0; i < fields; i++) {
      if (tree.children[i].first != name) continue;
      node = tree.children[i].second.get();
      if (fields > 64) {
        seen_many[i] = true;
      } else {
        seen_mask |= uint64_t{1} << i;
      }
      break;
    }
  }
  flush(doc + len - 1);
  for (size_t i = 0; i < fields; i++) {
    const auto& [name, child] = tree.children[i];
    if (child->op != PathTree::kSet) continue;
    if (fields > 64 ? seen_many[i] : (seen_mask >> i & 1) != 0) continue;
    out->push_back(static_cast<char>(child->raw_type()));
    out->append(name);
    out->push_back('\0');
    out->append(child->raw());
  }
  out->push_back('\0');
  uint32_t n = static_cast<uint32_t>(out->size());
  storage::EncodeFixed32(out->data(), n);  // BSON's int32 length: little-endian
}

struct OperatorName {
  const char* name;
  PathTree::Op op;
};
constexpr OperatorName kOperatorNames[] = {
    {"$set", PathTree::kSet},
    {"$unset", PathTree::kUnset},
    {"$inc", PathTree::kInc},
    {"$mul", PathTree::kMul},
    {"$min", PathTree::kMin},
    {"$max", PathTree::kMax},
    {"$currentDate", PathTree::kCurrentDate},
    {"$setOnInsert", PathTree::kSetOnInsert},
    {"$push", PathTree::kPush},
    {"$addToSet", PathTree::kAddToSet},
    {"$pop", PathTree::kPop},
    {"$pull", PathTree::kPull},
    {"$pullAll", PathTree::kPullAll},
    {"$rename", PathTree::kRenameFrom},
};

bool IsIdPath(std::string_view path) { return path == "_id" || path.substr(0, 4) == "_id."; }

// Checks an update path's parts: none empty, none starting with '$' but a
// positional "$" after the first part (at most one; *prefix receives the
// path before it, or stays empty).
Status CheckUpdatePath(std::string_view path, std::string* prefix) {
  if (path.empty()) return Status::InvalidArgument("an empty update path is not valid");
  if (path[0] == '$') return Status::InvalidArgument("field names must not start with '$'", path);
  prefix->clear();
  if (path.find('$') == std::string_view::npos) return Status::OK();
  std::vector<std::string> parts;
  MMDOC_RETURN_IF_ERROR(SplitPath(path, &parts));
  size_t offset = 0;
  for (const std::string& part : parts) {
    if (part[0] == '$') {
      if (part.rfind("$[", 0) == 0) {
        return Status::InvalidArgument(
            "the all-positional $[] and filtered $[<identifier>] are not supported", path);
      }
      if (part != "$") return Status::InvalidArgument("field names must not start with '$'", path);
      if (!prefix->empty()) {
        return Status::InvalidArgument("more than one positional $ in path", path);
      }
      prefix->assign(path.substr(0, offset - 1));
    }
    offset += part.size() + 1;
  }
  return Status::OK();
}

// An integer operand ($slice, $position): an int32, int64 or a double with
// no fraction (what the mongo shell sends), as MongoDB accepts.
bool IntegerOperand(const bson_value_t* v, int64_t* out) {
  switch (v->value_type) {
    case BSON_TYPE_INT32:
      *out = v->value.v_int32;
      return true;
    case BSON_TYPE_INT64:
      *out = v->value.v_int64;
      return true;
    case BSON_TYPE_DOUBLE: {
      double d = v->value.v_double;
      if (!(d >= -9.2e18 && d <= 9.2e18) || d != std::trunc(d)) return false;
      *out = static_cast<int64_t>(d);
      return true;
    }
    default:
      return false;
  }
}

// 1 or -1 as a number; 0 otherwise.
int Direction(const bson_value_t* v) {
  if (!IsNumber(v->value_type)) return 0;
  double d = AsDouble(v);
  return d == 1 ? 1 : d == -1 ? -1 : 0;
}

Status ParseSort(const bson_value_t* v, const std::string& path, PathTree* leaf) {
  const std::string what = "$push's $sort for field " + path;
  if (v->value_type != BSON_TYPE_DOCUMENT) {
    leaf->sort = Direction(v);
    if (leaf->sort == 0) return Status::InvalidArgument(what + " must be 1, -1 or {field: 1|-1}");
    return Status::OK();
  }
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
    return Status::InvalidArgument(what + " is not a document");
  }
  std::vector<std::string> parts;
  while (bson_iter_next(&it)) {
    std::string field(Key(&it));
    int dir = Direction(bson_iter_value(&it));
    if (dir == 0) return Status::InvalidArgument(what + " must be 1 or -1 per field", field);
    if (field.empty() || field[0] == '$' || !SplitPath(field, &parts).ok()) {
      return Status::InvalidArgument(what + " names a bad field", field);
    }
    leaf->sort_fields.emplace_back(std::move(field), dir);
  }
  if (leaf->sort_fields.empty()) return Status::InvalidArgument(what + " is empty");
  return Status::OK();
}

// The first field name of a document value ("" for {}).
std::string_view FirstKey(const bson_value_t* v) {
  bson_iter_t it;
  if (v->value_type != BSON_TYPE_DOCUMENT ||
      !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) ||
      !bson_iter_next(&it)) {
    return {};
  }
  return Key(&it);
}

// $push's operand: a value, or {$each: [...], $slice, $position, $sort}.
Status ParsePush(const bson_value_t* v, const std::string& path, PathTree* leaf) {
  bson_iter_t it;
  if (v->value_type != BSON_TYPE_DOCUMENT ||
      !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) ||
      !bson_iter_find(&it, "$each")) {
    MMDOC_RETURN_IF_ERROR(CheckValueNames(v));
    return Status::OK();
  }
  bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
  while (bson_iter_next(&it)) {
    std::string_view m = Key(&it);
    const bson_value_t* mv = bson_iter_value(&it);
    if (m == "$each") {
      if (mv->value_type != BSON_TYPE_ARRAY) {
        return Status::InvalidArgument("$push's $each must be an array for field", path);
      }
      MMDOC_RETURN_IF_ERROR(CheckValueNames(mv));
      leaf->each = true;
      leaf->value_doc = OperandDoc(mv);
    } else if (m == "$slice") {
      if (!IntegerOperand(mv, &leaf->slice)) {
        return Status::InvalidArgument("$push's $slice must be an integer for field", path);
      }
      leaf->has_slice = true;
    } else if (m == "$position") {
      if (!IntegerOperand(mv, &leaf->position)) {
        return Status::InvalidArgument("$push's $position must be an integer for field", path);
      }
      leaf->has_position = true;
    } else if (m == "$sort") {
      MMDOC_RETURN_IF_ERROR(ParseSort(mv, path, leaf));
    } else {
      return Status::InvalidArgument("unrecognized clause in $push: " + std::string(m) +
                                     " for field " + path);
    }
  }
  return Status::OK();
}

Status ParseAddToSet(const bson_value_t* v, const std::string& path, PathTree* leaf) {
  if (FirstKey(v) != "$each") {
    MMDOC_RETURN_IF_ERROR(CheckValueNames(v));
    return Status::OK();
  }
  bson_iter_t it;
  bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
  bson_iter_next(&it);
  const bson_value_t* each = bson_iter_value(&it);
  if (each->value_type != BSON_TYPE_ARRAY) {
    return Status::InvalidArgument("$addToSet's $each must be an array for field", path);
  }
  if (bson_iter_next(&it)) {
    return Status::InvalidArgument("$addToSet takes nothing but $each for field", path);
  }
  MMDOC_RETURN_IF_ERROR(CheckValueNames(each));
  leaf->each = true;
  leaf->value_doc = OperandDoc(each);
  return Status::OK();
}

// $pull's operand, as MongoDB reads it: a document whose first field is a
// query operator is a condition on each element ({$gte: 6}); any other
// document is a query on the elements that are documents ({score: 8},
// {$or: [...]}); anything else is a value elements must equal.
Status ParsePull(const bson_value_t* v, const std::string& path, PathTree* leaf) {
  if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_REGEX) {
    leaf->pull_kind = PathTree::kPullEqual;
    return Status::OK();
  }
  std::string_view first = FirstKey(v);
  bool wrapped =
      v->value_type == BSON_TYPE_REGEX ||
      (!first.empty() && first[0] == '$' && first != "$and" && first != "$or" && first != "$nor" &&
       first != "$where" && first != "$expr" && first != "$text" && first != "$comment");
  bson_t cond;
  bson_init(&cond);
  if (wrapped) {
    bson_append_value(&cond, "x", 1, v);
  } else {
    bson_t sub;
    bson_init_static(&sub, v->value.v_doc.data, v->value.v_doc.data_len);
    bson_concat(&cond, &sub);
  }
  auto f = Filter::Parse(&cond);
  bson_destroy(&cond);
  if (!f.ok()) {
    return Status::InvalidArgument("$pull condition for field " + path + ": " +
                                   f.status().message());
  }
  leaf->pull_kind = wrapped ? PathTree::kPullWrapped : PathTree::kPullObject;
  leaf->pull_filter = std::make_unique<Filter>(std::move(f.value()));
  return Status::OK();
}

// The operand of `op` for field `path`, checked and stored in *leaf.
Status ParseOperand(PathTree::Op op, std::string_view op_name, const std::string& path,
                    const bson_value_t* v, PathTree* leaf) {
  leaf->value_doc = OperandDoc(v);  // $each replaces it with its array
  switch (op) {
    case PathTree::kInc:
    case PathTree::kMul:
      if (!IsNumber(v->value_type)) {
        return Status::InvalidArgument(std::string(op_name) + " needs a number for field", path);
      }
      break;
    case PathTree::kSet:
    case PathTree::kSetOnInsert:
    case PathTree::kMin:
    case PathTree::kMax:
      MMDOC_RETURN_IF_ERROR(CheckValueNames(v));
      break;
    case PathTree::kCurrentDate:
      if (v->value_type == BSON_TYPE_BOOL) return Status::OK();
      if (v->value_type == BSON_TYPE_DOCUMENT) {
        bson_iter_t it;
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        if (bson_iter_next(&it) && Key(&it) == "$type" && BSON_ITER_HOLDS_UTF8(&it)) {
          std::string_view type = bson_iter_utf8(&it, nullptr);
          if ((type == "date" || type == "timestamp") && !bson_iter_next(&it)) {
            leaf->timestamp = type == "timestamp";
            return Status::OK();
          }
        }
      }
      return Status::InvalidArgument(
          "$currentDate takes true or {$type: \"date\"|\"timestamp\"} for field", path);
    case PathTree::kPush:
      return ParsePush(v, path, leaf);
    case PathTree::kAddToSet:
      return ParseAddToSet(v, path, leaf);
    case PathTree::kPop:
      leaf->pop = Direction(v);
      if (leaf->pop == 0) return Status::InvalidArgument("$pop takes 1 or -1 for field", path);
      return Status::OK();
    case PathTree::kPull:
      return ParsePull(v, path, leaf);
    case PathTree::kPullAll:
      if (v->value_type != BSON_TYPE_ARRAY) {
        return Status::InvalidArgument("$pullAll needs an array for field", path);
      }
      return Status::OK();
    default:
      return Status::OK();
  }
  return Status::OK();
}

// How many levels the value an operator stores nests below its field (-1:
// it stores nothing of its operand).
int StoredDepth(const PathTree& leaf, const bson_value_t* v) {
  switch (leaf.op) {
    case PathTree::kSet:
    case PathTree::kSetOnInsert:
    case PathTree::kMin:
    case PathTree::kMax:
    case PathTree::kInc:
    case PathTree::kMul:
    case PathTree::kCurrentDate:
      return ValueDepth(v);
    case PathTree::kPush:
    case PathTree::kAddToSet: {
      if (!leaf.each) return 1 + ValueDepth(v);
      bson_value_t each = leaf.value();
      return ValueDepth(&each);
    }
    default:
      return -1;
  }
}

size_t PathParts(std::string_view path) { return std::count(path.begin(), path.end(), '.') + 1; }

// A field name MongoDB orders as a number: digits, no leading 0.
bool NumberName(std::string_view name) {
  return IsNumeric(name) && (name.size() == 1 || name[0] != '0');
}

// Puts the children of `n`, at every level, in the order MongoDB 5.0+
// applies an update's fields, so that the fields an update creates are
// appended in it: names by their bytes, and among themselves names that
// are numbers by value ("9" before "10"), in the places the bytes give
// them. (MongoDB compares a number with a name by bytes, an order that is
// not total: "9" < "10" < "1a" < "9"; this one is.) Sorts in place, with
// no allocation but for two or more number names.
void SortChildren(PathTree* n) {
  auto& c = n->children;
  for (auto& child : c) SortChildren(child.second.get());
  if (c.size() < 2) return;
  std::sort(c.begin(), c.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  if (std::count_if(c.begin(), c.end(), [](const auto& x) { return NumberName(x.first); }) < 2) {
    return;
  }
  std::vector<size_t> places;
  std::vector<std::pair<std::string, std::unique_ptr<PathTree>>> numbers;
  for (size_t i = 0; i < c.size(); i++) {
    if (!NumberName(c[i].first)) continue;
    places.push_back(i);
    numbers.push_back(std::move(c[i]));
  }
  // Without leading zeros, a shorter number is the smaller.
  std::sort(numbers.begin(), numbers.end(), [](const auto& x, const auto& y) {
    return x.first.size() != y.first.size() ? x.first.size() < y.first.size() : x.first < y.first;
  });
  for (size_t k = 0; k < places.size(); k++) c[places[k]] = std::move(numbers[k]);
}

}  // namespace

Update::Update(Kind) : impl_(std::make_unique<Impl>()) {}

Update::Update() : impl_(std::make_unique<Impl>()) {
  impl_->replacement = true;
  impl_->replacement_doc = Document().bytes();
}
Update::~Update() = default;
Update::Update(Update&&) noexcept = default;
Update& Update::operator=(Update&&) noexcept = default;

bool Update::is_replacement() const { return impl_->replacement; }
bool Update::has_positional() const { return impl_->positional_node != nullptr; }

Result<Update> Update::Parse(const bson_t* update) {
  Update u(kOperators);
  MMDOC_RETURN_IF_ERROR(ParseInto(update, &u));
  return u;
}

Status Update::ParseInto(const bson_t* update, Update* out) {
  if (out->impl_ == nullptr) out->impl_ = std::make_unique<Impl>();  // moved from
  Impl& impl = *out->impl_;
  if (!impl.set_leaves.empty() && impl.Rebind(update)) return Status::OK();
  impl.Reset();
  Status s = impl.Parse(update);
  if (!s.ok()) impl.Reset();
  return s;
}

Status Update::Impl::Parse(const bson_t* update) {
  bson_iter_t it;
  if (update == nullptr || !bson_iter_init(&it, update)) {
    return Status::InvalidArgument("update is not a BSON document");
  }
  bson_iter_t peek = it;
  bool operators = bson_iter_next(&peek) && bson_iter_key(&peek)[0] == '$';
  if (!operators) {
    // A replacement document: stored as given (minus _id handling in Apply).
    MMDOC_RETURN_IF_ERROR(CheckFieldNames(bson_get_data(update), update->len));
    replacement = true;
    replacement_doc.assign(reinterpret_cast<const char*>(bson_get_data(update)), update->len);
    return Status::OK();
  }
  std::string prefix;
  int op_count = 0;
  bool rebindable = true;
  while (bson_iter_next(&it)) {
    op_count++;
    std::string_view op_name = Key(&it);
    PathTree::Op op = PathTree::kNone;
    for (const OperatorName& o : kOperatorNames) {
      if (op_name == o.name) {
        op = o.op;
        break;
      }
    }
    if (op == PathTree::kNone) {
      if (op_name.empty() || op_name[0] != '$') {
        return Status::InvalidArgument("cannot mix update operators and fields", op_name);
      }
      return Status::InvalidArgument(
          (op_name == "$bit" ? "unsupported update operator " : "unknown update operator ") +
          std::string(op_name));
    }
    bson_iter_t fields;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &fields)) {
      return Status::InvalidArgument(std::string(op_name) + " needs a document");
    }
    while (bson_iter_next(&fields)) {
      std::string_view path = Key(&fields);
      // Other paths may name _id (Apply refuses a change of it); a $rename
      // always would change it, removing it or giving it another's value.
      if (op == PathTree::kRenameFrom && IsIdPath(path)) {
        return Status::InvalidArgument("$rename cannot move the immutable field _id", path);
      }
      MMDOC_RETURN_IF_ERROR(CheckUpdatePath(path, &prefix));
      const bson_value_t* v = bson_iter_value(&fields);
      std::string rename_to;
      if (op == PathTree::kRenameFrom) {
        if (!prefix.empty()) {
          return Status::InvalidArgument("$rename does not take the positional $", path);
        }
        if (v->value_type != BSON_TYPE_UTF8) {
          return Status::InvalidArgument("$rename needs a string (the new name) for field", path);
        }
        rename_to.assign(v->value.v_utf8.str, v->value.v_utf8.len);
        std::string to_prefix;
        MMDOC_RETURN_IF_ERROR(CheckUpdatePath(rename_to, &to_prefix));
        if (!to_prefix.empty() || rename_to.find('\0') != std::string::npos) {
          return Status::InvalidArgument("$rename does not take the positional $", rename_to);
        }
        if (IsIdPath(rename_to)) {
          return Status::InvalidArgument("$rename cannot replace the immutable field _id",
                                         rename_to);
        }
        if (rename_to == path) {
          return Status::InvalidArgument("$rename to the same field", path);
        }
        if (rename_to.rfind(std::string(path) + ".", 0) == 0 ||
            std::string(path).rfind(rename_to + ".", 0) == 0) {
          return Status::InvalidArgument("$rename source and target are on the same path",
                                         std::string(path) + " -> " + rename_to);
        }
      }
      if (!prefix.empty()) {
        if (!positional_prefix.empty() && positional_prefix != prefix) {
          return Status::InvalidArgument("positional $ on two different arrays",
                                         positional_prefix + ".$ and " + std::string(path));
        }
        positional_prefix = prefix;
      }
      PathTree* leaf = nullptr;
      MMDOC_RETURN_IF_ERROR(AddPath(&tree, path, &leaf, &pool));
      leaf->op = op;
      const std::string leaf_path(path);
      if (op == PathTree::kSet || op == PathTree::kInc) {
        if (op == PathTree::kInc)
          MMDOC_RETURN_IF_ERROR(ParseOperand(op, op_name, leaf_path, v, leaf));
        if (op == PathTree::kSet) MMDOC_RETURN_IF_ERROR(CheckValueNames(v));
        SetOperand(fields, path.size(), leaf);
      } else if (op != PathTree::kUnset && op != PathTree::kRenameFrom) {
        MMDOC_RETURN_IF_ERROR(ParseOperand(op, op_name, leaf_path, v, leaf));
      }
      if (op == PathTree::kSet && path.find('.') == std::string_view::npos && !IsIdPath(path) &&
          IsScalar(v->value_type)) {
        set_leaves.push_back(leaf);  // empty after Reset
      } else {
        rebindable = false;
      }
      // Operators that create missing parents: a long path alone can nest
      // the document too deep (found by fuzz_update).
      int depth = StoredDepth(*leaf, v);
      if (depth >= 0 && static_cast<int>(PathParts(path)) + depth >= kMaxNestingDepth) {
        return Status::InvalidArgument("update nests deeper than 100 levels", path);
      }
      if (op == PathTree::kRenameFrom) {
        PathTree* target = nullptr;
        MMDOC_RETURN_IF_ERROR(AddPath(&tree, rename_to, &target, &pool));
        target->op = PathTree::kRenameTo;
        renames.emplace_back(leaf_path, target);
      }
    }
  }
  SortChildren(&tree);
  if (!positional_prefix.empty()) {
    std::vector<std::string> parts;
    MMDOC_RETURN_IF_ERROR(SplitPath(positional_prefix, &parts));
    const PathTree* n = &tree;
    for (const std::string& p : parts) n = n->Find(p);
    positional_node = n;
  }
  names_id = tree.Find("_id") != nullptr;
  // The common shape {$set/$unset: {top-level fields}} is applied by
  // splicing bytes (see SpliceTopLevel).
  top_level = true;
  for (const auto& [name, child] : tree.children) {
    if (!child->children.empty() ||
        (child->op != PathTree::kSet && child->op != PathTree::kUnset)) {
      top_level = false;
    }
  }
  if (!rebindable || op_count != 1) set_leaves.clear();
  return Status::OK();
}

bool Update::Impl::Rebind(const bson_t* update) {
  bson_iter_t it, fields;
  if (!bson_iter_init(&it, update) || !bson_iter_next(&it) || Key(&it) != "$set" ||
      !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &fields)) {
    return false;
  }
  for (PathTree* leaf : set_leaves) {
    if (!bson_iter_next(&fields) || Key(&fields) != leaf->path ||
        !IsScalar(bson_iter_type(&fields))) {
      return false;
    }
    SetOperand(fields, leaf->path.size(), leaf);
  }
  return !bson_iter_next(&fields) && !bson_iter_next(&it);
}

Result<Update> Update::Parse(const Document& update) {
  bson_t b;
  update.View(&b);
  return Parse(&b);
}

namespace {

// Whether a $type operand names the array type ("array", 4, or a list
// holding either): such a $type tests the array itself, not an element.
bool NamesArrayType(const bson_iter_t* op) {
  auto names = [](const bson_iter_t* v) {
    if (BSON_ITER_HOLDS_UTF8(v)) return std::strcmp(bson_iter_utf8(v, nullptr), "array") == 0;
    return BSON_ITER_HOLDS_NUMBER(v) && bson_iter_as_int64(v) == 4;
  };
  if (!BSON_ITER_HOLDS_ARRAY(op)) return names(op);
  bson_iter_t e;
  if (!bson_iter_recurse(op, &e)) return false;
  while (bson_iter_next(&e)) {
    if (names(&e)) return true;
  }
  return false;
}

}  // namespace

Status Update::BindQuery(const Document& filter) {
  Impl& impl = *impl_;
  if (impl.positional_node == nullptr) return Status::OK();
  impl.positional_filter.reset();
  impl.positional_elem_match.reset();
  impl.positional_negated = false;
  // The top-level predicates on the array (those inside a top-level $and
  // too, which MongoDB flattens), renamed onto {"x": element}; an
  // $elemMatch on the array itself (MongoDB's way to name one element by
  // several fields) onto {"x": [element]}, where it holds for that element.
  // A predicate that names no element is left out, as MongoDB leaves it:
  // one on the array as a whole ($size, $exists, $type "array") or at a
  // fixed place ("a.0.b").
  const std::string& prefix = impl.positional_prefix;
  bson_t f, em;
  bson_init(&f);
  bson_init(&em);
  std::function<void(bson_iter_t*, int)> collect = [&](bson_iter_t* it, int depth) {
    while (bson_iter_next(it)) {
      std::string_view key = Key(it);
      bson_iter_t op;
      if (key == "$and" && depth < kMaxNestingDepth && BSON_ITER_HOLDS_ARRAY(it) &&
          bson_iter_recurse(it, &op)) {
        bson_iter_t clause;
        while (bson_iter_next(&op)) {
          if (BSON_ITER_HOLDS_DOCUMENT(&op) && bson_iter_recurse(&op, &clause)) {
            collect(&clause, depth + 1);
          }
        }
        continue;
      }
      if (key.substr(0, prefix.size()) != prefix ||
          (key.size() > prefix.size() && key[prefix.size()] != '.')) {
        continue;
      }
      if (key.size() > prefix.size()) {
        const std::string_view rest = key.substr(prefix.size() + 1);
        if (IsNumeric(rest.substr(0, rest.find('.')))) continue;  // a fixed place
      }
      if (key.size() == prefix.size() && BSON_ITER_HOLDS_DOCUMENT(it) &&
          bson_iter_recurse(it, &op) && bson_iter_find(&op, "$elemMatch")) {
        bson_t cond;
        bson_append_document_begin(&em, "x", 1, &cond);
        bson_append_iter(&cond, "$elemMatch", -1, &op);
        bson_append_document_end(&em, &cond);
        continue;
      }
      std::string renamed = "x" + std::string(key.substr(prefix.size()));
      const std::string_view first = FirstKey(bson_iter_value(it));
      if (first.empty() || first[0] != '$') {  // a value: an equality
        bson_append_iter(&f, renamed.data(), static_cast<int>(renamed.size()), it);
        continue;
      }
      // {a: {$ne: 5}} says no element is 5, so it names no element: taken
      // element by element it would name the first that is not 5 (MongoDB's
      // manual, $ (update), "Negations"). The other operators still do.
      bson_t kept;
      bson_init(&kept);
      bson_iter_recurse(it, &op);
      while (bson_iter_next(&op)) {
        const std::string_view name = Key(&op);
        if (name == "$ne" || name == "$nin" || name == "$not") {
          impl.positional_negated = true;
          continue;
        }
        if (key.size() == prefix.size() &&
            (name == "$size" || name == "$exists" || (name == "$type" && NamesArrayType(&op)))) {
          continue;  // the array as a whole
        }
        bson_append_iter(&kept, name.data(), static_cast<int>(name.size()), &op);
      }
      if (!bson_empty(&kept)) {
        bson_append_document(&f, renamed.data(), static_cast<int>(renamed.size()), &kept);
      }
      bson_destroy(&kept);
    }
  };
  bson_iter_t it;
  if (bson_iter_init_from_data(&it, filter.data(), filter.size())) collect(&it, 0);
  Status s;
  for (auto [b, out] :
       {std::pair{&f, &impl.positional_filter}, std::pair{&em, &impl.positional_elem_match}}) {
    if (!s.ok() || bson_count_keys(b) == 0) continue;
    auto parsed = Filter::Parse(b);
    if (parsed.ok()) {
      *out = std::make_unique<Filter>(std::move(parsed.value()));
    } else {
      s = parsed.status();
    }
  }
  bson_destroy(&f);
  bson_destroy(&em);
  return s;
}

bool Update::MayChange(std::string_view field) const {
  if (impl_->replacement) return true;
  std::string_view top = field.substr(0, field.find('.'));
  return impl_->tree.Find(top) != nullptr;
}

namespace {

// The value at `path` for $rename, through documents only: false when a
// part is missing or a scalar; InvalidArgument (naming `what` and the path)
// when an array lies on the way, as MongoDB refuses.
Status RenameLookup(const uint8_t* doc, size_t len, std::string_view path, const char* what,
                    bson_value_t* out, bool* found) {
  *found = false;
  const uint8_t* data = doc;
  size_t data_len = len;
  while (true) {
    size_t dot = path.find('.');
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, data_len) || !FindKey(&it, path.substr(0, dot))) {
      return Status::OK();
    }
    const bson_value_t* v = bson_iter_value(&it);
    if (dot == std::string_view::npos) {
      *out = *v;
      *found = true;
      return Status::OK();
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
      return Status::InvalidArgument(std::string("$rename ") + what + " lies inside an array",
                                     path);
    }
    if (v->value_type != BSON_TYPE_DOCUMENT) return Status::OK();
    data = v->value.v_doc.data;
    data_len = v->value.v_doc.data_len;
    path.remove_prefix(dot + 1);
  }
}

std::atomic<uint32_t> timestamp_counter{0};

}  // namespace

Status Update::Impl::Prepare(const uint8_t* doc, size_t len, const UpdateContext& ctx,
                             ApplyState* st) const {
  st->inserting = ctx.inserting;
  if (ctx.now_ms >= 0) {
    st->now_ms = ctx.now_ms;
    st->timestamp_increment = 1;
  } else {
    st->now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    st->timestamp_increment = timestamp_counter.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  for (const auto& [from, target] : renames) {
    bson_value_t v, ignored;
    bool found = false, target_found = false;
    MMDOC_RETURN_IF_ERROR(RenameLookup(doc, len, from, "source", &v, &found));
    if (!found) continue;
    MMDOC_RETURN_IF_ERROR(RenameLookup(doc, len, target->path, "target", &ignored, &target_found));
    if (static_cast<int>(PathParts(target->path)) + ValueDepth(&v) >= kMaxNestingDepth) {
      return Status::InvalidArgument("update nests deeper than 100 levels", target->path);
    }
    st->renamed.emplace_back(target, View{v});
  }
  if (positional_node != nullptr) {
    const std::string path = positional_prefix + ".$";
    bson_value_t arr;
    if (positional_filter == nullptr && positional_elem_match == nullptr && positional_negated) {
      return Status::InvalidArgument(
          "the positional operator cannot name an element from a negation ($ne, $nin, $not) of "
          "the array in the query",
          path);
    }
    if ((positional_filter == nullptr && positional_elem_match == nullptr) ||
        !LookupPath(doc, len, positional_prefix, &arr) || arr.value_type != BSON_TYPE_ARRAY) {
      return PositionalUnmatched(path);
    }
    bson_iter_t it;
    bson_iter_init_from_data(&it, arr.value.v_doc.data, arr.value.v_doc.data_len);
    bool matched = false;
    while (!matched && bson_iter_next(&it)) {
      // {"x": element}, or {"x": [element]}: what an $elemMatch on the array
      // holds for, and how an element that is an array is compared whole.
      const bool is_array = BSON_ITER_HOLDS_ARRAY(&it);
      bson_t plain, wrapped, wrap;
      bson_init(&plain);
      bson_init(&wrapped);
      if (is_array || positional_elem_match != nullptr) {
        bson_append_array_begin(&wrapped, "x", 1, &wrap);
        bson_append_iter(&wrap, "0", 1, &it);
        bson_append_array_end(&wrapped, &wrap);
      }
      if (!is_array) bson_append_iter(&plain, "x", 1, &it);
      const bson_t* candidate = is_array ? &wrapped : &plain;
      matched = (positional_filter == nullptr ||
                 positional_filter->Matches(bson_get_data(candidate), candidate->len)) &&
                (positional_elem_match == nullptr ||
                 positional_elem_match->Matches(bson_get_data(&wrapped), wrapped.len));
      bson_destroy(&plain);
      bson_destroy(&wrapped);
      if (matched) st->positional_key.assign(Key(&it));
    }
    if (!matched) return PositionalUnmatched(path);
    st->positional_parent = positional_node;
  }
  return Status::OK();
}

Status Update::Impl::ApplyOperators(const uint8_t* doc, size_t len, const ApplyState& st,
                                    std::string* out) const {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, doc, len)) {
    return Status::InvalidArgument("invalid BSON document");
  }
  bson_t result;
  bson_init(&result);
  Status s = Rewrite(&it, tree, false, "", st, &result);
  if (s.ok()) s = SizeOk(result.len);
  if (s.ok()) *out = Bytes(&result);
  bson_destroy(&result);
  return s;
}

Status Update::Apply(const uint8_t* doc, size_t len, std::string* out, bool fast_paths) const {
  UpdateContext context;
  context.fast_paths = fast_paths;
  return Apply(doc, len, context, out);
}

Status Update::Apply(const uint8_t* doc, size_t len, const UpdateContext& context,
                     std::string* out) const {
  bson_t src;
  bson_iter_t it;
  if (!bson_init_static(&src, doc, len) || !bson_iter_init(&it, &src)) {
    return Status::InvalidArgument("invalid BSON document");
  }
  if (context.fast_paths && !impl_->replacement && impl_->top_level) {
    SpliceTopLevel(impl_->tree, doc, len, out);
    MMDOC_RETURN_IF_ERROR(SizeOk(out->size()));
    return impl_->names_id ? IdUnchanged(doc, len, *out) : Status::OK();
  }
  if (!impl_->replacement) {
    (void)TakeRegexMatchError();  // $pull's and the positional $'s filters
    ApplyState st;
    MMDOC_RETURN_IF_ERROR(impl_->Prepare(doc, len, context, &st));
    Status s = impl_->ApplyOperators(doc, len, st, out);
    if (Status e = TakeRegexMatchError(); !e.ok()) return e;
    if (s.ok() && impl_->names_id) s = IdUnchanged(doc, len, *out);
    return s;
  }
  // _id stays first and unchanged; a replacement may repeat it, not change
  // it.
  bson_t result;
  bson_init(&result);
  Status s;
  bson_value_t old_id, new_id;
  bool has_old = LookupPath(doc, len, "_id", &old_id);
  const auto* rep = reinterpret_cast<const uint8_t*>(impl_->replacement_doc.data());
  size_t rep_len = impl_->replacement_doc.size();
  // Compared as bytes, type included, as IdUnchanged does for operators:
  // {_id: 1.0} does not replace the document with _id 1.
  if (LookupPath(rep, rep_len, "_id", &new_id) &&
      (!has_old || IdElement(rep, rep_len) != IdElement(doc, len))) {
    s = Status::InvalidArgument("replacement changes _id");
  } else {
    if (has_old) Append(&result, "_id", &old_id);
    bson_iter_t rit;
    bson_iter_init_from_data(&rit, rep, rep_len);
    while (bson_iter_next(&rit)) {
      if (Key(&rit) == "_id") continue;
      bson_append_iter(&result, bson_iter_key(&rit), -1, &rit);
    }
  }
  if (s.ok()) s = SizeOk(result.len);
  if (s.ok()) *out = Bytes(&result);
  bson_destroy(&result);
  return s;
}

namespace {

Status NotInferable(std::string_view path) {
  return Status::InvalidArgument(
      "cannot build the upserted document: the filter has two equalities on or along path", path);
}

// Adds the filter's equalities at this level to *base as $set leaves.
// `only`: the one top-level field to collect (a replacement takes only
// _id from its filter, and conflicts elsewhere do not concern it); all when
// empty.
Status CollectEqualities(bson_iter_t* it, PathTree* base, std::string_view only = {}) {
  auto add = [&](std::string_view path, const bson_value_t* v) -> Status {
    if (!only.empty() && path.substr(0, path.find('.')) != only) return Status::OK();
    std::string prefix;
    if (!CheckUpdatePath(path, &prefix).ok() || !prefix.empty()) return Status::OK();
    if (static_cast<int>(PathParts(path)) + ValueDepth(v) >= kMaxNestingDepth) {
      return Status::InvalidArgument("upserted document nests deeper than 100 levels", path);
    }
    PathTree* leaf = nullptr;
    if (!AddPath(base, path, &leaf).ok()) return NotInferable(path);
    leaf->op = PathTree::kSet;
    leaf->value_doc = OperandDoc(v);
    return Status::OK();
  };
  while (bson_iter_next(it)) {
    std::string_view key = Key(it);
    const bson_value_t* v = bson_iter_value(it);
    if (key == "$and" || key == "$or") {
      bson_iter_t clauses, clause;
      if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &clauses)) continue;
      if (key == "$or") {  // one clause only: it is then an $and
        bson_iter_t probe = clauses;
        if (!bson_iter_next(&probe) || bson_iter_next(&probe)) continue;
      }
      while (bson_iter_next(&clauses)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&clauses) && bson_iter_recurse(&clauses, &clause)) {
          MMDOC_RETURN_IF_ERROR(CollectEqualities(&clause, base, only));
        }
      }
      continue;
    }
    if (!key.empty() && key[0] == '$') continue;  // $nor, $comment, ...
    // {a: /re/} is a pattern to match, not a value to insert (MongoDB
    // leaves it out of an upsert's document; {a: {$eq: /re/}} keeps it).
    if (v->value_type == BSON_TYPE_REGEX) continue;
    std::string_view first = FirstKey(v);
    if (first.empty() || first[0] != '$') {
      MMDOC_RETURN_IF_ERROR(add(key, v));
      continue;
    }
    bson_iter_t ops;
    bson_iter_recurse(it, &ops);
    while (bson_iter_next(&ops)) {
      std::string_view op = Key(&ops);
      if (op == "$eq") {
        MMDOC_RETURN_IF_ERROR(add(key, bson_iter_value(&ops)));
      } else if ((op == "$in" || op == "$all") && BSON_ITER_HOLDS_ARRAY(&ops)) {
        // One value: an equality. MongoDB rewrites $all as an $and of
        // equalities, so two or more name the path twice (refused); a longer
        // $in is none.
        bson_value_t in = *bson_iter_value(&ops);
        std::vector<View> elems;
        Elements(&in, &elems);
        if (op == "$in" && elems.size() != 1) continue;
        for (const View& e : elems) {
          if (e.v.value_type == BSON_TYPE_REGEX || FirstKey(&e.v) == "$elemMatch") continue;
          MMDOC_RETURN_IF_ERROR(add(key, &e.v));
        }
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status Update::UpsertDocument(const Document& filter, const UpdateContext& context,
                              std::string* out) const {
  if (impl_->positional_node != nullptr) {
    return PositionalUnmatched(impl_->positional_prefix + ".$");
  }
  PathTree equalities;
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, filter.data(), filter.size())) {
    return Status::InvalidArgument("filter is not a BSON document");
  }
  MMDOC_RETURN_IF_ERROR(
      CollectEqualities(&it, &equalities, impl_->replacement ? "_id" : std::string_view()));
  if (impl_->replacement) {
    // A replacement takes the filter's _id whole, not built from its parts.
    for (const auto& [name, child] : equalities.children) {
      if (name == "_id" && !child->children.empty())
        return Status::InvalidArgument(
            "cannot build the upserted document: a replacement takes the filter's _id whole, "
            "not by its parts",
            "_id");
    }
  }
  // In the order of their paths, as MongoDB builds an upserted document
  // (not the filter's): {b: 1, a: 1} upserts {a: 1, b: 1}.
  SortChildren(&equalities);
  ApplyState inserting;
  inserting.inserting = true;
  std::string base;
  const Document empty;
  {
    bson_iter_t eit;
    bson_iter_init_from_data(&eit, empty.data(), empty.size());
    bson_t result;
    bson_init(&result);
    Status s = Rewrite(&eit, equalities, false, "", inserting, &result);
    if (s.ok()) base = Bytes(&result);
    bson_destroy(&result);
    MMDOC_RETURN_IF_ERROR(s);
  }
  const auto* base_data = reinterpret_cast<const uint8_t*>(base.data());
  if (!impl_->replacement) {
    UpdateContext c = context;
    c.inserting = true;
    MMDOC_RETURN_IF_ERROR(Apply(base_data, base.size(), c, out));
    // An _id the update gave ($set, $setOnInsert) was appended, and one
    // from the filter may follow other fields: first, as an insert has it.
    const auto* data = reinterpret_cast<const uint8_t*>(out->data());
    bson_iter_t it, first;
    if (!bson_iter_init_from_data(&it, data, out->size()) || !FindKey(&it, "_id")) {
      return Status::OK();
    }
    MMDOC_RETURN_IF_ERROR(CheckIdValue(bson_iter_value(&it)));
    bson_iter_init_from_data(&first, data, out->size());
    if (bson_iter_next(&first) && Key(&first) == "_id") return Status::OK();
    return WithIdFirst(data, out->size(), bson_iter_value(&it), out);
  }
  // A replacement: itself, with the filter's _id when it has none.
  bson_value_t filter_id, own_id;
  bool has_filter_id = LookupPath(base_data, base.size(), "_id", &filter_id);
  const auto* rep = reinterpret_cast<const uint8_t*>(impl_->replacement_doc.data());
  size_t rep_len = impl_->replacement_doc.size();
  if (LookupPath(rep, rep_len, "_id", &own_id)) {
    if (has_filter_id && CompareValues(&filter_id, &own_id) != 0) {
      return Status::InvalidArgument("replacement _id differs from the filter's _id");
    }
    out->assign(impl_->replacement_doc);
    return Status::OK();
  }
  bson_t result;
  bson_init(&result);
  if (has_filter_id) Append(&result, "_id", &filter_id);
  bson_t r;
  bson_init_static(&r, rep, rep_len);
  bson_concat(&result, &r);
  Status s = SizeOk(result.len);
  if (s.ok()) *out = Bytes(&result);
  bson_destroy(&result);
  return s;
}

// -------------------------------------------------------------- Projection

Projection::Projection() = default;
Projection::~Projection() = default;
Projection::Projection(Projection&&) noexcept = default;
Projection& Projection::operator=(Projection&&) noexcept = default;

Result<Projection> Projection::Parse(const std::vector<std::string>& fields) {
  Projection p;
  std::vector<std::string> parts;
  bool keep_id = false;
  for (const std::string& f : fields) {
    const bool drop = !f.empty() && f[0] == '-';  // MongoDB's {a: 0}
    const std::string path = drop ? f.substr(1) : f;
    if (path.empty()) return Status::InvalidArgument("empty field path in projection", f);
    MMDOC_RETURN_IF_ERROR(SplitPath(path, &parts));
    for (const std::string& part : parts) {
      // "$a", "a.$" (MongoDB's positional projection): operators, not fields.
      if (part[0] == '$') {
        return Status::InvalidArgument("projection field names must not start with '$'", f);
      }
    }
    if (drop && path == "_id") {
      p.drop_id_ = true;
    } else if (drop) {
      p.dropped_.push_back(path);
    } else {
      keep_id = keep_id || path == "_id";
      p.fields_.push_back(path);
    }
  }
  if (keep_id && p.drop_id_) {
    return Status::InvalidArgument("a projection cannot both keep and drop _id");
  }
  // As MongoDB: fields are either kept or dropped; only _id goes either way.
  for (const std::string& f : p.fields_) {
    if (f != "_id" && !p.dropped_.empty()) {
      return Status::InvalidArgument(
          "a projection cannot both keep and drop fields (only _id may be dropped from one that "
          "keeps)",
          f + " and -" + p.dropped_.front());
    }
  }
  // As MongoDB 4.4: a path below another one given ("a" and "a.b") is a
  // collision, not the shorter one winning.
  std::vector<std::string> all = p.fields_;
  all.insert(all.end(), p.dropped_.begin(), p.dropped_.end());
  if (p.drop_id_) all.push_back("_id");
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + 1 < all.size(); i++) {
    for (size_t j = i + 1; j < all.size() && all[j].compare(0, all[i].size(), all[i]) == 0; j++) {
      if (all[j].size() > all[i].size() && all[j][all[i].size()] == '.') {
        return Status::InvalidArgument("projection path collision at " + all[j],
                                       all[i] + " and " + all[j]);
      }
    }
  }
  return p;
}

bool Projection::empty() const { return fields_.empty() && dropped_.empty() && !drop_id_; }

namespace {

// Copies the parts of the container `it` iterates that `n` selects (a leaf
// selects the whole field). Array elements that are documents are projected
// one by one, arrays in arrays element by element (find's projection, not
// aggregation's $project); other elements are dropped, as MongoDB does.
void Project(bson_iter_t* it, const PathTree& n, bool top, bool is_array, bool drop_id,
             bson_t* out) {
  uint32_t index = 0;
  while (bson_iter_next(it)) {
    std::string_view key = Key(it);
    const PathTree* c = is_array ? &n : n.Find(key);
    // _id is kept whole unless dropped, or unless parts of it are named
    // ("_id.x"), which are kept as any field's.
    if (top && key == "_id" && (c == nullptr || c->op != PathTree::kNone)) {
      if (!drop_id) bson_append_iter(out, key.data(), static_cast<int>(key.size()), it);
      continue;
    }
    if (c == nullptr) continue;
    if (c->op != PathTree::kNone) {
      bson_append_iter(out, key.data(), static_cast<int>(key.size()), it);
      continue;
    }
    bool sub_array = BSON_ITER_HOLDS_ARRAY(it);
    bson_iter_t sub_it;
    if (!(sub_array || BSON_ITER_HOLDS_DOCUMENT(it)) || !bson_iter_recurse(it, &sub_it)) {
      continue;
    }
    std::string k = is_array ? std::to_string(index++) : std::string(key);
    bson_t sub;
    if (sub_array) {
      bson_append_array_begin(out, k.data(), static_cast<int>(k.size()), &sub);
      Project(&sub_it, *c, false, true, false, &sub);
      bson_append_array_end(out, &sub);
    } else {
      bson_append_document_begin(out, k.data(), static_cast<int>(k.size()), &sub);
      Project(&sub_it, *c, false, false, false, &sub);
      bson_append_document_end(out, &sub);
    }
  }
}

// Copies the container `it` iterates without the parts `n` names (a leaf
// drops the whole field). In an array, each document (at any depth of
// nested arrays) loses them; other elements stay, as in MongoDB.
void Drop(bson_iter_t* it, const PathTree& n, bool top, bool is_array, bool drop_id, bson_t* out) {
  while (bson_iter_next(it)) {
    std::string_view key = Key(it);
    if (top && drop_id && key == "_id") continue;
    const bool doc = BSON_ITER_HOLDS_DOCUMENT(it), array = BSON_ITER_HOLDS_ARRAY(it);
    const PathTree* c = is_array ? ((doc || array) ? &n : nullptr) : n.Find(key);
    if (c != nullptr && !is_array && c->op != PathTree::kNone) continue;  // dropped
    bson_iter_t sub_it;
    if (c == nullptr || !(doc || array) || !bson_iter_recurse(it, &sub_it)) {
      bson_append_iter(out, key.data(), static_cast<int>(key.size()), it);
      continue;
    }
    bson_t sub;
    if (array) {
      bson_append_array_begin(out, key.data(), static_cast<int>(key.size()), &sub);
      Drop(&sub_it, *c, false, true, false, &sub);
      bson_append_array_end(out, &sub);
    } else {
      bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &sub);
      Drop(&sub_it, *c, false, false, false, &sub);
      bson_append_document_end(out, &sub);
    }
  }
}

}  // namespace

void Projection::Apply(const uint8_t* doc, size_t len, std::string* out) const {
  if (empty()) {
    out->assign(reinterpret_cast<const char*>(doc), len);
    return;
  }
  // Dropping: fields to drop were given, or only -_id. (Parse refused a mix.)
  const bool dropping = !dropped_.empty() || fields_.empty();
  // Built per call: projections are small and applied to returned documents
  // only. A shorter path wins over a longer one below it ("a" over "a.b").
  PathTree tree;
  std::vector<std::string> parts;
  for (const std::string& f : dropping ? dropped_ : fields_) {
    (void)SplitPath(f, &parts);  // validated in Parse
    PathTree* n = &tree;
    for (const std::string& part : parts) {
      if (n->op != PathTree::kNone) break;
      n = n->Child(part);
    }
    n->op = PathTree::kSet;
    n->children.clear();
  }
  bson_iter_t it;
  bson_t result;
  bson_init(&result);
  if (bson_iter_init_from_data(&it, doc, len)) {
    if (dropping) {
      Drop(&it, tree, true, false, drop_id_, &result);
    } else {
      Project(&it, tree, true, false, drop_id_, &result);
    }
  }
  *out = Bytes(&result);
  bson_destroy(&result);
}

// -------------------------------------------------------- PrepareForInsert

Status PrepareForInsert(const Document& in, std::string* out_bson, Value* id) {
  MMDOC_RETURN_IF_ERROR(CheckFieldNames(in.data(), in.size()));
  bson_value_t existing;
  bson_value_t fresh;
  const bson_value_t* idv = &existing;
  if (LookupPath(in.data(), in.size(), "_id", &existing)) {
    MMDOC_RETURN_IF_ERROR(CheckIdValue(&existing));
  } else {
    fresh.value_type = BSON_TYPE_OID;
    bson_oid_init(&fresh.value.v_oid, nullptr);
    idv = &fresh;
  }
  // Fast path: _id is already the first field, so the bytes are stored as
  // given (the common case: documents that carry their own _id, and
  // everything replayed from the log).
  if (idv == &existing) {
    bson_iter_t first;
    if (bson_iter_init_from_data(&first, in.data(), in.size()) && bson_iter_next(&first) &&
        Key(&first) == "_id") {
      out_bson->assign(reinterpret_cast<const char*>(in.data()), in.size());
      if (id != nullptr) *id = Value::FromBsonValue(idv);
      return Status::OK();
    }
  }
  MMDOC_RETURN_IF_ERROR(WithIdFirst(in.data(), in.size(), idv, out_bson));
  if (id != nullptr) *id = Value::FromBsonValue(idv);
  return Status::OK();
}

}  // namespace mmdoc::engine
