#include "meshctl/prometheus_text.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace mesh::meshctl {

namespace {

using LabelList = std::vector<std::pair<std::string, std::string>>;

LabelList sorted_labels(const google::protobuf::Map<std::string, std::string>& labels) {
  LabelList out;
  for (const auto& [key, value] : labels) out.emplace_back(prometheus_name(key), value);
  std::sort(out.begin(), out.end());
  return out;
}

// {k="v",...}, with `extra` (e.g. quantile) last; empty when no labels.
std::string label_text(const LabelList& labels, std::string_view extra_key = {}, std::string_view extra_value = {}) {
  std::string out;
  for (const auto& [key, value] : labels) {
    out += out.empty() ? "{" : ",";
    out += fmt::format("{}=\"{}\"", key, prometheus_label_value(value));
  }
  if (!extra_key.empty()) {
    out += out.empty() ? "{" : ",";
    out += fmt::format("{}=\"{}\"", extra_key, extra_value);
  }
  if (!out.empty()) out += "}";
  return out;
}

struct Family {
  std::string type;
  std::string help;
  std::vector<std::pair<LabelList, std::string>> lines;  // labels, "suffix{labels} value" text
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string prometheus_name(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 1);
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(out.begin(), '_');
  return out;
}

std::string prometheus_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

std::string to_prometheus_text(const proto::MetricsReply& metrics, std::string_view prefix) {
  const std::string p = prometheus_name(prefix);
  std::map<std::string, Family> families;

  Family& up = families[p + "up"];
  up.type = "gauge";
  up.help = "1 when the agent answered meshctl";
  up.lines.emplace_back(LabelList{}, fmt::format("{}up 1", p));

  for (const auto& c : metrics.counters()) {
    std::string name = p + prometheus_name(c.name());
    if (!ends_with(name, "_total")) name += "_total";
    Family& family = families[name];
    family.type = "counter";
    family.help = fmt::format("meshagent counter {}", c.name());
    const LabelList labels = sorted_labels(c.labels());
    family.lines.emplace_back(labels, fmt::format("{}{} {}", name, label_text(labels), c.value()));
  }
  for (const auto& h : metrics.histograms()) {
    const std::string name = p + prometheus_name(h.name());
    const LabelList labels = sorted_labels(h.labels());
    Family& summary = families[name];
    summary.type = "summary";
    summary.help =
        fmt::format("meshagent histogram {} (log-bucketed, about 4 % relative error on quantiles)", h.name());
    const double sum = h.mean() * static_cast<double>(h.count());
    summary.lines.emplace_back(
        labels, fmt::format("{}{} {}\n{}{} {}\n{}_sum{} {}\n{}_count{} {}", name, label_text(labels, "quantile", "0.5"),
                            prometheus_number(h.p50()), name, label_text(labels, "quantile", "0.99"),
                            prometheus_number(h.p99()), name, label_text(labels), prometheus_number(sum), name,
                            label_text(labels), h.count()));
    Family& max = families[name + "_max"];
    max.type = "gauge";
    max.help = fmt::format("meshagent histogram {}: largest value recorded", h.name());
    max.lines.emplace_back(labels, fmt::format("{}_max{} {}", name, label_text(labels), prometheus_number(h.max())));
  }

  std::string out;
  for (auto& [name, family] : families) {
    std::stable_sort(family.lines.begin(), family.lines.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, family.help, name, family.type);
    for (const auto& [labels, text] : family.lines) {
      out += text;
      out += '\n';
    }
  }
  return out;
}

}  // namespace mesh::meshctl
