#include "routine/routine_leaders.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/fnv1a.h"
#include "core/log.h"
#include "routine/device_codec.h"
#include "routine/failure_serialization.h"
#include "routine/fault_points.h"
#include "routine/invocation_metrics.h"
#include "routine/routine_combo.h"
#include "routine/routine_leaders_detail.h"

namespace mesh::routine {
namespace {

using detail::routine_id;
using detail::unlock_payload;

constexpr int64_t kMicrosPerMinute = 60'000'000;
constexpr int64_t kMinutesPerDay = 24 * 60;
// A plan is one committed step (kgroup's update bound is 700 bytes, with the
// step's own fields) and travels in history answers.
constexpr size_t kMaxPlanBytes = 480;

bool succeeded(proto::CommandStatus status) { return status == proto::COMMAND_OK; }

// Whether a command may have changed its device: it ran, or its outcome is
// unknown (the driver or the device leader gave up midway). A rollback
// restores each of these.
bool may_have_acted(proto::CommandStatus status) {
  return status == proto::COMMAND_OK || status == proto::COMMAND_TIMEOUT || status == proto::COMMAND_INTERRUPTED ||
         status == proto::COMMAND_DRIVER_ERROR || status == proto::COMMAND_NOT_EFFECTIVE;
}

// The command a rollback undoes next: the newest that may have acted and is
// not undone yet.
// A combo's rollback stops at the first command it could not undo: that
// command may still hold, and the precondition commands before it are what
// keeps its rules true.
std::optional<uint32_t> next_to_undo(const RoutineGroupState::Invocation& invocation) {
  if (invocation.plan && !invocation.plan->empty()) {
    for (const auto& [index, result] : invocation.undone) {
      if (!succeeded(result.status)) return std::nullopt;
    }
  }
  for (auto it = invocation.commands.rbegin(); it != invocation.commands.rend(); ++it) {
    if (may_have_acted(it->second.status) && invocation.undone.count(it->first) == 0) return it->first;
  }
  return std::nullopt;
}

// What an aborted invocation's history says: why, and what its rollback
// restored or could not.
std::string rollback_report(const RoutineGroupState::Invocation& invocation) {
  std::vector<std::string> restored;
  std::vector<std::string> not_restored;
  for (auto it = invocation.undone.rbegin(); it != invocation.undone.rend(); ++it) {
    if (succeeded(it->second.status)) {
      restored.push_back(fmt::format("{}", it->first + 1));
    } else {
      not_restored.push_back(fmt::format("command {} ({}: {})", it->first + 1,
                                         proto::CommandStatus_Name(it->second.status), it->second.detail));
    }
  }
  std::string report = invocation.abort_reason;
  report += restored.empty() ? "; nothing to undo" : fmt::format("; undone: command {}", fmt::join(restored, ", "));
  if (!not_restored.empty()) report += fmt::format("; not undone: {}", fmt::join(not_restored, "; "));
  if (!not_restored.empty() && invocation.plan && !invocation.plan->empty()) {
    report += "; the rollback stopped there, as undoing the commands before it could break a precondition rule";
  }
  if (!invocation.stop_reason.empty()) report += fmt::format("; rollback stopped: {}", invocation.stop_reason);
  return report;
}

// The invocation's whole command list: the routine's commands with its
// plan's precondition commands (none before it is planned).
std::vector<ComboCommand> combo_of(const RoutineSpec& spec, const RoutineGroupState::Invocation& invocation) {
  return expand(spec, invocation.plan.value_or(std::vector<PreconditionCommand>{}));
}

// The routine command that command `index` of the combo is, or serves.
uint32_t stage_of(const std::vector<ComboCommand>& commands, size_t index) {
  if (index < commands.size() && commands[index].serves) return *commands[index].serves;
  const auto routine_commands_before =
      std::count_if(commands.begin(), commands.begin() + static_cast<std::ptrdiff_t>(index),
                    [](const ComboCommand& c) { return !c.serves; });
  return static_cast<uint32_t>(routine_commands_before);
}

}  // namespace

uint64_t definition_digest(const RoutineSpec& spec) {
  // `enabled` is not part of what an invocation runs: disabling a routine
  // stops new triggers, not the invocation under way.
  RoutineSpec definition = spec;
  definition.enabled = true;
  return core::fnv1a(to_proto(definition).SerializeAsString()) | 1;
}

// One invocation being driven: at most one request in flight at a time.
struct RoutineLeaders::Driving {
  explicit Driving(core::Env& env) : timer(env) {}
  bool busy = false;
  core::ScopedTimer timer;
  uint32_t ola_attempts = 0;
  // Commands of a run (routine/routine_combo.h) this leader sent ahead of
  // their turn and their device groups accepted: their turn polls them.
  std::set<uint32_t> sent_ahead;
};

struct RoutineLeaders::Session {
  std::string routine;
  uint64_t watch = 0;  // DeviceWatcher handle
  std::set<std::string> watched;
  // The states of the watched devices this node already held when the
  // session began have not been evaluated yet (see evaluate_seen).
  bool evaluate_seen = true;
  bool drive_scheduled = false;
  std::map<uint64_t, std::unique_ptr<Driving>> driving;
};

RoutineLeaders::RoutineLeaders(core::Env& env, kgroup::GroupHost& host, const kgroup::GroupSelector& selector,
                               EpochOf epoch_of, const Catalog& catalog, kgroup::GroupClient& client,
                               DeviceWatcher& watcher, RoutineMessages& messages, mutex::Camera& camera,
                               core::Metrics& metrics, RoutineLeaderOptions options)
    : env_(env),
      host_(host),
      selector_(selector),
      epoch_of_(std::move(epoch_of)),
      catalog_(catalog),
      client_(client),
      watcher_(watcher),
      messages_(messages),
      options_(options),
      scan_timer_(env),
      renew_timer_(env),
      camera_(camera),
      triggers_(metrics.counter("routine_triggers_total")),
      invocations_ok_(metrics.counter("routine_invocations_total", {{"result", "ok"}})),
      invocations_failed_(metrics.counter("routine_invocations_total", {{"result", "failed"}})),
      invocations_aborted_(metrics.counter("routine_invocations_total", {{"result", "aborted"}})),
      rollback_commands_(metrics.counter("routine_rollback_commands_total")),
      failure_aborts_(metrics.counter("routine_failure_aborts_total")),
      lock_retries_(metrics.counter("routine_lock_retries_total")),
      wounds_(metrics.counter("routine_wounds_total")),
      made_way_(metrics.counter("routine_made_way_total")),
      rekeys_(metrics.counter("routine_ev_rekeys_total")),
      pre_leases_(metrics.counter("routine_ev_pre_leases_total")),
      placement_ms_(metrics.histogram("routine_ev_placement_ms")),
      ev_stretch_(metrics.histogram("routine_ev_stretch")),
      wait_ms_(metrics.histogram("routine_wait_ms")),
      end_to_end_ms_(metrics.histogram("routine_end_to_end_ms")),
      latency_overhead_(metrics.histogram("routine_latency_overhead")) {
  messages_.on(proto::RoutineBody::kLocksLost,
               [this, alive = alive_](const core::Message&, const proto::RoutineBody& body) {
                 if (*alive) on_locks_lost(body.locks_lost());
               });
}

RoutineLeaders::~RoutineLeaders() {
  *alive_ = false;
  for (const auto& [key, s] : sessions_) {
    if (s->watch != 0) watcher_.unwatch(s->watch);
    if (auto* st = const_cast<RoutineGroupState*>(state(key))) st->set_on_apply({});
  }
}

void RoutineLeaders::start() {
  scan_timer_.start_periodic(options_.scan_interval, [this] { scan(); });
  renew_timer_.start_periodic(options_.renew_interval, [this] { renew_locks(); });
}

kgroup::GroupReplica* RoutineLeaders::replica(const SessionKey& key) const {
  return host_.find(std::get<0>(key), std::get<1>(key), std::get<2>(key));
}

const RoutineGroupState* RoutineLeaders::state(const SessionKey& key) const {
  kgroup::GroupReplica* r = replica(key);
  return r == nullptr ? nullptr : dynamic_cast<const RoutineGroupState*>(&r->state_machine());
}

RoutineLeaders::Session* RoutineLeaders::session(const SessionKey& key) {
  const auto it = sessions_.find(key);
  return it == sessions_.end() ? nullptr : it->second.get();
}

const RoutineSpec* RoutineLeaders::catalog_spec_of(const SessionKey& key) const {
  const auto it = sessions_.find(key);
  return it == sessions_.end() ? nullptr : catalog_.find_routine(it->second->routine);
}

const RoutineSpec* RoutineLeaders::spec_of(const SessionKey& key,
                                           const RoutineGroupState::Invocation& invocation) const {
  return invocation.adhoc ? &*invocation.adhoc : catalog_spec_of(key);
}

RoutineLeaders::Running RoutineLeaders::running(const SessionKey& key, uint64_t seq) const {
  const RoutineGroupState* st = state(key);
  const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
  return {invocation, invocation == nullptr ? nullptr : spec_of(key, *invocation)};
}

LockStrategy RoutineLeaders::strategy_of(const RoutineSpec& spec) const {
  return spec.lock_strategy == LockStrategy::mesh_default ? options_.strategy : spec.lock_strategy;
}

int64_t RoutineLeaders::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(env_.now() - options_.clock_origin).count();
}

std::vector<std::string> RoutineLeaders::led_routines() const {
  std::vector<std::string> out;
  for (const auto& [key, s] : sessions_) out.push_back(s->routine);
  return out;
}

void RoutineLeaders::scan() {
  std::set<SessionKey> leading;
  for (kgroup::GroupReplica* r : host_.replicas()) {
    const auto& config = r->config();
    if (config.target.kind != kgroup::TargetKind::routine || !r->serving()) continue;
    auto* routine_state = dynamic_cast<RoutineGroupState*>(&r->state_machine());
    if (routine_state == nullptr) continue;
    SessionKey key{config.target.to_string(), config.epoch, config.generation};
    leading.insert(key);
    auto& slot = sessions_[key];
    if (!slot) {
      slot = std::make_unique<Session>();
      slot->routine = config.target.id;
      core::log("routine").info("leading routine {} epoch={} generation={} term={} node={}", config.target.id,
                                config.epoch, config.generation, r->term(), messages_.self().to_string());
      routine_state->set_on_apply([this, key] {
        Session* s = session(key);
        if (s == nullptr || s->drive_scheduled) return;
        s->drive_scheduled = true;
        env_.start_timer(core::Duration::zero(), [this, key, alive = alive_] {
          if (!*alive) return;
          if (Session* again = session(key)) {
            again->drive_scheduled = false;
            drive(key);
          }
        });
      });
    }
    sync_watch(key, *slot);
    if (slot->evaluate_seen) evaluate_seen(key, *slot, *r);
    drive(key);
  }
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (leading.count(it->first) != 0) {
      ++it;
      continue;
    }
    core::log("routine").info("stopped leading routine {} epoch={}", it->second->routine, std::get<1>(it->first));
    if (it->second->watch != 0) watcher_.unwatch(it->second->watch);
    if (auto* st = const_cast<RoutineGroupState*>(state(it->first))) st->set_on_apply({});
    it = sessions_.erase(it);
  }
  sweep_claims(leading);
}

void RoutineLeaders::sync_watch(const SessionKey& key, Session& s) {
  const RoutineSpec* spec = catalog_spec_of(key);
  std::set<std::string> wanted;
  if (spec != nullptr && spec->enabled && !spec->trigger.manual) wanted = devices(spec->trigger);
  if (wanted == s.watched) return;
  if (s.watch != 0) watcher_.unwatch(s.watch);
  s.watch = 0;
  s.watched = wanted;
  if (wanted.empty()) return;
  s.watch = watcher_.watch(
      std::vector<std::string>(wanted.begin(), wanted.end()),
      [this, key](const std::string& device, const DeviceWatcher::Seen& seen) { on_device_change(key, device, seen); });
}

