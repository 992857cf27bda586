// The commands that read documents: get, find, count, distinct.
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "mmdoc/db.h"
#include "mmdoc/document.h"
#include "mmdoc/options.h"
#include "mmdoc/status.h"
#include "tools/commands.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {
namespace {

// Parses one sort key: FIELD, -FIELD, FIELD:1 / FIELD:-1 (also :asc /
// :desc).
bool ParseSortKey(const std::string& spec, FindOptions* o) {
  std::string field = spec;
  int dir = 1;
  if (!field.empty() && field[0] == '-') {
    dir = -1;
    field.erase(0, 1);
  } else if (!field.empty() && field[0] == '+') {
    field.erase(0, 1);
  }
  size_t colon = field.rfind(':');
  if (colon != std::string::npos) {
    // One direction only: -FIELD or FIELD:-1, not both (-a:-1 read as a:1).
    if (dir < 0) return false;
    std::string d = field.substr(colon + 1);
    field.resize(colon);
    if (d == "-1" || d == "desc") {
      dir = -dir;
    } else if (d != "1" && d != "asc") {
      return false;
    }
  }
  // What is left is a field path: not "-a" (--sort=--a), "a:-1" (a:-1:1)
  // or JSON ('{"a": 1}'), which would sort on a field no document has.
  if (field.empty() || field.find_first_of(":{}\"") != std::string::npos || field[0] == '-' ||
      field[0] == '+') {
    return false;
  }
  if (!FieldPathProblem(field).empty()) return false;
  for (const SortSpec& k : o->sort) {
    if (k.field == field) return false;  // given twice
  }
  o->sort.push_back(SortSpec{field, dir});
  return true;
}

// Parses a comma-separated list of sort keys, the first most significant
// (a,-b: a ascending, then b descending).
bool ParseSort(const std::string& spec, FindOptions* o) {
  size_t start = 0;
  for (;;) {
    const size_t comma = spec.find(',', start);
    if (!ParseSortKey(spec.substr(start, comma == std::string::npos ? comma : comma - start), o))
      return false;
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

// Whether `s` is spelled as a JSON number: -?digits[.digits][(e|E)[+-]digits].
bool LooksLikeNumber(const std::string& s) {
  if (s.empty()) return false;
  size_t i = s[0] == '-' ? 1 : 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
    return i > from;
  };
  if (!digits()) return false;
  if (i < s.size() && s[i] == '.' && (++i, !digits())) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) i++;
    if (!digits()) return false;
  }
  return i == s.size();
}

}  // namespace

int RunGet(const CommonArgs& c, const std::string& id_arg, const std::string& json_mode) {
  auto id = Value::FromJson(id_arg);
  // NaN and Infinity are bare words to JSON, though libbson's parser takes
  // them as doubles (found by an outside test): a string, as the help says.
  // {"$numberDouble": "NaN"} names the double.
  const size_t first = id_arg.find_first_not_of(" \t+-");
  if (id.ok() && id->get()->value_type == BSON_TYPE_DOUBLE && first != std::string::npos &&
      std::isalpha(static_cast<unsigned char>(id_arg[first]))) {
    id = Status::InvalidArgument("not JSON");
  }
  if (!id.ok()) {
    // A bare word is a string; something that meant to be JSON (a number
    // out of range too) is an error.
    size_t i = id_arg.find_first_not_of(" \t");
    const size_t lead = id_arg.find_first_not_of(" \t-");
    if (LooksLikeNumber(id_arg) && lead != std::string::npos && id_arg[lead] == '0' &&
        lead + 1 < id_arg.size() && std::isdigit(static_cast<unsigned char>(id_arg[lead + 1]))) {
      return Fail(kExitBadInput, "id",
                  id_arg + " is not a JSON number (a leading zero); quote it for a string: '\"" +
                      id_arg + "\"'");
    }
    if ((i != std::string::npos && std::strchr("{[\"", id_arg[i]) != nullptr) ||
        LooksLikeNumber(id_arg)) {
      return Fail(kExitBadInput, "id", JsonError(id.status()) + " in " + id_arg);
    }
    if (!bson_utf8_validate(id_arg.data(), id_arg.size(), false)) {
      return Fail(kExitBadInput, "id", "not valid UTF-8");
    }
    id = Value::String(id_arg);
  }
  const bson_type_t type = id->get()->value_type;
  if (type == BSON_TYPE_ARRAY || type == BSON_TYPE_UNDEFINED || type == BSON_TYPE_REGEX) {
    return Fail(kExitBadInput, "id", "an _id cannot be an array, undefined or a regex: " + id_arg);
  }
  // {"$gt": 1} is a filter, which no _id can equal: MongoDB refuses an _id
  // with a '$' field, and so does insert.
  if (const bson_value_t* v = id->get(); v->value_type == BSON_TYPE_DOCUMENT) {
    bson_iter_t it;
    if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
        bson_iter_next(&it) && bson_iter_key(&it)[0] == '$') {
      return Fail(kExitBadInput, "id",
                  std::string(bson_iter_key(&it)) +
                      " is an operator, and an _id holds none: find DB '{\"_id\": ...}' takes "
                      "a filter");
    }
  }
  int code = kExitOk;
  auto db = OpenDb(c, Access::kRead, &code);
  if (!db) return code;
  auto doc = db->Get(c.collection, *id);
  if (!doc.ok()) {
    if (doc.status().IsNotFound()) {
      return Fail(kExitNotFound, "get",
                  "no document with _id " + id->ToJson() + " in collection " + Quote(c.collection));
    }
    return FailStatus("get", doc.status());
  }
  std::string json;
  if (!BsonToJson(doc->data(), doc->size(), &json, ParseJsonMode(json_mode))) {
    return Fail(kExitBadInput, "get", "document cannot be written as JSON");
  }
  std::printf("%s\n", json.c_str());
  return kExitOk;
}

