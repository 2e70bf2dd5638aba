#include "mutex/camera.h"

#include <algorithm>
#include <utility>

#include "core/log.h"
#include "mutex/mutex_codec.h"
#include "proto/wire.pb.h"

namespace mesh::mutex {
namespace {

constexpr uint32_t kBodyType = proto::Envelope::kMutexFieldNumber;
// A TREE echo is trimmed to fewer levels until it fits one datagram.
constexpr size_t kTreeBudgetBytes = 900;

bool is_gone(membership::MemberState state) {
  return state == membership::MemberState::failed || state == membership::MemberState::left;
}

}  // namespace

std::string_view to_string(AcquireError error) {
  switch (error) {
    case AcquireError::timeout:
      return "timeout";
    case AcquireError::bad_resource:
      return "bad_resource";
  }
  return "unknown";
}

Camera::Camera(core::Env& env, core::Messenger& messenger, membership::MemberView& members, core::Metrics& metrics,
               CameraOptions options)
    : env_(env),
      messenger_(messenger),
      members_(members),
      metrics_(metrics),
      options_(options),
      self_(members.self()),
      nonce_(static_cast<uint32_t>(env.rng().next_u64())),
      estimator_(options.network_size),
      alive_(std::make_shared<bool>(true)),
      grants_total_(metrics.counter("mutex_grants_total")),
      slow_grants_total_(metrics.counter("mutex_slow_path_grants_total")),
      timeouts_total_(metrics.counter("mutex_acquire_timeouts_total")),
      learned_total_(metrics.counter("mutex_learned_nodes_total")),
      rebuilds_total_(metrics.counter("mutex_tree_rebuilds_total")),
      bad_messages_total_(metrics.counter("mutex_bad_messages_total")),
      wait_ms_(metrics.histogram("mutex_wait_ms")) {
  messenger_.serve(kBodyType, [this, alive = alive_](const core::Message& m, core::Responder responder) {
    if (*alive) on_request_message(m, std::move(responder));
  });
  messenger_.on_datagram(kBodyType, [this, alive = alive_](const core::Message& m) {
    if (*alive) on_datagram_message(m);
  });
  listener_ = members_.add_listener([this, alive = alive_](const membership::MemberEvent& event) {
    if (*alive) on_member_event(event);
  });
}

Camera::~Camera() {
  *alive_ = false;
  members_.remove_listener(listener_);
  for (auto& [name, r] : resources_) {
    if (!r.own) continue;
    for (auto [peer, msg_id] : r.own->in_flight) messenger_.cancel(msg_id);
  }
}

// ---------------------------------------------------------------- plumbing

uint64_t Camera::send(core::NodeId dst, const proto::MutexBody& body, std::string_view type,
                      std::function<void(const core::RequestResult&)> callback) {
  metrics_.counter("mutex_messages_sent_total", {{"type", std::string(type)}}).add();
  return messenger_.request(
      dst, kBodyType, body.SerializeAsString(),
      [alive = alive_, callback = std::move(callback)](const core::RequestResult& result) {
        if (*alive && callback) callback(result);
      },
      options_.retry);
}

void Camera::later(std::function<void()> action) {
  env_.start_timer(options_.retry.max_interval, [alive = alive_, action = std::move(action)] {
    if (*alive) action();
  });
}

Camera::Resource& Camera::resource(const std::string& name) {
  auto [it, inserted] = resources_.try_emplace(name);
  if (inserted) it->second.name = name;
  return it->second;
}

Camera::Resource* Camera::find(const std::string& name) {
  auto it = resources_.find(name);
  return it == resources_.end() ? nullptr : &it->second;
}

std::vector<core::NodeId> Camera::member_list() {
  std::set<core::NodeId> ids;
  for (const auto& m : members_.live_members()) ids.insert(m.id);
  if (camera_mode()) ids.insert(learned_.begin(), learned_.end());
  ids.insert(self_);
  for (core::NodeId id : ids) observe(id);
  return {ids.begin(), ids.end()};
}

bool Camera::is_live_member(core::NodeId id) const {
  auto m = members_.member(id);
  return m && !is_gone(m->state);
}

bool Camera::is_failed(core::NodeId id) const {
  auto m = members_.member(id);
  return m && is_gone(m->state);
}

void Camera::observe(core::NodeId id) { estimator_.observe(id, env_.now()); }

size_t Camera::network_size_upper() {
  member_list();
  return estimator_.upper(env_.now());
}

void Camera::on_request_message(const core::Message& message, core::Responder responder) {
  auto decoded = decode_mutex_body(message.body);
  if (!decoded) {
    bad_messages_total_.add();
    core::log("mutex").debug("bad request src={} error={}", message.src.to_string(), to_string(decoded.error()));
    responder.reject(std::string(to_string(decoded.error())));
    return;
  }
  observe(message.src);
  const proto::MutexBody& body = *decoded;
  switch (body.kind_case()) {
    case proto::MutexBody::kRequest:
      handle_request(resource(body.request().resource()), body.request(), std::move(responder));
      return;
    case proto::MutexBody::kJoin:
      handle_join(resource(body.join().resource()), message, body.join(), std::move(responder));
      return;
    case proto::MutexBody::kTree:
      handle_tree(resource(body.tree().resource()), message.src, body.tree());
      break;
    case proto::MutexBody::kSubtreeOk:
      handle_subtree_ok(resource(body.subtree_ok().resource()), message.src, body.subtree_ok());
      break;
    case proto::MutexBody::kAdopt:
      handle_adopt(resource(body.adopt().resource()), message.src, body.adopt());
      break;
    case proto::MutexBody::kRebuild:
      handle_rebuild(resource(body.rebuild().resource()), body.rebuild());
      break;
    case proto::MutexBody::kProbe:
      break;
    default:
      bad_messages_total_.add();
      responder.reject("not_a_request");
      return;
  }
  proto::MutexBody ack;
  ack.mutable_ack()->set_nonce(nonce_);
  responder.respond(ack.SerializeAsString());
}

void Camera::on_datagram_message(const core::Message& message) {
  auto decoded = decode_mutex_body(message.body);
  if (!decoded || decoded->kind_case() != proto::MutexBody::kRelease) {
    bad_messages_total_.add();
    return;
  }
  observe(message.src);
  handle_release(resource(decoded->release().resource()), decoded->release());
}

void Camera::on_member_event(const membership::MemberEvent& event) {
  if (event.member.id == self_) return;
  observe(event.member.id);
  if (event.kind == membership::MemberEventKind::failed || event.kind == membership::MemberEventKind::left) {
    forget(event.member.id);
  } else if (event.kind == membership::MemberEventKind::joined) {
    learned_.erase(event.member.id);  // the list has it now
  }
}

// ------------------------------------------------------------- public API

AcquireHandle Camera::acquire(const std::string& name, core::Duration timeout, AcquireCallback callback) {
  const AcquireHandle handle = next_handle_++;
  if (name.empty() || name.size() > std::min(options_.max_resource_name, kMaxResourceName)) {
    callback(core::Unexpected(AcquireError::bad_resource));
    return handle;
  }
  Resource& r = resource(name);
  Waiter w;
  w.handle = handle;
  w.callback = std::move(callback);
  w.requested_at = env_.now();
  if (timeout != kNoTimeout) {
    w.timer = std::make_shared<core::ScopedTimer>(env_);
    w.timer->start(timeout, [this, name, handle] { expire(name, handle); });
  }
  r.queue.push_back(std::move(w));
  handles_.emplace(handle, name);
  start_next(r);
  return handle;
}

bool Camera::release(const std::string& name) {
  Resource* r = find(name);
  if (r == nullptr || r->state != State::held) return false;
  exit(*r, r->grant ? r->grant->fencing_token : 0);
  start_next(*r);
  return true;
}

bool Camera::cancel(AcquireHandle handle) {
  auto h = handles_.find(handle);
  if (h == handles_.end()) return false;
  Resource& r = resource(h->second);
  handles_.erase(h);
  const bool current = r.own && r.own->handle == handle;
  if (current && r.state == State::held) {
    exit(r, r.grant ? r.grant->fencing_token : 0);
  } else if (current) {
    abandon(r);
  }
  std::erase_if(r.queue, [&](const Waiter& w) { return w.handle == handle; });
  start_next(r);
  return true;
}

std::optional<Grant> Camera::held(const std::string& name) const {
  auto it = resources_.find(name);
  if (it == resources_.end() || it->second.state != State::held) return std::nullopt;
  return it->second.grant;
}

std::vector<Camera::ResourceStatus> Camera::status() const {
  std::vector<ResourceStatus> out;
  for (const auto& [name, r] : resources_) {
    ResourceStatus s;
    s.resource = name;
    s.phase = r.state == State::held ? Phase::held : r.state == State::wait ? Phase::waiting : Phase::idle;
    if (r.own) {
      s.request = r.own->id;
      s.slow_path = r.own->slow;
      s.awaiting_oks = r.own->pending.size();
    }
    if (r.grant) s.fencing_token = r.grant->fencing_token;
    // A waiting acquire is the queue's head; a granted one has left it.
    s.queued_locally = r.queue.size() - (r.own && r.state == State::wait ? 1 : 0);
    s.deferred = r.deferred.size();
    s.recently_oked = r.recently_oked.size();
    s.high_water = r.high_water;
    out.push_back(std::move(s));
  }
  return out;
}

void Camera::start_next(Resource& r) {
  if (r.own || r.queue.empty()) return;
  enter(r);
}

void Camera::finish_waiter(Resource& r, AcquireHandle handle, const AcquireResult& result) {
  auto it = std::find_if(r.queue.begin(), r.queue.end(), [&](const Waiter& w) { return w.handle == handle; });
  if (it == r.queue.end()) return;
  AcquireCallback callback = std::move(it->callback);
  r.queue.erase(it);
  if (!result) handles_.erase(handle);
  if (callback) callback(result);
}

void Camera::expire(const std::string& name, AcquireHandle handle) {
  Resource* r = find(name);
  if (r == nullptr) return;
  if (r->own && r->own->handle == handle) {
    if (r->state == State::held) return;  // granted meanwhile
    abandon(*r);
  }
  timeouts_total_.add();
  finish_waiter(*r, handle, core::Unexpected(AcquireError::timeout));
  start_next(*r);
}

// -------------------------------------------------------------- Algorithm 2

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
  const std::vector<core::NodeId> list = member_list();
  const size_t upper = estimator_.upper(env_.now());
  own.slow = camera_mode() && options_.slow_path_enabled && list.size() * 2 <= upper;
  r.own = std::move(own);
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
  send(peer, probe, "probe", [this, peer, ask_again](const core::RequestResult& probed) {
    note_ack(peer, probed);
    if (probed.status == core::RequestStatus::ok || is_live_member(peer)) {
      ask_again();
      return;
    }
    core::log("mutex").debug("peer unresponsive and unlisted, forgotten node={} peer={}", self_.to_string(),
                             peer.to_string());
    forget(peer);
  });
}

