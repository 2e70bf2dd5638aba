#include "routine/routine_group_state.h"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "routine/adhoc_combo.h"
#include "routine/device_codec.h"
#include "routine/fault_points.h"

namespace mesh::routine {
namespace {

constexpr size_t kMaxRemembered = 4096;
// Bounds what one snapshot may hold, so a corrupt one cannot blow up memory.
constexpr int kMaxInvocations = 4096;

}  // namespace

std::string holder_name(const std::string& routine, const RoutineGroupState::Invocation& invocation) {
  return fmt::format("{}#{}.{:08x}", routine, invocation.seq, invocation.tag);
}

std::string command_id(const std::string& routine, const RoutineGroupState::Invocation& invocation, uint32_t index) {
  return fmt::format("{}#{}", holder_name(routine, invocation), index);
}

std::string undo_command_id(const std::string& routine, const RoutineGroupState::Invocation& invocation,
                            uint32_t index) {
  return fmt::format("{}.undo", command_id(routine, invocation, index));
}

proto::InvocationMsg to_proto(const RoutineGroupState::Invocation& invocation) {
  proto::InvocationMsg msg;
  msg.set_seq(invocation.seq);
  msg.set_tag(invocation.tag);
  msg.set_request_id(invocation.request_id);
  msg.set_manual(invocation.manual);
  msg.set_definition(invocation.definition);
  if (invocation.adhoc) *msg.mutable_adhoc() = to_adhoc_proto(*invocation.adhoc);
  msg.set_phase(invocation.phase);
  msg.set_outcome(invocation.outcome);
  msg.set_detail(invocation.detail);
  for (const auto& [device, token] : invocation.locks) {
    auto& lock = *msg.add_locks();
    lock.set_device(device);
    lock.set_token(token);
  }
  for (const auto& [device, token] : invocation.leased) {
    auto& lock = *msg.add_leased();
    lock.set_device(device);
    lock.set_token(token);
  }
  for (const auto& [resource, grant] : invocation.resources) {
    auto& held = *msg.add_resources();
    held.set_resource(resource);
    held.set_token(grant.token);
    held.set_holder(grant.holder);
    held.set_for_rollback(grant.for_rollback);
    held.set_taken_at_us(grant.taken_at_us);
  }
  msg.set_stop_reason(invocation.stop_reason);
  for (const auto& [index, result] : invocation.commands) {
    auto& command = *msg.add_commands();
    command.set_index(index);
    command.set_status(result.status);
    command.set_detail(result.detail);
    to_proto(result.state_before, *command.mutable_state_before());
    if (result.availability_events) command.set_availability_events(*result.availability_events);
    command.set_started_at_us(result.started_at_us);
    msg.add_command_done_at_us(result.done_at_us);
  }
  msg.set_abort_reason(invocation.abort_reason);
  for (const auto& [index, result] : invocation.undone) {
    auto& undo = *msg.add_undone();
    undo.set_index(index);
    undo.set_status(result.status);
    undo.set_detail(result.detail);
    undo.set_started_at_us(result.started_at_us);
    msg.add_undone_done_at_us(result.done_at_us);
  }
  if (invocation.plan) {
    *msg.mutable_plan() = to_proto(*invocation.plan);
    msg.mutable_plan()->set_stages(invocation.planned_stages);
  }
  if (invocation.wound) {
    auto& wound = *msg.mutable_wound();
    wound.set_tag(invocation.tag);
    wound.set_device(invocation.wound->device);
    wound.set_token(invocation.wound->token);
    wound.set_by(invocation.wound->by);
    wound.set_by_started_us(invocation.wound->by_started_us);
  }
  if (invocation.make_way) {
    auto& make_way = *msg.mutable_make_way();
    make_way.set_resource(invocation.make_way->resource);
    make_way.set_by(invocation.make_way->by);
    for (const auto& device : invocation.make_way->devices) make_way.add_devices(device);
  }
  if (invocation.baseline) *msg.mutable_baseline() = to_proto(*invocation.baseline);
  msg.set_triggered_at_us(invocation.triggered_at_us);
  msg.set_serial_key_us(invocation.serial_key_us);
  msg.set_keyed_at_us(invocation.keyed_at_us);
  msg.set_placed_at_us(invocation.placed_at_us);
  msg.set_rekeys(invocation.rekeys);
  msg.set_locked_at_us(invocation.locked_at_us);
  msg.set_releasing_at_us(invocation.releasing_at_us);
  msg.set_ended_at_us(invocation.ended_at_us);
  if (invocation.lock_round > 1) msg.set_lock_round(invocation.lock_round);
  return msg;
}

RoutineGroupState::Invocation from_proto(const proto::InvocationMsg& msg) {
  RoutineGroupState::Invocation invocation;
  invocation.seq = msg.seq();
  invocation.tag = msg.tag();
  invocation.request_id = msg.request_id();
  invocation.manual = msg.manual();
  invocation.definition = msg.definition();
  if (msg.has_adhoc()) {
    if (auto adhoc = adhoc_from_proto(msg.adhoc())) invocation.adhoc = std::move(*adhoc);
  }
  invocation.phase = msg.phase();
  invocation.outcome = msg.outcome();
  invocation.detail = msg.detail();
  for (const auto& lock : msg.locks()) invocation.locks[lock.device()] = lock.token();
  for (const auto& lock : msg.leased()) invocation.leased[lock.device()] = lock.token();
  for (const auto& held : msg.resources()) {
    invocation.resources[held.resource()] = {held.token(), held.holder(), held.for_rollback(), held.taken_at_us()};
  }
  invocation.stop_reason = msg.stop_reason();
  invocation.lock_round = std::max<uint32_t>(1, msg.lock_round());
  for (int i = 0; i < msg.commands_size(); ++i) {
    auto& result = invocation.commands[msg.commands(i).index()];
    result.status = msg.commands(i).status();
    result.detail = msg.commands(i).detail();
    result.done_at_us = i < msg.command_done_at_us_size() ? msg.command_done_at_us(i) : 0;
    result.started_at_us = msg.commands(i).started_at_us();
    result.state_before = from_proto(msg.commands(i).state_before());
    if (msg.commands(i).has_availability_events()) result.availability_events = msg.commands(i).availability_events();
  }
  invocation.abort_reason = msg.abort_reason();
  for (int i = 0; i < msg.undone_size(); ++i) {
    auto& result = invocation.undone[msg.undone(i).index()];
    result.status = msg.undone(i).status();
    result.detail = msg.undone(i).detail();
    result.started_at_us = msg.undone(i).started_at_us();
    result.done_at_us = i < msg.undone_done_at_us_size() ? msg.undone_done_at_us(i) : 0;
  }
  if (msg.has_plan()) {
    invocation.plan = from_proto(msg.plan());
    invocation.planned_stages = msg.plan().stages();
  }
  if (msg.has_wound()) {
    invocation.wound = RoutineGroupState::Invocation::Wound{msg.wound().device(), msg.wound().token(), msg.wound().by(),
                                                            msg.wound().by_started_us()};
  }
  if (msg.has_make_way()) {
    invocation.make_way =
        RoutineGroupState::Invocation::MakeWay{msg.make_way().resource(),
                                               msg.make_way().by(),
                                               {msg.make_way().devices().begin(), msg.make_way().devices().end()}};
  }
  if (msg.has_baseline()) invocation.baseline = from_proto(msg.baseline());
  invocation.triggered_at_us = msg.triggered_at_us();
  invocation.serial_key_us = msg.serial_key_us();
  invocation.keyed_at_us = msg.keyed_at_us();
  invocation.placed_at_us = msg.placed_at_us();
  invocation.rekeys = msg.rekeys();
  invocation.locked_at_us = msg.locked_at_us();
  invocation.releasing_at_us = msg.releasing_at_us();
  invocation.ended_at_us = msg.ended_at_us();
  return invocation;
}

void RoutineGroupState::apply(uint64_t seq, std::string_view update) {
  ++position_;
  position_by_group_seq_[seq] = position_;
  while (position_by_group_seq_.size() > kMaxRemembered) position_by_group_seq_.erase(position_by_group_seq_.begin());
  apply_update(update);
  if (on_apply_) on_apply_();
}

void RoutineGroupState::apply_update(std::string_view update) {
  const auto write = decode_write(update);
  if (!write) return;
  const auto decoded = parse_message<proto::RoutineUpdate>(write->payload);
  if (!decoded) return;
  switch (decoded->kind_case()) {
    case proto::RoutineUpdate::kTrigger:
      apply_trigger(decoded->trigger());
      return;
    case proto::RoutineUpdate::kStep:
      apply_step(decoded->step());
      return;
    case proto::RoutineUpdate::kMakeWay:
      apply_make_way(decoded->make_way());
      return;
    case proto::RoutineUpdate::kHello:
    case proto::RoutineUpdate::KIND_NOT_SET:
      return;
  }
}

void RoutineGroupState::apply_make_way(const proto::MakeWay& make_way) {
  if (make_way.resource().empty() || make_way.by().empty()) return;
  if (make_way.withdrawn()) {
    for (auto& [seq, invocation] : invocations_) {
      if (invocation.make_way && invocation.make_way->resource == make_way.resource() &&
          invocation.make_way->by == make_way.by()) {
        invocation.make_way.reset();
      }
    }
    return;
  }
  if (make_way.devices().empty()) return;
  for (auto& [seq, invocation] : invocations_) {
    // Only invocations going forward: one rolling back needs no device it
    // does not hold.
    const bool running = invocation.phase == proto::PHASE_ACQUIRING_LOCKS || invocation.phase == proto::PHASE_EXECUTING;
    if (!running || !invocation.abort_reason.empty() || invocation.resources.count(make_way.resource()) == 0) {
      continue;
    }
    invocation.make_way =
        Invocation::MakeWay{make_way.resource(), make_way.by(), {make_way.devices().begin(), make_way.devices().end()}};
  }
}

void RoutineGroupState::apply_trigger(const proto::RoutineTrigger& trigger) {
  std::optional<RoutineSpec> adhoc;
  if (trigger.has_adhoc()) {
    auto decoded = adhoc_from_proto(trigger.adhoc());
    if (!decoded) return;
    adhoc = std::move(*decoded);
  }
  if (!trigger.request_id().empty()) {
    for (const auto& [seq, invocation] : invocations_) {
      if (invocation.request_id == trigger.request_id()) return;
    }
  }
  if (!trigger.manual()) {
    // A change already acted on (a new leader re-evaluating what its
    // predecessor saw) is not a new trigger...
    bool news = trigger.causes_size() == 0;
    for (const auto& cause : trigger.causes()) news = news || cause.version() > cause_version(cause.device());
    if (!news) return;
    // ...and automatic triggers are spaced by the routine's minimum interval.
    const int64_t spacing = static_cast<int64_t>(trigger.min_retrigger_ms()) * 1000;
    if (last_trigger_at_us_ != 0 && trigger.at_us() < last_trigger_at_us_ + spacing) return;
  }
  for (const auto& cause : trigger.causes()) {
    uint64_t& version = cause_versions_[cause.device()];
    version = std::max(version, cause.version());
  }
  if (!trigger.manual()) last_trigger_at_us_ = std::max(last_trigger_at_us_, trigger.at_us());
  Invocation& invocation = invocations_[next_seq_];
  invocation.seq = next_seq_++;
  invocation.tag = trigger.tag();
  invocation.request_id = trigger.request_id();
  invocation.manual = trigger.manual();
  invocation.definition = trigger.definition();
  invocation.adhoc = std::move(adhoc);
  invocation.triggered_at_us = trigger.at_us();
  if (fault_points().nondeterministic_trigger) {
    static int64_t stamp = 0;
    invocation.triggered_at_us = ++stamp;
  }
}

void RoutineGroupState::hold_lock(Invocation& invocation, const proto::LockHeldStep& lock) {
  const std::string& device = lock.device();
  if (device.empty()) return;
  if (invocation.phase == proto::PHASE_ACQUIRING_LOCKS) {
    invocation.locks[device] = lock.token();
  } else if (invocation.phase == proto::PHASE_EXECUTING && invocation.abort_reason.empty() &&
             invocation.locks.count(device) == 0 && invocation.leased.count(device) == 0) {
    // The aggressive strategy takes locks while it runs; a lock already
    // recorded keeps its token.
    invocation.locks[device] = lock.token();
  }
}

void RoutineGroupState::apply_step(const proto::InvocationStep& step) {
  const auto it = invocations_.find(step.seq());
  if (it == invocations_.end() || it->second.done()) return;
  Invocation& invocation = it->second;
  switch (step.kind_case()) {
    case proto::InvocationStep::kLockHeld:
      hold_lock(invocation, step.lock_held());
      return;
    case proto::InvocationStep::kLocksHeld:
      for (const auto& lock : step.locks_held().locks()) hold_lock(invocation, lock);
      return;
    case proto::InvocationStep::kLockLeased:
      if (invocation.phase == proto::PHASE_EXECUTING) {
        const auto held = invocation.locks.find(step.lock_leased().device());
        if (held == invocation.locks.end()) return;
        invocation.leased[held->first] = held->second;
        invocation.locks.erase(held);
      }
      return;
    case proto::InvocationStep::kLockRound:
      if (step.lock_round() > invocation.lock_round) invocation.lock_round = step.lock_round();
      return;
    case proto::InvocationStep::kLockDropped:
      if (invocation.phase == proto::PHASE_ACQUIRING_LOCKS || invocation.may_yield()) {
        invocation.locks.erase(step.lock_dropped());
      }
      return;
    case proto::InvocationStep::kResourceHeld: {
      const proto::ResourceHeldStep& held = step.resource_held();
      if (held.resource().empty()) return;
      // Taken in order while acquiring; or taken again, one the invocation
      // had, by a rollback that found its grant lost.
      const bool acquiring = invocation.phase == proto::PHASE_ACQUIRING_LOCKS && !held.for_rollback();
      const bool retaken = invocation.phase == proto::PHASE_EXECUTING && !invocation.abort_reason.empty() &&
                           held.for_rollback() && invocation.resources.count(held.resource()) != 0;
      if (acquiring || retaken) {
        invocation.resources[held.resource()] = {held.token(), held.holder(), retaken, step.at_us()};
      }
      return;
    }
    case proto::InvocationStep::kResourceDropped:
      if (invocation.phase == proto::PHASE_ACQUIRING_LOCKS) {
        invocation.resources.erase(step.resource_dropped());
        if (invocation.make_way && invocation.make_way->resource == step.resource_dropped())
          invocation.make_way.reset();
      }
      return;
    case proto::InvocationStep::kStop:
      if ((invocation.phase == proto::PHASE_ACQUIRING_LOCKS || invocation.phase == proto::PHASE_EXECUTING) &&
          !step.stop().empty()) {
        invocation.phase = proto::PHASE_RELEASING_LOCKS;
        invocation.releasing_at_us = step.at_us();
        invocation.stop_reason = step.stop();
      }
      return;
    case proto::InvocationStep::kPhase:
      if (step.phase() == proto::PHASE_EXECUTING && invocation.phase == proto::PHASE_ACQUIRING_LOCKS) {
        invocation.phase = proto::PHASE_EXECUTING;
        invocation.locked_at_us = step.at_us();
      } else if (step.phase() == proto::PHASE_RELEASING_LOCKS &&
                 (invocation.phase == proto::PHASE_ACQUIRING_LOCKS || invocation.phase == proto::PHASE_EXECUTING)) {
        invocation.phase = proto::PHASE_RELEASING_LOCKS;
        invocation.releasing_at_us = step.at_us();
      }
      return;
    case proto::InvocationStep::kCommand: {
      const auto& command = step.command();
      if (invocation.phase != proto::PHASE_EXECUTING || command.status() == proto::COMMAND_PENDING ||
          !invocation.abort_reason.empty()) {
        return;
      }
      auto [result, inserted] = invocation.commands.try_emplace(command.index());
      if (!inserted) return;
      result->second.status = command.status();
      result->second.detail = command.detail();
      result->second.done_at_us = step.at_us();
      // A start after the outcome was committed is no start.
      if (command.started_at_us() > 0 && command.started_at_us() <= step.at_us()) {
        result->second.started_at_us = command.started_at_us();
      }
      result->second.state_before = from_proto(command.state_before());
      if (command.has_availability_events()) result->second.availability_events = command.availability_events();
      return;
    }
    case proto::InvocationStep::kBaseline:
      // Once, before the plan and any command: what the finish point
      // compares with must be from before the first command.
      if (invocation.phase == proto::PHASE_EXECUTING && !invocation.baseline && !invocation.plan &&
          invocation.commands.empty() && invocation.abort_reason.empty()) {
        invocation.baseline = from_proto(step.baseline());
      }
      return;
    case proto::InvocationStep::kPlan: {
      if (invocation.phase != proto::PHASE_EXECUTING || !invocation.abort_reason.empty()) return;
      auto plan = from_proto(step.plan());
      const uint32_t stage = step.plan().stages();
      if (stage == 0) {
        // The whole plan, once, before any command: every later index
        // counts its commands.
        if (invocation.plan || !invocation.commands.empty()) return;
        for (size_t i = 1; i < plan.size(); ++i) {
          if (plan[i].before < plan[i - 1].before) return;  // not a plan this code wrote
        }
        invocation.plan = std::move(plan);
        return;
      }
      // One stage, after the one before it: its commands go after every
      // command already planned, so no index that ran moves.
      // Stages without precondition commands are not planned at all.
      const uint32_t planned = invocation.plan ? invocation.planned_stages : 0;
      if ((invocation.plan && planned == 0) || stage <= planned) return;
      if (std::any_of(plan.begin(), plan.end(), [stage](const auto& c) { return c.before != stage - 1; })) return;
      if (!invocation.plan) invocation.plan.emplace();
      invocation.plan->insert(invocation.plan->end(), plan.begin(), plan.end());
      invocation.planned_stages = stage;
      return;
    }
    case proto::InvocationStep::kWounded: {
      const auto& wounded = step.wounded();
      const bool running =
          invocation.phase == proto::PHASE_ACQUIRING_LOCKS || invocation.phase == proto::PHASE_EXECUTING;
      if (!running || wounded.tag() != invocation.tag || invocation.wound || wounded.device().empty() ||
          invocation.leased.count(wounded.device()) != 0) {
        return;
      }
      // A lock the invocation recorded under another token is not the grant
      // the wound names; one it has not recorded yet (granted to a request
      // of its own, not committed here) may be.
      const auto held = invocation.locks.find(wounded.device());
      if (held != invocation.locks.end() && held->second != wounded.token()) return;
      invocation.wound = Invocation::Wound{wounded.device(), wounded.token(), wounded.by(), wounded.by_started_us()};
      return;
    }
    case proto::InvocationStep::kWoundYielded:
      if ((invocation.phase == proto::PHASE_ACQUIRING_LOCKS || invocation.may_yield()) && invocation.locks.empty()) {
        invocation.wound.reset();
        // Deduced from states read under the locks it gave back: stale.
        invocation.plan.reset();
        invocation.planned_stages = 0;
      }
      return;
    case proto::InvocationStep::kSerialKey: {
      const int64_t key_us = step.serial_key().key_us();
      if (invocation.phase != proto::PHASE_ACQUIRING_LOCKS || key_us <= 0 || key_us == invocation.serial_key_us ||
          step.serial_key().replaces_key_us() != invocation.serial_key_us) {
        return;
      }
      if (invocation.serial_key_us == 0) {
        invocation.keyed_at_us = std::max<int64_t>(step.at_us(), 1);
      } else {
        ++invocation.rekeys;
      }
      invocation.serial_key_us = key_us;
      invocation.placed_at_us = 0;
      return;
    }
    case proto::InvocationStep::kPlacedKeyUs:
      if (invocation.phase == proto::PHASE_ACQUIRING_LOCKS && invocation.serial_key_us != 0 &&
          invocation.placed_at_us == 0 && step.placed_key_us() == invocation.serial_key_us) {
        invocation.placed_at_us = std::max<int64_t>(step.at_us(), 1);
      }
      return;
    case proto::InvocationStep::kAbort:
      if (invocation.phase == proto::PHASE_EXECUTING && invocation.abort_reason.empty() && !step.abort().empty()) {
        invocation.abort_reason = step.abort();
      }
      return;
    case proto::InvocationStep::kUndo: {
      const auto& undo = step.undo();
      const auto ran = invocation.commands.find(undo.index());
      if (invocation.phase != proto::PHASE_EXECUTING || invocation.abort_reason.empty() ||
          undo.status() == proto::COMMAND_PENDING || ran == invocation.commands.end()) {
        return;
      }
      auto [result, inserted] = invocation.undone.try_emplace(undo.index());
      if (!inserted) return;
      result->second.status = undo.status();
      result->second.detail = undo.detail();
      result->second.done_at_us = step.at_us();
      if (undo.started_at_us() > 0 && undo.started_at_us() <= step.at_us()) {
        result->second.started_at_us = undo.started_at_us();
      }
      return;
    }
    case proto::InvocationStep::kEnd:
      if (invocation.phase != proto::PHASE_RELEASING_LOCKS || step.end().outcome() == proto::INVOCATION_RUNNING) {
        return;
      }
      invocation.phase = proto::PHASE_DONE;
      invocation.outcome = step.end().outcome();
      invocation.detail = step.end().detail();
      invocation.ended_at_us = step.at_us();
      finished_order_.push_back(invocation.seq);
      while (finished_order_.size() > kMaxFinished) {
        invocations_.erase(finished_order_.front());
        finished_order_.pop_front();
      }
      return;
    case proto::InvocationStep::KIND_NOT_SET:
      return;
  }
}

const RoutineGroupState::Invocation* RoutineGroupState::invocation(uint64_t seq) const {
  const auto it = invocations_.find(seq);
  return it == invocations_.end() ? nullptr : &it->second;
}

uint64_t RoutineGroupState::cause_version(const std::string& device) const {
  const auto it = cause_versions_.find(device);
  return it == cause_versions_.end() ? 0 : it->second;
}

std::optional<uint64_t> RoutineGroupState::position_of(uint64_t group_seq) const {
  const auto it = position_by_group_seq_.find(group_seq);
  if (it == position_by_group_seq_.end()) return std::nullopt;
  return it->second;
}

namespace {

// What a reader can do without, largest first: the values each command
// found before it (a leader's, for undoing), and the tails of long texts.
void compact_for_answer(proto::InvocationMsg& msg) {
  constexpr size_t kKeptText = 96;
  auto shorten = [](std::string* text) {
    if (text->size() > kKeptText) {
      text->resize(kKeptText);
      text->append("...");
    }
  };
  for (auto& command : *msg.mutable_commands()) {
    command.clear_state_before();
    shorten(command.mutable_detail());
  }
  for (auto& undo : *msg.mutable_undone()) shorten(undo.mutable_detail());
  shorten(msg.mutable_detail());
  shorten(msg.mutable_abort_reason());
  shorten(msg.mutable_stop_reason());
}

}  // namespace

core::Expected<std::string, std::string> RoutineGroupState::read(std::string_view query) const {
  const auto decoded = parse_message<proto::RoutineQuery>(query);
  if (!decoded) return core::Unexpected(std::string("malformed routine query"));
  proto::RoutineQueryReply reply;
  switch (decoded->kind_case()) {
    case proto::RoutineQuery::kAll: {
      // Running invocations first, then finished ones newest first until
      // one does not fit: what is left out is always the oldest finished
      // ones, so a reader knows every invocation newer than the first it
      // sees. The answer lists those kept oldest first.
      std::vector<const Invocation*> order;
      for (const auto& [seq, invocation] : invocations_) {
        if (!invocation.done()) order.push_back(&invocation);
      }
      for (auto it = invocations_.rbegin(); it != invocations_.rend(); ++it) {
        if (it->second.done()) order.push_back(&it->second);
      }
      std::map<uint64_t, proto::InvocationMsg> kept;
      size_t bytes = 0;
      uint32_t omitted = 0;
      bool finished_full = false;
      for (const Invocation* invocation : order) {
        if (finished_full && invocation->done()) {
          ++omitted;
          continue;
        }
        proto::InvocationMsg msg = to_proto(*invocation);
        // An invocation too big for the answer on its own (many commands,
        // a rollback, long reasons) is shown compacted rather than left
        // out: leaving out the newest finished one would hide every older
        // one too.
        if (msg.ByteSizeLong() + 3 > kMaxAnswerBytes) compact_for_answer(msg);
        // Field tag and length prefix of the repeated entry.
        const size_t size = msg.ByteSizeLong() + 3;
        if (bytes + size > kMaxAnswerBytes) {
          ++omitted;
          finished_full = finished_full || invocation->done();
          continue;
        }
        bytes += size;
        kept.emplace(invocation->seq, std::move(msg));
      }
      for (auto& [seq, msg] : kept) *reply.add_invocations() = std::move(msg);
      reply.set_omitted(omitted);
      reply.set_found(true);
      break;
    }
    case proto::RoutineQuery::kRequestId:
      for (const auto& [seq, invocation] : invocations_) {
        if (invocation.request_id != decoded->request_id()) continue;
        *reply.add_invocations() = to_proto(invocation);
        reply.set_found(true);
      }
      break;
    case proto::RoutineQuery::KIND_NOT_SET:
      return core::Unexpected(std::string("empty routine query"));
  }
  return reply.SerializeAsString();
}

std::string RoutineGroupState::snapshot() const {
  proto::RoutineGroupSnapshot snapshot;
  // Running ones in sequence order, then finished ones oldest first, so
  // restore() rebuilds the same forgetting order.
  for (const auto& [seq, invocation] : invocations_) {
    if (!invocation.done()) *snapshot.add_invocations() = to_proto(invocation);
  }
  for (uint64_t seq : finished_order_) *snapshot.add_invocations() = to_proto(invocations_.at(seq));
  snapshot.set_next_seq(next_seq_);
  snapshot.set_last_trigger_at_us(last_trigger_at_us_);
  for (const auto& [device, version] : cause_versions_) {
    auto& cause = *snapshot.add_causes();
    cause.set_device(device);
    cause.set_version(version);
  }
  snapshot.set_position(position_);
  return snapshot.SerializeAsString();
}

std::optional<std::string> RoutineGroupState::migration_unwelcome() const {
  for (const auto& [seq, invocation] : invocations_) {
    if (invocation.done() || invocation.resources.empty()) continue;
    return fmt::format("invocation {} holds the Camera grant of {}", seq, invocation.resources.begin()->first);
  }
  return std::nullopt;
}

bool RoutineGroupState::restore(std::string_view snapshot) {
  const auto decoded = parse_message<proto::RoutineGroupSnapshot>(snapshot);
  if (!decoded || decoded->invocations_size() > kMaxInvocations) return false;
  std::map<uint64_t, Invocation> invocations;
  std::deque<uint64_t> finished;
  for (const auto& msg : decoded->invocations()) {
    if (msg.seq() == 0 || msg.seq() >= decoded->next_seq()) return false;
    Invocation invocation = from_proto(msg);
    if (msg.has_adhoc() && !invocation.adhoc) return false;
    const bool done = invocation.done();
    if (!invocations.emplace(msg.seq(), std::move(invocation)).second) return false;
    if (done) finished.push_back(msg.seq());
  }
  std::map<std::string, uint64_t> causes;
  for (const auto& cause : decoded->causes()) causes[cause.device()] = cause.version();
  invocations_ = std::move(invocations);
  finished_order_ = std::move(finished);
  next_seq_ = std::max<uint64_t>(decoded->next_seq(), 1);
  last_trigger_at_us_ = decoded->last_trigger_at_us();
  cause_versions_ = std::move(causes);
  position_ = decoded->position();
  position_by_group_seq_.clear();
  return true;
}

}  // namespace mesh::routine
