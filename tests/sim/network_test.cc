#include "sim/network.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/sim_env.h"
#include "sim/simulator.h"

namespace mesh::sim {
namespace {

using std::chrono::milliseconds;

std::vector<uint8_t> bytes_of(uint32_t n) {
  return {static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 8),
          static_cast<uint8_t>(n)};
}
uint32_t number_of(core::ByteSpan b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

struct Arrival {
  core::NodeId from;
  uint32_t number;
  core::TimePoint at;
};

// A network of `n` nodes whose agent-channel arrivals are recorded per node.
struct Fixture {
  explicit Fixture(size_t n, uint64_t seed = 1) : sim(seed), net(sim, seed) {
    for (size_t i = 0; i < n; ++i) ids.push_back(net.add_node());
    arrivals.resize(n);
    for (size_t i = 0; i < n; ++i) {
      net.link(ids[i], Channel::agent).set_receiver([this, i](core::Ipv4Address from, core::ByteSpan d) {
        arrivals[i].push_back({from, number_of(d), sim.now()});
      });
    }
  }
  void send(size_t from, size_t to, uint32_t n) {
    const auto b = bytes_of(n);
    net.link(ids[from], Channel::agent).send(ids[to], b);
  }
  void broadcast(size_t from, uint32_t n) {
    const auto b = bytes_of(n);
    net.link(ids[from], Channel::agent).broadcast(b);
  }
  Simulator sim;
  Network net;
  std::vector<core::NodeId> ids;
  std::vector<std::vector<Arrival>> arrivals;
};

TEST(Simulator, RunsEventsInTimeThenSchedulingOrder) {
  Simulator sim(1);
  std::string order;
  sim.after(milliseconds(20), [&] { order += 'c'; });
  sim.after(milliseconds(10), [&] { order += 'a'; });
  sim.after(milliseconds(10), [&] { order += 'b'; });
  const auto cancelled = sim.after(milliseconds(15), [&] { order += 'x'; });
  EXPECT_TRUE(sim.cancel(cancelled));
  EXPECT_FALSE(sim.cancel(cancelled));
  EXPECT_EQ(sim.run_until(core::TimePoint(milliseconds(10))), 2u);
  EXPECT_EQ(order, "ab");
  EXPECT_EQ(sim.now(), core::TimePoint(milliseconds(10)));
  sim.run_for(milliseconds(100));
  EXPECT_EQ(order, "abc");
  EXPECT_EQ(sim.now(), core::TimePoint(milliseconds(110)));
  EXPECT_EQ(sim.events_processed(), 3u);
  EXPECT_FALSE(sim.step());
}

TEST(Simulator, EventsScheduledInThePastRunNow) {
  Simulator sim(1);
  sim.run_for(milliseconds(50));
  core::TimePoint ran{};
  sim.at(core::TimePoint(milliseconds(10)), [&] { ran = sim.now(); });
  EXPECT_TRUE(sim.step());
  EXPECT_EQ(ran, core::TimePoint(milliseconds(50)));
}

TEST(SimEnv, CancelAllKillsEveryPendingTimer) {
  Simulator sim(1);
  SimEnv env(sim, 1, 0, 1);
  int fired = 0;
  env.start_timer(milliseconds(10), [&] { ++fired; });
  env.start_periodic(milliseconds(5), [&] { ++fired; });
  sim.run_for(milliseconds(6));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(env.pending_timers(), 2u);
  env.cancel_all();
  EXPECT_EQ(env.pending_timers(), 0u);
  sim.run_for(milliseconds(100));
  EXPECT_EQ(fired, 1);
}

TEST(SimEnv, StreamsDependOnSeedNodeAndIncarnation) {
  Simulator sim(1);
  auto first = [&](uint64_t seed, uint32_t node, uint32_t incarnation) {
    SimEnv env(sim, seed, node, incarnation);
    return env.rng().next_u64();
  };
  EXPECT_EQ(first(1, 2, 3), first(1, 2, 3));
  EXPECT_NE(first(1, 2, 3), first(1, 2, 4));
  EXPECT_NE(first(1, 2, 3), first(1, 3, 3));
  EXPECT_NE(first(1, 2, 3), first(2, 2, 3));
}

TEST(Network, AddressesAreStable) {
  EXPECT_EQ(Network::address_of(0).to_string(), "10.0.0.1");
  EXPECT_EQ(Network::address_of(249).to_string(), "10.0.0.250");
  EXPECT_EQ(Network::address_of(250).to_string(), "10.0.1.1");
  Fixture f(3);
  EXPECT_EQ(f.net.index_of(f.ids[2]), 2u);
  EXPECT_FALSE(f.net.index_of(core::Ipv4Address::from_octets(192, 168, 0, 1)));
  EXPECT_EQ(f.net.link(f.ids[1], Channel::agent).local_address(), f.ids[1]);
}

TEST(Network, BroadcastReachesEachUpNeighbourOnceAndSendOnlyNeighbours) {
  Fixture f(4);
  f.net.connect(f.ids[0], f.ids[1], {});
  f.net.connect(f.ids[0], f.ids[2], {});
  f.net.connect(f.ids[0], f.ids[3], {});
  f.net.set_link_up(f.ids[0], f.ids[3], false);
  f.broadcast(0, 7);
  f.send(1, 2, 8);  // not neighbours
  f.sim.run_for(milliseconds(100));
  EXPECT_EQ(f.arrivals[1].size(), 1u);
  EXPECT_EQ(f.arrivals[2].size(), 1u);
  EXPECT_TRUE(f.arrivals[3].empty());
  EXPECT_TRUE(f.arrivals[0].empty());
  EXPECT_EQ(f.arrivals[1][0].from, f.ids[0]);
  EXPECT_EQ(f.net.stats(Channel::agent).sent, 2u);
  EXPECT_EQ(f.net.stats(Channel::agent).unroutable, 1u);
  EXPECT_EQ(f.net.neighbours(f.ids[0]), (std::vector<core::NodeId>{f.ids[1], f.ids[2], f.ids[3]}));
  // The routing channel is separate.
  EXPECT_EQ(f.net.stats(Channel::routing).sent, 0u);
}

TEST(Network, SendObserverSeesEachDatagramPutOnTheAirOnce) {
  Fixture f(3);
  f.net.connect(f.ids[0], f.ids[1], {});
  f.net.connect(f.ids[0], f.ids[2], {});
  std::vector<std::pair<size_t, uint32_t>> seen;  // sender index, payload
  f.net.set_send_observer([&seen](size_t from, Channel channel, core::ByteSpan datagram) {
    EXPECT_EQ(channel, Channel::agent);
    seen.emplace_back(from, number_of(datagram));
  });
  f.broadcast(0, 7);  // two copies on the links, one transmission
  f.send(1, 0, 8);
  f.send(1, 2, 9);  // not neighbours: never on the air
  f.net.set_node_up(f.ids[2], false);
  f.broadcast(2, 10);  // a crashed node sends nothing
  f.sim.run_for(milliseconds(100));
  EXPECT_EQ(seen, (std::vector<std::pair<size_t, uint32_t>>{{0, 7}, {1, 8}}));
}

TEST(Network, LossMatchesItsProbability) {
  for (double loss : {0.0, 0.1, 0.3, 1.0}) {
    SCOPED_TRACE("loss=" + std::to_string(loss));
    Fixture f(2, 42);
    f.net.connect(f.ids[0], f.ids[1], LinkParams{milliseconds(1), {}, loss, true});
    const uint32_t n = 20000;
    for (uint32_t i = 0; i < n; ++i) f.send(0, 1, i);
    f.sim.run_for(milliseconds(10));
    const double delivered = static_cast<double>(f.arrivals[1].size()) / n;
    // Binomial standard deviation is at most 0.0036 here; 5 of them.
    EXPECT_NEAR(delivered, 1.0 - loss, 0.018);
    EXPECT_EQ(f.net.stats(Channel::agent).lost + f.net.stats(Channel::agent).delivered, n);
  }
}

TEST(Network, DelayAndJitterStayInBoundsAndReorder) {
  Fixture f(2, 7);
  f.net.connect(f.ids[0], f.ids[1], LinkParams{milliseconds(10), milliseconds(5), 0.0, true});
  std::vector<core::TimePoint> sent_at;
  for (uint32_t i = 0; i < 500; ++i) {
    sent_at.push_back(f.sim.now());
    f.send(0, 1, i);
    f.sim.run_for(milliseconds(1));
  }
  f.sim.run_for(milliseconds(100));
  ASSERT_EQ(f.arrivals[1].size(), 500u);
  bool reordered = false;
  core::Duration min_delay = core::Duration::max();
  core::Duration max_delay = core::Duration::min();
  for (size_t k = 0; k < f.arrivals[1].size(); ++k) {
    const auto& a = f.arrivals[1][k];
    const core::Duration d = a.at - sent_at[a.number];
    EXPECT_GE(d, milliseconds(10));
    EXPECT_LE(d, milliseconds(15));
    min_delay = std::min(min_delay, d);
    max_delay = std::max(max_delay, d);
    if (k > 0 && a.number < f.arrivals[1][k - 1].number) reordered = true;
  }
  EXPECT_TRUE(reordered);
  // The jitter spreads over its range rather than sitting at one end.
  EXPECT_LT(min_delay, milliseconds(11));
  EXPECT_GT(max_delay, milliseconds(14));
}

TEST(Network, PartitionDropsAtDeliveryTimeAndHealRestores) {
  Fixture f(3);
  f.net.connect(f.ids[0], f.ids[1], LinkParams{milliseconds(10), {}, 0.0, true});
  f.net.connect(f.ids[1], f.ids[2], LinkParams{milliseconds(10), {}, 0.0, true});
  f.send(0, 1, 1);  // in flight when the partition starts
  f.sim.run_for(milliseconds(5));
  f.net.partition({{f.ids[0]}});  // 0 alone; 1 and 2 together
  EXPECT_FALSE(f.net.can_talk(f.ids[0], f.ids[1]));
  EXPECT_TRUE(f.net.can_talk(f.ids[1], f.ids[2]));
  f.broadcast(1, 2);
  f.sim.run_for(milliseconds(50));
  EXPECT_TRUE(f.arrivals[0].empty());
  EXPECT_TRUE(f.arrivals[1].empty());
  EXPECT_EQ(f.arrivals[2].size(), 1u);
  EXPECT_EQ(f.net.stats(Channel::agent).dropped, 2u);
  f.net.heal();
  f.send(0, 1, 3);
  f.sim.run_for(milliseconds(50));
  ASSERT_EQ(f.arrivals[1].size(), 1u);
  EXPECT_EQ(f.arrivals[1][0].number, 3u);
}

TEST(Network, DownLinksAndCrashedNodesDrop) {
  Fixture f(2);
  f.net.connect(f.ids[0], f.ids[1], LinkParams{milliseconds(10), {}, 0.0, true});
  f.send(0, 1, 1);
  f.sim.run_for(milliseconds(5));
  EXPECT_TRUE(f.net.set_link_up(f.ids[0], f.ids[1], false));  // in flight: dropped
  f.send(0, 1, 2);                                            // link down: unroutable
  f.sim.run_for(milliseconds(50));
  EXPECT_TRUE(f.arrivals[1].empty());
  f.net.set_link_up(f.ids[0], f.ids[1], true);

  f.net.set_node_up(f.ids[1], false);
  f.send(0, 1, 3);  // receiver crashed
  f.send(1, 0, 4);  // a crashed node sends nothing
  f.sim.run_for(milliseconds(50));
  EXPECT_TRUE(f.arrivals[0].empty());
  EXPECT_TRUE(f.arrivals[1].empty());
  f.net.set_node_up(f.ids[1], true);
  f.send(0, 1, 5);
  f.sim.run_for(milliseconds(50));
  ASSERT_EQ(f.arrivals[1].size(), 1u);
  EXPECT_EQ(f.arrivals[1][0].number, 5u);
  const auto& s = f.net.stats(Channel::agent);
  EXPECT_EQ(s.sent, 3u);
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.unroutable, 1u);
  EXPECT_EQ(s.delivered, 1u);
}

TEST(Network, SameSeedSameArrivalsOtherSeedOther) {
  auto run = [](uint64_t seed) {
    Fixture f(3, seed);
    f.net.connect(f.ids[0], f.ids[1], LinkParams{milliseconds(3), milliseconds(4), 0.3, true});
    f.net.connect(f.ids[0], f.ids[2], LinkParams{milliseconds(3), milliseconds(4), 0.3, true});
    for (uint32_t i = 0; i < 200; ++i) {
      f.broadcast(0, i);
      f.sim.run_for(milliseconds(1));
    }
    f.sim.run_for(milliseconds(50));
    std::vector<std::pair<uint32_t, int64_t>> out;
    for (const auto& node : f.arrivals) {
      for (const auto& a : node) out.emplace_back(a.number, a.at.time_since_epoch().count());
    }
    return out;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

}  // namespace
}  // namespace mesh::sim
