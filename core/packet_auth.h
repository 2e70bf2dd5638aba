#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/expected.h"
#include "core/link.h"
#include "core/node_id.h"

namespace mesh::core {

// The mesh key: 32 random bytes shared by every agent of one mesh, written
// as 64 hex digits in the key file (`openssl rand -hex 32 > mesh.key`).
class MeshKey {
 public:
  // Accepts exactly 64 hex digits, surrounding whitespace ignored.
  static Expected<MeshKey, std::string> from_hex(std::string_view text);
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

enum class AuthError {
  truncated,    // shorter than header + tag
  bad_version,  // not a sealed agent packet (or a newer format)
  bad_tag,      // wrong key, or the bytes were altered
  replay,       // counter already seen from this sender
  too_old,      // counter below the sender's replay window
};
std::string_view to_string(AuthError error);

// Authenticates every agent datagram on a link with HMAC-SHA256 under the
// mesh key. A sealed datagram is
//   version(1) | sender NodeId(4, big-endian) | counter(8, big-endian) | payload | tag(16)
// where tag = HMAC-SHA256(key, everything before it) truncated to 128 bits.
// The counter is per sender and strictly increasing; receivers keep, per
// sender, the highest counter and a bitmap of the `replay_window` below it
// (as IPsec does), so a replayed or very old datagram is refused while
// reordering within the window is not. The sender's first counter must
// exceed every counter it used before a restart: the agent derives it from a
// boot count persisted in Storage (Pis have no real-time clock to use).
//
// Key rotation: besides the key it seals with, a PacketAuth may accept one
// more key on receive (also_accept), never sealing with it. A mesh changes
// keys in two rolling passes, one node at a time: first every node keeps
// sealing with the old key and also accepts the new one, then every node
// seals with the new key and also accepts the old one. At every moment each
// node can open what every other seals, so the mesh never splits; once
// nothing opens with the old key any more (Opened::key), it is dropped.
class PacketAuth {
 public:
  static constexpr size_t kHeaderSize = 13;
  static constexpr size_t kTagSize = 16;
  static constexpr size_t kOverhead = kHeaderSize + kTagSize;
  static constexpr uint8_t kVersion = 1;

  PacketAuth(const MeshKey& key, NodeId self, uint64_t first_counter, unsigned replay_window = 256);

  // Also opens datagrams sealed with `key`; replaces an earlier one.
  void also_accept(const MeshKey& key);

  std::vector<uint8_t> seal(ByteSpan payload);

  // Which key a datagram was sealed with.
  enum class Key { sealing, accepted };
  struct Opened {
    NodeId sender;
    uint64_t counter;
    ByteSpan payload;  // points into the datagram passed to open()
    Key key = Key::sealing;
  };
  // Checks the tag (under the sealing key, then the accepted one), then the
  // sender's replay window, and only then records the counter as seen. One
  // window per sender whatever the key: a datagram replayed under the other
  // key is still a replay.
  Expected<Opened, AuthError> open(ByteSpan datagram);

  uint64_t next_counter() const { return next_counter_; }

 private:
  struct Window {
    uint64_t highest = 0;
    std::vector<uint64_t> seen;  // bit i of the window: counter highest - i seen
  };
  std::vector<uint8_t> key_;
  std::optional<std::vector<uint8_t>> accepted_key_;
  NodeId self_;
  uint64_t next_counter_;
  unsigned replay_window_;
  std::unordered_map<NodeId, Window> windows_;
};

}  // namespace mesh::core
