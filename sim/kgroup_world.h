// A simulated mesh of k-group members, shared by the kgroup simulation tests
// and the k-group delay benchmark. Each smart node is a SimEnv, a Messenger
// on its IdealRouting transport, a StaticMemberView and a GroupHost whose
// groups host CounterLogs; the other nodes of the topology only relay. A
// node's MemoryStorage survives crashes; everything else is rebuilt on
// restart (and the host restores its groups from storage), as the agent
// process would be. Membership is told, not detected: announce_failed and
// announce_alive stand for what a failure detector eventually reports.
// A KgroupChecker sees every apply, restore, election and acknowledged
// update, and records what breaks the invariants.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/checksummed_storage.h"
#include "core/memory_storage.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "core/rng.h"
#include "kgroup/epoch_schedule.h"
#include "kgroup/group_host.h"
#include "kgroup/hash_selection.h"
#include "membership/static_member_view.h"
#include "sim/counter_log.h"
#include "sim/ideal_routing.h"
#include "sim/kgroup_checker.h"
#include "sim/network.h"
#include "sim/sim_env.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace mesh::sim {

struct KgroupWorldOptions {
  // A random geometric mesh of `nodes` nodes, unless `topology` is given.
  size_t nodes = 7;
  std::optional<Topology> topology;
  // How many nodes are smart (run a GroupHost), drawn by seed; 0: all.
  size_t smart = 0;
  size_t k = 3;
  double hop_loss = 0.0;
  core::Duration hop_delay = std::chrono::milliseconds(4);
  core::Duration hop_jitter = std::chrono::milliseconds(2);
  // Hop-by-hop ARQ on every unicast hop (IdealRouting::enable_hop_arq).
  std::optional<routing::HopArq::Options> hop_arq;
  kgroup::ReplicaOptions replica;
  // Epoch migration and re-selection, when set.
  std::optional<core::Duration> epoch_length;
  // Successor selection from a node's live smart nodes; hash selection of k
  // when empty.
  std::function<std::vector<core::NodeId>(const std::vector<kgroup::SmartNode>& live, const kgroup::GroupTarget& target,
                                          uint64_t epoch)>
      select;
};

// True if group a comes after group b of the same target (epoch, then
// generation).
bool newer(const proto::KgroupRef& a, const proto::KgroupRef& b);

// When a crashed node is reported failed and when it comes back: uniform in
// [min, min + spread).
struct CrashTiming {
  core::Duration detect_min = std::chrono::milliseconds(100);
  uint64_t detect_spread_ms = 900;
  core::Duration down_min = std::chrono::milliseconds(200);
  uint64_t down_spread_ms = 3000;
};

class KgroupWorld {
 public:
  using ElectedObserver = std::function<void(size_t node, kgroup::GroupReplica& replica, uint64_t term)>;
  using RestoredObserver = std::function<void(size_t node, const std::string& target)>;

  KgroupWorld(uint64_t seed, KgroupWorldOptions options);
  KgroupWorld(const KgroupWorld&) = delete;
  KgroupWorld& operator=(const KgroupWorld&) = delete;
  ~KgroupWorld();

  size_t size() const { return ids_.size(); }
  core::NodeId id(size_t i) const { return ids_[i]; }
  size_t index_of(core::NodeId id) const;
  bool smart(size_t i) const { return smart_[i]; }
  Simulator& simulator() { return simulator_; }
  const IdealRouting& routing() const { return routing_; }
  Network& network() { return network_; }
  KgroupChecker& checker() { return checker_; }
  bool up(size_t i) const { return slots_[i].host != nullptr; }
  kgroup::GroupHost* host(size_t i) { return slots_[i].host.get(); }
  // Node i's storage, which survives its crashes.
  const core::MemoryStorage& storage(size_t i) const { return slots_[i].storage; }
  // Node i's metrics since it last booted; null while it is down.
  const core::Metrics* metrics(size_t i) const { return slots_[i].metrics.get(); }
  const std::optional<kgroup::EpochSchedule>& schedule() const { return schedule_; }
  // Node i's stored bytes (framed by ChecksummedStorage), kept across
  // crashes: tests damage them as a failing disk would.
  core::MemoryStorage& disk(size_t i) { return slots_[i].storage; }
  // While frozen no successor can be selected, so groups stop migrating.
  void freeze_migrations() { frozen_ = true; }

