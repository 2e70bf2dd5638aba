#include "routine/device_group_state.h"

#include <gtest/gtest.h>

#include "routine/device_codec.h"

namespace mesh::routine {
namespace {

std::string write(const proto::DeviceUpdate& update, uint64_t id) {
  return kgroup::ClientStateMachine::encode_write(id, update.SerializeAsString());
}

proto::DeviceUpdate observed(const std::string& device, bool up, const Attributes& attributes) {
  proto::DeviceUpdate update;
  auto& o = *update.mutable_observed();
  o.set_device(device);
  o.set_up(up);
  to_proto(attributes, *o.mutable_attributes());
  if (!up) o.set_reason("timeout: no answer");
  return update;
}

proto::DeviceUpdate accept(const std::string& id, const std::string& device, const Attributes& values) {
  proto::DeviceUpdate update;
  auto& a = *update.mutable_accept();
  a.set_command_id(id);
  a.set_device(device);
  to_proto(values, *a.mutable_values());
  return update;
}

TEST(DeviceGroupState, VersionsMoveOnlyOnChange) {
  DeviceGroupState state;
  state.apply(1, write(observed("lamp", true, {{"power", false}}), 1));
  state.apply(2, write(observed("lamp", true, {{"power", false}}), 2));
  ASSERT_NE(state.device("lamp"), nullptr);
  EXPECT_EQ(state.device("lamp")->version, 1u);
  state.apply(3, write(observed("lamp", false, {}), 3));
  EXPECT_EQ(state.device("lamp")->version, 2u);
  EXPECT_FALSE(state.device("lamp")->up);
  EXPECT_EQ(state.device("lamp")->attributes, (Attributes{{"power", false}}));  // last known state kept
  state.apply(4, write(observed("lamp", true, {{"power", false}}), 4));
  EXPECT_EQ(state.device("lamp")->version, 3u);
  EXPECT_TRUE(state.device("lamp")->up);
}

TEST(DeviceGroupState, CommandLifecycleAndSnapshot) {
  DeviceGroupState state;
  state.apply(1, write(accept("c1", "lamp", {{"power", true}}), 1));
  state.apply(2, write(accept("c1", "lamp", {{"power", false}}), 2));  // duplicate id: ignored
  state.apply(3, write(accept("c2", "lamp", {{"power", false}}), 3));
  ASSERT_EQ(state.pending().size(), 2u);
  EXPECT_EQ(state.pending()[0]->id, "c1");
  EXPECT_EQ(state.pending()[0]->values, (Attributes{{"power", true}}));
  proto::DeviceUpdate actuating;
  actuating.mutable_actuating()->set_command_id("c1");
  state.apply(4, write(actuating, 4));
  EXPECT_TRUE(state.command("c1")->actuating);

  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(state.snapshot()));
  EXPECT_TRUE(copy.command("c1")->actuating);
  EXPECT_EQ(copy.pending().size(), 2u);
  EXPECT_EQ(copy.position(), state.position());

  proto::DeviceUpdate outcome;
  outcome.mutable_outcome()->set_command_id("c1");
  outcome.mutable_outcome()->set_status(proto::COMMAND_OK);
  to_proto(Attributes{{"power", true}}, *outcome.mutable_outcome()->mutable_state_after());
  state.apply(5, write(outcome, 5));
  outcome.mutable_outcome()->set_status(proto::COMMAND_TIMEOUT);
  state.apply(6, write(outcome, 6));  // a second outcome never overrides the first
  EXPECT_EQ(state.command("c1")->outcome.status(), proto::COMMAND_OK);
  EXPECT_EQ(state.device("lamp")->attributes, (Attributes{{"power", true}}));
  EXPECT_EQ(state.pending().size(), 1u);

  proto::DeviceQuery query;
  query.set_command_id("c1");
  const auto reply = parse_message<proto::DeviceQueryReply>(*state.read(query.SerializeAsString()));
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->found());
  EXPECT_EQ(reply->command().outcome().status(), proto::COMMAND_OK);
  EXPECT_FALSE(state.read("\xff\xff"));
  EXPECT_FALSE(copy.restore("\x0a\x05junk"));
}

