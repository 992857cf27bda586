// CompareValues, the order-preserving key encoding (AppendKey), LookupPath,
// SortKey and IndexKeys.
//
// Key encoding. Every key starts with one byte for the value's canonical
// type rank (query_path.h), shifted so that 0x00 stays free as a terminator;
// the body after it is prefix-free, so keys concatenate (inside arrays and
// documents) without breaking memcmp order:
//   MinKey, Undefined, Null, MaxKey  no body
//   number      a class byte: NaN < -inf < negative < zero < positive < +inf;
//               finite non-zero numbers then carry the binary exponent E
//               (|x| in [2^E, 2^(E+1)), biased, 2 bytes big-endian) and the
//               bits below the leading one, left-aligned in 8 bytes. int64
//               magnitudes need at most 63 such bits and doubles 52, so the
//               encoding is exact for both and 1, 1.0 and NumberLong(1)
//               encode identically. For negatives both fields are inverted.
//   string      bytes with 0x00 escaped as 0x00 0xFF, then 0x00 0x00; so
//               "a" < "a\0b" < "ab" as under bytewise comparison.
//   document    per element: type-rank byte, escaped key, value body; then
//               0x00 (below every rank byte, so shorter documents sort first)
//   array       per element: type-rank byte, value body; then 0x00
//   binary      length (4 bytes BE), subtype, bytes
//   ObjectId    12 bytes; bool 1 byte; date int64 with sign bit flipped;
//   timestamp   seconds then increment, 4 bytes BE each
//   regex       escaped pattern, escaped options
//   DBPointer   escaped collection, 12 ObjectId bytes
//   code        escaped code; code with scope: escaped code, scope document
// Every fixed-width integer in a key is big-endian (storage/coding.h's
// PutBigEndian*), so that memcmp orders the bytes as it orders the numbers.
// Trees store one kind of key more compactly (a canonical GUID string, as
// 19 bytes: key_codec.cc); they take and return this encoding, so nothing
// outside index/ and key_codec.cc sees the packed form.
// Decimal128 is converted to the nearest double, both here and in
// CompareValues (so the two agree); distinct decimals that round to the same
// double therefore compare equal and share a key.
#include <bson/bson.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "query.h"
#include "query_path.h"
#include "storage/coding.h"

