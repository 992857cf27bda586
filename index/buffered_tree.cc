// index::BufferedTree: reads through the overlay, the buffer and the BTree;
// writes to the overlay; a cursor that merges the three.
//
// The merge is LevelDB's merging iterator with priorities: each layer is
// positioned at its first key >= the current one when moving forward (its
// last key <= the current one when moving backward); the current key is
// the smallest (largest) of the layers' keys and, among layers at that key,
// the newest layer's entry wins. Changing direction repositions the other
// layers around the current key with a Seek. A winning tombstone is stepped
// over like any key.
#include "index/buffered_tree.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace mmdoc::index {

namespace {

// BTree::Put's argument checks, with its messages (btree.cc CheckKeyValue),
// so that a caller sees the same errors through either.
Status CheckKeyValue(std::string_view key, std::string_view value) {
  if (key.empty()) return Status::InvalidArgument("empty key (keys are 1..1024 bytes)");
  if (key.size() > kMaxKeySize) {
    return Status::InvalidArgument("key longer than kMaxKeySize (1024 bytes)");
  }
  if (value.size() > kMaxValueSize) {
    return Status::InvalidArgument("value longer than kMaxValueSize (64 MiB)");
  }
  return Status::OK();
}

Status KeyNotFound() { return Status::NotFound("key not found"); }

Status ReadOnly() {
  return Status::InvalidArgument("BufferedTree: a write outside a write transaction");
}

// One layer of a merging cursor, positioned like a BTree::Cursor.
class Layer {
 public:
  virtual ~Layer() = default;
  virtual Status Seek(std::string_view target) = 0;
  virtual Status SeekToFirst() = 0;
  virtual Status SeekToLast() = 0;
  virtual Status Next() = 0;  // REQUIRES: Valid()
  virtual Status Prev() = 0;  // REQUIRES: Valid()
  virtual bool Valid() const = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  virtual bool erased() const = 0;
  // A run's leaves, for a scan that rejects a group of entries by their
  // bytes: the BTree cursor whose leaf holds the current entry, nullptr for
  // a layer without leaves. SkipLeaf moves past the rest of that leaf.
  virtual const BTree::Cursor* leaves() const { return nullptr; }
  virtual Status SkipLeaf(uint64_t* /*skipped*/) { return Status::NotSupported("no leaves"); }
  // *held: this layer has a change of `key` (of hash KeyHash(key)),
  // which a SkipLeaf may have passed over.
  virtual Status Holds(std::string_view /*key*/, uint64_t /*hash*/, bool* held) {
    *held = false;
    return Status::OK();
  }
  // Whether this layer passes over entries it holds (a table after
  // Select): an older layer's entry may be one of those hides.
  virtual bool selective() const { return false; }
};

// The overlay, in the tree's order.
class OverlayLayer final : public Layer {
 public:
  OverlayLayer(const Overlay* overlay, Comparator order)
      : overlay_(overlay), sorted_(&overlay->Sorted()), order_(order), pos_(sorted_->size()) {}
  // Each Seek sorts the overlay again if it changed since (a write
  // invalidates cursors, and the Seek after it must see the write).
  Status Seek(std::string_view target) override {
    sorted_ = &overlay_->Sorted();
    auto it = std::lower_bound(sorted_->begin(), sorted_->end(), target,
                               [this](const Overlay::Entry* e, std::string_view t) {
                                 return CompareKeys(order_, overlay_->key(*e), t) < 0;
                               });
    pos_ = static_cast<size_t>(it - sorted_->begin());
    return Status::OK();
  }
  Status SeekToFirst() override {
    sorted_ = &overlay_->Sorted();
    pos_ = 0;
    return Status::OK();
  }
  Status SeekToLast() override {
    sorted_ = &overlay_->Sorted();
    pos_ = sorted_->empty() ? 0 : sorted_->size() - 1;
    return Status::OK();
  }
  Status Next() override {
    pos_++;
    return Status::OK();
  }
  Status Prev() override {
    pos_ = pos_ == 0 ? sorted_->size() : pos_ - 1;
    return Status::OK();
  }
  bool Valid() const override { return pos_ < sorted_->size(); }
  std::string_view key() const override { return overlay_->key(*(*sorted_)[pos_]); }
  std::string_view value() const override { return overlay_->value(*(*sorted_)[pos_]); }
  bool erased() const override { return (*sorted_)[pos_]->erased; }

