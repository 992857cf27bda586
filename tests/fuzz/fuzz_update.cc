// libFuzzer target: engine::Update::Parse, Apply and UpsertDocument. The
// input is an update in JSON, a newline, a document in JSON, and optionally
// a newline and a filter in JSON (default {}), which the positional $ is
// bound to and an upsert builds its document from. A successful Apply must
// give a valid document with no '$' field names (it is about to be stored);
// a successful UpsertDocument a valid document (inserting it checks names).
// The update parsed into an Update that held another parse (ParseInto, as a
// writer's kept one: the document, then the update itself, whose shape a
// second parse only rebinds) must apply as the fresh parse does.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/query.h"
#include "engine/update.h"
#include "mmdoc/document.h"

namespace {

void Fail(const char* what, const mmdoc::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nl = in.find('\n');
  std::string_view update_text = in.substr(0, nl);
  std::string_view doc_text = "{\"_id\": 1}";
  std::string_view filter_text = "{}";
  if (nl != std::string_view::npos) {
    doc_text = in.substr(nl + 1);
    size_t nl2 = doc_text.find('\n');
    if (nl2 != std::string_view::npos) {
      filter_text = doc_text.substr(nl2 + 1);
      doc_text = doc_text.substr(0, nl2);
    }
  }
  auto u = mmdoc::Document::FromJson(update_text);
  if (!u.ok()) return 0;
  auto update = mmdoc::engine::Update::Parse(u.value());
  if (!update.ok()) return 0;
  auto filter = mmdoc::Document::FromJson(filter_text);
  if (!filter.ok() || !update.value().BindQuery(filter.value()).ok()) return 0;
  // A fixed time: $currentDate gives the same bytes on both paths.
  mmdoc::engine::UpdateContext context;
  context.now_ms = 1700000000000;
  std::string upserted;
  if (update.value().UpsertDocument(filter.value(), context, &upserted).ok() &&
      !mmdoc::Document::FromBson(reinterpret_cast<const uint8_t*>(upserted.data()), upserted.size())
           .ok()) {
    Fail("UpsertDocument gave an invalid document", mmdoc::Status::OK());
  }
  auto doc = mmdoc::Document::FromJson(doc_text);
  if (!doc.ok()) return 0;
  // Stored documents never have '$' field names (insert and replace refuse
  // them), so only such documents are updated.
  if (!mmdoc::engine::CheckFieldNames(doc.value().data(), doc.value().size()).ok()) return 0;
  std::string out, slow;
  bool fast_ok = update.value().Apply(doc.value().data(), doc.value().size(), context, &out).ok();
  {
    mmdoc::engine::Update kept;
    bson_t b;
    doc.value().View(&b);
    (void)mmdoc::engine::Update::ParseInto(&b, &kept);
    u.value().View(&b);
    for (int i = 0; i < 2; i++) {
      if (!mmdoc::engine::Update::ParseInto(&b, &kept).ok()) Fail("ParseInto refused it", {});
    }
    if (!kept.BindQuery(filter.value()).ok()) Fail("BindQuery refused it after ParseInto", {});
    std::string again;
    bool again_ok = kept.Apply(doc.value().data(), doc.value().size(), context, &again).ok();
    if (again_ok != fast_ok || (fast_ok && again != out)) {
      std::fprintf(stderr, "ParseInto's update disagrees with Parse's\n");
      std::abort();
    }
  }
  context.fast_paths = false;
  bool slow_ok = update.value().Apply(doc.value().data(), doc.value().size(), context, &slow).ok();
  // The fast paths must give the general rewrite's answer, byte for byte.
  if (fast_ok != slow_ok || (fast_ok && out != slow)) {
    std::fprintf(stderr, "fast path disagrees with the general rewrite\n");
    std::abort();
  }
  if (!fast_ok) return 0;
  auto result = mmdoc::Document::FromBson(reinterpret_cast<const uint8_t*>(out.data()), out.size());
  if (!result.ok()) Fail("Apply gave an invalid document", result.status());
  mmdoc::Status names =
      mmdoc::engine::CheckFieldNames(result.value().data(), result.value().size());
  if (!names.ok()) Fail("Apply gave a bad field name", names);
  return 0;
}
