#include "server/wire.h"

#include <bson/bson.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

namespace mmdoc::server {
namespace {

int32_t ReadInt32(const char* p) {
  uint32_t v = static_cast<uint8_t>(p[0]) | static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 8 |
               static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 16 |
               static_cast<uint32_t>(static_cast<uint8_t>(p[3])) << 24;
  return static_cast<int32_t>(v);
}

void AppendInt32(std::string* out, int32_t v) {
  uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; i++) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

void AppendInt64(std::string* out, int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; i++) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

void PutInt32(std::string* out, size_t at, int32_t v) {
  uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; i++) (*out)[at + i] = static_cast<char>((u >> (8 * i)) & 0xff);
}

// The BSON document starting at `p` with at most `avail` bytes: its length,
// or an error when it runs past them (Document::FromBson then validates it).
Result<size_t> DocLength(const char* p, size_t avail, std::string_view what) {
  if (avail < 5) return Status::InvalidArgument(std::string(what) + " is cut short");
  int32_t len = ReadInt32(p);
  if (len < 5 || static_cast<size_t>(len) > avail) {
    return Status::InvalidArgument(std::string(what) + " has a bad BSON length " +
                                   std::to_string(len));
  }
  return static_cast<size_t>(len);
}

Result<Document> ParseDoc(const char* p, size_t len, std::string_view what) {
  auto doc = Document::FromBson(reinterpret_cast<const uint8_t*>(p), len);
  if (!doc.ok()) {
    return Status::InvalidArgument("invalid BSON in " + std::string(what), doc.status().message());
  }
  return doc;
}

// A kind 1 section: its identifier and documents.
struct Sequence {
  std::string identifier;
  std::vector<Document> docs;
};

Result<Request> ParseOpMsg(const Header& h, std::string_view m) {
  Request r;
  r.header = h;
  if (m.size() < kHeaderSize + 4) return Status::InvalidArgument("OP_MSG without flagBits");
  uint32_t flags = static_cast<uint32_t>(ReadInt32(m.data() + kHeaderSize));
  // Bits 0-15 are required: a receiver must refuse those it does not know.
  if ((flags & 0xffffu & ~(kFlagChecksumPresent | kFlagMoreToCome)) != 0) {
    return Status::InvalidArgument("OP_MSG has unknown required flag bits " +
                                   std::to_string(flags & 0xffffu));
  }
  r.more_to_come = (flags & kFlagMoreToCome) != 0;
  size_t end = m.size();
  if (flags & kFlagChecksumPresent) {
    if (end < kHeaderSize + 4 + 4) return Status::InvalidArgument("OP_MSG checksum missing");
    end -= 4;
    uint32_t want = static_cast<uint32_t>(ReadInt32(m.data() + end));
    uint32_t got = Crc32c(m.substr(0, end));
    if (want != got) return Status::InvalidArgument("OP_MSG checksum does not match");
  }
  size_t pos = kHeaderSize + 4;
  bool have_body = false;
  Document body;
  std::vector<Sequence> sequences;
  while (pos < end) {
    uint8_t kind = static_cast<uint8_t>(m[pos++]);
    if (kind == 0) {
      if (have_body) return Status::InvalidArgument("OP_MSG has two kind 0 sections");
      auto len = DocLength(m.data() + pos, end - pos, "OP_MSG body");
      if (!len.ok()) return len.status();
      auto doc = ParseDoc(m.data() + pos, *len, "OP_MSG body");
      if (!doc.ok()) return doc.status();
      body = std::move(doc).value();
      have_body = true;
      pos += *len;
    } else if (kind == 1) {
      if (end - pos < 4) return Status::InvalidArgument("OP_MSG kind 1 section is cut short");
      int32_t size = ReadInt32(m.data() + pos);
      if (size < 5 || static_cast<size_t>(size) > end - pos) {
        return Status::InvalidArgument("OP_MSG kind 1 section has a bad size " +
                                       std::to_string(size));
      }
      size_t sec_end = pos + static_cast<size_t>(size);
      size_t p = pos + 4;
      const void* nul = std::memchr(m.data() + p, '\0', sec_end - p);
      if (nul == nullptr) {
        return Status::InvalidArgument("OP_MSG kind 1 identifier is not terminated");
      }
      Sequence seq;
      seq.identifier.assign(m.data() + p, static_cast<const char*>(nul) - (m.data() + p));
      if (seq.identifier.empty() ||
          !bson_utf8_validate(seq.identifier.data(), seq.identifier.size(), false)) {
        return Status::InvalidArgument("OP_MSG kind 1 identifier is empty or not UTF-8");
      }
      p += seq.identifier.size() + 1;
      while (p < sec_end) {
        auto len = DocLength(m.data() + p, sec_end - p, "OP_MSG document sequence");
        if (!len.ok()) return len.status();
        if (*len > kMaxDocumentSize && *len <= kMaxSequenceDocumentSize) {
          seq.docs.push_back(TooLargeMarker(*len));
          p += *len;
          continue;
        }
        auto doc = ParseDoc(m.data() + p, *len, "OP_MSG document sequence");
        if (!doc.ok() && doc.status().message().find("nested deeper than") != std::string::npos) {
          seq.docs.push_back(TooDeepMarker());  // refused alone, never stored
          p += *len;
          continue;
        }
        if (!doc.ok()) return doc.status();
        seq.docs.push_back(std::move(doc).value());
        p += *len;
      }
      for (const Sequence& s : sequences) {
        if (s.identifier == seq.identifier) {
          return Status::InvalidArgument("OP_MSG has two kind 1 sections named " + seq.identifier);
        }
      }
      sequences.push_back(std::move(seq));
      pos = sec_end;
    } else {
      return Status::InvalidArgument("OP_MSG has an unknown section kind " + std::to_string(kind));
    }
  }
  if (!have_body) return Status::InvalidArgument("OP_MSG has no kind 0 section");

  bson_t view;
  body.View(&view);
  bson_iter_t it;
  if (!bson_iter_init_find(&it, &view, "$db") || !BSON_ITER_HOLDS_UTF8(&it)) {
    return Status::InvalidArgument("OP_MSG command has no $db string");
  }
  uint32_t db_len = 0;
  const char* db = bson_iter_utf8(&it, &db_len);
  r.database.assign(db, db_len);  // whole: a NUL in it is refused as a name, not cut there
  if (sequences.empty()) {
    r.command = std::move(body);
    return r;
  }
  bson_t merged;
  bson_copy_to(&view, &merged);
  for (const Sequence& s : sequences) {
    if (bson_has_field(&view, s.identifier.c_str())) {
      bson_destroy(&merged);
      return Status::InvalidArgument("OP_MSG body and a kind 1 section both hold " + s.identifier);
    }
    bson_t arr;
    bson_append_array_begin(&merged, s.identifier.data(), static_cast<int>(s.identifier.size()),
                            &arr);
    for (size_t i = 0; i < s.docs.size(); i++) {
      bson_t d;
      s.docs[i].View(&d);
      std::string key = std::to_string(i);
      bson_append_document(&arr, key.c_str(), static_cast<int>(key.size()), &d);
    }
    bson_append_array_end(&merged, &arr);
  }
  // Not validated again: its parts were, one by one. The whole may pass
  // 16 MiB (up to kMaxMessageSize): that is what drivers send sequences for.
  r.command = Document::FromTrustedBytes(
      std::string(reinterpret_cast<const char*>(bson_get_data(&merged)), merged.len));
  bson_destroy(&merged);
  return r;
}

Result<Request> ParseOpQuery(const Header& h, std::string_view m) {
  Request r;
  r.header = h;
  r.legacy_query = true;
  size_t pos = kHeaderSize + 4;  // flags
  if (m.size() < pos) return Status::InvalidArgument("OP_QUERY is cut short");
  const void* nul = std::memchr(m.data() + pos, '\0', m.size() - pos);
  if (nul == nullptr) return Status::InvalidArgument("OP_QUERY collection name is not terminated");
  std::string ns(m.data() + pos, static_cast<const char*>(nul) - (m.data() + pos));
  pos += ns.size() + 1;
  const std::string suffix = ".$cmd";
  if (ns.size() <= suffix.size() || ns.compare(ns.size() - suffix.size(), suffix.size(), suffix)) {
    return Status::InvalidArgument("OP_QUERY is supported only for commands (<db>.$cmd), not " +
                                   ns);
  }
  r.database = ns.substr(0, ns.size() - suffix.size());
  pos += 8;  // numberToSkip, numberToReturn
  if (m.size() < pos) return Status::InvalidArgument("OP_QUERY is cut short");
  auto len = DocLength(m.data() + pos, m.size() - pos, "OP_QUERY query");
  if (!len.ok()) return len.status();
  auto query = ParseDoc(m.data() + pos, *len, "OP_QUERY query");
  if (!query.ok()) return query.status();
  pos += *len;
  if (pos < m.size()) {  // returnFieldsSelector: validated, not used
    auto sel = DocLength(m.data() + pos, m.size() - pos, "OP_QUERY returnFieldsSelector");
    if (!sel.ok()) return sel.status();
    if (pos + *sel != m.size()) return Status::InvalidArgument("OP_QUERY has trailing bytes");
  }
  // Drivers wrap the command as {$query: cmd, $readPreference: ...}.
  bson_t view;
  query->View(&view);
  bson_iter_t it;
  if (bson_iter_init_find(&it, &view, "$query") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
    uint32_t n;
    const uint8_t* data;
    bson_iter_document(&it, &n, &data);
    auto inner = Document::FromBson(data, n);
    if (!inner.ok()) return Status::InvalidArgument("OP_QUERY $query", inner.status().message());
    r.command = std::move(inner).value();
  } else {
    r.command = std::move(query).value();
  }
  return r;
}

std::string Frame(int32_t request_id, int32_t response_to, int32_t op_code,
                  const std::string& payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  AppendInt32(&out, 0);
  AppendInt32(&out, request_id);
  AppendInt32(&out, response_to);
  AppendInt32(&out, op_code);
  out += payload;
  PutInt32(&out, 0, static_cast<int32_t>(out.size()));
  return out;
}

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

}  // namespace

