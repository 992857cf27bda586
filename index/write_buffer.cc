// index::WriteBuffer: generations of per-tree tables of versioned changes.
//
// A table is written by one thread and read by many without locks. Its
// memory is only ever appended to: keys, values and versions go to an arena
// that is freed with the table; the hash index is an open-addressing array
// of atomic pointers that grows by copying into a larger array (the old
// arrays are kept, since a reader may still be probing one); the arrays of
// distinct keys and of commit marks grow by segments that never move. The
// writer fills an object, then publishes the pointer or the size that makes
// it reachable with a release store; readers load those with acquire. What
// a reader reaches was complete before it was published and never changes.
//
// The sorted key list is built by readers (cursors), not by the writer,
// whose per-change cost is the point of the buffer: the first Iterator that
// needs keys the cached list lacks sorts the new ones and merges them in.
// The list is two sorted runs, a large base and a small tail, so that
// extending it after each small commit copies the tail, not every key; the
// tail is merged into the base when it outgrows about 4 sqrt(base) keys
// (amortized O(sqrt n) copies per key instead of O(n) per extension).
#include "index/write_buffer.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <iterator>
#include <new>

namespace mmdoc::index {

// A distinct key of a table: the newest change of the key, and the key's
// bytes right after this header. Lives in the table's arena.
struct BufferKeyNode {
  std::atomic<const BufferVersion*> newest;
  uint64_t hash;
  uint32_t size;
  std::string_view key() const { return {reinterpret_cast<const char*>(this + 1), size}; }
};

namespace {

// The smallest key filter, in keys (about 20 KiB).
constexpr uint64_t kMinFilterKeys = 16384;

// Appends [begin, end) to *out in bytewise order. Each key's first eight
// bytes go beside its pointer, so most comparisons of the sort read no key:
// the nodes lie at random in the arena, each a likely cache miss.
template <typename Keys>
void SortBytewise(const Keys& keys, size_t from, size_t to,
                  std::vector<const BufferKeyNode*>* out) {
  struct Keyed {
    uint64_t prefix;  // big-endian, zero-padded: orders as the bytes do
    const BufferKeyNode* node;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(to - from);
  for (size_t i = from; i < to; i++) {
    const BufferKeyNode* n = keys[i];
    const std::string_view k = n->key();
    uint64_t p = 0;
    for (size_t b = 0; b < 8; b++) p = (p << 8) | (b < k.size() ? static_cast<uint8_t>(k[b]) : 0);
    keyed.push_back(Keyed{p, n});
  }
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return a.node->key() < b.node->key();
  });
  for (const Keyed& k : keyed) out->push_back(k.node);
}

// The newest change of `node` with txid <= snapshot, or nullptr.
const BufferVersion* Visible(const BufferKeyNode* node, uint64_t snapshot) {
  const BufferVersion* v = node->newest.load(std::memory_order_acquire);
  while (v != nullptr && v->txid() > snapshot) v = v->older();
  return v;
}

// Memory for one table, freed all at once with it. Blocks start small (a
// generation holds a table per tree changed, most of them small) and double
// up to 64 KiB; an allocation of more than a quarter block gets a block of
// its own, so a large value wastes nothing.
class Arena {
 public:
  char* Allocate(size_t n, size_t align) {
    const size_t pad = (align - (reinterpret_cast<uintptr_t>(ptr_) & (align - 1))) & (align - 1);
    if (pad + n <= left_) {
      char* p = ptr_ + pad;
      ptr_ += pad + n;
      left_ -= pad + n;
      return p;
    }
    if (n > kMaxBlock / 4) return NewBlock(n);  // the current block goes on serving
    size_t size = std::max(next_block_, n);
    next_block_ = std::min(next_block_ * 2, kMaxBlock);
    char* p = NewBlock(size);  // operator new[] aligns for any scalar
    ptr_ = p + n;
    left_ = size - n;
    return p;
  }
  size_t bytes() const { return bytes_; }

