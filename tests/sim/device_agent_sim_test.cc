// Devices inside whole agents on virtual time (MeshSim: OLSR, Medley,
// k-groups and the device layer per node, as meshagent runs them), with
// emulated devices that every node's driver talks to. Each seed builds a
// mesh of 5-9 agents (k = 3, LSH selection over the devices' real
// locations, small clusters so there are several device groups), lets it
// settle, and then:
//  - two clients on random agents send commands to random devices in a loop
//    (ids known to the test);
//  - the leader of a random device group is killed (kill -9) mid-stream and
//    restarted later, and in some seeds a second node is killed for good;
//  - one device stops answering for a while and comes back;
//  - a device is added at run time from a random agent while another node
//    is down, and must reach it after its restart;
//  - every agent watches every device (DeviceWatcher).
//
// The oracle reads the devices' own actuation logs, never a leader's
// belief: every command acknowledged ok was actuated exactly once, no
// command was actuated twice; the down device was seen down by its group and
// up again afterwards; after quiescence every live agent's view of every
// device equals the device's true state; every live agent holds the same
// catalog, with the added device. A failing seed is printed;
// DEVICE_AGENT_SEED=<seed> replays it with routine logs.
//
// The handoff sweep replaces the first crash: run-time catalog changes move
// devices next to a device of another cluster (re-clustering them, and
// often their neighbours) while commands stream, and right after each move
// the leader of the moved device's old or new group is killed and restarted
// a few seconds later. Besides the oracle above: no node's view of a device
// ever goes back to a lower version, whichever group it hears from.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/log.h"
#include "core/rng.h"
#include "routine/device_codec.h"
#include "routine/device_group_state.h"
#include "routine/emulated_device.h"
#include "sim/mesh_sim.h"
#include "tests/support/quiet_logs.h"
#include "tests/support/seed_range.h"

namespace mesh::sim {
namespace {

using routine::Attributes;
using routine::DeviceKind;
using routine::DeviceSpec;
using routine::EmulatedDevice;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct Plan {
  double loss = 0.0;
  bool second_crash = false;  // a second node dies for good
  int moves = 0;              // catalog changes that move a device (no first crash then)
};

struct Outcome {
  std::vector<std::string> violations;
  uint64_t ok = 0;
  uint64_t failed = 0;
  uint64_t actuations = 0;
  uint64_t regrouped = 0;  // moves that changed the moved device's group
  uint64_t handoffs = 0;
  bool partitioned = false;
  // A move's crash cut the down device's group off: its bound is waived.
  bool cut_off = false;
  bool forked = false;  // a target got two groups: the version check is waived
  // The catalog change waited for members failed lately that could hold the
  // catalog's group, and was sent again after the victim's restart.
  uint64_t catalog_retried = 0;
};

// The devices of one run: they exist once, whatever node talks to them.
class Devices {
 public:
  Devices(core::Rng& rng, size_t count, double extent) {
    for (size_t i = 0; i < count; ++i) {
      DeviceSpec spec;
      spec.id = fmt::format("d{:02}", i);
      spec.kind = i % 2 == 0 ? DeviceKind::plug : DeviceKind::dimmer;
      spec.location = {static_cast<double>(rng.below(static_cast<uint64_t>(extent))),
                       static_cast<double>(rng.below(static_cast<uint64_t>(extent))), 0};
      spec.driver = "emulated://" + spec.id;
      add(spec);
    }
  }

  EmulatedDevice& add(const DeviceSpec& spec) {
    Attributes initial{{"power", false}};
    if (spec.kind == DeviceKind::dimmer) initial["brightness"] = 50.0;
    devices_.push_back(std::make_unique<EmulatedDevice>(spec, initial));
    for (auto& factory : factories_) factory->add(*devices_.back());
    return *devices_.back();
  }

  routine::DriverFactory* factory_for(core::Env& env) {
    factories_.push_back(std::make_unique<routine::EmulatedDriverFactory>(env));
    for (auto& device : devices_) factories_.back()->add(*device);
    return factories_.back().get();
  }