TEST(DeviceGroupState, RecordsTheStateBeforeACommandAsItBeginsActuating) {
  DeviceGroupState state;
  state.apply(1, write(observed("lamp", true, {{"power", false}, {"brightness", 30.0}}), 1));
  state.apply(2, write(accept("c1", "lamp", {{"power", true}, {"color_temp", 3000.0}}), 2));
  state.apply(3, write(accept("c2", "heater", {{"power", true}}), 3));  // never observed
  EXPECT_EQ(state.command("c1")->outcome.state_before_size(), 0);       // accepted, not yet actuating
  proto::DeviceUpdate actuating;
  actuating.mutable_actuating()->set_command_id("c1");
  state.apply(4, write(actuating, 4));
  actuating.mutable_actuating()->set_command_id("c2");
  state.apply(5, write(actuating, 5));
  // Only the attributes the command sets, and only those the group knew.
  EXPECT_EQ(from_proto(state.command("c1")->outcome.state_before()), (Attributes{{"power", false}}));
  EXPECT_EQ(state.command("c2")->outcome.state_before_size(), 0);

  // The outcome's writer does not choose the state before: the group's
  // record stays, and travels in snapshots and query answers.
  proto::DeviceUpdate outcome;
  outcome.mutable_outcome()->set_command_id("c1");
  outcome.mutable_outcome()->set_status(proto::COMMAND_OK);
  to_proto(Attributes{{"power", true}}, *outcome.mutable_outcome()->mutable_state_after());
  to_proto(Attributes{{"power", true}}, *outcome.mutable_outcome()->mutable_state_before());
  state.apply(6, write(outcome, 6));
  EXPECT_EQ(from_proto(state.command("c1")->outcome.state_before()), (Attributes{{"power", false}}));
  EXPECT_EQ(state.device("lamp")->attributes, (Attributes{{"power", true}, {"brightness", 30.0}}));
  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(state.snapshot()));
  EXPECT_EQ(from_proto(copy.command("c1")->outcome.state_before()), (Attributes{{"power", false}}));
  proto::DeviceQuery query;
  query.set_command_id("c1");
  const auto reply = parse_message<proto::DeviceQueryReply>(*state.read(query.SerializeAsString()));
  ASSERT_TRUE(reply);
  EXPECT_EQ(from_proto(reply->command().outcome().state_before()), (Attributes{{"power", false}}));
}

TEST(DeviceGroupState, CountsFailureAndRestartEventsAndStampsCommandsWithThem) {
  DeviceGroupState state;
  uint64_t seq = 0;
  auto apply = [&](const proto::DeviceUpdate& update) {
    ++seq;
    state.apply(seq, write(update, seq));
  };
  apply(observed("lamp", true, {{"power", false}}));  // first seen: no event
  apply(observed("lamp", true, {{"power", true}}));   // a change of state: no event
  EXPECT_EQ(state.device("lamp")->availability_events, 0u);
  apply(observed("lamp", false, {}));  // failure
  apply(observed("lamp", false, {}));  // still down: nothing new
  EXPECT_EQ(state.device("lamp")->availability_events, 1u);
  apply(observed("lamp", true, {{"power", true}}));  // restart
  EXPECT_EQ(state.device("lamp")->availability_events, 2u);
  apply(observed("lamp", false, {}));
  EXPECT_EQ(state.device("lamp")->availability_events, 3u);

  // A command that begins actuating records the count; its outcome's
  // writer cannot change it; an ok outcome on a device believed down is
  // its restart event.
  apply(accept("c1", "lamp", {{"power", false}}));
  proto::DeviceUpdate actuating;
  actuating.mutable_actuating()->set_command_id("c1");
  apply(actuating);
  ASSERT_TRUE(state.command("c1")->outcome.has_availability_events());
  EXPECT_EQ(state.command("c1")->outcome.availability_events(), 3u);
  proto::DeviceUpdate outcome;
  outcome.mutable_outcome()->set_command_id("c1");
  outcome.mutable_outcome()->set_status(proto::COMMAND_OK);
  outcome.mutable_outcome()->set_availability_events(99);
  to_proto(Attributes{{"power", false}}, *outcome.mutable_outcome()->mutable_state_after());
  apply(outcome);
  EXPECT_EQ(state.command("c1")->outcome.availability_events(), 3u);
  EXPECT_TRUE(state.device("lamp")->up);
  EXPECT_EQ(state.device("lamp")->availability_events, 4u);

  // A command that never began actuating records none.
  apply(accept("c2", "lamp", {{"power", true}}));
  proto::DeviceUpdate refused;
  refused.mutable_outcome()->set_command_id("c2");
  refused.mutable_outcome()->set_status(proto::COMMAND_DEVICE_DOWN);
  refused.mutable_outcome()->set_availability_events(7);
  apply(refused);
  EXPECT_FALSE(state.command("c2")->outcome.has_availability_events());

  // Snapshots and reads carry the count.
  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(state.snapshot()));
  EXPECT_EQ(copy.device("lamp")->availability_events, 4u);
  EXPECT_EQ(copy.command("c1")->outcome.availability_events(), 3u);
  proto::DeviceQuery query;
  query.mutable_states()->add_devices("lamp");
  const auto reply = parse_message<proto::DeviceQueryReply>(*state.read(query.SerializeAsString()));
  ASSERT_TRUE(reply);
  ASSERT_EQ(reply->devices_size(), 1);
  EXPECT_EQ(reply->devices(0).availability_events(), 4u);
}