void Camera::on_ok(Resource& r, core::NodeId peer, const proto::MutexOk& ok) {
  note_life(peer, ok.sender_nonce());
  Own& own = *r.own;
  own.ok_nonce[peer] = ok.sender_nonce();
  core::log("mutex").debug("ok node={} resource={} from={} request={} recently_oked={} pending={}", self_.to_string(),
                           r.name, peer.to_string(), own.id.to_string(), ok.recently_oked_size(), own.pending.size());
  own.pending.erase(peer);
  r.high_water = std::max(r.high_water, ok.high_water());
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
      if (!is_live_member(n) && learned_.insert(n).second) learned_total_.add();
      ask(r, n);
    }
  }
  check_enter(r);
}

void Camera::check_enter(Resource& r) {
  if (r.state != State::wait || !r.own || !r.own->pending.empty()) return;
  if (r.own->slow) {
    auto t = r.trees.find(self_);
    if (t == r.trees.end() || !t->second.subtree_ok()) return;
    r.high_water = std::max(r.high_water, t->second.high_water);
  }
  r.state = State::held;
  const uint64_t token = r.high_water + 1;
  r.high_water = token;
  Grant g;
  g.resource = r.name;
  g.request = r.own->id;
  g.fencing_token = token;
  g.slow_path = r.own->slow;
  g.requested_at = r.own->requested_at;
  g.granted_at = env_.now();
  r.grant = g;
  grants_total_.add();
  if (g.slow_path) slow_grants_total_.add();
  wait_ms_.record(core::to_millis(g.granted_at - g.requested_at));
  core::log("mutex").debug("granted node={} resource={} request={} token={}", self_.to_string(), r.name,
                           g.request.to_string(), token);
  // Dropping the waiter also cancels its timeout.
  finish_waiter(r, r.own->handle, g);
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
    metrics_.counter("mutex_messages_sent_total", {{"type", "release"}}).add();
    messenger_.flood(kBodyType, body.SerializeAsString());
  }
  answer_deferred(r);
}