 private:
  const Overlay* overlay_;
  const std::vector<const Overlay::Entry*>* sorted_;
  const Comparator order_;
  size_t pos_;  // == size: not Valid()
};

// One buffer table at the snapshot: every key (through an Iterator), or
// after Select only the keys whose values a filter accepts.
class TableLayer final : public Layer {
 public:
  TableLayer(const BufferTable* table, uint64_t snapshot, Comparator order)
      : table_(table), snapshot_(snapshot), order_(order), it_(table, snapshot, order) {}

  // Keeps only the keys whose values may_match accepts, adding the number
  // refused to *rejected, unless it accepts more than an eighth of them:
  // then sorting the accepted costs more than walking every key. With
  // `after` (the merge's last key, which this layer has walked past) only
  // the keys after it, and the layer stands on the first of them; a move
  // back to or before `after` returns to walking every key.
  void Select(const std::function<bool(std::string_view)>& may_match, uint64_t* rejected,
              std::string_view after) {
    uint64_t refused = 0;
    const size_t limit = table_->keys() / 8 + 16;
    if (table_->Select(snapshot_, order_, may_match, after, limit, &picked_, &refused)) {
      selected_ = true;
      after_.assign(after);
      pos_ = after.empty() ? picked_.size() : 0;
      *rejected += refused;
    } else {
      std::vector<BufferTable::Entry>().swap(picked_);
    }
  }

  Status Seek(std::string_view target) override {
    if (selected_ && !after_.empty() && CompareKeys(order_, target, after_) <= 0) Unselect();
    if (!selected_) {
      it_.Seek(target);
      return Status::OK();
    }
    pos_ = static_cast<size_t>(
        std::lower_bound(picked_.begin(), picked_.end(), target,
                         [this](const BufferTable::Entry& e, std::string_view t) {
                           return CompareKeys(order_, e.key, t) < 0;
                         }) -
        picked_.begin());
    return Status::OK();
  }
  Status SeekToFirst() override {
    if (!after_.empty()) Unselect();
    if (!selected_) it_.SeekToFirst();
    pos_ = 0;
    return Status::OK();
  }
  Status SeekToLast() override {
    if (!after_.empty()) Unselect();
    if (!selected_) it_.SeekToLast();
    pos_ = picked_.empty() ? 0 : picked_.size() - 1;
    return Status::OK();
  }
  Status Next() override {
    if (!selected_) it_.Next();
    pos_++;
    return Status::OK();
  }
  Status Prev() override {
    if (!after_.empty() && !Unselect()) {
      it_.SeekToLast();  // from past the end
      return Status::OK();
    }
    if (!selected_) it_.Prev();
    pos_ = pos_ == 0 ? picked_.size() : pos_ - 1;
    return Status::OK();
  }
  bool Valid() const override { return selected_ ? pos_ < picked_.size() : it_.Valid(); }
  std::string_view key() const override { return selected_ ? picked_[pos_].key : it_.key(); }
  std::string_view value() const override { return version()->value(); }
  bool erased() const override { return version()->erased(); }
  Status Holds(std::string_view key, uint64_t hash, bool* held) override {
    *held = table_->Find(key, hash, snapshot_) != nullptr;
    return Status::OK();
  }
  bool selective() const override { return selected_; }

