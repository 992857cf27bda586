// MongoDB wire-protocol framing for `mmdoc serve`: parsing requests from
// bytes and building replies, with no sockets (so it can be fuzzed and
// unit-tested on its own).
//
// Every message starts with a 16-byte header, little-endian int32s:
//   messageLength  the whole message, header included
//   requestID      chosen by the sender
//   responseTo     the requestID this answers (0 in a request)
//   opCode         2013 OP_MSG, 2004 OP_QUERY (legacy), 1 OP_REPLY
//
// OP_MSG (2013): uint32 flagBits, then sections, then a CRC-32C of all the
// bytes before it when flagBits has checksumPresent (bit 0):
//   kind 0: one BSON document, the command body (exactly one per message)
//   kind 1: int32 size (itself included), cstring identifier, BSON
//           documents filling the size (e.g. "documents" of an insert)
// Bit 1 moreToCome: the sender wants no reply (w:0 writes). Bits 2..15 are
// required bits this parser does not know: refused. Bit 16 exhaustAllowed
// and the other optional bits are ignored.
//
// OP_QUERY (2004), only as drivers send the handshake to "<db>.$cmd":
//   int32 flags, cstring fullCollectionName, int32 numberToSkip, int32
//   numberToReturn, BSON query (the command, possibly wrapped as
//   {$query: cmd, ...}), optional BSON returnFieldsSelector.
// It is answered with OP_REPLY (1): int32 responseFlags, int64 cursorID,
// int32 startingFrom, int32 numberReturned, the documents.
//
// Thread safety: plain functions over values.
#ifndef MMDOC_SERVER_WIRE_H_
#define MMDOC_SERVER_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mmdoc/document.h"
#include "mmdoc/status.h"

namespace mmdoc::server {

inline constexpr int32_t kOpReply = 1;
inline constexpr int32_t kOpQuery = 2004;
inline constexpr int32_t kOpMsg = 2013;

inline constexpr size_t kHeaderSize = 16;
// MongoDB's maxMessageSizeBytes: no message may be larger.
inline constexpr uint32_t kMaxMessageSize = 48000000;

inline constexpr uint32_t kFlagChecksumPresent = 1u << 0;
inline constexpr uint32_t kFlagMoreToCome = 1u << 1;
inline constexpr uint32_t kFlagExhaustAllowed = 1u << 16;

struct Header {
  int32_t message_length = 0;
  int32_t request_id = 0;
  int32_t response_to = 0;
  int32_t op_code = 0;
};

// Reads the header from the first kHeaderSize bytes of `bytes`.
// InvalidArgument when there are fewer, or the length is under 16 or over
// kMaxMessageSize (the message can then not be framed: close the
// connection).
Result<Header> ParseHeader(std::string_view bytes);

// A kind 1 document may pass 16 MiB by this much, as in MongoDB, so that a
// command can report it as a write error instead of failing whole.
inline constexpr size_t kMaxSequenceDocumentSize = kMaxDocumentSize + 16 * 1024;

// What stands in the command for a kind 1 document over kMaxDocumentSize
// (and within kMaxSequenceDocumentSize), which is not parsed:
// {"$mmdoc.tooLarge": <its size>}. A write command refuses that statement
// alone (TooLargeSize says which), as MongoDB does.
Document TooLargeMarker(size_t size);
// The size a TooLargeMarker holds, or 0 for any other document (the
// document's bytes, read in place).
size_t TooLargeSize(const uint8_t* data, size_t size);

// What stands in the command for a kind 1 document nested deeper than
// kMaxNestingDepth: {"$mmdoc.tooDeep": true}. As with TooLargeMarker, its
// statement alone fails; MongoDB too refuses such a document by itself.
Document TooDeepMarker();
bool IsTooDeep(const uint8_t* data, size_t size);

// A request, parsed from a whole message.
struct Request {
  Header header;
  bool legacy_query = false;  // OP_QUERY: answer with OP_REPLY
  bool more_to_come = false;  // OP_MSG moreToCome: send no reply
  std::string database;       // OP_QUERY: "<db>" of "<db>.$cmd"; OP_MSG: from $db
  // The command: the kind 0 body with each kind 1 sequence appended as an
  // array under its identifier; OP_QUERY's query unwrapped from $query.
  Document command;
};

// Parses one whole message (header included, exactly message_length
// bytes). InvalidArgument naming the problem: an opcode other than OP_MSG
// and OP_QUERY, a section or document running past the end, invalid BSON,
// not exactly one kind 0 section, a kind 1 identifier the body already
// has, a checksum that does not match, an OP_QUERY to anything but
// "<db>.$cmd", a command without $db (OP_MSG).
Result<Request> ParseMessage(std::string_view message);

// The whole OP_MSG reply (header, flagBits 0, one kind 0 section) carrying
// the BSON document `body`, answering `response_to`. (Raw bytes: a reply
// with a full 16 MiB batch is a little over Document's limit.)
std::string BuildMsgReply(int32_t request_id, int32_t response_to, std::string_view body);
// The whole OP_REPLY carrying `body` as its one document.
std::string BuildQueryReply(int32_t request_id, int32_t response_to, std::string_view body);

// CRC-32C (Castagnoli), as OP_MSG's checksum.
uint32_t Crc32c(std::string_view bytes);

}  // namespace mmdoc::server

#endif  // MMDOC_SERVER_WIRE_H_
