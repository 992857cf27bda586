// The seed's document for the probes that go through the public API
// (mmdoc-readprobe, mmdoc-fillprobe): {_id, key, value}, each a GUID.
#ifndef MMDOC_BENCH_MICRO_SEED_DOC_H_
#define MMDOC_BENCH_MICRO_SEED_DOC_H_

#include <bson/bson.h>

#include <random>
#include <string>

#include "bench/micro/proto_util.h"
#include "mmdoc/document.h"

namespace mmdoc::proto {

// The document with this _id and a key and value drawn from rng.
inline Document SeedDocument(const std::string& id, std::mt19937_64& rng) {
  const std::string key = Guid(rng), value = Guid(rng);
  bson_t b = BSON_INITIALIZER;
  bson_append_utf8(&b, "_id", 3, id.data(), static_cast<int>(id.size()));
  bson_append_utf8(&b, "key", 3, key.data(), static_cast<int>(key.size()));
  bson_append_utf8(&b, "value", 5, value.data(), static_cast<int>(value.size()));
  auto d = Document::FromBson(&b);
  bson_destroy(&b);
  Check(d.status(), "document");
  return std::move(d.value());
}

}  // namespace mmdoc::proto

#endif  // MMDOC_BENCH_MICRO_SEED_DOC_H_