void Camera::abandon(Resource& r) {
  // Never having entered, this node may OK everything it held back at once.
  exit(r, 0);
}

proto::MutexBody Camera::make_ok(Resource& r, const RequestId& id) {
  proto::MutexBody body;
  auto* ok = body.mutable_ok();
  ok->set_resource(r.name);
  *ok->mutable_id() = to_proto(id);
  ok->set_high_water(r.high_water);
  ok->set_sender_nonce(nonce_);
  if (camera_mode()) {
    for (const auto& [node, rid] : r.recently_oked) {
      if (node == id.node) continue;
      ok->add_recently_oked(node.value());
      ok->add_recently_oked_nonces(rid.nonce);
    }
  }
  return body;
}

bool Camera::admit(Resource& r, const RequestId& id, uint64_t high_water) {
  observe(id.node);
  note_life(id.node, id.nonce);
  r.max_seq = std::max(r.max_seq, id.seq);
  r.high_water = std::max(r.high_water, high_water);
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
  if (!is_live_member(id.node) && learned_.insert(id.node).second) learned_total_.add();
  // A peer that OKed us in an earlier life has forgotten it: ask it again.
  if (r.state == State::wait && r.own) {
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
    it = r.deferred.insert_or_assign(id.node, Deferred{id, std::nullopt, false}).first;
  }
  return it->second;
}

