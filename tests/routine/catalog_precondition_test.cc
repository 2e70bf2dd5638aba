// APEX precondition rules in the catalog: rule changes are ordered and
// refused by the catalog group like routine changes, applied identically by
// every replica and by every node that learns the list, resolved against
// the devices after every change (a rule whose device is gone is reported,
// not dropped), and checked against the whole catalog before they are
// submitted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kgroup/client_state_machine.h"
#include "routine/catalog.h"
#include "tests/support/device_specs.h"
#include "routine/catalog_log.h"
#include "routine/device_codec.h"
#include "routine/precondition_codec.h"

namespace mesh::routine {
namespace {

using ::testing::HasSubstr;

using test_support::device_spec;

PreconditionRuleSpec rule(const std::string& id, const std::string& when, std::vector<std::string> required) {
  return {id, when, std::move(required)};
}

// The rule of most tests: the sprinkler sprays only with the outlet off.
PreconditionRuleSpec sprinkler_rule() {
  return rule("sprinkler_needs_outlet_off", "sprinkler.power == on", {"outlet_1.power == off"});
}

proto::CatalogChange put(const DeviceSpec& spec, uint64_t id, bool replace = false) {
  proto::CatalogChange change;
  change.set_change_id(id);
  *change.mutable_put() = to_proto(spec);
  change.set_replace(replace);
  return change;
}

proto::CatalogChange remove_device(const std::string& device_id, uint64_t id) {
  proto::CatalogChange change;
  change.set_change_id(id);
  change.set_remove(device_id);
  return change;
}

proto::CatalogChange put(const PreconditionRuleSpec& spec, uint64_t id, bool replace = false) {
  proto::CatalogChange change;
  change.set_change_id(id);
  *change.mutable_put_precondition() = to_proto(spec);
  change.set_replace(replace);
  return change;
}

proto::CatalogChange remove_rule(const std::string& rule_id, uint64_t id) {
  proto::CatalogChange change;
  change.set_change_id(id);
  change.set_remove_precondition(rule_id);
  return change;
}

std::string write(const proto::CatalogChange& change) {
  return kgroup::ClientStateMachine::encode_write(change.change_id(), change.SerializeAsString());
}

TEST(CatalogLogPreconditions, RuleChangesAreOrderedAndRefusedLikeRoutines) {
  CatalogLog log;
  log.apply(1, write(put(device_spec("sprinkler", DeviceKind::switch_), 1)));
  log.apply(2, write(put(device_spec("outlet_1", DeviceKind::plug), 2)));
  log.apply(3, write(put(sprinkler_rule(), 3)));
  const auto stricter =
      rule("sprinkler_needs_outlet_off", "sprinkler.power == on", {"outlet_1.power == off", "sprinkler.power != off"});
  log.apply(4, write(put(rule("sprinkler_needs_outlet_off", "sprinkler.power == off", {"outlet_1.power == off"}),
                         4)));                        // defined differently
  log.apply(5, write(put(sprinkler_rule(), 5)));      // identical: accepted, no change
  log.apply(6, write(remove_device("outlet_1", 6)));  // named by the rule
  log.apply(7, write(put(stricter, 7, true)));        // invalid (own variable) but decodes: resolved later
  log.apply(8, write(remove_rule("sprinkler_needs_outlet_off", 8)));
  log.apply(9, write(remove_device("outlet_1", 9)));  // no rule names it now
  log.apply(10, write(put(rule("empty", "sprinkler.power == on", {}), 10)));
  log.apply(11, write(remove_rule("Not An Id", 11)));
  ASSERT_EQ(log.entries().size(), 11u);
  std::vector<bool> refused;
  for (const auto& entry : log.entries()) refused.push_back(entry.refused());
  EXPECT_EQ(refused, (std::vector<bool>{false, false, false, true, false, true, false, false, false, true, true}));
  EXPECT_EQ(log.entries()[3].detail(),
            "precondition rule sprinkler_needs_outlet_off is already defined differently (by an earlier run-time "
            "change: when sprinkler.power == on); use 'meshctl precondition add --replace' to change it, or remove "
            "it first");
  EXPECT_EQ(log.entries()[5].detail(),
            "device outlet_1 is named by precondition rule sprinkler_needs_outlet_off; change or remove the rule "
            "first (meshctl precondition remove sprinkler_needs_outlet_off)");
  EXPECT_EQ(log.entries()[9].detail(), "precondition empty.requires: the list is empty");
  EXPECT_THAT(log.entries()[10].detail(), HasSubstr("rule id 'Not An Id' has 'N'"));
}

TEST(CatalogPreconditions, RulesOverlayTheFileAndAreResolvedAgainstTheDevices) {
  Catalog catalog;
  int changes = 0;
  catalog.set_on_change([&] { ++changes; });
  catalog.set_base({device_spec("sprinkler", DeviceKind::switch_), device_spec("outlet_1", DeviceKind::plug),
                    device_spec("hall", DeviceKind::dimmer)},
                   "digest", {}, {sprinkler_rule()});
  ASSERT_NE(catalog.find_precondition("sprinkler_needs_outlet_off"), nullptr);
  EXPECT_TRUE(catalog.precondition_in_file("sprinkler_needs_outlet_off"));
  ASSERT_EQ(catalog.precondition_rules().size(), 1u);
  EXPECT_EQ(catalog.precondition_rules()[0].preconditions.at(0).text(), "outlet_1.power == off");
  EXPECT_TRUE(catalog.precondition_problems().empty());

  CatalogLog log([&](const proto::CatalogEntry& entry) { EXPECT_TRUE(catalog.append(entry)); });
  log.apply(1, write(put(rule("dim_hall_first", "hall.power == on", {"hall.brightness in 0..30"}), 1)));
  ASSERT_NE(catalog.find_precondition("dim_hall_first"), nullptr);
  EXPECT_FALSE(catalog.precondition_in_file("dim_hall_first"));
  EXPECT_EQ(catalog.precondition_rules().size(), 2u);

  // A device changed under a rule (by a node that had not yet seen the
  // rule, say) leaves the rule defined, reported, and out of planning.
  DeviceSpec outlet_sensor = device_spec("outlet_1", DeviceKind::motion_sensor);
  log.apply(2, write(put(outlet_sensor, 2, true)));
  ASSERT_EQ(catalog.precondition_problems().count("sprinkler_needs_outlet_off"), 1u);
  EXPECT_EQ(catalog.precondition_problems().at("sprinkler_needs_outlet_off"),
            "precondition sprinkler_needs_outlet_off.requires[1]: column 10: device outlet_1: a motion_sensor has no "
            "attribute 'power' (it has: motion)");
  EXPECT_NE(catalog.find_precondition("sprinkler_needs_outlet_off"), nullptr);
  ASSERT_EQ(catalog.precondition_rules().size(), 1u);
  EXPECT_EQ(catalog.precondition_rules()[0].id, "dim_hall_first");

  // The device back as it was: the rule applies again.
  log.apply(3, write(put(device_spec("outlet_1", DeviceKind::plug), 3, true)));
  EXPECT_TRUE(catalog.precondition_problems().empty());
  EXPECT_EQ(catalog.precondition_rules().size(), 2u);

  // A removal hides the file's rule too.
  log.apply(4, write(remove_rule("sprinkler_needs_outlet_off", 4)));
  EXPECT_EQ(catalog.find_precondition("sprinkler_needs_outlet_off"), nullptr);
  EXPECT_EQ(changes, 5);  // base, put rule, device changed, device back, remove rule
  catalog.reset({});
  EXPECT_NE(catalog.find_precondition("sprinkler_needs_outlet_off"), nullptr);
  EXPECT_EQ(catalog.find_precondition("dim_hall_first"), nullptr);
}

// What CatalogSync does with a page of entries: encoded in a RoutineBody,
// decoded on another node and appended. Both nodes end with the same rules.
TEST(CatalogPreconditions, SyncedEntriesCarryRulesAndApplyIdentically) {
  const std::vector<DeviceSpec> file = {device_spec("sprinkler", DeviceKind::switch_), device_spec("outlet_1", DeviceKind::plug),
                                        device_spec("outlet_2", DeviceKind::plug)};
  Catalog leader;
  leader.set_base(file, "digest");
  CatalogLog log([&](const proto::CatalogEntry& entry) { EXPECT_TRUE(leader.append(entry)); });
  log.apply(1, write(put(sprinkler_rule(), 1)));
  log.apply(2, write(put(rule("outlet_2_after_1", "outlet_2.power == off", {"outlet_1.power == off"}), 2)));
  log.apply(3, write(remove_device("outlet_2", 3)));  // refused: a rule names it
  log.apply(4, write(remove_rule("outlet_2_after_1", 4)));
  log.apply(5, write(remove_device("outlet_2", 5)));

  proto::RoutineBody body;
  for (const auto& entry : leader.entries()) *body.mutable_changes()->add_entries() = entry;
  body.mutable_changes()->set_latest(leader.version());
  const auto received = parse_message<proto::RoutineBody>(body.SerializeAsString());
  ASSERT_TRUE(received);
  Catalog follower;
  follower.set_base(file, "digest");
  for (const auto& entry : received->changes().entries()) ASSERT_TRUE(follower.append(entry));

  EXPECT_EQ(follower.version(), 5u);
  EXPECT_EQ(follower.preconditions(), leader.preconditions());
  EXPECT_EQ(follower.precondition_rules(), leader.precondition_rules());
  EXPECT_EQ(follower.devices(), leader.devices());
  ASSERT_EQ(follower.preconditions().size(), 1u);
  EXPECT_EQ(follower.preconditions().begin()->second, sprinkler_rule());
  EXPECT_EQ(follower.find("outlet_2"), nullptr);
}

TEST(CatalogPreconditions, ClientCheckSeesTheFileAndTheDevices) {
  Catalog catalog;
  catalog.set_base({device_spec("sprinkler", DeviceKind::switch_), device_spec("outlet_1", DeviceKind::plug),
                    device_spec("hall", DeviceKind::dimmer)},
                   "digest", {}, {sprinkler_rule()});
  EXPECT_FALSE(check_change(catalog, put(sprinkler_rule(), 1)));
  EXPECT_EQ(
      check_change(catalog, put(rule("sprinkler_needs_outlet_off", "sprinkler.power == on", {"hall.power == off"}), 2)),
      "precondition rule sprinkler_needs_outlet_off is already defined differently (in the catalog file: when "
      "sprinkler.power == on); use 'meshctl precondition add --replace' to change it, or remove it first");
  EXPECT_FALSE(check_change(
      catalog, put(rule("sprinkler_needs_outlet_off", "sprinkler.power == on", {"hall.power == off"}), 3, true)));
  EXPECT_EQ(check_change(catalog, put(rule("garden", "tap.power == on", {"outlet_1.power == off"}), 4)),
            "precondition garden.when: column 1: no device tap in the catalog");
  EXPECT_EQ(check_change(catalog, put(rule("dim", "hall.power == on", {"hall.power != off"}), 5)),
            "precondition dim.requires[1]: hall.power is the attribute `when` constrains; it cannot be its own "
            "precondition");
  EXPECT_EQ(check_change(catalog, remove_device("outlet_1", 6)),
            "device outlet_1 is named by precondition rule sprinkler_needs_outlet_off; change or remove the rule "
            "first (meshctl precondition remove sprinkler_needs_outlet_off)");
  EXPECT_FALSE(check_change(catalog, remove_device("hall", 7)));
  EXPECT_EQ(check_change(catalog, put(device_spec("outlet_1", DeviceKind::motion_sensor), 8, true)),
            "changing device outlet_1 would break precondition rule sprinkler_needs_outlet_off (precondition "
            "sprinkler_needs_outlet_off.requires[1]: column 10: device outlet_1: a motion_sensor has no attribute "
            "'power' (it has: motion)); change the rule first");
  EXPECT_EQ(check_change(catalog, remove_rule("nope", 9)), "no precondition rule nope in the catalog");
  EXPECT_FALSE(check_change(catalog, remove_rule("sprinkler_needs_outlet_off", 10)));

  // Within the decoder's bounds, but over one catalog change's.
  std::string members;
  for (int i = 0; i <= 63; ++i) members += (i == 0 ? "" : ",          ") + std::to_string(i);
  const auto too_big =
      check_change(catalog, put(rule("huge", "sprinkler.power == on", {"hall.brightness in {" + members + "}"}), 11));
  ASSERT_TRUE(too_big);
  EXPECT_THAT(*too_big, HasSubstr("precondition rule huge takes 864 bytes encoded"));
  EXPECT_THAT(*too_big, HasSubstr("a run-time rule must fit in 600"));

  EXPECT_EQ(describe(put(sprinkler_rule(), 13)), "put precondition sprinkler_needs_outlet_off");
  EXPECT_EQ(describe(remove_rule("x", 14)), "remove precondition x");
}

}  // namespace
}  // namespace mesh::routine
