// index::Catalog: the tree of named trees (see index/catalog.h).
#include "index/catalog.h"

#include <algorithm>

#include "storage/coding.h"

namespace mmdoc::index {

using storage::PageId;

namespace {

// A tree's name for a message: names hold NUL and binary bytes (an index's
// "i:" COLL NUL FIELD, a run's sequence number), which would cut a C
// string short; they are shown as \xNN.
std::string Shown(std::string_view name) {
  std::string out;
  for (const char ch : name) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b < 0x7f) {
      out.push_back(ch);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 15]);
    }
  }
  return out;
}

constexpr size_t kEntryRootSize = 8;  // u64 root, little-endian (catalog.h)

std::string MakeEntry(PageId root, std::string_view meta) {
  std::string e;
  e.reserve(kEntryRootSize + meta.size());
  storage::PutFixed64(&e, root);
  e.append(meta.data(), meta.size());
  return e;
}

// Splits a catalog entry into root and metadata.
Status ParseEntry(std::string_view name, std::string_view entry, PageId* root,
                  std::string_view* meta) {
  if (entry.size() < kEntryRootSize) return Status::Corruption("catalog entry too short", name);
  *root = storage::DecodeFixed64(entry.data());
  if (meta) *meta = entry.substr(kEntryRootSize);
  return Status::OK();
}

Status NoSuchTree(std::string_view name) { return Status::NotFound("no such tree", name); }

}  // namespace

Catalog::Catalog(storage::Txn* txn, const KeyCodec* codec)
    : txn_(txn), codec_(codec), tree_(txn, txn->root(kCatalogRootSlot)) {}

std::unique_ptr<BTree> Catalog::MakeTree(PageId root, Comparator cmp) const {
  if (cmp == nullptr && codec_ != nullptr) return std::make_unique<BTree>(txn_, root, *codec_);
  return std::make_unique<BTree>(txn_, root, cmp);
}

Catalog::~Catalog() = default;

Status Catalog::Create(std::string_view name, std::string_view meta, Comparator cmp) {
  Status s = tree_.Put(name, MakeEntry(0, meta), PutMode::kInsert);
  if (s.IsAlreadyExists()) return Status::AlreadyExists("tree already exists", name);
  MMDOC_RETURN_IF_ERROR(s);
  open_[std::string(name)] = MakeTree(0, cmp);
  return Status::OK();
}

Status Catalog::Open(std::string_view name, BTree** tree, Comparator cmp) {
  auto it = open_.find(name);
  if (it != open_.end()) {
    *tree = it->second.get();
    return Status::OK();
  }
  std::string_view entry;
  Status s = tree_.Get(name, &entry);
  if (s.IsNotFound()) return NoSuchTree(name);
  MMDOC_RETURN_IF_ERROR(s);
  PageId root;
  MMDOC_RETURN_IF_ERROR(ParseEntry(name, entry, &root, nullptr));
  auto t = MakeTree(root, cmp);
  *tree = t.get();
  open_.emplace(std::string(name), std::move(t));
  return Status::OK();
}

BTree* Catalog::Adopt(std::string_view name, PageId root, Comparator cmp) {
  auto it = open_.find(name);
  if (it != open_.end()) return it->second.get();
  auto t = MakeTree(root, cmp);
  BTree* p = t.get();
  open_.emplace(std::string(name), std::move(t));
  return p;
}

Status Catalog::Drop(std::string_view name) {
  std::string_view entry;
  Status s = tree_.Get(name, &entry);
  if (s.IsNotFound()) return NoSuchTree(name);
  MMDOC_RETURN_IF_ERROR(s);
  PageId root;
  MMDOC_RETURN_IF_ERROR(ParseEntry(name, entry, &root, nullptr));
  auto it = open_.find(name);
  if (it != open_.end()) root = it->second->root();
  BTree t(txn_, root);
  MMDOC_RETURN_IF_ERROR(t.Drop());
  MMDOC_RETURN_IF_ERROR(tree_.Delete(name));
  if (it != open_.end()) open_.erase(it);
  pending_meta_.erase(std::remove_if(pending_meta_.begin(), pending_meta_.end(),
                                     [name](const auto& p) { return p.first == name; }),
                      pending_meta_.end());
  return Status::OK();
}

std::string* Catalog::PendingMeta(std::string_view name) {
  for (auto& [n, m] : pending_meta_)
    if (n == name) return &m;
  return nullptr;
}

