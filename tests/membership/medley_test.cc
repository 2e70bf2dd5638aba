// Medley's protocol rules on tiny meshes without loss: a node refutes a
// suspicion of itself by raising its incarnation, garbage is counted and
// dropped, local health rises when probes fail and falls when they succeed,
// a list larger than one datagram is pulled in chunks, a push-pull sends
// only the members whose digest bucket differs, and Medley's passive and
// active feedback probe silent near members and rarely probed nodes.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

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

// Stands in for a node at `index` of the world's topology without Medley:
// sends hand-made sync requests from that address and answers every pull
// with an empty list, keeping the ones it got.
class SyncProbe {
 public:
  SyncProbe(MedleyWorld& world, size_t index)
      : world_(world),
        self_(world.id(index)),
        env_(world.simulator(), 99, static_cast<uint32_t>(index), 0),
        messenger_(env_, world.routing().transport(self_), metrics_, core::Messenger::Options{}) {
    world.network().set_node_up(self_, true);
    messenger_.serve(kBodyType, [this](const core::Message& m, core::Responder responder) {
      auto body = decode_body(m.body, CodecLimits{});
      if (body && body->kind_case() == proto::MembershipBody::kSyncRequest) {
        pulls_.emplace_back(m.src, body->sync_request());
      }
      proto::MembershipBody reply;
      reply.mutable_sync_response();
      responder.respond(reply.SerializeAsString());
    });
  }

  MemberRecord self_record() const {
    MemberRecord r;
    r.member.id = self_;
    r.member.name = "probe";
    r.has_info = true;
    return r;
  }

  // One request to `to`, the world run until it is answered.
  std::optional<proto::SyncResponse> pull(core::NodeId to, const std::vector<uint32_t>& digests) {
    proto::MembershipBody body;
    proto::SyncRequest* req = body.mutable_sync_request();
    to_wire(self_record(), req->mutable_sender());
    req->set_reverse(true);
    for (uint32_t hash : digests) req->add_bucket_digests(hash);
    std::optional<proto::SyncResponse> out;
    messenger_.request(to, kBodyType, body.SerializeAsString(), [&out](const core::RequestResult& result) {
      if (result.status != core::RequestStatus::ok) return;
      auto response = decode_body(result.response.body, CodecLimits{});
      if (response && response->kind_case() == proto::MembershipBody::kSyncResponse) out = response->sync_response();
    });
    world_.run_for(std::chrono::milliseconds(200));
    return out;
  }

  // The pulls `from` made of this node (not join attempts: those ask for a
  // reverse pull), and forgets them.
  std::vector<proto::SyncRequest> take_pulls_from(core::NodeId from) {
    std::vector<proto::SyncRequest> out;
    for (const auto& [src, req] : pulls_) {
      if (src == from && !req.reverse()) out.push_back(req);
    }
    pulls_.clear();
    return out;
  }

 private:
  MedleyWorld& world_;
  core::NodeId self_;
  sim::SimEnv env_;
  core::Metrics metrics_;
  core::Messenger messenger_;
  std::vector<std::pair<core::NodeId, proto::SyncRequest>> pulls_;
};

// A request without digests (an older node) gets the whole list; with the
// digest of an equal list, nothing and no pull back; with one bucket
// differing, only that bucket's members, and a pull back carrying the
// responder's own digest.
TEST(Medley, DigestPushPullSendsOnlyDifferingBuckets) {
  constexpr size_t kBuckets = 3;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    MedleyWorld world(sim::line(6), seed, WorldOptions{});
    for (size_t i = 0; i < 5; ++i) world.boot(i);
    world.run_for(seconds(20));
    SyncProbe probe(world, 5);
    const core::NodeId responder = world.id(1);

    const auto full = probe.pull(responder, {});
    ASSERT_TRUE(full) << "seed=" << seed;
    EXPECT_EQ(static_cast<size_t>(full->members_size()), world.medley(1)->status(true).size()) << "seed=" << seed;
    MemberTable copy(probe.self_record().member);
    for (const auto& wire : full->members()) {
      auto record = from_wire(wire, CodecLimits{});
      ASSERT_TRUE(record);
      if (record->member.id != copy.self()) copy.apply(*record, core::TimePoint{});
    }
    const MemberDigest digest(copy, kBuckets);
    probe.take_pulls_from(responder);

    const auto agreed = probe.pull(responder, digest.hashes());
    ASSERT_TRUE(agreed) << "seed=" << seed;
    EXPECT_EQ(agreed->members_size(), 0) << "seed=" << seed;
    EXPECT_FALSE(agreed->more()) << "seed=" << seed;
    EXPECT_EQ(world.metrics(1)->total("membership_sync_digest_matches_total"), 1u) << "seed=" << seed;
    EXPECT_TRUE(probe.take_pulls_from(responder).empty()) << "seed=" << seed;

    std::vector<uint32_t> one_off = digest.hashes();
    const size_t bucket = MemberDigest::bucket_of(world.id(3), kBuckets);
    one_off[bucket] ^= 1;
    const auto differing = probe.pull(responder, one_off);
    ASSERT_TRUE(differing) << "seed=" << seed;
    EXPECT_LT(differing->members_size(), full->members_size()) << "seed=" << seed;
    bool has_member_3 = false;
    for (const auto& wire : differing->members()) {
      EXPECT_EQ(MemberDigest::bucket_of(core::NodeId(wire.id()), kBuckets), bucket) << "seed=" << seed;
      has_member_3 = has_member_3 || core::NodeId(wire.id()) == world.id(3);
    }
    EXPECT_TRUE(has_member_3) << "seed=" << seed;
    const auto back = probe.take_pulls_from(responder);
    ASSERT_EQ(back.size(), 1u) << "seed=" << seed;
    EXPECT_GT(back[0].bucket_digests_size(), 0) << "seed=" << seed;
  }
}

