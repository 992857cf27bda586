// Document and Value: BSON bytes owned by std::string, parsed from JSON with
// libbson and validated against mmdoc's limits (see mmdoc/document.h).
//
// Validation of outside bytes happens in two passes:
//   1. our own walk (CheckTree), which bounds the nesting depth before
//      anything recursive runs and checks that every (sub)document is well
//      formed, using only bson_iter's bounds-checked accessors;
//   2. bson_validate for everything else (regex and DBPointer internals
//      and whatever libbson checks beyond us). It recurses without a depth
//      limit, which is why it only runs after pass 1 has bounded the depth.
// String values' UTF-8 is checked in pass 1 as well: libbson 1.23's
// BSON_VALIDATE_UTF8 did not catch "\xff" in a string value.
//
// Decisions not spelled out by the header:
//   - empty keys ("") are accepted, as MongoDB accepts them; dotted paths
//     simply cannot address them.
//   - keys containing '.' are accepted (MongoDB 5.0+ does); dotted paths
//     cannot address them either.
//   - string values may contain NUL (legal BSON and MongoDB); keys cannot
//     (BSON keys are C strings, and libbson's JSON parser refuses them).
//   - '$'-prefixed keys are accepted here, because filters ({"a": {"$gt":
//     1}}) and updates ({"$set": ...}) are Documents too (DB::Find,
//     DB::Update, the mmdoc tool). They are rejected where a document is
//     about to be stored: PrepareForInsert, Update (replacements and $set
//     values) and engine::CheckFieldNames (query.h) for other callers.
#include "mmdoc/document.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "query.h"
#include "storage/coding.h"

namespace mmdoc {
namespace {

// Owns a bson_t initialised with bson_init (or by the JSON reader).
struct ScopedBson {
  bson_t b;
  ScopedBson() { bson_init(&b); }
  ~ScopedBson() { bson_destroy(&b); }
  ScopedBson(const ScopedBson&) = delete;
  ScopedBson& operator=(const ScopedBson&) = delete;
};

// The smallest valid BSON document, {}.
const char kEmptyDoc[5] = {5, 0, 0, 0, 0};
// {"v": null}, the representation of a default Value.
const char kNullValueDoc[8] = {8, 0, 0, 0, 0x0A, 'v', 0, 0};

// Walks the (sub)document `it` iterates, which sits at nesting level
// `depth` (the top level is 1); an array's keys must be "0", "1", ... as
// the BSON spec says (others would not survive a JSON export). Recursion is
// bounded by kMaxNestingDepth, so it is safe on hostile input.
Status CheckTree(bson_iter_t* it, int depth, bool array = false) {
  if (depth > kMaxNestingDepth) {
    return Status::InvalidArgument("document nested deeper than " +
                                   std::to_string(kMaxNestingDepth) + " levels");
  }
  const uint32_t len = it->len;  // bson_iter_next zeroes it at the end
  const uint8_t* raw = it->raw;
  uint32_t index = 0;
  while (bson_iter_next(it)) {
    const char* key = bson_iter_key(it);
    uint32_t key_len = bson_iter_key_len(it);
    if (!bson_utf8_validate(key, key_len, false)) {
      return Status::InvalidArgument("field name is not valid UTF-8");
    }
    if (array) {
      char want[16];
      const auto end = std::to_chars(want, want + sizeof want, index++).ptr;
      if (std::string_view(key, key_len) != std::string_view(want, end - want)) {
        return Status::InvalidArgument("invalid BSON: array element keyed \"" +
                                       std::string(key, key_len) + "\", not \"" +
                                       std::string(want, end - want) + "\"");
      }
    }
    bson_iter_t child;
    switch (bson_iter_type(it)) {
      case BSON_TYPE_DOCUMENT:
      case BSON_TYPE_ARRAY:
        if (!bson_iter_recurse(it, &child)) {
          return Status::InvalidArgument("invalid BSON: bad subdocument",
                                         std::string_view(key, key_len));
        }
        MMDOC_RETURN_IF_ERROR(CheckTree(&child, depth + 1, bson_iter_type(it) == BSON_TYPE_ARRAY));
        break;
      case BSON_TYPE_CODEWSCOPE: {
        // The scope is a document too: count it in the depth, so that
        // bson_validate (which recurses into it) stays bounded.
        uint32_t code_len = 0, scope_len = 0;
        const uint8_t* scope = nullptr;
        const char* code = bson_iter_codewscope(it, &code_len, &scope_len, &scope);
        if (code == nullptr || !bson_utf8_validate(code, code_len, true)) {
          return Status::InvalidArgument("code is not valid UTF-8", std::string_view(key, key_len));
        }
        bson_t scope_doc;
        if (scope == nullptr || !bson_init_static(&scope_doc, scope, scope_len) ||
            !bson_iter_init(&child, &scope_doc)) {
          return Status::InvalidArgument("invalid BSON: bad code scope",
                                         std::string_view(key, key_len));
        }
        MMDOC_RETURN_IF_ERROR(CheckTree(&child, depth + 1));
        break;
      }
      case BSON_TYPE_UTF8:
      case BSON_TYPE_SYMBOL:
      case BSON_TYPE_CODE: {
        // bson_validate(BSON_VALIDATE_UTF8) in libbson 1.23 lets invalid
        // UTF-8 in string values through, so check them here. NUL is legal
        // inside BSON strings.
        const bson_value_t* v = bson_iter_value(it);
        const char* str = v->value.v_utf8.str;
        uint32_t str_len = v->value.v_utf8.len;
        if (v->value_type == BSON_TYPE_SYMBOL) {
          str = v->value.v_symbol.symbol;
          str_len = v->value.v_symbol.len;
        } else if (v->value_type == BSON_TYPE_CODE) {
          str = v->value.v_code.code;
          str_len = v->value.v_code.code_len;
        }
        if (!bson_utf8_validate(str, str_len, true)) {
          return Status::InvalidArgument("string is not valid UTF-8",
                                         std::string_view(key, key_len));
        }
        break;
      }
      case BSON_TYPE_REGEX: {
        // The flags MongoDB knows, sorted and each once, as the BSON spec
        // keeps them: others do not read back from the JSON export (found by
        // an outside test: "z" was taken, "ii" came back as "i").
        const char* options = nullptr;
        bson_iter_regex(it, &options);
        const std::string_view o = options != nullptr ? options : "";
        for (size_t i = 0; i < o.size(); i++) {
          if (std::strchr("ilmsux", o[i]) == nullptr || (i > 0 && o[i] <= o[i - 1])) {
            return Status::InvalidArgument(
                "regex options \"" + std::string(o) +
                    "\" are not flags of i, l, m, s, u, x in that order, each once",
                std::string_view(key, key_len));
          }
        }
        break;
      }
      default:
        break;
    }
  }
  // bson_iter_next returns false both at the end and on corrupt bytes
  // (including an end-of-document byte before the end); only the latter sets
  // err_off. Checking that we stopped on the last byte is belt and braces.
  if (it->err_off != 0) {
    return Status::InvalidArgument("invalid BSON: corrupt element at offset " +
                                   std::to_string(it->err_off));
  }
  if (it->off + 1 != len) {
    return Status::InvalidArgument("invalid BSON: document ends before its length");
  }
  // A last byte that is not 0 stops bson_iter_next as the end does, without
  // err_off; bson_iter_recurse does not check a subdocument's last byte.
  if (raw[len - 1] != 0) {
    return Status::InvalidArgument("invalid BSON: document does not end with a 0 byte");
  }
  return Status::OK();
}

Status Validate(const uint8_t* data, size_t size) {
  if (size > kMaxDocumentSize) {
    return Status::InvalidArgument("document is larger than 16 MiB (" + std::to_string(size) +
                                   " bytes)");
  }
  bson_t b;
  bson_iter_t it;
  if (size < 5 || !bson_init_static(&b, data, size) || !bson_iter_init(&it, &b)) {
    return Status::InvalidArgument("invalid BSON: bad document length");
  }
  MMDOC_RETURN_IF_ERROR(CheckTree(&it, 1));
  bson_error_t err;
  if (!bson_validate_with_error(
          &b,
          static_cast<bson_validate_flags_t>(BSON_VALIDATE_UTF8 | BSON_VALIDATE_UTF8_ALLOW_NULL),
          &err)) {
    return Status::InvalidArgument("invalid BSON", err.message);
  }
  return Status::OK();
}

// ------------------------------------------------- numbers in JSON text
//
// libbson 1.23's JSON reader changes some numbers without an error: an
// integer from 2^64 on wraps modulo 2^64 (18446744073709551616 reads as
// 0), a $timestamp field from 2^32 on wraps modulo 2^32, a $numberDecimal
// it cannot represent ("1e9999", 35 digits, "abc") becomes NaN, and a
// $numberDouble is read by strtod, so "abc" is 0 and "1.5x" is 1.5.
// CheckJsonNumbers finds these in the text before libbson reads it: one
// pass, no allocation but for a $numberDecimal or an escaped key. It only
// looks at numbers and strings; whatever else is wrong with the text is
// libbson's to report.

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The closing quote of the string whose text starts at p; *escaped is set
// when the string holds a backslash escape. (A byte loop: JSON strings are
// mostly short, where memchr's call cost more.)
const char* StringEnd(const char* p, const char* end, bool* escaped) {
  while (p < end) {
    const char c = *p;
    if (c == '"') return p;
    if (c == '\\') {
      *escaped = true;
      p += end - p >= 2 ? 2 : 1;
    } else {
      p++;
    }
  }
  return end;
}

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// The text of a JSON string with escapes undone (surrogate pairs are left
// as two characters: only ASCII matters to the callers).
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    char e = s[++i];
    switch (e) {
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u':
        if (i + 4 < s.size()) {
          uint32_t c = 0;
          for (int k = 1; k <= 4; k++) {
            char h = s[i + k];
            c = c * 16 + static_cast<uint32_t>(IsDigit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          AppendUtf8(c, &out);
          i += 4;
        }
        break;
      default:
        out.push_back(e);
        break;  // " \ /
    }
  }
  return out;
}

bool EqualsNoCase(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); i++) {
    if ((s[i] | 0x20) != lower[i]) return false;
  }
  return true;
}

