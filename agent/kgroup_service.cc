#include "agent/kgroup_service.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "agent/text_log.h"
#include "core/log.h"
#include "kgroup/client_state_machine.h"
#include "kgroup/hash_selection.h"
#include "kgroup/leader_read.h"

namespace mesh::agent {
namespace {

using kgroup::GroupReplica;
using kgroup::GroupTarget;

// Above the meshes we size for (1000 nodes) with room; the stored list stays
// under 64 KB.
constexpr size_t kMaxRememberedPeers = 4096;

std::optional<proto::KgroupClientBody> decode(const std::string& bytes) {
  proto::KgroupClientBody body;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !body.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
      body.kind_case() == proto::KgroupClientBody::KIND_NOT_SET) {
    return std::nullopt;
  }
  return body;
}

proto::KgroupClientReply make_reply(proto::KgroupClientStatus status, core::NodeId leader = {},
                                    std::string detail = {}) {
  proto::KgroupClientReply reply;
  reply.set_status(status);
  reply.set_leader(leader.value());
  reply.set_detail(std::move(detail));
  return reply;
}

// A member that cannot serve says where to go instead.
proto::KgroupClientReply make_reply(const kgroup::ClientRoute& route) {
  return route.verdict == kgroup::ClientVerdict::redirect
             ? make_reply(proto::KGROUP_CLIENT_REDIRECT, route.next, route.reason)
             : make_reply(proto::KGROUP_CLIENT_RETRY, {}, route.reason);
}

std::string encode_reply(const proto::KgroupClientReply& reply) {
  proto::KgroupClientBody body;
  *body.mutable_reply() = reply;
  return body.SerializeAsString();
}

core::RetryPolicy attempt_policy(const core::Duration deadline) {
  core::RetryPolicy policy;
  policy.first_timeout = std::min(policy.first_timeout, deadline);
  policy.deadline = std::max(deadline, core::Duration(1));
  return policy;
}

}  // namespace

struct KgroupService::Write {
  explicit Write(core::Env& env) : retry_timer(env), deadline_timer(env) {}
  GroupTarget target;
  uint64_t write_id = 0;
  std::string text;
  // A read (KgroupService::read) instead of a write: routed the same way.
  bool is_read = false;
  ReadCallback read_callback;
  core::TimePoint deadline;
  core::Duration timeout{};
  WriteCallback callback;
  std::optional<core::NodeId> next;  // named by a redirect
  size_t candidate = 0;              // round robin over the computed members
  uint32_t attempts = 0;
  uint32_t redirects = 0;  // in a row, without a pause
  std::string problem;     // the latest reason it is not done yet
  uint64_t msg_id = 0;     // the outstanding forwarded request, if any
  core::ScopedTimer retry_timer;
  core::ScopedTimer deadline_timer;
};

KgroupService::KgroupService(core::Env& env, core::Messenger& messenger, core::Storage& storage,
                             membership::MemberView& view, core::Metrics& metrics, KgroupConfig config,
                             StateMachineFactory factory)
    : env_(env),
      messenger_(messenger),
      view_(view),
      config_(std::move(config)),
      selector_(view, config_.selection),
      schedule_(config_.epoch_length, config_.epoch_origin),
      writes_committed_(metrics.counter("kgroup_client_writes_total", {{"result", "committed"}})),
      writes_failed_(metrics.counter("kgroup_client_writes_total", {{"result", "failed"}})),
      groups_created_(metrics.counter("kgroup_genesis_total")),
      genesis_postponed_(metrics.counter("kgroup_genesis_postponed_total")),
      write_latency_ms_(metrics.histogram("kgroup_client_write_ms")),
      view_grew_(env.now()),
      peers_(storage, "kgroup/peers", kMaxRememberedPeers, "kgroup",
             metrics.counter("kgroup_storage_write_failures_total"),
             metrics.counter("kgroup_storage_unreadable_total")) {
  for (core::NodeId peer : peers_.nodes()) {
    if (peer != messenger_.self()) failed_at_[peer] = env_.now();
  }
  if (!failed_at_.empty()) {
    core::log("kgroup").info("remembered peers={}: each counts as failed for genesis until it is live again",
                             failed_at_.size());
  }
  host_ = std::make_unique<kgroup::GroupHost>(
      env_, messenger_, storage, view_, metrics, config_.replica,
      factory ? std::move(factory)
              : [](const GroupTarget&) -> std::unique_ptr<kgroup::StateMachine> { return std::make_unique<TextLog>(); },
      [this](const GroupTarget& target, uint64_t epoch) { return selector_.members(target, epoch); }, &schedule_);
  messenger_.serve(kKgroupClientBodyType, [this](const core::Message& request, core::Responder responder) {
    on_request(request, std::move(responder));
  });
  member_listener_ = view_.add_listener([this](const membership::MemberEvent& event) {
    if (event.kind == membership::MemberEventKind::failed) {
      failed_at_[event.member.id] = env_.now();
    } else if (event.kind == membership::MemberEventKind::joined) {
      failed_at_.erase(event.member.id);
      if (event.member.id != messenger_.self()) peers_.remember(event.member.id);
      view_grew_ = env_.now();
    } else if (event.kind == membership::MemberEventKind::left) {
      failed_at_.erase(event.member.id);
      peers_.forget(event.member.id);
    }
  });
  const size_t restored = host_->restore();
  if (restored > 0) core::log("kgroup").info("rejoined persisted groups count={}", restored);
}

