#include "core/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/rng.h"

namespace mesh::core {
namespace {

TEST(Metrics, CountersAdd) {
  Metrics metrics;
  Counter& c = metrics.counter("requests_total", {{"layer", "echo"}});
  c.add();
  c.add(4);
  EXPECT_EQ(metrics.counter("requests_total", {{"layer", "echo"}}).value(), 5u);
  EXPECT_EQ(metrics.counter("requests_total", {{"layer", "other"}}).value(), 0u);
  EXPECT_EQ(metrics.counter("requests_total").value(), 0u);
}

TEST(Metrics, LabelOrderDoesNotMatter) {
  Metrics metrics;
  Counter& a = metrics.counter("x", {{"b", "2"}, {"a", "1"}});
  Counter& b = metrics.counter("x", {{"a", "1"}, {"b", "2"}});
  EXPECT_EQ(&a, &b);
  Histogram& h1 = metrics.histogram("h", {{"z", "1"}, {"y", "2"}});
  Histogram& h2 = metrics.histogram("h", {{"y", "2"}, {"z", "1"}});
  EXPECT_EQ(&h1, &h2);
}

TEST(Metrics, SeriesKeys) {
  EXPECT_EQ(Metrics::series_key("up", {}), "up");
  EXPECT_EQ(Metrics::series_key("bytes_total", {{"a", "1"}, {"b", "x"}}), "bytes_total{a=1,b=x}");

  Metrics metrics;
  metrics.counter("b_total", {{"z", "1"}, {"a", "2"}}).add(3);
  metrics.counter("a_total").add(1);
  metrics.counter("b_total", {{"a", "1"}}).add(2);
  const auto rows = metrics.counters();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].series, "a_total");
  EXPECT_EQ(rows[1].series, "b_total{a=1}");
  EXPECT_EQ(rows[2].series, "b_total{a=2,z=1}");
  EXPECT_EQ(rows[2].name, "b_total");
  EXPECT_EQ(rows[2].labels, (Labels{{"a", "2"}, {"z", "1"}}));
  EXPECT_EQ(rows[2].value, 3u);

  metrics.histogram("lat_us", {{"b", "1"}, {"a", "1"}}).record(5);
  const auto hists = metrics.histograms();
  ASSERT_EQ(hists.size(), 1u);
  EXPECT_EQ(hists[0].series, "lat_us{a=1,b=1}");
  EXPECT_EQ(hists[0].histogram->count(), 1u);
}

TEST(Metrics, CountTrafficAndTotal) {
  Metrics metrics;
  metrics.count_traffic("e2e", "echo", "request", "sent", 100);
  metrics.count_traffic("e2e", "echo", "request", "sent", 50);
  metrics.count_traffic("hop", "routing", "hello", "received", 30);
  const Labels sent{{"scope", "e2e"}, {"layer", "echo"}, {"type", "request"}, {"direction", "sent"}};
  EXPECT_EQ(metrics.counter("messages_total", sent).value(), 2u);
  EXPECT_EQ(metrics.counter("bytes_total", sent).value(), 150u);
  EXPECT_EQ(metrics.total("messages_total"), 3u);
  EXPECT_EQ(metrics.total("bytes_total"), 180u);
  EXPECT_EQ(metrics.total("no_such_total"), 0u);
  EXPECT_EQ(metrics.counters()[0].series, "bytes_total{direction=received,layer=routing,scope=hop,type=hello}");
}

TEST(Histogram, EmptyIsZero) {
  Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.quantile(0.5), 0.0);
  EXPECT_EQ(h.min(), 0.0);
  EXPECT_EQ(h.max(), 0.0);
  EXPECT_EQ(h.mean(), 0.0);
}

TEST(Histogram, SummaryStatistics) {
  Histogram h;
  for (double v : {3.0, 1.0, 2.0}) h.record(v);
  EXPECT_EQ(h.count(), 3u);
  EXPECT_DOUBLE_EQ(h.sum(), 6.0);
  EXPECT_DOUBLE_EQ(h.mean(), 2.0);
  EXPECT_EQ(h.min(), 1.0);
  EXPECT_EQ(h.max(), 3.0);
  EXPECT_EQ(h.quantile(0.0), 1.0);
  EXPECT_EQ(h.quantile(1.0), 3.0);
}

TEST(Histogram, QuantilesWithinFivePercentUniform) {
  Histogram h;
  for (int v = 1; v <= 10000; ++v) h.record(v);
  for (double q : {0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999}) {
    const double exact = q * 10000;
    EXPECT_NEAR(h.quantile(q), exact, 0.05 * exact) << "q=" << q;
  }
}