void Camera::handle_request(Resource& r, const proto::MutexRequest& req, core::Responder responder) {
  const RequestId id = from_proto(req.id());
  const bool current = admit(r, id, req.high_water());
  core::log("mutex").debug("request node={} resource={} request={} current={} state={} own={}", self_.to_string(),
                           r.name, id.to_string(), current, static_cast<int>(r.state),
                           r.own ? r.own->id.to_string() : "-");
  auto ro = r.recently_oked.find(id.node);
  if (!current || (ro != r.recently_oked.end() && ro->second == id)) {
    responder.respond(make_ok(r, id).SerializeAsString());
    return;
  }
  if (must_defer(r, id)) {
    // A repeat of a deferred request (a fresh msg_id after a timeout) takes
    // the place of the earlier responder, whose caller gave up on it. A slow
    // requester also asks directly the nodes that learn of it late: one
    // entry then owes the OK both ways.
    Deferred& d = defer(r, id);
    d.responder = std::move(responder);
    return;
  }
  auto older = r.deferred.find(id.node);
  if (older != r.deferred.end() && older->second.id != id) r.deferred.erase(older);
  metrics_.counter("mutex_messages_sent_total", {{"type", "ok"}}).add();
  responder.respond(make_ok(r, id).SerializeAsString());
  r.recently_oked[id.node] = id;
}

void Camera::handle_release(Resource& r, const proto::MutexRelease& release) {
  const RequestId id = from_proto(release.id());
  note_life(id.node, id.nonce);
  core::log("mutex").debug("release node={} resource={} request={} token={}", self_.to_string(), r.name, id.to_string(),
                           release.token());
  r.high_water = std::max(r.high_water, release.token());
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
    if (d.responder) {
      metrics_.counter("mutex_messages_sent_total", {{"type", "ok"}}).add();
      d.responder->respond(make_ok(r, d.id).SerializeAsString());
    }
    if (!d.slow) continue;
    auto t = r.trees.find(node);
    if (t != r.trees.end() && t->second.id == d.id) {
      t->second.own_ok = true;
      progress_tree(r, node);
    }
  }
}

void Camera::note_ack(core::NodeId node, const core::RequestResult& result) {
  if (result.status != core::RequestStatus::ok) return;
  auto decoded = decode_mutex_body(result.response.body);
  if (decoded && decoded->kind_case() == proto::MutexBody::kAck) note_life(node, decoded->ack().nonce());
}

