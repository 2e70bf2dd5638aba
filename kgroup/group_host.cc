#include "kgroup/group_host.h"

#include <algorithm>

#include "core/log.h"
#include "kgroup/kgroup_codec.h"
#include "proto/wire.pb.h"

namespace mesh::kgroup {
namespace {

const proto::KgroupRef* group_of(const proto::KgroupBody& body) {
  switch (body.kind_case()) {
    case proto::KgroupBody::kElection:
      return &body.election().group();
    case proto::KgroupBody::kPrepare:
      return &body.prepare().group();
    case proto::KgroupBody::kAppend:
      return &body.append().group();
    case proto::KgroupBody::kStateRequest:
      return &body.state_request().group();
    case proto::KgroupBody::kDecommission:
      return &body.decommission().group();
    default:
      return nullptr;
  }
}

std::vector<core::NodeId> ids_of(const google::protobuf::RepeatedField<uint32_t>& values) {
  std::vector<core::NodeId> out;
  out.reserve(static_cast<size_t>(values.size()));
  for (uint32_t v : values) out.emplace_back(v);
  return out;
}

// A configuration from the wire or storage; nullopt if it is not one.
std::optional<GroupConfig> config_from(const proto::KgroupRef& group,
                                       const google::protobuf::RepeatedField<uint32_t>& members, bool has_source,
                                       const proto::KgroupRef& source,
                                       const google::protobuf::RepeatedField<uint32_t>& source_members) {
  const auto target = GroupTarget::parse(group.target());
  if (!target || members.empty()) return std::nullopt;
  GroupConfig config;
  config.target = *target;
  config.epoch = group.epoch();
  config.generation = group.generation();
  config.members = ids_of(members);
  if (has_source) {
    if (source.target() != group.target() || source_members.empty()) return std::nullopt;
    config.source = GroupSource{source.epoch(), source.generation(), ids_of(source_members)};
  }
  return config;
}

}  // namespace

GroupHost::GroupHost(core::Env& env, core::Messenger& messenger, core::Storage& storage, membership::MemberView& view,
                     core::Metrics& metrics, ReplicaOptions options, StateMachineFactory factory, Selector select,
                     const EpochSchedule* schedule)
    : env_(env),
      messenger_(messenger),
      storage_(storage),
      view_(view),
      options_(options),
      factory_(std::move(factory)),
      select_(std::move(select)),
      schedule_(schedule),
      heartbeat_timer_(env),
      retire_timer_(env),
      replica_metrics_(metrics),
      dropped_malformed_(metrics.counter("kgroup_dropped_total", {{"reason", "malformed"}})),
      dropped_unknown_group_(metrics.counter("kgroup_dropped_total", {{"reason", "unknown_group"}})),
      groups_started_(metrics.counter("kgroup_groups_started_total")),
      groups_retired_(metrics.counter("kgroup_groups_retired_total")) {
  messenger_.serve(
      proto::Envelope::kKgroupFieldNumber,
      [this](const core::Message& request, core::Responder responder) { on_request(request, std::move(responder)); });
  listener_ = view_.add_listener([this](const membership::MemberEvent& event) {
    for (GroupReplica* replica : replicas()) replica->on_member_event(event);
  });
  if (options_.coalesce_heartbeats) {
    // A carrier is sealed into one datagram like an append: the same budget.
    heartbeats_ = std::make_unique<HeartbeatCoalescer>(env_, messenger_, metrics, options_.max_batch_bytes);
    heartbeat_timer_.start_periodic(options_.heartbeat_interval, [this] { heartbeat_tick(); });
  }
}

void GroupHost::heartbeat_tick() {
  for (GroupReplica* replica : replicas()) replica->heartbeat_tick();
  heartbeats_->flush();
}

GroupHost::~GroupHost() {
  view_.remove_listener(listener_);
  groups_.clear();
  messenger_.serve(proto::Envelope::kKgroupFieldNumber,
                   [](const core::Message&, core::Responder responder) { responder.reject("unknown_group"); });
}

ReplicaHooks GroupHost::hooks_for(const GroupConfig& config) {
  ReplicaHooks hooks;
  hooks.schedule = schedule_;
  hooks.select = select_;
  hooks.metrics = &replica_metrics_;
  hooks.heartbeats = heartbeats_.get();
  const Key key{config.target.to_string(), config.epoch, config.generation};
  hooks.retired = [this, key] { retire(key); };
  hooks.local_final_state = [this, target = config.target.to_string()](
                                uint64_t epoch, uint32_t generation) -> std::optional<std::string> {
    const GroupReplica* old = find(target, epoch, generation);
    if (old == nullptr || !old->sealed()) return std::nullopt;
    return old->final_state();
  };
  return hooks;
}

std::optional<std::pair<uint64_t, uint32_t>> GroupHost::retired_watermark(const std::string& target) const {
  const std::string key = ReplicatedLog::target_prefix(target) + "retired";
  const core::StoredValue stored = storage_.read(key);
  if (stored.damaged()) {
    // Only matters for a group retired just before a crash and not yet
    // erased: restored, it asks its old peers, which answer "retired".
    core::log("kgroup").error("retirement mark damaged; restoring the target's groups key={}", key);
  }
  const std::optional<std::string> value = stored.found() ? std::optional(stored.value) : std::nullopt;
  if (!value || value->size() != 12) return std::nullopt;
  uint64_t epoch = 0;
  uint32_t generation = 0;
  for (size_t i = 0; i < 8; ++i) epoch = (epoch << 8) | static_cast<uint8_t>((*value)[i]);
  for (size_t i = 8; i < 12; ++i) generation = (generation << 8) | static_cast<uint8_t>((*value)[i]);
  return std::make_pair(epoch, generation);
}

bool GroupHost::is_retired(const std::string& target, uint64_t epoch, uint32_t generation) const {
  const auto mark = retired_watermark(target);
  return mark && std::make_pair(epoch, generation) <= *mark;
}

size_t GroupHost::restore() {
  size_t count = 0;
  for (const proto::KgroupConfigRecord& record : ReplicatedLog::stored_configs(storage_)) {
    auto config =
        config_from(record.group(), record.members(), record.has_source(), record.source(), record.source_members());
    if (!config) continue;
    if (is_retired(record.group().target(), config->epoch, config->generation)) {
      // Retired just before a crash, before its state was erased.
      ReplicatedLog(storage_, record.group().target(), config->epoch, config->generation).erase_all();
      continue;
    }
    join(std::move(*config));
    ++count;
  }
  return count;
}

GroupReplica& GroupHost::join(GroupConfig config) {
  const Key key{config.target.to_string(), config.epoch, config.generation};
  groups_.erase(key);
  retiring_.erase(key);
  Hosted hosted;
  hosted.state_machine = factory_(config.target);
  hosted.replica = std::make_unique<GroupReplica>(env_, messenger_, storage_, view_, config, *hosted.state_machine,
                                                  options_, hooks_for(config));
  GroupReplica& replica = *hosted.replica;
  groups_[key] = std::move(hosted);
  groups_started_.add();
  if (on_join_) on_join_(replica);
  replica.start();
  return replica;
}

void GroupHost::leave(const std::string& target, uint64_t epoch, uint32_t generation, bool erase) {
  groups_.erase({target, epoch, generation});
  if (erase) {
    ReplicatedLog log(storage_, target, epoch, generation);
    log.erase_all();
  }
}

GroupReplica* GroupHost::find(const std::string& target, uint64_t epoch, uint32_t generation) const {
  const auto it = groups_.find({target, epoch, generation});
  return it == groups_.end() ? nullptr : it->second.replica.get();
}

GroupReplica* GroupHost::latest(const std::string& target) const {
  GroupReplica* best = nullptr;
  for (const auto& [key, hosted] : groups_) {
    if (std::get<0>(key) == target) best = hosted.replica.get();  // keys sort by epoch, then generation
  }
  return best;
}

std::vector<GroupReplica*> GroupHost::replicas() const {
  std::vector<GroupReplica*> out;
  out.reserve(groups_.size());
  for (const auto& [key, hosted] : groups_) out.push_back(hosted.replica.get());
  return out;
}

void GroupHost::retire(const Key& key) {
  // Never destroy a replica from inside its own call: defer to a timer.
  retiring_.insert(key);
  retire_timer_.start(core::Duration::zero(), [this] {
    const std::set<Key> keys = std::move(retiring_);
    retiring_.clear();
    for (const Key& k : keys) {
      if (groups_.count(k) == 0) continue;
      const auto mark = retired_watermark(std::get<0>(k));
      if (!mark || std::make_pair(std::get<1>(k), std::get<2>(k)) > *mark) {
        std::string value;
        for (int shift = 56; shift >= 0; shift -= 8)
          value.push_back(static_cast<char>((std::get<1>(k) >> shift) & 0xff));
        for (int shift = 24; shift >= 0; shift -= 8)
          value.push_back(static_cast<char>((std::get<2>(k) >> shift) & 0xff));
        if (!storage_.put(ReplicatedLog::target_prefix(std::get<0>(k)) + "retired", value)) {
          core::log("kgroup").error("could not persist retirement group={}", std::get<0>(k));
          continue;
        }
      }
      core::log("kgroup").debug("decommissioned group={} epoch={} generation={}", std::get<0>(k), std::get<1>(k),
                                std::get<2>(k));
      leave(std::get<0>(k), std::get<1>(k), std::get<2>(k), true);
      groups_retired_.add();
    }
  });
}

void GroupHost::on_request(const core::Message& request, core::Responder responder) {
  auto body = decode_body(request.body);
  if (!body) {
    dropped_malformed_.add();
    core::log("kgroup").debug("malformed request src={} error={}", request.src.to_string(), body.error());
    responder.reject("malformed");
    return;
  }
  if (body->has_start()) {
    on_start(request, body->start(), std::move(responder));
    return;
  }
  if (body->has_heartbeats()) {
    on_heartbeats(request, body->heartbeats(), std::move(responder));
    return;
  }
  route(request, *body, std::move(responder));
}

void GroupHost::on_heartbeats(const core::Message& request, const proto::KgroupHeartbeats& heartbeats,
                              core::Responder responder) {
  struct Answers {
    explicit Answers(core::Responder r) : responder(std::move(r)) {}
    core::Responder responder;
    proto::KgroupBody body;
    size_t missing = 0;
  };
  auto answers = std::make_shared<Answers>(std::move(responder));
  answers->missing = static_cast<size_t>(heartbeats.appends_size());
  for (int i = 0; i < heartbeats.appends_size(); ++i) answers->body.mutable_heartbeat_answers()->add_answers();
  for (int i = 0; i < heartbeats.appends_size(); ++i) {
    auto one = core::Responder::detached(request, [answers, i](bool rejected, std::string body) {
      proto::KgroupHeartbeatAnswer* answer = answers->body.mutable_heartbeat_answers()->mutable_answers(i);
      if (rejected) {
        answer->set_rejected(std::move(body));
      } else if (const auto reply = decode_body(body); reply && reply->has_append_reply()) {
        *answer->mutable_reply() = reply->append_reply();
      } else {
        answer->set_rejected("unexpected_answer");
      }
      if (--answers->missing == 0) answers->responder.respond(encode_body(answers->body));
    });
    proto::KgroupBody alone;
    *alone.mutable_append() = heartbeats.appends(i);
    route(request, alone, std::move(one));
  }
}

void GroupHost::route(const core::Message& request, const proto::KgroupBody& body, core::Responder responder) {
  const proto::KgroupRef* group = group_of(body);
  GroupReplica* replica = group == nullptr ? nullptr : find(group->target(), group->epoch(), group->generation());
  if (replica == nullptr || retiring_.count({group->target(), group->epoch(), group->generation()}) != 0) {
    dropped_unknown_group_.add();
    const bool retired =
        group != nullptr && (retiring_.count({group->target(), group->epoch(), group->generation()}) != 0 ||
                             is_retired(group->target(), group->epoch(), group->generation()));
    responder.reject(retired ? "retired" : "unknown_group");
    return;
  }
  replica->on_request(request, body, std::move(responder));
}

void GroupHost::on_start(const core::Message& request, const proto::KgroupStart& start, core::Responder responder) {
  auto config = config_from(start.group(), start.members(), true, start.source(), start.source_members());
  if (!config ||
      std::find(config->members.begin(), config->members.end(), messenger_.self()) == config->members.end()) {
    responder.reject("not_a_member");
    return;
  }
  if (is_retired(start.group().target(), start.group().epoch(), start.group().generation())) {
    responder.reject("retired");
    return;
  }
  if (find(start.group().target(), start.group().epoch(), start.group().generation()) == nullptr) {
    core::log("kgroup").debug("starting successor group={} epoch={} generation={} from={}", start.group().target(),
                              start.group().epoch(), start.group().generation(), request.src.to_string());
    join(std::move(*config));
  }
  proto::KgroupBody body;
  body.mutable_start_ack()->set_ok(true);
  responder.respond(encode_body(body));
}

}  // namespace mesh::kgroup
