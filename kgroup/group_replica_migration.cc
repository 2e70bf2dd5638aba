// Epoch migration and re-selection (CoMesh 3.4, 3.5; Appendix A.1 case 2):
// sealing, starting the successor, pulling and inheriting the sealed state,
// decommissioning the old members.
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "kgroup/group_replica.h"
#include "kgroup/hash_selection.h"
#include "kgroup/kgroup_codec.h"
#include "kgroup/replica_requests.h"

namespace mesh::kgroup {

void GroupReplica::maybe_reselect() {
  if (!serving() || !hooks_.select) return;
  // Re-selection (CoMesh 3.5): only once f members have failed, not on
  // every failure; the group then hands over to the k best live nodes. A
  // group formed with fewer members than its selection now has (genesis
  // while few nodes were live) hands over too: with one or two members it
  // tolerates no failure at all. Checked after commits, on a member's
  // failure, and at the first heartbeat round after a member joined the
  // view (a group nothing is written to must not stay undersized).
  size_t failed = 0;
  for (core::NodeId id : config_.members) failed += is_live(id) ? 0 : 1;
  const size_t f = faults_tolerated(config_.members.size());
  const auto selected = hooks_.select(config_.target, config_.epoch);
  const bool undersized = selected.size() > config_.members.size();
  if (!undersized && (f == 0 || failed < f)) return;
  if (selected.empty() || selected == config_.members) return;
  // Never hand over to fewer members than this group has: a successor of
  // one member tolerates no failure at all. A selection that small comes
  // from a view missing most of the mesh (this node restarted a moment ago
  // and counts every member it has not heard of yet as failed); once the
  // view fills, the members it now misses are live again, or the selection
  // is large enough.
  if (selected.size() < config_.members.size()) return;
  core::log("kgroup").info("re-selecting group={} epoch={} generation={} failed={} members={} selected={}",
                           ref_.target(), ref_.epoch(), ref_.generation(), failed, config_.members.size(),
                           selected.size());
  seal(config_.epoch, config_.generation + 1);
}

void GroupReplica::arm_epoch_timer() {
  if (hooks_.schedule == nullptr || epoch_timer_.active()) return;
  const core::TimePoint end = hooks_.schedule->epoch_end(config_.target, config_.epoch);
  epoch_timer_.start(end - env_.now(), [this] { on_epoch_end(); });
}

void GroupReplica::on_epoch_end() {
  if (!serving()) return;
  const core::TimePoint due = hooks_.schedule->epoch_end(config_.target, config_.epoch);
  const auto why = state_machine_.migration_unwelcome();
  if (why && env_.now() < due + options_.migration_postpone_max) {
    if (!migration_postponed_) {
      core::log("kgroup").info(
          "postponing migration group={} epoch={} generation={}: {} (at most until {} s past "
          "the epoch's end)",
          ref_.target(), ref_.epoch(), ref_.generation(), *why,
          std::chrono::duration_cast<std::chrono::seconds>(options_.migration_postpone_max).count());
      migration_postponed_ = true;
    }
    epoch_timer_.start(options_.migration_retry, [this] { on_epoch_end(); });
    return;
  }
  if (why) {
    core::log("kgroup").warn("migrating group={} epoch={} although {}: postponed as long as allowed", ref_.target(),
                             ref_.epoch(), *why);
  } else if (migration_postponed_) {
    core::log("kgroup").info("migration of group={} epoch={} no longer postponed ({} s past the epoch's end)",
                             ref_.target(), ref_.epoch(),
                             std::chrono::duration_cast<std::chrono::seconds>(env_.now() - due).count());
  }
  migration_postponed_ = false;
  const uint64_t next = std::max(config_.epoch + 1, hooks_.schedule->epoch_at(config_.target, env_.now()));
  seal(next, 0);
  // No successor could be selected (no live nodes in view): try again later.
  if (!sealing_) epoch_timer_.start(options_.migration_retry, [this] { on_epoch_end(); });
}

void GroupReplica::seal(uint64_t epoch, uint32_t generation) {
  if (!serving() || !hooks_.select) return;
  const std::vector<core::NodeId> members = hooks_.select(config_.target, epoch);
  if (members.empty()) return;
  proto::KgroupEntry entry;
  entry.set_kind(proto::KGROUP_SEAL);
  auto* successor = entry.mutable_successor();
  *successor->mutable_group() = make_ref(config_.target, epoch, generation);
  for (core::NodeId id : members) successor->add_members(id.value());
  core::log("kgroup").info("sealing group={} epoch={} generation={} successor_epoch={} successor_generation={}",
                           ref_.target(), ref_.epoch(), ref_.generation(), epoch, generation);
  sealing_ = true;
  seal_proposed_ = env_.now();
  epoch_timer_.cancel();
  propose(std::move(entry), nullptr);
}

proto::KgroupStart GroupReplica::own_start() const {
  proto::KgroupStart start;
  *start.mutable_group() = ref_;
  for (core::NodeId id : config_.members) start.add_members(id.value());
  if (config_.source) {
    *start.mutable_source() = make_ref(config_.target, config_.source->epoch, config_.source->generation);
    for (core::NodeId id : config_.source->members) start.add_source_members(id.value());
  }
  return start;
}

void GroupReplica::send_start(core::NodeId member, const proto::KgroupStart& start, std::function<void(bool)> done) {
  proto::KgroupBody body;
  *body.mutable_start() = start;
  migration_requests_.request(
      member, encode_body(body),
      [this, done = std::move(done)](const core::RequestResult& result) {
        // Our successor (or we ourselves) already retired there: so are we.
        if (rejected_retired(result)) return;
        done(result.status == core::RequestStatus::ok);
      },
      retrying(options_.prepare_deadline));
}

void GroupReplica::send_starts(bool probe) {
  // Only a committed seal names a successor, so every start names the same one.
  proto::KgroupStart start;
  *start.mutable_group() = successor_.group();
  *start.mutable_members() = successor_.members();
  *start.mutable_source() = ref_;
  for (core::NodeId id : config_.members) start.add_source_members(id.value());
  const uint64_t term = leader_term_;
  bool waiting = false;
  for (uint32_t value : successor_.members()) {
    const core::NodeId member(value);
    if (started_.count(member) != 0) continue;
    waiting = true;
    if (!start_inflight_.insert(member).second) continue;
    send_start(member, start, [this, member, term](bool ok) {
      start_inflight_.erase(member);
      if (ok && role_ == Role::leader && leader_term_ == term) started_.insert(member);
    });
  }
  if (probe && !waiting && !successor_.members().empty() && start_inflight_.empty()) {
    // Everyone started: keep asking one successor member now and then, so
    // that this group learns ("retired") when its decommission was missed
    // (the successor's leader may itself be gone by then).
    const core::NodeId member(successor_.members(static_cast<int>(probe_++ % successor_.members().size())));
    start_inflight_.insert(member);
    send_start(member, start, [this, member](bool) { start_inflight_.erase(member); });
  }
  arm_migration_retry();
}

void GroupReplica::pull_state() {
  if (pulling_ || inheriting_ || !config_.source || config_.source->members.empty()) return;
  const auto& members = config_.source->members;
  // Ask old members membership reports live first: a failed one could only
  // time out (every old member that applied the seal holds the same state).
  for (size_t skipped = 0; skipped < members.size() && !is_live(members[pull_from_ % members.size()]); ++skipped) {
    ++pull_from_;
  }
  const core::NodeId from = members[pull_from_ % members.size()];
  const uint64_t term = leader_term_;
  pulling_ = true;
  if (!pull_started_) pull_started_ = env_.now();
  if (from == self_) {
    std::optional<proto::KgroupStateReply> reply;
    if (hooks_.local_final_state) {
      if (auto state = hooks_.local_final_state(config_.source->epoch, config_.source->generation)) {
        reply.emplace();
        reply->set_ready(true);
        reply->set_total_size(state->size());
        if (pull_buffer_.size() <= state->size()) reply->set_chunk(state->substr(pull_buffer_.size()));
      }
    }
    on_state_reply(term, std::move(reply));
    return;
  }
  proto::KgroupBody body;
  auto* request = body.mutable_state_request();
  *request->mutable_group() = make_ref(config_.target, config_.source->epoch, config_.source->generation);
  request->set_offset(pull_buffer_.size());
  migration_requests_.request(
      from, encode_body(body),
      [this, term](const core::RequestResult& result) {
        std::optional<proto::KgroupStateReply> reply;
        if (result.status == core::RequestStatus::ok) {
          auto decoded = decode_body(result.response.body);
          if (decoded && decoded->has_state_reply() && decoded->state_reply().ready()) {
            reply = decoded->state_reply();
          }
        }
        on_state_reply(term, std::move(reply));
      },
      retrying(options_.prepare_deadline));
}

void GroupReplica::on_state_reply(uint64_t term, std::optional<proto::KgroupStateReply> reply) {
  if (role_ != Role::leader || leader_term_ != term || !pulling_) return;
  pulling_ = false;
  if (reply && !pull_buffer_.empty() && reply->total_size() != pull_total_) reply.reset();
  if (reply && pull_buffer_.size() + reply->chunk().size() > reply->total_size()) reply.reset();
  if (!reply || (reply->chunk().empty() && pull_buffer_.size() < reply->total_size())) {
    // Not applied the seal yet, down, or answering inconsistently: try the
    // next old member; after a full round, wait a little.
    ++pull_from_;
    if (++pull_misses_ % config_.source->members.size() == 0) {
      arm_migration_retry();
    } else {
      pull_state();
    }
    return;
  }
  pull_total_ = reply->total_size();
  pull_buffer_ += reply->chunk();
  if (pull_buffer_.size() < pull_total_) {
    pull_state();
    return;
  }
  std::string state = std::move(pull_buffer_);
  pull_buffer_.clear();
  inherit(std::move(state));
}

void GroupReplica::inherit(std::string state) {
  // The whole sealed state: commit it as this group's first entries (CoMesh
  // 3.4 step 4, replication to a quorum of the new group). Every final state
  // of the sealed group is the same, so pages from different old members fit.
  inheriting_ = true;
  const uint64_t term = leader_term_;
  const size_t chunk = std::max<size_t>(options_.max_update_bytes, 1);
  size_t offset = 0;
  do {
    proto::KgroupEntry entry;
    entry.set_kind(proto::KGROUP_SNAPSHOT);
    entry.set_snapshot_offset(offset);
    entry.set_snapshot_size(state.size());
    entry.set_data(state.substr(offset, chunk));
    offset += entry.data().size();
    if (!propose(std::move(entry), nullptr)) return;
    if (role_ != Role::leader || leader_term_ != term) return;
  } while (offset < state.size());
}

void GroupReplica::send_decommissions() {
  if (!config_.source) return;
  const proto::KgroupRef source = make_ref(config_.target, config_.source->epoch, config_.source->generation);
  const uint64_t term = leader_term_;
  bool waiting = false;
  for (core::NodeId member : config_.source->members) {
    if (decommissioned_.count(member) != 0) continue;
    waiting = true;
    if (!decommission_inflight_.insert(member).second) continue;
    proto::KgroupBody body;
    *body.mutable_decommission()->mutable_group() = source;
    migration_requests_.request(
        member, encode_body(body),
        [this, member, term](const core::RequestResult& result) {
          decommission_inflight_.erase(member);
          if (role_ != Role::leader || leader_term_ != term) return;
          const bool gone = result.status == core::RequestStatus::rejected &&
                            (result.response.body == "unknown_group" || result.response.body == "retired");
          if (result.status == core::RequestStatus::ok || gone) {
            decommissioned_.insert(member);
          }
        },
        retrying(options_.prepare_deadline));
  }
  if (waiting) arm_migration_retry();
}

void GroupReplica::arm_migration_retry() {
  if (migration_timer_.active()) return;
  migration_timer_.start(options_.migration_retry, [this] {
    if (role_ != Role::leader || recovering_) return;
    if (!inherited_) {
      pull_state();
      return;
    }
    if (config_.source) send_decommissions();
    if (sealed_) send_starts(true);
  });
}

void GroupReplica::handle_state_request(const proto::KgroupStateRequest& request, core::Responder responder) {
  proto::KgroupBody body;
  auto* reply = body.mutable_state_reply();
  // Any member that applied the seal holds the final state: all of them
  // applied the same committed prefix.
  if (sealed_ && request.offset() <= final_state_.size()) {
    reply->set_ready(true);
    reply->set_total_size(final_state_.size());
    reply->set_chunk(final_state_.substr(request.offset(), options_.max_batch_bytes));
  }
  responder.respond(encode_body(body));
}

void GroupReplica::handle_decommission(core::Responder responder) {
  proto::KgroupBody body;
  body.mutable_decommission_ack()->set_ok(true);
  responder.respond(encode_body(body));
  if (hooks_.retired) hooks_.retired();
}

}  // namespace mesh::kgroup