namespace mmdoc::engine {

int CanonicalRank(bson_type_t t) {
  switch (t) {
    case BSON_TYPE_MINKEY:
      return kRankMinKey;
    case BSON_TYPE_UNDEFINED:
      return kRankUndefined;
    case BSON_TYPE_NULL:
      return kRankNull;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
      return kRankNumber;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
      return kRankString;
    case BSON_TYPE_DOCUMENT:
      return kRankObject;
    case BSON_TYPE_ARRAY:
      return kRankArray;
    case BSON_TYPE_BINARY:
      return kRankBinary;
    case BSON_TYPE_OID:
      return kRankOid;
    case BSON_TYPE_BOOL:
      return kRankBool;
    case BSON_TYPE_DATE_TIME:
      return kRankDate;
    case BSON_TYPE_TIMESTAMP:
      return kRankTimestamp;
    case BSON_TYPE_REGEX:
      return kRankRegex;
    case BSON_TYPE_DBPOINTER:
      return kRankDbPointer;
    case BSON_TYPE_CODE:
      return kRankCode;
    case BSON_TYPE_CODEWSCOPE:
      return kRankCodeWScope;
    case BSON_TYPE_MAXKEY:
      return kRankMaxKey;
    case BSON_TYPE_EOD:
      break;
  }
  return kRankMaxKey;  // unreachable for valid BSON
}

namespace {

// ------------------------------------------------------------- numbers

// A number as either an exact int64 or a double (decimal128 rounds).
struct Num {
  bool is_int;
  int64_t i;
  double d;
};

double DecimalToDouble(const bson_decimal128_t* dec) {
  char buf[BSON_DECIMAL128_STRING];
  bson_decimal128_to_string(dec, buf);
  // strtod understands "NaN", "Infinity", "-Infinity" and exponents.
  return std::strtod(buf, nullptr);
}

Num ToNum(const bson_value_t* v) {
  switch (v->value_type) {
    case BSON_TYPE_INT32:
      return {true, v->value.v_int32, 0};
    case BSON_TYPE_INT64:
      return {true, v->value.v_int64, 0};
    case BSON_TYPE_DOUBLE:
      return {false, 0, v->value.v_double};
    default:
      return {false, 0, DecimalToDouble(&v->value.v_decimal128)};
  }
}

template <typename T>
int Cmp(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

// Exact comparison of an int64 with a double, without converting the int
// (2^63-1 is not a double: converting would round it to 2^63).
int CompareIntDouble(int64_t i, double d) {
  if (std::isnan(d)) return 1;                // NaN is below every number
  if (d >= 9223372036854775808.0) return -1;  // d >= 2^63 > any int64
  if (d < -9223372036854775808.0) return 1;   // d < -2^63 <= any int64
  // Now |d| < 2^63 (or d == -2^63): truncation is exact and in range.
  int64_t t = static_cast<int64_t>(d);
  if (i != t) return i < t ? -1 : 1;
  double frac = d - static_cast<double>(t);  // exact: same binade or less
  return frac > 0 ? -1 : (frac < 0 ? 1 : 0);
}

int CompareDoubles(double a, double b) {
  bool an = std::isnan(a), bn = std::isnan(b);
  if (an || bn) return an && bn ? 0 : (an ? -1 : 1);
  return Cmp(a, b);  // -0.0 == 0.0
}

int CompareNumbers(const bson_value_t* a, const bson_value_t* b) {
  Num x = ToNum(a), y = ToNum(b);
  if (x.is_int && y.is_int) return Cmp(x.i, y.i);
  if (!x.is_int && !y.is_int) return CompareDoubles(x.d, y.d);
  if (x.is_int) return CompareIntDouble(x.i, y.d);
  return -CompareIntDouble(y.i, x.d);
}

// ------------------------------------------------------------- compare

int CompareBytes(const void* a, size_t alen, const void* b, size_t blen) {
  int c = std::memcmp(a, b, std::min(alen, blen));
  if (c != 0) return c < 0 ? -1 : 1;
  return Cmp(alen, blen);
}

int CompareCStr(const char* a, const char* b) {
  return CompareBytes(a, std::strlen(a), b, std::strlen(b));
}

// Element by element: for documents rank, then key, then value; arrays the
// same without keys (positions line up). Fewer elements sort first.
int CompareContainers(const uint8_t* a, uint32_t alen, const uint8_t* b, uint32_t blen,
                      bool with_keys) {
  bson_iter_t ia, ib;
  if (!bson_iter_init_from_data(&ia, a, alen) || !bson_iter_init_from_data(&ib, b, blen)) {
    return Cmp(alen, blen);  // unreachable for valid BSON
  }
  while (true) {
    bool has_a = bson_iter_next(&ia), has_b = bson_iter_next(&ib);
    if (!has_a || !has_b) return Cmp(has_a, has_b);
    int c = Cmp(CanonicalRank(bson_iter_type(&ia)), CanonicalRank(bson_iter_type(&ib)));
    if (c != 0) return c;
    if (with_keys) {
      c = CompareBytes(bson_iter_key(&ia), bson_iter_key_len(&ia), bson_iter_key(&ib),
                       bson_iter_key_len(&ib));
      if (c != 0) return c;
    }
    c = CompareValues(bson_iter_value(&ia), bson_iter_value(&ib));
    if (c != 0) return c;
  }
}

// ------------------------------------------------------------- encode

void PutEscaped(const char* s, size_t len, std::string* out) {
  // Copy runs between NULs in one append each: strings rarely hold a NUL,
  // and a byte-at-a-time push_back would dominate key encoding. One
  // allocation for the common case (a key grown a byte at a time from a
  // short string reallocates twice).
  out->reserve(out->size() + len + 3);
  const char* end = s + len;
  while (s < end) {
    const char* nul = static_cast<const char*>(std::memchr(s, '\0', static_cast<size_t>(end - s)));
    if (nul == nullptr) {
      out->append(s, static_cast<size_t>(end - s));
      break;
    }
    out->append(s, static_cast<size_t>(nul - s) + 1);
    out->push_back('\xFF');
    s = nul + 1;
  }
  out->append("\0\0", 2);
}

void PutCStr(const char* s, std::string* out) { PutEscaped(s, std::strlen(s), out); }

char RankByte(int rank) { return KeyRankByte(rank); }

enum NumClass : char {
  kNaN = 1,
  kNegInf = 2,
  kNegative = 3,
  kZero = 4,
  kPositive = 5,
  kPosInf = 6,
};

// Exponent bias: finite doubles reach down to 2^-1074 and up to 2^1023.
constexpr int kExpBias = 1100;

void PutFinite(bool negative, int exp, uint64_t frac, std::string* out) {
  uint16_t e = static_cast<uint16_t>(exp + kExpBias);
  if (negative) {
    out->push_back(kNegative);
    e = static_cast<uint16_t>(~e);
    frac = ~frac;
  } else {
    out->push_back(kPositive);
  }
  storage::PutBigEndian16(out, e);
  storage::PutBigEndian64(out, frac);
}

void PutInt(int64_t i, std::string* out) {
  if (i == 0) {
    out->push_back(kZero);
    return;
  }
  bool neg = i < 0;
  // Magnitude without overflow for INT64_MIN.
  uint64_t mag = neg ? static_cast<uint64_t>(-(i + 1)) + 1 : static_cast<uint64_t>(i);
  int exp = 63 - __builtin_clzll(mag);
  uint64_t frac = exp == 0 ? 0 : mag << (64 - exp);  // drops the leading one
  PutFinite(neg, exp, frac, out);
}

void PutDouble(double d, std::string* out) {
  if (std::isnan(d)) {
    out->push_back(kNaN);
  } else if (std::isinf(d)) {
    out->push_back(d < 0 ? kNegInf : kPosInf);
  } else if (d == 0) {
    out->push_back(kZero);  // -0.0 too
  } else {
    int e2 = 0;
    double m = std::frexp(std::fabs(d), &e2);                  // m in [0.5, 1), subnormals too
    uint64_t mant = static_cast<uint64_t>(std::ldexp(m, 53));  // bit 52 set
    PutFinite(d < 0, e2 - 1, mant << 11 << 1, out);            // drop bit 52
  }
}

void AppendBody(const bson_value_t* v, std::string* out);

void AppendContainerBody(const uint8_t* data, uint32_t len, bool with_keys, std::string* out) {
  bson_iter_t it;
  if (bson_iter_init_from_data(&it, data, len)) {
    while (bson_iter_next(&it)) {
      out->push_back(RankByte(CanonicalRank(bson_iter_type(&it))));
      if (with_keys) PutEscaped(bson_iter_key(&it), bson_iter_key_len(&it), out);
      AppendBody(bson_iter_value(&it), out);
    }
  }
  out->push_back('\0');
}

void AppendBody(const bson_value_t* v, std::string* out) {
  const auto& u = v->value;
  switch (v->value_type) {
    case BSON_TYPE_INT32:
      PutInt(u.v_int32, out);
      break;
    case BSON_TYPE_INT64:
      PutInt(u.v_int64, out);
      break;
    case BSON_TYPE_DOUBLE:
      PutDouble(u.v_double, out);
      break;
    case BSON_TYPE_DECIMAL128:
      PutDouble(DecimalToDouble(&u.v_decimal128), out);
      break;
    case BSON_TYPE_UTF8:
      PutEscaped(u.v_utf8.str, u.v_utf8.len, out);
      break;
    case BSON_TYPE_SYMBOL:
      PutEscaped(u.v_symbol.symbol, u.v_symbol.len, out);
      break;
    case BSON_TYPE_DOCUMENT:
      AppendContainerBody(u.v_doc.data, u.v_doc.data_len, true, out);
      break;
    case BSON_TYPE_ARRAY:
      AppendContainerBody(u.v_doc.data, u.v_doc.data_len, false, out);
      break;
    case BSON_TYPE_BINARY:
      storage::PutBigEndian32(out, u.v_binary.data_len);
      out->push_back(static_cast<char>(u.v_binary.subtype));
      out->append(reinterpret_cast<const char*>(u.v_binary.data), u.v_binary.data_len);
      break;
    case BSON_TYPE_OID:
      out->append(reinterpret_cast<const char*>(u.v_oid.bytes), 12);
      break;
    case BSON_TYPE_BOOL:
      out->push_back(u.v_bool ? 1 : 0);
      break;
    case BSON_TYPE_DATE_TIME:
      storage::PutBigEndian64(out, static_cast<uint64_t>(u.v_datetime) ^ (1ull << 63));
      break;
    case BSON_TYPE_TIMESTAMP:
      storage::PutBigEndian32(out, u.v_timestamp.timestamp);
      storage::PutBigEndian32(out, u.v_timestamp.increment);
      break;
    case BSON_TYPE_REGEX:
      PutCStr(u.v_regex.regex, out);
      PutCStr(u.v_regex.options ? u.v_regex.options : "", out);
      break;
    case BSON_TYPE_DBPOINTER:
      PutEscaped(u.v_dbpointer.collection, u.v_dbpointer.collection_len, out);
      out->append(reinterpret_cast<const char*>(u.v_dbpointer.oid.bytes), 12);
      break;
    case BSON_TYPE_CODE:
      PutEscaped(u.v_code.code, u.v_code.code_len, out);
      break;
    case BSON_TYPE_CODEWSCOPE:
      PutEscaped(u.v_codewscope.code, u.v_codewscope.code_len, out);
      AppendContainerBody(u.v_codewscope.scope_data, u.v_codewscope.scope_len, true, out);
      break;
    default:  // MinKey, MaxKey, Null, Undefined: the rank says it all
      break;
  }
}

}  // namespace

int CompareValues(const bson_value_t* a, const bson_value_t* b) {
  int ra = CanonicalRank(a->value_type), rb = CanonicalRank(b->value_type);
  if (ra != rb) return Cmp(ra, rb);
  const auto& x = a->value;
  const auto& y = b->value;
  switch (ra) {
    case kRankNumber:
      return CompareNumbers(a, b);
    case kRankString: {
      auto str = [](const bson_value_t* v, uint32_t* len) -> const char* {
        if (v->value_type == BSON_TYPE_SYMBOL) {
          *len = v->value.v_symbol.len;
          return v->value.v_symbol.symbol;
        }
        *len = v->value.v_utf8.len;
        return v->value.v_utf8.str;
      };
      uint32_t la = 0, lb = 0;
      const char* sa = str(a, &la);
      const char* sb = str(b, &lb);
      return CompareBytes(sa, la, sb, lb);
    }
    case kRankObject:
      return CompareContainers(x.v_doc.data, x.v_doc.data_len, y.v_doc.data, y.v_doc.data_len,
                               true);
    case kRankArray:
      return CompareContainers(x.v_doc.data, x.v_doc.data_len, y.v_doc.data, y.v_doc.data_len,
                               false);
    case kRankBinary: {
      int c = Cmp(x.v_binary.data_len, y.v_binary.data_len);
      if (c == 0) c = Cmp<int>(x.v_binary.subtype, y.v_binary.subtype);
      if (c == 0 && x.v_binary.data_len > 0) {
        c = std::memcmp(x.v_binary.data, y.v_binary.data, x.v_binary.data_len);
        c = Cmp(c, 0);
      }
      return c;
    }
    case kRankOid:
      return Cmp(bson_oid_compare(&x.v_oid, &y.v_oid), 0);
    case kRankBool:
      return Cmp(x.v_bool, y.v_bool);
    case kRankDate:
      return Cmp(x.v_datetime, y.v_datetime);
    case kRankTimestamp: {
      int c = Cmp(x.v_timestamp.timestamp, y.v_timestamp.timestamp);
      return c != 0 ? c : Cmp(x.v_timestamp.increment, y.v_timestamp.increment);
    }
    case kRankRegex: {
      int c = CompareCStr(x.v_regex.regex, y.v_regex.regex);
      return c != 0 ? c
                    : CompareCStr(x.v_regex.options ? x.v_regex.options : "",
                                  y.v_regex.options ? y.v_regex.options : "");
    }
    case kRankDbPointer: {
      int c = CompareBytes(x.v_dbpointer.collection, x.v_dbpointer.collection_len,
                           y.v_dbpointer.collection, y.v_dbpointer.collection_len);
      return c != 0 ? c : Cmp(bson_oid_compare(&x.v_dbpointer.oid, &y.v_dbpointer.oid), 0);
    }
    case kRankCode:
      return CompareBytes(x.v_code.code, x.v_code.code_len, y.v_code.code, y.v_code.code_len);
    case kRankCodeWScope: {
      int c = CompareBytes(x.v_codewscope.code, x.v_codewscope.code_len, y.v_codewscope.code,
                           y.v_codewscope.code_len);
      return c != 0 ? c
                    : CompareContainers(x.v_codewscope.scope_data, x.v_codewscope.scope_len,
                                        y.v_codewscope.scope_data, y.v_codewscope.scope_len, true);
    }
    default:  // MinKey, Undefined, Null, MaxKey: one value each
      return 0;
  }
}

void AppendKey(const bson_value_t* v, std::string* out) {
  if (v->value_type == BSON_TYPE_UTF8) {
    // The common key (a string _id or field) without a NUL to escape: the
    // rank, the bytes and the terminator in one resize and one copy.
    const char* s = v->value.v_utf8.str;
    const size_t len = v->value.v_utf8.len;
    if (std::memchr(s, '\0', len) == nullptr) {
      const size_t at = out->size();
      out->resize(at + len + 3);
      char* p = &(*out)[at];
      p[0] = RankByte(CanonicalRank(BSON_TYPE_UTF8));
      std::memcpy(p + 1, s, len);
      p[len + 1] = '\0';
      p[len + 2] = '\0';
      return;
    }
  }
  out->push_back(RankByte(CanonicalRank(v->value_type)));
  AppendBody(v, out);
}

void AppendNullKey(std::string* out) { out->push_back(RankByte(kRankNull)); }

bool LookupPath(const uint8_t* doc, size_t len, std::string_view path, bson_value_t* out) {
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, doc, len)) return false;
  while (true) {
    size_t dot = path.find('.');
    if (!FindKey(&it, path.substr(0, dot))) return false;
    if (dot == std::string_view::npos) {
      *out = *bson_iter_value(&it);  // a view into doc: no copy
      return true;
    }
    path = path.substr(dot + 1);
    bson_type_t t = bson_iter_type(&it);
    if (t == BSON_TYPE_ARRAY) {
      // Only positions index arrays here (no fan-out).
      if (!IsNumeric(path.substr(0, path.find('.')))) return false;
    } else if (t != BSON_TYPE_DOCUMENT) {
      return false;
    }
    bson_iter_t child;
    if (!bson_iter_recurse(&it, &child)) return false;
    it = child;
  }
}

