// mmdoc-idhashproto: what a hash index on a tree's keys would save a point
// read, measured before building one (docs/write-path.md, "A hash index on
// _id: the prototype").
//
// An update or delete at batch 1 reads its document first, and that read
// (a B+tree descent: a branch or two, then a binary search of a leaf, each
// probe a likely cache miss) costs about what LMDB's whole update does. A
// hash index that maps a key's hash to its leaf and slot would go straight
// to the cell: one probe of the index, the leaf's header and slot, the
// cell. This program measures both ways on the same tree, in one process,
// alternating round by round, so that the machine's swings cancel:
//
//   descent  BTree::Get, then a copy of the value (as DB::Get copies)
//   hint     the index probed for the key's hash; the page fetched through
//            the txn (the same checked fetch the descent uses), checked to
//            be a leaf with that slot, the slot's key compared to the key;
//            then the same copy. A miss or a mismatch falls back to the
//            descent (counted).
//   lmdb     mdb_get of the same keys and values in an LMDB environment
//            (MDB_NOSYNC, loaded the same way), then the same copy: the
//            peer's read, as a yardstick.
//
// The tree: --entries keys of the seed's _id shape (36-character GUIDs)
// with --value-bytes values, inserted in random order 1000 per write txn
// over storage::Pager (Durability::kNone). The index is built once from a
// scan of the final tree: it is the best case, with no upkeep measured (a
// real one must follow every leaf a merge rewrites).
//
//   mmdoc-idhashproto [--entries 1000000] [--value-bytes 140]
//                     [--lookups 1000000] [--rounds 10] [--dir /tmp]
#include <lmdb.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/micro/proto_util.h"
#include "index/btree.h"
#include "index/btree_page.h"
#include "index/key_hash.h"
#include "storage/pager.h"

namespace {

namespace proto = mmdoc::proto;
namespace storage = mmdoc::storage;
namespace index = mmdoc::index;
namespace node = mmdoc::index::node;
using mmdoc::Status;

// One slot of the index: the key's hash (0: empty), its leaf and slot.
struct Hint {
  uint64_t hash = 0;
  uint64_t page = 0;
  uint32_t slot = 0;
};

class HintIndex {
 public:
  explicit HintIndex(size_t keys) {
    size_t n = 16;
    while (n < keys * 2) n *= 2;
    slots_.resize(n);
    mask_ = n - 1;
  }
  static uint64_t Hash(std::string_view key) { return index::KeyHash(key) | 1; }
  void Add(uint64_t hash, uint64_t page, uint32_t slot) {
    size_t i = hash & mask_;
    while (slots_[i].hash != 0) i = (i + 1) & mask_;
    slots_[i] = Hint{hash, page, slot};
  }
  // The first hint with this hash, or nullptr. (A second key with the same
  // 64-bit hash would need the next slots too; at 1M keys there is none.)
  const Hint* Find(uint64_t hash) const {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].hash == hash) return &slots_[i];
      if (slots_[i].hash == 0) return nullptr;
    }
  }
  size_t bytes() const { return slots_.size() * sizeof(Hint); }

 private:
  std::vector<Hint> slots_;
  size_t mask_ = 0;
};

// The value of `key` at its hinted leaf and slot, checked as the descent
// checks a leaf; false when the hint does not lead to the key.
bool ReadAtHint(storage::Txn* txn, const Hint& h, std::string_view key, std::string_view* value) {
  const uint8_t* p;
  if (!txn->Get(h.page, &p).ok()) return false;
  const uint32_t ps = txn->page_size();
  if (node::Type(p) != storage::PageType::kLeaf || h.slot >= node::Count(p)) return false;
  const uint32_t off = node::Slot(p, h.slot);
  if (off < node::Upper(p) || off + node::kLeafCellHeader > ps) return false;
  const uint8_t* c = p + off;
  const uint32_t k = node::LeafKeyLen(c);
  const uint32_t v = node::LeafValueLen(c);
  if ((node::LeafFlags(c) & node::kCellOverflow) != 0) return false;  // not in this proto
  if (off + node::kLeafCellHeader + k + v > ps) return false;
  if (std::string_view(reinterpret_cast<const char*>(c + node::kLeafCellHeader), k) != key)
    return false;
  *value = std::string_view(reinterpret_cast<const char*>(c + node::kLeafCellHeader + k), v);
  return true;
}

