#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <string>

namespace mesh::sim {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_scenario(text, "test.toml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Scenario, ParsesEverySection) {
  const Scenario s = parse_scenario(R"(
[topology]
kind = "line"
nodes = 6

[link]
delay_ms = 3
jitter_ms = 1.5
loss = 0.25

[run]
duration_s = 12
seed = 99

[workload]
ping_interval_ms = 100
ping_targets = "any"

[[event]]
at_s = 8
action = "heal"

[[event]]
at_s = 2
action = "crash"
node = 5

[[event]]
at_s = 4
action = "link_down"
a = 3
b = 2

[[event]]
at_s = 6
action = "partition"
groups = [[0, 1], [2, 3]]
)",
                                    "test.toml");
  EXPECT_EQ(s.topology.kind, "line");
  EXPECT_EQ(s.topology.nodes, 6);
  EXPECT_DOUBLE_EQ(s.link.jitter_ms, 1.5);
  EXPECT_DOUBLE_EQ(s.link.loss, 0.25);
  EXPECT_DOUBLE_EQ(s.run.duration_s, 12);
  EXPECT_EQ(s.run.seed, 99u);
  EXPECT_DOUBLE_EQ(s.workload.ping_interval_ms, 100);
  EXPECT_EQ(s.workload.ping_targets, Scenario::WorkloadSection::Targets::any);
  ASSERT_EQ(s.events.size(), 4u);
  // Sorted by time.
  EXPECT_EQ(s.events[0].action, EventAction::crash);
  EXPECT_EQ(s.events[0].node, 5);
  EXPECT_EQ(s.events[1].action, EventAction::link_down);
  EXPECT_EQ(s.events[1].a, 3);
  EXPECT_EQ(s.events[2].groups, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(s.events[3].action, EventAction::heal);
  EXPECT_EQ(s.link_params().delay, std::chrono::milliseconds(3));
  EXPECT_EQ(s.build_topology().size(), 6u);
}

TEST(Scenario, PingTargetsDefaultToNeighboursAndRejectOthers) {
  const Scenario s = parse_scenario("[topology]\nkind = \"line\"\nnodes = 3\n", "t.toml");
  EXPECT_EQ(s.workload.ping_targets, Scenario::WorkloadSection::Targets::neighbours);
  EXPECT_THROW(parse_scenario("[topology]\nkind = \"line\"\nnodes = 3\n[workload]\nping_targets = \"far\"\n", "t.toml"),
               ScenarioError);
}

TEST(Scenario, GridByWidthAndHeight) {
  const Scenario s = parse_scenario("[topology]\nkind = \"grid\"\nwidth = 4\nheight = 2\n", "g.toml");
  EXPECT_EQ(s.topology.nodes, 8);
  EXPECT_EQ(s.build_topology().edges.size(), 10u);
}

TEST(Scenario, UnknownKeyNamesLineAndKey) {
  const std::string e = error_of("[topology]\nkind = \"grid\"\nnodes = 4\n[link]\ndelay_ms = 5\nlatency = 3\n");
  EXPECT_NE(e.find("test.toml:6:"), std::string::npos) << e;
  EXPECT_NE(e.find("link.latency"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("delay_ms, jitter_ms, loss"), std::string::npos) << e;
}

TEST(Scenario, WrongTypeAndRangeNameTheKey) {
  std::string e = error_of("[topology]\nkind = \"grid\"\nnodes = 4\n[link]\nloss = \"high\"\n");
  EXPECT_NE(e.find("test.toml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("link.loss: must be a number"), std::string::npos) << e;

  e = error_of("[topology]\nkind = \"grid\"\nnodes = 4\n[link]\nloss = 1.5\n");
  EXPECT_NE(e.find("test.toml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("link.loss: 1.5 is out of range"), std::string::npos) << e;
  EXPECT_NE(e.find("[0, 1]"), std::string::npos) << e;

  e = error_of("[topology]\nkind = \"grid\"\nnodes = 2.5\n");
  EXPECT_NE(e.find("test.toml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("topology.nodes: must be an integer"), std::string::npos) << e;

  e = error_of("[topology]\nkind = \"torus\"\nnodes = 4\n");
  EXPECT_NE(e.find("test.toml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("topology.kind"), std::string::npos) << e;
  EXPECT_NE(e.find("\"lshape\""), std::string::npos) << e;
}

TEST(Scenario, MissingPiecesAreNamed) {
  std::string e = error_of("[run]\nduration_s = 5\n");
  EXPECT_NE(e.find("[topology]: missing section"), std::string::npos) << e;

  e = error_of("[topology]\nkind = \"line\"\n");
  EXPECT_NE(e.find("topology.nodes: missing key"), std::string::npos) << e;

  e = error_of("[topology]\nkind = \"grid3d\"\nwidth = 2\nheight = 2\n");
  EXPECT_NE(e.find("topology.depth: missing key"), std::string::npos) << e;

  e = error_of("[topology]\nkind = \"line\"\nnodes = 3\nclusters = 2\n");
  EXPECT_NE(e.find("test.toml:4:"), std::string::npos) << e;
  EXPECT_NE(e.find("topology.clusters: not used"), std::string::npos) << e;
}

TEST(Scenario, EventErrorsNameTheEvent) {
  const std::string head = "[topology]\nkind = \"line\"\nnodes = 4\n[run]\nduration_s = 10\n";
  std::string e = error_of(head + "[[event]]\nat_s = 1\naction = \"crash\"\nnode = 4\n");
  EXPECT_NE(e.find("test.toml:9:"), std::string::npos) << e;
  EXPECT_NE(e.find("event[0].node: 4 is out of range"), std::string::npos) << e;

  e = error_of(head + "[[event]]\nat_s = 1\naction = \"heal\"\n[[event]]\nat_s = 11\naction = \"heal\"\n");
  EXPECT_NE(e.find("test.toml:10:"), std::string::npos) << e;
  EXPECT_NE(e.find("event[1].at_s"), std::string::npos) << e;

  e = error_of(head + "[[event]]\nat_s = 1\naction = \"link_down\"\na = 0\nb = 2\n");
  EXPECT_NE(e.find("test.toml:10:"), std::string::npos) << e;
  EXPECT_NE(e.find("have no link"), std::string::npos) << e;

  e = error_of(head + "[[event]]\nat_s = 1\naction = \"partition\"\ngroups = [[0, 1], [1, 2]]\n");
  EXPECT_NE(e.find("test.toml:9:"), std::string::npos) << e;
  EXPECT_NE(e.find("node 1 is in two groups"), std::string::npos) << e;

  e = error_of(head + "[[event]]\nat_s = 1\naction = \"explode\"\n");
  EXPECT_NE(e.find("test.toml:8:"), std::string::npos) << e;
  EXPECT_NE(e.find("event[0].action"), std::string::npos) << e;

  e = error_of(head + "[[event]]\nat_s = 1\naction = \"heal\"\nnode = 2\n");
  EXPECT_NE(e.find("test.toml:9:"), std::string::npos) << e;
  EXPECT_NE(e.find("event[0].node: unknown key"), std::string::npos) << e;

  e = error_of("event = 3\n" + head);
  EXPECT_NE(e.find("test.toml:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("[[event]]"), std::string::npos) << e;
}

TEST(Scenario, SyntaxErrorNamesTheLine) {
  const std::string e = error_of("[topology]\nkind = \"line\"\nnodes = = 3\n");
  EXPECT_NE(e.find("test.toml:3:"), std::string::npos) << e;
}

TEST(Scenario, MissingFileIsAScenarioError) {
  EXPECT_THROW(load_scenario("/nonexistent/meshsim.toml"), ScenarioError);
}

TEST(Scenario, ShippedExamplesParse) {
  for (const char* name : {"grid-9-ping.toml", "random-100-loss.toml", "line-10-partition.toml"}) {
    SCOPED_TRACE(name);
    const Scenario s = load_scenario(std::string(MESH_SOURCE_DIR) + "/sim/scenarios/" + name);
    EXPECT_GT(s.build_topology().size(), 0u);
  }
}

}  // namespace
}  // namespace mesh::sim
