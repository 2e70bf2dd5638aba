// Routines on whole agents in meshsim (comesh.md §6: Fig. 4, Fig. 5, sync
// delay, Fig. 11), with emulated devices whose I/O is charged to the mesh
// (bench/charged_devices.h). Every run is virtual time, so its delays are
// machine-independent; the baseline of a point is named with it.
//
// BM_ClientDelay/TOPOLOGY/DEVICES/STRATEGY/CHURN (TOPOLOGY 0 grid, 1 random,
// 2 clustered; STRATEGY 0 SLA, 1 OLA; CHURN percent of nodes crashed):
//   client delay, from a routine's trigger condition becoming true (its
//   motion sensor set on) to its first command actuated (the emulated
//   device's actuation log), no other routine active: the routines of a
//   seed are triggered one after another, each once the previous one ended.
//   DEVICES is how many plugs each routine touches. With CHURN, before each
//   trigger that share of the nodes (drawn anew, so the rest stays
//   connected) is crashed kChurnLead_s before the trigger and restarted
//   ROUTINE_BENCH_CHURN_DOWN_S (10) after the crash; the next trigger waits until the mesh
//   settled again (Fig. 5). Its baseline is the same point with CHURN 0.
// BM_ClientDelayGradual/TOPOLOGY/DEVICES/STRATEGY/CHURN: the same client
//   delay under gradual churn (Fig. 5, second reading): over a window of
//   ROUTINE_BENCH_GRADUAL_S (400) s a trigger fires every kTriggerPeriod_s
//   (routines in turn, each once the previous one ended: a slot it overran
//   is skipped and counted), while CHURN percent of the nodes (drawn once,
//   the rest connected) crash one at a time, evenly spaced over the window
//   (40 s apart for 10 of 25 nodes, each at a random instant within the
//   first trigger period of its share) and stay down. CHURN 0 is the same
//   schedule without crashes, the baseline (same seeds, routines, slots).
// BM_SyncDelay/TOPOLOGY/DEVICES/STRATEGY: two manual runs of one routine at
//   the same instant (every device conflicting): from the first invocation's
//   last lock released (its device groups' serving leaders no longer hold a
//   lock for it; polled every millisecond) to the second's first actuation.
// BM_RoutineTraffic/ROUTINES/CENTRAL/COALESCE (Fig. 11): bytes per node per second
//   hop by hop while every routine is triggered every kTriggerPeriod_s,
//   decentralized (k = 3, LSH, clusters of kDevicesPerCluster devices) or
//   CENTRAL (k = 1, SelectionMode::central: one node hosts every routine's
//   and device's group; the baseline). Traffic is classified from every
//   datagram put on the air (Network::set_send_observer) plus the charged
//   device I/O: background is group upkeep (k-group heartbeats: appends with
//   no entries and their replies; OLSR; Medley; catalog sync; device
//   subscriptions and notifications; device polls), foreground the rest
//   (replicated log entries: triggers, lock and command steps, device
//   observations; k-group client requests: locks, commands; elections;
//   migration; lock renewals).
//
// Counters: delay_p50_ms, delay_p90_ms, delay_mean_ms over every routine and
// seed of the point, samples, completed_share (triggers that actuated within
// kTriggerTimeout_s: below 1, the point is partly invalid), settle_s (until
// every device is led and every routine group serves; kSettleCap_s: never),
// led_share (mean at each trigger: with churn, below 1 while groups fail over). Traffic: bytes_per_node_s_mean / _max
// (busiest node), background_* / foreground_*, heartbeat_share (of the mean
// bytes), heartbeats_per_s (sent, end to end, mesh-wide) and
// heartbeat_peer_pairs (distinct leader -> follower pairs: per-peer
// coalescing would send one heartbeat per pair and interval instead),
// invocations_ok in the window. A churn point also reports
// before_restart_share: triggers that actuated before the crashed nodes
// came back (fail-over, not recovery). A gradual point also reports slots,
// triggers, skipped_slots, and with churn crashes, spacing_s,
// unrepaired_at_crash (groups whose newest serving instance still had an
// earlier crashed member when the next node crashed: the spacing was too
// short for them) and unserved_at_crash (groups with no serving instance).
//
// Environment: ROUTINE_BENCH_SEEDS (3) seeds per delay point,
// ROUTINE_BENCH_NODES (25) nodes for the delay points,
// ROUTINE_BENCH_CHURN_DOWN_S (10) how long churned nodes stay down (all at
// once), ROUTINE_BENCH_GRADUAL_S (400) the gradual-churn window,
// ROUTINE_BENCH_MEASURE_S (60) traffic window, ROUTINE_BENCH_HEARTBEAT_MS (the
// default, 100) k-group heartbeat interval with a lease of six intervals,
// ROUTINE_BENCH_TRAFFIC_NODES
// (50) nodes for the traffic points (random topology, 64 plugs), ROUTINE_BENCH_FULL=1 every
// point (without it: 1 and 4 devices, 5 and 20 routines),
// ROUTINE_BENCH_OUT=DIR writes DIR/routine_delays.csv (every sample) and
// DIR/routine_traffic.csv (traffic per node and class) and
// DIR/routine_heartbeats.csv (heartbeats and leader -> follower pairs); bench/routine_plot.py
// draws them.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/bench_output.h"
#include "bench/charged_devices.h"
#include "bench/mesh_probes.h"
#include "core/log.h"
#include "core/packet_auth.h"
#include "core/rng.h"
#include "proto/wire.pb.h"
#include "routine/device_group_state.h"
#include "routine/emulated_device.h"
#include "routine/routine_group_state.h"
#include "routine/routine_model.h"
#include "sim/mesh_sim.h"
#include "sim/scenario.h"

