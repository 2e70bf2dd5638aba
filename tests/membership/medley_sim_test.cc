// Medley end to end over simulated meshes with ideal routing: lists converge,
// crashes are detected everywhere (detection time printed in protocol
// periods), no false positives without loss, restarts rejoin, partitions
// split the lists and healing merges them, leaves and metadata spread.
// Every failing check names its seed; rerun one with MEDLEY_SEED=<seed>, and
// add MEDLEY_TRACE=1 to print list mismatches each second and the events
// about crashed nodes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "core/log.h"
#include "tests/membership/medley_world.h"

namespace mesh::membership::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class QuietLogs : public ::testing::Environment {
 public:
  void SetUp() override { core::set_log_level("warn"); }
};
const ::testing::Environment* const kQuietLogs = ::testing::AddGlobalTestEnvironment(new QuietLogs);

std::vector<uint64_t> seeds(uint64_t count) {
  if (const char* one = std::getenv("MEDLEY_SEED")) return {std::strtoull(one, nullptr, 10)};
  std::vector<uint64_t> out;
  for (uint64_t s = 1; s <= count; ++s) out.push_back(s);
  return out;
}

struct Event {
  core::TimePoint at;
  size_t observer;
  core::NodeId member;
  MemberEventKind kind;
  uint64_t incarnation;
};

// Boots every node at a random time in the first `spread`, recording events.
void boot_all(MedleyWorld& world, std::vector<Event>& log, core::Duration spread) {
  for (size_t i = 0; i < world.size(); ++i) {
    const auto at = core::TimePoint(core::Duration(
        static_cast<core::Duration::rep>(world.simulator().rng().below(static_cast<uint64_t>(spread.count())))));
    world.simulator().at(at, [&world, &log, i] {
      world.boot(i, 0, [&world, &log](size_t index, Medley& m) {
        m.add_listener([&world, &log, index](const MemberEvent& e) {
          log.push_back({world.simulator().now(), index, e.member.id, e.kind, e.member.incarnation});
        });
      });
    });
  }
}

void reboot(MedleyWorld& world, std::vector<Event>& log, size_t i, uint64_t incarnation) {
  world.boot(i, incarnation, [&world, &log](size_t index, Medley& m) {
    m.add_listener([&world, &log, index](const MemberEvent& e) {
      log.push_back({world.simulator().now(), index, e.member.id, e.kind, e.member.incarnation});
    });
  });
}

// Component of every node over links whose ends are up and can talk; -1
// for nodes that are down.
std::vector<int> components(MedleyWorld& world) {
  std::vector<int> comp(world.size(), -1);
  int next = 0;
  for (size_t start = 0; start < world.size(); ++start) {
    if (comp[start] >= 0 || !world.up(start)) continue;
    std::vector<size_t> stack{start};
    comp[start] = next;
    while (!stack.empty()) {
      const size_t a = stack.back();
      stack.pop_back();
      for (int nb : world.topology().neighbours(static_cast<int>(a))) {
        const auto b = static_cast<size_t>(nb);
        if (comp[b] >= 0 || !world.up(b) || !world.network().can_talk(world.id(a), world.id(b))) continue;
        comp[b] = next;
        stack.push_back(b);
      }
    }
    ++next;
  }
  return comp;
}

// Ids node i should list as live: the up nodes it can reach.
std::set<core::NodeId> expected_live(MedleyWorld& world, const std::vector<int>& comp, size_t i) {
  std::set<core::NodeId> out;
  for (size_t j = 0; j < world.size(); ++j) {
    if (comp[j] == comp[i] && !world.medley(j)->has_left()) out.insert(world.id(j));
  }
  return out;
}

std::set<core::NodeId> live_ids(Medley& m) {
  std::set<core::NodeId> out;
  for (const Member& member : m.live_members()) out.insert(member.id);
  return out;
}

// Nodes whose list differs from what they can reach, as "i:missing/extra".
std::string list_mismatches(MedleyWorld& world) {
  std::string out;
  const std::vector<int> comp = components(world);
  for (size_t i = 0; i < world.size(); ++i) {
    if (!world.up(i)) continue;
    const auto want = expected_live(world, comp, i);
    const auto have = live_ids(*world.medley(i));
    if (want == have) continue;
    size_t missing = 0;
    size_t extra = 0;
    for (auto id : want) missing += have.contains(id) ? 0 : 1;
    for (auto id : have) extra += want.contains(id) ? 0 : 1;
    out += " " + std::to_string(i) + ":" + std::to_string(missing) + "/" + std::to_string(extra) + "(of " +
           std::to_string(want.size()) + ", health " + std::to_string(world.medley(i)->local_health()) + ")";
  }
  return out;
}

