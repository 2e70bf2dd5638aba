// The device commands of the admin protocol on two nodes with emulated
// devices: catalog changes, listing, commands and their outcomes, watches.
#include "agent/admin_service.h"

#include <memory>
#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "routine/emulated_device.h"
#include "tests/agent/test_world.h"

namespace mesh::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::ip;
using testing::LinkGraph;
using testing::ManualEnv;
using testing::test_config;

constexpr std::string_view kCatalog =
    "[[device]]\nid = \"lamp\"\nkind = \"plug\"\nlocation = [0, 0, 0]\ndriver = \"emulated://lamp\"\n"
    "[[device]]\nid = \"hall\"\nkind = \"dimmer\"\nlocation = [30, 0, 0]\nroom = \"hall\"\n"
    "driver = \"emulated://hall\"\n";

routine::DeviceSpec spec(const std::string& id, routine::DeviceKind kind) {
  routine::DeviceSpec s;
  s.id = id;
  s.kind = kind;
  s.driver = "emulated://" + id;
  return s;
}

class AdminDevicesTest : public ::testing::Test {
 protected:
  explicit AdminDevicesTest(std::vector<routine::PreconditionRuleSpec> rules = {})
      : graph_(env_),
        lamp_(spec("lamp", routine::DeviceKind::plug), {{"power", false}}),
        hall_(spec("hall", routine::DeviceKind::dimmer), {{"power", false}, {"brightness", 50.0}}) {
    graph_.connect(ip(1), ip(2), milliseconds(4), milliseconds(6));
    for (uint8_t last : {1, 2}) {
      auto& factory = factories_[last];
      factory = std::make_unique<routine::EmulatedDriverFactory>(env_);
      factory->add(lamp_);
      factory->add(hall_);
      NodeConfig config = test_config(last);
      config.kgroup.selection.k = 2;
      config.devices.service.ensure_quiet = seconds(1);
      config.devices.service.ensure_interval = milliseconds(500);
      if (!rules.empty()) {
        // Rules need their devices in the file's catalog too.
        config.devices.catalog = {spec("lamp", routine::DeviceKind::plug), spec("hall", routine::DeviceKind::dimmer)};
        config.devices.catalog_digest = "test";
        config.devices.preconditions = rules;
      }
      core::Link& link = graph_.add(ip(last));
      nodes_[last] = std::make_unique<Node>(
          config, NodeContext{env_, link, graph_.add_routing(ip(last)), storage_[last], factory.get()});
      nodes_[last]->start();
      services_[last] = std::make_unique<AdminService>(*nodes_[last]);
    }
    env_.advance(seconds(5));
  }

  std::optional<proto::AdminResponse> ask(uint8_t node, const proto::AdminRequest& request,
                                          core::Duration run = seconds(12), AdminService::ConnectionId conn = 0) {
    std::optional<proto::AdminResponse> response;
    int replies = 0;
    services_[node]->handle(
        request,
        [&](proto::AdminResponse r) {
          response = std::move(r);
          ++replies;
        },
        conn);
    env_.advance(run);
    EXPECT_LE(replies, 1) << "answered twice";
    return response;
  }

  ManualEnv env_;
  LinkGraph graph_;
  routine::EmulatedDevice lamp_;
  routine::EmulatedDevice hall_;
  std::map<uint8_t, std::unique_ptr<routine::EmulatedDriverFactory>> factories_;
  std::map<uint8_t, core::MemoryStorage> storage_;
  std::map<uint8_t, std::unique_ptr<Node>> nodes_;
  std::map<uint8_t, std::unique_ptr<AdminService>> services_;
};

