// The precondition commands of the admin protocol on three nodes in a line
// (1 - 2 - 3, k = 2, so at least one node learns the catalog by gossip):
// rules added through the catalog group reach every node and are listed;
// plan shows the graph and the combo of a device command and of a
// routine's commands from the rules and the devices' current states
// without actuating anything; unknown devices, conflicting rules and
// removals that would orphan a rule are refused with their reasons.
#include <memory>
#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/admin_service.h"
#include "routine/emulated_device.h"
#include "tests/agent/test_world.h"

namespace mesh::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ip;
using testing::LinkGraph;
using testing::ManualEnv;
using testing::test_config;

// sprinkler.power == on needs both outlets off; outlet_1 goes off only
// when nobody is in the hall (a reading: checked, never set).
constexpr std::string_view kRules =
    "[[precondition]]\nid = \"sprinkler_needs_outlets_off\"\nwhen = \"sprinkler.power == on\"\n"
    "requires = [\"outlet_1.power == off\", \"outlet_2.power == off\"]\n"
    "[[precondition]]\nid = \"outlet_1_off_when_hall_empty\"\nwhen = \"outlet_1.power == off\"\n"
    "requires = [\"hall_motion.motion == off\"]\n";

routine::DeviceSpec emulated_spec(const std::string& id, routine::DeviceKind kind) {
  routine::DeviceSpec s;
  s.id = id;
  s.kind = kind;
  s.driver = "emulated://" + id;
  return s;
}

class AdminPreconditionsTest : public ::testing::Test {
 protected:
  AdminPreconditionsTest() : graph_(env_) {
    graph_.connect(ip(1), ip(2), milliseconds(4), milliseconds(6));
    graph_.connect(ip(2), ip(3), milliseconds(5), milliseconds(3));
    for (uint8_t last : {1, 2, 3}) {
      auto& factory = factories_[last];
      factory = std::make_unique<routine::EmulatedDriverFactory>(env_);
      for (auto* device : {&sprinkler_, &outlet_1_, &outlet_2_, &hall_motion_}) factory->add(*device);
      NodeConfig config = test_config(last);
      config.kgroup.selection.k = 2;
      config.devices.catalog = {sprinkler_.spec(), outlet_1_.spec(), outlet_2_.spec(), hall_motion_.spec()};
      config.devices.service.ensure_quiet = seconds(1);
      config.devices.service.ensure_interval = milliseconds(500);
      core::Link& link = graph_.add(ip(last));
      nodes_[last] = std::make_unique<Node>(
          config, NodeContext{env_, link, graph_.add_routing(ip(last)), storage_[last], factory.get()});
      nodes_[last]->start();
      services_[last] = std::make_unique<AdminService>(*nodes_[last]);
    }
    env_.advance(seconds(5));
  }

  std::optional<proto::AdminResponse> ask(uint8_t node, const proto::AdminRequest& request,
                                          core::Duration run = seconds(12)) {
    std::optional<proto::AdminResponse> response;
    int replies = 0;
    services_[node]->handle(
        request,
        [&](proto::AdminResponse r) {
          response = std::move(r);
          ++replies;
        },
        0);
    env_.advance(run);
    EXPECT_LE(replies, 1) << "answered twice";
    return response;
  }

  static proto::AdminRequest add(std::string_view catalog) {
    proto::AdminRequest request;
    request.mutable_precondition_add()->set_catalog(std::string(catalog));
    request.mutable_precondition_add()->set_source("rules.toml");
    return request;
  }

  static proto::AdminRequest plan_device(const std::string& id, std::vector<std::string> assignments) {
    proto::AdminRequest request;
    request.mutable_plan()->mutable_device()->set_id(id);
    for (auto& a : assignments) request.mutable_plan()->mutable_device()->add_assignments(std::move(a));
    return request;
  }

  size_t actuations() const {
    return sprinkler_.actuations().size() + outlet_1_.actuations().size() + outlet_2_.actuations().size();
  }

  ManualEnv env_;
  LinkGraph graph_;
  routine::EmulatedDevice sprinkler_{emulated_spec("sprinkler", routine::DeviceKind::switch_), {{"power", false}}};
  routine::EmulatedDevice outlet_1_{emulated_spec("outlet_1", routine::DeviceKind::plug), {{"power", true}}};
  routine::EmulatedDevice outlet_2_{emulated_spec("outlet_2", routine::DeviceKind::plug), {{"power", false}}};
  routine::EmulatedDevice hall_motion_{emulated_spec("hall_motion", routine::DeviceKind::motion_sensor),
                                       {{"motion", false}}};
  std::map<uint8_t, std::unique_ptr<routine::EmulatedDriverFactory>> factories_;
  std::map<uint8_t, core::MemoryStorage> storage_;
  std::map<uint8_t, std::unique_ptr<Node>> nodes_;
  std::map<uint8_t, std::unique_ptr<AdminService>> services_;
};

