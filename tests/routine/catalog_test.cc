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

}  // namespace
}  // namespace mesh::routine