  // Every smart node with its location.
  std::vector<kgroup::SmartNode> smart_nodes() const;
  // A group every member joins when it first boots.
  void add_group(const kgroup::GroupConfig& config) { groups_.push_back(config); }
  // Node i's replica of the group, if it is up and holds it.
  kgroup::GroupReplica* replica(size_t i, const std::string& target, uint64_t epoch, uint32_t generation = 0);
  kgroup::GroupReplica* replica(size_t i, const kgroup::GroupConfig& config);
  static CounterLog& counter_log(kgroup::GroupReplica& replica);
  // The newest group of `target` any live node holds.
  std::optional<proto::KgroupRef> newest(const std::string& target);
  // Among live replicas of `target`'s newest groups that serve, the one of
  // the newest group with the highest term; null if none serves.
  kgroup::GroupReplica* serving_leader(const std::string& target);

  // Observers, called besides the checker's bookkeeping.
  void set_on_elected(ElectedObserver observer) { on_elected_ = std::move(observer); }
  void set_on_restored(RestoredObserver observer) { on_restored_ = std::move(observer); }

  // Starts every smart node at once, each knowing all the others.
  void boot_all();
  void boot(size_t i);
  void crash(size_t i);
  // Crashes node i; the others learn it after a detection delay, and it
  // restarts (and is announced alive) after a downtime, unless it is already
  // back by then. Draws detection, then downtime.
  void crash_for_a_while(size_t i, core::Rng& rng, const CrashTiming& timing = {});
  // Splits the mesh in two random halves for 300 ms to 2.8 s; membership
  // does not notice.
  void partition_for_a_while(core::Rng& rng);
  // Of `members` (indices) of the group `config`: the one that believes it
  // leads with the highest term.
  std::optional<size_t> highest_term_leader(const std::vector<size_t>& members, const kgroup::GroupConfig& config);
  // From now until `until`, every 0.3 to 1.8 s: with `partitions`, one time
  // in three the mesh splits for a while; otherwise the leader, a random
  // member, or f members at once crash for a while, never more than f of
  // `members` down at a time.
  void crash_members_until(core::TimePoint until, core::Rng& rng, std::vector<size_t> members,
                           const kgroup::GroupConfig& config, size_t f, bool partitions);
  // What a failure detector would eventually tell every live node.
  void announce_failed(size_t i);
  void announce_alive(size_t i);
  // Membership settles: the mesh whole, every smart node up and known alive.
  void settle();
  void run_for(core::Duration d) { simulator_.run_for(d); }

  // Submits the next counter value at `replica` for `target`, recording the
  // submission and, once committed, the acknowledged position in the
  // checker. `done` (if any) runs with the result. Returns the value.
  uint64_t submit(kgroup::GroupReplica& replica, const std::string& target,
                  std::function<void(const kgroup::SubmitResult&)> done = {});
  // A client that every 5-45 ms (drawn from `rng`) checks the reads of every
  // replica that claims it may serve them, then submits to `pick()` if any.
  void start_client(core::Rng& rng, std::function<kgroup::GroupReplica*()> pick);
  void stop_client() { client_on_ = false; }
  // Reads at every unsealed replica that says it may serve them hold every
  // acknowledged update.
  void check_reads();

  // After settle(): the group (target, epoch, generation) has one serving
  // leader, its best-scored member, followed by every member; it commits a
  // new update; every acknowledged update of `target` is in the leader's
  // state at its position; after `converge`, every member holds the
  // leader's state. Returns what failed, the checker's failures included.
  std::vector<std::string> check_settled(const std::string& target, uint64_t epoch, uint32_t generation,
                                         core::Duration converge);

 private:
  struct Slot {
    core::MemoryStorage storage;                        // survives crashes
    std::unique_ptr<core::ChecksummedStorage> checked;  // `storage` as the node sees it, opened at boot
    std::unique_ptr<SimEnv> env;
    std::unique_ptr<core::Metrics> metrics;
    std::unique_ptr<core::Messenger> messenger;
    std::unique_ptr<membership::StaticMemberView> view;
    std::unique_ptr<kgroup::GroupHost> host;
    uint32_t incarnation = 0;
  };

  membership::Member member_record(size_t j) const;
  void client_tick();

  uint64_t seed_;
  KgroupWorldOptions options_;
  Topology topology_;
  Simulator simulator_;
  Network network_;
  IdealRouting routing_;
  std::vector<core::NodeId> ids_;
  std::vector<bool> smart_;
  std::vector<Slot> slots_;
  std::vector<kgroup::GroupConfig> groups_;
  std::optional<kgroup::EpochSchedule> schedule_;
  KgroupChecker checker_;
  ElectedObserver on_elected_;
  RestoredObserver on_restored_;
  bool booting_all_ = false;
  bool frozen_ = false;
  uint64_t next_value_ = 1;
  bool client_on_ = false;
  core::Rng* client_rng_ = nullptr;
  std::function<kgroup::GroupReplica*()> client_pick_;
};

}  // namespace mesh::sim
