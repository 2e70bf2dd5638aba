#pragma once

#include <string>
#include <string_view>

#include "core/expected.h"
#include "core/link.h"
#include "core/message.h"

namespace mesh::routing {

inline constexpr uint32_t kEnvelopeVersion = 1;

enum class EnvelopeError {
  malformed,     // not a parseable Envelope
  bad_version,   // version other than kEnvelopeVersion
  unknown_body,  // no body, or a body this build does not know
  bad_kind,      // a kind this build does not know
};
std::string_view to_string(EnvelopeError error);

// core::Message <-> proto::Envelope bytes. body_type is the field number of
// the Envelope's body oneof member and body that member's serialized bytes,
// so this codec is the only place that ties core's opaque bodies to the
// schema. A rejection's body travels as rejection_reason.
std::string encode_envelope(const core::Message& message);
core::Expected<core::Message, EnvelopeError> decode_envelope(core::ByteSpan bytes);

// The oneof member's name ("echo", "membership"), or "unknown"; used to label
// traffic metrics per layer.
std::string_view body_type_name(uint32_t body_type);

}  // namespace mesh::routing
