// Partial index filters: the allowed subset and implication (see
// partial_filter.h).
#include "engine/partial_filter.h"

#include <bson/bson.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/query.h"
#include "engine/query_path.h"

namespace mmdoc::engine {

namespace {

enum class Op { kEq, kGt, kGte, kLt, kLte, kExists, kType };

struct Cond {
  std::string_view path;
  Op op;
  bson_value_t value;  // a view into the filter's bytes
};

bool IsOperatorDoc(const bson_iter_t* it) {
  if (!BSON_ITER_HOLDS_DOCUMENT(it)) return false;
  bson_iter_t sub;
  return bson_iter_recurse(it, &sub) && bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$';
}

bool Truthy(const bson_value_t* v) {
  switch (v->value_type) {
    case BSON_TYPE_BOOL:
      return v->value.v_bool;
    case BSON_TYPE_INT32:
      return v->value.v_int32 != 0;
    case BSON_TYPE_INT64:
      return v->value.v_int64 != 0;
    case BSON_TYPE_DOUBLE:
      return v->value.v_double != 0;
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
      return false;
    default:
      return true;
  }
}

bool OpFromName(const char* name, Op* op) {
  static const struct {
    const char* name;
    Op op;
  } kOps[] = {{"$eq", Op::kEq},   {"$gt", Op::kGt},     {"$gte", Op::kGte},      {"$lt", Op::kLt},
              {"$lte", Op::kLte}, {"$type", Op::kType}, {"$exists", Op::kExists}};
  for (const auto& o : kOps) {
    if (std::strcmp(o.name, name) == 0) {
      *op = o.op;
      return true;
    }
  }
  return false;
}

bool ComplexValue(bson_type_t t) {
  return t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX;
}

// Collects the conditions of a filter's top-level conjunction. With
// `strict` (a partial filter), anything outside the allowed subset is an
// error; otherwise (a query) it is skipped: dropping a conjunct only
// weakens what the query is known to imply.
Status Collect(const uint8_t* data, size_t len, bool strict, std::vector<Cond>* out) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, data, len))
    return Status::InvalidArgument("partial filter is not a BSON document");
  while (bson_iter_next(&it)) {
    const char* key = bson_iter_key(&it);
    if (key[0] == '$') {
      if (std::strcmp(key, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t arr;
        bson_iter_recurse(&it, &arr);
        bool any = false;
        while (bson_iter_next(&arr)) {
          any = true;
          if (!BSON_ITER_HOLDS_DOCUMENT(&arr)) {
            if (strict) return Status::InvalidArgument("partial filter: $and takes documents");
            continue;
          }
          uint32_t sub_len;
          const uint8_t* sub;
          bson_iter_document(&arr, &sub_len, &sub);
          MMDOC_RETURN_IF_ERROR(Collect(sub, sub_len, strict, out));
        }
        if (!any && strict) return Status::InvalidArgument("partial filter: empty $and");
        continue;
      }
      if (strict) return Status::InvalidArgument("unsupported expression in partial filter", key);
      continue;
    }
    const std::string_view path(key, bson_iter_key_len(&it));
    if (!IsOperatorDoc(&it)) {
      const bson_value_t* v = bson_iter_value(&it);
      if (ComplexValue(v->value_type)) {
        if (strict)
          return Status::InvalidArgument(
              "partial filter: equality to a document, array or regex is not supported", path);
        continue;  // a regex value is a match, not an equality
      }
      out->push_back(Cond{path, Op::kEq, *v});
      continue;
    }
    bson_iter_t ops;
    bson_iter_recurse(&it, &ops);
    while (bson_iter_next(&ops)) {
      const char* name = bson_iter_key(&ops);
      const bson_value_t* v = bson_iter_value(&ops);
      Op op;
      if (!OpFromName(name, &op)) {
        if (strict)
          return Status::InvalidArgument("unsupported expression in partial filter", name);
        continue;
      }
      if (op == Op::kExists && !Truthy(v)) {
        if (strict)
          return Status::InvalidArgument("partial filter: only $exists: true is supported", path);
        continue;
      }
      if (op == Op::kEq && ComplexValue(v->value_type)) {
        if (strict)
          return Status::InvalidArgument(
              "partial filter: equality to a document, array or regex is not supported", path);
        continue;
      }
      if (v->value_type == BSON_TYPE_REGEX) {
        if (strict) return Status::InvalidArgument("partial filter: a regex operand", name);
        continue;
      }
      out->push_back(Cond{path, op, *v});
    }
  }
  return Status::OK();
}

