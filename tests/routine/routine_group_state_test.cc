#include "routine/routine_group_state.h"

#include <gtest/gtest.h>

#include "routine/adhoc_combo.h"
#include "routine/device_codec.h"
#include "routine/routine_combo.h"

namespace mesh::routine {
namespace {

class RoutineGroup : public ::testing::Test {
 protected:
  void apply(const proto::RoutineUpdate& update) {
    ++seq_;
    state_.apply(seq_, kgroup::ClientStateMachine::encode_write(seq_, update.SerializeAsString()));
  }
  void trigger(int64_t at_s, const std::string& device, uint64_t version, const std::string& request = {}) {
    proto::RoutineUpdate update;
    auto& t = *update.mutable_trigger();
    t.set_at_us(at_s * 1'000'000);
    t.set_min_retrigger_ms(10'000);
    t.set_request_id(request);
    t.set_manual(device.empty());
    if (!device.empty()) {
      auto& cause = *t.add_causes();
      cause.set_device(device);
      cause.set_version(version);
    }
    apply(update);
  }
  proto::InvocationStep& step(uint64_t seq, proto::RoutineUpdate& update) {
    update.mutable_step()->set_seq(seq);
    update.mutable_step()->set_at_us(++clock_us_);
    return *update.mutable_step();
  }
  void phase(uint64_t seq, proto::RoutinePhase phase) {
    proto::RoutineUpdate update;
    step(seq, update).set_phase(phase);
    apply(update);
  }
  // A lock taken (LockHeld) or, with `leased`, given up after its last use.
  void lock_step(uint64_t seq, const std::string& device, uint64_t token, bool leased) {
    proto::RoutineUpdate update;
    proto::InvocationStep& s = step(seq, update);
    auto& lock = leased ? *s.mutable_lock_leased() : *s.mutable_lock_held();
    lock.set_device(device);
    lock.set_token(token);
    apply(update);
  }
  void lock_held(uint64_t seq, const std::string& device, uint64_t token) { lock_step(seq, device, token, false); }
  void lock_leased(uint64_t seq, const std::string& device, uint64_t token) { lock_step(seq, device, token, true); }
  // A grant taken while acquiring, or, with `for_rollback`, again by a rollback.
  void resource_held(uint64_t seq, const std::string& resource, uint64_t token, uint32_t holder,
                     bool for_rollback = false) {
    proto::RoutineUpdate update;
    auto& held = *step(seq, update).mutable_resource_held();
    held.set_resource(resource);
    held.set_token(token);
    held.set_holder(holder);
    held.set_for_rollback(for_rollback);
    apply(update);
  }
  void resource_retaken(uint64_t seq, const std::string& resource, uint64_t token, uint32_t holder) {
    resource_held(seq, resource, token, holder, true);
  }
  void make_way(const std::string& resource, const std::string& by, const std::vector<std::string>& devices) {
    proto::RoutineUpdate update;
    auto& request = *update.mutable_make_way();
    request.set_resource(resource);
    request.set_by(by);
    for (const auto& device : devices) request.add_devices(device);
    apply(update);
  }
  void resource_dropped(uint64_t seq, const std::string& resource) {
    proto::RoutineUpdate update;
    step(seq, update).set_resource_dropped(resource);
    apply(update);
  }
  void stop(uint64_t seq, const std::string& reason) {
    proto::RoutineUpdate update;
    step(seq, update).set_stop(reason);
    apply(update);
  }
  void command(uint64_t seq, uint32_t index, proto::CommandStatus status) {
    proto::RoutineUpdate update;
    auto& c = *step(seq, update).mutable_command();
    c.set_index(index);
    c.set_status(status);
    apply(update);
  }
  void command_before(uint64_t seq, uint32_t index, proto::CommandStatus status, const Attributes& before) {
    proto::RoutineUpdate update;
    auto& c = *step(seq, update).mutable_command();
    c.set_index(index);
    c.set_status(status);
    to_proto(before, *c.mutable_state_before());
    apply(update);
  }
  void abort(uint64_t seq, const std::string& reason) {
    proto::RoutineUpdate update;
    step(seq, update).set_abort(reason);
    apply(update);
  }
  void undo(uint64_t seq, uint32_t index, proto::CommandStatus status) {
    proto::RoutineUpdate update;
    auto& u = *step(seq, update).mutable_undo();
    u.set_index(index);
    u.set_status(status);
    apply(update);
  }
  void end(uint64_t seq, proto::InvocationOutcome outcome) {
    proto::RoutineUpdate update;
    step(seq, update).mutable_end()->set_outcome(outcome);
    apply(update);
  }
  RoutineGroupState state_;
  uint64_t seq_ = 0;
  int64_t clock_us_ = 0;
};

TEST_F(RoutineGroup, AutomaticTriggersNeedANewCauseAndTheMinimumInterval) {
  trigger(100, "hall_motion", 3);
  ASSERT_EQ(state_.invocations().size(), 1u);
  trigger(120, "hall_motion", 3);  // the same change seen again (a new leader)
  trigger(105, "hall_motion", 4);  // a new change, but within 10 s
  EXPECT_EQ(state_.invocations().size(), 1u);
  trigger(111, "hall_motion", 5);
  EXPECT_EQ(state_.invocations().size(), 2u);
  EXPECT_EQ(state_.cause_version("hall_motion"), 5u);
}

TEST_F(RoutineGroup, ManualRunsBypassTheIntervalButRunOncePerRequest) {
  trigger(100, "hall_motion", 3);
  trigger(101, "", 0, "req-1");
  trigger(101, "", 0, "req-1");
  trigger(102, "", 0, "req-2");
  EXPECT_EQ(state_.invocations().size(), 3u);
}

TEST_F(RoutineGroup, APostLeaseMovesAHeldLockAsideOnlyWhileExecuting) {
  trigger(100, "", 0, "r");
  lock_held(1, "lamp", 7);
  lock_held(1, "fan", 3);
  lock_leased(1, "lamp", 7);  // still acquiring: ignored
  EXPECT_TRUE(state_.invocation(1)->leased.empty());
  phase(1, proto::PHASE_EXECUTING);
  lock_leased(1, "lamp", 7);
  lock_leased(1, "heater", 9);  // not held: ignored
  EXPECT_EQ(state_.invocation(1)->locks, (std::map<std::string, uint64_t>{{"fan", 3}}));
  EXPECT_EQ(state_.invocation(1)->leased, (std::map<std::string, uint64_t>{{"lamp", 7}}));
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->leased, state_.invocation(1)->leased);
  EXPECT_EQ(copy.invocation(1)->locks, state_.invocation(1)->locks);
}

// EV: a serial key is taken while acquiring; a new one counts a re-key and
// makes it place itself again; both a key and a placement apply only to the
// key they were chosen from, and a placement happens once.
TEST_F(RoutineGroup, SerialKeysAndPlacementsMoveOnlyForwardWhileAcquiring) {
  trigger(100, "", 0, "r");
  auto key = [&](int64_t key_us, int64_t at_us, const std::string& refused_by, int64_t replaces_key_us) {
    proto::RoutineUpdate update;
    auto& s = step(1, update);
    s.set_at_us(at_us);
    s.mutable_serial_key()->set_key_us(key_us);
    s.mutable_serial_key()->set_refused_by(refused_by);
    s.mutable_serial_key()->set_replaces_key_us(replaces_key_us);
    apply(update);
  };
  auto placed = [&](int64_t key_us, int64_t at_us) {
    proto::RoutineUpdate update;
    auto& s = step(1, update);
    s.set_at_us(at_us);
    s.set_placed_key_us(key_us);
    apply(update);
  };
  placed(500, 150);  // no key yet: ignored
  EXPECT_EQ(state_.invocation(1)->placed_at_us, 0);
  key(500, 200, "", 0);
  key(500, 210, "", 0);  // repeated: nothing changes
  key(600, 220, "", 0);  // a second first key, chosen from the same state: ignored
  EXPECT_EQ(state_.invocation(1)->serial_key_us, 500);
  EXPECT_EQ(state_.invocation(1)->rekeys, 0u);
  placed(600, 250);  // a key it does not have: ignored
  EXPECT_EQ(state_.invocation(1)->placed_at_us, 0);
  placed(500, 300);
  EXPECT_EQ(state_.invocation(1)->keyed_at_us, 200);
  EXPECT_EQ(state_.invocation(1)->placed_at_us, 300);
  key(700, 400, "lamp", 500);
  EXPECT_EQ(state_.invocation(1)->serial_key_us, 700);
  EXPECT_EQ(state_.invocation(1)->rekeys, 1u);
  EXPECT_EQ(state_.invocation(1)->placed_at_us, 0) << "a new key is placed again";
  EXPECT_EQ(state_.invocation(1)->keyed_at_us, 200) << "placement time counts from the first key";
  placed(500, 420);  // a round under the old key (EV soak seed 655): not placed
  EXPECT_EQ(state_.invocation(1)->placed_at_us, 0);
  key(800, 430, "fan", 500);  // re-keys what is no longer its key: ignored
  EXPECT_EQ(state_.invocation(1)->serial_key_us, 700);
  placed(700, 450);
  phase(1, proto::PHASE_EXECUTING);
  key(900, 500, "fan", 700);  // executing: too late to re-key
  EXPECT_EQ(state_.invocation(1)->serial_key_us, 700);
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->serial_key_us, 700);
  EXPECT_EQ(copy.invocation(1)->placed_at_us, 450);
  EXPECT_EQ(copy.invocation(1)->rekeys, 1u);
}

// APEX wound-wait: the first wound that names a lock the invocation holds
// (or may hold unrecorded) is kept until it gave every lock back.
TEST_F(RoutineGroup, AWoundIsKeptOnceAndClearedOnlyByGivingEveryLockBack) {
  trigger(100, "", 0, "r");
  const uint32_t tag = state_.invocation(1)->tag;
  auto wound = [&](uint32_t wounded_tag, const std::string& device, uint64_t token, const std::string& by) {
    proto::RoutineUpdate update;
    auto& w = *step(1, update).mutable_wounded();
    w.set_tag(wounded_tag);
    w.set_device(device);
    w.set_token(token);
    w.set_by(by);
    w.set_by_started_us(50);
    apply(update);
  };
  auto yielded = [&] {
    proto::RoutineUpdate update;
    step(1, update).set_wound_yielded(true);
    apply(update);
  };
  lock_held(1, "lamp", 7);
  wound(tag + 1, "lamp", 7, "twin#1.0");  // another group's invocation 1: ignored
  wound(tag, "lamp", 6, "old#1.0");       // an earlier grant of the lamp: ignored
  EXPECT_FALSE(state_.invocation(1)->wound);
  wound(tag, "lamp", 7, "old#1.0");
  wound(tag, "fan", 3, "older#1.0");  // one wound at a time
  ASSERT_TRUE(state_.invocation(1)->wound);
  EXPECT_EQ(state_.invocation(1)->wound->by, "old#1.0");
  EXPECT_EQ(state_.invocation(1)->wound->device, "lamp");
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  ASSERT_TRUE(copy.invocation(1)->wound);
  EXPECT_EQ(copy.invocation(1)->wound->by_started_us, 50);
  yielded();  // the lamp is still recorded: not yet
  EXPECT_TRUE(state_.invocation(1)->wound);
  proto::RoutineUpdate drop;
  step(1, drop).set_lock_dropped("lamp");
  apply(drop);
  yielded();
  EXPECT_FALSE(state_.invocation(1)->wound);
  // A lock granted but not recorded yet may be the one a wound names.
  wound(tag, "fan", 3, "older#1.0");
  EXPECT_TRUE(state_.invocation(1)->wound);
}

// An aggressive invocation wounded before its first command gives its locks
// back and drops what it planned under them; once a command ran it cannot.
TEST_F(RoutineGroup, AWoundBeforeTheFirstCommandDropsLocksAndPlanButNotAfterIt) {
  trigger(100, "", 0, "r");
  const uint32_t tag = state_.invocation(1)->tag;
  auto wound = [&](uint64_t token) {
    proto::RoutineUpdate update;
    auto& w = *step(1, update).mutable_wounded();
    w.set_tag(tag);
    w.set_device("lamp");
    w.set_token(token);
    w.set_by("old#1.0");
    apply(update);
  };
  auto drop_and_yield = [&] {
    proto::RoutineUpdate drop;
    step(1, drop).set_lock_dropped("lamp");
    apply(drop);
    proto::RoutineUpdate yielded;
    step(1, yielded).set_wound_yielded(true);
    apply(yielded);
  };
  phase(1, proto::PHASE_EXECUTING);
  lock_held(1, "lamp", 7);
  proto::RoutineUpdate planned;
  auto& msg = *step(1, planned).mutable_plan();
  msg = to_proto(std::vector<PreconditionCommand>{{0, "fan", {{"power", false}}, {"one_of_two"}}});
  msg.set_stages(1);
  apply(planned);
  ASSERT_TRUE(state_.invocation(1)->plan);
  wound(7);
  drop_and_yield();
  EXPECT_FALSE(state_.invocation(1)->wound);
  EXPECT_TRUE(state_.invocation(1)->locks.empty());
  EXPECT_FALSE(state_.invocation(1)->plan);
  EXPECT_EQ(state_.invocation(1)->planned_stages, 0u);

  lock_held(1, "lamp", 8);
  command(1, 0, proto::COMMAND_OK);
  wound(8);
  drop_and_yield();  // a command ran: the lock stays, and so does the wound (it aborts)
  EXPECT_TRUE(state_.invocation(1)->wound);
  EXPECT_EQ(state_.invocation(1)->locks, (std::map<std::string, uint64_t>{{"lamp", 8}}));
}

// The aggressive strategy plans each routine command's stage on its own;
// stages only move forward, and a whole plan and staged ones never mix.
TEST_F(RoutineGroup, StagedPlansGrowOneStageAtATime) {
  trigger(100, "", 0, "r");
  auto plan_step = [&](uint64_t seq, uint32_t stages, std::vector<PreconditionCommand> commands) {
    proto::RoutineUpdate update;
    auto& msg = *step(seq, update).mutable_plan();
    msg = to_proto(commands);
    msg.set_stages(stages);
    apply(update);
  };
  const PreconditionCommand fan_off{0, "fan", {{"power", false}}, {"one_of_two"}};
  const PreconditionCommand lamp_off{2, "lamp", {{"power", false}}, {"one_of_two"}};
  plan_step(1, 1, {fan_off});  // not executing: ignored
  EXPECT_FALSE(state_.invocation(1)->plan);
  phase(1, proto::PHASE_EXECUTING);
  plan_step(1, 1, {fan_off});
  plan_step(1, 1, {fan_off});  // repeated: ignored
  plan_step(1, 3, {fan_off});  // a command of another stage: ignored
  EXPECT_EQ(state_.invocation(1)->planned_stages, 1u);
  command(1, 0, proto::COMMAND_OK);
  plan_step(1, 3, {lamp_off});  // stage 1 had no preconditions
  plan_step(1, 2, {});          // backwards: ignored
  plan_step(1, 0, {});          // a whole plan after staged ones: ignored
  ASSERT_TRUE(state_.invocation(1)->plan);
  EXPECT_EQ(*state_.invocation(1)->plan, (std::vector<PreconditionCommand>{fan_off, lamp_off}));
  EXPECT_EQ(state_.invocation(1)->planned_stages, 3u);
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->planned_stages, 3u);
  EXPECT_EQ(*copy.invocation(1)->plan, *state_.invocation(1)->plan);

