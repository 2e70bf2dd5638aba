// Routines inside whole agents on virtual time (MeshSim: OLSR, Medley,
// k-groups, device and routine layers per node, as meshagent runs them),
// with emulated devices. Each seed builds a mesh of 5-9 agents (k = 3, LSH,
// small device clusters so a routine's devices sit in several groups) and
// 4-6 routines over overlapping device sets, a few with durations, one
// triggered by a motion sensor the test toggles, the others run by hand
// (RoutineService::run from random agents) in a stream. About half the
// routines also name a mesh-wide resource (`uses`: "pump" or "boiler"),
// taken with Camera. Mid-stream a random
// node is killed (kill -9) and restarted later; some plans lose packets or
// kill a second node. Each sweep runs one visibility model
// (routine/visibility.h): PSV, the default, or GSV (or S-GSV), whose checker
// also counts routines that share nothing; under WV the PSV checker must catch
// interleavings. The APEX sweep adds precondition rules (plugs in exclusive
// pairs: each may be on only while the other is off), makes each routine's
// first command switch one plug of a pair on, and runs the stream faster,
// so combos compete for each other's preconditions. The undo sweep gives
// every command a user-given undo value (SafeHome §2.2), which its
// rollback must set instead of the state before it. The ad hoc sweep adds
// `meshctl device set` combos (routine/adhoc_combo.h) to the APEX stream:
// from random agents, on the pairs' plugs, each with its own lock strategy,
// contending with each other and with the routines; its crash takes down
// the pivot (the leader of an ad hoc combo's group) of a combo under way.
//
// The oracle reads the devices' own actuation logs and the groups' state,
// never a leader's belief:
//  - safety: no two invocations of routines whose device sets intersect
//    actuated their devices interleaved (the span from an invocation's
//    first to its last actuation contains no actuation of a conflicting one),
//    and likewise for routines that share a resource (`uses`), devices or not;
//  - exactly once: no command id (ROUTINE#SEQ#INDEX) actuated twice, and
//    every command an ended invocation recorded ok was actuated once;
//  - liveness, once the stream stops: every committed invocation ends, and
//    no lock is left held in any device group;
//  - inheritance: every replica of a routine group that applied as much as
//    its leader holds the leader's very state;
//  - APEX consistency: replaying every device's actuations in time order,
//    no instant has both plugs of a pair on;
//  - ad hoc combos: each ends committed or rolled back (aborted with every
//    command that may have acted undone, up to one that could not be), and
//    the outcome its agent reported is the one its group recorded;
//  - failure serialization (sweeps with actuator failures): no invocation
//    completed that its model had to abort for a device failure or restart
//    (check_failure_serialization, from the device groups' sampled events).
// Each checker is also shown to fail on a build broken on purpose for it
// (routine/fault_points.h). A failing seed is printed;
// ROUTINE_AGENT_SEED=<seed> replays it with routine logs
// (ROUTINE_AGENT_DEBUG=debug for more); ROUTINE_AGENT_SEED_SCALE=100 runs
// 1,000 seeds per strategy and visibility model, and ROUTINE_AGENT_MODELS
// (say "sgsv,ev") limits the sweeps over several models to those.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/log.h"
#include "core/rng.h"
#include "routine/adhoc_combo.h"
#include "routine/catalog.h"
#include "routine/device_codec.h"
#include "routine/device_group_state.h"
#include "routine/emulated_device.h"
#include "routine/fault_points.h"
#include "routine/invocation_metrics.h"
#include "routine/routine_combo.h"
#include "routine/routine_group_state.h"
#include "routine/routine_model.h"
#include "sim/mesh_sim.h"
#include "tests/support/quiet_logs.h"
#include "tests/support/seed_range.h"

namespace mesh::sim {
namespace {

using routine::Attributes;
using routine::DeviceKind;
using routine::DeviceSpec;
using routine::EmulatedDevice;
using routine::RoutineSpec;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct Plan {
  routine::Visibility visibility = routine::Visibility::psv;
  routine::LockStrategy strategy = routine::LockStrategy::sla;
  double loss = 0.0;
  bool second_crash = false;
  // Actuators go down for a few seconds now and then, so must commands fail
  // and their invocations roll back.
  bool device_failures = false;
  // APEX: plugs come in exclusive pairs (heater and fan on one fuse: each
  // may be on only while the other is off, two precondition rules), and
  // routine commands set random values, so combos must switch one plug off
  // before the other goes on.
  bool preconditions = false;
  // Every command carries a random undo value (SafeHome's user-given undo),
  // which its rollback must set instead of the state before it.
  bool user_undo = false;
  // Routines of two or more commands end with a command on their first
  // device again ("coffee on ... coffee off"), so an EV routine must keep
  // that device until its last command there.
  bool revisits = false;
  // Routines override the mesh's lock strategy in turn (SLA, OLA,
  // aggressive), so conservative and aggressive invocations contend.
  bool mixed_strategies = false;
  // Actuators now and then get stuck for a few seconds: they answer every
  // command but do not change (APEX §7.3's actuation failure).
  bool stuck_actuators = false;
  // With `preconditions`: half the stream are ad hoc combos (`device set`
  // of a pair's plug on, from random agents, lock strategies in turn), and
  // the crash picks a node that leads a running one (a pivot) if any.
  bool adhoc_combos = false;
  // Run-time catalog changes move actuators beside a device of another
  // cluster now and then, so devices change groups while routines hold,
  // lease and place entries for them (the new group carries the lock's
  // floor and last token over: routine/device_locks.h).
  bool moves = false;
};

// A precondition rule of the sweep's world: while `device` has power `on`,
// `needs` must have power `needs_on`.
struct Implication {
  std::string name;
  std::string device;
  bool on = false;
  std::string needs;
  bool needs_on = false;
};

struct Outcome {
  std::vector<std::string> violations;
  uint64_t invocations = 0;
  uint64_t ok = 0;
  uint64_t aborted = 0;  // by a failed must command, then rolled back
  uint64_t failure_aborts = 0;  // at the finish point, by a device failure or restart (SafeHome §3)
  uint64_t undone = 0;   // commands a rollback restored
  // Undos that set a user's undo value other than the state before: each
  // one would have been caught had the rollback restored that state.
  uint64_t undone_to_user_value = 0;
  uint64_t actuations = 0;
  uint64_t precondition_commands = 0;  // run by plans
  uint64_t run_commands = 0;           // planned to go out with the one before (routine/routine_combo.h)
  uint64_t sent_with_run = 0;          // of those, sent before the one before was recorded
  uint64_t wound_aborts = 0;           // aggressive invocations an older one wounded (APEX wound-wait)
  // EV: keys chosen below an invocation placed before (SafeHome's
  // pre-lease), and keys refused by a device someone later had used.
  uint64_t keyed_before_placed = 0;
  uint64_t rekeys = 0;
  uint64_t not_effective = 0;          // commands that failed as not effective (a stuck actuator)
  uint64_t rollback_resource_retakes = 0;  // rollbacks that took a lost resource again first
  uint64_t stretch_known = 0;              // invocations whose SafeHome stretch is known
  uint64_t stretched = 0;                  // ... and above 1
  uint64_t adhoc_invocations = 0;
  uint64_t adhoc_ok = 0;
  uint64_t adhoc_aborted = 0;
  uint64_t adhoc_reported = 0;  // ends the asking agent reported
  uint64_t adhoc_stopped_unrun = 0;  // stopped for a lost lock before any of its commands ran
  uint64_t moves = 0;                // catalog changes that moved a device, committed
  uint64_t regrouped = 0;            // devices whose group at the end is not the one they started in
  bool pivot_crashed = false;   // the crash took down the leader of a running ad hoc combo
  bool partitioned = false;
};

// Whether a command may have changed its device (as the routine leader's
// rollback judges it): an ad hoc combo's rollback must have undone it.
bool may_have_acted(proto::CommandStatus status) {
  return status == proto::COMMAND_OK || status == proto::COMMAND_TIMEOUT || status == proto::COMMAND_INTERRUPTED ||
         status == proto::COMMAND_DRIVER_ERROR || status == proto::COMMAND_NOT_EFFECTIVE;
}

// The serving replicas of `target` across the mesh, newest instance first.
std::vector<std::pair<size_t, kgroup::GroupReplica*>> serving(MeshSim& sim, const std::string& target) {
  std::vector<std::pair<size_t, kgroup::GroupReplica*>> out;
  for (size_t i = 0; i < sim.size(); ++i) {
    agent::Node* node = sim.node(i);
    if (node == nullptr) continue;
    kgroup::GroupReplica* replica = node->kgroups().host().latest(target);
    if (replica != nullptr && replica->serving()) out.emplace_back(i, replica);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto& ca = a.second->config();
    const auto& cb = b.second->config();
    // Within one instance, the replica that applied most first: a member
    // still catching up (a restarted node) shows an older state.
    return std::make_tuple(ca.epoch, ca.generation, a.second->applied()) >
           std::make_tuple(cb.epoch, cb.generation, b.second->applied());
  });
  return out;
}

// The state of a routine's group at its leading replica (the newest
// instance's most advanced serving replica), or nothing.
const routine::RoutineGroupState* leading_state(MeshSim& sim, const std::string& routine) {
  const auto replicas = serving(sim, "routine:" + routine);
  if (replicas.empty()) return nullptr;
  return dynamic_cast<const routine::RoutineGroupState*>(&replicas.front().second->state_machine());
}

struct World {
  std::vector<std::unique_ptr<EmulatedDevice>> devices;
  std::vector<std::unique_ptr<routine::EmulatedDriverFactory>> factories;
  std::vector<RoutineSpec> routines;