void Camera::note_life(core::NodeId node, uint32_t nonce) {
  if (node == self_) return;
  auto [it, inserted] = lives_.try_emplace(node, nonce);
  if (inserted || it->second == nonce) return;
  it->second = nonce;
  core::log("mutex").debug("new life node={} of={}", self_.to_string(), node.to_string());
  for (auto& [name, r] : resources_) {
    // The old life's place in every tree is gone; the new one joins anew.
    std::vector<core::NodeId> roots;
    for (const auto& [root, tree] : r.trees) {
      if (root != node) roots.push_back(root);
    }
    for (core::NodeId root : roots) tree_member_failed(r, root, node);
    if (r.own && r.own->pending.count(node)) r.high_water += options_.failed_holder_token_gap;
    auto ro = r.recently_oked.find(node);
    if (ro != r.recently_oked.end() && ro->second.nonce != nonce) {
      r.recently_oked.erase(ro);
      r.high_water += options_.failed_holder_token_gap;
    }
    auto d = r.deferred.find(node);
    if (d != r.deferred.end() && d->second.id.nonce != nonce) r.deferred.erase(d);
    auto t = r.trees.find(node);
    if (t != r.trees.end() && t->second.id.nonce != nonce) r.trees.erase(t);
  }
}

void Camera::forget(core::NodeId id) {
  if (id == self_) return;
  core::log("mutex").debug("forget node={} gone={}", self_.to_string(), id.to_string());
  learned_.erase(id);
  for (auto& [name, r] : resources_) {
    if (r.recently_oked.erase(id)) {
      // It may have entered with a token nobody else saw.
      r.high_water += options_.failed_holder_token_gap;
    }
    r.deferred.erase(id);
    r.trees.erase(id);
    if (r.own) {
      auto f = r.own->in_flight.find(id);
      if (f != r.own->in_flight.end()) {
        messenger_.cancel(f->second);
        r.own->in_flight.erase(f);
      }
      // A node we were still waiting for may have been holding the
      // resource, with a token we never saw.
      if (r.own->pending.erase(id)) r.high_water += options_.failed_holder_token_gap;
      r.own->asked.erase(id);
      r.own->ok_nonce.erase(id);
    }
    std::vector<core::NodeId> roots;
    for (const auto& [root, tree] : r.trees) roots.push_back(root);
    for (core::NodeId root : roots) tree_member_failed(r, root, id);
    // A list that shrank to half the mesh while we wait no longer promises
    // a common friend: switch to the slow path (camera.md §4.4). The OKs
    // already collected stay; the tree only adds more.
    if (r.state == State::wait && r.own && !r.own->slow && camera_mode() && options_.slow_path_enabled &&
        member_list().size() * 2 <= estimator_.upper(env_.now())) {
      core::log("mutex").debug("switch to slow path node={} resource={}", self_.to_string(), r.name);
      r.own->slow = true;
      start_tree(r);
    }
    check_enter(r);
  }
}

// -------------------------------------------------------------- Algorithm 3

void Camera::start_tree(Resource& r) {
  SlowTree tree;
  tree.id = r.own->id;
  tree.attempt = 1;
  tree.is_root = true;
  tree.own_ok = true;
  r.trees[self_] = std::move(tree);
  send_joins(r, r.trees[self_]);
}

void Camera::send_joins(Resource& r, SlowTree& tree) {
  std::vector<core::NodeId> ancestors{self_};
  for (core::NodeId a : tree.ancestors) {
    if (ancestors.size() >= tree_depth()) break;
    ancestors.push_back(a);
  }
  for (core::NodeId peer : member_list()) {
    if (peer == self_ || peer == tree.id.node || tree.joined_from.count(peer) || is_failed(peer)) continue;
    if (std::find(tree.ancestors.begin(), tree.ancestors.end(), peer) != tree.ancestors.end()) continue;
    if (tree.joins_pending.count(peer) || tree.children.count(peer)) continue;
    tree.joins_pending.insert(peer);
    proto::MutexBody body;
    auto* join = body.mutable_join();
    join->set_resource(r.name);
    *join->mutable_id() = to_proto(tree.id);
    join->set_attempt(tree.attempt);
    for (core::NodeId a : ancestors) join->add_ancestors(a.value());
    join->set_high_water(r.high_water);
    join->set_sender_nonce(nonce_);
    send(peer, body, "join",
         [this, name = r.name, root = tree.id.node, id = tree.id, attempt = tree.attempt,
          peer](const core::RequestResult& result) { on_join_result(name, root, id, attempt, peer, result); });
  }
}

SlowTree* Camera::tree_for(Resource& r, core::NodeId root, const proto::MutexRequestId& id, uint32_t attempt) {
  auto t = r.trees.find(root);
  if (t == r.trees.end() || t->second.id != from_proto(id) || t->second.attempt != attempt) return nullptr;
  return &t->second;
}