Status Catalog::GetMeta(std::string_view name, std::string* meta) {
  if (const std::string* pending = PendingMeta(name)) {
    *meta = *pending;
    return Status::OK();
  }
  std::string_view entry, m;
  Status s = tree_.Get(name, &entry);
  if (s.IsNotFound()) return NoSuchTree(name);
  MMDOC_RETURN_IF_ERROR(s);
  PageId root;
  MMDOC_RETURN_IF_ERROR(ParseEntry(name, entry, &root, &m));
  meta->assign(m.data(), m.size());
  return Status::OK();
}

Status Catalog::SetMeta(std::string_view name, std::string_view meta) {
  if (open_.find(name) == open_.end()) {  // an open tree has an entry
    std::string_view entry;
    Status s = tree_.Get(name, &entry);
    if (s.IsNotFound()) return NoSuchTree(name);
    MMDOC_RETURN_IF_ERROR(s);
  }
  if (std::string* pending = PendingMeta(name)) {
    pending->assign(meta);
    return Status::OK();
  }
  pending_meta_.emplace_back(std::string(name), std::string(meta));
  return Status::OK();
}

Status Catalog::FlushEntry(std::string_view name, const PageId* root, const std::string* meta) {
  std::string_view entry, old_meta;
  MMDOC_RETURN_IF_ERROR(tree_.Get(name, &entry));
  PageId old_root;
  MMDOC_RETURN_IF_ERROR(ParseEntry(name, entry, &old_root, &old_meta));
  const PageId new_root = root != nullptr ? *root : old_root;
  if (new_root == old_root && (meta == nullptr || *meta == old_meta)) return Status::OK();
  // The new entry is built before the Put: `entry` points into the page.
  entry_buf_.clear();
  storage::PutFixed64(&entry_buf_, new_root);
  if (meta != nullptr) {
    entry_buf_.append(*meta);
  } else {
    entry_buf_.append(old_meta.data(), old_meta.size());
  }
  return tree_.Put(name, entry_buf_, PutMode::kUpdate);
}

Status Catalog::List(std::string_view prefix, std::vector<std::string>* names) {
  names->clear();
  BTree::Cursor c(&tree_);
  Status s = prefix.empty() ? c.SeekToFirst() : c.Seek(prefix);
  for (; s.ok() && c.Valid(); s = c.Next()) {
    if (c.key().substr(0, prefix.size()) != prefix) break;
    names->emplace_back(c.key());
  }
  return s;
}

Status Catalog::Flush() {
  // One Put per changed entry: the root of each open tree and the metadata
  // SetMeta gave, together.
  for (auto& [name, tree] : open_) {
    const PageId root = tree->root();
    MMDOC_RETURN_IF_ERROR(FlushEntry(name, &root, PendingMeta(name)));
  }
  for (const auto& [name, meta] : pending_meta_) {
    if (open_.find(name) == open_.end()) MMDOC_RETURN_IF_ERROR(FlushEntry(name, nullptr, &meta));
  }
  pending_meta_.clear();
  txn_->set_root(kCatalogRootSlot, tree_.root());
  return Status::OK();
}

void Catalog::Rebind(storage::Txn* txn) {
  txn_ = txn;
  tree_.Rebind(txn);
  for (auto& [name, tree] : open_) tree->Rebind(txn);
}

Status Catalog::Verify(std::vector<PageId>* pages) { return Verify(pages, nullptr); }

Status Catalog::Verify(std::vector<PageId>* pages, const ComparatorFor& comparator_for) {
  Status s = tree_.Verify(pages, nullptr);
  if (!s.ok()) return Status::Corruption("catalog", s.message());
  BTree::Cursor c(&tree_);
  for (s = c.SeekToFirst(); s.ok() && c.Valid(); s = c.Next()) {
    std::string_view name = c.key(), meta;
    PageId root;
    MMDOC_RETURN_IF_ERROR(ParseEntry(name, c.value(), &root, &meta));
    std::unique_ptr<BTree> t;
    auto it = open_.find(name);
    if (it != open_.end()) {
      t = std::make_unique<BTree>(txn_, it->second->root(), it->second->comparator());
    } else {
      t = MakeTree(root, comparator_for ? comparator_for(name, meta) : nullptr);
    }
    Status ts = t->Verify(pages, nullptr);
    if (!ts.ok()) {
      return ts.IsCorruption() ? Status::Corruption("tree " + Shown(name), ts.message()) : ts;
    }
  }
  return s;
}

}  // namespace mmdoc::index