KgroupService::~KgroupService() {
  view_.remove_listener(member_listener_);
  messenger_.serve(kKgroupClientBodyType,
                   [](const core::Message&, core::Responder responder) { responder.reject("shutting_down"); });
  for (const auto& [id, write] : writes_) {
    if (write->msg_id != 0) messenger_.cancel(write->msg_id);
  }
}

uint64_t KgroupService::current_epoch(const GroupTarget& target) const {
  return schedule_.epoch_at(target, env_.now());
}

kgroup::GroupSelector::Selected KgroupService::select(const GroupTarget& target) const {
  return selector_.select(target, current_epoch(target));
}

// ---- the agent that accepted the write --------------------------------------

void KgroupService::write(const GroupTarget& target, std::string text, core::Duration timeout, WriteCallback callback) {
  if (text.size() > config_.max_text_bytes) {
    callback(core::Unexpected(
        fmt::format("the text is {} bytes; at most {} are accepted", text.size(), config_.max_text_bytes)));
    return;
  }
  start_write(target, std::move(text), timeout, std::move(callback));
}

void KgroupService::write_to(const GroupTarget& target, std::string payload, core::Duration timeout,
                             kgroup::GroupClient::WriteCallback callback) {
  // The write id rides in front of the payload (ClientStateMachine).
  const size_t limit = config_.replica.max_update_bytes - 8;
  if (payload.size() > limit) {
    callback(core::Unexpected(
        fmt::format("the update is {} bytes; a group commits at most {}", payload.size(), limit)));
    return;
  }
  start_write(target, std::move(payload), timeout, [callback = std::move(callback)](const auto& result) {
    if (!result) {
      callback(core::Unexpected(result.error()));
    } else {
      callback(kgroup::GroupClient::Written{result->leader});
    }
  });
}

void KgroupService::read_from(const GroupTarget& target, std::string query, core::Duration timeout,
                              kgroup::GroupClient::ReadCallback callback) {
  read(target, std::move(query), timeout, [callback = std::move(callback)](const auto& result) {
    if (!result) {
      callback(core::Unexpected(result.error()));
    } else {
      callback(kgroup::GroupClient::Answer{result->answer, result->leader});
    }
  });
}

void KgroupService::start_write(const GroupTarget& target, std::string text, core::Duration timeout,
                                WriteCallback callback) {
  auto write = std::make_unique<Write>(env_);
  write->target = target;
  // Unique across the mesh with overwhelming probability; it only needs to
  // tell two writes of one target apart.
  write->write_id = env_.rng().next_u64() | 1;
  write->text = std::move(text);
  write->timeout = timeout;
  write->callback = std::move(callback);
  start(std::move(write));
}

void KgroupService::read(const GroupTarget& target, std::string query, core::Duration timeout,
                         ReadCallback callback) {
  auto read = std::make_unique<Write>(env_);
  read->target = target;
  read->text = std::move(query);
  read->is_read = true;
  read->timeout = timeout;
  read->read_callback = std::move(callback);
  start(std::move(read));
}

