// Regex: PCRE2 compilation with MongoDB's options, matching, and the
// literal prefix that index bounds are built from (checked against
// matching: every string a pattern matches starts with its prefix).
#include "engine/regex.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/support/test_env.h"

namespace mmdoc::engine {
namespace {

std::shared_ptr<const Regex> R(const std::string& pattern, const std::string& options = "") {
  auto re = Regex::Compile(pattern, options);
  INFO(pattern << " " << options << ": " << re.status().ToString());
  REQUIRE(re.ok());
  return re.value();
}

TEST_CASE("Regex: MongoDB's options and PCRE2 syntax", "[regex]") {
  CHECK(R("^ab")->Matches("abc"));
  CHECK_FALSE(R("^ab")->Matches("cab"));
  CHECK(R("ab")->Matches("cab"));
  CHECK_FALSE(R("^AB")->Matches("abc"));
  CHECK(R("^AB", "i")->Matches("abc"));
  CHECK_FALSE(R("^b", "")->Matches("a\nb"));
  CHECK(R("^b", "m")->Matches("a\nb"));
  CHECK_FALSE(R("a.b")->Matches("a\nb"));
  CHECK(R("a.b", "s")->Matches("a\nb"));
  CHECK(R("a b # comment", "x")->Matches("ab"));
  CHECK(R("^.$", "u")->Matches("\xC3\xA9"));  // UTF-8 mode: one character
  CHECK(R("\\d+")->Matches("x42"));
  CHECK(R("(?i)ab")->Matches("AB"));
  CHECK(R("")->Matches(""));
  CHECK(R("^$")->Matches(""));
  // A subject that is not UTF-8 never matches (and does not crash).
  CHECK_FALSE(R("a")->Matches("a\xFF"));
  CHECK(R("a", "imsxu")->pattern() == "a");
  CHECK(R("a", "imsxu")->options() == "imsxu");
}

TEST_CASE("Regex: bad patterns and options are InvalidArgument naming them", "[regex]") {
  auto bad = [](const std::string& pattern, const std::string& options, const std::string& needle) {
    auto re = Regex::Compile(pattern, options);
    INFO(pattern << " " << options);
    REQUIRE_FALSE(re.ok());
    CHECK(re.status().IsInvalidArgument());
    INFO(re.status().message());
    CHECK(re.status().message().find(needle) != std::string::npos);
    CHECK(re.status().message().find('\n') == std::string::npos);
  };
  bad("a(b", "", "/a(b/");
  bad("a(b", "", "offset");
  bad("[z-a]", "", "/[z-a]/");
  bad("*", "", "invalid regular expression");
  bad("x", "q", "invalid flag");
  bad("x", "q", ": q");
  bad("x", "il", ": l");  // libbson keeps 'l' (locale); MongoDB refuses it
  bad(std::string("a\0b", 3), "", "NUL");
  bad("a\n(", "", "/a\\x0a(/");                   // one line
  bad("\xFF", "", "invalid regular expression");  // not UTF-8
}

TEST_CASE("Regex: literal prefixes, MongoDB's rule made conservative", "[regex]") {
  struct Case {
    const char* pattern;
    const char* options;
    const char* prefix;
  } cases[] = {
      {"^abc", "", "abc"},
      {"\\Aabc", "", "abc"},
      {"\\Aabc", "m", "abc"},
      {"^abc", "m", ""},
      {"^abc", "i", ""},
      {"^abc", "s", "abc"},
      {"abc", "", ""},
      {"^ab|c", "", ""},
      {"^ab(c|d)", "", ""},
      {"^abc*", "", "ab"},
      {"^abc?", "", "ab"},
      {"^abc{0}", "", "ab"},
      {"^abc+", "", "abc"},
      {"^ab.c", "", "ab"},
      {"^ab[c]", "", "ab"},
      {"^ab(c)", "", "ab"},
      {"^ab$", "", "ab"},
      {"^a\\.b", "", "a.b"},
      {"^a\\db", "", "a"},
      {"^a\\Qb\\E", "", "a"},
      {"^\xC3\xA9t\xC3\xA9", "", "\xC3\xA9t\xC3\xA9"},
      {"^a\xC3\xA9?", "", "a"},  // drops the whole character
      {"^ab c", "x", "a"},       // a quantifier may follow the space
      {"^ab#c", "x", "a"},
      {"^ab c", "", "ab c"},
      {"^", "", ""},
      {"^(?i)ab", "", ""},
  };
  for (const Case& c : cases) {
    INFO(c.pattern << " /" << c.options);
    CHECK(R(c.pattern, c.options)->LiteralPrefix() == c.prefix);
  }
}

// "^text" skips PCRE2 (a prefix compare), and the JIT takes over after many
// matches: both must answer as PCRE2 does for the same pattern in a form
// that takes neither path ("^(?:text)").
TEST_CASE("Regex: literal-prefix patterns and the JIT answer as PCRE2 does (randomized)",
          "[regex]") {
  std::mt19937_64 rng(test::Seed("regex literal prefix"));
  // A space and a two-byte character among the letters.
  const std::vector<std::string> pieces = {"a", "b", " ", "\xc3\xa9", "c"};
  auto random_text = [&](size_t max) {
    std::string t;
    const size_t n = rng() % (max + 1);
    for (size_t i = 0; i < n; i++) t += pieces[rng() % pieces.size()];
    return t;
  };
  for (int round = 0; round < 200; round++) {
    const std::string text = random_text(3);
    if (text.empty()) continue;
    for (const char* options : {"", "s", "u", "su"}) {
      auto fast = R("^" + text, options);
      auto slow = R("^(?:" + text + ")", options);
      for (int k = 0; k < 400; k++) {  // past the JIT's threshold
        const std::string s = random_text(6);
        INFO("pattern ^" << text << " /" << options << " on \"" << s << "\"");
        REQUIRE(fast->Matches(s) == slow->Matches(s));
      }
    }
  }
}

TEST_CASE("Regex: every string a pattern matches starts with its prefix (randomized)", "[regex]") {
  const uint64_t seed = test::Seed("regex prefix");
  std::mt19937_64 rng(seed);
  const char* kAtoms[] = {"a",   "b",    "\xC3\xA9", "\\.", ".", "*",   "?", "+",  "{0,1}",
                          "{1}", "[ab]", "\\d",      " ",   "#", "(a)", "$", "\\n"};
  const char* kOptions[] = {"", "", "s", "x", "m", "i"};
  const char* kChars[] = {"a", "b", "\xC3\xA9", ".", " ", "#", "1", "\n", "{", "}"};
  int checked = 0;
  for (int round = 0; round < static_cast<int>(2000 * test::Scale()); round++) {
    std::string pattern = rng() % 4 ? "^" : "\\A";
    for (int i = static_cast<int>(rng() % 6); i > 0; i--) pattern += kAtoms[rng() % 17];
    const std::string options = kOptions[rng() % 6];
    auto re = Regex::Compile(pattern, options);
    if (!re.ok()) continue;
    const std::string prefix = re.value()->LiteralPrefix();
    for (int s = 0; s < 50; s++) {
      std::string subject = rng() % 2 ? prefix : "";
      for (int i = static_cast<int>(rng() % 6); i > 0; i--) subject += kChars[rng() % 10];
      if (!re.value()->Matches(subject)) continue;
      checked++;
      INFO("seed " << seed << " pattern " << pattern << " /" << options << " prefix '" << prefix
                   << "' subject '" << subject << "'");
      REQUIRE(subject.compare(0, prefix.size(), prefix) == 0);
    }
  }
  CHECK(checked > 1000);
}

}  // namespace
}  // namespace mmdoc::engine
