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
      "[[device]]\nid = \"A b\"\nkind = \"plug\"\nlocation = [1, 2, 0]\ndriver = \"kasa://x\"\n"        // 1-5
      "[[device]]\nid = \"c\"\nkind = \"toaster\"\nlocation = [1, 2]\ndriver = \"nope\"\ncolour = 3\n"  // 6-11
      "[[device]]\nid = \"d\"\nkind = \"plug\"\nlocation = [1, 2, 0]\ndriver = \"kasa://d\"\n"          // 12-16
      "[[device]]\nid = \"d\"\nkind = \"switch\"\nlocation = [1, 2, 0]\ndriver = \"kasa://e\"\n"        // 17-21
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
  EXPECT_THAT(parse_catalog("routine = 3\n", "t.toml").error(), HasSubstr("expected [[routine]] tables"));
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
  EXPECT_EQ(example->routines.size(), 3u);
  EXPECT_EQ(example->preconditions.size(), 1u);
}

constexpr std::string_view kDevices =
    "[[device]]\nid = \"hall_light\"\nkind = \"dimmer\"\nlocation = [1, 2, 0]\ndriver = \"kasa://a\"\n"           // 1-5
    "[[device]]\nid = \"hall_motion\"\nkind = \"motion_sensor\"\nlocation = [1, 2, 0]\ndriver = \"kasa://b\"\n";  // 6-10

TEST(CatalogFile, ParsesRoutines) {
  const auto file = parse_catalog(std::string(kDevices) +
                                      "[[routine]]\n"                                // 11
                                      "id = \"night_hall\"\n"                        // 12
                                      "trigger = \"hall_motion.motion == on\"\n"     // 13
                                      "window = \"22:00-06:00\"\n"                   // 14
                                      "days = [\"mon..thu\", \"sun\"]\n"             // 15
                                      "min_retrigger_s = 30\n"                       // 16
                                      "lock = \"sla\"\n"                             // 17
                                      "uses = [\"pump\"]\n"                          // 18
                                      "[[routine.command]]\n"                        // 19
                                      "device = \"hall_light\"\n"                    // 20
                                      "set = { power = \"on\", brightness = 30 }\n"  // 21
                                      "duration_s = 300\n"                           // 22
                                      "[[routine.command]]\n"                        // 23
                                      "device = \"hall_light\"\n"                    // 24
                                      "set = { power = false }\n"                    // 25
                                      "must = false\n"                               // 26
                                      "[[routine]]\nid = \"all_off\"\ntrigger = \"manual\"\nenabled = false\n"
                                      "[[routine.command]]\ndevice = \"hall_light\"\nset = { brightness = \"0\" }\n",
                                  "r.toml");
  ASSERT_TRUE(file) << file.error();
  ASSERT_EQ(file->routines.size(), 2u);
  const routine::RoutineSpec& night = file->routines[0];
  EXPECT_EQ(night.id, "night_hall");
  EXPECT_EQ(night.trigger_text, "hall_motion.motion == on");
  EXPECT_EQ(routine::format_window(*night.trigger.window), "22:00-06:00");
  EXPECT_EQ(routine::format_days(night.trigger.days), (std::vector<std::string>{"mon", "tue", "wed", "thu", "sun"}));
  EXPECT_EQ(night.min_retrigger, std::chrono::seconds(30));
  EXPECT_EQ(night.lock_strategy, routine::LockStrategy::sla);
  EXPECT_EQ(night.uses, (std::vector<std::string>{"pump"}));
  ASSERT_EQ(night.commands.size(), 2u);
  EXPECT_EQ(night.commands[0].values, (routine::Attributes{{"power", true}, {"brightness", 30.0}}));
  EXPECT_EQ(night.commands[0].duration, std::chrono::seconds(300));
  EXPECT_TRUE(night.commands[0].must);
  EXPECT_EQ(night.commands[1].values, (routine::Attributes{{"power", false}}));
  EXPECT_FALSE(night.commands[1].duration);
  EXPECT_FALSE(night.commands[1].must);
  const routine::RoutineSpec& all_off = file->routines[1];
  EXPECT_TRUE(all_off.trigger.manual);
  EXPECT_FALSE(all_off.enabled);
  EXPECT_EQ(all_off.min_retrigger, routine::kDefaultMinRetrigger);
  EXPECT_EQ(all_off.commands[0].values, (routine::Attributes{{"brightness", 0.0}}));
}