void KgroupService::start(std::unique_ptr<Write> write) {
  if (write->timeout <= core::Duration::zero()) write->timeout = config_.write_timeout;
  const uint64_t id = next_write_++;
  write->deadline = env_.now() + write->timeout;
  write->deadline_timer.start(write->timeout, [this, id] {
    const auto it = writes_.find(id);
    if (it == writes_.end()) return;
    const Write& w = *it->second;
    const std::string problem = fmt::format(
        "not answered within {} ms after {} attempts (last: {})",
        std::chrono::duration_cast<std::chrono::milliseconds>(w.timeout).count(), w.attempts,
        w.problem.empty() ? "no answer" : w.problem);
    if (w.is_read) {
      finish_read(id, core::Unexpected(problem));
    } else {
      finish(id, core::Unexpected(problem + "; the write may or may not be applied later"));
    }
  });
  writes_[id] = std::move(write);
  attempt(id);
}

void KgroupService::attempt(uint64_t id) {
  const auto it = writes_.find(id);
  if (it == writes_.end()) return;
  Write& write = *it->second;
  core::NodeId destination = messenger_.self();
  if (write.next) {
    destination = *write.next;
    write.next.reset();
  } else {
    const auto members = selector_.members(write.target, current_epoch(write.target));
    if (!members.empty()) destination = members[write.candidate++ % members.size()];
  }
  ++write.attempts;
  if (destination == messenger_.self()) {
    Reply local = [this, id, destination](const proto::KgroupClientReply& reply) { on_reply(id, destination, reply); };
    if (write.is_read) {
      serve_read(write.target, write.text, std::move(local));
    } else {
      serve_write(write.target, write.write_id, write.text, std::move(local));
    }
    return;
  }
  proto::KgroupClientBody body;
  if (write.is_read) {
    body.mutable_read()->set_target(write.target.to_string());
    body.mutable_read()->set_query(write.text);
  } else {
    proto::KgroupClientWrite& request = *body.mutable_write();
    request.set_target(write.target.to_string());
    request.set_write_id(write.write_id);
    request.set_text(write.text);
  }
  const core::Duration left = write.deadline - env_.now();
  write.msg_id = messenger_.request(
      destination, kKgroupClientBodyType, body.SerializeAsString(),
      [this, id, destination](const core::RequestResult& result) {
        const auto found = writes_.find(id);
        if (found == writes_.end()) return;
        found->second->msg_id = 0;
        if (result.status != core::RequestStatus::ok) {
          // Down, unreachable or refusing: ask the next member.
          retry_later(id, fmt::format("{} from {}{}", core::to_string(result.status), destination.to_string(),
                                      result.status == core::RequestStatus::rejected ? " (" + result.response.body + ")"
                                                                                     : std::string()));
          return;
        }
        const auto reply = decode(result.response.body);
        if (!reply || !reply->has_reply()) {
          retry_later(id, fmt::format("malformed answer from {}", destination.to_string()));
          return;
        }
        on_reply(id, destination, reply->reply());
      },
      attempt_policy(std::min(left, config_.write_attempt_timeout)));
}

void KgroupService::retry_later(uint64_t id, std::string problem) {
  const auto it = writes_.find(id);
  if (it == writes_.end()) return;
  it->second->problem = std::move(problem);
  it->second->redirects = 0;
  it->second->retry_timer.start(config_.write_retry, [this, id] { attempt(id); });
}

void KgroupService::on_reply(uint64_t id, core::NodeId from, const proto::KgroupClientReply& reply) {
  const auto it = writes_.find(id);
  if (it == writes_.end()) return;
  Write& write = *it->second;
  switch (reply.status()) {
    case proto::KGROUP_CLIENT_COMMITTED: {
      if (write.is_read) {
        ReadResult result;
        result.answer = reply.result();
        result.leader = core::NodeId(reply.leader());
        result.term = reply.term();
        result.read_index = reply.read_index();
        result.epoch = reply.epoch();
        result.generation = reply.generation();
        finish_read(id, result);
        return;
      }
      WriteResult result;
      result.seq = reply.seq();
      result.leader = core::NodeId(reply.leader());
      result.epoch = reply.epoch();
      result.generation = reply.generation();
      result.attempts = write.attempts;
      finish(id, result);
      return;
    }
    case proto::KGROUP_CLIENT_REDIRECT: {
      const core::NodeId leader(reply.leader());
      // Follow a redirect at once, unless redirects go round in circles
      // (views still disagreeing): then pause like any retry.
      if (!leader.is_unspecified() && leader != from && ++write.redirects <= 4) {
        write.problem = fmt::format("{} redirected to {}", from.to_string(), leader.to_string());
        write.next = leader;
        attempt(id);
        return;
      }
      if (!leader.is_unspecified()) write.next = leader;
      retry_later(id, fmt::format("{} redirected to {}", from.to_string(), leader.to_string()));
      return;
    }
    case proto::KGROUP_CLIENT_RETRY:
      // Same member again: it is electing, taking over or creating the group.
      write.next = from;
      retry_later(id, fmt::format("{}: {}", from.to_string(), reply.detail().empty() ? "busy" : reply.detail()));
      return;
    case proto::KGROUP_CLIENT_FAILED:
    default: {
      std::string problem = fmt::format("refused by {}: {}", from.to_string(), reply.detail());
      if (write.is_read) {
        finish_read(id, core::Unexpected(std::move(problem)));
      } else {
        finish(id, core::Unexpected(std::move(problem)));
      }
      return;
    }
  }
}