  std::vector<DeviceSpec> specs(size_t first_n) const {
    std::vector<DeviceSpec> out;
    for (size_t i = 0; i < first_n && i < devices_.size(); ++i) out.push_back(devices_[i]->spec());
    return out;
  }
  EmulatedDevice& at(size_t i) { return *devices_[i]; }
  EmulatedDevice* find(const std::string& id) {
    for (auto& d : devices_) {
      if (d->spec().id == id) return d.get();
    }
    return nullptr;
  }
  size_t size() const { return devices_.size(); }

 private:
  std::vector<std::unique_ptr<EmulatedDevice>> devices_;
  std::vector<std::unique_ptr<routine::EmulatedDriverFactory>> factories_;
};

class Clients {
 public:
  Clients(MeshSim& sim, Devices& devices, core::Rng& rng, size_t device_count, core::TimePoint stop)
      : sim_(sim), devices_(devices), rng_(rng), device_count_(device_count), stop_(stop) {}

  void loop(size_t node, int client) {
    if (sim_.simulator().now() >= stop_) return;
    agent::Node* agent = sim_.node(node);
    if (agent == nullptr) return;
    const EmulatedDevice& device = devices_.at(rng_.below(device_count_));
    Attributes values{{"power", rng_.below(2) == 1}};
    if (device.spec().kind == DeviceKind::dimmer && rng_.below(2) == 1) {
      values["brightness"] = static_cast<double>(rng_.below(101));
    }
    const std::string id = fmt::format("c{}-{}", client, next_[client]++);
    agent->devices().command(device.spec().id, values, id, seconds(8), [this, node, client, agent, id](
                                                                            const auto& result) {
      if (result && result->outcome().status() == proto::COMMAND_OK) {
        ok_.push_back(id);
      } else {
        ++failed_;
      }
      if (sim_.node(node) != agent) return;
      sim_.simulator().after(milliseconds(100), [this, node, client] { loop(node, client); });
    });
  }

  const std::vector<std::string>& ok() const { return ok_; }
  uint64_t failed() const { return failed_; }

 private:
  MeshSim& sim_;
  Devices& devices_;
  core::Rng& rng_;
  size_t device_count_;
  core::TimePoint stop_;
  std::map<int, int> next_;
  std::vector<std::string> ok_;
  uint64_t failed_ = 0;
};

// The node leading `target` now, if any.
std::optional<size_t> leader_of(MeshSim& sim, const std::string& target) {
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    kgroup::GroupReplica* replica = node->kgroups().host().latest(target);
    if (replica != nullptr && replica->serving()) return i;
  }
  return std::nullopt;
}

// The device's record at its group's current leader.
const routine::DeviceGroupState::Device* leader_record(MeshSim& sim, const std::string& device) {
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    const auto target = node->kgroups().selector().device_group(device).to_string();
    kgroup::GroupReplica* replica = node->kgroups().host().latest(target);
    if (replica == nullptr || !replica->serving()) continue;
    const auto* state = dynamic_cast<const routine::DeviceGroupState*>(&replica->state_machine());
    return state == nullptr ? nullptr : state->device(device);
  }
  return nullptr;
}

// Whether the device's group (as the first live node computes it) keeps a quorum.
bool device_quorum_alive(MeshSim& sim, const std::string& device) {
  for (size_t i = 0; i < sim.size(); ++i) {
    if (agent::Node* node = sim.node(i)) {
      return sim.quorum_alive(node->kgroups().selector().device_group(device).to_string());
    }
  }
  return true;
}

// Moves devices between clusters with run-time catalog changes, and kills
// the leader of the old or the new group right after each move.
class Mover {
 public:
  Mover(MeshSim& sim, Devices& devices, core::Rng& rng, size_t device_count)
      : sim_(sim), devices_(devices), rng_(rng), device_count_(device_count) {}

