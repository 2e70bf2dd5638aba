// Kgroup body decoder: any bytes either decode or are refused, never crash;
// whatever decodes re-encodes to bytes that decode to the same message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kgroup/kgroup_codec.h"
#include "proto/wire.pb.h"
#include "tests/fuzz/quiet_protobuf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mesh::fuzz::quiet_protobuf_log();

  using namespace mesh::kgroup;
  auto decoded = decode_body(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!decoded) return 0;
  const std::string bytes = encode_body(*decoded);
  auto again = decode_body(bytes);
  if (!again) std::abort();
  // Canonical bytes are a fixed point of decode + encode.
  if (encode_body(*again) != bytes) std::abort();
  return 0;
}
