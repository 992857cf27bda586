// DB::Salvage: every intact document of a collection in a damaged database
// (mmdoc/db.h). The reading is index::SalvageTree's; this file finds the
// collection's _id tree through the (possibly damaged) catalog, checks each
// document and counts what is missing.
#include "index/salvage.h"

#include <map>
#include <optional>
#include <string>

#include "engine/db_impl.h"
#include "engine/query.h"
#include "index/catalog.h"
#include "storage/coding.h"

namespace mmdoc {

Status DB::Salvage(std::string_view collection,
                   const std::function<void(std::string_view bson)>& emit, SalvageReport* report) {
  SalvageReport local;
  SalvageReport& r = report ? *report : local;
  r = SalvageReport();
  if (!impl_) return DBImpl::ClosedError();
  // Salvage reads pages: the write buffer's changes go there first. When
  // they cannot (the damage may be why), what they hold is named as missing.
  Status merged = impl_->MergeBuffered("Salvage");
  if (merged.IsBusy()) return merged;
  std::shared_ptr<storage::Pager> pager = impl_->pager();  // kept while salvaging
  auto txn = pager->BeginRead();
  if (!txn.ok()) return txn.status();
  storage::Txn* t = txn.value().get();

  // The catalog entry: u64 root, then the CollectionMeta encoding.
  const std::string name = CollectionTreeName(collection);
  const std::string run_prefix = RunPrefix(collection);
  bool found = false;
  storage::PageId root = 0;
  std::string meta;
  // The _id tree's runs (engine/runs.cc), oldest first, and what they add
  // to the count.
  std::vector<storage::PageId> runs;
  int64_t runs_delta = 0;
  index::SalvageStats cat;
  MMDOC_RETURN_IF_ERROR(index::SalvageTree(
      t, t->root(index::kCatalogRootSlot),
      [&](std::string_view key, std::string_view value) {
        std::string_view tree;
        if (value.size() < 8) return;
        if (key.substr(0, run_prefix.size()) == run_prefix && RunTree(key, &tree) && tree == name) {
          runs.push_back(storage::DecodeFixed64(value.data()));
          CachedRun run;
          if (DecodeRunMeta(value.substr(8), &run)) runs_delta += run.count_delta;
          return;
        }
        if (key != name) return;
        found = true;
        root = storage::DecodeFixed64(value.data());
        meta.assign(value.substr(8));
      },
      &cat));
  r.damaged_pages += cat.damaged_pages;
  for (std::string& p : cat.problems) r.problems.push_back("catalog: " + p);
  if (!found) {
    if (cat.damaged_pages == 0) return Status::NotFound("no collection", collection);
    r.problems.push_back("the catalog entry of collection " + std::string(collection) +
                         " is in a damaged page: nothing can be recovered");
    return Status::OK();
  }
  CollectionMeta cm;
  const bool count_known = CollectionMeta::Decode(meta, &cm);

  // The runs' changes, newest winning; each hides the tree's entry.
  std::map<std::string, std::optional<std::string>, std::less<>> changed;
  index::SalvageStats docs;
  for (storage::PageId run : runs) {
    MMDOC_RETURN_IF_ERROR(index::SalvageTree(
        t, run,
        [&](std::string_view key, std::string_view stored) {
          bool erased;
          std::string_view value;
          if (!index::DecodeRunValue(stored, &erased, &value).ok()) {
            if (r.problems.size() < 1000) r.problems.push_back("a run entry without its tag");
            return;
          }
          auto& slot = changed[std::string(key)];
          if (erased) {
            slot.reset();
          } else {
            slot = std::string(value);
          }
        },
        &docs, &TreeKeyCodec()));
  }
  uint64_t bad_docs = 0;
  auto take = [&](std::string_view key, std::string_view value) {
    auto doc = Document::FromBson(reinterpret_cast<const uint8_t*>(value.data()), value.size());
    bson_value_t id;
    std::string pk;
    if (doc.ok() && engine::LookupPath(doc.value().data(), doc.value().size(), "_id", &id))
      engine::AppendKey(&id, &pk);
    if (!doc.ok() || pk != key) {
      bad_docs++;
      if (r.problems.size() < 1000)
        r.problems.push_back("a stored document is not valid or not under its _id: " +
                             (doc.ok() ? std::string("wrong key") : doc.status().ToString()));
      return;
    }
    r.recovered++;
    emit(value);
  };
  MMDOC_RETURN_IF_ERROR(index::SalvageTree(
      t, root,
      [&](std::string_view key, std::string_view value) {
        if (changed.find(key) == changed.end()) take(key, value);
      },
      &docs, &TreeKeyCodec()));
  for (const auto& [key, value] : changed)
    if (value.has_value()) take(key, *value);
  r.damaged_pages += docs.damaged_pages;
  for (std::string& p : docs.problems) r.problems.push_back(std::string(collection) + ": " + p);
  if (count_known) {
    r.lost_known = true;
    const uint64_t count = static_cast<uint64_t>(static_cast<int64_t>(cm.count) + runs_delta);
    r.lost = count > r.recovered ? count - r.recovered : 0;
  } else {
    r.problems.push_back("the collection's document count is unreadable");
  }
  (void)bad_docs;
  if (!merged.ok()) {
    r.lost_known = false;
    r.problems.push_back("the write buffer's changes could not be merged into the pages (" +
                         merged.ToString() + "): changes since the last merge are missing");
  }
  return Status::OK();
}

}  // namespace mmdoc