  void move() {
    const size_t changer = live_node();
    agent::Node* node = sim_.node(changer);
    const auto& selector = node->kgroups().selector();
    const auto& clusters = selector.clusters().clusters();
    if (clusters.size() < 2) return;
    const std::string id = devices_.at(rng_.below(device_count_)).spec().id;
    const routine::DeviceSpec* current = node->catalog().find(id);
    if (current == nullptr) return;
    const std::string old_group = selector.device_group(id).to_string();
    const kgroup::DeviceCluster* into = &clusters[rng_.below(clusters.size())];
    for (int attempt = 0; attempt < 8 && "cluster:" + into->id == old_group; ++attempt) {
      into = &clusters[rng_.below(clusters.size())];
    }
    const std::string new_group = "cluster:" + into->id;
    if (new_group == old_group) return;
    const routine::DeviceSpec* neighbour = node->catalog().find(into->devices[rng_.below(into->devices.size())]);
    if (neighbour == nullptr) return;
    DeviceSpec moved = *current;
    moved.location = {neighbour->location[0] + 1, neighbour->location[1] + 1, neighbour->location[2]};
    proto::CatalogChange change;
    *change.mutable_put() = routine::to_proto(moved);
    change.set_replace(true);
    node->devices().change_catalog(change, seconds(20), [this, id, old_group, changer](const auto& result) {
      if (!result || result->refused()) {
        problems_.push_back(fmt::format("moving {} from n{} failed: {}", id, changer,
                                        !result ? result.error() : "refused: " + result->detail()));
      } else {
        catalog_group_exists_ = true;
      }
    });
    moves_.push_back({id, old_group});
    // The first run-time change creates the catalog's group; a crash during
    // that genesis is a different test (kgroup_agent_sim_test).
    if (!catalog_group_exists_) return;
    const std::string doomed = rng_.below(2) == 0 ? old_group : new_group;
    sim_.simulator().after(milliseconds(rng_.between(0, 3000)), [this, doomed] { crash_leader(doomed); });
  }

  // After quiescence: how many moves changed their device's group.
  uint64_t regrouped() {
    uint64_t count = 0;
    agent::Node* node = sim_.node(live_node());
    for (const auto& [id, group] : moves_) {
      count += node->kgroups().selector().device_group(id).to_string() != group ? 1 : 0;
    }
    return count;
  }
  const std::vector<std::string>& problems() const { return problems_; }
  std::optional<size_t> down() const { return down_; }
  // The groups one of its crashes cut off from a reachable majority while
  // the crashed node was down (it was a cut vertex).
  const std::set<std::string>& cut_groups() const { return cut_groups_; }
  // A node whose own run-time change is pending is not crashed: a crash
  // drops the change's answer with the node (the admin would see the
  // connection close), which is not what the change's check is about.
  void spare(std::optional<size_t> node) { spared_ = node; }

  // Every live node's view of every device: its version never goes back.
  // That holds of one group per target; two creators that missed each
  // other can still found two groups of one target (KgroupService's known
  // genesis limit), each with its own versions, so regressions are held
  // back and reported only for runs without such a fork.
  void check_versions() {
    std::map<std::tuple<std::string, uint64_t, uint32_t>, std::vector<core::NodeId>> instances;
    for (size_t i = 0; i < sim_.size(); ++i) {
      agent::Node* node = sim_.node(i);
      if (node == nullptr) continue;
      for (kgroup::GroupReplica* replica : node->kgroups().host().replicas()) {
        const auto& config = replica->config();
        const auto [it, fresh] =
            instances.try_emplace({config.target.to_string(), config.epoch, config.generation}, config.members);
        if (!fresh && it->second != config.members) forked_.insert(config.target.to_string());
      }
      for (const auto& [id, seen] : node->device_watcher().view()) {
        uint64_t& highest = highest_[{i, id}];
        if (seen.record.version < highest && reported_.insert(id).second) {
          regressions_.push_back(fmt::format("n{} saw {} go back from version {} to {} (from {})", i, id, highest,
                                             seen.record.version, seen.group));
        }
        highest = std::max(highest, seen.record.version);
      }
    }
    sim_.simulator().after(milliseconds(250), [this] { check_versions(); });
  }
  const std::set<std::string>& forked() const { return forked_; }
  const std::vector<std::string>& regressions() const { return regressions_; }

 private:
  size_t live_node() {
    size_t pick = rng_.below(sim_.size());
    while (sim_.node(pick) == nullptr) pick = (pick + 1) % sim_.size();
    return pick;
  }

  void crash_leader(const std::string& group) {
    // One at a time: every group keeps a majority of live members. Whether
    // they can reach each other is another matter: a leader that is a cut
    // vertex leaves the nodes behind it unreachable, and a group with a
    // member there may have no reachable majority until the restart.
    if (down_) return;
    const auto leader = leader_of(sim_, group);
    if (!leader || leader == spared_) return;
    down_ = *leader;
    note_cut_groups(*leader);
    sim_.crash(*leader);
    sim_.simulator().after(seconds(8), [this] {
      const size_t node = *down_;
      sim_.restart(node);
      sim_.node(node)->device_watcher().watch({}, {});
      std::erase_if(highest_, [node](const auto& entry) { return entry.first.first == node; });  // a new life
      down_.reset();
    });
  }