void KgroupService::finish(uint64_t id, const core::Expected<WriteResult, std::string>& result) {
  const auto it = writes_.find(id);
  if (it == writes_.end()) return;
  std::unique_ptr<Write> write = std::move(it->second);
  writes_.erase(it);
  if (write->msg_id != 0) messenger_.cancel(write->msg_id);
  (result ? writes_committed_ : writes_failed_).add();
  if (result) write_latency_ms_.record(core::to_millis(env_.now() - (write->deadline - write->timeout)));
  write->callback(result);
}

void KgroupService::finish_read(uint64_t id, const core::Expected<ReadResult, std::string>& result) {
  const auto it = writes_.find(id);
  if (it == writes_.end()) return;
  std::unique_ptr<Write> read = std::move(it->second);
  writes_.erase(it);
  if (read->msg_id != 0) messenger_.cancel(read->msg_id);
  read->read_callback(result);
}

// ---- the agent a write was addressed to -------------------------------------

void KgroupService::on_request(const core::Message& request, core::Responder responder) {
  const auto body = decode(request.body);
  if (!body) {
    responder.reject("malformed");
    return;
  }
  switch (body->kind_case()) {
    case proto::KgroupClientBody::kRead: {
      const auto target = GroupTarget::parse(body->read().target());
      if (!target || body->read().query().size() > config_.max_text_bytes) {
        responder.reject("bad_read");
        return;
      }
      serve_read(*target, body->read().query(), [responder](const proto::KgroupClientReply& reply) mutable {
        responder.respond(encode_reply(reply));
      });
      return;
    }
    case proto::KgroupClientBody::kWrite: {
      const auto target = GroupTarget::parse(body->write().target());
      if (!target || body->write().text().size() > config_.max_text_bytes) {
        responder.reject("bad_write");
        return;
      }
      serve_write(
          *target, body->write().write_id(), body->write().text(),
          [responder](const proto::KgroupClientReply& reply) mutable { responder.respond(encode_reply(reply)); });
      return;
    }
    case proto::KgroupClientBody::kProbe: {
      const std::string& key = body->probe().target();
      GroupReplica* replica = host_->latest(key);
      proto::KgroupClientReply reply = make_reply(proto::KGROUP_CLIENT_RETRY);
      reply.set_hosted(replica != nullptr);
      reply.set_live_members(static_cast<uint32_t>(view_.live_count()));
      if (replica != nullptr) {
        reply.set_leader(replica->leader().value());
        reply.set_epoch(replica->config().epoch);
        reply.set_generation(replica->config().generation);
      } else if (const auto running = genesis_.find(key); running != genesis_.end() && running->second.create) {
        // Two nodes creating the same group at once (their views disagree
        // on the preferred leader): the lower id creates it, the other
        // steps back and sends its writes there.
        if (request.src < messenger_.self()) {
          yield_genesis(key, request.src);
        } else {
          reply.set_creator(messenger_.self().value());
        }
      }
      responder.respond(encode_reply(reply));
      return;
    }
    case proto::KgroupClientBody::kCreate:
      serve_create(request, body->create(), std::move(responder));
      return;
    default:
      responder.reject("malformed");
      return;
  }
}

