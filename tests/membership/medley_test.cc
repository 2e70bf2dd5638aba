// Medley's protocol rules on tiny meshes without loss: a node refutes a
// suspicion of itself by raising its incarnation, garbage is counted and
// dropped, local health rises when probes fail and falls when they succeed,
// and a list larger than one datagram is pulled in chunks.
#include <gtest/gtest.h>

#include <string>

#include "core/log.h"
#include "proto/wire.pb.h"
#include "tests/membership/medley_world.h"

namespace mesh::membership::testing {
namespace {

using std::chrono::seconds;

constexpr uint32_t kBodyType = proto::Envelope::kMembershipFieldNumber;

class QuietLogs : public ::testing::Environment {
 public:
  void SetUp() override { core::set_log_level("warn"); }
};
const ::testing::Environment* const kQuietLogs = ::testing::AddGlobalTestEnvironment(new QuietLogs);

void boot_all(MedleyWorld& world) {
  for (size_t i = 0; i < world.size(); ++i) world.boot(i);
}

bool everyone_sees_everyone(MedleyWorld& world) {
  for (size_t i = 0; i < world.size(); ++i) {
    if (world.up(i) && world.medley(i)->live_members().size() != world.size()) return false;
  }
  return true;
}

TEST(Medley, RefutesSuspicionOfItself) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    MedleyWorld world(sim::line(3), seed, WorldOptions{});
    boot_all(world);
    world.run_for(seconds(10));
    ASSERT_TRUE(everyone_sees_everyone(world)) << "seed=" << seed;
    const uint64_t before = world.medley(1)->incarnation();
    // Node 0 tells node 1 that node 1 is suspected.
    proto::MembershipBody body;
    proto::MemberRecord* r = body.mutable_gossip()->add_updates();
    r->set_id(world.id(1).value());
    r->set_state(proto::MEMBER_SUSPECT);
    r->set_incarnation(before);
    r->set_accuser(world.id(0).value());
    // Sent on node 0's transport, as node 0's Medley would send it.
    core::Message message;
    message.dst = world.id(1);
    message.body_type = kBodyType;
    message.body = body.SerializeAsString();
    world.routing().transport(world.id(0)).send(message);
    world.run_for(seconds(10));
    EXPECT_EQ(world.medley(1)->incarnation(), before + 1) << "seed=" << seed;
    for (size_t i = 0; i < world.size(); ++i) {
      const auto m = world.medley(i)->member(world.id(1));
      ASSERT_TRUE(m.has_value());
      EXPECT_EQ(m->state, MemberState::alive) << "seed=" << seed << " observer=" << i;
      EXPECT_EQ(m->incarnation, before + 1) << "seed=" << seed << " observer=" << i;
    }
    EXPECT_EQ(world.metrics(1)->total("membership_refutations_total"), 1u) << "seed=" << seed;
  }
}

TEST(Medley, MalformedBodiesAreCountedAndDropped) {
  MedleyWorld world(sim::line(2), 1, WorldOptions{});
  boot_all(world);
  world.run_for(seconds(5));
  // Bodies the Envelope codec lets through (they parse) but Medley must
  // refuse: random mutations of a valid ping, kept when they still parse.
  proto::MembershipBody valid;
  valid.mutable_ping()->set_seq(7);
  valid.mutable_ping()->set_target(world.id(1).value());
  proto::MemberRecord* r = valid.mutable_ping()->add_updates();
  r->set_id(world.id(0).value());
  r->set_state(proto::MEMBER_ALIVE);
  r->mutable_info()->set_name("n0");
  const std::string bytes = valid.SerializeAsString();
  core::Rng rng(5);
  uint64_t rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string mutated = bytes;
    for (int k = 0; k < 2; ++k) mutated[rng.below(mutated.size())] = static_cast<char>(rng.below(256));
    proto::MembershipBody parsed;
    if (!parsed.ParseFromString(mutated)) continue;
    if (!decode_body(mutated, CodecLimits{})) ++rejected;
    core::Message message;
    message.dst = world.id(1);
    message.body_type = kBodyType;
    message.body = mutated;
    world.routing().transport(world.id(0)).send(message);
  }
  // Mutations that stay valid may forge claims about node 0 (failed, a
  // huge incarnation); node 0 refutes them.
  world.run_for(seconds(60));
  ASSERT_GT(rejected, 50u);
  EXPECT_EQ(world.metrics(1)->total("membership_decode_errors_total"), rejected);
  // Mutated ids that stay valid add phantom members (links are
  // authenticated in the agent, so only a peer could forge them); the two
  // real nodes still hold each other alive.
  EXPECT_EQ(world.medley(0)->member(world.id(1))->state, MemberState::alive);
  EXPECT_EQ(world.medley(1)->member(world.id(0))->state, MemberState::alive);
}

TEST(Medley, LocalHealthRisesWhenProbesFailAndRecovers) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    MedleyWorld world(sim::line(3), seed, WorldOptions{});
    boot_all(world);
    world.run_for(seconds(10));
    ASSERT_TRUE(everyone_sees_everyone(world)) << "seed=" << seed;
    EXPECT_EQ(world.medley(1)->local_health(), 0u) << "seed=" << seed;
    // Node 1 cannot hear anyone for a while: its probes fail.
    world.network().set_link_up(world.id(0), world.id(1), false);
    world.network().set_link_up(world.id(1), world.id(2), false);
    world.run_for(seconds(6));
    const uint32_t sick = world.medley(1)->local_health();
    EXPECT_GT(sick, 0u) << "seed=" << seed;
    world.network().set_link_up(world.id(0), world.id(1), true);
    world.network().set_link_up(world.id(1), world.id(2), true);
    world.run_for(seconds(120));
    EXPECT_EQ(world.medley(1)->local_health(), 0u) << "seed=" << seed;
    EXPECT_TRUE(everyone_sees_everyone(world)) << "seed=" << seed;
  }
}

