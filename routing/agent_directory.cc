#include "routing/agent_directory.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/log.h"
#include "routing/agent_presence.h"
#include "routing/olsr_vtime.h"

namespace mesh::routing {

AgentDirectory::AgentDirectory(core::Env& env, olsr::OlsrProtocol& olsr, core::Metrics& metrics, Options options)
    : env_(env),
      olsr_(olsr),
      metrics_(metrics),
      options_(std::move(options)),
      next_counter_(options_.first_counter),
      announce_timer_(env) {
  olsr_.set_extension_listener(
      [this](const olsr::Message& message, const olsr::OpaqueBody& body) { on_extension(message, body); });
}

AgentDirectory::~AgentDirectory() { olsr_.set_extension_listener({}); }

void AgentDirectory::start() {
  started_ = true;
  announce();
  announce_timer_.start_periodic(options_.interval, [this] { announce(); });
}

void AgentDirectory::announce() {
  if (!started_) return;
  const core::NodeId self = olsr_.main_address();
  // It may wait for this node's next OLSR packet as long as that keeps two
  // announcements closer than their validity (OLSR caps the wait at the next
  // HELLO anyway).
  const core::Duration max_wait = std::max(options_.hold - options_.interval, core::Duration::zero()) / 2;
  olsr_.originate(kAgentPresenceType, encode_agent_presence(options_.mesh_key, self, AgentPresence{next_counter_++}),
                  options_.hold, max_wait);
}

void AgentDirectory::on_extension(const olsr::Message& message, const olsr::OpaqueBody& body) {
  if (message.type != kAgentPresenceType) return;
  auto presence = decode_agent_presence(options_.mesh_key, message.originator, body.bytes);
  if (!presence && presence.error() == PresenceError::bad_tag && !options_.accepted_mesh_key.empty()) {
    presence = decode_agent_presence(options_.accepted_mesh_key, message.originator, body.bytes);
  }
  if (!presence) {
    drop(to_string(presence.error()));
    core::log("routing").debug("agent presence dropped originator={} reason={}", message.originator.to_string(),
                               to_string(presence.error()));
    return;
  }
  const core::TimePoint now = env_.now();
  auto [it, fresh] = agents_.try_emplace(message.originator);
  Entry& entry = it->second;
  if (!fresh && presence->counter <= entry.counter) {
    drop("stale");
    return;
  }
  const bool joined = fresh || entry.expires <= now;
  entry.counter = presence->counter;
  entry.expires = now + olsr::decode_vtime(message.vtime);
  if (joined) {
    metrics_.counter("agent_presence_joined_total").add();
    core::log("routing").debug("agent learned node={}", message.originator.to_string());
    if (joined_) joined_(message.originator);
  }
}

void AgentDirectory::drop(std::string_view reason) {
  metrics_.counter("agent_presence_dropped_total", "reason", reason).add();
}

bool AgentDirectory::is_agent(core::NodeId node) const {
  if (node == olsr_.main_address()) return started_;
  auto it = agents_.find(node);
  return it != agents_.end() && it->second.expires > env_.now();
}

std::vector<core::NodeId> AgentDirectory::agents() const {
  const core::TimePoint now = env_.now();
  std::vector<core::NodeId> out;
  for (const auto& [node, entry] : agents_) {
    if (entry.expires > now && node != olsr_.main_address()) out.push_back(node);
  }
  return out;
}

bool AgentDirectory::next_hop_is_agent(const olsr::Route& route) const {
  return is_agent(olsr_.main_of(route.next_hop));
}

std::vector<core::NodeId> AgentDirectory::agents_beyond_plain_routers() const {
  std::vector<core::NodeId> out;
  for (core::NodeId agent : agents()) {
    const auto route = olsr_.route_to(agent);
    if (route && !next_hop_is_agent(*route)) out.push_back(agent);
  }
  return out;
}

}  // namespace mesh::routing
