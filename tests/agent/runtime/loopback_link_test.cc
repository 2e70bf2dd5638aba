#include "agent/runtime/loopback_link.h"
#include "agent/runtime/udp_link.h"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/ip/udp.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mesh::agent {
namespace {

const core::NodeId kA = core::NodeId::from_octets(127, 0, 0, 21);
const core::NodeId kB = core::NodeId::from_octets(127, 0, 0, 22);
const core::NodeId kC = core::NodeId::from_octets(127, 0, 0, 23);

// A port that is free on all three addresses right now (asks the kernel for
// one on kA, then checks the others).
uint16_t free_port(asio::io_context& io) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    asio::ip::udp::socket probe(io, asio::ip::udp::endpoint(asio::ip::address_v4(kA.value()), 0));
    const uint16_t port = probe.local_endpoint().port();
    bool free = true;
    for (core::NodeId other : {kB, kC}) {
      asio::error_code error;
      asio::ip::udp::socket check(io);
      check.open(asio::ip::udp::v4());
      check.bind(asio::ip::udp::endpoint(asio::ip::address_v4(other.value()), port), error);
      if (error) free = false;
    }
    if (free) return port;
  }
  throw std::runtime_error("no free UDP port on 127.0.0.21-23");
}

struct Received {
  core::Ipv4Address from;
  std::string bytes;
};

core::ByteSpan bytes_of(const std::string& text) {
  return core::ByteSpan(reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

// Runs the io_context until `done` or a generous safety limit (a lost
// datagram fails the test instead of hanging it).
void run_until(asio::io_context& io, const std::function<bool()>& done) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < limit) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
}

class LoopbackLinkTest : public ::testing::Test {
 protected:
  void SetUp() override { port_ = free_port(io_); }

  asio::io_context io_;
  uint16_t port_ = 0;
};

TEST_F(LoopbackLinkTest, NeighboursExchangeUnicastAndBroadcast) {
  LoopbackMeshLink a(io_, kA, port_, {kB});
  LoopbackMeshLink b(io_, kB, port_, {kA});
  EXPECT_EQ(a.local_address(), kA);
  EXPECT_EQ(a.port(), port_);
  std::vector<Received> at_a;
  std::vector<Received> at_b;
  a.set_receiver([&](core::Ipv4Address from, core::ByteSpan d) { at_a.push_back({from, std::string(d.begin(), d.end())}); });
  b.set_receiver([&](core::Ipv4Address from, core::ByteSpan d) { at_b.push_back({from, std::string(d.begin(), d.end())}); });

  a.send(kB, bytes_of("hello b"));
  b.broadcast(bytes_of("to everyone"));
  run_until(io_, [&] { return !at_a.empty() && !at_b.empty(); });

  ASSERT_EQ(at_b.size(), 1U);
  EXPECT_EQ(at_b[0].from, kA);
  EXPECT_EQ(at_b[0].bytes, "hello b");
  ASSERT_EQ(at_a.size(), 1U);
  EXPECT_EQ(at_a[0].from, kB);
  EXPECT_EQ(at_a[0].bytes, "to everyone");
  EXPECT_EQ(a.non_neighbour_dropped(), 0U);
  EXPECT_EQ(b.counters().sent, 1U);
}