TEST(DeviceGroupState, ForgetsOldFinishedCommandsOnly) {
  DeviceGroupState state;
  uint64_t seq = 0;
  ++seq;
  state.apply(seq, write(accept("kept-pending", "lamp", {{"power", true}}), seq));
  for (size_t i = 0; i < DeviceGroupState::kMaxFinishedCommands + 10; ++i) {
    const std::string id = "c" + std::to_string(i);
    ++seq;
    state.apply(seq, write(accept(id, "lamp", {{"power", true}}), seq));
    proto::DeviceUpdate outcome;
    outcome.mutable_outcome()->set_command_id(id);
    outcome.mutable_outcome()->set_status(proto::COMMAND_DEVICE_DOWN);
    ++seq;
    state.apply(seq, write(outcome, seq));
  }
  EXPECT_EQ(state.command("c0"), nullptr);
  EXPECT_NE(state.command("c" + std::to_string(DeviceGroupState::kMaxFinishedCommands + 9)), nullptr);
  EXPECT_NE(state.command("kept-pending"), nullptr);
}

// Applies `update` at the group's next sequence number.
void step(DeviceGroupState& state, uint64_t& seq, const proto::DeviceUpdate& update) {
  ++seq;
  state.apply(seq, write(update, seq));
}

proto::DeviceUpdate handoff(const std::string& device, const std::string& to, uint64_t at_version) {
  proto::DeviceUpdate update;
  auto& h = *update.mutable_handoff();
  h.set_device(device);
  h.set_to(to);
  h.set_at_version(at_version);
  return update;
}

proto::DeviceUpdate finished(const std::string& id, proto::CommandStatus status) {
  proto::DeviceUpdate update;
  update.mutable_outcome()->set_command_id(id);
  update.mutable_outcome()->set_status(status);
  return update;
}

proto::DeviceQueryReply handoff_read(const DeviceGroupState& state, const std::string& device) {
  proto::DeviceQuery query;
  query.set_handoff_device(device);
  const auto answer = state.read(query.SerializeAsString());
  EXPECT_TRUE(answer.has_value());
  return *parse_message<proto::DeviceQueryReply>(*answer);
}

// What a new group's leader commits from a handoff read: the history, then
// the record.
proto::DeviceUpdate import_from(const proto::DeviceQueryReply& reply, const std::string& device,
                                uint64_t placed_version, bool last) {
  proto::DeviceUpdate update;
  auto& i = *update.mutable_imported();
  i.set_device(device);
  i.set_placed_version(placed_version);
  i.set_last(last);
  if (last) {
    for (const auto& held : reply.devices()) {
      if (held.held()) *i.mutable_record() = held;
    }
    if (reply.has_handoff_lock()) *i.add_carried_locks() = reply.handoff_lock();
  } else {
    for (const auto& command : reply.history()) *i.add_commands() = command;
  }
  return update;
}