// Runs in steps until every list matches reachability or `limit` passes;
// returns when it converged.
std::optional<core::TimePoint> run_until_converged(MedleyWorld& world, core::Duration limit) {
  const core::TimePoint end = world.simulator().now() + limit;
  while (world.simulator().now() < end) {
    world.run_for(seconds(1));
    const std::string mismatches = list_mismatches(world);
    if (mismatches.empty()) return world.simulator().now();
    if (std::getenv("MEDLEY_TRACE")) {
      std::printf("t=%.0f mismatches:%s\n", core::to_seconds(world.simulator().now() - core::TimePoint{}),
                  mismatches.c_str());
    }
  }
  return std::nullopt;
}

WorldOptions lossy(double loss) {
  WorldOptions o;
  o.hop_loss = loss;
  return o;
}

constexpr int kNodes = 100;

TEST(MedleySim, ListsConvergeToFullMembership) {
  std::vector<double> times;
  uint64_t false_failures = 0;
  for (uint64_t seed : seeds(5)) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    MedleyWorld world(sim::random_geometric(kNodes, seed), seed, lossy(0.05));
    std::vector<Event> log;
    boot_all(world, log, seconds(5));
    world.run_for(seconds(5));
    const auto converged = run_until_converged(world, seconds(240));
    ASSERT_TRUE(converged) << "seed=" << seed << " not converged:" << list_mismatches(world);
    times.push_back(core::to_seconds(*converged - core::TimePoint(seconds(5))));
    for (const Event& e : log) false_failures += e.kind == MemberEventKind::failed ? 1 : 0;
    // Piggy-backing and sync chunks keep every message within one datagram.
    for (size_t i = 0; i < world.size(); ++i) {
      const auto rows = world.metrics(i)->histograms();
      for (const auto& row : rows) {
        if (row.name == "membership_message_bytes") {
          EXPECT_LE(row.histogram->max(), 1200.0) << "seed=" << seed << " node=" << i;
        }
      }
    }
  }
  std::printf("convergence after last boot (s): p50=%.0f max=%.0f; failed events at 5%% hop loss=%llu\n",
              quantile(times, 0.5), quantile(times, 1.0), static_cast<unsigned long long>(false_failures));
}

// Seeds [first_seed, last_seed] (or MEDLEY_SEED), split over two tests so each stays
// well under a minute on a loaded machine.
void crash_detection(uint64_t first_seed, uint64_t last_seed) {
  std::vector<uint64_t> chosen;
  for (uint64_t seed : seeds(last_seed)) {
    if (seed >= first_seed || std::getenv("MEDLEY_SEED")) chosen.push_back(seed);
  }
  if (std::getenv("MEDLEY_SEED") && first_seed > 1) {
    std::printf("MEDLEY_SEED replays in the first crash test only\n");
    return;
  }
  std::vector<double> detection;  // periods, per (observer, crashed node)
  for (uint64_t seed : chosen) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    MedleyWorld world(sim::random_geometric(kNodes, seed), seed, lossy(0.05));
    std::vector<Event> log;
    boot_all(world, log, seconds(5));
    ASSERT_TRUE(run_until_converged(world, seconds(240))) << "seed=" << seed << list_mismatches(world);
    world.run_for(seconds(20));
    // Two nodes whose loss leaves the rest connected (a split is the
    // partition test's subject).
    std::set<size_t> crashed;
    while (crashed.size() < 2) {
      const auto c = static_cast<size_t>(world.simulator().rng().below(world.size()));
      if (!still_connected_without(world.topology(), crashed, c)) continue;
      crashed.insert(c);
    }
    const core::TimePoint crash_at = world.simulator().now();
    for (size_t c : crashed) world.crash(c);
    world.run_for(seconds(150));
    if (std::getenv("MEDLEY_TRACE")) {
      for (const Event& e : log) {
        if (crashed.contains(static_cast<size_t>(world.index_of(e.member))) && e.at >= crash_at) {
          std::printf("  ev t=%.1f observer=%zu member=%s %s inc=%llu\n", core::to_seconds(e.at - core::TimePoint{}),
                      e.observer, e.member.to_string().c_str(), std::string(to_string(e.kind)).c_str(),
                      static_cast<unsigned long long>(e.incarnation));
        }
      }
    }
    const double period = core::to_seconds(world.options().medley.probe_period);
    for (size_t c : crashed) {
      for (size_t i = 0; i < world.size(); ++i) {
        if (!world.up(i)) continue;
        auto m = world.medley(i)->member(world.id(c));
        ASSERT_TRUE(m.has_value()) << "seed=" << seed;
        EXPECT_EQ(m->state, MemberState::failed) << "seed=" << seed << " observer=" << i << " crashed=" << c
                                                 << " state=" << to_string(m->state) << " incarnation=" << m->incarnation
                                                 << " syncs=" << world.metrics(i)->total("membership_syncs_total");
        std::optional<core::TimePoint> first;
        for (const Event& e : log) {
          if (e.observer == i && e.member == world.id(c) && e.kind == MemberEventKind::failed && e.at >= crash_at) {
            first = e.at;
            break;
          }
        }
        if (first) detection.push_back(core::to_seconds(*first - crash_at) / period);
      }
    }
    if (::testing::Test::HasFailure()) break;
  }
  ASSERT_FALSE(detection.empty());
  std::printf("detection time (protocol periods) over %zu observations: p50=%.1f p99=%.1f max=%.1f\n",
              detection.size(), quantile(detection, 0.5), quantile(detection, 0.99), quantile(detection, 1.0));
}

