// Log snapshot decoder (kgroup/log_snapshot.h): any bytes either decode or
// are refused, never crash; whatever decodes re-encodes to a snapshot that
// decodes to the same fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kgroup/log_snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::kgroup;
  const auto decoded = decode_log_snapshot(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!decoded) return 0;
  const auto again = decode_log_snapshot(encode_log_snapshot(*decoded));
  if (!again || again->last_seq != decoded->last_seq || again->last_term != decoded->last_term ||
      again->state != decoded->state) {
    std::abort();
  }
  return 0;
}