void RoutineLeaders::evaluate_seen(const SessionKey& key, Session& s, const kgroup::GroupReplica& replica) {
  // The watcher tells its listeners only of changes. A change this node
  // heard before this session began (while it led nothing: it had lost its
  // quorum and its subscription outlived the session, or another watch on
  // this node brought it) is never told again, so the session evaluates
  // what the node already holds, once it can read its group's state. A
  // change already acted on (cause_version) or too soon after the last
  // trigger is dropped there as any other.
  if (s.watched.empty() || !replica.can_read()) return;
  s.evaluate_seen = false;
  for (const std::string& device : s.watched) {
    const auto it = watcher_.view().find(device);
    if (it == watcher_.view().end()) continue;
    const DeviceWatcher::Seen seen = it->second;
    on_device_change(key, device, seen);
  }
}

void RoutineLeaders::on_device_change(const SessionKey& key, const std::string& device,
                                      const DeviceWatcher::Seen& seen) {
  const RoutineSpec* spec = catalog_spec_of(key);
  const RoutineGroupState* st = state(key);
  kgroup::GroupReplica* r = replica(key);
  if (spec == nullptr || st == nullptr || r == nullptr || !spec->enabled || spec->trigger.manual) return;
  if (!r->can_read() || seen.record.version <= st->cause_version(device)) return;
  const int64_t now = now_us();
  if (st->last_trigger_at_us() != 0 &&
      now < st->last_trigger_at_us() +
                std::chrono::duration_cast<std::chrono::microseconds>(spec->min_retrigger).count()) {
    return;
  }
  const auto& view = watcher_.view();
  const StateLookup lookup = [&view](const std::string& id) -> const Attributes* {
    const auto it = view.find(id);
    if (it == view.end() || !it->second.record.known || !it->second.record.up) return nullptr;
    return &it->second.record.attributes;
  };
  const int64_t local_minutes = now / kMicrosPerMinute + options_.utc_offset_minutes;
  const int64_t day_number =
      local_minutes >= 0 ? local_minutes / kMinutesPerDay : (local_minutes - kMinutesPerDay + 1) / kMinutesPerDay;
  const auto minute_of_day = static_cast<uint32_t>(local_minutes - day_number * kMinutesPerDay);
  // 1970-01-01 was a Thursday.
  const auto weekday = static_cast<Weekday>(((day_number + 3) % 7 + 7) % 7);
  if (!evaluate(spec->trigger, lookup, minute_of_day, weekday)) return;

  proto::RoutineUpdate update;
  auto& trigger = *update.mutable_trigger();
  trigger.set_at_us(now);
  trigger.set_tag(static_cast<uint32_t>(env_.rng().next_u64()));
  trigger.set_definition(definition_digest(*spec));
  trigger.set_min_retrigger_ms(
      static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(spec->min_retrigger).count()));
  auto& cause = *trigger.add_causes();
  cause.set_device(device);
  cause.set_version(seen.record.version);
  const std::string routine = spec->id;
  submit(key, update, [this, routine, device, version = seen.record.version](bool committed) {
    if (!committed) return;
    triggers_.add();
    core::log("routine").info("routine {} triggered by {} (version {})", routine, device, version);
  });
}

void RoutineLeaders::drive(const SessionKey& key) {
  Session* s = session(key);
  const RoutineGroupState* st = state(key);
  if (s == nullptr || st == nullptr) return;
  std::erase_if(s->driving, [st](const auto& entry) {
    const auto* invocation = st->invocation(entry.first);
    return (invocation == nullptr || invocation->done()) && !entry.second->busy;
  });
  for (const auto& [seq, invocation] : st->invocations()) {
    if (invocation.done()) continue;
    auto& driving = s->driving[seq];
    if (!driving) driving = std::make_unique<Driving>(env_);
    if (driving->busy) continue;
    driving->busy = true;
    drive_invocation(key, invocation);
  }
}

void RoutineLeaders::idle(const SessionKey& key, uint64_t seq, core::Duration delay) {
  Driving* driving = driving_of(key, seq);
  if (driving == nullptr) return;
  driving->timer.start(delay, [this, key, seq] {
    Driving* again = driving_of(key, seq);
    if (again == nullptr) return;
    again->busy = false;
    drive(key);
  });
}

void RoutineLeaders::after_step(const SessionKey& key, uint64_t seq, bool committed) {
  // A step not committed (the replica stopped serving, or lost a race) is
  // tried again after a pause, never at once: the state that refused it may
  // not change within the same instant.
  idle(key, seq, committed ? core::Duration::zero() : options_.poll_interval);
}

void RoutineLeaders::drive_invocation(const SessionKey& key, const RoutineGroupState::Invocation& invocation) {
  const uint64_t seq = invocation.seq;
  core::log("routine").debug("routine {} invocation {}: {} with {} locks, {} commands done", routine_id(key), seq,
                             proto::RoutinePhase_Name(invocation.phase), invocation.locks.size(),
                             invocation.commands.size());
  kgroup::GroupReplica* r = replica(key);
  if (r == nullptr || !r->can_read()) {
    // No quorum lease: another leader may be acting. Look again later.
    idle(key, seq, options_.scan_interval);
    return;
  }
  const RoutineSpec* spec = spec_of(key, invocation);
  const bool definition_holds =
      spec != nullptr && (invocation.definition == 0 || invocation.definition == definition_digest(*spec));
  // The devices the invocation locks (and releases at the end): its
  // commands' and, if precondition rules apply, their graphs' devices; none
  // under WV unless rules apply; any lock it recorded is still given back.
  std::optional<ComboReservation> reservation;
  std::string no_reservation;
  if (spec != nullptr) {
    auto reserved = combo_devices(*spec, catalog_);
    if (fault_points().adhoc_ignores_rules && invocation.adhoc) reserved = ComboReservation{command_devices(*spec)};
    if (reserved) {
      reservation = std::move(*reserved);
    } else {
      no_reservation = reserved.error();
    }
  }
  std::vector<std::string> devices;
  if (reservation && (options_.visibility != Visibility::wv || reservation->has_preconditions)) {
    devices.assign(reservation->devices.begin(), reservation->devices.end());
  }
  for (const auto* recorded : {&invocation.locks, &invocation.leased}) {
    for (const auto& [device, token] : *recorded) {
      if (std::find(devices.begin(), devices.end(), device) == devices.end()) devices.push_back(device);
    }
  }

  switch (invocation.phase) {
    case proto::PHASE_NOT_TRIGGERED:
    case proto::PHASE_ACQUIRING_LOCKS: {
      if (!definition_holds) {
        enter_phase(key, seq, proto::PHASE_RELEASING_LOCKS);
        return;
      }
      if (!reservation) {
        stop(key, seq, "its precondition rules cannot be applied: " + no_reservation);
        return;
      }
      const std::string holder = holder_name(routine_id(key), invocation);
      if (fault_points().stale_precondition_states && reservation->has_preconditions &&
          stale_states_.count(holder) == 0) {
        read_states(key, seq, reservation->devices, [this, key, seq, holder](const DeviceStates& states) {
          stale_states_[holder] = states;
          idle(key, seq);
        });
        return;
      }
      if (invocation.wound) {
        yield_to_wound(key, invocation, devices);
        return;
      }
      for (const auto& [resource, grant] : invocation.resources) {
        if (!holds_here(resource, grant)) {
          core::log("routine").info(
              "routine {} invocation {}: resource {} (token {}) was taken by node {}, not held here: taking "
              "everything again",
              routine_id(key), seq, resource, grant.token, core::NodeId(grant.holder).to_string());
          start_over(key, seq, devices);
          return;
        }
      }
      if (const auto why = blocks_a_rollback(invocation, devices)) {
        core::log("routine").info(
            "routine {} invocation {}: giving resource {} back and taking everything again: the rollback of {} "
            "needs it, and {}",
            routine_id(key), seq, invocation.make_way->resource, invocation.make_way->by, *why);
        made_way_.add();
        start_over(key, seq, devices);
        return;
      }
      for (const std::string& resource : resources_of(*spec)) {
        if (invocation.resources.count(resource) == 0) {
          take_resource(key, seq, holder, resource, devices);
          return;
        }
      }
      if (options_.visibility == Visibility::ev) {
        // Serial keys order its locks; the lock strategy plays no part.
        acquire_in_lineages(key, invocation, devices, reservation->has_preconditions);
        return;
      }
      std::vector<std::string> missing;
      for (const auto& device : devices) {
        if (invocation.locks.count(device) == 0) missing.push_back(device);
      }
      const LockStrategy strategy = strategy_of(*spec);
      if (missing.empty() || strategy == LockStrategy::aggressive) {
        // Aggressive: every lock is asked for now and each is waited for
        // only when a command needs it.
        if (!missing.empty()) ask_all(key, seq, missing);
        enter_phase(key, seq, proto::PHASE_EXECUTING);
        return;
      }
      if (strategy == LockStrategy::ola) {
        acquire_ola(key, seq, missing);
      } else {
        acquire_sla(key, seq, missing);
      }
      return;
    }
    case proto::PHASE_EXECUTING: {
      if (!definition_holds) {
        enter_phase(key, seq, proto::PHASE_RELEASING_LOCKS);
        return;
      }
      if (const auto reason = lost_lock(routine_id(key), invocation)) {
        stop(key, seq, *reason);
        return;
      }
      if (const auto reason = lock_given_up(invocation, combo_of(*spec, invocation))) {
        stop(key, seq, *reason);
        return;
      }
      const bool keyed = options_.visibility == Visibility::ev;
      const bool aggressive = !keyed && strategy_of(*spec) == LockStrategy::aggressive;
      if (invocation.abort_reason.empty()) {
        const std::vector<ComboCommand> commands = combo_of(*spec, invocation);
        const auto reason = lost_resource(invocation);
        if (const auto why = blocks_a_rollback(invocation, devices);
            why && invocation.commands.size() < commands.size()) {
          // Executing, so it cannot take its resources again in order: it
          // aborts, and its own rollback (under its own grant) frees the
          // resource.
          made_way_.add();
          abort_running(key, invocation, commands,
                        fmt::format("gave resource {} back: the rollback of {} needs it, and {}",
                                    invocation.make_way->resource, invocation.make_way->by, *why));
          return;
        }
        if (reason && invocation.commands.size() < commands.size()) {
          // Nothing more may run outside the resource. Its device locks
          // still fence everyone else off its devices, so undoing what ran
          // restores exactly what was there: abort (roll back, under the
          // resource taken again) rather than stop and leave a partial
          // routine behind. Once every command ran, nothing is left to do
          // under the resource: the invocation ends as it would have.
          abort_running(key, invocation, commands, *reason);
          return;
        }
        if (invocation.wound && aggressive && invocation.may_yield()) {
          // Nothing ran yet: rather than end aborted having done nothing
          // (a plan made under these locks is dropped with them). Unless a
          // previous leader sent the first command and it ran: then the
          // locks must stay for its rollback, and a plan made again could
          // reuse its command id, which its device group answers with the
          // old outcome without actuating.
          unless_next_was_sent(key, invocation, combo_of(*spec, invocation), [this, key, seq, devices] {
            const RoutineGroupState::Invocation* wounded = running(key, seq).invocation;
            if (wounded == nullptr || !wounded->wound || !wounded->may_yield()) {
              idle(key, seq);
              return;
            }
            yield_to_wound(key, *wounded, devices);
          });
          return;
        }
        if (invocation.wound && (aggressive || fault_points().conservative_woundable)) {
          // Wound-wait (APEX §7.2): the holder loses and aborts; its locks
          // undo what it ran, then go to the one that waits.
          abort_running(key, invocation, combo_of(*spec, invocation),
                        fmt::format("wounded: invocation {}, {}, waits for {} (APEX wound-wait)", invocation.wound->by,
                                    invocation.wound->by_started_us == 0 ? "conservative" : "triggered earlier",
                                    invocation.wound->device));
          return;
        }
      }
      if (!invocation.abort_reason.empty()) {
        roll_back(key, invocation, devices);
        return;
      }
      if (!invocation.baseline && !invocation.plan && invocation.commands.empty() &&
          watched_devices(options_.visibility) != WatchedDevices::none) {
        take_baseline(key, seq, watched_by(devices));
        return;
      }
      if (!aggressive && !invocation.plan && invocation.commands.empty() && reservation &&
          reservation->has_preconditions) {
        if (keyed) {
          // The plan reads every device of the graphs: all held first.
          std::vector<std::string> missing;
          for (const auto& device : devices) {
            if (invocation.locks.count(device) == 0 && invocation.leased.count(device) == 0) missing.push_back(device);
          }
          if (!missing.empty()) {
            take_in_key_order(key, seq, missing);
            return;
          }
        }
        plan_combo(key, seq, reservation->devices);
        return;
      }
      const std::vector<ComboCommand> commands = combo_of(*spec, invocation);
      const auto next = static_cast<uint32_t>(invocation.commands.size());
      // A must command that did not succeed aborts the invocation (SafeHome
      // atomicity); a best-effort one is only reported.
      // The commands of a run sent with the failed one may have run: each is
      // recorded before the abort, so that the rollback undoes it too.
      for (const auto& [index, result] : invocation.commands) {
        if (!succeeded(result.status) && index < commands.size() && commands[index].command.must &&
            !fault_points().ignore_must) {
          const std::string reason =
              fmt::format("command {} ({}) failed: {}: {}", index + 1, commands[index].command.device,
                          proto::CommandStatus_Name(result.status), result.detail);
          if (next < commands.size() && commands[next].with_previous) {
            abort_running(key, invocation, commands, reason);
          } else {
            commit_abort(key, seq, reason);
          }
          return;
        }
      }
      // A command's duration keeps the locks that long after it ran.
      if (next > 0) {
        const auto& previous = commands[next - 1].command;
        const auto& result = invocation.commands.rbegin()->second;
        if (previous.duration && succeeded(result.status)) {
          const int64_t until =
              result.done_at_us + std::chrono::duration_cast<std::chrono::microseconds>(*previous.duration).count();
          if (now_us() < until) {
            core::log("routine").debug("routine {} invocation {}: command {} keeps its devices {} ms more",
                                       routine_id(key), seq, next, (until - now_us()) / 1000);
            idle(key, seq, std::chrono::microseconds(until - now_us()));
            return;
          }
        }
      }
      if (aggressive && next < commands.size() && !devices.empty()) {
        // The stage of the next command: the routine command it is or
        // serves, with that command's precondition graph. Its devices must
        // be held, and its precondition commands planned from their states
        // read then, before it runs.
        const uint32_t stage = stage_of(commands, next);
        auto needed = stage_devices(*spec, catalog_, stage);
        if (!needed) {
          commit_abort(key, seq, "its precondition rules cannot be applied: " + needed.error());
          return;
        }
        std::vector<std::string> missing;
        for (const auto& device : needed->devices) {
          if (invocation.locks.count(device) == 0 && invocation.leased.count(device) == 0) missing.push_back(device);
        }
        if (!missing.empty()) {
          acquire_stage(key, seq, missing);
          return;
        }
        const bool planned = invocation.plan && (invocation.planned_stages == 0 || invocation.planned_stages > stage);
        if (needed->has_preconditions && !planned) {
          plan_one_stage(key, seq, stage, needed->devices);
          return;
        }
      }
      // EV: the device lineages keep every device in serial-key order, so a
      // device is given up once done with, whoever is still to be taken.
      if (keyed && options_.ev_post_lease && next < commands.size()) {
        if (const auto device = lease_candidate(invocation, commands, next)) {
          post_lease(key, seq, *device, invocation.locks.at(*device));
          return;
        }
      }
      if (keyed && next < commands.size()) {
        const std::string& device = commands[next].command.device;
        if (invocation.locks.count(device) == 0 && invocation.leased.count(device) == 0) {
          take_in_key_order(key, seq, {device});
          return;
        }
      }
      if (next >= commands.size()) {
        if (serializes_failures(options_.visibility) && !fault_points().ignore_device_events) {
          finish(key, invocation, commands, watched_by(devices));
          return;
        }
        enter_phase(key, seq, proto::PHASE_RELEASING_LOCKS);
        return;
      }
      execute(key, seq, next, false);
      return;
    }
    case proto::PHASE_RELEASING_LOCKS: {
      proto::InvocationEnd end;
      if (spec == nullptr) {
        end.set_outcome(proto::INVOCATION_ABORTED);
        end.set_detail("the routine was removed from the catalog");
      } else if (!invocation.abort_reason.empty()) {
        end.set_outcome(proto::INVOCATION_ABORTED);
        end.set_detail(rollback_report(invocation));
      } else if (!invocation.stop_reason.empty()) {
        // Commands may have run only once every lock was held.
        end.set_outcome(invocation.locked_at_us == 0 ? proto::INVOCATION_ABORTED : proto::INVOCATION_FAILED);
        end.set_detail(fmt::format("stopped after {} of its {} commands: {}", invocation.commands.size(),
                                   combo_of(*spec, invocation).size(), invocation.stop_reason));
      } else if (!definition_holds && invocation.locked_at_us == 0) {
        end.set_outcome(proto::INVOCATION_ABORTED);
        end.set_detail("the routine's definition changed before it ran");
      } else if (invocation.commands.size() < spec->commands.size() && !definition_holds) {
        end.set_outcome(proto::INVOCATION_ABORTED);
        end.set_detail(
            fmt::format("the routine's definition changed after {} of its commands", invocation.commands.size()));
      } else {
        // Every must command succeeded (or the invocation would have
        // aborted): it is ok, with its best-effort failures reported.
        std::vector<std::string> failed;
        for (const auto& [index, result] : invocation.commands) {
          if (!succeeded(result.status)) {
            failed.push_back(fmt::format("best-effort command {} {}: {}", index + 1,
                                         proto::CommandStatus_Name(result.status), result.detail));
          }
        }
        end.set_outcome(proto::INVOCATION_OK);
        end.set_detail(fmt::format("{}", fmt::join(failed, "; ")));
      }
      release(key, seq, devices, end);
      return;
    }
    case proto::PHASE_DONE:
    default:
      idle(key, seq);
      return;
  }
}