namespace {

using mesh::bench::ChargedDevices;
using mesh::bench::ChargedFactory;
using mesh::bench::quantile;
using mesh::core::TimePoint;
using mesh::routine::Attributes;
using mesh::routine::DeviceKind;
using mesh::routine::DeviceSpec;
using mesh::routine::EmulatedDevice;
using mesh::routine::RoutineSpec;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kLinkDelayMs = 2;
constexpr int kSettleCap_s = 200;
constexpr int kTriggerTimeout_s = 30;
constexpr int kTriggerPeriod_s = 10;
// Churn: the crashed nodes go down this long before a trigger (and come
// back ROUTINE_BENCH_CHURN_DOWN_S after the crash).
constexpr int kChurnLead_s = 1;
constexpr size_t kDevicesPerCluster = 25;
const char* const kTopologies[] = {"grid", "random", "clustered"};

int env_int(const char* name, int fallback, int minimum) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::max(minimum, std::atoi(value)) : fallback;
}
int churn_downtime_s() { return env_int("ROUTINE_BENCH_CHURN_DOWN_S", 10, kChurnLead_s + 1); }
bool full_run() { return std::getenv("ROUTINE_BENCH_FULL") != nullptr; }

// The traffic every node put on the air, per class, from the datagrams
// themselves: the agent channel's sealed envelopes are opened (the tag is not
// checked: the simulator's datagrams are authentic) and classified by the
// message they carry.
class TrafficTap {
 public:
  explicit TrafficTap(size_t nodes) : bytes_(nodes) {}

  void observe(size_t from, mesh::sim::Channel channel, mesh::core::ByteSpan datagram) {
    bytes_[from][classify(channel, datagram)] += datagram.size();
  }
  const std::vector<std::map<std::string, uint64_t>>& bytes() const { return bytes_; }
  // Since start_window(), counted once at their first hop: requests that
  // carried heartbeats (a coalesced one carries several: kgroup.
  // coalesce_heartbeats), the heartbeats they carried, and the distinct
  // (leader node, follower node) pairs they went between.
  void start_window() {
    heartbeat_requests_ = 0;
    heartbeats_carried_ = 0;
    heartbeat_pairs_.clear();
  }
  uint64_t heartbeat_requests() const { return heartbeat_requests_; }
  uint64_t heartbeats_carried() const { return heartbeats_carried_; }
  size_t heartbeat_pairs() const { return heartbeat_pairs_.size(); }

  static bool background(const std::string& kind) {
    static const std::set<std::string> kinds = {"olsr",         "membership",          "kgroup_heartbeat",
                                                "catalog_sync", "device_subscription", "device_io"};
    return kinds.count(kind) != 0;
  }

 private:
  std::string classify(mesh::sim::Channel channel, mesh::core::ByteSpan datagram) {
    using mesh::core::PacketAuth;
    if (channel == mesh::sim::Channel::routing) return "olsr";
    mesh::proto::Envelope envelope;
    if (datagram.size() < PacketAuth::kOverhead ||
        !envelope.ParseFromArray(datagram.data() + PacketAuth::kHeaderSize,
                                 static_cast<int>(datagram.size() - PacketAuth::kOverhead))) {
      return "unparsed";
    }
    switch (envelope.body_case()) {
      case mesh::proto::Envelope::kMembership:
        return "membership";
      case mesh::proto::Envelope::kKgroup:
        return classify_kgroup(envelope);
      case mesh::proto::Envelope::kKgroupClient:
        return "kgroup_client";
      case mesh::proto::Envelope::kRoutine:
        switch (envelope.routine().kind_case()) {
          case mesh::proto::RoutineBody::kDigest:
          case mesh::proto::RoutineBody::kChanges:
            return "catalog_sync";
          case mesh::proto::RoutineBody::kSubscribe:
          case mesh::proto::RoutineBody::kNotify:
            return "device_subscription";
          default:
            return "lock_renewal";
        }
      default:
        return "other";
    }
  }

  // An append with no entries is a heartbeat; its reply travels back with
  // the same message id to the append's sender.
  std::string classify_kgroup(const mesh::proto::Envelope& envelope) {
    const auto& body = envelope.kgroup();
    switch (body.kind_case()) {
      case mesh::proto::KgroupBody::kAppend:
        if (body.append().entries_size() != 0) return "kgroup_replication";
        return heartbeat(envelope, 1);
      case mesh::proto::KgroupBody::kHeartbeats:
        return heartbeat(envelope, static_cast<uint64_t>(body.heartbeats().appends_size()));
      case mesh::proto::KgroupBody::kAppendReply:
      case mesh::proto::KgroupBody::kHeartbeatAnswers:
        return heartbeats_.count({envelope.dst(), envelope.msg_id()}) != 0 ? "kgroup_heartbeat" : "kgroup_replication";
      case mesh::proto::KgroupBody::kElection:
      case mesh::proto::KgroupBody::kElectionAnswer:
      case mesh::proto::KgroupBody::kPrepare:
      case mesh::proto::KgroupBody::kPrepareReply:
        return "kgroup_election";
      default:
        return "kgroup_migration";
    }
  }

  std::string heartbeat(const mesh::proto::Envelope& envelope, uint64_t carried) {
    heartbeats_.insert({envelope.src(), envelope.msg_id()});
    if (envelope.hops() == 0) {
      ++heartbeat_requests_;
      heartbeats_carried_ += carried;
      heartbeat_pairs_.insert({envelope.src(), envelope.dst()});
    }
    return "kgroup_heartbeat";
  }

  std::vector<std::map<std::string, uint64_t>> bytes_;
  std::set<std::pair<uint32_t, uint64_t>> heartbeats_;
  uint64_t heartbeat_requests_ = 0;
  uint64_t heartbeats_carried_ = 0;
  std::set<std::pair<uint32_t, uint32_t>> heartbeat_pairs_;
};

