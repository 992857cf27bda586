// Update ($set/$unset/$inc or replacement), Projection, PrepareForInsert and
// CheckFieldNames.
//
// A stored document has no '$' keys and no field name twice in one
// (sub)document, at any depth: CheckFieldNames, run on what Insert and
// Replace store, on replacements and on $set values. An operator update of
// such a document keeps it so (each path is applied once, in place or
// appended when absent), so its results are not walked again.
//
// Operator updates are applied in one pass over the original document: the
// update's paths form a tree (PathTree), and Rewrite copies the document
// element by element, replacing, dropping or descending where the tree says,
// then appends the fields the tree still holds (in the update's order) at
// the end of their subdocument. So untouched fields keep their order and
// bytes.
//
// Arrays: a numeric path part addresses an array element ("a.1"); $set past
// the end pads with nulls, as MongoDB does. $set/$inc through a scalar is
// InvalidArgument; $unset through anything absent is a no-op.
// $inc: int32+int32 stays int32 unless it overflows (then int64); with an
// int64 the result is int64 (overflow is InvalidArgument); with a double it
// is a double. Decimal128 is not supported by $inc.
// Values are stored as given, regex values included (MongoDB stores them;
// only a filter would read one as a pattern, and filters refuse them).
#include <bson/bson.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "query.h"
#include "query_path.h"
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
// iterates (an array's keys are positions, not names: not compared).
Status CheckNamesIn(bson_iter_t* it, bool is_array) {
  const bson_iter_t start = *it;
  std::string_view first[kLinearKeys];
  size_t n = 0;  // keys in first[]; past kLinearKeys, CheckWideLevel ran
  while (bson_iter_next(it)) {
    const std::string_view key = Key(it);
    if (!key.empty() && key[0] == '$') {
      return Status::InvalidArgument("field names must not start with '$'", key);
    }
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
      MMDOC_RETURN_IF_ERROR(CheckNamesIn(&child, array));
    }
  }
  return Status::OK();
}

Status CheckValueNames(const bson_value_t* v) {
  if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) {
    return Status::OK();
  }
  return CheckFieldNames(v->value.v_doc.data, v->value.v_doc.data_len);
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

// The paths of an update or projection as a tree, children in the order
// they were first named.
struct PathTree {
  enum Op { kNone, kSet, kUnset, kInc };
  Op op = kNone;
  // kSet, kInc: the operand as the one-element document {"": value}, built
  // from the update's bytes without libbson; raw_type() and raw() are its
  // element's type byte and value bytes, for Apply's top-level splice.
  std::string value_doc;
  std::string path;
  std::vector<std::pair<std::string, std::unique_ptr<PathTree>>> children;

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
  PathTree* Child(std::string_view name) {
    if (PathTree* c = Find(name)) return c;
    children.emplace_back(std::string(name), std::make_unique<PathTree>());
    return children.back().second.get();
  }
  // Whether anything below creates fields ($set/$inc), as opposed to $unset.
  bool Creates() const {
    if (op == kSet || op == kInc) return true;
    for (const auto& c : children) {
      if (c.second->Creates()) return true;
    }
    return false;
  }
};

