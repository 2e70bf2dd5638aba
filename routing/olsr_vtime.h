#pragma once

#include <cstdint>

#include "core/time.h"

namespace mesh::routing::olsr {

// RFC 3626 §18.3: validity and emission intervals travel as one byte,
// mantissa a (high nibble) and exponent b (low nibble), meaning
// C * (1 + a/16) * 2^b seconds with C = 1/16 s. Encoding rounds up, so a
// receiver never holds state for less time than the sender asked.
inline constexpr core::Duration kVtimeScale = std::chrono::microseconds(62500);  // C

core::Duration decode_vtime(uint8_t byte);
// Clamped to the representable range [C, C * (1 + 15/16) * 2^15].
uint8_t encode_vtime(core::Duration interval);

}  // namespace mesh::routing::olsr