GroupReplica* KgroupService::route(const GroupTarget& target, bool create, Reply& reply) {
  const std::string key = target.to_string();
  GroupReplica* replica = host_->latest(key);
  if (replica == nullptr) {
    if (const auto hint = hints_.find(key); hint != hints_.end()) {
      if (hint->second.until > env_.now() && hint->second.node != messenger_.self()) {
        reply(make_reply(proto::KGROUP_CLIENT_REDIRECT, hint->second.node));
        return nullptr;
      }
      hints_.erase(hint);
    }
    const auto selected = select(target);
    if (selected.members.empty()) {
      reply(make_reply(proto::KGROUP_CLIENT_RETRY, {}, "no live members to select from yet"));
      return nullptr;
    }
    if (selected.members.front().id != messenger_.self()) {
      reply(make_reply(proto::KGROUP_CLIENT_REDIRECT, selected.members.front().id));
      return nullptr;
    }
    if (!create) {
      // Views may disagree on the preferred leader: look for the group on
      // every live node before saying there is none.
      if (const auto absent = absent_until_.find(key); absent != absent_until_.end() && absent->second > env_.now()) {
        reply(make_reply(proto::KGROUP_CLIENT_FAILED, {}, fmt::format("no group of {} exists yet", key)));
        return nullptr;
      }
      start_genesis(target, selected, /*create=*/false);
      reply(make_reply(proto::KGROUP_CLIENT_RETRY, {}, "looking for the group"));
      return nullptr;
    }
    if (auto refusal = genesis_refusal()) {
      core::log("kgroup").debug("genesis refused target={} reason={}", key, *refusal);
      reply(make_reply(proto::KGROUP_CLIENT_RETRY, {}, std::move(*refusal)));
      return nullptr;
    }
    start_genesis(target, selected);
    const auto postponed = genesis_postponed_because_.find(key);
    reply(make_reply(proto::KGROUP_CLIENT_RETRY, {},
                     postponed == genesis_postponed_because_.end()
                         ? std::string("creating the group")
                         : "creating the group; the last try waited: " + postponed->second));
    return nullptr;
  }
  if (const kgroup::ClientRoute route = kgroup::route_client(*replica); route.verdict != kgroup::ClientVerdict::serve) {
    reply(make_reply(route));
    return nullptr;
  }
  return replica;
}

void KgroupService::serve_read(const GroupTarget& target, const std::string& query, Reply reply) {
  GroupReplica* replica = route(target, /*create=*/false, reply);
  if (replica == nullptr) return;
  const kgroup::ReadAdmission admission = kgroup::admit_read(*replica);
  if (admission.route.verdict != kgroup::ClientVerdict::serve) {
    reply(make_reply(admission.route));
    return;
  }
  const auto* state = dynamic_cast<const kgroup::ClientStateMachine*>(&replica->state_machine());
  if (state == nullptr) {
    reply(make_reply(proto::KGROUP_CLIENT_FAILED, {}, "this group's state cannot be read"));
    return;
  }
  auto answer = state->read(query);
  if (!answer) {
    reply(make_reply(proto::KGROUP_CLIENT_FAILED, messenger_.self(), answer.error()));
    return;
  }
  proto::KgroupClientReply out = make_reply(proto::KGROUP_CLIENT_COMMITTED, messenger_.self());
  out.set_epoch(replica->config().epoch);
  out.set_generation(replica->config().generation);
  out.set_term(admission.term);
  out.set_read_index(admission.read_index);
  out.set_result(std::move(*answer));
  reply(out);
}

