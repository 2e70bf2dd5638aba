#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "kgroup/device_clusters.h"
#include "kgroup/group_selector.h"
#include "kgroup/group_target.h"
#include "kgroup/hash_selection.h"
#include "kgroup/lsh_selection.h"
#include "membership/static_member_view.h"

namespace mesh::kgroup {
namespace {

using core::NodeId;

NodeId node(size_t i) {
  return NodeId::from_octets(10, 0, static_cast<uint8_t>(i / 250), static_cast<uint8_t>(i % 250 + 1));
}

// width x height nodes, `spacing` metres apart.
std::vector<SmartNode> grid_nodes(size_t width, size_t height, double spacing) {
  std::vector<SmartNode> nodes;
  for (size_t y = 0; y < height; ++y) {
    for (size_t x = 0; x < width; ++x) {
      nodes.push_back({node(nodes.size()), {static_cast<double>(x) * spacing, static_cast<double>(y) * spacing, 0.0}});
    }
  }
  return nodes;
}

double distance(const Location& a, const Location& b) {
  double s = 0;
  for (size_t i = 0; i < 3; ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s);
}

Location location_of(const std::vector<SmartNode>& nodes, NodeId id) {
  for (const auto& n : nodes) {
    if (n.id == id) return n.location;
  }
  ADD_FAILURE() << "unknown node " << id.to_string();
  return {};
}

TEST(GroupTarget, ParsesAndPrintsCanonically) {
  for (const char* text : {"device:lamp-1", "cluster:3", "routine:wake up", "device:a:b"}) {
    const auto target = GroupTarget::parse(text);
    ASSERT_TRUE(target) << text;
    EXPECT_EQ(target->to_string(), text);
  }
  EXPECT_EQ(GroupTarget::parse("routine:r")->kind, TargetKind::routine);
  EXPECT_EQ(GroupTarget::parse("device:a:b")->id, "a:b");
}

TEST(GroupTarget, RejectsGarbage) {
  for (std::string text : {"", "device", "device:", ":x", "devices:x", "Device:x", "cluster:\n", "routine:a\x7f"}) {
    EXPECT_FALSE(GroupTarget::parse(text)) << text;
  }
  EXPECT_FALSE(GroupTarget::parse("device:" + std::string(kMaxIdLength + 1, 'a')));
  EXPECT_TRUE(GroupTarget::parse("device:" + std::string(kMaxIdLength, 'a')));
}

TEST(HashSelection, EveryNodeComputesTheSameGroupFromTheSameList) {
  const auto nodes = grid_nodes(10, 10, 10.0);
  core::Rng rng(7);
  for (int t = 0; t < 50; ++t) {
    const GroupTarget target{TargetKind::device, "dev-" + std::to_string(t)};
    const uint64_t epoch = static_cast<uint64_t>(t % 4);
    const auto reference = hash_select(nodes, target, epoch, 5);
    ASSERT_EQ(reference.size(), 5u);
    for (int view = 0; view < 10; ++view) {
      auto shuffled = nodes;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      EXPECT_EQ(hash_select(shuffled, target, epoch, 5), reference) << target.to_string();
    }
    // The k lowest scores, lowest first.
    std::vector<uint64_t> all;
    for (const auto& n : nodes) all.push_back(member_score(epoch, n.id, target));
    std::sort(all.begin(), all.end());
    for (size_t i = 0; i < reference.size(); ++i) EXPECT_EQ(reference[i].score, all[i]);
  }
}

TEST(HashSelection, FewerNodesThanKGivesAllAndDuplicatesCountOnce) {
  auto nodes = grid_nodes(2, 1, 10.0);
  nodes.push_back(nodes.front());
  const auto group = hash_select(nodes, GroupTarget{TargetKind::cluster, "0"}, 0, 5);
  EXPECT_EQ(group.size(), 2u);
  EXPECT_EQ(quorum_size(5), 3u);
  EXPECT_EQ(faults_tolerated(3), 1u);
  // Even counts (a group formed with fewer live nodes than k) need a strict
  // majority: two disjoint halves must never both commit.
  EXPECT_EQ(quorum_size(1), 1u);
  EXPECT_EQ(quorum_size(2), 2u);
  EXPECT_EQ(quorum_size(4), 3u);
}

TEST(HashSelection, EpochsAndTargetsSpreadTheLoad) {
  // Temporal and spatial load balance: over many targets and epochs every
  // node serves somewhere, and a target's group changes across epochs.
  const auto nodes = grid_nodes(5, 4, 10.0);
  std::map<NodeId, int> load;
  int changed = 0;
  for (int t = 0; t < 200; ++t) {
    const GroupTarget target{TargetKind::routine, "r" + std::to_string(t)};
    const auto e0 = hash_select(nodes, target, 0, 3);
    const auto e1 = hash_select(nodes, target, 1, 3);
    if (e0 != e1) ++changed;
    for (const auto& m : e0) ++load[m.id];
  }
  EXPECT_EQ(load.size(), nodes.size());
  EXPECT_GT(changed, 150);
  for (const auto& [id, count] : load) EXPECT_LT(count, 90) << id.to_string();
}

TEST(LshFamily, IsDeterministicAndNearbyPointsCollideMoreOften) {
  LshParams params;
  params.seed = 42;
  const LshFamily a(params, 3);
  const LshFamily b(params, 3);
  core::Rng rng(1);
  int near_hits = 0;
  int far_hits = 0;
  for (int i = 0; i < 2000; ++i) {
    const Location p{rng.unit() * 500, rng.unit() * 500, 0};
    const Location near{p[0] + 5, p[1] - 3, 0};
    const Location far{p[0] + 200, p[1] + 150, 0};
    const auto kp = a.keys(to_point(p));
    ASSERT_EQ(kp, b.keys(to_point(p)));
    ASSERT_EQ(kp.size(), 2u);
    near_hits += a.collide(kp, a.keys(to_point(near))) ? 1 : 0;
    far_hits += a.collide(kp, a.keys(to_point(far))) ? 1 : 0;
  }
  EXPECT_GT(near_hits, 3 * far_hits) << "near=" << near_hits << " far=" << far_hits;
}

TEST(LshSelection, NearMembersAreCloserToTheCentreThanRandomSelection) {
  const auto nodes = grid_nodes(20, 20, 10.0);  // 400 nodes, 190 m square
  LshParams params;
  params.seed = 9;
  core::Rng rng(3);
  const size_t k = 5;
  const size_t near = quorum_size(k);
  double lsh_sum = 0;
  double random_sum = 0;
  double candidates = 0;
  const int targets = 200;
  for (int t = 0; t < targets; ++t) {
    const GroupTarget target{TargetKind::device, "d" + std::to_string(t)};
    const Location centre{rng.unit() * 190, rng.unit() * 190, 0};
    const auto selection = lsh_select(nodes, target, 0, k, centre, {}, params);
    ASSERT_EQ(selection.members.size(), k);
    ASSERT_EQ(selection.near.size(), near);
    // Near members lead the priority order, each part sorted by score.
    for (size_t i = 0; i < near; ++i) ASSERT_EQ(selection.members[i].id, selection.near[i]);
    for (size_t i = 1; i < selection.members.size(); ++i) {
      if (i != near) {
        ASSERT_TRUE(higher_priority(selection.members[i - 1], selection.members[i]));
      }
    }
    std::set<NodeId> member_ids;
    for (const auto& m : selection.members) member_ids.insert(m.id);
    ASSERT_EQ(member_ids.size(), k);
    for (NodeId id : selection.near) {
      ASSERT_TRUE(member_ids.count(id));
      lsh_sum += distance(location_of(nodes, id), centre);
    }
    const auto random = hash_select(nodes, target, 0, k);
    for (size_t i = 0; i < near; ++i) random_sum += distance(location_of(nodes, random[i].id), centre);
    candidates += static_cast<double>(selection.candidates);

    auto shuffled = nodes;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const auto again = lsh_select(shuffled, target, 0, k, centre, {}, params);
    ASSERT_EQ(again.members, selection.members);
    ASSERT_EQ(again.near, selection.near);
  }
  const double lsh_mean = lsh_sum / (targets * static_cast<double>(near));
  const double random_mean = random_sum / (targets * static_cast<double>(near));
  RecordProperty("lsh_mean_m", std::to_string(lsh_mean));
  RecordProperty("random_mean_m", std::to_string(random_mean));
  EXPECT_LT(lsh_mean, 0.5 * random_mean) << "lsh=" << lsh_mean << " random=" << random_mean;
  EXPECT_GT(candidates / targets, static_cast<double>(near));
}

TEST(LshSelection, BorrowsFromNeighboursWhenTheCentreHasTooFewCandidates) {
  // A centre far outside the mesh shares buckets with nobody; its neighbour
  // (a device inside the mesh) lends its candidates before hashing decides.
  const auto nodes = grid_nodes(10, 10, 10.0);
  LshParams params;
  params.seed = 5;
  params.r = 1.0;
  const Location centre{5000, 5000, 0};
  const Location neighbour{45, 45, 0};
  const auto selection = lsh_select(nodes, GroupTarget{TargetKind::device, "far"}, 0, 5, centre, {neighbour}, params);
  ASSERT_EQ(selection.members.size(), 5u);
  EXPECT_EQ(selection.candidates, 0u);
  const LshFamily family(params, 0);
  const auto neighbour_keys = family.keys(to_point(neighbour));
  for (NodeId id : selection.near) {
    EXPECT_TRUE(family.collide(neighbour_keys, family.keys(to_point(location_of(nodes, id))))) << id.to_string();
  }
  // Without the neighbour it falls back to hash order.
  const auto alone = lsh_select(nodes, GroupTarget{TargetKind::device, "far"}, 0, 5, centre, {}, params);
  EXPECT_EQ(alone.members, hash_select(nodes, GroupTarget{TargetKind::device, "far"}, 0, 5));
}

std::vector<DeviceLocation> random_devices(size_t n, core::Rng& rng) {
  std::vector<DeviceLocation> devices;
  for (size_t i = 0; i < n; ++i) {
    devices.push_back({"dev-" + std::to_string(i), {rng.unit() * 300, rng.unit() * 300, rng.unit() * 6}});
  }
  return devices;
}

TEST(DeviceClusters, DeterministicWhateverTheInputOrder) {
  core::Rng rng(11);
  auto devices = random_devices(250, rng);
  DeviceClusters::Options options;
  options.seed = 77;
  const auto reference = DeviceClusters::build(devices, options);
  ASSERT_EQ(reference.clusters().size(), 10u);
  for (int i = 0; i < 5; ++i) {
    std::shuffle(devices.begin(), devices.end(), rng);
    const auto again = DeviceClusters::build(devices, options);
    ASSERT_EQ(again.clusters().size(), reference.clusters().size());
    for (size_t c = 0; c < reference.clusters().size(); ++c) {
      EXPECT_EQ(again.clusters()[c].id, reference.clusters()[c].id);
      EXPECT_EQ(again.clusters()[c].devices, reference.clusters()[c].devices);
      EXPECT_EQ(again.clusters()[c].centre_device, reference.clusters()[c].centre_device);
    }
  }
}

TEST(DeviceClusters, EveryDeviceInExactlyOneClusterNearestItsCentroid) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    core::Rng rng(seed);
    const auto devices = random_devices(30 + rng.below(200), rng);
    DeviceClusters::Options options;
    options.seed = seed;
    const auto clusters = DeviceClusters::build(devices, options);
    std::set<std::string> seen;
    for (size_t c = 0; c < clusters.clusters().size(); ++c) {
      const auto& cluster = clusters.clusters()[c];
      EXPECT_EQ(cluster.id, cluster.devices.front());  // named by its smallest device id
      EXPECT_TRUE(std::find(cluster.devices.begin(), cluster.devices.end(), cluster.centre_device) !=
                  cluster.devices.end());
      for (const auto& d : cluster.devices) {
        EXPECT_TRUE(seen.insert(d).second) << "seed " << seed << " device " << d;
        EXPECT_EQ(clusters.cluster_of(d), c);
        const Point p = to_point(*clusters.location_of(d));
        for (const auto& other : clusters.clusters()) {
          EXPECT_LE(distance2(p, cluster.centroid), distance2(p, other.centroid)) << "seed " << seed;
        }
      }
    }
    EXPECT_EQ(seen.size(), devices.size()) << "seed " << seed;
    EXPECT_LE(clusters.clusters().size(), (devices.size() + 24) / 25);
  }
}

