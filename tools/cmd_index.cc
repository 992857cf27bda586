// The index commands: index create, index drop, index list.
#include <bson/bson.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "mmdoc/db.h"
#include "mmdoc/document.h"
#include "mmdoc/options.h"
#include "mmdoc/status.h"
#include "tools/commands.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {

namespace {

// A key pattern as JSON ({"a": 1, "b": -1}, in order): "" or the problem.
std::string ParseJsonKeys(const std::string& text, std::vector<IndexKey>* keys) {
  auto doc = Document::FromJson(text);
  if (!doc.ok()) return "key pattern: " + doc.status().ToString();
  bson_iter_t it;
  bson_iter_init_from_data(&it, doc.value().data(), doc.value().size());
  while (bson_iter_next(&it)) {
    IndexKey k;
    k.field = bson_iter_key(&it);
    const double d = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_double(&it) : 0;
    if (d != 1 && d != -1) {
      return "index direction must be 1 or -1 (other index types are not supported): " +
             Quote(k.field);
    }
    k.direction = d > 0 ? 1 : -1;
    keys->push_back(std::move(k));
  }
  if (keys->empty()) return "key pattern has no fields";
  return "";
}

// The index's key pattern from FIELD: a dotted path, "a,-b" (fields in
// order, '-' for descending) or a JSON key pattern. "" or the problem.
std::string ParseKeys(const std::string& text, std::vector<IndexKey>* keys) {
  keys->clear();
  if (!text.empty() && text[0] == '{') return ParseJsonKeys(text, keys);
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? comma : comma - start);
    IndexKey k;
    if (!part.empty() && part[0] == '-') {
      k.direction = -1;
      part.erase(0, 1);
    }
    if (std::string problem = FieldPathProblem(part); !problem.empty()) return problem;
    // JSON or a sort's a:1 written where a field belongs: almost surely not
    // a field name (an outside test indexed a field named "a:1").
    if (part.find_first_of(":[]{}\"") != std::string::npos) {
      return "expected FIELD, -FIELD (a,-b for several) or {\"a\": 1, \"b\": -1}, not " + part;
    }
    k.field = std::move(part);
    keys->push_back(std::move(k));
    if (comma == std::string::npos) return "";
    start = comma + 1;
  }
}

}  // namespace

int RunIndexCreate(const CommonArgs& c, const IndexCreateArgs& a) {
  const std::string what = a.keys.empty() ? "index create" : "index create " + a.keys;
  std::vector<IndexKey> keys;
  if (std::string problem = ParseKeys(a.keys, &keys); !problem.empty())
    return Fail(kExitBadInput, what, problem);
  IndexOptions options;
  options.unique = a.unique;
  options.sparse = a.sparse;
  if (!a.partial.empty()) {
    int code = kExitOk;
    auto partial = ParseDocArg("--partial", a.partial, &code);
    if (!partial) return code;
    options.partial_filter = *partial;
  }
  int code = kExitOk;
  auto db = OpenDb(c, Access::kCreate, &code);
  if (!db) return code;
  // The same index again is done already (as MongoDB's createIndex), so a
  // setup script may run this every time; one on the same keys with other
  // options is an error.
  if (auto have = db->ListIndexes(c.collection); have.ok()) {
    for (const IndexInfo& i : *have) {
      const bool same_keys = std::equal(i.keys.begin(), i.keys.end(), keys.begin(), keys.end(),
                                        [](const IndexKey& x, const IndexKey& y) {
                                          return x.field == y.field && x.direction == y.direction;
                                        });
      if (!same_keys) continue;
      auto had = Document::FromJson(i.partial_filter.empty() ? "{}" : i.partial_filter);
      if (i.unique == options.unique && i.sparse == options.sparse && had.ok() &&
          had->ToJson() == options.partial_filter.ToJson()) {
        return CloseDb(db.get());
      }
      return Fail(kExitBadInput, what,
                  "an index on these keys exists with other options (unique, sparse or "
                  "partial); drop it first");
    }
  }
  Status s = db->CreateIndex(c.collection, keys, options);
  if (!s.ok()) return FailStatus(what, s);
  return CloseDb(db.get());
}

int RunIndexDrop(const CommonArgs& c, const std::string& name) {
  // An index is named by its key pattern as create took it, or by name.
  std::vector<IndexKey> keys;
  std::string dropped = name;
  const std::string problem = ParseKeys(name, &keys);
  if (problem.empty()) {
    dropped = IndexName(keys);
  } else if (name.empty() || name[0] == '{') {  // a key pattern that is not one: bad input
    return Fail(kExitBadInput, "index drop " + name, problem);
  }
  int code = kExitOk;
  auto db = OpenDb(c, Access::kWrite, &code);
  if (!db) return code;
  Status s = db->DropIndex(c.collection, dropped);
  if (s.IsNotFound() && dropped != name) s = db->DropIndex(c.collection, name);
  if (!s.ok()) return FailStatus("index drop " + name, s);
  return CloseDb(db.get());
}

int RunIndexList(const CommonArgs& c) {
  int code = kExitOk;
  auto db = OpenDb(c, Access::kRead, &code);
  if (!db) return code;
  auto r = db->ListIndexes(c.collection);
  if (!r.ok()) return FailStatus("index list", r.status());
  for (const IndexInfo& index : *r) {
    bson_t b = BSON_INITIALIZER;
    bson_append_utf8(&b, "field", 5, index.field.data(), static_cast<int>(index.field.size()));
    bson_t key;
    bson_append_document_begin(&b, "key", 3, &key);
    for (const IndexKey& k : index.keys)
      bson_append_int32(&key, k.field.data(), static_cast<int>(k.field.size()), k.direction);
    bson_append_document_end(&b, &key);
    bson_append_bool(&b, "unique", 6, index.unique);
    if (index.sparse) bson_append_bool(&b, "sparse", 6, true);
    if (!index.partial_filter.empty()) {
      auto partial = Document::FromJson(index.partial_filter);
      if (partial.ok()) {
        bson_t p;
        partial.value().View(&p);
        bson_append_document(&b, "partialFilterExpression", -1, &p);
      }
    }
    bson_append_int64(&b, "entries", 7, static_cast<int64_t>(index.entries));
    std::string json;
    BsonToJson(bson_get_data(&b), b.len, &json);
    bson_destroy(&b);
    std::printf("%s\n", json.c_str());
  }
  return kExitOk;
}

}  // namespace mmdoc::tool
