// Helpers the write-path prototypes and probes share (mmdoc-writeproto,
// mmdoc-runproto, mmdoc-reopenprobe, mmdoc-readprobe): a fatal check, a
// clock, random keys and values. Each prototype is a
// measurement, not a library: any error ends the run with a message.
#ifndef MMDOC_BENCH_MICRO_PROTO_UTIL_H_
#define MMDOC_BENCH_MICRO_PROTO_UTIL_H_

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "mmdoc/status.h"

namespace mmdoc::proto {

// The program's name in its error messages; set by main.
inline const char* program = "proto";

inline void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s: %s\n", program, what, s.ToString().c_str());
    std::exit(1);
  }
}

// Seconds on a monotonic clock.
inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A GUID-shaped string (36 characters, hex digits and dashes), as the
// seed's documents carry in _id, key and value.
inline std::string Guid(std::mt19937_64& rng) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(36, '-');
  for (size_t i = 0; i < s.size(); i++)
    if (i != 8 && i != 13 && i != 18 && i != 23) s[i] = kHex[rng() % 16];
  return s;
}

// n lowercase letters.
inline std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

}  // namespace mmdoc::proto

#endif  // MMDOC_BENCH_MICRO_PROTO_UTIL_H_