// TooLargeMarker's one field.
constexpr char kTooLargeKey[] = "$mmdoc.tooLarge";

Document TooLargeMarker(size_t size) {
  bson_t b;
  bson_init(&b);
  BSON_APPEND_INT64(&b, kTooLargeKey, static_cast<int64_t>(size));
  Document d = Document::FromTrustedBytes(
      std::string(reinterpret_cast<const char*>(bson_get_data(&b)), b.len));
  bson_destroy(&b);
  return d;
}

size_t TooLargeSize(const uint8_t* data, size_t size) {
  bson_t view;
  bson_iter_t it;
  if (!bson_init_static(&view, data, size) || !bson_iter_init(&it, &view) || !bson_iter_next(&it) ||
      std::strcmp(bson_iter_key(&it), kTooLargeKey) != 0 || !BSON_ITER_HOLDS_INT64(&it))
    return 0;
  const int64_t held = bson_iter_int64(&it);
  return bson_iter_next(&it) || held <= 0 ? 0 : static_cast<size_t>(held);
}

constexpr char kTooDeepKey[] = "$mmdoc.tooDeep";

Document TooDeepMarker() {
  bson_t b;
  bson_init(&b);
  BSON_APPEND_BOOL(&b, kTooDeepKey, true);
  Document d = Document::FromTrustedBytes(
      std::string(reinterpret_cast<const char*>(bson_get_data(&b)), b.len));
  bson_destroy(&b);
  return d;
}