  trigger(101, "", 0, "r2");
  phase(2, proto::PHASE_EXECUTING);
  plan_step(2, 0, {fan_off});
  plan_step(2, 1, {fan_off});  // staged after a whole plan: ignored
  EXPECT_EQ(state_.invocation(2)->plan->size(), 1u);
  EXPECT_EQ(state_.invocation(2)->planned_stages, 0u);
}

TEST_F(RoutineGroup, StepsOnlyMoveForward) {
  trigger(100, "", 0, "r");
  lock_held(1, "lamp", 7);
  command(1, 0, proto::COMMAND_OK);  // not executing yet: ignored
  EXPECT_TRUE(state_.invocation(1)->commands.empty());
  phase(1, proto::PHASE_EXECUTING);
  lock_held(1, "lamp", 9);  // a recorded lock keeps its token
  EXPECT_EQ(state_.invocation(1)->locks, (std::map<std::string, uint64_t>{{"lamp", 7}}));
  command(1, 0, proto::COMMAND_OK);
  command(1, 0, proto::COMMAND_DRIVER_ERROR);  // a second outcome of one command: ignored
  EXPECT_EQ(state_.invocation(1)->commands.at(0).status, proto::COMMAND_OK);
  end(1, proto::INVOCATION_OK);  // not releasing yet: ignored
  EXPECT_FALSE(state_.invocation(1)->done());
  phase(1, proto::PHASE_RELEASING_LOCKS);
  phase(1, proto::PHASE_EXECUTING);  // backwards: ignored
  EXPECT_EQ(state_.invocation(1)->phase, proto::PHASE_RELEASING_LOCKS);
  end(1, proto::INVOCATION_OK);
  EXPECT_TRUE(state_.invocation(1)->done());
  EXPECT_EQ(state_.invocation(1)->outcome, proto::INVOCATION_OK);
}