TEST(DeviceGroupStateHandoff, FreezeRefusesPendingInterruptsActuatingAndLaterAccepts) {
  DeviceGroupState old;
  uint64_t seq = 0;
  step(old, seq, observed("lamp", true, {{"power", false}}));
  step(old, seq, accept("c1", "lamp", {{"power", true}}));
  step(old, seq, accept("c2", "lamp", {{"power", false}}));
  step(old, seq, accept("other", "fan", {{"power", true}}));
  proto::DeviceUpdate actuating;
  actuating.mutable_actuating()->set_command_id("c1");
  step(old, seq, actuating);

  step(old, seq, handoff("lamp", "cluster:b", 3));
  EXPECT_TRUE(old.device("lamp")->frozen());
  EXPECT_EQ(old.command("c1")->outcome.status(), proto::COMMAND_INTERRUPTED);
  EXPECT_EQ(old.command("c2")->outcome.status(), proto::COMMAND_REFUSED);
  EXPECT_NE(old.command("c2")->outcome.detail().find("moved to cluster:b"), std::string::npos);
  EXPECT_FALSE(old.command("other")->done());  // another device: untouched

  step(old, seq, accept("c3", "lamp", {{"power", true}}));
  EXPECT_EQ(old.command("c3")->outcome.status(), proto::COMMAND_REFUSED);
  EXPECT_NE(old.command("c3")->outcome.detail().find("moved to cluster:b"), std::string::npos);

  // Nothing changes the frozen record: a late observation, a late outcome.
  const uint64_t version = old.device("lamp")->version;
  step(old, seq, observed("lamp", true, {{"power", true}}));
  step(old, seq, finished("c1", proto::COMMAND_OK));
  EXPECT_EQ(old.device("lamp")->version, version);
  EXPECT_EQ(old.command("c1")->outcome.status(), proto::COMMAND_INTERRUPTED);

  // A frozen record is no longer reported with the group's devices.
  proto::DeviceQuery all;
  all.set_all_devices(true);
  const auto devices = parse_message<proto::DeviceQueryReply>(*old.read(all.SerializeAsString()));
  EXPECT_EQ(devices->devices_size(), 0);

  // Survives a snapshot (a new leader, a migration).
  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(old.snapshot()));
  EXPECT_EQ(copy.device("lamp")->moved_to, "cluster:b");
  EXPECT_EQ(copy.device("lamp")->frozen_for_version, 3u);
}

TEST(DeviceGroupStateHandoff, ImportKeepsRecordVersionAndHistoryIdempotently) {
  DeviceGroupState old;
  uint64_t seq = 0;
  step(old, seq, observed("lamp", true, {{"power", false}}));
  step(old, seq, observed("lamp", false, {}));  // a failure and a restart: they move with the record
  step(old, seq, observed("lamp", true, {{"power", false}}));
  step(old, seq, accept("c1", "lamp", {{"power", true}}));
  proto::DeviceUpdate ok = finished("c1", proto::COMMAND_OK);
  to_proto(Attributes{{"power", true}}, *ok.mutable_outcome()->mutable_state_after());
  step(old, seq, ok);
  step(old, seq, handoff("lamp", "cluster:b", 4));
  step(old, seq, handoff("lamp", "cluster:b", 4));  // redone by a new leader: no change
  const proto::DeviceQueryReply reply = handoff_read(old, "lamp");
  ASSERT_EQ(reply.devices_size(), 1);
  EXPECT_TRUE(reply.devices(0).held());
  EXPECT_EQ(reply.devices(0).frozen_for_version(), 4u);
  ASSERT_EQ(reply.history_size(), 1);
  EXPECT_EQ(reply.history(0).command_id(), "c1");

  DeviceGroupState fresh;
  uint64_t new_seq = 0;
  step(fresh, new_seq, accept("c9", "lamp", {{"power", false}}));  // waits for the import
  // The second round: a new leader redoes every step.
  for (int round = 0; round < 2; ++round) {
    step(fresh, new_seq, import_from(reply, "lamp", 4, false));
    step(fresh, new_seq, import_from(reply, "lamp", 4, true));
  }
  const auto* record = fresh.device("lamp");
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->version, old.device("lamp")->version);
  EXPECT_EQ(record->attributes, (Attributes{{"power", true}}));
  EXPECT_TRUE(record->held);
  EXPECT_FALSE(record->frozen());
  EXPECT_EQ(record->placed_version, 4u);
  EXPECT_EQ(record->availability_events, 2u);  // redone imports add no event
  ASSERT_NE(fresh.command("c1"), nullptr);
  EXPECT_EQ(fresh.command("c1")->outcome.status(), proto::COMMAND_OK);
  EXPECT_FALSE(fresh.command("c9")->done());

  // A retried accept of the moved command is answered, not run again.
  step(fresh, new_seq, accept("c1", "lamp", {{"power", true}}));
  EXPECT_EQ(fresh.pending().size(), 1u);
  EXPECT_EQ(fresh.pending()[0]->id, "c9");
}

proto::DeviceUpdate place(const std::string& device, const std::string& holder, int64_t key_us, bool ready) {
  proto::DeviceUpdate update;
  update.mutable_lock()->set_device(device);
  update.mutable_lock()->set_holder(holder);
  update.mutable_lock()->set_serial_key_us(key_us);
  update.mutable_lock()->set_ready(ready);
  return update;
}

