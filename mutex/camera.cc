// Camera's plumbing: construction, message dispatch, the public API with the
// local serialization of acquires, membership events, and what a node does
// when another one fails or restarts. Algorithm 2 is in camera_fast_path.cc,
// Algorithm 3 in camera_slow_path.cc, persistence in camera_store.cc.
#include "mutex/camera.h"

#include <algorithm>
#include <utility>

#include "core/log.h"
#include "mutex/mutex_codec.h"
#include "proto/wire.pb.h"

namespace mesh::mutex {
namespace {

constexpr uint32_t kBodyType = proto::Envelope::kMutexFieldNumber;

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
               core::Storage& storage, CameraOptions options)
    : env_(env),
      messenger_(messenger),
      members_(members),
      metrics_(metrics),
      options_(options),
      self_(members.self()),
      nonce_(static_cast<uint32_t>(env.rng().next_u64())),
      estimator_(options.network_size),
      store_(storage, metrics, options.token_block, options.max_known_nodes),
      booted_at_(env.now()),
      list_grew_at_(env.now()),
      alive_(std::make_shared<bool>(true)),
      grants_total_(metrics.counter("mutex_grants_total")),
      slow_grants_total_(metrics.counter("mutex_slow_path_grants_total")),
      timeouts_total_(metrics.counter("mutex_acquire_timeouts_total")),
      learned_total_(metrics.counter("mutex_learned_nodes_total")),
      rebuilds_total_(metrics.counter("mutex_tree_rebuilds_total")),
      minority_trees_total_(metrics.counter("mutex_minority_trees_total")),
      bad_messages_total_(metrics.counter("mutex_bad_messages_total")),
      relays_total_(metrics.counter("mutex_ok_relays_total")),
      lapsed_total_(metrics.counter("mutex_grants_lapsed_total")),
      ok_bytes_(metrics.histogram("mutex_ok_bytes")),
      wait_ms_(metrics.histogram("mutex_wait_ms")) {
  // Nodes an earlier life knew: asked like nodes learned from OK sets until
  // membership lists them or they prove silent, and counted in N.upper.
  if (camera_mode()) {
    for (core::NodeId id : store_.nodes()) {
      if (id == self_) continue;
      learned_.insert(id);
      estimator_.observe(id, env_.now());
    }
  }
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
    for (const auto& [node, relay] : r.relays) {
      for (auto [peer, msg_id] : relay.in_flight) messenger_.cancel(msg_id);
    }
    if (!r.own) continue;
    for (auto [peer, msg_id] : r.own->in_flight) messenger_.cancel(msg_id);
  }
}

// ---------------------------------------------------------------- plumbing

uint64_t Camera::send(core::NodeId dst, const proto::MutexBody& body, std::string_view type,
                      std::function<void(const core::RequestResult&)> callback) {
  return send(dst, body, type, std::move(callback), options_.retry);
}

uint64_t Camera::send(core::NodeId dst, const proto::MutexBody& body, std::string_view type,
                      std::function<void(const core::RequestResult&)> callback, const core::RetryPolicy& retry) {
  metrics_.counter("mutex_messages_sent_total", {{"type", std::string(type)}}).add();
  return messenger_.request(
      dst, kBodyType, body.SerializeAsString(),
      [this, alive = alive_, dst, sent_at = env_.now(),
       callback = std::move(callback)](const core::RequestResult& result) {
        if (!*alive) return;
        if (result.status == core::RequestStatus::ok) note_answered(dst, sent_at);
        if (callback) callback(result);
      },
      retry);
}

void Camera::later(std::function<void()> action) {
  env_.start_timer(options_.retry.max_interval, [alive = alive_, action = std::move(action)] {
    if (*alive) action();
  });
}

void Camera::flood(const proto::MutexBody& body, std::string_view type) {
  metrics_.counter("mutex_messages_sent_total", {{"type", std::string(type)}}).add();
  messenger_.flood(kBodyType, body.SerializeAsString());
}

