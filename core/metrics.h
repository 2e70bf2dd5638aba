#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mesh::core {

// Label pairs, e.g. {{"layer", "echo"}, {"scope", "e2e"}}. Order does not
// matter; the registry sorts them.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void add(uint64_t n = 1) { value_ += n; }
  uint64_t value() const { return value_; }

 private:
  uint64_t value_ = 0;
};

// The two series Metrics::count_traffic() adds to for one (scope, layer,
// type, direction), found once: layers that count every message and
// datagram keep one per kind they send, instead of building and hashing a
// series key per message.
class TrafficCounter {
 public:
  void add(uint64_t bytes) {
    messages_->add();
    bytes_->add(bytes);
  }

 private:
  friend class Metrics;
  TrafficCounter(Counter& messages, Counter& bytes) : messages_(&messages), bytes_(&bytes) {}

  Counter* messages_;
  Counter* bytes_;
};

// Log-bucketed histogram (about 4 % relative error on quantiles), constant
// memory, for latencies and sizes.
class Histogram {
 public:
  void record(double value);
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  double min() const { return count_ ? min_ : 0.0; }
  double max() const { return count_ ? max_ : 0.0; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  // q in [0, 1]; 0 when empty.
  double quantile(double q) const;

  // The non-empty buckets in value order, each as its geometric midpoint
  // (within about 4 % of every value in it; quantile() reports the same,
  // clamped to [min, max]). A bucket's value depends on nothing else, so
  // histograms of several nodes, or two readings of one, merge and subtract
  // bucket by bucket.
  struct Bucket {
    double value;
    uint64_t count;
  };
  std::vector<Bucket> buckets() const;

 private:
  std::map<int, uint64_t> buckets_;  // bucket index -> count; index 0 holds values <= 0
  uint64_t count_ = 0;
  double sum_ = 0.0;
  double min_ = 0.0;
  double max_ = 0.0;
};

// One node's metrics. Names are snake_case; a series is a name plus labels,
// written name{k=v,...}. References returned stay valid for the registry's
// life, so hot paths look a series up once and keep it.
class Metrics {
 public:
  Counter& counter(std::string_view name, Labels labels = {});
  // The series name{label=value}: for hot paths whose one label varies
  // (a drop reason, a message type), found without building Labels.
  Counter& counter(std::string_view name, std::string_view label, std::string_view value);
  Histogram& histogram(std::string_view name, Labels labels = {});

  // Traffic accounting as CoMesh measures it: per layer and message type,
  // end to end (scope "e2e": one per message sent or delivered) and hop by
  // hop (scope "hop": one per datagram on a link). direction is "sent" or
  // "received". Adds to messages_total and bytes_total.
  void count_traffic(std::string_view scope, std::string_view layer, std::string_view type,
                     std::string_view direction, uint64_t bytes);
  // count_traffic()'s series, for counting many messages through it.
  TrafficCounter traffic_counter(std::string_view scope, std::string_view layer, std::string_view type,
                                 std::string_view direction);

  struct CounterRow {
    std::string series;  // name{k=v,...}
    std::string name;
    Labels labels;
    uint64_t value;
  };
  struct HistogramRow {
    std::string series;
    std::string name;
    Labels labels;
    const Histogram* histogram;
  };
  // Sorted by series, so output is stable.
  std::vector<CounterRow> counters() const;
  std::vector<HistogramRow> histograms() const;

  // Total of a counter name over all label sets.
  uint64_t total(std::string_view name) const;

  static std::string series_key(std::string_view name, const Labels& sorted_labels);

 private:
  struct CounterEntry {
    std::string name;
    Labels labels;
    std::unique_ptr<Counter> counter;
  };
  struct HistogramEntry {
    std::string name;
    Labels labels;
    std::unique_ptr<Histogram> histogram;
  };
  // Finds an existing series by the key in key_scratch_. Called per message
  // and datagram of every layer: a tree of string keys cost a string compare
  // per level, and more levels as a node's series grew.
  Counter* find_counter(std::string_view key) const;

  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  std::map<std::string, CounterEntry, std::less<>> counters_;
  // The same counters by series key, hashed: counters_ keeps the sorted order
  // that output needs, this the lookups.
  std::unordered_map<std::string, Counter*, KeyHash, std::equal_to<>> counter_by_key_;
  std::string key_scratch_;
  std::map<std::string, HistogramEntry, std::less<>> histograms_;
};

}  // namespace mesh::core