proto::DeviceUpdate release(const std::string& device, const std::string& holder) {
  proto::DeviceUpdate update;
  update.mutable_unlock()->set_device(device);
  update.mutable_unlock()->set_holder(holder);
  return update;
}

// EV across a move: the device's users must still come in key order, and
// its fencing tokens must keep growing. The new group goes on from the old
// one's floor and last token; what it had placed or granted below that
// floor before the import (the device was not live there yet, so unused)
// is dropped, and those invocations re-key.
TEST(DeviceGroupStateHandoff, TheLockGoesOnFromTheOldGroupsFloorAndTokens) {
  DeviceGroupState old;
  uint64_t seq = 0;
  step(old, seq, observed("lamp", true, {{"power", false}}));
  step(old, seq, place("lamp", "a#1", 50, true));
  step(old, seq, release("lamp", "a#1"));
  step(old, seq, place("lamp", "b#1", 70, true));
  step(old, seq, release("lamp", "b#1"));  // floor (70, b#1), last token 2
  step(old, seq, handoff("lamp", "cluster:b", 4));
  const proto::DeviceQueryReply reply = handoff_read(old, "lamp");
  ASSERT_TRUE(reply.has_handoff_lock());
  EXPECT_EQ(reply.handoff_lock().last_token(), 2u);
  EXPECT_EQ(reply.handoff_lock().floor_key_us(), 70);
  EXPECT_EQ(reply.handoff_lock().floor_holder(), "b#1");

  DeviceGroupState fresh;
  uint64_t new_seq = 0;
  step(fresh, new_seq, place("lamp", "low#1", 60, true));  // granted before the import: token 1
  step(fresh, new_seq, place("lamp", "lower#1", 55, false));
  step(fresh, new_seq, place("lamp", "high#1", 80, false));
  ASSERT_EQ(fresh.locks().find("lamp")->holder, "low#1");
  step(fresh, new_seq, import_from(reply, "lamp", 4, true));
  const DeviceLocks::Lock* lock = fresh.locks().find("lamp");
  ASSERT_NE(lock, nullptr);
  EXPECT_EQ(lock->floor_key_us, 70);
  EXPECT_TRUE(lock->free()) << "low#1 (60) would use the device after b#1 (70) used it";
  EXPECT_EQ(lock->lineage.count("low#1"), 0u);
  EXPECT_EQ(lock->lineage.count("lower#1"), 0u);
  EXPECT_EQ(lock->lineage.count("high#1"), 1u);
  step(fresh, new_seq, place("lamp", "high#1", 80, true));
  EXPECT_EQ(fresh.locks().find("lamp")->holder, "high#1");
  EXPECT_GT(fresh.locks().find("lamp")->token, 2u) << "tokens grow across the move";
  step(fresh, new_seq, place("lamp", "late#1", 65, true));  // a new entry below the carried floor
  EXPECT_EQ(fresh.locks().status("lamp", "late#1").state(), proto::LOCK_NONE);
}