// An invocation's lock round (routine/device_locks.h, "Rounds") only grows,
// and a new leader reads it from a snapshot or a read's answer: its
// requests must name the round its predecessor's releases were sent in.
TEST_F(RoutineGroup, ALockRoundOnlyGrowsAndTravels) {
  trigger(100, "", 0, "r");
  EXPECT_EQ(state_.invocation(1)->lock_round, 1u);
  const auto round = [this](uint32_t value) {
    proto::RoutineUpdate update;
    step(1, update).set_lock_round(value);
    apply(update);
  };
  round(3);
  round(2);  // a round begun from an older state: changes nothing
  round(3);
  EXPECT_EQ(state_.invocation(1)->lock_round, 3u);
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->lock_round, 3u);
  EXPECT_EQ(from_proto(to_proto(*state_.invocation(1))).lock_round, 3u);
  proto::InvocationMsg older;  // written before rounds: round 1
  older.set_seq(1);
  EXPECT_EQ(from_proto(older).lock_round, 1u);
}

TEST_F(RoutineGroup, SnapshotCarriesEverythingAndHistoryIsBounded) {
  for (int i = 0; i < 40; ++i) {
    trigger(100 + 11 * i, "hall_motion", static_cast<uint64_t>(i + 1));
    const uint64_t seq = static_cast<uint64_t>(i + 1);
    phase(seq, proto::PHASE_RELEASING_LOCKS);
    if (i < 39) end(seq, proto::INVOCATION_ABORTED);
  }
  EXPECT_EQ(state_.invocations().size(), RoutineGroupState::kMaxFinished + 1);
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.snapshot(), state_.snapshot());
  EXPECT_FALSE(copy.invocation(40)->done());
  EXPECT_EQ(copy.cause_version("hall_motion"), 40u);
  // The next trigger continues the numbering.
  trigger(1000, "hall_motion", 41);
  EXPECT_NE(state_.invocation(41), nullptr);
  EXPECT_FALSE(copy.restore("garbage"));
}