int RunFind(const CommonArgs& c, const FindArgs& a) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", a.filter, &code);
  if (!filter) return code;
  FindOptions options;
  if (!a.sort.empty() && !ParseSort(a.sort, &options)) {
    return Fail(kExitBadInput, "sort",
                "expected keys FIELD, -FIELD, FIELD:1 or FIELD:-1 separated by commas (each "
                "field once), got " +
                    Quote(a.sort));
  }
  for (const auto& [name, value] : {std::pair{"--limit", a.limit}, std::pair{"--skip", a.skip},
                                    std::pair{"--max-sort-bytes", a.max_sort_bytes}}) {
    if (value < 0) {
      return Fail(kExitBadInput, "find",
                  std::string(name) + " must not be negative, got " + std::to_string(value));
    }
  }
  options.limit = static_cast<decltype(options.limit)>(a.limit);
  options.skip = static_cast<decltype(options.skip)>(a.skip);
  options.max_sort_bytes = static_cast<uint64_t>(a.max_sort_bytes);
  // Checked here too, not only by the API, so that the error names the
  // option: an operator must not quietly project nothing but _id. (-FIELD
  // drops FIELD; the API refuses fields both kept and dropped.)
  for (const std::string& field : a.project) {
    const bool drop = !field.empty() && field[0] == '-';
    std::string problem = FieldPathProblem(drop ? std::string_view(field).substr(1) : field);
    if (!problem.empty()) {
      return Fail(kExitBadInput, "find", "--project " + Quote(field) + ": " + problem);
    }
  }
  options.projection = a.project;
  auto db = OpenDb(c, Access::kRead, &code);
  if (!db) return code;
  auto txn = db->BeginRead();
  if (!txn.ok()) return FailStatus("find", txn.status());
  if (a.explain) {
    auto info = (*txn)->Explain(c.collection, *filter, options);
    if (!info.ok()) return FailStatus("find", info.status());
    std::printf("%s\n", info->ToJson().c_str());
    return kExitOk;
  }
  auto cursor = (*txn)->Find(c.collection, *filter, options);
  if (!cursor.ok()) return FailStatus("find", cursor.status());
  const DocFormat format{false, ParseJsonMode(a.json_mode)};
  std::string json;
  std::string error;
  while ((*cursor)->Next()) {
    if (!WriteDoc(stdout, format, (*cursor)->raw(), &json, &error)) {
      return Fail(kExitBadInput, "find", error);
    }
  }
  if (!(*cursor)->status().ok()) return FailStatus("find", (*cursor)->status());
  return kExitOk;
}

int RunCount(const CommonArgs& c, const std::string& filter_json) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto db = OpenDb(c, Access::kRead, &code);
  if (!db) return code;
  auto r = db->Count(c.collection, *filter);
  if (!r.ok()) return FailStatus("count", r.status());
  std::printf("%llu\n", static_cast<unsigned long long>(*r));
  return kExitOk;
}

int RunDistinct(const CommonArgs& c, const std::string& field, const std::string& filter_json,
                const std::string& json_mode) {
  std::string problem = FieldPathProblem(field);
  if (!problem.empty()) return Fail(kExitBadInput, "distinct", Quote(field) + ": " + problem);
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto db = OpenDb(c, Access::kRead, &code);
  if (!db) return code;
  auto r = db->Distinct(c.collection, field, *filter);
  if (!r.ok()) return FailStatus("distinct", r.status());
  const JsonMode mode = ParseJsonMode(json_mode);
  for (const Value& v : *r) std::printf("%s\n", v.ToJson(mode).c_str());
  return kExitOk;
}

}  // namespace mmdoc::tool