namespace {

// The smallest (direction > 0) or largest value offered so far.
struct SortPick {
  explicit SortPick(int d) : direction(d) {}
  const int direction;
  bool have = false;
  bson_value_t best;

  void Offer(const bson_value_t* v) {
    if (have) {
      int c = CompareValues(v, &best);
      if (direction > 0 ? c >= 0 : c <= 0) return;
    }
    best = *v;  // views into the document: no copy of its bytes
    have = true;
  }
  void OfferNull() {
    bson_value_t null;
    null.value_type = BSON_TYPE_NULL;
    Offer(&null);
  }
  // A value at the end of the path: an array offers its elements, [] an
  // undefined (below null, as MongoDB sorts []).
  void OfferLeaf(const bson_value_t* v) {
    if (v->value_type != BSON_TYPE_ARRAY) return Offer(v);
    bson_iter_t it;
    bool any = false;
    if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
      while (bson_iter_next(&it)) {
        any = true;
        Offer(bson_iter_value(&it));
      }
    }
    if (!any) {
      bson_value_t undefined;
      undefined.value_type = BSON_TYPE_UNDEFINED;
      Offer(&undefined);
    }
  }
};

void SortWalkDoc(const uint8_t* data, size_t len, std::string_view path, SortPick* pick);

// The rest of the path below the value v.
void SortWalkValue(const bson_value_t* v, std::string_view rest, SortPick* pick) {
  if (v->value_type == BSON_TYPE_DOCUMENT) {
    return SortWalkDoc(v->value.v_doc.data, v->value.v_doc.data_len, rest, pick);
  }
  if (v->value_type != BSON_TYPE_ARRAY) return pick->OfferNull();
  const size_t dot = rest.find('.');
  const std::string_view head = rest.substr(0, dot);
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
    return pick->OfferNull();
  }
  if (IsNumeric(head)) {  // a position: that element only
    if (!FindKey(&it, head)) return pick->OfferNull();
    const bson_value_t elem = *bson_iter_value(&it);
    if (dot == std::string_view::npos) return pick->OfferLeaf(&elem);
    return SortWalkValue(&elem, rest.substr(dot + 1), pick);
  }
  bool any = false;  // documents in the array; other elements count for nothing
  while (bson_iter_next(&it)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
    any = true;
    uint32_t sub_len = 0;
    const uint8_t* sub = nullptr;
    bson_iter_document(&it, &sub_len, &sub);
    SortWalkDoc(sub, sub_len, rest, pick);
  }
  if (!any) pick->OfferNull();
}

