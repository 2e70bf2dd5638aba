// meshctl verbs about the node itself: status, metrics, log, ping.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/node_id.h"
#include "meshctl/output.h"
#include "meshctl/prometheus_text.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

// A ping without --timeout waits as long as the agent's configured ping
// timeout, which meshctl does not know; this only bounds a hung agent.
constexpr double kDefaultPingWaitS = 60.0;
constexpr unsigned kDefaultPingCount = 3;
constexpr double kDefaultPingIntervalS = 1.0;

constexpr std::string_view kHelp = R"(    status
        The node's id, name, version and uptime, one summary line per
        layer (bottom up), and the one-hop neighbours with the time since
        each was last heard.

    metrics [--prometheus]
        Every counter and histogram of the node (count, mean, p50, p99,
        max), one series per line, sorted by name and labels. --json
        also lists each histogram's buckets (value, count), which add up
        across nodes (bench/testbed_table4.py merges them). With
        --prometheus, the Prometheus text format instead: counters as
        meshagent_NAME_total, histograms as summaries (quantiles 0.5 and
        0.99, _sum, _count) with a meshagent_NAME_max gauge, and
        meshagent_up 1; the package's meshagent-prometheus.timer writes it
        for node_exporter's textfile collector.

    log LEVEL [LAYER]
        Sets the log level of LAYER (core, routing, agent, ...), or of
        every layer when LAYER is omitted. LEVEL is one of trace, debug,
        info, warn, error, critical, off. Lasts until the agent restarts.

    ping NODE [--count N] [--interval S]
        Sends N end-to-end echoes (default 3) to the node whose address is
        NODE (e.g. 10.0.0.2), S seconds apart (default 1), like ping(8).
        Each reply shows the hops the echo travelled and its round-trip
        time; a summary follows.
)";

int run_status(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 1) return usage_error("status takes no arguments");
  mesh::proto::AdminRequest request;
  request.mutable_status();
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_status()) return unexpected_answer("status");
  const mesh::proto::StatusReply& status = response->status();
  if (line.json) {
    print_json(status);
    return kExitOk;
  }
  std::cout << fmt::format("node {} ({}) version {} up {:.1f} s\n", status.node_id(), status.name(), status.version(),
                           status.uptime_s());
  std::vector<std::vector<std::string>> layers;
  for (const auto& layer : status.layers()) layers.push_back({layer.layer(), layer.summary()});
  print_table(layers, {false, false}, "  ");
  if (status.neighbours().empty()) {
    std::cout << "neighbours: none\n";
    return kExitOk;
  }
  std::cout << fmt::format("neighbours: {}\n", status.neighbours_size());
  std::vector<std::vector<std::string>> neighbours;
  for (const auto& n : status.neighbours()) {
    neighbours.push_back(
        {n.id(), n.name().empty() ? "-" : n.name(), fmt::format("heard {:.1f} s ago", n.last_heard_s())});
  }
  print_table(neighbours, {false, false, false}, "  ");
  return kExitOk;
}

int run_metrics(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 1) return usage_error("metrics takes no arguments");
  mesh::proto::AdminRequest request;
  request.mutable_metrics();
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_metrics()) return unexpected_answer("metrics");
  const mesh::proto::MetricsReply& metrics = response->metrics();
  if (line.prometheus) {
    std::cout << to_prometheus_text(metrics);
    return kExitOk;
  }
  if (line.json) {
    print_json(metrics);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> counters = {{"COUNTER", "VALUE"}};
  for (const auto& c : metrics.counters()) counters.push_back({c.series(), std::to_string(c.value())});
  print_table(counters, {false, true});
  if (!metrics.histograms().empty()) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> histograms = {{"HISTOGRAM", "COUNT", "MEAN", "P50", "P99", "MAX"}};
    for (const auto& h : metrics.histograms()) {
      histograms.push_back({h.series(), std::to_string(h.count()), format_number(h.mean()), format_number(h.p50()),
                            format_number(h.p99()), format_number(h.max())});
    }
    print_table(histograms, {false, true, true, true, true, true});
  }
  return kExitOk;
}