// "NaN", "-Infinity", "inf", ...: the spellings libbson reads as NaN or an
// infinity.
bool SpellsNonFinite(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return EqualsNoCase(s, "nan") || EqualsNoCase(s, "inf") || EqualsNoCase(s, "infinity");
}

Status CheckDecimal(std::string_view text) {
  // NUL-terminated: libbson 1.23 reads "NaN" and "Inf" past the length.
  const std::string z(text);
  bson_decimal128_t d;
  bool ok = bson_decimal128_from_string_w_len(z.c_str(), static_cast<int>(z.size()), &d);
  // Combination field 11110 is an infinity, 11111 NaN.
  bool non_finite = (d.high & 0x7800000000000000ull) == 0x7800000000000000ull;
  if (ok && (!non_finite || SpellsNonFinite(text))) return Status::OK();
  return Status::InvalidArgument("decimal " + std::string(text) +
                                 " is out of range or not a number (decimal128)");
}

// A double that libbson would read as 0 or as an infinity: its magnitude is
// beyond a double's range (from_chars says so; denormals are in range).
Status CheckDoubleRange(std::string_view number) {
  if (!number.empty() && number[0] == '+') number.remove_prefix(1);
  double v;
  if (std::from_chars(number.data(), number.data() + number.size(), v).ec !=
      std::errc::result_out_of_range) {
    return Status::OK();
  }
  return Status::InvalidArgument("number " + std::string(number) + " is out of range (double)");
}

// A decimal number, as JSON writes it with an optional '+', a leading or
// trailing '.' allowed (what strtod reads), or a non-finite spelling.
Status CheckDoubleText(std::string_view s) {
  if (SpellsNonFinite(s)) return Status::OK();
  size_t i = 0, n = s.size();
  if (i < n && (s[i] == '-' || s[i] == '+')) i++;
  size_t digits = 0;
  while (i < n && IsDigit(s[i])) i++, digits++;
  if (i < n && s[i] == '.') {
    i++;
    while (i < n && IsDigit(s[i])) i++, digits++;
  }
  bool ok = digits > 0;
  if (ok && i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '-' || s[i] == '+')) i++;
    ok = i < n && IsDigit(s[i]);
    while (i < n && IsDigit(s[i])) i++;
  }
  if (ok && i == n) return CheckDoubleRange(s);
  return Status::InvalidArgument("$numberDouble \"" + std::string(s) + "\" is not a number");
}

