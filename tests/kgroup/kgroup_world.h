// A simulated mesh of k-group members for the kgroup simulation tests: each
// node is a SimEnv, a Messenger on its IdealRouting transport, a
// StaticMemberView and a GroupHost whose groups host CounterLogs. Its
// MemoryStorage survives crashes; everything else is rebuilt on restart (and
// the host restores its groups from storage), as the agent process would be.
// A Checker sees every apply, restore, election and acknowledged update, and
// records what breaks the invariants.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/memory_storage.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "kgroup/epoch_schedule.h"
#include "kgroup/group_host.h"
#include "kgroup/hash_selection.h"
#include "kgroup/state_machine.h"
#include "membership/static_member_view.h"
#include "sim/ideal_routing.h"
#include "sim/network.h"
#include "sim/sim_env.h"
#include "sim/simulator.h"
#include "sim/topology.h"

namespace mesh::kgroup::testing {

inline std::string group_key(const proto::KgroupRef& ref) {
  return ref.target() + "#" + std::to_string(ref.epoch()) + "." + std::to_string(ref.generation());
}

// Invariants over the whole run of one seed. A target's history is the list
// of counter values its state holds, across epochs: position p of it must
// hold the same value wherever and whenever it is applied or inherited.
class Checker {
 public:
  void applied(const std::string& target, size_t position, uint64_t value) {
    auto [it, inserted] = history_[target].emplace(position, value);
    if (!inserted && it->second != value) {
      fail(target + " position " + std::to_string(position) + " holds " + std::to_string(it->second) + " and " +
           std::to_string(value));
    }
  }
  // At most one leader per (group, term) reaches a quorum of promises.
  void elected(const std::string& group, uint64_t term, core::NodeId leader) {
    auto [it, inserted] = leaders_[group].emplace(term, leader);
    if (!inserted && it->second != leader) {
      fail("group " + group + " term " + std::to_string(term) + " won by " + it->second.to_string() + " and " +
           leader.to_string());
    }
  }
  // A client submits `value`; remember how far acknowledgements had got:
  // its own acknowledgement must land later in the history (an update
  // acknowledged before another was submitted is never ordered after it).
  void submitted(uint64_t value) { floor_at_submit_[value] = max_acked_; }
  void acked(const std::string& target, size_t position, uint64_t value) {
    acked_.push_back({target, position, value});
    const auto floor = floor_at_submit_.find(value);
    if (floor != floor_at_submit_.end() && floor->second && position <= *floor->second) {
      fail("value " + std::to_string(value) + " acknowledged at position " + std::to_string(position) +
           " though position " + std::to_string(*floor->second) + " was acknowledged before it was submitted");
    }
    if (!max_acked_ || position > *max_acked_) {
      max_acked_ = position;
      max_acked_value_ = value;
    }
  }
  // A leader that says it may serve reads (GroupReplica::can_read) holds
  // every update acknowledged so far: leases keep reads linearizable.
  void read(const std::string& who, const std::vector<uint64_t>& values) {
    if (!max_acked_) return;
    if (values.size() <= *max_acked_ || values[*max_acked_] != max_acked_value_) {
      fail(who + " would serve a stale read: " + std::to_string(values.size()) + " values, position " +
           std::to_string(*max_acked_) + " was acknowledged");
    }
  }
  void fail(const std::string& what) {
    if (failures_.size() < 10) failures_.push_back(what);
  }

  struct Ack {
    std::string target;
    size_t position;
    uint64_t value;
  };
  const std::vector<Ack>& acks() const { return acked_; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  std::map<std::string, std::map<size_t, uint64_t>> history_;
  std::map<std::string, std::map<uint64_t, core::NodeId>> leaders_;
  std::map<uint64_t, std::optional<size_t>> floor_at_submit_;
  std::optional<size_t> max_acked_;
  uint64_t max_acked_value_ = 0;
  std::vector<Ack> acked_;
  std::vector<std::string> failures_;
};

// The test state machine: the list of counter values applied, in order.
class CounterLog final : public StateMachine {
 public:
  CounterLog(Checker& checker, std::string target) : checker_(checker), target_(std::move(target)) {}

