// index::KeyFilter: never "absent" for a key added, rarely "maybe" for one
// that was not, and no key lost to adds racing from two threads.
#include "index/key_filter.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_env.h"

namespace mmdoc::index {
namespace {

std::string Key(std::mt19937_64& rng) {
  std::string k(1 + rng() % 40, '\0');
  for (char& c : k) c = static_cast<char>(rng());
  return k;
}

TEST_CASE("key filter: every added key may be there, others mostly not") {
  std::mt19937_64 rng(test::Seed("key filter"));
  const uint64_t n = static_cast<uint64_t>(50000 * test::Scale());
  KeyFilter f(n);
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < n; i++) {
    keys.push_back(Key(rng));
    f.Add(keys.back());
  }
  for (const std::string& k : keys) REQUIRE(f.MayContain(k));
  CHECK(f.added() == n);
  CHECK_FALSE(f.full());
  // At capacity: ten bits a key, six probes in one block: about 1-2%.
  uint64_t maybe = 0;
  const uint64_t probes = 100000;
  for (uint64_t i = 0; i < probes; i++) maybe += f.MayContain("absent" + Key(rng)) ? 1 : 0;
  INFO(maybe << " of " << probes << " absent keys answered maybe");
  CHECK(maybe < probes / 25);
  CHECK(maybe > 0);  // none at all: the probes would not be reaching the bits
  // Past capacity it degrades but still holds every key.
  for (uint64_t i = 0; i < n; i++) {
    keys.push_back(Key(rng));
    f.Add(keys.back());
  }
  CHECK(f.full());
  for (const std::string& k : keys) REQUIRE(f.MayContain(k));
}

TEST_CASE("key filter: a run's filter, sixteen bits a key, answers maybe about 0.1% of the time") {
  std::mt19937_64 rng(test::Seed("key filter run"));
  const uint64_t n = static_cast<uint64_t>(50000 * test::Scale());
  KeyFilter f(n, KeyFilter::kRunBitsPerKey);
  KeyFilter ten(n);
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < n; i++) {
    keys.push_back(Key(rng));
    f.Add(keys.back());
    ten.Add(keys.back());
  }
  for (const std::string& k : keys) REQUIRE(f.MayContain(k));
  CHECK(f.bytes() > ten.bytes() * 3 / 2);
  uint64_t maybe = 0, maybe_ten = 0;
  const uint64_t probes = 400000;
  for (uint64_t i = 0; i < probes; i++) {
    const std::string k = "absent" + Key(rng);
    maybe += f.MayContain(k) ? 1 : 0;
    maybe_ten += ten.MayContain(k) ? 1 : 0;
  }
  INFO(maybe << " (sixteen bits) and " << maybe_ten << " (ten) of " << probes << " answered maybe");
  CHECK(maybe < probes / 400);  // under 0.25%
  CHECK(maybe > 0);
  CHECK(maybe * 4 < maybe_ten);  // several times fewer than ten bits a key
}

TEST_CASE("key filter: an empty filter holds nothing, keys differ by one byte") {
  KeyFilter f(0);  // one block
  CHECK_FALSE(f.MayContain("a"));
  CHECK(f.bytes() == 64);
  f.Add(std::string(1, '\0'));
  CHECK(f.MayContain(std::string(1, '\0')));
  CHECK_FALSE(f.MayContain(std::string(2, '\0')));
}

TEST_CASE("concurrency: key filter: adds from two threads lose no key") {
  const uint64_t n = static_cast<uint64_t>(20000 * test::Scale());
  KeyFilter f(n / 8);  // small: the threads set bits in the same words
  std::vector<std::string> a, b;
  std::mt19937_64 rng(test::Seed("key filter threads"));
  for (uint64_t i = 0; i < n; i++) {
    a.push_back(Key(rng));
    b.push_back(Key(rng));
  }
  std::thread other([&] {
    for (const std::string& k : b) f.Add(k);
  });
  uint64_t seen = 0;
  for (const std::string& k : a) {
    f.Add(k);
    seen += f.MayContain(b[seen % b.size()]) ? 1 : 0;  // probes beside the adds
  }
  other.join();
  for (const std::string& k : a) REQUIRE(f.MayContain(k));
  for (const std::string& k : b) REQUIRE(f.MayContain(k));
  CHECK(f.added() == 2 * n);
}

}  // namespace
}  // namespace mmdoc::index
