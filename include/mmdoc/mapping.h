// mmdoc::Mapping and mmdoc::TypedCollection: store C++ structs as documents
// without building BSON by hand (what Morphia does for Java).
//
// Declare once how a struct maps to a document, then insert, get, find and
// replace structs:
//
//   struct Person { std::string id; std::string name; int32_t age = 0; };
//   const mmdoc::Mapping<Person> kPersonMapping =
//       mmdoc::Mapping<Person>()
//           .Id(&Person::id)                  // the _id field
//           .Field("name", &Person::name)
//           .Field("age", &Person::age);
//   mmdoc::TypedCollection<Person> people(db.get(), "people", kPersonMapping);
//   mmdoc::Status s = people.Insert(Person{"p1", "ada", 36});
//   auto ada = people.Get(mmdoc::Value::String("p1"));          // Result<Person>
//   auto adults = people.Find(mmdoc::Document::FromJson(R"({"age": {"$gte": 18}})").value());
//
// Supported member types: std::string (UTF-8), int32_t, int64_t, double,
// bool, std::vector<std::string>, std::vector<int64_t>. Reading converts
// numbers between int32/int64/double when the value fits exactly; a missing
// field leaves the member as default-constructed; any other mismatch is
// InvalidArgument naming the field.
//
// The mapping is a list of (name, member pointer) pairs walked once per
// document: no reflection, no allocation beyond the BSON buffer. Its cost
// over the raw API is measured by mmdoc-bench's mapping phase.
//
// Thread safety: a Mapping is immutable once built and may be shared. A
// TypedCollection is as thread-safe as the DB it wraps.
#ifndef MMDOC_MAPPING_H_
#define MMDOC_MAPPING_H_

#include <bson/bson.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "mmdoc/db.h"

namespace mmdoc {

template <typename T>
class Mapping {
 public:
  // The member holding _id (std::string or an integer type). Without it,
  // Insert lets the database generate an ObjectId and the struct does not
  // see it.
  template <typename M>
  Mapping& Id(M T::*member) {
    fields_.insert(fields_.begin(), FieldSpec{"_id", Member(member)});
    has_id_ = true;
    return *this;
  }
  // Maps `name` (a top-level field; not dotted) to `member`.
  template <typename M>
  Mapping& Field(std::string name, M T::*member) {
    fields_.push_back(FieldSpec{std::move(name), Member(member)});
    return *this;
  }

  bool has_id() const { return has_id_; }

  // Appends the struct's fields to *out (initialized by the caller).
  // InvalidArgument when a string is not valid UTF-8.
  Status Encode(const T& obj, bson_t* out) const {
    for (const FieldSpec& f : fields_) {
      const char* k = f.name.c_str();
      const int n = static_cast<int>(f.name.size());
      bool ok = std::visit([&](auto m) { return Append(out, k, n, obj.*m); }, f.member);
      if (!ok) return Status::InvalidArgument("field is not valid UTF-8", f.name);
    }
    return Status::OK();
  }

  Result<Document> ToDocument(const T& obj) const {
    bson_t b;
    bson_init(&b);
    Status s = Encode(obj, &b);
    if (!s.ok()) {
      bson_destroy(&b);
      return s;
    }
    Document d = Document::FromTrustedBytes(
        std::string(reinterpret_cast<const char*>(bson_get_data(&b)), b.len));
    bson_destroy(&b);
    return d;
  }