  EmulatedDevice* find(const std::string& id) {
    for (auto& d : devices) {
      if (d->spec().id == id) return d.get();
    }
    return nullptr;
  }
};

// A routine group the checks read: a catalog routine's, or (no spec) an ad
// hoc combos' group, whose invocations carry their own routine.
struct Group {
  std::string id;
  const RoutineSpec* spec = nullptr;
};

// The routine an invocation of `group` ran.
const RoutineSpec& ran(const Group& group, const routine::RoutineGroupState::Invocation& invocation) {
  return invocation.adhoc ? *invocation.adhoc : *group.spec;
}

RoutineSpec make_routine(const std::string& id, const std::string& trigger, const std::vector<std::string>& devices,
                         core::Rng& rng, bool power, bool mixed) {
  RoutineSpec spec;
  spec.id = id;
  spec.trigger_text = trigger;
  spec.trigger = routine::build_trigger(trigger, "", {}).value();
  spec.min_retrigger = seconds(2);
  for (const auto& device : devices) {
    routine::RoutineCommand command;
    command.device = device;
    command.values = {{"power", mixed ? rng.below(2) == 0 : power}};
    if (rng.below(4) == 0) command.duration = milliseconds(rng.between(300, 1500));
    spec.commands.push_back(command);
  }
  return spec;
}

// When a device group committed one failure or restart event, as sampled.
struct EventWindow {
  core::TimePoint not_yet;  // a sample that had not seen it
  core::TimePoint seen;     // the first sample that had
};

// An invocation's actuations, from the devices' own logs.
struct Span {
  core::TimePoint first = core::TimePoint::max();
  core::TimePoint last = core::TimePoint::min();
};

std::string at_s(core::TimePoint t) { return fmt::format("{:.3f} s", core::to_seconds(t.time_since_epoch())); }

// Failure serialization (SafeHome §3, routine/failure_serialization.h):
// no invocation completed that its model had to abort for a device failure
// or restart. Event k of a device (odd: a failure, even: a restart; the
// devices start up) was committed by its group inside its EventWindow; an
// invocation's commands carry their device's count as they began actuating
// (set by the device group). A completed invocation (ended without an abort
// or a stop) is a violation if
//  - (every model but WV) a device's count differs between its first and
//    its last command on it: an event fell inside its use of the device;
//  - (GSV) an event of a device it commands was committed after its first
//    actuation (the window opened later), hence after its start, and before
//    its last actuation plus that command's duration (the window closed
//    earlier), hence before its finish point;
//  - (S-GSV) the same for an event of any device;
//  - (PSV) a device failed after its last command on it, committed before
//    that bound on the finish point, and its restart was not committed
//    before the invocation's release began (which follows its finish
//    point), so the device was still down at the finish.
// Each bound errs toward no violation, so a report is a real one (up to a
// group that committed an event no serving replica had applied yet when
// sampled: its leader died within that instant).
void check_failure_serialization(const Plan& plan, MeshSim& sim, const std::vector<Group>& groups,
                                 const std::map<std::string, Span>& spans,
                                 const std::map<std::string, core::TimePoint>& actuated_at,
                                 const std::map<std::string, std::vector<EventWindow>>& device_events, Outcome& out) {
  if (plan.visibility == routine::Visibility::wv) return;
  const core::TimePoint origin = sim.node(0) != nullptr ? sim.node(0)->config().kgroup.epoch_origin : core::TimePoint{};
  for (const auto& group : groups) {
    const routine::RoutineGroupState* state = leading_state(sim, group.id);
    if (state == nullptr) continue;
    for (const auto& [seq, invocation] : state->invocations()) {
      if (!invocation.done() || !invocation.abort_reason.empty() || !invocation.stop_reason.empty()) continue;
      if (invocation.outcome != proto::INVOCATION_OK && invocation.outcome != proto::INVOCATION_FAILED) continue;
      const RoutineSpec& spec = ran(group, invocation);
      const std::string name = routine::holder_name(spec.id, invocation);
      const auto span = spans.find(name);
      if (span == spans.end()) continue;
      const core::TimePoint releasing = origin + std::chrono::microseconds(invocation.releasing_at_us);
      const auto commands =
          routine::expand(spec, invocation.plan.value_or(std::vector<routine::PreconditionCommand>{}));
      std::map<std::string, std::vector<uint64_t>> touches;
      for (const auto& [index, result] : invocation.commands) {
        if (index < commands.size() && result.availability_events) {
          touches[commands[index].command.device].push_back(*result.availability_events);
        }
      }
      // The finish point comes after the last command's actuation and its
      // duration (the leader holds the devices that long before it reads).
      core::TimePoint finish_at_least = span->second.last;
      if (!commands.empty()) {
        const uint32_t last = static_cast<uint32_t>(commands.size() - 1);
        const auto actuation = actuated_at.find(routine::command_id(spec.id, invocation, last));
        if (actuation != actuated_at.end()) {
          finish_at_least = std::max(finish_at_least,
                                     actuation->second + commands[last].command.duration.value_or(core::Duration{}));
        }
      }
      auto report = [&](const std::string& what) {
        out.violations.push_back(fmt::format("invocation {} [{}, {}] completed though {}", name, at_s(span->second.first),
                                             at_s(span->second.last), what));
      };
      for (const auto& [device, counts] : touches) {
        if (counts.front() != counts.back()) {
          report(fmt::format("{} failed or restarted between two of its commands on it (events {} to {})", device,
                             counts.front() + 1, counts.back()));
        }
      }
      for (const auto& [device, events] : device_events) {
        const auto touched = touches.find(device);
        for (size_t i = 0; i < events.size(); ++i) {
          const uint64_t k = i + 1;
          const EventWindow& e = events[i];
          const bool while_running = e.not_yet > span->second.first && e.seen <= finish_at_least;
          const char* what = k % 2 == 1 ? "failed" : "restarted";
          if (plan.visibility == routine::Visibility::gsv && touched != touches.end() && while_running) {
            report(fmt::format("{}, which it commands, {} between {} and {} while it ran (GSV)", device, what,
                               at_s(e.not_yet), at_s(e.seen)));
          }
          if (plan.visibility == routine::Visibility::sgsv && while_running) {
            report(fmt::format("{} {} between {} and {} while it ran (S-GSV)", device, what, at_s(e.not_yet),
                               at_s(e.seen)));
          }
          if (plan.visibility == routine::Visibility::psv && touched != touches.end() && k % 2 == 1 &&
              k > touched->second.back() && e.seen <= finish_at_least &&
              (i + 1 >= events.size() || events[i + 1].not_yet >= releasing)) {
            report(fmt::format("{} failed after its last command on it (by {}) and was still down when it released "
                               "at {} (PSV)",
                               device, at_s(e.seen), at_s(releasing)));
          }
        }
      }
    }
  }
}

// An ad hoc combo (routine/adhoc_combo.h) that ended: committed, or
// aborted with every command that may have acted undone (up to an undo that
// failed: the rollback stops there, as undoing the preconditions under it
// could break a rule), or stopped for a lost lock having actuated nothing
// (`actuated`: the devices' logs show none of its commands; it ends failed
// only because an aggressive invocation counts as locked once executing);
// and what its agent reported is what its group recorded.
void check_adhoc_end(const std::string& name, const routine::RoutineGroupState::Invocation& invocation, bool actuated,
                     const std::map<std::string, proto::InvocationMsg>& reported, Outcome& out) {
  ++out.adhoc_invocations;
  if (invocation.outcome == proto::INVOCATION_OK) {
    ++out.adhoc_ok;
  } else if (invocation.outcome == proto::INVOCATION_ABORTED) {
    ++out.adhoc_aborted;
    const bool undo_failed = std::any_of(invocation.undone.begin(), invocation.undone.end(),
                                         [](const auto& undo) { return undo.second.status != proto::COMMAND_OK; });
    for (const auto& [index, result] : invocation.commands) {
      if (may_have_acted(result.status) && invocation.undone.count(index) == 0 && !undo_failed) {
        out.violations.push_back(fmt::format("ad hoc combo {} aborted without undoing its command {} ({}): {}", name,
                                             index + 1, proto::CommandStatus_Name(result.status), invocation.detail));
      }
    }
  } else if (!invocation.stop_reason.empty() && invocation.commands.empty() && !actuated) {
    ++out.adhoc_stopped_unrun;
  } else {
    out.violations.push_back(fmt::format("ad hoc combo {} ended {}, neither committed nor rolled back: {}", name,
                                         proto::InvocationOutcome_Name(invocation.outcome), invocation.detail));
  }
  const auto report = reported.find(name);
  if (report == reported.end()) return;
  ++out.adhoc_reported;
  if (report->second.phase() != proto::PHASE_DONE || report->second.outcome() != invocation.outcome) {
    out.violations.push_back(fmt::format("ad hoc combo {}: its agent reported {} {}, its group recorded {}", name,
                                         proto::RoutinePhase_Name(report->second.phase()),
                                         proto::InvocationOutcome_Name(report->second.outcome()),
                                         proto::InvocationOutcome_Name(invocation.outcome)));
  }
}

// Serializability from the devices' own logs: on each device, an
// invocation whose actuation (command or undo) comes before another's is
// serialized before it; the resulting precedence graph must be acyclic (an
// invocation that wrote a device before and after another did is a cycle of
// two). Under PSV and GSV the overlap check implies it; under EV, whose
// post-leases let routines sharing a device overlap, it is the check.
void check_precedence(World& world, Outcome& out) {
  struct Edge {
    std::string device;
    core::TimePoint before;
    core::TimePoint after;
  };
  std::map<std::string, std::map<std::string, Edge>> after;  // invocation -> later invocation -> why
  for (auto& device : world.devices) {
    std::string previous;
    core::TimePoint previous_at{};
    for (const auto& a : device->actuations()) {
      const auto hash = a.command_id.rfind('#');
      if (hash == std::string::npos) continue;
      const std::string invocation = a.command_id.substr(0, hash);
      if (!previous.empty() && previous != invocation) {
        after[previous].try_emplace(invocation, Edge{device->spec().id, previous_at, a.at});
      }
      previous = invocation;
      previous_at = a.at;
    }
  }
  // Depth-first search for a cycle; reports the first one found.
  std::map<std::string, int> state;  // 1: on the path, 2: done
  std::vector<std::string> path;
  std::function<bool(const std::string&)> visit = [&](const std::string& node) {
    state[node] = 1;
    path.push_back(node);
    for (const auto& [next, edge] : after[node]) {
      if (state[next] == 1) {
        std::vector<std::string> steps;
        auto from = std::find(path.begin(), path.end(), next);
        for (auto it = from; it != path.end(); ++it) {
          const std::string& to = std::next(it) == path.end() ? next : *std::next(it);
          const Edge& e = after[*it].at(to);
          steps.push_back(
              fmt::format("{} before {} on {} ({} then {})", *it, to, e.device, at_s(e.before), at_s(e.after)));
        }
        out.violations.push_back(fmt::format("precedence cycle: {}", fmt::join(steps, ", ")));
        return true;
      }
      if (state[next] == 0 && visit(next)) return true;
    }
    path.pop_back();
    state[node] = 2;
    return false;
  };
  std::vector<std::string> nodes;
  for (const auto& [node, edges] : after) nodes.push_back(node);
  for (const auto& node : nodes) {
    if (state[node] == 0 && visit(node)) return;
  }
}

Outcome run(const Plan& plan, uint64_t seed) {
  core::Rng rng(seed * 104729 + 17);
  const auto n = static_cast<size_t>(rng.between(5, 9));
  const std::string toml = fmt::format(
      "[topology]\nkind = \"random\"\nnodes = {}\nseed = {}\n[link]\ndelay_ms = {}\njitter_ms = {}\nloss = {}\n"
      "[run]\nduration_s = 600\n",
      n, seed, rng.between(1, 5), rng.between(0, 3), plan.loss);

  World world;
  const size_t actuators = static_cast<size_t>(rng.between(4, 7));
  std::vector<DeviceSpec> catalog;
  for (size_t i = 0; i <= actuators; ++i) {
    DeviceSpec spec;
    const bool sensor = i == actuators;
    spec.id = sensor ? "motion" : fmt::format("d{}", i);
    spec.kind = sensor ? DeviceKind::motion_sensor : DeviceKind::plug;
    spec.location = {static_cast<double>(rng.below(60)), static_cast<double>(rng.below(60)), 0};
    spec.driver = "emulated://" + spec.id;
    catalog.push_back(spec);
    world.devices.push_back(
        std::make_unique<EmulatedDevice>(spec, sensor ? Attributes{{"motion", false}} : Attributes{{"power", false}}));
  }
  // Exclusive pairs, each plug in at most one (so no rule set conflicts).
  std::vector<std::pair<std::string, std::string>> exclusive;
  std::vector<routine::PreconditionRuleSpec> rules;
  std::vector<Implication> implications;  // the rules, as the checker reads them
  const auto add_rule = [&rules, &implications](const std::string& device, bool on, const std::string& needs,
                                                bool needs_on) {
    const auto state = [](bool value) { return value ? "on" : "off"; };
    const std::string name = fmt::format("{}_{}_needs_{}_{}", device, state(on), needs, state(needs_on));
    rules.push_back({name,
                     fmt::format("{}.power == {}", device, state(on)),
                     {fmt::format("{}.power == {}", needs, state(needs_on))}});
    implications.push_back({name, device, on, needs, needs_on});
  };
  if (plan.preconditions) {
    for (size_t i = 0; i + 1 < actuators; i += 2) {
      if (i > 0 && rng.below(4) == 0) continue;
      const std::string a = fmt::format("d{}", i);
      const std::string b = fmt::format("d{}", i + 1);
      exclusive.emplace_back(a, b);
      add_rule(a, true, b, false);
      add_rule(b, true, a, false);
    }
    // Every other pair's first plug also needs the next pair's first plug on
    // (a heater with its fan), which may go off only once the first is off.
    // Its combo then sets two plugs of one graph stage at once (a run: the
    // partner off and the fan on, routine/routine_combo.h) under a deeper
    // precondition (the fan's own partner off). Not where aggressive
    // invocations run: with these larger graphs their wounds thrash (each
    // wounded one asks again at the back of FIFO queues, the oldest wounds
    // every younger one ahead of it in turn) and seed 2 did not drain; an
    // age-ordered queue fixed that but deadlocked seed 19 (open, issue 14).
    const bool aggressive_runs = plan.strategy == routine::LockStrategy::aggressive || plan.mixed_strategies ||
                                 plan.adhoc_combos;
    for (size_t j = 0; !aggressive_runs && j + 1 < exclusive.size(); j += 2) {
      add_rule(exclusive[j].first, true, exclusive[j + 1].first, true);
      add_rule(exclusive[j + 1].first, false, exclusive[j].first, false);
    }
  }
  // Routines over random, overlapping device sets; one on the sensor.
  const size_t routine_count = static_cast<size_t>(rng.between(4, 6));
  for (size_t r = 0; r < routine_count; ++r) {
    std::vector<std::string> devices;
    const size_t size = static_cast<size_t>(rng.between(1, plan.preconditions ? 2 : 3));
    // APEX: the first command switches one plug of a pair on, both plugs
    // of each pair in turn, so the routines compete for the pairs'
    // preconditions.
    if (plan.preconditions && r > 0) {
      const auto& [a, b] = exclusive[((r - 1) / 2) % exclusive.size()];
      devices.push_back(r % 2 == 1 ? a : b);
    }
    while (devices.size() < size) {
      const std::string id = fmt::format("d{}", rng.below(actuators));
      if (std::find(devices.begin(), devices.end(), id) == devices.end()) devices.push_back(id);
    }
    std::vector<std::string> uses;
    // (Not under APEX, where a shared resource would serialize the very
    // routines whose combos compete.)
    if (rng.below(2) == 0 && !plan.preconditions) uses.push_back(rng.below(2) == 0 ? "pump" : "boiler");
    // Commands in a random order: SLA must still lock in id order.
    const bool sensor_routine = r == 0;
    world.routines.push_back(make_routine(fmt::format("r{}", r), sensor_routine ? "motion.motion == on" : "manual",
                                          devices, rng, rng.below(2) == 1, plan.preconditions));
    world.routines.back().uses = uses;
    if (plan.mixed_strategies) {
      constexpr routine::LockStrategy kInTurn[] = {routine::LockStrategy::sla, routine::LockStrategy::ola,
                                                   routine::LockStrategy::aggressive};
      world.routines.back().lock_strategy = kInTurn[r % 3];
    }
    if (plan.preconditions && r > 0) world.routines.back().commands.front().values = {{"power", true}};
    // With failures, routines hold their devices longer after commands, so
    // failures and restarts also fall between a routine's last command on a
    // device and its finish (SafeHome's Fig. 3 cases 2, 4 and 5).
    if (plan.device_failures) {
      for (auto& command : world.routines.back().commands) {
        if (!command.duration && rng.below(2) == 0) command.duration = milliseconds(rng.between(500, 2000));
      }
    }
    if (plan.revisits && world.routines.back().commands.size() >= 2) {
      routine::RoutineCommand again = world.routines.back().commands.front();
      again.values = {{"power", rng.below(2) == 0}};
      again.duration.reset();
      world.routines.back().commands.push_back(again);
    }
    if (plan.user_undo) {
      for (auto& command : world.routines.back().commands) command.undo = {{"power", rng.below(2) == 0}};
    }
  }

  // The ad hoc combos' subjects: every plug of a pair (its `on` has a rule).
  std::vector<std::string> adhoc_subjects;
  if (plan.adhoc_combos) {
    for (const auto& [a, b] : exclusive) {
      adhoc_subjects.push_back(a);
      adhoc_subjects.push_back(b);
    }
  }
  // Every routine group the checks read: the catalog routines', then the ad
  // hoc combos'.
  std::vector<Group> groups;
  for (const auto& spec : world.routines) groups.push_back({spec.id, &spec});
  for (const auto& device : adhoc_subjects) groups.push_back({routine::adhoc_routine_id(device), nullptr});

  routine::Catalog combos;
  combos.set_base(catalog, "sim", world.routines, rules);

  MeshSim::Options options;
  options.start_spread = seconds(1);
  options.configure = [&](agent::NodeConfig& config) {
    config.kgroup.selection.k = 3;
    config.kgroup.selection.mode = kgroup::SelectionMode::lsh;
    config.kgroup.selection.clusters.devices_per_cluster = 2;
    config.devices.catalog = catalog;
    config.devices.routines = world.routines;
    config.devices.preconditions = rules;
    config.devices.catalog_digest = "sim";
    config.devices.leaders.poll_interval = milliseconds(500);
    config.devices.service.ensure_interval = seconds(1);
    config.routines.leaders.strategy = plan.strategy;
    config.routines.leaders.visibility = plan.visibility;
  };
  options.drivers = [&world](size_t, core::Env& env) {
    world.factories.push_back(std::make_unique<routine::EmulatedDriverFactory>(env));
    for (auto& device : world.devices) world.factories.back()->add(*device);
    return world.factories.back().get();
  };
  MeshSim sim(parse_scenario(toml, "routine_agent.toml"), seed, options);

  Outcome out;
  const core::TimePoint settle(seconds(30));
  sim.run_until(settle);
  const core::TimePoint stop = settle + seconds(40);

  // The stream: manual runs from random agents (and ad hoc combos), and the
  // sensor flipping.
  std::map<std::string, proto::InvocationMsg> adhoc_reported;  // holder name -> the end its agent reported
  uint64_t adhoc_turn = 0;
  std::function<void()> next_run = [&] {
    if (sim.simulator().now() >= stop) return;
    const size_t node = rng.below(n);
    if (plan.adhoc_combos && rng.below(2) == 0) {
      constexpr routine::LockStrategy kInTurn[] = {routine::LockStrategy::mesh_default, routine::LockStrategy::sla,
                                                   routine::LockStrategy::ola, routine::LockStrategy::aggressive};
      const std::string& device = adhoc_subjects[rng.below(adhoc_subjects.size())];
      const RoutineSpec combo = routine::adhoc_spec(device, {{"power", true}}, kInTurn[adhoc_turn++ % 4]);
      if (agent::Node* agent = sim.node(node)) {
        agent->routines().run_adhoc(combo, "", seconds(600), [&adhoc_reported, id = combo.id](const auto& result) {
          if (result) adhoc_reported[routine::holder_name(id, routine::from_proto(*result))] = *result;
        });
      }
    } else {
      const auto& spec = world.routines[1 + rng.below(world.routines.size() - 1)];
      if (agent::Node* agent = sim.node(node)) agent->routines().run(spec.id, false, seconds(10), [](const auto&) {});
    }
    sim.simulator().after(milliseconds(plan.preconditions ? rng.between(100, 500) : rng.between(200, 900)), next_run);
  };
  next_run();
  std::function<void()> flip = [&] {
    if (sim.simulator().now() >= stop) return;
    EmulatedDevice* sensor = world.find("motion");
    sensor->set_state({{"motion", !std::get<bool>(sensor->state().at("motion"))}});
    sim.simulator().after(milliseconds(rng.between(1500, 4000)), flip);
  };
  flip();
  std::function<void()> fail_device = [&] {
    if (sim.simulator().now() >= stop) return;
    EmulatedDevice* device = world.find(fmt::format("d{}", rng.below(actuators)));
    device->set_up(false);
    sim.simulator().after(milliseconds(rng.between(700, 3000)), [device] { device->set_up(true); });
    sim.simulator().after(milliseconds(rng.between(1000, 4000)), fail_device);
  };
  if (plan.device_failures) fail_device();
  // Its own generator, so the other plans' scenarios stay as they were.
  core::Rng stuck_rng(seed ^ 0x57c4a7ull);
  std::function<void()> stick_device = [&] {
    if (sim.simulator().now() >= stop) return;
    EmulatedDevice* device = world.find(fmt::format("d{}", stuck_rng.below(actuators)));
    device->set_stuck(true);
    sim.simulator().after(milliseconds(stuck_rng.between(2000, 8000)), [device] { device->set_stuck(false); });
    sim.simulator().after(milliseconds(stuck_rng.between(3000, 8000)), stick_device);
  };
  if (plan.stuck_actuators) stick_device();
  // Its own generator too.
  core::Rng move_rng(seed ^ 0x30e5ull);
  std::function<void()> move_device = [&] {
    if (sim.simulator().now() >= stop) return;
    sim.simulator().after(milliseconds(move_rng.between(2000, 6000)), move_device);
    agent::Node* node = sim.node(move_rng.below(n));
    if (node == nullptr) return;
    const auto& selector = node->kgroups().selector();
    const std::string id = fmt::format("d{}", move_rng.below(actuators));
    const routine::DeviceSpec* current = node->catalog().find(id);
    if (current == nullptr) return;
    const std::string from = selector.device_group(id).to_string();
    std::vector<const routine::DeviceSpec*> elsewhere;
    for (const auto& device : catalog) {
      const routine::DeviceSpec* other = node->catalog().find(device.id);
      if (other != nullptr && selector.device_group(device.id).to_string() != from) elsewhere.push_back(other);
    }
    if (elsewhere.empty()) return;
    const routine::DeviceSpec* beside = elsewhere[move_rng.below(elsewhere.size())];
    DeviceSpec moved = *current;
    moved.location = {beside->location[0] + 1, beside->location[1] + 1, 0};
    proto::CatalogChange change;
    *change.mutable_put() = routine::to_proto(moved);
    change.set_replace(true);
    node->devices().change_catalog(change, seconds(20), [&out](const auto& result) {
      if (result && !result->refused()) ++out.moves;
    });
  };
  if (plan.moves) sim.simulator().after(milliseconds(move_rng.between(1000, 5000)), move_device);
  // The device groups' failure and restart events, sampled: for event k
  // of a device, the last sample whose groups had not applied it and the
  // first whose had, so its group committed it between the two.
  std::map<std::string, std::string> group_of;
  if (agent::Node* any = sim.node(0)) {
    for (const auto& device : catalog) group_of[device.id] = any->kgroups().selector().device_group(device.id).to_string();
  }
  std::map<std::string, std::vector<EventWindow>> device_events;
  std::map<std::string, core::TimePoint> sampled_at;
  std::function<void()> sample_events = [&] {
    for (const auto& [device, target] : group_of) {
      const auto replicas = serving(sim, target);
      if (replicas.empty()) continue;
      uint64_t count = 0;
      for (const auto& [index, replica] : replicas) {
        const auto* state = dynamic_cast<const routine::DeviceGroupState*>(&replica->state_machine());
        const auto* record = state == nullptr ? nullptr : state->device(device);
        if (record != nullptr) count = std::max(count, record->availability_events);
      }
      auto& events = device_events[device];
      const auto previous = sampled_at.find(device);
      while (events.size() < count) {
        events.push_back({previous == sampled_at.end() ? core::TimePoint::min() : previous->second,
                          sim.simulator().now()});
      }
      sampled_at[device] = sim.simulator().now();
    }
    sim.simulator().after(milliseconds(200), sample_events);
  };
  if (plan.device_failures) sample_events();

  std::set<size_t> down;
  sim.run_until(settle + milliseconds(rng.between(1000, 20000)));
  size_t victim = rng.below(n);
  // The node leading an ad hoc combo's group while one runs there: the pivot.
  const auto pivot = [&]() -> std::optional<size_t> {
    for (const auto& device : adhoc_subjects) {
      const auto replicas = serving(sim, "routine:" + routine::adhoc_routine_id(device));
      if (replicas.empty()) continue;
      const auto* state = dynamic_cast<const routine::RoutineGroupState*>(&replicas.front().second->state_machine());
      if (state == nullptr) continue;
      for (const auto& [seq, invocation] : state->invocations()) {
        if (!invocation.done()) return replicas.front().first;
      }
    }
    return std::nullopt;
  };
  if (plan.adhoc_combos) {
    const core::TimePoint give_up = sim.simulator().now() + seconds(10);
    while (!pivot() && sim.simulator().now() < give_up) sim.run_until(sim.simulator().now() + milliseconds(100));
    if (const auto leader = pivot()) {
      victim = *leader;
      out.pivot_crashed = true;
    }
  }
  sim.crash(victim);
  down.insert(victim);
  if (plan.second_crash) {
    sim.run_until(sim.simulator().now() + milliseconds(rng.between(0, 8000)));
    const size_t pick = rng.below(n);
    if (down.count(pick) == 0) {
      sim.crash(pick);
      down.insert(pick);
    }
  }
  out.partitioned = !sim.topology().connected_without(down);
  sim.run_until(stop);
  sim.restart(victim);
  down.erase(victim);
  out.partitioned = out.partitioned || !sim.topology().connected_without(down);
  // Quiescence: runs stopped; let the backlog drain (conflicting routines
  // with durations run one after another, OLA backs off) and releases
  // settle, up to a bound far above any backlog the stream can build.
  auto all_ended = [&] {
    for (const auto& group : groups) {
      const routine::RoutineGroupState* state = leading_state(sim, group.id);
      if (state == nullptr) continue;
      for (const auto& [seq, invocation] : state->invocations()) {
        if (!invocation.done()) return false;
      }
    }
    return true;
  };
  const core::TimePoint drained_by = stop + seconds(600);
  sim.run_until(stop + seconds(30));
  while (sim.simulator().now() < drained_by && !all_ended()) sim.run_until(sim.simulator().now() + seconds(5));
  sim.run_until(sim.simulator().now() + seconds(10));

  // The devices of each routine, and the actuations of each invocation.
  std::map<std::string, std::set<std::string>> devices_of;
  std::map<std::string, std::set<std::string>> resources_of;
  for (const auto& spec : world.routines) {
    // What an invocation locks: its precondition graphs' devices too.
    devices_of[spec.id] = routine::combo_devices(spec, combos).value().devices;
    resources_of[spec.id] = {spec.uses.begin(), spec.uses.end()};
  }
  // A rollback that took a lost resource again (ResourceHeldStep.
  // for_rollback) uses it anew: its undos from then on are a span of their
  // own (those before it ran under the first grant). Holder -> when the
  // grant was taken again (the epoch when not known: every undo).
  const core::TimePoint origin = sim.node(0) != nullptr ? sim.node(0)->config().kgroup.epoch_origin : core::TimePoint{};
  std::map<std::string, core::TimePoint> undone_under_retaken;
  for (const auto& spec : world.routines) {
    const routine::RoutineGroupState* state = leading_state(sim, spec.id);
    if (state == nullptr) continue;
    for (const auto& [seq, invocation] : state->invocations()) {
      std::optional<core::TimePoint> retaken;
      for (const auto& [resource, held] : invocation.resources) {
        if (!held.for_rollback) continue;
        const core::TimePoint at =
            held.taken_at_us > 0 ? origin + std::chrono::microseconds(held.taken_at_us) : core::TimePoint{};
        retaken = std::min(retaken.value_or(at), at);
      }
      if (retaken) {
        undone_under_retaken[routine::holder_name(spec.id, invocation)] = *retaken;
        ++out.rollback_resource_retakes;
      }
    }
  }
  for (const auto& device : adhoc_subjects) {
    const RoutineSpec combo = routine::adhoc_spec(device, {{"power", true}}, routine::LockStrategy::mesh_default);
    devices_of[combo.id] = routine::combo_devices(combo, combos).value().devices;
  }
  // Each ad hoc combo's own lock strategy, by holder name.
  std::map<std::string, routine::LockStrategy> adhoc_strategy;
  for (const auto& group : groups) {
    const routine::RoutineGroupState* state = group.spec == nullptr ? leading_state(sim, group.id) : nullptr;
    if (state == nullptr) continue;
    for (const auto& [seq, invocation] : state->invocations()) {
      if (invocation.adhoc)
        adhoc_strategy[routine::holder_name(group.id, invocation)] = invocation.adhoc->lock_strategy;
    }
  }
  std::map<std::string, Span> spans;  // "ROUTINE#SEQ.TAG", and "ROUTINE#SEQ.TAG (undo)" for those
  std::map<std::string, int> actuated;
  std::map<std::string, core::TimePoint> actuated_at;  // command id -> its first actuation
  std::map<std::string, std::string> stuck_at;         // command id -> its device, stuck when it came
  for (auto& device : world.devices) {
    for (const auto& a : device->actuations()) {
      ++actuated[a.command_id];
      actuated_at.try_emplace(a.command_id, a.at);
      if (!a.took_effect) stuck_at[a.command_id] = device->spec().id;
      ++out.actuations;
      const auto hash = a.command_id.rfind('#');
      if (hash == std::string::npos) continue;
      std::string invocation = a.command_id.substr(0, hash);
      if (const auto retaken = undone_under_retaken.find(invocation);
          a.command_id.ends_with(".undo") && retaken != undone_under_retaken.end() && a.at >= retaken->second) {
        invocation += " (undo)";
      }
      Span& span = spans[invocation];
      span.first = std::min(span.first, a.at);
      span.last = std::max(span.last, a.at);
    }
  }
  for (const auto& [id, count] : actuated) {
    if (count > 1) out.violations.push_back(fmt::format("command {} actuated {} times", id, count));
  }
  // Safety: invocations that share a device or a resource never
  // interleave their actuations; under GSV no two invocations do.
  const auto strategy_of = [&](const std::string& holder) {
    const std::string routine_id = holder.substr(0, holder.find('#'));
    for (const auto& spec : world.routines) {
      if (spec.id == routine_id && spec.lock_strategy != routine::LockStrategy::mesh_default) {
        return spec.lock_strategy;
      }
    }
    const auto adhoc = adhoc_strategy.find(holder);
    if (adhoc != adhoc_strategy.end() && adhoc->second != routine::LockStrategy::mesh_default) return adhoc->second;
    return plan.strategy;
  };
  for (auto a = spans.begin(); a != spans.end(); ++a) {
    for (auto b = std::next(a); b != spans.end(); ++b) {
      const std::string ra = a->first.substr(0, a->first.find('#'));
      const std::string rb = b->first.substr(0, b->first.find('#'));
      const auto& da = devices_of[ra];
      const auto& db = devices_of[rb];
      const auto& ua = resources_of[ra];
      const auto& ub = resources_of[rb];
      const bool device_conflict = std::any_of(da.begin(), da.end(), [&db](const auto& d) { return db.count(d) != 0; });
      const auto shared = std::find_if(ua.begin(), ua.end(), [&ub](const auto& u) { return ub.count(u) != 0; });
      const bool global = routine::is_global(plan.visibility);
      // EV's post-leases let routines sharing a device overlap, and so does
      // the aggressive strategy, which runs a command before it holds a
      // later one's device (the precedence check below judges both);
      // resources still exclude.
      const bool excludes_on_devices = device_conflict && plan.visibility != routine::Visibility::ev &&
                                       strategy_of(a->first) != routine::LockStrategy::aggressive &&
                                       strategy_of(b->first) != routine::LockStrategy::aggressive;
      if (!excludes_on_devices && shared == ua.end() && !global) continue;
      const bool disjoint = a->second.last < b->second.first || b->second.last < a->second.first;
      if (!disjoint) {
        out.violations.push_back(fmt::format(
            "invocations {} [{:.3f} s, {:.3f} s] and {} [{:.3f} s, {:.3f} s] {} and overlapped", a->first,
            core::to_seconds(a->second.first.time_since_epoch()), core::to_seconds(a->second.last.time_since_epoch()),
            b->first, core::to_seconds(b->second.first.time_since_epoch()),
            core::to_seconds(b->second.last.time_since_epoch()),
            excludes_on_devices  ? std::string("share a device")
            : shared != ua.end() ? "share only resource " + *shared
                                 : std::string("share nothing, but GSV runs one routine at a time")));
      }
    }
  }

  if (plan.visibility != routine::Visibility::wv) check_precedence(world, out);

  // EV: every invocation that got a key, and its routine's devices.
  struct Keyed {
    int64_t key = 0;
    int64_t keyed_at = 0;
    int64_t placed_at = 0;
    std::set<std::string> devices;
  };
  std::vector<Keyed> keys;
  // Liveness and inheritance, at each routine group's leader.
  for (const auto& group : groups) {
    const std::string target = "routine:" + group.id;
    const auto replicas = serving(sim, target);
    if (replicas.empty()) {
      if (!out.partitioned && sim.quorum_alive(target) && spans.count(group.id + "#1") != 0) {
        out.violations.push_back(fmt::format("routine {} ran but no node leads its group at the end", group.id));
      }
      continue;
    }
    kgroup::GroupReplica* leader = replicas.front().second;
    const auto* state = dynamic_cast<const routine::RoutineGroupState*>(&leader->state_machine());
    if (state == nullptr) continue;
    for (const auto& [seq, invocation] : state->invocations()) {
      const RoutineSpec& spec = ran(group, invocation);
      ++out.invocations;
      out.rekeys += invocation.rekeys;
      if (invocation.serial_key_us != 0) {
        Keyed& keyed =
            keys.emplace_back(Keyed{invocation.serial_key_us, invocation.keyed_at_us, invocation.placed_at_us, {}});
        for (const auto& command : spec.commands) keyed.devices.insert(command.device);
      }
      const std::string name = routine::holder_name(spec.id, invocation);
      if (!invocation.done()) {
        if (!out.partitioned) {
          out.violations.push_back(fmt::format("invocation {} is still {} after quiescence", name,
                                               proto::RoutinePhase_Name(invocation.phase)));
        }
        continue;
      }
      if (invocation.outcome == proto::INVOCATION_OK) ++out.ok;
      for (const auto& [index, result] : invocation.commands) {
        const std::string id = routine::command_id(spec.id, invocation, index);
        if (result.status == proto::COMMAND_OK && actuated[id] != 1) {
          out.violations.push_back(fmt::format("command {} recorded ok but actuated {} times", id, actuated[id]));
        }
        // APEX §7.3: ok means the device showed the command's values.
        if (result.status == proto::COMMAND_OK && stuck_at.count(id) != 0) {
          out.violations.push_back(
              fmt::format("command {} recorded ok, but {} was stuck and did not change", id, stuck_at[id]));
        }
        if (result.status == proto::COMMAND_NOT_EFFECTIVE) ++out.not_effective;
      }
    }
    // Every member of the leader's group instance that applied as far holds
    // the same state.
    const std::string leader_snapshot = state->snapshot();
    for (size_t i = 0; i < sim.size(); ++i) {
      agent::Node* node = sim.node(i);
      if (node == nullptr) continue;
      const auto& c = leader->config();
      kgroup::GroupReplica* r = node->kgroups().host().find(target, c.epoch, c.generation);
      if (r == nullptr || r == leader || r->applied() != leader->applied()) continue;
      if (r->state_machine().snapshot() != leader_snapshot) {
        out.violations.push_back(
            fmt::format("n{}'s replica of {} applied as far as its leader but differs", i, target));
      }
    }
  }
  // Atomicity: an invocation aborted by a failed must command ran nothing
  // after it, and each undo that actuated set its device back to the values
  // it had just before the undone command (what the device's own log says).
  for (const auto& group : groups) {
    const routine::RoutineGroupState* state = leading_state(sim, group.id);
    if (state == nullptr) continue;
    for (const auto& [seq, invocation] : state->invocations()) {
      if (!invocation.done()) continue;
      const RoutineSpec& spec = ran(group, invocation);
      const std::string name = routine::holder_name(spec.id, invocation);
      if (invocation.adhoc) check_adhoc_end(name, invocation, spans.count(name) != 0, adhoc_reported, out);
      const auto commands =
          routine::expand(spec, invocation.plan.value_or(std::vector<routine::PreconditionCommand>{}));
      if (invocation.plan) out.precondition_commands += invocation.plan->size();
      for (uint32_t k = 1; k < commands.size(); ++k) {
        if (!commands[k].with_previous) continue;
        ++out.run_commands;
        // Sent with the one before it: before that one's outcome was in.
        const auto sent = invocation.commands.find(k);
        const auto before = invocation.commands.find(k - 1);
        if (sent != invocation.commands.end() && before != invocation.commands.end() &&
            sent->second.started_at_us > 0 && sent->second.started_at_us < before->second.done_at_us) {
          ++out.sent_with_run;
        }
      }
      const auto failed = std::find_if(invocation.commands.begin(), invocation.commands.end(), [&](const auto& c) {
        return c.second.status != proto::COMMAND_OK && c.first < commands.size() && commands[c.first].command.must;
      });
      if (invocation.abort_reason.starts_with("wounded")) {
        ++out.wound_aborts;
        // APEX §7.1: a conservative combo that began executing never loses
        // to contention.
        const auto strategy =
            spec.lock_strategy == routine::LockStrategy::mesh_default ? plan.strategy : spec.lock_strategy;
        if (strategy != routine::LockStrategy::aggressive) {
          out.violations.push_back(fmt::format("conservative ({}) invocation {} aborted for contention: {}",
                                               routine::to_string(strategy), name, invocation.abort_reason));
        }
      }
      if (failed == invocation.commands.end()) {
        if (!invocation.abort_reason.empty() && !invocation.abort_reason.starts_with("wounded")) ++out.failure_aborts;
        continue;
      }
      // The commands of the failed one's run went out with it and may have
      // run, but each must be recorded, or the rollback cannot undo it.
      uint32_t run_end = failed->first + 1;
      while (run_end < commands.size() && commands[run_end].with_previous) ++run_end;
      for (uint32_t later = failed->first + 1; later < commands.size(); ++later) {
        const std::string id = routine::command_id(spec.id, invocation, later);
        const bool recorded = invocation.commands.count(later) != 0;
        if (later < run_end) {
          if (actuated.count(id) != 0 && !recorded) {
            out.violations.push_back(fmt::format(
                "command {}, sent with the failed must command {}, ran but was never recorded (so never undone)", id,
                failed->first + 1));
          }
          continue;
        }
        if (actuated.count(id) != 0 || recorded) {
          out.violations.push_back(
              fmt::format("command {} ran after must command {} of its invocation failed", id, failed->first + 1));
        }
      }
      if (invocation.abort_reason.empty()) continue;
      ++out.aborted;
      if (invocation.outcome != proto::INVOCATION_ABORTED) {
        out.violations.push_back(
            fmt::format("invocation {} aborted but ended {}", name, proto::InvocationOutcome_Name(invocation.outcome)));
      }
    }
  }
  if (plan.device_failures) {
    check_failure_serialization(plan, sim, groups, spans, actuated_at, device_events, out);
  }
  // The undo values of the command a command id names (ROUTINE#SEQ.TAG#INDEX;
  // without precondition rules the index is the routine's own).
  const auto undo_values_of = [&](const std::string& id) {
    const std::string routine_id = id.substr(0, id.find('#'));
    const size_t index = std::stoul(id.substr(id.rfind('#') + 1));
    for (const auto& spec : world.routines) {
      if (spec.id == routine_id && !plan.preconditions && index < spec.commands.size()) {
        return spec.commands[index].undo;
      }
    }
    return Attributes{};
  };
  // EV: an aborted invocation whose undo of a device was refused because a
  // later invocation had written it since hands its undo value to that
  // writer (DeviceGroupState::restore_after_lease), so the writer's own
  // undo, if it actuates after the hand-over, must restore what was there
  // before the aborted one. The device group decided the refusal between
  // the undo's sending and its recorded outcome; an undo actuated inside
  // that window may restore either value. An undo that failed otherwise
  // (the device was down) hands nothing over: the write stays, and what
  // comes after sees it.
  struct HandOver {
    std::optional<core::TimePoint> not_before;  // unknown: any time up to `not_after`
    std::optional<core::TimePoint> not_after;   // unknown: any time from `not_before`
  };
  std::map<std::string, HandOver> handed_over;  // command id -> when its undo value was handed over
  for (const auto& group : groups) {
    const routine::RoutineGroupState* state = leading_state(sim, group.id);
    if (state == nullptr) continue;
    for (const auto& [seq, invocation] : state->invocations()) {
      for (const auto& [index, undo] : invocation.undone) {
        // The refusal's wording is DeviceGroupState::restore_after_lease's.
        if (undo.status != proto::COMMAND_REFUSED || undo.detail.find("was written since") == std::string::npos) {
          continue;
        }
        HandOver when;
        if (undo.started_at_us > 0) when.not_before = origin + std::chrono::microseconds(undo.started_at_us);
        if (undo.done_at_us > 0) when.not_after = origin + std::chrono::microseconds(undo.done_at_us);
        handed_over.emplace(routine::command_id(group.id, invocation, index), when);
      }
    }
  }
  const auto invocation_of = [](const std::string& id) { return id.substr(0, id.rfind('#')); };
  const std::string suffix = ".undo";
  const auto is_undo = [&suffix](const std::string& id) {
    return id.size() > suffix.size() && id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  for (auto& device : world.devices) {
    if (device->spec().kind == DeviceKind::motion_sensor) continue;
    Attributes now{{"power", false}};
    std::map<std::string, Attributes> before;  // command id -> the device's values just before it
    std::map<std::string, std::string> previous_writer;  // command id -> the actuation just before it
    std::set<std::string> undone_here;                   // commands whose undo actuated on this device
    for (const auto& a : device->actuations()) {
      if (is_undo(a.command_id)) undone_here.insert(a.command_id.substr(0, a.command_id.size() - suffix.size()));
    }
    // The values an undo of `undone` actuated at `at` may restore: `values`
    // (what was there before it), or, following hand-overs back from
    // `writer` (the actuation before it) through earlier aborted writers,
    // what was there before them.
    const auto follow_hand_overs = [&](std::vector<Attributes> values, std::string writer, const std::string& undone,
                                       core::TimePoint at) {
      if (plan.visibility != routine::Visibility::ev) return values;
      bool surely_handed = true;
      while (!writer.empty()) {
        const auto handed = handed_over.find(writer);
        if (is_undo(writer) || undone_here.count(writer) != 0 || invocation_of(writer) == invocation_of(undone) ||
            handed == handed_over.end() || (handed->second.not_before && at < *handed->second.not_before)) {
          break;
        }
        // Only a chain handed over for sure up to here rules the values before out.
        surely_handed = surely_handed && handed->second.not_after && at > *handed->second.not_after;
        if (surely_handed) values.clear();
        values.push_back(before.at(writer));
        const auto previous = previous_writer.find(writer);
        writer = previous == previous_writer.end() ? std::string() : previous->second;
      }
      return values;
    };
    const auto restorable_before = [&](const std::string& undone, core::TimePoint at) {
      return follow_hand_overs({before.at(undone)}, previous_writer.at(undone), undone, at);
    };
    std::string last_actuation;
    for (const auto& a : device->actuations()) {
      before.emplace(a.command_id, now);
      previous_writer.emplace(a.command_id, last_actuation);
      last_actuation = a.command_id;
      if (is_undo(a.command_id)) {
        ++out.undone;
        const std::string undone = a.command_id.substr(0, a.command_id.size() - suffix.size());
        const auto original = before.find(undone);
        const Attributes user = undo_values_of(undone);
        if (const auto user_power = user.find("power"); user_power != user.end()) {
          // The user's undo value, whatever the device was before.
          const Attributes& prior = original == before.end() ? now : original->second;
          if (prior.at("power") != user_power->second) ++out.undone_to_user_value;
          if (a.values.at("power") != user_power->second) {
            out.violations.push_back(fmt::format("{} set {} to power={} but the routine's undo value is power={}",
                                                 a.command_id, device->spec().id, std::get<bool>(a.values.at("power")),
                                                 std::get<bool>(user_power->second)));
          }
        } else if (original == before.end()) {
          // The undone command's outcome was unknown (the device did not
          // answer) and it never acted: its undo must change nothing, or
          // (EV) restore what an aborted writer before it handed over.
          const std::vector<Attributes> expected =
              follow_hand_overs({now}, previous_writer.at(a.command_id), undone, a.at);
          const bool allowed = std::any_of(expected.begin(), expected.end(), [&a](const Attributes& values) {
            return std::all_of(a.values.begin(), a.values.end(), [&values](const auto& written) {
              const auto value = values.find(written.first);
              return value != values.end() && value->second == written.second;
            });
          });
          if (!allowed) {
            out.violations.push_back(
                fmt::format("{} changed {} though {} never actuated", a.command_id, device->spec().id, undone));
          }
        } else if (const std::vector<Attributes> expected = restorable_before(undone, a.at);
                   std::find(expected.begin(), expected.end(), a.values) == expected.end()) {
          out.violations.push_back(fmt::format("{} set {} to power={} but it was power={} before {}", a.command_id,
                                               device->spec().id, std::get<bool>(a.values.at("power")),
                                               std::get<bool>(expected.back().at("power")), undone));
        }
      }
      if (!a.took_effect) continue;  // a stuck actuator kept its state
      for (const auto& [attribute, value] : a.values) now[attribute] = value;
    }
  }

  // APEX consistency (apex.md §2): no instant at which a rule's condition
  // holds and its precondition does not (both plugs of an exclusive pair
  // on, a heater on with its fan off), replaying every device's own
  // actuation log in time order (all start off, which breaks no rule).
  if (!implications.empty()) {
    struct Actuation {
      core::TimePoint at;
      std::string device;
      bool power = false;
      std::string command_id;
    };
    std::vector<Actuation> timeline;
    for (auto& device : world.devices) {
      for (const auto& a : device->actuations()) {
        const auto power = a.values.find("power");
        if (power == a.values.end() || !a.took_effect) continue;
        timeline.push_back({a.at, device->spec().id, std::get<bool>(power->second), a.command_id});
      }
    }
    std::stable_sort(timeline.begin(), timeline.end(), [](const auto& x, const auto& y) { return x.at < y.at; });
    std::map<std::string, bool> on;
    std::set<std::string> broken;  // reported once per break
    for (size_t i = 0; i < timeline.size(); ++i) {
      on[timeline[i].device] = timeline[i].power;
      // Several actuations at one instant are one state change.
      if (i + 1 < timeline.size() && timeline[i + 1].at == timeline[i].at) continue;
      for (const Implication& rule : implications) {
        if (on[rule.device] != rule.on || on[rule.needs] == rule.needs_on) {
          broken.erase(rule.name);
          continue;
        }
        if (!broken.insert(rule.name).second) continue;
        out.violations.push_back(fmt::format("{} power={} and {} power={} at {:.3f} s (after {}): rule {} broken",
                                             rule.device, on[rule.device], rule.needs, on[rule.needs],
                                             core::to_seconds(timeline[i].at.time_since_epoch()),
                                             timeline[i].command_id, rule.name));
      }
    }
  }

  // A safety violation names any group the k-group layer forked (one
  // target, epoch and generation with two member lists: genesis by creators
  // that did not see each other), the one known way to break it.
  if (!out.violations.empty()) {
    std::map<std::tuple<std::string, uint64_t, uint32_t>, std::set<std::vector<core::NodeId>>> instances;
    for (size_t i = 0; i < sim.size(); ++i) {
      agent::Node* node = sim.node(i);
      if (node == nullptr) continue;
      for (kgroup::GroupReplica* r : node->kgroups().host().replicas()) {
        const auto& c = r->config();
        instances[{c.target.to_string(), c.epoch, c.generation}].insert(c.members);
      }
    }
    for (const auto& [instance, member_lists] : instances) {
      if (member_lists.size() < 2) continue;
      out.violations.push_back(fmt::format("(k-group fork: {} epoch {} generation {} exists with {} member lists)",
                                           std::get<0>(instance), std::get<1>(instance), std::get<2>(instance),
                                           member_lists.size()));
    }
  }
  for (const Keyed& keyed : keys) {
    const bool before_placed = std::any_of(keys.begin(), keys.end(), [&keyed](const Keyed& other) {
      const bool share = std::any_of(other.devices.begin(), other.devices.end(),
                                     [&keyed](const std::string& device) { return keyed.devices.count(device) != 0; });
      return share && other.placed_at != 0 && other.placed_at < keyed.keyed_at && other.key > keyed.key;
    });
    if (before_placed) ++out.keyed_before_placed;
  }
  // SafeHome's stretch of each invocation that ran every command, from its
  // recorded command starts: never below 1 (a command is sent only after
  // the one before it ended and kept its device).
  for (const auto& spec : world.routines) {
    const routine::RoutineGroupState* state = leading_state(sim, spec.id);
    if (state == nullptr) continue;
    for (const auto& [seq, invocation] : state->invocations()) {
      const auto holds =
          routine::command_holds(spec, invocation.plan.value_or(std::vector<routine::PreconditionCommand>{}));
      const auto stretch = routine::invocation_metrics(routine::to_proto(invocation), holds).stretch;
      if (!stretch) continue;
      ++out.stretch_known;
      if (*stretch > 1.0 + 1e-9) ++out.stretched;
      if (*stretch < 1.0 - 1e-9) {
        out.violations.push_back(
            fmt::format("{} has stretch {} < 1", routine::holder_name(spec.id, invocation), *stretch));
      }
    }
  }
  if (out.partitioned) return out;
  // No lock left held in any device group.
  std::set<std::string> clusters;
  for (size_t i = 0; i < sim.size(); ++i) {
    if (agent::Node* node = sim.node(i)) {
      for (const auto& device : catalog)
        clusters.insert(node->kgroups().selector().device_group(device.id).to_string());
      break;
    }
  }
  for (size_t i = 0; i < sim.size() && plan.moves; ++i) {
    if (agent::Node* node = sim.node(i)) {
      for (const auto& device : catalog) {
        out.regrouped += node->kgroups().selector().device_group(device.id).to_string() != group_of[device.id];
      }
      break;
    }
  }
  for (const auto& target : clusters) {
    const auto replicas = serving(sim, target);
    if (replicas.empty()) continue;
    const auto* state = dynamic_cast<const routine::DeviceGroupState*>(&replicas.front().second->state_machine());
    if (state == nullptr) continue;
    for (const auto& [device, lock] : state->locks().locks()) {
      if (!lock.free()) {
        out.violations.push_back(fmt::format("device {} is still locked by {} (token {}) after quiescence", device,
                                             lock.holder, lock.token));
      }
      for (const auto& [holder, entry] : lock.lineage) {
        out.violations.push_back(fmt::format("device {} still has {} in its lineage (key {}) after quiescence", device,
                                             holder, entry.serial_key_us));
      }
    }
  }
  return out;
}

struct Totals {
  uint64_t seeds = 0;
  uint64_t invocations = 0;
  uint64_t ok = 0;
  uint64_t aborted = 0;
  uint64_t failure_aborts = 0;
  uint64_t undone = 0;
  uint64_t undone_to_user_value = 0;
  uint64_t actuations = 0;
  uint64_t precondition_commands = 0;
  uint64_t run_commands = 0;
  uint64_t sent_with_run = 0;
  uint64_t wound_aborts = 0;
  uint64_t not_effective = 0;
  uint64_t keyed_before_placed = 0;
  uint64_t rekeys = 0;
  uint64_t rollback_resource_retakes = 0;
  uint64_t stretch_known = 0;
  uint64_t stretched = 0;
  uint64_t adhoc_invocations = 0;
  uint64_t adhoc_ok = 0;
  uint64_t adhoc_aborted = 0;
  uint64_t adhoc_reported = 0;
  uint64_t adhoc_stopped_unrun = 0;
  uint64_t moves = 0;
  uint64_t regrouped = 0;
  uint64_t pivot_crashes = 0;
  uint64_t partitioned = 0;
  bool replaying = false;  // one seed named by ROUTINE_AGENT_SEED
};

void sweep(const Plan& plan, uint64_t first_seed, int seeds, Totals& totals) {
  const test_support::SeedRange range =
      test_support::seed_range("ROUTINE_AGENT", first_seed, static_cast<uint64_t>(seeds));
  if (range.replaying) {
    core::set_log_level("warn");
    core::set_log_level(std::getenv("ROUTINE_AGENT_DEBUG") ? "debug" : "info", "routine");
    if (std::getenv("ROUTINE_AGENT_DEBUG")) {
      core::set_log_level(std::getenv("ROUTINE_AGENT_DEBUG"), "kgroup");
      core::set_log_level(std::getenv("ROUTINE_AGENT_DEBUG"), "mutex");  // Camera: resources
    }
  }
  totals.replaying = totals.replaying || range.replaying;
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    const Outcome o = run(plan, seed);
    ++totals.seeds;
    totals.invocations += o.invocations;
    totals.ok += o.ok;
    totals.aborted += o.aborted;
    totals.failure_aborts += o.failure_aborts;
    totals.undone += o.undone;
    totals.undone_to_user_value += o.undone_to_user_value;
    totals.actuations += o.actuations;
    totals.precondition_commands += o.precondition_commands;
    totals.run_commands += o.run_commands;
    totals.sent_with_run += o.sent_with_run;
    totals.wound_aborts += o.wound_aborts;
    totals.not_effective += o.not_effective;
    totals.keyed_before_placed += o.keyed_before_placed;
    totals.rekeys += o.rekeys;
    totals.rollback_resource_retakes += o.rollback_resource_retakes;
    totals.stretch_known += o.stretch_known;
    totals.stretched += o.stretched;
    totals.adhoc_invocations += o.adhoc_invocations;
    totals.adhoc_ok += o.adhoc_ok;
    totals.adhoc_aborted += o.adhoc_aborted;
    totals.adhoc_reported += o.adhoc_reported;
    totals.adhoc_stopped_unrun += o.adhoc_stopped_unrun;
    totals.moves += o.moves;
    totals.regrouped += o.regrouped;
    totals.pivot_crashes += o.pivot_crashed ? 1 : 0;
    totals.partitioned += o.partitioned ? 1 : 0;
    if (test_support::report_violations("ROUTINE_AGENT", seed, o.violations)) return;
  }
  std::printf(
      "seeds=%llu (partitioned, safety only: %llu) invocations=%llu ok=%llu aborted=%llu failure_aborts=%llu "
      "undone=%llu undone_to_user_value=%llu actuations=%llu precondition_commands=%llu wound_aborts=%llu "
      "not_effective=%llu keyed_before_placed=%llu rekeys=%llu rollback_resource_retakes=%llu stretch_known=%llu "
      "stretched=%llu\n",
      static_cast<unsigned long long>(totals.seeds), static_cast<unsigned long long>(totals.partitioned),
      static_cast<unsigned long long>(totals.invocations), static_cast<unsigned long long>(totals.ok),
      static_cast<unsigned long long>(totals.aborted), static_cast<unsigned long long>(totals.failure_aborts),
      static_cast<unsigned long long>(totals.undone), static_cast<unsigned long long>(totals.undone_to_user_value),
      static_cast<unsigned long long>(totals.actuations), static_cast<unsigned long long>(totals.precondition_commands),
      static_cast<unsigned long long>(totals.wound_aborts), static_cast<unsigned long long>(totals.not_effective),
      static_cast<unsigned long long>(totals.keyed_before_placed), static_cast<unsigned long long>(totals.rekeys),
      static_cast<unsigned long long>(totals.rollback_resource_retakes),
      static_cast<unsigned long long>(totals.stretch_known), static_cast<unsigned long long>(totals.stretched));
  if (plan.preconditions) {
    std::printf("run_commands=%llu sent_with_run=%llu\n", static_cast<unsigned long long>(totals.run_commands),
                static_cast<unsigned long long>(totals.sent_with_run));
  }
  if (plan.moves) {
    std::printf("moves=%llu regrouped=%llu\n", static_cast<unsigned long long>(totals.moves),
                static_cast<unsigned long long>(totals.regrouped));
  }
  if (plan.adhoc_combos) {
    std::printf(
        "adhoc_invocations=%llu adhoc_ok=%llu adhoc_aborted=%llu adhoc_stopped_unrun=%llu adhoc_reported=%llu "
        "pivot_crashes=%llu\n",
        static_cast<unsigned long long>(totals.adhoc_invocations), static_cast<unsigned long long>(totals.adhoc_ok),
        static_cast<unsigned long long>(totals.adhoc_aborted),
        static_cast<unsigned long long>(totals.adhoc_stopped_unrun),
        static_cast<unsigned long long>(totals.adhoc_reported), static_cast<unsigned long long>(totals.pivot_crashes));
  }
}

// Whether ROUTINE_AGENT_MODELS (a comma-separated list; unset: every model)
// names `visibility`, for a soak of some models of a sweep over several.
bool model_selected(routine::Visibility visibility) {
  const char* models = std::getenv("ROUTINE_AGENT_MODELS");
  if (models == nullptr) return true;
  const std::string list = std::string(",") + models + ",";
  if (list.find("," + std::string(routine::to_string(visibility)) + ",") != std::string::npos) return true;
  std::printf("%s: not in ROUTINE_AGENT_MODELS=%s, skipped\n", std::string(routine::to_string(visibility)).c_str(),
              models);
  return false;
}

// What a sweep's totals must show (it exercised what it is for) holds of
// its seeds together, not of the one seed a replay runs.
bool totals_checked(const Totals& totals) {
  if (totals.replaying) std::printf("one seed replayed: the sweep's totals are not checked\n");
  return !totals.replaying;
}

TEST(RoutineAgentSim, SlaIsSafeAndLiveAcrossACrash) {
  Plan plan;
  Totals t;
  sweep(plan, 1, 10, t);
  if (!totals_checked(t)) return;
  EXPECT_GT(t.ok, 0u);
}

TEST(RoutineAgentSim, GsvRunsOneRoutineAtATimeAcrossACrash) {
  Plan plan;
  plan.visibility = routine::Visibility::gsv;
  Totals t;
  sweep(plan, 1, 10, t);
  if (!totals_checked(t)) return;
  EXPECT_GT(t.ok, 0u);
}

// EV: routines give each device up after their last command on it, so
// routines sharing a device overlap; the devices' logs must still show an
// acyclic precedence among invocations (routines also revisit their first
// device, which they must keep until then).
TEST(RoutineAgentSim, EvPostLeasesYetStaysSerializableAcrossACrash) {
  Plan plan;
  plan.visibility = routine::Visibility::ev;
  plan.revisits = true;
  Totals t;
  sweep(plan, 1, 10, t);
  if (!totals_checked(t)) return;
  EXPECT_GT(t.ok, 0u);
  // Timeline placement put some invocations before others already placed
  // (pre-leases), or this sweep never exercised the lineages' ordering.
  EXPECT_GT(t.keyed_before_placed, 0u);
  // The stretch is recorded (and checked to be at least 1) for invocations
  // that ran every command under one leader.
  EXPECT_GT(t.stretch_known, 0u);
}

// EV while devices move between groups: a device's new group inherits its
// lock's floor and last token, not its lineage, so an invocation placed at
// the old group places itself again at the new one (if the floor came over
// above its key, it re-keys while acquiring, and stops once executing); the
// devices' logs must still show an acyclic precedence, and every
// invocation must end.
TEST(RoutineAgentSim, EvStaysSerializableWhileDevicesMoveBetweenGroups) {
  Plan plan;
  plan.visibility = routine::Visibility::ev;
  plan.revisits = true;
  plan.moves = true;
  Totals t;
  sweep(plan, 1, 10, t);
  // Soak seed 13: a lock round that outlived r3's session (its group was
  // re-selected) asked for d4 under "r3#4.00000000", a holder nobody runs,
  // and got it: r3#4 waited for d4 for good, and everything behind it.
  sweep(plan, 13, 1, t);
  if (!totals_checked(t)) return;
  EXPECT_GT(t.ok, 0u);
  EXPECT_GT(t.moves, 0u);
  EXPECT_GT(t.regrouped, 0u) << "no device ended in another group: the moves moved nothing";
}

TEST(RoutineAgentSim, WvRunsAndIsSeenInterleaving) {
  // WV isolates nothing: the PSV checker must catch conflicting routines
  // interleaving on some seed (else it could not tell the models apart),
  // and every invocation must still end with no lock left behind.
  Plan plan;
  plan.visibility = routine::Visibility::wv;
  std::optional<uint64_t> interleaved;
  uint64_t ok = 0;
  const test_support::SeedRange range = test_support::seed_range("ROUTINE_AGENT", 1, 10);
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    const Outcome o = run(plan, seed);
    ok += o.ok;
    for (const auto& violation : o.violations) {
      if (violation.find("share a device") != std::string::npos) {
        if (!interleaved) std::printf("seed %llu: %s\n", static_cast<unsigned long long>(seed), violation.c_str());
        interleaved = interleaved.value_or(seed);
      } else {
        ADD_FAILURE() << "seed " << seed << " (replay with ROUTINE_AGENT_SEED): " << violation;
      }
    }
  }
  if (!range.replaying) {
    EXPECT_TRUE(interleaved.has_value()) << "no two conflicting WV routines interleaved in " << range.count
                                         << " seeds";
  }
  EXPECT_GT(ok, 0u);
}