TEST(DeviceClusters, RoutineFollowsARepresentativeDevice) {
  const std::vector<std::string> touched{"lamp", "door", "heater"};
  const auto rep = representative_device("routine-1", touched, 3);
  ASSERT_TRUE(rep);
  EXPECT_TRUE(std::find(touched.begin(), touched.end(), *rep) != touched.end());
  const std::vector<std::string> reversed(touched.rbegin(), touched.rend());
  EXPECT_EQ(representative_device("routine-1", reversed, 3), rep);
  EXPECT_FALSE(representative_device("routine-1", {}, 3));
  // Different routines pick different representatives somewhere.
  std::set<std::string> picks;
  for (int r = 0; r < 30; ++r) picks.insert(*representative_device("r" + std::to_string(r), touched, 3));
  EXPECT_EQ(picks.size(), touched.size());
}

std::vector<membership::Member> members_of(const std::vector<SmartNode>& nodes) {
  std::vector<membership::Member> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    membership::Member m;
    m.id = nodes[i].id;
    m.name = "n" + std::to_string(i);
    m.location = nodes[i].location;
    out.push_back(m);
  }
  return out;
}

TEST(GroupSelector, HashModeFollowsTheLiveList) {
  const auto nodes = grid_nodes(6, 5, 10.0);
  membership::StaticMemberView view(nodes[3].id);
  view.set_members(members_of(nodes));
  SelectionOptions options;
  options.k = 5;
  const GroupSelector selector(view, options);
  const GroupTarget target{TargetKind::device, "thermostat"};
  const auto before = selector.select(target, 2);
  EXPECT_EQ(before.members, hash_select(nodes, target, 2, 5));
  // A failed member drops out; the next best score takes its place.
  view.mark_failed(before.members.front().id);
  const auto after = selector.members(target, 2);
  ASSERT_EQ(after.size(), 5u);
  EXPECT_EQ(std::count(after.begin(), after.end(), before.members.front().id), 0);
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(after[i - 1], before.members[i].id);
}

