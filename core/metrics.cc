#include "core/metrics.h"

#include <algorithm>
#include <cmath>

namespace mesh::core {
namespace {

// Neighbouring bucket bounds differ by this ratio; a bucket's geometric
// midpoint is then within sqrt(1.08) - 1 (about 3.9 %) of any value in it.
constexpr double kBucketRatio = 1.08;
// Positive values map to floor(log_r(v)) + kIndexOffset, which keeps every
// finite positive double above index 0 (reserved for values <= 0) so that
// map order is value order.
constexpr int kIndexOffset = 10000;
constexpr int kMaxExponent = 10000;

double log_ratio() { return std::log(kBucketRatio); }

int bucket_of(double value) {
  if (value <= 0.0) return 0;
  const double exponent = std::floor(std::log(value) / log_ratio());
  const double clamped = std::clamp(exponent, static_cast<double>(1 - kIndexOffset), static_cast<double>(kMaxExponent));
  return static_cast<int>(clamped) + kIndexOffset;
}

double representative(int bucket) {
  if (bucket == 0) return 0.0;
  return std::exp((static_cast<double>(bucket - kIndexOffset) + 0.5) * log_ratio());
}

Labels sorted(Labels labels) {
  // Callers mostly pass their labels in order already.
  if (!std::is_sorted(labels.begin(), labels.end())) std::sort(labels.begin(), labels.end());
  return labels;
}

}  // namespace

void Histogram::record(double value) {
  if (std::isnan(value)) return;
  if (count_ == 0) {
    min_ = value;
    max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  sum_ += value;
  ++buckets_[bucket_of(value)];
}

double Histogram::quantile(double q) const {
  if (count_ == 0) return 0.0;
  if (!(q > 0.0)) return min_;
  if (q >= 1.0) return max_;
  const auto rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (const auto& [bucket, n] : buckets_) {
    seen += n;
    if (seen >= rank) return std::clamp(representative(bucket), min_, max_);
  }
  return max_;
}

std::vector<Histogram::Bucket> Histogram::buckets() const {
  std::vector<Bucket> out;
  out.reserve(buckets_.size());
  for (const auto& [bucket, n] : buckets_) out.push_back({representative(bucket), n});
  return out;
}

Counter& Metrics::counter(std::string_view name, Labels labels) {
  labels = sorted(std::move(labels));
  std::string key = series_key(name, labels);
  if (Counter* found = find_counter(key)) return *found;
  auto it =
      counters_.emplace(key, CounterEntry{std::string(name), std::move(labels), std::make_unique<Counter>()}).first;
  counter_by_key_.emplace(std::move(key), it->second.counter.get());
  return *it->second.counter;
}

Counter& Metrics::counter(std::string_view name, std::string_view label, std::string_view value) {
  key_scratch_.clear();
  key_scratch_.append(name).append("{").append(label).append("=").append(value).append("}");
  if (Counter* found = find_counter(key_scratch_)) return *found;
  return counter(name, Labels{{std::string(label), std::string(value)}});
}

Counter* Metrics::find_counter(std::string_view key) const {
  auto it = counter_by_key_.find(key);
  return it == counter_by_key_.end() ? nullptr : it->second;
}

Histogram& Metrics::histogram(std::string_view name, Labels labels) {
  labels = sorted(std::move(labels));
  std::string key = series_key(name, labels);
  auto it = histograms_.find(key);
  if (it == histograms_.end()) {
    it = histograms_
             .emplace(std::move(key),
                      HistogramEntry{std::string(name), std::move(labels), std::make_unique<Histogram>()})
             .first;
  }
  return *it->second.histogram;
}

void Metrics::count_traffic(std::string_view scope, std::string_view layer, std::string_view type,
                            std::string_view direction, uint64_t bytes) {
  // Called for every datagram and message of every layer, and its series
  // exist after the first few: found by their series key alone, built in a
  // reused buffer, the labels are made only for a new series. The key is
  // series_key()'s, labels in sorted order.
  const std::string_view names[] = {"messages_total", "bytes_total"};
  const uint64_t amounts[] = {1, bytes};
  for (size_t i = 0; i < 2; ++i) {
    key_scratch_.clear();
    key_scratch_.append(names[i])
        .append("{direction=")
        .append(direction)
        .append(",layer=")
        .append(layer)
        .append(",scope=")
        .append(scope)
        .append(",type=")
        .append(type)
        .append("}");
    if (Counter* found = find_counter(key_scratch_)) {
      found->add(amounts[i]);
      continue;
    }
    counter(names[i], Labels{{"direction", std::string(direction)},
                             {"layer", std::string(layer)},
                             {"scope", std::string(scope)},
                             {"type", std::string(type)}})
        .add(amounts[i]);
  }
}

TrafficCounter Metrics::traffic_counter(std::string_view scope, std::string_view layer, std::string_view type,
                                        std::string_view direction) {
  auto series = [&](std::string_view name) -> Counter& {
    return counter(name, Labels{{"direction", std::string(direction)},
                                {"layer", std::string(layer)},
                                {"scope", std::string(scope)},
                                {"type", std::string(type)}});
  };
  return TrafficCounter(series("messages_total"), series("bytes_total"));
}

std::vector<Metrics::CounterRow> Metrics::counters() const {
  std::vector<CounterRow> rows;
  rows.reserve(counters_.size());
  for (const auto& [series, entry] : counters_) {
    rows.push_back(CounterRow{series, entry.name, entry.labels, entry.counter->value()});
  }
  return rows;
}

std::vector<Metrics::HistogramRow> Metrics::histograms() const {
  std::vector<HistogramRow> rows;
  rows.reserve(histograms_.size());
  for (const auto& [series, entry] : histograms_) {
    rows.push_back(HistogramRow{series, entry.name, entry.labels, entry.histogram.get()});
  }
  return rows;
}

uint64_t Metrics::total(std::string_view name) const {
  uint64_t sum = 0;
  for (const auto& [series, entry] : counters_) {
    if (entry.name == name) sum += entry.counter->value();
  }
  return sum;
}

std::string Metrics::series_key(std::string_view name, const Labels& sorted_labels) {
  size_t length = name.size() + 2;
  for (const auto& [k, v] : sorted_labels) length += k.size() + v.size() + 2;
  std::string key;
  key.reserve(length);
  key += name;
  if (sorted_labels.empty()) return key;
  key += '{';
  for (size_t i = 0; i < sorted_labels.size(); ++i) {
    if (i > 0) key += ',';
    key += sorted_labels[i].first;
    key += '=';
    key += sorted_labels[i].second;
  }
  key += '}';
  return key;
}

}  // namespace mesh::core