// Whether the decimal digits (no sign, no leading zeros) exceed `max`, a
// number written with as many or fewer digits.
bool Exceeds(std::string_view digits, std::string_view max) {
  if (digits.size() != max.size()) return digits.size() > max.size();
  return digits.compare(max) > 0;
}

// libbson keeps the regex flags it knows (i, l, m, s, u, x) and drops the
// others without a word; the query's regex refuses l (engine/regex.cc).
Status CheckRegexOptions(std::string_view options) {
  const size_t bad = options.find_first_not_of("ilmsux");
  if (bad == std::string_view::npos) return Status::OK();
  return Status::InvalidArgument("invalid flag '" + std::string(1, options[bad]) +
                                 "' in regex options \"" + std::string(options) + "\"");
}

bool IsWordChar(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c); }

bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The wrappers' strings libbson reads too kindly, so that a typo became
// another value: an ObjectId's other letters as zeros, "100" as subtype
// 0x10, " +05" as 5, 2020-02-30 as March 1.
Status CheckOidText(std::string_view s) {
  if (s.size() == 24 && std::all_of(s.begin(), s.end(), IsHex)) return Status::OK();
  return Status::InvalidArgument("invalid JSON: $oid \"" + std::string(s) +
                                 "\" is not 24 hexadecimal digits");
}

// $numberInt and $numberLong: an optional '-' and decimal digits, without
// leading zeros, as Extended JSON writes them (the range is checked later).
Status CheckIntText(std::string_view key, std::string_view s) {
  const std::string_view digits = !s.empty() && s[0] == '-' ? s.substr(1) : s;
  if (!digits.empty() && std::all_of(digits.begin(), digits.end(), IsDigit) &&
      (digits[0] != '0' || digits.size() == 1)) {
    return Status::OK();
  }
  return Status::InvalidArgument("invalid JSON: " + std::string(key) + " \"" + std::string(s) +
                                 "\" is not an integer");
}

Status CheckSubTypeText(std::string_view s) {
  if (!s.empty() && s.size() <= 2 && std::all_of(s.begin(), s.end(), IsHex)) return Status::OK();
  return Status::InvalidArgument("invalid JSON: binary subType \"" + std::string(s) +
                                 "\" is not one or two hexadecimal digits");
}

// An ISO-8601 $date: the day exists in its month, the time in its day.
// The layout itself is libbson's to check.
Status CheckDateText(std::string_view s) {
  auto num = [&s](size_t at, size_t n, int* v) {
    if (at + n > s.size()) return false;
    *v = 0;
    for (size_t i = at; i < at + n; i++) {
      if (!IsDigit(s[i])) return false;
      *v = *v * 10 + (s[i] - '0');
    }
    return true;
  };
  int year, month, day;
  if (!num(0, 4, &year) || s.size() < 10 || s[4] != '-' || !num(5, 2, &month) || s[7] != '-' ||
      !num(8, 2, &day)) {
    return Status::OK();
  }
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  const int last = month == 2 && leap ? 29 : month >= 1 && month <= 12 ? kDays[month - 1] : 0;
  int hour = 0, minute = 0, second = 0;
  const bool timed = s.size() > 10 && s[10] == 'T';
  if (day < 1 || day > last ||
      (timed && ((num(11, 2, &hour) && hour > 23) || (num(14, 2, &minute) && minute > 59) ||
                 (num(17, 2, &second) && second > 59)))) {
    return Status::InvalidArgument("invalid JSON: $date \"" + std::string(s) +
                                   "\" is not a date and time that exist");
  }
  return Status::OK();
}

// An RFC 3339 $date that libbson's reader does not take, in the form it
// does: a colon in the offset ("+01:00" -> "+0100"), as Python, JavaScript
// and Go write it, and fractions finer than a millisecond, which a BSON date
// cannot hold, cut to milliseconds (as mongoimport). nullopt when s needs
// neither (or is no such date: libbson then says what is wrong).
std::optional<std::string> NormalizedDate(std::string_view s) {
  const size_t t = s.find('T');
  if (t == std::string_view::npos) return std::nullopt;
  std::string out(s.substr(0, t + 1));
  size_t i = t + 1;
  while (i < s.size() && (IsDigit(s[i]) || s[i] == ':')) out += s[i++];
  bool changed = false;
  if (i < s.size() && s[i] == '.') {
    out += s[i++];
    size_t digits = 0;
    for (; i < s.size() && IsDigit(s[i]); i++) {
      if (++digits <= 3) {
        out += s[i];
      } else {
        changed = true;
      }
    }
  }
  std::string_view zone = s.substr(i);
  if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && IsDigit(zone[1]) &&
      IsDigit(zone[2]) && zone[3] == ':' && IsDigit(zone[4]) && IsDigit(zone[5])) {
    out.append(zone.substr(0, 3)).append(zone.substr(4));
    changed = true;
  } else {
    out.append(zone);
  }
  if (!changed) return std::nullopt;
  return out;
}

// A bare word outside strings: JSON's true, false and null, and the NaN and
// Infinity that libbson reads (in any case, as it does).
Status CheckWord(std::string_view w) {
  if (w == "true" || w == "false" || w == "null" || EqualsNoCase(w, "nan") ||
      EqualsNoCase(w, "infinity")) {
    return Status::OK();
  }
  return Status::InvalidArgument("invalid JSON: unexpected word '" + std::string(w) + "'");
}

// A span of JSON text to replace before libbson reads it.
struct Rewrite {
  size_t start, stop;
  std::string text;
};