  // The groups that crashing `dying` leaves without a majority of members
  // that can reach each other (a cut vertex's crash), while it is down.
  void note_cut_groups(size_t dying) {
    const size_t n = sim_.size();
    std::vector<bool> live(n);
    for (size_t i = 0; i < n; ++i) live[i] = i != dying && sim_.node(i) != nullptr;
    std::vector<int> component(n, -1);
    for (size_t start = 0; start < n; ++start) {
      if (!live[start] || component[start] >= 0) continue;
      std::vector<int> stack{static_cast<int>(start)};
      component[start] = static_cast<int>(start);
      while (!stack.empty()) {
        const int at = stack.back();
        stack.pop_back();
        for (const int next : sim_.topology().neighbours(at)) {
          if (!live[static_cast<size_t>(next)] || component[static_cast<size_t>(next)] >= 0) continue;
          component[static_cast<size_t>(next)] = static_cast<int>(start);
          stack.push_back(next);
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!live[i]) continue;
      for (kgroup::GroupReplica* replica : sim_.node(i)->kgroups().host().replicas()) {
        const auto& members = replica->config().members;
        std::map<int, size_t> reachable;  // component -> live members in it
        for (const core::NodeId member : members) {
          for (size_t j = 0; j < n; ++j) {
            if (sim_.id_of(j) == member && live[j]) ++reachable[component[j]];
          }
        }
        size_t best = 0;
        for (const auto& [c, count] : reachable) best = std::max(best, count);
        if (best < members.size() / 2 + 1) cut_groups_.insert(replica->config().target.to_string());
      }
    }
  }

  MeshSim& sim_;
  Devices& devices_;
  core::Rng& rng_;
  size_t device_count_;
  std::vector<std::pair<std::string, std::string>> moves_;  // device, group before
  std::vector<std::string> problems_;
  std::optional<size_t> down_;
  std::optional<size_t> spared_;
  bool catalog_group_exists_ = false;
  std::set<std::string> cut_groups_;
  std::map<std::pair<size_t, std::string>, uint64_t> highest_;
  std::set<std::string> reported_;
  std::vector<std::string> regressions_;
  std::set<std::string> forked_;
};

Outcome run(const Plan& plan, uint64_t seed) {
  core::Rng rng(seed * 7919 + 11);
  const auto n = static_cast<size_t>(rng.between(5, 9));
  const std::string toml = fmt::format(
      "[topology]\nkind = \"random\"\nnodes = {}\nseed = {}\n[link]\ndelay_ms = {}\njitter_ms = {}\nloss = {}\n"
      "[run]\nduration_s = 600\n",
      n, seed, rng.between(1, 5), rng.between(0, 3), plan.loss);
  const size_t initial_devices = static_cast<size_t>(rng.between(4, 8));
  Devices devices(rng, initial_devices, 60.0);
  DeviceSpec added;
  added.id = "late";
  added.kind = DeviceKind::plug;
  added.location = {10, 10, 0};
  added.driver = "emulated://late";
  devices.add(added);

  MeshSim::Options options;
  options.start_spread = seconds(1);
  const auto catalog = devices.specs(initial_devices);
  options.configure = [&catalog](agent::NodeConfig& config) {
    config.kgroup.selection.k = 3;
    config.kgroup.selection.mode = kgroup::SelectionMode::lsh;
    config.kgroup.selection.clusters.devices_per_cluster = 3;
    config.devices.catalog = catalog;
    config.devices.catalog_digest = "sim";
    config.devices.leaders.poll_interval = milliseconds(500);
    config.devices.service.ensure_interval = seconds(1);
  };
  options.drivers = [&devices](size_t, core::Env& env) { return devices.factory_for(env); };
  MeshSim sim(parse_scenario(toml, "device_agent.toml"), seed, options);

  Outcome out;
  const core::TimePoint settle(seconds(30));
  sim.run_until(settle);
  for (size_t i = 0; i < n; ++i) sim.node(i)->device_watcher().watch({}, {});
  const core::TimePoint stop = settle + seconds(40);
  Clients clients(sim, devices, rng, initial_devices, stop);
  clients.loop(rng.below(n), 0);
  clients.loop(rng.below(n), 1);
  Mover mover(sim, devices, rng, initial_devices);
  if (plan.moves > 0) {
    mover.check_versions();
    for (int i = 0; i < plan.moves; ++i) {
      sim.simulator().after(seconds(3) + milliseconds(rng.between(0, 2000)) + seconds(9) * i,
                            [&mover] { mover.move(); });
    }
  }

  // Kill the leader of one device's group while commands flow.
  const std::string victim_device = devices.at(rng.below(initial_devices)).spec().id;
  sim.run_until(settle + milliseconds(rng.between(2000, 10000)));
  std::set<size_t> down;
  std::optional<size_t> victim;
  if (plan.moves == 0 && sim.node(0) != nullptr) {
    victim = leader_of(sim, sim.node(0)->kgroups().selector().device_group(victim_device).to_string());
  }
  if (victim) {
    sim.crash(*victim);
    down.insert(*victim);
  }
  std::optional<size_t> second;
  if (plan.second_crash) {
    size_t pick = rng.below(n);
    if (down.count(pick) == 0) {
      second = pick;
      sim.crash(pick);
      down.insert(pick);
    }
  }
  out.partitioned = !sim.topology().connected_without(down);

  // A device stops answering, is seen down by its group, and comes back.
  // Its group may itself be recovering from the crash (failure detection
  // and re-selection take seconds), so the oracle waits for a serving
  // leader, up to a bound; a group that lost its quorum (two of its three
  // members crashed) can hold nothing and is not asked, nor is one that a
  // move's crash cut off (every move's crash overlaps this window): when
  // the crashed node is a cut vertex, members behind it cannot reach the
  // others, and a group in which no live majority can reach each other
  // elects no leader for the 8 s the node is down, once per such crash.
  // That holds of every group the device is in during the window (a group
  // it is handed over to must first read its record from the old one).
  EmulatedDevice& flaky = devices.at(rng.below(initial_devices));
  sim.run_until(settle + seconds(14));
  flaky.set_up(false);
  const routine::DeviceGroupState::Device* seen_down = nullptr;
  const core::TimePoint give_up = settle + seconds(40);
  std::set<std::string> flaky_groups;  // every group it was in meanwhile, by any live node's catalog
  auto note_flaky_groups = [&] {
    for (size_t i = 0; i < sim.size(); ++i) {
      if (agent::Node* node = sim.node(i)) {
        flaky_groups.insert(node->kgroups().selector().device_group(flaky.spec().id).to_string());
      }
    }
  };
  note_flaky_groups();
  while (sim.simulator().now() < give_up) {
    sim.run_until(sim.simulator().now() + milliseconds(500));
    note_flaky_groups();
    seen_down = leader_record(sim, flaky.spec().id);
    if (seen_down != nullptr && !seen_down->up) break;
  }
  for (const auto& target : flaky_groups) out.cut_off = out.cut_off || mover.cut_groups().count(target) != 0;
  if (!out.partitioned && !out.cut_off && (seen_down == nullptr || seen_down->up) &&
      device_quorum_alive(sim, flaky.spec().id)) {
    std::string replicas;
    std::set<std::string> targets;
    for (size_t i = 0; i < sim.size(); ++i) {
      agent::Node* node = sim.node(i);
      if (node == nullptr) continue;
      const auto target = node->kgroups().selector().device_group(flaky.spec().id).to_string();
      targets.insert(target);
      for (kgroup::GroupReplica* r : node->kgroups().host().replicas()) {
        if (r->config().target.to_string() != target) continue;
        replicas += fmt::format(" n{}:{}/{}/{}{}", i, r->config().epoch, r->config().generation,
                                kgroup::to_string(r->role()), r->serving() ? "(serving)" : "");
      }
    }
    out.violations.push_back(fmt::format("device {} stopped answering but no leader of its group held it down "
                                         "within 26 s; its group by each live node's catalog: {}; replicas:{}",
                                         flaky.spec().id, fmt::join(targets, ","), replicas));
  }
  flaky.set_up(true);

  // A run-time catalog change while the victim is down.
  std::optional<std::string> catalog_problem;
  bool catalog_done = false;
  size_t changer = rng.below(n);
  while (down.count(changer) != 0 || changer == mover.down()) changer = rng.below(n);
  proto::CatalogChange change;
  *change.mutable_put() = routine::to_proto(added);
  mover.spare(changer);
  sim.node(changer)->devices().change_catalog(change, seconds(20), [&](const auto& result) {
    catalog_done = true;
    mover.spare(std::nullopt);
    if (!result) {
      catalog_problem = result.error();
    } else if (result->refused()) {
      catalog_problem = "refused: " + result->detail();
    }
  });
  sim.run_until(stop);
  if (victim) {
    sim.restart(*victim);
    down.erase(*victim);
    sim.node(*victim)->device_watcher().watch({}, {});  // a new life, a new subscriber
    // Back, it may be cut off (its neighbours are the node that stays down).
    out.partitioned = out.partitioned || !sim.topology().connected_without(down);
  }
  // The catalog's group may never have been created, and two crashes may
  // take a quorum of the members it would have had: genesis then waits for
  // them (they could be holding it behind a partition). Once the victim is
  // back and answers, a retry must create it.
  if (catalog_done && catalog_problem && catalog_problem->find("failed lately") != std::string::npos &&
      sim.node(changer) != nullptr) {
    ++out.catalog_retried;
    catalog_done = false;
    catalog_problem.reset();
    sim.run_until(sim.simulator().now() + seconds(10));
    sim.node(changer)->devices().change_catalog(change, seconds(20), [&](const auto& result) {
      catalog_done = true;
      if (!result) {
        catalog_problem = "after the victim's restart: " + result.error();
      } else if (result->refused()) {
        catalog_problem = "refused after the victim's restart: " + result->detail();
      }
    });
  }
  // Quiescence: clients stopped at `stop`; let notifications and renewals settle.
  sim.run_until(stop + seconds(40));
  if (!out.partitioned && (!catalog_done || catalog_problem)) {
    out.violations.push_back("the run-time catalog change failed: " + catalog_problem.value_or("no answer"));
  }
  for (const auto& problem : mover.problems()) out.violations.push_back(problem);
  if (mover.forked().empty()) {
    for (const auto& regression : mover.regressions()) out.violations.push_back(regression);
  } else {
    out.forked = true;
  }
  if (plan.moves > 0) {
    // Clusters are computed from the catalog's versions: nodes must agree on them.
    std::optional<size_t> first;
    for (size_t i = 0; i < n; ++i) {
      if (sim.node(i) == nullptr) continue;
      if (!first) {
        first = i;
        continue;
      }
      const auto& mine = sim.node(i)->catalog().entries();
      const auto& theirs = sim.node(*first)->catalog().entries();
      for (size_t v = 0; v < std::min(mine.size(), theirs.size()); ++v) {
        if (mine[v].SerializeAsString() == theirs[v].SerializeAsString()) continue;
        out.violations.push_back(fmt::format("n{} and n{} hold different catalog changes at version {}: {} / {}", i,
                                             *first, v + 1, mine[v].ShortDebugString(), theirs[v].ShortDebugString()));
        break;
      }
    }
  }
  if (plan.moves > 0) {
    out.regrouped = mover.regrouped();
    for (size_t i = 0; i < n; ++i) {
      if (sim.node(i) != nullptr) out.handoffs += sim.node(i)->metrics().total("device_handoffs_total");
    }
  }

  // Exactly once, from the devices' own logs.
  std::map<std::string, int> actuated;
  for (size_t i = 0; i < devices.size(); ++i) {
    for (const auto& a : devices.at(i).actuations()) ++actuated[a.command_id];
    out.actuations += devices.at(i).actuations().size();
  }
  for (const auto& [id, count] : actuated) {
    if (count > 1) out.violations.push_back(fmt::format("command {} actuated {} times", id, count));
  }
  for (const auto& id : clients.ok()) {
    if (actuated[id] != 1) {
      out.violations.push_back(fmt::format("command {} acknowledged ok but actuated {} times", id, actuated[id]));
    }
  }
  out.ok = clients.ok().size();
  out.failed = clients.failed();
  if (out.partitioned) return out;

  // Every live node: same catalog with the added device; its view of every
  // device equals the device.
  for (size_t i = 0; i < n; ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    if (node->catalog().find(added.id) == nullptr) {
      out.violations.push_back(fmt::format("n{} never learned the run-time device (catalog version {})", i,
                                           node->catalog().version()));
    }
    for (const auto& [id, spec] : node->catalog().devices()) {
      // A group that lost its quorum (two of three members crashed) holds
      // nothing new: its devices' views may lag, as the model allows.
      if (!sim.quorum_alive(node->kgroups().selector().device_group(id).to_string())) continue;
      EmulatedDevice* device = devices.find(id);
      const auto& view = node->device_watcher().view();
      const auto seen = view.find(id);
      if (seen == view.end()) {
        out.violations.push_back(fmt::format("n{} has no view of {}", i, id));
        continue;
      }
      if (seen->second.record.attributes != device->state() || seen->second.record.up != device->up()) {
        const std::string group = node->kgroups().selector().device_group(id).to_string();
        const auto leader = leader_of(sim, group);
        const auto* record = leader_record(sim, id);
        out.violations.push_back(fmt::format(
            "n{} sees {} as {} {} (version {} from {} led by {}), the device is {} {}; its group {} is led by {} "
            "holding version {}",
            i, id,
                                             routine::format_attributes(spec.kind, seen->second.record.attributes),
            seen->second.record.up ? "up" : "down", seen->second.record.version, seen->second.group,
            seen->second.leader.to_string(), routine::format_attributes(spec.kind, device->state()),
            device->up() ? "up" : "down", group, leader ? fmt::format("n{}", *leader) : std::string("nobody"),
            record == nullptr ? 0 : record->version));
      }
    }
  }
  return out;
}

struct Totals {
  uint64_t seeds = 0;
  uint64_t ok = 0;
  uint64_t failed = 0;
  uint64_t actuations = 0;
  uint64_t partitioned = 0;
  uint64_t cut_off = 0;
  uint64_t regrouped = 0;
  uint64_t handoffs = 0;
  uint64_t forked = 0;
  uint64_t catalog_retried = 0;
};

void sweep(const Plan& plan, uint64_t first_seed, int seeds, Totals& totals) {
  const test_support::SeedRange range =
      test_support::seed_range("DEVICE_AGENT", first_seed, static_cast<uint64_t>(seeds));
  if (range.replaying) {
    core::set_log_level("warn");
    core::set_log_level(std::getenv("DEVICE_AGENT_DEBUG") ? "debug" : "info", "routine");
    if (std::getenv("DEVICE_AGENT_DEBUG")) core::set_log_level(std::getenv("DEVICE_AGENT_DEBUG"), "kgroup");
  }
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    const Outcome o = run(plan, seed);
    ++totals.seeds;
    totals.ok += o.ok;
    totals.failed += o.failed;
    totals.actuations += o.actuations;
    totals.partitioned += o.partitioned ? 1 : 0;
    totals.cut_off += o.cut_off ? 1 : 0;
    totals.regrouped += o.regrouped;
    totals.handoffs += o.handoffs;
    totals.forked += o.forked ? 1 : 0;
    totals.catalog_retried += o.catalog_retried;
    if (test_support::report_violations("DEVICE_AGENT", seed, o.violations)) return;
  }
  std::printf(
      "seeds=%llu (partitioned, safety only: %llu; down device's group cut off by a move's crash, bound "
      "waived: %llu) commands ok=%llu failed=%llu actuations=%llu moves that regrouped=%llu handoffs=%llu "
      "(forked groups, versions unchecked: %llu seeds) catalog changes sent again after genesis waited for "
      "members failed lately: %llu\n",
      static_cast<unsigned long long>(totals.seeds), static_cast<unsigned long long>(totals.partitioned),
      static_cast<unsigned long long>(totals.cut_off), static_cast<unsigned long long>(totals.ok),
      static_cast<unsigned long long>(totals.failed), static_cast<unsigned long long>(totals.actuations),
      static_cast<unsigned long long>(totals.regrouped), static_cast<unsigned long long>(totals.handoffs),
      static_cast<unsigned long long>(totals.forked), static_cast<unsigned long long>(totals.catalog_retried));
}

