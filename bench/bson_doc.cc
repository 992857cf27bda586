#include "bench/bson_doc.h"

#include <bson/bson.h>

#include <algorithm>
#include <cstring>

#include "storage/coding.h"

namespace mmdoc::bench {

std::string MakeDocument(std::string_view id, std::string_view key, std::string_view value) {
  bson_t b;
  bson_init(&b);
  bson_append_utf8(&b, "_id", 3, id.data(), static_cast<int>(id.size()));
  bson_append_utf8(&b, "key", 3, key.data(), static_cast<int>(key.size()));
  bson_append_utf8(&b, "value", 5, value.data(), static_cast<int>(value.size()));
  std::string out(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return out;
}

std::string MakeGroupDocument(std::string_view id, int32_t g, int32_t n, std::string_view payload) {
  bson_t b;
  bson_init(&b);
  bson_append_utf8(&b, "_id", 3, id.data(), static_cast<int>(id.size()));
  bson_append_int32(&b, "g", 1, g);
  bson_append_int32(&b, "n", 1, n);
  bson_append_utf8(&b, "payload", 7, payload.data(), static_cast<int>(payload.size()));
  std::string out(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return out;
}

bool FieldOf(const void* data, size_t size, const char* name, std::string_view* out) {
  bson_t b;
  if (!bson_init_static(&b, static_cast<const uint8_t*>(data), size)) return false;
  bson_iter_t it;
  if (!bson_iter_init_find(&it, &b, name) || !BSON_ITER_HOLDS_UTF8(&it)) return false;
  uint32_t len = 0;
  const char* s = bson_iter_utf8(&it, &len);
  *out = std::string_view(s, len);
  return true;
}

FieldEquals::FieldEquals(const char* name, std::string_view want) : name_(name), want_(want) {
  uint32_t n = static_cast<uint32_t>(want.size()) + 1;
  storage::PutFixed32(&needle_, n);  // BSON's int32 string length: little-endian
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

bool KeyIdPairs::Add(const void* doc, size_t size, std::string_view id) {
  std::string_view key;
  if (!FieldOf(doc, size, "key", &key)) return false;
  entries_.push_back(Entry{arena_.size(), key.size(), arena_.size() + key.size(), id.size()});
  arena_.append(key);
  arena_.append(id);
  return true;
}

std::string_view KeyIdPairs::key(size_t i) const {
  return std::string_view(arena_.data() + entries_[i].key, entries_[i].key_len);
}

std::string_view KeyIdPairs::id(size_t i) const {
  return std::string_view(arena_.data() + entries_[i].id, entries_[i].id_len);
}

Status KeyIdPairs::SortUnique() {
  auto key_of = [this](const Entry& e) {
    return std::string_view(arena_.data() + e.key, e.key_len);
  };
  std::sort(entries_.begin(), entries_.end(),
            [&](const Entry& a, const Entry& b) { return key_of(a) < key_of(b); });
  for (size_t i = 1; i < entries_.size(); ++i) {
    if (key_of(entries_[i]) == key_of(entries_[i - 1]))
      return Status::AlreadyExists("duplicate key", key_of(entries_[i]));
  }
  return Status::OK();
}

bool WithValue(std::string_view doc, std::string_view value, std::string* out) {
  bson_t in;
  if (!bson_init_static(&in, reinterpret_cast<const uint8_t*>(doc.data()), doc.size())) {
    return false;
  }
  bson_iter_t it;
  if (!bson_iter_init(&it, &in)) return false;
  bson_t b;
  bson_init(&b);
  bool set = false;
  while (bson_iter_next(&it)) {
    if (std::strcmp(bson_iter_key(&it), "value") == 0) {
      bson_append_utf8(&b, "value", 5, value.data(), static_cast<int>(value.size()));
      set = true;
    } else {
      bson_append_iter(&b, nullptr, 0, &it);
    }
  }
  if (!set) bson_append_utf8(&b, "value", 5, value.data(), static_cast<int>(value.size()));
  out->assign(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return true;
}

namespace {

// Appends tag to the array `it` points at as a new array `tags` of b.
void AppendTagsWith(bson_t* b, const bson_iter_t* it, std::string_view tag) {
  bson_t arr;
  bson_append_array_begin(b, "tags", 4, &arr);
  uint32_t n = 0;
  char index[16];
  const char* key;
  if (it != nullptr) {
    bson_iter_t elems;
    if (bson_iter_recurse(it, &elems)) {
      while (bson_iter_next(&elems)) {
        size_t len = bson_uint32_to_string(n++, &key, index, sizeof index);
        bson_append_iter(&arr, key, static_cast<int>(len), &elems);
      }
    }
  }
  size_t len = bson_uint32_to_string(n, &key, index, sizeof index);
  bson_append_utf8(&arr, key, static_cast<int>(len), tag.data(), static_cast<int>(tag.size()));
  bson_append_array_end(b, &arr);
}

}  // namespace

bool WithTagPushed(std::string_view doc, std::string_view tag, std::string* out) {
  bson_t in;
  if (!bson_init_static(&in, reinterpret_cast<const uint8_t*>(doc.data()), doc.size())) {
    return false;
  }
  bson_iter_t it;
  if (!bson_iter_init(&it, &in)) return false;
  bson_t b;
  bson_init(&b);
  bool pushed = false, ok = true;
  while (bson_iter_next(&it)) {
    if (std::strcmp(bson_iter_key(&it), "tags") == 0) {
      if (!BSON_ITER_HOLDS_ARRAY(&it)) {
        ok = false;
        break;
      }
      AppendTagsWith(&b, &it, tag);
      pushed = true;
    } else {
      bson_append_iter(&b, nullptr, 0, &it);
    }
  }
  if (ok && !pushed) AppendTagsWith(&b, nullptr, tag);
  if (ok) out->assign(reinterpret_cast<const char*>(bson_get_data(&b)), b.len);
  bson_destroy(&b);
  return ok;
}

bool TagsOf(std::string_view doc, std::vector<std::string>* tags) {
  tags->clear();
  bson_t b;
  if (!bson_init_static(&b, reinterpret_cast<const uint8_t*>(doc.data()), doc.size())) {
    return false;
  }
  bson_iter_t it, elems;
  if (!bson_iter_init(&it, &b)) return false;
  if (!bson_iter_find(&it, "tags")) return true;
  if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &elems)) return false;
  while (bson_iter_next(&elems)) {
    if (!BSON_ITER_HOLDS_UTF8(&elems)) return false;
    uint32_t n = 0;
    const char* s = bson_iter_utf8(&elems, &n);
    tags->emplace_back(s, n);
  }
  return true;
}

}  // namespace mmdoc::bench
