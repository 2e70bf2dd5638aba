#include "core/node_id.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

#include "core/rng.h"

namespace mesh::core {
namespace {

TEST(Ipv4Address, ParsesDottedQuad) {
  auto a = Ipv4Address::parse("10.1.2.3");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->value(), 0x0a010203u);
  EXPECT_EQ(a->to_string(), "10.1.2.3");
  EXPECT_EQ(Ipv4Address::parse("255.255.255.255")->value(), 0xffffffffu);
  EXPECT_EQ(Ipv4Address::parse("0.0.0.0")->value(), 0u);
}

TEST(Ipv4Address, RejectsEverythingElse) {
  for (const char* bad : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.-4", "a.b.c.d", "1..2.3", "01.2.3.4",
                          " 1.2.3.4", "1.2.3.4 ", "1.2.3.4x", "99999999999.1.1.1"}) {
    EXPECT_FALSE(Ipv4Address::parse(bad)) << bad;
  }
}

TEST(Ipv4Address, OrdersNumerically) {
  EXPECT_LT(Ipv4Address::from_octets(10, 0, 0, 2), Ipv4Address::from_octets(10, 0, 0, 10));
}

// to_string() formats into one buffer; the old formula, for comparison.
TEST(Ipv4Address, ToStringMatchesOctetByOctetFormula) {
  Rng rng(17);
  for (int i = 0; i < 10000; ++i) {
    uint32_t v = static_cast<uint32_t>(rng.below(uint64_t{1} << 32));
    if (i < 4) v = std::array<uint32_t, 4>{0, 0xffffffff, 0x0a000001, 0x01000000}[static_cast<size_t>(i)];
    const std::string old = std::to_string(v >> 24) + '.' + std::to_string((v >> 16) & 0xff) + '.' +
                            std::to_string((v >> 8) & 0xff) + '.' + std::to_string(v & 0xff);
    EXPECT_EQ(Ipv4Address(v).to_string(), old);
    EXPECT_EQ(Ipv4Address::parse(old), Ipv4Address(v));
  }
}

}  // namespace
}  // namespace mesh::core
