#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/expected.h"
#include "core/link.h"
#include "core/message.h"

namespace mesh::routing {

inline constexpr uint32_t kEnvelopeVersion = 1;

enum class EnvelopeError {
  malformed,       // not a parseable Envelope
  bad_version,     // version other than kEnvelopeVersion
  unknown_body,    // no body, or a body this build does not know
  bad_kind,        // a kind this build does not know
  bad_hop_fields,  // a hop ack with anything but the version, or a hop_seq on a flood
};
std::string_view to_string(EnvelopeError error);

// core::Message <-> proto::Envelope bytes. body_type is the field number of
// the Envelope's body oneof member and body that member's serialized bytes,
// so this codec is the only place that ties core's opaque bodies to the
// schema. A rejection's body travels as rejection_reason.
// A message, ignoring any hop-by-hop fields; a hop ack alone is refused
// (unknown_body: it has none).
std::string encode_envelope(const core::Message& message);
core::Expected<core::Message, EnvelopeError> decode_envelope(core::ByteSpan bytes);

// One datagram of the agent port as the hop-by-hop ARQ sees it (routing/
// hop_arq.h): a message whose previous hop asks for an ack of hop_seq (0:
// no ack wanted), or, when hop_ack is nonzero, an ack alone (no message).
struct HopDatagram {
  std::optional<core::Message> message;
  uint64_t hop_seq = 0;
  uint64_t hop_ack = 0;
};
// `message` asking its next hop for an ack of `hop_seq` (0: none). A flood
// is never acknowledged, so it must go with 0.
std::string encode_envelope(const core::Message& message, uint64_t hop_seq);
// The ack of the previous hop's datagram `hop_seq` (nonzero).
std::string encode_hop_ack(uint64_t hop_seq);
core::Expected<HopDatagram, EnvelopeError> decode_hop_datagram(core::ByteSpan bytes);

// The oneof member's name ("echo", "membership"), or "unknown"; used to label
// traffic metrics per layer.
std::string_view body_type_name(uint32_t body_type);

}  // namespace mesh::routing