TEST(GroupSelector, LshModeUsesDeviceCentresAndRoutinesFollowTheirRepresentative) {
  const auto nodes = grid_nodes(10, 10, 10.0);
  membership::StaticMemberView view(nodes[0].id);
  view.set_members(members_of(nodes));
  SelectionOptions options;
  options.k = 5;
  options.mode = SelectionMode::lsh;
  options.lsh.seed = 4;
  GroupSelector selector(view, options);
  core::Rng rng(8);
  std::vector<DeviceLocation> devices;
  for (int i = 0; i < 60; ++i) devices.push_back({"dev" + std::to_string(i), {rng.unit() * 90, rng.unit() * 90, 0}});
  selector.set_devices(devices);
  EXPECT_EQ(selector.clusters().clusters().size(), 3u);
  EXPECT_EQ(selector.device_group("dev7").kind, TargetKind::cluster);
  EXPECT_EQ(selector.device_group("unknown").kind, TargetKind::device);

  const auto device = selector.select(GroupTarget{TargetKind::device, "dev7"}, 0);
  ASSERT_EQ(device.members.size(), 5u);
  ASSERT_EQ(device.near.size(), 3u);
  for (NodeId id : device.near) EXPECT_LT(distance(location_of(nodes, id), devices[7].location), 40.0);

  selector.set_routine_devices("morning", {"dev7", "dev8", "dev9"});
  const auto rep = representative_device("morning", {"dev7", "dev8", "dev9"}, options.lsh.seed);
  ASSERT_TRUE(rep);
  const auto routine = selector.select(GroupTarget{TargetKind::routine, "morning"}, 0);
  const auto rep_group = selector.select(GroupTarget{TargetKind::device, *rep}, 0);
  // The same nodes near the same centre (ordered by each target's scores).
  EXPECT_EQ(std::set<NodeId>(routine.near.begin(), routine.near.end()),
            std::set<NodeId>(rep_group.near.begin(), rep_group.near.end()));

  // Unknown centres fall back to hashing.
  const GroupTarget lost{TargetKind::routine, "nobody-knows"};
  EXPECT_EQ(selector.select(lost, 0).members, hash_select(nodes, lost, 0, 5));
}