// Actuators fail and restart every few seconds: failed must commands roll
// back, and the finish point aborts (and rolls back) what each model cannot
// serialize around a failure (SafeHome §3), checked from the device groups'
// events and the devices' logs. Under PSV the routines also give undo
// values, which rollbacks must set instead of the state before.
TEST(RoutineAgentSim, DeviceFailuresRollBackAndSerializeUnderPsvGsvSgsvAndEv) {
  for (const auto visibility :
       {routine::Visibility::psv, routine::Visibility::gsv, routine::Visibility::sgsv, routine::Visibility::ev}) {
    if (!model_selected(visibility)) continue;
    Plan plan;
    plan.visibility = visibility;
    plan.device_failures = true;
    plan.user_undo = visibility == routine::Visibility::psv;
    // EV aborts at the finish point only for an event between two of a
    // routine's commands on one device (Fig. 3 case 3): routines revisit one.
    plan.revisits = visibility == routine::Visibility::ev;
    Totals t;
    sweep(plan, 1, 6, t);
    // Soak seed 655: a key round begun under r3's earlier leader finished
    // under the next one, re-keyed r3#8 and called the new key placed while
    // d0 and d1 held it under the old one; r3#8 and r3#11 then waited for
    // each other (routine/routine_leaders.h, "Serial keys").
    if (visibility == routine::Visibility::ev) sweep(plan, 655, 1, t);
    if (!totals_checked(t)) continue;
    // Undos whose value differs from the state before, or restoring that
    // state would pass too.
    if (plan.user_undo) {
      EXPECT_GT(t.undone_to_user_value, 0u);
    }
    // The failures must have aborted some invocations, at a failed command
    // and at the finish point, and undone some commands, or this sweep
    // checked nothing.
    EXPECT_GT(t.aborted, 0u) << routine::to_string(visibility);
    EXPECT_GT(t.failure_aborts, 0u) << routine::to_string(visibility);
    EXPECT_GT(t.undone, 0u) << routine::to_string(visibility);
    EXPECT_GT(t.ok, 0u) << routine::to_string(visibility);
  }
}

