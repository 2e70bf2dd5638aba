// Envelope decoders: any bytes either decode or are refused, never crash;
// whatever decodes re-encodes to bytes that decode to the same message (and
// the same hop fields, for the hop datagram decoder).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

// Also declares protobuf's SetLogHandler.
#include "proto/wire.pb.h"
#include "routing/envelope_codec.h"
#include "tests/fuzz/quiet_protobuf.h"

namespace {

bool same(const mesh::core::Message& a, const mesh::core::Message& b) {
  return a.src == b.src && a.dst == b.dst && a.kind == b.kind && a.msg_id == b.msg_id && a.body_type == b.body_type &&
         a.body == b.body && a.ttl == b.ttl && a.hops == b.hops;
}

void check_hop_datagram(mesh::core::ByteSpan input) {
  using namespace mesh::routing;
  auto decoded = decode_hop_datagram(input);
  if (!decoded) return;
  // Exactly one of an ack and a message.
  if ((decoded->hop_ack != 0) == decoded->message.has_value()) std::abort();
  const std::string bytes =
      decoded->message ? encode_envelope(*decoded->message, decoded->hop_seq) : encode_hop_ack(decoded->hop_ack);
  auto again = decode_hop_datagram({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  if (!again || again->hop_seq != decoded->hop_seq || again->hop_ack != decoded->hop_ack) std::abort();
  if (decoded->message && !same(*again->message, *decoded->message)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mesh::fuzz::quiet_protobuf_log();

  using namespace mesh::routing;
  check_hop_datagram({data, size});
  auto decoded = decode_envelope({data, size});
  if (!decoded) return 0;
  const std::string bytes = encode_envelope(*decoded);
  auto again = decode_envelope({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  if (!again || !same(*again, *decoded)) std::abort();
  // Canonical bytes are a fixed point of decode + encode.
  if (encode_envelope(*again) != bytes) std::abort();
  return 0;
}
