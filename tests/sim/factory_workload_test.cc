// The factory generator (sim/factory_workload.h): SafeHome's assembly line,
// checked for what the paper says of it (devices per stage, access shares,
// workers kept busy back to back) and for the file format's errors.

#include "sim/factory_workload.h"

#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "sim/routine_workload.h"
#include "tests/sim/workload_error_of.h"

namespace mesh::sim {
namespace {

// "s07.r2" -> 7; the stage a routine or a stage's own device belongs to.
int stage_of(const std::string& id) { return std::stoi(id.substr(1, id.find('.') - 1)); }

TEST(FactoryWorkload, BuildsTheLineTheSectionDescribes) {
  const WorkloadFile file = parse_workload(
      "[factory]\nstages = 4\nlocal_devices = 2\nshared_devices = 1\n"
      "global_devices = 3\nroutines_per_stage = 2\n",
      "w.toml");
  const auto& factory = std::get<FactoryGenerator>(file.content);
  const Workload w = instantiate(file, 9);
  ASSERT_EQ(w.devices.size(), 4u * 2 + 3 * 1 + 3);
  EXPECT_EQ(static_cast<int>(w.devices.size()), factory.devices());
  std::set<std::string> ids;
  for (const auto& d : w.devices) {
    ids.insert(d.id);
    EXPECT_EQ(d.kind, routine::DeviceKind::dimmer);
    EXPECT_EQ(std::get<double>(d.initial.at("brightness")), 0.0);
  }
  for (const char* id : {"s0.l0", "s0.l1", "s3.l1", "s0.n0", "s2.n0", "g0", "g2"}) EXPECT_EQ(ids.count(id), 1u) << id;
  EXPECT_EQ(ids.count("s3.n0"), 0u) << "the last stage has no next stage to share with";
  ASSERT_EQ(w.routines.size(), 8u);
  EXPECT_EQ(w.routines[0].id, "s0.r0");
  EXPECT_EQ(w.routines[7].id, "s3.r1");
}

// Every command of a stage's routine goes to a device that stage may use: its
// own, one shared with the stage before or after it, or a global one; never
// twice to one device; 10 s each (the paper's command) by default.
TEST(FactoryWorkload, RoutinesUseOnlyTheirStagesReach) {
  const WorkloadFile file = parse_workload("[factory]\n", "w.toml");
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Workload w = instantiate(file, seed);
    ASSERT_EQ(w.routines.size(), 150u) << "seed " << seed;
    for (const auto& r : w.routines) {
      const int stage = stage_of(r.id);
      ASSERT_GE(r.commands.size(), 1u);
      ASSERT_LE(r.commands.size(), 5u);
      std::set<std::string> used;
      for (const auto& c : r.commands) {
        EXPECT_TRUE(used.insert(c.device).second) << r.id << " commands " << c.device << " twice, seed " << seed;
        EXPECT_EQ(c.duration, std::chrono::seconds(10));
        EXPECT_TRUE(c.must);
        if (c.device[0] == 'g') continue;
        const int owner = stage_of(c.device);
        if (c.device.find(".l") != std::string::npos) {
          EXPECT_EQ(owner, stage) << r.id << " uses another stage's " << c.device << ", seed " << seed;
        } else {
          EXPECT_TRUE(owner == stage || owner + 1 == stage) << r.id << " uses " << c.device << ", seed " << seed;
        }
      }
    }
  }
}

// With pools too large to run dry, the categories are drawn with the paper's
// shares (0.6 local, 0.3 neighbour, 0.1 global); 6,000 single-command
// routines put each share within 0.02 of its value.
TEST(FactoryWorkload, CommandsGoToLocalNeighbourAndGlobalDevicesWithTheGivenShares) {
  const WorkloadFile file = parse_workload(
      "[factory]\nstages = 20\nlocal_devices = 10\nshared_devices = 10\nglobal_devices = 10\n"
      "routines_per_stage = 30\ncommands_min = 1\ncommands_max = 1\nshift_ms = 1000\n",
      "w.toml");
  std::map<char, int> by_category;
  int total = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    for (const auto& r : instantiate(file, seed).routines) {
      const std::string& device = r.commands.at(0).device;
      ++by_category[device[0] == 'g' ? 'g' : device[device.find('.') + 1]];
      ++total;
    }
  }
  ASSERT_EQ(total, 6000);
  EXPECT_NEAR(by_category['l'] / 6000.0, 0.6, 0.02);
  EXPECT_NEAR(by_category['n'] / 6000.0, 0.3, 0.02);
  EXPECT_NEAR(by_category['g'] / 6000.0, 0.1, 0.02);
}