TEST(MedleySim, CrashedNodeMarkedFailedEverywhere) { crash_detection(1, 2); }

TEST(MedleySim, CrashedNodeMarkedFailedEverywhereMoreSeeds) { crash_detection(3, 4); }

TEST(MedleySim, NoFalsePositiveWithoutLoss) {
  for (uint64_t seed : seeds(3)) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    MedleyWorld world(sim::random_geometric(kNodes, seed), seed, lossy(0.0));
    std::vector<Event> log;
    boot_all(world, log, seconds(5));
    world.run_for(seconds(300));
    EXPECT_EQ(list_mismatches(world), "") << "seed=" << seed;
    for (const Event& e : log) {
      EXPECT_NE(e.kind, MemberEventKind::failed) << "seed=" << seed << " observer=" << e.observer
                                                 << " member=" << e.member.to_string();
      EXPECT_NE(e.kind, MemberEventKind::suspected) << "seed=" << seed << " observer=" << e.observer
                                                    << " member=" << e.member.to_string();
      if (HasFailure()) break;
    }
    if (HasFailure()) break;
  }
}

TEST(MedleySim, RestartWithHigherIncarnationRejoins) {
  for (uint64_t seed : seeds(8)) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    MedleyWorld world(sim::random_geometric(50, seed), seed, lossy(0.05));
    std::vector<Event> log;
    boot_all(world, log, seconds(5));
    ASSERT_TRUE(run_until_converged(world, seconds(240))) << "seed=" << seed << list_mismatches(world);
    const size_t victim = static_cast<size_t>(world.simulator().rng().below(world.size()));
    const uint64_t before = world.medley(victim)->incarnation();
    world.crash(victim);
    world.run_for(seconds(150));
    for (size_t i = 0; i < world.size(); ++i) {
      if (!world.up(i)) continue;
      ASSERT_EQ(world.medley(i)->member(world.id(victim))->state, MemberState::failed)
          << "seed=" << seed << " observer=" << i;
    }
    // The restarted process remembers nothing: it starts at incarnation 0
    // and must out-bid the failure record it finds.
    reboot(world, log, victim, 0);
    ASSERT_TRUE(run_until_converged(world, seconds(240))) << "seed=" << seed << list_mismatches(world);
    EXPECT_GT(world.medley(victim)->incarnation(), before) << "seed=" << seed;
    for (size_t i = 0; i < world.size(); ++i) {
      const auto m = world.medley(i)->member(world.id(victim));
      ASSERT_TRUE(m.has_value());
      EXPECT_TRUE(is_live(m->state)) << "seed=" << seed << " observer=" << i;
      EXPECT_GT(m->incarnation, before) << "seed=" << seed << " observer=" << i;
    }
    if (HasFailure()) break;
  }
}

// `size` nodes in BFS order from some start node, such that both they and
// the rest are connected; empty if no start node gives that.
std::vector<size_t> connected_prefix(const sim::Topology& topology, size_t size) {
  const size_t n = topology.size();
  for (size_t start = 0; start < n; ++start) {
    std::vector<size_t> order{start};
    std::vector<bool> seen(n, false);
    seen[start] = true;
    for (size_t k = 0; k < order.size() && order.size() < size; ++k) {
      for (int nb : topology.neighbours(static_cast<int>(order[k]))) {
        if (!seen[static_cast<size_t>(nb)] && order.size() < size) {
          seen[static_cast<size_t>(nb)] = true;
          order.push_back(static_cast<size_t>(nb));
        }
      }
    }
    std::set<size_t> half(order.begin(), order.end());
    size_t rest_start = 0;
    while (half.contains(rest_start)) ++rest_start;
    // Is the rest connected?
    std::vector<bool> reached(n, false);
    std::vector<size_t> stack{rest_start};
    reached[rest_start] = true;
    size_t count = 1;
    while (!stack.empty()) {
      const size_t a = stack.back();
      stack.pop_back();
      for (int nb : topology.neighbours(static_cast<int>(a))) {
        const auto b = static_cast<size_t>(nb);
        if (reached[b] || half.contains(b)) continue;
        reached[b] = true;
        ++count;
        stack.push_back(b);
      }
    }
    if (count == n - half.size()) return order;
  }
  return {};
}

