#include "sim/mesh_sim.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mesh::sim {
namespace {

using std::chrono::seconds;

Scenario churn_scenario() {
  return parse_scenario(R"(
[topology]
kind = "random"
nodes = 20
seed = 3

[link]
delay_ms = 4
jitter_ms = 8
loss = 0.1

[run]
duration_s = 20

[workload]
ping_interval_ms = 100

[[event]]
at_s = 4
action = "crash"
node = 3

[[event]]
at_s = 6
action = "partition"
groups = [[0, 1, 2, 3, 4, 5]]

[[event]]
at_s = 9
action = "heal"

[[event]]
at_s = 12
action = "restart"
node = 3
)",
                        "churn.toml");
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("meshsim-test-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(MeshSim, SameSeedGivesByteIdenticalCsvOtherSeedDoesNot) {
  const Scenario scenario = churn_scenario();
  const auto dirs = {temp_dir("a"), temp_dir("b"), temp_dir("c")};
  const uint64_t seeds[] = {11, 11, 12};
  size_t k = 0;
  for (const auto& dir : dirs) {
    MeshSim sim(scenario, seeds[k++]);
    sim.run();
    sim.write_csv(dir);
  }
  const auto& a = *dirs.begin();
  const auto& b = *(dirs.begin() + 1);
  const auto& c = *(dirs.begin() + 2);
  for (const char* file : {"counters.csv", "histograms.csv", "network.csv"}) {
    SCOPED_TRACE(file);
    const std::string first = read_file(a / file);
    EXPECT_GT(first.size(), 100u);
    EXPECT_EQ(first, read_file(b / file));
  }
  EXPECT_NE(read_file(a / "counters.csv"), read_file(c / "counters.csv"));
  EXPECT_NE(read_file(a / "network.csv"), read_file(c / "network.csv"));
  for (const auto& dir : dirs) std::filesystem::remove_all(dir);
}

TEST(MeshSim, CrashKillsTheNodeAndRestartKeepsItsStorage) {
  Scenario s = churn_scenario();
  s.events.clear();
  MeshSim sim(s, 1);
  sim.run_until(core::TimePoint(seconds(3)));
  ASSERT_NE(sim.node(3), nullptr);
  EXPECT_EQ(sim.node(3)->boot_count(), 1u);
  sim.crash(3);
  EXPECT_EQ(sim.node(3), nullptr);
  EXPECT_FALSE(sim.network().node_up(sim.id_of(3)));
  const uint64_t dropped_before = sim.network().stats(Channel::routing).dropped;
  sim.run_until(core::TimePoint(seconds(6)));
  // Its neighbours kept sending HELLOs to it; the network dropped those copies.
  EXPECT_GT(sim.network().stats(Channel::routing).dropped, dropped_before);
  sim.restart(3);
  ASSERT_NE(sim.node(3), nullptr);
  EXPECT_EQ(sim.node(3)->boot_count(), 2u);  // storage survived the crash
  sim.run_until(core::TimePoint(seconds(10)));
  EXPECT_FALSE(sim.node(3)->olsr().neighbours().empty());
  // Counters of both incarnations are in the CSV; histograms per incarnation.
  const std::string histograms = sim.histograms_csv();
  EXPECT_NE(histograms.find("n3,1,"), std::string::npos);
}

TEST(MeshSim, PingsSucceedOnAQuietGrid) {
  Scenario s;
  s.topology.kind = "grid";
  s.topology.nodes = 9;
  s.link.loss = 0.0;
  s.run.duration_s = 15;
  s.workload.ping_interval_ms = 100;
  MeshSim sim(s, 3);
  sim.run();
  const auto& p = sim.pings();
  EXPECT_GT(p.sent, 100u);
  // Pings before the first HELLOs may fail; nearly all succeed.
  EXPECT_GE(p.ok + p.timeout + p.rejected + 1, p.sent);
  EXPECT_GT(p.ok, p.sent * 9 / 10);
  const auto totals = sim.message_totals();
  EXPECT_GT(totals.at("echo/e2e/sent"), 0u);
  EXPECT_GT(totals.at("olsr/hop/received"), 0u);
  EXPECT_NE(sim.summary().find("pings"), std::string::npos);
}

TEST(MeshSim, PingsToAnyNodeCrossSeveralHops) {
  Scenario s;
  s.topology.kind = "line";
  s.topology.nodes = 8;
  s.run.duration_s = 40;
  s.workload.ping_interval_ms = 200;
  s.workload.ping_targets = Scenario::WorkloadSection::Targets::any;
  MeshSim sim(s, 5);
  sim.run();
  const auto& p = sim.pings();
  EXPECT_GT(p.sent, 150u);
  // Before the TCs have crossed the line (some 15 s) far pings fail.
  EXPECT_GT(p.ok, p.sent / 2);
  uint64_t forwarded = 0;
  for (size_t i = 0; i < sim.size(); ++i) forwarded += sim.node(i)->metrics().total("transport_forwarded_total");
  EXPECT_GT(forwarded, p.ok) << "pings did not travel several hops";
}

TEST(MeshSim, ShippedScenariosRun) {
  for (const char* name : {"grid-9-ping.toml", "line-10-partition.toml", "random-100-loss.toml"}) {
    SCOPED_TRACE(name);
    const Scenario s = load_scenario(std::string(MESH_SOURCE_DIR) + "/sim/scenarios/" + name);
    MeshSim sim(s, s.run.seed);
    sim.run();
    EXPECT_EQ(sim.simulator().now(), core::TimePoint(s.duration()));
    EXPECT_GT(sim.pings().ok, 0u);
    for (size_t i = 0; i < sim.size(); ++i) EXPECT_NE(sim.node(i), nullptr) << "node " << i << " restarted";
  }
}

}  // namespace
}  // namespace mesh::sim