// SafeHome's user-given undo (§2.2) on whole agents: every command names
// the value its rollback sets, and the devices' own logs show each undo set
// it, also where the device was otherwise before the undone command.
// APEX on whole agents: routines whose commands have precondition rules
// (exclusive plug pairs) run their combos under PSV with SLA and OLA, with
// actuator failures (must commands fail, combos roll back), and the
// devices' logs never show a rule broken.
TEST(RoutineAgentSim, PreconditionCombosKeepEveryRuleAcrossCrashesAndFailures) {
  for (const auto strategy : {routine::LockStrategy::sla, routine::LockStrategy::ola}) {
    Plan plan;
    plan.preconditions = true;
    plan.strategy = strategy;
    plan.device_failures = true;
    Totals t;
    sweep(plan, 1, 4, t);
    // Soak seed 22 (SLA, partitioned): r2#2's leave of d3's queue, sent
    // while it waited for d0 and unanswered while d3's group re-formed,
    // landed after its in-order request for d3 was granted and handed d3 to
    // r4#10 while r2#2 ran its commands on d0 and d1 (routine/
    // device_locks.h, "Rounds").
    if (strategy == routine::LockStrategy::sla) sweep(plan, 22, 1, t);
    if (!totals_checked(t)) continue;
    // Combos must have run precondition commands, or this checked nothing.
    EXPECT_GT(t.precondition_commands, 0u) << routine::to_string(strategy);
    EXPECT_GT(t.ok, 0u) << routine::to_string(strategy);
    // Independent precondition commands went out together (a run).
    EXPECT_GT(t.sent_with_run, 0u) << routine::to_string(strategy);
  }
}

