// IndexMeta: index specs, names, their catalog/log encoding and the keys a
// document gives an index (see index_spec.h).
#include "engine/index_spec.h"

#include <bson/bson.h>

#include <algorithm>

#include "engine/partial_filter.h"
#include "engine/query_path.h"
#include "engine/regex.h"
#include "storage/coding.h"

namespace mmdoc {

namespace {

constexpr size_t kMaxIndexKeys = 32;  // MongoDB's limit too
// A document under one array reached by several fields gives the product
// of their keys; past this many it is refused rather than fill the tree.
constexpr size_t kMaxKeysPerDocument = 100000;

bool GetLengthPrefixed(std::string_view* in, std::string_view* out) {
  uint32_t n;
  if (!storage::GetFixed32(in, &n) || in->size() < n) return false;
  *out = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}

void PutLengthPrefixed(std::string* out, std::string_view s) {
  storage::PutFixed32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

Status ParsePartial(IndexMeta* m) {
  m->partial_filter.reset();
  if (m->partial.empty()) return Status::OK();
  auto doc =
      Document::FromBson(reinterpret_cast<const uint8_t*>(m->partial.data()), m->partial.size());
  if (!doc.ok()) return doc.status();
  auto f = engine::Filter::Parse(doc.value());
  if (!f.ok()) return f.status();
  m->partial_filter = std::make_shared<const engine::Filter>(std::move(f).value());
  return Status::OK();
}

// The shortest prefix of `path` at which the document holds an array, or
// "" when there is none; the walk stops at the first array, as every
// element of it is then reached through that one array.
std::string_view ArrayPrefix(const uint8_t* data, size_t len, std::string_view path) {
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string_view part =
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, len) || !engine::FindKey(&it, part)) return {};
    if (BSON_ITER_HOLDS_ARRAY(&it))
      return path.substr(0, dot == std::string_view::npos ? path.size() : dot);
    if (dot == std::string_view::npos || !BSON_ITER_HOLDS_DOCUMENT(&it)) return {};
    uint32_t sub_len;
    bson_iter_document(&it, &sub_len, &data);
    len = sub_len;
    start = dot + 1;
  }
}

// Whether the path reaches a value (null counts) in some branch.
bool Present(const uint8_t* doc, size_t len, std::string_view path) {
  bool found = false;
  auto fn = [&found](const bson_value_t* v) {
    if (v != nullptr) found = true;
    return found;  // stop at the first value
  };
  engine::VisitPath(doc, len, path, fn);
  return found;
}

}  // namespace

bool IndexMeta::simple() const {
  return keys.size() == 1 && keys[0].direction == 1 && !sparse && partial.empty();
}

std::string IndexName(const std::vector<IndexKey>& keys) {
  if (keys.size() == 1 && keys[0].direction == 1) return keys[0].field;
  std::string name;
  for (const IndexKey& k : keys) {
    if (!name.empty()) name += '_';
    name += k.field;
    name += k.direction < 0 ? "_-1" : "_1";
  }
  return name;
}

Status CheckIndexFieldPath(std::string_view field) {
  if (field.empty()) return Status::InvalidArgument("index field must not be empty");
  if (field.find('\0') != std::string_view::npos || field[0] == '$' || field.front() == '.' ||
      field.back() == '.' || field.find("..") != std::string_view::npos)
    return Status::InvalidArgument("invalid index field path", field);
  // A part starting with '$' only as a DBRef's field ("author.$id"), as MongoDB.
  if (!engine::DollarPartsAreDbRef(field))
    return Status::InvalidArgument("invalid index field path", field);
  if (field.size() > 200) return Status::InvalidArgument("index field path longer than 200 bytes");
  return Status::OK();
}

Status MakeIndexMeta(const std::vector<IndexKey>& keys, const IndexOptions& options,
                     IndexMeta* out) {
  if (keys.empty()) return Status::InvalidArgument("index key pattern has no fields");
  if (keys.size() > kMaxIndexKeys)
    return Status::InvalidArgument("index key pattern has more than 32 fields");
  for (size_t i = 0; i < keys.size(); i++) {
    MMDOC_RETURN_IF_ERROR(CheckIndexFieldPath(keys[i].field));
    if (keys[i].direction != 1 && keys[i].direction != -1)
      return Status::InvalidArgument("index direction must be 1 or -1", keys[i].field);
    for (size_t j = 0; j < i; j++)
      if (keys[j].field == keys[i].field)
        return Status::InvalidArgument("index key pattern names a field twice", keys[i].field);
  }
  if (keys.size() == 1 && keys[0].field == "_id")
    return Status::AlreadyExists("_id is always indexed (the primary index)");
  IndexMeta m;
  m.keys = keys;
  m.field = IndexName(keys);
  m.unique = options.unique;
  m.sparse = options.sparse;
  if (options.partial_filter.size() > 5) {  // 5 bytes: the empty document
    MMDOC_RETURN_IF_ERROR(
        engine::CheckPartialFilter(options.partial_filter.data(), options.partial_filter.size()));
    m.partial.assign(reinterpret_cast<const char*>(options.partial_filter.data()),
                     options.partial_filter.size());
  }
  MMDOC_RETURN_IF_ERROR(ParsePartial(&m));
  *out = std::move(m);
  return Status::OK();
}

IndexOptions IndexMetaOptions(const IndexMeta& m) {
  IndexOptions o;
  o.unique = m.unique;
  o.sparse = m.sparse;
  if (!m.partial.empty()) o.partial_filter = Document::FromTrustedBytes(m.partial);
  return o;
}

