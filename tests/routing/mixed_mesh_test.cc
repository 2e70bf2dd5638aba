// Mixed meshes: agents (OLSR + AgentDirectory + OlsrTransport) and plain
// routers (OLSR only) on one mesh. The agent links route IP like a kernel
// with OLSR's routes installed (FakeLink::routes_ip).
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "routing/agent_directory.h"
#include "routing/agent_presence.h"
#include "routing/envelope_codec.h"
#include "routing/olsr_transport.h"
#include "tests/routing/fake_network.h"

namespace mesh::routing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeNetwork;
using testing::ManualEnv;

const std::vector<uint8_t> kMeshKey(32, 0x42);

core::NodeId ip(uint8_t last) { return core::NodeId::from_octets(10, 0, 0, last); }

enum class Role { agent, plain };

struct Node {
  Node(ManualEnv& env, FakeNetwork& olsr_net, FakeNetwork& agent_net, core::NodeId id, Role role,
       std::vector<uint8_t> key, std::vector<uint8_t> accepted_key)
      : olsr(env, olsr_net.add(id), metrics, testing::olsr_options_for(id)),
        directory(env, olsr, metrics,
                  AgentDirectory::Options{std::move(key), 100, seconds(5), seconds(15), std::move(accepted_key)}),
        agent_link(agent_net.add(id)),
        transport(env, agent_link, olsr, metrics, OlsrTransport::Options{}, &directory) {
    agent_link.routes_ip = true;
    olsr.start();
    if (role == Role::agent) {
      transport.set_receiver([this](const core::Message& m) { received.push_back(m); });
      directory.start();
    } else {
      // A plain router's agent port is closed: datagrams to it vanish.
      agent_link.set_receiver([](core::Ipv4Address, core::ByteSpan) {});
    }
  }
  uint64_t counter(const std::string& series) const { return testing::counter_value(metrics, series); }

  core::Metrics metrics;
  olsr::OlsrProtocol olsr;
  AgentDirectory directory;
  testing::FakeLink& agent_link;
  OlsrTransport transport;
  std::vector<core::Message> received;
};

class MixedMeshTest : public ::testing::Test {
 protected:
  MixedMeshTest() : olsr_net_(env_, milliseconds(2)), agent_net_(env_, milliseconds(2)) {}

