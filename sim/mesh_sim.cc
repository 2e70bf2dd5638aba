#include "sim/mesh_sim.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/log.h"
#include "sim/running_node.h"

namespace mesh::sim {
namespace {

// Salts that split the run seed into independent streams.
constexpr uint64_t kNetworkSalt = 0x6e6574;  // "net"
constexpr uint64_t kKeySalt = 0x6b6579;      // "key"
constexpr uint64_t kMeshKeyBytes = 32;
constexpr int kProgressSteps = 100;

core::MeshKey key_from_seed(uint64_t seed) {
  core::Rng rng(mix_seed(seed, kKeySalt));
  std::string hex;
  for (uint64_t i = 0; i < kMeshKeyBytes; ++i) hex += fmt::format("{:02x}", rng.below(256));
  auto key = core::MeshKey::from_hex(hex);
  if (!key) throw std::logic_error("sim: derived mesh key rejected: " + key.error());
  return *key;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string labels_text(const core::Labels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += fmt::format("{}{}={}", out.empty() ? "" : ";", k, v);
  return out;
}

std::string label_of(const core::Labels& labels, std::string_view key) {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "-";
}

std::string_view channel_name(size_t channel) { return channel == 0 ? "routing" : "agent"; }

}  // namespace

MeshSim::MeshSim(const Scenario& scenario, uint64_t seed) : MeshSim(scenario, seed, Options{}) {}

MeshSim::MeshSim(const Scenario& scenario, uint64_t seed, Options options)
    : scenario_(scenario),
      seed_(seed),
      options_(std::move(options)),
      simulator_(seed),
      network_(simulator_, mix_seed(seed, kNetworkSalt)),
      topology_(scenario.build_topology()),
      mesh_key_(key_from_seed(seed)) {
  const LinkParams params = scenario_.link_params();
  for (size_t i = 0; i < topology_.size(); ++i) network_.add_node();
  for (const auto& [a, b] : topology_.edges) network_.connect(id_of(a), id_of(b), params);

  if (options_.disk.max_commit <= core::Duration::zero() && std::getenv("MESH_SIM_SLOW_DISKS") != nullptr) {
    options_.disk = SimDisk::slow();
  }
  slots_.resize(topology_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].storage = std::make_unique<SimDisk>(options_.disk);
    const int64_t spread = std::max<int64_t>(options_.start_spread.count(), 0);
    const auto offset = core::Duration(spread > 0 ? simulator_.rng().between(0, spread - 1) : 0);
    simulator_.at(core::TimePoint(offset), [this, i] {
      if (!slots_[i].down && !slots_[i].node) boot(i);
    });
  }
  for (const ScenarioEvent& event : scenario_.events) {
    simulator_.at(core::TimePoint(event.at), [this, event] { apply(event); });
  }
  if (scenario_.workload.ping_interval_ms > 0.0 && !topology_.edges.empty()) {
    schedule_ping();
  }
}

MeshSim::~MeshSim() {
  // Nodes first: their destructors cancel timers on their SimEnvs and clear
  // receivers on the network's links, both of which must still exist.
  for (auto& slot : slots_) {
    slot.node.reset();
    slot.env.reset();
  }
}

void MeshSim::boot(size_t index) {
  Slot& slot = slots_[index];
  const RunningNodeScope running(static_cast<int32_t>(index));
  ++slot.incarnation;
  slot.env = std::make_unique<SimEnv>(simulator_, seed_, static_cast<uint32_t>(index), slot.incarnation);
  slot.storage->attach(*slot.env);
  agent::NodeConfig config;
  config.name = fmt::format("n{}", index);
  config.id = id_of(index);
  config.location = topology_.positions[index];
  config.mesh_key = mesh_key_;
  config.transport.hop_arq.enabled = options_.hop_arq;
  if (options_.configure) options_.configure(config);
  const core::NodeId id = id_of(index);
  routine::DriverFactory* drivers = options_.drivers ? options_.drivers(index, *slot.env) : nullptr;
  slot.node = std::make_unique<agent::Node>(
      config, agent::NodeContext{*slot.env, network_.link(id, Channel::agent), network_.link(id, Channel::routing),
                                 *slot.storage, drivers});
  slot.node->start();
}

void MeshSim::snapshot(const core::Metrics& metrics, uint32_t incarnation, std::vector<HistogramSnapshot>& out) {
  for (const auto& row : metrics.histograms()) {
    const core::Histogram& h = *row.histogram;
    out.push_back(HistogramSnapshot{incarnation, row.series, row.name, row.labels, h.count(), h.sum(), h.min(),
                                    h.max(), h.mean(), h.quantile(0.5), h.quantile(0.9), h.quantile(0.99)});
  }
}

void MeshSim::retire(Slot& slot) const {
  if (!slot.node) return;
  for (const auto& row : slot.node->metrics().counters()) {
    auto [it, inserted] = slot.retired_counters.try_emplace(row.series, CounterValue{row.name, row.labels, 0});
    it->second.value += row.value;
  }
  snapshot(slot.node->metrics(), slot.incarnation, slot.retired_histograms);
}

void MeshSim::crash(size_t index) {
  Slot& slot = slots_.at(index);
  if (slot.down) return;
  slot.down = true;
  retire(slot);
  slot.node.reset();
  if (slot.env) slot.env->cancel_all();
  slot.env.reset();
  slot.storage->power_cut(simulator_.rng());
  const core::NodeId id = id_of(index);
  network_.set_node_up(id, false);
  for (Channel channel : {Channel::routing, Channel::agent}) network_.link(id, channel).set_receiver(nullptr);
  core::log("sim").debug("crash node={} t_us={}", id.to_string(), simulator_.now().time_since_epoch().count());
}

void MeshSim::restart(size_t index) {
  Slot& slot = slots_.at(index);
  if (!slot.down) return;
  slot.down = false;
  network_.set_node_up(id_of(index), true);
  boot(index);
  core::log("sim").debug("restart node={} incarnation={}", id_of(index).to_string(), slot.incarnation);
}

void MeshSim::apply(const ScenarioEvent& event) {
  ++events_applied_;
  switch (event.action) {
    case EventAction::crash:
      if (slots_[event.node].down) ++events_ignored_;
      crash(static_cast<size_t>(event.node));
      break;
    case EventAction::restart:
      if (!slots_[event.node].down) ++events_ignored_;
      restart(static_cast<size_t>(event.node));
      break;
    case EventAction::link_down:
    case EventAction::link_up:
      network_.set_link_up(id_of(event.a), id_of(event.b), event.action == EventAction::link_up);
      break;
    case EventAction::partition: {
      std::vector<std::vector<core::NodeId>> groups;
      for (const auto& group : event.groups) {
        auto& ids = groups.emplace_back();
        for (int i : group) ids.push_back(id_of(i));
      }
      network_.partition(groups);
      break;
    }
    case EventAction::heal:
      network_.heal();
      break;
  }
}

void MeshSim::schedule_ping() {
  // A simulator event rather than a node timer: the workload belongs to the
  // world, not to any node, and must survive every crash.
  simulator_.after(core::from_millis(scenario_.workload.ping_interval_ms), [this] {
    ping_once();
    schedule_ping();
  });
}

void MeshSim::ping_once() {
  auto& rng = simulator_.rng();
  size_t from = 0;
  size_t to = 0;
  if (scenario_.workload.ping_targets == Scenario::WorkloadSection::Targets::any) {
    from = rng.below(slots_.size());
    to = (from + 1 + rng.below(slots_.size() - 1)) % slots_.size();
  } else {
    const auto& [a, b] = topology_.edges[rng.below(topology_.edges.size())];
    const bool forward = rng.chance(0.5);
    from = static_cast<size_t>(forward ? a : b);
    to = static_cast<size_t>(forward ? b : a);
  }
  agent::Node* source = slots_[from].node.get();
  if (!source) {
    ++pings_.skipped;
    return;
  }
  ++pings_.sent;
  const RunningNodeScope running(static_cast<int32_t>(from));
  source->ping(id_of(to), core::Duration::zero(), [this](const agent::EchoService::Result& result) {
    switch (result.status) {
      case core::RequestStatus::ok:
        ++pings_.ok;
        pings_.rtt_ms.record(result.rtt_ms);
        break;
      case core::RequestStatus::rejected:
        ++pings_.rejected;
        break;
      case core::RequestStatus::timeout:
      case core::RequestStatus::cancelled:
        ++pings_.timeout;
        break;
    }
  });
}

void MeshSim::run_until(core::TimePoint until) { simulator_.run_until(until); }

void MeshSim::run(const std::function<void(double)>& progress) {
  const core::TimePoint end(scenario_.duration());
  for (int step = 1; step <= kProgressSteps; ++step) {
    const core::TimePoint until(scenario_.duration() * step / kProgressSteps);
    simulator_.run_until(std::min(until, end));
    if (progress) progress(static_cast<double>(step) / kProgressSteps);
  }
}

std::map<std::string, MeshSim::CounterValue> MeshSim::counters_of(size_t index) const {
  const Slot& slot = slots_[index];
  std::map<std::string, CounterValue> out = slot.retired_counters;
  if (slot.node) {
    for (const auto& row : slot.node->metrics().counters()) {
      auto [it, inserted] = out.try_emplace(row.series, CounterValue{row.name, row.labels, 0});
      it->second.value += row.value;
    }
  }
  return out;
}

std::vector<MeshSim::HistogramSnapshot> MeshSim::histograms_of(size_t index) const {
  const Slot& slot = slots_[index];
  std::vector<HistogramSnapshot> out = slot.retired_histograms;
  if (slot.node) snapshot(slot.node->metrics(), slot.incarnation, out);
  return out;
}

std::string MeshSim::counters_csv() const {
  std::string out = "node,series,name,labels,value\n";
  for (size_t i = 0; i < slots_.size(); ++i) {
    for (const auto& [series, c] : counters_of(i)) {
      out += fmt::format("n{},{},{},{},{}\n", i, csv_field(series), csv_field(c.name), csv_field(labels_text(c.labels)),
                         c.value);
    }
  }
  return out;
}

std::string MeshSim::histograms_csv() const {
  std::string out = "node,incarnation,series,name,labels,count,sum,min,max,mean,p50,p90,p99\n";
  for (size_t i = 0; i < slots_.size(); ++i) {
    for (const auto& h : histograms_of(i)) {
      out += fmt::format("n{},{},{},{},{},{},{},{},{},{},{},{},{}\n", i, h.incarnation, csv_field(h.series),
                         csv_field(h.name), csv_field(labels_text(h.labels)), h.count, h.sum, h.min, h.max, h.mean,
                         h.p50, h.p90, h.p99);
    }
  }
  return out;
}

std::string MeshSim::network_csv() const {
  std::string out = "scope,metric,value\n";
  auto rows = [&out](std::string_view scope, const NetworkStats& s) {
    out += fmt::format("{0},datagrams_sent,{1}\n{0},datagrams_delivered,{2}\n{0},datagrams_lost,{3}\n"
                       "{0},datagrams_dropped,{4}\n{0},datagrams_unroutable,{5}\n{0},datagrams_oversize,{6}\n"
                       "{0},bytes_sent,{7}\n{0},bytes_delivered,{8}\n",
                       scope, s.sent, s.delivered, s.lost, s.dropped, s.unroutable, s.oversize, s.bytes_sent,
                       s.bytes_delivered);
  };
  for (size_t c = 0; c < kChannelCount; ++c) rows(channel_name(c), network_.stats(static_cast<Channel>(c)));
  rows("total", network_.total_stats());
  out += fmt::format("workload,pings_sent,{}\nworkload,pings_ok,{}\nworkload,pings_timeout,{}\n"
                     "workload,pings_rejected,{}\nworkload,pings_skipped,{}\nworkload,rtt_ms_p50,{}\n"
                     "workload,rtt_ms_p99,{}\n",
                     pings_.sent, pings_.ok, pings_.timeout, pings_.rejected, pings_.skipped,
                     pings_.rtt_ms.quantile(0.5), pings_.rtt_ms.quantile(0.99));
  out += fmt::format("sim,virtual_time_us,{}\nsim,events_processed,{}\nsim,scenario_events_applied,{}\n"
                     "sim,scenario_events_ignored,{}\n",
                     simulator_.now().time_since_epoch().count(), simulator_.events_processed(), events_applied_,
                     events_ignored_);
  return out;
}

void MeshSim::write_csv(const std::filesystem::path& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  for (const auto& [name, text] : {std::pair{"counters.csv", counters_csv()}, std::pair{"histograms.csv", histograms_csv()},
                                   std::pair{"network.csv", network_csv()}}) {
    const auto path = dir / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
  }
}

std::map<std::string, uint64_t> MeshSim::message_totals() const {
  std::map<std::string, uint64_t> totals;
  for (size_t i = 0; i < slots_.size(); ++i) {
    for (const auto& [series, c] : counters_of(i)) {
      if (c.name != "messages_total") continue;
      totals[fmt::format("{}/{}/{}", label_of(c.labels, "layer"), label_of(c.labels, "scope"),
                         label_of(c.labels, "direction"))] += c.value;
    }
  }
  return totals;
}

std::string MeshSim::summary() const {
  const NetworkStats net = network_.total_stats();
  size_t up = 0;
  for (const auto& slot : slots_) up += slot.node ? 1 : 0;
  std::string out;
  out += fmt::format("scenario        {} (seed {})\n", scenario_.source, seed_);
  out += fmt::format("topology        {}, {} nodes, {} links, {} up at the end\n", topology_.kind, topology_.size(),
                     topology_.edges.size(), up);
  out += fmt::format("virtual time    {:.3f} s\n", core::to_seconds(simulator_.now().time_since_epoch()));
  out += fmt::format("events          {} processed, {} scenario events applied ({} had no effect)\n",
                     simulator_.events_processed(), events_applied_, events_ignored_);
  out += fmt::format("datagrams       {} sent, {} delivered, {} lost, {} dropped, {} unroutable, {} oversize\n",
                     net.sent, net.delivered, net.lost, net.dropped, net.unroutable, net.oversize);
  out += fmt::format("bytes           {} sent, {} delivered\n", net.bytes_sent, net.bytes_delivered);
  out += fmt::format("pings           {} sent, {} ok, {} timed out, {} rejected, {} skipped (source not running)",
                     pings_.sent, pings_.ok, pings_.timeout, pings_.rejected, pings_.skipped);
  if (pings_.ok > 0) {
    out += fmt::format("; rtt p50 {:.2f} ms, p99 {:.2f} ms", pings_.rtt_ms.quantile(0.5), pings_.rtt_ms.quantile(0.99));
  }
  out += "\nmessages        layer/scope/direction = count\n";
  for (const auto& [key, value] : message_totals()) out += fmt::format("  {:<28} {}\n", key, value);
  return out;
}

bool MeshSim::quorum_alive(const std::string& target) {
  std::optional<kgroup::GroupConfig> newest;
  for (size_t i = 0; i < size(); ++i) {
    agent::Node* live = node(i);
    if (live == nullptr) continue;
    kgroup::GroupReplica* replica = live->kgroups().host().latest(target);
    if (replica == nullptr) continue;
    const auto& c = replica->config();
    if (!newest || std::make_pair(c.epoch, c.generation) > std::make_pair(newest->epoch, newest->generation)) {
      newest = c;
    }
  }
  if (!newest) return true;
  size_t alive = 0;
  for (const core::NodeId member : newest->members) {
    for (size_t i = 0; i < size(); ++i) alive += id_of(i) == member && node(i) != nullptr ? 1 : 0;
  }
  return alive >= newest->members.size() / 2 + 1;
}

}  // namespace mesh::sim
