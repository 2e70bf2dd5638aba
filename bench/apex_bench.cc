// APEX's two execution strategies (apex.md §7-§9) on whole agents in
// meshsim: conservative (our SLA: every lock of the combo taken one at a
// time in device id order before the first command, routine/routine_combo.h)
// against aggressive (`lock = "aggressive"`: every lock asked for at once,
// wound-wait, routine/routine_leaders.h). Every run is virtual time; the
// conservative point of the same PEG, topology and seeds is the baseline.
//
// The PEG (apex.md §8, Fig. 9 a): DEPTH rows of WIDTH plugs and a subject
// plug `s`. Rules: `s` on requires every row-1 plug on; each row-r plug on
// requires the row-(r+1) plug of its column on (column chains, not every
// plug of the next row: a plan is one committed step of at most 480 bytes,
// routine_leaders.cc kMaxPlanBytes, and with every row-(r+1) plug required
// by all WIDTH rules of row r each precondition command lists WIDTH rule
// ids, so a 2x4 PEG already did not fit; for the same reason plug and rule
// ids are two characters: the row as a letter, a = 1, then the column,
// e.g. `c2`, and a plug's rule has its id). Every plug starts off, so the
// routine `apex` (one command: `s` on) deduces DEPTH x WIDTH precondition
// commands, deepest row first, then the subject. The routine `reset`
// (always conservative) switches everything off again in a rule-respecting
// order: the subject, then row 1, row 2, ... (an off command never needs a
// precondition, and turning a row off after the row above it never leaves
// a rule's `when` true while its requirement is false).
// Device groups are one device each (clusters of one plug), like the
// paper's one object per variable.
//
// BM_ApexLatency/DEPTH/WIDTH/STRATEGY/TOPOLOGY (§9.2, §9.3; STRATEGY 0
//   conservative, 1 aggressive; TOPOLOGY 0 star, 1 line): `apex` run by hand,
//   nothing else active, then `reset`. Latency is from the invocation's
//   trigger (committed in its routine group: the leader starts reserving
//   right after) to the subject command's outcome committed there (the
//   paper's "last execution response"). Star: kStarNodes nodes all linked to
//   each other (a random layout whose topology seed is the first at or
//   after the run's seed that links every pair), so every group leader is at
//   most one hop from any other. Line: a line of 3 x DEPTH + 2 nodes, the
//   subject at node 0 and row r's plugs at node 3r (kLineHopsPerRow: LSH puts
//   a device's group near the device, but a group of k = 3 spans three
//   nodes, so one node per row left every group within a hop or two); where
//   the routine's own group lands is up to k-group selection, so hops_mean
//   reports the measured hops from the routine's leader to the PEG's device
//   group leaders.
// BM_ApexContention/STRATEGY/CONTENTION/FAILURE (§8, Fig. 8 analog, 5x4 PEG,
//   star): per trial, `reset`, then `apex` at APEX_BENCH_WINDOW_MS and
//   CONTENTION contender invocations at uniform random instants in twice that
//   window, each of a random contender routine c<plug> (one command:
//   that PEG plug on, so its own PEG is the rows below it) from a random
//   node. Contenders only switch plugs on, so no rule is ever broken.
//   FAILURE is the per-mille chance that an actuation (not an undo, not a
//   reset command) is lost: the driver reports a timeout after one device
//   round trip instead of actuating (the command fails, a must command
//   aborts the invocation and rolls back).
//
// Counters. Latency: latency_p50_ms, latency_mean_ms, locks_p50_ms (trigger
// to EXECUTING: the conservative reservation stage; about 0 for aggressive),
// plan_mean (precondition commands per run: DEPTH x WIDTH), hops_mean,
// samples, completed_share, settle_s (virtual seconds until every device was
// led and every routine group served; kSettleCap_s: never). Contention (over the `apex` invocations):
// exec_success (ended OK among those that entered EXECUTING), wounded_share
// (aborted with a `wounded` reason: lost to contention), failure_abort_share
// (aborted for a failed command), rollback_cost (commands undone / (DEPTH x
// WIDTH), mean), never_executed_share (ended before EXECUTING), plan_mean,
// contenders_ok_share, latency_p50_ms of the OK ones.
//
// Environment: APEX_BENCH_SEEDS (3) seeds per point, APEX_BENCH_RUNS (5)
// latency samples per seed, APEX_BENCH_TRIALS (10) contention trials per
// seed, APEX_BENCH_FULL=1 every width 1..4 (without it: 1 and 4),
// APEX_BENCH_POLL_MS (the agent's default, 200) how often a routine leader
// asks for a pending lock or command outcome (each command's latency is
// about one such interval), APEX_BENCH_DELAY_MS (kLinkDelayMs, 2) per-hop
// delay and APEX_BENCH_LOSS_PERCENT (0) per-hop loss (apex.md §9.4's
// background traffic, as slower and lossier links), APEX_BENCH_WINDOW_MS
// (kContentionWindow_ms, 500) the contention window (a short one makes
// contenders race `apex` for the same locks),
// APEX_BENCH_OUT=DIR writes DIR/apex_latency.csv and DIR/apex_contention.csv
// (one row per invocation); bench/apex_plot.py draws them.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/bench_output.h"
#include "bench/mesh_probes.h"
#include "core/log.h"
#include "core/rng.h"
#include "routine/device_driver.h"
#include "routine/emulated_device.h"
#include "routine/precondition_rule.h"
#include "routine/routine_group_state.h"
#include "routine/routine_model.h"
#include "sim/mesh_sim.h"
#include "sim/scenario.h"