  // Fills *obj from BSON bytes (fields it does not map are ignored). One
  // pass over the document; a repeated field name sets the member once per
  // occurrence, so the last one wins.
  Status Decode(const uint8_t* data, size_t size, T* obj) const {
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, size)) return Status::InvalidArgument("invalid BSON");
    while (bson_iter_next(&it)) {
      const char* key = bson_iter_key(&it);
      const size_t key_len = bson_iter_key_len(&it);
      for (const FieldSpec& f : fields_) {
        if (f.name.size() != key_len || std::memcmp(f.name.data(), key, key_len) != 0) continue;
        bool ok = std::visit([&](auto m) { return Read(&it, &(obj->*m)); }, f.member);
        if (!ok)
          return Status::InvalidArgument("field has a type the struct member cannot hold", f.name);
        break;
      }
    }
    return Status::OK();
  }

  Result<Value> IdOf(const T& obj) const {
    if (!has_id_) return Status::InvalidArgument("mapping has no Id member");
    bson_t b;
    bson_init(&b);
    std::visit([&](auto m) { Append(&b, "v", 1, obj.*m); }, fields_.front().member);
    bson_iter_t it;
    Value v;
    if (bson_iter_init_find(&it, &b, "v")) v = Value::FromBsonValue(bson_iter_value(&it));
    bson_destroy(&b);
    return v;
  }

 private:
  using MemberPtr =
      std::variant<std::string T::*, int32_t T::*, int64_t T::*, double T::*, bool T::*,
                   std::vector<std::string> T::*, std::vector<int64_t> T::*>;
  struct FieldSpec {
    std::string name;
    MemberPtr member;
  };
  template <typename M>
  static MemberPtr Member(M T::*m) {
    return MemberPtr(m);
  }

  // k is n bytes long (-1: NUL-terminated, measured by libbson).
  static bool Append(bson_t* b, const char* k, int n, const std::string& v) {
    if (!bson_utf8_validate(v.data(), v.size(), false)) return false;
    return bson_append_utf8(b, k, n, v.data(), static_cast<int>(v.size()));
  }
  static bool Append(bson_t* b, const char* k, int n, int32_t v) {
    return bson_append_int32(b, k, n, v);
  }
  static bool Append(bson_t* b, const char* k, int n, int64_t v) {
    return bson_append_int64(b, k, n, v);
  }
  static bool Append(bson_t* b, const char* k, int n, double v) {
    return bson_append_double(b, k, n, v);
  }
  static bool Append(bson_t* b, const char* k, int n, bool v) {
    return bson_append_bool(b, k, n, v);
  }
  template <typename E>
  static bool Append(bson_t* b, const char* k, int n, const std::vector<E>& v) {
    bson_t child;
    bson_append_array_begin(b, k, n, &child);
    char buf[16];
    bool ok = true;
    for (size_t i = 0; i < v.size() && ok; i++) {
      const char* key;
      bson_uint32_to_string(static_cast<uint32_t>(i), &key, buf, sizeof buf);
      ok = Append(&child, key, -1, v[i]);
    }
    bson_append_array_end(b, &child);
    return ok;
  }

  static bool Read(bson_iter_t* it, std::string* out) {
    if (!BSON_ITER_HOLDS_UTF8(it)) return false;
    uint32_t n;
    const char* s = bson_iter_utf8(it, &n);
    out->assign(s, n);
    return true;
  }
  static bool ReadNumber(bson_iter_t* it, double* d, int64_t* i, bool* is_int) {
    switch (bson_iter_type(it)) {
      case BSON_TYPE_INT32:
        *i = bson_iter_int32(it);
        *is_int = true;
        return true;
      case BSON_TYPE_INT64:
        *i = bson_iter_int64(it);
        *is_int = true;
        return true;
      case BSON_TYPE_DOUBLE:
        *d = bson_iter_double(it);
        *is_int = false;
        return true;
      default:
        return false;
    }
  }
  static bool Read(bson_iter_t* it, int64_t* out) {
    double d;
    int64_t i;
    bool is_int;
    if (!ReadNumber(it, &d, &i, &is_int)) return false;
    if (is_int) {
      *out = i;
      return true;
    }
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || std::trunc(d) != d)
      return false;
    *out = static_cast<int64_t>(d);
    return true;
  }
  static bool Read(bson_iter_t* it, int32_t* out) {
    int64_t v;
    if (!Read(it, &v) || v < INT32_MIN || v > INT32_MAX) return false;
    *out = static_cast<int32_t>(v);
    return true;
  }
  static bool Read(bson_iter_t* it, double* out) {
    double d;
    int64_t i;
    bool is_int;
    if (!ReadNumber(it, &d, &i, &is_int)) return false;
    *out = is_int ? static_cast<double>(i) : d;
    return true;
  }
  static bool Read(bson_iter_t* it, bool* out) {
    if (!BSON_ITER_HOLDS_BOOL(it)) return false;
    *out = bson_iter_bool(it);
    return true;
  }
  template <typename E>
  static bool Read(bson_iter_t* it, std::vector<E>* out) {
    if (!BSON_ITER_HOLDS_ARRAY(it)) return false;
    bson_iter_t child;
    if (!bson_iter_recurse(it, &child)) return false;
    out->clear();
    while (bson_iter_next(&child)) {
      E e{};
      if (!Read(&child, &e)) return false;
      out->push_back(std::move(e));
    }
    return true;
  }

  std::vector<FieldSpec> fields_;
  bool has_id_ = false;
};

// A collection of T, through a Mapping<T>. Errors as the DB calls it wraps.
template <typename T>
class TypedCollection {
 public:
  // Not owned: db and mapping must outlive this object.
  TypedCollection(DB* db, std::string name, const Mapping<T>& mapping)
      : db_(db), name_(std::move(name)), mapping_(mapping) {}

  Status Insert(const T& obj, const WriteOptions& o = WriteOptions()) {
    auto d = mapping_.ToDocument(obj);
    if (!d.ok()) return d.status();
    return db_->Insert(name_, d.value(), nullptr, o);
  }
  // Inserts in the given transaction.
  Status Insert(Transaction* txn, const T& obj) {
    auto d = mapping_.ToDocument(obj);
    if (!d.ok()) return d.status();
    return txn->Insert(name_, d.value(), nullptr);
  }
  Result<T> Get(const Value& id) {
    auto d = db_->Get(name_, id);
    if (!d.ok()) return d.status();
    T obj{};
    Status s = mapping_.Decode(d.value().data(), d.value().size(), &obj);
    if (!s.ok()) return s;
    return obj;
  }
  Result<std::vector<T>> Find(const Document& filter, const FindOptions& o = FindOptions()) {
    auto t = db_->BeginRead();
    if (!t.ok()) return t.status();
    auto cur = t.value()->Find(name_, filter, o);
    if (!cur.ok()) return cur.status();
    std::vector<T> out;
    while (cur.value()->Next()) {
      std::string_view raw = cur.value()->raw();
      T obj{};
      Status s = mapping_.Decode(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), &obj);
      if (!s.ok()) return s;
      out.push_back(std::move(obj));
    }
    MMDOC_RETURN_IF_ERROR(cur.value()->status());
    return out;
  }
  // Replaces the stored document with the struct's _id. REQUIRES: mapping
  // has an Id member.
  Status Replace(const T& obj, const WriteOptions& o = WriteOptions()) {
    auto id = mapping_.IdOf(obj);
    if (!id.ok()) return id.status();
    auto d = mapping_.ToDocument(obj);
    if (!d.ok()) return d.status();
    return db_->Replace(name_, id.value(), d.value(), o);
  }
  Status Delete(const Value& id, const WriteOptions& o = WriteOptions()) {
    return db_->Delete(name_, id, o);
  }

 private:
  DB* db_;
  std::string name_;
  const Mapping<T>& mapping_;
};

}  // namespace mmdoc

#endif  // MMDOC_MAPPING_H_
