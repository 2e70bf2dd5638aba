// OLSR packet decoder: any bytes either decode or are refused, never crash;
// whatever decodes re-encodes to a packet that decodes to the same content.
// The agent-presence body decoder gets the same bytes, and the body of every
// extension message of its type.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <variant>
#include <vector>

#include "routing/agent_presence.h"
#include "routing/olsr_packet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::routing::olsr;
  static const std::vector<uint8_t> kKey(32, 0x42);
  (void)mesh::routing::decode_agent_presence(kKey, mesh::core::NodeId(), {data, size});
  auto decoded = decode_packet({data, size});
  if (!decoded) return 0;
  for (const Message& message : decoded->messages) {
    const auto* body = std::get_if<OpaqueBody>(&message.body);
    if (body != nullptr && message.type == mesh::routing::kAgentPresenceType) {
      (void)mesh::routing::decode_agent_presence(kKey, message.originator, body->bytes);
    }
  }
  auto again = decode_packet(encode_packet(*decoded));
  if (!again || !(*again == *decoded)) std::abort();
  return 0;
}