// With piggy-backing off, push-pull alone spreads every node's new metadata
// to every node, digests or not; with digests it sends far fewer bytes.
TEST(Medley, DigestPushPullConvergesWithFewerBytes) {
  std::map<size_t, uint64_t> response_bytes;  // by members per bucket
  for (size_t per_bucket : {size_t{4}, size_t{0}}) {
    WorldOptions options;
    options.medley.max_piggyback = 0;
    options.medley.push_pull_interval = seconds(5);
    options.medley.push_pull_scale_threshold = 0;
    options.medley.push_pull_members_per_bucket = per_bucket;
    MedleyWorld world(sim::grid_for(16), 1, options);
    boot_all(world);
    world.run_for(seconds(120));
    ASSERT_TRUE(everyone_sees_everyone(world)) << "per_bucket=" << per_bucket;
    auto sync_response_bytes = [&world] {
      uint64_t total = 0;
      for (size_t i = 0; i < world.size(); ++i) {
        total += world.metrics(i)->counter("membership_sent_bytes_total", {{"type", "sync_response"}}).value();
      }
      return total;
    };
    const uint64_t before = sync_response_bytes();
    for (size_t i = 0; i < world.size(); ++i) ASSERT_TRUE(world.medley(i)->set_metadata("v", std::to_string(i)));
    world.run_for(seconds(150));
    response_bytes[per_bucket] = sync_response_bytes() - before;
    for (size_t i = 0; i < world.size(); ++i) {
      for (size_t j = 0; j < world.size(); ++j) {
        const auto m = world.medley(i)->member(world.id(j));
        ASSERT_TRUE(m) << "per_bucket=" << per_bucket;
        EXPECT_EQ(m->metadata.count("v") != 0 ? m->metadata.at("v") : "", std::to_string(j))
            << "per_bucket=" << per_bucket << " observer=" << i << " member=" << j;
      }
    }
  }
  EXPECT_LT(2 * response_bytes[4], response_bytes[0]);
}

// Passive feedback: with a steep skew (alpha 12) node 0 probes node 2, two
// hops away, about once per bag round (hundreds of periods) and hears from
// it as rarely; passive feedback probes it once it has been silent for
// passive_feedback_after.
TEST(Medley, PassiveFeedbackProbesASilentNearMember) {
  constexpr auto kAfter = seconds(10);
  for (bool passive : {true, false}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      WorldOptions options;
      options.medley.alpha = 12;
      options.medley.bag_limit_factor = 100;
      options.medley.passive_feedback_after = passive ? core::Duration(kAfter) : core::Duration::zero();
      options.medley.passive_feedback_radius_hops = 2;
      MedleyWorld world(sim::line(4), seed, options);
      boot_all(world);
      world.run_for(seconds(30));
      core::Duration longest_silence{};
      for (int s = 0; s < 300; ++s) {
        world.run_for(seconds(1));
        for (const auto& status : world.medley(0)->status(false)) {
          if (status.member.id != world.id(2)) continue;
          const core::TimePoint heard = status.last_heard.value_or(core::TimePoint{});
          longest_silence = std::max(longest_silence, world.simulator().now() - heard);
        }
      }
      const uint64_t passive_probes = world.metrics(0)->total("membership_passive_feedback_probes_total");
      if (passive) {
        EXPECT_GT(passive_probes, 0u) << "seed=" << seed;
        EXPECT_LE(longest_silence, kAfter + seconds(3)) << "seed=" << seed;
      } else {
        EXPECT_EQ(passive_probes, 0u) << "seed=" << seed;
        EXPECT_GT(longest_silence, kAfter + seconds(3)) << "seed=" << seed;
      }
    }
  }
}

// Active feedback: a leaf of a 16-leaf star is probed by the hub once every
// 16 periods on average and by the other leaves (two hops, alpha 12, one
// probe per 1 600-period round) almost never, so it asks the hub to probe it
// more, and the hub boosts it for a while. On a
// short line every node is probed every period or two and nobody asks.
TEST(Medley, RarelyProbedNodeIsBoostedByItsNeighbours) {
  sim::Topology star;
  star.kind = "star";
  star.positions.push_back({0, 0, 0});
  for (int leaf = 1; leaf <= 16; ++leaf) {
    star.positions.push_back({static_cast<double>(leaf), 1, 0});
    star.edges.emplace_back(0, leaf);
  }
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    WorldOptions options;
    options.medley.alpha = 12;
    options.medley.bag_limit_factor = 100;
    MedleyWorld world(star, seed, options);
    boot_all(world);
    // A boosted leaf is probed about four times as often, stops asking,
    // and the boost lapses after active_feedback_hold: look all along.
    std::set<size_t> boosted_leaves;
    for (int s = 0; s < 120; ++s) {
      world.run_for(seconds(1));
      for (size_t leaf = 1; leaf < world.size(); ++leaf) {
        if (world.medley(0)->selector().boosted(world.id(leaf))) boosted_leaves.insert(leaf);
      }
    }
    EXPECT_GT(world.metrics(0)->total("membership_probe_boosts_granted_total"), 0u) << "seed=" << seed;
    EXPECT_GT(boosted_leaves.size(), 0u) << "seed=" << seed;

    MedleyWorld line(sim::line(5), seed, WorldOptions{});
    boot_all(line);
    line.run_for(seconds(120));
    for (size_t i = 0; i < line.size(); ++i) {
      EXPECT_EQ(line.metrics(i)->total("membership_probe_boosts_granted_total"), 0u)
          << "seed=" << seed << " node=" << i;
    }
  }
}

}  // namespace
}  // namespace mesh::membership::testing