  void apply(uint64_t seq, std::string_view update) override {
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(update.data(), update.data() + update.size(), value);
    if (ec != std::errc() || end != update.data() + update.size()) {
      checker_.fail(target_ + " applied a non-counter update at seq " + std::to_string(seq));
      return;
    }
    if (last_seq_ && seq != *last_seq_ + 1) {
      checker_.fail(target_ + " applied seq " + std::to_string(seq) + " after " + std::to_string(*last_seq_));
    }
    last_seq_ = seq;
    checker_.applied(target_, values_.size(), value);
    position_[value] = values_.size();
    values_.push_back(value);
  }
  std::string snapshot() const override {
    std::string out;
    for (uint64_t v : values_) out += std::to_string(v) + "\n";
    return out;
  }
  bool restore(std::string_view snapshot) override {
    std::vector<uint64_t> values;
    size_t at = 0;
    while (at < snapshot.size()) {
      const size_t end = snapshot.find('\n', at);
      if (end == std::string_view::npos) return false;
      uint64_t v = 0;
      const auto [ptr, ec] = std::from_chars(snapshot.data() + at, snapshot.data() + end, v);
      if (ec != std::errc() || ptr != snapshot.data() + end) return false;
      values.push_back(v);
      at = end + 1;
    }
    values_ = std::move(values);
    position_.clear();
    for (size_t p = 0; p < values_.size(); ++p) {
      checker_.applied(target_, p, values_[p]);
      position_[values_[p]] = p;
    }
    // Sequence numbers restart in the inheriting group.
    last_seq_.reset();
    return true;
  }

  const std::vector<uint64_t>& values() const { return values_; }
  std::optional<size_t> position_of(uint64_t value) const {
    const auto it = position_.find(value);
    if (it == position_.end()) return std::nullopt;
    return it->second;
  }

 private:
  Checker& checker_;
  std::string target_;
  std::vector<uint64_t> values_;
  std::map<uint64_t, size_t> position_;
  std::optional<uint64_t> last_seq_;
};

struct WorldOptions {
  size_t nodes = 7;
  size_t k = 3;
  double hop_loss = 0.0;
  core::Duration hop_delay = std::chrono::milliseconds(4);
  core::Duration hop_jitter = std::chrono::milliseconds(2);
  ReplicaOptions replica;
  // Epoch migration and re-selection, when set.
  std::optional<core::Duration> epoch_length;
};

class KgroupWorld {
 public:
  struct Slot {
    core::MemoryStorage storage;  // survives crashes
    std::unique_ptr<sim::SimEnv> env;
    std::unique_ptr<core::Metrics> metrics;
    std::unique_ptr<core::Messenger> messenger;
    std::unique_ptr<membership::StaticMemberView> view;
    std::unique_ptr<GroupHost> host;
    uint32_t incarnation = 0;
  };

  KgroupWorld(uint64_t seed, WorldOptions options)
      : seed_(seed),
        options_(options),
        topology_(sim::random_geometric(static_cast<int>(options.nodes), sim::mix_seed(seed, 0x70b0))),
        simulator_(seed),
        network_(simulator_, sim::mix_seed(seed, 0xbeef)),
        routing_(simulator_, network_, sim::mix_seed(seed, 0xfeed)),
        slots_(options.nodes) {
    sim::LinkParams params;
    params.delay = options_.hop_delay;
    params.jitter = options_.hop_jitter;
    params.loss = options_.hop_loss;
    for (size_t i = 0; i < topology_.size(); ++i) ids_.push_back(network_.add_node());
    for (const auto& [a, b] : topology_.edges) {
      network_.connect(ids_[static_cast<size_t>(a)], ids_[static_cast<size_t>(b)], params);
    }
    if (options_.epoch_length) schedule_.emplace(*options_.epoch_length, core::TimePoint{});
  }

  size_t size() const { return ids_.size(); }
  core::NodeId id(size_t i) const { return ids_[i]; }
  size_t index_of(core::NodeId id) const {
    return static_cast<size_t>(std::find(ids_.begin(), ids_.end(), id) - ids_.begin());
  }
  sim::Simulator& simulator() { return simulator_; }
  sim::Network& network() { return network_; }
  Checker& checker() { return checker_; }
  bool up(size_t i) const { return slots_[i].host != nullptr; }
  Slot& slot(size_t i) { return slots_[i]; }
  GroupHost* host(size_t i) { return slots_[i].host.get(); }
  const std::optional<EpochSchedule>& schedule() const { return schedule_; }
  // While frozen no successor can be selected, so groups stop migrating.
  void freeze_migrations() { frozen_ = true; }

