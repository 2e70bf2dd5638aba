#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "core/env.h"
#include "core/metrics.h"
#include "core/node_id.h"
#include "routing/olsr_protocol.h"

namespace mesh::routing {

// Which OLSR nodes run a meshagent: the input of the transport's choice
// between hop-by-hop and end-to-end delivery in a mixed mesh, where some
// nodes run only an OLSR daemon (olsrd, or meshagent with
// routing.routing_only).
//
// Algorithm: every agent floods an agent-presence message (routing/
// agent_presence.h, OLSR message type kAgentPresenceType) through OLSR every
// `interval`, valid for `hold`. Receivers record the originator as an agent
// until the validity runs out. OLSR is the carrier because it is the one
// protocol every node of a mixed mesh speaks: RFC 3626 §3.4 has every OLSR
// node forward a message of a type it does not know with the default
// forwarding algorithm, so stock olsrd relays the announcement without
// reading it, and what olsrd installs in the kernel is unchanged (it is
// neither HNA nor TC, so no route or neighbour appears or disappears). The
// alternative, learning agents from Medley's member list, cannot start: a
// Medley join must first reach an agent beyond the plain router, which
// requires knowing it is one.
//
// Correctness: a node is called an agent only on an announcement sealed with
// the mesh key for that originator (HMAC, agent_presence.h), with a counter
// above every one accepted from it before, and only while its validity
// lasts; so the set holds only key holders that announced within `hold`.
// Errors are benign in both directions: an agent not (yet) known takes the
// old hop-by-hop path, and an agent that stopped keeps its entry at most
// `hold` (traffic to or through it is then lost, as it would be on any dead
// node until OLSR drops the routes). Sans-IO: time from the Env, sends
// through OlsrProtocol.
class AgentDirectory {
 public:
  struct Options {
    std::vector<uint8_t> mesh_key;
    // Strictly above every counter this node announced before a restart.
    uint64_t first_counter = 0;
    core::Duration interval = std::chrono::seconds(5);
    core::Duration hold = std::chrono::seconds(15);
    // Also accepted on receive, never used to announce: the other key of a
    // rotation in progress (core/packet_auth.h), or empty.
    std::vector<uint8_t> accepted_mesh_key;
  };

  // Listens to `olsr`'s extension messages; `olsr` must outlive the directory.
  AgentDirectory(core::Env& env, olsr::OlsrProtocol& olsr, core::Metrics& metrics, Options options);
  ~AgentDirectory();
  AgentDirectory(const AgentDirectory&) = delete;
  AgentDirectory& operator=(const AgentDirectory&) = delete;

  // Announces this node now and every `interval`. A node that never calls it
  // (routing only) still relays others' announcements through OLSR.
  void start();
  // Announces once more now, e.g. when a neighbour appeared: the first
  // announcements of a booting node reach nobody, since OLSR processes
  // flooded messages only from symmetric neighbours.
  void announce();

  // Whether `node` (a main address) announced itself within its validity;
  // this node counts once started.
  bool is_agent(core::NodeId node) const;
  // Every node is_agent() holds for, sorted, this node excluded.
  std::vector<core::NodeId> agents() const;
  // Whether the route's next hop is an agent.
  bool next_hop_is_agent(const olsr::Route& route) const;
  // The agents whose route starts at a node that is not an agent, sorted:
  // the ones only end-to-end delivery reaches.
  std::vector<core::NodeId> agents_beyond_plain_routers() const;

  // Called when a node becomes an agent that was not one (first heard, or
  // heard again after its entry expired); from OLSR's receive, so it must not
  // call non-const OlsrProtocol methods.
  void set_agent_joined(std::function<void(core::NodeId)> callback) { joined_ = std::move(callback); }

 private:
  struct Entry {
    core::TimePoint expires;
    uint64_t counter = 0;
  };
  void on_extension(const olsr::Message& message, const olsr::OpaqueBody& body);
  void drop(std::string_view reason);

  core::Env& env_;
  olsr::OlsrProtocol& olsr_;
  core::Metrics& metrics_;
  Options options_;
  bool started_ = false;
  uint64_t next_counter_;
  // Every agent ever heard: the counter must stay refused after expiry.
  std::map<core::NodeId, Entry> agents_;
  std::function<void(core::NodeId)> joined_;
  core::ScopedTimer announce_timer_;
};

}  // namespace mesh::routing
