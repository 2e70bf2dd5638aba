#include "agent/catalog_file.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mesh::agent {
namespace {

using ::testing::HasSubstr;

TEST(CatalogFile, ParsesDevices) {
  const auto file = parse_catalog(
      "[[device]]\nid = \"a\"\nkind = \"plug\"\nlocation = [1, 2.5, 0]\ndriver = \"kasa://10.0.0.2:9999\"\n"
      "[[device]]\nid = \"b.2\"\nkind = \"thermostat\"\nlocation = [0.0, 0.0, 3.0]\nroom = \"lab\"\n"
      "floor = \"1\"\ndriver = \"z2m://broker/zigbee2mqtt/b2\"\n",
      "c.toml");
  ASSERT_TRUE(file) << file.error();
  ASSERT_EQ(file->devices.size(), 2u);
  EXPECT_EQ(file->devices[0].id, "a");
  EXPECT_EQ(file->devices[0].kind, routine::DeviceKind::plug);
  EXPECT_EQ(file->devices[0].location, (kgroup::Location{1, 2.5, 0}));
  EXPECT_EQ(file->devices[1].room, "lab");
  EXPECT_EQ(file->devices[1].floor, "1");
  EXPECT_EQ(file->digest.size(), 32u);
  EXPECT_TRUE(parse_catalog("", "empty.toml"));
}

TEST(CatalogFile, EveryProblemNamesFileLineAndKey) {
  const auto file = parse_catalog(
      "[[device]]\nid = \"A b\"\nkind = \"plug\"\nlocation = [1, 2, 0]\ndriver = \"kasa://x\"\n"  // 1-5
      "[[device]]\nid = \"c\"\nkind = \"toaster\"\nlocation = [1, 2]\ndriver = \"nope\"\ncolour = 3\n"  // 6-11
      "[[device]]\nid = \"d\"\nkind = \"plug\"\nlocation = [1, 2, 0]\ndriver = \"kasa://d\"\n"  // 12-16
      "[[device]]\nid = \"d\"\nkind = \"switch\"\nlocation = [1, 2, 0]\ndriver = \"kasa://e\"\n"  // 17-21
      "[other]\n",
      "c.toml");
  ASSERT_FALSE(file);
  EXPECT_THAT(file.error(), HasSubstr("c.toml:2: device.id: device id 'A b' has 'A'"));
  EXPECT_THAT(file.error(), HasSubstr("c.toml:8: device c.kind: unknown kind \"toaster\""));
  EXPECT_THAT(file.error(), HasSubstr("c.toml:9: device c.location: expected [x, y, z] in metres"));
  EXPECT_THAT(file.error(), HasSubstr("c.toml:10: device c.driver: \"nope\" is not a driver URI"));
  EXPECT_THAT(file.error(), HasSubstr("c.toml:11: device c.colour: unknown key"));
  EXPECT_THAT(file.error(), HasSubstr("c.toml:17: device d: defined twice (first at line 12)"));
  EXPECT_THAT(file.error(), HasSubstr("c.toml:22: other: unknown table"));
}

TEST(CatalogFile, SyntaxErrorsAndMissingKeys) {
  EXPECT_THAT(parse_catalog("[[device]\nid = 1\n", "s.toml").error(), HasSubstr("s.toml:1:"));
  const auto missing = parse_catalog("[[device]]\nid = \"x\"\n", "m.toml");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr("device x.kind: missing"));
  EXPECT_THAT(missing.error(), HasSubstr("device x.location: missing"));
  EXPECT_THAT(missing.error(), HasSubstr("device x.driver: missing"));
  EXPECT_THAT(parse_catalog("device = 3\n", "t.toml").error(), HasSubstr("expected [[device]] tables"));
}

TEST(CatalogFile, LoadNamesAMissingFile) {
  EXPECT_THAT(load_catalog("/nonexistent/catalog.toml").error(), HasSubstr("cannot read catalog file"));
  const auto example = load_catalog(MESH_SOURCE_DIR "/deploy/examples/catalog.toml");
  ASSERT_TRUE(example) << example.error();
  EXPECT_EQ(example->devices.size(), 3u);
}

}  // namespace
}  // namespace mesh::agent