// Adds `path` to the tree; InvalidArgument when it equals, contains or lies
// inside a path already there (MongoDB's "conflict" error).
Status AddPath(PathTree* root, std::string_view path, PathTree** leaf) {
  std::vector<std::string> parts;
  if (path.find('.') == std::string_view::npos) {
    if (path.empty()) return Status::InvalidArgument("bad field path", path);
  } else {
    MMDOC_RETURN_IF_ERROR(SplitPath(path, &parts));
  }
  PathTree* n = root;
  for (size_t i = 0; i < std::max<size_t>(parts.size(), 1); i++) {
    n = n->Child(parts.empty() ? path : std::string_view(parts[i]));
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

// MongoDB update operators not implemented here: named "unsupported" so
// that nobody hunts for a typo.
bool IsMongoUpdateOperator(std::string_view name) {
  static const char* const kNames[] = {"$addToSet", "$bit",  "$currentDate", "$max",
                                       "$min",      "$mul",  "$pop",         "$pull",
                                       "$pullAll",  "$push", "$rename",      "$setOnInsert"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

bool IsNumber(bson_type_t t) {
  return t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE;
}

// current + delta with MongoDB's type promotion, into *out.
Status Add(const bson_value_t* current, const bson_value_t* delta, const std::string& path,
           bson_value_t* out) {
  bson_type_t a = current->value_type, b = delta->value_type;
  if (!IsNumber(a)) {
    return Status::InvalidArgument("$inc on a non-number field", path);
  }
  if (a == BSON_TYPE_DOUBLE || b == BSON_TYPE_DOUBLE) {
    auto as_double = [](const bson_value_t* v) {
      return v->value_type == BSON_TYPE_DOUBLE  ? v->value.v_double
             : v->value_type == BSON_TYPE_INT64 ? static_cast<double>(v->value.v_int64)
                                                : static_cast<double>(v->value.v_int32);
    };
    out->value_type = BSON_TYPE_DOUBLE;
    out->value.v_double = as_double(current) + as_double(delta);
    return Status::OK();
  }
  int64_t x = a == BSON_TYPE_INT64 ? current->value.v_int64 : current->value.v_int32;
  int64_t y = b == BSON_TYPE_INT64 ? delta->value.v_int64 : delta->value.v_int32;
  int64_t sum;
  if (__builtin_add_overflow(x, y, &sum)) {
    return Status::InvalidArgument("integer overflow in $inc", path);
  }
  if (a == BSON_TYPE_INT32 && b == BSON_TYPE_INT32 && sum >= INT32_MIN && sum <= INT32_MAX) {
    out->value_type = BSON_TYPE_INT32;
    out->value.v_int32 = static_cast<int32_t>(sum);
  } else {
    out->value_type = BSON_TYPE_INT64;
    out->value.v_int64 = sum;
  }
  return Status::OK();
}

void Append(bson_t* out, std::string_view key, const bson_value_t* v) {
  bson_append_value(out, key.data(), static_cast<int>(key.size()), v);
}

Status Create(const PathTree& n, std::string_view key, bson_t* out);

// Appends the fields of `n` not yet in the container (is_array: elements
// "0".."len-1" exist; numeric names beyond pad with null).
Status AppendMissing(const PathTree& n, const std::vector<const PathTree*>& seen, bool is_array,
                     uint32_t array_len, const std::string& where, bson_t* out) {
  if (!is_array) {
    for (const auto& [name, child] : n.children) {
      if (std::find(seen.begin(), seen.end(), child.get()) != seen.end()) continue;
      MMDOC_RETURN_IF_ERROR(Create(*child, name, out));
    }
    return Status::OK();
  }
  std::vector<std::pair<uint64_t, const PathTree*>> extra;
  for (const auto& [name, child] : n.children) {
    if (std::find(seen.begin(), seen.end(), child.get()) != seen.end()) continue;
    if (!child->Creates()) continue;
    if (!IsNumeric(name) || name.size() > 7) {
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
    MMDOC_RETURN_IF_ERROR(Create(*child, std::to_string(index), out));
    next = index + 1;
  }
  return Status::OK();
}

// Creates field `key` from scratch: a value ($set, $inc on a missing field)
// or a new subdocument holding the fields below.
Status Create(const PathTree& n, std::string_view key, bson_t* out) {
  switch (n.op) {
    case PathTree::kSet:
    case PathTree::kInc: {
      bson_value_t v = n.value();
      Append(out, key, &v);
      return Status::OK();
    }
    case PathTree::kUnset:
      return Status::OK();
    case PathTree::kNone:
      break;
  }
  if (!n.Creates()) return Status::OK();
  bson_t sub;
  bson_append_document_begin(out, key.data(), static_cast<int>(key.size()), &sub);
  Status s = AppendMissing(n, {}, false, 0, std::string(key), &sub);
  bson_append_document_end(out, &sub);
  return s;
}

// Copies the container `it` iterates into `out`, applying the tree `n`.
Status Rewrite(bson_iter_t* it, const PathTree& n, bool is_array, const std::string& where,
               bson_t* out) {
  std::vector<const PathTree*> seen;
  uint32_t count = 0;
  while (bson_iter_next(it)) {
    ++count;
    std::string_view key = Key(it);
    const PathTree* c = n.Find(key);
    if (c == nullptr) {
      bson_append_iter(out, key.data(), static_cast<int>(key.size()), it);
      continue;
    }
    seen.push_back(c);
    const bson_value_t* cur = bson_iter_value(it);
    switch (c->op) {
      case PathTree::kSet: {
        bson_value_t v = c->value();
        Append(out, key, &v);
        continue;
      }
      case PathTree::kUnset:
        continue;
      case PathTree::kInc: {
        bson_value_t sum;
        bson_value_t delta = c->value();
        MMDOC_RETURN_IF_ERROR(Add(cur, &delta, c->path, &sum));
        Append(out, key, &sum);
        continue;
      }
      case PathTree::kNone:
        break;
    }
    std::string sub_where = where.empty() ? std::string(key) : where + "." + std::string(key);
    bool sub_array = BSON_ITER_HOLDS_ARRAY(it);
    bson_iter_t sub_it;
    if ((!sub_array && !BSON_ITER_HOLDS_DOCUMENT(it)) || !bson_iter_recurse(it, &sub_it)) {
      if (!c->Creates()) {  // $unset below a scalar: nothing to remove
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
    Status s = Rewrite(&sub_it, *c, sub_array, sub_where, &sub);
    if (sub_array) {
      bson_append_array_end(out, &sub);
    } else {
      bson_append_document_end(out, &sub);
    }
    MMDOC_RETURN_IF_ERROR(s);
  }
  return AppendMissing(n, seen, is_array, count, where, out);
}

}  // namespace

Status CheckFieldNames(const uint8_t* doc, size_t len) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, doc, len)) {
    return Status::InvalidArgument("invalid BSON document");
  }
  return CheckNamesIn(&it, false);
}

// ------------------------------------------------------------------ Update

struct Update::Impl {
  bool replacement = false;
  std::string replacement_doc;  // BSON
  PathTree tree;
  bool top_level = false;  // only $set/$unset of top-level fields
};

namespace {

// Applies an update of top-level $set/$unset only by copying the document's
// elements as bytes and splicing in the new ones, without libbson building
// a new document, which cost most of a one-field update. Gives the same bytes as Rewrite: fields
// keep their place, $set of a missing field appends it in update order.
void SpliceTopLevel(const PathTree& tree, const uint8_t* doc, size_t len, std::string* out) {
  out->clear();
  out->reserve(len + 64);
  out->append(4, '\0');  // length, filled in below
  std::vector<const PathTree*> seen;
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
    node = tree.Find(std::string_view(key, key_len));
    if (node != nullptr) seen.push_back(node);
  }
  flush(doc + len - 1);
  for (const auto& [name, child] : tree.children) {
    if (child->op != PathTree::kSet) continue;
    if (std::find(seen.begin(), seen.end(), child.get()) != seen.end()) continue;
    out->push_back(static_cast<char>(child->raw_type()));
    out->append(name);
    out->push_back('\0');
    out->append(child->raw());
  }
  out->push_back('\0');
  uint32_t n = static_cast<uint32_t>(out->size());
  storage::EncodeFixed32(out->data(), n);  // BSON's int32 length: little-endian
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

Result<Update> Update::Parse(const bson_t* update) {
  bson_iter_t it;
  if (update == nullptr || !bson_iter_init(&it, update)) {
    return Status::InvalidArgument("update is not a BSON document");
  }
  Update u(kOperators);
  bson_iter_t peek = it;
  bool operators = bson_iter_next(&peek) && bson_iter_key(&peek)[0] == '$';
  if (!operators) {
    // A replacement document: stored as given (minus _id handling in Apply).
    MMDOC_RETURN_IF_ERROR(CheckFieldNames(bson_get_data(update), update->len));
    u.impl_->replacement = true;
    u.impl_->replacement_doc = Bytes(update);
    return u;
  }
  u.impl_->replacement = false;
  while (bson_iter_next(&it)) {
    std::string_view op_name = Key(&it);
    PathTree::Op op;
    if (op_name == "$set") {
      op = PathTree::kSet;
    } else if (op_name == "$unset") {
      op = PathTree::kUnset;
    } else if (op_name == "$inc") {
      op = PathTree::kInc;
    } else if (op_name.empty() || op_name[0] != '$') {
      return Status::InvalidArgument("cannot mix update operators and fields", op_name);
    } else {
      return Status::InvalidArgument(
          (IsMongoUpdateOperator(op_name) ? "unsupported update operator " : "unknown operator ") +
          std::string(op_name));
    }
    bson_iter_t fields;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &fields)) {
      return Status::InvalidArgument(std::string(op_name) + " needs a document");
    }
    while (bson_iter_next(&fields)) {
      std::string_view path = Key(&fields);
      if (path == "_id" || path.substr(0, 4) == "_id.") {
        return Status::InvalidArgument("cannot modify _id");
      }
      if (path.empty() || path[0] == '$' || path.find(".$") != std::string_view::npos) {
        return Status::InvalidArgument("field names must not start with '$'", path);
      }
      const bson_value_t* v = bson_iter_value(&fields);
      if (op == PathTree::kInc && !IsNumber(v->value_type)) {
        return Status::InvalidArgument("$inc needs a number for field", path);
      }
      if (op == PathTree::kSet) MMDOC_RETURN_IF_ERROR(CheckValueNames(v));
      if (op != PathTree::kUnset) {
        // $set and $inc create missing parents, so a long path alone can
        // nest the document too deep (found by fuzz_update).
        size_t parts = std::count(path.begin(), path.end(), '.') + 1;
        if (static_cast<int>(parts) + ValueDepth(v) >= kMaxNestingDepth) {
          return Status::InvalidArgument("update nests deeper than 100 levels", path);
        }
      }
      PathTree* leaf = nullptr;
      MMDOC_RETURN_IF_ERROR(AddPath(&u.impl_->tree, path, &leaf));
      leaf->op = op;
      if (op != PathTree::kUnset) {
        // The element's value bytes, straight from the update document: an
        // element runs from its type byte (just before its key) to where
        // the iterator found the next element (next_off; the subdocument's
        // final NUL after the last one).
        const char* key = bson_iter_key(&fields);
        const char* end = reinterpret_cast<const char*>(fields.raw) + fields.next_off;
        const char* value = key + path.size() + 1;
        std::string& d = leaf->value_doc;
        const uint32_t len = static_cast<uint32_t>(4 + 2 + (end - value) + 1);
        d.reserve(len);
        d.resize(4);
        storage::EncodeFixed32(d.data(), len);
        d.push_back(key[-1]);  // the element's type byte
        d.push_back('\0');     // its key, ""
        d.append(value, end - value);
        d.push_back('\0');
      }
    }
  }
  // The common shape {$set/$unset: {top-level fields}} is applied by
  // splicing bytes (see SpliceTopLevel).
  u.impl_->top_level = true;
  for (const auto& [name, child] : u.impl_->tree.children) {
    if (!child->children.empty() || child->op == PathTree::kInc) {
      u.impl_->top_level = false;
    }
  }
  return u;
}

Result<Update> Update::Parse(const Document& update) {
  bson_t b;
  update.View(&b);
  return Parse(&b);
}

bool Update::MayChange(std::string_view field) const {
  if (impl_->replacement) return true;
  std::string_view top = field.substr(0, field.find('.'));
  return impl_->tree.Find(top) != nullptr;
}

Status Update::Apply(const uint8_t* doc, size_t len, std::string* out, bool fast_paths) const {
  bson_t src;
  bson_iter_t it;
  if (!bson_init_static(&src, doc, len) || !bson_iter_init(&it, &src)) {
    return Status::InvalidArgument("invalid BSON document");
  }
  if (fast_paths && !impl_->replacement && impl_->top_level) {
    SpliceTopLevel(impl_->tree, doc, len, out);
    return SizeOk(out->size());
  }
  bson_t result;
  bson_init(&result);
  Status s;
  if (impl_->replacement) {
    // _id stays first and unchanged; a replacement may repeat it, not
    // change it.
    bson_value_t old_id, new_id;
    bool has_old = LookupPath(doc, len, "_id", &old_id);
    const auto* rep = reinterpret_cast<const uint8_t*>(impl_->replacement_doc.data());
    size_t rep_len = impl_->replacement_doc.size();
    if (LookupPath(rep, rep_len, "_id", &new_id) &&
        (!has_old || CompareValues(&old_id, &new_id) != 0)) {
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
  } else {
    s = Rewrite(&it, impl_->tree, false, "", &result);
  }
  if (s.ok()) s = SizeOk(result.len);
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
  for (const std::string& f : fields) {
    if (f.empty()) return Status::InvalidArgument("empty field path in projection");
    // "-a" reads as MongoDB's {a: 0}, which is not implemented: refuse it
    // rather than keep a field nobody has.
    if (f[0] == '-') {
      return Status::InvalidArgument(
          "exclusion projections are not supported; list the fields to keep", f);
    }
    MMDOC_RETURN_IF_ERROR(SplitPath(f, &parts));
    for (const std::string& part : parts) {
      // "$a", "a.$" (MongoDB's positional projection): operators, not fields.
      if (part[0] == '$') {
        return Status::InvalidArgument("projection field names must not start with '$'", f);
      }
    }
    p.fields_.push_back(f);
  }
  return p;
}

bool Projection::empty() const { return fields_.empty(); }

namespace {

// Copies the parts of the container `it` iterates that `n` selects (a leaf
// selects the whole field). Array elements that are documents are projected
// one by one; other elements are dropped, as MongoDB does.
void Project(bson_iter_t* it, const PathTree& n, bool top, bool is_array, bson_t* out) {
  uint32_t index = 0;
  while (bson_iter_next(it)) {
    std::string_view key = Key(it);
    const PathTree* c = is_array ? &n : n.Find(key);
    if (top && key == "_id") {
      bson_append_iter(out, key.data(), static_cast<int>(key.size()), it);
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
    if (is_array && sub_array) continue;  // arrays in arrays are not projected into
    std::string k = is_array ? std::to_string(index++) : std::string(key);
    bson_t sub;
    if (sub_array) {
      bson_append_array_begin(out, k.data(), static_cast<int>(k.size()), &sub);
      Project(&sub_it, *c, false, true, &sub);
      bson_append_array_end(out, &sub);
    } else {
      bson_append_document_begin(out, k.data(), static_cast<int>(k.size()), &sub);
      Project(&sub_it, *c, false, false, &sub);
      bson_append_document_end(out, &sub);
    }
  }
}

}  // namespace

void Projection::Apply(const uint8_t* doc, size_t len, std::string* out) const {
  if (fields_.empty()) {
    out->assign(reinterpret_cast<const char*>(doc), len);
    return;
  }
  // Built per call: projections are small and applied to returned documents
  // only. A shorter path wins over a longer one below it ("a" over "a.b").
  PathTree tree;
  std::vector<std::string> parts;
  for (const std::string& f : fields_) {
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
  if (bson_iter_init_from_data(&it, doc, len)) Project(&it, tree, true, false, &result);
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
    switch (existing.value_type) {
      case BSON_TYPE_ARRAY:
      case BSON_TYPE_UNDEFINED:
      case BSON_TYPE_REGEX:
        return Status::InvalidArgument("_id cannot be an array, undefined or a regex");
      default:
        break;
    }
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
  bson_t result;
  bson_init(&result);
  Append(&result, "_id", idv);
  bson_iter_t it;
  if (bson_iter_init_from_data(&it, in.data(), in.size())) {
    while (bson_iter_next(&it)) {
      if (Key(&it) == "_id") continue;
      bson_append_iter(&result, bson_iter_key(&it), static_cast<int>(bson_iter_key_len(&it)), &it);
    }
  }
  Status s = SizeOk(result.len);
  if (s.ok()) {
    *out_bson = Bytes(&result);
    if (id != nullptr) *id = Value::FromBsonValue(idv);
  }
  bson_destroy(&result);
  return s;
}

}  // namespace mmdoc::engine
