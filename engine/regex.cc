// Regex: PCRE2 compile and match, and the literal prefix that bounds an
// index scan.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "regex.h"

#include <pcre2.h>

#include <cstdio>
#include <cstring>

#include "storage/thread_cache.h"

namespace mmdoc::engine {

namespace {

// One match block per thread, sized for the whole match only (ovector of
// one pair): a match needs no captures, and a block this small serves every
// pattern (pcre2_match then returns 0 for a match instead of a count).
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};

pcre2_match_data* ThreadMatchData() { return storage::ThreadCache<MatchData>::Get().data; }

// A match failure not yet taken (TakeRegexMatchError); failed is read on
// every take, the message built only on a failure.
struct MatchError {
  bool failed = false;
  std::string message;
};

MatchError& ThreadMatchError() { return storage::ThreadCache<MatchError>::Get(); }

}  // namespace

Status TakeRegexMatchError() {
  MatchError& e = ThreadMatchError();
  if (!e.failed) return Status::OK();
  e.failed = false;
  return Status::InvalidArgument(std::move(e.message));
}

std::string Regex::Describe(std::string_view pattern, std::string_view options) {
  std::string out = "/";
  for (char c : pattern) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  out += "/";
  out.append(options);
  return out;
}

Result<std::shared_ptr<const Regex>> Regex::Compile(std::string_view pattern,
                                                    std::string_view options) {
  uint32_t flags = PCRE2_UTF;
  for (char c : options) {
    switch (c) {
      case 'i':
        flags |= PCRE2_CASELESS;
        break;
      case 'm':
        flags |= PCRE2_MULTILINE;
        break;
      case 's':
        flags |= PCRE2_DOTALL;
        break;
      case 'x':
        flags |= PCRE2_EXTENDED;
        break;
      case 'u':
        break;
      default:
        return Status::InvalidArgument(
            "invalid flag in regex options " + Describe(pattern, options), std::string(1, c));
    }
  }
  if (pattern.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("regular expression cannot contain a NUL byte",
                                   Describe(pattern, options));
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   flags, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(error, buf, sizeof(buf)) < 0) buf[0] = 0;
    return Status::InvalidArgument(
        "invalid regular expression " + Describe(pattern, options),
        reinterpret_cast<const char*>(buf) + std::string(" at offset ") + std::to_string(offset));
  }
  std::shared_ptr<Regex> re(new Regex());
  re->pattern_.assign(pattern);
  re->options_.assign(options);
  re->code_ = code;
  re->prefix_only_ = pattern.size() > 1 && pattern[0] == '^' &&
                     pattern.find_first_of("\\^$.|?*+()[]{}", 1) == std::string_view::npos &&
                     options.find_first_not_of("su") == std::string_view::npos;
  if (re->prefix_only_) re->prefix_.assign(pattern.substr(1));
  return std::shared_ptr<const Regex>(std::move(re));
}

Regex::~Regex() {
  pcre2_code_free(jit_.load());
  pcre2_code_free(code_);
}

bool Regex::Matches(std::string_view s) const {
  if (prefix_only_) return s.compare(0, prefix_.size(), prefix_) == 0;
  static const char kEmpty[1] = "";
  const char* data = s.empty() ? kEmpty : s.data();
  const pcre2_code* code = jit_.load(std::memory_order_acquire);
  if (code == nullptr) {
    code = code_;
    // The JIT makes a match several times faster once it is compiled; the
    // thread that reaches the count compiles a copy (where the platform has
    // no JIT the copy interprets, with the same answers).
    if (matches_.fetch_add(1, std::memory_order_relaxed) + 1 == kJitAfter) {
      pcre2_code* copy = pcre2_code_copy(code_);
      if (copy != nullptr) {
        (void)pcre2_jit_compile(copy, PCRE2_JIT_COMPLETE);
        jit_.store(copy, std::memory_order_release);
      }
    }
  }
  int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(data), s.size(), 0, 0, ThreadMatchData(),
                       nullptr);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
    MatchError& e = ThreadMatchError();
    if (!e.failed) {
      PCRE2_UCHAR why[256];
      if (pcre2_get_error_message(rc, why, sizeof(why)) < 0) why[0] = 0;
      e.message = "regex " + Describe(pattern_, options_) +
                  " could not be matched against a value (" + reinterpret_cast<const char*>(why) +
                  ")";
      e.failed = true;
    }
  }
  return rc >= 0;  // 0: matched, with no room to report where
}

std::string Regex::LiteralPrefix() const {
  const std::string& p = pattern_;
  size_t i;
  bool multiline_ok;
  if (p.compare(0, 2, "\\A") == 0) {
    i = 2;
    multiline_ok = true;
  } else if (!p.empty() && p[0] == '^') {
    i = 1;
    multiline_ok = false;
  } else {
    return "";
  }
  bool extended = false;
  for (char c : options_) {
    if (c == 'i') return "";                   // case folded: no byte prefix
    if (c == 'm' && !multiline_ok) return "";  // ^ anchors every line
    if (c == 'x') extended = true;
  }
  // An alternative may start anywhere ("^a|b").
  if (p.find('|') != std::string::npos) return "";
  std::string prefix;
  size_t last = std::string::npos;  // where the last literal character starts
  while (i < p.size()) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (c == '*' || c == '?' || c == '{') {
      // The character before may occur zero times. ('{' that is not a
      // quantifier is a literal; dropping a character is still sound.)
      if (last != std::string::npos) prefix.resize(last);
      break;
    }
    if (c == '\\') {
      if (i + 1 >= p.size()) break;
      const unsigned char d = static_cast<unsigned char>(p[i + 1]);
      // \d, \w, \Q, \x41, \1, ...: not a plain character.
      if (d >= 0x80 || (d >= '0' && d <= '9') || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z'))
        break;
      last = prefix.size();
      prefix.push_back(static_cast<char>(d));
      i += 2;
      continue;
    }
    if (std::strchr("^$.[()+", c) != nullptr) break;  // '+' keeps the character before
    if (extended && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
                     c == '#' || c >= 0x80)) {
      // Ignored space (PCRE2 also ignores a few non-ASCII characters here)
      // or a comment; a quantifier may follow it and apply to the character
      // before.
      if (last != std::string::npos) prefix.resize(last);
      break;
    }
    size_t n = c < 0x80             ? 1
               : (c & 0xE0) == 0xC0 ? 2
               : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4
                                    : 0;
    if (n == 0 || i + n > p.size()) break;  // not UTF-8 (the compile refused it anyway)
    last = prefix.size();
    prefix.append(p, i, n);
    i += n;
  }
  return prefix;
}

}  // namespace mmdoc::engine
