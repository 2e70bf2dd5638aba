#include "routine/precondition_rule.h"

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
      {"garden_sprinkler", device("garden_sprinkler", DeviceKind::switch_)},
      {"outlet_1", device("outlet_1", DeviceKind::plug)},
      {"outlet_2", device("outlet_2", DeviceKind::plug)},
      {"lab_thermostat", device("lab_thermostat", DeviceKind::thermostat)},
      {"hall_light", device("hall_light", DeviceKind::dimmer)},
      {"lab.sensor", device("lab.sensor", DeviceKind::sensor)},
      {"front_lock", device("front_lock", DeviceKind::lock)},
  };
  return devices;
}

std::string domain_of(std::string_view text) {
  auto condition = parse_condition(text, catalog());
  return condition ? format_domain(condition->domain) : "error: " + condition.error().text();
}

std::string error_of(std::string_view text) {
  auto condition = parse_condition(text, catalog());
  return condition ? std::string("accepted") : condition.error().text();
}

std::string error_without_catalog(std::string_view text) {
  auto condition = parse_condition(text);
  return condition ? std::string("accepted") : condition.error().text();
}

AttributeCondition condition(std::string_view text) {
  auto parsed = parse_condition(text, catalog());
  EXPECT_TRUE(parsed) << text << ": " << parsed.error().text();
  return parsed ? *parsed : AttributeCondition{};
}

std::string file_error(std::string_view text) {
  auto rules = parse_precondition_rules(text, "rules.toml", catalog());
  return rules ? std::string("accepted") : rules.error();
}

TEST(PreconditionConditionTest, EachFormGivesItsDomain) {
  EXPECT_EQ(domain_of("outlet_1.power == off"), "== off");
  EXPECT_EQ(domain_of("outlet_1.power != off"), "== on");
  EXPECT_EQ(domain_of("front_lock.locked == true"), "== true");
  EXPECT_EQ(domain_of("lab_thermostat.target < 30"), ">= 5 and < 30");
  EXPECT_EQ(domain_of("lab_thermostat.target >= 18"), "in 18..35");
  EXPECT_EQ(domain_of("lab_thermostat.target > 18.5"), "> 18.5 and <= 35");
  EXPECT_EQ(domain_of("lab_thermostat.target in 18..24"), "in 18..24");
  EXPECT_EQ(domain_of("lab_thermostat.target in 0..10"), "in 5..10");
  EXPECT_EQ(domain_of("lab_thermostat.target != 20"), "in 5..35 and != 20");
  EXPECT_EQ(domain_of("hall_light.brightness <= 30.5"), "in 0..30");
  EXPECT_EQ(domain_of("hall_light.brightness in {50, 0, 100}"), "in {50, 0, 100}");
  EXPECT_EQ(domain_of("  hall_light.brightness==50  "), "== 50");
  EXPECT_EQ(domain_of("lab.sensor.temperature <= -5"), "in -60..-5");
}

TEST(PreconditionConditionTest, KnowsTheVariableAndWhetherACommandSetsIt) {
  const auto light = condition("hall_light.brightness == 50");
  EXPECT_EQ(light.variable, (Variable{"hall_light", "brightness"}));
  EXPECT_TRUE(light.settable);
  const auto reading = condition("lab.sensor.temperature < 30");
  EXPECT_EQ(reading.variable, (Variable{"lab.sensor", "temperature"}));
  EXPECT_FALSE(reading.settable);
  EXPECT_EQ(reading.text(), "lab.sensor.temperature >= -60 and < 30");
}

TEST(PreconditionConditionTest, WithoutDevicesTheSpellingGivesTheKind) {
  const auto text = parse_condition("hall_mode.preset in {\"eco\", \"away\"}");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->domain, one_of(ValueKind::text, {Value{std::string("eco")}, Value{std::string("away")}}));
  const auto number = parse_condition("x.level < 3");
  ASSERT_TRUE(number);
  EXPECT_EQ(number->domain, between(std::nullopt, Bound{3, false}));
  const auto flag = parse_condition("x.armed != true");
  ASSERT_TRUE(flag);
  EXPECT_EQ(flag->domain, one_of(ValueKind::boolean, {Value{false}}));
  EXPECT_EQ(flag->text(), "x.armed == false");
}

