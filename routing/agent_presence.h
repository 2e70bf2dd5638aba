#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "core/link.h"
#include "core/node_id.h"

namespace mesh::routing {

// The body of meshagent's agent-presence OLSR message (message type
// kAgentPresenceType): "this originator runs a meshagent of this mesh".
//
//   magic 'm' 'a' (2) | version (1) | reserved, sent 0 (1) | counter (8, big-endian) | tag (16)
//
// tag = HMAC-SHA256(mesh key, "meshagent agent presence" | originator (4) |
// the 12 bytes before the tag), truncated to 128 bits, so only a holder of
// the mesh key can claim a node is an agent; the originator comes from the
// OLSR message header, which the tag therefore covers. 28 bytes keep the
// message 32-bit aligned (RFC 3626 §3.3). The counter grows with every
// announcement and across restarts (the agent seeds it from its boot count),
// so a receiver can refuse an announcement older than one it accepted.
inline constexpr uint8_t kAgentPresenceType = 224;
inline constexpr uint8_t kAgentPresenceVersion = 1;
inline constexpr size_t kAgentPresenceSize = 28;

struct AgentPresence {
  uint64_t counter = 0;
};

enum class PresenceError {
  bad_size,     // not exactly kAgentPresenceSize bytes
  bad_magic,    // not an agent-presence body (another extension using the type)
  bad_version,  // a version this build does not know
  bad_tag,      // not sealed with this mesh's key for this originator
};
std::string_view to_string(PresenceError error);

std::vector<uint8_t> encode_agent_presence(std::span<const uint8_t> mesh_key, core::NodeId originator,
                                           const AgentPresence& presence);
core::Expected<AgentPresence, PresenceError> decode_agent_presence(std::span<const uint8_t> mesh_key,
                                                                  core::NodeId originator, core::ByteSpan body);

}  // namespace mesh::routing
