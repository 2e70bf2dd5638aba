// Camera's slow path (camera.md §4.4, Algorithm 3): a spanning tree that
// carries the request to every node with the JOINs and aggregates the OKs
// back up, subtree topology kept f + 1 levels deep so a failed node's parent
// adopts its children.
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "mutex/camera.h"
#include "mutex/mutex_codec.h"

namespace mesh::mutex {
namespace {

// A TREE echo is trimmed to fewer levels until it fits one datagram.
constexpr size_t kTreeBudgetBytes = 900;

}  // namespace

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
  // A node we OKed and never saw released may hold, or have held, a token
  // above every mark in the tree: its RELEASE may have been lost, and a
  // node that left (or was declared failed) may still answer the probe that
  // would otherwise forget it and jump our mark. The fast path asks such a
  // node through our OK set even when the list says it is gone; here it
  // joins the tree the same way: its subtree OK brings its mark, or its
  // silence makes us forget it and jump (on_join_result).
  std::set<core::NodeId> peers;
  for (core::NodeId peer : member_list()) {
    if (!is_failed(peer)) peers.insert(peer);
  }
  for (const auto& [node, oked] : r.recently_oked) peers.insert(node);
  for (core::NodeId peer : peers) {
    if (peer == self_ || peer == tree.id.node || tree.joined_from.count(peer)) continue;
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
    heard(peer);
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
  // Not listed and silent for the JOIN's whole retry deadline: it may have
  // joined and built a subtree we cannot see, and forgetting it makes the
  // tree rebuild. Otherwise (listed, or it spoke meanwhile) ask again.
  if (!is_live_member(peer) && forget_if_silent(peer, env_.now() - options_.retry.deadline)) return;
  later([this, name, root, id, attempt, peer] {
    Resource* r2 = find(name);
    if (r2 == nullptr) return;
    SlowTree* t2 = tree_for(*r2, root, to_proto(id), attempt);
    if (t2 == nullptr || !t2->joins_pending.count(peer)) return;
    t2->joins_pending.erase(peer);
    send_joins(*r2, *t2);
    // It may not be asked again (it joined meanwhile, from us or another
    // node, or left the list): then the subtree may be complete now.
    progress_tree(*r2, root);
  });
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
  // A subtree cannot hold more nodes than a node may know of: a larger count
  // is bogus and must not add up to a majority (nor overflow the sum).
  tree->covered_by[from] =
      static_cast<uint32_t>(std::clamp<uint64_t>(msg.covered(), 1, options_.max_known_nodes));
  tree->high_water = std::max(tree->high_water, msg.high_water());
  raise_high_water(r, msg.high_water());
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

void Camera::await_majority_tree(Resource& r, SlowTree& tree, size_t known) {
  if (tree.majority_retry_scheduled) return;
  tree.majority_retry_scheduled = true;
  minority_trees_total_.add();
  core::log("mutex").info(
      "slow-path tree covers a minority node={} resource={} request={} covered={} known={} "
      "decision=\"no grant: another part of a partitioned mesh could grant too; the tree is rebuilt in {} ms\"",
      self_.to_string(), r.name, tree.id.to_string(), tree.covered(), known, core::to_millis(options_.probe_interval));
  env_.start_timer(options_.probe_interval, [this, alive = alive_, name = r.name, id = tree.id, attempt = tree.attempt] {
    if (!*alive) return;
    Resource* r2 = find(name);
    if (r2 == nullptr || r2->state != State::wait || !r2->own || !r2->own->slow) return;
    if (tree_for(*r2, self_, to_proto(id), attempt) == nullptr) return;
    rebuild_tree(*r2);
  });
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
  auto on_result = [this, name = r.name, root, id = tree.id, attempt = tree.attempt, to = *parent, since = env_.now()](
                       bool tree_msg, const core::RequestResult& result) {
    note_ack(to, result);
    if (result.status == core::RequestStatus::ok) return;
    Resource* r2 = find(name);
    if (r2 == nullptr) return;
    SlowTree* t2 = tree_for(*r2, root, to_proto(id), attempt);
    if (t2 == nullptr || t2->parent() != to) return;
    if (!is_live_member(to) && forget_if_silent(to, since)) return;
    (tree_msg ? t2->tree_sent : t2->ok_sent) = false;
    later([this, name, root] {
      Resource* r3 = find(name);
      if (r3 != nullptr) progress_tree(*r3, root);
    });
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
    msg->set_covered(tree.covered());
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
    send(child, probe, "probe",
         [this, name, root, id, attempt, child, since = env_.now()](const core::RequestResult& result) {
           // A new life of the child answering means the old one died.
           note_ack(child, result);
           if (result.status == core::RequestStatus::ok || is_live_member(child) || !forget_if_silent(child, since)) {
             watch_child(name, root, id, attempt, child);
           }
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