// One trigger's delays in ms; the phases split the client delay by the
// invocation's replicated timestamps: the change until its trigger was
// committed, the trigger until every lock was held, the locks until the
// first command actuated. Negative: not measured (never actuated).
struct Sample {
  double delay = -1;
  double trigger = -1;
  double locks = -1;
  double command = -1;
};

struct Setup {
  std::string topology = "random";
  int nodes = 25;
  int plugs = 32;
  int routines = 4;
  int devices_per_routine = 2;
  mesh::routine::LockStrategy strategy = mesh::routine::LockStrategy::sla;
  bool central = false;
  bool coalesce_heartbeats = true;  // kgroup.coalesce_heartbeats
};

// The traffic CSVs' mode column.
std::string mode_name(const Setup& setup) {
  if (setup.central) return "central";
  return setup.coalesce_heartbeats ? "decentralized" : "decentralized_uncoalesced";
}

// One seed's mesh: plugs at random nodes, one motion sensor per routine
// ("sR.motion == on" triggers routine "rR"), each routine setting a random
// set of plugs.
struct RoutineMesh {
  Setup setup;
  ChargedDevices devices;
  std::vector<DeviceSpec> catalog;
  std::vector<std::unique_ptr<ChargedFactory>> factories;
  std::vector<RoutineSpec> routines;
  std::vector<std::vector<EmulatedDevice*>> touched;  // per routine
  std::vector<EmulatedDevice*> sensors;               // per routine
  std::unique_ptr<TrafficTap> tap;
  std::unique_ptr<mesh::sim::MeshSim> sim;

  RoutineMesh(Setup setup_in, uint64_t seed, const mesh::sim::Scenario& scenario)
      : setup(std::move(setup_in)), devices(scenario.build_topology()) {
    const auto& positions = scenario.build_topology().positions;
    const auto nodes = static_cast<size_t>(setup.nodes);
    mesh::core::Rng rng(seed * 7919 + 13);
    const auto add_device = [&](const std::string& id, DeviceKind kind, Attributes initial) {
      DeviceSpec spec;
      spec.id = id;
      spec.kind = kind;
      const size_t at = rng.below(nodes);
      spec.location = positions[at];
      spec.location[0] += 0.5;
      spec.driver = "emulated://" + id;
      catalog.push_back(spec);
      devices.access_node.push_back(at);
      devices.devices.push_back(std::make_unique<EmulatedDevice>(spec, std::move(initial)));
      return devices.devices.back().get();
    };
    std::vector<EmulatedDevice*> plugs;
    for (int p = 0; p < setup.plugs; ++p) {
      plugs.push_back(add_device(fmt::format("p{:03}", p), DeviceKind::plug, {{"power", false}}));
    }
    for (int r = 0; r < setup.routines; ++r) {
      sensors.push_back(add_device(fmt::format("s{:03}", r), DeviceKind::motion_sensor, {{"motion", false}}));
      std::vector<EmulatedDevice*> chosen;
      while (chosen.size() < static_cast<size_t>(setup.devices_per_routine)) {
        EmulatedDevice* plug = plugs[rng.below(plugs.size())];
        if (std::find(chosen.begin(), chosen.end(), plug) == chosen.end()) chosen.push_back(plug);
      }
      RoutineSpec spec;
      spec.id = fmt::format("r{:03}", r);
      spec.trigger_text = fmt::format("s{:03}.motion == on", r);
      spec.trigger = mesh::routine::build_trigger(spec.trigger_text, "", {}).value();
      spec.min_retrigger = seconds(1);
      for (EmulatedDevice* plug : chosen) {
        mesh::routine::RoutineCommand command;
        command.device = plug->spec().id;
        command.values = {{"power", true}};
        spec.commands.push_back(command);
      }
      routines.push_back(spec);
      touched.push_back(chosen);
    }

    mesh::sim::MeshSim::Options options;
    options.configure = [this](mesh::agent::NodeConfig& config) {
      config.kgroup.selection.k = setup.central ? 1 : 3;
      config.kgroup.replica.coalesce_heartbeats = setup.coalesce_heartbeats;
      if (const int heartbeat_ms = env_int("ROUTINE_BENCH_HEARTBEAT_MS", 0, 0); heartbeat_ms > 0) {
        // The interval against failover trade: a follower elects after a
        // lease of six silent intervals, as with the defaults (100, 600).
        config.kgroup.replica.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
        config.kgroup.replica.lease = std::chrono::milliseconds(6 * heartbeat_ms);
      }
      config.kgroup.selection.mode =
          setup.central ? mesh::kgroup::SelectionMode::central : mesh::kgroup::SelectionMode::lsh;
      config.kgroup.selection.clusters.devices_per_cluster = setup.central ? catalog.size() : kDevicesPerCluster;
      config.devices.catalog = catalog;
      config.devices.routines = routines;
      config.devices.catalog_digest = "bench";
      config.routines.leaders.strategy = setup.strategy;
    };
    options.drivers = [this](size_t index, mesh::core::Env& env) {
      factories.push_back(std::make_unique<ChargedFactory>(env, devices, index));
      return factories.back().get();
    };
    sim = std::make_unique<mesh::sim::MeshSim>(scenario, seed, options);
    tap = std::make_unique<TrafficTap>(nodes);
    sim->network().set_send_observer([this](size_t from, mesh::sim::Channel channel, mesh::core::ByteSpan datagram) {
      tap->observe(from, channel, datagram);
    });
  }

  // Runs until every device is led and every routine group serves (or
  // kSettleCap_s); returns the virtual second it stopped at.
  int settle() {
    int second = 2;
    while (second < kSettleCap_s && !ready()) sim->run_until(TimePoint(seconds(++second)));
    return second;
  }
  bool ready() {
    if (mesh::bench::led_device_shares(*sim, devices.devices).first < 1.0) return false;
    return std::all_of(routines.begin(), routines.end(), [this](const RoutineSpec& spec) {
      return !mesh::bench::serving_replicas(*sim, "routine:" + spec.id).empty();
    });
  }