// *dates receives the $date strings to rewrite (NormalizedDate).
Status CheckJsonNumbers(std::string_view json, std::vector<Rewrite>* dates) {
  const char* p = json.data();
  const char* const end = p + json.size();
  int depth = 0;
  int timestamp_depth = -1;  // depth of an open {"$timestamp": {...}} body
  int regex_depth = -1;      // of an open {"$regularExpression": {...}} body
  int binary_depth = -1;     // of an open {"$binary": {...}} body
  enum {
    kNone,
    kDecimal,
    kDouble,
    kTimestamp,
    kRegexOptions,
    kOid,
    kInt,
    kLong,
    kSubType,
    kDate,
    kUndefined
  } pending = kNone;  // key seen
  while (p < end) {
    const char c = *p;
    if (c == '"') {
      const char* text = p + 1;
      bool escaped = false;
      const char* close = StringEnd(text, end, &escaped);
      std::string_view str(text, static_cast<size_t>(close - text));
      p = close + (close < end);
      const char* q = p;
      while (q < end && IsJsonSpace(*q)) q++;
      if (q < end && *q == ':') {  // a key
        pending = kNone;
        // ("\u0024..." is a '$' too.)
        if (!str.empty() && (str[0] == '$' || str[0] == '\\')) {
          std::string decoded;
          if (escaped) {
            decoded = Unescape(str);
            str = decoded;
          }
          if (str == "$numberDecimal") {
            pending = kDecimal;
          } else if (str == "$numberDouble") {
            pending = kDouble;
          } else if (str == "$timestamp") {
            pending = kTimestamp;
          } else if (str == "$options") {
            pending = kRegexOptions;
          } else if (str == "$regularExpression") {
            regex_depth = depth + 1;
          } else if (str == "$binary") {
            binary_depth = depth + 1;
          } else if (str == "$oid") {
            pending = kOid;
          } else if (str == "$numberInt") {
            pending = kInt;
          } else if (str == "$numberLong") {
            pending = kLong;
          } else if (str == "$date") {
            pending = kDate;
          } else if (str == "$undefined") {
            pending = kUndefined;
          }
        } else if (str == "options" && depth == regex_depth) {
          pending = kRegexOptions;
        } else if (str == "subType" && depth == binary_depth) {
          pending = kSubType;
        }
        p = q + 1;
        continue;
      }
      if (pending == kRegexOptions) {
        std::string decoded;
        if (escaped) {
          decoded = Unescape(str);
          str = decoded;
        }
        MMDOC_RETURN_IF_ERROR(CheckRegexOptions(str));
      }
      if (pending != kNone && pending != kRegexOptions && pending != kTimestamp) {
        std::string decoded;
        if (escaped) {
          decoded = Unescape(str);
          str = decoded;
        }
        switch (pending) {
          case kDecimal:
            MMDOC_RETURN_IF_ERROR(CheckDecimal(str));
            break;
          case kDouble:
            MMDOC_RETURN_IF_ERROR(CheckDoubleText(str));
            break;
          case kOid:
            MMDOC_RETURN_IF_ERROR(CheckOidText(str));
            break;
          case kInt:
          case kLong:
            MMDOC_RETURN_IF_ERROR(
                CheckIntText(pending == kInt ? "$numberInt" : "$numberLong", str));
            break;
          case kSubType:
            MMDOC_RETURN_IF_ERROR(CheckSubTypeText(str));
            break;
          case kDate:
            if (auto n = escaped ? std::nullopt : NormalizedDate(str)) {
              dates->push_back({static_cast<size_t>(text - json.data()),
                                static_cast<size_t>(close - json.data()), *n});
            }
            MMDOC_RETURN_IF_ERROR(CheckDateText(str));
            break;
          default:
            break;
        }
      }
      pending = kNone;
      continue;
    }
    if (c == '-' || IsDigit(c)) {
      const char* start = p;
      if (c == '-') p++;
      const char* digits = p;
      while (p < end && IsDigit(*p)) p++;
      if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) {
        // A double: libbson refuses one that overflows, and reads one that
        // underflows as 0.
        while (p < end &&
               (IsDigit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')) {
          p++;
        }
        MMDOC_RETURN_IF_ERROR(
            CheckDoubleRange(std::string_view(start, static_cast<size_t>(p - start))));
      } else if (p > digits) {
        std::string_view number(start, static_cast<size_t>(p - start));
        std::string_view mag(digits, static_cast<size_t>(p - digits));
        if (mag.size() >= 19 &&
            Exceeds(mag, c == '-' ? "9223372036854775808" : "9223372036854775807")) {
          return Status::InvalidArgument("integer " + std::string(number) +
                                         " is out of range (int64)");
        }
        if (depth == timestamp_depth && mag.size() >= 10 && Exceeds(mag, "4294967295")) {
          return Status::InvalidArgument("timestamp field " + std::string(number) +
                                         " is out of range (uint32)");
        }
      }
      pending = kNone;
      continue;
    }
    if (c == '{' || c == '[') {
      depth++;
      if (c == '{' && pending == kTimestamp) timestamp_depth = depth;
      pending = kNone;
    } else if (c == '}' || c == ']') {
      if (depth == timestamp_depth) timestamp_depth = -1;
      if (depth == regex_depth) regex_depth = -1;
      if (depth == binary_depth) binary_depth = -1;
      depth--;
    } else if (IsWordChar(c)) {
      // libbson reads the prefixes "n", "N" and "Na" of NaN as 0.
      const char* word = p;
      while (p < end && IsWordChar(*p)) p++;
      const std::string_view w(word, static_cast<size_t>(p - word));
      MMDOC_RETURN_IF_ERROR(CheckWord(w));
      if (pending == kUndefined && w != "true") {
        return Status::InvalidArgument("invalid JSON: $undefined must be true, not " +
                                       std::string(w));
      }
      pending = kNone;
      continue;
    } else if (!IsJsonSpace(c) && c != ',') {
      pending = kNone;
    }
    p++;
  }
  return Status::OK();
}

// libbson reads an object with a "$type" key as the legacy binary form
// {"$binary": .., "$type": ..}, so the query operator {"$type": "date"}, {"$type": 2}
// or $currentDate's {"$type": "date"} fails to parse. Such keys, in objects without a
// "$binary" key, are renamed to this marker before libbson and back after.
constexpr std::string_view kTypeMarker = "$mmdoc:type";

