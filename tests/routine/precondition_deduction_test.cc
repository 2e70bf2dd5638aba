#include <gtest/gtest.h>

#include "routine/command_deduction.h"

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
      {"lab_thermostat", device("lab_thermostat", DeviceKind::thermostat)},
      {"hall_light", device("hall_light", DeviceKind::dimmer)},
      {"lab_sensor", device("lab_sensor", DeviceKind::sensor)},
      {"heater", device("heater", DeviceKind::plug)},
      {"fan", device("fan", DeviceKind::plug)},
  };
  return devices;
}

AttributeCondition condition(std::string_view text) {
  auto parsed = parse_condition(text, catalog());
  EXPECT_TRUE(parsed) << text << ": " << parsed.error().text();
  return parsed ? *parsed : AttributeCondition{};
}

AttributeCondition free_condition(std::string_view text) {
  auto parsed = parse_condition(text);
  EXPECT_TRUE(parsed) << text << ": " << parsed.error().text();
  return parsed ? *parsed : AttributeCondition{};
}

// The value `choice` picks for a condition with the catalog, as text.
std::string pick(std::string_view text, IntervalChoice choice, std::optional<double> current = std::nullopt,
                 double resolution = 0.5) {
  const auto domain = condition(text).domain;
  std::optional<Value> now;
  if (current) now = Value{*current};
  auto value = choose_value(domain, now, DeductionPolicy{choice, resolution});
  return value ? format_value(domain.kind, *value) : "error: " + value.error();
}

std::string pick_free(std::string_view text, IntervalChoice choice,
                      const std::optional<Value>& current = std::nullopt) {
  const auto domain = free_condition(text).domain;
  auto value = choose_value(domain, current, DeductionPolicy{choice, 0.5});
  return value ? format_value(domain.kind, *value) : "error: " + value.error();
}

PreconditionRule rule(std::string id, std::string_view when, const std::vector<std::string_view>& requirements,
                      bool with_catalog = false) {
  auto parse = [&](std::string_view text) { return with_catalog ? condition(text) : free_condition(text); };
  PreconditionRule out{std::move(id), parse(when), {}};
  for (auto text : requirements) out.preconditions.push_back(parse(text));
  return out;
}

PreconditionGraph figure_1() {
  const std::vector<PreconditionRule> rules = {
      rule("pep1", "air_cond.status == \"on\"", {"window.status == \"closed\"", "door.status == \"closed\""}),
      rule("pep2", "window.status == \"closed\"", {"curtain.status == \"closed\""}),
  };
  auto graph = build_graph(free_condition("air_cond.status == \"on\""), rules);
  EXPECT_TRUE(graph) << graph.error();
  return graph ? *graph : PreconditionGraph{};
}

PlanStep step(size_t vertex, StepAction action, std::string device, std::string attribute, Value value,
              std::string condition_text, std::vector<size_t> after, bool subject = false) {
  return PlanStep{vertex,           action,           Variable{std::move(device), std::move(attribute)},
                  ValueKind::text,  std::move(value), std::move(condition_text),
                  std::move(after), subject};
}

Value text(const char* s) { return Value{std::string(s)}; }

TEST(PreconditionDeductionTest, Figure1WithoutStatesClosesEverything) {
  const auto plan = deduce(figure_1(), DeductionPolicy{}, {});
  ASSERT_TRUE(plan) << plan.error();
  // §6.2: "D: [curtain : close()]; C: [door : close()]; B: [window : close()]",
  // in the order of §7.1: D and C first, B after D, A last.
  const CommandPlan expected{{
      {step(2, StepAction::set, "door", "status", text("closed"), "door.status == \"closed\"", {}),
       step(3, StepAction::set, "curtain", "status", text("closed"), "curtain.status == \"closed\"", {})},
      {step(1, StepAction::set, "window", "status", text("closed"), "window.status == \"closed\"", {3})},
      {step(0, StepAction::set, "air_cond", "status", text("on"), "air_cond.status == \"on\"", {1, 2}, true)},
  }};
  EXPECT_EQ(*plan, expected);
  EXPECT_EQ(plan->command_count(), 4u);
  EXPECT_EQ(plan->describe(),
            "plan: 4 steps in 3 stages, 4 commands\n"
            "stage 1\n"
            "  set door.status = \"closed\"  [2] door.status == \"closed\"\n"
            "  set curtain.status = \"closed\"  [3] curtain.status == \"closed\"\n"
            "stage 2\n"
            "  set window.status = \"closed\"  [1] window.status == \"closed\", after [3]\n"
            "stage 3\n"
            "  set air_cond.status = \"on\"  [0] air_cond.status == \"on\", subject, after [1], [2]\n");
}