void SortWalkDoc(const uint8_t* data, size_t len, std::string_view path, SortPick* pick) {
  const size_t dot = path.find('.');
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, data, len) || !FindKey(&it, path.substr(0, dot))) {
    return pick->OfferNull();
  }
  const bson_value_t v = *bson_iter_value(&it);
  if (dot == std::string_view::npos) return pick->OfferLeaf(&v);
  SortWalkValue(&v, path.substr(dot + 1), pick);
}

}  // namespace

void SortKey(const uint8_t* doc, size_t len, std::string_view path, int direction,
             bson_value_t* out) {
  SortPick pick(direction);
  SortWalkDoc(doc, len, path, &pick);
  *out = pick.best;  // the walk offers at least one value
}

void IndexKeys(const uint8_t* doc, size_t len, std::string_view path,
               std::vector<std::string>* keys) {
  // The strings already in *keys are written over, so that a caller that
  // passes the same vector each time allocates only for longer keys.
  size_t n = 0;
  auto next = [keys, &n]() {
    if (n == keys->size()) keys->emplace_back();
    std::string* key = &(*keys)[n++];
    key->clear();
    return key;
  };
  auto collect = [&next](const bson_value_t* v) {
    if (v == nullptr) {
      AppendNullKey(next());
    } else if (v->value_type == BSON_TYPE_ARRAY) {
      // One key per element; an empty array is indexed as null.
      bson_iter_t it;
      bool any = false;
      if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        while (bson_iter_next(&it)) {
          any = true;
          AppendKey(bson_iter_value(&it), next());
        }
      }
      if (!any) AppendNullKey(next());
    } else {
      AppendKey(v, next());
    }
    return false;  // visit every branch
  };
  VisitPath(doc, len, path, collect);
  keys->resize(n);
  std::sort(keys->begin(), keys->end());
  keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
}