TEST_F(AdminPreconditionsTest, AddListPlanRemove) {
  auto response = ask(1, add(kRules));
  ASSERT_TRUE(response && response->has_precondition_add()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->precondition_add().verdicts_size(), 2);
  for (const auto& v : response->precondition_add().verdicts()) {
    EXPECT_FALSE(v.refused()) << v.id() << ": " << v.detail();
    EXPECT_GE(v.version(), 1u);
  }
  env_.advance(seconds(20));  // every node learns the rules; device groups observe their devices
  for (uint8_t last : {1, 2, 3}) {
    EXPECT_EQ(nodes_[last]->catalog().precondition_rules().size(), 2u) << "node " << int(last);
  }

  proto::AdminRequest list;
  list.mutable_preconditions();
  response = ask(3, list, seconds(1));
  ASSERT_TRUE(response && response->has_preconditions()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->preconditions().rules_size(), 2);
  const proto::PreconditionRow& outlet_rule = response->preconditions().rules(0);
  EXPECT_EQ(outlet_rule.id(), "outlet_1_off_when_hall_empty");
  EXPECT_EQ(outlet_rule.when(), "outlet_1.power == off");
  EXPECT_THAT(outlet_rule.requirements(), ElementsAre("hall_motion.motion == off"));
  EXPECT_FALSE(outlet_rule.in_file());
  EXPECT_TRUE(outlet_rule.problem().empty());
  EXPECT_EQ(response->preconditions().rules(1).id(), "sprinkler_needs_outlets_off");

  response = ask(3, plan_device("sprinkler", {"power=on"}), seconds(6));
  ASSERT_TRUE(response && response->has_plan()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->plan().plans_size(), 1);
  const proto::CommandPlanMsg& plan = response->plan().plans(0);
  EXPECT_TRUE(plan.error().empty()) << plan.error();
  EXPECT_EQ(plan.command(), "sprinkler power=on");
  EXPECT_EQ(plan.subject(), "sprinkler.power == on");
  ASSERT_EQ(plan.vertices_size(), 4);
  EXPECT_EQ(plan.vertices(3).condition(), "hall_motion.motion == off");
  EXPECT_THAT(plan.vertices(3).required_by(), ElementsAre("outlet_1_off_when_hall_empty"));
  EXPECT_EQ(plan.depth(), 3u);
  ASSERT_EQ(plan.stages_size(), 3);
  // Stage 1: outlet_2 is already off, and nobody is in the hall (a
  // reading, known false): both held; stage 2: outlet_1 is on and is
  // switched off; stage 3: the command itself.
  ASSERT_EQ(plan.stages(0).steps_size(), 2);
  EXPECT_EQ(plan.stages(0).steps(0).action(), "hold");
  EXPECT_EQ(plan.stages(0).steps(0).device(), "outlet_2");
  EXPECT_EQ(plan.stages(0).steps(1).action(), "hold");
  EXPECT_EQ(plan.stages(0).steps(1).device(), "hall_motion");
  EXPECT_THAT(plan.stages(0).steps(1).rules(), ElementsAre("outlet_1_off_when_hall_empty"));
  ASSERT_EQ(plan.stages(1).steps_size(), 1);
  EXPECT_EQ(plan.stages(1).steps(0).action(), "set");
  EXPECT_EQ(plan.stages(1).steps(0).device(), "outlet_1");
  EXPECT_EQ(plan.stages(1).steps(0).value(), "off");
  EXPECT_THAT(plan.stages(1).steps(0).rules(), ElementsAre("sprinkler_needs_outlets_off"));
  EXPECT_THAT(plan.stages(1).steps(0).after(), ElementsAre(3u));
  ASSERT_EQ(plan.stages(2).steps_size(), 1);
  EXPECT_TRUE(plan.stages(2).steps(0).subject());
  EXPECT_EQ(plan.stages(2).steps(0).value(), "on");
  EXPECT_EQ(plan.command_count(), 2u);
  EXPECT_TRUE(response->plan().notes().empty()) << response->plan().notes(0);
  EXPECT_EQ(actuations(), 0u);  // a plan runs nothing

  // A routine's commands are planned in order.
  proto::AdminRequest routine_add;
  routine_add.mutable_routine_add()->set_catalog(
      "[[routine]]\nid = \"water\"\ntrigger = \"manual\"\n"
      "[[routine.command]]\ndevice = \"outlet_2\"\nset = { power = \"off\" }\n"
      "[[routine.command]]\ndevice = \"sprinkler\"\nset = { power = \"on\" }\n");
  response = ask(1, routine_add, seconds(5));
  ASSERT_TRUE(response && response->has_routine_add()) << (response ? response->error() : "no answer");
  env_.advance(seconds(5));
  proto::AdminRequest plan_routine;
  plan_routine.mutable_plan()->set_routine("water");
  response = ask(2, plan_routine, seconds(6));
  ASSERT_TRUE(response && response->has_plan()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->plan().plans_size(), 2);
  EXPECT_EQ(response->plan().plans(0).command(), "outlet_2 power=off");
  EXPECT_EQ(response->plan().plans(0).vertices_size(), 1);  // no rule guards it
  EXPECT_EQ(response->plan().plans(1).command(), "sprinkler power=on");
  EXPECT_EQ(response->plan().plans(1).vertices_size(), 4);

  // A device a rule names cannot be removed; the rule can.
  proto::AdminRequest remove_device;
  remove_device.mutable_device_remove()->set_id("outlet_1");
  response = ask(1, remove_device, seconds(3));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(),
              HasSubstr("device outlet_1 is named by precondition rule outlet_1_off_when_hall_empty; "
                        "change or remove the rule first"));
  proto::AdminRequest remove;
  remove.mutable_precondition_remove()->set_id("outlet_1_off_when_hall_empty");
  response = ask(2, remove, seconds(3));
  ASSERT_TRUE(response && response->has_precondition_remove()) << (response ? response->error() : "no answer");
  EXPECT_FALSE(response->precondition_remove().verdict().refused())
      << response->precondition_remove().verdict().detail();
  env_.advance(seconds(10));
  for (uint8_t last : {1, 2, 3}) {
    EXPECT_EQ(nodes_[last]->catalog().find_precondition("outlet_1_off_when_hall_empty"), nullptr);
    EXPECT_NE(nodes_[last]->catalog().find_precondition("sprinkler_needs_outlets_off"), nullptr);
  }
  EXPECT_EQ(actuations(), 0u);
}

