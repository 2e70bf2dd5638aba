#include "core/node_id.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mesh::core