 private:
  const BufferVersion* version() const { return selected_ ? picked_[pos_].version : it_.version(); }
  // Back to walking every key, standing on the current one when Valid()
  // (returned); otherwise the caller positions the layer.
  bool Unselect() {
    const bool valid = selected_ && pos_ < picked_.size();
    if (valid) it_.Seek(picked_[pos_].key);
    selected_ = false;
    after_.clear();
    std::vector<BufferTable::Entry>().swap(picked_);
    pos_ = 0;
    return valid;
  }
  const BufferTable* const table_;
  const uint64_t snapshot_;
  const Comparator order_;
  BufferTable::Iterator it_;
  bool selected_ = false;
  std::vector<BufferTable::Entry> picked_;  // after Select: in order
  std::string after_;                       // Select's bound; empty: none
  size_t pos_ = 0;                          // in picked_; == size: not Valid()
};

// A run: its entries' tags say put or erase.
class RunLayer final : public Layer {
 public:
  explicit RunLayer(const RunRef& run) : run_(run), c_(run.tree) {}
  Status Seek(std::string_view target) override { return Load(c_.Seek(target)); }
  Status SeekToFirst() override { return Load(c_.SeekToFirst()); }
  Status SeekToLast() override { return Load(c_.SeekToLast()); }
  Status Next() override { return Load(c_.Next()); }
  Status Prev() override { return Load(c_.Prev()); }
  bool Valid() const override { return c_.Valid(); }
  std::string_view key() const override { return c_.key(); }
  std::string_view value() const override { return value_; }
  bool erased() const override { return erased_; }
  const BTree::Cursor* leaves() const override { return &c_; }
  Status SkipLeaf(uint64_t* skipped) override { return Load(c_.SkipLeaf(skipped)); }
  Status Holds(std::string_view key, uint64_t hash, bool* held) override {
    *held = false;
    // Not RunMayHold: below merged_below an older run's entry still lies
    // under this one's, though the tree holds both merged.
    if (run_.filter != nullptr && !run_.filter->MayContainHash(hash)) return Status::OK();
    bool erased;
    std::string_view value;
    return FindInRun(run_.tree, key, held, &erased, &value);
  }

 private:
  Status Load(Status s) {
    if (!s.ok() || !c_.Valid()) return s;
    return DecodeRunValue(c_.value(), &erased_, &value_);
  }
  const RunRef run_;
  BTree::Cursor c_;
  bool erased_ = false;
  std::string_view value_;
};

// The BTree, through the Cursor's own BTree::Cursor.
class TreeLayer final : public Layer {
 public:
  explicit TreeLayer(BTree::Cursor* c) : c_(c) {}
  Status Seek(std::string_view target) override { return c_->Seek(target); }
  Status SeekToFirst() override { return c_->SeekToFirst(); }
  Status SeekToLast() override { return c_->SeekToLast(); }
  Status Next() override { return c_->Next(); }
  Status Prev() override { return c_->Prev(); }
  bool Valid() const override { return c_->Valid(); }
  std::string_view key() const override { return c_->key(); }
  std::string_view value() const override { return c_->value(); }
  bool erased() const override { return false; }

 private:
  BTree::Cursor* c_;
};

}  // namespace

// --- BufferedTree ---

BufferedTree::BufferedTree(BTree* tree, const BufferView* view, std::string_view name,
                           Comparator order, bool writable)
    : tree_(tree),
      view_(view),
      name_(name),
      order_(order),
      writable_(writable),
      tables_(view->Tables(name)),
      overlay_(order) {}

BufferedTree::BufferedTree(BTree* tree)
    : tree_(tree), view_(nullptr), order_(nullptr), writable_(true), overlay_(nullptr) {}

BufferedTree::~BufferedTree() = default;