TEST_F(AdminPreconditionsTest, MistakesAndConflictsSayWhatIsWrong) {
  auto response = ask(1,
                      add("[[precondition]]\nid = \"r\"\nwhen = \"sprinkler.power == on\"\n"
                          "requires = [\"outlet_9.power == off\"]\n"),
                      milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("rules.toml:4: precondition r.requires[1]: column 1: no device outlet_9"));
  response = ask(1, add("[[device]]\nid = \"x\"\nkind = \"plug\"\nlocation = [0, 0, 0]\ndriver = \"kasa://x\"\n"),
                 milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("rules.toml defines no [[precondition]]"));

  response = ask(1, plan_device("pump", {"power=on"}), milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->error(), "no device pump in the catalog (meshctl devices lists them)");
  response = ask(1, plan_device("sprinkler", {"brightness=3"}), milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("has no attribute 'brightness'"));
  proto::AdminRequest no_routine;
  no_routine.mutable_plan()->set_routine("nothing");
  response = ask(1, no_routine, milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->error(), "no routine nothing in the catalog (meshctl routines lists them)");

  // Two rules that want outlet_1 both off and on before the sprinkler runs.
  response = ask(1, add(std::string(kRules) +
                        "[[precondition]]\nid = \"sprinkler_needs_outlet_1_on\"\nwhen = \"sprinkler.power == on\"\n"
                        "requires = [\"outlet_1.power == on\"]\n"));
  ASSERT_TRUE(response && response->has_precondition_add()) << (response ? response->error() : "no answer");
  env_.advance(seconds(10));
  response = ask(3, plan_device("sprinkler", {"power=on"}), seconds(6));
  ASSERT_TRUE(response && response->has_plan()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->plan().plans_size(), 1);
  const std::string& error = response->plan().plans(0).error();
  EXPECT_THAT(error, HasSubstr("sprinkler_needs_outlet_1_on"));
  EXPECT_THAT(error, HasSubstr("sprinkler_needs_outlets_off"));
  EXPECT_THAT(error, HasSubstr("outlet_1.power"));
  EXPECT_TRUE(response->plan().plans(0).stages().empty());

  // A rule defined differently needs --replace.
  response = ask(2,
                 add("[[precondition]]\nid = \"sprinkler_needs_outlet_1_on\"\nwhen = \"sprinkler.power == on\"\n"
                     "requires = [\"outlet_2.power == on\"]\n"),
                 seconds(3));
  ASSERT_TRUE(response && response->has_precondition_add());
  ASSERT_EQ(response->precondition_add().verdicts_size(), 1);
  EXPECT_TRUE(response->precondition_add().verdicts(0).refused());
  EXPECT_THAT(response->precondition_add().verdicts(0).detail(),
              HasSubstr("precondition rule sprinkler_needs_outlet_1_on is already defined differently"));

  proto::AdminRequest remove;
  remove.mutable_precondition_remove()->set_id("nothing");
  response = ask(1, remove, milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("no precondition rule nothing in the catalog"));
}

}  // namespace
}  // namespace mesh::agent