  // The state of routine `r`'s newest serving group (null: none serves).
  const mesh::routine::RoutineGroupState* routine_state(size_t r) {
    const auto replicas = mesh::bench::serving_replicas(*sim, "routine:" + routines[r].id);
    if (replicas.empty()) return nullptr;
    return dynamic_cast<const mesh::routine::RoutineGroupState*>(&replicas.front()->state_machine());
  }
  bool routine_idle(size_t r) {
    const auto* state = routine_state(r);
    if (state == nullptr) return false;
    return std::all_of(state->invocations().begin(), state->invocations().end(),
                       [](const auto& entry) { return entry.second.done(); });
  }
  // The earliest actuation at or after `since` of a command whose id starts
  // with `prefix`, on routine `r`'s devices.
  std::optional<TimePoint> first_actuation(size_t r, const std::string& prefix, TimePoint since) const {
    std::optional<TimePoint> first;
    for (const EmulatedDevice* device : touched[r]) {
      for (const auto& a : device->actuations()) {
        if (a.at < since || a.command_id.compare(0, prefix.size(), prefix) != 0) continue;
        if (!first || a.at < *first) first = a.at;
      }
    }
    return first;
  }
  // The delays of routine `r`'s trigger at `triggered`, split by its
  // invocation's replicated timestamps (microseconds of Env time, which is
  // virtual time in the simulator).
  Sample sample(size_t r, TimePoint triggered, std::optional<TimePoint> actuated) {
    Sample out;
    if (!actuated) return out;
    const double triggered_ms = mesh::core::to_millis(triggered.time_since_epoch());
    const double actuated_ms = mesh::core::to_millis(actuated->time_since_epoch());
    out.delay = actuated_ms - triggered_ms;
    const auto* state = routine_state(r);
    if (state == nullptr) return out;
    for (const auto& [seq, invocation] : state->invocations()) {
      const double trigger_ms = static_cast<double>(invocation.triggered_at_us) / 1000.0;
      const double locked_ms = static_cast<double>(invocation.locked_at_us) / 1000.0;
      if (trigger_ms < triggered_ms || invocation.locked_at_us == 0) continue;
      out.trigger = trigger_ms - triggered_ms;
      out.locks = locked_ms - trigger_ms;
      out.command = actuated_ms - locked_ms;
      break;
    }
    return out;
  }
  // Whether a serving device-group leader holds a lock of one of routine
  // `r`'s devices for `holder`.
  bool holds_lock(size_t r, const std::string& holder) {
    std::set<std::string> targets;
    for (size_t n = 0; n < sim->size(); ++n) {
      if (mesh::agent::Node* node = sim->node(n)) {
        for (const EmulatedDevice* d : touched[r]) {
          targets.insert(node->kgroups().selector().device_group(d->spec().id).to_string());
        }
        break;
      }
    }
    for (const auto& target : targets) {
      for (mesh::kgroup::GroupReplica* replica : mesh::bench::serving_replicas(*sim, target)) {
        const auto* state = dynamic_cast<const mesh::routine::DeviceGroupState*>(&replica->state_machine());
        if (state == nullptr) continue;
        for (const EmulatedDevice* d : touched[r]) {
          const auto* lock = state->locks().find(d->spec().id);
          if (lock != nullptr && lock->holder == holder) return true;
        }
      }
    }
    return false;
  }
};

mesh::sim::Scenario scenario_for(const Setup& setup, uint64_t seed, double duration_s) {
  mesh::sim::Scenario scenario;
  scenario.source = "routine-bench";
  scenario.topology.kind = setup.topology;
  scenario.topology.nodes = setup.nodes;
  scenario.topology.clusters = std::max(2, setup.nodes / 10);
  scenario.topology.seed = seed;
  scenario.link.delay_ms = kLinkDelayMs;
  scenario.run.duration_s = duration_s;
  return scenario;
}

std::string strategy_name(mesh::routine::LockStrategy strategy) {
  return std::string(mesh::routine::to_string(strategy));
}

void write_delays(const std::string& experiment, const Setup& setup, int churn, uint64_t seed,
                  const std::vector<Sample>& samples) {
  auto out = mesh::bench::open_output("ROUTINE_BENCH_OUT", "routine_delays.csv",
                                      "experiment,topology,nodes,devices,strategy,churn,seed,delay_ms,trigger_ms,"
                                      "locks_ms,command_ms");
  if (!out.is_open()) return;
  const std::string point = fmt::format("{},{},{},{},{},{},{}", experiment, setup.topology, setup.nodes,
                                        setup.devices_per_routine, strategy_name(setup.strategy), churn, seed);
  // A trigger that never actuated is written with empty delays, not dropped.
  const auto cell = [](double ms) { return ms < 0 ? std::string() : fmt::format("{:.3f}", ms); };
  for (const Sample& s : samples) {
    out << point << "," << cell(s.delay) << "," << cell(s.trigger) << "," << cell(s.locks) << "," << cell(s.command)
        << "\n";
  }
}