TEST(CatalogFile, EveryRoutineProblemNamesFileLineAndKey) {
  const auto file =
      parse_catalog(std::string(kDevices) +
                        "[[routine]]\n"                                                              // 11
                        "id = \"a\"\n"                                                               // 12
                        "trigger = \"hall_motion.motion == on and hall_lite.power == on\"\n"         // 13
                        "window = \"22:00\"\n"                                                       // 14
                        "days = [\"someday\"]\n"                                                     // 15
                        "lock = \"fast\"\n"                                                          // 16
                        "colour = 1\n"                                                               // 17
                        "min_retrigger_s = -1\n"                                                     // 18
                        "[[routine.command]]\n"                                                      // 19
                        "device = \"hall_light\"\n"                                                  // 20
                        "set = { brightness = 150, hue = 3 }\n"                                      // 21
                        "duration_s = 0\n"                                                           // 22
                        "[[routine.command]]\n"                                                      // 23
                        "device = \"garden\"\n"                                                      // 24
                        "set = { power = \"on\" }\n"                                                 // 25
                        "[[routine]]\n"                                                              // 26
                        "id = \"b\"\n"                                                               // 27
                        "trigger = \"hall_motion.motion > 3\"\n"                                     // 28
                        "[[routine]]\n"                                                              // 29
                        "id = \"c\"\n"                                                               // 30
                        "trigger = \"manual\"\n"                                                     // 31
                        "window = \"08:00-09:00\"\n"                                                 // 32
                        "[[routine.command]]\ndevice = \"hall_light\"\nset = { power = \"on\" }\n"   // 33-35
                        "[[routine]]\nid = \"d\"\ntrigger = \"manual\"\n"                            // 36-38
                        "[[routine.command]]\ndevice = \"hall_light\"\nset = { power = \"on\" }\n"   // 39-41
                        "[[routine]]\nid = \"d\"\ntrigger = \"manual\"\n"                            // 42-44
                        "[[routine.command]]\ndevice = \"hall_light\"\nset = { power = \"on\" }\n",  // 45-47
                    "r.toml");
  ASSERT_FALSE(file);
  const std::string& e = file.error();
  EXPECT_THAT(e, HasSubstr("r.toml:13: routine a.trigger: trigger:1:30: no device hall_lite in the catalog. Fix: use "
                           "a device of this file, or define it with a [[device]] table."));
  EXPECT_THAT(e, HasSubstr("r.toml:14: routine a.window: window \"22:00\" is not HH:MM-HH:MM"));
  EXPECT_THAT(e, HasSubstr("r.toml:15: routine a.days: \"someday\" is not a day"));
  EXPECT_THAT(e, HasSubstr("r.toml:16: routine a.lock: unknown strategy \"fast\". Fix: use default"));
  EXPECT_THAT(e, HasSubstr("r.toml:17: routine a.colour: unknown key. Fix: remove it; a [[routine]] accepts id, "));
  EXPECT_THAT(e, HasSubstr("r.toml:18: routine a.min_retrigger_s: expected a number of seconds. Fix: write a number "
                           "from 0 to 604800"));
  EXPECT_THAT(e, HasSubstr("r.toml:21: routine a.command[1].set.brightness: device hall_light: brightness=150 is not "
                           "allowed: allowed is an integer 0..100. Fix: write brightness = an integer 0..100."));
  EXPECT_THAT(e, HasSubstr("r.toml:21: routine a.command[1].set.hue: device hall_light: a dimmer has no attribute "
                           "'hue' (it has: power, brightness)"));
  EXPECT_THAT(e, HasSubstr("r.toml:22: routine a.command[1].duration_s: expected a number of seconds"));
  EXPECT_THAT(e, HasSubstr("r.toml:24: routine a.command[2].device: no device garden in the catalog"));
  EXPECT_THAT(e, HasSubstr("r.toml:28: routine b.trigger: trigger:1:20: '>' compares numbers, and hall_motion.motion "
                           "is on or off; use == or !="));
  EXPECT_THAT(e, HasSubstr("r.toml:26: routine b.command: missing. Fix: add at least one [[routine.command]]"));
  EXPECT_THAT(e, HasSubstr("r.toml:29: routine c.trigger: a manual routine runs only on demand"));
  EXPECT_THAT(e, HasSubstr("r.toml:42: routine d: defined twice (first at line 36)"));
}