// The [start, end) spans of the "$type" keys (quotes included) that are the
// operator and not the legacy binary's subtype.
std::vector<std::pair<size_t, size_t>> TypeOperatorKeys(std::string_view json) {
  struct Frame {
    bool binary = false;
    std::vector<std::pair<size_t, size_t>> types;
  };
  std::vector<std::pair<size_t, size_t>> found;
  std::vector<Frame> open;
  const char* const begin = json.data();
  const char* const end = begin + json.size();
  for (const char* p = begin; p < end;) {
    const char c = *p;
    if (c == '"') {
      bool escaped = false;
      const char* close = StringEnd(p + 1, end, &escaped);
      std::string_view str(p + 1, static_cast<size_t>(close - p - 1));
      std::string decoded;
      if (escaped) {
        decoded = Unescape(str);
        str = decoded;
      }
      const char* next = close + (close < end);
      const char* q = next;
      while (q < end && IsJsonSpace(*q)) q++;
      if (q < end && *q == ':' && !open.empty()) {
        if (str == "$binary") open.back().binary = true;
        if (str == "$type") {
          open.back().types.emplace_back(static_cast<size_t>(p - begin),
                                         static_cast<size_t>(next - begin));
        }
      }
      p = next;
      continue;
    }
    if (c == '{' || c == '[') {
      open.emplace_back();
    } else if ((c == '}' || c == ']') && !open.empty()) {
      if (!open.back().binary) {
        found.insert(found.end(), open.back().types.begin(), open.back().types.end());
      }
      open.pop_back();
    }
    p++;
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Copies `in` to `out` (bson_init'ed) with every kTypeMarker key named
// "$type" again. Below kMaxNestingDepth only: Validate refuses deeper.
bool RestoreTypeKeys(const bson_t* in, bson_t* out, int depth) {
  bson_iter_t it;
  if (!bson_iter_init(&it, in)) return false;
  while (bson_iter_next(&it)) {
    std::string_view key(bson_iter_key(&it), bson_iter_key_len(&it));
    if (key == kTypeMarker) key = "$type";
    const int len = static_cast<int>(key.size());
    if ((BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) && depth < kMaxNestingDepth) {
      const bool array = BSON_ITER_HOLDS_ARRAY(&it);
      uint32_t size = 0;
      const uint8_t* data = nullptr;
      if (array) {
        bson_iter_array(&it, &size, &data);
      } else {
        bson_iter_document(&it, &size, &data);
      }
      bson_t child_in;
      if (!bson_init_static(&child_in, data, size)) return false;
      bson_t child_out;
      bool ok = array ? bson_append_array_begin(out, key.data(), len, &child_out)
                      : bson_append_document_begin(out, key.data(), len, &child_out);
      ok = ok && RestoreTypeKeys(&child_in, &child_out, depth + 1);
      ok = ok && (array ? bson_append_array_end(out, &child_out)
                        : bson_append_document_end(out, &child_out));
      if (!ok) return false;
    } else if (!bson_append_value(out, key.data(), len, bson_iter_value(&it))) {
      return false;
    }
  }
  return true;
}

// Parses exactly one JSON object with libbson into *out (bson_init'ed).
// bson_init_from_json silently ignores a second document after the first
// ("{} {}"), so we drive the reader ourselves and insist on end of input.
Status ParseJsonObject(std::string_view json, bson_t* out) {
  size_t i = 0;
  while (i < json.size() &&
         (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) {
    ++i;
  }
  if (i == json.size()) return Status::InvalidArgument("invalid JSON: empty");
  // libbson's error would stop at the byte and print nothing useful.
  if (const size_t nul = json.find('\0'); nul != std::string_view::npos) {
    return Status::InvalidArgument("invalid JSON: a NUL byte at offset " + std::to_string(nul) +
                                   " (write \\u0000 in a string)");
  }
  // libbson would turn a top-level array into {"0": .., "1": ..}.
  if (json[i] != '{') {
    return Status::InvalidArgument("invalid JSON: expected an object at the top level");
  }
  // Before libbson, whose error for some wrapped integers names the
  // wrapped value.
  std::vector<Rewrite> rewrites;
  MMDOC_RETURN_IF_ERROR(CheckJsonNumbers(json, &rewrites));
  // Only inputs with a "$type" key (or "\u0024type") are scanned; one that
  // holds the marker itself is left as it is.
  const bool scan = json.find("type\"") != json.npos && json.find(kTypeMarker) == json.npos;
  const auto types = scan ? TypeOperatorKeys(json) : std::vector<std::pair<size_t, size_t>>();
  for (const auto& [start, stop] : types) {
    rewrites.push_back({start, stop, "\"" + std::string(kTypeMarker) + "\""});
  }
  std::string renamed;
  if (!rewrites.empty()) {  // keys and date values: never overlapping
    std::sort(rewrites.begin(), rewrites.end(),
              [](const Rewrite& a, const Rewrite& b) { return a.start < b.start; });
    size_t from = 0;
    for (const Rewrite& r : rewrites) {
      renamed.append(json.data() + from, r.start - from);
      renamed.append(r.text);
      from = r.stop;
    }
    renamed.append(json.data() + from, json.size() - from);
    json = renamed;
  }
  bson_json_reader_t* reader = bson_json_data_reader_new(false, 0x1000);
  bson_json_data_reader_ingest(reader, reinterpret_cast<const uint8_t*>(json.data()), json.size());
  bson_error_t err;
  int r = bson_json_reader_read(reader, out, &err);
  Status s;
  if (r < 0) {
    // libbson's reader stops at 98 levels, below BSON's 100 (kMaxNestingDepth).
    s = std::strstr(err.message, "LEVELS_EXCEEDED") != nullptr
            ? Status::InvalidArgument(
                  "invalid JSON: nested deeper than the 98 levels the JSON reader takes "
                  "(BSON carries up to 100)")
            : Status::InvalidArgument("invalid JSON", err.message);
  } else if (r == 0) {
    s = Status::InvalidArgument("invalid JSON: empty");
  } else {
    ScopedBson extra;
    r = bson_json_reader_read(reader, &extra.b, &err);
    if (r != 0) {
      s = Status::InvalidArgument("invalid JSON",
                                  r < 0 ? std::string_view(err.message) : "more than one document");
    }
  }
  bson_json_reader_destroy(reader);
  if (s.ok() && !types.empty()) {
    ScopedBson restored;
    if (!RestoreTypeKeys(out, &restored.b, 1)) return Status::InvalidArgument("invalid JSON");
    bson_destroy(out);
    bson_copy_to(&restored.b, out);
  }
  return s;
}

// ------------------------------------------------------- Extended JSON out
//
// One writer for both modes of Extended JSON v2 (JsonMode). It prints what
// libbson's bson_as_{relaxed,canonical}_extended_json print, byte for byte
// (tests/engine/document_test.cc compares them), except:
//   - doubles: libbson prints 17 significant digits and more ("9.99" is
//     9.9900000000000002132); we print the shortest decimal that reads back
//     as the same double (std::to_chars);
//   - relaxed dates after 9999: libbson prints a five-digit year that no
//     reader, libbson's included, reads back; the specification says
//     {"$date": {"$numberLong": ...}} outside 1970..9999.
// It walks the bytes with bson_iter's bounds-checked accessors and checks
// UTF-8 and depth as it goes, so it is safe on bytes not known to be valid.

// The last millisecond of 9999-12-31, the end of relaxed ISO-8601 dates.
constexpr int64_t kMaxIsoDateMs = 253402300799999;

class JsonWriter {
 public:
  JsonWriter(JsonMode mode, std::string* out)
      : canonical_(mode == JsonMode::kCanonical), out_(out) {}

  // A (sub)document or array at nesting level `depth` (the top is 1).
  bool WriteDocument(const uint8_t* data, size_t size, bool array, int depth) {
    if (depth > kMaxNestingDepth) return false;
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, size)) return false;
    const uint32_t len = it.len;  // bson_iter_next zeroes it at the end
    out_->append(array ? "[ " : "{ ");
    bool first = true;
    while (bson_iter_next(&it)) {
      if (!first) out_->append(", ");
      first = false;
      if (!array) {
        if (!WriteString(bson_iter_key(&it), bson_iter_key_len(&it))) return false;
        out_->append(" : ");
      }
      if (!WriteValue(&it, depth)) return false;
    }
    if (it.err_off != 0 || it.off + 1 != len) return false;
    out_->append(array ? " ]" : " }");
    return true;
  }

  // The value `it` is on, inside a (sub)document at level `depth`.
  bool WriteValue(const bson_iter_t* it, int depth) {
    switch (bson_iter_type(it)) {
      case BSON_TYPE_DOUBLE:
        WriteDouble(bson_iter_double(it));
        return true;
      case BSON_TYPE_UTF8: {
        uint32_t len = 0;
        const char* s = bson_iter_utf8(it, &len);
        return WriteString(s, len);
      }
      case BSON_TYPE_DOCUMENT:
      case BSON_TYPE_ARRAY: {
        uint32_t len = 0;
        const uint8_t* data = nullptr;
        const bool array = bson_iter_type(it) == BSON_TYPE_ARRAY;
        if (array) {
          bson_iter_array(it, &len, &data);
        } else {
          bson_iter_document(it, &len, &data);
        }
        return data != nullptr && WriteDocument(data, len, array, depth + 1);
      }
      case BSON_TYPE_BINARY: {
        bson_subtype_t subtype = BSON_SUBTYPE_BINARY;
        uint32_t len = 0;
        const uint8_t* data = nullptr;
        bson_iter_binary(it, &subtype, &len, &data);
        if (data == nullptr && len != 0) return false;
        out_->append("{ \"$binary\" : { \"base64\" : \"");
        AppendBase64(data, len);
        char hex[3];
        std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned>(subtype) & 0xff);
        out_->append("\", \"subType\" : \"").append(hex).append("\" } }");
        return true;
      }
      case BSON_TYPE_UNDEFINED:
        out_->append("{ \"$undefined\" : true }");
        return true;
      case BSON_TYPE_OID: {
        char hex[25];
        bson_oid_to_string(bson_iter_oid(it), hex);
        out_->append("{ \"$oid\" : \"").append(hex).append("\" }");
        return true;
      }
      case BSON_TYPE_BOOL:
        out_->append(bson_iter_bool(it) ? "true" : "false");
        return true;
      case BSON_TYPE_DATE_TIME:
        WriteDate(bson_iter_date_time(it));
        return true;
      case BSON_TYPE_NULL:
        out_->append("null");
        return true;
      case BSON_TYPE_REGEX: {
        const char* options = nullptr;
        const char* pattern = bson_iter_regex(it, &options);
        if (pattern == nullptr || options == nullptr) return false;
        out_->append("{ \"$regularExpression\" : { \"pattern\" : ");
        if (!WriteString(pattern, std::strlen(pattern))) return false;
        // In alphabetical order, once each, as Extended JSON (and BSON) say.
        std::string sorted(options);
        std::sort(sorted.begin(), sorted.end());
        sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
        out_->append(", \"options\" : ");
        if (!WriteString(sorted.data(), sorted.size())) return false;
        out_->append(" } }");
        return true;
      }
      case BSON_TYPE_DBPOINTER: {
        uint32_t len = 0;
        const char* collection = nullptr;
        const bson_oid_t* oid = nullptr;
        bson_iter_dbpointer(it, &len, &collection, &oid);
        if (collection == nullptr || oid == nullptr) return false;
        char hex[25];
        bson_oid_to_string(oid, hex);
        out_->append("{ \"$dbPointer\" : { \"$ref\" : ");
        if (!WriteString(collection, len)) return false;
        out_->append(", \"$id\" : { \"$oid\" : \"").append(hex).append("\" } } }");
        return true;
      }
      case BSON_TYPE_CODE: {
        uint32_t len = 0;
        const char* code = bson_iter_code(it, &len);
        out_->append("{ \"$code\" : ");
        if (code == nullptr || !WriteString(code, len)) return false;
        out_->append(" }");
        return true;
      }
      case BSON_TYPE_SYMBOL: {
        uint32_t len = 0;
        const char* symbol = bson_iter_symbol(it, &len);
        out_->append("{ \"$symbol\" : ");
        if (symbol == nullptr || !WriteString(symbol, len)) return false;
        out_->append(" }");
        return true;
      }
      case BSON_TYPE_CODEWSCOPE: {
        uint32_t len = 0;
        uint32_t scope_len = 0;
        const uint8_t* scope = nullptr;
        const char* code = bson_iter_codewscope(it, &len, &scope_len, &scope);
        out_->append("{ \"$code\" : ");
        if (code == nullptr || scope == nullptr || !WriteString(code, len)) return false;
        out_->append(", \"$scope\" : ");
        if (!WriteDocument(scope, scope_len, false, depth + 1)) return false;
        out_->append(" }");
        return true;
      }
      case BSON_TYPE_INT32:
        WriteInteger(bson_iter_int32(it), "{ \"$numberInt\" : \"");
        return true;
      case BSON_TYPE_TIMESTAMP: {
        uint32_t t = 0;
        uint32_t i = 0;
        bson_iter_timestamp(it, &t, &i);
        out_->append("{ \"$timestamp\" : { \"t\" : ");
        AppendInteger(t);
        out_->append(", \"i\" : ");
        AppendInteger(i);
        out_->append(" } }");
        return true;
      }
      case BSON_TYPE_INT64:
        WriteInteger(bson_iter_int64(it), "{ \"$numberLong\" : \"");
        return true;
      case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t d;
        if (!bson_iter_decimal128(it, &d)) return false;
        char text[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&d, text);
        out_->append("{ \"$numberDecimal\" : \"").append(text).append("\" }");
        return true;
      }
      case BSON_TYPE_MAXKEY:
        out_->append("{ \"$maxKey\" : 1 }");
        return true;
      case BSON_TYPE_MINKEY:
        out_->append("{ \"$minKey\" : 1 }");
        return true;
      default:
        return false;  // not a BSON type (bson_iter_next lets none through)
    }
  }

 private:
  template <typename Int>
  void AppendInteger(Int v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out_->append(buf, static_cast<size_t>(r.ptr - buf));
  }

  // Relaxed: the bare number; canonical: the number as a string in
  // `wrapper` ("{ \"$numberInt\" : \"").
  template <typename Int>
  void WriteInteger(Int v, const char* wrapper) {
    if (!canonical_) {
      AppendInteger(v);
      return;
    }
    out_->append(wrapper);
    AppendInteger(v);
    out_->append("\" }");
  }

  void WriteDouble(double d) {
    if (std::isnan(d) || std::isinf(d)) {
      out_->append("{ \"$numberDouble\" : \"");
      out_->append(std::isnan(d) ? "NaN" : d < 0 ? "-Infinity" : "Infinity");
      out_->append("\" }");
      return;
    }
    // to_chars with no format is the shortest text that from_chars (and
    // strtod) reads back as exactly d, fixed or scientific, whichever is
    // shorter.
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof(buf), d);
    std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
    if (canonical_) out_->append("{ \"$numberDouble\" : \"");
    out_->append(text);
    // Without a point or an exponent it would read back as an integer.
    if (text.find_first_of(".e") == std::string_view::npos) out_->append(".0");
    if (canonical_) out_->append("\" }");
  }

  void WriteDate(int64_t ms) {
    if (canonical_ || ms < 0 || ms > kMaxIsoDateMs) {
      out_->append("{ \"$date\" : { \"$numberLong\" : \"");
      AppendInteger(ms);
      out_->append("\" } }");
      return;
    }
    const time_t secs = static_cast<time_t>(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[40];
    size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    out_->append("{ \"$date\" : \"").append(buf, n);
    if (ms % 1000 != 0) {
      std::snprintf(buf, sizeof(buf), ".%03d", static_cast<int>(ms % 1000));
      out_->append(buf);
    }
    out_->append("Z\" }");
  }

  // A JSON string: '"', '\' and control characters escaped (as libbson
  // does: \b \f \n \r \t, the others \u00XX), the rest as it is. False
  // when s is not valid UTF-8 (NUL is allowed: BSON strings may hold it).
  bool WriteString(const char* s, size_t len) {
    if (!bson_utf8_validate(s, len, true)) return false;
    out_->push_back('"');
    size_t run = 0;  // start of the bytes not yet copied
    for (size_t i = 0; i < len; i++) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out_->append(s + run, i - run);
      run = i + 1;
      switch (c) {
        case '"':
          out_->append("\\\"");
          break;
        case '\\':
          out_->append("\\\\");
          break;
        case '\b':
          out_->append("\\b");
          break;
        case '\f':
          out_->append("\\f");
          break;
        case '\n':
          out_->append("\\n");
          break;
        case '\r':
          out_->append("\\r");
          break;
        case '\t':
          out_->append("\\t");
          break;
        default: {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out_->append(buf);
        }
      }
    }
    out_->append(s + run, len - run);
    out_->push_back('"');
    return true;
  }

  // RFC 4648 base64 with '=' padding, as the specification asks.
  void AppendBase64(const uint8_t* data, size_t len) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
      const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
      const char quad[4] = {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63],
                            kAlphabet[v & 63]};
      out_->append(quad, 4);
    }
    if (i < len) {
      const bool two = i + 2 == len;
      const uint32_t v = (uint32_t{data[i]} << 16) | (two ? uint32_t{data[i + 1]} << 8 : 0);
      const char quad[4] = {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63],
                            two ? kAlphabet[(v >> 6) & 63] : '=', '='};
      out_->append(quad, 4);
    }
  }

  const bool canonical_;
  std::string* out_;
};

}  // namespace