std::string RoutineLeaders::holder_of(const SessionKey& key, uint64_t seq) const {
  const RoutineGroupState* st = state(key);
  const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
  RoutineGroupState::Invocation unknown;
  unknown.seq = seq;
  return holder_name(routine_id(key), invocation == nullptr ? unknown : *invocation);
}

uint32_t RoutineLeaders::lock_round_of(const SessionKey& key, uint64_t seq) const {
  const RoutineGroupState* st = state(key);
  const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
  return invocation == nullptr ? 1 : invocation->lock_round;
}

bool RoutineLeaders::held_this_round(const SessionKey& key, uint64_t seq, const proto::LockStatusMsg& status) const {
  // A grant to an earlier round's request may be taken away by a release
  // sent when that round ended: only a request of this round, applied
  // (it raises the place's round), makes it this round's.
  return status.state() == proto::LOCK_HELD && (status.round() == 0 || status.round() >= lock_round_of(key, seq));
}

void RoutineLeaders::acquire_sla(const SessionKey& key, uint64_t seq, const std::vector<std::string>& missing) {
  const std::string holder = holder_of(key, seq);
  const std::string& device = missing.front();
  const std::optional<size_t> held_before = recorded_locks(key, seq);
  // Deadlock freedom rests on holding locks only in increasing id order. A
  // lock after `device` can still be granted to this invocation by a
  // request sent before (by an earlier leader, or before it started over)
  // and queued: holding it while waiting here could close a wait cycle.
  // Every so often, leave those queues (releasing what is neither held nor
  // waited for changes nothing; none of them is recorded as held), in a
  // new lock round: the leave may land after this invocation, holding
  // every device before one of them, asked for it in order and was granted
  // it, and must then leave that grant alone (SLA soak seed 22: a leave of
  // r2#2's took d3 from it while it ran its commands on d0 and d1).
  if (missing.size() > 1) {
    auto [left, first] = left_ahead_at_.try_emplace(holder, env_.now());
    if (!first && env_.now() - left->second >= options_.request_timeout) {
      left->second = env_.now();
      const uint32_t round = lock_round_of(key, seq) + 1;
      std::vector<std::string> ahead(missing.begin() + 1, missing.end());
      step(
          key, seq, [round](proto::InvocationStep& s) { s.set_lock_round(round); },
          [this, key, seq, holder, round, ahead](bool committed) {
            if (committed) leave_devices(holder, round, ahead);
            after_step(key, seq, committed);
          });
      return;
    }
  }
  write_device(device, lock_payload(key, seq, device, true),
               [this, key, seq, device, holder, held_before, alive = alive_](const auto& written) {
                 if (!*alive) return;
                 if (!written) {
                   core::log("routine").debug("lock request {} on {}: {}", holder, device, written.error());
                   idle(key, seq, options_.poll_interval);
                   return;
                 }
                 proto::DeviceQuery query;
                 query.mutable_lock()->set_device(device);
                 query.mutable_lock()->set_holder(holder);
                 read_device(device, query.SerializeAsString(),
                             [this, key, seq, device, holder, held_before, alive](const auto& read) {
                               if (!*alive) return;
                               const auto reply =
                                   read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
                               if (!reply || !held_this_round(key, seq, reply->lock())) {
                                 // Waiting in the queue (or the request was lost
                                 // with a leader: asking again is harmless).
                                 if (!read) {
                                   core::log("routine").debug("lock status {} on {}: {}", holder, device, read.error());
                                 }
                                 if (reply) wound_if_younger(key, seq, device, reply->lock());
                                 idle(key, seq, options_.poll_interval);
                                 return;
                               }
                               if (recorded_locks(key, seq) != held_before) {
                                 // The invocation moved on meanwhile (it started
                                 // over, or this answers an earlier attempt):
                                 // recording this lock now could put it out of
                                 // order. The next drive asks again.
                                 idle(key, seq, options_.poll_interval);
                                 return;
                               }
                               const uint64_t token = reply->lock().token();
                               step(
                                   key, seq,
                                   [&device, token](proto::InvocationStep& s) {
                                     s.mutable_lock_held()->set_device(device);
                                     s.mutable_lock_held()->set_token(token);
                                   },
                                   [this, key, seq](bool committed) { after_step(key, seq, committed); });
                             });
               });
}

std::optional<size_t> RoutineLeaders::recorded_locks(const SessionKey& key, uint64_t seq) const {
  const RoutineGroupState* st = state(key);
  const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
  if (invocation == nullptr || invocation->phase != proto::PHASE_ACQUIRING_LOCKS) return std::nullopt;
  return invocation->locks.size();
}

