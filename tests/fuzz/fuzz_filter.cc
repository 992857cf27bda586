// libFuzzer target: engine::Filter::Parse and Matches. The input is a
// filter in JSON, a newline, and a document in JSON. A filter either fails
// to parse with a Status or matches (or not) any document without crashing,
// and its index bounds can be computed.
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/query.h"
#include "mmdoc/document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nl = in.find('\n');
  std::string_view filter_text = in.substr(0, nl);
  std::string_view doc_text = nl == std::string_view::npos ? "{}" : in.substr(nl + 1);
  auto f = mmdoc::Document::FromJson(filter_text);
  if (!f.ok()) return 0;
  auto filter = mmdoc::engine::Filter::Parse(f.value());
  if (!filter.ok()) return 0;
  auto doc = mmdoc::Document::FromJson(doc_text);
  if (doc.ok()) (void)filter.value().Matches(doc.value().data(), doc.value().size());
  (void)filter.value().MatchesAll();
  for (const char* path : {"a", "_id", "a.b"}) {
    (void)filter.value().IndexBounds(path);
    (void)filter.value().IndexBounds(path, false);
  }
  return 0;
}