TEST(DeviceAgentSim, LeaderCrashNeitherLosesNorRepeatsCommands) {
  Plan plan;
  Totals t;
  sweep(plan, 1, 40, t);
  EXPECT_GT(t.ok, 0u);
}

TEST(DeviceAgentSim, CatalogMovesHandDevicesOverAcrossLeaderCrashes) {
  Plan plan;
  plan.moves = 3;
  Totals t;
  sweep(plan, 9000, 12, t);
  EXPECT_GT(t.ok, 0u);
  EXPECT_GT(t.regrouped, 0u);
  EXPECT_GT(t.handoffs, 0u);
}

// Seeds beyond the sweep's range that found a bug, kept so that it stays
// fixed:
// - 9040: a device moved into a new cluster while an unrelated node crashed
//   and restarted; the new cluster's group was created only once the whole
//   member list had been quiet for 10 s, past the 26 s failover bound.
//   DeviceService now waits only for the group's own members to hold still.
// - 9029 (with that fix): a restarted node's watcher took a read's answer
//   (version 6) that a notification (version 7) had overtaken, and its view
//   went back. The watcher now drops an answer older than what it holds from
//   the same group instance.
TEST(DeviceAgentSim, CatalogMovesOnSeedsThatFoundBugs) {
  Plan plan;
  plan.moves = 3;
  Totals t;
  for (const uint64_t seed : {9029, 9040}) sweep(plan, seed, 1, t);
  EXPECT_GT(t.ok, 0u);
}

