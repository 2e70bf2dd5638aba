// The SafeHome workload file (sim/routine_workload.h): fixed workloads and
// the generator section parse, bad input is refused with file:line, key
// and fix, and the generator is deterministic per seed, skews device
// popularity with zipf and spreads arrivals so the load is 1 / shrink.
#include "sim/routine_workload.h"

#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/sim/workload_error_of.h"

namespace mesh::sim {
namespace {

constexpr const char* kFixed = R"(
[[device]]
id = "hall"
kind = "dimmer"

[[device]]
id = "door"
kind = "lock"
initial = { locked = true }

[[routine]]
id = "leave"
at_ms = [500, 90000]
[[routine.command]]
device = "hall"
set = { power = "off", brightness = 0 }
duration_ms = 2000
[[routine.command]]
device = "door"
set = { locked = true }
must = false

[[routine]]
id = "arrive"
at_ms = 1000
[[routine.command]]
device = "hall"
set = { power = true, brightness = 80 }
)";

TEST(RoutineWorkload, ParsesAFixedWorkload) {
  const WorkloadFile file = parse_workload(kFixed, "w.toml");
  const Workload w = instantiate(file, 1);
  ASSERT_EQ(w.devices.size(), 2u);
  EXPECT_EQ(std::get<bool>(w.devices[1].initial.at("locked")), true);
  EXPECT_EQ(std::get<double>(w.devices[0].initial.at("brightness")), 0.0);
  ASSERT_EQ(w.routines.size(), 2u);
  ASSERT_EQ(w.routines[0].commands.size(), 2u);
  EXPECT_EQ(w.routines[0].commands[0].duration, std::chrono::milliseconds(2000));
  EXPECT_FALSE(w.routines[0].commands[1].must);
  EXPECT_EQ(std::get<bool>(w.routines[0].commands[0].values.at("power")), false);
  EXPECT_EQ(std::get<double>(w.routines[1].commands[0].values.at("brightness")), 80.0);
  // Arrivals by time: leave at 0.5 s, arrive at 1 s, leave again at 90 s.
  ASSERT_EQ(w.arrivals.size(), 3u);
  EXPECT_EQ(w.arrivals[0].routine, 0u);
  EXPECT_EQ(w.arrivals[1].routine, 1u);
  EXPECT_EQ(w.arrivals[2].at, std::chrono::milliseconds(90000));
  EXPECT_EQ(back_to_back(w.routines[0]), std::chrono::milliseconds(2000));
}

TEST(RoutineWorkload, RefusesBadInputNamingLineKeyAndFix) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"[generator]\nroutines = 0\n",
       "w.toml:2:12: generator.routines: 0 is out of range; use an integer in [1, 1000]"},
      {"[generator]\nspeed = 1\n", "w.toml:2:1: generator.speed: unknown key; remove it or use one of: routines"},
      {"[generator]\ndevice_failure_ratio = 1.5\n", "generator.device_failure_ratio: 1.5 is out of range"},
      {std::string(kFixed) + "[[failure]]\ndevice = \"attic\"\nat_ms = 5\n",
       "failure[0].device: no [[device]] has id \"attic\""},
      {std::string(kFixed) + "[[failure]]\ndevice = \"hall\"\n", "failure[0].at_ms: missing"},
      {"[generator]\n[[failure]]\ndevice = \"a\"\nat_ms = 1\n", "failure: given together with [generator]"},
      {"[generator]\nload = 2\nshrink = 0.5\n", "generator.shrink: given together with load"},
      {"[generator]\ndevices = 2\ncommands_max = 3\n", "generator.commands_max: 3 exceeds devices = 2"},
      {"[generator]\ncommands_min = 4\ncommands_max = 2\n", "generator.commands_max: 2 is below commands_min"},
      {"[generator]\n[[device]]\nid = \"a\"\nkind = \"plug\"\n", "device: given together with [generator]"},
      {"[[device]]\nid = \"a\"\nkind = \"plug\"\n", "w.toml:1:1: routine: missing; give [[routine]] tables"},
      {"[[device]]\nid = \"a\"\nkind = \"motion_sensor\"\n",
       "device[0].kind: \"motion_sensor\" is not a kind a routine"},
      {"[[device]]\nid = \"A b\"\nkind = \"plug\"\n", "device[0].id:"},
      {std::string(kFixed) + "[[device]]\nid = \"hall\"\nkind = \"plug\"\n", "\"hall\" is declared twice"},
      {"[[device]]\nid = \"a\"\nkind = \"plug\"\n[[routine]]\nid = \"r\"\nat_ms = 1\n[[routine.command]]\n"
       "device = \"b\"\nset = { power = \"on\" }\n",
       "w.toml:8:10: routine[0].command[0].device: no [[device]] has id \"b\""},
      {"[[device]]\nid = \"a\"\nkind = \"dimmer\"\n[[routine]]\nid = \"r\"\nat_ms = 1\n[[routine.command]]\n"
       "device = \"a\"\nset = { brightness = 150 }\n",
       "routine[0].command[0].set: device a: brightness=150"},
      {"[[device]]\nid = \"a\"\nkind = \"plug\"\n[[routine]]\nid = \"r\"\nat_ms = 1\n[[routine.command]]\n"
       "device = \"a\"\nset = { colour = 1 }\n",
       "routine[0].command[0].set.colour: plug has no writable attribute colour; use one of: power"},
      {"[[device]]\nid = \"a\"\nkind = \"plug\"\n[[routine]]\nid = \"r\"\nat_ms = -1\n[[routine.command]]\n"
       "device = \"a\"\nset = { power = \"on\" }\n",
       "routine[0].at_ms: -1 is out of range"},
      {"[[device]]\nid = \"a\"\nkind = \"plug\"\n[[routine]]\nid = \"r\"\n[[routine.command]]\n"
       "device = \"a\"\nset = { power = \"on\" }\n",
       "routine[0].at_ms: missing key; add at_ms = 1500"},
      {"[[device]]\nid = \"a\"\nkind = \"plug\"\n[[routine]]\nid = \"r\"\nat_ms = 1\n[[routine.command]]\n"
       "device = \"a\"\nset = { power = \"on\" }\n[[routine.command]]\ndevice = \"a\"\nset = { power = \"off\" }\n",
       "the routine already commands \"a\""},
      {"[generator\n", "w.toml:1:"},
  };
  for (const Case& c : cases) {
    const std::string error = workload_error_of(c.text);
    EXPECT_NE(error.find(c.expected), std::string::npos) << "input:\n" << c.text << "\nerror: " << error;
  }
}