Status BufferedTree::Get(std::string_view key, std::string_view* value) {
  if (key.empty() || key.size() > kMaxKeySize) return KeyNotFound();
  if (!Layered()) return tree_->Get(key, value);  // nothing above the pages to hash for
  const uint64_t hash = KeyHash(key);
  if (!overlay_.empty()) {
    if (const Overlay::Entry* e = overlay_.Find(key, hash); e != nullptr) {
      if (e->erased) return KeyNotFound();
      *value = overlay_.value(*e);
      return Status::OK();
    }
  }
  for (const BufferTable* t : tables_) {
    const BufferVersion* v = t->Find(key, hash, view_->snapshot);
    if (v != nullptr) {
      if (v->erased()) return KeyNotFound();
      *value = v->value();
      return Status::OK();
    }
  }
  if (!runs_.empty()) {
    bool found;
    bool erased;
    MMDOC_RETURN_IF_ERROR(FindInRuns(key, hash, &found, &erased, value));
    if (found) return erased ? KeyNotFound() : Status::OK();
  }
  return tree_->Get(key, value);
}

Status BufferedTree::FindInRuns(std::string_view key, uint64_t hash, bool* found, bool* erased,
                                std::string_view* value) {
  *found = false;
  for (const RunRef& r : runs_)
    if (r.filter != nullptr) r.filter->Prefetch(hash);
  for (const RunRef& r : runs_) {
    if (!RunMayHold(r.filter, r.merged_below, key, hash)) continue;
    MMDOC_RETURN_IF_ERROR(FindInRun(r.tree, key, found, erased, value));
    if (*found) break;
  }
  return Status::OK();
}

Status BufferedTree::LiveBelow(std::string_view key, uint64_t hash, bool* live) {
  for (const BufferTable* t : tables_) {
    const BufferVersion* v = t->Find(key, hash, view_->snapshot);
    if (v != nullptr) {
      *live = !v->erased();
      return Status::OK();
    }
  }
  const KeyFilter* f = filters_.ready.get();
  if (f != nullptr && view_->snapshot >= filters_.ready_at && !f->MayContainHash(hash)) {
    *live = false;  // never added, so never live since ready_at
    return Status::OK();
  }
  std::string_view unused;
  if (!runs_.empty()) {
    bool found;
    bool erased;
    MMDOC_RETURN_IF_ERROR(FindInRuns(key, hash, &found, &erased, &unused));
    if (found) {
      *live = !erased;
      return Status::OK();
    }
  }
  Status s = tree_->Get(key, &unused);
  *live = s.ok();
  return s.ok() || s.IsNotFound() ? Status::OK() : s;
}

void BufferedTree::Prefetch(std::string_view key) const {
  if (direct()) return;
  const uint64_t hash = KeyHash(key);
  for (const BufferTable* t : tables_) t->Prefetch(hash);
  if (filters_.ready != nullptr) filters_.ready->Prefetch(hash);
  if (filters_.building != nullptr) filters_.building->Prefetch(hash);
}

Status BufferedTree::Put(std::string_view key, std::string_view value, PutMode mode) {
  if (direct()) return tree_->Put(key, value, mode);
  MMDOC_RETURN_IF_ERROR(CheckKeyValue(key, value));
  if (!writable_) return ReadOnly();
  const uint64_t hash = KeyHash(key);
  const Overlay::Entry* e = overlay_.Find(key, hash);
  bool live;
  bool was_live;
  if (e != nullptr) {
    live = !e->erased;
    was_live = e->was_live;
  } else {
    if (trusted_ && mode != PutMode::kUpsert) {
      live = mode == PutMode::kUpdate;
    } else {
      MMDOC_RETURN_IF_ERROR(LiveBelow(key, hash, &live));
    }
    was_live = live;
  }
  if (mode == PutMode::kInsert && live) return Status::AlreadyExists("key already exists");
  if (mode == PutMode::kUpdate && !live) return KeyNotFound();
  overlay_.Set(key, hash, value, /*erased=*/false, was_live);
  if (!live) {
    overlay_delta_++;
    if (filters_.ready != nullptr) filters_.ready->AddHash(hash);
    if (filters_.building != nullptr) filters_.building->AddHash(hash);
  }
  return Status::OK();
}

