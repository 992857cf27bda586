// Regex: one compiled PCRE2 pattern, what a filter's $regex (or a regex
// value used as a pattern) matches strings with. PCRE2 is what MongoDB
// matches with, so patterns mean the same here as there.
//
// Compiled once per query (Filter::Parse), then matched against every
// candidate string. UTF-8 mode is always on (MongoDB's). The option letters
// are MongoDB's:
//   i  case-insensitive            (PCRE2_CASELESS)
//   m  ^ and $ match at every line (PCRE2_MULTILINE)
//   s  . matches a newline too     (PCRE2_DOTALL)
//   x  whitespace and # comments in the pattern are ignored (PCRE2_EXTENDED)
//   u  accepted, no effect (UTF-8 is always on)
//
// Thread safety: a Regex is immutable once compiled; Matches may be called
// from any number of threads at once (each thread keeps its own PCRE2 match
// block).
#ifndef MMDOC_ENGINE_REGEX_H_
#define MMDOC_ENGINE_REGEX_H_

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "mmdoc/status.h"

struct pcre2_real_code_8;  // pcre2_code, from <pcre2.h>

namespace mmdoc::engine {

// The first match failure (Regex::Matches) on this thread since the last
// call, as InvalidArgument naming the pattern; OK when there was none.
// Clears it. Every caller of a filter's Matches that can return a Status
// asks after matching.
Status TakeRegexMatchError();

class Regex {
 public:
  // Compiles `pattern` with `options` (letters from the list above, in any
  // order). InvalidArgument naming the pattern for a pattern PCRE2 refuses
  // (with PCRE2's reason and the offset), for a NUL byte in the pattern,
  // and naming the letter for an option letter not in the list.
  static Result<std::shared_ptr<const Regex>> Compile(std::string_view pattern,
                                                      std::string_view options);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Whether the pattern matches somewhere in `s`. When the match fails
  // rather than finds nothing (PCRE2's match or depth limit ran out: a
  // pattern that backtracks without end), false, and the failure is kept
  // for TakeRegexMatchError on this thread: the query must fail then, not
  // answer without the document (MongoDB fails it too).
  bool Matches(std::string_view s) const;

  const std::string& pattern() const { return pattern_; }
  const std::string& options() const { return options_; }

  // Bytes every string this pattern matches starts with: for a pattern
  // anchored at the start (^, or \A) and matched case-sensitively, its
  // leading literal text ("^abc" -> "abc", "^ab?c" -> "a", "^a\.b" ->
  // "a.b"); "" otherwise (also for ^ with the m option, which anchors at
  // every line, and for any pattern with a '|'). MongoDB's rule for which
  // regexes get tight index bounds, made conservative where it is loose: a
  // quantifier ?, * or {n,m} drops the character before it (a whole UTF-8
  // character), and the prefix may be shorter than the pattern allows, never
  // longer.
  std::string LiteralPrefix() const;

  // For messages: /pattern/options, with control characters escaped so
  // that the message stays on one line.
  std::string Describe() const { return Describe(pattern_, options_); }
  static std::string Describe(std::string_view pattern, std::string_view options);

 private:
  Regex() = default;
  std::string pattern_;
  std::string options_;
  // The interpreted code, and once the pattern has matched kJitAfter
  // strings a JIT-compiled copy (published once, never changed after):
  // compiling for the JIT costs tens of microseconds, more than a query
  // that tests a few dozen strings spends matching.
  static constexpr uint32_t kJitAfter = 256;
  // "^text" with literal text only and no option that changes it: a match
  // is a string starting with prefix_, tested without PCRE2.
  bool prefix_only_ = false;
  std::string prefix_;
  pcre2_real_code_8* code_ = nullptr;
  mutable std::atomic<pcre2_real_code_8*> jit_{nullptr};
  mutable std::atomic<uint32_t> matches_{0};
};

}  // namespace mmdoc::engine

#endif  // MMDOC_ENGINE_REGEX_H_