TEST(DeviceAgentSim, WithLossAndASecondCrash) {
  Plan plan;
  plan.loss = 0.02;
  plan.second_crash = true;
  Totals t;
  sweep(plan, 5000, 40, t);
  EXPECT_GT(t.ok, 0u);
}

// One group watching more devices than one subscription message can name
// (CoMesh's centralized baseline: one k = 1 group for every device, the ids
// 64 characters long): every node's watcher still learns every device.
TEST(DeviceAgentSim, WatchersOfOneLargeGroupSeeEveryDevice) {
  constexpr size_t kNodes = 5;
  constexpr size_t kDevices = 120;  // about 8 KB of ids in one group
  std::vector<std::unique_ptr<EmulatedDevice>> devices;
  std::vector<DeviceSpec> catalog;
  for (size_t i = 0; i < kDevices; ++i) {
    DeviceSpec spec;
    spec.id = fmt::format("{:064}", i);
    spec.kind = DeviceKind::plug;
    spec.location = {static_cast<double>(i % 10), static_cast<double>(i / 10), 0};
    spec.driver = "emulated://" + spec.id;
    catalog.push_back(spec);
    devices.push_back(std::make_unique<EmulatedDevice>(spec, Attributes{{"power", i % 3 == 0}}));
  }
  std::vector<std::unique_ptr<routine::EmulatedDriverFactory>> factories;
  MeshSim::Options options;
  options.configure = [&catalog](agent::NodeConfig& config) {
    config.kgroup.selection.k = 1;
    config.kgroup.selection.mode = kgroup::SelectionMode::hash;
    config.kgroup.selection.clusters.devices_per_cluster = kDevices;
    config.devices.catalog = catalog;
    config.devices.catalog_digest = "sim";
  };
  options.drivers = [&](size_t, core::Env& env) {
    factories.push_back(std::make_unique<routine::EmulatedDriverFactory>(env));
    for (auto& device : devices) factories.back()->add(*device);
    return factories.back().get();
  };
  const std::string toml = fmt::format(
      "[topology]\nkind = \"random\"\nnodes = {}\nseed = 1\n[link]\ndelay_ms = 2\n[run]\nduration_s = 120\n", kNodes);
  MeshSim sim(parse_scenario(toml, "large_group.toml"), 1, options);
  sim.run_until(core::TimePoint(seconds(2)));
  for (size_t i = 0; i < kNodes; ++i) sim.node(i)->device_watcher().watch({}, {});
  sim.run_until(core::TimePoint(seconds(60)));
  for (size_t i = 0; i < kNodes; ++i) {
    const auto& view = sim.node(i)->device_watcher().view();
    size_t current = 0;
    for (const auto& device : devices) {
      const auto seen = view.find(device->spec().id);
      current += seen != view.end() && seen->second.record.known && seen->second.record.attributes == device->state();
    }
    EXPECT_EQ(current, kDevices) << "node " << i;
  }
}

}  // namespace
}  // namespace mesh::sim
