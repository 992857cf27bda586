// KeyPairs against a vector of string pairs, the model it replaced: the same
// pairs in the same order, with keys and _ids of every length from empty to
// past a block, kept once when the key ends with the _id.
#include "engine/key_pairs.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/test_env.h"

namespace mmdoc {
namespace {

std::string RandomBytes(std::mt19937_64* rng, size_t n) {
  std::string s(n, '\0');
  // A small alphabet, so that keys share prefixes and tie on whole keys.
  for (char& c : s) c = static_cast<char>("\0\x01\x7f\x80\xff"[(*rng)() % 5]);
  return s;
}

TEST_CASE("key pairs: sorted as the string pairs they replace") {
  const uint64_t seed = test::Seed("key pairs");
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20 * test::Scale(); round++) {
    KeyPairs pairs;
    std::vector<std::pair<std::string, std::string>> model;
    const size_t n = rng() % 3000;
    if (rng() % 2 == 0) pairs.Reserve(rng() % 4000);
    for (size_t i = 0; i < n; i++) {
      size_t key_len = rng() % 6;
      size_t id_len = rng() % 4;
      if (rng() % 500 == 0) key_len = (rng() % 2 + 1) << 19;  // a quarter block and more
      if (rng() % 500 == 0) id_len = 300000;
      std::string id = RandomBytes(&rng, id_len);
      std::string key = RandomBytes(&rng, key_len);
      const bool id_in_key = rng() % 2 == 0;
      if (id_in_key) key += id;
      pairs.Add(key, id, id_in_key);
      model.emplace_back(std::move(key), std::move(id));
    }
    REQUIRE(pairs.size() == model.size());
    for (size_t i = 0; i < n; i++) {  // before the sort: in the order added
      REQUIRE(pairs.key(i) == model[i].first);
      REQUIRE(pairs.id(i) == model[i].second);
    }
    pairs.Sort();
    std::sort(model.begin(), model.end());
    for (size_t i = 0; i < n; i++) {
      INFO("round " << round << ", pair " << i << " of " << n);
      REQUIRE(pairs.key(i) == model[i].first);
      REQUIRE(pairs.id(i) == model[i].second);
    }
  }
}

TEST_CASE("key pairs: packed in blocks, not a heap block per pair") {
  KeyPairs pairs;
  const std::string id(12, 'i');
  for (int i = 0; i < 100000; i++) pairs.Add("key-" + std::to_string(i) + id, id, true);
  pairs.Sort();
  REQUIRE(pairs.key(0) == "key-0" + id);
  REQUIRE(pairs.id(99999) == id);
  // 100k pairs of about 28 bytes: three 1 MiB blocks and 16 bytes a
  // reference, where string pairs took 64 bytes and a heap block each.
  CHECK(pairs.memory() < size_t{5} << 20);
}

}  // namespace
}  // namespace mmdoc
