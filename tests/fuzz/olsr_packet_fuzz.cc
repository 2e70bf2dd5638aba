// OLSR packet decoder: any bytes either decode or are refused, never crash;
// whatever decodes re-encodes to a packet that decodes to the same content.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "routing/olsr_packet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::routing::olsr;
  auto decoded = decode_packet({data, size});
  if (!decoded) return 0;
  auto again = decode_packet(encode_packet(*decoded));
  if (!again || !(*again == *decoded)) std::abort();
  return 0;
}
