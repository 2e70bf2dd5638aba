// The routine commands of the admin protocol on two nodes: routines added,
// disabled, enabled and removed through the catalog group reach both
// nodes; a routine run by hand actuates its device once and shows in the
// routines list; mistakes and conflicts come back with their reasons.
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

constexpr std::string_view kRoutines =
    "[[routine]]\nid = \"night_hall\"\ntrigger = \"hall_motion.motion == on\"\nwindow = \"22:00-06:00\"\n"
    "[[routine.command]]\ndevice = \"hall\"\nset = { power = \"on\", brightness = 30 }\nduration_s = 300\n"
    "[[routine]]\nid = \"all_off\"\ntrigger = \"manual\"\nuses = [\"pump\"]\n"
    "[[routine.command]]\ndevice = \"hall\"\nset = { power = \"off\" }\n";

routine::DeviceSpec spec(const std::string& id, routine::DeviceKind kind) {
  routine::DeviceSpec s;
  s.id = id;
  s.kind = kind;
  s.driver = "emulated://" + id;
  return s;
}

class AdminRoutinesTest : public ::testing::Test {
 protected:
  AdminRoutinesTest() : graph_(env_) {
    graph_.connect(ip(1), ip(2), milliseconds(4), milliseconds(6));
    for (uint8_t last : {1, 2}) {
      auto& factory = factories_[last];
      factory = std::make_unique<routine::EmulatedDriverFactory>(env_);
      factory->add(hall_);
      factory->add(hall_motion_);
      factory->add(fan_);
      NodeConfig config = test_config(last);
      config.kgroup.selection.k = 2;
      config.devices.catalog = {spec("hall", routine::DeviceKind::dimmer),
                                spec("hall_motion", routine::DeviceKind::motion_sensor),
                                spec("fan", routine::DeviceKind::plug)};
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

  static proto::AdminRequest add(std::string_view catalog, bool replace = false) {
    proto::AdminRequest request;
    request.mutable_routine_add()->set_catalog(std::string(catalog));
    request.mutable_routine_add()->set_source("routines.toml");
    request.mutable_routine_add()->set_replace(replace);
    return request;
  }

  static proto::AdminRequest enable(const std::string& id, bool enabled) {
    proto::AdminRequest request;
    request.mutable_routine_enable()->set_id(id);
    request.mutable_routine_enable()->set_enabled(enabled);
    return request;
  }

  ManualEnv env_;
  LinkGraph graph_;
  routine::EmulatedDevice hall_{spec("hall", routine::DeviceKind::dimmer), {{"power", false}, {"brightness", 50.0}}};
  routine::EmulatedDevice hall_motion_{spec("hall_motion", routine::DeviceKind::motion_sensor), {{"motion", false}}};
  routine::EmulatedDevice fan_{spec("fan", routine::DeviceKind::plug), {{"power", false}}};
  std::map<uint8_t, std::unique_ptr<routine::EmulatedDriverFactory>> factories_;
  std::map<uint8_t, core::MemoryStorage> storage_;
  std::map<uint8_t, std::unique_ptr<Node>> nodes_;
  std::map<uint8_t, std::unique_ptr<AdminService>> services_;
};

TEST_F(AdminRoutinesTest, AddDisableEnableRemove) {
  auto response = ask(1, add(kRoutines));
  ASSERT_TRUE(response && response->has_routine_add()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->routine_add().verdicts_size(), 2);
  for (const auto& v : response->routine_add().verdicts()) {
    EXPECT_FALSE(v.refused()) << v.id() << ": " << v.detail();
    EXPECT_GE(v.version(), 1u);
  }
  env_.advance(seconds(10));
  const routine::RoutineSpec* night = nodes_[2]->catalog().find_routine("night_hall");
  ASSERT_NE(night, nullptr);
  EXPECT_TRUE(night->enabled);
  EXPECT_EQ(night->commands.at(0).duration, seconds(300));
  EXPECT_NE(nodes_[2]->catalog().find_routine("all_off"), nullptr);

  response = ask(2, enable("night_hall", false), seconds(3));
  ASSERT_TRUE(response && response->has_routine_enable()) << (response ? response->error() : "no answer");
  EXPECT_FALSE(response->routine_enable().verdict().refused()) << response->routine_enable().verdict().detail();
  env_.advance(seconds(10));
  EXPECT_FALSE(nodes_[1]->catalog().find_routine("night_hall")->enabled);
  response = ask(1, enable("night_hall", true), seconds(3));
  ASSERT_TRUE(response && response->has_routine_enable());
  env_.advance(seconds(10));
  EXPECT_TRUE(nodes_[2]->catalog().find_routine("night_hall")->enabled);

  // A device a routine uses cannot be removed; the routine can.
  proto::AdminRequest remove_device;
  remove_device.mutable_device_remove()->set_id("hall");
  response = ask(1, remove_device, seconds(3));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("device hall is used by routine all_off"));

  proto::AdminRequest remove;
  remove.mutable_routine_remove()->set_id("all_off");
  response = ask(2, remove, seconds(3));
  ASSERT_TRUE(response && response->has_routine_remove()) << (response ? response->error() : "no answer");
  EXPECT_FALSE(response->routine_remove().verdict().refused()) << response->routine_remove().verdict().detail();
  env_.advance(seconds(10));
  EXPECT_EQ(nodes_[1]->catalog().find_routine("all_off"), nullptr);
  EXPECT_NE(nodes_[1]->catalog().find_routine("night_hall"), nullptr);
}

TEST_F(AdminRoutinesTest, RunListAndHistory) {
  auto response = ask(1, add(kRoutines));
  ASSERT_TRUE(response && response->has_routine_add()) << (response ? response->error() : "no answer");
  env_.advance(seconds(20));  // the routine groups are created

  proto::AdminRequest run;
  run.mutable_routine_run()->set_id("all_off");
  run.mutable_routine_run()->set_wait(true);
  hall_.set_state({{"power", true}, {"brightness", 80.0}});
  response = ask(2, run, seconds(20));
  ASSERT_TRUE(response && response->has_routine_run()) << (response ? response->error() : "no answer");
  const proto::InvocationMsg& invocation = response->routine_run().invocation();
  EXPECT_EQ(invocation.phase(), proto::PHASE_DONE);
  EXPECT_EQ(invocation.outcome(), proto::INVOCATION_OK) << invocation.detail();
  EXPECT_TRUE(invocation.manual());
  // Its resource was taken with Camera, and the grant recorded.
  ASSERT_EQ(invocation.resources_size(), 1);
  EXPECT_EQ(invocation.resources(0).resource(), "pump");
  EXPECT_GT(invocation.resources(0).token(), 0u);
  EXPECT_TRUE(invocation.resources(0).holder() == ip(1).value() || invocation.resources(0).holder() == ip(2).value());
  EXPECT_EQ(std::get<bool>(hall_.state().at("power")), false);
  ASSERT_EQ(hall_.actuations().size(), 1u);
  EXPECT_EQ(hall_.actuations()[0].command_id, routine::command_id("all_off", routine::from_proto(invocation), 0));

  proto::AdminRequest list;
  list.mutable_routines();
  response = ask(1, list, seconds(5));
  ASSERT_TRUE(response && response->has_routines()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->routines().routines_size(), 2);
  const proto::RoutineRow& all_off = response->routines().routines(0);
  EXPECT_EQ(all_off.id(), "all_off");
  // EV by default: serial keys order the locks.
  EXPECT_EQ(all_off.lock(), "serial key (tl)");
  EXPECT_EQ(all_off.visibility(), "ev");
  EXPECT_GT(invocation.serial_key_us(), 0);
  EXPECT_GT(invocation.placed_at_us(), 0);
  ASSERT_EQ(all_off.uses_size(), 1);
  EXPECT_EQ(all_off.uses(0), "pump");
  EXPECT_EQ(all_off.commands(0), "hall power=off");
  EXPECT_TRUE(all_off.error().empty()) << all_off.error();
  ASSERT_EQ(all_off.invocations_size(), 1);
  EXPECT_EQ(all_off.invocations(0).commands(0).status(), proto::COMMAND_OK);
  // It ran every command: every SafeHome metric is known.
  ASSERT_EQ(all_off.metrics_size(), 1);
  const proto::InvocationMetricsMsg& metrics = all_off.metrics(0);
  EXPECT_EQ(metrics.seq(), all_off.invocations(0).seq());
  EXPECT_TRUE(metrics.has_wait_us());
  ASSERT_TRUE(metrics.has_end_to_end_us() && metrics.has_back_to_back_us() && metrics.has_latency_overhead());
  EXPECT_LE(metrics.back_to_back_us(), metrics.end_to_end_us());
  EXPECT_EQ(metrics.rollback_commands(), 0u);
  const proto::RoutineRow& night = response->routines().routines(1);
  EXPECT_EQ(night.trigger(), "hall_motion.motion == on during 22:00-06:00");
  EXPECT_EQ(night.commands(0), "hall brightness=30 power=on for 300 s");

  proto::AdminRequest unknown;
  unknown.mutable_routine_run()->set_id("nothing");
  response = ask(1, unknown, seconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("no routine nothing in the catalog"));
}

// SafeHome §2.2: a rollback sets the user's undo value where the command
// gives one (brightness), and the state before for the rest of what the
// command set (power).
TEST_F(AdminRoutinesTest, ARollbackSetsTheUsersUndoValues) {
  constexpr std::string_view kDimThenFan =
      "[[routine]]\nid = \"dim_then_fan\"\ntrigger = \"manual\"\n"
      "[[routine.command]]\ndevice = \"hall\"\nset = { power = \"on\", brightness = 90 }\n"
      "undo = { brightness = 10 }\n"
      "[[routine.command]]\ndevice = \"fan\"\nset = { power = \"on\" }\n";
  auto response = ask(1, add(kDimThenFan));
  ASSERT_TRUE(response && response->has_routine_add()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->routine_add().verdicts_size(), 1);
  EXPECT_FALSE(response->routine_add().verdicts(0).refused()) << response->routine_add().verdicts(0).detail();
  env_.advance(seconds(20));

  fan_.set_up(false);  // the must command on the fan fails
  proto::AdminRequest run;
  run.mutable_routine_run()->set_id("dim_then_fan");
  run.mutable_routine_run()->set_wait(true);
  response = ask(2, run, seconds(40));
  ASSERT_TRUE(response && response->has_routine_run()) << (response ? response->error() : "no answer");
  const proto::InvocationMsg& invocation = response->routine_run().invocation();
  EXPECT_EQ(invocation.outcome(), proto::INVOCATION_ABORTED) << invocation.detail();
  // The fan command timed out (its outcome unknown), so it is undone too
  // (and fails again); the hall command's undo ran.
  ASSERT_EQ(invocation.undone_size(), 2);
  EXPECT_EQ(invocation.undone(0).index(), 0u);
  EXPECT_EQ(invocation.undone(0).status(), proto::COMMAND_OK) << invocation.undone(0).detail();

  ASSERT_EQ(hall_.actuations().size(), 2u);
  EXPECT_EQ(hall_.actuations()[1].command_id,
            routine::undo_command_id("dim_then_fan", routine::from_proto(invocation), 0));
  EXPECT_EQ(hall_.actuations()[1].values, (routine::Attributes{{"power", false}, {"brightness", 10.0}}));
  EXPECT_EQ(hall_.state().at("brightness"), routine::Value{10.0});
  EXPECT_EQ(hall_.state().at("power"), routine::Value{false});

  proto::AdminRequest list;
  list.mutable_routines()->add_ids("dim_then_fan");
  response = ask(1, list, seconds(5));
  ASSERT_TRUE(response && response->has_routines()) << (response ? response->error() : "no answer");
  ASSERT_EQ(response->routines().routines_size(), 1);
  const proto::RoutineRow& row = response->routines().routines(0);
  EXPECT_EQ(row.commands(0), "hall brightness=90 power=on undo brightness=10");
  // Aborted: no ideal run (it did not run the routine); both undos count.
  ASSERT_EQ(row.metrics_size(), 1);
  EXPECT_TRUE(row.metrics(0).has_end_to_end_us());
  EXPECT_FALSE(row.metrics(0).has_back_to_back_us());
  EXPECT_FALSE(row.metrics(0).has_latency_overhead());
  EXPECT_EQ(row.metrics(0).rollback_commands(), 2u);
  // The leader that ended it recorded its latencies.
  uint64_t ended = 0;
  for (uint8_t last : {1, 2}) ended += nodes_[last]->metrics().histogram("routine_end_to_end_ms").count();
  EXPECT_EQ(ended, 1u);
}

TEST_F(AdminRoutinesTest, MistakesAndConflictsSayWhatIsWrong) {
  auto response = ask(1, add("[[routine]]\nid = \"r\"\ntrigger = \"hall_motion.motion >= \"\n"), milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("routines.toml:3: routine r.trigger: trigger:1:23: expected a value after "
                                           "'>='"));
  response = ask(1, add("[[device]]\nid = \"x\"\nkind = \"plug\"\nlocation = [0, 0, 0]\ndriver = \"kasa://x\"\n"),
                 milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("routines.toml defines no [[routine]]"));

  response = ask(1, add(kRoutines));
  ASSERT_TRUE(response && response->has_routine_add());
  env_.advance(seconds(5));
  const std::string changed =
      "[[routine]]\nid = \"all_off\"\ntrigger = \"manual\"\nuses = [\"pump\"]\n"
      "[[routine.command]]\ndevice = \"hall\"\nset = { brightness = 0 }\n";
  response = ask(2, add(changed), seconds(3));
  ASSERT_TRUE(response && response->has_routine_add());
  ASSERT_EQ(response->routine_add().verdicts_size(), 1);
  EXPECT_TRUE(response->routine_add().verdicts(0).refused());
  EXPECT_THAT(response->routine_add().verdicts(0).detail(), HasSubstr("routine all_off is already defined differently"));
  response = ask(2, add(changed, true), seconds(3));
  ASSERT_TRUE(response && response->has_routine_add());
  EXPECT_FALSE(response->routine_add().verdicts(0).refused()) << response->routine_add().verdicts(0).detail();

  response = ask(1, enable("nothing", false), seconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("no routine nothing in the catalog"));
}

}  // namespace
}  // namespace mesh::agent
