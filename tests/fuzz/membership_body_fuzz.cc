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
#include "tests/fuzz/quiet_protobuf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mesh::fuzz::quiet_protobuf_log();

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