void RoutineLeaders::acquire_ola(const SessionKey& key, uint64_t seq, const std::vector<std::string>& missing) {
  const std::string holder = holder_of(key, seq);
  struct Round {
    size_t awaiting = 0;
    std::map<std::string, uint64_t> granted;
    bool refused = false;
  };
  auto round = std::make_shared<Round>();
  round->awaiting = missing.size();
  auto finish = [this, key, seq, round, missing]() {
    if (--round->awaiting != 0) return;
    if (!round->refused) {
      // Every lock is ours: commit them one by one, then the next drive
      // moves to EXECUTING.
      auto commit = std::make_shared<std::function<void(size_t)>>();
      *commit = [this, key, seq, round, commit](size_t i) {
        if (i >= round->granted.size()) {
          idle(key, seq);
          return;
        }
        auto it = std::next(round->granted.begin(), static_cast<std::ptrdiff_t>(i));
        const std::string device = it->first;
        const uint64_t token = it->second;
        step(
            key, seq,
            [&device, token](proto::InvocationStep& s) {
              s.mutable_lock_held()->set_device(device);
              s.mutable_lock_held()->set_token(token);
            },
            [this, key, seq, commit, i](bool committed) {
              if (!committed) {
                after_step(key, seq, false);
                return;
              }
              (*commit)(i + 1);
            });
      };
      (*commit)(0);
      return;
    }
    // The session may have ended (and even begun again) meanwhile: its
    // successor drives the invocation from the committed state. A round
    // from before that may find the invocation executing under locks its
    // successor's round took (the same holder's): giving back what is
    // recorded then would free the devices of a running invocation.
    Driving* found = driving_of(key, seq);
    if (found == nullptr || !recorded_locks(key, seq)) return;
    Driving& driving = *found;
    ++driving.ola_attempts;
    lock_retries_.add();
    const auto shift = std::min<uint32_t>(driving.ola_attempts - 1, 10);
    const auto ceiling = std::min(options_.backoff_cap, options_.backoff_max * (int64_t{1} << shift));
    const auto span = std::max<int64_t>((ceiling - options_.backoff_min).count(), 1);
    const core::Duration backoff =
        options_.backoff_min + core::Duration(static_cast<int64_t>(env_.rng().below(static_cast<uint64_t>(span))));
    // Give back what this round took, and what an earlier leader recorded.
    std::vector<std::string> taken;
    for (const auto& [device, token] : round->granted) taken.push_back(device);
    if (const RoutineGroupState* st = state(key)) {
      if (const auto* invocation = st->invocation(seq)) {
        for (const auto& [device, token] : invocation->locks) taken.push_back(device);
      }
    }
    give_back(key, seq, taken, backoff);
  };
  for (const std::string& device : missing) {
    write_device(device, lock_payload(key, seq, device, false),
                 [this, key, seq, device, holder, round, finish, alive = alive_](const auto& written) {
                   if (!*alive) return;
                   if (!written) {
                     round->refused = true;
                     finish();
                     return;
                   }
                   proto::DeviceQuery query;
                   query.mutable_lock()->set_device(device);
                   query.mutable_lock()->set_holder(holder);
                   read_device(device, query.SerializeAsString(),
                               [this, key, seq, device, round, finish, alive](const auto& read) {
                                 if (!*alive) return;
                                 const auto reply =
                                     read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
                                 if (reply && held_this_round(key, seq, reply->lock())) {
                                   round->granted[device] = reply->lock().token();
                                 } else {
                                   round->refused = true;
                                 }
                                 finish();
                               });
                 });
  }
}

void RoutineLeaders::give_back(const SessionKey& key, uint64_t seq, std::vector<std::string> devices,
                               core::Duration then_wait, bool then_clear_wound) {
  // Recorded locks are dropped here first, then released at their device
  // groups: a crash in between leaves a lock this invocation will ask for
  // again (and get at once), never a recorded lock it no longer holds.
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  auto remaining = std::make_shared<std::vector<std::string>>(devices);
  auto next = std::make_shared<std::function<void()>>();
  auto round_ended = std::make_shared<bool>(false);
  const std::string holder = holder_of(key, seq);
  // Wounded: once every lock is given back, the wound is cleared.
  auto done = [this, key, seq, then_wait, then_clear_wound]() {
    if (!then_clear_wound) {
      idle(key, seq, then_wait);
      return;
    }
    step(
        key, seq, [](proto::InvocationStep& s) { s.set_wound_yielded(true); },
        [this, key, seq](bool committed) { after_step(key, seq, committed); });
  };
  *next = [this, key, seq, remaining, next, done, holder, round_ended]() {
    const RoutineGroupState* st = state(key);
    const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
    if (invocation == nullptr) return;
    for (const auto& [device, token] : invocation->locks) {
      const std::string dropped = device;
      step(
          key, seq, [&dropped](proto::InvocationStep& s) { s.set_lock_dropped(dropped); },
          [this, key, seq, next](bool committed) {
            if (!committed) {
              after_step(key, seq, false);
              return;
            }
            (*next)();
          });
      return;
    }
    // A new round before any release goes out: the releases below, however
    // late they land, take nothing its requests get from now on (routine/
    // device_locks.h, "Rounds").
    if (!*round_ended && !remaining->empty()) {
      const uint32_t round = invocation->lock_round + 1;
      step(
          key, seq, [round](proto::InvocationStep& s) { s.set_lock_round(round); },
          [this, key, seq, next, round_ended](bool committed) {
            if (!committed) {
              after_step(key, seq, false);
              return;
            }
            *round_ended = true;
            (*next)();
          });
      return;
    }
    const uint32_t round = invocation->lock_round;
    auto awaiting = std::make_shared<size_t>(remaining->size());
    if (*awaiting == 0) {
      done();
      return;
    }
    for (const std::string& device : *remaining) {
      write_device(device, unlock_payload(device, holder, 0, round), [awaiting, done, alive = alive_](const auto&) {
        if (!*alive || --*awaiting != 0) return;
        done();
      });
    }
  };
  (*next)();
}

void RoutineLeaders::yield_to_wound(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                                    const std::vector<std::string>& devices) {
  // Nothing ran yet, so it gives every lock back (its queue places too),
  // and takes them again with its age unchanged: once the oldest, nobody
  // wounds it.
  core::log("routine").info("routine {} invocation {}: invocation {} waits for {}: giving its locks back",
                            routine_id(key), invocation.seq, invocation.wound->by, invocation.wound->device);
  lock_retries_.add();
  give_back(key, invocation.seq, devices, core::Duration::zero(), /*then_clear_wound=*/true);
}

std::string RoutineLeaders::lock_payload(const SessionKey& key, uint64_t seq, const std::string& device,
                                         bool wait) const {
  const auto [invocation, spec] = running(key, seq);
  if (invocation == nullptr || invocation->done()) return {};  // write_device sends nothing
  proto::DeviceUpdate request;
  request.mutable_lock()->set_device(device);
  request.mutable_lock()->set_holder(holder_of(key, seq));
  request.mutable_lock()->set_wait(wait);
  request.mutable_lock()->set_round(invocation->lock_round);
  // Only aggressive invocations can be wounded, so only their requests
  // carry an age (routine/routine_leaders.h, "Wound-wait").
  const bool woundable =
      spec != nullptr && (strategy_of(*spec) == LockStrategy::aggressive || fault_points().conservative_woundable);
  if (invocation != nullptr && woundable) request.mutable_lock()->set_started_us(invocation->triggered_at_us);
  return request.SerializeAsString();
}

void RoutineLeaders::ask_all(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices) {
  for (const std::string& device : devices) {
    write_device(device, lock_payload(key, seq, device, true), [](const auto&) {});
  }
}

void RoutineLeaders::acquire_stage(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices) {
  // A request only where the group knows none (ask_all's was lost, or this
  // leader is new).
  collect_grants(key, seq, devices, [this, key, seq](const std::string& device, const proto::LockStatusMsg& status) {
    // Queued or not (a full queue takes no one), the holder may have to
    // make way.
    wound_if_younger(key, seq, device, status);
    NotHeld action;
    if (status.state() != proto::LOCK_WAITING) action.ask = lock_payload(key, seq, device, true);
    return action;
  });
}

bool RoutineLeaders::may_ask(const std::string& holder, const std::string& device) {
  const core::TimePoint now = env_.now();
  std::erase_if(asked_at_, [&](const auto& asked) { return now - asked.second >= options_.poll_interval; });
  return asked_at_.emplace(holder + " " + device, now).second;
}

void RoutineLeaders::collect_grants(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices,
                                    OnNotHeld not_held) {
  struct Round {
    size_t awaiting = 0;
    bool asked = false;
    std::map<std::string, uint64_t> granted;
    std::optional<std::string> stop_reason;
  };
  auto round = std::make_shared<Round>();
  round->awaiting = devices.size();
  const std::string holder = holder_of(key, seq);
  auto finish = [this, key, seq, round] {
    if (--round->awaiting != 0) return;
    if (round->stop_reason) {
      stop(key, seq, *round->stop_reason);
      return;
    }
    if (round->granted.empty()) {
      idle(key, seq, round->asked ? core::Duration::zero() : options_.poll_interval);
      return;
    }
    step(
        key, seq,
        [&round](proto::InvocationStep& s) {
          for (const auto& [device, token] : round->granted) {
            auto& lock = *s.mutable_locks_held()->add_locks();
            lock.set_device(device);
            lock.set_token(token);
          }
        },
        [this, key, seq](bool committed) { after_step(key, seq, committed); });
  };
  for (const std::string& device : devices) {
    proto::DeviceQuery query;
    query.mutable_lock()->set_device(device);
    query.mutable_lock()->set_holder(holder);
    read_device(device, query.SerializeAsString(),
                [this, key, seq, device, holder, round, finish, not_held, alive = alive_](const auto& read) {
                  if (!*alive) return;
                  const auto reply = read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
                  if (reply && held_this_round(key, seq, reply->lock())) {
                    round->granted[device] = reply->lock().token();
                  } else if (reply) {
                    NotHeld action = not_held(device, reply->lock());
                    if (action.stop && !round->stop_reason) round->stop_reason = std::move(action.stop);
                    if (action.ask && may_ask(holder, device)) {
                      ++round->awaiting;
                      write_device(device, std::move(*action.ask), [round, finish, alive](const auto& written) {
                        if (!*alive) return;
                        round->asked = round->asked || written.has_value();
                        finish();
                      });
                    }
                  }
                  finish();
                });
  }
}

void RoutineLeaders::wound_if_younger(const SessionKey& key, uint64_t seq, const std::string& device,
                                      const proto::LockStatusMsg& status) {
  const auto [invocation, spec] = running(key, seq);
  const std::string& holder = status.current_holder();
  // A holder without an age is conservative: it is never wounded.
  if (invocation == nullptr || spec == nullptr || holder.empty() || status.holder_started_us() == 0 ||
      fault_points().never_wound) {
    return;
  }
  // A conservative invocation outranks every aggressive one; two aggressive
  // ones go by age: trigger times at the routine leaders' clocks, ties by
  // holder name, so every pair orders one way everywhere.
  const std::string self = holder_name(routine_id(key), *invocation);
  const bool aggressive = strategy_of(*spec) == LockStrategy::aggressive;
  if (holder == self || (aggressive && std::make_tuple(invocation->triggered_at_us, self) >
                                           std::make_tuple(status.holder_started_us(), holder))) {
    return;
  }
  // "ROUTINE#SEQ.TAG"
  const size_t hash = holder.find('#');
  const size_t dot = holder.rfind('.');
  if (hash == std::string::npos || dot == std::string::npos || dot < hash) return;
  uint64_t wounded_seq = 0;
  uint32_t tag = 0;
  const std::string_view seq_text = std::string_view(holder).substr(hash + 1, dot - hash - 1);
  const std::string_view tag_text = std::string_view(holder).substr(dot + 1);
  if (std::from_chars(seq_text.data(), seq_text.data() + seq_text.size(), wounded_seq).ec != std::errc{} ||
      std::from_chars(tag_text.data(), tag_text.data() + tag_text.size(), tag, 16).ec != std::errc{}) {
    return;
  }
  const std::string sent_key = fmt::format("{} {} {}", holder, device, status.holder_token());
  const core::TimePoint now = env_.now();
  std::erase_if(wounds_sent_, [&](const auto& sent) { return now - sent.second >= options_.request_timeout; });
  if (!wounds_sent_.emplace(sent_key, now).second) return;
  core::log("routine").info("routine {} invocation {}: waits for {}, held by aggressive {}{}: wounding it",
                            routine_id(key), seq, device, holder, aggressive ? ", triggered later" : "");
  proto::RoutineUpdate update;
  auto& step = *update.mutable_step();
  step.set_seq(wounded_seq);
  step.set_at_us(now_us());
  auto& wounded = *step.mutable_wounded();
  wounded.set_tag(tag);
  wounded.set_device(device);
  wounded.set_token(status.holder_token());
  wounded.set_by(self);
  wounded.set_by_started_us(aggressive ? invocation->triggered_at_us : 0);
  wounds_.add();
  client_.write_to(kgroup::GroupTarget{kgroup::TargetKind::routine, holder.substr(0, hash)},
                   RoutineGroupState::encode(update), options_.request_timeout, [holder, device](const auto& written) {
                     if (!written) {
                       core::log("routine").debug("wounding {} for {}: {}", holder, device, written.error());
                     }
                   });
}

