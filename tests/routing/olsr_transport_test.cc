#include "routing/olsr_transport.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "routing/envelope_codec.h"
#include "tests/routing/fake_network.h"

namespace mesh::routing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeNetwork;
using testing::ManualEnv;

core::NodeId ip(uint8_t last) { return core::NodeId::from_octets(10, 0, 0, last); }

// One node: OLSR on its routing link, the transport on its agent link. The
// agent link here is raw (peers named by address, which is their NodeId),
// standing in for the AuthenticatedLink of a real node.
struct Node {
  Node(ManualEnv& env, FakeNetwork& olsr_net, FakeNetwork& agent_net, core::NodeId id,
       OlsrTransport::Options options = {})
      : olsr(env, olsr_net.add(id), metrics, testing::olsr_options_for(id)),
        agent_link(agent_net.add(id)),
        transport(env, agent_link, olsr, metrics, options) {
    transport.set_receiver([this](const core::Message& m) { received.push_back(m); });
    olsr.start();
  }
  uint64_t counter(const std::string& series) const { return testing::counter_value(metrics, series); }

  core::Metrics metrics;
  olsr::OlsrProtocol olsr;
  testing::FakeLink& agent_link;
  OlsrTransport transport;
  std::vector<core::Message> received;
};

class OlsrTransportTest : public ::testing::Test {
 protected:
  OlsrTransportTest() : olsr_net_(env_, milliseconds(2)), agent_net_(env_, milliseconds(2)) {}

  Node& add(uint8_t last, OlsrTransport::Options options = {}) {
    nodes_[last] = std::make_unique<Node>(env_, olsr_net_, agent_net_, ip(last), options);
    return *nodes_[last];
  }
  void connect(uint8_t a, uint8_t b) {
    olsr_net_.connect(ip(a), ip(b));
    agent_net_.connect(ip(a), ip(b));
  }
  // 1 - 2 - ... - n
  void line(uint8_t n, OlsrTransport::Options options = {}) {
    for (uint8_t i = 1; i <= n; ++i) add(i, options);
    for (uint8_t i = 1; i < n; ++i) connect(i, static_cast<uint8_t>(i + 1));
  }
  Node& node(uint8_t last) { return *nodes_.at(last); }

  static core::Message echo(core::NodeId dst, uint64_t msg_id, uint32_t ttl = 0) {
    return testing::echo_datagram(dst, msg_id, ttl);
  }

  ManualEnv env_;
  FakeNetwork olsr_net_;
  FakeNetwork agent_net_;
  std::map<uint8_t, std::unique_ptr<Node>> nodes_;
};

