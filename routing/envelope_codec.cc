#include "routing/envelope_codec.h"

#include <limits>

#include "core/transport.h"
#include "proto/wire.pb.h"

namespace mesh::routing {
namespace {

using google::protobuf::FieldDescriptor;

const google::protobuf::OneofDescriptor& body_oneof() {
  static const google::protobuf::OneofDescriptor* const oneof =
      proto::Envelope::descriptor()->FindOneofByName("body");
  return *oneof;
}

// The body oneof member with this field number, or null.
const FieldDescriptor* body_field(uint32_t body_type) {
  if (body_type == 0 || body_type > static_cast<uint32_t>(FieldDescriptor::kMaxNumber)) return nullptr;
  const FieldDescriptor* field = proto::Envelope::descriptor()->FindFieldByNumber(static_cast<int>(body_type));
  if (field == nullptr || field->containing_oneof() != &body_oneof()) return nullptr;
  return field;
}

// A field number that is no header field of this build: either a known body
// member or one a newer build may know. Header numbers must never be used for
// a body, or the body would overwrite a header field on the wire.
bool usable_body_number(uint32_t body_type) {
  if (body_type == 0 || body_type > static_cast<uint32_t>(FieldDescriptor::kMaxNumber)) return false;
  if (body_type >= static_cast<uint32_t>(FieldDescriptor::kFirstReservedNumber) &&
      body_type <= static_cast<uint32_t>(FieldDescriptor::kLastReservedNumber)) {
    return false;
  }
  const FieldDescriptor* field = proto::Envelope::descriptor()->FindFieldByNumber(static_cast<int>(body_type));
  return field == nullptr || field->containing_oneof() == &body_oneof();
}

// Protobuf's wire type of bytes, strings and embedded messages.
constexpr uint64_t kWireTypeLengthDelimited = 2;

void append_varint(uint64_t value, std::string& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// Wire-identical to setting the oneof member from its serialized bytes, but
// without parsing and re-serializing the body on the way out.
void append_length_delimited(uint32_t field_number, std::string_view bytes, std::string& out) {
  append_varint((uint64_t{field_number} << 3) | kWireTypeLengthDelimited, out);
  append_varint(bytes.size(), out);
  out.append(bytes);
}

proto::MessageKind to_proto(core::MessageKind kind) {
  switch (kind) {
    case core::MessageKind::datagram:
      return proto::DATAGRAM;
    case core::MessageKind::request:
      return proto::REQUEST;
    case core::MessageKind::response:
      return proto::RESPONSE;
    case core::MessageKind::rejection:
      return proto::REJECTION;
  }
  return proto::DATAGRAM;
}

}  // namespace

std::string_view to_string(EnvelopeError error) {
  switch (error) {
    case EnvelopeError::malformed:
      return "malformed";
    case EnvelopeError::bad_version:
      return "bad_version";
    case EnvelopeError::unknown_body:
      return "unknown_body";
    case EnvelopeError::bad_kind:
      return "bad_kind";
    case EnvelopeError::bad_hop_fields:
      return "bad_hop_fields";
  }
  return "unknown";
}

std::string encode_envelope(const core::Message& message) { return encode_envelope(message, 0); }

std::string encode_envelope(const core::Message& message, uint64_t hop_seq) {
  proto::Envelope envelope;
  envelope.set_version(kEnvelopeVersion);
  envelope.set_src(message.src.value());
  envelope.set_dst(message.dst.value());
  envelope.set_ttl(message.ttl);
  envelope.set_kind(to_proto(message.kind));
  envelope.set_msg_id(message.msg_id);
  envelope.set_hops(message.hops);
  envelope.set_hop_seq(hop_seq);
  const bool rejection = message.kind == core::MessageKind::rejection;
  if (rejection) envelope.set_rejection_reason(message.body);
  std::string out = envelope.SerializeAsString();
  // A rejection names the refused body type with an empty member, so the
  // sender can tell which layer's request was refused; its body is the reason.
  if (usable_body_number(message.body_type)) {
    append_length_delimited(message.body_type, rejection ? std::string_view{} : std::string_view{message.body}, out);
  }
  return out;
}

std::string encode_hop_ack(uint64_t hop_seq) {
  proto::Envelope envelope;
  envelope.set_version(kEnvelopeVersion);
  envelope.set_hop_ack(hop_seq);
  return envelope.SerializeAsString();
}

namespace {

// An ack carries nothing but the version: anything else set is a confused or
// hostile sender, not something to guess the meaning of.
bool ack_alone(const proto::Envelope& envelope) {
  return envelope.src() == 0 && envelope.dst() == 0 && envelope.ttl() == 0 && envelope.kind() == proto::DATAGRAM &&
         envelope.msg_id() == 0 && envelope.hops() == 0 && envelope.rejection_reason().empty() &&
         envelope.hop_seq() == 0 && envelope.body_case() == proto::Envelope::BODY_NOT_SET &&
         envelope.GetReflection()->GetUnknownFields(envelope).empty();
}
core::Expected<core::Message, EnvelopeError> decode_message(const proto::Envelope& envelope) {
  const int kind = static_cast<int>(envelope.kind());
  if (kind < proto::DATAGRAM || kind > proto::REJECTION) return core::Unexpected{EnvelopeError::bad_kind};

  core::Message message;
  message.src = core::NodeId(envelope.src());
  message.dst = core::NodeId(envelope.dst());
  message.ttl = envelope.ttl();
  message.kind = static_cast<core::MessageKind>(kind);
  message.msg_id = envelope.msg_id();
  message.hops = envelope.hops();

  // A body of a field number this build does not know parses as an unknown
  // field, leaving the oneof unset.
  const auto body_case = envelope.body_case();
  if (message.kind == core::MessageKind::rejection) {
    // The reason is what matters; the refused body type is informative only.
    message.body_type = static_cast<uint32_t>(body_case);
    message.body = envelope.rejection_reason();
    return message;
  }
  if (body_case == proto::Envelope::BODY_NOT_SET) return core::Unexpected{EnvelopeError::unknown_body};
  const FieldDescriptor* field = body_field(static_cast<uint32_t>(body_case));
  if (field == nullptr) return core::Unexpected{EnvelopeError::unknown_body};
  message.body_type = static_cast<uint32_t>(body_case);
  message.body = envelope.GetReflection()->GetMessage(envelope, field).SerializeAsString();
  return message;
}

core::Expected<proto::Envelope, EnvelopeError> parse(core::ByteSpan bytes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return core::Unexpected{EnvelopeError::malformed};
  }
  proto::Envelope envelope;
  if (!envelope.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return core::Unexpected{EnvelopeError::malformed};
  }
  if (envelope.version() != kEnvelopeVersion) return core::Unexpected{EnvelopeError::bad_version};
  return envelope;
}

}  // namespace

core::Expected<core::Message, EnvelopeError> decode_envelope(core::ByteSpan bytes) {
  auto envelope = parse(bytes);
  if (!envelope) return core::Unexpected{envelope.error()};
  return decode_message(*envelope);
}

core::Expected<HopDatagram, EnvelopeError> decode_hop_datagram(core::ByteSpan bytes) {
  auto envelope = parse(bytes);
  if (!envelope) return core::Unexpected{envelope.error()};
  HopDatagram datagram;
  if (envelope->hop_ack() != 0) {
    if (!ack_alone(*envelope)) return core::Unexpected{EnvelopeError::bad_hop_fields};
    datagram.hop_ack = envelope->hop_ack();
    return datagram;
  }
  auto message = decode_message(*envelope);
  if (!message) return core::Unexpected{message.error()};
  if (envelope->hop_seq() != 0 && message->dst == core::kEveryNode) {
    return core::Unexpected{EnvelopeError::bad_hop_fields};
  }
  datagram.hop_seq = envelope->hop_seq();
  datagram.message = std::move(*message);
  return datagram;
}

std::string_view body_type_name(uint32_t body_type) {
  const FieldDescriptor* field = body_field(body_type);
  if (field == nullptr) return "unknown";
  return field->name();
}

}  // namespace mesh::routing