void report_delays(benchmark::State& state, const std::vector<Sample>& samples, double settle_s, double led_share) {
  std::vector<double> delays, triggers, locks, commands, after_trigger;
  for (const Sample& s : samples) {
    if (s.delay >= 0) delays.push_back(s.delay);
    if (s.trigger < 0) continue;
    triggers.push_back(s.trigger);
    locks.push_back(s.locks);
    commands.push_back(s.command);
    after_trigger.push_back(s.locks + s.command);
  }
  state.counters["delay_p50_ms"] = quantile(delays, 0.5);
  state.counters["delay_p90_ms"] = quantile(delays, 0.9);
  state.counters["delay_mean_ms"] =
      delays.empty() ? 0 : std::accumulate(delays.begin(), delays.end(), 0.0) / static_cast<double>(delays.size());
  if (!triggers.empty()) {
    state.counters["trigger_p50_ms"] = quantile(triggers, 0.5);
    state.counters["locks_p50_ms"] = quantile(locks, 0.5);
    state.counters["command_p50_ms"] = quantile(commands, 0.5);
    state.counters["after_trigger_p50_ms"] = quantile(after_trigger, 0.5);
    state.counters["after_trigger_p90_ms"] = quantile(after_trigger, 0.9);
  }
  state.counters["samples"] = static_cast<double>(delays.size());
  state.counters["completed_share"] =
      samples.empty() ? 0 : static_cast<double>(delays.size()) / static_cast<double>(samples.size());
  state.counters["settle_s"] = settle_s;
  state.counters["led_share"] = led_share;
}

Setup delay_setup(const benchmark::State& state) {
  Setup setup;
  setup.topology = kTopologies[state.range(0)];
  setup.nodes = env_int("ROUTINE_BENCH_NODES", 25, 9);
  setup.devices_per_routine = static_cast<int>(state.range(1));
  setup.plugs = std::max(32, 2 * setup.devices_per_routine);
  setup.strategy = state.range(2) == 1 ? mesh::routine::LockStrategy::ola : mesh::routine::LockStrategy::sla;
  return setup;
}

// Nodes to crash: `percent` of them, drawn until the rest stays connected.
std::set<size_t> churn_victims(const mesh::sim::Topology& topology, int percent, mesh::core::Rng& rng) {
  const size_t count = topology.size() * static_cast<size_t>(percent) / 100;
  std::set<size_t> down;
  for (int attempt = 0; attempt < 200; ++attempt) {
    down.clear();
    while (down.size() < count) down.insert(rng.below(topology.size()));
    if (topology.connected_without(down)) return down;
  }
  return down;
}

// One client-delay sample: sets routine `r`'s sensor on now, runs (through
// `advance`) until its first actuation or kTriggerTimeout_s, then until the
// routine ended (no other routine active: the next trigger waits for this
// one), sets the sensor off and runs 2 s more.
Sample trigger_once(RoutineMesh& mesh, size_t r, const std::function<void(mesh::core::Duration)>& advance) {
  const TimePoint triggered = mesh.sim->simulator().now();
  mesh.sensors[r]->set_state({{"motion", true}});
  const TimePoint give_up = triggered + seconds(kTriggerTimeout_s);
  std::optional<TimePoint> actuated;
  while (!actuated && mesh.sim->simulator().now() < give_up) {
    advance(milliseconds(20));
    actuated = mesh.first_actuation(r, mesh.routines[r].id + "#", triggered);
  }
  while (!mesh.routine_idle(r) && mesh.sim->simulator().now() < give_up) advance(milliseconds(100));
  Sample out = mesh.sample(r, triggered, actuated);
  mesh.sensors[r]->set_state({{"motion", false}});
  advance(seconds(2));
  return out;
}

void BM_ClientDelay(benchmark::State& state) {
  mesh::core::log_to_null();
  const Setup setup = delay_setup(state);
  const int churn = static_cast<int>(state.range(3));
  const int seeds = env_int("ROUTINE_BENCH_SEEDS", 3, 1);
  std::vector<Sample> samples;
  double settle_total = 0;
  double led_total = 0;
  for (auto _ : state) {
    for (int s = 1; s <= seeds; ++s) {
      const auto seed = static_cast<uint64_t>(s);
      const auto scenario = scenario_for(setup, seed, 3600);
      RoutineMesh mesh(setup, seed, scenario);
      settle_total += mesh.settle();
      mesh::core::Rng rng(seed * 131 + 5);
      std::set<size_t> down;
      TimePoint restart_at = TimePoint::max();  // of the nodes in `down`
      // Runs for `step`, bringing the crashed nodes back once their downtime is over.
      const auto advance = [&](mesh::core::Duration step) {
        mesh.sim->run_until(mesh.sim->simulator().now() + step);
        if (mesh.sim->simulator().now() < restart_at) return;
        for (size_t victim : down) mesh.sim->restart(victim);
        down.clear();
        restart_at = TimePoint::max();
      };
      std::vector<Sample> seed_samples;
      for (size_t r = 0; r < mesh.routines.size(); ++r) {
        if (churn > 0) {
          down = churn_victims(mesh.sim->topology(), churn, rng);
          for (size_t victim : down) mesh.sim->crash(victim);
          mesh.sim->run_until(mesh.sim->simulator().now() + seconds(kChurnLead_s));
          restart_at = mesh.sim->simulator().now() + seconds(churn_downtime_s() - kChurnLead_s);
        }
        led_total += mesh::bench::led_device_shares(*mesh.sim, mesh.devices.devices).first /
                     static_cast<double>(mesh.routines.size());
        seed_samples.push_back(trigger_once(mesh, r, advance));
        // With churn, every trigger starts from a whole mesh that settled again.
        while (!down.empty()) advance(milliseconds(100));
        if (churn > 0) {
          const TimePoint settle_by = mesh.sim->simulator().now() + seconds(kSettleCap_s);
          while (!mesh.ready() && mesh.sim->simulator().now() < settle_by) advance(seconds(1));
        }
      }
      write_delays("client", setup, churn, seed, seed_samples);
      samples.insert(samples.end(), seed_samples.begin(), seed_samples.end());
    }
  }
  report_delays(state, samples, settle_total / seeds, led_total / seeds);
  if (churn > 0) {
    const double restart_ms = 1000.0 * (churn_downtime_s() - kChurnLead_s);
    const auto before = std::count_if(samples.begin(), samples.end(),
                                      [restart_ms](const Sample& x) { return x.delay >= 0 && x.delay < restart_ms; });
    state.counters["before_restart_share"] =
        samples.empty() ? 0 : static_cast<double>(before) / static_cast<double>(samples.size());
  }
}

