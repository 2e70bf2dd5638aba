#include "routine/precondition_graph.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace mesh::routine {
namespace {

AttributeCondition condition(std::string_view text) {
  auto parsed = parse_condition(text);
  EXPECT_TRUE(parsed) << text << ": " << parsed.error().text();
  return parsed ? *parsed : AttributeCondition{};
}

PreconditionRule rule(std::string id, std::string_view when, const std::vector<std::string_view>& requirements) {
  PreconditionRule out{std::move(id), condition(when), {}};
  for (auto text : requirements) out.preconditions.push_back(condition(text));
  return out;
}

PreconditionGraph built(std::string_view subject, const std::vector<PreconditionRule>& rules) {
  auto graph = build_graph(condition(subject), rules);
  EXPECT_TRUE(graph) << graph.error();
  return graph ? *graph : PreconditionGraph{};
}

std::string error_of(std::string_view subject, const std::vector<PreconditionRule>& rules) {
  auto graph = build_graph(condition(subject), rules);
  return graph ? "built:\n" + graph->describe() : graph.error();
}

// apex.md Fig. 1: PEP 1 {window closed, door closed} => air conditioner on,
// PEP 2 {curtain closed} => window closed. PEP 3 is not spelled out in the
// paper; here it stands for a rule the subject does not need.
std::vector<PreconditionRule> figure_1_rules() {
  return {
      rule("pep1", "air_cond.status == \"on\"", {"window.status == \"closed\"", "door.status == \"closed\""}),
      rule("pep2", "window.status == \"closed\"", {"curtain.status == \"closed\""}),
      rule("pep3", "door.status == \"open\"", {"alarm.status == \"off\""}),
  };
}

TEST(PreconditionGraphTest, Figure1) {
  const auto graph = built("air_cond.status == \"on\"", figure_1_rules());
  ASSERT_EQ(graph.vertices.size(), 4u);
  EXPECT_EQ(graph.vertices[0], (PegVertex{condition("air_cond.status == \"on\""), {}, true}));
  EXPECT_EQ(graph.vertices[1], (PegVertex{condition("window.status == \"closed\""), {"pep1"}, false}));
  EXPECT_EQ(graph.vertices[2], (PegVertex{condition("door.status == \"closed\""), {"pep1"}, false}));
  EXPECT_EQ(graph.vertices[3], (PegVertex{condition("curtain.status == \"closed\""), {"pep2"}, false}));
  EXPECT_EQ(graph.edges, (std::vector<PegEdge>{{1, 0, {"pep1"}}, {2, 0, {"pep1"}}, {3, 1, {"pep2"}}}));
  // §7.1: D (curtain) and C (door) first, then B (window), then A.
  EXPECT_EQ(graph.levels(), (std::vector<std::vector<size_t>>{{2, 3}, {1}, {0}}));
  EXPECT_EQ(graph.depth(), 3u);  // §4: "The depth 3 PEG is the one in Fig. 1"
  EXPECT_EQ(graph.preconditions_of(0), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(graph.describe(),
            "PEG of air_cond.status == \"on\": 4 vertices, 3 edges, depth 3\n"
            "[0] air_cond.status == \"on\"  (subject)\n"
            "[1] window.status == \"closed\"  before [0] (pep1)\n"
            "[2] door.status == \"closed\"  before [0] (pep1)\n"
            "[3] curtain.status == \"closed\"  before [1] (pep2)\n");
}

// apex.md §4 on Fig. 2's deepest PEG: before a sprinkler sprays, the alarm
// is on and the outlets in its room are off; before the outlets go off, the
// computers they power are off; before those, the stable storage is checked
// for their archived data. Two outlets, two computers, one storage.
std::vector<PreconditionRule> sprinkler_rules() {
  return {
      rule("sprinkler_needs_outlets_off", "sprinkler.status == \"spray\"",
           {"outlet_1.power == off", "outlet_2.power == off"}),
      rule("sprinkler_needs_alarm", "sprinkler.status == \"spray\"", {"alarm.power == on"}),
      rule("outlet_1_needs_computer_off", "outlet_1.power == off", {"computer_1.power == off"}),
      rule("outlet_2_needs_computer_off", "outlet_2.power == off", {"computer_2.power == off"}),
      rule("computer_1_needs_archive", "computer_1.power == off", {"storage.archived == true"}),
      rule("computer_2_needs_archive", "computer_2.power == off", {"storage.archived == true"}),
  };
}

TEST(PreconditionGraphTest, Figure2SprinklerChain) {
  const auto graph = built("sprinkler.status == \"spray\"", sprinkler_rules());
  EXPECT_EQ(graph.describe(),
            "PEG of sprinkler.status == \"spray\": 7 vertices, 7 edges, depth 4\n"
            "[0] sprinkler.status == \"spray\"  (subject)\n"
            "[1] outlet_1.power == off  before [0] (sprinkler_needs_outlets_off)\n"
            "[2] outlet_2.power == off  before [0] (sprinkler_needs_outlets_off)\n"
            "[3] alarm.power == on  before [0] (sprinkler_needs_alarm)\n"
            "[4] computer_1.power == off  before [1] (outlet_1_needs_computer_off)\n"
            "[5] computer_2.power == off  before [2] (outlet_2_needs_computer_off)\n"
            "[6] storage.archived == true  before [4] (computer_1_needs_archive), [5] (computer_2_needs_archive)\n");
  // The storage is one vertex required by both computers' rules.
  EXPECT_EQ(graph.vertices[6].required_by,
            (std::vector<std::string>{"computer_1_needs_archive", "computer_2_needs_archive"}));
  EXPECT_EQ(graph.levels(), (std::vector<std::vector<size_t>>{{3, 6}, {4, 5}, {1, 2}, {0}}));
}

TEST(PreconditionGraphTest, AConditionWithoutRulesIsAGraphOfOne) {
  const auto graph = built("lamp.power == on", sprinkler_rules());
  EXPECT_EQ(graph.vertices, (std::vector<PegVertex>{{condition("lamp.power == on"), {}, true}}));
  EXPECT_TRUE(graph.edges.empty());
  EXPECT_EQ(graph.depth(), 1u);
}

TEST(PreconditionGraphTest, ARuleAppliesWhenItsConditionMeetsTheVertex) {
  const std::vector<PreconditionRule> rules = {
      rule("hot", "ac.target < 20", {"window.open == false"}),
      rule("cold", "ac.target > 26", {"heater.power == off"}),
      rule("off_only", "ac.power == off", {"fan.power == off"}),
  };
  // A range subject (§5.2, "possible subject conditions") meets "hot" only.
  EXPECT_EQ(built("ac.target in 16..22", rules).describe(),
            "PEG of ac.target in 16..22: 2 vertices, 1 edge, depth 2\n"
            "[0] ac.target in 16..22  (subject)\n"
            "[1] window.open == false  before [0] (hot)\n");
  EXPECT_EQ(built("ac.target == 23", rules).vertices.size(), 1u);
  EXPECT_EQ(built("ac.power == on", rules).vertices.size(), 1u);
}

TEST(PreconditionGraphTest, MergesIntervalsIntoTheirIntersection) {
  const std::vector<PreconditionRule> rules = {
      rule("hvac_needs_fan_and_warmth", "hvac.power == on", {"thermo.target >= 18", "fan.power == on"}),
      rule("fan_needs_cool", "fan.power == on", {"thermo.target < 24"}),
  };
  const auto graph = built("hvac.power == on", rules);
  ASSERT_EQ(graph.vertices.size(), 3u);
  EXPECT_EQ(graph.vertices[1].condition.text(), "thermo.target >= 18 and < 24");
  EXPECT_EQ(graph.vertices[1].required_by, (std::vector<std::string>{"hvac_needs_fan_and_warmth", "fan_needs_cool"}));
  EXPECT_EQ(graph.edges, (std::vector<PegEdge>{{1, 0, {"hvac_needs_fan_and_warmth"}},
                                               {2, 0, {"hvac_needs_fan_and_warmth"}},
                                               {1, 2, {"fan_needs_cool"}}}));
  EXPECT_EQ(graph.levels(), (std::vector<std::vector<size_t>>{{1}, {2}, {0}}));
}

// Each merge the paper's §6.1 case 2 needs, on a vertex two rules constrain.
TEST(PreconditionGraphTest, MergesEveryPredicateForm) {
  const std::vector<std::pair<std::string_view, std::string_view>> merges = {
      {"x.level in {1, 2, 3}", "x.level in {3, 2}"}, {"x.level in 18..24", "x.level == 20"},
      {"x.level in 18..24", "x.level != 20"},        {"x.level in {1, 2, 3}", "x.level != 2"},
      {"x.level in {1, 2, 3}", "x.level >= 2"},      {"x.mode in {\"eco\", \"away\", \"home\"}", "x.mode != \"away\""},
      {"x.mode != \"eco\"", "x.mode != \"away\""},   {"x.armed != true", "x.armed == false"},
  };
  const std::vector<std::string> expected = {
      "x.level in {2, 3}",
      "x.level == 20",
      "x.level in 18..24 and != 20",
      "x.level in {1, 3}",
      "x.level in {2, 3}",
      "x.mode in {\"eco\", \"home\"}",
      "x.mode != \"away\" and != \"eco\"",
      "x.armed == false",
  };
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::vector<PreconditionRule> rules = {
        rule("first", "s.power == on", {merges[i].first, "t.power == on"}),
        rule("second", "t.power == on", {merges[i].second}),
    };
    const auto graph = built("s.power == on", rules);
    ASSERT_EQ(graph.vertices.size(), 3u) << i;
    EXPECT_EQ(graph.vertices[1].condition.text(), expected[i]) << i;
  }
}

TEST(PreconditionGraphTest, IncompatibleRulesAreAnErrorNamingBoth) {
  const std::vector<PreconditionRule> rules = {
      rule("sprinkler_needs_outlet_off", "sprinkler.power == on", {"outlet.power == off", "pump.power == on"}),
      rule("pump_needs_outlet_on", "pump.power == on", {"outlet.power == on"}),
  };
  EXPECT_EQ(error_of("sprinkler.power == on", rules),
            "precondition rules conflict on outlet.power: rule pump_needs_outlet_on requires outlet.power == on, but "
            "outlet.power == off is already required by rule sprinkler_needs_outlet_off; no value satisfies both");
  const std::vector<PreconditionRule> ranges = {
      rule("a", "s.power == on", {"x.level < 10", "t.power == on", "u.power == on"}),
      rule("b", "t.power == on", {"x.level > 2"}),
      rule("c", "u.power == on", {"x.level >= 10"}),
  };
  EXPECT_EQ(error_of("s.power == on", ranges),
            "precondition rules conflict on x.level: rule c requires x.level >= 10, but x.level > 2 and < 10 is "
            "already required by rules a, b; no value satisfies both");
}

TEST(PreconditionGraphTest, ACycleIsAnErrorNamingIt) {
  const std::vector<PreconditionRule> two = {
      rule("ra", "a.power == on", {"b.power == on"}),
      rule("rb", "b.power == on", {"a.power == on"}),
  };
  EXPECT_EQ(error_of("a.power == on", two),
            "precondition rules form a cycle: a.power before b.power (rule rb), b.power before a.power (rule ra)");
  const std::vector<PreconditionRule> three = {
      rule("r1", "s.power == on", {"a.power == on"}),
      rule("r2", "a.power == on", {"b.power == on"}),
      rule("r3", "b.power == on", {"c.power == on"}),
      rule("r4", "c.power == on", {"a.power != off"}),
  };
  EXPECT_EQ(error_of("s.power == on", three),
            "precondition rules form a cycle: a.power before c.power (rule r4), c.power before b.power (rule r3), "
            "b.power before a.power (rule r2)");
  // A requirement on the subject's own variable always closes a cycle, even
  // with a value that conflicts: the order is impossible before the value is.
  const std::vector<PreconditionRule> back_to_subject = {
      rule("r1", "s.power == on", {"a.power == on"}),
      rule("r2", "a.power == on", {"s.power == off"}),
  };
  EXPECT_EQ(error_of("s.power == on", back_to_subject),
            "precondition rules form a cycle: s.power before a.power (rule r2), a.power before s.power (rule r1)");
  // Rules built in code can skip the parser's check of a self-requirement.
  PreconditionRule self = rule("self", "a.power == on", {"b.power == on"});
  self.preconditions[0] = condition("a.power == on");
  EXPECT_EQ(error_of("a.power == on", {self}), "precondition rules form a cycle: a.power before a.power (rule self)");
}

TEST(PreconditionGraphTest, DiamondsAreNotCycles) {
  const std::vector<PreconditionRule> rules = {
      rule("top", "s.power == on", {"a.power == on", "b.power == on"}),
      rule("left", "a.power == on", {"c.power == on"}),
      rule("right", "b.power == on", {"c.power == on"}),
      rule("again", "b.power == on", {"c.power == on"}),
  };
  const auto graph = built("s.power == on", rules);
  EXPECT_EQ(graph.edges,
            (std::vector<PegEdge>{{1, 0, {"top"}}, {2, 0, {"top"}}, {3, 1, {"left"}}, {3, 2, {"right", "again"}}}));
}

TEST(PreconditionGraphTest, TheSubjectMustBeSettableAndSatisfiable) {
  AttributeCondition reading = condition("lab.temperature == 20");
  reading.settable = false;
  EXPECT_EQ(build_graph(reading, {}).error(),
            "lab.temperature is a reading: no command sets it, so it cannot be a subject command");
  AttributeCondition nothing = condition("lab.level == 20");
  nothing.domain = one_of(ValueKind::number, {});
  EXPECT_EQ(build_graph(nothing, {}).error(), "the subject condition on lab.level holds for no value");
}

// The size bound of the header: one vertex per variable, one expansion per
// vertex, however the rules fan in and out.
TEST(PreconditionGraphTest, SizeIsBoundedByTheRules) {
  std::vector<PreconditionRule> rules;
  constexpr size_t kChain = 300;
  for (size_t i = 0; i < kChain; ++i) {
    // Each link requires the next two: every vertex but the ends is reached
    // twice, and merged the second time.
    std::vector<std::string> texts = {fmt::format("d{}.power == on", i + 1)};
    if (i + 2 <= kChain) texts.push_back(fmt::format("d{}.power == on", i + 2));
    PreconditionRule link{fmt::format("r{}", i), condition(fmt::format("d{}.power == on", i)), {}};
    for (const auto& text : texts) link.preconditions.push_back(condition(text));
    rules.push_back(std::move(link));
  }
  const auto graph = built("d0.power == on", rules);
  EXPECT_EQ(graph.vertices.size(), kChain + 1);
  EXPECT_EQ(graph.edges.size(), 2 * kChain - 1);
  EXPECT_EQ(graph.depth(), kChain + 1);
  EXPECT_EQ(built("d0.power == on", rules), graph);  // deterministic
}

}  // namespace
}  // namespace mesh::routine
