// Membership body decoder (Medley's pings, acks, ping-reqs, nacks, gossip
// and digest-based syncs): any bytes either decode or are refused, never
// crash; whatever decodes re-encodes to bytes that decode again, to the same
// bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "membership/membership_codec.h"

namespace {

void ignore_protobuf_log(google::protobuf::LogLevel, const char*, int, const std::string&) {}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Hostile strings make protobuf log every invalid UTF-8 field; the decoder
  // refuses them, so the log is only noise here.
  static const bool quiet = (google::protobuf::SetLogHandler(&ignore_protobuf_log), true);
  (void)quiet;

  using namespace mesh::membership;
  const CodecLimits limits;
  auto decoded = decode_body(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!decoded) return 0;
  const std::string bytes = decoded->SerializeAsString();
  auto again = decode_body(bytes, limits);
  if (!again) std::abort();
  if (again->SerializeAsString() != bytes) std::abort();
  return 0;
}