Status BufferedTree::Delete(std::string_view key) {
  if (direct()) return tree_->Delete(key);
  if (key.empty() || key.size() > kMaxKeySize) return KeyNotFound();
  if (!writable_) return ReadOnly();
  return DeleteHashed(key, KeyHash(key));
}

Status BufferedTree::DeleteHashed(std::string_view key, uint64_t hash) {
  if (const Overlay::Entry* e = overlay_.Find(key, hash); e != nullptr) {
    if (e->erased) return KeyNotFound();
    if (!e->was_live) {
      // Absent below, so forgetting the change restores the same state
      // and spares the buffer a tombstone.
      overlay_.Remove(key, hash);
    } else {
      overlay_.Set(key, hash, {}, /*erased=*/true, /*was_live=*/true);
    }
    overlay_delta_--;
    return Status::OK();
  }
  bool live = true;
  if (!trusted_) MMDOC_RETURN_IF_ERROR(LiveBelow(key, hash, &live));
  if (!live) return KeyNotFound();
  overlay_.Set(key, hash, {}, /*erased=*/true, /*was_live=*/true);
  overlay_delta_--;
  return Status::OK();
}

Status BufferedTree::UpdateLive(std::string_view key, std::string_view value) {
  if (direct()) return tree_->Put(key, value, PutMode::kUpdate);
  MMDOC_RETURN_IF_ERROR(CheckKeyValue(key, value));
  if (!writable_) return ReadOnly();
  const uint64_t hash = KeyHash(key);
  const Overlay::Entry* e = overlay_.Find(key, hash);
  if (e != nullptr && e->erased) return KeyNotFound();
  overlay_.Set(key, hash, value, /*erased=*/false, e != nullptr ? e->was_live : true);
  return Status::OK();
}

Status BufferedTree::DeleteLive(std::string_view key) {
  if (direct()) return tree_->Delete(key);
  if (key.empty() || key.size() > kMaxKeySize) return KeyNotFound();
  if (!writable_) return ReadOnly();
  const uint64_t hash = KeyHash(key);
  if (overlay_.Find(key, hash) != nullptr) return DeleteHashed(key, hash);  // its own bookkeeping
  overlay_.Set(key, hash, {}, /*erased=*/true, /*was_live=*/true);
  overlay_delta_--;
  return Status::OK();
}

void BufferedTree::Renew(const BufferView* view) {
  assert(writable_ && view_ != nullptr && view != nullptr);
  view_ = view;
  // A generation's table of this tree, once there, stays: with the same
  // generations, each holding one, the tables are the same.
  const auto& gens = view->generations;
  bool same = table_gens_.size() == gens.size() && tables_.size() == gens.size();
  for (size_t i = 0; same && i < gens.size(); i++) same = table_gens_[i] == gens[i]->id();
  if (!same) {
    view->Tables(name_, &tables_);
    table_gens_.clear();
    for (const auto& g : gens) table_gens_.push_back(g->id());
  }
  overlay_.Clear();
  overlay_delta_ = 0;
}

int64_t BufferedTree::CountDelta() const {
  int64_t d = overlay_delta_;
  for (const BufferTable* t : tables_) d += t->CountDelta(view_->snapshot);
  for (const RunRef& r : runs_) d += r.count_delta;
  return d;
}

void BufferedTree::AppendChanges(std::vector<BufferChange>* out) const {
  out->reserve(out->size() + overlay_.size());
  overlay_.ForEach([&](const Overlay::Entry& e) {
    BufferChange c;
    c.tree = name_;
    c.key = overlay_.key(e);
    c.value = overlay_.value(e);
    c.erased = e.erased;
    c.was_live = e.was_live;
    c.hash = e.hash;
    out->push_back(c);
  });
}

// --- BufferedTree::Cursor ---