// A device that leaves a group leaves its lock's users behind: the freeze
// drops the holder, the waiters and the lineage (keeping the floor and last
// token the next group carries over), and the frozen group takes no new
// request. When the device comes back, nothing from before holds it up (EV
// sweep with moving devices, seed 2: a finished invocation's entry, placed
// before the device left, came back to life and blocked every later one).
TEST(DeviceGroupStateHandoff, ADeviceThatLeavesForgetsItsLocksUsersHere) {
  DeviceGroupState a;
  uint64_t seq = 0;
  step(a, seq, observed("lamp", true, {{"power", false}}));
  step(a, seq, place("lamp", "held#1", 40, true));  // granted: token 1, floor (40, held#1)
  step(a, seq, place("lamp", "placed#1", 50, false));
  step(a, seq, handoff("lamp", "cluster:b", 4));
  const DeviceLocks::Lock* left = a.locks().find("lamp");
  ASSERT_NE(left, nullptr);
  EXPECT_TRUE(left->free());
  EXPECT_TRUE(left->lineage.empty());
  EXPECT_EQ(left->floor_key_us, 40) << "the floor stays, for the next group to carry over";
  EXPECT_EQ(left->last_token, 1u);
  step(a, seq, place("lamp", "stale#1", 60, true));  // a requester whose catalog is behind
  EXPECT_EQ(a.locks().status("lamp", "stale#1").state(), proto::LOCK_NONE);
  proto::DeviceUpdate locked;
  locked.mutable_lock()->set_device("lamp");
  locked.mutable_lock()->set_holder("sla#1");
  step(a, seq, locked);
  EXPECT_TRUE(a.locks().find("lamp")->free()) << "a frozen device's lock is granted nowhere but its next group";

  // It lives in cluster:b for a while (placed#1 runs there), then comes back.
  DeviceGroupState b;
  uint64_t b_seq = 0;
  step(b, b_seq, import_from(handoff_read(a, "lamp"), "lamp", 4, true));
  step(b, b_seq, place("lamp", "placed#1", 50, true));
  ASSERT_EQ(b.locks().find("lamp")->holder, "placed#1");
  step(b, b_seq, release("lamp", "placed#1"));
  step(b, b_seq, handoff("lamp", "cluster:a", 5));
  step(a, seq, import_from(handoff_read(b, "lamp"), "lamp", 5, true));
  const DeviceLocks::Lock* back = a.locks().find("lamp");
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(back->lineage.empty()) << "placed#1's entry from before the move is gone";
  EXPECT_EQ(back->floor_key_us, 50);
  step(a, seq, place("lamp", "next#1", 70, true));
  EXPECT_EQ(a.locks().find("lamp")->holder, "next#1");
  EXPECT_GT(a.locks().find("lamp")->token, 2u);
}

TEST(DeviceGroupStateHandoff, ACommandTheOldGroupMayHaveRunDoesNotRunAgain) {
  DeviceGroupState old;
  old.apply(1, write(accept("c1", "lamp", {{"power", true}}), 1));
  old.apply(2, write(finished("c1", proto::COMMAND_OK), 2));
  old.apply(3, write(observed("lamp", true, {{"power", true}}), 3));
  old.apply(4, write(handoff("lamp", "cluster:b", 2), 4));
  const proto::DeviceQueryReply reply = handoff_read(old, "lamp");

  DeviceGroupState fresh;
  fresh.apply(1, write(accept("c1", "lamp", {{"power", true}}), 1));  // the client sent it here too
  fresh.apply(2, write(import_from(reply, "lamp", 2, false), 2));
  EXPECT_EQ(fresh.command("c1")->outcome.status(), proto::COMMAND_OK);
  EXPECT_TRUE(fresh.pending().empty());
}

TEST(DeviceGroupStateHandoff, VersionsOrderClaimsBetweenGroups) {
  // The device is live here from catalog version 5: a leader whose catalog
  // still puts it elsewhere (from version 3) cannot freeze it.
  DeviceGroupState placed;
  proto::DeviceUpdate start;
  start.mutable_imported()->set_device("lamp");
  start.mutable_imported()->set_placed_version(5);
  start.mutable_imported()->set_last(true);
  placed.apply(1, write(start, 1));
  placed.apply(2, write(observed("lamp", true, {{"power", false}}), 2));
  placed.apply(3, write(handoff("lamp", "cluster:stale", 3), 3));
  EXPECT_FALSE(placed.device("lamp")->frozen());
  placed.apply(4, write(handoff("lamp", "cluster:c", 7), 4));
  EXPECT_EQ(placed.device("lamp")->moved_to, "cluster:c");
  placed.apply(5, write(handoff("lamp", "cluster:stale", 6), 5));  // older than the freeze: ignored
  EXPECT_EQ(placed.device("lamp")->moved_to, "cluster:c");

  // A slower importer (version 5) overtaken by a newer claim (version 7)
  // that froze the group first: its import is ignored, so at most one group
  // holds the device live. The tombstone holds no record for the claimer.
  DeviceGroupState overtaken;
  overtaken.apply(1, write(handoff("lamp", "cluster:c", 7), 1));
  const proto::DeviceQueryReply tombstone = handoff_read(overtaken, "lamp");
  ASSERT_EQ(tombstone.devices_size(), 1);
  EXPECT_FALSE(tombstone.devices(0).held());
  proto::DeviceUpdate slow = start;
  slow.mutable_imported()->mutable_record()->set_device("lamp");
  slow.mutable_imported()->mutable_record()->set_version(9);
  overtaken.apply(2, write(slow, 2));
  EXPECT_TRUE(overtaken.device("lamp")->frozen());
  EXPECT_FALSE(overtaken.device("lamp")->held);

  // Coming back to a group that held it before: the newer record wins, and
  // the version stays above both.
  DeviceGroupState back;
  back.apply(1, write(observed("lamp", true, {{"power", false}}), 1));
  back.apply(2, write(observed("lamp", true, {{"power", true}}), 2));
  back.apply(3, write(observed("lamp", false, {}), 3));
  back.apply(4, write(handoff("lamp", "cluster:c", 2), 4));
  ASSERT_EQ(back.device("lamp")->version, 3u);
  proto::DeviceUpdate home;
  home.mutable_imported()->set_device("lamp");
  home.mutable_imported()->set_placed_version(4);
  home.mutable_imported()->set_last(true);
  auto& record = *home.mutable_imported()->mutable_record();
  record.set_device("lamp");
  record.set_version(2);
  record.set_known(true);
  record.set_up(true);
  record.set_held(true);
  back.apply(5, write(home, 5));
  EXPECT_FALSE(back.device("lamp")->frozen());
  EXPECT_TRUE(back.device("lamp")->up);
  EXPECT_EQ(back.device("lamp")->version, 4u);
}