namespace {

using mesh::bench::quantile;
using mesh::core::TimePoint;
using mesh::routine::Attributes;
using mesh::routine::DeviceSpec;
using mesh::routine::EmulatedDevice;
using mesh::routine::LockStrategy;
using mesh::routine::RoutineGroupState;
using mesh::routine::RoutineSpec;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kLinkDelayMs = 2;  // per hop, as routine_bench
constexpr int kStarNodes = 5;
// Line: row r's plugs sit at node kLineHopsPerRow x r, the subject at node 0.
constexpr int kLineHopsPerRow = 3;
constexpr int kSettleCap_s = 200;
constexpr int kRunTimeout_s = 60;
// Contention: `apex` starts this long after the trial does (unless
// APEX_BENCH_WINDOW_MS says otherwise); contenders fall anywhere in twice
// this window, before or after it.
constexpr int kContentionWindow_ms = 500;
constexpr int kContentionDepth = 5;
constexpr int kContentionWidth = 4;

int env_int(const char* name, int fallback, int minimum) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::max(minimum, std::atoi(value)) : fallback;
}

struct ApexSetup {
  int depth = kContentionDepth;
  int width = kContentionWidth;
  LockStrategy strategy = LockStrategy::sla;
  bool line = false;
  bool contenders = false;  // define the contender routines c<plug>
  double failure = 0;       // chance an actuation is lost
};

std::string strategy_name(LockStrategy strategy) {
  return strategy == LockStrategy::aggressive ? "aggressive" : "conservative";
}
std::string plug(int row, int col) { return fmt::format("{}{}", static_cast<char>('a' + row - 1), col); }

// Emulated devices whose forward actuations are lost with a fixed chance:
// the driver then answers with a timeout after one read's round trip (the
// inner driver's own timer, so nothing runs after the driver is gone). Undo
// and reset commands always go through: rollback cost counts what had to
// be undone, and every trial starts from a clean PEG.
class LossyDriver : public mesh::routine::DeviceDriver {
 public:
  LossyDriver(std::unique_ptr<DeviceDriver> inner, double failure, mesh::core::Rng& rng)
      : inner_(std::move(inner)), failure_(failure), rng_(rng) {}
  void read(Callback callback) override { inner_->read(std::move(callback)); }
  void actuate(const Attributes& values, const std::string& id, Callback callback) override {
    const bool exempt = id.starts_with("reset#") || id.ends_with(".undo");
    if (exempt || !rng_.chance(failure_)) {
      inner_->actuate(values, id, std::move(callback));
      return;
    }
    inner_->read([callback = std::move(callback)](const mesh::routine::DriverResult&) {
      callback(mesh::core::Unexpected(
          mesh::routine::DriverError{mesh::routine::DriverFailure::timeout, "apex_bench: actuation lost"}));
    });
  }
  bool watch(Callback callback) override { return inner_->watch(std::move(callback)); }

