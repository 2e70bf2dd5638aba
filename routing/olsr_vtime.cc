#include "routing/olsr_vtime.h"

namespace mesh::routing::olsr {

core::Duration decode_vtime(uint8_t byte) {
  const int64_t a = byte >> 4;
  const int64_t b = byte & 0x0f;
  // C * (1 + a/16) * 2^b = C * (16 + a) * 2^b / 16, exact in microseconds.
  return core::Duration(kVtimeScale.count() * (16 + a) * (int64_t{1} << b) / 16);
}

uint8_t encode_vtime(core::Duration interval) {
  const int64_t t = interval.count();
  const int64_t c = kVtimeScale.count();
  if (t <= c) return 0x00;
  // b: the largest exponent with T/C >= 2^b.
  int b = 0;
  while (b < 15 && t >= c * (int64_t{1} << (b + 1))) ++b;
  // a = 16 * (T / (C * 2^b) - 1), rounded up.
  const int64_t unit = c * (int64_t{1} << b);
  int64_t a = (16 * t + unit - 1) / unit - 16;
  if (a >= 16) {
    if (b == 15) return 0xff;
    a = 0;
    ++b;
  }
  return static_cast<uint8_t>((a << 4) | b);
}

}  // namespace mesh::routing::olsr