int run_log(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() < 2 || line.words.size() > 3) return usage_error("log wants LEVEL [LAYER]");
  mesh::proto::AdminRequest request;
  request.mutable_log_level()->set_level(line.words[1]);
  if (line.words.size() == 3) request.mutable_log_level()->set_layer(line.words[2]);
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_log_level()) return unexpected_answer("log");
  const mesh::proto::LogLevelReply& reply = response->log_level();
  if (line.json) {
    print_json(reply);
    return kExitOk;
  }
  std::vector<std::string> layers(reply.layers().begin(), reply.layers().end());
  std::cout << fmt::format("log level {} for {}\n", reply.level(), fmt::join(layers, ", "));
  return kExitOk;
}

// One request without arguments; the reply, or the exit status on failure.

int run_ping(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 2) return usage_error("ping wants one NODE (an IPv4 address such as 10.0.0.2)");
  const std::string& node = line.words[1];
  if (!mesh::core::NodeId::parse(node)) return usage_error(fmt::format("not an IPv4 address: '{}'", node));
  const unsigned count = line.count.value_or(kDefaultPingCount);
  const double interval_s = line.interval_s.value_or(kDefaultPingIntervalS);

  mesh::proto::AdminRequest request;
  request.mutable_ping()->set_node(node);
  double wait_s = kDefaultPingWaitS;
  if (line.timeout_s) {
    request.mutable_ping()->set_timeout_ms(static_cast<uint32_t>(std::llround(*line.timeout_s * 1000.0)));
    wait_s = *line.timeout_s + kPingAnswerGraceS;
  }

  mesh::proto::PingSummary summary;
  summary.set_node(node);
  for (unsigned i = 0; i < count; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::duration<double>(interval_s));
    auto response = connection.call(request, wait_s);
    if (!response) return no_agent(connection, response.error());
    summary.set_sent(summary.sent() + 1);
    if (!response->error().empty() || !response->has_ping()) {
      if (!line.json) {
        std::cout << (response->error().empty() ? std::string("the agent's answer holds no ping result")
                                                : response->error())
                  << "\n";
      }
      continue;
    }
    const mesh::proto::PingReply& reply = response->ping();
    summary.set_received(summary.received() + 1);
    summary.add_rtt_ms(reply.rtt_ms());
    summary.set_hops(reply.hops());
    if (!line.json) {
      std::cout << fmt::format("reply from {}: hops={} time={:.2f} ms\n", reply.node(), reply.hops(), reply.rtt_ms());
      std::cout.flush();
    }
  }
  if (summary.received() > 0) {
    const auto& rtts = summary.rtt_ms();
    double sum = 0;
    for (double rtt : rtts) sum += rtt;
    summary.set_min_ms(*std::min_element(rtts.begin(), rtts.end()));
    summary.set_max_ms(*std::max_element(rtts.begin(), rtts.end()));
    summary.set_avg_ms(sum / static_cast<double>(rtts.size()));
  }
  if (line.json) {
    print_json(summary);
  } else {
    std::cout << fmt::format("--- {} ping statistics ---\n", node);
    std::cout << fmt::format("{} sent, {} received", summary.sent(), summary.received());
    if (summary.received() > 0) {
      std::cout << fmt::format(", min/avg/max = {:.2f}/{:.2f}/{:.2f} ms", summary.min_ms(), summary.avg_ms(),
                               summary.max_ms());
    }
    std::cout << "\n";
  }
  return summary.received() > 0 ? kExitOk : kExitFailure;
}

constexpr Verb kVerbs[] = {
    {"status", run_status},
    {"metrics", run_metrics},
    {"log", run_log},
    {"ping", run_ping},
};

}  // namespace

const VerbFamily& node_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
