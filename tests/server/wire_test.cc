// server/wire.h: framing and parsing MongoDB wire-protocol messages from
// bytes, with no sockets. Messages are built by hand here, byte by byte, as
// the protocol's specification lays them out.
#include "server/wire.h"

#include <bson/bson.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mmdoc/document.h"

namespace mmdoc::server {
namespace {

void PutInt32(std::string* out, int32_t v) {
  uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; i++) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

std::string Bson(const char* json) { return Document::FromJson(json).value().bytes(); }

// A whole message: header (length filled in) + payload.
std::string Message(int32_t op, const std::string& payload, int32_t request_id = 42) {
  std::string m;
  PutInt32(&m, static_cast<int32_t>(16 + payload.size()));
  PutInt32(&m, request_id);
  PutInt32(&m, 0);
  PutInt32(&m, op);
  return m + payload;
}

std::string Kind0(const std::string& doc) { return std::string(1, '\0') + doc; }

std::string Kind1(const std::string& id, const std::vector<std::string>& docs) {
  std::string body = id + std::string(1, '\0');
  for (const std::string& d : docs) body += d;
  std::string s(1, '\1');
  PutInt32(&s, static_cast<int32_t>(4 + body.size()));
  return s + body;
}

std::string OpMsg(uint32_t flags, const std::string& sections, bool checksum = false) {
  std::string payload;
  PutInt32(&payload, static_cast<int32_t>(flags | (checksum ? kFlagChecksumPresent : 0)));
  payload += sections;
  if (!checksum) return Message(kOpMsg, payload);
  std::string m = Message(kOpMsg, payload + std::string(4, '\0'));
  m.resize(m.size() - 4);
  PutInt32(&m, static_cast<int32_t>(Crc32c(m)));
  return m;
}

std::string Json(const Document& d) { return d.ToJson(); }

TEST_CASE("CRC-32C matches the published check value", "[server][wire]") {
  CHECK(Crc32c("123456789") == 0xE3069283u);
  CHECK(Crc32c("") == 0u);
}

TEST_CASE("an OP_MSG with one body parses into its command and $db", "[server][wire]") {
  auto r = ParseMessage(OpMsg(0, Kind0(Bson(R"({"ping": 1, "$db": "admin"})"))));
  REQUIRE(r.ok());
  CHECK(r->database == "admin");
  CHECK(r->header.request_id == 42);
  CHECK_FALSE(r->more_to_come);
  CHECK_FALSE(r->legacy_query);
  CHECK(Json(r->command) == R"({ "ping" : 1, "$db" : "admin" })");
}

TEST_CASE("kind 1 sequences become arrays of the command", "[server][wire]") {
  std::string m =
      OpMsg(kFlagMoreToCome, Kind1("documents", {Bson(R"({"_id": 1})"), Bson(R"({"_id": 2})")}) +
                                 Kind0(Bson(R"({"insert": "c", "$db": "t"})")));
  auto r = ParseMessage(m);
  REQUIRE(r.ok());
  CHECK(r->more_to_come);
  CHECK(Json(r->command) ==
        R"({ "insert" : "c", "$db" : "t", "documents" : [ { "_id" : 1 }, { "_id" : 2 } ] })");
  // An empty sequence is an empty array.
  r = ParseMessage(
      OpMsg(0, Kind0(Bson(R"({"insert": "c", "$db": "t"})")) + Kind1("documents", {})));
  REQUIRE(r.ok());
  CHECK(Json(r->command) == R"({ "insert" : "c", "$db" : "t", "documents" : [  ] })");
}

TEST_CASE("the checksum is verified when present", "[server][wire]") {
  std::string m = OpMsg(0, Kind0(Bson(R"({"ping": 1, "$db": "admin"})")), /*checksum=*/true);
  REQUIRE(ParseMessage(m).ok());
  std::string bad = m;
  bad[bad.size() - 1] ^= 1;
  auto r = ParseMessage(bad);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("checksum") != std::string::npos);
  // A flipped body byte is caught too (the CRC covers everything before it).
  bad = m;
  bad[22] ^= 0x20;
  CHECK_FALSE(ParseMessage(bad).ok());
}

TEST_CASE("malformed OP_MSGs are refused with a message naming the problem", "[server][wire]") {
  std::string body = Bson(R"({"ping": 1, "$db": "admin"})");
  struct Case {
    const char* what;
    std::string message;
    const char* expect;
  };
  std::string truncated_doc = Kind0(body);
  truncated_doc.resize(truncated_doc.size() - 3);
  std::string bad_type = body;
  bad_type[4] = 0x7f;
  std::vector<Case> cases = {
      {"no body", OpMsg(0, ""), "no kind 0"},
      {"two bodies", OpMsg(0, Kind0(body) + Kind0(body)), "two kind 0"},
      {"unknown kind", OpMsg(0, std::string(1, '\2') + body), "section kind 2"},
      {"document past the end", OpMsg(0, truncated_doc), "bad BSON length"},
      {"invalid BSON", OpMsg(0, Kind0(bad_type)), "invalid BSON"},
      {"unknown required flag", OpMsg(1u << 3, Kind0(body)), "required flag"},
      {"no $db", OpMsg(0, Kind0(Bson(R"({"ping": 1})"))), "$db"},
      {"sequence named as a body field",
       OpMsg(0, Kind0(Bson(R"({"insert": "c", "documents": [], "$db": "t"})")) +
                    Kind1("documents", {})),
       "both hold"},
      {"sequence size past the end", OpMsg(0, Kind0(body) + std::string("\1\xff\0\0\0x", 6)),
       "bad size"},
      {"flagBits cut short", Message(kOpMsg, "\0\0"), "flagBits"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto r = ParseMessage(c.message);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find(c.expect) != std::string::npos);
  }
}

TEST_CASE("optional flag bits such as exhaustAllowed are ignored", "[server][wire]") {
  auto r = ParseMessage(OpMsg(kFlagExhaustAllowed, Kind0(Bson(R"({"ping": 1, "$db": "a"})"))));
  CHECK(r.ok());
}

TEST_CASE("headers: lengths under 16 or over 48000000 cannot be framed", "[server][wire]") {
  std::string h;
  PutInt32(&h, 48000000);
  PutInt32(&h, 1);
  PutInt32(&h, 0);
  PutInt32(&h, kOpMsg);
  auto ok = ParseHeader(h);
  REQUIRE(ok.ok());
  CHECK(ok->message_length == 48000000);
  std::string over;
  PutInt32(&over, 48000001);
  over += h.substr(4);
  auto r = ParseHeader(over);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("over the limit of 48000000") != std::string::npos);
  std::string under;
  PutInt32(&under, 15);
  under += h.substr(4);
  CHECK_FALSE(ParseHeader(under).ok());
  std::string negative;
  PutInt32(&negative, -1);
  negative += h.substr(4);
  CHECK_FALSE(ParseHeader(negative).ok());
  CHECK_FALSE(ParseHeader(h.substr(0, 15)).ok());
}

