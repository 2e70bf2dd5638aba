#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/env.h"
#include "core/link.h"
#include "core/metrics.h"
#include "core/transport.h"

namespace mesh::routing {

// The agent's Transport until OLSR provides routes: delivers Envelopes to
// one-hop neighbours only, and finds those neighbours with a periodic beacon
// on the (authenticated) agent link. A neighbour not heard for its hold time
// is forgotten. Messages to anyone else report no_route.
class OneHopTransport final : public core::Transport {
 public:
  struct Options {
    std::string name;  // carried in beacons, shown by meshctl status
    core::Duration beacon_interval = std::chrono::seconds(1);
    core::Duration neighbour_hold = std::chrono::milliseconds(3500);
    uint32_t default_ttl = 32;
  };
  struct Neighbour {
    core::NodeId id;
    std::string name;
    core::TimePoint last_heard;
  };

  // `link` must name peers by NodeId, i.e. be a core::AuthenticatedLink.
  OneHopTransport(core::Env& env, core::Link& link, core::Metrics& metrics, Options options);

  // Sends the first beacon now and then every beacon_interval (jittered).
  void start();

  core::NodeId self() const override { return link_.local_address(); }
  core::SendStatus send(core::Message message) override;
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }

  // Sorted by id.
  std::vector<Neighbour> neighbours() const;
  bool is_neighbour(core::NodeId id) const;
  std::string status_line() const;

 private:
  void receive(core::Ipv4Address from, core::ByteSpan datagram);
  void send_beacon();
  void expire_neighbours();

  core::Env& env_;
  core::Link& link_;
  core::Metrics& metrics_;
  Options options_;
  Receiver receiver_;
  std::unordered_map<core::NodeId, Neighbour> neighbours_;
  core::ScopedTimer beacon_timer_;
};

}  // namespace mesh::routing