TEST_F(AdminDevicesTest, AddListSetWatchRemove) {
  proto::AdminRequest add;
  add.mutable_device_add()->set_catalog(std::string(kCatalog));
  add.mutable_device_add()->set_source("new.toml");
  auto response = ask(1, add);
  ASSERT_TRUE(response && response->has_device_add()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->device_add().verdicts_size(), 2);
  for (const auto& v : response->device_add().verdicts()) {
    EXPECT_FALSE(v.refused()) << v.id() << ": " << v.detail();
    EXPECT_GE(v.version(), 1u);
  }
  // The other node learned the change, and each device's group watches it.
  env_.advance(seconds(10));
  EXPECT_EQ(nodes_[2]->catalog().version(), 2u);
  ASSERT_NE(nodes_[2]->catalog().find("hall"), nullptr);

  proto::AdminRequest list;
  list.mutable_devices();
  response = ask(2, list, seconds(3));
  ASSERT_TRUE(response && response->has_devices()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->devices().devices_size(), 2);
  const auto& hall = response->devices().devices(0);
  EXPECT_EQ(hall.id(), "hall");
  EXPECT_EQ(hall.room(), "hall");
  EXPECT_EQ(hall.state(), "brightness=50 power=off");
  EXPECT_TRUE(hall.up());
  EXPECT_FALSE(hall.leader().empty());
  EXPECT_TRUE(hall.error().empty()) << hall.error();

  // A watch from node 2 starts from the current state...
  proto::AdminRequest watch;
  watch.mutable_device_watch()->add_ids("lamp");
  watch.mutable_device_watch()->set_wait_ms(1000);
  response = ask(2, watch, seconds(4), 7);
  ASSERT_TRUE(response && response->has_device_watch()) << (response ? response->error() : "no answer");
  ASSERT_GE(response->device_watch().changes_size(), 1);
  EXPECT_EQ(response->device_watch().changes(0).device().state(), "power=off");
  const uint64_t last = response->device_watch().last();

  // ...a command from node 1 runs on the device once...
  proto::AdminRequest set;
  set.mutable_device_set()->set_id("lamp");
  set.mutable_device_set()->add_assignments("power=on");
  response = ask(1, set, seconds(5));
  ASSERT_TRUE(response && response->has_device_set()) << (response ? response->error() : "no answer");
  EXPECT_EQ(response->device_set().status(), "ok") << response->device_set().detail();
  EXPECT_EQ(response->device_set().state_after(), "power=on");
  ASSERT_EQ(lamp_.actuations().size(), 1u);
  EXPECT_EQ(lamp_.actuations()[0].command_id, response->device_set().command_id());

  // ...and the watch sees it.
  watch.mutable_device_watch()->set_after(last);
  response = ask(2, watch, seconds(4), 7);
  ASSERT_TRUE(response && response->has_device_watch()) << (response ? response->error() : "no answer");
  ASSERT_GE(response->device_watch().changes_size(), 1);
  EXPECT_EQ(response->device_watch().changes(0).device().state(), "power=on");
  services_[2]->connection_closed(7);

  // Values outside the schema are refused before anything is sent.
  set.mutable_device_set()->set_id("hall");
  set.mutable_device_set()->clear_assignments();
  set.mutable_device_set()->add_assignments("brightness=150");
  response = ask(1, set, seconds(1));
  ASSERT_TRUE(response && response->has_device_set());
  EXPECT_EQ(response->device_set().status(), "refused");
  EXPECT_THAT(response->device_set().detail(), HasSubstr("brightness=150 is out of range: allowed is an integer 0..100"));
  EXPECT_TRUE(hall_.actuations().empty());

  // A device that stops answering: its command reports it down.
  hall_.set_up(false);
  env_.advance(seconds(5));
  set.mutable_device_set()->clear_assignments();
  set.mutable_device_set()->add_assignments("power=on");
  response = ask(2, set, seconds(5));
  ASSERT_TRUE(response && response->has_device_set()) << (response ? response->error() : "no answer");
  EXPECT_EQ(response->device_set().status(), "device_down");

  // A conflicting definition is refused; remove works.
  add.mutable_device_add()->set_catalog(
      "[[device]]\nid = \"lamp\"\nkind = \"switch\"\nlocation = [0, 0, 0]\ndriver = \"emulated://lamp\"\n");
  response = ask(2, add, seconds(3));
  ASSERT_TRUE(response && response->has_device_add());
  ASSERT_EQ(response->device_add().verdicts_size(), 1);
  EXPECT_TRUE(response->device_add().verdicts(0).refused());
  EXPECT_THAT(response->device_add().verdicts(0).detail(), HasSubstr("already defined differently"));

  proto::AdminRequest remove;
  remove.mutable_device_remove()->set_id("lamp");
  response = ask(2, remove, seconds(3));
  ASSERT_TRUE(response && response->has_device_remove()) << (response ? response->error() : "no answer");
  EXPECT_FALSE(response->device_remove().verdict().refused());
  env_.advance(seconds(5));
  EXPECT_EQ(nodes_[1]->catalog().find("lamp"), nullptr);
}

