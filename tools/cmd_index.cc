// The index commands: index create, index drop, index list.
#include <bson/bson.h>

#include <cstdio>
#include <string>

#include "mmdoc/db.h"
#include "mmdoc/options.h"
#include "mmdoc/status.h"
#include "tools/commands.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {

int RunIndexCreate(const CommonArgs& c, const std::string& field, bool unique) {
  const std::string what = field.empty() ? "index create" : "index create " + field;
  // MongoDB allows ',' in a field name, but 'a,b' here means a compound
  // index far more often than a field named "a,b".
  if (field.find(',') != std::string::npos) {
    return Fail(kExitBadInput, what,
                "compound indexes are not supported (index one field; a "
                "field name with ',' is refused for the same reason)");
  }
  if (std::string problem = FieldPathProblem(field); !problem.empty())
    return Fail(kExitBadInput, what, problem);
  int code = kExitOk;
  auto db = OpenDb(c, true, &code);
  if (!db) return code;
  IndexOptions options;
  options.unique = unique;
  Status s = db->CreateIndex(c.collection, field, options);
  if (!s.ok()) return FailStatus(what, s);
  return kExitOk;
}

int RunIndexDrop(const CommonArgs& c, const std::string& field) {
  int code = kExitOk;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  Status s = db->DropIndex(c.collection, field);
  if (!s.ok()) return FailStatus("index drop " + field, s);
  return kExitOk;
}

int RunIndexList(const CommonArgs& c) {
  int code = kExitOk;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  auto r = db->ListIndexes(c.collection);
  if (!r.ok()) return FailStatus("index list", r.status());
  for (const IndexInfo& index : *r) {
    bson_t b = BSON_INITIALIZER;
    bson_append_utf8(&b, "field", 5, index.field.data(), static_cast<int>(index.field.size()));
    bson_append_bool(&b, "unique", 6, index.unique);
    bson_append_int64(&b, "entries", 7, static_cast<int64_t>(index.entries));
    std::string json;
    BsonToJson(bson_get_data(&b), b.len, &json);
    bson_destroy(&b);
    std::printf("%s\n", json.c_str());
  }
  return kExitOk;
}

}  // namespace mmdoc::tool
