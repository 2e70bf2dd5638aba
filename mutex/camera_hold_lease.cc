// The holder lease (camera.h, "Holder lease"): a grant holds while a
// majority of the nodes this node knows answered something it sent within
// hold_lease; the grant itself counts as contact at its time.
#include <algorithm>

#include "core/log.h"
#include "mutex/camera.h"

namespace mesh::mutex {

void Camera::note_answered(core::NodeId peer, core::TimePoint sent_at) {
  auto [it, inserted] = answered_at_.try_emplace(peer, sent_at);
  if (!inserted) it->second = std::max(it->second, sent_at);
}

core::TimePoint Camera::lease_valid_until(const Resource& r) const {
  const core::TimePoint now = env_.now();
  const std::vector<core::NodeId> known = estimator_.known_nodes(now);
  // Itself included, a majority of max(floor, known) needs this many others.
  const size_t needed = std::max(options_.network_size.floor, known.size()) / 2;
  if (needed == 0) return core::TimePoint::max();
  std::vector<core::TimePoint> answered;
  for (core::NodeId id : known) {
    if (id == self_) continue;
    auto a = answered_at_.find(id);
    if (a != answered_at_.end()) answered.push_back(a->second);
  }
  core::TimePoint contact = r.grant->granted_at;
  if (answered.size() >= needed) {
    // The latest time by which `needed` nodes had all heard from us.
    std::nth_element(answered.begin(), answered.begin() + static_cast<std::ptrdiff_t>(needed - 1), answered.end(),
                     std::greater<>());
    contact = std::max(contact, answered[needed - 1]);
  }
  return contact + options_.hold_lease;
}

bool Camera::lease_holds(const Resource& r) const {
  if (r.lapsed) return false;
  if (!camera_mode() || options_.hold_lease == core::Duration::zero() || !r.grant) return true;
  const core::TimePoint until = lease_valid_until(r);
  if (env_.now() <= until) return true;
  r.lapsed = true;
  lapsed_total_.add();
  core::log("mutex").info(
      "grant lapsed node={} resource={} request={} token={}: for hold_lease ({} ms) no majority of the {} nodes "
      "known lately answered this node, so the rest of the mesh may grant the resource again; it no longer counts "
      "as held (lapsed {:.3f} s ago)",
      self_.to_string(), r.name, r.grant->request.to_string(), r.grant->fencing_token,
      core::to_millis(options_.hold_lease),
      std::max(options_.network_size.floor, estimator_.known_nodes(env_.now()).size()),
      core::to_millis(env_.now() - until) / 1000.0);
  return false;
}

void Camera::start_lease(const std::string& name, uint64_t token) {
  if (!camera_mode() || options_.hold_lease == core::Duration::zero()) return;
  // The grant is contact enough for hold_lease: a short hold probes nobody.
  env_.start_timer(options_.hold_lease / 2, [this, alive = alive_, name, token] {
    if (*alive) renew_lease(name, token);
  });
}

void Camera::renew_lease(const std::string& name, uint64_t token) {
  Resource* r = find(name);
  if (r == nullptr || r->state != State::held || !r->grant || r->grant->fencing_token != token) return;
  if (!lease_holds(*r)) return;
  const core::TimePoint now = env_.now();
  const core::Duration interval = options_.hold_lease / 4;
  std::erase_if(answered_at_, [&](const auto& entry) { return now - entry.second > options_.network_size.window; });
  // A probe's answer counts from when it was sent: one that waits past the
  // next round would count for less than that round's, so give up by then.
  core::RetryPolicy retry = options_.retry;
  retry.deadline = interval;
  // The lease needs a majority, not everyone: each round asks enough of the
  // nodes not heard lately to keep that many fresh, plus a margin for those
  // that do not answer in time (asked again, or others, next round), those
  // that answered most recently first, as they are likely still reachable.
  // Asking everyone cost 1.5 messages per node and second of hold
  // (bench/camera_bench.cc, LongHold).
  const std::vector<core::NodeId> known = estimator_.known_nodes(now);
  const size_t needed = std::max(options_.network_size.floor, known.size()) / 2;
  const size_t wanted = needed + std::max<size_t>(2, needed / 4);
  size_t fresh = lease_probing_.size();
  std::vector<std::pair<core::TimePoint, core::NodeId>> stale;  // last answer (min: never), node
  for (core::NodeId id : known) {
    if (id == self_ || is_failed(id) || lease_probing_.count(id)) continue;
    auto a = answered_at_.find(id);
    if (a != answered_at_.end() && now - a->second < interval) {
      ++fresh;
      continue;
    }
    stale.emplace_back(a == answered_at_.end() ? core::TimePoint::min() : a->second, id);
  }
  std::sort(stale.begin(), stale.end(), std::greater<>());
  for (size_t i = 0; i < stale.size() && fresh < wanted; ++i, ++fresh) {
    const core::NodeId id = stale[i].second;
    lease_probing_.insert(id);
    proto::MutexBody probe;
    probe.mutable_probe();
    send(
        id, probe, "lease_probe",
        [this, id](const core::RequestResult& result) {
          lease_probing_.erase(id);
          note_ack(id, result);
        },
        retry);
  }
  env_.start_timer(interval, [this, alive = alive_, name, token] {
    if (*alive) renew_lease(name, token);
  });
}

}  // namespace mesh::mutex
