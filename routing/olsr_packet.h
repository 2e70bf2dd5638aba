#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "core/expected.h"
#include "core/link.h"
#include "core/node_id.h"

namespace mesh::routing::olsr {

// RFC 3626 packet format (§3.3, §6.1, §9.1, §5.1, §12.1), byte for byte what
// olsrd sends in RFC mode. Addresses are IPv4. Field values are kept raw
// (Vtime bytes, link codes) so a decoded packet re-encodes identically.

inline constexpr uint16_t kPort = 698;
inline constexpr size_t kPacketHeaderSize = 4;
inline constexpr size_t kMessageHeaderSize = 12;

enum class MessageType : uint8_t { hello = 1, tc = 2, mid = 3, hna = 4 };

// §6.1.1: the link code byte is neighbour type (bits 3-2) | link type (bits 1-0).
enum class LinkType : uint8_t { unspecified = 0, asymmetric = 1, symmetric = 2, lost = 3 };
enum class NeighbourType : uint8_t { not_neighbour = 0, symmetric = 1, mpr = 2 };

inline constexpr uint8_t make_link_code(LinkType link, NeighbourType neighbour) {
  return static_cast<uint8_t>((static_cast<uint8_t>(neighbour) << 2) | static_cast<uint8_t>(link));
}
inline constexpr LinkType link_type_of(uint8_t code) { return static_cast<LinkType>(code & 0x03); }
// Raw neighbour type; values above 2 are invalid (§6.1.1: "MUST be silently discarded").
inline constexpr uint8_t neighbour_type_of(uint8_t code) { return (code >> 2) & 0x03; }

// Willingness (§18.8).
inline constexpr uint8_t kWillNever = 0;
inline constexpr uint8_t kWillLow = 1;
inline constexpr uint8_t kWillDefault = 3;
inline constexpr uint8_t kWillHigh = 6;
inline constexpr uint8_t kWillAlways = 7;

struct LinkGroup {
  uint8_t link_code = 0;
  std::vector<core::Ipv4Address> neighbours;
  friend bool operator==(const LinkGroup&, const LinkGroup&) = default;
};

struct Hello {
  uint8_t htime = 0;  // encoded, see olsr_vtime.h
  uint8_t willingness = kWillDefault;
  std::vector<LinkGroup> links;
  friend bool operator==(const Hello&, const Hello&) = default;
};

struct Tc {
  uint16_t ansn = 0;
  std::vector<core::Ipv4Address> advertised;
  friend bool operator==(const Tc&, const Tc&) = default;
};

struct Mid {
  std::vector<core::Ipv4Address> interfaces;
  friend bool operator==(const Mid&, const Mid&) = default;
};

struct HnaEntry {
  core::Ipv4Address network;
  core::Ipv4Address netmask;
  friend bool operator==(const HnaEntry&, const HnaEntry&) = default;
};
struct Hna {
  std::vector<HnaEntry> networks;
  friend bool operator==(const Hna&, const Hna&) = default;
};

// A message of a type we do not process: kept verbatim so the default
// forwarding algorithm (§3.4.1) can pass it on.
struct OpaqueBody {
  std::vector<uint8_t> bytes;
  friend bool operator==(const OpaqueBody&, const OpaqueBody&) = default;
};

// The header every message carries (RFC 3626 §3.3), decoded or not.
struct MessageHeader {
  uint8_t type = 0;
  uint8_t vtime = 0;
  core::Ipv4Address originator;
  uint8_t ttl = 0;
  uint8_t hop_count = 0;
  uint16_t seq = 0;
  friend bool operator==(const MessageHeader&, const MessageHeader&) = default;
};

struct Message : MessageHeader {
  std::variant<Hello, Tc, Mid, Hna, OpaqueBody> body;
  friend bool operator==(const Message&, const Message&) = default;
};

struct Packet {
  uint16_t seq = 0;
  std::vector<Message> messages;
  friend bool operator==(const Packet&, const Packet&) = default;
};

enum class DecodeError {
  truncated,         // shorter than a header, or a block runs past its end
  length_mismatch,   // Packet Length differs from the datagram's size
  no_messages,       // §3.4: a packet without messages is discarded
  bad_message_size,  // Message Size below the header size or past the packet
  bad_block,         // a HELLO link block, TC, MID or HNA body that does not parse exactly
};
std::string_view to_string(DecodeError error);

core::Expected<Packet, DecodeError> decode_packet(core::ByteSpan datagram);

// A message checked but not decoded: its header, and its body as received.
// A receiver tells a duplicate by the header alone, and on a large mesh most
// messages received are duplicates (every neighbour relays every TC), so
// their bodies are never decoded.
struct ScannedMessage : MessageHeader {
  core::ByteSpan body;
  // Message Size: what encoded_size() gives for the decoded message.
  size_t size() const { return kMessageHeaderSize + body.size(); }
};
// Checks the whole packet exactly as decode_packet() does (the same errors
// for the same input) and lists its messages, in order, into `messages`
// (cleared first); sets `seq` to the packet's sequence number.
std::optional<DecodeError> scan_packet(core::ByteSpan datagram, uint16_t& seq, std::vector<ScannedMessage>& messages);
// One message of a packet scan_packet() accepted.
Message decode_message(const ScannedMessage& scanned);
// Message Size and Packet Length are computed here; known bodies are padded
// to nothing because every field is 4-byte aligned already.
std::vector<uint8_t> encode_packet(const Packet& packet);
// One message alone (what forwarding copies into a new packet).
void append_message(const Message& message, std::vector<uint8_t>& out);
size_t encoded_size(const Message& message);

}  // namespace mesh::routing::olsr
