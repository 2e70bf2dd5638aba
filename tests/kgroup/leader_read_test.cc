// kgroup::route_client and kgroup::admit_read at real members of one group
// (sim::KgroupWorld, virtual time): who answers a linearizable read, and who
// refuses it.
#include "kgroup/leader_read.h"

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kgroup/hash_selection.h"
#include "sim/kgroup_world.h"
#include "tests/support/quiet_logs.h"

namespace mesh::kgroup {
namespace {

using std::chrono::milliseconds;

// One group of k = 3 on a 5-node mesh, booted, with a leader and `writes`
// committed updates.
class OneGroup {
 public:
  explicit OneGroup(uint64_t seed, int writes = 3) : world_(seed, options()) {
    config_.target = GroupTarget{TargetKind::device, "lamp"};
    for (const auto& m : hash_select(world_.smart_nodes(), config_.target, 0, 3)) config_.members.push_back(m.id);
    world_.add_group(config_);
    world_.boot_all();
    world_.run_for(milliseconds(3000));
    for (int i = 0; i < writes; ++i) {
      if (GroupReplica* leader = replica(leader_index().value_or(0))) world_.submit(*leader, target());
      world_.run_for(milliseconds(200));
    }
  }

  sim::KgroupWorld& world() { return world_; }
  std::string target() const { return config_.target.to_string(); }
  std::vector<size_t> members() const {
    std::vector<size_t> out;
    for (core::NodeId id : config_.members) out.push_back(world_.index_of(id));
    return out;
  }
  GroupReplica* replica(size_t node) { return world_.replica(node, config_); }
  std::optional<size_t> leader_index() {
    for (size_t m : members()) {
      if (GroupReplica* r = replica(m); r != nullptr && r->role() == Role::leader) return m;
    }
    return std::nullopt;
  }

 private:
  static sim::KgroupWorldOptions options() {
    sim::KgroupWorldOptions o;
    o.nodes = 5;
    o.k = 3;
    return o;
  }

  sim::KgroupWorld world_;
  GroupConfig config_;
};

TEST(LeaderReadTest, TheLeaderServesWithItsTermAndCommitPoint) {
  OneGroup group(1);
  const auto leader = group.leader_index();
  ASSERT_TRUE(leader);
  GroupReplica& r = *group.replica(*leader);
  const ReadAdmission admission = admit_read(r);
  EXPECT_EQ(admission.route.verdict, ClientVerdict::serve) << admission.route.reason;
  EXPECT_EQ(admission.term, r.leader_term());
  EXPECT_EQ(admission.read_index, r.commit());
  EXPECT_GE(admission.read_index, 3u);  // the three updates, after the take-over's entries
  EXPECT_EQ(r.applied(), admission.read_index);
  EXPECT_EQ(group.world().checker().acks().size(), 3u);
}

TEST(LeaderReadTest, AFollowerRedirectsReadsAndWritesToItsLeader) {
  OneGroup group(2);
  const auto leader = group.leader_index();
  ASSERT_TRUE(leader);
  size_t followers = 0;
  for (size_t m : group.members()) {
    if (m == *leader) continue;
    GroupReplica& r = *group.replica(m);
    ASSERT_EQ(r.role(), Role::follower);
    ++followers;
    const ReadAdmission admission = admit_read(r);
    EXPECT_EQ(admission.route.verdict, ClientVerdict::redirect);
    EXPECT_EQ(admission.route.next, group.world().id(*leader));
    EXPECT_EQ(admission.term, 0u);  // nothing served
    const ClientRoute route = route_client(r);
    EXPECT_EQ(route.verdict, ClientVerdict::redirect);
    EXPECT_EQ(route.next, group.world().id(*leader));
  }
  EXPECT_EQ(followers, 2u);
}

// The leader cut off alone keeps believing it leads until its next
// heartbeat after its quorum lease ran out; reads must stop before that,
// when the lease (less its clock-drift margin) lapses, and never be served
// again while it is cut off, least of all once the others elected a leader.
// That new leader refuses reads until its take-over is committed.
TEST(LeaderReadTest, ACutOffLeaderRefusesReadsOnceItsLeaseLapses) {
  for (uint64_t seed = 3; seed < 13; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    OneGroup group(seed);
    const auto old_leader = group.leader_index();
    ASSERT_TRUE(old_leader);
    std::optional<uint64_t> new_term;
    // The new leader has just won: the entries it took over are not yet
    // committed in its term, so its commit point is not yet the group's.
    std::optional<ReadAdmission> at_election;
    bool taking_over = false;
    group.world().set_on_elected([&](size_t node, GroupReplica& replica, uint64_t term) {
      if (node == *old_leader) return;
      new_term = term;
      taking_over = replica.recovering();
      at_election = admit_read(replica);
    });
    group.world().network().partition({{group.world().id(*old_leader)}});

    bool served_after_refusal = false;
    bool served_alongside_new_leader = false;
    std::optional<std::string> refusal_while_leading;
    for (int step = 0; step < 2500; ++step) {  // 5 s of virtual time at most
      GroupReplica* r = group.replica(*old_leader);
      ASSERT_NE(r, nullptr);
      const ReadAdmission admission = admit_read(*r);
      if (admission.route.verdict == ClientVerdict::serve) {
        if (refusal_while_leading) served_after_refusal = true;
        if (new_term) served_alongside_new_leader = true;
      } else if (r->role() == Role::leader && !refusal_while_leading) {
        refusal_while_leading = admission.route.reason;
      }
      if (new_term && r->role() != Role::leader) break;
      group.world().run_for(milliseconds(2));
    }
    ASSERT_TRUE(refusal_while_leading) << "the cut-off leader never refused a read while it still led";
    EXPECT_NE(refusal_while_leading->find("lease"), std::string::npos) << *refusal_while_leading;
    EXPECT_FALSE(served_after_refusal);
    EXPECT_FALSE(served_alongside_new_leader);
    EXPECT_TRUE(new_term) << "the majority elected no new leader";
    ASSERT_TRUE(at_election);
    EXPECT_TRUE(taking_over) << "the new leader had nothing to take over";
    EXPECT_EQ(at_election->route.verdict, ClientVerdict::retry);
    EXPECT_NE(at_election->route.reason.find("taking over"), std::string::npos) << at_election->route.reason;
    // The new leader serves, in its own term.
    const auto now_leading = group.leader_index();
    ASSERT_TRUE(now_leading);
    EXPECT_NE(*now_leading, *old_leader);
  }
}

}  // namespace
}  // namespace mesh::kgroup
