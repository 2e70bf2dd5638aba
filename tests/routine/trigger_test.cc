#include "routine/trigger.h"

#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

DeviceSpec device(const std::string& id, DeviceKind kind) {
  DeviceSpec spec;
  spec.id = id;
  spec.kind = kind;
  spec.driver = "emulated://" + id;
  return spec;
}

const DeviceCatalog& catalog() {
  static const DeviceCatalog devices = {
      {"hall_motion", device("hall_motion", DeviceKind::motion_sensor)},
      {"hall_light", device("hall_light", DeviceKind::dimmer)},
      {"lab.sensor", device("lab.sensor", DeviceKind::sensor)},
      {"front_lock", device("front_lock", DeviceKind::lock)},
  };
  return devices;
}

std::string error_of(std::string_view text) {
  auto trigger = parse_trigger(text, catalog());
  return trigger ? std::string("accepted") : trigger.error().text();
}

std::string error_without_catalog(std::string_view text) {
  auto trigger = parse_trigger(text);
  return trigger ? std::string("accepted") : trigger.error().text();
}

Trigger parsed(std::string_view text) {
  auto trigger = parse_trigger(text, catalog());
  EXPECT_TRUE(trigger) << text << ": " << trigger.error().text();
  return trigger ? *trigger : Trigger{};
}

TEST(Trigger, AcceptsTheGrammar) {
  EXPECT_EQ(error_of("hall_motion.motion == on"), "accepted");
  EXPECT_EQ(error_of("hall_light.brightness>=30 and hall_light.power!=off"), "accepted");
  EXPECT_EQ(error_of("lab.sensor.temperature < -5.5 or (lab.sensor.humidity > 60 and not hall_motion.motion == on)"),
            "accepted");
  EXPECT_EQ(error_of("front_lock.locked == false"), "accepted");
  EXPECT_EQ(error_of("  manual  "), "accepted");
  EXPECT_EQ(error_without_catalog("door.state == \"open \\\"wide\\\"\""), "accepted");
  EXPECT_EQ(error_of("hall_motion.motion == on\n  and hall_light.power == off"), "accepted");
  const Trigger manual = parsed("manual");
  EXPECT_TRUE(manual.manual);
  EXPECT_TRUE(devices(manual).empty());
}

TEST(Trigger, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("hall_light.brightness >= "),
            "trigger:1:26: expected a value after '>='; write a number, on, off, true, false or a \"quoted string\" "
            "(found the end of the trigger)");
  EXPECT_EQ(error_of(""), "trigger:1:1: the trigger is empty; write a condition such as hall_motion.motion == on, or "
                          "manual");
  EXPECT_EQ(error_of("hall_motion.motion = on"), "trigger:1:20: '=' alone is not an operator; compare with '=='");
  EXPECT_EQ(error_of("hall_motion.motion == on and\n  (hall_light.power == on"),
            "trigger:2:26: expected ')' to close the '(' at 2:3, found the end of the trigger");
  EXPECT_EQ(error_of("hall_motion.motion == on)"), "trigger:1:25: this ')' closes no '('");
  EXPECT_EQ(error_of("hall_motion.motion == on hall_light.power == on"),
            "trigger:1:26: expected 'and', 'or' or the end of the trigger, found 'hall_light.power'");
  EXPECT_EQ(error_of("hall_motion.motion on"),
            "trigger:1:20: expected a comparison (== != < <= > >=) after 'hall_motion.motion', found 'on'");
  EXPECT_EQ(error_of("motion == on"), "trigger:1:1: 'motion' is not DEVICE.ATTR (e.g. hall_motion.motion)");
  EXPECT_EQ(error_of("and == on"), "trigger:1:1: expected DEVICE.ATTR, 'not' or '(', found 'and'");
  EXPECT_EQ(error_of("manual and hall_motion.motion == on"),
            "trigger:1:1: 'manual' must be the whole trigger (a manual routine runs only on demand)");
  EXPECT_EQ(error_of("hall_motion.motion == \"on"), "trigger:1:23: this string has no closing '\"' on its line");
  EXPECT_EQ(error_of("hall_motion.motion == \"a\\n\""),
            "trigger:1:25: in a string, '\\' escapes only '\"' and '\\'");
  EXPECT_EQ(error_of("hall_motion.motion == on;"), "trigger:1:25: unexpected character ';'");
  EXPECT_EQ(error_of("Hall.motion == on"), "trigger:1:1: device id 'Hall' has 'H': use lower-case letters, digits, "
                                            "'_', '.' and '-'");
}