bool BsonToJson(const uint8_t* data, size_t size, JsonMode mode, std::string* out) {
  out->clear();
  if (data == nullptr || size < 5) return false;
  // libbson writes the empty document as "{ }" at the top and "{  }" inside.
  if (size == 5 && data[0] == 5 && data[1] == 0 && data[2] == 0 && data[3] == 0 && data[4] == 0) {
    out->assign("{ }");
    return true;
  }
  JsonWriter writer(mode, out);
  return writer.WriteDocument(data, size, false, 1);
}

// ---------------------------------------------------------------- Document

Document::Document() : bytes_(kEmptyDoc, sizeof(kEmptyDoc)) {}

Result<Document> Document::FromJson(std::string_view json) {
  ScopedBson parsed;
  MMDOC_RETURN_IF_ERROR(ParseJsonObject(json, &parsed.b));
  const uint8_t* data = bson_get_data(&parsed.b);
  MMDOC_RETURN_IF_ERROR(Validate(data, parsed.b.len));
  return Document(std::string(reinterpret_cast<const char*>(data), parsed.b.len));
}

Result<Document> Document::FromBson(const uint8_t* data, size_t size) {
  if (data == nullptr) return Status::InvalidArgument("invalid BSON: null data");
  MMDOC_RETURN_IF_ERROR(Validate(data, size));
  return Document(std::string(reinterpret_cast<const char*>(data), size));
}