 private:
  static constexpr size_t kMaxBlock = 64 << 10;
  char* NewBlock(size_t n) {
    blocks_.emplace_back(new char[n]);
    bytes_ += n;
    return blocks_.back().get();
  }
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* ptr_ = nullptr;
  size_t left_ = 0;
  size_t next_block_ = 4 << 10;
  size_t bytes_ = 0;
};

// An array that one thread appends to while others read the elements
// published so far. Elements live in segments that never move: segment 0
// holds kFirst elements, segment k >= 1 holds kFirst << (k - 1), so an
// index maps to its segment with one bit scan.
template <typename T>
class AppendArray {
 public:
  AppendArray() = default;
  ~AppendArray() {
    for (T* s : segs_) delete[] s;
  }
  AppendArray(const AppendArray&) = delete;
  AppendArray& operator=(const AppendArray&) = delete;

  // Elements [0, size()) may be read.
  size_t size() const { return size_.load(std::memory_order_acquire); }
  const T& operator[](size_t i) const {
    int k;
    size_t off;
    Locate(i, &k, &off);
    return segs_[k][off];
  }
  // Writer only.
  void Append(const T& v) {
    const size_t n = size_.load(std::memory_order_relaxed);
    int k;
    size_t off;
    Locate(n, &k, &off);
    if (segs_[k] == nullptr) {
      const size_t len = k == 0 ? kFirst : kFirst << (k - 1);
      segs_[k] = new T[len];
      bytes_ += len * sizeof(T);  // NOLINT(bugprone-sizeof-expression): T may be a pointer
    }
    segs_[k][off] = v;
    size_.store(n + 1, std::memory_order_release);
  }
  size_t bytes() const { return bytes_; }  // writer only

 private:
  static constexpr size_t kFirst = 8;
  static constexpr int kSegments = 48;  // kFirst << 46 elements: never reached
  static void Locate(size_t i, int* seg, size_t* off) {
    if (i < kFirst) {
      *seg = 0;
      *off = i;
      return;
    }
    const size_t q = i / kFirst;  // in [2^(k-1), 2^k) for segment k
    const int k = 64 - __builtin_clzll(q);
    *seg = k;
    *off = i - (kFirst << (k - 1));
  }
  // A reader reads segs_[k] only for an element published after segs_[k]
  // was set, so the plain pointers need no atomics.
  T* segs_[kSegments] = {};
  std::atomic<size_t> size_{0};
  size_t bytes_ = 0;
};

// One array of the hash index: open addressing, linear probing, never more
// than half full, so a probe ends at an empty slot.
// Beside each slot, a tag of its key's hash (0: empty): a probe for a key
// the table lacks (most point reads, most unique checks) reads tags, two
// bytes a slot, and follows no node pointer into the arena. A slot's tag is
// published after its node, so a reader that sees the tag sees the node.
struct HashSlots {
  explicit HashSlots(size_t n)
      : mask(n - 1),
        tag(new std::atomic<uint16_t>[n]),
        slot(new std::atomic<const BufferKeyNode*>[n]) {
    for (size_t i = 0; i < n; i++) {
      tag[i].store(0, std::memory_order_relaxed);
      slot[i].store(nullptr, std::memory_order_relaxed);
    }
  }
  static uint16_t Tag(uint64_t hash) { return static_cast<uint16_t>(hash >> 48) | 1; }
  const size_t mask;
  std::unique_ptr<std::atomic<uint16_t>[]> tag;
  std::unique_ptr<std::atomic<const BufferKeyNode*>[]> slot;
};

// The state of the table after one of its commits.
struct CommitMark {
  uint64_t txid;
  int64_t count_delta;  // cumulative, as of this commit
  uint64_t keys;        // distinct keys, as of this commit
};

// The sorted list's tail is merged into its base past this many keys.
size_t TailLimit(size_t base) {
  size_t r = 256;
  while (r * r < base * 16) r *= 2;  // about 4 sqrt(base)
  return r;
}

}  // namespace

struct BufferTable::Rep {
  // The newest change's key node of `key`, or nullptr. Any thread.
  const BufferKeyNode* Lookup(std::string_view key, uint64_t hash) const {
    const HashSlots* s = slots.load(std::memory_order_acquire);
    if (s == nullptr) return nullptr;
    const uint16_t want = HashSlots::Tag(hash);
    for (size_t i = hash & s->mask;; i = (i + 1) & s->mask) {
      const uint16_t t = s->tag[i].load(std::memory_order_acquire);
      if (t == 0) return nullptr;
      if (t != want) continue;
      const BufferKeyNode* n = s->slot[i].load(std::memory_order_acquire);
      if (n->hash == hash && n->key() == key) return n;
    }
  }