TEST(PreconditionDeductionTest, APreconditionThatHoldsIsKeptButNotCommanded) {
  const DeviceStates states = {
      {"door", {{"status", text("closed")}}},
      {"window", {{"status", text("closed")}}},
      {"curtain", {{"status", text("open")}}},
      {"air_cond", {{"status", text("on")}}},
  };
  const auto plan = deduce(figure_1(), DeductionPolicy{}, states);
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->describe(),
            "plan: 4 steps in 3 stages, 2 commands\n"
            "stage 1\n"
            "  hold door.status = \"closed\"  [2] door.status == \"closed\"\n"
            "  set curtain.status = \"closed\"  [3] curtain.status == \"closed\"\n"
            "stage 2\n"
            "  hold window.status = \"closed\"  [1] window.status == \"closed\", after [3]\n"
            "stage 3\n"
            "  set air_cond.status = \"on\"  [0] air_cond.status == \"on\", subject, after [1], [2]\n");
  // A state of another type than the condition's is unknown, not a match.
  const DeviceStates odd = {{"door", {{"status", Value{1.0}}}}};
  EXPECT_EQ(deduce(figure_1(), DeductionPolicy{}, odd)->stages[0][0].action, StepAction::set);
}

TEST(PreconditionDeductionTest, SetsGiveTheFirstListedValue) {
  for (auto choice : {IntervalChoice::closest_to_current, IntervalChoice::lowest, IntervalChoice::highest,
                      IntervalChoice::midpoint}) {
    EXPECT_EQ(pick("hall_light.brightness in {50, 0, 100}", choice, 99), "50");
    EXPECT_EQ(pick("heater.power != on", choice), "off");
    EXPECT_EQ(pick_free("hall.mode in {\"eco\", \"away\"}", choice), "\"eco\"");
  }
}

TEST(PreconditionDeductionTest, RealIntervalsFollowThePolicy) {
  // lab_thermostat.target is a number 5..35.
  EXPECT_EQ(pick("lab_thermostat.target >= 18", IntervalChoice::lowest), "18");
  EXPECT_EQ(pick("lab_thermostat.target >= 18", IntervalChoice::highest), "35");
  EXPECT_EQ(pick("lab_thermostat.target >= 18", IntervalChoice::midpoint), "26.5");
  EXPECT_EQ(pick("lab_thermostat.target >= 18", IntervalChoice::closest_to_current, 10), "18");
  EXPECT_EQ(pick("lab_thermostat.target >= 18", IntervalChoice::closest_to_current, 40), "35");
  EXPECT_EQ(pick("lab_thermostat.target >= 18", IntervalChoice::closest_to_current), "26.5");
  // Open ends move inwards by the resolution.
  EXPECT_EQ(pick("lab_thermostat.target > 20", IntervalChoice::lowest), "20.5");
  EXPECT_EQ(pick("lab_thermostat.target > 20", IntervalChoice::lowest, std::nullopt, 1), "21");
  EXPECT_EQ(pick("lab_thermostat.target < 24", IntervalChoice::highest), "23.5");
  EXPECT_EQ(pick("lab_thermostat.target < 24", IntervalChoice::closest_to_current, 30), "23.5");
}

