#include "routine/device_locks.h"

#include <gtest/gtest.h>

#include "kgroup/client_state_machine.h"
#include "routine/device_codec.h"
#include "routine/device_group_state.h"
#include "routine/fault_points.h"

namespace mesh::routine {
namespace {

TEST(DeviceLocks, FreeLockIsGrantedAtOnceAndOthersQueueInOrder) {
  DeviceLocks locks;
  locks.request("lamp", "a#1", true);
  locks.request("lamp", "b#1", true);
  locks.request("lamp", "c#1", true);
  locks.request("lamp", "b#1", true);  // repeated: no second place in the queue
  EXPECT_EQ(locks.status("lamp", "a#1").state(), proto::LOCK_HELD);
  EXPECT_EQ(locks.status("lamp", "a#1").token(), 1u);
  EXPECT_EQ(locks.status("lamp", "b#1").state(), proto::LOCK_WAITING);
  EXPECT_EQ(locks.status("lamp", "b#1").ahead(), 1u);
  EXPECT_EQ(locks.status("lamp", "c#1").ahead(), 2u);
  EXPECT_EQ(locks.release("lamp", "a#1"), std::optional<std::string>("b#1"));
  EXPECT_EQ(locks.status("lamp", "b#1").state(), proto::LOCK_HELD);
  EXPECT_EQ(locks.status("lamp", "b#1").token(), 2u);
  EXPECT_EQ(locks.status("lamp", "a#1").state(), proto::LOCK_NONE);
  // A release by a non-holder only takes it out of the queue.
  EXPECT_EQ(locks.release("lamp", "a#1"), std::nullopt);
  EXPECT_EQ(locks.release("lamp", "c#1"), std::nullopt);
  EXPECT_EQ(locks.find("lamp")->waiting.size(), 0u);
  EXPECT_EQ(locks.release("lamp", "b#1"), std::nullopt);
  EXPECT_TRUE(locks.find("lamp")->free());
}

TEST(DeviceLocks, TokensOnlyGrowAcrossFreeSpellsAndSnapshots) {
  DeviceLocks locks;
  locks.request("lamp", "a#1", true);
  locks.release("lamp", "a#1");
  locks.request("lamp", "a#2", true);
  EXPECT_EQ(locks.status("lamp", "a#2").token(), 2u);
  locks.release("lamp", "a#2");
  google::protobuf::RepeatedPtrField<proto::DeviceLockMsg> msgs;
  for (auto& msg : locks.to_proto()) *msgs.Add() = msg;
  DeviceLocks restored;
  ASSERT_TRUE(restored.restore(msgs));
  restored.request("lamp", "b#1", true);
  EXPECT_EQ(restored.status("lamp", "b#1").token(), 3u);
}

TEST(DeviceLocks, TryRequestDoesNotQueue) {
  DeviceLocks locks;
  locks.request("lamp", "a#1", false);
  locks.request("lamp", "b#1", false);
  EXPECT_EQ(locks.status("lamp", "a#1").state(), proto::LOCK_HELD);
  EXPECT_EQ(locks.status("lamp", "b#1").state(), proto::LOCK_NONE);
  EXPECT_EQ(locks.status("lamp", "b#1").current_holder(), "a#1");
}

// Wound-wait compares ages: each request's trigger time travels with it,
// and whoever reads the lock learns the holder's age and token.
TEST(DeviceLocks, AgesTravelWithRequestsAndNameTheHolder) {
  DeviceLocks locks;
  locks.request("lamp", "young#1", true, 200);
  locks.request("lamp", "old#1", true, 100);
  locks.request("lamp", "ageless#1", true);
  const auto waiting = locks.status("lamp", "old#1");
  EXPECT_EQ(waiting.state(), proto::LOCK_WAITING);
  EXPECT_EQ(waiting.current_holder(), "young#1");
  EXPECT_EQ(waiting.holder_started_us(), 200);
  EXPECT_EQ(waiting.holder_token(), 1u);
  locks.release("lamp", "young#1");
  EXPECT_EQ(locks.status("lamp", "ageless#1").holder_started_us(), 100);
  EXPECT_EQ(locks.find("lamp")->started_us, (std::map<std::string, int64_t>{{"old#1", 100}}));
  google::protobuf::RepeatedPtrField<proto::DeviceLockMsg> msgs;
  for (auto& msg : locks.to_proto()) *msgs.Add() = msg;
  DeviceLocks restored;
  ASSERT_TRUE(restored.restore(msgs));
  EXPECT_EQ(restored.status("lamp", "ageless#1").holder_started_us(), 100);
  locks.release("lamp", "old#1");  // the ageless one holds it now: no age told
  EXPECT_EQ(locks.status("lamp", "x#1").holder_started_us(), 0);
  EXPECT_TRUE(locks.find("lamp")->started_us.empty());
  // An age of someone neither holding nor waiting is not a lock this code wrote.
  (*msgs.Mutable(0)->mutable_started_us())["stranger#1"] = 5;
  EXPECT_FALSE(restored.restore(msgs));
}

TEST(DeviceLocks, RestoreRejectsInconsistentLocks) {
  google::protobuf::RepeatedPtrField<proto::DeviceLockMsg> msgs;
  auto& msg = *msgs.Add();
  msg.set_device("lamp");
  msg.set_holder("a#1");
  msg.set_token(5);
  msg.set_last_token(4);  // a token above every token granted
  DeviceLocks locks;
  EXPECT_FALSE(locks.restore(msgs));
  msg.set_last_token(5);
  msg.add_waiting("a#1");  // holder also waiting
  EXPECT_FALSE(locks.restore(msgs));
  msg.clear_waiting();
  msg.clear_holder();
  msg.set_token(0);
  msg.add_waiting("b#1");  // a queue behind no holder
  EXPECT_FALSE(locks.restore(msgs));
  msg.clear_waiting();
  EXPECT_TRUE(locks.restore(msgs));
}

// Rounds ("Rounds" in device_locks.h): a release naming a round takes only
// what requests of earlier rounds got, whenever it lands; a later round's
// request raises the place it finds; a release naming none takes anything.
TEST(DeviceLocks, AReleaseNamingARoundTakesOnlyEarlierRoundsPlaces) {
  DeviceLocks locks;
  locks.request("lamp", "a#1", true, 0, 1);
  locks.request("lamp", "b#1", true, 0, 1);
  EXPECT_EQ(locks.status("lamp", "a#1").round(), 1u);
  EXPECT_EQ(locks.release("lamp", "a#1", 0, 1), std::nullopt);  // from before round 1 asked: too late
  EXPECT_EQ(locks.release("lamp", "b#1", 0, 1), std::nullopt);
  EXPECT_EQ(locks.find("lamp")->holder, "a#1");
  EXPECT_EQ(locks.find("lamp")->token, 1u);
  EXPECT_EQ(locks.status("lamp", "b#1").state(), proto::LOCK_WAITING);
  // b#1 gave everything back (round 2): its round-1 place goes, and a
  // round-2 request queues it again.
  EXPECT_EQ(locks.release("lamp", "b#1", 0, 2), std::nullopt);
  EXPECT_EQ(locks.status("lamp", "b#1").state(), proto::LOCK_NONE);
  locks.request("lamp", "b#1", true, 0, 2);
  // a#1's round-1 grant, raised by a round-2 request (it asks for the lamp
  // again, in order): a round-2 release that lands late leaves it.
  locks.request("lamp", "a#1", true, 0, 2);
  EXPECT_EQ(locks.status("lamp", "a#1").round(), 2u);
  EXPECT_EQ(locks.release("lamp", "a#1", 0, 2), std::nullopt);
  EXPECT_EQ(locks.find("lamp")->holder, "a#1");
  // A request of an earlier round lowers nothing.
  locks.request("lamp", "a#1", true, 0, 1);
  EXPECT_EQ(locks.status("lamp", "a#1").round(), 2u);
  // Rounds survive a snapshot, and leave with their holder.
  google::protobuf::RepeatedPtrField<proto::DeviceLockMsg> msgs;
  for (auto& msg : locks.to_proto()) *msgs.Add() = msg;
  DeviceLocks restored;
  ASSERT_TRUE(restored.restore(msgs));
  EXPECT_EQ(restored.release("lamp", "a#1", 0, 2), std::nullopt);
  EXPECT_EQ(restored.find("lamp")->holder, "a#1");
  EXPECT_EQ(restored.release("lamp", "a#1"), std::optional<std::string>("b#1"));  // its end: no round
  EXPECT_EQ(restored.status("lamp", "b#1").round(), 2u);
  EXPECT_EQ(restored.find("lamp")->rounds.count("a#1"), 0u);
  // A round of someone neither holding nor waiting is inconsistent.
  msgs.Mutable(0)->mutable_rounds()->insert({"nobody#1", 1});
  EXPECT_FALSE(restored.restore(msgs));
}

// The device group enforces the locks where a command is about to be
// actuated: these are the fencing rules.
class LockedDeviceGroup : public ::testing::Test {
 protected:
  void apply(const proto::DeviceUpdate& update) {
    ++seq_;
    state_.apply(seq_, kgroup::ClientStateMachine::encode_write(seq_, update.SerializeAsString()));
  }
  void lock(const std::string& holder, bool release = false, uint32_t round = 0) {
    proto::DeviceUpdate update;
    if (release) {
      update.mutable_unlock()->set_device("lamp");
      update.mutable_unlock()->set_holder(holder);
      update.mutable_unlock()->set_before_round(round);
    } else {
      update.mutable_lock()->set_device("lamp");
      update.mutable_lock()->set_holder(holder);
      update.mutable_lock()->set_wait(true);
      update.mutable_lock()->set_round(round);
    }
    apply(update);
  }
  const DeviceGroupState::Command& command(const std::string& id, const std::string& holder, uint64_t token) {
    proto::DeviceUpdate accept;
    accept.mutable_accept()->set_command_id(id);
    accept.mutable_accept()->set_device("lamp");
    to_proto(Attributes{{"power", true}}, *accept.mutable_accept()->mutable_values());
    accept.mutable_accept()->set_lock_holder(holder);
    accept.mutable_accept()->set_lock_token(token);
    apply(accept);
    proto::DeviceUpdate actuating;
    actuating.mutable_actuating()->set_command_id(id);
    apply(actuating);
    return *state_.command(id);
  }
  DeviceGroupState state_;
  uint64_t seq_ = 0;
};

TEST_F(LockedDeviceGroup, HolderWithCurrentTokenActuates) {
  lock("r#1");
  const auto& c = command("c1", "r#1", 1);
  EXPECT_TRUE(c.actuating);
  EXPECT_FALSE(c.done());
}

TEST_F(LockedDeviceGroup, CommandWithoutTheLockIsRefusedWhileLocked) {
  lock("r#1");
  const auto& c = command("manual", "", 0);
  EXPECT_FALSE(c.actuating);
  EXPECT_EQ(c.outcome.status(), proto::COMMAND_REFUSED);
  EXPECT_NE(c.outcome.detail().find("locked by routine invocation r#1"), std::string::npos) << c.outcome.detail();
  lock("r#1", true);
  EXPECT_TRUE(command("manual2", "", 0).actuating);
}

TEST_F(LockedDeviceGroup, LateHolderIsFencedAfterItsLockPassedOn) {
  lock("r#1");
  lock("s#1");
  lock("r#1", true);  // reclaimed or released: s#1 now holds it with token 2
  const auto& late = command("late", "r#1", 1);
  EXPECT_EQ(late.outcome.status(), proto::COMMAND_FENCED);
  EXPECT_NE(late.outcome.detail().find("no longer held"), std::string::npos) << late.outcome.detail();
  // Same holder name, stale token: refused too.
  lock("s#1", true);
  lock("r#1");
  EXPECT_EQ(command("stale", "r#1", 1).outcome.status(), proto::COMMAND_FENCED);
  EXPECT_TRUE(command("fresh", "r#1", 3).actuating);
}

// SLA soak seed 22 (a partitioned run): r2#2, waiting for d0, left d3's
// queue (a leave-ahead, round 1); the write went unanswered while d3's
// group re-formed. Holding d0 and d1, r2#2 asked for d3 in order, and that
// request landed first: granted. The leave landed next and, naming only
// the holder, handed d3 to r4#10 while r2#2 ran its commands on d0 and d1.
// Naming its round, the leave now changes nothing: r2#2 keeps d3 and its
// token, and its command there actuates.
TEST_F(LockedDeviceGroup, ALeaveSentBeforeTheSameRoundsRequestLeavesItsGrant) {
  lock("r2#2", false, 1);
  lock("r4#10", false, 1);
  lock("r2#2", true, 1);  // the leave-ahead, delivered late
  EXPECT_EQ(state_.locks().find("lamp")->holder, "r2#2");
  EXPECT_EQ(state_.locks().find("lamp")->token, 1u);
  EXPECT_TRUE(command("r2#2#2", "r2#2", 1).actuating);
  EXPECT_EQ(command("r4#10#0", "r4#10", 2).outcome.status(), proto::COMMAND_FENCED);
  // The same leave from before the grant survived a fail-over too.
  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  proto::DeviceUpdate leave;
  leave.mutable_unlock()->set_device("lamp");
  leave.mutable_unlock()->set_holder("r2#2");
  leave.mutable_unlock()->set_before_round(1);
  copy.apply(seq_ + 1, kgroup::ClientStateMachine::encode_write(seq_ + 1, leave.SerializeAsString()));
  EXPECT_EQ(copy.locks().find("lamp")->holder, "r2#2");
  // Its own end (no round) passes the lock on.
  lock("r2#2", true);
  EXPECT_EQ(state_.locks().find("lamp")->holder, "r4#10");
  EXPECT_EQ(state_.locks().find("lamp")->token, 2u);
}

TEST_F(LockedDeviceGroup, LocksMoveWithTheSnapshot) {
  lock("r#1");
  lock("s#1");
  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  ASSERT_NE(copy.locks().find("lamp"), nullptr);
  EXPECT_EQ(copy.locks().find("lamp")->holder, "r#1");
  EXPECT_EQ(copy.locks().find("lamp")->waiting, std::deque<std::string>{"s#1"});
}

DeviceLocks::Entry entry(int64_t key_us, bool ready) { return DeviceLocks::Entry{key_us, ready, 0, 0}; }

// EV lineages: the lock goes in key order, to the lowest entry once ready;
// a lower entry placed before a higher one is granted goes first (a
// pre-lease); an entry below a key that was granted is refused.
TEST(DeviceLocks, LineagesGrantInKeyOrderAndRefuseBelowTheFloor) {
  DeviceLocks locks;
  locks.place("lamp", "late#1", entry(50, true));
  EXPECT_EQ(locks.find("lamp")->holder, "late#1");  // alone and ready: granted
  locks.place("lamp", "early#1", entry(40, true));
  EXPECT_EQ(locks.status("lamp", "early#1").state(), proto::LOCK_NONE) << "below a granted key: refused";
  EXPECT_EQ(locks.status("lamp", "early#1").floor_key_us(), 50);
  locks.place("lamp", "next#1", entry(70, true));
  locks.place("lamp", "between#1", entry(60, false));
  EXPECT_EQ(locks.status("lamp", "next#1").state(), proto::LOCK_PLACED);
  EXPECT_EQ(locks.status("lamp", "next#1").ahead(), 2u);  // the holder and between#1
  locks.release("lamp", "late#1");
  // next#1 is ready, but between#1 comes first and has not asked yet.
  EXPECT_TRUE(locks.find("lamp")->free());
  EXPECT_EQ(locks.find("lamp")->blocker(), "between#1");
  // A pre-lease: placed below next#1 before next#1 was granted.
  locks.place("lamp", "borrower#1", entry(55, true));
  EXPECT_EQ(locks.find("lamp")->holder, "borrower#1");
  locks.release("lamp", "borrower#1");
  EXPECT_TRUE(locks.find("lamp")->free());
  locks.place("lamp", "between#1", entry(60, true));  // now it asks
  EXPECT_EQ(locks.find("lamp")->holder, "between#1");
  const uint64_t token = locks.find("lamp")->token;
  locks.place("lamp", "between#1", entry(60, true));  // repeated: nothing changes
  EXPECT_EQ(locks.find("lamp")->token, token);
  locks.release("lamp", "between#1");
  EXPECT_EQ(locks.find("lamp")->holder, "next#1");
  EXPECT_EQ(locks.find("lamp")->floor_key_us, 70);
}

// A withdrawn or re-keyed entry no longer holds up those after it, and a
// re-key below the floor drops the entry.
TEST(DeviceLocks, LineageEntriesMoveAndLeave) {
  DeviceLocks locks;
  locks.place("fan", "first#1", entry(10, true));
  locks.release("fan", "first#1");  // floor 10
  locks.place("fan", "slow#1", entry(20, false));
  locks.place("fan", "quick#1", entry(30, true));
  EXPECT_TRUE(locks.find("fan")->free());
  locks.place("fan", "slow#1", entry(40, false));  // re-keyed above quick#1
  EXPECT_EQ(locks.find("fan")->holder, "quick#1");
  locks.release("fan", "quick#1");                 // floor 30
  locks.place("fan", "slow#1", entry(20, false));  // late, from before its re-key: changes nothing
  EXPECT_EQ(locks.status("fan", "slow#1").placed_key_us(), 40);
  locks.release("fan", "slow#1", 20);  // a late withdrawal of its key-20 entry: changes nothing
  EXPECT_EQ(locks.status("fan", "slow#1").placed_key_us(), 40);
  locks.place("fan", "fresh#1", entry(5, false));  // a new entry below the floor (30): refused
  EXPECT_EQ(locks.status("fan", "fresh#1").state(), proto::LOCK_NONE);
  locks.release("fan", "slow#1", 40);  // withdrawn under its key
  EXPECT_TRUE(locks.find("fan")->lineage.empty());
  locks.place("fan", "gone#1", entry(50, false));
  locks.place("fan", "after#1", entry(60, true));
  EXPECT_TRUE(locks.find("fan")->free());
  locks.release("fan", "gone#1");  // withdrawn (or reclaimed)
  EXPECT_EQ(locks.find("fan")->holder, "after#1");
}

// A carried-over lock (a device handed to another group) only ever raises
// the floor and the token count; one naming a floor without its holder is
// not one a group wrote, and changes nothing.
TEST(DeviceLocks, CarryOverOnlyRaisesTheFloorAndTokens) {
  DeviceLocks locks;
  locks.place("fan", "mid#1", entry(40, true));
  locks.release("fan", "mid#1");  // floor 40, last token 1
  proto::DeviceLockMsg lower;
  lower.set_device("fan");
  lower.set_last_token(0);
  lower.set_floor_key_us(30);
  lower.set_floor_holder("old#1");
  locks.carry_over(lower);
  EXPECT_EQ(locks.find("fan")->floor_key_us, 40);
  EXPECT_EQ(locks.find("fan")->last_token, 1u);
  proto::DeviceLockMsg broken;
  broken.set_device("fan");
  broken.set_last_token(9);
  broken.set_floor_key_us(90);
  locks.carry_over(broken);
  EXPECT_EQ(locks.find("fan")->floor_key_us, 40);
  EXPECT_EQ(locks.find("fan")->last_token, 1u);
  proto::DeviceLockMsg higher = lower;
  higher.set_last_token(5);
  higher.set_floor_key_us(60);
  locks.carry_over(higher);
  EXPECT_EQ(locks.find("fan")->floor_key_us, 60);
  locks.place("fan", "next#1", entry(70, true));
  EXPECT_EQ(locks.find("fan")->token, 6u);
}

// Lineages and floors survive a snapshot; a lineage that names a waiter
// twice, or a floor without its holder, is not one this code wrote.
TEST(DeviceLocks, LineagesRestoreFromSnapshots) {
  DeviceLocks locks;
  locks.place("lamp", "a#1", DeviceLocks::Entry{10, true, 100, 200});
  locks.place("lamp", "b#1", DeviceLocks::Entry{20, false, 300, 400});
  google::protobuf::RepeatedPtrField<proto::DeviceLockMsg> msgs;
  for (auto& msg : locks.to_proto()) *msgs.Add() = msg;
  DeviceLocks restored;
  ASSERT_TRUE(restored.restore(msgs));
  EXPECT_EQ(restored.find("lamp")->holder, "a#1");
  EXPECT_EQ(restored.find("lamp")->floor_key_us, 10);
  const auto status = restored.status("lamp", "b#1", /*lineage=*/true);
  EXPECT_EQ(status.state(), proto::LOCK_PLACED);
  EXPECT_EQ(status.placed_key_us(), 20);
  ASSERT_EQ(status.lineage_size(), 2);
  EXPECT_EQ(status.lineage(1).expected_first_use_us(), 300);
  EXPECT_EQ(status.lineage(1).expected_done_us(), 400);
  auto broken = msgs;
  broken.Mutable(0)->add_waiting("b#1");
  EXPECT_FALSE(restored.restore(broken));
  broken = msgs;
  broken.Mutable(0)->clear_floor_holder();
  EXPECT_FALSE(restored.restore(broken));
}

// The deliberate bug the EV checker must catch grants the lowest entry that
// asks, not the lowest entry.
TEST(DeviceLocks, OutOfKeyOrderGrantsSkipEntriesThatHaveNotAsked) {
  fault_points().grant_out_of_key_order = true;
  DeviceLocks locks;
  locks.place("lamp", "early#1", entry(40, false));
  locks.place("lamp", "late#1", entry(50, true));
  fault_points() = FaultPoints{};
  EXPECT_EQ(locks.find("lamp")->holder, "late#1");
}

}  // namespace
}  // namespace mesh::routine