 private:
  std::unique_ptr<DeviceDriver> inner_;
  double failure_;
  mesh::core::Rng& rng_;
};

class LossyFactory : public mesh::routine::DriverFactory {
 public:
  LossyFactory(mesh::core::Env& env, const std::vector<std::unique_ptr<EmulatedDevice>>& devices, double failure,
               mesh::core::Rng& rng)
      : inner_(env), failure_(failure), rng_(rng) {
    for (const auto& d : devices) inner_.add(*d);
  }
  mesh::core::Expected<std::unique_ptr<mesh::routine::DeviceDriver>, std::string> open(
      const DeviceSpec& spec) override {
    auto driver = inner_.open(spec);
    if (!driver) return driver;
    return std::unique_ptr<mesh::routine::DeviceDriver>(
        std::make_unique<LossyDriver>(std::move(*driver), failure_, rng_));
  }

 private:
  mesh::routine::EmulatedDriverFactory inner_;
  double failure_;
  mesh::core::Rng& rng_;
};

RoutineSpec manual_routine(const std::string& id, const std::vector<std::pair<std::string, bool>>& commands) {
  RoutineSpec spec;
  spec.id = id;
  spec.trigger_text = "manual";
  spec.trigger = mesh::routine::build_trigger(spec.trigger_text, "", {}).value();
  for (const auto& [device, power] : commands) {
    mesh::routine::RoutineCommand command;
    command.device = device;
    command.values = {{"power", power}};
    spec.commands.push_back(command);
  }
  return spec;
}

mesh::sim::Scenario scenario_for(const ApexSetup& setup, uint64_t seed) {
  mesh::sim::Scenario scenario;
  scenario.source = "apex-bench";
  scenario.link.delay_ms = env_int("APEX_BENCH_DELAY_MS", kLinkDelayMs, 1);
  scenario.link.loss = env_int("APEX_BENCH_LOSS_PERCENT", 0, 0) / 100.0;
  scenario.run.duration_s = 3600;
  if (setup.line) {
    scenario.topology.kind = "line";
    scenario.topology.nodes = kLineHopsPerRow * setup.depth + 2;
    return scenario;
  }
  scenario.topology.kind = "random";
  scenario.topology.nodes = kStarNodes;
  constexpr size_t kAllPairs = kStarNodes * (kStarNodes - 1) / 2;
  for (uint64_t layout = seed;; ++layout) {
    scenario.topology.seed = layout;
    if (scenario.build_topology().edges.size() == kAllPairs) return scenario;
  }
}

// One seed's mesh with the PEG, its routines and rules.
struct ApexMesh {
  ApexSetup setup;
  std::vector<std::unique_ptr<EmulatedDevice>> devices;  // subject first, then the PEG row by row
  std::vector<DeviceSpec> catalog;
  std::vector<RoutineSpec> routines;
  std::vector<mesh::routine::PreconditionRuleSpec> rules;
  std::vector<std::unique_ptr<LossyFactory>> factories;
  mesh::core::Rng loss_rng;
  std::unique_ptr<mesh::sim::MeshSim> sim;

