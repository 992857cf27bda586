#include "bench/bson_doc.h"

#include <bson/bson.h>

#include <cstring>

namespace mmdoc::bench {

std::string MakeDocument(std::string_view id, std::string_view key,
                         std::string_view value) {
  bson_t b;
  bson_init(&b);
  bson_append_utf8(&b, "_id", 3, id.data(), static_cast<int>(id.size()));
  bson_append_utf8(&b, "key", 3, key.data(), static_cast<int>(key.size()));
  bson_append_utf8(&b, "value", 5, value.data(),
                   static_cast<int>(value.size()));
  std::string out(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return out;
}

bool FieldOf(const void* data, size_t size, const char* name,
             std::string_view* out) {
  bson_t b;
  if (!bson_init_static(&b, static_cast<const uint8_t*>(data), size))
    return false;
  bson_iter_t it;
  if (!bson_iter_init_find(&it, &b, name) || !BSON_ITER_HOLDS_UTF8(&it))
    return false;
  uint32_t len = 0;
  const char* s = bson_iter_utf8(&it, &len);
  *out = std::string_view(s, len);
  return true;
}

FieldEquals::FieldEquals(const char* name, std::string_view want)
    : name_(name), want_(want) {
  uint32_t n = static_cast<uint32_t>(want.size()) + 1;
  for (int i = 0; i < 4; i++) needle_.push_back(static_cast<char>(n >> (8 * i)));
  needle_.append(want);
  needle_.push_back('\0');
}

bool FieldEquals::operator()(const void* data, size_t size, bool* bad) const {
  std::string_view doc(static_cast<const char*>(data), size);
  if (doc.find(needle_) == std::string_view::npos) return false;
  std::string_view field;
  if (!FieldOf(data, size, name_, &field)) {
    // A document without the field, or bytes that are not a document.
    bson_t b;
    if (!bson_init_static(&b, static_cast<const uint8_t*>(data), size) ||
        !bson_validate(&b, BSON_VALIDATE_NONE, nullptr)) {
      *bad = true;
    }
    return false;
  }
  return field == want_;
}

bool WithValue(std::string_view doc, std::string_view value, std::string* out) {
  bson_t in;
  if (!bson_init_static(&in, reinterpret_cast<const uint8_t*>(doc.data()),
                        doc.size())) {
    return false;
  }
  bson_iter_t it;
  if (!bson_iter_init(&it, &in)) return false;
  bson_t b;
  bson_init(&b);
  bool set = false;
  while (bson_iter_next(&it)) {
    if (std::strcmp(bson_iter_key(&it), "value") == 0) {
      bson_append_utf8(&b, "value", 5, value.data(),
                       static_cast<int>(value.size()));
      set = true;
    } else {
      bson_append_iter(&b, nullptr, 0, &it);
    }
  }
  if (!set)
    bson_append_utf8(&b, "value", 5, value.data(),
                     static_cast<int>(value.size()));
  out->assign(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return true;
}

}  // namespace mmdoc::bench