void RoutineLeaders::plan_one_stage(const SessionKey& key, uint64_t seq, uint32_t stage,
                                    const std::set<std::string>& devices) {
  read_states(key, seq, devices, [this, key, seq, stage](const DeviceStates& states) {
    const auto [invocation, spec] = running(key, seq);
    if (spec == nullptr || invocation == nullptr) {
      idle(key, seq);
      return;
    }
    auto plan = plan_stage(*spec, catalog_, stage, states, options_.deduction);
    std::string reason;
    if (!plan) {
      reason = "its preconditions cannot be met: " + plan.error();
    } else {
      std::vector<PreconditionCommand> whole = invocation->plan.value_or(std::vector<PreconditionCommand>{});
      whole.insert(whole.end(), plan->begin(), plan->end());
      if (const size_t bytes = to_proto(whole).ByteSizeLong(); bytes > kMaxPlanBytes) {
        reason = fmt::format("its {} precondition commands take {} bytes, more than one committed record carries ({})",
                             whole.size(), bytes, kMaxPlanBytes);
      }
      for (const auto& command : *plan) {
        if (reason.empty() && invocation->locks.count(command.device) == 0) {
          reason = fmt::format(
              "a precondition command sets {}, which it does not hold: the precondition rules "
              "changed while it ran; run it again",
              command.device);
        }
      }
    }
    if (!reason.empty()) {
      commit_abort(key, seq, reason);
      return;
    }
    core::log("routine").info("routine {} invocation {}: command {} needs {} precondition command(s)", routine_id(key),
                              seq, stage + 1, plan->size());
    auto msg = to_proto(*plan);
    msg.set_stages(stage + 1);
    step(
        key, seq, [&msg](proto::InvocationStep& s) { *s.mutable_plan() = msg; },
        [this, key, seq](bool committed) { after_step(key, seq, committed); });
  });
}

std::optional<std::string> RoutineLeaders::lease_candidate(const RoutineGroupState::Invocation& invocation,
                                                           const std::vector<ComboCommand>& commands,
                                                           size_t next) const {
  const auto from_next = commands.begin() + static_cast<std::ptrdiff_t>(next);
  for (const auto& held : invocation.locks) {
    const std::string& device = held.first;
    auto uses = [&device](auto begin, auto end) {
      return std::any_of(begin, end, [&device](const ComboCommand& c) { return c.command.device == device; });
    };
    // FaultPoints::lease_after_first_use breaks this on purpose.
    const bool done_with =
        fault_points().lease_after_first_use ? uses(commands.begin(), from_next) : !uses(from_next, commands.end());
    if (!done_with || names_rule_device(device)) continue;
    return device;
  }
  return std::nullopt;
}

bool RoutineLeaders::names_rule_device(const std::string& device) const {
  for (const PreconditionRule& rule : catalog_.precondition_rules()) {
    if (rule.when.variable.device == device) return true;
    for (const auto& condition : rule.preconditions) {
      if (condition.variable.device == device) return true;
    }
  }
  return false;
}

void RoutineLeaders::post_lease(const SessionKey& key, uint64_t seq, const std::string& device, uint64_t token) {
  const std::string holder = holder_of(key, seq);
  core::log("routine").debug("routine {} invocation {}: done with device {}: giving its lock up (EV post-lease)",
                             routine_id(key), seq, device);
  step(
      key, seq,
      [&device, token](proto::InvocationStep& s) {
        s.mutable_lock_leased()->set_device(device);
        s.mutable_lock_leased()->set_token(token);
      },
      [this, key, seq, device, holder](bool committed) {
        if (committed) {
          // Not renewed any more from here on; a release that is lost is
          // sent again with every other one when the invocation ends.
          write_device(device, unlock_payload(device, holder), [device, holder, alive = alive_](const auto& written) {
            if (*alive && !written) {
              core::log("routine").debug("post-lease of {} on {}: {}", holder, device, written.error());
            }
          });
        }
        after_step(key, seq, committed);
      });
}

proto::DeviceUpdate RoutineLeaders::accept_of(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                                              const ComboCommand& combo_command, uint32_t index, bool undo,
                                              const Attributes* restore_to) const {
  const RoutineCommand& command = combo_command.command;
  const std::string routine = routine_id(key);
  proto::DeviceUpdate accept;
  auto& a = *accept.mutable_accept();
  a.set_command_id(undo ? undo_command_id(routine, invocation, index) : command_id(routine, invocation, index));
  a.set_device(command.device);
  const bool restore = undo && !fault_points().undo_repeats_command;
  to_proto(restore ? rollback_values(command,
                                     restore_to != nullptr ? *restore_to : invocation.commands.at(index).state_before)
                   : command.values,
           *a.mutable_values());
  a.set_origin(messages_.self().value());
  // Under WV nothing is locked, and a command without a holder is what the
  // device group runs while the device is free.
  if (const auto lock = invocation.locks.find(command.device); lock != invocation.locks.end()) {
    a.set_lock_holder(holder_name(routine, invocation));
    a.set_lock_token(lock->second);
  } else if (const auto leased = invocation.leased.find(command.device); undo && leased != invocation.leased.end()) {
    a.set_lock_holder(holder_name(routine, invocation));
    a.set_lock_token(leased->second);
    a.set_after_lease(true);
  }
  return accept;
}

void RoutineLeaders::execute(const SessionKey& key, uint64_t seq, uint32_t index, bool undo,
                             const Attributes* restore_to) {
  const auto [invocation, spec] = running(key, seq);
  if (spec == nullptr || invocation == nullptr) return;
  const std::vector<ComboCommand> commands = combo_of(*spec, *invocation);
  if (index >= commands.size()) return;
  const core::TimePoint deadline = env_.now() + options_.request_timeout * 4;
  if (Driving* driving = driving_of(key, seq); !undo && driving != nullptr && driving->sent_ahead.erase(index) > 0) {
    // Accepted already: its outcome may be in (if it is not there any more,
    // the poll comes back here and it is sent again).
    poll_command(key, seq, index, undo, deadline);
    return;
  }
  const proto::DeviceUpdate accept = accept_of(key, *invocation, commands[index], index, undo, restore_to);
  const auto& a = accept.accept();
  command_sent_at_us_.try_emplace(a.command_id(), now_us());  // a resend keeps the first
  core::log("routine").debug("routine {} invocation {}: sending command {} to {} (token {})", routine_id(key), seq,
                             a.command_id(), a.device(), a.lock_token());
  std::vector<uint32_t> rest = undo ? std::vector<uint32_t>{} : rest_of_run(*invocation, commands, index);
  write_device(a.device(), accept.SerializeAsString(),
               [this, key, seq, index, undo, deadline, rest = std::move(rest), alive = alive_](const auto& written) {
                 if (!*alive) return;
                 if (!written) {
                   core::log("routine").debug("routine {} invocation {}: command {} not accepted: {}", routine_id(key),
                                              seq, index, written.error());
                   idle(key, seq, options_.poll_interval);
                   return;
                 }
                 send_ahead(key, seq, rest, 0,
                            [this, key, seq, index, undo, deadline] { poll_command(key, seq, index, undo, deadline); });
               });
}

std::vector<uint32_t> RoutineLeaders::rest_of_run(const RoutineGroupState::Invocation& invocation,
                                                  const std::vector<ComboCommand>& commands, uint32_t index) const {
  std::vector<uint32_t> rest;
  std::set<std::string> devices{commands[index].command.device};
  for (uint32_t k = index + 1; k < commands.size() && commands[k].with_previous; ++k) {
    const std::string& device = commands[k].command.device;
    // Only under its own lock (EV takes some devices just in time), and one
    // command per device at a time.
    if (invocation.locks.count(device) == 0 || invocation.leased.count(device) != 0) break;
    if (!devices.insert(device).second) break;
    rest.push_back(k);
  }
  return rest;
}

void RoutineLeaders::send_ahead(const SessionKey& key, uint64_t seq, std::vector<uint32_t> rest, size_t at,
                                std::function<void()> then) {
  const auto [invocation, spec] = running(key, seq);
  if (at >= rest.size() || invocation == nullptr || spec == nullptr || !invocation->abort_reason.empty()) {
    then();
    return;
  }
  const std::vector<ComboCommand> commands = combo_of(*spec, *invocation);
  const uint32_t index = rest[at];
  if (index >= commands.size() || invocation->commands.count(index) != 0) {
    then();
    return;
  }
  const proto::DeviceUpdate accept = accept_of(key, *invocation, commands[index], index, false, nullptr);
  command_sent_at_us_.try_emplace(accept.accept().command_id(), now_us());
  core::log("routine").debug("routine {} invocation {}: sending command {} to {} with the one before it",
                             routine_id(key), seq, accept.accept().command_id(), accept.accept().device());
  write_device(accept.accept().device(), accept.SerializeAsString(),
               [this, key, seq, index, rest = std::move(rest), at, then = std::move(then),
                alive = alive_](const auto& written) mutable {
                 if (!*alive) return;
                 // A command is sent only once the one before it was accepted:
                 // what its device groups accepted is always a prefix of the run,
                 // which is what unless_next_was_sent relies on. So a refusal
                 // ends the sending; the rest go in their turn.
                 if (!written) {
                   then();
                   return;
                 }
                 if (Driving* driving = driving_of(key, seq)) driving->sent_ahead.insert(index);
                 send_ahead(key, seq, std::move(rest), at + 1, std::move(then));
               });
}

RoutineLeaders::Driving* RoutineLeaders::driving_of(const SessionKey& key, uint64_t seq) {
  Session* s = session(key);
  if (s == nullptr) return nullptr;
  const auto it = s->driving.find(seq);
  return it == s->driving.end() ? nullptr : it->second.get();
}

std::set<std::string> RoutineLeaders::watched_by(const std::vector<std::string>& locked) const {
  switch (watched_devices(options_.visibility)) {
    case WatchedDevices::none:
      return {};
    case WatchedDevices::locked:
      return {locked.begin(), locked.end()};
    case WatchedDevices::all: {
      std::set<std::string> all;
      for (const auto& [id, spec] : catalog_.devices()) all.insert(id);
      return all;
    }
  }
  return {};
}

namespace {

// Unknown devices (never observed) count no events and are not up.
std::map<std::string, DeviceAvailability> availability_of(const std::set<std::string>& devices,
                                                          const RoutineLeaders::DeviceRecords& records) {
  std::map<std::string, DeviceAvailability> out;
  for (const auto& device : devices) {
    DeviceAvailability& a = out[device];
    const auto it = records.find(device);
    if (it == records.end() || !it->second.known()) continue;
    a.events = it->second.availability_events();
    a.up = it->second.up();
  }
  return out;
}

// A record frozen by a handoff is not the device's current one: its counts
// may be behind the new group's, so a reading with one is taken again.
std::optional<std::string> moved_record(const RoutineLeaders::DeviceRecords& records) {
  for (const auto& [device, record] : records) {
    if (!record.moved_to().empty()) return device;
  }
  return std::nullopt;
}

}  // namespace