// Between 30 % and 70 % of the nodes, a BFS prefix from some start node,
// such that both it and the rest are connected (closest to half first);
// empty if there is none.
std::vector<size_t> connected_halves(const sim::Topology& topology) {
  const size_t n = topology.size();
  for (size_t delta = 0; delta <= n / 5; ++delta) {
    for (size_t size : {n / 2 - delta, n / 2 + delta}) {
      auto half = connected_prefix(topology, size);
      if (!half.empty()) return half;
    }
  }
  return {};
}

void partition_and_heal(double loss, uint64_t seed_count) {
  for (uint64_t seed : seeds(seed_count)) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    MedleyWorld world(sim::random_geometric(50, seed), seed, lossy(loss));
    std::vector<Event> log;
    boot_all(world, log, seconds(5));
    ASSERT_TRUE(run_until_converged(world, seconds(240))) << "seed=" << seed << list_mismatches(world);
    // Two halves, each connected on its own (a node cut off alone is
    // Lifeguard's slow case: its health stretches its probing nine-fold).
    const std::vector<size_t> half = connected_halves(world.topology());
    ASSERT_FALSE(half.empty()) << "seed=" << seed << " has no split into two connected halves";
    std::vector<core::NodeId> west;
    for (size_t i : half) west.push_back(world.id(i));
    world.network().partition({west});
    const core::TimePoint partitioned_at = world.simulator().now();
    const auto split = run_until_converged(world, seconds(300));
    ASSERT_TRUE(split) << "seed=" << seed << " lists did not split:" << list_mismatches(world);
    // The lists really split: someone lost someone.
    size_t smallest = world.size();
    for (size_t i = 0; i < world.size(); ++i) smallest = std::min(smallest, world.medley(i)->live_members().size());
    EXPECT_LT(smallest, world.size()) << "seed=" << seed;
    world.network().heal();
    const auto merged = run_until_converged(world, seconds(300));
    ASSERT_TRUE(merged) << "seed=" << seed << " lists did not merge:" << list_mismatches(world);
    std::printf("loss=%.2f seed=%llu split in %.0f s, merged in %.0f s after healing\n", loss,
                static_cast<unsigned long long>(seed), core::to_seconds(*split - partitioned_at),
                core::to_seconds(*merged - *split));
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(MedleySim, PartitionSplitsListsAndHealingMergesThem) { partition_and_heal(0.0, 10); }

TEST(MedleySim, PartitionUnderHopLossSplitsAndMerges) { partition_and_heal(0.05, 4); }

TEST(MedleySim, GracefulLeaveIsSeenAsLeftNotFailed) {
  for (uint64_t seed : seeds(8)) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    MedleyWorld world(sim::random_geometric(50, seed), seed, lossy(0.05));
    std::vector<Event> log;
    boot_all(world, log, seconds(5));
    ASSERT_TRUE(run_until_converged(world, seconds(240))) << "seed=" << seed << list_mismatches(world);
    const size_t leaver = static_cast<size_t>(world.simulator().rng().below(world.size()));
    world.medley(leaver)->leave();
    world.run_for(seconds(5));
    world.crash(leaver);
    world.run_for(seconds(60));
    for (size_t i = 0; i < world.size(); ++i) {
      if (!world.up(i)) continue;
      EXPECT_EQ(world.medley(i)->member(world.id(leaver))->state, MemberState::left)
          << "seed=" << seed << " observer=" << i;
    }
    if (HasFailure()) break;
  }
}

TEST(MedleySim, MetadataReachesEveryNode) {
  for (uint64_t seed : seeds(8)) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    MedleyWorld world(sim::random_geometric(50, seed), seed, lossy(0.05));
    std::vector<Event> log;
    boot_all(world, log, seconds(5));
    ASSERT_TRUE(run_until_converged(world, seconds(240))) << "seed=" << seed << list_mismatches(world);
    const size_t writer = static_cast<size_t>(world.simulator().rng().below(world.size()));
    ASSERT_TRUE(world.medley(writer)->set_metadata("devices", "lamp-3:ok"));
    EXPECT_FALSE(world.medley(writer)->set_metadata("big", std::string(1000, 'x')));
    world.run_for(seconds(60));
    for (size_t i = 0; i < world.size(); ++i) {
      const auto m = world.medley(i)->member(world.id(writer));
      ASSERT_TRUE(m.has_value());
      EXPECT_EQ(m->metadata.count("devices"), 1u) << "seed=" << seed << " observer=" << i;
      EXPECT_EQ(m->metadata.count("big"), 0u);
      EXPECT_EQ(m->name, "n" + std::to_string(writer));
      EXPECT_EQ(m->location, world.topology().positions[writer]);
    }
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace mesh::membership::testing