// Seen on the routine testbed: nine commands over a dozen invocations made
// the answer to `routine history` larger than a datagram, and every read of
// the routine timed out.
TEST_F(RoutineGroup, ReadAnswerFitsOneDatagramKeepingRunningAndNewestInvocations) {
  constexpr uint32_t kCommands = 9;
  constexpr uint64_t kInvocations = 12;
  for (uint64_t seq = 1; seq <= kInvocations; ++seq) {
    trigger(static_cast<int64_t>(seq), "", 0, "run-" + std::to_string(seq));
    for (uint32_t index = 0; index < kCommands; ++index) {
      lock_held(seq, "device_number_" + std::to_string(index), 1000 + seq);
    }
    phase(seq, proto::PHASE_EXECUTING);
    if (seq == 2) continue;  // still running, the oldest of all
    for (uint32_t index = 0; index < kCommands; ++index) command(seq, index, proto::COMMAND_OK);
    phase(seq, proto::PHASE_RELEASING_LOCKS);
    end(seq, proto::INVOCATION_OK);
  }
  proto::RoutineQuery query;
  query.set_all(true);
  const auto answer = state_.read(query.SerializeAsString());
  ASSERT_TRUE(answer);
  EXPECT_LE(answer->size(), RoutineGroupState::kMaxAnswerBytes + 8);
  proto::RoutineQueryReply reply;
  ASSERT_TRUE(reply.ParseFromString(*answer));
  ASSERT_GE(reply.invocations_size(), 2);
  EXPECT_GT(reply.omitted(), 0u);
  EXPECT_EQ(static_cast<uint64_t>(reply.invocations_size()) + reply.omitted(), kInvocations);
  // Oldest first: the running one, then the newest finished ones.
  EXPECT_EQ(reply.invocations(0).seq(), 2u);
  EXPECT_EQ(reply.invocations(reply.invocations_size() - 1).seq(), kInvocations);
  for (int i = 2; i < reply.invocations_size(); ++i) {
    EXPECT_EQ(reply.invocations(i).seq(), reply.invocations(i - 1).seq() + 1);
  }
}