  // Adds a node to the hash index. Writer only.
  void Insert(const BufferKeyNode* node) {
    const HashSlots* s = slots.load(std::memory_order_relaxed);
    if (s == nullptr || (used + 1) * 2 > s->mask + 1) s = Grow(s);
    for (size_t i = node->hash & s->mask;; i = (i + 1) & s->mask) {
      if (s->tag[i].load(std::memory_order_relaxed) == 0) {
        s->slot[i].store(node, std::memory_order_relaxed);
        s->tag[i].store(HashSlots::Tag(node->hash), std::memory_order_release);
        used++;
        return;
      }
    }
  }

  // Before the first key (writer only): an array that holds `keys` keys
  // without growing.
  void Reserve(size_t keys) {
    assert(slots.load(std::memory_order_relaxed) == nullptr);
    size_t n = 16;
    while (n < keys * 2) n *= 2;
    Grow(nullptr, n);
  }

  // A twice larger array (or one of `size` slots) with every node,
  // published whole. The old one is kept: a reader may be probing it (it
  // finds every key of commits it can see there; only keys added after the
  // switch are missing from it).
  const HashSlots* Grow(const HashSlots* old, size_t size = 0) {
    const size_t n = size != 0 ? size : old == nullptr ? 16 : (old->mask + 1) * 2;
    auto g = std::make_unique<HashSlots>(n);
    const size_t count = keys.size();
    for (size_t k = 0; k < count; k++) {
      const BufferKeyNode* node = keys[k];
      size_t i = node->hash & g->mask;
      while (g->tag[i].load(std::memory_order_relaxed) != 0) i = (i + 1) & g->mask;
      g->slot[i].store(node, std::memory_order_relaxed);
      g->tag[i].store(HashSlots::Tag(node->hash), std::memory_order_relaxed);
    }
    slot_bytes += n * (sizeof(std::atomic<const BufferKeyNode*>) + sizeof(std::atomic<uint16_t>));
    slots.store(g.get(), std::memory_order_release);
    slot_arrays.push_back(std::move(g));
    return slot_arrays.back().get();
  }