TEST(DeviceGroupStateHandoff, HandoffHistoryFitsOneUpdate) {
  DeviceGroupState old;
  uint64_t seq = 0;
  for (int i = 0; i < 100; ++i) {
    const std::string id = "a-rather-long-command-identifier-" + std::to_string(i);
    step(old, seq, accept(id, "lamp", {{"power", true}}));
    proto::DeviceUpdate failed = finished(id, proto::COMMAND_DRIVER_ERROR);
    failed.mutable_outcome()->set_detail(std::string(300, 'x'));
    step(old, seq, failed);
  }
  step(old, seq, handoff("lamp", "cluster:b", 1));
  const proto::DeviceQueryReply reply = handoff_read(old, "lamp");
  ASSERT_GT(reply.history_size(), 0);
  EXPECT_EQ(reply.history(0).command_id(), "a-rather-long-command-identifier-99");  // newest first
  const proto::DeviceUpdate chunk = import_from(reply, "lamp", 1, false);
  EXPECT_LE(DeviceGroupState::encode(chunk).size() + 8, 700u);
}

}  // namespace
}  // namespace mesh::routine

namespace mesh::routine {
namespace {

// EV post-leasing (CommandAccept.after_lease): an undo sent after the
// routine gave the device up restores only what it still wrote last, and
// hands the rest to the command that overwrote it.
class DeviceGroupStateAfterLease : public ::testing::Test {
 protected:
  void apply(const proto::DeviceUpdate& update) {
    ++seq_;
    state_.apply(seq_, write(update, seq_));
  }
  void lock(const std::string& holder) {
    proto::DeviceUpdate update;
    update.mutable_lock()->set_device("lamp");
    update.mutable_lock()->set_holder(holder);
    update.mutable_lock()->set_wait(true);
    apply(update);
  }
  void unlock(const std::string& holder) {
    proto::DeviceUpdate update;
    update.mutable_unlock()->set_device("lamp");
    update.mutable_unlock()->set_holder(holder);
    apply(update);
  }
  // Accepts and begins actuating; with `ok`, also finishes it.
  void run(const std::string& id, const std::string& holder, const Attributes& values, bool after_lease, bool ok) {
    proto::DeviceUpdate a = accept(id, "lamp", values);
    a.mutable_accept()->set_lock_holder(holder);
    const DeviceLocks::Lock* held = state_.locks().find("lamp");
    a.mutable_accept()->set_lock_token(held != nullptr && held->holder == holder ? held->token : 7);
    a.mutable_accept()->set_after_lease(after_lease);
    apply(a);
    proto::DeviceUpdate actuating;
    actuating.mutable_actuating()->set_command_id(id);
    apply(actuating);
    if (!ok || state_.command(id)->done()) return;
    proto::DeviceUpdate outcome;
    outcome.mutable_outcome()->set_command_id(id);
    outcome.mutable_outcome()->set_status(proto::COMMAND_OK);
    to_proto(values, *outcome.mutable_outcome()->mutable_state_after());
    apply(outcome);
  }