TEST(PreconditionDeductionTest, NarrowAndHoledRealIntervals) {
  const DeductionPolicy lowest{IntervalChoice::lowest, 0.5};
  // A gap narrower than the resolution gives its middle.
  auto narrow =
      intersect(condition("lab_thermostat.target > 20").domain, condition("lab_thermostat.target < 20.4").domain);
  EXPECT_EQ(format_value(*choose_value(narrow, std::nullopt, lowest)), "20.2");
  // != 20 splits 18..24: 20 itself is never chosen; the two nearest values
  // tie and the lower wins.
  const auto holed = condition("lab_thermostat.target in 18..24");
  const auto split = without(holed.domain, Value{20.0});
  EXPECT_EQ(format_value(*choose_value(split, Value{20.0}, DeductionPolicy{})), "19.5");
  EXPECT_EQ(format_value(*choose_value(split, Value{20.2}, DeductionPolicy{})), "20.5");
  EXPECT_EQ(format_value(*choose_value(split, std::nullopt, DeductionPolicy{IntervalChoice::midpoint, 0.5})), "21");
}

TEST(PreconditionDeductionTest, IntegerIntervalsGiveWholeNumbers) {
  // hall_light.brightness is an integer 0..100.
  EXPECT_EQ(pick("hall_light.brightness > 20", IntervalChoice::lowest), "21");
  EXPECT_EQ(pick("hall_light.brightness > 20", IntervalChoice::highest), "100");
  EXPECT_EQ(pick("hall_light.brightness > 20", IntervalChoice::midpoint), "60");  // 60.5: the lower of a tie
  EXPECT_EQ(pick("hall_light.brightness > 20", IntervalChoice::closest_to_current, 5), "21");
  EXPECT_EQ(pick("hall_light.brightness > 20", IntervalChoice::closest_to_current, 47.6), "48");
  const auto holed = without(condition("hall_light.brightness in 20..22").domain, Value{21.0});
  EXPECT_EQ(format_value(*choose_value(holed, Value{21.0}, DeductionPolicy{})), "20");
  EXPECT_EQ(format_value(*choose_value(holed, std::nullopt, DeductionPolicy{IntervalChoice::highest, 0.5})), "22");
  EXPECT_EQ(format_value(*choose_value(holed, std::nullopt, DeductionPolicy{IntervalChoice::midpoint, 0.5})), "20");
}

TEST(PreconditionDeductionTest, UnboundedAndUnchoosableDomains) {
  EXPECT_EQ(pick_free("x.level < 30", IntervalChoice::highest), "29.5");
  EXPECT_EQ(pick_free("x.level < 30", IntervalChoice::midpoint), "29.5");
  EXPECT_EQ(pick_free("x.level < 30", IntervalChoice::closest_to_current, Value{10.0}), "10");
  EXPECT_EQ(pick_free("x.level != 0", IntervalChoice::midpoint), "-0.5");
  EXPECT_EQ(pick_free("x.level < 30", IntervalChoice::lowest),
            "error: it has no lowest value; bound it from below, or pick another policy");
  EXPECT_EQ(pick_free("x.level > 30", IntervalChoice::highest),
            "error: it has no highest value; bound it from above, or pick another policy");
  EXPECT_EQ(pick_free("x.mode != \"eco\"", IntervalChoice::lowest),
            "error: it allows any text but some, so no value can be chosen; list the allowed values: in {...}");
  EXPECT_EQ(pick("lab_thermostat.target > 20", IntervalChoice::lowest, std::nullopt, 0),
            "error: the policy's resolution 0 is not a positive number");
  EXPECT_EQ(choose_value(one_of(ValueKind::number, {}), std::nullopt, DeductionPolicy{}).error(),
            "no value satisfies it");
}