void Camera::on_join_result(const std::string& name, core::NodeId root, const RequestId& id, uint32_t attempt,
                            core::NodeId peer, const core::RequestResult& result) {
  Resource* r = find(name);
  if (r == nullptr) return;
  SlowTree* tree = tree_for(*r, root, to_proto(id), attempt);
  if (tree == nullptr || !tree->joins_pending.count(peer)) return;
  if (result.status == core::RequestStatus::ok) {
    auto decoded = decode_mutex_body(result.response.body);
    if (decoded && decoded->kind_case() == proto::MutexBody::kJoinReply) {
      note_life(peer, decoded->join_reply().nonce());
      tree = tree_for(*r, root, to_proto(id), attempt);
      if (tree == nullptr || !tree->joins_pending.count(peer)) return;
      tree->joins_pending.erase(peer);
      if (decoded->join_reply().accepted()) {
        tree->children.insert(peer);
        tree->awaiting.insert(peer);
        if (!is_live_member(peer)) watch_child(name, root, id, attempt, peer);
      }
      progress_tree(*r, root);
      return;
    }
    bad_messages_total_.add();
  }
  if (is_live_member(peer)) {
    later([this, name, root, id, attempt, peer] {
      Resource* r2 = find(name);
      if (r2 == nullptr) return;
      SlowTree* t2 = tree_for(*r2, root, to_proto(id), attempt);
      if (t2 == nullptr || !t2->joins_pending.count(peer)) return;
      t2->joins_pending.erase(peer);
      send_joins(*r2, *t2);
    });
  } else {
    // It may have joined and built a subtree we cannot see: forgetting it
    // makes the tree rebuild.
    forget(peer);
  }
}

void Camera::handle_join(Resource& r, const core::Message& message, const proto::MutexJoin& join,
                         core::Responder responder) {
  const RequestId id = from_proto(join.id());
  const core::NodeId root = id.node;
  // Before any edge to the sender is made: an edge to an earlier life of it
  // is broken now.
  note_life(message.src, join.sender_nonce());
  auto reply = [this, &responder](bool accepted) {
    proto::MutexBody body;
    body.mutable_join_reply()->set_accepted(accepted);
    body.mutable_join_reply()->set_nonce(nonce_);
    responder.respond(body.SerializeAsString());
  };
  if (root == self_) {
    reply(false);
    return;
  }
  auto t = r.trees.find(root);
  if (t != r.trees.end()) {
    SlowTree& tree = t->second;
    const bool older = id.nonce == tree.id.nonce && id < tree.id;
    if (older || (id == tree.id && join.attempt() < tree.attempt)) {
      reply(false);
      return;
    }
    if (id == tree.id && join.attempt() == tree.attempt) {
      if (tree.parent() == message.src) {
        reply(true);  // our parent asking again under a new msg_id
      } else {
        tree.joined_from.insert(message.src);
        reply(false);
      }
      return;
    }
  }
  // A new request, or a rebuilt tree for the same one.
  const bool same_request = t != r.trees.end() && t->second.id == id;
  bool own_ok = same_request && t->second.own_ok;
  if (!same_request) {
    if (!admit(r, id, join.high_water())) {
      reply(false);
      return;
    }
    auto ro = r.recently_oked.find(root);
    if (ro != r.recently_oked.end() && ro->second == id) {
      own_ok = true;
    } else if (must_defer(r, id)) {
      defer(r, id).slow = true;
    } else {
      auto older = r.deferred.find(root);
      if (older != r.deferred.end() && older->second.id != id) r.deferred.erase(older);
      r.recently_oked[root] = id;
      own_ok = true;
    }
  }
  SlowTree tree;
  tree.id = id;
  tree.attempt = join.attempt();
  tree.own_ok = own_ok;
  for (uint32_t raw : join.ancestors()) {
    if (tree.ancestors.size() >= tree_depth()) break;
    const core::NodeId a(raw);
    if (a.is_unspecified() || a == self_) continue;
    tree.ancestors.push_back(a);
  }
  if (tree.ancestors.empty() || tree.ancestors.front() != message.src) {
    tree.ancestors.insert(tree.ancestors.begin(), message.src);
  }
  tree.joined_from.insert(message.src);
  core::log("mutex").debug("joined node={} resource={} request={} attempt={} parent={} own_ok={}", self_.to_string(),
                           r.name, id.to_string(), join.attempt(), message.src.to_string(), own_ok);
  r.trees[root] = std::move(tree);
  reply(true);
  send_joins(r, r.trees[root]);
  progress_tree(r, root);
}

