// libFuzzer target: `mmdoc serve`'s message parser (server/wire.h) on
// untrusted bytes, as a client could send them. Either the message is
// refused with a Status or it parses into a valid command whose reply
// frames again.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mmdoc::server;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = ParseHeader(bytes);
  auto r = ParseMessage(bytes);
  if (!r.ok()) return 0;
  // A parsed message had a valid header of exactly its length.
  if (!header.ok() || static_cast<size_t>(header->message_length) != size) std::abort();
  auto again = mmdoc::Document::FromBson(r->command.data(), r->command.size());
  if (!again.ok()) std::abort();
  std::string reply = BuildMsgReply(1, r->header.request_id, r->command.bytes());
  if (!ParseHeader(reply).ok()) std::abort();
  return 0;
}