TEST(PreconditionConditionTest, RefusesBadConditionsWithTheColumn) {
  EXPECT_EQ(error_of(""),
            "column 1: the condition is empty; write DEVICE.ATTR OP VALUE (OP one of == != < <= > >=), "
            "DEVICE.ATTR in LO..HI or DEVICE.ATTR in {V, V, ...}");
  EXPECT_EQ(error_of("outlet_3.power == off"), "column 1: no device outlet_3 in the catalog");
  EXPECT_EQ(error_of("outlet_1.volume == 3"),
            "column 10: device outlet_1: a plug has no attribute 'volume' (it has: power)");
  EXPECT_EQ(error_of("outlet_1.power = off"), "column 16: '=' alone is not an operator; compare with '=='");
  EXPECT_EQ(error_of("outlet_1.power => off"), "column 16: '=' alone is not an operator; compare with '=='");
  EXPECT_EQ(error_of("outlet_1.power is off"),
            "column 16: expected == != < <= > >= or 'in' after 'outlet_1.power', found 'is'");
  EXPECT_EQ(error_of("outlet_1.power == 1"), "column 19: outlet_1.power is on or off, not 1");
  EXPECT_EQ(error_of("outlet_1.power < on"),
            "column 16: '<' compares numbers, and outlet_1.power is on or off; use == or !=");
  EXPECT_EQ(error_of("front_lock.locked == on"), "column 22: front_lock.locked is true or false, not on");
  EXPECT_EQ(error_of("hall_light.brightness == 150"),
            "column 26: hall_light.brightness is an integer 0..100: 150 is not allowed");
  EXPECT_EQ(error_of("hall_light.brightness == 2.5"),
            "column 26: hall_light.brightness is an integer 0..100: 2.5 is not allowed");
  EXPECT_EQ(error_of("lab_thermostat.target > 40"),
            "column 23: no value of lab_thermostat.target satisfies this: it is a number 5..35");
  EXPECT_EQ(error_of("lab_thermostat.target in 24..18"),
            "column 26: the range 24..18 is empty; write the lower end first");
  EXPECT_EQ(error_of("lab_thermostat.target in 18 .. 24"),
            "column 26: expected a range LO..HI (numbers, no spaces, e.g. 18..24) or a set {V, ...} after 'in', "
            "found '18'");
  EXPECT_EQ(error_of("outlet_1.power in 1..2"),
            "column 19: a range holds numbers, and outlet_1.power is on or off; use == or a set");
  EXPECT_EQ(error_of("hall_light.brightness in {}"), "column 27: an empty set is never true; list at least one value");
  EXPECT_EQ(error_of("hall_light.brightness in {1, 1}"), "column 30: 1 is listed twice");
  EXPECT_EQ(error_of("hall_light.brightness in {1 2}"),
            "column 29: expected ',' or '}' to close the '{' at column 26, found '2'");
  EXPECT_EQ(error_of("hall_light.brightness == 1 and outlet_1.power == on"),
            "column 28: expected the end of the condition, found 'and'; a condition names one attribute (write one "
            "condition per requirement)");
  EXPECT_EQ(error_of("Hall.power == on"),
            "column 1: device id 'Hall' has 'H': use lower-case letters, digits, '_', '.' and '-'");
  EXPECT_EQ(error_of("power == on"), "column 1: 'power' is not DEVICE.ATTR (e.g. outlet_1.power)");
  EXPECT_EQ(error_of("outlet_1.power == \"off"), "column 19: this string has no closing '\"'");
  EXPECT_EQ(error_of("outlet_1.power == off;"), "column 22: unexpected character ';'");
  EXPECT_EQ(error_without_catalog("x.mode in {\"a\", 2}"),
            "column 17: a set holds values of one kind: 2 is not a "
            "\"quoted string\"");
  EXPECT_EQ(error_without_catalog("x.mode < \"a\""),
            "column 8: '<' compares numbers, and x.mode is a \"quoted string\"; use == or !=");
  EXPECT_EQ(error_of(std::string(kMaxConditionLength + 1, 'a')),
            "column 1: the condition is 1025 bytes long; at most 1024 are allowed");
}

TEST(PreconditionConditionTest, ACommandMakesItsValueTrue) {
  const auto sprinkler = command_condition(catalog().at("garden_sprinkler"), "power", Value{true});
  ASSERT_TRUE(sprinkler);
  EXPECT_EQ(sprinkler->text(), "garden_sprinkler.power == on");
  EXPECT_TRUE(sprinkler->settable);
  const auto reading = command_condition(catalog().at("lab.sensor"), "temperature", Value{20.0});
  ASSERT_FALSE(reading);
  EXPECT_EQ(reading.error(), "device lab.sensor: temperature is a reading and cannot be set");
  const auto too_bright = command_condition(catalog().at("hall_light"), "brightness", Value{150.0});
  ASSERT_FALSE(too_bright);
  EXPECT_EQ(too_bright.error(), "device hall_light: brightness=150 is not allowed: allowed is an integer 0..100");
}