// The same under EV: a combo's devices are all taken in key order before its
// plan is read, and the devices a rule names are never given up early.
TEST(RoutineAgentSim, PreconditionCombosKeepEveryRuleUnderEv) {
  Plan plan;
  plan.visibility = routine::Visibility::ev;
  plan.preconditions = true;
  plan.device_failures = true;
  Totals t;
  sweep(plan, 1, 4, t);
  if (!totals_checked(t)) return;
  EXPECT_GT(t.precondition_commands, 0u);
  EXPECT_GT(t.ok, 0u);
}

// APEX's aggressive strategy (§7.2) on whole agents: every lock asked for
// at once, each stage run once its devices are held, an older invocation
// wounding a younger holder. Alone, and mixed with SLA and OLA routines
// (conservative ones that began executing must never be wounded into an
// abort), with actuator failures and crashes: every rule holds in the
// devices' logs, and every invocation ends (no deadlock).
TEST(RoutineAgentSim, AggressiveCombosWoundYoungerHoldersYetKeepEveryRule) {
  for (const bool mixed : {false, true}) {
    Plan plan;
    plan.preconditions = true;
    plan.strategy = routine::LockStrategy::aggressive;
    plan.mixed_strategies = mixed;
    plan.device_failures = true;
    Totals t;
    sweep(plan, 1, 4, t);
    if (!totals_checked(t)) continue;
    EXPECT_GT(t.precondition_commands, 0u) << (mixed ? "mixed" : "aggressive");
    EXPECT_GT(t.ok, 0u) << (mixed ? "mixed" : "aggressive");
  }
}