  Node& add(uint8_t last, Role role, std::vector<uint8_t> key = kMeshKey, std::vector<uint8_t> accepted_key = {}) {
    nodes_[last] =
        std::make_unique<Node>(env_, olsr_net_, agent_net_, ip(last), role, std::move(key), std::move(accepted_key));
    return *nodes_[last];
  }
  void connect(uint8_t a, uint8_t b) {
    olsr_net_.connect(ip(a), ip(b));
    agent_net_.connect(ip(a), ip(b));
  }
  // 1 - 2 - ... - n, node i plain when listed.
  void line(uint8_t n, std::vector<uint8_t> plain) {
    for (uint8_t i = 1; i <= n; ++i) {
      add(i, std::find(plain.begin(), plain.end(), i) != plain.end() ? Role::plain : Role::agent);
    }
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

TEST_F(MixedMeshTest, AgentsLearnEachOtherAcrossAPlainRouterWhichOlsrRelays) {
  line(3, {2});
  env_.advance(seconds(30));
  EXPECT_EQ(node(1).directory.agents(), std::vector<core::NodeId>{ip(3)});
  EXPECT_EQ(node(3).directory.agents(), std::vector<core::NodeId>{ip(1)});
  EXPECT_TRUE(node(1).directory.is_agent(ip(1))) << "a started agent counts itself";
  EXPECT_FALSE(node(1).directory.is_agent(ip(2)));
  EXPECT_FALSE(node(2).directory.is_agent(ip(2))) << "a node that never started is no agent";
  EXPECT_EQ(node(1).directory.agents_beyond_plain_routers(), std::vector<core::NodeId>{ip(3)});
  // The plain router learned them too: OLSR reads every message it relays.
  EXPECT_EQ(node(2).directory.agents(), (std::vector<core::NodeId>{ip(1), ip(3)}));
}

TEST_F(MixedMeshTest, AnAgentOfAnotherMeshKeyIsNoAgent) {
  add(1, Role::agent);
  add(2, Role::agent, std::vector<uint8_t>(32, 0x43));
  connect(1, 2);
  env_.advance(seconds(30));
  EXPECT_TRUE(node(1).directory.agents().empty());
  EXPECT_GT(node(1).counter("agent_presence_dropped_total{reason=bad_tag}"), 0u);
}

TEST_F(MixedMeshTest, AKeyAcceptedForARotationRecognisesAgentsSealingWithIt) {
  const std::vector<uint8_t> next_key(32, 0x43);
  add(1, Role::agent, kMeshKey, next_key);  // first pass: seals with the old key, accepts the new
  add(2, Role::agent, next_key);            // not rotating: the new key only
  connect(1, 2);
  env_.advance(seconds(30));
  EXPECT_TRUE(node(1).directory.is_agent(ip(2)));
  // The accepted key is never used to announce.
  EXPECT_FALSE(node(2).directory.is_agent(ip(1)));
  EXPECT_GT(node(2).counter("agent_presence_dropped_total{reason=bad_tag}"), 0u);
}

TEST_F(MixedMeshTest, AnAgentIsForgottenWhenItsAnnouncementsStop) {
  line(2, {});
  env_.advance(seconds(30));
  ASSERT_TRUE(node(1).directory.is_agent(ip(2)));
  olsr_net_.disconnect(ip(1), ip(2));
  env_.advance(seconds(16));  // past the 15 s hold
  EXPECT_FALSE(node(1).directory.is_agent(ip(2)));
}

TEST_F(MixedMeshTest, AReplayedOldAnnouncementIsRefused) {
  line(2, {});
  env_.advance(seconds(30));
  olsr::Message replay;
  replay.type = kAgentPresenceType;
  replay.vtime = 0x5c;
  replay.originator = ip(2);
  replay.ttl = 255;
  replay.seq = 60000;  // new to the duplicate set, so OLSR hands it over
  replay.body = olsr::OpaqueBody{encode_agent_presence(kMeshKey, ip(2), AgentPresence{100})};
  olsr::Packet packet{1, {replay}};
  olsr_net_.add(ip(1)).inject(ip(2), olsr::encode_packet(packet));
  EXPECT_EQ(node(1).counter("agent_presence_dropped_total{reason=stale}"), 1u);
}

TEST_F(MixedMeshTest, NextHopAgentKeepsHopByHop) {
  line(3, {});
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.send(echo(ip(3), 1)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(3).received.size(), 1u);
  EXPECT_EQ(node(3).received[0].hops, 2u);
  EXPECT_EQ(node(2).counter("transport_forwarded_total"), 1u);
  EXPECT_EQ(node(1).counter("transport_routed_sent_total"), 0u);
  EXPECT_EQ(node(1).agent_link.datagrams_routed, 0u);
}

TEST_F(MixedMeshTest, PlainNextHopSendsEndToEnd) {
  line(3, {2});
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.send(echo(ip(3), 1)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(3).received.size(), 1u);
  EXPECT_EQ(node(3).received[0].src, ip(1));
  EXPECT_EQ(node(3).received[0].hops, 2u) << "hops count the radio hops of the route";
  EXPECT_EQ(node(1).counter("transport_routed_sent_total"), 1u);
  EXPECT_EQ(node(1).counter("messages_total{direction=sent,layer=echo,scope=e2e,type=datagram}"), 1u);
  EXPECT_EQ(node(3).counter("messages_total{direction=received,layer=echo,scope=e2e,type=datagram}"), 1u);
  // And back: the reply takes the same decision.
  ASSERT_EQ(node(3).transport.send(echo(ip(1), 2)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(1).received.size(), 1u);
  EXPECT_EQ(node(1).received[0].msg_id, 2u);
}

TEST_F(MixedMeshTest, TheLastAgentBeforeAPlainRouterSwitchesToEndToEnd) {
  line(4, {3});
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.send(echo(ip(4), 1)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(4).received.size(), 1u);
  EXPECT_EQ(node(4).received[0].hops, 3u);
  EXPECT_EQ(node(1).counter("transport_routed_sent_total"), 0u);
  EXPECT_EQ(node(2).counter("transport_forwarded_total"), 1u);
  EXPECT_EQ(node(2).counter("transport_routed_sent_total"), 1u);
}

TEST_F(MixedMeshTest, ADestinationNotKnownAsAgentKeepsHopByHop) {
  line(3, {2});
  env_.advance(seconds(30));
  // 10.0.0.2 is a plain router: nothing goes end to end to it.
  ASSERT_EQ(node(1).transport.send(echo(ip(2), 1)), core::SendStatus::sent);
  env_.advance(seconds(1));
  EXPECT_EQ(node(1).counter("transport_routed_sent_total"), 0u);
  EXPECT_EQ(node(1).agent_link.datagrams_sent, 1u);
}

TEST_F(MixedMeshTest, ALinkWithoutRoutedSendsKeepsHopByHop) {
  line(3, {2});
  node(1).agent_link.routes_ip = false;
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.send(echo(ip(3), 1)), core::SendStatus::sent);
  env_.advance(seconds(1));
  EXPECT_TRUE(node(3).received.empty()) << "the plain router relays no agent message";
  EXPECT_EQ(node(1).counter("transport_routed_sent_total"), 0u);
  EXPECT_EQ(node(1).agent_link.datagrams_sent, 1u);
}

TEST_F(MixedMeshTest, AnEndToEndDatagramIsDeliveredOnceAndNeverForwarded) {
  line(5, {2});
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.send(echo(ip(3), 1)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(3).received.size(), 1u);
  EXPECT_EQ(node(3).counter("transport_forwarded_total"), 0u);
  // One that reaches an agent other than its destination (the kernel's
  // routes and OLSR's disagreed for a moment) goes no further.
  core::Message misrouted = echo(ip(5), 2);
  misrouted.src = ip(1);
  misrouted.ttl = 1;
  misrouted.hops = 1;
  const std::string bytes = encode_envelope(misrouted);
  node(3).agent_link.inject(ip(1), std::vector<uint8_t>(bytes.begin(), bytes.end()));
  env_.advance(seconds(1));
  EXPECT_EQ(node(3).counter("transport_dropped_total{reason=ttl_expired}"), 1u);
  EXPECT_EQ(node(3).counter("transport_forwarded_total"), 0u);
  EXPECT_TRUE(node(5).received.empty());
}

TEST_F(MixedMeshTest, AFloodReachesAgentsBeyondAPlainRouterOnce) {
  // 1 - 2(plain) - 3 - 4 - 5(plain) - 6
  line(6, {2, 5});
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.flood(echo(ip(3), 42)), core::SendStatus::sent);
  env_.advance(seconds(1));
  for (uint8_t i : {3, 4, 6}) {
    ASSERT_EQ(node(i).received.size(), 1u) << "node " << int(i);
    EXPECT_EQ(node(i).received[0].dst, core::kEveryNode);
    EXPECT_EQ(node(i).received[0].hops, i - 1u) << "node " << int(i);
  }
  // The source's copies go to every agent behind its plain neighbour; no
  // copy is ever retransmitted, so nobody else needs to send one.
  EXPECT_EQ(node(1).counter("transport_routed_sent_total"), 3u);
  for (uint8_t i : {3, 4, 6}) {
    EXPECT_EQ(node(i).counter("transport_flood_retransmitted_total"), 0u) << "node " << int(i);
  }
}

TEST_F(MixedMeshTest, AFloodCrossesAPlainRouterBeyondAnMprAgent) {
  // 1 - 2 - 3(plain) - 4: 2 retransmits as 1's MPR and copies to 4.
  line(4, {3});
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.flood(echo(ip(2), 7)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(2).received.size(), 1u);
  ASSERT_EQ(node(4).received.size(), 1u);
  EXPECT_EQ(node(4).received[0].hops, 3u);
  EXPECT_EQ(node(1).counter("transport_routed_sent_total"), 0u);
  EXPECT_EQ(node(2).counter("transport_flood_retransmitted_total"), 1u);
  EXPECT_EQ(node(2).counter("transport_routed_sent_total"), 1u);
}

TEST_F(MixedMeshTest, AnAllAgentMeshSendsNothingEndToEnd) {
  line(5, {});
  env_.advance(seconds(30));
  ASSERT_EQ(node(1).transport.send(echo(ip(5), 1)), core::SendStatus::sent);
  ASSERT_EQ(node(1).transport.flood(echo(ip(5), 2)), core::SendStatus::sent);
  env_.advance(seconds(1));
  ASSERT_EQ(node(5).received.size(), 2u);
  for (uint8_t i = 1; i <= 5; ++i) {
    EXPECT_EQ(node(i).counter("transport_routed_sent_total"), 0u) << "node " << int(i);
    EXPECT_TRUE(node(i).directory.agents_beyond_plain_routers().empty()) << "node " << int(i);
  }
}

}  // namespace
}  // namespace mesh::routing