  ApexMesh(ApexSetup setup_in, uint64_t seed) : setup(std::move(setup_in)), loss_rng(seed * 6007 + 3) {
    const auto scenario = scenario_for(setup, seed);
    const auto positions = scenario.build_topology().positions;
    const auto add_plug = [&](const std::string& id, size_t node) {
      DeviceSpec spec;
      spec.id = id;
      spec.kind = mesh::routine::DeviceKind::plug;
      spec.location = positions[node % positions.size()];
      spec.location[1] += 0.5;
      spec.driver = "emulated://" + id;
      catalog.push_back(spec);
      devices.push_back(std::make_unique<EmulatedDevice>(spec, Attributes{{"power", false}}));
    };
    add_plug("s", 0);
    for (int row = 1; row <= setup.depth; ++row) {
      for (int col = 1; col <= setup.width; ++col) {
        const auto star_node = static_cast<size_t>((row - 1) * setup.width + col);
        add_plug(plug(row, col), setup.line ? static_cast<size_t>(kLineHopsPerRow * row) : star_node);
      }
    }
    std::vector<std::string> row1_on;
    for (int col = 1; col <= setup.width; ++col) row1_on.push_back(plug(1, col) + ".power == on");
    rules.push_back({"s", "s.power == on", row1_on});
    for (int row = 1; row < setup.depth; ++row) {
      for (int col = 1; col <= setup.width; ++col) {
        rules.push_back({plug(row, col), plug(row, col) + ".power == on", {plug(row + 1, col) + ".power == on"}});
      }
    }
    routines.push_back(manual_routine("apex", {{"s", true}}));
    std::vector<std::pair<std::string, bool>> all_off = {{"s", false}};
    for (int row = 1; row <= setup.depth; ++row) {
      for (int col = 1; col <= setup.width; ++col) all_off.emplace_back(plug(row, col), false);
    }
    routines.push_back(manual_routine("reset", all_off));
    routines.back().lock_strategy = LockStrategy::sla;
    if (setup.contenders) {
      for (int row = 1; row <= setup.depth; ++row) {
        for (int col = 1; col <= setup.width; ++col) {
          routines.push_back(manual_routine("c" + plug(row, col), {{plug(row, col), true}}));
        }
      }
    }

    mesh::sim::MeshSim::Options options;
    options.configure = [this](mesh::agent::NodeConfig& config) {
      config.kgroup.selection.k = 3;
      config.kgroup.selection.mode = mesh::kgroup::SelectionMode::lsh;
      config.kgroup.selection.clusters.devices_per_cluster = 1;
      config.devices.catalog = catalog;
      config.devices.routines = routines;
      config.devices.preconditions = rules;
      config.devices.catalog_digest = "apex-bench";
      config.routines.leaders.strategy = setup.strategy;
      // APEX's strategies are lock strategies, which EV (the default model,
      // 18ecc77) does not use: its serial keys order the locks. Without this,
      // both rows measured EV.
      config.routines.leaders.visibility = mesh::routine::Visibility::psv;
      if (const int poll_ms = env_int("APEX_BENCH_POLL_MS", 0, 0); poll_ms > 0) {
        config.routines.leaders.poll_interval = milliseconds(poll_ms);
      }
    };
    options.drivers = [this](size_t, mesh::core::Env& env) {
      factories.push_back(std::make_unique<LossyFactory>(env, devices, setup.failure, loss_rng));
      return factories.back().get();
    };
    sim = std::make_unique<mesh::sim::MeshSim>(scenario, seed, options);
  }