TEST(PreconditionRuleFileTest, ParsesRulesInFileOrder) {
  const auto rules = parse_precondition_rules(R"(
[[precondition]]
id = "sprinkler_needs_outlets_off"
when = "garden_sprinkler.power == on"
requires = ["outlet_1.power == off", "outlet_2.power == off"]

[[precondition]]
id = "outlet_1_needs_warm_lab"
when = "outlet_1.power == off"
requires = ["lab_thermostat.target in 18..24", "lab.sensor.temperature > 10"]
)",
                                              "rules.toml", catalog());
  ASSERT_TRUE(rules) << rules.error();
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0], (PreconditionRule{"sprinkler_needs_outlets_off",
                                           condition("garden_sprinkler.power == on"),
                                           {condition("outlet_1.power == off"), condition("outlet_2.power == off")}}));
  EXPECT_EQ((*rules)[1].id, "outlet_1_needs_warm_lab");
  EXPECT_EQ((*rules)[1].preconditions[0].text(), "lab_thermostat.target in 18..24");
  EXPECT_EQ((*rules)[1].preconditions[1].text(), "lab.sensor.temperature > 10 and <= 150");
  EXPECT_FALSE((*rules)[1].preconditions[1].settable);
}

TEST(PreconditionRuleFileTest, AnEmptyFileHasNoRules) {
  const auto rules = parse_precondition_rules("# no rules yet\n", "rules.toml", catalog());
  ASSERT_TRUE(rules);
  EXPECT_TRUE(rules->empty());
}

TEST(PreconditionRuleFileTest, EachErrorNamesTheRuleAndTheProblem) {
  EXPECT_EQ(file_error("[[precondition]\n"),
            "rules.toml:1:16: TOML syntax error: Error while parsing table header: expected ']', saw '\\n'. "
            "Fix: correct the syntax there (strings need double quotes, each rule is a [[precondition]] table).");
  EXPECT_EQ(file_error("[[rule]]\nid = \"a\"\n"),
            "rules.toml:1: rule: unknown table. Fix: a rules file holds [[precondition]] tables only.");
  EXPECT_EQ(file_error("precondition = 3\n"),
            "rules.toml:1: precondition: expected [[precondition]] tables. Fix: write each rule as a [[precondition]] "
            "table.");
  EXPECT_EQ(file_error("[[precondition]]\nwhen = \"outlet_1.power == off\"\nrequires = [\"outlet_2.power == off\"]\n"),
            "rules.toml:1: precondition.id: missing. Fix: add id = \"...\" to this [[precondition]].");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"Bad Id\"\nwhen = \"outlet_1.power == off\"\nrequires = "
                       "[\"outlet_2.power == off\"]\n"),
            "rules.toml:2: precondition.id: rule id 'Bad Id' has 'B'. Fix: use lower-case letters, digits, '_', '.' "
            "and '-'.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = "
                       "[\"outlet_2.power == off\"]\nnote = \"x\"\n"),
            "rules.toml:5: precondition r.note: unknown key. Fix: remove it; a [[precondition]] accepts id, when, "
            "requires.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nrequires = [\"outlet_2.power == off\"]\n"),
            "rules.toml:1: precondition r.when: missing. Fix: add when = \"DEVICE.ATTR == VALUE\", the condition the "
            "rule guards.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_9.power == off\"\nrequires = "
                       "[\"outlet_2.power == off\"]\n"),
            "rules.toml:3: precondition r.when: column 1: no device outlet_9 in the catalog. Fix: use a device of the "
            "catalog (meshctl devices lists them).");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"lab.sensor.temperature > 30\"\nrequires = "
                       "[\"outlet_2.power == off\"]\n"),
            "rules.toml:3: precondition r.when: lab.sensor.temperature is a reading: no command makes it true, so the "
            "rule would never apply. Fix: write `when` on an attribute a command sets; a reading may appear in "
            "requires.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\n"),
            "rules.toml:1: precondition r.requires: missing. Fix: add requires = [\"DEVICE.ATTR == VALUE\", ...].");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = []\n"),
            "rules.toml:4: precondition r.requires: the list is empty, so the rule requires nothing. Fix: list at "
            "least one condition, or remove the rule.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = \"x\"\n"),
            "rules.toml:4: precondition r.requires: expected a list of conditions. Fix: write requires = "
            "[\"outlet_1.power == off\"].");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = [3]\n"),
            "rules.toml:4: precondition r.requires[1]: expected a string. Fix: write the condition in double quotes.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = "
                       "[\"hall_light.brightness == yes\"]\n"),
            "rules.toml:4: precondition r.requires[1]: column 26: expected a value after '=='; write a number, on, "
            "off, true, false or a \"quoted string\" (found 'yes'). Fix: write DEVICE.ATTR OP VALUE (OP one of == "
            "!= < <= > >=), DEVICE.ATTR in LO..HI or DEVICE.ATTR in {V, V, ...}.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = "
                       "[\"lab_thermostat.target >= 18\", \"lab_thermostat.target <= 24\"]\n"),
            "rules.toml:4: precondition r.requires[2]: lab_thermostat.target is already constrained by requires[1]. "
            "Fix: write one condition per attribute, e.g. a range: in 18..24.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = "
                       "[\"outlet_1.power == on\"]\n"),
            "rules.toml:4: precondition r.requires[1]: outlet_1.power is the attribute `when` constrains; it cannot "
            "be its own precondition. Fix: require conditions on other attributes.");
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = "
                       "[\"outlet_2.power == off\"]\n\n[[precondition]]\nid = \"r\"\nwhen = \"outlet_2.power == "
                       "off\"\nrequires = [\"hall_light.power == off\"]\n"),
            "rules.toml:6: precondition r: defined twice (first at line 1). Fix: keep one definition of each rule "
            "id, or give the second rule another id.");
}