TEST_F(LoopbackLinkTest, DatagramsFromNonNeighboursAreDropped) {
  // Line topology A - B - C: C can reach A's socket but is not its neighbour.
  LoopbackMeshLink a(io_, kA, port_, {kB});
  LoopbackMeshLink b(io_, kB, port_, {kA, kC});
  LoopbackMeshLink c(io_, kC, port_, {kB});
  std::vector<Received> at_a;
  std::vector<Received> at_b;
  a.set_receiver([&](core::Ipv4Address from, core::ByteSpan d) { at_a.push_back({from, std::string(d.begin(), d.end())}); });
  b.set_receiver([&](core::Ipv4Address from, core::ByteSpan d) { at_b.push_back({from, std::string(d.begin(), d.end())}); });

  c.send(kA, bytes_of("sneaky"));  // reaches A's socket, must not reach A's receiver
  c.broadcast(bytes_of("from c"));  // only B is C's neighbour
  // A marker from B sent after C's datagrams: loopback delivers in order per
  // socket pair, so once it is seen C's datagram to A has been processed.
  run_until(io_, [&] { return a.non_neighbour_dropped() >= 1 && !at_b.empty(); });
  b.send(kA, bytes_of("marker"));
  run_until(io_, [&] { return !at_a.empty(); });

  EXPECT_EQ(a.non_neighbour_dropped(), 1U);
  ASSERT_EQ(at_a.size(), 1U);
  EXPECT_EQ(at_a[0].from, kB);
  EXPECT_EQ(at_a[0].bytes, "marker");
  ASSERT_EQ(at_b.size(), 1U);
  EXPECT_EQ(at_b[0].from, kC);
  EXPECT_EQ(at_b[0].bytes, "from c");
}

TEST_F(LoopbackLinkTest, BindingATakenAddressThrowsAClearError) {
  LoopbackMeshLink a(io_, kA, port_, {});
  try {
    LoopbackMeshLink again(io_, kA, port_, {});
    // A second agent on the same address and port must fail loudly rather
    // than share the port and take some of the datagrams.
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("127.0.0.21:" + std::to_string(port_)), std::string::npos) << message;
    EXPECT_NE(message.find("already in use"), std::string::npos) << message;
  }
}

TEST(UdpInterfaceLinkTest, LooksUpInterfacesAndNamesMissingOnes) {
  const auto lo = UdpInterfaceLink::lookup_interface("lo");
  ASSERT_TRUE(lo.has_value()) << lo.error();
  EXPECT_EQ(lo->address, core::NodeId::from_octets(127, 0, 0, 1));
  EXPECT_EQ(lo->broadcast, core::NodeId::from_octets(127, 255, 255, 255));  // from the /8 netmask
  const auto missing = UdpInterfaceLink::interface_address("nosuch0");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().find("interface nosuch0 does not exist"), std::string::npos) << missing.error();
  asio::io_context io;
  EXPECT_THROW(UdpInterfaceLink(io, {"nosuch0"}, 0), std::runtime_error);
  EXPECT_THROW(UdpInterfaceLink(io, {}, 0), std::runtime_error);
}

TEST(UdpInterfaceLinkTest, ReceivesFromPeersAndIgnoresItsOwnBroadcasts) {
  asio::io_context io;
  UdpInterfaceLink link(io, {"lo"}, 0);  // port 0: the kernel picks a free one
  ASSERT_NE(link.port(), 0);
  EXPECT_EQ(link.local_address(), core::NodeId::from_octets(127, 0, 0, 1));
  std::vector<Received> received;
  link.set_receiver([&](core::Ipv4Address from, core::ByteSpan d) { received.push_back({from, std::string(d.begin(), d.end())}); });

  link.broadcast(bytes_of("own"));  // to 127.255.255.255, heard back from 127.0.0.1
  link.send(core::NodeId::from_octets(127, 0, 0, 1), bytes_of("own unicast"));
  const core::NodeId peer = core::NodeId::from_octets(127, 0, 0, 41);
  asio::ip::udp::socket other(io, asio::ip::udp::endpoint(asio::ip::address_v4(peer.value()), 0));
  run_until(io, [&] { return link.own_datagrams_ignored() >= 1; });
  const std::string text = "from a peer";
  other.send_to(asio::buffer(text), asio::ip::udp::endpoint(asio::ip::address_v4::loopback(), link.port()));
  run_until(io, [&] { return !received.empty(); });

  ASSERT_EQ(received.size(), 1U);
  EXPECT_EQ(received[0].from, peer);
  EXPECT_EQ(received[0].bytes, text);
  EXPECT_GE(link.own_datagrams_ignored(), 1U);
  EXPECT_EQ(link.counters().send_errors, 0U);
}

}  // namespace
}  // namespace mesh::agent
