// The engine's stored key form (index::KeyCodec): a canonical GUID string
// key stored in 19 bytes instead of 39.
//
// An ordinary string key is the rank byte, the escaped string and 0x00 0x00
// (keys.cc). A string that is a canonical lowercase GUID
// ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", hex digits 0-9 a-f) is stored as
//   rank byte | 0x00 0x01 | 16 bytes (the 32 hex digits, two per byte)
// 0x00 0x01 cannot start an escaped string (0x00 is always followed by 0xFF
// or 0x00 there), so the two forms never collide. Lowercase hex digits sort
// in the order of their values, and the hyphens sit at the same places in
// every GUID, so two packed keys compare bytewise exactly as their strings
// do. A packed key against any other key is compared by unpacking it first.
// Only a whole key is packed: the primary index's _id and a unique index's
// value; a non-unique index entry (value + pk) is never packed, nor is a
// GUID inside an array or document key.
//
// Why: GUID strings are the seed workload's _id and key. Packing them takes
// 20 bytes off every primary-index cell and separator and halves a unique
// GUID index's keys, so more of the trees fit in a page and in cache.
#include <cstdint>
#include <cstring>

#include "engine/db_impl.h"
#include "engine/query_path.h"
#include "storage/coding.h"

namespace mmdoc {
namespace {

constexpr size_t kGuidChars = 36;
constexpr size_t kOrdinarySize = 1 + kGuidChars + 2;  // rank, chars, 00 00
constexpr size_t kPackedSize = 1 + 2 + 16;            // rank, 00 01, bytes

// Where the 32 hex digits of a GUID string are (the rest are hyphens).
constexpr uint8_t kDigitAt[32] = {0,  1,  2,  3,  4,  5,  6,  7,  9,  10, 11, 12, 14, 15, 16, 17,
                                  19, 20, 21, 22, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35};
constexpr uint8_t kNotHex = 0x80;

struct NibbleTable {
  uint8_t v[256];
  constexpr NibbleTable() : v() {
    for (int c = 0; c < 256; c++) {
      v[c] = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : kNotHex;
    }
  }
};
constexpr NibbleTable kNibble;

// The first kPrefixSize bytes of every packed key. Compared as bytes, so
// no byte order is involved.
constexpr uint32_t kPrefixSize = 3;
constexpr char kPackedPrefix[kPrefixSize] = {engine::KeyRankByte(engine::kRankString), '\0',
                                             '\x01'};

inline bool IsPacked(std::string_view k) {
  return k.size() == kPackedSize && std::memcmp(k.data(), kPackedPrefix, kPrefixSize) == 0;
}

size_t Pack(std::string_view key, char* buf) {
  if (key.size() != kOrdinarySize) return 0;  // (also keeps data() + 1 below defined)
  const char* s = key.data() + 1;
  if (key[0] != engine::KeyRankByte(engine::kRankString) || key[kOrdinarySize - 2] != '\0' ||
      key[kOrdinarySize - 1] != '\0' || s[8] != '-' || s[13] != '-' || s[18] != '-' ||
      s[23] != '-') {
    return 0;
  }
  buf[0] = key[0];
  buf[1] = '\0';
  buf[2] = '\x01';
  unsigned bad = 0;
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) {
    const uint8_t high = kNibble.v[static_cast<uint8_t>(s[kDigitAt[2 * i]])];
    const uint8_t low = kNibble.v[static_cast<uint8_t>(s[kDigitAt[2 * i + 1]])];
    bad |= high | low;
    buf[3 + i] = static_cast<char>(high << 4 | low);
  }
  return (bad & kNotHex) != 0 ? 0 : kPackedSize;
}

size_t Unpack(std::string_view stored, char* buf) {
  if (!IsPacked(stored)) return 0;
  static const char kDigits[] = "0123456789abcdef";
  buf[0] = stored[0];
  char* s = buf + 1;
  s[8] = s[13] = s[18] = s[23] = '-';
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) {
    const uint8_t b = static_cast<uint8_t>(stored[3 + i]);
    s[kDigitAt[2 * i]] = kDigits[b >> 4];
    s[kDigitAt[2 * i + 1]] = kDigits[b & 15];
  }
  buf[kOrdinarySize - 2] = '\0';
  buf[kOrdinarySize - 1] = '\0';
  return kOrdinarySize;
}

inline int Bytewise(std::string_view a, std::string_view b) {
  size_t m = a.size() < b.size() ? a.size() : b.size();
  int r = m == 0 ? 0 : std::memcmp(a.data(), b.data(), m);
  if (r != 0) return r;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

int Compare(std::string_view a, std::string_view b) {
  const bool pa = IsPacked(a), pb = IsPacked(b);
  if (pa && pb) {  // the common case in a GUID-keyed tree: two 8-byte compares
    // Big-endian, so that the numbers order as the bytes do under memcmp.
    uint64_t x = storage::DecodeBigEndian64(a.data() + 3);
    uint64_t y = storage::DecodeBigEndian64(b.data() + 3);
    if (x == y) {
      x = storage::DecodeBigEndian64(a.data() + 11);
      y = storage::DecodeBigEndian64(b.data() + 11);
    }
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (pa == pb) return Bytewise(a, b);
  char buf[kOrdinarySize];
  if (pa) return Bytewise({buf, Unpack(a, buf)}, b);
  return Bytewise(a, {buf, Unpack(b, buf)});
}

// Every packed key is kPackedSize bytes and begins with the kPrefixSize
// bytes of kPackedPrefix, which no ordinary key of that size begins with
// (see the top of this file); two packed keys order bytewise.
const index::KeyCodec kTreeKeyCodec = {Pack, Unpack, Compare, kPackedSize, kPrefixSize};

}  // namespace

const index::KeyCodec& TreeKeyCodec() { return kTreeKeyCodec; }

}  // namespace mmdoc
