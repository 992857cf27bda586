// libFuzzer target: index specs and partial filters. The input is a
// partial filter in JSON, a newline, a query filter in JSON, a newline, and
// a document in JSON. A partial filter is refused with a Status or makes
// an index whose keys any document either gets or is refused (parallel
// arrays) without crashing; and when FilterImplies says the query implies
// the partial filter, a document the query matches must match it too (the
// planner would otherwise miss it: a wrong answer), else the target traps.
// The catalog's spec decoder also reads the raw input without crashing.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/index_spec.h"
#include "engine/partial_filter.h"
#include "engine/query.h"
#include "mmdoc/document.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  {
    std::string_view raw = in;
    mmdoc::IndexMeta m;
    (void)mmdoc::DecodeIndexSpec(&raw, &m);
  }
  const size_t nl1 = in.find('\n');
  if (nl1 == std::string_view::npos) return 0;
  const size_t nl2 = in.find('\n', nl1 + 1);
  if (nl2 == std::string_view::npos) return 0;
  auto partial = mmdoc::Document::FromJson(in.substr(0, nl1));
  auto query = mmdoc::Document::FromJson(in.substr(nl1 + 1, nl2 - nl1 - 1));
  auto doc = mmdoc::Document::FromJson(in.substr(nl2 + 1));
  if (!partial.ok() || !query.ok() || !doc.ok()) return 0;
  mmdoc::IndexOptions options;
  options.partial_filter = partial.value();
  options.sparse = (size & 1) != 0;
  mmdoc::IndexMeta m;
  const std::vector<mmdoc::IndexKey> keys = {{"a", 1}, {"b.c", -1}};
  if (!mmdoc::MakeIndexMeta(keys, options, &m).ok()) return 0;
  std::vector<std::string> entries;
  (void)mmdoc::IndexEntryKeys(m, doc.value().data(), doc.value().size(), &entries);
  std::string spec;
  mmdoc::EncodeIndexSpec(m, &spec);
  std::string_view spec_view = spec;
  mmdoc::IndexMeta back;
  if (!mmdoc::DecodeIndexSpec(&spec_view, &back) || back.field != m.field) __builtin_trap();
  auto q = mmdoc::engine::Filter::Parse(query.value());
  if (!q.ok()) return 0;
  const std::string_view qs(reinterpret_cast<const char*>(query.value().data()),
                            query.value().size());
  // An empty partial filter ({}) makes no partial index: nothing to imply.
  if (m.partial_filter && mmdoc::engine::FilterImplies(qs, m.partial) &&
      q.value().Matches(doc.value().data(), doc.value().size()) &&
      !m.partial_filter->Matches(doc.value().data(), doc.value().size()))
    __builtin_trap();
  return 0;
}
