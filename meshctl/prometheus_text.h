#pragma once

#include <string>
#include <string_view>

#include "proto/admin.pb.h"

namespace mesh::meshctl {

// A MetricsReply (what `meshctl metrics` shows) in the Prometheus text
// exposition format, version 0.0.4, for node_exporter's textfile collector
// or any scraper:
//   - a gauge <prefix>up = 1 (the agent answered);
//   - each counter as a counter family <prefix><name>, with "_total"
//     appended unless the name already ends in it;
//   - each histogram as a summary <prefix><name> (quantiles 0.5 and 0.99,
//     _sum, _count) plus a gauge <prefix><name>_max.
// Families are sorted by name, series by labels; metric and label names are
// reduced to [a-zA-Z0-9_] and label values escaped.
std::string to_prometheus_text(const proto::MetricsReply& metrics, std::string_view prefix = "meshagent_");

// Exposed for tests.
std::string prometheus_name(std::string_view name);
std::string prometheus_label_value(std::string_view value);
std::string prometheus_number(double value);

}  // namespace mesh::meshctl