// "Routines are generated to keep each worker occupied (no idle time)": each
// stage's next arrival is when its previous routine would end alone, from a
// start within the first command, until the shift is over; and a stage's
// repertoire is used with repetition.
TEST(FactoryWorkload, EachWorkerTriggersItsRoutinesBackToBackUntilTheShiftEnds) {
  const WorkloadFile file = parse_workload("[factory]\nshift_ms = 600000\n", "w.toml");
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Workload w = instantiate(file, seed);
    std::map<int, std::vector<WorkloadArrival>> by_stage;
    for (size_t i = 0; i < w.arrivals.size(); ++i) {
      if (i > 0) {
        ASSERT_LE(w.arrivals[i - 1].at, w.arrivals[i].at) << "arrivals out of order, seed " << seed;
      }
      by_stage[stage_of(w.routines[w.arrivals[i].routine].id)].push_back(w.arrivals[i]);
    }
    ASSERT_EQ(by_stage.size(), 50u) << "seed " << seed;
    bool repeated = false;
    for (const auto& [stage, arrivals] : by_stage) {
      EXPECT_LT(arrivals.front().at, std::chrono::seconds(10)) << "stage " << stage << ", seed " << seed;
      std::set<size_t> distinct;
      for (size_t i = 0; i < arrivals.size(); ++i) {
        distinct.insert(arrivals[i].routine);
        const core::Duration end = arrivals[i].at + back_to_back(w.routines[arrivals[i].routine]);
        if (i + 1 < arrivals.size()) {
          EXPECT_EQ(arrivals[i + 1].at, end) << "stage " << stage << " idles or overlaps, seed " << seed;
        } else {
          EXPECT_LT(arrivals[i].at, std::chrono::minutes(10));
          EXPECT_GE(end, std::chrono::minutes(10)) << "stage " << stage << " stops early, seed " << seed;
        }
      }
      repeated = repeated || distinct.size() < arrivals.size();
    }
    EXPECT_TRUE(repeated) << "no stage ran a routine twice, seed " << seed;
  }
}

TEST(FactoryWorkload, IsDeterministicPerSeedOrFixedByItsOwnSeed) {
  const WorkloadFile drawn = parse_workload("[factory]\nstages = 5\n", "w.toml");
  auto commands_of = [](const Workload& w) {
    std::vector<std::string> out;
    for (const auto& r : w.routines) {
      for (const auto& c : r.commands)
        out.push_back(c.device + "=" + std::to_string(std::get<double>(c.values.at("brightness"))));
    }
    for (const auto& a : w.arrivals) out.push_back(std::to_string(a.at.count()));
    return out;
  };
  EXPECT_EQ(commands_of(instantiate(drawn, 3)), commands_of(instantiate(drawn, 3)));
  EXPECT_NE(commands_of(instantiate(drawn, 3)), commands_of(instantiate(drawn, 4)));
  const WorkloadFile fixed = parse_workload("[factory]\nstages = 5\nseed = 11\n", "w.toml");
  EXPECT_EQ(commands_of(instantiate(fixed, 3)), commands_of(instantiate(fixed, 4)));
}

TEST(FactoryWorkload, RefusesBadInputNamingLineKeyAndFix) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"[factory]\nstages = 0\n", "w.toml:2:10: factory.stages: 0 is out of range; use an integer in [1, 1000]"},
      {"[factory]\nworkers = 5\n", "w.toml:2:1: factory.workers: unknown key; remove it or use one of: stages"},
      {"[factory]\nlocal_share = 0.5\n",
       "factory: local_share + neighbour_share + global_share is 0.9; make the three shares sum to 1"},
      {"[factory]\nstages = 400\nlocal_devices = 3\n", "factory: makes 1604 devices"},
      {"[factory]\nstages = 334\nlocal_devices = 1\n",
       "factory: makes 1002 routines; keep stages x routines_per_stage at most 1000"},
      {"[factory]\nlocal_devices = 0\nglobal_devices = 0\nstages = 1\n", "factory: makes 0 devices"},
      {"[factory]\ncommands_min = 4\ncommands_max = 2\n", "factory.commands_max: 2 is below commands_min (4)"},
      {"[factory]\nshift_ms = 3600000\n",
       "w.toml:2:12: factory.shift_ms: lets a worker start up to 361 routines, more than its 3 routines x 32"},
      {"[factory]\n[generator]\n", "given together with ["},
      {"[factory]\n[[device]]\nid = \"a\"\nkind = \"plug\"\n", "device: given together with [factory]"},
      {"factory = 3\n", "factory: must be a table; write it as a [factory] section"},
  };
  for (const auto& c : cases) {
    const std::string error = workload_error_of(c.text);
    EXPECT_NE(error.find(c.expected), std::string::npos) << "input:\n" << c.text << "\nerror: " << error;
  }
}

}  // namespace
}  // namespace mesh::sim