  // The index of the first mark with txid > snapshot.
  size_t MarkAfter(uint64_t snapshot) const {
    size_t lo = 0, hi = marks.size();
    // The common case: a snapshot at or after the table's last commit.
    if (hi > 0 && marks[hi - 1].txid <= snapshot) return hi;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (marks[mid].txid <= snapshot) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  Arena arena;                                          // writer only
  std::atomic<const HashSlots*> slots{nullptr};         // the current array
  std::vector<std::unique_ptr<HashSlots>> slot_arrays;  // writer only: every array
  size_t used = 0;                                      // writer only: keys in the index
  size_t slot_bytes = 0;                                // writer only
  AppendArray<const BufferKeyNode*> keys;               // in order of first change
  AppendArray<CommitMark> marks;                        // in commit order
  int64_t live_delta = 0;                               // writer only: running count delta
  std::atomic<size_t> changes{0};
  std::atomic<size_t> bytes{0};
  std::atomic<uint64_t> last_txid{0};

  // The cached sorted key list. Readers extend it, one at a time.
  storage::Mutex sort_mu;
  std::shared_ptr<const SortedView> sorted MMDOC_GUARDED_BY(sort_mu);
};

struct BufferTable::SortedView {
  Comparator order = nullptr;
  size_t covered = 0;  // the runs hold keys[0, covered) of the table
  // A base run and a tail run, each sorted by `order`, disjoint; nullptr
  // for an empty run. Shared with later views that did not change them.
  std::shared_ptr<const std::vector<const BufferKeyNode*>> runs[kRuns];
};

// --- BufferTable ---

BufferTable::BufferTable(uint64_t first_txid, size_t expected_keys)
    : first_txid_(first_txid), rep_(new Rep) {
  if (expected_keys > 0) rep_->Reserve(expected_keys);
}
BufferTable::~BufferTable() = default;

uint64_t BufferTable::last_txid() const { return rep_->last_txid.load(std::memory_order_acquire); }
size_t BufferTable::keys() const { return rep_->keys.size(); }
size_t BufferTable::changes() const { return rep_->changes.load(std::memory_order_relaxed); }
size_t BufferTable::bytes() const { return rep_->bytes.load(std::memory_order_relaxed); }

const BufferVersion* BufferTable::Find(std::string_view key, uint64_t hash,
                                       uint64_t snapshot) const {
  const BufferKeyNode* n = rep_->Lookup(key, hash);
  return n == nullptr ? nullptr : Visible(n, snapshot);
}

void BufferTable::Prefetch(uint64_t hash) const {
  const HashSlots* s = rep_->slots.load(std::memory_order_acquire);
  if (s == nullptr) return;
  const size_t i = hash & s->mask;
  __builtin_prefetch(&s->tag[i]);
  __builtin_prefetch(&s->slot[i], /*rw=*/1);
}

int64_t BufferTable::CountDelta(uint64_t snapshot) const {
  const size_t i = rep_->MarkAfter(snapshot);
  return i == 0 ? 0 : rep_->marks[i - 1].count_delta;
}

void BufferTable::Add(uint64_t txid, std::string_view key, uint64_t hash, std::string_view value,
                      bool erased, bool was_live) {
  Rep& r = *rep_;
  assert(!key.empty() && key.size() <= kMaxKeySize && value.size() <= kMaxValueSize);
  assert(hash == KeyHash(key));
  auto* v = new (r.arena.Allocate(sizeof(BufferVersion), alignof(BufferVersion))) BufferVersion;
  v->txid_ = txid;
  v->erased_ = erased;
  if (!erased && !value.empty()) {
    char* p = r.arena.Allocate(value.size(), 1);
    std::memcpy(p, value.data(), value.size());
    v->value_ = p;
    v->value_size_ = static_cast<uint32_t>(value.size());
  }
  // The writer made every node, non-const, in its arena: it may change them.
  auto* node = const_cast<BufferKeyNode*>(r.Lookup(key, hash));
  if (node != nullptr) {
    v->older_ = node->newest.load(std::memory_order_relaxed);
    node->newest.store(v, std::memory_order_release);
  } else {
    char* mem = r.arena.Allocate(sizeof(BufferKeyNode) + key.size(), alignof(BufferKeyNode));
    node = new (mem) BufferKeyNode;
    node->newest.store(v, std::memory_order_relaxed);  // published by Insert and Append
    node->hash = hash;
    node->size = static_cast<uint32_t>(key.size());
    std::memcpy(mem + sizeof(BufferKeyNode), key.data(), key.size());
    r.Insert(node);  // first: Insert's Grow rehashes the keys array, without it
    r.keys.Append(node);
  }
  r.live_delta += (erased ? 0 : 1) - (was_live ? 1 : 0);
  // Writer only: a plain add, not a locked one that waits for the stores
  // above (each a likely cache miss) to finish.
  r.changes.store(r.changes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void BufferTable::EndCommit(uint64_t txid) {
  Rep& r = *rep_;
  const size_t keys = r.keys.size();
  r.marks.Append({txid, r.live_delta, keys});
  r.last_txid.store(txid, std::memory_order_release);
  // The sorted key list readers will build is counted too: a pointer a key.
  r.bytes.store(sizeof(Rep) + r.arena.bytes() + r.slot_bytes + r.keys.bytes() + r.marks.bytes() +
                    keys * sizeof(void*),
                std::memory_order_relaxed);
}

std::shared_ptr<const BufferTable::SortedView> BufferTable::Sorted(uint64_t snapshot,
                                                                   Comparator order) const {
  Rep& r = *rep_;
  const size_t m = r.MarkAfter(snapshot);
  if (m == 0) return nullptr;  // no commit of this table is visible
  const size_t needed = r.marks[m - 1].keys;
  storage::MutexLock l(&r.sort_mu);
  std::shared_ptr<const SortedView> cur = r.sorted;
  if (cur != nullptr && cur->order == order && cur->covered >= needed) return cur;

  // Extend to every key published so far, not just `needed`: the next
  // Iterator, at a newer snapshot, then finds the cache complete.
  auto less = [order](const BufferKeyNode* a, const BufferKeyNode* b) {
    return CompareKeys(order, a->key(), b->key()) < 0;
  };
  auto next = std::make_shared<SortedView>();
  next->order = order;
  if (cur != nullptr && cur->order == order) {
    next->covered = cur->covered;
    for (int i = 0; i < kRuns; i++) next->runs[i] = cur->runs[i];
  }
  const size_t upto = r.keys.size();
  std::vector<const BufferKeyNode*> fresh;
  fresh.reserve(upto - next->covered);
  if (order == nullptr) {
    SortBytewise(r.keys, next->covered, upto, &fresh);
  } else {
    for (size_t k = next->covered; k < upto; k++) fresh.push_back(r.keys[k]);
    std::sort(fresh.begin(), fresh.end(), less);
  }
  auto merge = [&less](const std::vector<const BufferKeyNode*>* a,
                       std::vector<const BufferKeyNode*>* b) {
    if (a == nullptr || a->empty()) return;
    std::vector<const BufferKeyNode*> out;
    out.reserve(a->size() + b->size());
    std::merge(a->begin(), a->end(), b->begin(), b->end(), std::back_inserter(out), less);
    b->swap(out);
  };
  merge(next->runs[1].get(), &fresh);  // fresh becomes the new tail
  const size_t base = next->runs[0] == nullptr ? 0 : next->runs[0]->size();
  if (fresh.size() > TailLimit(base)) {
    merge(next->runs[0].get(), &fresh);
    next->runs[0] = std::make_shared<const std::vector<const BufferKeyNode*>>(std::move(fresh));
    next->runs[1] = nullptr;
  } else {
    next->runs[1] = std::make_shared<const std::vector<const BufferKeyNode*>>(std::move(fresh));
  }
  next->covered = upto;
  r.sorted = next;
  return next;
}

bool BufferTable::Select(uint64_t snapshot, Comparator order,
                         const std::function<bool(std::string_view)>& may_match,
                         std::string_view after, size_t limit, std::vector<Entry>* out,
                         uint64_t* rejected) const {
  const Rep& r = *rep_;
  out->clear();
  *rejected = 0;
  const size_t m = r.MarkAfter(snapshot);
  const size_t n = m == 0 ? 0 : r.marks[m - 1].keys;  // keys of commits <= snapshot
  for (size_t i = 0; i < n; i++) {
    // A key's node, version and value lie together in the arena, in the
    // order of first change: fetch a few keys ahead.
    if (i + 4 < n) __builtin_prefetch(r.keys[i + 4]);
    const BufferKeyNode* node = r.keys[i];
    if (!after.empty() && CompareKeys(order, node->key(), after) <= 0) continue;
    const BufferVersion* v = Visible(node, snapshot);
    if (v == nullptr || v->erased()) continue;
    if (!may_match(v->value())) {
      ++*rejected;
      continue;
    }
    if (out->size() == limit) return false;
    out->push_back(Entry{node->key(), v});
  }
  std::sort(out->begin(), out->end(), [order](const Entry& a, const Entry& b) {
    return CompareKeys(order, a.key, b.key) < 0;
  });
  return true;
}

// --- BufferTable::Iterator ---
//
// The runs hold disjoint keys, so each run's position is simply where the
// current key would go in it (pos_), whichever way the iterator last
// moved: Next advances the current run and takes the smallest head, Prev
// takes the largest key before the positions. Keys without a change at the
// snapshot are stepped over.

BufferTable::Iterator::Iterator(const BufferTable* table, uint64_t snapshot, Comparator order)
    : table_(table), snapshot_(snapshot), order_(order) {}
BufferTable::Iterator::~Iterator() = default;

void BufferTable::Iterator::Take() {
  if (taken_) return;
  taken_ = true;
  view_ = table_->Sorted(snapshot_, order_);
}

std::string_view BufferTable::Iterator::key() const { return node_->key(); }

bool BufferTable::Iterator::Less(const BufferKeyNode* a, const BufferKeyNode* b) const {
  return CompareKeys(order_, a->key(), b->key()) < 0;
}

bool BufferTable::Iterator::PickForward() {
  node_ = nullptr;
  if (view_ == nullptr) return false;
  for (int r = 0; r < kRuns; r++) {
    const auto* run = view_->runs[r].get();
    if (run == nullptr || pos_[r] >= run->size()) continue;
    const BufferKeyNode* n = (*run)[pos_[r]];
    if (node_ == nullptr || Less(n, node_)) {
      node_ = n;
      cur_ = r;
    }
  }
  return node_ != nullptr;
}

bool BufferTable::Iterator::PickBackward() {
  node_ = nullptr;
  if (view_ == nullptr) return false;
  for (int r = 0; r < kRuns; r++) {
    const auto* run = view_->runs[r].get();
    if (run == nullptr || pos_[r] == 0) continue;
    const BufferKeyNode* n = (*run)[pos_[r] - 1];
    if (node_ == nullptr || Less(node_, n)) {
      node_ = n;
      cur_ = r;
    }
  }
  if (node_ == nullptr) return false;
  pos_[cur_]--;
  return true;
}

void BufferTable::Iterator::SettleForward() {
  // A merge walks every key: fetch the nodes and versions a few steps
  // ahead, as they lie at random in the arena.
  for (int r = 0; view_ != nullptr && r < kRuns; r++) {
    const auto* run = view_->runs[r].get();
    if (run == nullptr) continue;
    if (pos_[r] + 8 < run->size()) __builtin_prefetch((*run)[pos_[r] + 8]);
    if (pos_[r] + 4 < run->size())
      __builtin_prefetch((*run)[pos_[r] + 4]->newest.load(std::memory_order_relaxed));
  }
  while (PickForward()) {
    version_ = Visible(node_, snapshot_);
    if (version_ != nullptr) return;
    pos_[cur_]++;
  }
}

void BufferTable::Iterator::SettleBackward() {
  while (PickBackward()) {
    version_ = Visible(node_, snapshot_);
    if (version_ != nullptr) return;
  }
}

void BufferTable::Iterator::Seek(std::string_view target) {
  Take();
  if (view_ == nullptr) return;
  for (int r = 0; r < kRuns; r++) {
    const auto* run = view_->runs[r].get();
    if (run == nullptr) continue;
    pos_[r] =
        static_cast<size_t>(std::lower_bound(run->begin(), run->end(), target,
                                             [this](const BufferKeyNode* n, std::string_view t) {
                                               return CompareKeys(order_, n->key(), t) < 0;
                                             }) -
                            run->begin());
  }
  SettleForward();
}

void BufferTable::Iterator::SeekToFirst() {
  Take();
  for (size_t& p : pos_) p = 0;
  SettleForward();
}

void BufferTable::Iterator::SeekToLast() {
  Take();
  for (int r = 0; r < kRuns; r++) {
    const auto* run = view_ == nullptr ? nullptr : view_->runs[r].get();
    pos_[r] = run == nullptr ? 0 : run->size();
  }
  SettleBackward();
}

void BufferTable::Iterator::Next() {
  assert(Valid());
  pos_[cur_]++;
  SettleForward();
}

void BufferTable::Iterator::Prev() {
  assert(Valid());
  SettleBackward();
}

// --- BufferGeneration ---

namespace {
std::atomic<uint64_t> next_generation_id{1};
}  // namespace

BufferGeneration::BufferGeneration()
    : id_(next_generation_id.fetch_add(1, std::memory_order_relaxed)) {}

BufferGeneration::BufferGeneration(const BufferGeneration* previous) : BufferGeneration() {
  for (const auto& [name, table] : previous->Tables())
    expected_keys_.emplace_back(name, table->keys());
}
BufferGeneration::~BufferGeneration() = default;

const BufferTable* BufferGeneration::Find(std::string_view name) const {
  // A table made after the load is one a reader cannot see yet: its
  // changes are newer than any snapshot taken before it was listed.
  const size_t n = listed_count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; i++)
    if (listed_[i].first == name) return listed_[i].second;
  if (n < kListed) return nullptr;
  storage::MutexLock l(&mu_);
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

std::vector<std::pair<std::string, const BufferTable*>> BufferGeneration::Tables() const {
  storage::MutexLock l(&mu_);
  std::vector<std::pair<std::string, const BufferTable*>> out;
  out.reserve(tables_.size());
  for (const auto& [name, table] : tables_) out.emplace_back(name, table.get());
  return out;
}

BufferTable* BufferGeneration::TableForWrite(std::string_view name, uint64_t txid) {
  for (const auto& [n, t] : written_)
    if (n == name) return t;
  BufferTable* p;
  {
    storage::MutexLock l(&mu_);
    auto it = tables_.find(name);
    if (it != tables_.end()) {
      p = it->second.get();
    } else {
      size_t expected = 0;
      for (const auto& [n, k] : expected_keys_)
        if (n == name) expected = k;
      std::unique_ptr<BufferTable> t(new BufferTable(txid, expected));
      p = t.get();
      tables_.emplace(std::string(name), std::move(t));
      const size_t n = listed_count_.load(std::memory_order_relaxed);
      if (n < kListed) {
        listed_[n] = {std::string(name), p};
        listed_count_.store(n + 1, std::memory_order_release);
      }
    }
  }
  if (written_.size() < 8) written_.emplace_back(std::string(name), p);  // a commit's few trees
  return p;
}

void BufferGeneration::Publish(uint64_t txid, const std::vector<BufferChange>& changes) {
  assert(!frozen());
  assert(txid >= last_txid());
  std::vector<BufferTable*>& touched = touched_;  // a commit changes few trees
  touched.clear();
  BufferTable* table = nullptr;
  std::string_view name;
  for (const BufferChange& c : changes) {
    if (table == nullptr || c.tree != name) {
      table = TableForWrite(c.tree, txid);
      name = c.tree;
      if (std::find(touched.begin(), touched.end(), table) == touched.end()) {
        touched.push_back(table);
      }
    }
    table->Add(txid, c.key, c.hash != 0 ? c.hash : KeyHash(c.key), c.value, c.erased, c.was_live);
  }
  for (BufferTable* t : touched) {
    const size_t before = t->bytes();
    t->EndCommit(txid);
    bytes_.store(bytes() + t->bytes() - before, std::memory_order_relaxed);  // writer only
  }
  if (first_txid_.load(std::memory_order_relaxed) == 0) {
    first_txid_.store(txid, std::memory_order_release);
  }
  last_txid_.store(txid, std::memory_order_release);
}

// --- BufferView ---

std::vector<const BufferTable*> BufferView::Tables(std::string_view name) const {
  std::vector<const BufferTable*> out;
  Tables(name, &out);
  return out;
}

void BufferView::Tables(std::string_view name, std::vector<const BufferTable*>* out) const {
  out->clear();
  for (const auto& g : generations) {
    const BufferTable* t = g->Find(name);
    if (t != nullptr && t->first_txid() <= snapshot) out->push_back(t);
  }
}

const BufferVersion* BufferView::Find(std::string_view name, std::string_view key,
                                      uint64_t hash) const {
  for (const auto& g : generations) {
    const BufferTable* t = g->Find(name);
    if (t == nullptr) continue;
    const BufferVersion* v = t->Find(key, hash, snapshot);
    if (v != nullptr) return v;
  }
  return nullptr;
}

int64_t BufferView::CountDelta(std::string_view name) const {
  int64_t d = 0;
  for (const auto& g : generations) {
    const BufferTable* t = g->Find(name);
    if (t != nullptr) d += t->CountDelta(snapshot);
  }
  return d;
}

// --- WriteBuffer ---

WriteBuffer::WriteBuffer() : active_(std::make_shared<BufferGeneration>()) {}
WriteBuffer::~WriteBuffer() = default;

size_t WriteBuffer::Publish(uint64_t txid, const std::vector<BufferChange>& changes) {
  assert(txid > 0 && txid >= last_txid());
  BufferGeneration* g;
  {
    storage::MutexLock l(&mu_);
    g = active_.get();  // only this thread replaces it (Freeze)
  }
  if (!changes.empty()) g->Publish(txid, changes);
  last_txid_.store(txid, std::memory_order_release);
  return g->bytes();
}

std::shared_ptr<const BufferGeneration> WriteBuffer::Freeze() {
  storage::MutexLock l(&mu_);
  if (active_->empty()) return nullptr;
  active_->Freeze();
  frozen_.insert(frozen_.begin(), active_);
  active_ = std::make_shared<BufferGeneration>(active_.get());
  return frozen_.front();
}

Status WriteBuffer::Drop(const BufferGeneration* generation) {
  storage::MutexLock l(&mu_);
  for (auto it = frozen_.begin(); it != frozen_.end(); ++it) {
    if (it->get() == generation) {
      frozen_.erase(it);
      return Status::OK();
    }
  }
  return Status::InvalidArgument("WriteBuffer::Drop: not a frozen generation of this buffer");
}

BufferView WriteBuffer::View(uint64_t snapshot) const {
  BufferView v;
  View(snapshot, &v);
  return v;
}

void WriteBuffer::View(uint64_t snapshot, BufferView* out) const {
  out->snapshot = snapshot;
  out->generations.clear();
  storage::MutexLock l(&mu_);
  out->generations.reserve(frozen_.size() + 1);
  auto add = [&](const std::shared_ptr<BufferGeneration>& g) {
    const uint64_t first = g->first_txid();
    if (first != 0 && first <= snapshot) out->generations.push_back(g);
  };
  add(active_);
  for (const auto& g : frozen_) add(g);
}

std::vector<std::shared_ptr<const BufferGeneration>> WriteBuffer::Frozen() const {
  storage::MutexLock l(&mu_);
  return {frozen_.rbegin(), frozen_.rend()};
}

size_t WriteBuffer::active_bytes() const {
  storage::MutexLock l(&mu_);
  return active_->bytes();
}

TreeFilters WriteBuffer::FiltersForWrite(std::string_view name, uint64_t keys, bool* started) {
  storage::MutexLock l(&mu_);
  auto it = filters_.find(name);
  if (it == filters_.end()) it = filters_.emplace(std::string(name), TreeFilters()).first;
  TreeFilters& f = it->second;
  *started = f.building == nullptr && (f.ready == nullptr || f.ready->full());
  if (*started) {
    // Room for the tree to double; a full filter is started again larger.
    uint64_t capacity = std::max<uint64_t>(kMinFilterKeys, 2 * keys);
    if (f.ready != nullptr) capacity = std::max(capacity, 2 * f.ready->added());
    f.building = std::make_shared<KeyFilter>(capacity);
    filters_version_.fetch_add(1, std::memory_order_release);
  }
  TreeFilters out = f;
  out.version = filters_version_.load(std::memory_order_relaxed);
  return out;
}

TreeFilters WriteBuffer::Filters(std::string_view name) const {
  storage::MutexLock l(&mu_);
  auto it = filters_.find(name);
  return it == filters_.end() ? TreeFilters() : it->second;
}

std::vector<std::pair<std::string, std::shared_ptr<KeyFilter>>> WriteBuffer::BuildingFilters()
    const {
  storage::MutexLock l(&mu_);
  std::vector<std::pair<std::string, std::shared_ptr<KeyFilter>>> out;
  for (const auto& [name, f] : filters_)
    if (f.building != nullptr) out.emplace_back(name, f.building);
  return out;
}

bool WriteBuffer::FinishFilter(const std::string& name, const KeyFilter* f, uint64_t at) {
  storage::MutexLock l(&mu_);
  auto it = filters_.find(name);
  if (it == filters_.end() || it->second.building.get() != f) return false;
  it->second.ready = std::move(it->second.building);
  it->second.ready_at = at;
  filters_version_.fetch_add(1, std::memory_order_release);
  return true;
}

void WriteBuffer::DropFilters() {
  storage::MutexLock l(&mu_);
  filters_.clear();
  filters_version_.fetch_add(1, std::memory_order_release);
}

size_t WriteBuffer::filter_bytes() const {
  storage::MutexLock l(&mu_);
  size_t n = 0;
  for (const auto& [name, f] : filters_) {
    if (f.ready != nullptr) n += f.ready->bytes();
    if (f.building != nullptr) n += f.building->bytes();
  }
  return n;
}

size_t WriteBuffer::filters_ready() const {
  storage::MutexLock l(&mu_);
  size_t n = 0;
  for (const auto& [name, f] : filters_) n += f.ready != nullptr ? 1 : 0;
  return n;
}

}  // namespace mmdoc::index