void EncodeIndexSpec(const IndexMeta& m, std::string* out) {
  out->push_back(static_cast<char>(m.keys.size()));
  for (const IndexKey& k : m.keys) {
    out->push_back(k.direction < 0 ? '\0' : '\1');
    PutLengthPrefixed(out, k.field);
  }
  out->push_back(m.sparse ? '\1' : '\0');
  PutLengthPrefixed(out, m.partial);
}

bool DecodeIndexSpec(std::string_view* in, IndexMeta* m) {
  if (in->empty()) return false;
  const size_t n = static_cast<uint8_t>((*in)[0]);
  in->remove_prefix(1);
  if (n == 0 || n > kMaxIndexKeys) return false;
  m->keys.clear();
  for (size_t i = 0; i < n; i++) {
    if (in->empty()) return false;
    IndexKey k;
    k.direction = (*in)[0] != 0 ? 1 : -1;
    in->remove_prefix(1);
    std::string_view f;
    if (!GetLengthPrefixed(in, &f) || !CheckIndexFieldPath(f).ok()) return false;
    k.field.assign(f);
    m->keys.push_back(std::move(k));
  }
  if (in->empty()) return false;
  m->sparse = (*in)[0] != 0;
  in->remove_prefix(1);
  std::string_view partial;
  if (!GetLengthPrefixed(in, &partial)) return false;
  m->partial.assign(partial);
  m->field = IndexName(m->keys);
  return ParsePartial(m).ok();
}

Status IndexEntryKeys(const IndexMeta& m, const uint8_t* doc, size_t len,
                      std::vector<std::string>* keys, bool* array) {
  keys->clear();
  if (array != nullptr) *array = false;
  if (m.partial_filter) {
    (void)engine::TakeRegexMatchError();
    const bool in = m.partial_filter->Matches(doc, len);
    MMDOC_RETURN_IF_ERROR(engine::TakeRegexMatchError());
    if (!in) return Status::OK();
  }
  if (m.sparse) {
    bool any = false;
    for (const IndexKey& k : m.keys) any = any || Present(doc, len, k.field);
    if (!any) return Status::OK();
  }
  if (m.simple()) {
    engine::IndexKeys(doc, len, m.field, keys);
    if (array != nullptr) *array = keys->size() > 1;
    return Status::OK();
  }
  // At most one array among the fields (fields under one array share it).
  std::string_view array_at;
  size_t array_field = 0;
  for (size_t i = 0; i < m.keys.size(); i++) {
    std::string_view p = ArrayPrefix(doc, len, m.keys[i].field);
    if (p.empty()) continue;
    if (array != nullptr) *array = true;
    if (array_at.empty()) {
      array_at = p;
      array_field = i;
    } else if (p != array_at) {
      return Status::InvalidArgument(
          "cannot index parallel arrays [" + std::string(array_at) + "] [" + std::string(p) + "]",
          "index " + m.field + ", fields " + m.keys[array_field].field + " and " + m.keys[i].field);
    }
  }
  // The product of the fields' keys, in field order.
  std::vector<std::string> field_keys;
  keys->assign(1, std::string());
  for (const IndexKey& k : m.keys) {
    engine::IndexKeys(doc, len, k.field, &field_keys);
    if (k.direction < 0) {
      for (std::string& fk : field_keys)
        for (char& c : fk) c = static_cast<char>(~c);
    }
    if (keys->size() * field_keys.size() > kMaxKeysPerDocument)
      return Status::InvalidArgument("document gives index " + m.field + " more than " +
                                     std::to_string(kMaxKeysPerDocument) + " keys");
    std::vector<std::string> next;
    next.reserve(keys->size() * field_keys.size());
    for (const std::string& prefix : *keys)
      for (const std::string& fk : field_keys) next.push_back(prefix + fk);
    keys->swap(next);
  }
  std::sort(keys->begin(), keys->end());
  keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
  return Status::OK();
}

std::string DescribeIndexKey(const IndexMeta& m, std::string_view doc, std::string_view key) {
  if (!key.empty() && m.keys.size() == 1 && m.keys[0].direction == 1) {
    bool value = false;
    std::string v = engine::DescribeKey(key, &value);
    if (value) return v;
  }
  auto value_at = [&](const std::string& path) {
    bson_value_t v;
    if (!engine::LookupPath(reinterpret_cast<const uint8_t*>(doc.data()), doc.size(), path, &v))
      return std::string("null");
    return Value::FromBsonValue(&v).ToJson();
  };
  if (m.keys.size() == 1) return value_at(m.keys[0].field);
  std::string out = "{";
  for (const IndexKey& k : m.keys) {
    if (out.size() > 1) out += ", ";
    out += Value::String(k.field).ToJson() + ": " + value_at(k.field);
  }
  return out + "}";
}

bool IndexMayChange(const IndexMeta& m, const engine::Update& update) {
  if (!m.partial.empty()) return true;
  for (const IndexKey& k : m.keys)
    if (update.MayChange(k.field)) return true;
  return false;
}

void FillIndexInfo(const IndexMeta& m, IndexInfo* info) {
  info->field = m.field;
  info->keys = m.keys;
  info->unique = m.unique;
  info->sparse = m.sparse;
  info->partial_filter.clear();
  if (!m.partial.empty())
    info->partial_filter = Document::FromTrustedBytes(m.partial).ToJson(JsonMode::kCanonical);
}

}  // namespace mmdoc