TEST_F(AdminDevicesTest, BadRequestsSayWhatIsWrong) {
  proto::AdminRequest set;
  set.mutable_device_set()->set_id("nothing");
  set.mutable_device_set()->add_assignments("power=on");
  auto response = ask(1, set, milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("no device nothing in the catalog"));

  proto::AdminRequest add;
  add.mutable_device_add()->set_catalog("[[device]]\nid = \"x\"\n");
  add.mutable_device_add()->set_source("bad.toml");
  response = ask(1, add, milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("bad.toml:1: device x.kind: missing"));
}

// An ad hoc command that precondition rules apply to runs as a combo, its
// precondition commands first, unless the operator asks for it as written;
// other commands go as they are.
class AdminDevicesWithRulesTest : public AdminDevicesTest {
 protected:
  AdminDevicesWithRulesTest()
      : AdminDevicesTest({{"lamp_needs_hall_off", "lamp.power == on", {"hall.power == off"}}}) {}

  proto::AdminRequest lamp_on() const {
    proto::AdminRequest set;
    set.mutable_device_set()->set_id("lamp");
    set.mutable_device_set()->add_assignments("power=on");
    return set;
  }
};

TEST_F(AdminDevicesWithRulesTest, ACommandWithPreconditionsRunsAsAComboUnlessIgnored) {
  hall_.set_state({{"power", true}, {"brightness", 80.0}});
  env_.advance(seconds(5));  // the hall's leader has seen it on
  auto response = ask(1, lamp_on(), seconds(40));
  ASSERT_TRUE(response.has_value());
  ASSERT_TRUE(response->has_device_set()) << response->error();
  const proto::DeviceSetReply& reply = response->device_set();
  EXPECT_EQ(reply.status(), "ok") << reply.detail();
  EXPECT_EQ(reply.combo(), "adhoc:lamp");
  EXPECT_EQ(reply.invocation().outcome(), proto::INVOCATION_OK);
  EXPECT_THAT(reply.command_id(), HasSubstr("adhoc:lamp#"));
  ASSERT_EQ(reply.combo_commands_size(), 2);
  EXPECT_EQ(reply.combo_commands(0), "hall power=off (precondition: lamp_needs_hall_off): ok");
  EXPECT_EQ(reply.combo_commands(1), "lamp power=on (subject): ok");
  // The hall went off before the lamp came on.
  ASSERT_EQ(hall_.actuations().size(), 1u);
  ASSERT_EQ(lamp_.actuations().size(), 1u);
  EXPECT_LT(hall_.actuations()[0].at, lamp_.actuations()[0].at);
  EXPECT_EQ(hall_.state().at("power"), routine::Value(false));
  EXPECT_EQ(lamp_.state().at("power"), routine::Value(true));

  // Its group's history shows it from any node.
  proto::AdminRequest history;
  history.mutable_routines()->add_ids("adhoc:lamp");
  response = ask(2, history, seconds(5));
  ASSERT_TRUE(response && response->has_routines()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->routines().routines_size(), 1);
  const proto::RoutineRow& row = response->routines().routines(0);
  ASSERT_EQ(row.invocations_size(), 1);
  EXPECT_EQ(row.invocations(0).adhoc().device(), "lamp");
  ASSERT_EQ(row.combos_size(), 1);
  ASSERT_EQ(row.combos(0).commands_size(), 2);
  EXPECT_EQ(row.combos(0).commands(0),
            "hall power=off (precondition of routine command 1, lamp power=on: lamp_needs_hall_off)");

  // No rule has `lamp.power == off` as its condition.
  proto::AdminRequest off;
  off.mutable_device_set()->set_id("lamp");
  off.mutable_device_set()->add_assignments("power=off");
  response = ask(1, off);
  ASSERT_TRUE(response.has_value() && response->has_device_set());
  EXPECT_EQ(response->device_set().status(), "ok") << response->device_set().detail();
  EXPECT_TRUE(response->device_set().combo().empty());

  hall_.set_state({{"power", true}, {"brightness", 80.0}});
  env_.advance(seconds(5));
  proto::AdminRequest as_written = lamp_on();
  as_written.mutable_device_set()->set_ignore_preconditions(true);
  response = ask(2, as_written);
  ASSERT_TRUE(response.has_value() && response->has_device_set());
  EXPECT_EQ(response->device_set().status(), "ok") << response->device_set().detail();
  EXPECT_TRUE(response->device_set().combo().empty());
  EXPECT_EQ(lamp_.state().at("power"), routine::Value(true));
  EXPECT_EQ(hall_.state().at("power"), routine::Value(true));
}