TEST(Trigger, CatalogChecksDevicesAttributesAndTypes) {
  EXPECT_EQ(error_of("hall_motoin.motion == on"), "trigger:1:1: no device hall_motoin in the catalog");
  EXPECT_EQ(error_of("x.x == 1 or hall_motion.movement == on"), "trigger:1:1: no device x in the catalog");
  EXPECT_EQ(error_of("hall_motion.motion == on or hall_motion.movement == on"),
            "trigger:1:41: device hall_motion: a motion_sensor has no attribute 'movement' (it has: motion)");
  EXPECT_EQ(error_of("hall_motion.motion == true"), "trigger:1:23: hall_motion.motion is on or off, not true");
  EXPECT_EQ(error_of("hall_light.brightness == on"),
            "trigger:1:26: hall_light.brightness is an integer 0..100, not on");
  EXPECT_EQ(error_of("front_lock.locked == \"yes\""), "trigger:1:22: front_lock.locked is true or false, not \"yes\"");
  EXPECT_EQ(error_of("hall_motion.motion > off"),
            "trigger:1:20: '>' compares numbers, and hall_motion.motion is on or off; use == or !=");
  EXPECT_EQ(error_without_catalog("a.b < on"), "trigger:1:5: '<' compares numbers and strings, not on; use == or !=");
  EXPECT_EQ(error_without_catalog("hall_motoin.motion == on"), "accepted");
}

TEST(Trigger, LimitsNestingAndLength) {
  std::string deep;
  for (size_t i = 0; i < kMaxTriggerDepth; ++i) deep += "(";
  deep += "a.b == 1";
  for (size_t i = 0; i < kMaxTriggerDepth; ++i) deep += ")";
  EXPECT_EQ(error_without_catalog(deep), "accepted");
  EXPECT_NE(error_without_catalog("(" + deep + ")").find("nests deeper than 64"), std::string::npos);
  std::string nots;
  for (int i = 0; i < 100; ++i) nots += "not ";
  EXPECT_NE(error_without_catalog(nots + "a.b == 1").find("nests deeper"), std::string::npos);
  std::string parens(1000000, '(');
  EXPECT_NE(error_without_catalog(parens).find("at most 4096"), std::string::npos);
  std::string opens(4000, '(');
  EXPECT_NE(error_without_catalog(opens).find("nests deeper"), std::string::npos);
}

// Found by scripts/fuzz (trigger_fuzz, round trip): a trigger that fits the
// limit as written but not in the canonical form meshctl prints, which would
// be refused when pasted back.
TEST(Trigger, TheCanonicalFormMustFitTheLimitToo) {
  std::string compact = "a.b==1";
  while (compact.size() + 10 <= kMaxTriggerLength) compact += " or a.b==1";
  ASSERT_LE(compact.size(), kMaxTriggerLength);
  const std::string error = error_without_catalog(compact);
  EXPECT_NE(error.find("canonical form"), std::string::npos) << error;
  EXPECT_NE(error.find("at most 4096"), std::string::npos) << error;

  std::string spaced = "a.b == 1";
  while (spaced.size() + 12 <= kMaxTriggerLength) spaced += " or a.b == 1";
  const auto accepted = parse_trigger(spaced);
  ASSERT_TRUE(accepted) << accepted.error().text();
  EXPECT_EQ(format_condition(*accepted), spaced);
}

TEST(Trigger, PrecedenceIsNotThenAndThenOr) {
  const Trigger t = parsed("hall_motion.motion == on or hall_light.power == on and not hall_light.brightness > 5");
  ASSERT_EQ(t.condition.kind, Condition::Kind::any_of);
  ASSERT_EQ(t.condition.operands.size(), 2u);
  EXPECT_EQ(t.condition.operands[0].kind, Condition::Kind::comparison);
  const Condition& conjunction = t.condition.operands[1];
  ASSERT_EQ(conjunction.kind, Condition::Kind::all_of);
  ASSERT_EQ(conjunction.operands.size(), 2u);
  EXPECT_EQ(conjunction.operands[1].kind, Condition::Kind::negation);
  EXPECT_EQ(conjunction.operands[1].operands[0].comparison.op, CompareOp::gt);

  const Trigger grouped = parsed("(hall_motion.motion == on or hall_light.power == on) and hall_light.brightness > 5");
  EXPECT_EQ(grouped.condition.kind, Condition::Kind::all_of);
  EXPECT_EQ(devices(grouped), (std::set<std::string>{"hall_light", "hall_motion"}));
}

TEST(Trigger, FormatRoundTrips) {
  for (std::string_view text :
       {"hall_motion.motion == on", "a.b == 1 or c.d == 2 and not (e.f == off or g.h != \"x y\")",
        "(a.b == 1 or c.d == 2) and e.f >= -3.5", "a.b == 1 and (c.d == 2 and e.f == 3)", "not not a.b == on",
        "manual"}) {
    const auto first = parse_trigger(text);
    ASSERT_TRUE(first) << first.error().text();
    const std::string formatted = format_condition(*first);
    const auto second = parse_trigger(formatted);
    ASSERT_TRUE(second) << formatted << ": " << second.error().text();
    EXPECT_EQ(*first, *second) << text << " -> " << formatted;
  }
  EXPECT_EQ(format_condition(*parse_trigger("a.b==1 or(c.d==2 and e.f==on)")), "a.b == 1 or c.d == 2 and e.f == on");
}