void RoutineLeaders::take_baseline(const SessionKey& key, uint64_t seq, const std::set<std::string>& watched) {
  read_records(key, seq, watched, [this, key, seq, watched](const DeviceRecords& records) {
    if (const auto moved = moved_record(records)) {
      core::log("routine").debug("routine {} invocation {}: device {} is moving to another group; reading again",
                                 routine_id(key), seq, *moved);
      idle(key, seq, options_.poll_interval);
      return;
    }
    const AvailabilityBaseline baseline = make_baseline(availability_of(watched, records));
    core::log("routine").debug("routine {} invocation {}: watching {} devices for failures and restarts",
                               routine_id(key), seq, baseline.devices);
    step(
        key, seq, [&baseline](proto::InvocationStep& s) { *s.mutable_baseline() = to_proto(baseline); },
        [this, key, seq](bool committed) { after_step(key, seq, committed); });
  });
}

void RoutineLeaders::finish(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                            const std::vector<ComboCommand>& commands, const std::set<std::string>& watched) {
  const uint64_t seq = invocation.seq;
  FinishCheck check;
  check.visibility = options_.visibility;
  check.baseline = invocation.baseline;
  std::set<std::string> touched;
  for (const auto& [index, result] : invocation.commands) {
    if (index >= commands.size()) continue;
    const std::string& device = commands[index].command.device;
    touched.insert(device);
    if (result.availability_events) check.touches[device].push_back(*result.availability_events);
  }
  std::set<std::string> read = watched;
  read.insert(touched.begin(), touched.end());
  read_records(key, seq, read,
               [this, key, seq, check = std::move(check), watched, touched](const DeviceRecords& records) mutable {
                 if (const auto moved = moved_record(records)) {
                   core::log("routine").debug(
                       "routine {} invocation {}: device {} is moving to another group; reading again",
                       routine_id(key), seq, *moved);
                   idle(key, seq, options_.poll_interval);
                   return;
                 }
                 check.watched_now = availability_of(watched, records);
                 check.touched_now = availability_of(touched, records);
                 const auto reason = failure_abort_reason(check);
                 if (!reason) {
                   enter_phase(key, seq, proto::PHASE_RELEASING_LOCKS);
                   return;
                 }
                 core::log("routine").info("routine {} invocation {}: aborting at its finish: {}", routine_id(key),
                                           seq, *reason);
                 step(
                     key, seq, [&reason](proto::InvocationStep& s) { s.set_abort(*reason); },
                     [this, key, seq](bool committed) {
                       if (committed) failure_aborts_.add();
                       after_step(key, seq, committed);
                     });
               });
}

void RoutineLeaders::plan_combo(const SessionKey& key, uint64_t seq, const std::set<std::string>& devices) {
  read_states(key, seq, devices, [this, key, seq](const DeviceStates& states) {
    const RoutineGroupState* st = state(key);
    const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
    const auto early = invocation == nullptr ? stale_states_.end()
                                             : stale_states_.find(holder_name(routine_id(key), *invocation));
    commit_plan(key, seq, early != stale_states_.end() ? early->second : states);
  });
}

void RoutineLeaders::read_states(const SessionKey& key, uint64_t seq, const std::set<std::string>& devices,
                                 std::function<void(const DeviceStates&)> then) {
  read_records(key, seq, devices, [then = std::move(then)](const DeviceRecords& records) {
    DeviceStates states;
    for (const auto& [device, record] : records) {
      // A frozen record moved away: its state here is stale, so the device
      // counts as unknown (set, not held).
      if (!record.known() || !record.moved_to().empty()) continue;
      states[device] = from_proto(record.attributes());
    }
    then(states);
  });
}

void RoutineLeaders::read_records(const SessionKey& key, uint64_t seq, const std::set<std::string>& devices,
                                  std::function<void(const DeviceRecords&)> then) {
  // One read per device group: its answer holds the record of each device
  // asked for, as committed there (an ok command's outcome included).
  struct Reading {
    DeviceRecords records;
    size_t pending = 0;
    std::string failure;
    std::function<void(const DeviceRecords&)> then;
  };
  std::map<std::string, std::set<std::string>> by_group;
  for (const auto& device : devices) by_group[selector_.device_group(device).to_string()].insert(device);
  auto reading = std::make_shared<Reading>();
  reading->pending = by_group.size();
  reading->then = std::move(then);
  if (by_group.empty()) {
    reading->then(reading->records);
    return;
  }
  for (const auto& [target, wanted] : by_group) {
    proto::DeviceQuery query;
    for (const auto& device : wanted) query.mutable_states()->add_devices(device);
    read_device(*wanted.begin(), query.SerializeAsString(),
                [this, key, seq, target = target, wanted = wanted, reading, alive = alive_](const auto& read) {
                  if (!*alive) return;
                  const auto reply = read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
                  if (!reply) {
                    reading->failure = fmt::format("{}: {}", target, read ? "an unreadable answer" : read.error());
                  } else {
                    for (const auto& device : reply->devices()) {
                      if (wanted.count(device.device()) != 0) reading->records[device.device()] = device;
                    }
                  }
                  if (--reading->pending > 0) return;
                  if (!reading->failure.empty()) {
                    core::log("routine").debug("routine {} invocation {}: reading its devices failed ({}); "
                                               "trying again",
                                               routine_id(key), seq, reading->failure);
                    idle(key, seq, options_.poll_interval);
                    return;
                  }
                  reading->then(reading->records);
                });
  }
}

void RoutineLeaders::commit_plan(const SessionKey& key, uint64_t seq, const DeviceStates& states) {
  const auto [invocation, spec] = running(key, seq);
  if (spec == nullptr || invocation == nullptr || invocation->plan) {
    idle(key, seq);
    return;
  }
  for (const auto& [device, attributes] : states) {
    const DeviceSpec* known = catalog_.find(device);
    core::log("routine").debug("routine {} invocation {}: {} is {}", routine_id(key), seq, device,
                               known ? format_attributes(known->kind, attributes) : "?");
  }
  auto plan = plan_preconditions(*spec, catalog_, states, options_.deduction);
  std::string reason;
  if (!plan) {
    reason = "its preconditions cannot be met: " + plan.error();
  } else if (const size_t bytes = to_proto(*plan).ByteSizeLong(); bytes > kMaxPlanBytes) {
    reason = fmt::format("its {} precondition commands take {} bytes, more than one committed step carries ({})",
                         plan->size(), bytes, kMaxPlanBytes);
  } else {
    for (const auto& command : *plan) {
      if (invocation->locks.count(command.device) == 0) {
        reason = fmt::format(
            "a precondition command sets {}, which it did not lock: the precondition rules changed while it took "
            "its locks; run it again",
            command.device);
        break;
      }
    }
  }
  if (!reason.empty()) {
    commit_abort(key, seq, reason);
    return;
  }
  std::vector<std::string> described;
  for (const auto& command : *plan) {
    const DeviceSpec* device = catalog_.find(command.device);
    described.push_back(fmt::format("{} {} before command {} ({})", command.device,
                                    device ? format_attributes(device->kind, command.values) : "?", command.before + 1,
                                    fmt::join(command.rules, ", ")));
  }
  core::log("routine").info("routine {} invocation {}: {} precondition command(s){}{}", routine_id(key), seq,
                            plan->size(), described.empty() ? "" : ": ", fmt::join(described, "; "));
  step(
      key, seq, [&plan](proto::InvocationStep& s) { *s.mutable_plan() = to_proto(*plan); },
      [this, key, seq](bool committed) { after_step(key, seq, committed); });
}

void RoutineLeaders::enter_phase(const SessionKey& key, uint64_t seq, proto::RoutinePhase phase) {
  step(
      key, seq, [phase](proto::InvocationStep& s) { s.set_phase(phase); },
      [this, key, seq](bool committed) { after_step(key, seq, committed); });
}

void RoutineLeaders::roll_back(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                               const std::vector<std::string>& devices) {
  const uint64_t seq = invocation.seq;
  const auto index = next_to_undo(invocation);
  if (!index) {
    enter_phase(key, seq, proto::PHASE_RELEASING_LOCKS);
    return;
  }
  const RoutineSpec* spec = spec_of(key, invocation);
  const std::vector<ComboCommand> commands =
      spec == nullptr ? std::vector<ComboCommand>{} : combo_of(*spec, invocation);
  if (*index >= commands.size() ||
      rollback_values(commands[*index].command, invocation.commands.at(*index).state_before).empty()) {
    // Its device's state was not known when it ran, and no undo value says
    // what to set instead: nothing to restore to.
    step(
        key, seq,
        [index](proto::InvocationStep& s) {
          s.mutable_undo()->set_index(*index);
          s.mutable_undo()->set_status(proto::COMMAND_REFUSED);
          s.mutable_undo()->set_detail("the device's state before it was not known");
        },
        [this, key, seq](bool committed) { after_step(key, seq, committed); });
    return;
  }
  for (const auto& [resource, grant] : invocation.resources) {
    if (!holds_here(resource, grant)) {
      retake_for_rollback(key, invocation, resource, devices);
      return;
    }
  }
  core::log("routine").info("routine {} invocation {}: undoing command {}", routine_id(key), seq, *index + 1);
  if (options_.visibility != Visibility::ev) {
    execute(key, seq, *index, true);
    return;
  }
  // Under EV an aborted routine that wrote the device in between may have
  // handed its own undo value to this command (DeviceGroupState::
  // restore_after_lease): restore what the device group's record says now.
  proto::DeviceQuery query;
  query.set_command_id(command_id(routine_id(key), invocation, *index));
  const uint32_t undone = *index;
  read_device(commands[undone].command.device, query.SerializeAsString(),
              [this, key, seq, undone, alive = alive_](const auto& read) {
                if (!*alive) return;
                const auto reply = read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
                if (!reply || !reply->found()) {
                  // Forgotten there (or unreachable): what was committed here.
                  execute(key, seq, undone, true);
                  return;
                }
                const Attributes recorded = from_proto(reply->command().outcome().state_before());
                execute(key, seq, undone, true, &recorded);
              });
}

void RoutineLeaders::poll_command(const SessionKey& key, uint64_t seq, uint32_t index, bool undo,
                                  core::TimePoint deadline) {
  const auto [invocation, spec] = running(key, seq);
  if (spec == nullptr || invocation == nullptr) {
    idle(key, seq);
    return;
  }
  const std::vector<ComboCommand> commands = combo_of(*spec, *invocation);
  if (index >= commands.size()) {
    idle(key, seq);
    return;
  }
  proto::DeviceQuery query;
  query.set_command_id(undo ? undo_command_id(routine_id(key), *invocation, index)
                            : command_id(routine_id(key), *invocation, index));
  read_device(commands[index].command.device, query.SerializeAsString(),
              [this, key, seq, index, undo, deadline, alive = alive_](const auto& read) {
                if (!*alive) return;
                const auto reply = read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
                if (!reply || !reply->found()) {
                  core::log("routine").debug("routine {} invocation {}: command {} not found at its device group ({})",
                                             routine_id(key), seq, index, read ? "not there" : read.error());
                  // Not there (yet, or any more after a move): send it again (same
                  // id), unless this has gone on too long.
                  idle(key, seq, options_.poll_interval);
                  return;
                }
                const proto::CommandOutcome& outcome = reply->command().outcome();
                if (outcome.status() == proto::COMMAND_PENDING) {
                  if (env_.now() > deadline) {
                    idle(key, seq, options_.poll_interval);
                    return;
                  }
                  Driving* driving = driving_of(key, seq);
                  if (driving == nullptr) return;
                  driving->timer.start(options_.poll_interval, [this, key, seq, index, undo, deadline] {
                    poll_command(key, seq, index, undo, deadline);
                  });
                  return;
                }
                record_outcome(key, seq, index, undo, outcome);
              });
}