// Seen on the routine testbed: a failed invocation with a long reason did
// not fit, older small ones did, and the reader took the gap for a lost
// invocation; later the newest, a rollback of many commands, did not fit
// and hid every older one. An invocation too big on its own is shown
// compacted (texts cut, no values before), and only the oldest finished
// ones are ever left out.
TEST_F(RoutineGroup, ReadAnswerCompactsAnInvocationTooBigOnItsOwn) {
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    trigger(static_cast<int64_t>(seq), "", 0, "run-" + std::to_string(seq));
    lock_held(seq, "lamp", 100 + seq);
    phase(seq, proto::PHASE_EXECUTING);
    command_before(seq, 0, proto::COMMAND_OK, {{"power", false}});
    if (seq == 3 || seq == 6) stop(seq, std::string(RoutineGroupState::kMaxAnswerBytes, 'x'));
    phase(seq, proto::PHASE_RELEASING_LOCKS);
    end(seq, seq == 3 || seq == 6 ? proto::INVOCATION_FAILED : proto::INVOCATION_OK);
  }
  proto::RoutineQuery query;
  query.set_all(true);
  const auto answer = state_.read(query.SerializeAsString());
  ASSERT_TRUE(answer);
  EXPECT_LE(answer->size(), RoutineGroupState::kMaxAnswerBytes + 8);
  proto::RoutineQueryReply reply;
  ASSERT_TRUE(reply.ParseFromString(*answer));
  ASSERT_EQ(reply.invocations_size(), 6);
  EXPECT_EQ(reply.omitted(), 0u);
  for (int i = 0; i < reply.invocations_size(); ++i) EXPECT_EQ(reply.invocations(i).seq(), static_cast<uint64_t>(i + 1));
  const auto& compacted = reply.invocations(5);
  ASSERT_EQ(compacted.commands_size(), 1);
  ASSERT_EQ(reply.invocations(4).commands_size(), 1);
  EXPECT_LT(compacted.stop_reason().size(), 128u);
  EXPECT_EQ(compacted.stop_reason().substr(compacted.stop_reason().size() - 3), "...");
  EXPECT_EQ(compacted.commands(0).state_before_size(), 0);
  EXPECT_EQ(reply.invocations(4).commands(0).state_before_size(), 1);  // small ones stay whole
}

// A grant without the time its step was committed at.
RoutineGroupState::ResourceGrant untimed(RoutineGroupState::ResourceGrant grant) {
  grant.taken_at_us = 0;
  return grant;
}

TEST_F(RoutineGroup, ResourceGrantsAreRecordedWhileAcquiringAndTravelInSnapshots) {
  trigger(100, "", 0, "req-1");
  resource_held(1, "pump", 7, 0x0a000001);
  resource_held(1, "boiler", 3, 0x0a000001);
  resource_dropped(1, "boiler");  // given back to be taken again in order
  resource_held(1, "boiler", 9, 0x0a000002);
  lock_held(1, "lamp", 4);
  phase(1, proto::PHASE_EXECUTING);
  resource_held(1, "pump", 99, 0x0a000003);  // executing: no grant changes any more
  resource_dropped(1, "pump");
  const auto& resources = state_.invocation(1)->resources;
  ASSERT_EQ(resources.size(), 2u);
  EXPECT_EQ(untimed(resources.at("pump")), (RoutineGroupState::ResourceGrant{7, 0x0a000001}));
  EXPECT_EQ(untimed(resources.at("boiler")), (RoutineGroupState::ResourceGrant{9, 0x0a000002}));
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->resources, resources);
  EXPECT_EQ(to_proto(*state_.invocation(1)).resources_size(), 2);
}