// Gradual churn: `victims` in a crash order (drawn with `rng`) after each
// step of which the live nodes stay connected (where one exists).
std::vector<size_t> crash_order(const mesh::sim::Topology& topology, std::set<size_t> victims,
                                mesh::core::Rng& rng) {
  std::vector<size_t> order;
  std::set<size_t> down;
  while (!victims.empty()) {
    std::vector<size_t> fits;
    for (size_t v : victims) {
      std::set<size_t> next = down;
      next.insert(v);
      if (topology.connected_without(next)) fits.push_back(v);
    }
    if (fits.empty()) fits.assign(victims.begin(), victims.end());
    const size_t v = fits[rng.below(fits.size())];
    order.push_back(v);
    down.insert(v);
    victims.erase(v);
  }
  return order;
}

// Groups whose newest serving instance still counts a crashed node among its
// members (not yet re-selected away from it), and groups with no serving
// instance at all.
std::pair<int, int> groups_not_repaired(mesh::sim::MeshSim& sim, const std::set<size_t>& down) {
  std::set<mesh::core::NodeId> crashed;
  for (size_t n : down) crashed.insert(sim.id_of(n));
  std::map<std::string, const mesh::kgroup::GroupConfig*> newest;
  std::set<std::string> known;
  for (size_t n = 0; n < sim.size(); ++n) {
    mesh::agent::Node* node = sim.node(n);
    if (node == nullptr) continue;
    for (mesh::kgroup::GroupReplica* replica : node->kgroups().host().replicas()) {
      const auto& config = replica->config();
      const std::string target = config.target.to_string();
      known.insert(target);
      if (!replica->serving()) continue;
      auto& best = newest[target];
      if (best == nullptr || std::make_pair(config.epoch, config.generation) > std::make_pair(best->epoch, best->generation)) {
        best = &config;
      }
    }
  }
  int with_crashed = 0;
  for (const auto& [target, config] : newest) {
    with_crashed += std::any_of(config->members.begin(), config->members.end(),
                                [&](mesh::core::NodeId m) { return crashed.count(m) != 0; });
  }
  return {with_crashed, static_cast<int>(known.size() - newest.size())};
}

// BM_ClientDelayGradual/TOPOLOGY/DEVICES/STRATEGY/CHURN: the same client
// delay (trigger_once, report_delays) under gradual churn. Over a window of
// ROUTINE_BENCH_GRADUAL_S (400) virtual seconds a trigger fires at every
// kTriggerPeriod_s slot (routines in turn; a slot whose predecessor has not
// ended yet is skipped, counted in skipped_slots). CHURN percent of the nodes
// (drawn once, the rest connected; crashed in an order that keeps the live
// nodes connected) crash one at a time, evenly spread over the window
// (spacing = window / crashes: 40 s for 10 of 25 nodes) at a random instant
// within the first trigger period (or spacing, if shorter) of their share,
// and stay down. CHURN 0 is
// the same schedule without crashes: the baseline, same seeds and routines.
void BM_ClientDelayGradual(benchmark::State& state) {
  mesh::core::log_to_null();
  const Setup setup = delay_setup(state);
  const int churn = static_cast<int>(state.range(3));
  const int seeds = env_int("ROUTINE_BENCH_SEEDS", 3, 1);
  const int window_s = env_int("ROUTINE_BENCH_GRADUAL_S", 400, kTriggerPeriod_s);
  std::vector<Sample> samples;
  double settle_total = 0;
  double led_total = 0;
  int slots = 0;
  int skipped = 0;
  int crashes = 0;
  int unrepaired = 0;  // groups still holding an earlier crashed member, summed at each crash
  int unserved = 0;    // groups with no serving instance, summed at each crash
  double spacing_s = 0;
  for (auto _ : state) {
    for (int s = 1; s <= seeds; ++s) {
      const auto seed = static_cast<uint64_t>(s);
      const auto scenario = scenario_for(setup, seed, 3600);
      RoutineMesh mesh(setup, seed, scenario);
      settle_total += mesh.settle();
      mesh::core::Rng rng(seed * 131 + 5);
      const TimePoint start = mesh.sim->simulator().now();
      std::vector<std::pair<TimePoint, size_t>> schedule;  // crash instants, in order
      if (churn > 0) {
        const auto order = crash_order(mesh.sim->topology(), churn_victims(mesh.sim->topology(), churn, rng), rng);
        const auto spacing = milliseconds(int64_t{window_s} * 1000 / static_cast<int64_t>(order.size()));
        spacing_s = mesh::core::to_millis(spacing) / 1000.0;
        const auto jitter_ms = static_cast<uint64_t>(std::min<int64_t>(kTriggerPeriod_s * 1000, spacing.count()));
        for (size_t j = 0; j < order.size(); ++j) {
          const auto jitter = milliseconds(static_cast<int64_t>(rng.below(jitter_ms)));
          schedule.emplace_back(start + spacing * static_cast<int64_t>(j) + jitter, order[j]);
        }
      }
      size_t next_crash = 0;
      std::set<size_t> down;
      const auto run_to = [&](TimePoint until) {
        while (next_crash < schedule.size() && schedule[next_crash].first <= until) {
          mesh.sim->run_until(schedule[next_crash].first);
          const auto [with_crashed, none] = groups_not_repaired(*mesh.sim, down);
          unrepaired += with_crashed;
          unserved += none;
          mesh.sim->crash(schedule[next_crash].second);
          down.insert(schedule[next_crash].second);
          ++crashes;
          ++next_crash;
        }
        mesh.sim->run_until(until);
      };
      const auto advance = [&](mesh::core::Duration step) { run_to(mesh.sim->simulator().now() + step); };
      std::vector<Sample> seed_samples;
      for (int slot = 0; slot < window_s / kTriggerPeriod_s; ++slot) {
        ++slots;
        const TimePoint at = start + seconds(int64_t{slot} * kTriggerPeriod_s);
        if (mesh.sim->simulator().now() > at) {
          ++skipped;
          continue;
        }
        run_to(at);
        const size_t r = static_cast<size_t>(slot) % mesh.routines.size();
        led_total += mesh::bench::led_device_shares(*mesh.sim, mesh.devices.devices).first;
        seed_samples.push_back(trigger_once(mesh, r, advance));
      }
      run_to(start + seconds(window_s));  // every scheduled crash happens, even after the last trigger
      write_delays("client_gradual", setup, churn, seed, seed_samples);
      samples.insert(samples.end(), seed_samples.begin(), seed_samples.end());
    }
  }
  report_delays(state, samples, settle_total / seeds, samples.empty() ? 0 : led_total / static_cast<double>(samples.size()));
  state.counters["slots"] = slots;
  state.counters["triggers"] = static_cast<double>(samples.size());
  state.counters["skipped_slots"] = static_cast<double>(skipped);
  state.counters["window_s"] = window_s;
  if (churn > 0) {
    state.counters["crashes"] = crashes;
    state.counters["spacing_s"] = spacing_s;
    state.counters["unrepaired_at_crash"] = crashes == 0 ? 0 : static_cast<double>(unrepaired) / crashes;
    state.counters["unserved_at_crash"] = crashes == 0 ? 0 : static_cast<double>(unserved) / crashes;
  }
}