TEST(CatalogFile, ReadsUndoValuesAndNamesEachProblemWithItsLine) {
  const auto file = parse_catalog(std::string(kDevices) +
                                      "[[routine]]\n"                                // 11
                                      "id = \"dim\"\n"                               // 12
                                      "trigger = \"manual\"\n"                       // 13
                                      "[[routine.command]]\n"                        // 14
                                      "device = \"hall_light\"\n"                    // 15
                                      "set = { power = \"on\", brightness = 80 }\n"  // 16
                                      "undo = { brightness = 10 }\n",                // 17
                                  "u.toml");
  ASSERT_TRUE(file) << file.error();
  EXPECT_EQ(file->routines[0].commands[0].undo, (routine::Attributes{{"brightness", 10.0}}));

  const auto bad = parse_catalog(std::string(kDevices) +
                                     "[[routine]]\n"                           // 11
                                     "id = \"a\"\n"                            // 12
                                     "trigger = \"manual\"\n"                  // 13
                                     "[[routine.command]]\n"                   // 14
                                     "device = \"hall_light\"\n"               // 15
                                     "set = { brightness = 80 }\n"             // 16
                                     "undo = { brightness = 150, hue = 3 }\n"  // 17
                                     "[[routine.command]]\n"                   // 18
                                     "device = \"hall_light\"\n"               // 19
                                     "set = { power = \"on\" }\n"              // 20
                                     "undo = \"off\"\n"                        // 21
                                     "[[routine]]\n"                           // 22
                                     "id = \"b\"\n"                            // 23
                                     "trigger = \"manual\"\n"                  // 24
                                     "[[routine.command]]\n"                   // 25
                                     "device = \"hall_light\"\n"               // 26
                                     "set = { brightness = 80 }\n"             // 27
                                     "undo = { power = \"off\" }\n",           // 28
                                 "u.toml");
  ASSERT_FALSE(bad);
  const std::string& e = bad.error();
  EXPECT_THAT(e, HasSubstr("u.toml:17: routine a.command[1].undo.brightness: device hall_light: brightness=150 is not "
                           "allowed: allowed is an integer 0..100. Fix: write brightness = an integer 0..100."));
  EXPECT_THAT(e, HasSubstr("u.toml:17: routine a.command[1].undo.hue: device hall_light: a dimmer has no attribute "
                           "'hue' (it has: power, brightness)"));
  EXPECT_THAT(e, HasSubstr("u.toml:21: routine a.command[2].undo: expected a table of attribute values. Fix: write "
                           "e.g. undo = { power = \"off\" }"));
  EXPECT_THAT(e, HasSubstr("u.toml:22: routine b: command 1: device hall_light: undo sets 'power', which the command "
                           "does not set"));
}

TEST(CatalogFile, RoutinesMayUseTheMeshsDevicesWhenGiven) {
  const std::string text =
      "[[routine]]\nid = \"r\"\ntrigger = \"door.contact == off\"\n"
      "[[routine.command]]\ndevice = \"lamp\"\nset = { power = \"on\" }\n";
  const auto alone = parse_catalog(text, "add.toml");
  ASSERT_FALSE(alone);
  EXPECT_THAT(alone.error(), HasSubstr("add.toml:3: routine r.trigger: trigger:1:1: no device door in the catalog"));
  routine::DeviceCatalog mesh;
  mesh["door"] = {"door", routine::DeviceKind::contact_sensor, {}, "", "", "kasa://d"};
  mesh["lamp"] = {"lamp", routine::DeviceKind::plug, {}, "", "", "kasa://l"};
  const auto with_mesh = parse_catalog(text, "add.toml", &mesh);
  ASSERT_TRUE(with_mesh) << with_mesh.error();
  EXPECT_EQ(with_mesh->routines.size(), 1u);
  mesh.erase("lamp");
  EXPECT_THAT(parse_catalog(text, "add.toml", &mesh).error(),
              HasSubstr("add.toml:5: routine r.command[1].device: no device lamp in the catalog. Fix: use a device of "
                        "the mesh's catalog (meshctl devices lists them), or add it first with meshctl device add."));
}