class BufferedTree::Cursor::Merge {
 public:
  // `reject`, when set: RejectInBuffer's filter, the count it adds to, and
  // the entries the tables yield before it applies.
  Merge(BufferedTree* t, BTree::Cursor* base, const BytesFilter& reject, uint64_t* rejected,
        size_t select_after)
      : order_(t->order_), base_(base), reject_(reject), rejected_(rejected) {
    if (t->writable_) layers_.push_back(std::make_unique<OverlayLayer>(&t->overlay_, t->order_));
    first_table_ = static_cast<int>(layers_.size());
    for (const BufferTable* table : t->tables_) {
      auto l = std::make_unique<TableLayer>(table, t->view_->snapshot, t->order_);
      tables_.push_back(l.get());
      layers_.push_back(std::move(l));
    }
    if (reject_ && !tables_.empty()) {
      if (select_after == 0) {
        SelectTables({});
      } else {
        select_in_ = select_after;
      }
    }
    for (const RunRef& r : t->runs_) layers_.push_back(std::make_unique<RunLayer>(r));
    layers_.push_back(std::make_unique<TreeLayer>(base));
    tree_layer_ = static_cast<int>(layers_.size()) - 1;
    skip_from_.resize(layers_.size());
    skipping_.assign(layers_.size(), false);
  }

  bool Valid() const { return cur_ >= 0; }
  std::string_view key() const { return layers_[cur_]->key(); }
  std::string_view value() const { return layers_[cur_]->value(); }

  Status Seek(std::string_view target) {
    forward_ = true;
    EndSkips();
    for (auto& l : layers_) MMDOC_RETURN_IF_ERROR(Fail(l->Seek(target)));
    return Settle();
  }
  Status SeekToFirst() {
    forward_ = true;
    EndSkips();
    for (auto& l : layers_) MMDOC_RETURN_IF_ERROR(Fail(l->SeekToFirst()));
    return Settle();
  }
  Status SeekToLast() {
    forward_ = false;
    EndSkips();
    for (auto& l : layers_) MMDOC_RETURN_IF_ERROR(Fail(l->SeekToLast()));
    return Settle();
  }
  Status Next() {
    assert(Valid());
    if (!forward_) MMDOC_RETURN_IF_ERROR(ToForward());
    if (select_in_ > 0 && cur_ >= first_table_ &&
        cur_ < first_table_ + static_cast<int>(tables_.size()) && --select_in_ == 0) {
      // Every layer moves past this key; the tables then yield only
      // selected keys after it.
      const std::string last(key());
      MMDOC_RETURN_IF_ERROR(Step());
      SelectTables(last);
      return Settle();
    }
    MMDOC_RETURN_IF_ERROR(Step());
    return Settle();
  }
  Status Prev() {
    assert(Valid());
    if (forward_) MMDOC_RETURN_IF_ERROR(ToBackward());
    MMDOC_RETURN_IF_ERROR(Step());
    return Settle();
  }

  std::string_view LeafBytes(bool* all_inline) const {
    if (cur_ == tree_layer_) return base_->LeafBytes(all_inline);
    if (const BTree::Cursor* run = layers_[cur_]->leaves()) return run->LeafBytes(all_inline);
    *all_inline = true;
    return value();
  }
  Status SkipLeaf(uint64_t* skipped) {
    assert(Valid());
    Layer& l = *layers_[cur_];
    if (cur_ != tree_layer_ && l.leaves() == nullptr) {
      *skipped = 1;
      return Next();
    }
    // A layer wins only where no newer layer has the key, so the others
    // stay where they are: at their first key after it (forward).
    if (!forward_) MMDOC_RETURN_IF_ERROR(ToForward());
    if (cur_ == tree_layer_) {
      MMDOC_RETURN_IF_ERROR(Fail(base_->SkipLeaf(skipped)));
    } else {
      // A run's entries hide older layers' entries of their keys: from this
      // key on, Hidden looks older entries up in this run.
      skip_from_[cur_].assign(l.key());
      skipping_[cur_] = true;
      any_skipping_ = true;
      MMDOC_RETURN_IF_ERROR(Fail(l.SkipLeaf(skipped)));
    }
    return Settle();
  }
  Status Hidden(bool* hidden) {
    *hidden = false;
    if ((!any_skipping_ && !any_selective_) || cur_ < 0) return Status::OK();
    const std::string_view k = key();
    uint64_t hash = 0;
    bool hashed = false;
    // Newer layers only; each still skipping is past k (Pick took k).
    for (int i = 0; i < cur_ && !*hidden; i++) {
      const bool skipped =
          layers_[i]->selective() || (skipping_[i] && Compare(k, skip_from_[i]) >= 0);
      if (!skipped) continue;
      if (!hashed) hash = KeyHash(k), hashed = true;
      MMDOC_RETURN_IF_ERROR(layers_[i]->Holds(k, hash, hidden));
    }
    return Status::OK();
  }