TEST(GroupSelector, CentralModePutsEveryTargetOnTheSameMembers) {
  const auto nodes = grid_nodes(6, 5, 10.0);
  membership::StaticMemberView view(nodes[0].id);
  view.set_members(members_of(nodes));
  SelectionOptions options;
  options.k = 1;
  options.mode = SelectionMode::central;
  GroupSelector selector(view, options);
  selector.set_devices({{"lamp", {5, 5, 0}}, {"door", {45, 35, 0}}});
  selector.set_routine_devices("night", {"door"});
  const auto hub = selector.members(GroupTarget{TargetKind::catalog, "mesh"}, 3);
  ASSERT_EQ(hub.size(), 1u);
  for (const GroupTarget& target : {GroupTarget{TargetKind::device, "lamp"}, GroupTarget{TargetKind::device, "door"},
                                    GroupTarget{TargetKind::routine, "night"}, selector.device_group("lamp")}) {
    EXPECT_EQ(selector.members(target, 3), hub) << target.to_string();
  }
  // A new epoch may move the hub, as it moves every hashed group.
  EXPECT_EQ(selector.members(GroupTarget{TargetKind::routine, "night"}, 4),
            selector.members(GroupTarget{TargetKind::catalog, "mesh"}, 4));
}

TEST(GroupSelector, PrintsTheMeshctlJson) {
  const auto nodes = grid_nodes(3, 1, 10.0);
  membership::StaticMemberView view(nodes[0].id);
  view.set_members(members_of(nodes));
  SelectionOptions options;
  options.k = 3;
  const GroupSelector selector(view, options);
  const auto selected = selector.select(GroupTarget{TargetKind::device, "a\"b"}, 7);
  const std::string json = selector.to_json(selected);
  EXPECT_NE(json.find(R"("target": "device:a\"b")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("epoch": 7)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("leader": ")" + selected.members.front().id.to_string() + "\""), std::string::npos) << json;
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), 4) << json;
  EXPECT_NE(json.find(R"("name": "n)"), std::string::npos) << json;
}

}  // namespace
}  // namespace mesh::kgroup
