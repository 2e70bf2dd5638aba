// Log compaction: a member snapshots its state machine at its applied point
// and removes the entries the snapshot covers, so a group's storage stays
// bounded within an epoch. A member that needs entries compacted away at the
// member it talks to (a follower behind its leader, a candidate behind a
// member that promised) pulls that member's snapshot first, in chunks over
// the migration's state transfer (KgroupStateRequest with compacted set).
#include <algorithm>
#include <utility>

#include "core/log.h"
#include "kgroup/group_replica.h"
#include "kgroup/kgroup_codec.h"
#include "kgroup/replica_requests.h"

namespace mesh::kgroup {

uint64_t GroupReplica::restore_snapshot() {
  const std::optional<LogSnapshot> snapshot = log_.restore_snapshot();
  if (!snapshot) return 0;
  if (!state_machine_.restore(snapshot->state)) {
    // Replay then stops at the first compacted entry, and the leader sends
    // this member a snapshot as to any member that is behind.
    core::log("kgroup").error("stored log snapshot rejected by the state machine group={} seq={}", ref_.target(),
                              snapshot->last_seq);
    return 0;
  }
  // Only a state with its inheritance complete is ever snapshot.
  inherited_ = true;
  snapshot_seq_ = snapshot->last_seq;
  snapshot_bytes_ = encode_log_snapshot(*snapshot);
  return snapshot->last_seq;
}

void GroupReplica::maybe_compact() {
  const uint64_t applied = log_.applied();
  if (options_.snapshot_after_entries == 0 || applied < snapshot_seq_ + options_.snapshot_after_entries) return;
  // The snapshot holds the state machine only: a half-applied inherited
  // state and the seal's successor live beside it, and after the seal
  // nothing commits, so the log no longer grows.
  if (!inherited_ || sealed_ || !snapshot_buffer_.empty()) return;
  const proto::KgroupEntry* last = log_.get(applied);
  if (last == nullptr) return;
  const LogSnapshot snapshot{applied, last->term(), state_machine_.snapshot()};
  // Durable before any entry it covers goes (ReplicatedLog::restore_snapshot
  // finishes the removal after a crash in between).
  if (!log_.save_snapshot(snapshot)) {
    core::log("kgroup").error("could not persist log snapshot group={} seq={}", ref_.target(), applied);
    return;
  }
  previous_snapshot_seq_ = snapshot_seq_;
  previous_snapshot_bytes_ = std::move(snapshot_bytes_);
  snapshot_seq_ = applied;
  snapshot_bytes_ = encode_log_snapshot(snapshot);
  if (!log_.compact_through(applied)) {
    core::log("kgroup").error("could not remove compacted entries group={} seq={}", ref_.target(), applied);
  }
  if (hooks_.metrics != nullptr) hooks_.metrics->snapshot_taken();
  core::log("kgroup").debug("compacted group={} epoch={} through={} state_bytes={}", ref_.target(), ref_.epoch(),
                            applied, snapshot.state.size());
}

void GroupReplica::pull_snapshot(core::NodeId from, uint64_t seq) {
  // One at a time: if the one under way ends short of `seq`, the next append
  // or promise that needs more asks again.
  if (snapshot_pull_ || seq <= log_.applied()) return;
  snapshot_pull_ = SnapshotPull{from, 0, {}};
  request_snapshot_chunk();
}

void GroupReplica::request_snapshot_chunk() {
  SnapshotPull& pull = *snapshot_pull_;
  proto::KgroupBody body;
  auto* request = body.mutable_state_request();
  *request->mutable_group() = ref_;
  request->set_compacted(true);
  request->set_snapshot_seq(pull.seq);
  request->set_offset(pull.buffer.size());
  snapshot_requests_.request(
      pull.from, encode_body(body), [this](const core::RequestResult& result) { on_snapshot_chunk(result); },
      retrying(options_.prepare_deadline));
}

void GroupReplica::on_snapshot_chunk(const core::RequestResult& result) {
  if (!snapshot_pull_) return;
  SnapshotPull& pull = *snapshot_pull_;
  std::optional<proto::KgroupStateReply> reply;
  if (result.status == core::RequestStatus::ok) {
    auto decoded = decode_body(result.response.body);
    if (decoded && decoded->has_state_reply() && decoded->state_reply().ready() &&
        decoded->state_reply().snapshot_seq() != 0) {
      reply = decoded->state_reply();
    }
  }
  if (!reply) {
    // Down, or holding no snapshot: the next append or promise that needs
    // one asks again.
    snapshot_pull_.reset();
    after_snapshot_pull(false);
    return;
  }
  if (reply->snapshot_seq() != pull.seq) {
    // The first answer names the snapshot; another one later means the
    // sender compacted twice since the earlier chunks: start over on its
    // current one.
    pull.seq = reply->snapshot_seq();
    pull.buffer.clear();
    request_snapshot_chunk();
    return;
  }
  if (pull.buffer.size() + reply->chunk().size() > reply->total_size() ||
      (reply->chunk().empty() && pull.buffer.size() < reply->total_size())) {
    snapshot_pull_.reset();
    after_snapshot_pull(false);
    return;
  }
  pull.buffer += reply->chunk();
  if (pull.buffer.size() < reply->total_size()) {
    request_snapshot_chunk();
    return;
  }
  const std::string bytes = std::move(pull.buffer);
  snapshot_pull_.reset();
  after_snapshot_pull(install_snapshot(bytes));
}

bool GroupReplica::install_snapshot(std::string_view bytes) {
  const std::optional<LogSnapshot> snapshot = decode_log_snapshot(bytes);
  if (!snapshot) {
    core::log("kgroup").warn("damaged log snapshot received group={}", ref_.target());
    return false;
  }
  // Already there (another snapshot or the entries got it there first).
  if (snapshot->last_seq <= log_.applied()) return true;
  // A leader holds every committed entry; it never needs one.
  if (role_ == Role::leader) return false;
  if (!log_.save_snapshot(*snapshot)) {
    core::log("kgroup").error("could not persist received log snapshot group={} seq={}", ref_.target(),
                              snapshot->last_seq);
    return false;
  }
  if (!state_machine_.restore(snapshot->state)) {
    core::log("kgroup").error("received log snapshot rejected by the state machine group={} seq={}", ref_.target(),
                              snapshot->last_seq);
    return false;
  }
  // The snapshot is of committed entries only, so whoever sent it, it is the
  // state every member reaches at that point.
  inherited_ = true;
  snapshot_buffer_.clear();
  previous_snapshot_seq_ = snapshot_seq_;
  previous_snapshot_bytes_ = std::move(snapshot_bytes_);
  snapshot_seq_ = snapshot->last_seq;
  snapshot_bytes_ = std::string(bytes);
  if (!log_.set_applied(snapshot->last_seq)) {
    core::log("kgroup").error("could not persist applied point group={} seq={}", ref_.target(), snapshot->last_seq);
  }
  log_.compact_through(snapshot->last_seq);
  synced_ = std::max(synced_, snapshot->last_seq);
  if (hooks_.metrics != nullptr) hooks_.metrics->snapshot_installed();
  core::log("kgroup").debug("installed log snapshot group={} epoch={} through={}", ref_.target(), ref_.epoch(),
                            snapshot->last_seq);
  return true;
}

void GroupReplica::after_snapshot_pull(bool installed) {
  std::set<core::NodeId> waiting;
  waiting.swap(awaiting_snapshot_);
  if (role_ != Role::candidate) return;
  for (core::NodeId member : waiting) {
    if (role_ != Role::candidate) return;
    if (installed) {
      send_prepare(member, log_.applied() + 1);
    } else {
      note_refusal(member, core::Duration::zero(), true);
    }
  }
}

void GroupReplica::handle_snapshot_request(const proto::KgroupStateRequest& request, core::Responder responder) {
  proto::KgroupBody body;
  auto* reply = body.mutable_state_reply();
  const bool previous = request.snapshot_seq() != 0 && request.snapshot_seq() == previous_snapshot_seq_ &&
                        !previous_snapshot_bytes_.empty();
  const uint64_t seq = previous ? previous_snapshot_seq_ : snapshot_seq_;
  const std::string& bytes = previous ? previous_snapshot_bytes_ : snapshot_bytes_;
  if (seq != 0 && !bytes.empty()) {
    reply->set_ready(true);
    reply->set_snapshot_seq(seq);
    reply->set_total_size(bytes.size());
    // Chunks only continue the snapshot they began on.
    if (request.snapshot_seq() == seq && request.offset() <= bytes.size()) {
      reply->set_chunk(bytes.substr(request.offset(), options_.max_batch_bytes));
    }
  }
  responder.respond(encode_body(body));
}

}  // namespace mesh::kgroup