 private:
  int Compare(std::string_view a, std::string_view b) const { return CompareKeys(order_, a, b); }

  void SelectTables(std::string_view after) {
    for (TableLayer* l : tables_) {
      l->Select(reject_, rejected_, after);
      any_selective_ = any_selective_ || l->selective();
    }
  }

  // An error leaves the cursor !Valid().
  Status Fail(Status s) {
    if (!s.ok()) cur_ = -1;
    return s;
  }

  // Points cur_ at the newest layer holding the smallest (forward) or
  // largest (backward) key; -1 when every layer is exhausted.
  void Pick() {
    cur_ = -1;
    std::string_view best;
    for (int i = 0; i < static_cast<int>(layers_.size()); i++) {
      const Layer& l = *layers_[i];
      if (!l.Valid()) continue;
      if (cur_ < 0) {
        cur_ = i;
        best = l.key();
        continue;
      }
      const int c = Compare(l.key(), best);
      if (forward_ ? c < 0 : c > 0) {  // ties keep the newer layer
        cur_ = i;
        best = l.key();
      }
    }
  }

  // Moves every layer at the current key one step in the direction: the
  // others first, since the current key's bytes may belong to layer cur_.
  // A layer that moves here ends its skip: the merge has passed its key.
  Status Step() {
    const std::string_view k = layers_[cur_]->key();
    for (int i = 0; i < static_cast<int>(layers_.size()); i++) {
      Layer& l = *layers_[i];
      if (i == cur_ || !l.Valid() || Compare(l.key(), k) != 0) continue;
      skipping_[i] = false;
      MMDOC_RETURN_IF_ERROR(Fail(forward_ ? l.Next() : l.Prev()));
    }
    skipping_[cur_] = false;
    Layer& c = *layers_[cur_];
    return Fail(forward_ ? c.Next() : c.Prev());
  }

  void EndSkips() {
    if (!any_skipping_) return;
    skipping_.assign(layers_.size(), false);
    any_skipping_ = false;
  }

  // Picks the current entry, stepping over tombstones.
  Status Settle() {
    for (;;) {
      Pick();
      if (cur_ < 0 || !layers_[cur_]->erased()) return Status::OK();
      MMDOC_RETURN_IF_ERROR(Step());
    }
  }

  // Every other layer to its first key >= the current one.
  Status ToForward() {
    EndSkips();
    const std::string_view k = layers_[cur_]->key();
    for (int i = 0; i < static_cast<int>(layers_.size()); i++) {
      if (i != cur_) MMDOC_RETURN_IF_ERROR(Fail(layers_[i]->Seek(k)));
    }
    forward_ = true;
    return Status::OK();
  }

