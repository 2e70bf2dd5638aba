#include <gtest/gtest.h>

#include "routine/value_domain.h"

namespace mesh::routine {
namespace {

std::optional<Bound> at_least(double x) { return Bound{x, true}; }
std::optional<Bound> above(double x) { return Bound{x, false}; }
std::optional<Bound> at_most(double x) { return Bound{x, true}; }
std::optional<Bound> below(double x) { return Bound{x, false}; }

TEST(ValueDomainTest, IntervalsIntersectToTheTighterBounds) {
  const auto a = between(at_least(18), below(30));
  const auto b = between(above(20), at_most(40));
  const auto both = intersect(a, b);
  EXPECT_EQ(both, between(above(20), below(30)));
  EXPECT_EQ(format_domain(both), "> 20 and < 30");
  // On an equal bound the exclusive one wins.
  EXPECT_EQ(format_domain(intersect(between(at_least(20), std::nullopt), between(above(20), std::nullopt))), "> 20");
}

TEST(ValueDomainTest, IntegerIntervalsHaveInclusiveWholeBounds) {
  const auto domain = between(above(20), below(30.5), true);
  EXPECT_EQ(domain.low, (Bound{21, true}));
  EXPECT_EQ(domain.high, (Bound{30, true}));
  EXPECT_EQ(format_domain(domain), "in 21..30");
  EXPECT_TRUE(contains(domain, Value{21.0}));
  EXPECT_FALSE(contains(domain, Value{20.0}));
  EXPECT_FALSE(contains(domain, Value{25.5}));
  // No whole number strictly between 20 and 21.
  EXPECT_TRUE(is_empty(between(above(20), below(21), true)));
  EXPECT_FALSE(is_empty(between(above(20), below(21))));
}

TEST(ValueDomainTest, AnIntervalOfOneValueIsThatValue) {
  EXPECT_EQ(between(at_least(20), at_most(20)), one_of(ValueKind::number, {Value{20.0}}));
  EXPECT_EQ(format_domain(between(at_least(20), at_most(20))), "== 20");
  EXPECT_TRUE(is_empty(between(at_least(20), below(20))));
  EXPECT_TRUE(is_empty(between(at_least(21), at_most(20))));
  // Whole numbers 20..22 without 20 and 22 leave 21 alone.
  const auto left = without(without(between(at_least(20), at_most(22), true), Value{20.0}), Value{22.0});
  EXPECT_EQ(left, one_of(ValueKind::number, {Value{21.0}}));
  EXPECT_TRUE(is_empty(without(left, Value{21.0})));
}

TEST(ValueDomainTest, NotEqualTakesAPointOut) {
  const auto domain = without(between(at_least(18), at_most(24)), Value{20.0});
  EXPECT_EQ(format_domain(domain), "in 18..24 and != 20");
  EXPECT_FALSE(contains(domain, Value{20.0}));
  EXPECT_TRUE(contains(domain, Value{20.5}));
  // A point outside the interval changes nothing.
  EXPECT_EQ(without(domain, Value{50.0}), domain);
  // Points taken out survive a later intersection, and drop out of the
  // bounds when these move past them.
  EXPECT_EQ(format_domain(intersect(domain, between(std::nullopt, below(22)))), ">= 18 and < 22 and != 20");
  EXPECT_EQ(format_domain(intersect(domain, between(above(21), std::nullopt))), "> 21 and <= 24");
}

TEST(ValueDomainTest, SetsKeepTheLeftOrder) {
  const auto left =
      one_of(ValueKind::text, {Value{std::string("c")}, Value{std::string("a")}, Value{std::string("b")}});
  const auto right = one_of(ValueKind::text, {Value{std::string("b")}, Value{std::string("c")}});
  EXPECT_EQ(format_domain(intersect(left, right)), "in {\"c\", \"b\"}");
  EXPECT_EQ(format_domain(intersect(right, left)), "in {\"b\", \"c\"}");
  EXPECT_TRUE(is_empty(intersect(left, one_of(ValueKind::text, {Value{std::string("d")}}))));
}

TEST(ValueDomainTest, SetsMeetIntervalsAndExclusions) {
  const auto set = one_of(ValueKind::number, {Value{30.0}, Value{10.0}, Value{20.0}});
  EXPECT_EQ(format_domain(intersect(set, between(at_least(15), std::nullopt))), "in {30, 20}");
  EXPECT_EQ(format_domain(intersect(between(at_least(15), std::nullopt), set)), "in {30, 20}");
  EXPECT_EQ(format_domain(intersect(set, without(any_value(ValueKind::number), Value{20.0}))), "in {30, 10}");
  EXPECT_EQ(format_domain(intersect(set, one_of(ValueKind::number, {Value{20.0}}))), "== 20");
}

TEST(ValueDomainTest, BoolsAndTextAreSetsOrExclusions) {
  const auto off = without(any_value(ValueKind::on_off), Value{true});
  EXPECT_EQ(off, one_of(ValueKind::on_off, {Value{false}}));
  EXPECT_EQ(format_domain(off), "== off");
  EXPECT_EQ(format_domain(without(any_value(ValueKind::boolean), Value{false})), "== true");
  const auto not_eco = without(any_value(ValueKind::text), Value{std::string("eco")});
  EXPECT_EQ(format_domain(not_eco), "!= \"eco\"");
  EXPECT_TRUE(contains(not_eco, Value{std::string("away")}));
  EXPECT_FALSE(contains(not_eco, Value{std::string("eco")}));
  EXPECT_EQ(format_domain(any_value(ValueKind::text)), "any value");
}

TEST(ValueDomainTest, DifferentTypesShareNoValue) {
  EXPECT_TRUE(is_empty(intersect(any_value(ValueKind::on_off), any_value(ValueKind::number))));
  EXPECT_FALSE(contains(any_value(ValueKind::number), Value{true}));
  // on/off and true/false are one bool.
  EXPECT_EQ(format_domain(intersect(any_value(ValueKind::on_off), one_of(ValueKind::boolean, {Value{true}}))), "== on");
}

TEST(ValueDomainTest, FormatsQuotesAndEscapesText) {
  EXPECT_EQ(format_value(ValueKind::text, Value{std::string("say \"hi\"\\")}), "\"say \\\"hi\\\"\\\\\"");
  EXPECT_EQ(format_domain(one_of(ValueKind::text, {})), "no value");
}

}  // namespace
}  // namespace mesh::routine