void RoutineLeaders::record_outcome(const SessionKey& key, uint64_t seq, uint32_t index, bool undo,
                                    const proto::CommandOutcome& outcome) {
  const RoutineGroupState* st = state(key);
  const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
  std::string id;
  if (invocation != nullptr) {
    id = undo ? undo_command_id(routine_id(key), *invocation, index) : command_id(routine_id(key), *invocation, index);
  }
  const auto sent = command_sent_at_us_.find(id);
  const int64_t started_at_us = sent == command_sent_at_us_.end() ? 0 : sent->second;
  step(
      key, seq,
      [index, undo, &outcome, started_at_us](proto::InvocationStep& s) {
        proto::CommandStep& recorded = undo ? *s.mutable_undo() : *s.mutable_command();
        recorded.set_index(index);
        recorded.set_status(outcome.status());
        recorded.set_detail(outcome.detail());
        recorded.set_started_at_us(started_at_us);
        if (!undo) {
          *recorded.mutable_state_before() = outcome.state_before();
          if (outcome.has_availability_events()) recorded.set_availability_events(outcome.availability_events());
        }
      },
      [this, key, seq, undo, id](bool committed) {
        if (committed && undo) rollback_commands_.add();
        if (committed) command_sent_at_us_.erase(id);
        after_step(key, seq, committed);
      });
}

void RoutineLeaders::commit_abort(const SessionKey& key, uint64_t seq, const std::string& reason) {
  core::log("routine").warn("routine {} invocation {} aborts: {}", routine_id(key), seq, reason);
  step(
      key, seq, [&reason](proto::InvocationStep& s) { s.set_abort(reason); },
      [this, key, seq](bool committed) { after_step(key, seq, committed); });
}

void RoutineLeaders::abort_running(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                                   const std::vector<ComboCommand>& commands, const std::string& reason) {
  unless_next_was_sent(key, invocation, commands,
                       [this, key, seq = invocation.seq, reason] { commit_abort(key, seq, reason); });
}

void RoutineLeaders::unless_next_was_sent(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                                          const std::vector<ComboCommand>& commands, std::function<void()> then) {
  const uint64_t seq = invocation.seq;
  const auto next = static_cast<uint32_t>(invocation.commands.size());
  if (next >= commands.size()) {
    then();
    return;
  }
  proto::DeviceQuery query;
  query.set_command_id(command_id(routine_id(key), invocation, next));
  read_device(commands[next].command.device, query.SerializeAsString(),
              [this, key, seq, next, then = std::move(then), alive = alive_](const auto& read) {
                if (!*alive) return;
                const auto reply = read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
                if (!reply) {
                  idle(key, seq, options_.poll_interval);  // cannot tell yet
                  return;
                }
                if (!reply->found()) {
                  then();  // never accepted there: it did not run
                  return;
                }
                if (reply->command().outcome().status() == proto::COMMAND_PENDING) {
                  idle(key, seq, options_.poll_interval);
                  return;
                }
                record_outcome(key, seq, next, false, reply->command().outcome());
              });
}

void RoutineLeaders::release(const SessionKey& key, uint64_t seq, std::vector<std::string> devices,
                             proto::InvocationEnd end) {
  const std::string routine = routine_id(key);
  const std::string holder = holder_of(key, seq);
  auto awaiting = std::make_shared<size_t>(devices.size());
  auto failed = std::make_shared<bool>(false);
  auto done = [this, key, seq, end, awaiting, failed, routine, holder]() {
    if (--*awaiting != 0) return;
    if (*failed) {
      idle(key, seq, options_.poll_interval);
      return;
    }
    release_claims(holder);
    step(
        key, seq, [&end](proto::InvocationStep& s) { *s.mutable_end() = end; },
        [this, key, seq, end, routine](bool committed) {
          if (committed) {
            (end.outcome() == proto::INVOCATION_OK        ? invocations_ok_
             : end.outcome() == proto::INVOCATION_ABORTED ? invocations_aborted_
                                                          : invocations_failed_)
                .add();
            record_latency(key, seq);
            core::log("routine").info("routine {} invocation {} {}{}", routine, seq,
                                      proto::InvocationOutcome_Name(end.outcome()),
                                      end.detail().empty() ? "" : ": " + end.detail());
          }
          after_step(key, seq, committed);
        });
  };
  if (devices.empty() || fault_points().skip_release) {
    *awaiting = 1;
    done();
    return;
  }
  for (const std::string& device : devices) {
    write_device(device, unlock_payload(device, holder), [failed, done, alive = alive_](const auto& written) {
      if (!*alive) return;
      if (!written) *failed = true;
      done();
    });
  }
}

void RoutineLeaders::record_latency(const SessionKey& key, uint64_t seq) {
  const auto [invocation, spec] = running(key, seq);
  if (spec == nullptr || invocation == nullptr || !invocation->done()) return;
  std::vector<core::Duration> holds;
  if (invocation->definition == 0 || invocation->definition == definition_digest(*spec)) {
    holds = command_holds(*spec, invocation->plan.value_or(std::vector<PreconditionCommand>{}));
  }
  const InvocationMetrics metrics = invocation_metrics(to_proto(*invocation), holds);
  const auto ms = [](core::Duration duration) { return core::to_seconds(duration) * 1e3; };
  if (metrics.wait) wait_ms_.record(ms(*metrics.wait));
  if (metrics.end_to_end) end_to_end_ms_.record(ms(*metrics.end_to_end));
  if (metrics.latency_overhead) latency_overhead_.record(*metrics.latency_overhead);
  if (metrics.stretch && options_.visibility == Visibility::ev) ev_stretch_.record(*metrics.stretch);
}

std::vector<std::string> RoutineLeaders::resources_of(const RoutineSpec& spec) const {
  if (fault_points().ignore_uses) return {};
  std::vector<std::string> resources = spec.uses;
  std::sort(resources.begin(), resources.end());
  resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
  if (is_global(options_.visibility)) resources.insert(resources.begin(), std::string(kGlobalRoutineResource));
  return resources;
}

bool RoutineLeaders::holds_here(const std::string& resource, const RoutineGroupState::ResourceGrant& grant) const {
  if (grant.holder != messages_.self().value()) return false;
  const auto held = camera_.held(resource);
  return held && held->fencing_token == grant.token;
}

void RoutineLeaders::ask_camera(const SessionKey& key, uint64_t seq, const std::string& holder,
                                const std::string& resource) {
  Claim fresh;
  fresh.devices_left_at = env_.now();
  fresh.asked_at = env_.now();
  claims_[holder][resource] = fresh;
  core::log("routine").debug("routine {} invocation {}: asking Camera for {}", routine_id(key), seq, resource);
  const mutex::AcquireHandle handle =
      camera_.acquire(resource, mutex::Camera::kNoTimeout,
                      [this, holder, resource, alive = alive_](const mutex::AcquireResult& result) {
                        if (!*alive) return;
                        const auto owner = claims_.find(holder);
                        if (owner == claims_.end() || owner->second.count(resource) == 0) return;
                        if (!result) {
                          core::log("routine").warn("invocation {}: Camera refused {}: {}", holder, resource,
                                                    mutex::to_string(result.error()));
                          owner->second.erase(resource);
                          return;
                        }
                        owner->second[resource].token = result->fencing_token;
                      });
  // The callback may have run already (and erased a refused claim).
  if (auto owner = claims_.find(holder); owner != claims_.end()) {
    if (auto claim = owner->second.find(resource); claim != owner->second.end()) claim->second.handle = handle;
  }
  idle(key, seq, options_.poll_interval);
}

void RoutineLeaders::take_resource(const SessionKey& key, uint64_t seq, const std::string& holder,
                                   const std::string& resource, const std::vector<std::string>& devices) {
  auto& claims = claims_[holder];
  const auto found = claims.find(resource);
  if (found == claims.end()) {
    ask_camera(key, seq, holder, resource);
    return;
  }
  if (!found->second.token) {
    // Waiting for Camera. A lock request of an earlier leader of this
    // invocation may still land in a device's queue and be granted
    // meanwhile, and holding a device while waiting for a resource could
    // close a wait cycle with the resource's holder: every so often, leave
    // every device queue (releases of a lock not held or waited for change
    // nothing). No new lock round is needed: a round asks for no device
    // before its resources are held (dropping one begins a new round), so
    // whatever this invocation has there is of an earlier round.
    if (env_.now() - found->second.devices_left_at >= options_.request_timeout) {
      found->second.devices_left_at = env_.now();
      leave_devices(holder, lock_round_of(key, seq), devices);
    }
    idle(key, seq, options_.poll_interval);
    return;
  }
  commit_resource_held(key, seq, resource, *found->second.token, false);
}

void RoutineLeaders::retake_for_rollback(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                                         const std::string& resource, const std::vector<std::string>& devices) {
  const uint64_t seq = invocation.seq;
  const std::string holder = holder_of(key, seq);
  auto& claims = claims_[holder];
  auto found = claims.find(resource);
  if (found != claims.end() && found->second.token &&
      !holds_here(resource, {*found->second.token, messages_.self().value()})) {
    // This node's own grant, taken back by Camera since: ask anew.
    camera_.cancel(found->second.handle);
    claims.erase(found);
    found = claims.end();
  }
  if (found == claims.end()) {
    core::log("routine").info(
        "routine {} invocation {}: taking resource {} again before rolling back (its grant was lost)", routine_id(key),
        seq, resource);
    ask_camera(key, seq, holder, resource);
    return;
  }
  if (!found->second.token) {
    // The resource's holder may be waiting for a device this invocation
    // holds (it took the resource first, as everyone does): it is asked to
    // give the resource back. A longer chain (the holder waits for someone
    // who waits for this invocation) is not seen that way: after
    // rollback_resource_wait the rollback stops and leaves what ran in
    // place, as for a lock lost, since an undo outside the resource would
    // break its exclusion.
    Claim& claim = found->second;
    if (!claim.make_way_asked_at || env_.now() - *claim.make_way_asked_at >= options_.request_timeout) {
      claim.make_way_asked_at = env_.now();
      std::vector<std::string> held;
      for (const auto& device : devices) {
        if (invocation.leased.count(device) == 0) held.push_back(device);
      }
      ask_to_make_way(holder, resource, held);
    }
    if (env_.now() - claim.asked_at >= options_.rollback_resource_wait) {
      // Those asked must not go on making way for a rollback that is over.
      withdraw_make_way(holder, resource);
      stop(key, seq,
           fmt::format("resource {} was not regained within {} s to undo the commands that ran under it", resource,
                       std::chrono::duration_cast<std::chrono::seconds>(options_.rollback_resource_wait).count()));
      return;
    }
    idle(key, seq, options_.poll_interval);
    return;
  }
  if (found->second.make_way_asked_at) {
    found->second.make_way_asked_at.reset();
    withdraw_make_way(holder, resource);
  }
  commit_resource_held(key, seq, resource, *found->second.token, true);
}

void RoutineLeaders::commit_resource_held(const SessionKey& key, uint64_t seq, const std::string& resource,
                                          uint64_t token, bool for_rollback) {
  const uint32_t self = messages_.self().value();
  step(
      key, seq,
      [&resource, token, self, for_rollback](proto::InvocationStep& s) {
        s.mutable_resource_held()->set_resource(resource);
        s.mutable_resource_held()->set_token(token);
        s.mutable_resource_held()->set_holder(self);
        s.mutable_resource_held()->set_for_rollback(for_rollback);
      },
      [this, key, seq](bool committed) { after_step(key, seq, committed); });
}

void RoutineLeaders::ask_to_make_way(const std::string& holder, const std::string& resource,
                                     const std::vector<std::string>& devices) {
  if (devices.empty()) return;
  proto::RoutineUpdate update;
  auto& make_way = *update.mutable_make_way();
  make_way.set_resource(resource);
  make_way.set_by(holder);
  for (const auto& device : devices) make_way.add_devices(device);
  send_make_way(update);
}

