// Camera's fast path (camera.md Algorithm 2): Ricart-Agrawala over the member
// list, recently-OKed sets carried in every OK, requesters learned from OK
// sets and from incoming requests, RELEASE flooded on exit.
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "mutex/camera.h"
#include "mutex/mutex_codec.h"

namespace mesh::mutex {

void Camera::enter(Resource& r) {
  const Waiter& head = r.queue.front();
  r.state = State::wait;
  // Camera increments max_seq_seen (Algorithm 2 line 13); RA only reads it.
  uint64_t seq = r.max_seq + 1;
  if (camera_mode()) r.max_seq = seq;
  Own own;
  own.id = RequestId{seq, self_, nonce_};
  own.handle = head.handle;
  own.requested_at = head.requested_at;
  r.own = std::move(own);
  dispatch(r);
}

void Camera::dispatch(Resource& r) {
  const std::vector<core::NodeId> list = member_list();
  const size_t upper = estimator_.upper(env_.now());
  // Alone in the list, or in a minority of it: right after a start that is
  // membership not having joined us (and the others) yet, not a mesh of one
  // or a broken Mutual Friend Property. Asking nobody would grant at once,
  // and a tree over lists still in pieces spans only our piece (Theorem 1
  // needs a connected membership graph), so wait for the list to grow.
  const core::TimePoint now = env_.now();
  const core::TimePoint grace_end = booted_at_ + options_.boot_grace;
  const bool minority = camera_mode() && options_.slow_path_enabled && list.size() * 2 <= upper;
  // Without an N.upper floor, a list still growing is a corner of the mesh,
  // not a majority of it (boot_settle).
  const core::TimePoint settled_at = list_grew_at_ + options_.boot_settle;
  const bool settling = camera_mode() && options_.network_size.floor == 0 && now < settled_at;
  if ((list.size() <= 1 || minority || settling) && now < grace_end) {
    r.own->parked = true;
    const core::TimePoint wake = (list.size() <= 1 || minority) ? grace_end : std::min(grace_end, settled_at);
    core::log("mutex").debug("parked resource={} list={} n_upper={} settling={}", r.name, list.size(), upper, settling);
    env_.start_timer(wake - now, [this, alive = alive_] {
      if (*alive) resume_parked();
    });
    return;
  }
  r.own->parked = false;
  r.own->slow = camera_mode() && options_.slow_path_enabled && list.size() * 2 <= upper;
  if (r.own->slow) {
    core::log("mutex").debug("slow path resource={} list={} n_upper={}", r.name, list.size(), upper);
    start_tree(r);
  } else {
    for (core::NodeId peer : list) {
      if (peer != self_) ask(r, peer);
    }
  }
  check_enter(r);
}

void Camera::resume_parked() {
  for (auto& [name, r] : resources_) {
    if (r.state == State::wait && r.own && r.own->parked) dispatch(r);
  }
}

void Camera::ask(Resource& r, core::NodeId peer) {
  Own& own = *r.own;
  core::log("mutex").debug("ask node={} resource={} request={} peer={}", self_.to_string(), r.name, own.id.to_string(),
                           peer.to_string());
  own.asked.insert(peer);
  own.pending.insert(peer);
  proto::MutexBody body;
  auto* req = body.mutable_request();
  req->set_resource(r.name);
  *req->mutable_id() = to_proto(own.id);
  req->set_path(own.slow ? proto::MUTEX_PATH_SLOW : proto::MUTEX_PATH_FAST);
  req->set_high_water(r.high_water);
  own.in_flight[peer] =
      send(peer, body, "request", [this, name = r.name, id = own.id, peer](const core::RequestResult& result) {
        on_request_result(name, id, peer, result);
      });
}

void Camera::on_request_result(const std::string& name, const RequestId& id, core::NodeId peer,
                               const core::RequestResult& result) {
  Resource* r = find(name);
  if (r == nullptr || !r->own || r->own->id != id) return;
  r->own->in_flight.erase(peer);
  if (!r->own->pending.count(peer)) return;
  if (result.status == core::RequestStatus::ok) {
    heard(peer);
    auto decoded = decode_mutex_body(result.response.body);
    if (decoded && decoded->kind_case() == proto::MutexBody::kOk && from_proto(decoded->ok().id()) == id) {
      on_ok(*r, peer, decoded->ok());
      return;
    }
    bad_messages_total_.add();
  }
  // No OK yet: the peer may be gone or may be holding the resource. A
  // listed peer is waited for until the failure detector says otherwise
  // (camera.md §4.4); one known only from requests and OK sets is probed,
  // and forgotten only if the probe goes unanswered too.
  auto ask_again = [this, name, id, peer] {
    Resource* r2 = find(name);
    if (r2 != nullptr && r2->own && r2->own->id == id && r2->own->pending.count(peer) &&
        !r2->own->in_flight.count(peer)) {
      ask(*r2, peer);
    }
  };
  if (is_live_member(peer)) {
    later(ask_again);
    return;
  }
  proto::MutexBody probe;
  probe.mutable_probe();
  send(peer, probe, "probe", [this, peer, ask_again, since = env_.now()](const core::RequestResult& probed) {
    note_ack(peer, probed);
    if (probed.status == core::RequestStatus::ok || is_live_member(peer)) {
      ask_again();
      return;
    }
    core::log("mutex").debug("peer unresponsive and unlisted node={} peer={}", self_.to_string(), peer.to_string());
    if (!forget_if_silent(peer, since)) ask_again();
  });
}

void Camera::on_ok(Resource& r, core::NodeId peer, const proto::MutexOk& ok) {
  note_life(peer, ok.sender_nonce());
  Own& own = *r.own;
  own.ok_nonce[peer] = ok.sender_nonce();
  core::log("mutex").debug("ok node={} resource={} from={} request={} recently_oked={} pending={}", self_.to_string(),
                           r.name, peer.to_string(), own.id.to_string(), ok.recently_oked_size(), own.pending.size());
  own.pending.erase(peer);
  if (ok.members_known() > own.most_members_reported) {
    own.most_members_reported = ok.members_known();
    own.reported_by = peer;
  }
  raise_high_water(r, ok.high_water());
  if (camera_mode() && !own.slow) {
    for (int k = 0; k < ok.recently_oked_size(); ++k) {
      const core::NodeId n(ok.recently_oked(k));
      // Which life of n the friend OKed: if n answers us from another one,
      // that life died unreleased (note_life).
      if (k < ok.recently_oked_nonces_size() && n != self_) lives_.try_emplace(n, ok.recently_oked_nonces(k));
      // Even a node our list says failed: the friend heard from it later,
      // maybe from a new life of it.
      if (n.is_unspecified() || n == self_ || own.asked.count(n)) continue;
      observe(n);
      if (!is_live_member(n) && learned_.insert(n).second) {
        learned_total_.add();
        list_grew_at_ = env_.now();
      }
      ask(r, n);
    }
  }
  check_enter(r);
}

void Camera::check_enter(Resource& r) {
  if (r.state != State::wait || !r.own || r.own->parked || !r.own->pending.empty()) return;
  if (!r.own->slow && behind_a_peer(r)) return;
  if (r.own->slow) {
    auto t = r.trees.find(self_);
    if (t == r.trees.end() || !t->second.subtree_ok()) return;
    // Theorem 9 assumes the tree spans the mesh; in a partitioned one it spans
    // an island, and two islands would both grant. Only a majority of the
    // nodes known lately can be one island at a time.
    const size_t known = network_size_known();
    if (2 * static_cast<size_t>(t->second.covered()) <= known) {
      await_majority_tree(r, t->second, known);
      return;
    }
    raise_high_water(r, t->second.high_water);
  }
  r.state = State::held;
  const uint64_t token = r.high_water + 1;
  // Persisted before anyone sees it: a restart resumes above it.
  raise_high_water(r, token);
  Grant g;
  g.resource = r.name;
  g.request = r.own->id;
  g.fencing_token = token;
  g.slow_path = r.own->slow;
  g.requested_at = r.own->requested_at;
  g.granted_at = env_.now();
  r.grant = g;
  r.lapsed = false;
  grants_total_.add();
  if (g.slow_path) slow_grants_total_.add();
  wait_ms_.record(core::to_millis(g.granted_at - g.requested_at));
  core::log("mutex").debug("granted node={} resource={} request={} token={}", self_.to_string(), r.name,
                           g.request.to_string(), token);
  start_lease(r.name, token);
  // Dropping the waiter also cancels its timeout.
  finish_waiter(r, r.own->handle, g);
}

bool Camera::behind_a_peer(Resource& r) {
  Own& own = *r.own;
  const core::TimePoint now = env_.now();
  const core::TimePoint grace_end = booted_at_ + options_.boot_grace;
  if (!camera_mode() || options_.network_size.floor != 0 || options_.boot_settle == core::Duration::zero() ||
      now >= grace_end) {
    return false;
  }
  const size_t listed = member_list().size();
  if (own.most_members_reported <= listed) return false;
  // A peer that OKed us lists more nodes than we do: our list is a corner
  // of the booting mesh, and another corner may be granting too. Pull the
  // peer's list; the nodes it adds are asked as they join (on_member_event),
  // and their OKs bring us back here.
  if (!own.catching_up) {
    own.catching_up = true;
    core::log("mutex").debug("behind a peer resource={} listed={} peer={} lists={}", r.name, listed,
                             own.reported_by.to_string(), own.most_members_reported);
    members_.catch_up_from(own.reported_by);
    env_.start_timer(grace_end - now, [this, alive = alive_, name = r.name, id = own.id] {
      if (!*alive) return;
      Resource* again = find(name);
      if (again != nullptr && again->own && again->own->id == id) check_enter(*again);
    });
  }
  return true;
}

void Camera::exit(Resource& r, uint64_t token) {
  if (!r.own) return;
  const RequestId id = r.own->id;
  core::log("mutex").debug("exit node={} resource={} request={} token={} deferred={}", self_.to_string(), r.name,
                           id.to_string(), token, r.deferred.size());
  handles_.erase(r.own->handle);
  for (auto [peer, msg_id] : r.own->in_flight) messenger_.cancel(msg_id);
  if (r.own->slow) r.trees.erase(self_);
  r.own.reset();
  r.grant.reset();
  r.state = State::none;
  if (camera_mode()) {
    proto::MutexBody body;
    auto* rel = body.mutable_release();
    rel->set_resource(r.name);
    *rel->mutable_id() = to_proto(id);
    rel->set_token(token);
    flood(body, "release");
  }
  answer_deferred(r);
}

void Camera::abandon(Resource& r) {
  // Never having entered, this node may OK everything it held back at once.
  exit(r, 0);
}

proto::MutexBody Camera::make_ok(Resource& r, const RequestId& id, bool with_set) {
  proto::MutexBody body;
  auto* ok = body.mutable_ok();
  ok->set_resource(r.name);
  *ok->mutable_id() = to_proto(id);
  ok->set_high_water(r.high_water);
  ok->set_sender_nonce(nonce_);
  ok->set_members_known(static_cast<uint32_t>(member_list().size()));
  if (camera_mode() && with_set) {
    for (const auto& [node, rid] : r.recently_oked) {
      if (node == id.node) continue;
      ok->add_recently_oked(node.value());
      ok->add_recently_oked_nonces(rid.nonce);
    }
  }
  return body;
}

void Camera::answer(Resource& r, const RequestId& id, bool relayed, core::Responder responder) {
  // The relay that asks us needs only our decision: the requester's pairs
  // with the nodes we OKed are settled by those nodes' common friends
  // (Case 4 uses only the friend's own OK), and a set here could make our
  // OK relay in turn, back to the friend.
  const std::string bytes = make_ok(r, id, !relayed).SerializeAsString();
  if (bytes.size() > options_.max_ok_bytes) {
    start_relay(r, id, std::move(responder));
    return;
  }
  send_ok(responder, bytes);
}

void Camera::send_ok(core::Responder& responder, const std::string& bytes) {
  ok_bytes_.record(static_cast<double>(bytes.size()));
  metrics_.counter("mutex_messages_sent_total", {{"type", "ok"}}).add();
  responder.respond(bytes);
}

bool Camera::admit(Resource& r, const RequestId& id, uint64_t high_water) {
  observe(id.node);
  note_life(id.node, id.nonce);
  r.max_seq = std::max(r.max_seq, id.seq);
  raise_high_water(r, high_water);
  // A node asks for one resource one request at a time, so anything older
  // than what we already have from the same life of it is finished. Across
  // lives (another nonce) sequence numbers say nothing: a restarted node
  // counts from 1 again.
  auto obsolete = [&id](const RequestId& known) { return known.nonce == id.nonce && id < known; };
  auto ro = r.recently_oked.find(id.node);
  if (ro != r.recently_oked.end() && obsolete(ro->second)) return false;
  auto d = r.deferred.find(id.node);
  if (d != r.deferred.end() && obsolete(d->second.id)) return false;
  if (!camera_mode() || id.node == self_) return true;
  // Asymmetric ignorance: a requester we did not ask gets our request too,
  // even one our list says failed (it just spoke, so a new life of it).
  if (!is_live_member(id.node) && learned_.insert(id.node).second) {
    learned_total_.add();
    list_grew_at_ = env_.now();
    // No longer alone: parked requests go out (after this one is handled).
    env_.start_timer(core::Duration::zero(), [this, alive = alive_] {
      if (*alive) resume_parked();
    });
  }
  // A peer that OKed us in an earlier life has forgotten it: ask it again.
  if (r.state == State::wait && r.own && !r.own->parked) {
    auto ok = r.own->ok_nonce.find(id.node);
    const bool restarted = ok != r.own->ok_nonce.end() && ok->second != id.nonce;
    if (restarted) r.own->ok_nonce.erase(ok);
    if (!r.own->asked.count(id.node) || restarted) ask(r, id.node);
  }
  return true;
}

bool Camera::must_defer(const Resource& r, const RequestId& id) const {
  return r.state == State::held || (r.state == State::wait && r.own && r.own->id < id);
}

Camera::Deferred& Camera::defer(Resource& r, const RequestId& id) {
  auto it = r.deferred.find(id.node);
  if (it == r.deferred.end() || it->second.id != id) {
    it = r.deferred.insert_or_assign(id.node, Deferred{id, std::nullopt, false, {}}).first;
  }
  return it->second;
}

void Camera::handle_request(Resource& r, const proto::MutexRequest& req, core::NodeId from, core::Responder responder) {
  const RequestId id = from_proto(req.id());
  const bool relayed = from != id.node;
  const bool current = admit(r, id, req.high_water());
  core::log("mutex").debug("request node={} resource={} request={} current={} state={} own={}", self_.to_string(),
                           r.name, id.to_string(), current, static_cast<int>(r.state),
                           r.own ? r.own->id.to_string() : "-");
  if (!current) {
    // The requester has moved on from this request: the OK only ends its
    // retransmissions, so it needs no set.
    send_ok(responder, make_ok(r, id, false).SerializeAsString());
    return;
  }
  auto relay = r.relays.find(id.node);
  if (!relayed && relay != r.relays.end() && relay->second.id == id) {
    // A repeat while we still collect OKs on its behalf.
    relay->second.responder = std::move(responder);
    return;
  }
  auto ro = r.recently_oked.find(id.node);
  const bool already_oked = ro != r.recently_oked.end() && ro->second == id;
  if (!already_oked && must_defer(r, id)) {
    // A repeat of a deferred request (a fresh msg_id after a timeout) takes
    // the place of the earlier responder, whose caller gave up on it. A slow
    // requester also asks directly the nodes that learn of it late: one
    // entry then owes the OK both ways.
    Deferred& d = defer(r, id);
    if (relayed) {
      d.relay_responders.insert_or_assign(from, std::move(responder));
    } else {
      d.responder = std::move(responder);
    }
    return;
  }
  auto older = r.deferred.find(id.node);
  if (older != r.deferred.end() && older->second.id != id) r.deferred.erase(older);
  r.recently_oked[id.node] = id;
  answer(r, id, relayed, std::move(responder));
}

void Camera::handle_release(Resource& r, const proto::MutexRelease& release) {
  const RequestId id = from_proto(release.id());
  note_life(id.node, id.nonce);
  core::log("mutex").debug("release node={} resource={} request={} token={}", self_.to_string(), r.name, id.to_string(),
                           release.token());
  raise_high_water(r, release.token());
  auto ro = r.recently_oked.find(id.node);
  if (ro != r.recently_oked.end() && ro->second == id) r.recently_oked.erase(ro);
  auto d = r.deferred.find(id.node);
  if (d != r.deferred.end() && d->second.id == id) r.deferred.erase(d);
  auto t = r.trees.find(id.node);
  if (t != r.trees.end() && id.node != self_ && t->second.id == id) r.trees.erase(t);
}

void Camera::answer_deferred(Resource& r) {
  std::map<core::NodeId, Deferred> deferred;
  deferred.swap(r.deferred);
  for (auto& [node, d] : deferred) {
    r.recently_oked[node] = d.id;
    if (d.responder) answer(r, d.id, false, std::move(*d.responder));
    for (auto& [relayer, responder] : d.relay_responders) answer(r, d.id, true, std::move(responder));
    if (!d.slow) continue;
    auto t = r.trees.find(node);
    if (t != r.trees.end() && t->second.id == d.id) {
      t->second.own_ok = true;
      progress_tree(r, node);
    }
  }
}

}  // namespace mesh::mutex