// Ad hoc combos (`meshctl device set` where rules apply, routine/adhoc_combo.h)
// from several agents, each with its own lock strategy, contending with each
// other and with routines' combos for the same plug pairs, with loss,
// actuator failures, and a crash of a node leading a running ad hoc combo
// (the pivot): every rule holds in the devices' logs, every combo ends
// committed or rolled back, the agents report what the groups recorded,
// and every invocation ends (no deadlock). Under PSV with SLA as the mesh's
// default and the routines' strategies mixed too (aggressive combos wound
// and are wounded across routines and ad hoc combos), and under EV.
TEST(RoutineAgentSim, AdhocCombosContendAndSurviveAPivotCrash) {
  for (const auto visibility : {routine::Visibility::psv, routine::Visibility::ev}) {
    if (!model_selected(visibility)) continue;
    Plan plan;
    plan.visibility = visibility;
    plan.mixed_strategies = visibility == routine::Visibility::psv;
    plan.preconditions = true;
    plan.adhoc_combos = true;
    plan.device_failures = true;
    plan.loss = 0.02;
    Totals t;
    // Seed 7 (PSV) once showed a new leader yielding to a wound while its
    // predecessor's first command had run (unless_next_was_sent).
    sweep(plan, 1, 8, t);
    if (!totals_checked(t)) continue;
    const std::string model(routine::to_string(visibility));
    EXPECT_GT(t.adhoc_ok, 0u) << model;
    EXPECT_GT(t.adhoc_aborted, 0u) << model;
    EXPECT_GT(t.adhoc_reported, 0u) << model;
    EXPECT_GT(t.precondition_commands, 0u) << model;
    EXPECT_GT(t.pivot_crashes, 0u) << model;
  }
}

