#include "kgroup/heartbeat_coalescer.h"

#include <utility>

#include "core/log.h"
#include "kgroup/kgroup_codec.h"
#include "proto/wire.pb.h"

namespace mesh::kgroup {
namespace {

// What one more append adds to a KgroupHeartbeats body: its bytes, the
// field's tag and a length prefix of up to three bytes.
size_t carried_size(const proto::KgroupAppend& heartbeat) { return heartbeat.ByteSizeLong() + 4; }

// The carried group's result as its own request would have had it.
core::RequestResult result_for(const core::RequestResult& carrier, core::RequestStatus status, std::string body) {
  core::RequestResult result = carrier;
  result.status = status;
  result.response.body = std::move(body);
  return result;
}

}  // namespace

HeartbeatCoalescer::HeartbeatCoalescer(core::Env& env, core::Messenger& messenger, core::Metrics& metrics,
                                       size_t max_body_bytes)
    : env_(env),
      messenger_(messenger),
      max_body_bytes_(max_body_bytes),
      flush_timer_(env),
      carriers_sent_(metrics.counter("kgroup_heartbeat_carriers_total")),
      heartbeats_carried_(metrics.counter("kgroup_heartbeats_carried_total")) {}

HeartbeatCoalescer::~HeartbeatCoalescer() {
  for (const auto& [id, carrier] : carriers_) {
    if (carrier.msg_id != 0) messenger_.cancel(carrier.msg_id);
  }
}

HeartbeatCoalescer::Token HeartbeatCoalescer::send(core::NodeId dst, proto::KgroupAppend heartbeat,
                                                   core::Messenger::ResultCallback callback,
                                                   const core::RetryPolicy& policy) {
  const Token token = next_token_++;
  queued_.push_back({token, dst, std::move(heartbeat), std::move(callback), policy});
  if (!flush_timer_.active()) flush_timer_.start(core::Duration::zero(), [this] { flush(); });
  return token;
}

void HeartbeatCoalescer::cancel(Token token) {
  for (auto it = queued_.begin(); it != queued_.end(); ++it) {
    if (it->token == token) {
      queued_.erase(it);
      return;
    }
  }
  const auto owner = owner_.find(token);
  if (owner == owner_.end()) return;
  const uint64_t carrier_id = owner->second;
  owner_.erase(owner);
  Carrier& carrier = carriers_.at(carrier_id);
  bool anyone_waiting = false;
  for (Carried& carried : carrier.carried) {
    if (carried.token == token) carried.callback = nullptr;
    anyone_waiting = anyone_waiting || carried.callback != nullptr;
  }
  if (!anyone_waiting) {
    if (carrier.msg_id != 0) messenger_.cancel(carrier.msg_id);
    carriers_.erase(carrier_id);
  }
}

void HeartbeatCoalescer::flush() {
  flush_timer_.cancel();
  std::map<core::NodeId, std::vector<Queued>> by_destination;
  for (Queued& queued : queued_) by_destination[queued.dst].push_back(std::move(queued));
  queued_.clear();
  for (auto& [dst, heartbeats] : by_destination) {
    std::vector<Queued> batch;
    size_t bytes = 0;
    const bool plain_only = plain_only_.count(dst) != 0;
    for (Queued& heartbeat : heartbeats) {
      const size_t size = carried_size(heartbeat.heartbeat);
      if (!batch.empty() && (plain_only || bytes + size > max_body_bytes_)) {
        send_carrier(dst, std::move(batch));
        batch.clear();
        bytes = 0;
      }
      bytes += size;
      batch.push_back(std::move(heartbeat));
    }
    if (!batch.empty()) send_carrier(dst, std::move(batch));
  }
}

void HeartbeatCoalescer::send_carrier(core::NodeId dst, std::vector<Queued> batch) {
  proto::KgroupBody body;
  if (batch.size() == 1) {
    *body.mutable_append() = std::move(batch.front().heartbeat);
  } else {
    for (Queued& queued : batch) *body.mutable_heartbeats()->add_appends() = std::move(queued.heartbeat);
  }
  const uint64_t carrier_id = next_carrier_++;
  Carrier& carrier = carriers_[carrier_id];
  carrier.dst = dst;
  for (Queued& queued : batch) {
    carrier.carried.push_back({queued.token, std::move(queued.callback)});
    owner_[queued.token] = carrier_id;
  }
  carriers_sent_.add();
  heartbeats_carried_.add(batch.size());
  // Every group of a host shares its ReplicaOptions, so the first policy is everyone's.
  const uint64_t msg_id = messenger_.request(
      dst, proto::Envelope::kKgroupFieldNumber, encode_body(body),
      [this, carrier_id](const core::RequestResult& result) { on_carrier_result(carrier_id, result); },
      batch.front().policy);
  // The messenger may have answered from inside request() (too large).
  if (auto it = carriers_.find(carrier_id); it != carriers_.end()) it->second.msg_id = msg_id;
}

void HeartbeatCoalescer::on_carrier_result(uint64_t carrier_id, const core::RequestResult& result) {
  const auto found = carriers_.find(carrier_id);
  if (found == carriers_.end()) return;
  found->second.msg_id = 0;  // answered: nothing left to cancel at the messenger
  const size_t count = found->second.carried.size();

  std::vector<core::RequestResult> results;
  if (count == 1) {
    results.push_back(result);  // it travelled as a plain append
  } else if (result.status != core::RequestStatus::ok) {
    if (result.status == core::RequestStatus::rejected && result.response.body == "malformed") {
      if (plain_only_.insert(found->second.dst).second) {
        core::log("kgroup").info(
            "node={} refused coalesced heartbeats (a version without them?); sending it plain "
            "appends",
            found->second.dst.to_string());
      }
    }
    results.assign(count, result);
  } else {
    const auto body = decode_body(result.response.body);
    if (!body || !body->has_heartbeat_answers() ||
        static_cast<size_t>(body->heartbeat_answers().answers_size()) != count) {
      results.assign(count, result_for(result, core::RequestStatus::rejected, "malformed_answers"));
    } else {
      for (const proto::KgroupHeartbeatAnswer& answer : body->heartbeat_answers().answers()) {
        if (answer.has_reply()) {
          proto::KgroupBody reply;
          *reply.mutable_append_reply() = answer.reply();
          results.push_back(result_for(result, core::RequestStatus::ok, encode_body(reply)));
        } else {
          results.push_back(result_for(result, core::RequestStatus::rejected, answer.rejected()));
        }
      }
    }
  }
  // A callback may cancel a token carried here too (cancel() then empties
  // its slot, or drops the carrier once nobody waits), so each slot is
  // looked up again before it runs.
  for (size_t i = 0; i < count; ++i) {
    const auto it = carriers_.find(carrier_id);
    if (it == carriers_.end()) return;
    Carried& carried = it->second.carried[i];
    owner_.erase(carried.token);
    const core::Messenger::ResultCallback callback = std::move(carried.callback);
    carried.callback = nullptr;
    if (callback) callback(results[i]);
  }
  carriers_.erase(carrier_id);
}

}  // namespace mesh::kgroup
