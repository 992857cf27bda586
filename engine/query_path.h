// Private helpers shared by keys.cc, filter.cc and update.cc: MongoDB's
// canonical type ranks and the walk over the values a dotted path reaches.
//
// The same walk (VisitPath) serves Filter::Matches and IndexKeys, so that a
// document's index keys hold every value a filter sees at a path; that is
// what makes Filter::IndexBounds sound. The one difference (DeadEnd) adds a
// null key the filter then refuses.
#ifndef MMDOC_ENGINE_QUERY_PATH_H_
#define MMDOC_ENGINE_QUERY_PATH_H_

#include <bson/bson.h>

#include <cstring>
#include <string_view>

namespace mmdoc::engine {

// MongoDB's canonical type order as small integers; values of different
// ranks never compare equal, and range operators only compare within a rank.
// Undefined sorts just below null (MongoDB's canonical order) so that the
// two stay distinct values.
enum TypeRank : int {
  kRankMinKey = 1,
  kRankUndefined,
  kRankNull,
  kRankNumber,
  kRankString,  // string and symbol
  kRankObject,
  kRankArray,
  kRankBinary,
  kRankOid,
  kRankBool,
  kRankDate,
  kRankTimestamp,
  kRankRegex,
  kRankDbPointer,
  kRankCode,
  kRankCodeWScope,
  kRankMaxKey,
};

int CanonicalRank(bson_type_t t);

// The first byte of every AppendKey encoding: the rank, shifted so that 0x00
// stays free as the terminator inside encoded arrays and documents. All keys
// of rank r lie in [KeyRankByte(r), KeyRankByte(r + 1)).
constexpr char KeyRankByte(int rank) { return static_cast<char>(rank + 0x0F); }

inline bool IsNumeric(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Advances `it` to the element whose key is exactly `key`.
inline bool FindKey(bson_iter_t* it, std::string_view key) {
  while (bson_iter_next(it)) {
    if (bson_iter_key_len(it) == key.size() &&
        std::memcmp(bson_iter_key(it), key.data(), key.size()) == 0) {
      return true;
    }
  }
  return false;
}

// What an array met before the path's last part gives when no element
// leads on (no document in it, and no element at a numeric part): for index
// keys, a missing value (keyed null, a superset the filter narrows); for
// matching, nothing, as in MongoDB: {"a.b": null} does not match {a: [1]}
// or {a: []}, and {"a.b": {$ne: null}} does.
enum class DeadEnd { kMissing, kNothing };

// Calls fn(const bson_value_t* v) for every value `path` reaches in the
// document (data, len), and fn(nullptr) for every branch where it is
// missing. Arrays met before the last path part fan out: each element that
// is a document is searched for the rest of the path, and a numeric part
// also indexes the array positionally ({"a": [{"b": 1}, {"b": 2}]} on "a.b"
// reaches 1 and 2); an array where neither leads on is a DeadEnd. A value
// reached at the end of the path is passed whole, arrays included; callers
// decide how to treat elements. fn returns true to stop the walk; VisitPath
// then returns true. No allocation.
template <DeadEnd kDeadEnd = DeadEnd::kMissing, typename Fn>
bool VisitPath(const uint8_t* data, size_t len, std::string_view path, Fn& fn);

namespace internal {

template <DeadEnd kDeadEnd, typename Fn>
bool Descend(const bson_value_t* v, std::string_view rest, Fn& fn) {
  if (v->value_type == BSON_TYPE_DOCUMENT) {
    return VisitPath<kDeadEnd>(v->value.v_doc.data, v->value.v_doc.data_len, rest, fn);
  }
  if (v->value_type != BSON_TYPE_ARRAY) return fn(nullptr);
  bool reached = false;
  bson_iter_t it;
  if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
    while (bson_iter_next(&it)) {
      if (bson_iter_type(&it) != BSON_TYPE_DOCUMENT) continue;
      reached = true;
      uint32_t sub_len = 0;
      const uint8_t* sub = nullptr;
      bson_iter_document(&it, &sub_len, &sub);
      if (VisitPath<kDeadEnd>(sub, sub_len, rest, fn)) return true;
    }
  }
  size_t dot = rest.find('.');
  std::string_view head = rest.substr(0, dot);
  if (IsNumeric(head) &&
      bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
      FindKey(&it, head)) {
    reached = true;
    const bson_value_t* elem = bson_iter_value(&it);
    if (dot == std::string_view::npos) {
      if (fn(elem)) return true;
    } else if (Descend<kDeadEnd>(elem, rest.substr(dot + 1), fn)) {
      return true;
    }
  }
  if (reached || kDeadEnd == DeadEnd::kNothing) return false;
  return fn(nullptr);
}

}  // namespace internal

template <DeadEnd kDeadEnd, typename Fn>
bool VisitPath(const uint8_t* data, size_t len, std::string_view path, Fn& fn) {
  size_t dot = path.find('.');
  std::string_view head = path.substr(0, dot);
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, data, len) || !FindKey(&it, head)) {
    return fn(nullptr);
  }
  const bson_value_t* v = bson_iter_value(&it);
  if (dot == std::string_view::npos) return fn(v);
  return internal::Descend<kDeadEnd>(v, path.substr(dot + 1), fn);
}

}  // namespace mmdoc::engine

#endif  // MMDOC_ENGINE_QUERY_PATH_H_
