// mmdoc::Document and mmdoc::Value: BSON documents and single BSON values.
//
// Documents are BSON (libbson), so what mmdoc stores and exports is what
// MongoDB's tools and drivers read. JSON in and out is MongoDB Extended JSON
// v2: canonical or relaxed on input; relaxed on output unless canonical is
// asked for (JsonMode).
//
// Limits, checked by every constructor that takes outside bytes:
//   - a document is at most kMaxDocumentSize bytes (16 MiB, as MongoDB);
//   - nesting (documents and arrays inside each other) at most
//     kMaxNestingDepth levels;
//   - keys are valid UTF-8 and contain no NUL;
//   - the top level is a document, never an array.
// Keys starting with '$' and a field name repeated in one (sub)document
// are accepted here, because filters and updates ({"a": {"$gt": 1}},
// {"$set": ...}) are Documents too; a document to be stored may not have
// them at any depth ("field names must not start with '$': $foo",
// "duplicate field name: _id", as MongoDB refuses them): Insert, Replace
// and Update check that.
// A violation is Status::InvalidArgument naming the problem (and, for JSON,
// where it is).
//
// Numbers in JSON are taken as written or refused, never changed: an
// integer outside int64 is InvalidArgument ("integer 18446744073709551616
// is out of range (int64)"), not stored as a double (write 1.8e19 for a
// double); so is a double that overflows (1e400), a $numberLong/$numberInt
// string out of its range, a $timestamp field over 2^32-1, a $numberDouble
// string that is not a number, and a $numberDecimal that decimal128 cannot
// hold exactly (libbson would store NaN) unless the text says NaN or
// Infinity.
//
// Thread safety: Document and Value are immutable values; share freely.
#ifndef MMDOC_DOCUMENT_H_
#define MMDOC_DOCUMENT_H_

#include <bson/bson.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mmdoc/status.h"

namespace mmdoc {

inline constexpr size_t kMaxDocumentSize = 16u << 20;
inline constexpr int kMaxNestingDepth = 100;

class Value;

// How ToJson writes Extended JSON v2 (MongoDB's specification, as
// mongoexport --jsonFormat writes it). Both modes write doubles as the
// shortest decimal that reads back as the same double (9.99, 0.1, 1e+300,
// an integral one with ".0": 5.0, -0.0), and NaN and the infinities as
// {"$numberDouble": "NaN"}. Layout is libbson's: { "k" : v, ... }.
enum class JsonMode {
  // For reading: int32 and int64 as plain numbers, doubles as numbers,
  // dates from 1970 to 9999 as ISO-8601 strings. Reading it back can change
  // a type: an int64 that fits in int32 comes back as int32.
  kRelaxed,
  // For moving data: every number and date in its type wrapper
  // ({"$numberInt": "5"}, {"$numberLong": "5"}, {"$numberDouble": "5.0"},
  // {"$date": {"$numberLong": "0"}}). Reading it back gives the same BSON
  // bytes, except that every NaN comes back as the one quiet NaN (the
  // specification writes them all as "NaN").
  kCanonical,
};

// Writes the BSON document data[0, size) as Extended JSON on one line into
// *out (replacing its contents). For bytes not known to be valid (a salvaged
// page): false, with *out unspecified, when they are not a well-formed
// document, nest deeper than kMaxNestingDepth or hold invalid UTF-8.
bool BsonToJson(const uint8_t* data, size_t size, JsonMode mode, std::string* out);

class Document {
 public:
  // The empty document {}.
  Document();

  // Parses one JSON object (Extended JSON). InvalidArgument for invalid
  // JSON (with libbson's message: line and position), a top-level array,
  // a second document after the first, invalid UTF-8, too deep or too
  // large, a number out of range (see above). A "$type" key is kept as a
  // key (the query operator, $currentDate's) unless its object also has
  // "$binary": libbson alone reads it as legacy binary data.
  static Result<Document> FromJson(std::string_view json);
  // Copies and validates BSON bytes. InvalidArgument for bad lengths, bad
  // element types, bad UTF-8, too deep or too large.
  static Result<Document> FromBson(const uint8_t* data, size_t size);
  static Result<Document> FromBson(const bson_t* bson);
  // Takes bytes already known to be valid (read back from the database).
  // REQUIRES: bytes is a valid BSON document.
  static Document FromTrustedBytes(std::string bytes);

  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(bytes_.data()); }
  size_t size() const { return bytes_.size(); }
  const std::string& bytes() const { return bytes_; }

  // A read-only bson_t over this document's bytes, valid while *this lives.
  void View(bson_t* out) const;
  // Extended JSON on one line (see JsonMode).
  std::string ToJson(JsonMode mode = JsonMode::kRelaxed) const;
  // The value at a dotted path ("a.b.0.c"); NotFound when absent.
  Result<Value> Get(std::string_view dotted_path) const;

  bool operator==(const Document& o) const { return bytes_ == o.bytes_; }
  bool operator!=(const Document& o) const { return bytes_ != o.bytes_; }

 private:
  explicit Document(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string bytes_;
};

// One BSON value: an _id, a constant in a filter. Any BSON type.
class Value {
 public:
  // null
  Value();
  // view_ points into doc_, so copies and moves re-point it (a moved-from
  // Value is null).
  Value(const Value& o);
  Value(Value&& o) noexcept;
  Value& operator=(const Value& o);
  Value& operator=(Value&& o) noexcept;
  // Parses a JSON value: 42, 1.5, "abc", true, null, {"$oid": "..."},
  // {"$numberLong": "..."}, {"$date": ...}, {"$binary": ...}, a document or
  // an array. InvalidArgument for invalid JSON.
  static Result<Value> FromJson(std::string_view json);
  static Value String(std::string_view s);
  static Value Int32(int32_t v);
  static Value Int64(int64_t v);
  static Value Double(double v);
  static Value Bool(bool v);
  static Value Null();
  static Value ObjectId(const bson_oid_t& oid);
  // Copies any bson_value_t.
  static Value FromBsonValue(const bson_value_t* v);

  // A view of the value, valid while *this lives.
  const bson_value_t* get() const;
  bson_type_t type() const;
  // Extended JSON, e.g. "abc" -> "\"abc\"", ObjectId -> {"$oid":"..."}.
  std::string ToJson(JsonMode mode = JsonMode::kRelaxed) const;

  // Same type and same bytes (1 and 1.0 differ here; queries compare
  // numbers numerically).
  bool operator==(const Value& o) const { return doc_ == o.doc_; }
  bool operator!=(const Value& o) const { return doc_ != o.doc_; }

 private:
  // Takes doc as it is; the caller sets view_.
  explicit Value(std::string doc) : doc_(std::move(doc)) {}
  void Reset();
  std::string doc_;    // BSON document {"v": <value>}
  bson_value_t view_;  // points into doc_
};

}  // namespace mmdoc

#endif  // MMDOC_DOCUMENT_H_
