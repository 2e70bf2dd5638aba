#include "agent/topology_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mesh::agent {
namespace {

using ::testing::HasSubstr;

core::NodeId ip(uint8_t last) { return core::Ipv4Address::from_octets(127, 0, 0, last); }

TEST(TopologyFile, ParsesEdgesCommentsAndBlankLines) {
  const auto topology = parse_topology_file(
      "# a square with a diagonal\n"
      "\n"
      "127.0.0.1 127.0.0.2\n"
      "  127.0.0.2\t127.0.0.3   # trailing comment\n"
      "127.0.0.3 127.0.0.4\r\n"
      "127.0.0.4 127.0.0.1\n"
      "   \t\n"
      "127.0.0.1 127.0.0.3",
      "square.txt");
  ASSERT_TRUE(topology) << topology.error();
  EXPECT_EQ(topology->edges.size(), 5u);
  EXPECT_EQ(topology->neighbours_of(ip(1)), (std::vector<core::NodeId>{ip(2), ip(3), ip(4)}));
  EXPECT_EQ(topology->neighbours_of(ip(2)), (std::vector<core::NodeId>{ip(1), ip(3)}));
  EXPECT_EQ(topology->neighbours_of(ip(4)), (std::vector<core::NodeId>{ip(1), ip(3)}));
  EXPECT_TRUE(topology->neighbours_of(ip(9)).empty());
  EXPECT_EQ(topology->nodes(), (std::vector<core::NodeId>{ip(1), ip(2), ip(3), ip(4)}));
}

TEST(TopologyFile, DuplicateEdgesInEitherDirectionAreMerged) {
  const auto topology =
      parse_topology_file("127.0.0.1 127.0.0.2\n127.0.0.2 127.0.0.1\n127.0.0.1 127.0.0.2\n", "dup.txt");
  ASSERT_TRUE(topology) << topology.error();
  ASSERT_EQ(topology->edges.size(), 1u);
  EXPECT_EQ(topology->edges[0], std::make_pair(ip(1), ip(2)));
  EXPECT_EQ(topology->neighbours_of(ip(2)), std::vector<core::NodeId>{ip(1)});
}

TEST(TopologyFile, EmptyAndCommentOnlyFilesHaveNoEdges) {
  for (const char* text : {"", "\n\n", "# nothing yet\n"}) {
    const auto topology = parse_topology_file(text, "empty.txt");
    ASSERT_TRUE(topology) << topology.error();
    EXPECT_TRUE(topology->edges.empty());
  }
}

void expect_error(const std::string& text, int line, const std::string& problem) {
  SCOPED_TRACE(text);
  const auto topology = parse_topology_file(text, "topo.txt");
  ASSERT_FALSE(topology);
  EXPECT_THAT(topology.error(), HasSubstr("topo.txt:" + std::to_string(line) + ":"));
  EXPECT_THAT(topology.error(), HasSubstr(problem));
}

TEST(TopologyFile, ErrorsNameTheLine) {
  expect_error("127.0.0.1 127.0.0.2\n\n127.0.0.1 127.0.0.256\n", 3, "bad address \"127.0.0.256\"");
  expect_error("# c\n127.0.0.1 localhost\n", 2, "bad address \"localhost\"");
  expect_error("127.0.0.1,127.0.0.2\n", 1,
               "wrong field count: expected 2 addresses (\"ADDRESS ADDRESS\", one edge), got 1");
  expect_error("127.0.0.1 127.0.0.2\n127.0.0.1 127.0.0.2 127.0.0.3\n", 2, "got 3");
  expect_error("127.0.0.1\n", 1, "wrong field count: expected 2 addresses (\"ADDRESS ADDRESS\", one edge), got 1");
  expect_error("127.0.0.1 127.0.0.2\n127.0.0.3 127.0.0.3 # loop\n", 2, "self-loop");
  expect_error("0.0.0.0 127.0.0.1\n", 1, "bad address \"0.0.0.0\"");
}

TEST(TopologyFile, LoadNamesAMissingFile) {
  const auto topology = load_topology_file("/nonexistent/topology.txt");
  ASSERT_FALSE(topology);
  EXPECT_THAT(topology.error(), HasSubstr("/nonexistent/topology.txt"));
  EXPECT_THAT(topology.error(), HasSubstr("cannot read"));
}

TEST(TopologyFile, LoadReportsThePathInErrors) {
  const auto path = std::filesystem::temp_directory_path() / ("mesh_topology_test_" + std::to_string(::getpid()));
  std::ofstream(path) << "127.0.0.1 127.0.0.2\nbad line here\n";
  const auto topology = load_topology_file(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(topology);
  EXPECT_THAT(topology.error(), HasSubstr(path.string() + ":2:"));
}

TEST(TopologyFile, ShippedExampleIsAThreeNodeLine) {
  const auto topology = load_topology_file(MESH_SOURCE_DIR "/deploy/examples/loopback-topology.txt");
  ASSERT_TRUE(topology) << topology.error();
  EXPECT_EQ(topology->nodes(), (std::vector<core::NodeId>{ip(1), ip(2), ip(3)}));
  EXPECT_EQ(topology->neighbours_of(ip(1)), std::vector<core::NodeId>{ip(2)});
  EXPECT_EQ(topology->neighbours_of(ip(2)), (std::vector<core::NodeId>{ip(1), ip(3)}));
  EXPECT_EQ(topology->neighbours_of(ip(3)), std::vector<core::NodeId>{ip(2)});
}

}  // namespace
}  // namespace mesh::agent
