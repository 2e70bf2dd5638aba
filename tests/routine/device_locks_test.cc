#include "routine/device_locks.h"

#include <gtest/gtest.h>

#include "kgroup/client_state_machine.h"
#include "routine/device_codec.h"
#include "routine/device_group_state.h"

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

// The device group enforces the locks where a command is about to be
// actuated: these are the fencing rules.
class LockedDeviceGroup : public ::testing::Test {
 protected:
  void apply(const proto::DeviceUpdate& update) {
    ++seq_;
    state_.apply(seq_, kgroup::ClientStateMachine::encode_write(seq_, update.SerializeAsString()));
  }
  void lock(const std::string& holder, bool release = false) {
    proto::DeviceUpdate update;
    if (release) {
      update.mutable_unlock()->set_device("lamp");
      update.mutable_unlock()->set_holder(holder);
    } else {
      update.mutable_lock()->set_device("lamp");
      update.mutable_lock()->set_holder(holder);
      update.mutable_lock()->set_wait(true);
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

TEST_F(LockedDeviceGroup, LocksMoveWithTheSnapshot) {
  lock("r#1");
  lock("s#1");
  DeviceGroupState copy;
  ASSERT_TRUE(copy.restore(state_.snapshot()));
  ASSERT_NE(copy.locks().find("lamp"), nullptr);
  EXPECT_EQ(copy.locks().find("lamp")->holder, "r#1");
  EXPECT_EQ(copy.locks().find("lamp")->waiting, std::deque<std::string>{"s#1"});
}

}  // namespace
}  // namespace mesh::routine
