// libFuzzer target: engine::Update::Parse and Apply. The input is an update
// in JSON, a newline, and a document in JSON. A successful Apply must give a
// valid document with no '$' field names (it is about to be stored).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/query.h"
#include "mmdoc/document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nl = in.find('\n');
  std::string_view update_text = in.substr(0, nl);
  std::string_view doc_text = nl == std::string_view::npos ? "{\"_id\": 1}" : in.substr(nl + 1);
  auto u = mmdoc::Document::FromJson(update_text);
  if (!u.ok()) return 0;
  auto update = mmdoc::engine::Update::Parse(u.value());
  if (!update.ok()) return 0;
  auto doc = mmdoc::Document::FromJson(doc_text);
  if (!doc.ok()) return 0;
  // Stored documents never have '$' field names (insert and replace refuse
  // them), so only such documents are updated.
  if (!mmdoc::engine::CheckFieldNames(doc.value().data(), doc.value().size()).ok()) return 0;
  std::string out, slow;
  bool fast_ok = update.value().Apply(doc.value().data(), doc.value().size(), &out).ok();
  bool slow_ok = update.value().Apply(doc.value().data(), doc.value().size(), &slow, false).ok();
  // The fast paths must give the general rewrite's answer, byte for byte.
  if (fast_ok != slow_ok || (fast_ok && out != slow)) {
    std::fprintf(stderr, "fast path disagrees with the general rewrite\n");
    std::abort();
  }
  if (!fast_ok) return 0;
  auto result = mmdoc::Document::FromBson(reinterpret_cast<const uint8_t*>(out.data()), out.size());
  if (!result.ok()) {
    std::fprintf(stderr, "Apply gave an invalid document: %s\n",
                 result.status().ToString().c_str());
    std::abort();
  }
  mmdoc::Status names =
      mmdoc::engine::CheckFieldNames(result.value().data(), result.value().size());
  if (!names.ok()) {
    std::fprintf(stderr, "Apply gave a bad field name: %s\n", names.ToString().c_str());
    std::abort();
  }
  return 0;
}