// A value a range may compare with for implication: a scalar whose order
// MongoDB and CompareValues agree on (no NaN, no decimal, no container).
bool Comparable(const bson_value_t* v) {
  switch (v->value_type) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_REGEX:
    case BSON_TYPE_DECIMAL128:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
      return false;
    case BSON_TYPE_DOUBLE:
      return !std::isnan(v->value.v_double);
    default:
      return true;
  }
}

bool SameBracket(const bson_value_t* a, const bson_value_t* b) {
  return Comparable(a) && Comparable(b) &&
         CanonicalRank(a->value_type) == CanonicalRank(b->value_type);
}

bool Identical(const bson_value_t* a, const bson_value_t* b) {
  return a->value_type == b->value_type &&
         CanonicalRank(a->value_type) == CanonicalRank(b->value_type) && CompareValues(a, b) == 0;
}

// Whether query condition q implies partial condition p (same path).
bool Implies(const Cond& q, const Cond& p) {
  const bson_value_t* w = &q.value;
  const bson_value_t* v = &p.value;
  switch (p.op) {
    case Op::kEq:  // 1 and 1.0 match the same documents
      return q.op == Op::kEq && CanonicalRank(w->value_type) == CanonicalRank(v->value_type) &&
             CompareValues(w, v) == 0;
    case Op::kType:
      return q.op == Op::kType && Identical(w, v);
    case Op::kExists:
      switch (q.op) {
        case Op::kExists:
        case Op::kType:
          return true;
        case Op::kEq:
          return w->value_type != BSON_TYPE_NULL && w->value_type != BSON_TYPE_UNDEFINED;
        default:
          return Comparable(w);
      }
    case Op::kGt:
    case Op::kGte: {
      if (!SameBracket(w, v)) return false;
      const int c = CompareValues(w, v);
      if (q.op == Op::kGt) return c >= 0;
      if (q.op == Op::kGte || q.op == Op::kEq) return p.op == Op::kGte ? c >= 0 : c > 0;
      return false;
    }
    case Op::kLt:
    case Op::kLte: {
      if (!SameBracket(w, v)) return false;
      const int c = CompareValues(w, v);
      if (q.op == Op::kLt) return c <= 0;
      if (q.op == Op::kLte || q.op == Op::kEq) return p.op == Op::kLte ? c <= 0 : c < 0;
      return false;
    }
  }
  return false;
}

}  // namespace

Status CheckPartialFilter(const uint8_t* bson, size_t len) {
  std::vector<Cond> conds;
  MMDOC_RETURN_IF_ERROR(Collect(bson, len, true, &conds));
  if (conds.empty()) return Status::InvalidArgument("partial filter has no conditions");
  return Status::OK();
}

bool FilterImplies(std::string_view query, std::string_view partial) {
  if (partial.empty()) return true;
  std::vector<Cond> q, p;
  if (!Collect(reinterpret_cast<const uint8_t*>(query.data()), query.size(), false, &q).ok() ||
      !Collect(reinterpret_cast<const uint8_t*>(partial.data()), partial.size(), true, &p).ok())
    return false;
  for (const Cond& pc : p) {
    bool implied = false;
    for (const Cond& qc : q) implied = implied || (qc.path == pc.path && Implies(qc, pc));
    if (!implied) return false;
  }
  return true;
}

}  // namespace mmdoc::engine
