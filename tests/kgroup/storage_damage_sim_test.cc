// Simulation of a k = 3 group whose member loses part of its stored state to
// a failing disk (ChecksummedStorage reports the damage): a write is
// acknowledged by the leader L and follower A while B is down; A and L crash,
// A's copy of that write is damaged (a flipped bit, a truncated or emptied
// value; in one seed of four its promise record too), A and B restart while L
// stays down, then L returns. A member voting with a damaged copy lets A and
// B elect a leader that lacks the acknowledged write, and the client's next
// write overwrites it. With damage handled, A rebuilds as a non-voter: the
// group waits for L, A re-learns the log from it, and the checker and
// KgroupWorld::check_settled find every acknowledged write in place.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "kgroup/replicated_log.h"
#include "seed_sweep.h"
#include "tests/support/quiet_logs.h"

namespace mesh::kgroup::testing {
namespace {

using sim::KgroupWorld;
using std::chrono::milliseconds;

// Damages the stored frame the way a failing disk would; returns how.
std::string damage(std::string& stored, core::Rng& rng) {
  switch (rng.below(3)) {
    case 0: {
      const size_t byte = rng.below(stored.size());
      const int bit = static_cast<int>(rng.below(8));
      stored[byte] = static_cast<char>(stored[byte] ^ (1 << bit));
      return "bit " + std::to_string(bit) + " of byte " + std::to_string(byte) + " flipped";
    }
    case 1: {
      const size_t size = rng.below(stored.size());
      stored.resize(size);
      return "truncated to " + std::to_string(size) + " bytes";
    }
    default:
      stored.clear();
      return "emptied";
  }
}

SeedOutcome run_seed(uint64_t seed, const SimScenario& scenario) {
  sim::KgroupWorldOptions options = world_options(scenario);
  // No cut vertex: crashing one member never cuts the other two apart.
  options.topology = sim::grid(3, 3);
  KgroupWorld world(seed, options);
  core::Rng rng(sim::mix_seed(seed, 0xd15c));

  GroupConfig config;
  config.target = GroupTarget{TargetKind::device, "lamp-" + std::to_string(seed % 7)};
  for (const auto& m : hash_select(world.smart_nodes(), config.target, 0, scenario.k)) config.members.push_back(m.id);
  world.add_group(config);
  const std::string target = config.target.to_string();
  std::vector<size_t> members;
  for (core::NodeId id : config.members) members.push_back(world.index_of(id));
  // L leads once elections settle (the best-scored member); A and B are the
  // other two in a seed-drawn order.
  const size_t l = members[0];
  const bool swap = rng.below(2) == 1;
  const size_t a = members[swap ? 2 : 1];
  const size_t b = members[swap ? 1 : 2];

  SeedOutcome outcome;
  auto fail = [&](const std::string& what) { outcome.failures.push_back(what); };

  world.boot_all();
  world.run_for(milliseconds(3000));
  auto leader_among_up = [&]() -> GroupReplica* {
    GroupReplica* best = nullptr;
    for (size_t m : members) {
      GroupReplica* r = world.replica(m, config);
      if (r != nullptr && r->role() == Role::leader && (best == nullptr || r->leader_term() > best->leader_term())) {
        best = r;
      }
    }
    return best;
  };
  world.start_client(rng, leader_among_up);
  world.run_for(milliseconds(500));
  GroupReplica* first = world.replica(l, config);
  if (first == nullptr || first->role() != Role::leader) {
    fail("the best-scored member does not lead after boot");
    return outcome;
  }

  world.crash(b);
  world.announce_failed(b);
  const uint64_t b_holds = first->last_seq();
  world.run_for(milliseconds(1500));
  GroupReplica* replica_a = world.replica(a, config);
  if (replica_a == nullptr || replica_a->last_seq() <= b_holds) {
    fail("no write reached A while B was down (A " +
         (replica_a == nullptr
              ? std::string("absent")
              : std::string(to_string(replica_a->role())) + " holds " + std::to_string(replica_a->last_seq())) +
         ", L " + std::string(to_string(first->role())) + " holds " + std::to_string(first->last_seq()) + " commit " +
         std::to_string(first->commit()) + ", B held " + std::to_string(b_holds) + ")");
    return outcome;
  }
  const uint64_t a_holds = replica_a->last_seq();
  world.crash(a);
  world.crash(l);
  world.announce_failed(a);
  world.announce_failed(l);

  // A write only L and A hold, damaged at A.
  const uint64_t seq = b_holds + 1 + rng.below(a_holds - b_holds);
  const std::string prefix = ReplicatedLog::key_prefix(target, 0, 0);
  char digits[21];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(seq));
  std::string* entry = world.disk(a).raw(prefix + "log/" + digits);
  if (entry == nullptr) {
    fail("A holds no stored entry " + std::to_string(seq));
    return outcome;
  }
  const std::string how = damage(*entry, rng);
  const bool promise_lost = seed % 4 == 3;
  if (promise_lost) damage(*world.disk(a).raw(prefix + "meta"), rng);

  world.boot(a);
  world.announce_alive(a);
  world.boot(b);
  world.announce_alive(b);
  world.run_for(milliseconds(3000));
  world.boot(l);
  world.announce_alive(l);
  world.settle();
  world.run_for(milliseconds(6000));
  world.stop_client();
  world.run_for(milliseconds(1000));

  for (const std::string& f : world.check_settled(target, 0, 0, milliseconds(1000))) {
    fail(f + " (entry " + std::to_string(seq) + " of A " + how + (promise_lost ? ", promise lost" : "") + ")");
  }
  replica_a = world.replica(a, config);
  if (replica_a != nullptr && replica_a->rebuilding() != promise_lost) {
    fail(promise_lost ? "A votes again although it lost its promise record" : "A never finished its rebuild");
  }
  outcome.acked = world.checker().acks().size();
  return outcome;
}

TEST(StorageDamageSim, ADamagedMemberNeverVotesWithItsCopy) {
  const SimScenario scenario{9, 3, 0.0};
  sweep_seeds(scenario, 0, 60, [&](uint64_t seed) { return run_seed(seed, scenario); });
}

TEST(StorageDamageSim, ADamagedMemberNeverVotesWithItsCopyLossy) {
  const SimScenario scenario{9, 3, 0.02};
  sweep_seeds(scenario, 1000, 40, [&](uint64_t seed) { return run_seed(seed, scenario); });
}

}  // namespace
}  // namespace mesh::kgroup::testing
