// RoutineLeaders under EV: serial keys and device lineages
// (routine/routine_leaders.h, "Serial keys"; routine/device_locks.h,
// "Lineages"). The rest of the invocation's life is routine_leaders.cc.

#include <algorithm>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "core/log.h"
#include "routine/device_codec.h"
#include "routine/device_locks.h"
#include "routine/routine_leaders.h"
#include "routine/routine_leaders_detail.h"

namespace mesh::routine {
namespace {

using detail::routine_id;
using detail::unlock_payload;

// An entry under `key_us` would be refused: the device was granted to a
// (key, holder) above it.
bool below_floor(int64_t key_us, const std::string& holder, const proto::LockStatusMsg& status) {
  return std::make_tuple(key_us, holder) < std::make_tuple(status.floor_key_us(), status.floor_holder());
}

int64_t micros(core::Duration duration) {
  return std::chrono::duration_cast<std::chrono::microseconds>(duration).count();
}

}  // namespace

void RoutineLeaders::acquire_in_lineages(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                                         const std::vector<std::string>& devices, bool all_from_start) {
  const uint64_t seq = invocation.seq;
  if (devices.empty()) {
    enter_phase(key, seq, proto::PHASE_EXECUTING);
  } else if (invocation.serial_key_us == 0) {
    choose_key(key, seq, devices, std::string(), 0, all_from_start);
  } else {
    // Also when `placed_key_us` is committed: a new leader, or one that gave its
    // entries back to take its resources again, makes sure of them.
    place_everywhere(key, seq, devices, all_from_start);
  }
}

void RoutineLeaders::choose_key(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices,
                                const std::string& refused_by, int64_t replaces_key_us, bool all_from_start) {
  struct Round {
    size_t awaiting = 0;
    bool failed = false;
    std::map<std::string, LineageView> lineages;
  };
  auto round = std::make_shared<Round>();
  round->awaiting = devices.size();
  const std::string holder = holder_of(key, seq);
  auto finish = [this, key, seq, round, refused_by, replaces_key_us, all_from_start] {
    if (--round->awaiting != 0) return;
    const auto [invocation, spec] = running(key, seq);
    // Another round (maybe one begun under an earlier leader) moved the key
    // while this one read: what it read decides nothing now.
    if (round->failed || invocation == nullptr || spec == nullptr || invocation->serial_key_us != replaces_key_us) {
      idle(key, seq, options_.poll_interval);
      return;
    }
    // A new key goes above the refused one: each re-key moves forward.
    const int64_t lowest = std::max(invocation->triggered_at_us, replaces_key_us + 1);
    const auto choice = choose_serial_key(options_.ev_scheduler, options_.ev_pre_lease, lowest, round->lineages,
                                          expected_uses(*spec, all_from_start, 0));
    if (!choice) {
      core::log("routine").debug("routine {} invocation {}: its devices are in use; waiting to place it ({})",
                                 routine_id(key), seq, to_string(options_.ev_scheduler));
      idle(key, seq, options_.poll_interval);
      return;
    }
    core::log("routine").debug("routine {} invocation {}: serial key {}{}{}", routine_id(key), seq, choice->key_us,
                               choice->before_placed ? ", before routines already placed (pre-lease)" : "",
                               refused_by.empty() ? "" : ", re-keyed: refused by " + refused_by);
    const bool before_placed = choice->before_placed;
    const bool rekey = !refused_by.empty();
    step(
        key, seq,
        [&](proto::InvocationStep& s) {
          s.mutable_serial_key()->set_key_us(choice->key_us);
          s.mutable_serial_key()->set_refused_by(refused_by);
          s.mutable_serial_key()->set_replaces_key_us(replaces_key_us);
        },
        [this, key, seq, before_placed, rekey](bool committed) {
          if (committed && before_placed) pre_leases_.add();
          if (committed && rekey) rekeys_.add();
          after_step(key, seq, committed);
        });
  };
  for (const std::string& device : devices) {
    proto::DeviceQuery query;
    query.mutable_lock()->set_device(device);
    query.mutable_lock()->set_holder(holder);
    query.mutable_lock()->set_lineage(true);
    read_device(device, query.SerializeAsString(), [device, holder, round, finish, alive = alive_](const auto& read) {
      if (!*alive) return;
      const auto reply = read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
      if (!reply) {
        round->failed = true;
      } else {
        LineageView& view = round->lineages[device];
        view.floor_key_us = reply->lock().floor_key_us();
        view.truncated = static_cast<size_t>(reply->lock().lineage_size()) >= DeviceLocks::kMaxLineageAnswer;
        for (const auto& entry : reply->lock().lineage()) {
          // Its own entry under an earlier key is not in its way.
          if (entry.holder() == holder) continue;
          view.entries.push_back(LineageSlot{entry.holder(), entry.serial_key_us(), entry.expected_first_use_us(),
                                             entry.expected_done_us()});
        }
      }
      finish();
    });
  }
}

void RoutineLeaders::place_everywhere(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices,
                                      bool all_from_start) {
  const RoutineGroupState* st = state(key);
  const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
  if (invocation == nullptr) return;
  struct Round {
    size_t awaiting = 0;
    size_t placed = 0;
    bool asked = false;
    std::string refused_by;
  };
  auto round = std::make_shared<Round>();
  round->awaiting = devices.size();
  const std::string holder = holder_of(key, seq);
  const int64_t key_us = invocation->serial_key_us;
  auto finish = [this, key, seq, round, devices, holder, all_from_start, key_us] {
    if (--round->awaiting != 0) return;
    const RoutineGroupState* now_keyed = state(key);
    const auto* keyed = now_keyed == nullptr ? nullptr : now_keyed->invocation(seq);
    if (keyed == nullptr || keyed->serial_key_us != key_us) {
      // Re-keyed by another round while this one read: neither its
      // refusals nor its placements are about the current key.
      idle(key, seq, options_.poll_interval);
      return;
    }
    if (!round->refused_by.empty()) {
      // Someone serialized after this key already used the device: withdraw
      // every entry (they would hold up routines after it) and re-key.
      core::log("routine").info(
          "routine {} invocation {}: device {} was already used by a routine after its "
          "serial key: placing it again under a new key",
          routine_id(key), seq, round->refused_by);
      for (const std::string& device : devices) {
        write_device(device, unlock_payload(device, holder, key_us), [](const auto&) {});
      }
      choose_key(key, seq, devices, round->refused_by, key_us, all_from_start);
      return;
    }
    if (round->placed < devices.size()) {
      // A placement happens when its request applies: read again at once.
      idle(key, seq, round->asked ? core::Duration::zero() : options_.poll_interval);
      return;
    }
    if (keyed->placed_at_us != 0) {
      enter_phase(key, seq, proto::PHASE_EXECUTING);
      return;
    }
    step(
        key, seq, [key_us](proto::InvocationStep& s) { s.set_placed_key_us(key_us); },
        [this, key, seq](bool committed) {
          const RoutineGroupState* now_state = state(key);
          const auto* placed = now_state == nullptr ? nullptr : now_state->invocation(seq);
          if (!committed || placed == nullptr || placed->placed_at_us == 0) {
            after_step(key, seq, committed);
            return;
          }
          if (placed->keyed_at_us != 0) {
            placement_ms_.record(static_cast<double>(placed->placed_at_us - placed->keyed_at_us) / 1000.0);
          }
          enter_phase(key, seq, proto::PHASE_EXECUTING);
        });
  };
  for (const std::string& device : devices) {
    proto::DeviceQuery query;
    query.mutable_lock()->set_device(device);
    query.mutable_lock()->set_holder(holder);
    read_device(
        device, query.SerializeAsString(),
        [this, key, seq, device, holder, key_us, round, finish, all_from_start, alive = alive_](const auto& read) {
          if (!*alive) return;
          const auto reply = read ? parse_message<proto::DeviceQueryReply>(read->answer) : std::nullopt;
          if (reply) {
            const proto::LockStatusMsg& lock = reply->lock();
            // A lock is granted to the lowest entry, which moves the floor
            // to its (key, holder): while held, the floor says the key.
            const bool held_under_key =
                lock.state() == proto::LOCK_HELD && lock.floor_holder() == holder && lock.floor_key_us() == key_us;
            if (held_under_key || (lock.state() == proto::LOCK_PLACED && lock.placed_key_us() == key_us)) {
              ++round->placed;
            } else if (lock.state() == proto::LOCK_HELD) {
              // Granted under an earlier key (its entry was ready from the
              // start) and not given back when it re-keyed (that release is
              // sent once, and may be lost): kept, it would order this
              // device by the old key and the others by the new one, a
              // cycle. Nothing ran yet: give it back, then place anew.
              ++round->awaiting;
              write_device(device, unlock_payload(device, holder, lock.floor_key_us()),
                           [round, finish, alive](const auto& written) {
                             if (!*alive) return;
                             round->asked = round->asked || written.has_value();
                             finish();
                           });
            } else if (below_floor(key_us, holder, lock)) {
              round->refused_by = device;
            } else if (may_ask(holder, device)) {
              ++round->awaiting;
              write_device(device, place_payload(key, seq, device, all_from_start, all_from_start, 0),
                           [round, finish, alive](const auto& written) {
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

void RoutineLeaders::take_in_key_order(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices) {
  const RoutineGroupState* st = state(key);
  const auto* invocation = st == nullptr ? nullptr : st->invocation(seq);
  if (invocation == nullptr) return;
  const std::string holder = holder_of(key, seq);
  const int64_t key_us = invocation->serial_key_us;
  const size_t from = invocation->commands.size();
  collect_grants(key, seq, devices,
                 [this, key, seq, holder, key_us, from](const std::string& device, const proto::LockStatusMsg& lock) {
                   NotHeld action;
                   if (lock.state() == proto::LOCK_PLACED && lock.placed_key_us() == key_us && lock.placed_ready()) {
                     return action;  // waiting for the entries before it to be done with the device
                   }
                   if (lock.state() != proto::LOCK_PLACED && below_floor(key_us, holder, lock)) {
                     action.stop = fmt::format(
                         "its place in the serial order at device {} is gone (taken back while its leader was "
                         "silent, or left behind when the device moved to another group), and a routine "
                         "serialized after it used the device since",
                         device);
                     return action;
                   }
                   action.ask = place_payload(key, seq, device, true, false, from);
                   return action;
                 });
}

std::string RoutineLeaders::place_payload(const SessionKey& key, uint64_t seq, const std::string& device, bool ready,
                                          bool all_from_start, size_t from) const {
  const auto [invocation, spec] = running(key, seq);
  // Without a key it would be a plain lock request, outside key order.
  if (invocation == nullptr || invocation->done() || invocation->serial_key_us == 0) return {};
  proto::DeviceUpdate request;
  auto& lock = *request.mutable_lock();
  lock.set_device(device);
  lock.set_holder(holder_of(key, seq));
  lock.set_wait(true);
  lock.set_serial_key_us(invocation->serial_key_us);
  lock.set_ready(ready);
  if (spec != nullptr) {
    const auto uses = expected_uses(*spec, all_from_start, from);
    if (const auto use = uses.find(device); use != uses.end()) {
      lock.set_expected_first_use_us(use->second.first_use_us);
      lock.set_expected_done_us(use->second.done_us);
    } else {
      // A device of a precondition graph only: read (and maybe set) before
      // the first command, held to the end.
      int64_t end = now_us();
      for (const auto& [named, other] : uses) end = std::max(end, other.done_us);
      lock.set_expected_first_use_us(now_us());
      lock.set_expected_done_us(end);
    }
  }
  return request.SerializeAsString();
}

std::map<std::string, ExpectedUse> RoutineLeaders::expected_uses(const RoutineSpec& spec, bool all_from_start,
                                                                 size_t from) const {
  const int64_t start = now_us();
  int64_t at = start;
  std::map<std::string, ExpectedUse> uses;
  for (size_t i = std::min(from, spec.commands.size()); i < spec.commands.size(); ++i) {
    const RoutineCommand& command = spec.commands[i];
    const int64_t begins = at;
    at += micros(options_.expected_command_time) + (command.duration ? micros(*command.duration) : 0);
    auto [use, inserted] = uses.try_emplace(command.device, ExpectedUse{begins, at});
    use->second.done_us = at;
  }
  if (all_from_start) {
    // Every device is held before the plan is made: from now to the end.
    for (auto& [device, use] : uses) use = ExpectedUse{start, at};
  }
  return uses;
}

}  // namespace mesh::routine