void Camera::handle_tree(Resource& r, core::NodeId from, const proto::MutexTree& msg) {
  SlowTree* tree = tree_for(r, from_proto(msg.id()).node, msg.id(), msg.attempt());
  if (tree == nullptr) return;
  std::vector<TreeEdge> edges;
  for (const auto& e : msg.edges()) edges.push_back({core::NodeId(e.child()), core::NodeId(e.parent())});
  const uint32_t depth = std::min(msg.depth(), tree_depth());
  tree->reported[from] = SlowTree::Report{limit_depth(from, edges, depth), depth};
  progress_tree(r, tree->id.node);
}

void Camera::handle_subtree_ok(Resource& r, core::NodeId from, const proto::MutexSubtreeOk& msg) {
  SlowTree* tree = tree_for(r, from_proto(msg.id()).node, msg.id(), msg.attempt());
  if (tree == nullptr) return;
  tree->ok_from.insert(from);
  tree->high_water = std::max(tree->high_water, msg.high_water());
  r.high_water = std::max(r.high_water, msg.high_water());
  progress_tree(r, tree->id.node);
}

void Camera::handle_adopt(Resource& r, core::NodeId from, const proto::MutexAdopt& msg) {
  note_life(from, msg.sender_nonce());
  SlowTree* tree = tree_for(r, from_proto(msg.id()).node, msg.id(), msg.attempt());
  if (tree == nullptr || tree->is_root) return;
  auto it = std::find(tree->ancestors.begin(), tree->ancestors.end(), from);
  if (it != tree->ancestors.end()) {
    tree->ancestors.erase(tree->ancestors.begin(), it);
  } else {
    tree->ancestors.insert(tree->ancestors.begin(), from);
  }
  tree->tree_sent = false;
  tree->ok_sent = false;
  progress_tree(r, tree->id.node);
}

void Camera::handle_rebuild(Resource& r, const proto::MutexRebuild& msg) {
  if (from_proto(msg.id()).node != self_) return;
  SlowTree* tree = tree_for(r, self_, msg.id(), msg.attempt());
  if (tree == nullptr || !r.own || !r.own->slow) return;
  rebuild_tree(r);
}

void Camera::rebuild_tree(Resource& r) {
  rebuilds_total_.add();
  core::log("mutex").debug("rebuild node={} resource={}", self_.to_string(), r.name);
  SlowTree& old = r.trees[self_];
  SlowTree tree;
  tree.id = old.id;
  tree.attempt = old.attempt + 1;
  tree.is_root = true;
  tree.own_ok = true;
  old = std::move(tree);
  send_joins(r, old);
  check_enter(r);
}

void Camera::request_rebuild(Resource& r, const SlowTree& tree) {
  if (tree.is_root) {
    rebuild_tree(r);
    return;
  }
  proto::MutexBody body;
  auto* rb = body.mutable_rebuild();
  rb->set_resource(r.name);
  *rb->mutable_id() = to_proto(tree.id);
  rb->set_attempt(tree.attempt);
  send(tree.id.node, body, "rebuild", nullptr);
}