// [[precondition]] tables are read by the rules file's parser, against the
// file's devices and, for meshctl precondition add, the mesh's.
TEST(CatalogFile, ParsesPreconditionRulesAsWritten) {
  const std::string devices =
      "[[device]]\nid = \"sprinkler\"\nkind = \"switch\"\nlocation = [0, 0, 0]\ndriver = \"kasa://s\"\n"  // 1-5
      "[[device]]\nid = \"outlet_1\"\nkind = \"plug\"\nlocation = [0, 0, 0]\ndriver = \"kasa://o\"\n";    // 6-10
  const auto file = parse_catalog(devices +
                                      "[[precondition]]\nid = \"fire_safe\"\nwhen = \"sprinkler.power == on\"\n"
                                      "requires = [\"outlet_1.power==off\"]\n",
                                  "c.toml");
  ASSERT_TRUE(file) << file.error();
  ASSERT_EQ(file->preconditions.size(), 1u);
  EXPECT_EQ(file->preconditions[0],
            (routine::PreconditionRuleSpec{"fire_safe", "sprinkler.power == on", {"outlet_1.power==off"}}));
  EXPECT_EQ(file->devices.size(), 2u);

  const auto bad = parse_catalog(devices +
                                     "[[precondition]]\nid = \"fire_safe\"\nwhen = \"sprinkler.power == on\"\n"
                                     "requires = [\"outlet_9.power == off\"]\n"  // 11-14
                                     "[[precondition]]\nid = \"fire_safe\"\nwhen = \"outlet_1.power == on\"\n"
                                     "requires = [\"sprinkler.power == off\"]\n"  // 15-18
                                     "[[precondition]]\nid = \"again\"\nwhen = \"sprinkler.power == on\"\n"
                                     "requires = [\"sprinkler.power == off\"]\n",  // 19-22
                                 "c.toml");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error(), HasSubstr("c.toml:14: precondition fire_safe.requires[1]: column 1: no device outlet_9 in "
                                     "the catalog. Fix: use a device of the catalog"));
  EXPECT_THAT(bad.error(), HasSubstr("c.toml:22: precondition again.requires[1]: sprinkler.power is the attribute "
                                     "`when` constrains"));
  // The first fire_safe was refused, so the second is not a duplicate.
  EXPECT_THAT(bad.error(), ::testing::Not(HasSubstr("defined twice")));

  const std::string add =
      "[[precondition]]\nid = \"r\"\nwhen = \"door.contact == off\"\nrequires = [\"lamp.power == on\"]\n";
  EXPECT_THAT(parse_catalog(add, "add.toml").error(),
              HasSubstr("add.toml:3: precondition r.when: column 1: no device door"));
  routine::DeviceCatalog mesh;
  mesh["door"] = {"door", routine::DeviceKind::lock, {}, "", "", "kasa://d"};
  mesh["lamp"] = {"lamp", routine::DeviceKind::plug, {}, "", "", "kasa://l"};
  EXPECT_THAT(parse_catalog(add, "add.toml", &mesh).error(),
              HasSubstr("add.toml:3: precondition r.when: column 6: device door"));
  const std::string add_lock =
      "[[precondition]]\nid = \"r\"\nwhen = \"door.locked == false\"\nrequires = [\"lamp.power == on\"]\n";
  const auto with_mesh = parse_catalog(add_lock, "add.toml", &mesh);
  ASSERT_TRUE(with_mesh) << with_mesh.error();
  EXPECT_EQ(with_mesh->preconditions.size(), 1u);
  EXPECT_THAT(parse_catalog("[preconditions]\n", "c.toml").error(),
              HasSubstr("a catalog holds [[device]], [[routine]] and [[precondition]] tables only"));
}

}  // namespace
}  // namespace mesh::agent