TEST_CASE("a message whose length disagrees with its bytes is refused", "[server][wire]") {
  std::string m = OpMsg(0, Kind0(Bson(R"({"ping": 1, "$db": "a"})")));
  CHECK_FALSE(ParseMessage(m + "x").ok());
  CHECK_FALSE(ParseMessage(m.substr(0, m.size() - 1)).ok());
}

TEST_CASE("other opcodes are refused by number", "[server][wire]") {
  for (int32_t op : {1, 2001, 2002, 2005, 2006, 2012, 0, -1}) {
    auto r = ParseMessage(Message(op, "\0\0\0\0"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("unsupported opcode " + std::to_string(op)) !=
          std::string::npos);
  }
}

std::string OpQuery(const std::string& ns, const std::string& query) {
  std::string p;
  PutInt32(&p, 0);
  p += ns + std::string(1, '\0');
  PutInt32(&p, 0);
  PutInt32(&p, -1);
  return Message(kOpQuery, p + query);
}

TEST_CASE("the legacy OP_QUERY handshake to <db>.$cmd parses", "[server][wire]") {
  auto r = ParseMessage(OpQuery("admin.$cmd", Bson(R"({"isMaster": 1, "client": {}})")));
  REQUIRE(r.ok());
  CHECK(r->legacy_query);
  CHECK(r->database == "admin");
  CHECK(Json(r->command) == R"({ "isMaster" : 1, "client" : {  } })");
  // Wrapped in $query, as drivers do with a read preference.
  r = ParseMessage(OpQuery("test.$cmd", Bson(R"({"$query": {"ping": 1}, "$readPreference": {}})")));
  REQUIRE(r.ok());
  CHECK(r->database == "test");
  CHECK(Json(r->command) == R"({ "ping" : 1 })");
  // A query on a collection is not a command.
  auto q = ParseMessage(OpQuery("test.people", Bson("{}")));
  REQUIRE_FALSE(q.ok());
  CHECK(q.status().message().find("only for commands") != std::string::npos);
  CHECK_FALSE(ParseMessage(OpQuery("admin.$cmd", "\5\0\0")).ok());
}

TEST_CASE("replies frame their body with the request's id", "[server][wire]") {
  std::string body = Bson(R"({"ok": 1.0})");
  std::string msg = BuildMsgReply(7, 42, body);
  auto h = ParseHeader(msg);
  REQUIRE(h.ok());
  CHECK(h->message_length == static_cast<int32_t>(msg.size()));
  CHECK(h->response_to == 42);
  CHECK(h->op_code == kOpMsg);
  CHECK(msg.substr(16, 5) == std::string(5, '\0'));  // flagBits 0, kind 0
  CHECK(msg.substr(21) == body);
  // A reply parses as a message of its own (with $db it would be a command).
  std::string reply = BuildQueryReply(8, 43, body);
  auto rh = ParseHeader(reply);
  REQUIRE(rh.ok());
  CHECK(rh->op_code == kOpReply);
  CHECK(rh->response_to == 43);
  CHECK(reply.size() == 16 + 20 + body.size());
  CHECK(reply.substr(36) == body);
}

TEST_CASE("the fuzz seed corpus holds valid messages that parse", "[server][wire][fuzz]") {
  std::string dir = std::string(MMDOC_SOURCE_DIR) + "/tests/fuzz/corpus/wire";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(entry.path().string());
    CHECK(ParseMessage(bytes).ok());
    n++;
  }
  CHECK(n >= 4);
}

}  // namespace
}  // namespace mmdoc::server
