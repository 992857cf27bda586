#include "tests/support/test_env.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "mmdoc/options.h"

namespace mmdoc::test {

uint64_t Scale() {
  const char* s = std::getenv("MMDOC_TEST_SCALE");
  if (s == nullptr || *s == '\0') return 1;
  unsigned long long v = std::strtoull(s, nullptr, 10);
  return v == 0 ? 1 : v;
}

uint64_t DefaultWriteBuffer() {
  const char* s = std::getenv("MMDOC_WRITE_BUFFER");
  if (s == nullptr) return kDefaultWriteBufferSize;
  return std::strtoull(s, nullptr, 10);
}

uint64_t Seed(const std::string& what) {
  uint64_t seed;
  const char* s = std::getenv("MMDOC_TEST_SEED");
  if (s != nullptr && *s != '\0') {
    seed = std::strtoull(s, nullptr, 10);
  } else {
    std::random_device rd;
    seed = (uint64_t{rd()} << 32) ^ rd();
  }
  std::fprintf(stderr, "seed for %s: %llu (replay with MMDOC_TEST_SEED=%llu)\n", what.c_str(),
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/mmdoc-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

RamDir::RamDir() {
  std::string t = "/dev/shm/mmdoc-test-XXXXXX";
  if (mkdtemp(t.data()) != nullptr) {
    path_ = t;
  } else {
    fallback_ = std::make_unique<TempDir>();
    path_ = fallback_->path();
  }
}

RamDir::~RamDir() {
  if (!fallback_) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

std::string BuildDir() {
  const char* s = std::getenv("MMDOC_BUILD_DIR");
  return s ? s : ".";
}

}  // namespace mmdoc::test