  // Runs until every device is led and every routine group serves (or
  // kSettleCap_s); returns the virtual second it stopped at.
  int settle() {
    int second = 2;
    while (second < kSettleCap_s && !ready()) sim->run_until(TimePoint(seconds(++second)));
    return second;
  }
  bool ready() {
    if (mesh::bench::led_device_shares(*sim, devices).first < 1.0) return false;
    return std::all_of(routines.begin(), routines.end(), [this](const RoutineSpec& spec) {
      return !mesh::bench::serving_replicas(*sim, "routine:" + spec.id).empty();
    });
  }
  const RoutineGroupState* routine_state(const std::string& id) {
    const auto replicas = mesh::bench::serving_replicas(*sim, "routine:" + id);
    if (replicas.empty()) return nullptr;
    return dynamic_cast<const RoutineGroupState*>(&replicas.front()->state_machine());
  }
  // Runs `routine` by hand from `node`; `seq` is set once its group committed it.
  void start(const std::string& routine, size_t node, std::shared_ptr<std::optional<uint64_t>> seq) {
    if (mesh::agent::Node* agent = sim->node(node)) {
      agent->routines().run(routine, false, seconds(kRunTimeout_s), [seq](const auto& result) {
        if (result) *seq = result->seq();
      });
    }
  }
  const RoutineGroupState::Invocation* invocation(const std::string& routine, uint64_t seq) {
    const RoutineGroupState* state = routine_state(routine);
    if (state == nullptr) return nullptr;
    const auto it = state->invocations().find(seq);
    return it == state->invocations().end() ? nullptr : &it->second;
  }
  // Invocations started in one go (routine, its seq once committed); runs
  // until every one ended, or kRunTimeout_s after `since`.
  using Started = std::vector<std::pair<std::string, std::shared_ptr<std::optional<uint64_t>>>>;
  void wait_done(const Started& started, TimePoint since) {
    const TimePoint give_up = since + seconds(kRunTimeout_s);
    const auto all_done = [&] {
      return std::all_of(started.begin(), started.end(), [&](const auto& entry) {
        if (!*entry.second) return false;
        const auto* inv = invocation(entry.first, **entry.second);
        return inv != nullptr && inv->done();
      });
    };
    while (!all_done() && sim->simulator().now() < give_up) {
      sim->run_until(sim->simulator().now() + milliseconds(20));
    }
  }
  // `reset` from node 0, to its end, then a second for the device groups'
  // polls; returns whether every plug is off again.
  bool reset() {
    auto seq = std::make_shared<std::optional<uint64_t>>();
    const TimePoint now = sim->simulator().now();
    start("reset", 0, seq);
    wait_done({{"reset", seq}}, now);
    sim->run_until(sim->simulator().now() + seconds(1));
    return std::all_of(devices.begin(), devices.end(),
                       [](const auto& d) { return d->state().at("power") == mesh::routine::Value(false); });
  }
  // Mean hops from `apex`'s group leader to the PEG's device group leaders
  // (-1: a leader not found).
  double hops_mean() {
    const auto node_of = [this](const std::string& target) -> std::optional<size_t> {
      const auto replicas = mesh::bench::serving_replicas(*sim, target);
      if (replicas.empty()) return std::nullopt;
      for (size_t n = 0; n < sim->size(); ++n) {
        if (sim->id_of(n) == replicas.front()->leader()) return n;
      }
      return std::nullopt;
    };
    const auto pivot = node_of("routine:apex");
    mesh::agent::Node* any = sim->node(0);
    if (!pivot || any == nullptr) return -1;
    const auto hops = sim->topology().hop_distances(static_cast<int>(*pivot));
    double total = 0;
    for (size_t d = 1; d < devices.size(); ++d) {
      const auto leader = node_of(any->kgroups().selector().device_group(devices[d]->spec().id).to_string());
      if (!leader) return -1;
      total += hops[*leader];
    }
    return total / static_cast<double>(devices.size() - 1);
  }
};

// What one `apex` invocation did; latency and locks in ms, negative when
// not reached.
struct Run {
  bool ended = false;
  bool executed = false;  // entered EXECUTING
  bool ok = false;
  bool wounded = false;
  bool failed_command = false;
  size_t plan = 0;
  size_t undone = 0;
  double latency = -1;
  double locks = -1;
};

Run read_run(const RoutineGroupState::Invocation* invocation) {
  Run run;
  if (invocation == nullptr || !invocation->done()) return run;
  run.ended = true;
  run.executed = invocation->locked_at_us > 0;
  run.ok = invocation->outcome == mesh::proto::INVOCATION_OK;
  run.wounded = invocation->abort_reason.starts_with("wounded");
  run.failed_command = !invocation->abort_reason.empty() && !run.wounded;
  run.plan = invocation->plan ? invocation->plan->size() : 0;
  run.undone = invocation->undone.size();
  if (run.executed) run.locks = static_cast<double>(invocation->locked_at_us - invocation->triggered_at_us) / 1000.0;
  // The subject command is the last of the expanded list: the plan's commands, then it.
  const auto subject = invocation->commands.find(static_cast<uint32_t>(run.plan));
  if (run.ok && subject != invocation->commands.end()) {
    run.latency = static_cast<double>(subject->second.done_at_us - invocation->triggered_at_us) / 1000.0;
  }
  return run;
}