void BM_SyncDelay(benchmark::State& state) {
  mesh::core::log_to_null();
  Setup setup = delay_setup(state);
  setup.routines = 1;
  const int seeds = env_int("ROUTINE_BENCH_SEEDS", 3, 1);
  std::vector<Sample> samples;
  double settle_total = 0;
  double led_total = 0;
  for (auto _ : state) {
    for (int s = 1; s <= seeds; ++s) {
      const auto seed = static_cast<uint64_t>(s);
      const auto scenario = scenario_for(setup, seed, 3600);
      RoutineMesh mesh(setup, seed, scenario);
      settle_total += mesh.settle();
      led_total += mesh::bench::led_device_shares(*mesh.sim, mesh.devices.devices).first;
      const std::string& id = mesh.routines[0].id;
      for (int run = 0; run < 2; ++run) mesh.sim->node(0)->routines().run(id, false, seconds(60), [](const auto&) {});
      // Both invocations committed, oldest first.
      const TimePoint give_up = mesh.sim->simulator().now() + seconds(kTriggerTimeout_s);
      std::vector<std::string> holders;
      while (holders.size() < 2 && mesh.sim->simulator().now() < give_up) {
        mesh.sim->run_until(mesh.sim->simulator().now() + milliseconds(1));
        holders.clear();
        if (const auto* routine_state = mesh.routine_state(0)) {
          for (const auto& [seq, invocation] : routine_state->invocations()) {
            holders.push_back(mesh::routine::holder_name(id, invocation));
          }
        }
      }
      std::optional<TimePoint> released;
      bool held = false;
      while (holders.size() == 2 && !released && mesh.sim->simulator().now() < give_up) {
        mesh.sim->run_until(mesh.sim->simulator().now() + milliseconds(1));
        const bool holds = mesh.holds_lock(0, holders[0]);
        if (held && !holds) released = mesh.sim->simulator().now();
        held = held || holds;
      }
      std::optional<TimePoint> actuated;
      while (released && !actuated && mesh.sim->simulator().now() < give_up) {
        mesh.sim->run_until(mesh.sim->simulator().now() + milliseconds(20));
        actuated = mesh.first_actuation(0, holders[1] + "#", TimePoint{});
      }
      Sample sample;
      if (released && actuated) sample.delay = mesh::core::to_millis(*actuated - *released);
      write_delays("sync", setup, 0, seed, {sample});
      samples.push_back(sample);
    }
  }
  report_delays(state, samples, settle_total / seeds, led_total / seeds);
}

