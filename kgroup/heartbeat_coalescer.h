#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "core/env.h"
#include "core/messenger.h"
#include "core/metrics.h"
#include "proto/kgroup.pb.h"

namespace mesh::kgroup {

// Per-peer heartbeat coalescing, as multi-Raft systems do (CockroachDB,
// TiKV): a node that leads several groups whose followers sit on the same
// nodes would otherwise send each follower node one heartbeat request, and
// get one reply, per group per tick. GroupHost ticks every group it leads at
// once; the heartbeats (appends with no entries) queued in that tick for one
// node leave in one KgroupHeartbeats request, and each group gets its own
// answer out of the one KgroupHeartbeatAnswers reply.
//
// Nothing about a heartbeat's meaning changes:
//  - the follower handles each carried append exactly as if it had come
//    alone (GroupHost hands it to the group's replica with a detached
//    Responder), so it renews its lease when it handles it;
//  - the leader counts its lease from the time it queued the heartbeat,
//    which is no later than the carrier's first transmission;
//  - the carrier retransmits under the heartbeats' own RetryPolicy and is
//    deduplicated by the Messenger, so a carried append is handled at most
//    once per transmission of the group's own request as before.
// Appends with entries never wait here: they leave at once, alone.
// A heartbeat that has no company for its destination leaves as a plain
// append, so where groups share no pair of nodes the wire is unchanged. A
// node that refuses a carrier as malformed runs a version without
// coalescing (a rolling upgrade): it gets plain appends from then on, and
// the heartbeats it refused are sent again at the next tick.
class HeartbeatCoalescer {
 public:
  using Token = uint64_t;

  // `max_body_bytes` caps one carrier's body (a datagram must hold it).
  HeartbeatCoalescer(core::Env& env, core::Messenger& messenger, core::Metrics& metrics, size_t max_body_bytes);
  HeartbeatCoalescer(const HeartbeatCoalescer&) = delete;
  HeartbeatCoalescer& operator=(const HeartbeatCoalescer&) = delete;
  ~HeartbeatCoalescer();

  // Queues `heartbeat` for `dst`; the callback runs once with the group's
  // own result (as Messenger::request's would), unless cancelled. Leaves at
  // the next flush(), which a zero-delay timer runs if nobody calls it first.
  Token send(core::NodeId dst, proto::KgroupAppend heartbeat, core::Messenger::ResultCallback callback,
             const core::RetryPolicy& policy);
  // The callback will not be called.
  void cancel(Token token);
  // Sends everything queued: one request per destination (more than one if
  // the heartbeats do not fit one body).
  void flush();

  size_t queued() const { return queued_.size(); }
  size_t in_flight() const { return owner_.size(); }

 private:
  struct Queued {
    Token token;
    core::NodeId dst;
    proto::KgroupAppend heartbeat;
    core::Messenger::ResultCallback callback;
    core::RetryPolicy policy;
  };
  struct Carried {
    Token token;
    core::Messenger::ResultCallback callback;  // empty once cancelled
  };
  struct Carrier {
    core::NodeId dst;
    uint64_t msg_id = 0;  // 0 until the messenger returned it
    std::vector<Carried> carried;
  };

  void send_carrier(core::NodeId dst, std::vector<Queued> batch);
  void on_carrier_result(uint64_t carrier, const core::RequestResult& result);

  core::Env& env_;
  core::Messenger& messenger_;
  size_t max_body_bytes_;
  Token next_token_ = 1;
  uint64_t next_carrier_ = 1;
  std::vector<Queued> queued_;
  std::map<uint64_t, Carrier> carriers_;
  std::map<Token, uint64_t> owner_;    // token in flight -> its carrier
  std::set<core::NodeId> plain_only_;  // refused a carrier as malformed
  core::ScopedTimer flush_timer_;
  core::Counter& carriers_sent_;
  core::Counter& heartbeats_carried_;
};

}  // namespace mesh::kgroup