void Camera::progress_tree(Resource& r, core::NodeId root) {
  auto t = r.trees.find(root);
  if (t == r.trees.end()) return;
  SlowTree& tree = t->second;
  if (tree.is_root) {
    check_enter(r);
    return;
  }
  const auto parent = tree.parent();
  if (!parent) return;
  auto on_result = [this, name = r.name, root, id = tree.id, attempt = tree.attempt, to = *parent](
                       bool tree_msg, const core::RequestResult& result) {
    note_ack(to, result);
    if (result.status == core::RequestStatus::ok) return;
    Resource* r2 = find(name);
    if (r2 == nullptr) return;
    SlowTree* t2 = tree_for(*r2, root, to_proto(id), attempt);
    if (t2 == nullptr || t2->parent() != to) return;
    if (is_live_member(to)) {
      (tree_msg ? t2->tree_sent : t2->ok_sent) = false;
      later([this, name, root] {
        Resource* r3 = find(name);
        if (r3 != nullptr) progress_tree(*r3, root);
      });
    } else {
      forget(to);
    }
  };
  if (!tree.tree_sent && tree.construction_done()) {
    tree.tree_sent = true;
    proto::MutexBody body;
    auto* msg = body.mutable_tree();
    msg->set_resource(r.name);
    *msg->mutable_id() = to_proto(tree.id);
    msg->set_attempt(tree.attempt);
    for (uint32_t depth = tree_depth(); depth > 0; --depth) {
      msg->clear_edges();
      for (const auto& e : tree.subtree_edges(self_, depth)) {
        auto* edge = msg->add_edges();
        edge->set_child(e.child.value());
        edge->set_parent(e.parent.value());
      }
      msg->set_depth(depth);
      if (body.ByteSizeLong() <= kTreeBudgetBytes) break;
    }
    if (body.ByteSizeLong() > kTreeBudgetBytes) {
      // Too wide to describe: the parent cannot adopt our children and
      // rebuilds the tree if we fail.
      msg->clear_edges();
      msg->set_depth(0);
    }
    send(*parent, body, "tree", [on_result](const core::RequestResult& res) { on_result(true, res); });
  }
  if (!tree.ok_sent && tree.subtree_ok()) {
    tree.ok_sent = true;
    core::log("mutex").debug("subtree ok node={} resource={} request={} parent={}", self_.to_string(), r.name,
                             tree.id.to_string(), parent->to_string());
    proto::MutexBody body;
    auto* msg = body.mutable_subtree_ok();
    msg->set_resource(r.name);
    *msg->mutable_id() = to_proto(tree.id);
    msg->set_attempt(tree.attempt);
    msg->set_high_water(std::max(tree.high_water, r.high_water));
    send(*parent, body, "subtree_ok", [on_result](const core::RequestResult& res) { on_result(false, res); });
  }
}

void Camera::watch_child(const std::string& name, core::NodeId root, const RequestId& id, uint32_t attempt,
                         core::NodeId child) {
  env_.start_timer(options_.probe_interval, [this, alive = alive_, name, root, id, attempt, child] {
    if (!*alive) return;
    Resource* r = find(name);
    if (r == nullptr) return;
    SlowTree* tree = tree_for(*r, root, to_proto(id), attempt);
    if (tree == nullptr || !tree->awaiting.count(child) || tree->ok_from.count(child)) return;
    proto::MutexBody probe;
    probe.mutable_probe();
    send(child, probe, "probe", [this, name, root, id, attempt, child](const core::RequestResult& result) {
      // A new life of the child answering means the old one died.
      note_ack(child, result);
      if (result.status == core::RequestStatus::ok || is_live_member(child)) {
        watch_child(name, root, id, attempt, child);
        return;
      }
      forget(child);
    });
  });
}

void Camera::tree_member_failed(Resource& r, core::NodeId root, core::NodeId failed) {
  auto t = r.trees.find(root);
  if (t == r.trees.end()) return;
  SlowTree& tree = t->second;
  core::log("mutex").debug("tree member failed node={} resource={} request={} failed={}", self_.to_string(), r.name,
                           tree.id.to_string(), failed.to_string());
  tree.joined_from.erase(failed);
  const bool was_ancestor = std::find(tree.ancestors.begin(), tree.ancestors.end(), failed) != tree.ancestors.end();
  if (was_ancestor) {
    tree.drop_ancestor(failed);
    if (tree.ancestors.empty()) {
      // Every ancestor we knew is gone: only a new tree reaches us again.
      request_rebuild(r, tree);
      return;
    }
    progress_tree(r, root);
    return;
  }
  auto adopted = tree.adopt(failed, [this](core::NodeId n) { return is_failed(n); });
  if (!adopted) {
    request_rebuild(r, tree);
    return;
  }
  for (core::NodeId a : *adopted) {
    if (!is_live_member(a)) watch_child(r.name, root, tree.id, tree.attempt, a);
    proto::MutexBody body;
    auto* msg = body.mutable_adopt();
    msg->set_resource(r.name);
    *msg->mutable_id() = to_proto(tree.id);
    msg->set_attempt(tree.attempt);
    msg->set_sender_nonce(nonce_);
    send(a, body, "adopt", nullptr);
  }
  if (tree.is_root) {
    check_enter(r);
  } else {
    progress_tree(r, root);
  }
}

}  // namespace mesh::mutex