void KgroupService::serve_write(const GroupTarget& target, uint64_t write_id, std::string text, Reply reply) {
  GroupReplica* replica = route(target, /*create=*/true, reply);
  if (replica == nullptr) return;
  const std::string key = target.to_string();
  const auto ref = std::make_pair(replica->config().epoch, replica->config().generation);
  replica->submit(kgroup::ClientStateMachine::encode_write(write_id, text), [this, key, ref, reply = std::move(reply)](
                                                                              const kgroup::SubmitResult& result) {
    GroupReplica* current = host_->find(key, ref.first, ref.second);
    switch (result.status) {
      case kgroup::SubmitStatus::committed: {
        const auto* log =
            current == nullptr ? nullptr : dynamic_cast<const kgroup::ClientStateMachine*>(&current->state_machine());
        const auto position = log == nullptr ? std::nullopt : log->position_of(result.seq);
        if (!position) {
          // Committed, but its position is no longer known
          // here: asking again finds it (same write id).
          reply(make_reply(proto::KGROUP_CLIENT_RETRY, {}, "committed; looking up its position"));
          return;
        }
        proto::KgroupClientReply answer = make_reply(proto::KGROUP_CLIENT_COMMITTED, messenger_.self());
        answer.set_seq(*position);
        answer.set_epoch(ref.first);
        answer.set_generation(ref.second);
        reply(answer);
        return;
      }
      case kgroup::SubmitStatus::not_leader:
        reply(!result.leader.is_unspecified() && result.leader != messenger_.self()
                  ? make_reply(proto::KGROUP_CLIENT_REDIRECT, result.leader)
                  : make_reply(proto::KGROUP_CLIENT_RETRY, {}, "electing a leader"));
        return;
      case kgroup::SubmitStatus::migrated:
        reply(make_reply(proto::KGROUP_CLIENT_RETRY, {}, "migrating to the next group"));
        return;
      case kgroup::SubmitStatus::unknown:
      case kgroup::SubmitStatus::overloaded:
        reply(make_reply(proto::KGROUP_CLIENT_RETRY, {}, std::string(kgroup::to_string(result.status))));
        return;
      case kgroup::SubmitStatus::too_large:
      case kgroup::SubmitStatus::storage_error:
        reply(make_reply(proto::KGROUP_CLIENT_FAILED, {}, std::string(kgroup::to_string(result.status))));
        return;
    }
    reply(make_reply(proto::KGROUP_CLIENT_RETRY));
  });
}

// ---- genesis ----------------------------------------------------------------

std::optional<std::string> KgroupService::genesis_refusal() {
  const core::TimePoint now = env_.now();
  if (now - view_grew_ < config_.genesis_settle) return "membership still settling: no group created yet";
  const std::vector<membership::Member> live_members = view_.live_members();
  for (const auto& member : live_members) failed_at_.erase(member.id);
  std::erase_if(failed_at_, [&](const auto& entry) {
    if (now - entry.second <= config_.genesis_failed_memory) return false;
    peers_.forget(entry.first);
    return true;
  });
  const size_t live = live_members.size();
  if (live * 2 <= live + failed_at_.size()) {
    return fmt::format("only {} of the {} members seen lately are live: a minority creates no group", live,
                       live + failed_at_.size());
  }
  return std::nullopt;
}

std::vector<core::NodeId> KgroupService::failed_members_that_could_hold(const GroupTarget& target) const {
  std::vector<kgroup::SmartNode> everyone;
  std::set<core::NodeId> failed;
  std::optional<core::TimePoint> first_failure;
  for (const membership::Member& m : view_.live_members()) everyone.push_back({m.id, m.location});
  for (const auto& [failed_node, at] : failed_at_) {
    const core::NodeId node = failed_node;  // clang 14 cannot capture a structured binding
    if (node == messenger_.self() || env_.now() - at > config_.genesis_failed_memory) continue;
    if (std::any_of(everyone.begin(), everyone.end(), [&](const auto& n) { return n.id == node; })) continue;
    const auto remembered = view_.member(node);
    everyone.push_back({node, remembered ? remembered->location : kgroup::Location{}});
    failed.insert(node);
    first_failure = std::min(first_failure.value_or(at), at);
  }
  const size_t quorum = kgroup::quorum_size(config_.selection.k);
  if (failed.size() < quorum) return {};  // fewer cannot hide a group that commits
  // A group commits on the far side of a cut only if a quorum of its
  // members went there: of those selected, at the epoch of the cut, among
  // the nodes then live (these, as near as this node knows). The cut came
  // some time before its detection, so the epoch before the first failure
  // counts too; after the cut the group migrates within that side.
  const uint64_t now = current_epoch(target);
  const uint64_t first = schedule_.epoch_at(target, *first_failure);
  const uint64_t from = first == 0 ? 0 : first - 1;
  constexpr uint64_t kMostEpochsChecked = 16;  // epochs far shorter than failure memory: assume it could
  bool could = now - from >= kMostEpochsChecked;
  for (uint64_t epoch = from; !could && epoch <= now; ++epoch) {
    size_t cut_off = 0;
    for (const auto& member : selector_.select_among(target, epoch, everyone).members)
      cut_off += failed.count(member.id);
    could = cut_off >= quorum;
  }
  if (!could) return {};
  return {failed.begin(), failed.end()};
}