TEST(PreconditionRuleFileTest, ReportsEveryProblemOnItsOwnLine) {
  const std::string error = file_error(
      "[[precondition]]\nid = \"a\"\nwhen = \"outlet_1.power == 3\"\nrequires = [\"outlet_2.power == off\"]\n\n"
      "[[precondition]]\nid = \"b\"\nwhen = \"outlet_2.power == off\"\nrequires = [\"outlet_7.power == off\"]\n");
  EXPECT_EQ(error,
            "rules.toml:3: precondition a.when: column 19: outlet_1.power is on or off, not 3. Fix: write DEVICE.ATTR "
            "OP VALUE (OP one of == != < <= > >=), DEVICE.ATTR in LO..HI or DEVICE.ATTR in {V, V, ...}.\n"
            "rules.toml:9: precondition b.requires[1]: column 1: no device outlet_7 in the catalog. Fix: use a device "
            "of the catalog (meshctl devices lists them).");
}

TEST(PreconditionRuleFileTest, RefusesOversizedRules) {
  std::string requires_list;
  for (size_t i = 0; i <= kMaxRulePreconditions; ++i) {
    requires_list += (i == 0 ? "" : ", ") + std::string("\"hall_light.brightness == 1\"");
  }
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nwhen = \"outlet_1.power == off\"\nrequires = [" + requires_list +
                       "]\n"),
            "rules.toml:4: precondition r.requires: 33 conditions; at most 32 are allowed. Fix: split the rule: give "
            "some of the conditions a rule of their own on an intermediate condition.");
  EXPECT_EQ(file_error(std::string(kMaxPreconditionFileBytes + 1, '#')),
            "rules.toml: the file is 1048577 bytes long; at most 1048576 are allowed");
}

TEST(PreconditionRuleFileTest, TheFileIsAscii) {
  const std::string refused = ": a character outside ASCII. Fix: write the file in ASCII, comments included.";
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"\nk\xef\xb9\xbf = 1\n"), "rules.toml:3" + refused);
  EXPECT_EQ(file_error("[[precondition]]\nid = \"r\"  # caf\xc3\xa9\n"), "rules.toml:2" + refused);
  EXPECT_EQ(file_error("# K\xc3\xbc"
                       "che\n"),
            "rules.toml:1" + refused);
  // A line that looks like a comment may be inside a multi-line string.
  EXPECT_EQ(file_error("x = \"\"\"\n#z=\\\xef\xbb\xb7\"\"\"\n"), "rules.toml:2" + refused);
}

TEST(PreconditionRuleIdTest, AcceptsCatalogStyleIds) {
  EXPECT_EQ(check_precondition_rule_id("sprinkler_needs_outlets_off"), std::nullopt);
  EXPECT_EQ(check_precondition_rule_id(""), "a rule id must not be empty");
  EXPECT_EQ(check_precondition_rule_id(std::string(65, 'a')),
            "rule id 'aaaaaaaaaaaaaaaa...' is longer than 64 characters");
}

}  // namespace
}  // namespace mesh::routine