void BM_RoutineTraffic(benchmark::State& state) {
  mesh::core::log_to_null();
  Setup setup;
  setup.topology = "random";
  setup.nodes = env_int("ROUTINE_BENCH_TRAFFIC_NODES", 50, 9);
  setup.plugs = 64;
  setup.routines = static_cast<int>(state.range(0));
  setup.devices_per_routine = 3;
  setup.central = state.range(1) == 1;
  setup.coalesce_heartbeats = state.range(2) == 1;
  const int measure_s = env_int("ROUTINE_BENCH_MEASURE_S", 60, 10);
  const auto nodes = static_cast<size_t>(setup.nodes);
  for (auto _ : state) {
    const uint64_t seed = 1;
    const auto scenario = scenario_for(setup, seed, 3600);
    RoutineMesh mesh(setup, seed, scenario);
    const int settled = mesh.settle();
    const double led_share = mesh::bench::led_device_shares(*mesh.sim, mesh.devices.devices).first;
    const auto tap_before = mesh.tap->bytes();
    mesh.tap->start_window();
    const auto io_before = mesh.devices.io_bytes_by_node;
    const TimePoint start = mesh.sim->simulator().now();
    // Each routine's sensor goes on at its own offset in every period, off half a period later.
    for (size_t r = 0; r < mesh.routines.size(); ++r) {
      const auto offset =
          milliseconds(static_cast<int64_t>(r) * kTriggerPeriod_s * 1000 / static_cast<int64_t>(mesh.routines.size()));
      for (int t = 0; t < measure_s; t += kTriggerPeriod_s) {
        EmulatedDevice* sensor = mesh.sensors[r];
        mesh.sim->simulator().at(start + seconds(t) + offset, [sensor] { sensor->set_state({{"motion", true}}); });
        mesh.sim->simulator().at(start + seconds(t) + offset + seconds(kTriggerPeriod_s / 2), [sensor] {
          sensor->set_state({{"motion", false}});
        });
      }
    }
    uint64_t ok_before = 0;
    for (size_t r = 0; r < mesh.routines.size(); ++r) {
      if (const auto* s = mesh.routine_state(r)) {
        for (const auto& [seq, inv] : s->invocations()) ok_before += inv.outcome == mesh::proto::INVOCATION_OK;
      }
    }
    mesh.sim->run_until(start + seconds(measure_s));
    uint64_t ok_after = 0;
    for (size_t r = 0; r < mesh.routines.size(); ++r) {
      if (const auto* s = mesh.routine_state(r)) {
        for (const auto& [seq, inv] : s->invocations()) ok_after += inv.outcome == mesh::proto::INVOCATION_OK;
      }
    }

    const auto window = static_cast<double>(measure_s);
    std::vector<double> total(nodes), background(nodes), foreground(nodes);
    std::map<std::string, double> by_class;
    for (size_t n = 0; n < nodes; ++n) {
      std::map<std::string, uint64_t> sent = mesh.tap->bytes()[n];
      for (const auto& [kind, bytes] : tap_before[n]) sent[kind] -= bytes;
      sent["device_io"] = mesh.devices.io_bytes_by_node[n] - io_before[n];
      for (const auto& [kind, bytes] : sent) {
        const double per_s = static_cast<double>(bytes) / window;
        by_class[kind] += per_s / static_cast<double>(nodes);
        total[n] += per_s;
        (TrafficTap::background(kind) ? background[n] : foreground[n]) += per_s;
      }
      if (auto out = mesh::bench::open_output("ROUTINE_BENCH_OUT", "routine_traffic.csv",
                                              "nodes,routines,mode,seed,node,class,bytes_per_s");
          out.is_open()) {
        for (const auto& [kind, bytes] : sent) {
          out << setup.nodes << "," << setup.routines << "," << mode_name(setup) << ","
              << seed << "," << n << "," << kind << "," << static_cast<double>(bytes) / window << "\n";
        }
      }
    }
    const auto mean = [&](const std::vector<double>& v) {
      return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(nodes);
    };
    const auto max = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
    state.counters["bytes_per_node_s_mean"] = mean(total);
    state.counters["bytes_per_node_s_max"] = max(total);
    state.counters["background_mean"] = mean(background);
    state.counters["background_max"] = max(background);
    state.counters["foreground_mean"] = mean(foreground);
    state.counters["foreground_max"] = max(foreground);
    state.counters["heartbeat_share"] = by_class["kgroup_heartbeat"] / mean(total);
    if (auto out = mesh::bench::open_output(
            "ROUTINE_BENCH_OUT", "routine_heartbeats.csv",
            "nodes,routines,mode,coalesce,seed,heartbeats_per_s,heartbeat_requests_per_s,peer_pairs");
        out.is_open()) {
      out << setup.nodes << "," << setup.routines << "," << mode_name(setup) << ","
          << setup.coalesce_heartbeats << "," << seed << ","
          << static_cast<double>(mesh.tap->heartbeats_carried()) / window << ","
          << static_cast<double>(mesh.tap->heartbeat_requests()) / window << "," << mesh.tap->heartbeat_pairs() << "\n";
    }
    state.counters["heartbeats_per_s"] = static_cast<double>(mesh.tap->heartbeats_carried()) / window;
    state.counters["heartbeat_requests_per_s"] = static_cast<double>(mesh.tap->heartbeat_requests()) / window;
    state.counters["heartbeat_peer_pairs"] = static_cast<double>(mesh.tap->heartbeat_pairs());
    state.counters["unparsed_share"] = by_class["unparsed"] / mean(total);
    state.counters["invocations_ok"] = static_cast<double>(ok_after - ok_before);
    state.counters["settle_s"] = settled;
    state.counters["led_share"] = led_share;
    state.counters["measure_s"] = measure_s;
  }
}

void delay_args(benchmark::internal::Benchmark* b) {
  const std::vector<int> devices = full_run() ? std::vector<int>{1, 2, 4, 8, 16} : std::vector<int>{1, 4};
  for (int topology : {0, 1, 2}) {
    for (int d : devices) {
      for (int strategy : {0, 1}) b->Args({topology, d, strategy, 0});
    }
  }
  for (int d : devices) b->Args({0, d, 0, 40});
}
void gradual_args(benchmark::internal::Benchmark* b) {
  const std::vector<int> devices = full_run() ? std::vector<int>{1, 2, 4, 8, 16} : std::vector<int>{1, 4};
  for (int d : devices) {
    for (int churn : {0, 40}) b->Args({0, d, 0, churn});
  }
}
void sync_args(benchmark::internal::Benchmark* b) {
  const std::vector<int> devices = full_run() ? std::vector<int>{1, 2, 4, 8, 16} : std::vector<int>{1, 4};
  for (int d : devices) {
    for (int strategy : {0, 1}) b->Args({0, d, strategy});
  }
}
void traffic_args(benchmark::internal::Benchmark* b) {
  const std::vector<int> routines = full_run() ? std::vector<int>{5, 10, 20, 40} : std::vector<int>{5, 20};
  for (int r : routines) {
    for (int coalesce : {1, 0}) b->Args({r, 0, coalesce});
    b->Args({r, 1, 1});  // k = 1: no followers, nothing to coalesce
  }
}

BENCHMARK(BM_ClientDelay)->Apply(delay_args)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_ClientDelayGradual)->Apply(gradual_args)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_SyncDelay)->Apply(sync_args)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_RoutineTraffic)->Apply(traffic_args)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