TEST_F(RoutineGroup, ARollbackRetakesOnlyAResourceItHadAndOnlyOnceAborted) {
  trigger(100, "", 0, "req-1");
  resource_held(1, "boiler", 3, 0x0a000001);
  resource_retaken(1, "boiler", 4, 0x0a000001);  // acquiring: a retake is not an acquisition
  EXPECT_EQ(state_.invocation(1)->resources.at("boiler").token, 3u);
  lock_held(1, "lamp", 4);
  phase(1, proto::PHASE_EXECUTING);
  command_before(1, 0, proto::COMMAND_OK, {{"power", false}});
  resource_retaken(1, "boiler", 5, 0x0a000002);  // not aborted: no rollback to take it for
  EXPECT_EQ(state_.invocation(1)->resources.at("boiler").token, 3u);
  abort(1, "resource boiler (token 3) is no longer held");
  resource_retaken(1, "pump", 6, 0x0a000002);  // never held: nothing to take again
  EXPECT_EQ(state_.invocation(1)->resources.count("pump"), 0u);
  resource_held(1, "boiler", 7, 0x0a000002);  // a plain grant while rolling back: ignored
  EXPECT_EQ(state_.invocation(1)->resources.at("boiler").token, 3u);
  const int64_t before_retake_us = state_.invocation(1)->resources.at("boiler").taken_at_us;
  resource_retaken(1, "boiler", 8, 0x0a000002);
  const RoutineGroupState::ResourceGrant& retaken = state_.invocation(1)->resources.at("boiler");
  EXPECT_EQ(untimed(retaken), (RoutineGroupState::ResourceGrant{8, 0x0a000002, true}));
  EXPECT_GT(retaken.taken_at_us, before_retake_us) << "the retake's own step time, where its undos begin";
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->resources.at("boiler"), retaken);
}

TEST_F(RoutineGroup, MakeWayReachesRunningHoldersOfTheResourceUntilTheyDropIt) {
  trigger(100, "", 0, "a");  // 1: holds boiler, acquiring
  trigger(101, "", 0, "b");  // 2: holds pump only
  trigger(102, "", 0, "c");  // 3: holds boiler, rolling back
  trigger(103, "", 0, "d");  // 4: holds boiler, ended
  for (uint64_t seq : {1, 3, 4}) resource_held(seq, "boiler", seq, 0x0a000001);
  resource_held(2, "pump", 9, 0x0a000001);
  for (uint64_t seq : {3, 4}) phase(seq, proto::PHASE_EXECUTING);
  abort(3, "a must command failed");
  phase(4, proto::PHASE_RELEASING_LOCKS);
  end(4, proto::INVOCATION_OK);
  ASSERT_TRUE(state_.invocation(4)->done());
  make_way("boiler", "", {"d2"});  // a request names who asks, and the devices it holds
  make_way("boiler", "r9#1.0000abcd", {});
  EXPECT_FALSE(state_.invocation(1)->make_way);
  make_way("boiler", "r9#1.0000abcd", {"d2", "d6"});
  ASSERT_TRUE(state_.invocation(1)->make_way);
  EXPECT_EQ(state_.invocation(1)->make_way->by, "r9#1.0000abcd");
  EXPECT_EQ(state_.invocation(1)->make_way->devices, (std::set<std::string>{"d2", "d6"}));
  EXPECT_FALSE(state_.invocation(2)->make_way);
  EXPECT_FALSE(state_.invocation(3)->make_way);
  EXPECT_FALSE(state_.invocation(4)->make_way);
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  ASSERT_TRUE(copy.invocation(1)->make_way);
  EXPECT_EQ(copy.invocation(1)->make_way->devices, (std::set<std::string>{"d2", "d6"}));
  resource_dropped(1, "boiler");  // given back: the request is answered
  EXPECT_FALSE(state_.invocation(1)->make_way);
}

TEST_F(RoutineGroup, AWithdrawnMakeWayNoLongerStandsOnlyForItsRollback) {
  trigger(100, "", 0, "a");
  trigger(101, "", 0, "b");
  resource_held(1, "boiler", 1, 0x0a000001);
  resource_held(2, "boiler", 2, 0x0a000001);
  make_way("boiler", "r9#1.0000abcd", {"d2"});
  ASSERT_TRUE(state_.invocation(1)->make_way);
  // Another rollback's withdrawal, or one for another resource, changes nothing.
  for (const auto& [resource, by] : {std::pair<std::string, std::string>{"boiler", "r8#3.0000beef"},
                                     std::pair<std::string, std::string>{"pump", "r9#1.0000abcd"}}) {
    proto::RoutineUpdate update;
    update.mutable_make_way()->set_resource(resource);
    update.mutable_make_way()->set_by(by);
    update.mutable_make_way()->set_withdrawn(true);
    apply(update);
    EXPECT_TRUE(state_.invocation(1)->make_way) << by << " " << resource;
  }
  proto::RoutineUpdate update;
  update.mutable_make_way()->set_resource("boiler");
  update.mutable_make_way()->set_by("r9#1.0000abcd");
  update.mutable_make_way()->set_withdrawn(true);
  apply(update);
  EXPECT_FALSE(state_.invocation(1)->make_way);
  EXPECT_FALSE(state_.invocation(2)->make_way);
}

