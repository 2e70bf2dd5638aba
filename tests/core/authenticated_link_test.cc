#include "core/authenticated_link.h"

#include <gtest/gtest.h>

#include <string>

#include "core/log.h"

namespace mesh::core {
namespace {

// One end of an in-memory wire between two raw links. Every datagram goes to
// the peer whatever the destination, so a test can see where it was sent.
class FakeLink final : public Link {
 public:
  explicit FakeLink(Ipv4Address address) : address_(address) {}

  void connect(FakeLink& peer) { peer_ = &peer; }
  Ipv4Address local_address() const override { return address_; }
  void broadcast(ByteSpan datagram) override {
    last_sent_.assign(datagram.begin(), datagram.end());
    last_destination_.reset();
    if (peer_) peer_->deliver(address_, datagram);
  }
  void send(Ipv4Address neighbour, ByteSpan datagram) override {
    last_sent_.assign(datagram.begin(), datagram.end());
    last_destination_ = neighbour;
    if (peer_) peer_->deliver(address_, datagram);
  }
  // Routes IP only once told to, as the real link always does.
  bool send_routed(Ipv4Address destination, ByteSpan datagram) override {
    if (!routes_ip) return false;
    last_sent_.assign(datagram.begin(), datagram.end());
    last_destination_ = destination;
    if (peer_) peer_->deliver(address_, datagram);
    return true;
  }
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }

  bool routes_ip = false;

  void deliver(Ipv4Address from, ByteSpan datagram) {
    if (receiver_) receiver_(from, datagram);
  }
  const std::vector<uint8_t>& last_sent() const { return last_sent_; }
  std::optional<Ipv4Address> last_destination() const { return last_destination_; }

 private:
  Ipv4Address address_;
  FakeLink* peer_ = nullptr;
  Receiver receiver_;
  std::vector<uint8_t> last_sent_;
  std::optional<Ipv4Address> last_destination_;
};

struct Received {
  Ipv4Address from;
  std::string text;
};

const NodeId kAlice = NodeId::from_octets(10, 0, 0, 1);
const Ipv4Address kAliceRaw = Ipv4Address::from_octets(10, 0, 1, 1);  // a second interface of Alice
const NodeId kBob = NodeId::from_octets(10, 0, 0, 2);

MeshKey test_key() { return *MeshKey::from_hex(std::string(64, '7')); }

ByteSpan span_of(const std::string& text) { return {reinterpret_cast<const uint8_t*>(text.data()), text.size()}; }

class AuthenticatedLinkTest : public ::testing::Test {
 protected:
  AuthenticatedLinkTest()
      : alice_raw_(kAliceRaw),
        bob_raw_(kBob),
        alice_auth_(test_key(), kAlice, 1),
        bob_auth_(test_key(), kBob, 1),
        alice_(alice_raw_, alice_auth_, kAlice, alice_metrics_),
        bob_(bob_raw_, bob_auth_, kBob, bob_metrics_) {
    log_to_null();
    alice_raw_.connect(bob_raw_);
    bob_raw_.connect(alice_raw_);
    alice_.set_receiver([this](Ipv4Address from, ByteSpan d) { at_alice_.push_back({from, {d.begin(), d.end()}}); });
    bob_.set_receiver([this](Ipv4Address from, ByteSpan d) { at_bob_.push_back({from, {d.begin(), d.end()}}); });
  }
  ~AuthenticatedLinkTest() override { log_to_stderr(); }

