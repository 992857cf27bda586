// storage/coding.h: every helper round-trips, writes the byte order its name
// says whatever the host's, and the big-endian forms sort as numbers do.
#include "storage/coding.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/test_env.h"

namespace mmdoc::storage {
namespace {

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

// Values at every byte boundary, both ends, and random ones (one seed).
const std::vector<uint64_t>& Samples() {
  static const std::vector<uint64_t> samples = [] {
    std::vector<uint64_t> v = {0,
                               1,
                               0x7f,
                               0x80,
                               0xff,
                               0x100,
                               0xffff,
                               0x10000,
                               0x7fffffff,
                               0x80000000,
                               0xffffffff,
                               0x100000000ull,
                               0x8000000000000000ull,
                               ~uint64_t{0}};
    for (int shift = 0; shift < 64; shift += 7) v.push_back(uint64_t{1} << shift);
    std::mt19937_64 rng(mmdoc::test::Seed("coding"));
    for (int i = 0; i < 1000; i++) v.push_back(rng() >> (rng() % 64));
    return v;
  }();
  return samples;
}

TEST_CASE("little-endian bytes are least significant first", "[coding]") {
  char b[8];
  EncodeFixed16(b, 0x0102);
  CHECK(std::string(b, 2) == Bytes({0x02, 0x01}));
  EncodeFixed32(b, 0x01020304);
  CHECK(std::string(b, 4) == Bytes({0x04, 0x03, 0x02, 0x01}));
  EncodeFixed64(b, 0x0102030405060708ull);
  CHECK(std::string(b, 8) == Bytes({0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));

  const std::string le = Bytes({0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8});
  CHECK(DecodeFixed16(le.data()) == 0xf2f1);
  CHECK(DecodeFixed32(le.data()) == 0xf4f3f2f1u);
  CHECK(DecodeFixed64(le.data()) == 0xf8f7f6f5f4f3f2f1ull);
  // The uint8_t and char overloads are the same codec.
  CHECK(DecodeFixed64(reinterpret_cast<const uint8_t*>(le.data())) == 0xf8f7f6f5f4f3f2f1ull);

  std::string s = "x";
  PutFixed32(&s, 0x01020304);
  PutFixed64(&s, 0x0102030405060708ull);
  CHECK(s == "x" + Bytes({0x04, 0x03, 0x02, 0x01, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
}

TEST_CASE("big-endian bytes are most significant first", "[coding]") {
  char b[8];
  EncodeBigEndian16(b, 0x0102);
  CHECK(std::string(b, 2) == Bytes({0x01, 0x02}));
  EncodeBigEndian32(b, 0x01020304);
  CHECK(std::string(b, 4) == Bytes({0x01, 0x02, 0x03, 0x04}));
  EncodeBigEndian64(b, 0x0102030405060708ull);
  CHECK(std::string(b, 8) == Bytes({0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}));
  CHECK(DecodeBigEndian64(b) == 0x0102030405060708ull);

  std::string s;
  PutBigEndian16(&s, 0xfeff);
  PutBigEndian32(&s, 0x01020304);
  PutBigEndian64(&s, 0xf1f2f3f4f5f6f7f8ull);
  CHECK(s == Bytes({0xfe, 0xff, 0x01, 0x02, 0x03, 0x04, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7,
                    0xf8}));
}

TEST_CASE("every width round-trips", "[coding]") {
  for (uint64_t v : Samples()) {
    INFO(v);
    uint8_t b[8];
    EncodeFixed16(b, static_cast<uint16_t>(v));
    CHECK(DecodeFixed16(b) == static_cast<uint16_t>(v));
    EncodeFixed32(b, static_cast<uint32_t>(v));
    CHECK(DecodeFixed32(b) == static_cast<uint32_t>(v));
    EncodeFixed64(b, v);
    CHECK(DecodeFixed64(b) == v);

    char c[8];
    EncodeBigEndian64(c, v);
    CHECK(DecodeBigEndian64(c) == v);
    std::string s;
    PutBigEndian64(&s, v);
    CHECK(s == std::string(c, 8));
    // Big-endian is little-endian reversed.
    EncodeFixed64(b, v);
    for (int i = 0; i < 8; i++) CHECK(static_cast<uint8_t>(c[i]) == b[7 - i]);

    std::string le;
    PutFixed32(&le, static_cast<uint32_t>(v));
    PutFixed64(&le, v);
    std::string_view in = le;
    uint32_t v32 = 0;
    uint64_t v64 = 0;
    REQUIRE(GetFixed32(&in, &v32));
    REQUIRE(GetFixed64(&in, &v64));
    CHECK(v32 == static_cast<uint32_t>(v));
    CHECK(v64 == v);
    CHECK(in.empty());
  }
}

TEST_CASE("Get on a short input fails and consumes nothing", "[coding]") {
  const std::string bytes = Bytes({1, 2, 3, 4, 5, 6, 7});
  for (size_t n = 0; n <= bytes.size(); n++) {
    std::string_view in(bytes.data(), n);
    uint64_t v64 = 42;
    CHECK(!GetFixed64(&in, &v64));
    CHECK(in.size() == n);
    CHECK(v64 == 42);
    uint32_t v32 = 42;
    CHECK(GetFixed32(&in, &v32) == (n >= 4));
    CHECK(in.size() == (n >= 4 ? n - 4 : n));
    if (n < 4) CHECK(v32 == 42);
  }
}

TEST_CASE("big-endian encodings sort as the numbers", "[coding]") {
  const std::vector<uint64_t>& v = Samples();
  for (size_t i = 0; i + 1 < v.size(); i++) {
    const uint64_t a = v[i], b = v[i + 1];
    INFO(a << " " << b);
    char x[8], y[8];
    EncodeBigEndian64(x, a);
    EncodeBigEndian64(y, b);
    const int c = std::memcmp(x, y, 8);
    CHECK((c < 0) == (a < b));
    CHECK((c == 0) == (a == b));
    EncodeBigEndian32(x, static_cast<uint32_t>(a));
    EncodeBigEndian32(y, static_cast<uint32_t>(b));
    CHECK((std::memcmp(x, y, 4) < 0) == (static_cast<uint32_t>(a) < static_cast<uint32_t>(b)));
    EncodeBigEndian16(x, static_cast<uint16_t>(a));
    EncodeBigEndian16(y, static_cast<uint16_t>(b));
    CHECK((std::memcmp(x, y, 2) < 0) == (static_cast<uint16_t>(a) < static_cast<uint16_t>(b)));
  }
}

}  // namespace
}  // namespace mmdoc::storage
