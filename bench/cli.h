// The command-line checks mmdoc-bench and mmdoc-syncbench share: bad input
// is one line on stderr naming the option and exit status 2, found before
// any work starts (README, "The command-line tool").
//
//   CLI::App app{...};
//   app.add_option("--seed", seed)->transform(UintText());
//   if (int rc = ParseCommandLine("mmdoc-bench", app, argc, argv); rc >= 0) return rc;
//   std::vector<std::string> engines;
//   if (!SplitList(engines_arg, &engines)) ...  // "a,,b", "a,", ","
#ifndef MMDOC_BENCH_CLI_H_
#define MMDOC_BENCH_CLI_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

namespace mmdoc::bench {

// The items of a comma-separated list; false when the list or any item is
// empty ("", ",", "2k,", "1,,2"): an empty item is a typo, not a default.
inline bool SplitList(const std::string& s, std::vector<std::string>* out) {
  out->clear();
  size_t begin = 0;
  while (true) {
    const size_t end = s.find(',', begin);
    std::string item = s.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (item.empty()) return false;
    out->push_back(std::move(item));
    if (end == std::string::npos) return true;
    begin = end + 1;
  }
}

// Decimal digits as a uint64_t; false on anything else or on overflow.
inline bool ParseUint(const std::string& s, uint64_t* n) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  uint64_t v = 0;
  for (char c : s) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *n = v;
  return true;
}

// "200k" -> 200000, "1M" -> 1000000; false on a bad count or one that does
// not fit in 64 bits.
inline bool ParseCount(const std::string& s, uint64_t* n) {
  if (s.empty()) return false;
  uint64_t mult = 1;
  std::string digits = s;
  const char last = s.back();
  if (last == 'k' || last == 'K') mult = 1000;
  if (last == 'm' || last == 'M') mult = 1000000;
  if (mult != 1) digits.pop_back();
  uint64_t v = 0;
  if (!ParseUint(digits, &v) || v > UINT64_MAX / mult) return false;
  *n = v * mult;
  return true;
}

// A transform for an unsigned option: decimal digits that fit in 64 bits,
// leading zeros dropped. CLI11 alone reads "-1" as 2^64-1, a number past
// 2^64 as 2^64-1, and "010" as octal 8.
inline CLI::Validator UintText() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t n = 0;
        if (!ParseUint(s, &n)) return "'" + s + "' is not a whole number from 0 to 2^64-1";
        s = std::to_string(n);
        return std::string();
      },
      "UINT");
}

// The file an output path names: a symbolic link's target, which the
// output replaces (not the link).
inline std::string WriteTarget(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  std::error_code ec;
  const auto target = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : target.string();
}

// Whether path can be written as WriteWhole writes it, checked before the
// run so a bad --json fails in a second, not after the whole run: an
// existing file must be writable (opened for append, not truncated), and a
// regular one (or a new one) needs a temporary file beside it. O_NONBLOCK:
// a FIFO with no reader is an error here, not a hang.
inline bool CheckWritable(const char* tool, const std::string& flag, const std::string& path) {
  auto fail = [&](int err) {
    std::fprintf(stderr, "%s: cannot write %s %s: %s\n", tool, flag.c_str(), path.c_str(),
                 err == ENXIO ? "a FIFO with no reader" : std::strerror(err));
    return false;
  };
  const std::string target = WriteTarget(path);
  struct stat st;
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists) {
    const int fd = ::open(target.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK);
    if (fd < 0) return fail(errno);
    ::close(fd);
    if (!S_ISREG(st.st_mode)) return true;  // a pipe, a device: written in place
  }
  std::string tmp = target + ".tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return fail(errno);
  ::close(fd);
  ::unlink(tmp.c_str());
  return true;
}

// Whether two paths name one file, whether or not it exists yet.
inline bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const auto pa = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea);
  const auto pb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
  return !ea && !eb && pa == pb;
}

// Writes text to path whole or not at all: a regular file (or a new one)
// through a temporary file renamed over it, so that a full disk leaves the
// old file, not half a new one; anything else (a pipe, /dev/stdout)
// directly. Through a symbolic link, its target; the mode of a file it
// replaces stays, a new one gets the umask's. "" or the reason it failed.
inline std::string WriteWhole(const std::string& output, const std::string& text) {
  const std::string path = WriteTarget(output);
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  const bool regular = !exists || S_ISREG(st.st_mode);
  mode_t mode = exists ? (st.st_mode & 07777) : 0;
  if (!exists) {
    mode = ::umask(0);
    ::umask(mode);
    mode = 0666 & ~mode;
  }
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = regular ? ::mkstemp(tmp.data()) : ::open(path.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) return std::strerror(errno);
  std::string error;
  for (size_t done = 0; done < text.size() && error.empty();) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) error = std::strerror(w < 0 ? errno : ENOSPC);
    if (w > 0) done += static_cast<size_t>(w);
  }
  if (regular && error.empty() && ::fchmod(fd, mode) != 0) error = std::strerror(errno);
  if (::close(fd) != 0 && error.empty()) error = std::strerror(errno);
  if (regular && error.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    error = std::strerror(errno);
  }
  if (regular && !error.empty()) ::unlink(tmp.c_str());
  return error;
}

// 2, after one line on stderr, when a path option was given as "" (a run
// that would write nowhere, or in the current directory); else -1.
inline int RefuseEmptyPaths(const char* tool, const CLI::App& app,
                            std::initializer_list<const char*> flags) {
  for (const char* flag : flags) {
    if (app.count(flag) > 0 && app[flag]->as<std::string>().empty()) {
      std::fprintf(stderr, "%s: %s needs a path, not an empty string\n", tool, flag);
      return 2;
    }
  }
  return -1;
}

// app.parse: -1 when the run goes on, else the exit status: 0 after --help
// (printed), 2 after a parse error, given as one line on stderr.
inline int ParseCommandLine(const char* tool, CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "%s: %s (see --help)\n", tool, what.c_str());
    return 2;
  }
  return -1;
}

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_CLI_H_