void RoutineLeaders::withdraw_make_way(const std::string& holder, const std::string& resource) {
  proto::RoutineUpdate update;
  auto& make_way = *update.mutable_make_way();
  make_way.set_resource(resource);
  make_way.set_by(holder);
  make_way.set_withdrawn(true);
  send_make_way(update);
}

void RoutineLeaders::send_make_way(const proto::RoutineUpdate& update) {
  const std::string& resource = update.make_way().resource();
  const std::string& holder = update.make_way().by();
  const std::string encoded = RoutineGroupState::encode(update);
  for (const auto& [id, spec] : catalog_.routines()) {
    const std::vector<std::string> uses = resources_of(spec);
    if (std::find(uses.begin(), uses.end(), resource) == uses.end()) continue;
    core::log("routine").debug("invocation {}: {} routine {} to make way with {}", holder,
                               update.make_way().withdrawn() ? "no longer asking" : "asking", id, resource);
    client_.write_to(kgroup::GroupTarget{kgroup::TargetKind::routine, id}, encoded, options_.request_timeout,
                     [group_id = id, resource](const auto& written) {
                       if (!written)
                         core::log("routine").debug("making way in {} for {}: {}", group_id, resource, written.error());
                     });
  }
}

std::optional<std::string> RoutineLeaders::blocks_a_rollback(const RoutineGroupState::Invocation& invocation,
                                                             const std::vector<std::string>& devices) const {
  if (!invocation.make_way || invocation.resources.count(invocation.make_way->resource) == 0) return std::nullopt;
  // The rollback may wait for it directly (it needs a device the rollback
  // holds) or through others (it waits for someone who does, or for a
  // resource someone else holds). Only the first is seen from here, so an
  // invocation that waits for anything while nothing of it ran makes way
  // too: it loses no work. One that ran commands makes way only for a
  // direct wait, as it has to roll back to do so.
  if (invocation.phase == proto::PHASE_ACQUIRING_LOCKS) return std::string("it is still acquiring");
  std::optional<std::string> waits_for;
  for (const auto& device : devices) {
    if (invocation.locks.count(device) != 0 || invocation.leased.count(device) != 0) continue;
    if (invocation.make_way->devices.count(device) != 0) {
      return fmt::format("it waits for device {}, which the rollback holds", device);
    }
    if (!waits_for) waits_for = fmt::format("it waits for device {}", device);
  }
  if (invocation.commands.empty()) return waits_for;
  return std::nullopt;
}

void RoutineLeaders::leave_devices(const std::string& holder, uint32_t round, const std::vector<std::string>& devices) {
  for (const std::string& device : devices) {
    write_device(device, unlock_payload(device, holder, 0, round), [](const auto&) {});
  }
}

void RoutineLeaders::start_over(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices) {
  const RoutineGroupState* st = state(key);
  const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
  if (invocation == nullptr) return;
  if (!invocation->resources.empty()) {
    const std::string dropped = invocation->resources.begin()->first;
    step(
        key, seq, [&dropped](proto::InvocationStep& s) { s.set_resource_dropped(dropped); },
        [this, key, seq, devices](bool committed) {
          if (!committed) {
            after_step(key, seq, false);
            return;
          }
          start_over(key, seq, devices);
        });
    return;
  }
  // Whatever this node asked for under earlier records goes too, so the
  // resources are taken again in order.
  release_claims(holder_of(key, seq));
  // Every device of the routine, not only the recorded locks: a request
  // still queued would be granted while this invocation waits for its
  // resources.
  give_back(key, seq, devices, core::Duration::zero());
}

void RoutineLeaders::stop(const SessionKey& key, uint64_t seq, const std::string& reason) {
  core::log("routine").warn("routine {} invocation {} stops: {}", routine_id(key), seq, reason);
  step(
      key, seq, [&reason](proto::InvocationStep& s) { s.set_stop(reason); },
      [this, key, seq](bool committed) { after_step(key, seq, committed); });
}

std::optional<std::string> RoutineLeaders::lost_resource(const RoutineGroupState::Invocation& invocation) const {
  for (const auto& [resource, grant] : invocation.resources) {
    if (!holds_here(resource, grant)) {
      return fmt::format(
          "resource {} (token {}) is no longer held: its Camera grant was node {}'s, and another holder may have "
          "used it since",
          resource, grant.token, core::NodeId(grant.holder).to_string());
    }
  }
  return std::nullopt;
}

std::optional<std::string> RoutineLeaders::lost_lock(const std::string& routine,
                                                     const RoutineGroupState::Invocation& invocation) const {
  for (const auto& [index, result] : invocation.commands) {
    if (result.status == proto::COMMAND_FENCED) {
      return fmt::format("command {} was fenced: {}", index + 1, result.detail);
    }
  }
  if (const auto known = lost_locks_.find(holder_name(routine, invocation)); known != lost_locks_.end()) {
    for (const auto& [device, token] : invocation.locks) {
      const auto gone = known->second.find(device);
      if (gone != known->second.end() && gone->second == token) {
        return fmt::format("the lock on device {} (token {}) was taken back by its device group", device, token);
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> RoutineLeaders::lock_given_up(const RoutineGroupState::Invocation& invocation,
                                                         const std::vector<ComboCommand>& commands) const {
  if (options_.visibility == Visibility::wv) return std::nullopt;
  for (const auto& [index, result] : invocation.commands) {
    if (index >= commands.size() || !may_have_acted(result.status)) continue;
    const std::string& device = commands[index].command.device;
    if (invocation.locks.count(device) == 0 && invocation.leased.count(device) == 0) {
      return fmt::format("its lock on device {}, where command {} ran, is no longer recorded", device, index + 1);
    }
  }
  return std::nullopt;
}

void RoutineLeaders::release_claims(const std::string& holder) {
  lost_locks_.erase(holder);
  unled_claims_since_.erase(holder);
  const auto it = claims_.find(holder);
  if (it == claims_.end()) return;
  for (const auto& [resource, claim] : it->second) {
    core::log("routine").debug("invocation {}: giving {} back to Camera", holder, resource);
    camera_.cancel(claim.handle);
  }
  claims_.erase(it);
}

void RoutineLeaders::sweep_claims(const std::set<SessionKey>& leading) {
  std::set<std::string> led;
  std::set<std::string> running;  // holder names
  for (const SessionKey& key : leading) {
    led.insert(routine_id(key));
    if (const RoutineGroupState* st = state(key)) {
      for (const auto& [seq, invocation] : st->invocations()) {
        if (!invocation.done()) running.insert(holder_name(routine_id(key), invocation));
      }
    }
  }
  std::erase_if(lost_locks_, [&running](const auto& entry) { return running.count(entry.first) == 0; });
  std::erase_if(left_ahead_at_, [&running](const auto& entry) { return running.count(entry.first) == 0; });
  std::erase_if(command_sent_at_us_, [&running](const auto& entry) {
    return running.count(entry.first.substr(0, entry.first.rfind('#'))) == 0;
  });
  std::vector<std::string> finished;
  for (const auto& [holder, claims] : claims_) {
    if (led.count(holder.substr(0, holder.find('#'))) != 0) {
      unled_claims_since_.erase(holder);
      if (running.count(holder) == 0) finished.push_back(holder);
      continue;
    }
    const auto [since, inserted] = unled_claims_since_.try_emplace(holder, env_.now());
    if (!inserted && env_.now() - since->second >= options_.request_timeout) finished.push_back(holder);
  }
  for (const std::string& holder : finished) release_claims(holder);
}

void RoutineLeaders::on_locks_lost(const proto::LocksLost& lost) {
  for (const auto& lock : lost.locks()) {
    if (lock.holder().empty() || lock.token() == 0) continue;
    const std::string routine = lock.holder().substr(0, lock.holder().find('#'));
    const bool led = std::any_of(sessions_.begin(), sessions_.end(),
                                 [&routine](const auto& entry) { return entry.second->routine == routine; });
    if (led) lost_locks_[lock.holder()][lock.device()] = lock.token();
  }
}

void RoutineLeaders::renew_locks() {
  std::map<core::NodeId, proto::RoutineBody> bodies;
  for (const auto& [key, s] : sessions_) {
    kgroup::GroupReplica* r = replica(key);
    const RoutineGroupState* st = state(key);
    if (r == nullptr || st == nullptr || !r->can_read()) continue;
    for (const auto& [seq, invocation] : st->invocations()) {
      if (invocation.done()) continue;
      const RoutineSpec* spec = spec_of(key, invocation);
      // EV: its entries in lineages are renewed too (token 0: a renewal
      // that is not about a grant), or a device leader takes back the entry
      // every later one waits for.
      std::map<std::string, uint64_t> renewed = invocation.locks;
      if (invocation.serial_key_us != 0 && spec != nullptr) {
        if (const auto reserved = combo_devices(*spec, catalog_)) {
          for (const std::string& device : reserved->devices) {
            if (invocation.leased.count(device) == 0) renewed.emplace(device, 0);
          }
        }
      }
      for (const auto& [device, token] : renewed) {
        // Every member this node computes, and the leader that last
        // answered (the group may have members this node's view does not
        // compute, after a re-selection it did not see).
        const kgroup::GroupTarget target = selector_.device_group(device);
        std::set<core::NodeId> to;
        for (const core::NodeId member : selector_.members(target, epoch_of_(target))) to.insert(member);
        if (const auto known = device_group_leaders_.find(target.to_string()); known != device_group_leaders_.end()) {
          to.insert(known->second);
        }
        for (const core::NodeId member : to) {
          auto& lock = *bodies[member].mutable_lock_renew()->add_locks();
          lock.set_device(device);
          lock.set_holder(holder_name(s->routine, invocation));
          lock.set_token(token);
        }
      }
    }
  }
  for (const auto& [member, body] : bodies) messages_.send(member, body);
}

void RoutineLeaders::write_device(const std::string& device, std::string payload,
                                  kgroup::GroupClient::WriteCallback callback) {
  if (payload.empty()) {
    // A lock request for an invocation this session does not run (a round
    // that outlived its session, or one for an invocation that ended): sent,
    // it would name a holder nobody renews or releases (EV sweep with moving
    // devices, seed 13: "r3#4.00000000" held d4 for good).
    callback(core::Unexpected(std::string("not sent: the invocation is not running here")));
    return;
  }
  const std::string target = selector_.device_group(device).to_string();
  client_.write_to(selector_.device_group(device), std::move(payload), options_.request_timeout,
                   [this, target, callback = std::move(callback), alive = alive_](const auto& written) {
                     if (*alive && written) device_group_leaders_[target] = written->leader;
                     callback(written);
                   });
}

void RoutineLeaders::read_device(const std::string& device, std::string query,
                                 kgroup::GroupClient::ReadCallback callback) {
  const std::string target = selector_.device_group(device).to_string();
  client_.read_from(selector_.device_group(device), std::move(query), options_.request_timeout,
                    [this, target, callback = std::move(callback), alive = alive_](const auto& read) {
                      if (*alive && read) device_group_leaders_[target] = read->leader;
                      callback(read);
                    });
}

void RoutineLeaders::submit(const SessionKey& key, const proto::RoutineUpdate& update, Committed done) {
  kgroup::GroupReplica* r = replica(key);
  if (r == nullptr || !r->serving()) {
    done(false);
    return;
  }
  r->submit(kgroup::ClientStateMachine::encode_write(env_.rng().next_u64() | 1, RoutineGroupState::encode(update)),
            [done = std::move(done)](const kgroup::SubmitResult& result) {
              done(result.status == kgroup::SubmitStatus::committed);
            });
}

void RoutineLeaders::step(const SessionKey& key, uint64_t seq, const std::function<void(proto::InvocationStep&)>& fill,
                          Committed done) {
  proto::RoutineUpdate update;
  auto& s = *update.mutable_step();
  s.set_seq(seq);
  s.set_at_us(now_us());
  fill(s);
  submit(key, update, std::move(done));
}

}  // namespace mesh::routine
