#include "agent/node.h"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>

#include "core/log.h"

namespace mesh::agent {
namespace {

constexpr std::string_view kBootKey = "auth/boot";
// The boot count fills the high half of the authentication counter, so each
// boot may send 2^32 datagrams before its counters could reach the next
// boot's.
constexpr unsigned kBootCounterShift = 32;

uint64_t read_boot_count(const core::Storage& storage) {
  const std::optional<std::string> text = storage.get(kBootKey);
  if (!text) return 0;
  uint64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || text->empty()) {
    throw std::runtime_error(fmt::format(
        "storage key {} holds '{}', not a decimal boot count; the authentication counter cannot be "
        "restored safely (fix or remove the key)",
        kBootKey, *text));
  }
  return value;
}

}  // namespace

Node::Node(const NodeConfig& config, NodeContext context)
    : config_(config), context_(context), started_at_(context.env.now()) {
  const uint64_t previous = read_boot_count(context_.storage);
  if ((previous + 1) >> (64 - kBootCounterShift) != 0) {
    throw std::runtime_error(fmt::format("storage key {} holds boot count {}, too large for the "
                                         "authentication counter",
                                         kBootKey, previous));
  }
  boot_count_ = previous + 1;
  if (!context_.storage.put(kBootKey, std::to_string(boot_count_))) {
    throw std::runtime_error(fmt::format("cannot persist boot count {} to storage key {}; refusing to start, "
                                         "since authentication counters could repeat after a restart",
                                         boot_count_, kBootKey));
  }

  auth_ = std::make_unique<core::PacketAuth>(config_.mesh_key, config_.id, boot_count_ << kBootCounterShift,
                                             config_.replay_window);
  link_ = std::make_unique<core::AuthenticatedLink>(context_.agent_link, *auth_, config_.id, metrics_);
  routing::olsr::OlsrOptions olsr_options = config_.routing;
  olsr_options.main_address = config_.id;
  olsr_ = std::make_unique<routing::olsr::OlsrProtocol>(context_.env, context_.olsr_link, metrics_, olsr_options);
  olsr_->set_routes_changed([this] {
    const std::vector<routing::olsr::Route> routes = olsr_->routes();
    for (const auto& listener : routes_listeners_) listener(routes);
  });
  transport_ = std::make_unique<routing::OlsrTransport>(context_.env, *link_, *olsr_, metrics_, config_.transport);
  messenger_ = std::make_unique<core::Messenger>(context_.env, *transport_, metrics_, config_.messaging);
  echo_ = std::make_unique<EchoService>(context_.env, *messenger_, [this](core::NodeId destination) -> std::string {
    if (destination == config_.id || olsr_->route_to(destination)) return {};
    return fmt::format("no route to {}: OLSR has not learned one (yet), or the node is unreachable",
                       destination.to_string());
  });
  core::log("agent").info("node created id={} name={} boot={}", config_.id.to_string(), config_.name, boot_count_);
}

Node::~Node() = default;

void Node::start() {
  started_at_ = context_.env.now();
  olsr_->start();
}

core::Duration Node::uptime() const { return context_.env.now() - started_at_; }

std::vector<Node::LayerLine> Node::status() const {
  std::vector<LayerLine> lines;
  lines.push_back({"core", fmt::format("boot {}, auth counter {}, {} auth drops", boot_count_,
                                       auth_->next_counter(), metrics_.total("auth_dropped_total"))});
  size_t symmetric = 0;
  for (const auto& neighbour : olsr_->neighbours()) {
    symmetric += neighbour.status == routing::olsr::LinkStatus::symmetric ? 1 : 0;
  }
  lines.push_back({"routing", fmt::format("olsr: {} symmetric neighbours, {} MPRs, {} MPR selectors, {} routes, {} "
                                          "topology entries, {} forwarded, {} dropped",
                                          symmetric, olsr_->mprs().size(), olsr_->mpr_selectors().size(),
                                          olsr_->routes().size(), olsr_->topology().size(),
                                          metrics_.total("transport_forwarded_total"),
                                          metrics_.total("transport_dropped_total"))});
  lines.push_back({"messenger", fmt::format("{} pending requests, {} retransmits, {} timeouts",
                                            messenger_->pending_requests(), metrics_.total("request_retransmits_total"),
                                            metrics_.total("request_timeouts_total"))});
  return lines;
}

void Node::ping(core::NodeId destination, core::Duration timeout, EchoService::Callback callback) {
  if (timeout <= core::Duration::zero()) timeout = config_.ping_timeout;
  echo_->ping(destination, timeout, std::move(callback));
}

}  // namespace mesh::agent