Result<Document> Document::FromBson(const bson_t* bson) {
  if (bson == nullptr) return Status::InvalidArgument("invalid BSON: null document");
  return FromBson(bson_get_data(bson), bson->len);
}

Document Document::FromTrustedBytes(std::string bytes) { return Document(std::move(bytes)); }

void Document::View(bson_t* out) const {
  bool ok = bson_init_static(out, data(), size());
  assert(ok);
  (void)ok;
}

std::string Document::ToJson(JsonMode mode) const {
  std::string out;
  // False only for bytes that are not valid BSON/UTF-8, which no
  // constructor lets in (FromTrustedBytes's caller promises validity).
  if (!BsonToJson(data(), size(), mode, &out)) return "{}";
  return out;
}

Result<Value> Document::Get(std::string_view dotted_path) const {
  bson_value_t v;
  if (!engine::LookupPath(data(), size(), dotted_path, &v)) {
    return Status::NotFound("no field", dotted_path);
  }
  return Value::FromBsonValue(&v);
}

// ------------------------------------------------------------------- Value

Value::Value() : doc_(kNullValueDoc, sizeof(kNullValueDoc)) { Reset(); }

Value::Value(const Value& o) : doc_(o.doc_) { Reset(); }
Value::Value(Value&& o) noexcept : doc_(std::move(o.doc_)) {
  Reset();
  // Leave the source a valid null rather than a view of a moved-out buffer.
  o.doc_.assign(kNullValueDoc, sizeof(kNullValueDoc));
  o.Reset();
}
Value& Value::operator=(const Value& o) {
  if (this != &o) {
    doc_ = o.doc_;
    Reset();
  }
  return *this;
}
Value& Value::operator=(Value&& o) noexcept {
  if (this != &o) {
    doc_.swap(o.doc_);
    Reset();
    o.Reset();
  }
  return *this;
}