void KgroupService::start_genesis(const GroupTarget& target, const kgroup::GroupSelector::Selected& selected,
                                  bool create) {
  const std::string key = target.to_string();
  if (const auto running = genesis_.find(key); running != genesis_.end()) {
    running->second.create = running->second.create || create;
    return;
  }
  Genesis& genesis = genesis_[key];
  genesis.create = create;
  genesis.epoch = selected.epoch;
  for (const auto& member : selected.members) genesis.members.push_back(member.id);
  // Every live node is asked, not only the computed members: a group of the
  // target may live on other nodes (an earlier epoch's group that has not
  // migrated yet, or one selected from a different view). Genesis is rare
  // (once per target), so one probe per node is cheap.
  std::vector<std::pair<core::NodeId, bool>> probed;  // node, failed lately
  for (const membership::Member& member : view_.live_members()) {
    if (member.id != messenger_.self()) probed.emplace_back(member.id, false);
  }
  // A group of the target whose quorum the view lists as failed (cut off by
  // a partition, not crashed) answers no probe to the live nodes, and may
  // still commit on the other side. When that could be, the members failed
  // lately are asked too, and genesis waits while a quorum's worth stays
  // silent (finish_genesis). (Reads search the same way: a read search may
  // turn into a genesis.)
  const std::vector<core::NodeId> failed_members = failed_members_that_could_hold(target);
  for (const core::NodeId node : failed_members) probed.emplace_back(node, true);
  proto::KgroupClientBody body;
  body.mutable_probe()->set_target(key);
  const std::string bytes = body.SerializeAsString();
  genesis.awaiting = probed.size();
  for (const auto& probe : probed) {
    const core::NodeId node = probe.first;
    const bool failed_lately = probe.second;
    messenger_.request(
        node, kKgroupClientBodyType, bytes,
        [this, key, node, failed_lately](const core::RequestResult& result) {
          const auto it = genesis_.find(key);
          if (it == genesis_.end()) return;
          Genesis& g = it->second;
          --g.awaiting;
          const auto reply = result.status == core::RequestStatus::ok ? decode(result.response.body) : std::nullopt;
          if (!reply || !reply->has_reply()) {
            if (failed_lately) {
              ++g.failed_silent;
            } else {
              ++g.silent;
            }
            g.silent_example = node;
            if (g.awaiting == 0) finish_genesis(key);
            return;
          }
          if (const size_t known = reply->reply().live_members(); known > view_.live_count() && known > g.view_behind) {
            g.view_behind = known;
            g.knows_more = node;
          }
          if (reply->reply().hosted()) {
            const core::NodeId leader(reply->reply().leader());
            g.hosted_at = leader.is_unspecified() || leader == messenger_.self() ? node : leader;
          } else if (const core::NodeId creator(reply->reply().creator());
                     !creator.is_unspecified() && creator < messenger_.self()) {
            yield_genesis(key, creator);
            return;
          }
          if (g.awaiting == 0) finish_genesis(key);
        },
        attempt_policy(config_.write_attempt_timeout));
  }
  if (genesis.awaiting == 0) finish_genesis(key);
}

void KgroupService::yield_genesis(const std::string& key, core::NodeId creator) {
  if (genesis_.erase(key) == 0) return;
  hints_[key] = Hint{creator, env_.now() + config_.write_attempt_timeout};
  core::log("kgroup").info("genesis left to a lower id target={} creator={}", key, creator.to_string());
}

