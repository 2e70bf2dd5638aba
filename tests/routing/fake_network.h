#pragma once

// Test doubles for routing: an in-memory graph of Links with per-edge up/down, enough to drive transports deterministically.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/link.h"
#include "core/message.h"
#include "core/metrics.h"
#include "proto/wire.pb.h"
#include "routing/olsr_protocol.h"
#include "tests/support/manual_env.h"

namespace mesh::routing::testing {

using test_support::ManualEnv;

// OLSR options of a test node whose main address is `id`.
inline olsr::OlsrOptions olsr_options_for(core::NodeId id) {
  olsr::OlsrOptions options;
  options.main_address = id;
  return options;
}

// An echo datagram to `dst` (ttl 0: the transport's default).
inline core::Message echo_datagram(core::NodeId dst, uint64_t msg_id, uint32_t ttl = 0) {
  core::Message m;
  m.dst = dst;
  m.kind = core::MessageKind::datagram;
  m.msg_id = msg_id;
  m.body_type = proto::Envelope::kEchoFieldNumber;
  m.ttl = ttl;
  return m;
}

// One counter series ("name{k=v,...}"), 0 if the node never counted it.
inline uint64_t counter_value(const core::Metrics& metrics, const std::string& series) {
  for (const auto& row : metrics.counters()) {
    if (row.series == series) return row.value;
  }
  return 0;
}

class FakeNetwork;

class FakeLink final : public core::Link {
 public:
  FakeLink(FakeNetwork& network, core::Ipv4Address address, size_t max_datagram)
      : network_(network), address_(address), max_datagram_(max_datagram) {}

  core::Ipv4Address local_address() const override { return address_; }
  void broadcast(core::ByteSpan datagram) override;
  void send(core::Ipv4Address neighbour, core::ByteSpan datagram) override;
  // Models the kernel's IP routes when `routes_ip` is set: reaches any link
  // connected by some path of up edges, whatever runs on the nodes between.
  bool send_routed(core::Ipv4Address destination, core::ByteSpan datagram) override;
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }
  size_t max_datagram_size() const override { return max_datagram_; }

  // Hands bytes to the receiver as if `from` had sent them.
  void inject(core::Ipv4Address from, std::vector<uint8_t> bytes) {
    if (receiver_) receiver_(from, core::ByteSpan(bytes));
  }

  bool routes_ip = false;
  size_t datagrams_routed = 0;
  size_t datagrams_sent = 0;
  std::vector<std::vector<uint8_t>> sent;  // every datagram this end sent

 private:
  FakeNetwork& network_;
  core::Ipv4Address address_;
  size_t max_datagram_;
  Receiver receiver_;
};

// Links joined by bidirectional edges that deliver after `delay`.
class FakeNetwork {
 public:
  FakeNetwork(ManualEnv& env, core::Duration delay) : env_(env), delay_(delay) {}

  FakeLink& add(core::Ipv4Address address, size_t max_datagram = 1400) {
    auto [it, inserted] = links_.try_emplace(address, nullptr);
    if (inserted) it->second = std::make_unique<FakeLink>(*this, address, max_datagram);
    return *it->second;
  }
  void connect(core::Ipv4Address a, core::Ipv4Address b) { edges_.insert(key(a, b)); }
  void disconnect(core::Ipv4Address a, core::Ipv4Address b) { edges_.erase(key(a, b)); }
  bool connected(core::Ipv4Address a, core::Ipv4Address b) const { return edges_.contains(key(a, b)); }

  std::vector<core::Ipv4Address> neighbours_of(core::Ipv4Address a) const {
    std::vector<core::Ipv4Address> out;
    for (const auto& [address, link] : links_) {
      if (address != a && connected(a, address)) out.push_back(address);
    }
    return out;
  }

  // Breadth first over the up edges.
  bool reachable(core::Ipv4Address from, core::Ipv4Address to) const {
    std::set<core::Ipv4Address> seen{from};
    std::vector<core::Ipv4Address> frontier{from};
    while (!frontier.empty()) {
      const core::Ipv4Address at = frontier.back();
      frontier.pop_back();
      if (at == to) return true;
      for (core::Ipv4Address next : neighbours_of(at)) {
        if (seen.insert(next).second) frontier.push_back(next);
      }
    }
    return false;
  }

  void transmit_routed(core::Ipv4Address from, core::Ipv4Address to, core::ByteSpan datagram) {
    if (!links_.contains(to) || !reachable(from, to)) return;
    std::vector<uint8_t> copy(datagram.begin(), datagram.end());
    env_.start_timer(delay_, [this, from, to, copy = std::move(copy)]() mutable { links_.at(to)->inject(from, std::move(copy)); });
  }

  // Loses every datagram it returns true for, before it is on the air.
  std::function<bool(core::Ipv4Address from, core::Ipv4Address to, core::ByteSpan datagram)> lose;

  void transmit(core::Ipv4Address from, core::Ipv4Address to, core::ByteSpan datagram) {
    if (!connected(from, to)) return;
    if (lose && lose(from, to, datagram)) return;
    std::vector<uint8_t> copy(datagram.begin(), datagram.end());
    env_.start_timer(delay_, [this, from, to, copy = std::move(copy)]() mutable {
      // The edge may have gone down while the datagram was in flight.
      if (!connected(from, to)) return;
      links_.at(to)->inject(from, std::move(copy));
    });
  }

 private:
  static std::pair<core::Ipv4Address, core::Ipv4Address> key(core::Ipv4Address a, core::Ipv4Address b) {
    return a < b ? std::pair{a, b} : std::pair{b, a};
  }
  ManualEnv& env_;
  core::Duration delay_;
  std::map<core::Ipv4Address, std::unique_ptr<FakeLink>> links_;
  std::set<std::pair<core::Ipv4Address, core::Ipv4Address>> edges_;
};

inline void FakeLink::broadcast(core::ByteSpan datagram) {
  ++datagrams_sent;
  sent.emplace_back(datagram.begin(), datagram.end());
  for (auto neighbour : network_.neighbours_of(address_)) network_.transmit(address_, neighbour, datagram);
}

inline void FakeLink::send(core::Ipv4Address neighbour, core::ByteSpan datagram) {
  ++datagrams_sent;
  sent.emplace_back(datagram.begin(), datagram.end());
  network_.transmit(address_, neighbour, datagram);
}

inline bool FakeLink::send_routed(core::Ipv4Address destination, core::ByteSpan datagram) {
  if (!routes_ip) return false;
  ++datagrams_routed;
  sent.emplace_back(datagram.begin(), datagram.end());
  network_.transmit_routed(address_, destination, datagram);
  return true;
}

}  // namespace mesh::routing::testing