  // Every other layer to its last key <= the current one.
  Status ToBackward() {
    EndSkips();
    const std::string_view k = layers_[cur_]->key();
    for (int i = 0; i < static_cast<int>(layers_.size()); i++) {
      if (i == cur_) continue;
      Layer& l = *layers_[i];
      MMDOC_RETURN_IF_ERROR(Fail(l.Seek(k)));
      if (!l.Valid()) {
        MMDOC_RETURN_IF_ERROR(Fail(l.SeekToLast()));
      } else if (Compare(l.key(), k) > 0) {
        MMDOC_RETURN_IF_ERROR(Fail(l.Prev()));
      }
    }
    forward_ = false;
    return Status::OK();
  }

  const Comparator order_;
  BTree::Cursor* const base_;
  std::vector<std::unique_ptr<Layer>> layers_;  // newest first; the BTree last
  int tree_layer_ = 0;
  int cur_ = -1;  // the layer of the current entry; -1: !Valid()
  bool forward_ = true;
  // Per layer, a run's skip under way: from this key up to the run's
  // position, an older layer's entry may be one the skipped entries hide.
  std::vector<std::string> skip_from_;
  std::vector<bool> skipping_;
  bool any_skipping_ = false;
  bool any_selective_ = false;       // a table layer passes over entries it holds
  std::vector<TableLayer*> tables_;  // layers_[first_table_...], newest first
  int first_table_ = 0;
  const BytesFilter reject_;  // RejectInBuffer's, or empty
  uint64_t* const rejected_;
  size_t select_in_ = 0;  // > 0: the tables select after this many more steps of theirs
};

BufferedTree::Cursor::Cursor(BufferedTree* tree) : tree_(tree), base_(tree->tree_) {}
BufferedTree::Cursor::~Cursor() = default;

// Each Seek decides afresh whether to merge: the overlay may have gained
// changes since the last one (a write invalidates cursors, so a Seek
// follows it).
BufferedTree::Cursor::Merge* BufferedTree::Cursor::Prepare() {
  merged_ = tree_->Layered();
  if (!merged_) return nullptr;
  if (merge_ == nullptr) {
    merge_ = std::make_unique<Merge>(tree_, &base_, reject_, rejected_, select_after_);
  }
  return merge_.get();
}

Status BufferedTree::Cursor::Seek(std::string_view target) {
  Merge* m = Prepare();
  return m != nullptr ? m->Seek(target) : base_.Seek(target);
}
Status BufferedTree::Cursor::SeekToFirst() {
  Merge* m = Prepare();
  return m != nullptr ? m->SeekToFirst() : base_.SeekToFirst();
}
Status BufferedTree::Cursor::SeekToLast() {
  Merge* m = Prepare();
  return m != nullptr ? m->SeekToLast() : base_.SeekToLast();
}

Status BufferedTree::Cursor::Next() { return merged_ ? merge_->Next() : base_.Next(); }
Status BufferedTree::Cursor::Prev() { return merged_ ? merge_->Prev() : base_.Prev(); }
bool BufferedTree::Cursor::Valid() const { return merged_ ? merge_->Valid() : base_.Valid(); }
std::string_view BufferedTree::Cursor::key() const { return merged_ ? merge_->key() : base_.key(); }
std::string_view BufferedTree::Cursor::value() const {
  return merged_ ? merge_->value() : base_.value();
}
std::string_view BufferedTree::Cursor::LeafBytes(bool* all_inline) const {
  return merged_ ? merge_->LeafBytes(all_inline) : base_.LeafBytes(all_inline);
}
Status BufferedTree::Cursor::SkipLeaf(uint64_t* skipped) {
  return merged_ ? merge_->SkipLeaf(skipped) : base_.SkipLeaf(skipped);
}
void BufferedTree::Cursor::RejectInBuffer(BytesFilter may_match, uint64_t* rejected,
                                          size_t select_after) {
  reject_ = std::move(may_match);
  rejected_ = rejected;
  select_after_ = select_after;
}
Status BufferedTree::Cursor::Hidden(bool* hidden) {
  if (merged_) return merge_->Hidden(hidden);
  *hidden = false;
  return Status::OK();
}

}  // namespace mmdoc::index