TEST_F(RoutineGroup, ACommandKeepsTheStartItsLeaderSentItAtIfBeforeItsOutcome) {
  trigger(100, "", 0, "req-1");
  lock_held(1, "lamp", 4);
  phase(1, proto::PHASE_EXECUTING);
  for (uint32_t index : {0u, 1u}) {
    proto::RoutineUpdate update;
    proto::InvocationStep& s = step(1, update);
    s.mutable_command()->set_index(index);
    s.mutable_command()->set_status(proto::COMMAND_OK);
    // Command 2 claims a start after its outcome was committed: no start.
    s.mutable_command()->set_started_at_us(index == 0 ? s.at_us() - 1 : s.at_us() + 1);
    apply(update);
  }
  const auto& commands = state_.invocation(1)->commands;
  EXPECT_EQ(commands.at(0).started_at_us, commands.at(0).done_at_us - 1);
  EXPECT_EQ(commands.at(1).started_at_us, 0);
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->commands.at(0).started_at_us, commands.at(0).started_at_us);
  EXPECT_EQ(to_proto(*state_.invocation(1)).commands(0).started_at_us(), commands.at(0).started_at_us);
}

TEST_F(RoutineGroup, StopEndsExecutionWithItsReason) {
  trigger(100, "", 0, "req-1");
  lock_held(1, "lamp", 4);
  phase(1, proto::PHASE_EXECUTING);
  command(1, 0, proto::COMMAND_FENCED);
  stop(1, "");  // a stop names why: ignored
  EXPECT_EQ(state_.invocation(1)->phase, proto::PHASE_EXECUTING);
  stop(1, "command 1 was fenced");
  EXPECT_EQ(state_.invocation(1)->phase, proto::PHASE_RELEASING_LOCKS);
  EXPECT_EQ(state_.invocation(1)->stop_reason, "command 1 was fenced");
  command(1, 1, proto::COMMAND_OK);  // no command is recorded after the stop
  EXPECT_EQ(state_.invocation(1)->commands.size(), 1u);
  stop(1, "later");  // releasing already: the first reason stays
  EXPECT_EQ(state_.invocation(1)->stop_reason, "command 1 was fenced");
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->stop_reason, "command 1 was fenced");
  end(1, proto::INVOCATION_FAILED);
  EXPECT_TRUE(state_.invocation(1)->done());
  stop(1, "after the end");
  EXPECT_EQ(state_.invocation(1)->stop_reason, "command 1 was fenced");
}

TEST_F(RoutineGroup, AbortStopsCommandsAndRecordsEachUndoOnce) {
  trigger(100, "", 0, "req-1");
  lock_held(1, "lamp", 4);
  lock_held(1, "fan", 5);
  abort(1, "too early");  // not executing yet: ignored
  EXPECT_TRUE(state_.invocation(1)->abort_reason.empty());
  phase(1, proto::PHASE_EXECUTING);
  undo(1, 0, proto::COMMAND_OK);  // no abort yet: ignored
  command_before(1, 0, proto::COMMAND_OK, {{"power", false}});
  command_before(1, 1, proto::COMMAND_DEVICE_DOWN, {});
  abort(1, "");  // an abort names why: ignored
  EXPECT_TRUE(state_.invocation(1)->abort_reason.empty());
  abort(1, "command 2 (fan) failed");
  abort(1, "a second reason");  // the first stays
  EXPECT_EQ(state_.invocation(1)->abort_reason, "command 2 (fan) failed");
  EXPECT_EQ(state_.invocation(1)->phase, proto::PHASE_EXECUTING);  // executing, to roll back
  command(1, 2, proto::COMMAND_OK);                                // no command is recorded after the abort
  EXPECT_EQ(state_.invocation(1)->commands.size(), 2u);
  undo(1, 5, proto::COMMAND_OK);       // no such command: ignored
  undo(1, 0, proto::COMMAND_PENDING);  // no outcome yet: ignored
  EXPECT_TRUE(state_.invocation(1)->undone.empty());
  undo(1, 0, proto::COMMAND_OK);
  undo(1, 0, proto::COMMAND_TIMEOUT);  // recorded once: the first outcome stays
  ASSERT_EQ(state_.invocation(1)->undone.size(), 1u);
  EXPECT_EQ(state_.invocation(1)->undone.at(0).status, proto::COMMAND_OK);
  EXPECT_EQ(state_.invocation(1)->commands.at(0).state_before, (Attributes{{"power", false}}));
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->abort_reason, "command 2 (fan) failed");
  ASSERT_EQ(copy.invocation(1)->undone.size(), 1u);
  EXPECT_EQ(copy.invocation(1)->undone.at(0).status, proto::COMMAND_OK);
  EXPECT_EQ(copy.invocation(1)->commands.at(0).state_before, (Attributes{{"power", false}}));
  EXPECT_EQ(copy.snapshot(), state_.snapshot());
  phase(1, proto::PHASE_RELEASING_LOCKS);
  undo(1, 1, proto::COMMAND_OK);  // releasing: the rollback is over
  EXPECT_EQ(state_.invocation(1)->undone.size(), 1u);
  end(1, proto::INVOCATION_ABORTED);
  EXPECT_EQ(state_.invocation(1)->outcome, proto::INVOCATION_ABORTED);
}