bool IsTooDeep(const uint8_t* data, size_t size) {
  bson_t view;
  bson_iter_t it;
  return bson_init_static(&view, data, size) && bson_iter_init(&it, &view) && bson_iter_next(&it) &&
         std::strcmp(bson_iter_key(&it), kTooDeepKey) == 0 && BSON_ITER_HOLDS_BOOL(&it) &&
         !bson_iter_next(&it);
}

uint32_t Crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  uint32_t c = 0xffffffffu;
  for (char ch : bytes) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

Result<Header> ParseHeader(std::string_view bytes) {
  if (bytes.size() < kHeaderSize) return Status::InvalidArgument("message header is cut short");
  Header h;
  h.message_length = ReadInt32(bytes.data());
  h.request_id = ReadInt32(bytes.data() + 4);
  h.response_to = ReadInt32(bytes.data() + 8);
  h.op_code = ReadInt32(bytes.data() + 12);
  if (h.message_length < static_cast<int32_t>(kHeaderSize)) {
    return Status::InvalidArgument("message length " + std::to_string(h.message_length) +
                                   " is shorter than its header");
  }
  if (static_cast<uint32_t>(h.message_length) > kMaxMessageSize) {
    return Status::InvalidArgument("message length " + std::to_string(h.message_length) +
                                   " is over the limit of " + std::to_string(kMaxMessageSize) +
                                   " bytes");
  }
  return h;
}

Result<Request> ParseMessage(std::string_view message) {
  auto h = ParseHeader(message);
  if (!h.ok()) return h.status();
  if (static_cast<size_t>(h->message_length) != message.size()) {
    return Status::InvalidArgument("message length " + std::to_string(h->message_length) +
                                   " does not match the " + std::to_string(message.size()) +
                                   " bytes given");
  }
  if (h->op_code == kOpMsg) return ParseOpMsg(*h, message);
  if (h->op_code == kOpQuery) return ParseOpQuery(*h, message);
  return Status::InvalidArgument("unsupported opcode " + std::to_string(h->op_code) +
                                 " (only OP_MSG 2013, and OP_QUERY 2004 for commands)");
}

std::string BuildMsgReply(int32_t request_id, int32_t response_to, std::string_view body) {
  std::string payload;
  payload.reserve(5 + body.size());
  AppendInt32(&payload, 0);  // flagBits
  payload.push_back('\0');   // kind 0
  payload.append(body.data(), body.size());
  return Frame(request_id, response_to, kOpMsg, payload);
}

std::string BuildQueryReply(int32_t request_id, int32_t response_to, std::string_view body) {
  std::string payload;
  payload.reserve(20 + body.size());
  AppendInt32(&payload, 0);  // responseFlags
  AppendInt64(&payload, 0);  // cursorID
  AppendInt32(&payload, 0);  // startingFrom
  AppendInt32(&payload, 1);  // numberReturned
  payload.append(body.data(), body.size());
  return Frame(request_id, response_to, kOpReply, payload);
}

}  // namespace mmdoc::server
