#include "tests/mutex/camera_world.h"

#include <algorithm>
#include <stdexcept>

#include "proto/wire.pb.h"

namespace mesh::mutex::testing {
namespace {

sim::Topology make_topology(const WorldOptions& options, uint64_t seed) {
  const int n = static_cast<int>(options.nodes);
  if (options.topology == "grid") return sim::grid_for(n);
  if (options.topology == "line") return sim::line(n);
  if (options.topology == "random") return sim::random_geometric(n, seed);
  throw std::invalid_argument("unknown topology " + options.topology);
}

}  // namespace

CameraWorld::CameraWorld(uint64_t seed, WorldOptions options)
    : seed_(seed),
      options_(std::move(options)),
      simulator_(seed),
      network_(simulator_, sim::mix_seed(seed, 1)),
      routing_(simulator_, network_, sim::mix_seed(seed, 2)),
      topology_(make_topology(options_, sim::mix_seed(seed, 3))) {
  if (options_.hop_arq) routing_.enable_hop_arq(*options_.hop_arq);
  for (size_t i = 0; i < options_.nodes; ++i) ids_.push_back(network_.add_node());
  for (const auto& [a, b] : topology_.edges) network_.connect(ids_[a], ids_[b], options_.link);
  nodes_.resize(options_.nodes);
  for (size_t i = 0; i < options_.nodes; ++i) boot(i);
}

CameraWorld::~CameraWorld() {
  // Cameras before the Messengers they registered with, timers last.
  for (auto& n : nodes_) {
    n.camera.reset();
    n.messenger.reset();
    if (n.env) n.env->cancel_all();
  }
}

void CameraWorld::boot(size_t i) {
  Node& n = nodes_[i];
  ++n.incarnation;
  n.env = std::make_unique<sim::SimEnv>(simulator_, seed_, static_cast<uint32_t>(i), n.incarnation);
  n.metrics = std::make_unique<core::Metrics>();
  n.view = std::make_unique<membership::StaticMemberView>(ids_[i]);
  n.messenger = std::make_unique<core::Messenger>(*n.env, routing_.transport(ids_[i]), *n.metrics, options_.messenger);
  n.camera = std::make_unique<Camera>(*n.env, *n.messenger, *n.view, *n.metrics, *n.storage, options_.camera);
}

void CameraWorld::set_list(size_t i, const std::vector<size_t>& members) {
  std::vector<core::NodeId> list;
  for (size_t m : members) list.push_back(ids_[m]);
  list.push_back(ids_[i]);
  nodes_[i].view->set_live_ids(list);
}

void CameraWorld::crash(size_t i) {
  Node& n = nodes_[i];
  if (!n.camera) return;
  n.camera.reset();
  n.messenger.reset();
  n.env->cancel_all();
  network_.set_node_up(ids_[i], false);
  ++crashes_;
  for (auto it = holders_.begin(); it != holders_.end();) {
    it = it->second.node == i ? holders_.erase(it) : std::next(it);
  }
  std::erase_if(open_, [&](const auto& e) { return e.second.node == i; });
}

void CameraWorld::restart(size_t i, const std::vector<size_t>& members) {
  if (nodes_[i].camera) return;
  network_.set_node_up(ids_[i], true);
  boot(i);
  set_list(i, members);
}

void CameraWorld::run_section(const Section& section, std::function<void(bool)> done) {
  if (!up(section.node)) return;
  const uint64_t section_id = next_section_++;
  const uint32_t incarnation = nodes_[section.node].incarnation;
  open_[section_id] = Open{section.node, incarnation, section.resource};
  camera(section.node)
      .acquire(section.resource, section.timeout,
               [this, section_id, section, incarnation, done](const AcquireResult& result) {
                 if (!result) {
                   open_.erase(section_id);
                   if (done) done(false);
                   return;
                 }
                 on_grant(section_id, section, incarnation, *result, done);
               });
}

void CameraWorld::on_grant(uint64_t section_id, const Section& section, uint32_t incarnation, const Grant& grant,
                           std::function<void(bool)> done) {
  ++grants_;
  if (grant.slow_path) ++slow_grants_;
  waits_ms_.push_back(core::to_millis(grant.granted_at - grant.requested_at));
  auto h = holders_.find(section.resource);
  // A holder whose lease ran out (Camera::held no longer shows its grant) has
  // let go; only its token must still be below the new one.
  const bool lapsed = h != holders_.end() && up(h->second.node) &&
                      nodes_[h->second.node].incarnation == h->second.incarnation &&
                      !camera(h->second.node).held(section.resource);
  if (lapsed) {
    ++superseded_lapsed_;
    if (grant.fencing_token <= h->second.token) {
      violations_.push_back("resource=" + section.resource + " token " + std::to_string(grant.fencing_token) +
                            " at node " + std::to_string(section.node) + " not above lapsed holder " +
                            std::to_string(h->second.node) + "'s " + std::to_string(h->second.token));
    }
  } else if (h != holders_.end()) {
    violations_.push_back(
        "t=" + std::to_string(core::to_millis(now().time_since_epoch())) + "ms resource=" + section.resource +
        " granted to node " + std::to_string(section.node) + " while node " + std::to_string(h->second.node) +
        " holds it since t=" + std::to_string(core::to_millis(h->second.since.time_since_epoch())) + "ms");
  }
  // Tokens must grow past every holder that left by release, crashes or
  // not: marks are persisted and a lost holder makes the others jump.
  const uint64_t last = last_token_[section.resource];
  if (grant.fencing_token <= last) {
    if (crashes_ > 0) ++token_repeats_after_crash_;
    violations_.push_back("resource=" + section.resource + " token " + std::to_string(grant.fencing_token) +
                          " at node " + std::to_string(section.node) + " not above the released " +
                          std::to_string(last));
  }
  holders_[section.resource] = Holder{section.node, incarnation, grant.fencing_token, now()};
  const size_t node = section.node;
  simulator_.after(section.hold, [this, section_id, node, incarnation, resource = section.resource, done] {
    if (!up(node) || nodes_[node].incarnation != incarnation) return;
    auto it = holders_.find(resource);
    if (it != holders_.end() && it->second.node == node) {
      last_token_[resource] = std::max(last_token_[resource], it->second.token);
      holders_.erase(it);
    }
    open_.erase(section_id);
    camera(node).release(resource);
    if (done) done(true);
  });
}

size_t CameraWorld::unfinished() const { return open_.size(); }

std::vector<std::string> CameraWorld::unfinished_descriptions() const {
  std::vector<std::string> out;
  for (const auto& [id, o] : open_) {
    std::string s = "node " + std::to_string(o.node) + " resource " + o.resource;
    if (nodes_[o.node].camera) {
      for (const auto& st : nodes_[o.node].camera->status()) {
        if (st.resource != o.resource) continue;
        s += " phase=" + std::to_string(static_cast<int>(st.phase)) +
             " awaiting_oks=" + std::to_string(st.awaiting_oks) + " slow=" + std::to_string(st.slow_path) +
             " deferred=" + std::to_string(st.deferred) + (st.request ? " req=" + st.request->to_string() : "");
      }
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace mesh::mutex::testing
