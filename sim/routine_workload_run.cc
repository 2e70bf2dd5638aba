#include "sim/routine_workload_run.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/rng.h"
#include "routine/emulated_device.h"
#include "routine/routine_group_state.h"
#include "routine/routine_model.h"
#include "routine/serial_order_check.h"
#include "sim/mesh_sim.h"

namespace mesh::sim {
namespace {

using routine::InvocationId;

// Seeds the choice of the node each arrival is run from, apart from the
// mesh's own randomness.
constexpr uint64_t kArrivalNodeSalt = 0xa771'7a15;
// How often the drain loop looks whether every invocation has ended.
constexpr core::Duration kDrainPoll = std::chrono::seconds(5);
// The drain bound: every arrival's routine run back to back (GSV's worst
// case), twice for the locking and commit rounds, plus this per arrival and
// overall.
constexpr core::Duration kDrainPerArrival = std::chrono::seconds(10);
constexpr core::Duration kDrainSlack = std::chrono::seconds(120);
// Link delays of the simulated mesh: a home's Wi-Fi, a few ms per hop.
constexpr double kWorkloadLinkDelayMs = 2.0;
constexpr double kWorkloadLinkJitterMs = 1.0;
// Where the emulated devices stand (metres): LSH groups nearby devices.
constexpr uint64_t kHomeSideMetres = 60;

// The routine group leader's replica of `routine`: the newest serving one.
const routine::RoutineGroupState* leading_routine_state(MeshSim& sim, const std::string& routine) {
  const std::string target = "routine:" + routine;
  kgroup::GroupReplica* newest = nullptr;
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    kgroup::GroupReplica* replica = node->kgroups().host().latest(target);
    if (replica == nullptr || !replica->serving()) continue;
    const auto& c = replica->config();
    if (newest == nullptr ||
        std::make_pair(c.epoch, c.generation) > std::make_pair(newest->config().epoch, newest->config().generation)) {
      newest = replica;
    }
  }
  return newest == nullptr ? nullptr : dynamic_cast<const routine::RoutineGroupState*>(&newest->state_machine());
}

routine::RoutineSpec routine_spec_of(const WorkloadRoutine& planned) {
  routine::RoutineSpec spec;
  spec.id = planned.id;
  spec.trigger_text = "manual";
  spec.trigger = routine::build_trigger(spec.trigger_text, "", {}).value();
  // Manual runs are never spaced; a repeated arrival runs again.
  spec.min_retrigger = core::Duration::zero();
  for (const auto& command : planned.commands) {
    routine::RoutineCommand c;
    c.device = command.device;
    c.values = command.values;
    if (command.duration > core::Duration::zero()) c.duration = command.duration;
    c.must = command.must;
    spec.commands.push_back(std::move(c));
  }
  return spec;
}

std::string attribute_unit(const std::string& device, const std::string& attribute) { return device + "." + attribute; }

// "ROUTINE#SEQ.TAG#INDEX" -> (ROUTINE, SEQ, INDEX), and a rollback's
// "ROUTINE#SEQ.TAG#INDEX.undo" -> the same with `undo`.
struct ParsedCommandId {
  std::string routine;
  uint64_t seq = 0;
  size_t index = 0;
  bool undo = false;
};
std::optional<ParsedCommandId> parse_workload_command_id(std::string id) {
  ParsedCommandId parsed;
  constexpr std::string_view kUndo = ".undo";
  if (id.size() > kUndo.size() && id.compare(id.size() - kUndo.size(), kUndo.size(), kUndo) == 0) {
    parsed.undo = true;
    id.resize(id.size() - kUndo.size());
  }
  const auto first = id.find('#');
  const auto dot = id.find('.', first == std::string::npos ? 0 : first);
  const auto last = id.rfind('#');
  if (first == std::string::npos || dot == std::string::npos || last <= dot) return std::nullopt;
  parsed.routine = id.substr(0, first);
  try {
    size_t used = 0;
    const std::string index = id.substr(last + 1);
    parsed.seq = std::stoull(id.substr(first + 1, dot - first - 1));
    parsed.index = std::stoull(index, &used);
    if (used != index.size()) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return parsed;
}

std::string outcome_name(const routine::RoutineGroupState::Invocation& invocation) {
  if (!invocation.done()) return "unfinished";
  switch (invocation.outcome) {
    case proto::INVOCATION_OK:
      return "ok";
    case proto::INVOCATION_ABORTED:
      return "aborted";
    default:
      return "failed";
  }
}

double millis_since(core::TimePoint origin, core::TimePoint at) { return core::to_millis(at - origin); }

// Nearest-rank percentile of sorted values; 0 when empty.
double sorted_percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

std::string verdict(const std::optional<std::string>& problem) { return problem ? "fail" : "pass"; }

}  // namespace

std::string ev_variant(const WorkloadRunOptions& options) {
  std::string variant(routine::to_string(options.ev_scheduler));
  if (!options.ev_pre_lease) variant += "-nopre";
  if (!options.ev_post_lease) variant += "-nopost";
  return variant;
}

WorkloadRunResult run_workload(const Workload& workload, routine::Visibility visibility, uint64_t seed,
                               const WorkloadRunOptions& options) {
  Scenario scenario;
  scenario.source = "meshsim routines";
  scenario.topology.kind = "random";
  scenario.topology.nodes = options.nodes;
  scenario.topology.seed = seed;
  scenario.link.delay_ms = kWorkloadLinkDelayMs;
  scenario.link.jitter_ms = kWorkloadLinkJitterMs;
  // The drain loop decides when the run ends; the scenario never stops it.
  scenario.run.duration_s = 86'400.0 * 365;

  core::Rng placement(seed);
  std::vector<std::unique_ptr<routine::EmulatedDevice>> devices;
  std::vector<routine::DeviceSpec> catalog;
  for (const auto& device : workload.devices) {
    routine::DeviceSpec spec;
    spec.id = device.id;
    spec.kind = device.kind;
    spec.location = {static_cast<double>(placement.below(kHomeSideMetres)),
                     static_cast<double>(placement.below(kHomeSideMetres)), 0};
    spec.driver = std::string(routine::EmulatedDriverFactory::kScheme) + device.id;
    catalog.push_back(spec);
    devices.push_back(std::make_unique<routine::EmulatedDevice>(spec, device.initial));
  }
  std::vector<routine::RoutineSpec> routines;
  for (const auto& planned : workload.routines) routines.push_back(routine_spec_of(planned));

  std::vector<std::unique_ptr<routine::EmulatedDriverFactory>> factories;
  MeshSim::Options mesh_options;
  mesh_options.configure = [&](agent::NodeConfig& config) {
    config.kgroup.selection.k = 3;
    config.kgroup.selection.mode = kgroup::SelectionMode::lsh;
    config.kgroup.selection.clusters.devices_per_cluster = options.devices_per_cluster;
    config.devices.catalog = catalog;
    config.devices.routines = routines;
    config.devices.catalog_digest = "workload";
    config.routines.leaders.visibility = visibility;
    config.routines.leaders.ev_scheduler = options.ev_scheduler;
    config.routines.leaders.ev_pre_lease = options.ev_pre_lease;
    config.routines.leaders.ev_post_lease = options.ev_post_lease;
  };
  mesh_options.drivers = [&](size_t, core::Env& env) {
    factories.push_back(std::make_unique<routine::EmulatedDriverFactory>(env));
    for (auto& device : devices) factories.back()->add(*device);
    return factories.back().get();
  };
  MeshSim sim(scenario, seed, mesh_options);

  WorkloadRunResult result;
  result.visibility = visibility;
  if (visibility == routine::Visibility::ev) result.ev_variant = ev_variant(options);
  result.seed = seed;
  sim.run_until(core::TimePoint(options.settle));
  result.origin = sim.simulator().now();

  // Fire each arrival from a node the seed picks; keep the invocation its
  // group committed (its sequence number) or that it never did.
  const size_t arrivals = workload.arrivals.size();
  std::vector<std::optional<uint64_t>> committed_seq(arrivals);
  std::vector<bool> answered(arrivals, false);
  core::Rng node_choice = core::Rng(seed).fork(kArrivalNodeSalt);
  for (size_t i = 0; i < arrivals; ++i) {
    const WorkloadArrival& arrival = workload.arrivals[i];
    const size_t node = node_choice.below(sim.size());
    sim.simulator().at(result.origin + arrival.at, [&, i, node, routine_id = workload.routines[arrival.routine].id] {
      agent::Node* agent = sim.node(node);
      if (agent == nullptr) {
        answered[i] = true;
        return;
      }
      agent->routines().run(routine_id, false, options.trigger_timeout, [&, i](const auto& invocation) {
        answered[i] = true;
        if (invocation) committed_seq[i] = invocation.value().seq();
      });
    });
  }

  for (const WorkloadFailure& failure : workload.failures) {
    routine::EmulatedDevice* device = devices[failure.device].get();
    sim.simulator().at(result.origin + failure.at, [device] { device->set_up(false); });
    if (failure.down_for) {
      sim.simulator().at(result.origin + failure.at + *failure.down_for, [device] { device->set_up(true); });
    }
  }

  core::Duration serial{};
  for (const WorkloadArrival& arrival : workload.arrivals) serial += back_to_back(workload.routines[arrival.routine]);
  const core::Duration last_arrival = arrivals == 0 ? core::Duration{} : workload.arrivals.back().at;
  const core::TimePoint bound = result.origin + last_arrival + options.trigger_timeout + 2 * serial +
                                kDrainPerArrival * static_cast<int64_t>(arrivals) + kDrainSlack;
  auto all_ended = [&] {
    if (!std::all_of(answered.begin(), answered.end(), [](bool a) { return a; })) return false;
    for (const auto& planned : workload.routines) {
      const auto* state = leading_routine_state(sim, planned.id);
      if (state == nullptr) continue;
      for (const auto& [seq, invocation] : state->invocations()) {
        if (!invocation.done()) return false;
      }
    }
    return true;
  };
  sim.run_until(result.origin + last_arrival);
  while (sim.simulator().now() < bound && !all_ended()) sim.run_until(sim.simulator().now() + kDrainPoll);

  // Match arrivals to their routine groups' records: by the sequence number
  // a run's answer named, else (an answer lost, the trigger committed
  // anyway) the routine's unclaimed invocations in order.
  std::map<std::string, std::map<uint64_t, routine::RoutineGroupState::Invocation>> records;
  for (const auto& planned : workload.routines) {
    if (const auto* state = leading_routine_state(sim, planned.id)) records[planned.id] = state->invocations();
  }
  std::map<std::pair<std::string, uint64_t>, InvocationId> invocation_of;
  std::vector<std::optional<uint64_t>> seq_of(committed_seq);
  for (size_t i = 0; i < arrivals; ++i) {
    const std::string& routine_id = workload.routines[workload.arrivals[i].routine].id;
    if (seq_of[i]) invocation_of[{routine_id, *seq_of[i]}] = i + 1;
  }
  for (size_t i = 0; i < arrivals; ++i) {
    const std::string& routine_id = workload.routines[workload.arrivals[i].routine].id;
    if (seq_of[i]) continue;
    for (const auto& [seq, invocation] : records[routine_id]) {
      if (invocation_of.count({routine_id, seq}) != 0) continue;
      seq_of[i] = seq;
      invocation_of[{routine_id, seq}] = i + 1;
      break;
    }
  }

  // The schedule, from the devices' logs.
  routine::ExecutionRecord record;
  std::map<InvocationId, std::map<size_t, const routine::EmulatedDevice::Actuation*>> actuated;
  for (const auto& device : devices) {
    for (const auto& a : device->actuations()) {
      const auto parsed = parse_workload_command_id(a.command_id);
      const auto it = parsed ? invocation_of.find({parsed->routine, parsed->seq}) : invocation_of.end();
      const InvocationId id = it == invocation_of.end() ? 0 : it->second;
      const bool undo = parsed && parsed->undo;
      if (id != 0 && !undo) actuated[id].try_emplace(parsed->index, &a);
      for (const auto& [attribute, value] : a.values) {
        record.actuations.push_back({attribute_unit(device->spec().id, attribute), a.at,
                                     undo ? routine::ActuationKind::rollback : routine::ActuationKind::command, id,
                                     routine::format_value(value)});
      }
    }
  }
  std::vector<routine::ScheduledRoutine> schedule;
  std::vector<routine::RoutineOutcome> outcomes;
  std::vector<routine::ExecutionSpan> spans;
  for (size_t i = 0; i < arrivals; ++i) {
    const InvocationId id = i + 1;
    const WorkloadRoutine& planned = workload.routines[workload.arrivals[i].routine];
    InvocationRecord inv;
    inv.id = id;
    inv.routine = planned.id;
    inv.arrival = workload.arrivals[i].at;
    inv.schedule.id = id;
    inv.schedule.arrival = result.origin + inv.arrival;
    const auto& by_seq = records[planned.id];
    const auto found = seq_of[i] ? by_seq.find(*seq_of[i]) : by_seq.end();
    inv.outcome = found == by_seq.end() ? (seq_of[i] ? "unfinished" : "not_triggered") : outcome_name(found->second);
    if (inv.outcome == "unfinished") ++result.unfinished;
    if (found != by_seq.end()) {
      const auto& kept = found->second;
      inv.ev_rekeys = kept.rekeys;
      if (kept.placed_at_us != 0 && kept.keyed_at_us != 0) {
        inv.ev_placement = std::chrono::microseconds(kept.placed_at_us - kept.keyed_at_us);
      }
    }
    // A completed routine (ok, or failed on best-effort commands only)
    // intends the writes of the commands that succeeded; an aborted one,
    // or one stopped for a lost lock, none.
    const bool completed = found != by_seq.end() && (inv.outcome == "ok" || inv.outcome == "failed") &&
                           found->second.abort_reason.empty() && found->second.stop_reason.empty();
    if (completed) {
      record.committed.insert(id);
      auto& writes = record.intended_writes[id];
      for (size_t index = 0; index < planned.commands.size(); ++index) {
        const auto ran = found->second.commands.find(static_cast<uint32_t>(index));
        if (ran == found->second.commands.end() || ran->second.status != proto::COMMAND_OK) continue;
        for (const auto& [attribute, value] : planned.commands[index].values) {
          writes[attribute_unit(planned.commands[index].device, attribute)] = routine::format_value(value);
        }
      }
    } else if (inv.outcome == "failed" || inv.outcome == "aborted") {
      record.aborted.insert(id);
    }
    if (inv.outcome != "unfinished" && inv.outcome != "not_triggered") {
      const size_t rollback = found == by_seq.end() ? 0 : found->second.undone.size();
      outcomes.push_back({id, !completed, rollback});
    }
    for (size_t index = 0; index < planned.commands.size(); ++index) {
      const auto a = actuated[id].find(index);
      if (a == actuated[id].end()) continue;
      const core::TimePoint start = a->second->at;
      inv.schedule.commands.push_back(
          {planned.commands[index].device, start, start + planned.commands[index].duration});
    }
    if (!inv.schedule.commands.empty()) {
      schedule.push_back(inv.schedule);
      routine::ExecutionSpan span;
      span.invocation = id;
      span.first_actuation = inv.schedule.commands.front().start;
      span.end = inv.schedule.commands.front().end;
      for (const auto& c : inv.schedule.commands) {
        span.first_actuation = std::min(span.first_actuation, c.start);
        span.end = std::max(span.end, c.end);
        span.devices.insert(c.device);
      }
      // It holds its locks at least until its last command's end: the
      // leader waits a duration out before releasing.
      spans.push_back(span);
    }
    result.invocations.push_back(std::move(inv));
  }
  for (auto& inv : result.invocations) {
    if (!inv.schedule.commands.empty()) {
      inv.temporary_incongruence = routine::temporary_incongruence(inv.schedule, schedule);
    }
  }

  // The injected failures and restarts are items of the serial order too
  // (safehome.md §3); they leave the device's state as it was.
  for (const WorkloadFailure& failure : workload.failures) {
    for (const auto& [attribute, value] : workload.devices[failure.device].initial) {
      const std::string unit = attribute_unit(workload.devices[failure.device].id, attribute);
      record.actuations.push_back(
          {unit, result.origin + failure.at, routine::ActuationKind::failure, 0, std::nullopt});
      if (failure.down_for) {
        record.actuations.push_back({unit, result.origin + failure.at + *failure.down_for,
                                     routine::ActuationKind::restart, 0, std::nullopt});
      }
    }
  }
  result.failures = workload.failures.size();

  // A device that failed for good is left out of final incongruence: its
  // state no longer shows (and a rollback could not reach it).
  std::set<size_t> dead;
  for (const WorkloadFailure& failure : workload.failures) {
    if (failure.down_for) {
      dead.erase(failure.device);
    } else {
      dead.insert(failure.device);
    }
  }
  routine::FinalStateInput final_state;
  std::set<std::string> dead_units;
  for (size_t d = 0; d < devices.size(); ++d) {
    for (const auto& [attribute, value] : workload.devices[d].initial) {
      const std::string unit = attribute_unit(workload.devices[d].id, attribute);
      record.initial_state[unit] = routine::format_value(value);
      if (dead.count(d) != 0) {
        dead_units.insert(unit);
        continue;
      }
      final_state.initial[unit] = routine::format_value(value);
      const auto now = devices[d]->state().find(attribute);
      final_state.actual_end[unit] = routine::format_value(now == devices[d]->state().end() ? value : now->second);
    }
  }
  for (const auto& [id, writes] : record.intended_writes) {
    auto& kept = final_state.committed_writes[id];
    for (const auto& [unit, value] : writes) {
      if (dead_units.count(unit) == 0) kept[unit] = value;
    }
  }

  result.parallelism_level = routine::parallelism_level(schedule);
  result.order_mismatch = routine::order_mismatch(schedule);
  result.final_incongruence = routine::final_incongruence(final_state);
  result.aborts = routine::abort_stats(outcomes);
  routine::SerialCheckOptions serial_options;
  serial_options.overwrite_excuses_rollback = visibility == routine::Visibility::ev;
  result.serial_order = routine::check_serial_order(record, serial_options);
  result.global_strict = routine::check_global_strict(spans);
  result.partitioned_strict = routine::check_partitioned_strict(spans);
  return result;
}

std::string invocations_csv_header() {
  return "model,seed,invocation,routine,arrival_ms,start_ms,end_ms,wait_ms,e2e_ms,overhead,temporary_incongruence,"
         "outcome,ev_stretch,ev_placement_ms,ev_rekeys\n";
}

std::string invocations_csv_rows(const WorkloadRunResult& result) {
  std::string out;
  const bool ev = result.visibility == routine::Visibility::ev;
  for (const auto& inv : result.invocations) {
    const std::string model(routine::to_string(result.visibility));
    const double arrival = core::to_millis(inv.arrival);
    const std::string placement =
        ev && inv.ev_placement ? fmt::format("{:.3f}", core::to_millis(*inv.ev_placement)) : std::string();
    const std::string rekeys = ev ? fmt::format("{}", inv.ev_rekeys) : std::string();
    if (inv.schedule.commands.empty()) {
      out += fmt::format("{},{},{},{},{:.3f},,,,,,,{},,{},{}\n", model, result.seed, inv.id, inv.routine, arrival,
                         inv.outcome, placement, rekeys);
      continue;
    }
    out += fmt::format("{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.4f},{:.4f},{},{:.4f},{},{}\n", model,
                       result.seed, inv.id, inv.routine, arrival,
                       millis_since(result.origin, inv.schedule.commands.front().start),
                       millis_since(result.origin, inv.schedule.commands.back().end),
                       core::to_millis(routine::wait_time(inv.schedule)),
                       core::to_millis(routine::end_to_end(inv.schedule)), routine::latency_overhead(inv.schedule),
                       inv.temporary_incongruence, inv.outcome, routine::ev_stretch(inv.schedule), placement, rekeys);
  }
  return out;
}

std::string summary_csv_header() {
  return "model,seed,invocations,ok,unfinished,e2e_p50_ms,e2e_p90_ms,parallelism_level,order_mismatch,"
         "final_incongruence,final_incongruence_exact,temporary_incongruence_share,temporary_incongruence_mean,"
         "abort_rate,serial_order,global_strict,partitioned_strict,device_failures,rollback_commands_per_abort,"
         "ev_variant\n";
}

std::string summary_csv_row(const WorkloadRunResult& result) {
  std::vector<double> e2e;
  size_t ok = 0;
  size_t attacked = 0;
  double incongruence_sum = 0;
  for (const auto& inv : result.invocations) {
    ok += inv.outcome == "ok" ? 1 : 0;
    if (inv.schedule.commands.empty()) continue;
    e2e.push_back(core::to_millis(routine::end_to_end(inv.schedule)));
    attacked += inv.temporary_incongruence > 0 ? 1 : 0;
    incongruence_sum += inv.temporary_incongruence;
  }
  std::sort(e2e.begin(), e2e.end());
  const double ran = static_cast<double>(std::max<size_t>(e2e.size(), 1));
  return fmt::format(
      "{},{},{},{},{},{:.3f},{:.3f},{:.4f},{:.4f},{:.4f},{},{:.4f},{:.4f},{:.4f},{},{},{},{},{:.3f},{}\n",
      routine::to_string(result.visibility), result.seed, result.invocations.size(), ok, result.unfinished,
      sorted_percentile(e2e, 0.5), sorted_percentile(e2e, 0.9), result.parallelism_level, result.order_mismatch,
      result.final_incongruence.fraction(), result.final_incongruence.exact ? "yes" : "no",
      static_cast<double>(attacked) / ran, incongruence_sum / ran, result.aborts.abort_rate,
      verdict(result.serial_order), verdict(result.global_strict), verdict(result.partitioned_strict), result.failures,
      result.aborts.rollback_commands_per_abort, result.ev_variant);
}

}  // namespace mesh::sim