// Points view_ at the value inside doc_. Must run whenever doc_'s buffer may
// have moved (copy, move, short-string optimisation), since strings,
// documents and binaries in a bson_value_t are pointers into it.
void Value::Reset() {
  bson_iter_t it;
  bool ok =
      bson_iter_init_from_data(&it, reinterpret_cast<const uint8_t*>(doc_.data()), doc_.size()) &&
      bson_iter_next(&it);
  assert(ok);
  (void)ok;
  // bson_iter_value fills a borrowed view (no copy), valid while doc_ is.
  view_ = *bson_iter_value(&it);
}

Result<Value> Value::FromJson(std::string_view json) {
  // libbson parses documents only: wrap the value as {"v": <json>}. A
  // crafted input like `1, "w": 2` or `1} {` is caught below (exactly one
  // key) and by ParseJsonObject (exactly one document).
  std::string wrapped = "{\"v\": ";
  wrapped.append(json.data(), json.size());
  wrapped += "\n}";
  ScopedBson parsed;
  MMDOC_RETURN_IF_ERROR(ParseJsonObject(wrapped, &parsed.b));
  if (bson_count_keys(&parsed.b) != 1) {
    return Status::InvalidArgument("invalid JSON: not a single value");
  }
  const uint8_t* data = bson_get_data(&parsed.b);
  MMDOC_RETURN_IF_ERROR(Validate(data, parsed.b.len));
  Value v;
  v.doc_.assign(reinterpret_cast<const char*>(data), parsed.b.len);
  v.Reset();
  return v;
}

Value Value::FromBsonValue(const bson_value_t* value) {
  bson_t b;
  bson_init(&b);
  bson_append_value(&b, "v", 1, value);
  Value v;
  v.doc_.assign(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  v.Reset();
  return v;
}

Value Value::String(std::string_view s) {
  // Encoded by hand: {"v": s} is 13 bytes of framing around s, and this is
  // the _id of most lookups (libbson's builder cost more than the lookup).
  const uint32_t n = static_cast<uint32_t>(s.size());
  const uint32_t total = n + 13;
  Value v{std::string(total, '\0')};  // no null value built and replaced
  char* p = v.doc_.data();
  storage::EncodeFixed32(p, total);  // BSON's int32 lengths are little-endian
  p[4] = 0x02;                       // UTF-8 string
  p[5] = 'v';
  p[6] = '\0';
  storage::EncodeFixed32(p + 7, n + 1);
  if (n) std::memcpy(p + 11, s.data(), n);
  p[11 + n] = '\0';
  p[12 + n] = '\0';
  v.view_.value_type = BSON_TYPE_UTF8;
  v.view_.value.v_utf8.str = p + 11;
  v.view_.value.v_utf8.len = n;
  return v;
}

Value Value::Int32(int32_t i) {
  bson_value_t v;
  v.value_type = BSON_TYPE_INT32;
  v.value.v_int32 = i;
  return FromBsonValue(&v);
}

Value Value::Int64(int64_t i) {
  bson_value_t v;
  v.value_type = BSON_TYPE_INT64;
  v.value.v_int64 = i;
  return FromBsonValue(&v);
}

Value Value::Double(double d) {
  bson_value_t v;
  v.value_type = BSON_TYPE_DOUBLE;
  v.value.v_double = d;
  return FromBsonValue(&v);
}

Value Value::Bool(bool b) {
  bson_value_t v;
  v.value_type = BSON_TYPE_BOOL;
  v.value.v_bool = b;
  return FromBsonValue(&v);
}

Value Value::Null() { return Value(); }

Value Value::ObjectId(const bson_oid_t& oid) {
  bson_value_t v;
  v.value_type = BSON_TYPE_OID;
  bson_oid_copy(&oid, &v.value.v_oid);
  return FromBsonValue(&v);
}

const bson_value_t* Value::get() const { return &view_; }

bson_type_t Value::type() const { return view_.value_type; }

std::string Value::ToJson(JsonMode mode) const {
  // doc_ is {"v": <value>}, made by our constructors.
  bson_iter_t it;
  if (!bson_iter_init_from_data(&it, reinterpret_cast<const uint8_t*>(doc_.data()), doc_.size()) ||
      !bson_iter_next(&it)) {
    return "null";
  }
  std::string out;
  JsonWriter writer(mode, &out);
  if (!writer.WriteValue(&it, 1)) return "null";
  return out;
}

}  // namespace mmdoc