  FakeLink alice_raw_;
  FakeLink bob_raw_;
  PacketAuth alice_auth_;
  PacketAuth bob_auth_;
  Metrics alice_metrics_;
  Metrics bob_metrics_;
  AuthenticatedLink alice_;
  AuthenticatedLink bob_;
  std::vector<Received> at_alice_;
  std::vector<Received> at_bob_;
};

TEST_F(AuthenticatedLinkTest, DeliversWithAuthenticatedNodeId) {
  alice_.broadcast(span_of("hello"));
  ASSERT_EQ(at_bob_.size(), 1u);
  EXPECT_EQ(at_bob_[0].from, kAlice);  // not the raw address kAliceRaw
  EXPECT_EQ(at_bob_[0].text, "hello");
  EXPECT_EQ(alice_raw_.last_sent().size(), 5 + PacketAuth::kOverhead);
  EXPECT_EQ(bob_metrics_.total("auth_dropped_total"), 0u);
}

TEST_F(AuthenticatedLinkTest, RepliesGoToRawAddressLastHeard) {
  bob_.send(kAlice, span_of("before"));
  ASSERT_TRUE(bob_raw_.last_destination());
  EXPECT_EQ(*bob_raw_.last_destination(), kAlice);  // never heard: the NodeId itself

  alice_.broadcast(span_of("ping"));
  bob_.send(kAlice, span_of("pong"));
  ASSERT_TRUE(bob_raw_.last_destination());
  EXPECT_EQ(*bob_raw_.last_destination(), kAliceRaw);
  ASSERT_EQ(at_alice_.size(), 2u);
  EXPECT_EQ(at_alice_[1].from, kBob);
  EXPECT_EQ(at_alice_[1].text, "pong");

  alice_.send(kBob, span_of("direct"));
  EXPECT_EQ(*alice_raw_.last_destination(), kBob);
}

TEST_F(AuthenticatedLinkTest, RoutedSendsAreSealedAndGoToTheNodeIdItself) {
  EXPECT_FALSE(alice_.send_routed(kBob, span_of("no ip routes"))) << "a raw link without routed sends";
  EXPECT_TRUE(at_bob_.empty());

  alice_raw_.routes_ip = true;
  bob_raw_.routes_ip = true;
  alice_.broadcast(span_of("from a second interface"));  // Bob hears Alice from kAliceRaw
  // The kernel has a host route to the main address, not necessarily to the
  // interface last heard from.
  ASSERT_TRUE(bob_.send_routed(kAlice, span_of("across a plain router")));
  EXPECT_EQ(*bob_raw_.last_destination(), kAlice);
  EXPECT_EQ(bob_raw_.last_sent().size(), 21 + PacketAuth::kOverhead);
  ASSERT_EQ(at_alice_.size(), 1u);
  EXPECT_EQ(at_alice_[0].from, kBob);
  EXPECT_EQ(at_alice_[0].text, "across a plain router");

  // A tampered routed datagram is refused like any other.
  auto tampered = bob_raw_.last_sent();
  tampered.back() ^= 0x01;
  alice_raw_.deliver(kBob, tampered);
  EXPECT_EQ(at_alice_.size(), 1u);
  EXPECT_EQ(alice_metrics_.total("auth_dropped_total"), 1u);
}

TEST_F(AuthenticatedLinkTest, TamperedDatagramDroppedAndCounted) {
  alice_.broadcast(span_of("unlock door"));
  ASSERT_EQ(at_bob_.size(), 1u);
  auto tampered = alice_raw_.last_sent();
  tampered[PacketAuth::kHeaderSize] ^= 0x01;
  bob_raw_.deliver(kAliceRaw, tampered);
  EXPECT_EQ(at_bob_.size(), 1u);
  EXPECT_EQ(bob_metrics_.counter("auth_dropped_total", {{"reason", "bad_tag"}}).value(), 1u);
  EXPECT_EQ(bob_metrics_.total("auth_dropped_total"), 1u);

  bob_raw_.deliver(kAliceRaw, alice_raw_.last_sent());  // replay of the genuine datagram
  EXPECT_EQ(at_bob_.size(), 1u);
  EXPECT_EQ(bob_metrics_.counter("auth_dropped_total", {{"reason", "replay"}}).value(), 1u);

  const std::vector<uint8_t> junk{1, 2, 3};
  bob_raw_.deliver(kAliceRaw, junk);
  EXPECT_EQ(bob_metrics_.counter("auth_dropped_total", {{"reason", "truncated"}}).value(), 1u);
  EXPECT_EQ(bob_metrics_.total("auth_dropped_total"), 3u);
  EXPECT_EQ(at_bob_.size(), 1u);
}

TEST_F(AuthenticatedLinkTest, DatagramLargerThanTheLinkCarriesIsDroppedEvenWithAValidSeal) {
  // A key holder never sends one; refused before the HMAC is computed.
  const std::string big(bob_raw_.max_datagram_size(), 'x');
  bob_raw_.deliver(kAliceRaw, alice_auth_.seal(span_of(big)));
  EXPECT_TRUE(at_bob_.empty());
  EXPECT_EQ(bob_metrics_.counter("auth_dropped_total", {{"reason", "oversized"}}).value(), 1u);

  // The largest datagram a peer's link lets it seal still goes through.
  const std::string fits(alice_.max_datagram_size(), 'y');
  alice_.broadcast(span_of(fits));
  ASSERT_EQ(at_bob_.size(), 1u);
  EXPECT_EQ(at_bob_[0].text, fits);
  EXPECT_EQ(bob_metrics_.total("auth_dropped_total"), 1u);
}

TEST_F(AuthenticatedLinkTest, CountsWhichKeyOpenedEachDatagram) {
  const MeshKey next = *MeshKey::from_hex(std::string(64, '8'));
  PacketAuth carol_auth(next, NodeId::from_octets(10, 0, 0, 3), 1);
  bob_auth_.also_accept(next);
  alice_.broadcast(span_of("old key"));
  bob_raw_.deliver(kAliceRaw, carol_auth.seal(span_of("new key")));
  ASSERT_EQ(at_bob_.size(), 2u);
  EXPECT_EQ(bob_metrics_.counter("auth_opened_total", {{"key", "sealing"}}).value(), 1u);
  EXPECT_EQ(bob_metrics_.counter("auth_opened_total", {{"key", "accepted"}}).value(), 1u);
}

TEST_F(AuthenticatedLinkTest, ForgedSourceAddressDoesNotRedirectReplies) {
  // A refused datagram must not teach the link a new raw address.
  alice_.broadcast(span_of("hi"));
  auto tampered = alice_raw_.last_sent();
  tampered.back() ^= 0x80;
  bob_raw_.deliver(Ipv4Address::from_octets(192, 168, 9, 9), tampered);
  bob_.send(kAlice, span_of("reply"));
  EXPECT_EQ(*bob_raw_.last_destination(), kAliceRaw);
}

TEST_F(AuthenticatedLinkTest, OwnDatagramsLoopedBackAreIgnored) {
  alice_.broadcast(span_of("echo"));
  alice_raw_.deliver(kAliceRaw, alice_raw_.last_sent());
  EXPECT_TRUE(at_alice_.empty());
}

TEST_F(AuthenticatedLinkTest, AdvertisesRoomForTheSeal) {
  EXPECT_EQ(alice_.max_datagram_size(), alice_raw_.max_datagram_size() - PacketAuth::kOverhead);
  EXPECT_EQ(alice_.local_address(), kAlice);
}

}  // namespace
}  // namespace mesh::core
