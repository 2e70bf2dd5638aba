#include "routine/catalog.h"

#include <gtest/gtest.h>

#include "kgroup/client_state_machine.h"
#include "routine/catalog_log.h"
#include "routine/device_codec.h"

namespace mesh::routine {
namespace {

DeviceSpec plug(const std::string& id, const std::string& driver = "kasa://10.0.0.9") {
  DeviceSpec spec;
  spec.id = id;
  spec.kind = DeviceKind::plug;
  spec.location = {1, 2, 0};
  spec.driver = driver;
  return spec;
}

proto::CatalogChange put(const DeviceSpec& spec, uint64_t id, bool replace = false) {
  proto::CatalogChange change;
  change.set_change_id(id);
  *change.mutable_put() = to_proto(spec);
  change.set_replace(replace);
  return change;
}

proto::CatalogChange remove(const std::string& device, uint64_t id) {
  proto::CatalogChange change;
  change.set_change_id(id);
  change.set_remove(device);
  return change;
}

DeviceSpec dimmer(const std::string& id) {
  DeviceSpec spec = plug(id);
  spec.kind = DeviceKind::dimmer;
  return spec;
}

RoutineSpec routine(const std::string& id, const std::string& trigger, const std::string& device,
                    Attributes values = {{"power", true}}) {
  RoutineSpec spec;
  spec.id = id;
  spec.trigger_text = trigger;
  spec.trigger = *build_trigger(trigger, "", {});
  spec.commands.push_back({device, std::move(values), std::nullopt, true, {}});
  return spec;
}

proto::CatalogChange put(const RoutineSpec& spec, uint64_t id, bool replace = false) {
  proto::CatalogChange change;
  change.set_change_id(id);
  *change.mutable_put_routine() = to_proto(spec);
  change.set_replace(replace);
  return change;
}

proto::CatalogChange remove_routine(const std::string& routine_id, uint64_t id) {
  proto::CatalogChange change;
  change.set_change_id(id);
  change.set_remove_routine(routine_id);
  return change;
}

proto::CatalogChange enable(const std::string& routine_id, bool enabled, uint64_t id) {
  proto::CatalogChange change;
  change.set_change_id(id);
  change.mutable_set_routine_enabled()->set_id(routine_id);
  change.mutable_set_routine_enabled()->set_enabled(enabled);
  return change;
}

std::string write(const proto::CatalogChange& change) {
  return kgroup::ClientStateMachine::encode_write(change.change_id(), change.SerializeAsString());
}

TEST(CatalogLog, OrdersChangesAndRefusesConflictsIdenticallyEverywhere) {
  CatalogLog log;
  log.apply(1, write(put(plug("a"), 11)));
  log.apply(2, write(put(plug("a", "kasa://10.0.0.10"), 12)));        // conflicting definition
  log.apply(3, write(put(plug("a"), 13)));                            // identical: accepted, no change
  log.apply(4, write(put(plug("a", "kasa://10.0.0.10"), 14, true)));  // explicit replace
  log.apply(5, write(put(plug("a"), 11)));                            // retry of change 11
  log.apply(6, write(remove("a", 15)));
  ASSERT_EQ(log.entries().size(), 5u);
  EXPECT_FALSE(log.entries()[0].refused());
  EXPECT_TRUE(log.entries()[1].refused());
  EXPECT_NE(log.entries()[1].detail().find("already defined differently"), std::string::npos);
  EXPECT_FALSE(log.entries()[2].refused());
  EXPECT_FALSE(log.entries()[3].refused());
  EXPECT_EQ(*log.position_of(5), 1u);  // the retry maps to its first version
  EXPECT_EQ(*log.position_of(6), 5u);

  CatalogLog copy;
  ASSERT_TRUE(copy.restore(log.snapshot()));
  EXPECT_EQ(copy.snapshot(), log.snapshot());
  const auto entry = parse_message<proto::CatalogEntry>(*copy.read("2"));
  ASSERT_TRUE(entry);
  EXPECT_TRUE(entry->refused());
  EXPECT_FALSE(copy.read("9"));
  EXPECT_FALSE(copy.read("x"));
  EXPECT_FALSE(copy.restore("garbage that is not a snapshot"));
}

TEST(CatalogLog, RefusesInvalidSpecs) {
  CatalogLog log;
  DeviceSpec bad = plug("Bad Id");
  log.apply(1, write(put(bad, 1)));
  proto::CatalogChange no_location = put(plug("x"), 2);
  no_location.mutable_put()->clear_location();
  log.apply(2, write(no_location));
  ASSERT_EQ(log.entries().size(), 2u);
  EXPECT_TRUE(log.entries()[0].refused());
  EXPECT_TRUE(log.entries()[1].refused());
  EXPECT_NE(log.entries()[1].detail().find("3 coordinates"), std::string::npos);
}

TEST(Catalog, RunTimeChangesOverlayTheFile) {
  Catalog catalog;
  int changes = 0;
  catalog.set_on_change([&] { ++changes; });
  catalog.set_base({plug("a"), plug("b")}, "digest");
  EXPECT_EQ(catalog.devices().size(), 2u);
  CatalogLog log([&](const proto::CatalogEntry& entry) { EXPECT_TRUE(catalog.append(entry)); });
  log.apply(1, write(remove("a", 1)));
  log.apply(2, write(put(plug("c"), 2)));
  log.apply(3, write(put(plug("c", "kasa://x"), 3)));  // refused: no effect
  EXPECT_EQ(catalog.version(), 3u);
  EXPECT_EQ(catalog.find("a"), nullptr);
  ASSERT_NE(catalog.find("c"), nullptr);
  EXPECT_EQ(catalog.find("c")->driver, "kasa://10.0.0.9");
  EXPECT_EQ(changes, 3);  // base, remove, put

  // Earlier versions are recomputed from the same list (device handoff).
  EXPECT_EQ(catalog.devices_at(0).size(), 2u);
  EXPECT_EQ(catalog.devices_at(1).count("a"), 0u);
  EXPECT_EQ(catalog.devices_at(1).count("c"), 0u);
  EXPECT_EQ(catalog.devices_at(2).count("c"), 1u);
  EXPECT_EQ(catalog.devices_at(3), catalog.devices());

  // A gap is refused; a reset to a proper list is taken.
  proto::CatalogEntry late;
  late.set_version(9);
  EXPECT_FALSE(catalog.append(late));
  EXPECT_TRUE(catalog.reset({}));
  EXPECT_NE(catalog.find("a"), nullptr);
}

TEST(Catalog, ClientCheckSeesTheFile) {
  Catalog catalog;
  catalog.set_base({plug("a")}, "digest");
  EXPECT_FALSE(check_change(catalog, put(plug("a"), 1)));
  const auto conflict = check_change(catalog, put(plug("a", "kasa://other"), 2));
  ASSERT_TRUE(conflict);
  EXPECT_NE(conflict->find("in the catalog file"), std::string::npos);
  EXPECT_FALSE(check_change(catalog, put(plug("a", "kasa://other"), 3, true)));
  EXPECT_TRUE(check_change(catalog, remove("zz", 4)));
}

TEST(CatalogLog, RoutineChangesAreOrderedAndRefusedLikeDevices) {
  CatalogLog log;
  log.apply(1, write(put(plug("lamp"), 1)));
  log.apply(2, write(put(routine("evening", "lamp.power == off", "lamp"), 2)));
  log.apply(3, write(put(routine("evening", "lamp.power == on", "lamp"), 3)));        // defined differently
  log.apply(4, write(put(routine("evening", "lamp.power==off", "lamp"), 4)));         // the same, spaced otherwise
  log.apply(5, write(put(routine("evening", "lamp.power == on", "lamp"), 5, true)));  // replace
  log.apply(6, write(remove("lamp", 6)));                                              // used by evening
  log.apply(7, write(enable("evening", false, 7)));
  log.apply(8, write(remove_routine("evening", 8)));
  log.apply(9, write(remove("lamp", 9)));
  proto::CatalogChange bad_trigger = put(routine("broken", "lamp.power == on", "lamp"), 10);
  bad_trigger.mutable_put_routine()->set_trigger("lamp.power ==");
  log.apply(10, write(bad_trigger));
  log.apply(11, write(remove_routine("Not An Id", 11)));
  ASSERT_EQ(log.entries().size(), 11u);
  std::vector<bool> refused;
  for (const auto& entry : log.entries()) refused.push_back(entry.refused());
  EXPECT_EQ(refused, (std::vector<bool>{false, false, true, false, false, true, false, false, false, true, true}));
  EXPECT_EQ(log.entries()[2].detail(),
            "routine evening is already defined differently (by an earlier run-time change: trigger lamp.power == "
            "off); use 'meshctl routine add --replace' to change it, or remove it first");
  EXPECT_EQ(log.entries()[5].detail(),
            "device lamp is used by routine evening; change or remove the routine first (meshctl routine remove "
            "evening)");
  EXPECT_EQ(log.entries()[9].detail(),
            "routine broken: trigger:1:14: expected a value after '=='; write a number, on, off, true, false or a "
            "\"quoted string\" (found the end of the trigger)");
}

TEST(Catalog, RoutinesOverlayTheFileAndFollowEnableChanges) {
  Catalog catalog;
  int changes = 0;
  catalog.set_on_change([&] { ++changes; });
  catalog.set_base({plug("lamp"), dimmer("hall")}, "digest", {routine("evening", "lamp.power == off", "lamp")});
  ASSERT_NE(catalog.find_routine("evening"), nullptr);
  EXPECT_TRUE(catalog.routine_in_file("evening"));
  EXPECT_TRUE(catalog.routine_problems().empty());
  CatalogLog log([&](const proto::CatalogEntry& entry) { EXPECT_TRUE(catalog.append(entry)); });
  log.apply(1, write(enable("evening", false, 1)));
  EXPECT_FALSE(catalog.find_routine("evening")->enabled);
  log.apply(2, write(put(routine("night", "hall.brightness > 10", "hall", {{"brightness", 5.0}}), 2)));
  ASSERT_NE(catalog.find_routine("night"), nullptr);
  EXPECT_FALSE(catalog.routine_in_file("night"));
  log.apply(3, write(remove_routine("evening", 3)));
  EXPECT_EQ(catalog.find_routine("evening"), nullptr);
  log.apply(4, write(enable("evening", true, 4)));  // no such routine any more: no effect
  EXPECT_EQ(catalog.find_routine("evening"), nullptr);
  EXPECT_EQ(changes, 4);  // base, disable, put, remove

  // A device changed under a routine (say, by a node that had not yet seen
  // the routine) leaves the routine defined but unable to run.
  DeviceSpec hall_plug = plug("hall");
  log.apply(5, write(put(hall_plug, 5, true)));
  ASSERT_EQ(catalog.routine_problems().count("night"), 1u);
  EXPECT_EQ(catalog.routine_problems().at("night"),
            "routine night: trigger:1:6: device hall: a plug has no attribute 'brightness' (it has: power)");
  EXPECT_NE(catalog.find_routine("night"), nullptr);
  catalog.reset({});
  EXPECT_NE(catalog.find_routine("evening"), nullptr);
  EXPECT_EQ(catalog.find_routine("night"), nullptr);
}

TEST(Catalog, ClientCheckOfRoutinesSeesTheFileAndTheDevices) {
  Catalog catalog;
  catalog.set_base({plug("lamp"), dimmer("hall")}, "digest", {routine("evening", "lamp.power == off", "lamp")});
  EXPECT_FALSE(check_change(catalog, put(routine("evening", "lamp.power == off", "lamp"), 1)));
  EXPECT_EQ(check_change(catalog, put(routine("evening", "lamp.power == on", "lamp"), 2)),
            "routine evening is already defined differently (in the catalog file: trigger lamp.power == off); use "
            "'meshctl routine add --replace' to change it, or remove it first");
  EXPECT_FALSE(check_change(catalog, put(routine("evening", "lamp.power == on", "lamp"), 3, true)));
  EXPECT_EQ(check_change(catalog, put(routine("garden", "tap.power == on", "lamp"), 4)),
            "routine garden: trigger:1:1: no device tap in the catalog");
  EXPECT_EQ(check_change(catalog, put(routine("garden", "lamp.power == on", "tap"), 5)),
            "routine garden: command 1: no device tap in the catalog");
  EXPECT_EQ(check_change(catalog, put(routine("dim", "lamp.power == on", "hall", {{"brightness", 150.0}}), 6)),
            "routine dim: command 1: device hall: brightness=150 is not allowed: allowed is an integer 0..100");
  EXPECT_EQ(check_change(catalog, remove("lamp", 7)),
            "device lamp is used by routine evening; change or remove the routine first (meshctl routine remove "
            "evening)");
  EXPECT_FALSE(check_change(catalog, remove("hall", 8)));
  EXPECT_EQ(check_change(catalog, put(dimmer("lamp"), 9, true)), std::nullopt);  // a dimmer has power too
  DeviceSpec lamp_sensor = plug("lamp");
  lamp_sensor.kind = DeviceKind::motion_sensor;
  EXPECT_EQ(check_change(catalog, put(lamp_sensor, 10, true)),
            "changing device lamp would break routine evening (routine evening: trigger:1:6: device lamp: a "
            "motion_sensor has no attribute 'power' (it has: motion)); change the routine first");
  EXPECT_EQ(check_change(catalog, remove_routine("nope", 11)), "no routine nope in the catalog");
  EXPECT_EQ(check_change(catalog, enable("nope", true, 12)), "no routine nope in the catalog");
  EXPECT_FALSE(check_change(catalog, enable("evening", false, 13)));
  EXPECT_FALSE(check_change(catalog, remove_routine("evening", 14)));

  RoutineSpec huge = routine("huge", "lamp.power == on", "lamp");
  for (int i = 0; i < 30; ++i) {
    huge.commands.push_back({"hall", {{"brightness", 1.0 * i}, {"power", true}}, {}, true, {}});
  }
  const auto too_big = check_change(catalog, put(huge, 15));
  ASSERT_TRUE(too_big);
  EXPECT_NE(too_big->find("a run-time routine must fit in 600"), std::string::npos) << *too_big;

  EXPECT_EQ(describe(enable("evening", false, 16)), "disable routine evening");
  EXPECT_EQ(describe(put(plug("lamp"), 17)), "put device lamp");
}

// Undo values are refused by the catalog like command values, naming the
// routine, the command, the attribute and the fix; and they count towards
// the size a run-time routine may take.
TEST(Catalog, ClientCheckOfUndoValues) {
  Catalog catalog;
  catalog.set_base({plug("lamp"), dimmer("hall")}, "digest", {});
  RoutineSpec dim = routine("dim", "manual", "hall", {{"power", true}, {"brightness", 80.0}});
  dim.commands[0].undo = {{"brightness", 10.0}};
  EXPECT_FALSE(check_change(catalog, put(dim, 1)));

  RoutineSpec out_of_range = dim;
  out_of_range.commands[0].undo["brightness"] = -1.0;
  EXPECT_EQ(check_change(catalog, put(out_of_range, 2)),
            "routine dim: command 1: undo: device hall: brightness=-1 is not allowed: allowed is an integer 0..100; "
            "give undo a value the device takes");
  RoutineSpec not_set = dim;
  not_set.commands[0].undo = {{"level", 1.0}};
  EXPECT_EQ(check_change(catalog, put(not_set, 3)),
            "routine dim: command 1: device hall: undo sets 'level', which the command does not set; an undo replaces "
            "what a rollback restores of the command's own attributes: remove 'level' from undo or set it in the "
            "command too");

  // Just under the bound without undo values, over it with them.
  RoutineSpec big = routine("big", "manual", "lamp");
  while (to_proto(big).ByteSizeLong() + 40 < kMaxRoutineSpecBytes) {
    big.commands.push_back({"hall", {{"brightness", 50.0}, {"power", true}}, {}, true, {}});
  }
  ASSERT_FALSE(check_change(catalog, put(big, 4)));
  for (auto& command : big.commands) {
    if (command.device == "hall") command.undo = {{"brightness", 0.0}, {"power", false}};
  }
  const auto too_big = check_change(catalog, put(big, 5));
  ASSERT_TRUE(too_big);
  EXPECT_NE(too_big->find("a run-time routine must fit in 600"), std::string::npos) << *too_big;
}

}  // namespace
}  // namespace mesh::routine