  DeviceGroupState state_;
  uint64_t seq_ = 0;
};

TEST_F(DeviceGroupStateAfterLease, RestoresWhatItStillWroteLastAndHandsTheRestToTheOverwriter) {
  apply(observed("lamp", true, {{"power", false}, {"brightness", 30.0}}));
  lock("r1#1");
  run("r1#1#0", "r1#1", {{"power", true}, {"brightness", 80.0}}, false, true);
  unlock("r1#1");  // the post-lease: r2 takes the lamp while r1 runs on
  lock("r2#1");
  run("r2#1#0", "r2#1", {{"power", false}}, false, true);
  EXPECT_EQ(state_.device("lamp")->attribute_writers,
            (std::map<std::string, std::string>{{"brightness", "r1#1"}, {"power", "r2#1"}}));

  // r1 aborts: its undo runs without the lock, for brightness only.
  run("r1#1#0.undo", "r1#1", {{"power", false}, {"brightness", 30.0}}, true, false);
  const auto* undo = state_.command("r1#1#0.undo");
  ASSERT_NE(undo, nullptr);
  EXPECT_FALSE(undo->done());
  EXPECT_TRUE(undo->actuating);
  EXPECT_EQ(undo->values, (Attributes{{"brightness", 30.0}}));
  // r2's write stands; were r2 to abort, it would restore power=false, as
  // if r1 had never run.
  EXPECT_EQ(from_proto(state_.command("r2#1#0")->outcome.state_before()), (Attributes{{"power", false}}));

  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.device("lamp")->attribute_writers, state_.device("lamp")->attribute_writers);
  EXPECT_TRUE(copy.command("r1#1#0.undo")->after_lease);
}

TEST_F(DeviceGroupStateAfterLease, IsRefusedWhenEveryAttributeWasOverwrittenAndNeverNeedsTheLock) {
  apply(observed("lamp", true, {{"power", false}}));
  lock("r1#1");
  run("r1#1#0", "r1#1", {{"power", true}}, false, true);
  unlock("r1#1");
  lock("r2#1");
  run("r2#1#0", "r2#1", {{"power", true}}, false, true);
  run("r1#1#0.undo", "r1#1", {{"power", false}}, true, false);
  const auto* undo = state_.command("r1#1#0.undo");
  ASSERT_TRUE(undo->done());
  EXPECT_EQ(undo->outcome.status(), proto::COMMAND_REFUSED);
  EXPECT_NE(undo->outcome.detail().find("routine invocation r2#1"), std::string::npos) << undo->outcome.detail();
  EXPECT_EQ(from_proto(state_.command("r2#1#0")->outcome.state_before()), (Attributes{{"power", false}}));

  // r2 gave the lamp up to r3, and nobody wrote it since: r2's undo runs
  // though r3 holds the lock (r3 is serialized after r2 and has not used
  // the lamp yet).
  lock("r3#1");
  unlock("r2#1");                                          // granted to r3
  run("r4#1#0", "r4#1", {{"power", true}}, false, false);  // no lock of its own: fenced
  EXPECT_EQ(state_.command("r4#1#0")->outcome.status(), proto::COMMAND_FENCED);
  run("r2#1#0.undo", "r2#1", {{"power", false}}, true, false);
  EXPECT_TRUE(state_.command("r2#1#0.undo")->actuating);
}

TEST_F(DeviceGroupStateAfterLease, HandsTheUndoValueToTheFirstCommandThatWroteNotOneRefusedBeforeWriting) {
  apply(observed("lamp", true, {{"power", false}}));
  lock("r1#1");
  run("r1#1#0", "r1#1", {{"power", true}}, false, true);
  unlock("r1#1");
  // Sent after r1's write, but refused without a lock: it wrote nothing.
  run("r3#1#0", "r3#1", {{"power", false}}, false, false);
  ASSERT_EQ(state_.command("r3#1#0")->outcome.status(), proto::COMMAND_FENCED);
  lock("r2#1");
  run("r2#1#0", "r2#1", {{"power", true}}, false, true);
  run("r1#1#0.undo", "r1#1", {{"power", false}}, true, false);
  EXPECT_EQ(state_.command("r1#1#0.undo")->outcome.status(), proto::COMMAND_REFUSED);
  // r2 overwrote r1: were r2 to abort, it restores what was there before r1.
  EXPECT_EQ(from_proto(state_.command("r2#1#0")->outcome.state_before()), (Attributes{{"power", false}}));
  EXPECT_EQ(state_.command("r3#1#0")->actuated_position, 0u);
  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  EXPECT_EQ(copy.command("r2#1#0")->actuated_position, state_.command("r2#1#0")->actuated_position);
  EXPECT_GT(copy.command("r2#1#0")->actuated_position, copy.command("r1#1#0")->actuated_position);
}

}  // namespace
}  // namespace mesh::routine