  std::vector<SmartNode> smart_nodes() const {
    std::vector<SmartNode> out;
    for (size_t i = 0; i < size(); ++i) out.push_back({ids_[i], topology_.positions[i]});
    return out;
  }

  // A group every member joins when it first boots.
  void add_group(const GroupConfig& config) { groups_.push_back(config); }

  GroupReplica* replica(size_t i, const GroupConfig& config) {
    if (!up(i)) return nullptr;
    return slots_[i].host->find(config.target.to_string(), config.epoch, config.generation);
  }
  static CounterLog& counter_log(GroupReplica& replica) { return dynamic_cast<CounterLog&>(replica.state_machine()); }

  // Starts every node at once, each knowing all the others.
  void boot_all() {
    booting_all_ = true;
    for (size_t i = 0; i < size(); ++i) boot(i);
    booting_all_ = false;
  }

  void boot(size_t i) {
    Slot& s = slots_[i];
    network_.set_node_up(ids_[i], true);
    const bool first = s.incarnation == 0;
    s.env = std::make_unique<sim::SimEnv>(simulator_, seed_, static_cast<uint32_t>(i), s.incarnation++);
    s.metrics = std::make_unique<core::Metrics>();
    s.messenger =
        std::make_unique<core::Messenger>(*s.env, routing_.transport(ids_[i]), *s.metrics, core::Messenger::Options{});
    s.view = std::make_unique<membership::StaticMemberView>(ids_[i]);
    std::vector<membership::Member> members;
    for (size_t j = 0; j < size(); ++j) {
      if (j != i && !up(j) && !booting_all_) continue;
      members.push_back(member_record(j));
    }
    s.view->set_members(members);
    GroupHost::Selector select;
    if (schedule_) {
      membership::StaticMemberView* view = s.view.get();
      select = [this, view](const GroupTarget& target, uint64_t epoch) {
        std::vector<core::NodeId> out;
        if (frozen_) return out;
        std::vector<SmartNode> live;
        for (const auto& m : view->live_members()) live.push_back({m.id, m.location});
        for (const auto& m : hash_select(live, target, epoch, options_.k)) out.push_back(m.id);
        return out;
      };
    }
    s.host = std::make_unique<GroupHost>(
        *s.env, *s.messenger, s.storage, *s.view, *s.metrics, options_.replica,
        [this](const GroupTarget& target) { return std::make_unique<CounterLog>(checker_, target.to_string()); },
        std::move(select), schedule_ ? &*schedule_ : nullptr);
    const core::NodeId self = ids_[i];
    s.host->set_on_join([this, self](GroupReplica& replica) {
      replica.set_on_elected(
          [this, key = group_key(replica.ref()), self](uint64_t term) { checker_.elected(key, term, self); });
    });
    s.host->restore();
    if (!first) return;
    for (const GroupConfig& config : groups_) {
      if (std::find(config.members.begin(), config.members.end(), self) == config.members.end()) continue;
      s.host->join(config);
    }
  }

  void crash(size_t i) {
    Slot& s = slots_[i];
    network_.set_node_up(ids_[i], false);
    s.host.reset();
    s.view.reset();
    s.messenger.reset();
    s.env.reset();
    s.metrics.reset();
  }

  // What a failure detector would eventually tell every live node.
  void announce_failed(size_t i) {
    for (size_t j = 0; j < size(); ++j) {
      if (j != i && up(j)) slots_[j].view->mark_failed(ids_[i]);
    }
  }
  void announce_alive(size_t i) {
    for (size_t j = 0; j < size(); ++j) {
      if (j != i && up(j)) slots_[j].view->upsert(member_record(i));
    }
  }

  void run_for(core::Duration d) { simulator_.run_for(d); }

 private:
  membership::Member member_record(size_t j) const {
    membership::Member m;
    m.id = ids_[j];
    m.name = "n" + std::to_string(j);
    m.incarnation = slots_[j].incarnation;
    m.location = topology_.positions[j];
    return m;
  }

  uint64_t seed_;
  WorldOptions options_;
  sim::Topology topology_;
  sim::Simulator simulator_;
  sim::Network network_;
  sim::IdealRouting routing_;
  std::vector<core::NodeId> ids_;
  std::vector<Slot> slots_;
  std::vector<GroupConfig> groups_;
  std::optional<EpochSchedule> schedule_;
  Checker checker_;
  bool booting_all_ = false;
  bool frozen_ = false;
};

}  // namespace mesh::kgroup::testing
