// MutexBody decoder: any bytes either decode or are refused, never crash;
// whatever decodes re-encodes to bytes that decode again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "mutex/mutex_codec.h"
#include "tests/fuzz/quiet_protobuf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mesh::fuzz::quiet_protobuf_log();

  auto decoded = mesh::mutex::decode_mutex_body(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!decoded) return 0;
  const std::string bytes = decoded->SerializeAsString();
  auto again = mesh::mutex::decode_mutex_body(bytes);
  if (!again || again->kind_case() != decoded->kind_case()) std::abort();
  if (again->SerializeAsString() != bytes) std::abort();
  return 0;
}