TEST(Trigger, EvaluatesAgainstState) {
  std::map<std::string, Attributes> state = {
      {"hall_motion", {{"motion", true}}},
      {"hall_light", {{"power", false}, {"brightness", 40.0}}},
  };
  const StateLookup lookup = [&](const std::string& id) -> const Attributes* {
    const auto it = state.find(id);
    return it == state.end() ? nullptr : &it->second;
  };
  const auto holds = [&](std::string_view text) {
    auto trigger = parse_trigger(text);
    EXPECT_TRUE(trigger) << trigger.error().text();
    return trigger && evaluate(*trigger, lookup, 12 * 60, Weekday::wed);
  };
  EXPECT_TRUE(holds("hall_motion.motion == on"));
  EXPECT_FALSE(holds("hall_motion.motion == off"));
  EXPECT_TRUE(holds("hall_light.brightness > 39 and hall_light.brightness <= 40"));
  EXPECT_FALSE(holds("hall_light.brightness < 40"));
  EXPECT_TRUE(holds("hall_light.power != on or hall_motion.motion == off"));
  EXPECT_TRUE(holds("hall_motion.motion == off or hall_light.power == off and hall_light.brightness >= 40"));
  EXPECT_FALSE(holds("(hall_motion.motion == off or hall_light.power == off) and hall_light.brightness > 40"));
  // Unknown device, unknown attribute, a value of another type: false.
  EXPECT_FALSE(holds("cellar.motion == on"));
  EXPECT_FALSE(holds("hall_motion.occupancy == on"));
  EXPECT_FALSE(holds("hall_light.brightness == on"));
  EXPECT_FALSE(holds("hall_light.brightness != on"));
  EXPECT_TRUE(holds("not cellar.motion == on"));
  EXPECT_FALSE(holds("manual"));
  EXPECT_FALSE(evaluate(*parse_trigger("hall_motion.motion == on"), nullptr, 0, Weekday::mon));
}

TEST(Trigger, WindowsWrapMidnightAndBelongToTheirStartDay) {
  const StateLookup always = [](const std::string&) -> const Attributes* {
    static const Attributes on = {{"motion", true}};
    return &on;
  };
  Trigger night = *parse_trigger("hall_motion.motion == on");
  night.window = *parse_window("22:00-06:00");
  night.days = *parse_days("fri");
  EXPECT_TRUE(night.window->wraps());
  EXPECT_TRUE(evaluate(night, always, 22 * 60, Weekday::fri));
  EXPECT_TRUE(evaluate(night, always, 23 * 60 + 59, Weekday::fri));
  EXPECT_TRUE(evaluate(night, always, 2 * 60, Weekday::sat));      // Friday night
  EXPECT_TRUE(evaluate(night, always, 5 * 60 + 59, Weekday::sat));
  EXPECT_FALSE(evaluate(night, always, 6 * 60, Weekday::sat));     // end excluded
  EXPECT_FALSE(evaluate(night, always, 2 * 60, Weekday::fri));     // Thursday night
  EXPECT_FALSE(evaluate(night, always, 21 * 60 + 59, Weekday::fri));
  EXPECT_FALSE(evaluate(night, always, 12 * 60, Weekday::fri));

  Trigger office = *parse_trigger("hall_motion.motion == on");
  office.window = *parse_window("8:30-17:00");
  office.days = *parse_days("mon..fri");
  EXPECT_TRUE(evaluate(office, always, 8 * 60 + 30, Weekday::mon));
  EXPECT_FALSE(evaluate(office, always, 8 * 60 + 29, Weekday::mon));
  EXPECT_FALSE(evaluate(office, always, 12 * 60, Weekday::sat));
  EXPECT_FALSE(evaluate(office, always, 17 * 60, Weekday::fri));

  Trigger sunday_to_monday = *parse_trigger("hall_motion.motion == on");
  sunday_to_monday.window = *parse_window("23:00-01:00");
  sunday_to_monday.days = *parse_days("sun");
  EXPECT_TRUE(evaluate(sunday_to_monday, always, 30, Weekday::mon));
  EXPECT_FALSE(evaluate(sunday_to_monday, always, 30, Weekday::sun));
}

TEST(Trigger, WindowsAndDaysParse) {
  EXPECT_EQ(format_window(*parse_window("22:00-06:00")), "22:00-06:00");
  EXPECT_EQ(format_window(*parse_window("18:00-24:00")), "18:00-24:00");
  EXPECT_TRUE(parse_window("18:00-24:00")->contains(23 * 60 + 59));
  EXPECT_FALSE(parse_window("24:00-06:00"));
  EXPECT_FALSE(parse_window("22:00"));
  EXPECT_FALSE(parse_window("22:60-06:00"));
  EXPECT_FALSE(parse_window("2200-0600"));
  EXPECT_NE(parse_window("06:00-06:00").error().find("leave the window out"), std::string::npos);
  EXPECT_EQ(format_days(*parse_days("sat..mon")), (std::vector<std::string>{"mon", "sat", "sun"}));
  EXPECT_EQ(format_days(*parse_days("mon..sun")).size(), 7u);
  EXPECT_EQ(format_days(*parse_days("wed")), (std::vector<std::string>{"wed"}));
  EXPECT_NE(parse_days("monday").error().find("\"monday\" is not a day"), std::string::npos);
  EXPECT_FALSE(parse_days("mon.."));
}

}  // namespace
}  // namespace mesh::routine
