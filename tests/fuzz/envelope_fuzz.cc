// Envelope decoder: any bytes either decode or are refused, never crash;
// whatever decodes re-encodes to bytes that decode to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

// Also declares protobuf's SetLogHandler.
#include "proto/wire.pb.h"
#include "routing/envelope_codec.h"

namespace {

bool same(const mesh::core::Message& a, const mesh::core::Message& b) {
  return a.src == b.src && a.dst == b.dst && a.kind == b.kind && a.msg_id == b.msg_id && a.body_type == b.body_type &&
         a.body == b.body && a.ttl == b.ttl && a.hops == b.hops;
}

void ignore_protobuf_log(google::protobuf::LogLevel, const char*, int, const std::string&) {}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Hostile strings make protobuf log every invalid UTF-8 field; the decoder
  // refuses them, so the log is only noise here.
  static const bool quiet = (google::protobuf::SetLogHandler(&ignore_protobuf_log), true);
  (void)quiet;

  using namespace mesh::routing;
  auto decoded = decode_envelope({data, size});
  if (!decoded) return 0;
  const std::string bytes = encode_envelope(*decoded);
  auto again = decode_envelope({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  if (!again || !same(*again, *decoded)) std::abort();
  // Canonical bytes are a fixed point of decode + encode.
  if (encode_envelope(*again) != bytes) std::abort();
  return 0;
}