double mean(const std::vector<double>& values) {
  return values.empty() ? 0 : std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

// One row per invocation: the point's columns (`columns` names them), the
// seed, then what the invocation did.
void write_runs(const char* file, const std::string& columns, const std::string& point, uint64_t seed,
                const std::vector<Run>& runs) {
  auto out = mesh::bench::open_output(
      "APEX_BENCH_OUT", file,
      columns + ",seed,ended,executed,ok,wounded,failed_command,plan,undone,latency_ms,locks_ms");
  if (!out.is_open()) return;
  const auto cell = [](double ms) { return ms < 0 ? std::string() : fmt::format("{:.3f}", ms); };
  for (const Run& r : runs) {
    out << point << "," << seed << "," << r.ended << "," << r.executed << "," << r.ok << "," << r.wounded << ","
        << r.failed_command << "," << r.plan << "," << r.undone << "," << cell(r.latency) << "," << cell(r.locks)
        << "\n";
  }
}

LockStrategy strategy_arg(int64_t arg) { return arg == 1 ? LockStrategy::aggressive : LockStrategy::sla; }

void BM_ApexLatency(benchmark::State& state) {
  mesh::core::log_to_null();
  ApexSetup setup;
  setup.depth = static_cast<int>(state.range(0));
  setup.width = static_cast<int>(state.range(1));
  setup.strategy = strategy_arg(state.range(2));
  setup.line = state.range(3) == 1;
  const int seeds = env_int("APEX_BENCH_SEEDS", 3, 1);
  const int runs_per_seed = env_int("APEX_BENCH_RUNS", 5, 1);
  const std::string point =
      fmt::format("{},{},{},{}", setup.depth, setup.width, strategy_name(setup.strategy), setup.line ? "line" : "star");
  std::vector<Run> runs;
  std::vector<double> hops;
  int dirty_resets = 0;
  double settle_total = 0;
  for (auto _ : state) {
    for (int s = 1; s <= seeds; ++s) {
      const auto seed = static_cast<uint64_t>(s);
      ApexMesh mesh(setup, seed);
      settle_total += mesh.settle();
      std::vector<Run> seed_runs;
      for (int r = 0; r < runs_per_seed; ++r) {
        hops.push_back(mesh.hops_mean());
        auto seq = std::make_shared<std::optional<uint64_t>>();
        const TimePoint now = mesh.sim->simulator().now();
        mesh.start("apex", 0, seq);
        mesh.wait_done({{"apex", seq}}, now);
        seed_runs.push_back(read_run(*seq ? mesh.invocation("apex", **seq) : nullptr));
        dirty_resets += !mesh.reset();
      }
      write_runs("apex_latency.csv", "depth,width,strategy,topology", point, seed, seed_runs);
      runs.insert(runs.end(), seed_runs.begin(), seed_runs.end());
    }
  }
  std::vector<double> latencies, locks, plans;
  for (const Run& r : runs) {
    if (r.latency < 0) continue;
    latencies.push_back(r.latency);
    locks.push_back(r.locks);
    plans.push_back(static_cast<double>(r.plan));
  }
  state.counters["latency_p50_ms"] = quantile(latencies, 0.5);
  state.counters["latency_mean_ms"] = mean(latencies);
  state.counters["locks_p50_ms"] = quantile(locks, 0.5);
  state.counters["plan_mean"] = mean(plans);
  state.counters["hops_mean"] = mean(hops);
  state.counters["samples"] = static_cast<double>(latencies.size());
  state.counters["completed_share"] =
      runs.empty() ? 0 : static_cast<double>(latencies.size()) / static_cast<double>(runs.size());
  state.counters["dirty_resets"] = dirty_resets;
  state.counters["settle_s"] = settle_total / seeds;
}

void BM_ApexContention(benchmark::State& state) {
  mesh::core::log_to_null();
  ApexSetup setup;
  setup.strategy = strategy_arg(state.range(0));
  setup.contenders = true;
  setup.failure = static_cast<double>(state.range(2)) / 1000.0;
  const int contenders = static_cast<int>(state.range(1));
  const int seeds = env_int("APEX_BENCH_SEEDS", 3, 1);
  const int trials = env_int("APEX_BENCH_TRIALS", 10, 1);
  const int window_ms = env_int("APEX_BENCH_WINDOW_MS", kContentionWindow_ms, 1);
  const std::string point = fmt::format("{},{},{}", strategy_name(setup.strategy), contenders, state.range(2));
  std::vector<Run> runs;
  int contenders_started = 0;
  int contenders_ok = 0;
  int dirty_resets = 0;
  for (auto _ : state) {
    for (int s = 1; s <= seeds; ++s) {
      const auto seed = static_cast<uint64_t>(s);
      ApexMesh mesh(setup, seed);
      mesh.settle();
      mesh::core::Rng rng(seed * 104729 + 11);
      std::vector<Run> seed_runs;
      for (int t = 0; t < trials; ++t) {
        dirty_resets += !mesh.reset();
        const TimePoint start = mesh.sim->simulator().now();
        ApexMesh::Started started = {{"apex", std::make_shared<std::optional<uint64_t>>()}};
        mesh.sim->simulator().at(start + milliseconds(window_ms),
                                 [&mesh, seq = started.front().second] { mesh.start("apex", 0, seq); });
        for (int c = 0; c < contenders; ++c) {
          const auto row = static_cast<int>(rng.below(kContentionDepth)) + 1;
          const auto col = static_cast<int>(rng.below(kContentionWidth)) + 1;
          const std::string routine = "c" + plug(row, col);
          const size_t node = rng.below(mesh.sim->size());
          started.emplace_back(routine, std::make_shared<std::optional<uint64_t>>());
          mesh.sim->simulator().at(
              start + milliseconds(static_cast<int64_t>(rng.below(2 * static_cast<uint64_t>(window_ms)))),
              [&mesh, routine, node, seq = started.back().second] { mesh.start(routine, node, seq); });
        }
        mesh.sim->run_until(start + milliseconds(2 * window_ms));
        mesh.wait_done(started, start);
        const auto& [apex, apex_seq] = started.front();
        seed_runs.push_back(read_run(*apex_seq ? mesh.invocation(apex, **apex_seq) : nullptr));
        for (size_t c = 1; c < started.size(); ++c) {
          ++contenders_started;
          const Run contender =
              read_run(*started[c].second ? mesh.invocation(started[c].first, **started[c].second) : nullptr);
          contenders_ok += contender.ok;
        }
      }
      write_runs("apex_contention.csv", "strategy,contenders,failure_permille", point, seed, seed_runs);
      runs.insert(runs.end(), seed_runs.begin(), seed_runs.end());
    }
  }
  size_t executed = 0, ok = 0, wounded = 0, failed = 0;
  double undone = 0;
  std::vector<double> latencies, plans;
  for (const Run& r : runs) {
    if (!r.executed) continue;
    ++executed;
    ok += r.ok;
    wounded += r.wounded;
    failed += r.failed_command;
    undone += static_cast<double>(r.undone);
    plans.push_back(static_cast<double>(r.plan));
    if (r.latency >= 0) latencies.push_back(r.latency);
  }
  const auto share = [executed](double count) { return executed == 0 ? 0 : count / static_cast<double>(executed); };
  state.counters["exec_success"] = share(static_cast<double>(ok));
  state.counters["wounded_share"] = share(static_cast<double>(wounded));
  state.counters["failure_abort_share"] = share(static_cast<double>(failed));
  state.counters["rollback_cost"] = share(undone / (kContentionDepth * kContentionWidth));
  state.counters["never_executed_share"] =
      runs.empty() ? 0 : 1.0 - static_cast<double>(executed) / static_cast<double>(runs.size());
  state.counters["plan_mean"] = mean(plans);
  state.counters["latency_p50_ms"] = quantile(latencies, 0.5);
  state.counters["contenders_ok_share"] =
      contenders_started == 0 ? 0 : static_cast<double>(contenders_ok) / contenders_started;
  state.counters["runs"] = static_cast<double>(runs.size());
  state.counters["dirty_resets"] = dirty_resets;
}

void latency_args(benchmark::internal::Benchmark* b) {
  const std::vector<int> widths =
      std::getenv("APEX_BENCH_FULL") != nullptr ? std::vector<int>{1, 2, 3, 4} : std::vector<int>{1, 4};
  for (int topology : {0, 1}) {
    for (int depth = 2; depth <= 5; ++depth) {
      for (int width : widths) {
        for (int strategy : {0, 1}) b->Args({depth, width, strategy, topology});
      }
    }
  }
}
void contention_args(benchmark::internal::Benchmark* b) {
  for (int failure_permille : {1, 10, 50}) {
    for (int contenders : {0, 2, 4, 8}) {
      for (int strategy : {0, 1}) b->Args({strategy, contenders, failure_permille});
    }
  }
}

BENCHMARK(BM_ApexLatency)->Apply(latency_args)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_ApexContention)->Apply(contention_args)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