WorkloadGenerator small_generator() {
  WorkloadGenerator g;
  g.routines = 400;
  g.devices = 10;
  g.commands_min = 1;
  g.commands_max = 3;
  g.short_duration = std::chrono::milliseconds(100);
  g.long_duration = std::chrono::milliseconds(2000);
  g.long_share = 0.5;
  return g;
}

TEST(RoutineWorkload, GeneratorIsDeterministicPerSeed) {
  const WorkloadGenerator g = small_generator();
  const Workload a = generate_workload(g, 7);
  const Workload b = generate_workload(g, 7);
  const Workload c = generate_workload(g, 8);
  auto fingerprint = [](const Workload& w) {
    std::string out;
    for (const auto& arrival : w.arrivals) {
      out += std::to_string(arrival.at.count()) + ":" + w.routines[arrival.routine].id + "[";
      for (const auto& command : w.routines[arrival.routine].commands) {
        out += command.device + "=" + std::to_string(std::get<double>(command.values.at("brightness"))) + "/" +
               std::to_string(command.duration.count()) + ",";
      }
      out += "]";
    }
    return out;
  };
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  EXPECT_NE(fingerprint(a), fingerprint(c));
  // The workload's own seed overrides the run seed.
  WorkloadFile file;
  WorkloadGenerator fixed = g;
  fixed.seed = 7;
  file.content = fixed;
  EXPECT_EQ(fingerprint(instantiate(file, 99)), fingerprint(a));
  // Commands within bounds, distinct devices, named in arrival order.
  for (size_t i = 0; i < a.routines.size(); ++i) {
    const auto& r = a.routines[i];
    EXPECT_GE(r.commands.size(), 1u);
    EXPECT_LE(r.commands.size(), 3u);
    std::set<std::string> used;
    for (const auto& command : r.commands) EXPECT_TRUE(used.insert(command.device).second);
    EXPECT_EQ(a.arrivals[i].routine, i);
    if (i > 0) {
      EXPECT_LE(a.arrivals[i - 1].at, a.arrivals[i].at);
    }
  }
}

std::map<std::string, int> device_uses(const Workload& w) {
  std::map<std::string, int> uses;
  for (const auto& r : w.routines) {
    for (const auto& command : r.commands) ++uses[command.device];
  }
  return uses;
}