TEST_F(RoutineGroup, BaselineIsCommittedOnceBeforeThePlanAndTheFirstCommand) {
  auto baseline = [this](uint64_t seq, uint64_t digest) {
    proto::RoutineUpdate update;
    auto& b = *step(seq, update).mutable_baseline();
    b.set_digest(digest);
    b.set_devices(2);
    b.add_events(1);
    b.add_events(0);
    apply(update);
  };
  trigger(100, "", 0, "req-1");
  baseline(1, 11);  // acquiring: ignored
  EXPECT_FALSE(state_.invocation(1)->baseline);
  phase(1, proto::PHASE_EXECUTING);
  baseline(1, 12);
  baseline(1, 13);  // a second one (a new leader read again): the first stays
  ASSERT_TRUE(state_.invocation(1)->baseline);
  EXPECT_EQ(state_.invocation(1)->baseline->digest, 12u);
  EXPECT_EQ(state_.invocation(1)->baseline->events, (std::vector<uint64_t>{1, 0}));

  // A command's event count travels with it.
  proto::RoutineUpdate update;
  auto& c = *step(1, update).mutable_command();
  c.set_index(0);
  c.set_status(proto::COMMAND_OK);
  c.set_availability_events(5);
  apply(update);
  command(1, 1, proto::COMMAND_DEVICE_DOWN);  // never actuated: no count
  EXPECT_EQ(state_.invocation(1)->commands.at(0).availability_events, std::optional<uint64_t>(5));
  EXPECT_FALSE(state_.invocation(1)->commands.at(1).availability_events);
  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.invocation(1)->baseline->digest, 12u);
  EXPECT_EQ(copy.invocation(1)->commands.at(0).availability_events, std::optional<uint64_t>(5));
  EXPECT_FALSE(copy.invocation(1)->commands.at(1).availability_events);
  EXPECT_EQ(copy.snapshot(), state_.snapshot());

  // Too late once a command ran: the start must precede every command.
  trigger(200, "", 0, "req-2");
  phase(2, proto::PHASE_EXECUTING);
  command(2, 0, proto::COMMAND_OK);
  baseline(2, 21);
  EXPECT_FALSE(state_.invocation(2)->baseline);
}

TEST_F(RoutineGroup, AnAdhocTriggerKeepsItsOwnRoutineThroughSnapshotsAndAnswers) {
  const RoutineSpec sprinkler =
      adhoc_spec("garden_sprinkler", {{"power", Value{std::string("on")}}}, LockStrategy::aggressive);
  proto::RoutineUpdate update;
  auto& t = *update.mutable_trigger();
  t.set_at_us(5'000'000);
  t.set_request_id("adhoc-1");
  t.set_manual(true);
  *t.mutable_adhoc() = to_adhoc_proto(sprinkler);
  apply(update);
  ASSERT_NE(state_.invocation(1), nullptr);
  ASSERT_TRUE(state_.invocation(1)->adhoc);
  EXPECT_EQ(*state_.invocation(1)->adhoc, sprinkler);
  // A catalog routine's trigger carries none.
  trigger(10, "", 0, "run-2");
  ASSERT_NE(state_.invocation(2), nullptr);
  EXPECT_FALSE(state_.invocation(2)->adhoc);

  RoutineGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  ASSERT_TRUE(copy.invocation(1)->adhoc);
  EXPECT_EQ(*copy.invocation(1)->adhoc, sprinkler);
  EXPECT_FALSE(copy.invocation(2)->adhoc);

  // The admin client finds it by request id, with its command.
  proto::RoutineQuery query;
  query.set_request_id("adhoc-1");
  const auto answer = state_.read(query.SerializeAsString());
  ASSERT_TRUE(answer);
  const auto reply = parse_message<proto::RoutineQueryReply>(*answer);
  ASSERT_TRUE(reply && reply->invocations_size() == 1);
  EXPECT_EQ(reply->invocations(0).adhoc().device(), "garden_sprinkler");
  EXPECT_EQ(reply->invocations(0).adhoc().lock_strategy(), "aggressive");
}

TEST_F(RoutineGroup, AnAdhocCommandThatDoesNotDecodeIsRefused) {
  proto::RoutineUpdate update;
  auto& t = *update.mutable_trigger();
  t.set_at_us(5'000'000);
  t.set_manual(true);
  t.mutable_adhoc()->set_device("garden_sprinkler");  // no value
  apply(update);
  EXPECT_TRUE(state_.invocations().empty());

  // A snapshot naming one is refused as a whole.
  proto::RoutineGroupSnapshot snapshot;
  snapshot.set_next_seq(2);
  auto& invocation = *snapshot.add_invocations();
  invocation.set_seq(1);
  invocation.mutable_adhoc()->set_device("garden_sprinkler");
  RoutineGroupState copy;
  EXPECT_FALSE(copy.restore(snapshot.SerializeAsString()));
  invocation.mutable_adhoc()->CopyFrom(to_adhoc_proto(adhoc_spec("garden_sprinkler", {{"power", Value{true}}}, {})));
  EXPECT_TRUE(copy.restore(snapshot.SerializeAsString()));
}

TEST(RoutineNames, HolderAndCommandIdsNameTheInvocation) {
  RoutineGroupState::Invocation invocation;
  invocation.seq = 7;
  invocation.tag = 0x3fa2;
  EXPECT_EQ(holder_name("night_hall", invocation), "night_hall#7.00003fa2");
  EXPECT_EQ(command_id("night_hall", invocation, 2), "night_hall#7.00003fa2#2");
  EXPECT_EQ(undo_command_id("night_hall", invocation, 2), "night_hall#7.00003fa2#2.undo");
}

}  // namespace
}  // namespace mesh::routine