TEST_F(OlsrTransportTest, UnicastTravelsHopByHopAlongTheRoutes) {
  line(5);
  env_.advance(seconds(30));
  ASSERT_TRUE(node(1).olsr.route_to(ip(5))) << "no route after convergence";
  ASSERT_EQ(node(1).olsr.route_to(ip(5))->hops, 4u);

  EXPECT_EQ(node(1).transport.send(echo(ip(5), 7, 10)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(5).received.size(), 1u);
  const core::Message& m = node(5).received[0];
  EXPECT_EQ(m.src, ip(1));
  EXPECT_EQ(m.dst, ip(5));
  EXPECT_EQ(m.msg_id, 7u);
  EXPECT_EQ(m.hops, 4u);
  EXPECT_EQ(m.ttl, 7u);  // 10, less one for each of the three forwarders
  for (uint8_t i = 2; i <= 4; ++i) {
    EXPECT_TRUE(node(i).received.empty()) << "forwarder " << int(i) << " delivered locally";
    EXPECT_EQ(node(i).counter("transport_forwarded_total"), 1u) << "node " << int(i);
  }
  // One e2e send at the source, one e2e receive at the destination, a hop
  // send at every node but the last.
  EXPECT_EQ(node(1).counter("messages_total{direction=sent,layer=echo,scope=e2e,type=datagram}"), 1u);
  EXPECT_EQ(node(3).counter("messages_total{direction=sent,layer=echo,scope=e2e,type=datagram}"), 0u);
  EXPECT_EQ(node(3).counter("messages_total{direction=sent,layer=echo,scope=hop,type=datagram}"), 1u);
  EXPECT_EQ(node(5).counter("messages_total{direction=received,layer=echo,scope=e2e,type=datagram}"), 1u);
}

TEST_F(OlsrTransportTest, DefaultTtlAppliesAndRunsOutOnLongPaths) {
  line(5);
  env_.advance(seconds(30));
  // ttl 2 covers two links: node 3 may not forward it further.
  ASSERT_EQ(node(1).transport.send(echo(ip(5), 1, 2)), core::SendStatus::sent);
  env_.advance(seconds(1));
  EXPECT_TRUE(node(5).received.empty());
  EXPECT_EQ(node(3).counter("transport_dropped_total{reason=ttl_expired}"), 1u);
  // ttl 0 means the default (32), plenty for four hops.
  ASSERT_EQ(node(1).transport.send(echo(ip(5), 2)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(5).received.size(), 1u);
  EXPECT_EQ(node(5).received[0].ttl, 29u);
}

TEST_F(OlsrTransportTest, NoRouteAtTheSourceAndAtAForwarder) {
  line(3);
  env_.advance(seconds(30));
  EXPECT_EQ(node(1).transport.send(echo(ip(9), 1)), core::SendStatus::no_route);
  // A message that reaches a node without a route onward is dropped there.
  core::Message stray = echo(ip(9), 2, 5);
  stray.src = ip(1);
  const std::string bytes = encode_envelope(stray);
  node(2).agent_link.inject(ip(1), std::vector<uint8_t>(bytes.begin(), bytes.end()));
  EXPECT_EQ(node(2).counter("transport_dropped_total{reason=no_route}"), 1u);
}

TEST_F(OlsrTransportTest, RoutesFollowALinkFailure) {
  // A square 1-2-4-3-1: 1 reaches 4 over two hops either way.
  for (uint8_t i = 1; i <= 4; ++i) add(i);
  connect(1, 2);
  connect(2, 4);
  connect(4, 3);
  connect(3, 1);
  env_.advance(seconds(30));
  const auto before = node(1).olsr.route_to(ip(4));
  ASSERT_TRUE(before);
  const uint8_t via = before->next_hop == ip(2) ? 2 : 3;
  olsr_net_.disconnect(ip(1), ip(via));
  agent_net_.disconnect(ip(1), ip(via));
  env_.advance(seconds(30));
  const auto after = node(1).olsr.route_to(ip(4));
  ASSERT_TRUE(after);
  EXPECT_NE(after->next_hop, before->next_hop);
  ASSERT_EQ(node(1).transport.send(echo(ip(4), 3)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(4).received.size(), 1u);
  EXPECT_EQ(node(4).received[0].hops, 2u);
}

TEST_F(OlsrTransportTest, FloodReachesEveryOtherNodeOnceThroughMprsOnly) {
  line(5);
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.flood(echo(ip(3), 42)), core::SendStatus::sent);
  env_.advance(seconds(1));
  EXPECT_TRUE(node(1).received.empty()) << "the source delivered its own flood";
  uint64_t retransmissions = 0;
  for (uint8_t i = 2; i <= 5; ++i) {
    ASSERT_EQ(node(i).received.size(), 1u) << "node " << int(i);
    EXPECT_EQ(node(i).received[0].dst, core::kEveryNode);
    EXPECT_EQ(node(i).received[0].hops, i - 1u);
    EXPECT_EQ(node(i).received[0].msg_id, 42u);
    retransmissions += node(i).counter("transport_flood_retransmitted_total");
  }
  // 2, 3 and 4 are each the MPR of the node before them; 5 is nobody's MPR.
  EXPECT_EQ(retransmissions, 3u);
  EXPECT_EQ(node(5).counter("transport_flood_retransmitted_total"), 0u);
}

TEST_F(OlsrTransportTest, FloodInACliqueNeedsNoRetransmission) {
  for (uint8_t i = 1; i <= 5; ++i) add(i);
  for (uint8_t a = 1; a <= 5; ++a) {
    for (uint8_t b = static_cast<uint8_t>(a + 1); b <= 5; ++b) connect(a, b);
  }
  env_.advance(seconds(30));
  ASSERT_EQ(node(3).transport.flood(echo(ip(1), 5)), core::SendStatus::sent);
  env_.advance(seconds(1));
  for (uint8_t i = 1; i <= 5; ++i) {
    EXPECT_EQ(node(i).received.size(), i == 3 ? 0u : 1u) << "node " << int(i);
    EXPECT_EQ(node(i).counter("transport_flood_retransmitted_total"), 0u) << "node " << int(i);
  }
}

TEST_F(OlsrTransportTest, DuplicateFloodIsDeliveredOnceAndExpiresAfterTheHold) {
  line(2);
  env_.advance(seconds(30));
  core::Message flooded = echo(core::kEveryNode, 9, 4);
  flooded.src = ip(1);
  const std::string bytes = encode_envelope(flooded);
  const std::vector<uint8_t> datagram(bytes.begin(), bytes.end());
  node(2).agent_link.inject(ip(1), datagram);
  node(2).agent_link.inject(ip(1), datagram);
  EXPECT_EQ(node(2).received.size(), 1u);
  EXPECT_EQ(node(2).transport.floods_remembered(), 1u);
  // After the hold time the same (src, msg_id) counts as new again.
  env_.advance(seconds(31));
  node(2).agent_link.inject(ip(1), datagram);
  EXPECT_EQ(node(2).received.size(), 2u);
}

TEST_F(OlsrTransportTest, OwnMessagesHeardBackAreDropped) {
  line(2);
  env_.advance(seconds(30));
  core::Message own = echo(core::kEveryNode, 1, 4);
  own.src = ip(1);
  const std::string bytes = encode_envelope(own);
  node(1).agent_link.inject(ip(2), std::vector<uint8_t>(bytes.begin(), bytes.end()));
  EXPECT_TRUE(node(1).received.empty());
  EXPECT_EQ(node(1).counter("transport_dropped_total{reason=own}"), 1u);
}

TEST_F(OlsrTransportTest, SendToSelfIsDeliveredOnTheNextTurn) {
  Node& a = add(1);
  EXPECT_EQ(a.transport.send(echo(ip(1), 3)), core::SendStatus::sent);
  EXPECT_TRUE(a.received.empty()) << "delivered re-entrantly from send()";
  env_.advance(milliseconds(1));
  ASSERT_EQ(a.received.size(), 1u);
  EXPECT_EQ(a.received[0].src, ip(1));
  EXPECT_EQ(a.received[0].hops, 0u);
}

TEST_F(OlsrTransportTest, MalformedAndOversizedAreRefused) {
  line(2);
  env_.advance(seconds(30));
  node(2).agent_link.inject(ip(1), {0xff, 0xff, 0xff});
  EXPECT_TRUE(node(2).received.empty());
  EXPECT_EQ(node(2).counter("transport_dropped_total{reason=malformed}"), 1u);

  core::Message big = echo(ip(2), 4);
  big.body = std::string(2000, 'x');
  EXPECT_EQ(node(1).transport.send(big), core::SendStatus::too_large);
  big.dst = core::kEveryNode;
  EXPECT_EQ(node(1).transport.flood(big), core::SendStatus::too_large);
}

OlsrTransport::Options with_hop_arq(uint32_t max_retransmissions = 3) {
  OlsrTransport::Options options;
  options.hop_arq.enabled = true;
  options.hop_arq.max_retransmissions = max_retransmissions;
  return options;
}

bool is_hop_ack(core::ByteSpan datagram) {
  auto decoded = decode_hop_datagram(datagram);
  return decoded && decoded->hop_ack != 0;
}

// Loses the first `count` datagrams from `from` to `to` that `match` picks.
auto lose_first(core::NodeId from, core::NodeId to, size_t count, bool (*match)(core::ByteSpan)) {
  return [from, to, count, match, lost = size_t{0}](core::Ipv4Address a, core::Ipv4Address b,
                                                    core::ByteSpan datagram) mutable {
    if (a != from || b != to || !match(datagram) || lost >= count) return false;
    ++lost;
    return true;
  };
}
bool any_datagram(core::ByteSpan) { return true; }
bool message_datagram(core::ByteSpan datagram) { return !is_hop_ack(datagram); }

constexpr char kHopAcksSent[] = "messages_total{direction=sent,layer=hop_ack,scope=hop,type=datagram}";

TEST_F(OlsrTransportTest, HopArqRetransmitsAHopDatagramLostOnTheWay) {
  line(3, with_hop_arq());
  env_.advance(seconds(30));
  // The forward from 2 to 3 is lost once.
  agent_net_.lose = lose_first(ip(2), ip(3), 1, message_datagram);
  ASSERT_EQ(node(1).transport.send(echo(ip(3), 7)), core::SendStatus::sent);
  env_.advance(seconds(5));
  ASSERT_EQ(node(3).received.size(), 1u);
  EXPECT_EQ(node(3).received[0].msg_id, 7u);
  EXPECT_EQ(node(3).received[0].hops, 2u);
  EXPECT_EQ(node(2).counter("transport_hop_retransmitted_total"), 1u);
  EXPECT_EQ(node(1).counter("transport_hop_retransmitted_total"), 0u);
  EXPECT_EQ(node(1).counter("transport_hop_acked_total"), 1u);
  EXPECT_EQ(node(2).counter("transport_hop_acked_total"), 1u);
  EXPECT_EQ(node(2).transport.hop_acks_pending(), 0u);
}

TEST_F(OlsrTransportTest, WithoutHopArqTheSameLossLosesTheMessage) {
  line(3);
  env_.advance(seconds(30));
  agent_net_.lose = lose_first(ip(2), ip(3), 1, message_datagram);
  ASSERT_EQ(node(1).transport.send(echo(ip(3), 7)), core::SendStatus::sent);
  env_.advance(seconds(5));
  EXPECT_TRUE(node(3).received.empty());
  EXPECT_EQ(node(2).counter(kHopAcksSent), 0u);
  EXPECT_EQ(node(3).counter(kHopAcksSent), 0u);
}

TEST_F(OlsrTransportTest, HopAckStopsTheRetransmissionsEvenFromAReceiverWithoutArq) {
  add(1, with_hop_arq());
  add(2);  // ARQ off here: it still acks what asks for an ack
  connect(1, 2);
  env_.advance(seconds(30));
  const size_t sent_before = node(1).agent_link.datagrams_sent;
  ASSERT_EQ(node(1).transport.send(echo(ip(2), 1)), core::SendStatus::sent);
  env_.advance(seconds(10));
  ASSERT_EQ(node(2).received.size(), 1u);
  EXPECT_EQ(node(1).agent_link.datagrams_sent - sent_before, 1u);
  EXPECT_EQ(node(1).counter("transport_hop_retransmitted_total"), 0u);
  EXPECT_EQ(node(1).counter("transport_hop_acked_total"), 1u);
  EXPECT_EQ(node(2).counter(kHopAcksSent), 1u);
  EXPECT_EQ(node(1).transport.hop_acks_pending(), 0u);
}

TEST_F(OlsrTransportTest, HopDuplicateIsAckedButNeverDeliveredOrForwardedTwice) {
  line(3);
  env_.advance(seconds(30));
  auto datagram = [](uint8_t dst, uint64_t hop_seq) {
    core::Message m = echo(ip(dst), dst, 5);
    m.src = ip(1);
    const std::string bytes = encode_envelope(m, hop_seq);
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
  };
  // Retransmissions as node 2 sees them: the same datagram, the same hop_seq.
  for (int copy = 0; copy < 2; ++copy) {
    node(2).agent_link.inject(ip(1), datagram(2, 77));
    node(2).agent_link.inject(ip(1), datagram(3, 78));
  }
  env_.advance(seconds(1));
  EXPECT_EQ(node(2).received.size(), 1u);
  EXPECT_EQ(node(2).counter("transport_forwarded_total"), 1u);
  EXPECT_EQ(node(3).received.size(), 1u);
  EXPECT_EQ(node(2).counter("transport_hop_duplicates_total"), 2u);
  EXPECT_EQ(node(2).counter(kHopAcksSent), 4u);
  // Hop sequence numbers are per previous hop: the same one from node 3 is
  // another datagram.
  node(2).agent_link.inject(ip(3), datagram(2, 77));
  EXPECT_EQ(node(2).received.size(), 2u);
}

TEST_F(OlsrTransportTest, HopArqGivesUpAfterItsRetransmissions) {
  line(2, with_hop_arq(3));
  env_.advance(seconds(30));
  agent_net_.lose = lose_first(ip(1), ip(2), 1000, any_datagram);
  const size_t sent_before = node(1).agent_link.datagrams_sent;
  ASSERT_EQ(node(1).transport.send(echo(ip(2), 1)), core::SendStatus::sent);
  env_.advance(seconds(60));
  EXPECT_TRUE(node(2).received.empty());
  EXPECT_EQ(node(1).agent_link.datagrams_sent - sent_before, 4u);  // one send, three retransmissions
  EXPECT_EQ(node(1).counter("transport_hop_retransmitted_total"), 3u);
  EXPECT_EQ(node(1).counter("transport_hop_gave_up_total"), 1u);
  EXPECT_EQ(node(1).transport.hop_acks_pending(), 0u);
}

TEST_F(OlsrTransportTest, LostHopAckIsRepairedByTheRetransmission) {
  line(2, with_hop_arq());
  env_.advance(seconds(30));
  agent_net_.lose = lose_first(ip(2), ip(1), 1, is_hop_ack);
  ASSERT_EQ(node(1).transport.send(echo(ip(2), 1)), core::SendStatus::sent);
  env_.advance(seconds(5));
  ASSERT_EQ(node(2).received.size(), 1u);
  EXPECT_EQ(node(1).counter("transport_hop_retransmitted_total"), 1u);
  EXPECT_EQ(node(2).counter("transport_hop_duplicates_total"), 1u);
  EXPECT_EQ(node(2).counter(kHopAcksSent), 2u);
  EXPECT_EQ(node(1).counter("transport_hop_acked_total"), 1u);
  EXPECT_EQ(node(1).counter("transport_hop_gave_up_total"), 0u);
  EXPECT_EQ(node(1).transport.hop_acks_pending(), 0u);
}

TEST_F(OlsrTransportTest, FloodsNeverAskForHopAcks) {
  line(3, with_hop_arq());
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.flood(echo(core::kEveryNode, 4)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(3).received.size(), 1u);
  for (uint8_t i = 1; i <= 3; ++i) {
    for (const auto& datagram : node(i).agent_link.sent) {
      auto decoded = decode_hop_datagram(core::ByteSpan(datagram));
      ASSERT_TRUE(decoded);
      EXPECT_EQ(decoded->hop_seq, 0u) << "node " << int(i);
    }
    EXPECT_EQ(node(i).counter(kHopAcksSent), 0u) << "node " << int(i);
  }
}

TEST_F(OlsrTransportTest, DestroyedTransportDetachesFromItsLink) {
  Node& a = add(1);
  auto& link = agent_net_.add(ip(7));
  { OlsrTransport transport(env_, link, a.olsr, a.metrics, OlsrTransport::Options{}); }
  link.inject(ip(1), {1, 2, 3});  // must not reach the destroyed transport
  SUCCEED();
}

}  // namespace
}  // namespace mesh::routing