// A combo whose subject fails is aborted: its precondition command is
// undone, and the answer says what failed and what was undone.
TEST_F(AdminDevicesWithRulesTest, AComboWhoseSubjectFailsRollsBackItsPreconditions) {
  hall_.set_state({{"power", true}, {"brightness", 80.0}});
  lamp_.set_up(false);
  env_.advance(seconds(5));
  proto::AdminRequest set = lamp_on();
  set.mutable_device_set()->set_lock_strategy("ola");
  auto response = ask(2, set, seconds(40));
  ASSERT_TRUE(response.has_value());
  ASSERT_TRUE(response->has_device_set()) << response->error();
  const proto::DeviceSetReply& reply = response->device_set();
  EXPECT_EQ(reply.status(), "aborted") << reply.detail();
  EXPECT_EQ(reply.invocation().adhoc().lock_strategy(), "ola");
  EXPECT_THAT(reply.detail(), HasSubstr("command 2 (lamp) failed"));
  EXPECT_THAT(reply.detail(), HasSubstr("undone: command 1"));
  ASSERT_EQ(reply.combo_commands_size(), 2);
  EXPECT_EQ(reply.combo_commands(0), "hall power=off (precondition: lamp_needs_hall_off): ok, undone");
  EXPECT_THAT(reply.combo_commands(1), HasSubstr("lamp power=on (subject): "));
  EXPECT_EQ(hall_.state().at("power"), routine::Value(true));
  EXPECT_TRUE(lamp_.actuations().empty());

  set.mutable_device_set()->set_lock_strategy("fastest");
  response = ask(1, set, milliseconds(1));
  ASSERT_TRUE(response.has_value() && response->has_device_set());
  EXPECT_EQ(response->device_set().status(), "refused");
  EXPECT_THAT(response->device_set().detail(), HasSubstr("unknown lock strategy 'fastest'"));
}

// A routine runs the precondition commands of its commands first, and its
// history says which ran and why.
TEST_F(AdminDevicesWithRulesTest, ARoutineRunsItsPreconditionCommandsFirst) {
  proto::AdminRequest add;
  add.mutable_routine_add()->set_catalog(
      "[[routine]]\nid = \"lamp_on\"\ntrigger = \"manual\"\n"
      "[[routine.command]]\ndevice = \"lamp\"\nset = { power = \"on\" }\n");
  add.mutable_routine_add()->set_source("routines.toml");
  auto response = ask(1, add);
  ASSERT_TRUE(response && response->has_routine_add()) << (response ? response->error() : "no answer");
  env_.advance(seconds(20));  // the routine group is created
  hall_.set_state({{"power", true}, {"brightness", 80.0}});
  env_.advance(seconds(5));  // and the hall's leader has seen it on

  proto::AdminRequest run;
  run.mutable_routine_run()->set_id("lamp_on");
  run.mutable_routine_run()->set_wait(true);
  response = ask(2, run, seconds(30));
  ASSERT_TRUE(response && response->has_routine_run()) << (response ? response->error() : "no answer");
  const proto::InvocationMsg& invocation = response->routine_run().invocation();
  EXPECT_EQ(invocation.outcome(), proto::INVOCATION_OK) << invocation.detail();
  ASSERT_TRUE(invocation.has_plan());
  ASSERT_EQ(invocation.plan().commands_size(), 1);
  EXPECT_EQ(invocation.plan().commands(0).device(), "hall");
  ASSERT_EQ(invocation.commands_size(), 2);
  // The hall went off before the lamp came on.
  ASSERT_EQ(hall_.actuations().size(), 1u);
  ASSERT_EQ(lamp_.actuations().size(), 1u);
  EXPECT_LT(hall_.actuations()[0].at, lamp_.actuations()[0].at);
  EXPECT_EQ(hall_.state().at("power"), routine::Value(false));
  EXPECT_EQ(lamp_.state().at("power"), routine::Value(true));

  proto::AdminRequest list;
  list.mutable_routines()->add_ids("lamp_on");
  response = ask(1, list, seconds(5));
  ASSERT_TRUE(response && response->has_routines()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->routines().routines_size(), 1);
  const proto::RoutineRow& row = response->routines().routines(0);
  ASSERT_EQ(row.combos_size(), 1);
  ASSERT_EQ(row.combos(0).commands_size(), 2);
  EXPECT_EQ(row.combos(0).commands(0),
            "hall power=off (precondition of routine command 1, lamp power=on: lamp_needs_hall_off)");
  EXPECT_EQ(row.combos(0).commands(1), "lamp power=on");
}

}  // namespace
}  // namespace mesh::agent
