// TreeKeyCodec (engine/key_codec.cc): canonical GUID string keys stored in
// 19 bytes. The property everything rests on: stored keys, packed or not,
// compare exactly as their ordinary AppendKey forms compare bytewise. Then
// the same through the engine: GUID and almost-GUID _ids and unique keys
// against a std::map model, range queries, sort, reopen, Salvage, Check.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/db_impl.h"
#include "engine/query.h"
#include "mmdoc/db.h"
#include "tests/support/test_db.h"
#include "tests/support/test_env.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;

namespace {

int Sign(int x) { return (x > 0) - (x < 0); }

int Bytewise(std::string_view a, std::string_view b) { return Sign(a.compare(b)); }

std::string Guid(std::mt19937_64& rng) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  // Few distinct digits, and a run of zeros of random length first, so
  // GUIDs share long prefixes and often differ only in their last bytes
  // (where a search compares packed keys eight bytes at a time).
  const int zeros = static_cast<int>(rng() % 33);
  int digit = 0;
  for (int i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      s.push_back('-');
      continue;
    }
    s.push_back(digit++ < zeros ? '0' : kHex[rng() % 3 == 0 ? rng() % 16 : 0]);
  }
  return s;
}

// GUIDs, and strings that are almost GUIDs, prefixes of them or extend them.
// `nul`: may hold a zero byte (the engine test sticks to JSON-safe strings).
std::string GuidLike(std::mt19937_64& rng, bool nul = false) {
  std::string g = Guid(rng);
  switch (rng() % (nul ? 9 : 8)) {
    case 0:
      return g.substr(0, rng() % 37);  // a prefix (maybe empty)
    case 1:
      return g + std::string(1, "0f-\x01 g"[rng() % 6]);  // one more byte
    case 2:
      g[rng() % 36] = "Ag-0f/:`{"[rng() % 9];  // one wrong or changed char
      return g;
    case 3:
      for (char& c : g) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return g;
    case 8:
      g[rng() % 36] = '\0';  // an escaped zero inside
      return g;
    default:
      return g;  // canonical
  }
}

std::string Key(const bson_value_t* v) {
  std::string k;
  engine::AppendKey(v, &k);
  return k;
}

std::string StringKey(const std::string& s) { return Key(Value::String(s).get()); }

// The string a Value holds.
std::string Str(const Value& v) {
  REQUIRE(v.type() == BSON_TYPE_UTF8);
  return std::string(v.get()->value.v_utf8.str, v.get()->value.v_utf8.len);
}