// APEX §7.3 actuation failures: actuators get stuck now and then (they
// answer but do not change). Their commands must fail as not effective,
// never be recorded ok, and their routines roll back; the devices' logs
// say which actuations took effect. With precondition rules too: a stuck
// precondition command must stop its combo before the commands that need
// it go out, or the logs show a rule broken.
TEST(RoutineAgentSim, StuckActuatorsFailTheirCommandsAndRollBack) {
  for (const bool preconditions : {false, true}) {
    Plan plan;
    plan.stuck_actuators = true;
    plan.preconditions = preconditions;
    Totals t;
    sweep(plan, 1, 4, t);
    if (!totals_checked(t)) continue;
    const char* what = preconditions ? "combos" : "routines";
    EXPECT_GT(t.not_effective, 0u) << what;
    EXPECT_GT(t.aborted, 0u) << what;
    EXPECT_GT(t.undone, 0u) << what;
    EXPECT_GT(t.ok, 0u) << what;
    if (preconditions) {
      EXPECT_GT(t.sent_with_run, 0u) << what;
    }
  }
}

// Soak seed 220 (SEED_SCALE=100): r1's leader lost and regained its
// session while an OLA round for r1#2 was out; the new session's round took
// every lock and r1#2 ran its first command, then the old round's refusal
// gave every recorded lock back. r1#2 went on without locks, r1#3 took
// them, and r1#2's rollback then undid d0 over r1#3's write.
TEST(RoutineAgentSim, OlaIsSafeAndLiveAcrossACrash) {
  Plan plan;
  plan.strategy = routine::LockStrategy::ola;
  Totals t;
  sweep(plan, 1, 10, t);
  sweep(plan, 220, 1, t);
  if (!totals_checked(t)) return;
  EXPECT_GT(t.ok, 0u);
}

