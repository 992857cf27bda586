// index::Run: the run value's tag and the merge of runs into their tree.
#include "index/run.h"

#include <memory>

namespace mmdoc::index {

void EncodeRunValue(bool erased, std::string_view value, std::string* out) {
  out->clear();
  out->push_back(erased ? kRunErase : kRunPut);
  if (!erased) out->append(value);
}

Status DecodeRunValue(std::string_view stored, bool* erased, std::string_view* value) {
  if (stored.empty() || (stored[0] != kRunPut && stored[0] != kRunErase))
    return Status::Corruption("a run entry without its put or erase tag");
  *erased = stored[0] == kRunErase;
  *value = stored.substr(1);
  return Status::OK();
}

Status FindInRun(BTree* run, std::string_view key, bool* found, bool* erased,
                 std::string_view* value) {
  *found = false;
  std::string_view stored;
  Status s = run->Get(key, &stored);
  if (s.IsNotFound()) return Status::OK();
  MMDOC_RETURN_IF_ERROR(s);
  *found = true;
  return DecodeRunValue(stored, erased, value);
}

Status MergeRunsInto(BTree* tree, const std::vector<BTree*>& runs, std::string_view from,
                     const std::function<Status(bool* pause)>& between, RunMerge* out) {
  *out = RunMerge();
  std::vector<std::unique_ptr<BTree::Cursor>> cur;
  for (BTree* r : runs) {
    cur.push_back(std::make_unique<BTree::Cursor>(r));
    MMDOC_RETURN_IF_ERROR(from.empty() ? cur.back()->SeekToFirst() : cur.back()->Seek(from));
  }
  // Keys compare bytewise in their ordinary form, whatever the codec
  // (btree.h, KeyCodec). The runs' pages are not written here, so their
  // cursors stay valid while the tree changes.
  std::string key;
  bool pause = false;
  for (;;) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(cur.size()); i++) {
      if (!cur[i]->Valid()) continue;
      if (best < 0 || cur[i]->key() < cur[best]->key()) best = i;  // ties: the newer run
    }
    if (best < 0) {
      out->done = true;
      return Status::OK();
    }
    key.assign(cur[best]->key());
    if (pause) {
      out->next = std::move(key);
      return Status::OK();
    }
    bool erased;
    std::string_view value;
    MMDOC_RETURN_IF_ERROR(DecodeRunValue(cur[best]->value(), &erased, &value));
    bool had = false;
    Status s = erased ? tree->Delete(key) : tree->Put(key, value, PutMode::kUpsert, &had);
    if (s.IsNotFound() && erased) {
      s = Status::OK();  // put and erased in one generation, or merged before
    } else if (s.ok()) {
      out->live_delta += erased ? -1 : (had ? 0 : 1);
    }
    MMDOC_RETURN_IF_ERROR(s);
    for (auto& c : cur)
      if (c->Valid() && c->key() == key) MMDOC_RETURN_IF_ERROR(c->Next());
    MMDOC_RETURN_IF_ERROR(between(&pause));
  }
}

}  // namespace mmdoc::index