bool IsCanonicalGuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < 36; i++) {
    const bool hyphen = i == 8 || i == 13 || i == 18 || i == 23;
    const char c = s[i];
    if (hyphen ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The stored form of an ordinary key.
std::string Stored(const std::string& key) {
  char buf[index::KeyCodec::kMaxForm];
  size_t n = TreeKeyCodec().pack(key, buf);
  return n == 0 ? key : std::string(buf, n);
}

// A JSON string literal for s (GuidLike strings hold no quotes or
// backslashes; \0 and \x01 are escaped).
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

TEST_CASE("key codec: stored keys order exactly as their ordinary forms (randomized)", "[engine]") {
  const uint64_t seed = mmdoc::test::Seed("key codec order");
  std::mt19937_64 rng(seed);
  const index::KeyCodec& codec = TreeKeyCodec();
  std::vector<std::string> keys;  // ordinary forms
  const int n = 400 * static_cast<int>(mmdoc::test::Scale());
  for (int i = 0; i < n; i++) {
    const std::string s = GuidLike(rng, true);
    const std::string k = StringKey(s);
    char buf[index::KeyCodec::kMaxForm];
    const size_t packed = codec.pack(k, buf);
    INFO("seed " << seed << " string " << JsonString(s));
    REQUIRE((packed != 0) == IsCanonicalGuid(s));
    if (packed != 0) {
      CHECK(packed == 19);
      char back[index::KeyCodec::kMaxForm];
      REQUIRE(codec.unpack({buf, packed}, back) == k.size());
      CHECK(std::string(back, k.size()) == k);
    } else {
      CHECK(codec.unpack(k, buf) == 0);  // an ordinary key is never taken for a packed one
    }
    keys.push_back(k);
  }
  // Other types around strings, and a GUID inside an array (never packed).
  for (const char* json : {"null", "7", "-1.5", "{\"a\": \"00000000-0000-0000-0000-000000000000\"}",
                           "[\"00000000-0000-0000-0000-000000000000\"]", "true"}) {
    auto v = Value::FromJson(json);
    REQUIRE(v.ok());
    keys.push_back(Key(v.value().get()));
    char buf[index::KeyCodec::kMaxForm];
    CHECK(codec.pack(keys.back(), buf) == 0);
  }
  for (size_t i = 0; i < keys.size(); i++) {
    for (size_t j = 0; j < 60; j++) {
      const std::string& a = keys[i];
      const std::string& b = keys[rng() % keys.size()];
      INFO("seed " << seed);
      const int want = Bytewise(a, b);
      CHECK(Sign(codec.compare(Stored(a), Stored(b))) == want);
      CHECK(Sign(codec.compare(a, Stored(b))) == want);  // a tree may hold both forms
      CHECK(Sign(codec.compare(Stored(a), b)) == want);
    }
  }
}

TEST_CASE("key codec: GUID _ids and unique keys through the engine agree with a model (randomized)",
          "[engine]") {
  const uint64_t seed = mmdoc::test::Seed("key codec engine");
  std::mt19937_64 rng(seed);
  TestDB db(Options{});
  REQUIRE(db->CreateIndex("c", "k", IndexOptions{true}).ok());
  REQUIRE(db->CreateIndex("c", "m", IndexOptions{false}).ok());
  std::map<std::string, std::string> model;   // _id -> k
  std::map<std::string, std::string> by_key;  // k -> _id
  auto ids_of = [](const std::vector<Document>& docs) {
    std::vector<std::string> out;
    for (const Document& d : docs) out.push_back(Str(d.Get("_id").value()));
    return out;
  };
  const int rounds = 6, ops = 300 * static_cast<int>(mmdoc::test::Scale());
  for (int round = 0; round < rounds; round++) {
    INFO("seed " << seed << " round " << round);
    auto t = db->Begin();
    REQUIRE(t.ok());
    for (int i = 0; i < ops; i++) {
      const std::string id = GuidLike(rng), k = GuidLike(rng);
      const int op = static_cast<int>(rng() % 4);
      if (op <= 1) {
        Status s =
            t.value()->Insert("c", J("{\"_id\": " + JsonString(id) + ", \"k\": " + JsonString(k) +
                                     ", \"m\": " + JsonString(k) + "}"));
        const bool fresh = model.count(id) == 0 && by_key.count(k) == 0;
        REQUIRE(s.ok() == fresh);
        if (!fresh) CHECK(s.IsAlreadyExists());
        if (fresh) {
          model[id] = k;
          by_key[k] = id;
        }
      } else if (op == 2 && !model.empty()) {
        auto it = model.lower_bound(id);
        if (it == model.end()) it = model.begin();
        auto d = t.value()->DeleteMany("c", J("{\"_id\": " + JsonString(it->first) + "}"));
        REQUIRE(d.ok());
        CHECK(d.value() == 1);
        by_key.erase(it->second);
        model.erase(it);
      } else if (!model.empty()) {
        auto it = model.lower_bound(id);
        if (it == model.end()) it = model.begin();
        auto u = t.value()->UpdateOne(
            "c", J("{\"_id\": " + JsonString(it->first) + "}"),
            J("{\"$set\": {\"k\": " + JsonString(k) + ", \"m\": " + JsonString(k) + "}}"));
        const bool free_key = by_key.count(k) == 0 || by_key[k] == it->first;
        REQUIRE(u.ok() == free_key);
        if (free_key) {
          by_key.erase(it->second);
          it->second = k;
          by_key[k] = it->first;
        }
      }
    }
    REQUIRE(t.value()->Commit().ok());
    if (round % 2 == 1) db.Reopen();

    // Every document by _id and by key; ranges and sorts in both orders.
    for (const auto& [id, k] : model) {
      auto got = db->Find("c", J("{\"_id\": " + JsonString(id) + "}"));
      REQUIRE(got.ok());
      REQUIRE(got.value().size() == 1);
      auto by_k = db->Find("c", J("{\"k\": " + JsonString(k) + "}"));
      REQUIRE(by_k.ok());
      REQUIRE(by_k.value().size() == 1);
      CHECK(by_k.value()[0] == got.value()[0]);
    }
    for (int q = 0; q < 40; q++) {
      std::string lo = GuidLike(rng), hi = GuidLike(rng);
      if (hi < lo) std::swap(lo, hi);
      const std::string field = q % 2 == 0 ? "_id" : "k";
      const auto& m = q % 2 == 0 ? model : by_key;
      std::vector<std::string> want;
      for (auto it = m.lower_bound(lo); it != m.end() && it->first < hi; ++it) {
        want.push_back(q % 2 == 0 ? it->first : it->second);
      }
      FindOptions fo;
      fo.sort_field = field;
      auto got = db->Find("c",
                          J("{\"" + field + "\": {\"$gte\": " + JsonString(lo) +
                            ", \"$lt\": " + JsonString(hi) + "}}"),
                          fo);
      REQUIRE(got.ok());
      CHECK(ids_of(got.value()) == want);
      // The non-unique index holds the same strings unpacked: same answer.
      auto m_got = db->Find(
          "c", J("{\"m\": {\"$gte\": " + JsonString(lo) + ", \"$lt\": " + JsonString(hi) + "}}"));
      REQUIRE(m_got.ok());
      size_t keys_in_range = 0;  // m holds the same strings as k
      for (auto it = by_key.lower_bound(lo); it != by_key.end() && it->first < hi; ++it) {
        keys_in_range++;
      }
      CHECK(m_got.value().size() == keys_in_range);
    }
    auto all = db->Find("c", J("{}"), [] {
      FindOptions fo;
      fo.sort_field = "_id";
      fo.sort_direction = -1;
      return fo;
    }());
    REQUIRE(all.ok());
    std::vector<std::string> want;
    for (auto it = model.rbegin(); it != model.rend(); ++it) want.push_back(it->first);
    CHECK(ids_of(all.value()) == want);
    db.CheckNow();
  }
  // Salvage walks the stored trees: every document once, in _id order.
  DB::SalvageReport r;
  std::vector<std::string> salvaged;
  REQUIRE(db->Salvage(
                "c",
                [&](std::string_view bson) {
                  auto d = Document::FromBson(reinterpret_cast<const uint8_t*>(bson.data()),
                                              bson.size());
                  REQUIRE(d.ok());
                  salvaged.push_back(Str(d.value().Get("_id").value()));
                },
                &r)
              .ok());
  std::vector<std::string> want;
  for (const auto& [id, k] : model) want.push_back(id);
  CHECK(salvaged == want);
  CHECK(r.recovered == model.size());
  CHECK(r.problems.empty());
}