struct Args {
  uint64_t entries = 1000000;
  uint64_t value_bytes = 140;
  uint64_t lookups = 1000000;
  int rounds = 10;
  std::string dir = "/tmp";
};

Args Parse(int argc, char** argv) {
  Args a;
  if (argc % 2 == 0) {
    std::fprintf(stderr, "mmdoc-idhashproto: %s needs a value\n", argv[argc - 1]);
    std::exit(2);
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const char* v = argv[i + 1];
    if (f == "--entries")
      a.entries = std::strtoull(v, nullptr, 10);
    else if (f == "--value-bytes")
      a.value_bytes = std::strtoull(v, nullptr, 10);
    else if (f == "--lookups")
      a.lookups = std::strtoull(v, nullptr, 10);
    else if (f == "--rounds")
      a.rounds = std::atoi(v);
    else if (f == "--dir")
      a.dir = v;
    else {
      std::fprintf(stderr, "mmdoc-idhashproto: unknown flag %s\n", f.c_str());
      std::exit(2);
    }
  }
  if (a.entries == 0 || a.lookups == 0 || a.rounds <= 0) {
    std::fprintf(stderr, "mmdoc-idhashproto: --entries, --lookups and --rounds must be > 0\n");
    std::exit(2);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  proto::program = "mmdoc-idhashproto";
  const Args a = Parse(argc, argv);
  std::string dir = a.dir + "/mmdoc-idhashproto-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  std::mt19937_64 rng(7);
  std::vector<std::string> keys(a.entries);
  for (auto& k : keys) k = proto::Guid(rng);
  const std::string value = proto::RandomBytes(rng, a.value_bytes);

  storage::PagerOptions o;
  auto opened = storage::Pager::Open(dir + "/proto.mmdb", o);
  proto::Check(opened.status(), "Pager::Open");
  std::unique_ptr<storage::Pager> pager = std::move(opened.value());
  proto::Check(pager->Recover([](uint64_t, std::string_view) { return Status::OK(); }), "Recover");
  const double load_start = proto::Now();
  for (size_t i = 0; i < keys.size(); i += 1000) {
    auto w = pager->BeginWrite();
    proto::Check(w.status(), "BeginWrite");
    storage::Txn* txn = w.value().get();
    index::BTree t(txn, txn->root(0));
    for (size_t j = i; j < std::min(keys.size(), i + 1000); j++) {
      proto::Check(t.Put(keys[j], value), "Put");
    }
    txn->set_root(0, t.root());
    proto::Check(txn->Commit("", mmdoc::Durability::kNone), "Commit");
  }
  std::printf("loaded %" PRIu64 " entries in %.1f s\n", a.entries, proto::Now() - load_start);

  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  MDB_txn* lmdb_read = nullptr;
  {
    int rc = mdb_env_create(&env);
    if (rc == 0) rc = mdb_env_set_mapsize(env, size_t{16} << 30);
    if (rc == 0) rc = mdb_env_open(env, dir.c_str(), MDB_NOSYNC, 0644);
    for (size_t i = 0; rc == 0 && i < keys.size(); i += 1000) {
      MDB_txn* w;
      rc = mdb_txn_begin(env, nullptr, 0, &w);
      if (rc == 0) rc = mdb_dbi_open(w, nullptr, 0, &dbi);
      for (size_t j = i; rc == 0 && j < std::min(keys.size(), i + 1000); j++) {
        MDB_val k{keys[j].size(), keys[j].data()};
        MDB_val v{value.size(), const_cast<char*>(value.data())};
        rc = mdb_put(w, dbi, &k, &v, 0);
      }
      if (rc == 0) rc = mdb_txn_commit(w);
    }
    if (rc == 0) rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &lmdb_read);
    if (rc != 0) {
      std::fprintf(stderr, "mmdoc-idhashproto: lmdb: %s\n", mdb_strerror(rc));
      return 1;
    }
  }

  auto r = pager->BeginRead();
  proto::Check(r.status(), "BeginRead");
  storage::Txn* txn = r.value().get();
  index::BTree tree(txn, txn->root(0));

  // The index, from a scan: each key's leaf (the page its cell lies in) and
  // slot (found in that leaf's slot array).
  const uint8_t* first;
  proto::Check(txn->Get(2, &first), "page 2");
  const uint8_t* base = first - 2 * uint64_t{txn->page_size()};  // one map for the file
  const double build_start = proto::Now();
  HintIndex hints(keys.size());
  {
    index::BTree::Cursor c(&tree);
    proto::Check(c.SeekToFirst(), "SeekToFirst");
    uint64_t n = 0;
    while (c.Valid()) {
      const auto* cell = reinterpret_cast<const uint8_t*>(c.key().data()) - node::kLeafCellHeader;
      const uint64_t page = static_cast<uint64_t>(cell - base) / txn->page_size();
      const uint8_t* p = base + page * txn->page_size();
      const uint32_t off = static_cast<uint32_t>(cell - p);
      uint32_t slot = 0;
      while (slot < node::Count(p) && node::Slot(p, slot) != off) slot++;
      if (slot == node::Count(p)) {
        std::fprintf(stderr, "mmdoc-idhashproto: no slot for a cell of page %" PRIu64 "\n", page);
        return 1;
      }
      hints.Add(HintIndex::Hash(c.key()), page, slot);
      n++;
      proto::Check(c.Next(), "Next");
    }
    if (n != keys.size()) {
      std::fprintf(stderr, "mmdoc-idhashproto: scanned %" PRIu64 " keys\n", n);
      return 1;
    }
  }
  std::printf("hint index: %.1f MiB (%.1f bytes a key), built from a scan in %.2f s\n",
              static_cast<double>(hints.bytes()) / (1 << 20),
              static_cast<double>(hints.bytes()) / static_cast<double>(keys.size()),
              proto::Now() - build_start);

  std::vector<uint32_t> order(a.lookups);
  std::string copy;
  uint64_t checksum = 0;
  uint64_t fallbacks = 0;
  std::vector<double> ratios;       // descent / hint
  std::vector<double> lmdb_ratios;  // lmdb / hint
  std::printf("round  descent ns/get  hint ns/get  lmdb ns/get  descent/hint  lmdb/hint\n");
  for (int round = 0; round < a.rounds; round++) {
    for (auto& i : order) i = static_cast<uint32_t>(rng() % keys.size());
    double ns[3];
    for (int k = 0; k < 3; k++) {
      const int way = (k + round) % 3;  // 0 descent, 1 hint, 2 lmdb; the first rotates
      const double start = proto::Now();
      for (uint32_t i : order) {
        const std::string& key = keys[i];
        std::string_view v;
        if (way == 2) {
          MDB_val mk{key.size(), const_cast<char*>(key.data())};
          MDB_val mv;
          if (mdb_get(lmdb_read, dbi, &mk, &mv) != 0) {
            std::fprintf(stderr, "mmdoc-idhashproto: lmdb get failed\n");
            return 1;
          }
          v = std::string_view(static_cast<const char*>(mv.mv_data), mv.mv_size);
        } else {
          const Hint* h = way == 1 ? hints.Find(HintIndex::Hash(key)) : nullptr;
          if (h == nullptr || !ReadAtHint(txn, *h, key, &v)) {
            if (way == 1) fallbacks++;
            proto::Check(tree.Get(key, &v), "Get");
          }
        }
        copy.assign(v);
        checksum += static_cast<unsigned char>(copy[copy.size() / 2]);
      }
      ns[way] = (proto::Now() - start) * 1e9 / static_cast<double>(a.lookups);
    }
    ratios.push_back(ns[0] / ns[1]);
    lmdb_ratios.push_back(ns[2] / ns[1]);
    std::printf("%5d  %14.0f  %11.0f  %11.0f  %12.2f  %9.2f\n", round + 1, ns[0], ns[1], ns[2],
                ns[0] / ns[1], ns[2] / ns[1]);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(lmdb_ratios.begin(), lmdb_ratios.end());
  std::printf(
      "descent/hint: median %.2f, range %.2f-%.2f; lmdb/hint: median %.2f, range "
      "%.2f-%.2f; %d rounds, %" PRIu64 " fallbacks (checksum %" PRIu64 ")\n",
      ratios[ratios.size() / 2], ratios.front(), ratios.back(), lmdb_ratios[lmdb_ratios.size() / 2],
      lmdb_ratios.front(), lmdb_ratios.back(), a.rounds, fallbacks, checksum);
  mdb_txn_abort(lmdb_read);
  mdb_env_close(env);
  r.value().reset();
  pager.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
