#pragma once

#include <cstdint>
#include <string>

#include "core/node_id.h"

namespace mesh::core {

// What an agent message is to core: addressing, a kind for request/response
// matching, and an opaque body. On the wire it is proto/wire.proto's
// Envelope, where `body_type` is the field number of the body oneof member
// and `body` that member's serialized bytes; routing/envelope_codec converts.
// Core knows nothing of the schemas, so layers stay independent of each
// other's messages.
enum class MessageKind : uint8_t {
  datagram = 0,   // fire and forget
  request = 1,    // expects a response or a rejection with the same msg_id
  response = 2,
  rejection = 3,  // the receiver refused the request (no handler, or the handler said no)
};

struct Message {
  NodeId src;
  NodeId dst;
  MessageKind kind = MessageKind::datagram;
  uint64_t msg_id = 0;
  uint32_t body_type = 0;  // Envelope body oneof field number
  std::string body;        // serialized body message
  uint32_t ttl = 0;        // hops left; 0 lets the transport choose its default
  uint32_t hops = 0;       // hops travelled, counted by forwarders
};

}  // namespace mesh::core
