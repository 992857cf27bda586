#include "engine/key_pairs.h"

#include <algorithm>
#include <cstring>

namespace mmdoc {

char* KeyPairs::Room(size_t n) {
  if (n > kBlockSize / 4) {
    large_.push_back(std::unique_ptr<char[]>(new char[n]));
    large_bytes_ += n;
    return large_.back().get();
  }
  if (blocks_.empty() || kBlockSize - used_ < n) {
    blocks_.push_back(std::unique_ptr<char[]>(new char[kBlockSize]));
    used_ = 0;
  }
  char* p = blocks_.back().get() + used_;
  used_ += n;
  return p;
}

void KeyPairs::Add(std::string_view key, std::string_view id, bool id_in_key) {
  const size_t n = key.size() + (id_in_key ? 0 : id.size());
  char* p = Room(n);
  std::memcpy(p, key.data(), key.size());
  if (!id_in_key) std::memcpy(p + key.size(), id.data(), id.size());
  refs_.push_back(Ref{p, static_cast<uint32_t>(key.size()),
                      static_cast<uint32_t>(id.size()) | (id_in_key ? kIdInKey : 0)});
}

std::string_view KeyPairs::IdOf(const Ref& r) {
  const uint32_t len = r.id & ~kIdInKey;
  if ((r.id & kIdInKey) != 0) return {r.bytes + r.key_len - len, len};
  return {r.bytes + r.key_len, len};
}

void KeyPairs::Sort() {
  std::sort(refs_.begin(), refs_.end(), [](const Ref& a, const Ref& b) {
    const int c =
        std::string_view(a.bytes, a.key_len).compare(std::string_view(b.bytes, b.key_len));
    return c != 0 ? c < 0 : IdOf(a) < IdOf(b);
  });
}

}  // namespace mmdoc