// Each checker fails on a build broken on purpose (routine/fault_points.h):
// a checker that cannot fail proves nothing.
struct DeliberateBug {
  const char* name;
  bool routine::FaultPoints::*fault;
  const char* expected;  // in some violation
  routine::Visibility visibility = routine::Visibility::psv;
  bool device_failures = false;
  bool preconditions = false;
  bool user_undo = false;
  bool revisits = false;
  routine::LockStrategy strategy = routine::LockStrategy::sla;
  bool mixed_strategies = false;
  bool stuck_actuators = false;
  bool adhoc_combos = false;
};

TEST(RoutineAgentSim, EveryCheckerCatchesTheBugItIsFor) {
  const DeliberateBug bugs[] = {
      {"locks granted to every request, no fencing", &routine::FaultPoints::ignore_locks, "share a device"},
      {"resources (uses) not taken", &routine::FaultPoints::ignore_uses, "share only resource"},
      {"every command actuated twice", &routine::FaultPoints::actuate_twice, "actuated 2 times"},
      {"invocations end without releasing their locks", &routine::FaultPoints::skip_release, "still locked"},
      {"replicas stamp triggers differently", &routine::FaultPoints::nondeterministic_trigger, "differs"},
      {"GSV's global resource not taken", &routine::FaultPoints::ignore_uses, "GSV runs one routine at a time",
       routine::Visibility::gsv},
      {"a rollback repeats the command it undoes", &routine::FaultPoints::undo_repeats_command,
       "but it was power=", routine::Visibility::psv, true},
      {"a failed must command does not abort", &routine::FaultPoints::ignore_must, "of its invocation failed",
       routine::Visibility::psv, true},
      {"combos deduced from states read before their locks", &routine::FaultPoints::stale_precondition_states,
       "_needs_", routine::Visibility::psv, false, true},
      {"GSV completes routines whatever fails while they run", &routine::FaultPoints::ignore_device_events,
       "while it ran (GSV)", routine::Visibility::gsv, true},
      {"PSV completes routines whose device is still down", &routine::FaultPoints::ignore_device_events, "(PSV)",
       routine::Visibility::psv, true},
      {"a rollback ignores the routine's undo values", &routine::FaultPoints::ignore_undo_values,
       "but the routine's undo value is", routine::Visibility::psv, true, false, true},
      {"EV gives a device up after its first command on it, not its last", &routine::FaultPoints::lease_after_first_use,
       "precedence cycle", routine::Visibility::ev, false, false, false, true},
      {"EV lineages grant a device to the first entry that asks, not the lowest key",
       &routine::FaultPoints::grant_out_of_key_order, "precedence cycle", routine::Visibility::ev},
      {"aggressive invocations wait for younger holders instead of wounding them", &routine::FaultPoints::never_wound,
       "after quiescence", routine::Visibility::psv, false, true, false, false, routine::LockStrategy::aggressive},
      {"conservative invocations can be wounded, also while executing", &routine::FaultPoints::conservative_woundable,
       "aborted for contention", routine::Visibility::psv, false, true, false, false, routine::LockStrategy::aggressive,
       true},
      {"a command is ok once its driver says so, effect or not", &routine::FaultPoints::trust_actuation_reports,
       "was stuck and did not change", routine::Visibility::psv, false, false, false, false, routine::LockStrategy::sla,
       false, true},
      {"ad hoc combos run their command without its preconditions", &routine::FaultPoints::adhoc_ignores_rules,
       "_needs_", routine::Visibility::psv, false, true, false, false, routine::LockStrategy::sla, false, false, true},
      // Caught where a stuck actuator leaves the deeper precondition unset.
      {"a run spans graph stages, ahead of the deeper precondition it needs", &routine::FaultPoints::runs_span_stages,
       "_needs_", routine::Visibility::psv, false, true, false, false, routine::LockStrategy::sla, false, true},
  };
  for (const DeliberateBug& bug : bugs) {
    routine::fault_points().*bug.fault = true;
    std::optional<uint64_t> caught;
    std::string seen;
    for (uint64_t seed = 1; seed <= 8 && !caught; ++seed) {
      Plan plan;
      plan.visibility = bug.visibility;
      plan.device_failures = bug.device_failures;
      plan.preconditions = bug.preconditions;
      plan.user_undo = bug.user_undo;
      plan.revisits = bug.revisits;
      plan.strategy = bug.strategy;
      plan.mixed_strategies = bug.mixed_strategies;
      plan.stuck_actuators = bug.stuck_actuators;
      plan.adhoc_combos = bug.adhoc_combos;
      for (const auto& violation : run(plan, seed).violations) {
        if (violation.find(bug.expected) != std::string::npos) {
          caught = seed;
          seen = violation;
          break;
        }
      }
    }
    routine::fault_points() = {};
    EXPECT_TRUE(caught.has_value()) << "no checker reported '" << bug.expected << "' with the bug: " << bug.name;
    if (caught)
      std::printf("%s: caught at seed %llu: %s\n", bug.name, static_cast<unsigned long long>(*caught), seen.c_str());
  }
}

}  // namespace
}  // namespace mesh::sim
