// The wire form of a precondition rule (routine/precondition_codec.h): what
// a node encodes decodes to the same rule anywhere, and what no rules file
// could hold is refused with the rule and the key named.
#include "routine/precondition_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

using ::testing::HasSubstr;

proto::PreconditionRuleMsg message(const std::string& id, const std::string& when,
                                   const std::vector<std::string>& required) {
  proto::PreconditionRuleMsg msg;
  msg.set_id(id);
  msg.set_when(when);
  for (const auto& text : required) msg.add_requirements(text);
  return msg;
}

TEST(PreconditionCodec, RoundTripsTheRuleAsWritten) {
  const PreconditionRuleSpec spec{
      "fire_safe",
      "sprinkler.power == on",
      {"outlet_1.power == off", "lab_thermostat.target in 18..24", "hall_mode.preset in {\"eco\", \"away\"}"}};
  proto::PreconditionRuleMsg msg;
  ASSERT_TRUE(msg.ParseFromString(to_proto(spec).SerializeAsString()));
  const auto decoded = from_proto(msg);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(*decoded, spec);
}

TEST(PreconditionCodec, DevicesAreNotItsBusiness) {
  // Unknown devices decode: the catalog resolves rules against its devices.
  EXPECT_TRUE(from_proto(message("r", "nowhere.power == on", {"elsewhere.level > 3"})));
}

TEST(PreconditionCodec, RefusesWhatNoRulesFileCouldHold) {
  EXPECT_THAT(from_proto(message("Bad Id", "a.power == on", {"b.power == off"})).error(),
              HasSubstr("rule id 'Bad Id' has 'B'"));
  EXPECT_EQ(from_proto(message("r", "", {"b.power == off"})).error(), "precondition r.when: empty condition");
  EXPECT_EQ(from_proto(message("r", "a.power == on", {})).error(), "precondition r.requires: the list is empty");
  EXPECT_EQ(from_proto(message("r", "a.power == on", std::vector<std::string>(kMaxRulePreconditions + 1, "b.x == 1")))
                .error(),
            "precondition r.requires: 33 conditions; at most 32 are allowed");
  EXPECT_EQ(from_proto(message("r", "a.power == on", {"b.power == off", "b.name == \"caf\xc3\xa9\""})).error(),
            "precondition r.requires[2]: byte 0xc3 is not printable ASCII");
  EXPECT_EQ(from_proto(message("r", "a.power == on", {"b.power\n== off"})).error(),
            "precondition r.requires[1]: byte 0x0a is not printable ASCII");
  EXPECT_EQ(from_proto(message("r", "a.power == on", {std::string(kMaxConditionLength + 1, 'x')})).error(),
            "precondition r.requires[1]: condition of 1025 bytes; at most 1024 are allowed");
  EXPECT_THAT(from_proto(message("r", "a.power ==", {"b.power == off"})).error(),
              HasSubstr("precondition r.when: column 11: expected a value"));
}

}  // namespace
}  // namespace mesh::routine