TEST(PreconditionDeductionTest, ReadingsAreCheckedNotCommanded) {
  const std::vector<PreconditionRule> rules = {
      rule("heater_needs_cool_lab", "heater.power == on", {"lab_sensor.temperature < 30", "fan.power == on"}, true),
  };
  auto graph = build_graph(condition("heater.power == on"), rules);
  ASSERT_TRUE(graph) << graph.error();
  const auto unknown = deduce(*graph, DeductionPolicy{}, {});
  ASSERT_TRUE(unknown) << unknown.error();
  EXPECT_EQ(unknown->describe(),
            "plan: 3 steps in 2 stages, 2 commands\n"
            "stage 1\n"
            "  check lab_sensor.temperature  [1] lab_sensor.temperature >= -60 and < 30\n"
            "  set fan.power = on  [2] fan.power == on\n"
            "stage 2\n"
            "  set heater.power = on  [0] heater.power == on, subject, after [1], [2]\n");
  const auto cool = deduce(*graph, DeductionPolicy{}, {{"lab_sensor", {{"temperature", Value{25.0}}}}});
  ASSERT_TRUE(cool);
  EXPECT_EQ(cool->stages[0][0].action, StepAction::hold);
  const auto hot = deduce(*graph, DeductionPolicy{}, {{"lab_sensor", {{"temperature", Value{32.0}}}}});
  ASSERT_FALSE(hot);
  EXPECT_EQ(hot.error(),
            "[1] lab_sensor.temperature is a reading, now 32, and must be >= -60 and < 30 before its dependents run; "
            "no command can change it");
}

TEST(PreconditionDeductionTest, TheSubjectIsAlwaysSentAndMayBeARange) {
  const std::vector<PreconditionRule> rules = {
      rule("warm_needs_heater", "lab_thermostat.target > 22", {"heater.power == on"}, true),
  };
  auto graph = build_graph(condition("lab_thermostat.target in 20..26"), rules);
  ASSERT_TRUE(graph) << graph.error();
  const DeviceStates states = {{"lab_thermostat", {{"target", Value{24.0}}}}, {"heater", {{"power", Value{true}}}}};
  const auto plan = deduce(*graph, DeductionPolicy{IntervalChoice::highest, 0.5}, states);
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->stages.size(), 2u);
  EXPECT_EQ(plan->stages[0][0].action, StepAction::hold);
  EXPECT_EQ(plan->stages[1][0].action, StepAction::set);
  EXPECT_EQ(plan->stages[1][0].value, Value{26.0});
  EXPECT_TRUE(plan->stages[1][0].subject);
}

TEST(PreconditionDeductionTest, AValueThatCannotBeChosenNamesTheVertex) {
  const std::vector<PreconditionRule> rules = {rule("r", "a.power == on", {"b.mode != \"eco\""})};
  auto graph = build_graph(free_condition("a.power == on"), rules);
  ASSERT_TRUE(graph);
  EXPECT_EQ(deduce(*graph, DeductionPolicy{}, {}).error(),
            "[1] b.mode != \"eco\": it allows any text but some, so no value can be chosen; list the allowed values: "
            "in {...}");
  // With a current value that already differs, nothing needs choosing.
  EXPECT_TRUE(deduce(*graph, DeductionPolicy{}, {{"b", {{"mode", text("away")}}}}));
  EXPECT_EQ(deduce(PreconditionGraph{}, DeductionPolicy{}, {}).error(), "the precondition graph is empty");
  PreconditionGraph cyclic = *graph;
  cyclic.edges.push_back({0, 1, {"hand-made"}});
  EXPECT_EQ(deduce(cyclic, DeductionPolicy{}, {}).error(), "the precondition graph has a cycle, so no order runs it");
}

TEST(PreconditionDeductionTest, IsAPureFunctionOfItsInputs) {
  const auto graph = figure_1();
  const DeviceStates states = {{"door", {{"status", text("closed")}}}};
  EXPECT_EQ(*deduce(graph, DeductionPolicy{}, states), *deduce(graph, DeductionPolicy{}, states));
}

TEST(PreconditionDeductionTest, PolicyNamesRoundTrip) {
  for (auto choice : {IntervalChoice::closest_to_current, IntervalChoice::lowest, IntervalChoice::highest,
                      IntervalChoice::midpoint}) {
    EXPECT_EQ(parse_interval_choice(to_string(choice)), choice);
  }
  EXPECT_EQ(parse_interval_choice("nearest"), std::nullopt);
  EXPECT_EQ(to_string(StepAction::check), "check");
}

}  // namespace
}  // namespace mesh::routine
