#include "routine/adhoc_combo.h"

#include <gtest/gtest.h>

#include "routine/device_codec.h"

namespace mesh::routine {
namespace {

TEST(AdhocCombo, IdsNameTheSubjectDeviceAndNoCatalogRoutine) {
  EXPECT_EQ(adhoc_routine_id("garden_sprinkler"), "adhoc:garden_sprinkler");
  EXPECT_TRUE(is_adhoc_routine("adhoc:garden_sprinkler"));
  EXPECT_FALSE(is_adhoc_routine("adhoc_lights"));
  // A catalog routine can never take an ad hoc combo's id.
  EXPECT_TRUE(check_routine_id(adhoc_routine_id("garden_sprinkler")).has_value());
}

TEST(AdhocCombo, SpecIsOneManualMustCommandWithItsLockStrategy) {
  const RoutineSpec spec = adhoc_spec("garden_sprinkler", {{"power", Value{std::string("on")}}}, LockStrategy::ola);
  EXPECT_EQ(spec.id, "adhoc:garden_sprinkler");
  EXPECT_TRUE(spec.trigger.manual);
  ASSERT_EQ(spec.commands.size(), 1u);
  EXPECT_EQ(spec.commands[0].device, "garden_sprinkler");
  EXPECT_TRUE(spec.commands[0].must);
  EXPECT_FALSE(spec.commands[0].duration);
  EXPECT_TRUE(spec.commands[0].undo.empty());
  EXPECT_EQ(spec.lock_strategy, LockStrategy::ola);
}

TEST(AdhocCombo, RoundTripsThroughItsMessage) {
  for (const LockStrategy lock :
       {LockStrategy::mesh_default, LockStrategy::sla, LockStrategy::ola, LockStrategy::aggressive}) {
    const RoutineSpec spec =
        adhoc_spec("thermostat", {{"power", Value{std::string("on")}}, {"target", Value{21.5}}}, lock);
    const proto::AdhocCommandMsg msg = to_adhoc_proto(spec);
    EXPECT_EQ(msg.lock_strategy().empty(), lock == LockStrategy::mesh_default);
    auto decoded = adhoc_from_proto(msg);
    ASSERT_TRUE(decoded) << decoded.error();
    EXPECT_EQ(*decoded, spec);
  }
}

TEST(AdhocCombo, DecoderRejectsBadInput) {
  proto::AdhocCommandMsg good = to_adhoc_proto(adhoc_spec("lamp", {{"power", Value{std::string("on")}}}, {}));
  ASSERT_TRUE(adhoc_from_proto(good));

  proto::AdhocCommandMsg bad_device = good;
  bad_device.set_device("Bad#Device");
  EXPECT_FALSE(adhoc_from_proto(bad_device));
  bad_device.set_device("");
  EXPECT_FALSE(adhoc_from_proto(bad_device));

  proto::AdhocCommandMsg no_value = good;
  no_value.clear_values();
  EXPECT_FALSE(adhoc_from_proto(no_value));

  proto::AdhocCommandMsg twice = good;
  *twice.add_values() = good.values(0);
  const auto twice_decoded = adhoc_from_proto(twice);
  ASSERT_FALSE(twice_decoded);
  EXPECT_NE(twice_decoded.error().find("set twice"), std::string::npos);

  proto::AdhocCommandMsg unset_value = good;
  unset_value.mutable_values(0)->clear_value();
  EXPECT_FALSE(adhoc_from_proto(unset_value));

  proto::AdhocCommandMsg bad_lock = good;
  bad_lock.set_lock_strategy("default");
  EXPECT_FALSE(adhoc_from_proto(bad_lock));
  bad_lock.set_lock_strategy("conservative-ish");
  const auto bad_lock_decoded = adhoc_from_proto(bad_lock);
  ASSERT_FALSE(bad_lock_decoded);
  EXPECT_NE(bad_lock_decoded.error().find("lock strategy"), std::string::npos);
}

}  // namespace
}  // namespace mesh::routine
