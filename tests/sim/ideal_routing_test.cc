// IdealRouting is the oracle transport the upper layers are tested on, so
// its paths, hop counts, losses and floods must be exactly what the
// simulated topology says.
#include "sim/ideal_routing.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "proto/wire.pb.h"

namespace mesh::sim {
namespace {

using std::chrono::milliseconds;

constexpr uint32_t kEcho = proto::Envelope::kEchoFieldNumber;

std::string echo_body(const std::string& payload) {
  proto::EchoBody body;
  body.mutable_request()->set_payload(payload);
  return body.SerializeAsString();
}

// A line 0 - 1 - 2 - ... - (n-1) with 5 ms per hop.
struct LineWorld {
  explicit LineWorld(int n, uint64_t seed = 1) : simulator(seed), network(simulator, seed), routing(simulator, network, seed) {
    for (int i = 0; i < n; ++i) ids.push_back(network.add_node());
    for (int i = 0; i + 1 < n; ++i) network.connect(ids[i], ids[i + 1], LinkParams{});
    for (core::NodeId id : ids) {
      routing.transport(id).set_receiver([this, id](const core::Message& m) { heard[id].push_back(m); });
    }
  }
  core::Message message_to(core::NodeId dst, const std::string& payload) {
    core::Message m;
    m.dst = dst;
    m.body_type = kEcho;
    m.body = echo_body(payload);
    return m;
  }
  Simulator simulator;
  Network network;
  IdealRouting routing;
  std::vector<core::NodeId> ids;
  std::map<core::NodeId, std::vector<core::Message>> heard;
};

TEST(IdealRouting, DeliversAlongShortestPathWithHopCountAndDelay) {
  LineWorld w(5);
  EXPECT_EQ(w.routing.hops(w.ids[0], w.ids[4]), 4u);
  ASSERT_EQ(w.routing.transport(w.ids[0]).send(w.message_to(w.ids[4], "x")), core::SendStatus::sent);
  w.simulator.run_for(milliseconds(19));
  EXPECT_TRUE(w.heard[w.ids[4]].empty()) << "4 hops of 5 ms cannot arrive before 20 ms";
  w.simulator.run_for(milliseconds(1));
  ASSERT_EQ(w.heard[w.ids[4]].size(), 1u);
  const core::Message& m = w.heard[w.ids[4]][0];
  EXPECT_EQ(m.src, w.ids[0]);
  EXPECT_EQ(m.hops, 4u);
  EXPECT_EQ(m.ttl, w.routing.default_ttl() - 4);
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(w.heard[w.ids[i]].empty());
}

TEST(IdealRouting, NoRouteAcrossPartitionOrDownLinkAndTtlBoundsPathLength) {
  LineWorld w(4);
  w.network.set_link_up(w.ids[1], w.ids[2], false);
  EXPECT_FALSE(w.routing.hops(w.ids[0], w.ids[3]).has_value());
  EXPECT_EQ(w.routing.transport(w.ids[0]).send(w.message_to(w.ids[3], "x")), core::SendStatus::no_route);
  w.network.set_link_up(w.ids[1], w.ids[2], true);
  w.network.partition({{w.ids[0], w.ids[1]}});
  EXPECT_EQ(w.routing.transport(w.ids[0]).send(w.message_to(w.ids[3], "x")), core::SendStatus::no_route);
  w.network.heal();
  core::Message short_lived = w.message_to(w.ids[3], "ttl");
  short_lived.ttl = 2;
  w.routing.transport(w.ids[0]).send(short_lived);
  w.simulator.run_for(milliseconds(100));
  EXPECT_TRUE(w.heard[w.ids[3]].empty());
  EXPECT_EQ(w.routing.stats().unroutable, 3u);
}

TEST(IdealRouting, FloodReachesEveryOtherReachableNodeOnce) {
  LineWorld w(6);
  w.network.set_node_up(w.ids[5], false);
  ASSERT_EQ(w.routing.transport(w.ids[2]).flood(w.message_to(w.ids[0], "all")), core::SendStatus::sent);
  w.simulator.run_for(milliseconds(100));
  EXPECT_TRUE(w.heard[w.ids[2]].empty());
  EXPECT_TRUE(w.heard[w.ids[5]].empty());
  for (int i : {0, 1, 3, 4}) {
    ASSERT_EQ(w.heard[w.ids[i]].size(), 1u) << i;
    EXPECT_EQ(w.heard[w.ids[i]][0].dst, core::kEveryNode);
    EXPECT_EQ(w.heard[w.ids[i]][0].hops, static_cast<uint32_t>(std::abs(i - 2)));
  }
}

TEST(IdealRouting, PerHopLossMatchesLinkParameters) {
  LineWorld w(3, 7);
  LinkParams lossy;
  lossy.loss = 0.5;
  w.network.connect(w.ids[0], w.ids[1], lossy);
  w.network.connect(w.ids[1], w.ids[2], lossy);
  constexpr int kSends = 4000;
  for (int i = 0; i < kSends; ++i) w.routing.transport(w.ids[0]).send(w.message_to(w.ids[2], "p"));
  w.simulator.run_for(milliseconds(100));
  // Two independent hops at 50 %: a quarter arrives (4 sigma is about 110).
  const double arrived = static_cast<double>(w.heard[w.ids[2]].size());
  EXPECT_NEAR(arrived, kSends * 0.25, 110.0);
  EXPECT_EQ(w.routing.stats().delivered + w.routing.stats().lost, static_cast<uint64_t>(kSends));
}

// With hop ARQ the same 50 % hops deliver almost everything, each message
// once: a hop gives up only after 11 transmissions lost in a row (5e-4), and
// lost acks make retransmissions the receiving hop must suppress.
TEST(IdealRouting, HopArqRepairsHopLossesAndDeliversEachMessageOnce) {
  LineWorld w(3, 7);
  routing::HopArq::Options arq;
  arq.max_retransmissions = 10;
  w.routing.enable_hop_arq(arq);
  LinkParams lossy;
  lossy.loss = 0.5;
  w.network.connect(w.ids[0], w.ids[1], lossy);
  w.network.connect(w.ids[1], w.ids[2], lossy);
  constexpr int kSends = 400;
  for (int i = 0; i < kSends; ++i) {
    w.routing.transport(w.ids[0]).send(w.message_to(w.ids[2], std::to_string(i)));
  }
  w.simulator.run_for(std::chrono::seconds(60));
  std::map<std::string, int> arrivals;
  for (const core::Message& m : w.heard[w.ids[2]]) {
    proto::EchoBody body;
    ASSERT_TRUE(body.ParseFromString(m.body));
    ++arrivals[body.request().payload()];
    EXPECT_EQ(m.hops, 2u);
  }
  int twice = 0;
  for (const auto& [payload, times] : arrivals) twice += times > 1 ? 1 : 0;
  EXPECT_EQ(twice, 0);
  // 800 hop transfers, each lost for good with 0.5^11: none expected.
  EXPECT_GE(arrivals.size(), static_cast<size_t>(kSends - 2));
  EXPECT_TRUE(w.heard[w.ids[1]].empty());
  // A message to self crosses no hop: delivered as without ARQ.
  w.routing.transport(w.ids[0]).send(w.message_to(w.ids[0], "self"));
  w.simulator.run_for(milliseconds(1));
  ASSERT_EQ(w.heard[w.ids[0]].size(), 1u);
  EXPECT_EQ(w.heard[w.ids[0]][0].hops, 0u);
  const auto& metrics = w.routing.hop_arq_metrics();
  EXPECT_GT(metrics.total("transport_hop_retransmitted_total"), 0u);
  EXPECT_GT(metrics.total("transport_hop_duplicates_total"), 0u);
  EXPECT_GT(w.routing.stats().hop_acks, 0u);
}

TEST(IdealRouting, ArrivalAtCrashedNodeIsDroppedAndBadBodyIsACallerBug) {
  LineWorld w(2);
  w.routing.transport(w.ids[0]).send(w.message_to(w.ids[1], "x"));
  w.network.set_node_up(w.ids[1], false);
  w.simulator.run_for(milliseconds(100));
  EXPECT_TRUE(w.heard[w.ids[1]].empty());
  EXPECT_EQ(w.routing.stats().dropped, 1u);
  core::Message unknown = w.message_to(w.ids[1], "x");
  unknown.body_type = 15;  // a header field number, never a body
  EXPECT_THROW(w.routing.transport(w.ids[0]).send(unknown), std::logic_error);
}

}  // namespace
}  // namespace mesh::sim