Camera::Resource& Camera::resource(const std::string& name) {
  auto [it, inserted] = resources_.try_emplace(name);
  if (inserted) {
    it->second.name = name;
    // An unreadable reservation: jump as after losing a holder.
    it->second.high_water = store_.restore_high_water(name, options_.failed_holder_token_gap);
  }
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

void Camera::observe(core::NodeId id) {
  estimator_.observe(id, env_.now());
  if (id != self_) store_.remember(id);
}

void Camera::raise_high_water(Resource& r, uint64_t mark) {
  if (mark <= r.high_water) return;
  r.high_water = mark;
  store_.cover(r.name, mark);
}

size_t Camera::network_size_upper() {
  member_list();
  return estimator_.upper(env_.now());
}

size_t Camera::network_size_known() {
  member_list();
  return estimator_.known(env_.now());
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
  heard(message.src);
  const proto::MutexBody& body = *decoded;
  switch (body.kind_case()) {
    case proto::MutexBody::kRequest:
      handle_request(resource(body.request().resource()), body.request(), message.src, std::move(responder));
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
  heard(message.src);
  handle_release(resource(decoded->release().resource()), decoded->release());
}

void Camera::on_member_event(const membership::MemberEvent& event) {
  if (event.member.id == self_) return;
  observe(event.member.id);
  if (event.kind == membership::MemberEventKind::failed || event.kind == membership::MemberEventKind::left) {
    // A node that left for good is not asked again after our next restart;
    // a failed one may come back.
    if (event.kind == membership::MemberEventKind::left) store_.forget(event.member.id);
    for (auto& [name, r] : resources_) {
      switch_if_list_shrank(r);
      check_enter(r);
    }
    confirm_gone(event.member.id);
  } else if (event.kind == membership::MemberEventKind::joined) {
    learned_.erase(event.member.id);  // the list has it now
    list_grew_at_ = env_.now();
    resume_parked();
    // A request already out must be OKed by every node listed when it
    // enters (Ricart-Agrawala over the list), not only by those listed when
    // it was sent: ask the newcomer too.
    for (auto& [name, r] : resources_) {
      if (r.state == State::wait && r.own && !r.own->parked && !r.own->slow && camera_mode() &&
          !r.own->asked.count(event.member.id)) {
        ask(r, event.member.id);
      }
    }
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
  if (!lease_holds(it->second)) return std::nullopt;
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
    s.lapsed = r.state == State::held && !lease_holds(r);
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

void Camera::note_ack(core::NodeId node, const core::RequestResult& result) {
  if (result.status != core::RequestStatus::ok) return;
  heard(node);
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
    if (r.own && r.own->pending.count(node)) jump_high_water(r);
    auto ro = r.recently_oked.find(node);
    if (ro != r.recently_oked.end() && ro->second.nonce != nonce) {
      r.recently_oked.erase(ro);
      jump_high_water(r);
    }
    auto relay = r.relays.find(node);
    if (relay != r.relays.end() && relay->second.id.nonce != nonce) {
      for (auto [peer, msg_id] : relay->second.in_flight) messenger_.cancel(msg_id);
      r.relays.erase(relay);
    }
    auto d = r.deferred.find(node);
    if (d != r.deferred.end() && d->second.id.nonce != nonce) r.deferred.erase(d);
    auto t = r.trees.find(node);
    if (t != r.trees.end() && t->second.id.nonce != nonce) r.trees.erase(t);
  }
}

void Camera::confirm_gone(core::NodeId id) {
  // Membership's verdict may concern an earlier life of a node that has
  // restarted and already spoken to us (the failure is detected only after
  // the suspicion timeout), or be a false positive. Dropping the wait for
  // its OK, or its place in our recently-OKed set, would then let two nodes
  // in. One probe tells: an answer from the life we know keeps everything,
  // an answer from a new life drops what the old one left (note_life), and
  // silence confirms the failure. Nothing to lose: no probe (at scale every
  // node would probe every dead node for a whole retry deadline).
  if (!has_state_with(id)) {
    forget(id);
    return;
  }
  proto::MutexBody probe;
  probe.mutable_probe();
  send(id, probe, "probe", [this, id, since = env_.now()](const core::RequestResult& result) {
    if (result.status == core::RequestStatus::ok) {
      note_ack(id, result);
      recheck_gone_later(id);
      return;
    }
    if (!forget_if_silent(id, since)) recheck_gone_later(id);
  });
}

void Camera::recheck_gone_later(core::NodeId id) {
  // The same life answered a `left` or `failed` verdict: a leaving node
  // answers for its leave grace, and a false verdict can come true without
  // another event. Until it is silent, what we keep of it (an OK whose
  // RELEASE may have been lost) would never be forgotten, nor our mark
  // jumped; so probe again while the verdict stands and the state remains.
  if (!is_failed(id) || !has_state_with(id) || !rechecking_gone_.insert(id).second) return;
  env_.start_timer(options_.probe_interval, [this, alive = alive_, id] {
    if (!*alive) return;
    rechecking_gone_.erase(id);
    if (is_failed(id)) confirm_gone(id);
  });
}

bool Camera::has_state_with(core::NodeId id) const {
  for (const auto& [name, r] : resources_) {
    if (r.recently_oked.count(id) || r.deferred.count(id) || r.trees.count(id) || r.relays.count(id)) return true;
    if (r.own && (r.own->pending.count(id) || r.own->in_flight.count(id))) return true;
    for (const auto& [root, tree] : r.trees) {
      if (tree.children.count(id) || tree.awaiting.count(id) || tree.joins_pending.count(id) ||
          std::find(tree.ancestors.begin(), tree.ancestors.end(), id) != tree.ancestors.end()) {
        return true;
      }
    }
    for (const auto& [requester, relay] : r.relays) {
      if (relay.pending.count(id)) return true;
    }
  }
  return false;
}

bool Camera::forget_if_silent(core::NodeId id, core::TimePoint since) {
  auto h = last_heard_.find(id);
  if (h != last_heard_.end() && h->second >= since) {
    core::log("mutex").debug("not forgotten, spoke since node={} peer={}", self_.to_string(), id.to_string());
    return false;
  }
  forget(id);
  return true;
}

void Camera::forget(core::NodeId id) {
  if (id == self_) return;
  core::log("mutex").debug("forget node={} gone={}", self_.to_string(), id.to_string());
  learned_.erase(id);
  for (auto& [name, r] : resources_) {
    if (r.recently_oked.erase(id)) {
      // It may have entered with a token nobody else saw.
      jump_high_water(r);
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
      if (r.own->pending.erase(id)) jump_high_water(r);
      r.own->asked.erase(id);
      r.own->ok_nonce.erase(id);
    }
    std::vector<core::NodeId> roots;
    for (const auto& [root, tree] : r.trees) roots.push_back(root);
    for (core::NodeId root : roots) tree_member_failed(r, root, id);
    drop_from_relays(r, id);
    switch_if_list_shrank(r);
    check_enter(r);
  }
}

void Camera::switch_if_list_shrank(Resource& r) {
  // A list that shrank to half the mesh while we wait no longer promises a
  // common friend: switch to the slow path (camera.md §4.4). The OKs
  // already collected stay; the tree only adds more, so this is safe on a
  // membership verdict alone, before any probe confirms it.
  if (r.state == State::wait && r.own && !r.own->slow && !r.own->parked && camera_mode() &&
      options_.slow_path_enabled && member_list().size() * 2 <= estimator_.upper(env_.now())) {
    core::log("mutex").debug("switch to slow path node={} resource={}", self_.to_string(), r.name);
    r.own->slow = true;
    start_tree(r);
  }
}

}  // namespace mesh::mutex