// Silence from the target and from every helper is weak evidence: an
// isolated node suspects a member only after silent_probes_to_suspect
// probes in a row (1 = classic SWIM, which the same check tells apart).
TEST(Medley, SilentProbesSuspectOnlyAfterSeveralInARow) {
  for (uint32_t needed : {1u, 3u}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      WorldOptions options;
      options.medley.silent_probes_to_suspect = needed;
      MedleyWorld world(sim::line(3), seed, options);
      std::optional<uint64_t> probes_at_first_suspicion;
      for (size_t i = 0; i < world.size(); ++i) {
        world.boot(i, 0, [&world, &probes_at_first_suspicion](size_t index, Medley& m) {
          if (index != 1) return;
          m.add_listener([&world, &probes_at_first_suspicion](const MemberEvent& e) {
            if (e.kind == MemberEventKind::suspected && !probes_at_first_suspicion) {
              probes_at_first_suspicion = world.metrics(1)->total("membership_probes_total");
            }
          });
        });
      }
      world.run_for(seconds(10));
      ASSERT_TRUE(everyone_sees_everyone(world)) << "seed=" << seed;
      ASSERT_FALSE(probes_at_first_suspicion.has_value()) << "seed=" << seed;
      // Node 1 hears nobody: no ack, no nack, only its own accusations.
      const uint64_t before = world.metrics(1)->total("membership_probes_total");
      world.network().set_link_up(world.id(0), world.id(1), false);
      world.network().set_link_up(world.id(1), world.id(2), false);
      world.run_for(seconds(60));
      ASSERT_TRUE(probes_at_first_suspicion.has_value()) << "seed=" << seed << " needed=" << needed;
      // At most one probe was already under way at the cut.
      const uint64_t probes = *probes_at_first_suspicion - before;
      if (needed == 1) {
        EXPECT_LE(probes, 1u) << "seed=" << seed;
      } else {
        EXPECT_GE(probes, needed - 1) << "seed=" << seed;
      }
    }
  }
}

// Beyond silence_radius_hops an unanswered probe counts for nothing. On a
// lossy line without helpers (so every unanswered probe is silent) node 0
// suspects near members and never far ones, which with the radius off (0)
// it suspects too: membership_suspicions_by_hops_total counts only the
// suspicions this node raised itself.
TEST(Medley, SilenceBeyondTheRadiusSuspectsNobody) {
  constexpr uint32_t kRadius = 3;
  for (uint32_t radius : {kRadius, 0u}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      WorldOptions options;
      options.hop_loss = 0.3;
      options.medley.silence_radius_hops = radius;
      options.medley.indirect_checks = 0;
      options.medley.alpha = 0;  // uniform targets: far members are probed as often as near ones
      MedleyWorld world(sim::line(10), seed, options);
      for (size_t i = 0; i < world.size(); ++i) world.boot(i);
      world.run_for(seconds(120));
      uint64_t near = 0;
      uint64_t far = 0;
      for (const auto& row : world.metrics(0)->counters()) {
        if (row.name != "membership_suspicions_by_hops_total") continue;
        for (const auto& [key, hops] : row.labels) {
          if (key == "hops") (hops != "unknown" && std::stoul(hops) > kRadius ? far : near) += row.value;
        }
      }
      EXPECT_GT(near, 0u) << "seed=" << seed << " radius=" << radius;
      if (radius == 0) {
        EXPECT_GT(far, 0u) << "seed=" << seed << " radius=0";
      } else {
        EXPECT_EQ(far, 0u) << "seed=" << seed << " radius=" << radius;
      }
    }
  }
}

TEST(Medley, LargeListIsPulledInChunks) {
  // Names and metadata make each record large, so 60 members need several
  // sync chunks; the last node joins late and must learn all of them.
  WorldOptions options;
  MedleyWorld world(sim::grid_for(60), 3, options);
  for (size_t i = 0; i + 1 < world.size(); ++i) world.boot(i);
  world.run_for(seconds(60));
  for (size_t i = 0; i + 1 < world.size(); ++i) {
    ASSERT_TRUE(world.medley(i)->set_metadata("summary", std::string(100, static_cast<char>('a' + i % 26))));
  }
  world.run_for(seconds(60));
  world.boot(world.size() - 1);
  world.run_for(seconds(5));
  EXPECT_EQ(world.medley(world.size() - 1)->live_members().size(), world.size());
  // Far more than one datagram's worth: several chunk requests to one peer.
  EXPECT_GE(world.metrics(world.size() - 1)->counter("membership_sent_total", {{"type", "sync_request"}}).value(), 5u);
  size_t with_summary = 0;
  for (const Member& m : world.medley(world.size() - 1)->live_members()) with_summary += m.metadata.count("summary");
  EXPECT_EQ(with_summary, world.size() - 1);
}

}  // namespace
}  // namespace mesh::membership::testing
