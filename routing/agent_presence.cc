#include "routing/agent_presence.h"

#include <algorithm>

#include "core/sha256.h"

namespace mesh::routing {
namespace {

constexpr uint8_t kMagic0 = 'm';
constexpr uint8_t kMagic1 = 'a';
constexpr size_t kSignedSize = 12;
constexpr size_t kTagSize = kAgentPresenceSize - kSignedSize;
constexpr std::string_view kDomain = "meshagent agent presence";

std::array<uint8_t, kTagSize> tag_of(std::span<const uint8_t> mesh_key, core::NodeId originator,
                                     std::span<const uint8_t> signed_part) {
  std::vector<uint8_t> input(kDomain.begin(), kDomain.end());
  const uint32_t address = originator.value();
  for (int shift = 24; shift >= 0; shift -= 8) input.push_back(static_cast<uint8_t>(address >> shift));
  input.insert(input.end(), signed_part.begin(), signed_part.end());
  const core::Sha256Digest digest = core::hmac_sha256(mesh_key, input);
  std::array<uint8_t, kTagSize> tag{};
  std::copy_n(digest.begin(), kTagSize, tag.begin());
  return tag;
}

}  // namespace

std::string_view to_string(PresenceError error) {
  switch (error) {
    case PresenceError::bad_size:
      return "bad_size";
    case PresenceError::bad_magic:
      return "bad_magic";
    case PresenceError::bad_version:
      return "bad_version";
    case PresenceError::bad_tag:
      return "bad_tag";
  }
  return "unknown";
}

std::vector<uint8_t> encode_agent_presence(std::span<const uint8_t> mesh_key, core::NodeId originator,
                                           const AgentPresence& presence) {
  std::vector<uint8_t> out = {kMagic0, kMagic1, kAgentPresenceVersion, 0};
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(presence.counter >> shift));
  const auto tag = tag_of(mesh_key, originator, out);
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

core::Expected<AgentPresence, PresenceError> decode_agent_presence(std::span<const uint8_t> mesh_key,
                                                                  core::NodeId originator, core::ByteSpan body) {
  if (body.size() != kAgentPresenceSize) return core::Unexpected(PresenceError::bad_size);
  if (body[0] != kMagic0 || body[1] != kMagic1) return core::Unexpected(PresenceError::bad_magic);
  if (body[2] != kAgentPresenceVersion) return core::Unexpected(PresenceError::bad_version);
  const auto expected = tag_of(mesh_key, originator, body.first(kSignedSize));
  // Constant time, so the tag cannot be guessed byte by byte from timings.
  uint8_t difference = 0;
  for (size_t i = 0; i < kTagSize; ++i) difference |= static_cast<uint8_t>(expected[i] ^ body[kSignedSize + i]);
  if (difference != 0) return core::Unexpected(PresenceError::bad_tag);
  AgentPresence presence;
  for (size_t i = 4; i < kSignedSize; ++i) presence.counter = (presence.counter << 8) | body[i];
  return presence;
}

}  // namespace mesh::routing
