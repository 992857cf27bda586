#include "tests/support/test_env.h"

#include <fcntl.h>
#include <unistd.h>

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

int StartTool(const std::vector<std::string>& args, const std::string& in, const std::string& out,
              const std::string& err) {
  std::vector<std::string> argv_s = {BuildDir() + "/tools/mmdoc"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int i = open(in.c_str(), O_RDONLY);
  const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (i < 0 || o < 0 || e < 0) _exit(126);
  dup2(i, 0);
  dup2(o, 1);
  dup2(e, 2);
  execv(argv[0], argv.data());
  _exit(127);
}

}  // namespace mmdoc::test