TEST(Histogram, QuantilesWithinFivePercentLogUniform) {
  // Six decades, from 0.001 to 1000: the error is relative at every scale.
  Histogram h;
  const int n = 6000;
  std::vector<double> values;
  for (int i = 0; i < n; ++i) values.push_back(0.001 * std::pow(10.0, 6.0 * i / (n - 1)));
  for (double v : values) h.record(v);
  for (double q : {0.05, 0.2, 0.5, 0.8, 0.95, 0.99}) {
    const double exact = values[static_cast<size_t>(std::ceil(q * n)) - 1];
    EXPECT_NEAR(h.quantile(q), exact, 0.05 * exact) << "q=" << q;
  }
}

TEST(Histogram, NonPositiveValuesComeFirst) {
  Histogram h;
  h.record(0.0);
  h.record(-2.0);
  for (int i = 0; i < 8; ++i) h.record(100.0);
  EXPECT_EQ(h.min(), -2.0);
  EXPECT_LE(h.quantile(0.2), 0.0);
  EXPECT_NEAR(h.quantile(0.5), 100.0, 5.0);
  EXPECT_NEAR(h.quantile(0.99), 100.0, 5.0);
}

TEST(Histogram, BucketsAddUpAndAgreeWithQuantiles) {
  Histogram h;
  for (int v = 1; v <= 1000; ++v) h.record(v);
  const auto buckets = h.buckets();
  ASSERT_FALSE(buckets.empty());
  uint64_t total = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    EXPECT_GT(buckets[i].count, 0u);
    if (i > 0) {
      EXPECT_LT(buckets[i - 1].value, buckets[i].value) << "buckets out of value order at " << i;
    }
    total += buckets[i].count;
  }
  EXPECT_EQ(total, h.count());
  EXPECT_NEAR(buckets.front().value, h.min(), 0.04 * h.min());
  EXPECT_NEAR(buckets.back().value, h.max(), 0.04 * h.max());
  // The median read off the buckets is the one quantile() reports (inside the observed range).
  uint64_t seen = 0;
  double median = 0.0;
  for (const auto& bucket : buckets) {
    seen += bucket.count;
    if (seen >= 500) {
      median = bucket.value;
      break;
    }
  }
  EXPECT_EQ(median, h.quantile(0.5));
  EXPECT_TRUE(Histogram().buckets().empty());
}

TEST(Histogram, BucketsOfTwoHistogramsMergeByValue) {
  // Two nodes' histograms of one series: their buckets added up by value
  // are the buckets of one histogram of every value.
  Histogram a;
  Histogram b;
  Histogram both;
  for (int v = 1; v <= 300; ++v) {
    (v % 3 == 0 ? a : b).record(v * 1.5);
    both.record(v * 1.5);
  }
  std::map<double, uint64_t> merged;
  for (const Histogram* h : {&a, &b}) {
    for (const auto& bucket : h->buckets()) merged[bucket.value] += bucket.count;
  }
  std::map<double, uint64_t> expected;
  for (const auto& bucket : both.buckets()) expected[bucket.value] += bucket.count;
  EXPECT_EQ(merged, expected);
}

TEST(Histogram, QuantileClampedToObservedRange) {
  Histogram h;
  h.record(1000.0);
  EXPECT_EQ(h.quantile(0.5), 1000.0);
  h.record(1001.0);
  EXPECT_GE(h.quantile(0.5), 1000.0);
  EXPECT_LE(h.quantile(0.5), 1001.0);
}

// count_traffic() finds its series by a key it builds itself, and
// traffic_counter() resolves them once; both must be the series counter()
// gives for the same labels, on random label values.
TEST(Metrics, CountTrafficUsesCountersSeries) {
  Rng rng(5);
  const std::vector<std::string> words{"hop", "e2e", "olsr", "tc", "hello", "sent", "received", "a", "", "x=y"};
  Metrics traffic;
  Metrics reference;
  for (int i = 0; i < 2000; ++i) {
    const std::string scope = words[rng.below(words.size())];
    const std::string layer = words[rng.below(words.size())];
    const std::string type = words[rng.below(words.size())];
    const std::string direction = words[rng.below(words.size())];
    const uint64_t bytes = rng.below(1500);
    if (rng.below(2) == 0) {
      traffic.count_traffic(scope, layer, type, direction, bytes);
    } else {
      traffic.traffic_counter(scope, layer, type, direction).add(bytes);
    }
    const Labels labels{{"type", type}, {"scope", scope}, {"layer", layer}, {"direction", direction}};
    reference.counter("messages_total", labels).add(1);
    reference.counter("bytes_total", labels).add(bytes);
  }
  const auto got = traffic.counters();
  const auto want = reference.counters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].series, want[i].series);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].labels, want[i].labels);
    EXPECT_EQ(got[i].value, want[i].value);
  }
}

}  // namespace
}  // namespace mesh::core
