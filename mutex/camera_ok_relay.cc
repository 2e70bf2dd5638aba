// One datagram per OK. An OK carries every request its sender OKed and has
// not seen released (Algorithm 2); with many concurrent requesters that set
// outgrows a datagram. Dropping entries is unsafe: Case 4 of Theorem 5 needs
// each one, whatever its priority (the one left out could be the holder).
// Withholding the OK until the set shrinks is safe but deadlocks when the
// withheld request has priority over the set's requesters, which then wait
// for it.
//
// So the OKing node p_k relays: it sends the requester's own REQUEST (same
// id) to every node of the set, as the requester p_i would have done on
// learning them, and answers p_i with an OK without the set once all of them
// have OKed the request. A relayed node answers p_k without its own set.
//
// Safety: each relayed node p_j decides on Req_i exactly as if p_i had asked
// it (the decision depends on Req_i and p_j's state, not on who carried it),
// learns p_i from it (asymmetric ignorance: a waiting p_j sends p_i its own
// request) and records p_i in its recently-OKed set. So when p_i gets the
// OK, every node p_k OKed before has OKed Req_i under the fast-path rule,
// which is all Case 4 of Theorem 5 takes from the common friend p_k. Nodes
// p_k OKs while the relay runs learn p_i from those OKs: p_i entered p_k's
// set when the relay began. What p_i would have learned from the relayed
// nodes' own sets is not needed: each such pair has its own common friend.
// Liveness: a relayed node defers Req_i only as it would defer p_i itself
// (it holds, or its own request has priority), so the relay adds no wait
// the requester would not have had; a silent node is waited for while
// membership lists it and dropped otherwise, as for the requester's own
// REQUESTs.
#include <utility>

#include "core/log.h"
#include "mutex/camera.h"
#include "mutex/mutex_codec.h"

namespace mesh::mutex {

void Camera::start_relay(Resource& r, const RequestId& id, core::Responder responder) {
  relays_total_.add();
  core::log("mutex").debug("relay node={} resource={} request={} set={}", self_.to_string(), r.name, id.to_string(),
                           r.recently_oked.size());
  auto previous = r.relays.find(id.node);
  if (previous != r.relays.end()) {
    for (auto [peer, msg_id] : previous->second.in_flight) messenger_.cancel(msg_id);
    r.relays.erase(previous);
  }
  Relay& relay = r.relays[id.node];
  relay.id = id;
  relay.responder = std::move(responder);
  std::vector<core::NodeId> set;
  for (const auto& [node, rid] : r.recently_oked) {
    if (node != id.node && node != self_) set.push_back(node);
  }
  for (core::NodeId node : set) relay_ask(r, relay, node);
  finish_relay_if_done(r, id.node);
}

void Camera::relay_ask(Resource& r, Relay& relay, core::NodeId peer) {
  relay.asked.insert(peer);
  relay.pending.insert(peer);
  proto::MutexBody body;
  auto* req = body.mutable_request();
  req->set_resource(r.name);
  *req->mutable_id() = to_proto(relay.id);
  req->set_path(proto::MUTEX_PATH_FAST);
  req->set_high_water(r.high_water);
  relay.in_flight[peer] =
      send(peer, body, "relay", [this, name = r.name, id = relay.id, peer](const core::RequestResult& result) {
        on_relay_result(name, id, peer, result);
      });
}

void Camera::on_relay_result(const std::string& name, const RequestId& id, core::NodeId peer,
                             const core::RequestResult& result) {
  Resource* r = find(name);
  if (r == nullptr) return;
  auto it = r->relays.find(id.node);
  if (it == r->relays.end() || it->second.id != id) return;
  Relay& relay = it->second;
  relay.in_flight.erase(peer);
  core::log("mutex").debug("relay result node={} resource={} request={} peer={} status={} pending={}",
                           self_.to_string(), name, id.to_string(), peer.to_string(), static_cast<int>(result.status),
                           relay.pending.count(peer));
  if (!relay.pending.count(peer)) return;
  if (result.status == core::RequestStatus::ok) {
    heard(peer);
    auto decoded = decode_mutex_body(result.response.body);
    if (decoded && decoded->kind_case() == proto::MutexBody::kOk && from_proto(decoded->ok().id()) == id) {
      raise_high_water(*r, decoded->ok().high_water());
      relay.pending.erase(peer);
      finish_relay_if_done(*r, id.node);
      return;
    }
    bad_messages_total_.add();
  }
  if (is_live_member(peer)) {
    later([this, name, id, peer] {
      Resource* r2 = find(name);
      if (r2 == nullptr) return;
      auto again = r2->relays.find(id.node);
      if (again == r2->relays.end() || again->second.id != id || !again->second.pending.count(peer) ||
          again->second.in_flight.count(peer)) {
        return;
      }
      relay_ask(*r2, again->second, peer);
    });
    return;
  }
  // Unlisted and silent for a whole retry deadline: gone, as forget() would
  // conclude for the requester's own REQUEST.
  relay.pending.erase(peer);
  finish_relay_if_done(*r, id.node);
}

void Camera::finish_relay_if_done(Resource& r, core::NodeId requester) {
  auto it = r.relays.find(requester);
  if (it == r.relays.end() || !it->second.pending.empty()) return;
  Relay relay = std::move(it->second);
  r.relays.erase(it);
  for (auto [peer, msg_id] : relay.in_flight) messenger_.cancel(msg_id);
  core::log("mutex").debug("relay done node={} resource={} request={} asked={}", self_.to_string(), r.name,
                           relay.id.to_string(), relay.asked.size());
  // The set's nodes have OKed the request themselves.
  if (relay.responder) send_ok(*relay.responder, make_ok(r, relay.id, false).SerializeAsString());
}

void Camera::drop_from_relays(Resource& r, core::NodeId id) {
  auto own = r.relays.find(id);
  if (own != r.relays.end()) {
    for (auto [peer, msg_id] : own->second.in_flight) messenger_.cancel(msg_id);
    r.relays.erase(own);
  }
  std::vector<core::NodeId> done;
  for (auto& [requester, relay] : r.relays) {
    if (!relay.pending.erase(id)) continue;
    auto f = relay.in_flight.find(id);
    if (f != relay.in_flight.end()) {
      messenger_.cancel(f->second);
      relay.in_flight.erase(f);
    }
    done.push_back(requester);
  }
  for (core::NodeId requester : done) finish_relay_if_done(r, requester);
}

}  // namespace mesh::mutex