std::string DescribeKey(std::string_view key, bool* value) {
  bool unused;
  if (value == nullptr) value = &unused;
  *value = false;
  if (key.empty()) return "\"<none>\"";
  static const char* const kNames[] = {
      "",          "MinKey", "undefined", "null",     "number",        "string",
      "object",    "array",  "binary",    "objectId", "bool",          "date",
      "timestamp", "regex",  "dbPointer", "code",     "codeWithScope", "MaxKey"};
  const int rank = static_cast<unsigned char>(key[0]) - 0x0F;
  if (rank < kRankMinKey || rank > kRankMaxKey) return "\"<key>\"";
  std::string_view body = key.substr(1);
  switch (rank) {
    case kRankMinKey:
      *value = true;
      return "{\"$minKey\": 1}";
    case kRankMaxKey:
      *value = true;
      return "{\"$maxKey\": 1}";
    case kRankNull:
      *value = true;
      return "null";
    case kRankUndefined:
      *value = true;
      return "{\"$undefined\": true}";
    default:
      break;
  }
  if (body.empty()) return "\"<first " + std::string(kNames[rank]) + ">\"";
  if (rank == kRankNumber) {
    *value = true;
    switch (body[0]) {
      case kNaN:
        return "NaN";
      case kNegInf:
        return "-Infinity";
      case kPosInf:
        return "Infinity";
      case kZero:
        return "0";
      default:
        break;
    }
    if (body.size() < 11) {
      *value = false;
      return "\"<key>\"";
    }
    const bool neg = body[0] == kNegative;
    uint16_t e = static_cast<uint16_t>((static_cast<unsigned char>(body[1]) << 8) |
                                       static_cast<unsigned char>(body[2]));
    uint64_t frac = 0;
    for (int i = 0; i < 8; i++) frac = (frac << 8) | static_cast<unsigned char>(body[3 + i]);
    if (neg) {
      e = static_cast<uint16_t>(~e);
      frac = ~frac;
    }
    const double mag = std::ldexp(1.0 + std::ldexp(static_cast<double>(frac), -64),
                                  static_cast<int>(e) - kExpBias);
    const double d = neg ? -mag : mag;
    // Whole numbers print as integers: the key does not say which type.
    if (std::trunc(d) == d && std::fabs(d) < 9.2e18) return std::to_string(static_cast<int64_t>(d));
    bson_value_t v;
    v.value_type = BSON_TYPE_DOUBLE;
    v.value.v_double = d;
    return Value::FromBsonValue(&v).ToJson();
  }
  if (rank == kRankString) {
    std::string s;
    for (size_t i = 0; i < body.size(); i++) {
      if (body[i] != '\0') {
        s.push_back(body[i]);
      } else if (i + 1 < body.size() && body[i + 1] == '\xFF') {
        s.push_back('\0');
        i++;
      } else {
        break;  // the terminator
      }
    }
    *value = true;
    return Value::String(s).ToJson();
  }
  if (rank == kRankBool && body.size() == 1) {
    *value = true;
    return body[0] != 0 ? "true" : "false";
  }
  return "\"<" + std::string(kNames[rank]) + ">\"";
}

}  // namespace mmdoc::engine
