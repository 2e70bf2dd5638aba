#include "routing/olsr_vtime.h"

#include <gtest/gtest.h>

namespace mesh::routing::olsr {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(OlsrVtime, DecodesTheCapturedValues) {
  EXPECT_EQ(decode_vtime(0x86), seconds(6));   // olsrd HELLO validity
  EXPECT_EQ(decode_vtime(0xe7), seconds(15));  // olsrd TC validity
  EXPECT_EQ(decode_vtime(0x05), seconds(2));   // HELLO interval
  EXPECT_EQ(decode_vtime(0x00), milliseconds(62) + std::chrono::microseconds(500));
}

TEST(OlsrVtime, EncodesRfcDefaults) {
  EXPECT_EQ(encode_vtime(seconds(6)), 0x86);
  EXPECT_EQ(encode_vtime(seconds(15)), 0xe7);
  EXPECT_EQ(encode_vtime(seconds(2)), 0x05);
  EXPECT_EQ(encode_vtime(seconds(5)), 0x46);  // TC interval: C * (1 + 4/16) * 2^6
  EXPECT_EQ(encode_vtime(seconds(30)), 0xe8);
}

TEST(OlsrVtime, EveryByteRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    EXPECT_EQ(encode_vtime(decode_vtime(byte)), byte) << "byte " << b;
  }
}

TEST(OlsrVtime, EncodingNeverShortens) {
  for (int64_t ms = 63; ms < 4'000'000; ms = ms * 9 / 8 + 1) {
    const core::Duration asked = milliseconds(ms);
    const core::Duration sent = decode_vtime(encode_vtime(asked));
    EXPECT_GE(sent, asked) << ms << " ms";
    // Rounding up costs at most one mantissa step (1/16 of the exponent's unit).
    EXPECT_LE(sent.count(), asked.count() * 17 / 16 + 1) << ms << " ms";
  }
}

TEST(OlsrVtime, ClampsOutOfRange) {
  EXPECT_EQ(encode_vtime(core::Duration(0)), 0x00);
  EXPECT_EQ(encode_vtime(seconds(100000)), 0xff);
}

}  // namespace
}  // namespace mesh::routing::olsr