void KgroupService::finish_genesis(const std::string& key) {
  const auto it = genesis_.find(key);
  if (it == genesis_.end()) return;
  const Genesis genesis = std::move(it->second);
  genesis_.erase(it);
  genesis_postponed_because_.erase(key);  // set again below if it waits once more
  const auto target = GroupTarget::parse(key);
  if (!target || host_->latest(key) != nullptr) return;
  if (genesis.hosted_at) {
    // A group of the target exists already: send writes to it.
    hints_[key] = Hint{*genesis.hosted_at, env_.now() + config_.write_attempt_timeout};
    core::log("kgroup").info("genesis not needed target={} hosted_at={}", key, genesis.hosted_at->to_string());
    return;
  }
  if (genesis.view_behind > 0) {
    // A node that knows more members than this one may know the target's
    // group, or be the one that should create it.
    genesis_postponed_.add();
    core::log("kgroup").debug("genesis postponed target={} reason=view_behind known_here={} known_at={} count={}", key,
                              view_.live_count(), genesis.knows_more.to_string(), genesis.view_behind);
    view_.catch_up_from(genesis.knows_more);
    return;
  }
  if (!genesis.create) {
    if (genesis.silent == 0 && genesis.failed_silent == 0) {
      absent_until_[key] = env_.now() + config_.write_attempt_timeout;
    }
    core::log("kgroup").debug("no group of {} found for a read", key);
    return;
  }
  if (genesis.silent > 0) {
    // A node that did not answer may host the target's group: creating
    // another could fork the target's state. Wait until it answers or
    // membership declares it failed.
    genesis_postponed_.add();
    genesis_postponed_because_[key] =
        fmt::format("{} live member(s) did not answer, e.g. {}", genesis.silent, genesis.silent_example.to_string());
    core::log("kgroup").info("genesis postponed target={} reason=unanswered_probes count={} e.g.={}", key,
                             genesis.silent, genesis.silent_example.to_string());
    return;
  }
  if (genesis.failed_silent >= kgroup::quorum_size(config_.selection.k)) {
    // Members failed lately and still silent could hold a quorum of the
    // target's group on the far side of a partition: wait until they answer
    // or genesis_failed_memory forgets them.
    genesis_postponed_.add();
    genesis_postponed_because_[key] = fmt::format(
        "{} member(s) failed lately, e.g. {}, could hold a quorum of its group cut off from here; it is created "
        "once they answer or {} s after they failed",
        genesis.failed_silent, genesis.silent_example.to_string(),
        std::chrono::duration_cast<std::chrono::seconds>(config_.genesis_failed_memory).count());
    core::log("kgroup").info("genesis postponed target={} reason=failed_members_silent count={} e.g.={}", key,
                             genesis.failed_silent, genesis.silent_example.to_string());
    return;
  }
  kgroup::GroupConfig config;
  config.target = *target;
  config.epoch = genesis.epoch;
  config.generation = 0;
  config.members = genesis.members;
  host_->join(config);
  groups_created_.add();
  core::log("kgroup").info("created group target={} epoch={} members={}", key, genesis.epoch, genesis.members.size());
  proto::KgroupClientBody body;
  proto::KgroupClientCreate& create = *body.mutable_create();
  create.set_target(key);
  create.set_epoch(genesis.epoch);
  for (const core::NodeId member : genesis.members) create.add_members(member.value());
  const std::string bytes = body.SerializeAsString();
  for (const core::NodeId member : genesis.members) {
    if (member == messenger_.self()) continue;
    messenger_.request(member, kKgroupClientBodyType, bytes, [key, member](const core::RequestResult& result) {
      if (result.status != core::RequestStatus::ok) {
        // The group runs with a quorum; a member that never joined refuses
        // its appends until a later create or migration reaches it.
        core::log("kgroup").info("create not acknowledged target={} member={} result={}", key, member.to_string(),
                                 core::to_string(result.status));
      }
    });
  }
}

void KgroupService::serve_create(const core::Message& request, const proto::KgroupClientCreate& create,
                                 core::Responder responder) {
  const auto target = GroupTarget::parse(create.target());
  std::vector<core::NodeId> members;
  for (const uint32_t member : create.members()) members.emplace_back(member);
  const std::set<core::NodeId> distinct(members.begin(), members.end());
  if (!target || members.empty() || distinct.size() != members.size() || distinct.count(messenger_.self()) == 0 ||
      target->to_string() != create.target()) {
    responder.reject("not_a_member");
    return;
  }
  proto::KgroupClientReply reply = make_reply(proto::KGROUP_CLIENT_RETRY);
  if (GroupReplica* existing = host_->latest(create.target()); existing != nullptr) {
    // Never a second group of one target here.
    reply.set_hosted(true);
    reply.set_leader(existing->leader().value());
    responder.respond(encode_reply(reply));
    return;
  }
  kgroup::GroupConfig config;
  config.target = *target;
  config.epoch = create.epoch();
  config.generation = 0;
  config.members = std::move(members);
  core::log("kgroup").info("joining new group target={} epoch={} from={}", create.target(), create.epoch(),
                           request.src.to_string());
  host_->join(std::move(config));
  responder.respond(encode_reply(reply));
}

}  // namespace mesh::agent
