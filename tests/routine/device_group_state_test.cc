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

}  // namespace
}  // namespace mesh::routine