TEST(RoutineWorkload, FailuresKeepTheRoutinesAndHitCommandedDevicesAtOneInstant) {
  WorkloadGenerator g;
  g.routines = 40;
  g.devices = 30;
  g.commands_max = 2;
  const Workload healthy = generate_workload(g, 7);
  EXPECT_TRUE(healthy.failures.empty());
  g.device_failure_ratio = 0.5;
  const Workload failing = generate_workload(g, 7);
  // The same routines and arrivals whatever the ratio, so ratios compare.
  ASSERT_EQ(failing.arrivals.size(), healthy.arrivals.size());
  for (size_t i = 0; i < healthy.arrivals.size(); ++i) EXPECT_EQ(failing.arrivals[i].at, healthy.arrivals[i].at);
  ASSERT_FALSE(failing.failures.empty());
  std::set<std::string> commanded;
  for (const auto& r : failing.routines) {
    for (const auto& c : r.commands) commanded.insert(c.device);
  }
  EXPECT_LT(failing.failures.size(), commanded.size());  // about half of them
  for (const auto& f : failing.failures) {
    EXPECT_EQ(f.at, failing.failures.front().at);
    EXPECT_FALSE(f.down_for);  // for good, as the authors' simulator
    EXPECT_EQ(commanded.count(failing.devices[f.device].id), 1u);
  }
  g.device_failure_ratio = 1.0;
  EXPECT_EQ(generate_workload(g, 7).failures.size(), commanded.size());
}

TEST(RoutineWorkload, ParsesFixedFailures) {
  const Workload w = std::get<Workload>(
      parse_workload(std::string(kFixed) + "[[failure]]\ndevice = \"hall\"\nat_ms = 9000\ndown_ms = 2000\n"
                                           "[[failure]]\ndevice = \"hall\"\nat_ms = 100\n",
                     "w.toml")
          .content);
  ASSERT_EQ(w.failures.size(), 2u);
  EXPECT_EQ(w.failures[0].at, std::chrono::milliseconds(100));  // by time
  EXPECT_FALSE(w.failures[0].down_for);
  EXPECT_EQ(w.failures[1].down_for, std::optional<core::Duration>(std::chrono::milliseconds(2000)));
  EXPECT_EQ(w.devices[w.failures[1].device].id, "hall");
}

TEST(RoutineWorkload, ZipfSkewsDevicePopularity) {
  WorkloadGenerator g = small_generator();
  g.commands_max = 1;
  g.zipf = 0.0;
  auto flat = device_uses(generate_workload(g, 3));
  g.zipf = 2.0;
  auto skewed = device_uses(generate_workload(g, 3));
  // Uniform: the first device gets about a tenth; Zipf 2: 1 / H(10, 2),
  // about 65 %, and the last device almost nothing.
  EXPECT_LT(flat["d0"], 80);
  EXPECT_GT(flat["d9"], 20);
  EXPECT_GT(skewed["d0"], 220);
  EXPECT_LT(skewed["d9"], 15);
}

TEST(RoutineWorkload, ArrivalsSpreadOverShrinkTimesTheSerialTime) {
  for (double shrink : {0.25, 1.0}) {
    WorkloadGenerator g = small_generator();
    g.shrink = shrink;
    const Workload w = generate_workload(g, 5);
    core::Duration serial{};
    for (const auto& r : w.routines) serial += back_to_back(r);
    const double window = shrink * static_cast<double>(serial.count());
    const double last = static_cast<double>(w.arrivals.back().at.count());
    // 400 uniform arrivals: the last falls in the top 2 % of the window.
    EXPECT_LE(last, window);
    EXPECT_GT(last, 0.98 * window);
    // Offered load: serial time over the window = 1 / shrink.
    EXPECT_NEAR(static_cast<double>(serial.count()) / last, 1.0 / shrink, 0.05 / shrink);
  }
}

TEST(RoutineWorkload, LoadIsOneOverShrinkAndLongRoutinesHaveALongMiddleCommand) {
  const WorkloadFile file = parse_workload(
      "[generator]\nroutines = 50\ndevices = 5\nload = 4\nlong_share = 1\n"
      "long_ms = 9000\nshort_ms = 10\ncommands_min = 3\ncommands_max = 3\n",
      "w.toml");
  const auto& g = std::get<WorkloadGenerator>(file.content);
  EXPECT_DOUBLE_EQ(g.shrink, 0.25);
  for (const auto& r : instantiate(file, 1).routines) {
    ASSERT_EQ(r.commands.size(), 3u);
    EXPECT_EQ(r.commands[0].duration, std::chrono::milliseconds(10));
    EXPECT_EQ(r.commands[1].duration, std::chrono::milliseconds(9000));
    EXPECT_EQ(r.commands[2].duration, std::chrono::milliseconds(10));
  }
}

TEST(RoutineWorkload, TheShippedWorkloadsParse) {
  for (const char* name : {"safehome-small.toml", "safehome-fig12.toml", "safehome-morning.toml",
                           "safehome-morning-scale.toml", "safehome-party.toml", "safehome-factory.toml"}) {
    EXPECT_NO_THROW(load_workload(std::string(MESH_SOURCE_DIR) + "/sim/scenarios/" + name)) << name;
  }
}

}  // namespace
}  // namespace mesh::sim
