#include "agent/admin_service.h"

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/admin_response.h"
#include "agent/text_log.h"
#include "agent/text_log_reader.h"
#include "core/log.h"
#include "core/version.h"

namespace mesh::agent {
namespace {

// spdlog's level names, as core::set_log_level accepts them.
constexpr std::array<std::string_view, 7> kLevels = {"trace", "debug", "info", "warn", "error", "critical", "off"};
constexpr std::string_view kCommands =
    "status, metrics, log_level, ping, neighbors, routes, topology, members, lock, unlock, locks, kgroups, kgroup, "
    "kgroup_write, devices, device_set, device_watch, device_add, device_remove, routine_add, routine_remove, "
    "routine_enable, routines, routine_run, preconditions, precondition_add, precondition_remove, plan";

int prefix_length(core::Ipv4Address netmask) {
  int length = 0;
  for (uint32_t bits = netmask.value(); bits & 0x80000000u; bits <<= 1) ++length;
  return length;
}

void fill_labels(const core::Labels& labels, google::protobuf::Map<std::string, std::string>& out) {
  for (const auto& [key, value] : labels) out[key] = value;
}

std::string_view phase_name(mutex::Camera::Phase phase) {
  switch (phase) {
    case mutex::Camera::Phase::idle:
      return "idle";
    case mutex::Camera::Phase::waiting:
      return "waiting";
    case mutex::Camera::Phase::held:
      return "held";
  }
  return "unknown";
}

// Diagnostics read no stored state, and must answer while the disk is slow
// (that is when someone runs them); every other answer may show a storage
// change (a fencing token, a committed write, a catalog version) and leaves
// only once the changes before it are durable.
bool reads_no_stored_state(proto::AdminRequest::CommandCase command) {
  switch (command) {
    case proto::AdminRequest::kStatus:
    case proto::AdminRequest::kMetrics:
    case proto::AdminRequest::kLogLevel:
    case proto::AdminRequest::kPing:
    case proto::AdminRequest::kNeighbors:
    case proto::AdminRequest::kRoutes:
    case proto::AdminRequest::kTopology:
    case proto::AdminRequest::kMembers:
      return true;
    default:
      return false;
  }
}

}  // namespace

AdminService::AdminService(Node& node)
    : node_(node), devices_(node), routines_(node), catalog_(node), preconditions_(node) {}

AdminService::~AdminService() {
  *alive_ = false;
  for (const auto& [handle, claim] : claims_) node_.camera().cancel(handle);
}

void AdminService::handle(const proto::AdminRequest& request, Reply reply, ConnectionId connection) {
  if (!reads_no_stored_state(request.command_case())) {
    reply = [&node = node_, reply = std::move(reply)](proto::AdminResponse response) {
      node.after_durable([reply, response = std::move(response)] { reply(response); });
    };
  }
  switch (request.command_case()) {
    case proto::AdminRequest::kStatus:
      reply(status());
      return;
    case proto::AdminRequest::kMetrics:
      reply(metrics());
      return;
    case proto::AdminRequest::kLogLevel:
      reply(log_level(request.log_level()));
      return;
    case proto::AdminRequest::kPing:
      ping(request.ping(), std::move(reply));
      return;
    case proto::AdminRequest::kNeighbors:
      reply(neighbors());
      return;
    case proto::AdminRequest::kRoutes:
      reply(routes());
      return;
    case proto::AdminRequest::kTopology:
      reply(topology());
      return;
    case proto::AdminRequest::kMembers:
      reply(members(request.members()));
      return;
    case proto::AdminRequest::kLock:
      lock(request.lock(), std::move(reply), connection);
      return;
    case proto::AdminRequest::kUnlock:
      reply(unlock(request.unlock(), connection));
      return;
    case proto::AdminRequest::kLocks:
      reply(locks());
      return;
    case proto::AdminRequest::kKgroups:
      reply(kgroups());
      return;
    case proto::AdminRequest::kKgroup:
      if (request.kgroup().through_leader()) {
        kgroup_through_leader(request.kgroup(), std::move(reply));
      } else {
        reply(kgroup(request.kgroup()));
      }
      return;
    case proto::AdminRequest::kKgroupWrite:
      kgroup_write(request.kgroup_write(), std::move(reply));
      return;
    case proto::AdminRequest::kDevices:
      devices_.devices(request.devices(), std::move(reply));
      return;
    case proto::AdminRequest::kDeviceSet:
      devices_.set(request.device_set(), std::move(reply));
      return;
    case proto::AdminRequest::kDeviceWatch:
      devices_.watch(request.device_watch(), std::move(reply), connection);
      return;
    case proto::AdminRequest::kDeviceAdd:
      catalog_.add(AdminCatalog::Kind::device, request.device_add(), std::move(reply));
      return;
    case proto::AdminRequest::kDeviceRemove:
      catalog_.remove(AdminCatalog::Kind::device, request.device_remove(), std::move(reply));
      return;
    case proto::AdminRequest::kRoutineAdd:
      catalog_.add(AdminCatalog::Kind::routine, request.routine_add(), std::move(reply));
      return;
    case proto::AdminRequest::kRoutineRemove:
      catalog_.remove(AdminCatalog::Kind::routine, request.routine_remove(), std::move(reply));
      return;
    case proto::AdminRequest::kRoutineEnable:
      catalog_.set_routine_enabled(request.routine_enable(), std::move(reply));
      return;
    case proto::AdminRequest::kRoutines:
      routines_.list(request.routines(), std::move(reply));
      return;
    case proto::AdminRequest::kRoutineRun:
      routines_.run(request.routine_run(), std::move(reply));
      return;
    case proto::AdminRequest::kPreconditions:
      reply(preconditions_.list());
      return;
    case proto::AdminRequest::kPreconditionAdd:
      catalog_.add(AdminCatalog::Kind::precondition, request.precondition_add(), std::move(reply));
      return;
    case proto::AdminRequest::kPreconditionRemove:
      catalog_.remove(AdminCatalog::Kind::precondition, request.precondition_remove(), std::move(reply));
      return;
    case proto::AdminRequest::kPlan:
      preconditions_.plan(request.plan(), std::move(reply));
      return;
    case proto::AdminRequest::COMMAND_NOT_SET:
      break;
  }
  // An empty command is what an unknown oneof member from a newer meshctl
  // parses as.
  reply(
      error_response(fmt::format("unknown command; this agent speaks {} (meshagent {}); is meshctl from a "
                                 "different version?",
                                 kCommands, kVersion)));
}

proto::AdminResponse AdminService::status() const {
  proto::AdminResponse response;
  proto::StatusReply& status = *response.mutable_status();
  status.set_node_id(node_.id().to_string());
  status.set_name(node_.name());
  status.set_version(kVersion);
  status.set_uptime_s(core::to_seconds(node_.uptime()));
  for (const Node::LayerLine& line : node_.status()) {
    proto::LayerStatus& layer = *status.add_layers();
    layer.set_layer(line.layer);
    layer.set_summary(line.summary);
  }
  const core::TimePoint now = node_.env().now();
  for (const auto& neighbour : node_.olsr().neighbours()) {
    if (neighbour.status != routing::olsr::LinkStatus::symmetric) continue;
    proto::NeighbourStatus& entry = *status.add_neighbours();
    entry.set_id(neighbour.main.to_string());
    entry.set_last_heard_s(core::to_seconds(now - neighbour.last_heard));
  }
  return response;
}

proto::AdminResponse AdminService::neighbors() const {
  proto::AdminResponse response;
  proto::NeighborsReply& reply = *response.mutable_neighbors();
  const core::TimePoint now = node_.env().now();
  for (const auto& neighbour : node_.olsr().neighbours()) {
    proto::OlsrNeighbor& entry = *reply.add_neighbors();
    entry.set_id(neighbour.main.to_string());
    entry.set_link_address(neighbour.link_address.to_string());
    entry.set_status(std::string(routing::olsr::to_string(neighbour.status)));
    entry.set_willingness(neighbour.willingness);
    entry.set_mpr(neighbour.is_mpr);
    entry.set_mpr_selector(neighbour.is_mpr_selector);
    entry.set_last_heard_s(core::to_seconds(now - neighbour.last_heard));
  }
  for (const auto& [via, two_hop] : node_.olsr().two_hop()) {
    proto::TwoHopNeighbor& entry = *reply.add_two_hop();
    entry.set_via(via.to_string());
    entry.set_id(two_hop.to_string());
  }
  return response;
}

proto::AdminResponse AdminService::routes() const {
  proto::AdminResponse response;
  proto::RoutesReply& reply = *response.mutable_routes();
  for (const auto& route : node_.olsr().routes()) {
    proto::RouteEntry& entry = *reply.add_routes();
    entry.set_destination(route.destination.to_string());
    entry.set_next_hop(route.next_hop.to_string());
    entry.set_hops(route.hops);
  }
  return response;
}

proto::AdminResponse AdminService::topology() const {
  proto::AdminResponse response;
  proto::TopologyReply& reply = *response.mutable_topology();
  for (const auto& tuple : node_.olsr().topology()) {
    proto::TopologyEntry& entry = *reply.add_entries();
    entry.set_destination(tuple.dest.to_string());
    entry.set_last_hop(tuple.last.to_string());
    entry.set_ansn(tuple.ansn);
    entry.set_expires_in_s(tuple.seconds_left);
  }
  for (const auto& hna : node_.olsr().hna()) {
    proto::HnaAnnouncement& entry = *reply.add_hna();
    entry.set_gateway(hna.gateway.to_string());
    entry.set_network(fmt::format("{}/{}", hna.network.network.to_string(), prefix_length(hna.network.netmask)));
    entry.set_expires_in_s(hna.seconds_left);
  }
  return response;
}

proto::AdminResponse AdminService::members(const proto::MembersRequest& request) const {
  proto::AdminResponse response;
  proto::MembersReply& reply = *response.mutable_members();
  const membership::Medley& medley = node_.medley();
  reply.set_version(medley.version());
  const core::TimePoint now = node_.env().now();
  for (const auto& status : medley.status(request.all())) {
    const membership::Member& member = status.member;
    proto::MemberEntry& entry = *reply.add_members();
    entry.set_name(member.name);
    entry.set_id(member.id.to_string());
    entry.set_state(std::string(membership::to_string(member.state)));
    entry.set_incarnation(member.incarnation);
    entry.set_hops(status.hops ? static_cast<int32_t>(*status.hops) : -1);
    entry.set_last_heard_s_ago(status.last_heard ? core::to_seconds(now - *status.last_heard) : -1.0);
    for (const auto& [key, value] : member.metadata) {
      proto::MemberMetadata& item = *entry.add_metadata();
      item.set_key(key);
      item.set_value(value);
    }
  }
  return response;
}

void AdminService::lock(const proto::LockRequest& request, Reply reply, ConnectionId connection) {
  const std::string& resource = request.resource();
  for (const auto& [handle, claim] : claims_) {
    if (claim.connection != 0 && claim.connection == connection && claim.resource == resource) {
      reply(error_response(
          fmt::format("this connection already {} lock '{}'", claim.granted ? "holds" : "waits for", resource)));
      return;
    }
  }
  const core::Duration timeout = request.timeout_ms() == 0
                                     ? mutex::Camera::kNoTimeout
                                     : core::Duration(std::chrono::milliseconds(request.timeout_ms()));
  // Camera may answer from inside acquire() (a bad name, or a grant when
  // this node knows no other member), before the handle is known.
  struct Pending {
    mutex::AcquireHandle handle = 0;
    bool registered = false;
    bool failed = false;
    bool granted = false;
  };
  auto pending = std::make_shared<Pending>();
  const mutex::AcquireHandle handle = node_.camera().acquire(
      resource, timeout, [this, pending, resource, reply = std::move(reply)](const mutex::AcquireResult& result) {
        if (!result) {
          pending->failed = true;
          if (pending->registered) claims_.erase(pending->handle);
          reply(error_response(result.error() == mutex::AcquireError::timeout
                                   ? fmt::format("lock '{}' not granted within the timeout", resource)
                                   : fmt::format("cannot lock '{}': {} (names are 1 to {} bytes)", resource,
                                                 mutex::to_string(result.error()),
                                                 node_.config().mutex.max_resource_name)));
          return;
        }
        pending->granted = true;
        if (pending->registered) {
          if (auto it = claims_.find(pending->handle); it != claims_.end()) it->second.granted = true;
        }
        proto::AdminResponse response;
        proto::LockReply& lock = *response.mutable_lock();
        lock.set_resource(resource);
        lock.set_fencing_token(result->fencing_token);
        lock.set_waited_ms(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(result->granted_at - result->requested_at).count()));
        lock.set_slow_path(result->slow_path);
        core::log("agent").info("lock granted resource={} token={} slow_path={}", resource, result->fencing_token,
                                result->slow_path);
        reply(std::move(response));
      });
  if (pending->failed) return;
  pending->handle = handle;
  pending->registered = true;
  claims_[handle] = LockClaim{connection, resource, pending->granted};
}

proto::AdminResponse AdminService::unlock(const proto::UnlockRequest& request, ConnectionId connection) {
  proto::AdminResponse response;
  bool released = false;
  for (auto it = claims_.begin(); it != claims_.end(); ++it) {
    if (it->second.connection == connection && it->second.resource == request.resource() && it->second.granted) {
      released = node_.camera().cancel(it->first);
      claims_.erase(it);
      break;
    }
  }
  response.mutable_unlock()->set_released(released);
  return response;
}

void AdminService::connection_closed(ConnectionId connection) {
  if (connection == 0) return;
  devices_.connection_closed(connection);
  for (auto it = claims_.begin(); it != claims_.end();) {
    if (it->second.connection != connection) {
      ++it;
      continue;
    }
    core::log("agent").info("lock {} resource={} reason=admin_connection_closed",
                            it->second.granted ? "released" : "withdrawn", it->second.resource);
    node_.camera().cancel(it->first);
    it = claims_.erase(it);
  }
}

proto::AdminResponse AdminService::locks() const {
  proto::AdminResponse response;
  proto::LocksReply& reply = *response.mutable_locks();
  for (const auto& status : node_.camera().status()) {
    proto::LockEntry& entry = *reply.add_locks();
    entry.set_resource(status.resource);
    entry.set_phase(status.lapsed ? "lapsed" : std::string(phase_name(status.phase)));
    entry.set_fencing_token(status.fencing_token);
    if (status.request) entry.set_request(status.request->to_string());
    entry.set_slow_path(status.slow_path);
    entry.set_awaiting_oks(static_cast<uint32_t>(status.awaiting_oks));
    entry.set_queued_locally(static_cast<uint32_t>(status.queued_locally));
    entry.set_deferred(static_cast<uint32_t>(status.deferred));
    entry.set_recently_oked(static_cast<uint32_t>(status.recently_oked));
  }
  return response;
}

proto::AdminResponse AdminService::metrics() const {
  proto::AdminResponse response;
  proto::MetricsReply& metrics = *response.mutable_metrics();
  const core::Metrics& source = node_.metrics();
  for (const auto& row : source.counters()) {
    proto::CounterSample& sample = *metrics.add_counters();
    sample.set_series(row.series);
    sample.set_name(row.name);
    fill_labels(row.labels, *sample.mutable_labels());
    sample.set_value(row.value);
  }
  for (const auto& row : source.histograms()) {
    proto::HistogramSample& sample = *metrics.add_histograms();
    sample.set_series(row.series);
    sample.set_name(row.name);
    fill_labels(row.labels, *sample.mutable_labels());
    sample.set_count(row.histogram->count());
    sample.set_mean(row.histogram->mean());
    sample.set_p50(row.histogram->quantile(0.5));
    sample.set_p99(row.histogram->quantile(0.99));
    sample.set_max(row.histogram->max());
    for (const core::Histogram::Bucket& bucket : row.histogram->buckets()) {
      proto::HistogramBucket& out = *sample.add_buckets();
      out.set_value(bucket.value);
      out.set_count(bucket.count);
    }
  }
  return response;
}

proto::AdminResponse AdminService::log_level(const proto::LogLevelRequest& request) const {
  const std::string& level = request.level();
  const std::string& layer = request.layer();
  if (std::find(kLevels.begin(), kLevels.end(), level) == kLevels.end()) {
    return error_response(fmt::format("unknown log level '{}'; valid levels: {}", level, fmt::join(kLevels, ", ")));
  }
  const std::vector<std::string> layers = core::log_layers();
  if (!layer.empty() && std::find(layers.begin(), layers.end(), layer) == layers.end()) {
    return error_response(
        fmt::format("unknown layer '{}'; valid layers: {} (or none for every layer)", layer, fmt::join(layers, ", ")));
  }
  if (!core::set_log_level(level, layer)) {
    return error_response(fmt::format("could not set log level '{}' for layer '{}'", level, layer));
  }
  core::log("agent").info("log level changed level={} layer={}", level, layer.empty() ? "*" : layer);
  proto::AdminResponse response;
  proto::LogLevelReply& reply = *response.mutable_log_level();
  reply.set_level(level);
  if (layer.empty()) {
    for (const std::string& name : core::log_layers()) reply.add_layers(name);
  } else {
    reply.add_layers(layer);
  }
  return response;
}

void AdminService::ping(const proto::PingRequest& request, Reply reply) {
  const std::optional<core::NodeId> destination = core::NodeId::parse(request.node());
  if (!destination) {
    reply(error_response(
        fmt::format("not an IPv4 address: '{}' (a node is named by its address, e.g. 10.0.0.2)", request.node())));
    return;
  }
  const core::Duration timeout = std::chrono::milliseconds(request.timeout_ms());
  const std::string node_text = destination->to_string();
  node_.ping(*destination, timeout, [node_text, reply = std::move(reply)](const EchoService::Result& result) {
    if (result.status != core::RequestStatus::ok) {
      reply(error_response(result.error));
      return;
    }
    proto::AdminResponse response;
    proto::PingReply& ping = *response.mutable_ping();
    ping.set_node(node_text);
    ping.set_rtt_ms(result.rtt_ms);
    ping.set_hops(result.hops);
    ping.set_attempts(result.attempts);
    reply(std::move(response));
  });
}

namespace {

void fill_member(const membership::MemberView& view, core::NodeId id, proto::KgroupMember& out) {
  out.set_id(id.to_string());
  if (const auto member = view.member(id)) out.set_name(member->name);
}

std::string_view role_name(kgroup::Role role) { return kgroup::to_string(role); }

constexpr std::string_view kTargetForm = "device:ID, cluster:ID or routine:ID (e.g. device:lamp)";

}  // namespace

proto::AdminResponse AdminService::kgroups() const {
  proto::AdminResponse response;
  proto::KgroupsReply& reply = *response.mutable_kgroups();
  const membership::MemberView& view = node_.members();
  // GroupHost lists its groups sorted by (target, epoch, generation).
  for (kgroup::GroupReplica* replica : node_.kgroups().host().replicas()) {
    const kgroup::GroupConfig& config = replica->config();
    proto::KgroupEntryStatus& entry = *reply.add_groups();
    entry.set_target(config.target.to_string());
    entry.set_epoch(config.epoch);
    entry.set_generation(config.generation);
    entry.set_role(std::string(role_name(replica->role())));
    entry.set_term(replica->term());
    if (!replica->leader().is_unspecified()) entry.set_leader(replica->leader().to_string());
    for (const core::NodeId id : config.members) fill_member(view, id, *entry.add_members());
    entry.set_commit(replica->commit());
    entry.set_sealed(replica->sealed());
    if (const auto* log = dynamic_cast<const TextLog*>(&replica->state_machine())) {
      entry.set_log_entries(log->records().size());
    }
  }
  return response;
}

proto::AdminResponse AdminService::kgroup(const proto::KgroupRequest& request) {
  const auto target = kgroup::GroupTarget::parse(request.target());
  if (!target) {
    return error_response(fmt::format("'{}' is not a k-group target: write {}", request.target(), kTargetForm));
  }
  proto::AdminResponse response;
  proto::KgroupReply& reply = *response.mutable_kgroup();
  const KgroupService& kgroups = node_.kgroups();
  const kgroup::GroupSelector::Selected selected = kgroups.select(*target);
  reply.set_target(target->to_string());
  reply.set_epoch(selected.epoch);
  if (!selected.members.empty()) reply.set_leader(selected.members.front().id.to_string());
  for (const kgroup::ScoredMember& member : selected.members) {
    proto::KgroupMember& out = *reply.add_members();
    fill_member(node_.members(), member.id, out);
    out.set_score(fmt::format("{:016x}", member.score));
  }
  reply.set_selection_json(kgroups.selector().to_json(selected));
  if (!request.log()) return response;
  kgroup::GroupReplica* replica = node_.kgroups().host().latest(target->to_string());
  if (replica == nullptr) {
    return error_response(
        fmt::format("this node ({}) serves in no group of {}, so it holds no log of it; ask one of "
                    "its members (meshctl kgroup {} lists them)",
                    node_.id().to_string(), target->to_string(), target->to_string()));
  }
  reply.set_log_epoch(replica->config().epoch);
  reply.set_log_generation(replica->config().generation);
  reply.set_log_role(std::string(role_name(replica->role())));
  reply.set_log_sealed(replica->sealed());
  if (const auto* log = dynamic_cast<const TextLog*>(&replica->state_machine())) {
    for (const TextLog::Record& record : log->records()) {
      proto::TextLogRecord& out = *reply.add_records();
      out.set_seq(record.seq);
      out.set_text(record.text);
    }
  }
  return response;
}

void AdminService::kgroup_through_leader(const proto::KgroupRequest& request, Reply reply) {
  const auto target = kgroup::GroupTarget::parse(request.target());
  if (!target) {
    reply(error_response(fmt::format("'{}' is not a k-group target: write {}", request.target(), kTargetForm)));
    return;
  }
  if (!request.log()) {
    reply(error_response("through_leader reads the log: set log too (meshctl kgroup TARGET --log --through-leader)"));
    return;
  }
  KgroupService& kgroups = node_.kgroups();
  read_leader_log(
      kgroups, *target, std::chrono::milliseconds(request.timeout_ms()), kgroups.config().replica.max_batch_bytes,
      [alive = alive_, reply = std::move(reply),
       target_text = target->to_string()](const core::Expected<LeaderLog, std::string>& result) {
        if (!*alive) return;
        if (!result) {
          reply(error_response(fmt::format(
              "no leader of {} answered a read of its log: {} (a group electing, or on the other side of a "
              "partition, answers nothing; try a longer --timeout, or --log without --through-leader for this "
              "node's possibly stale copy)",
              target_text, result.error())));
          return;
        }
        proto::AdminResponse response;
        proto::KgroupReply& out = *response.mutable_kgroup();
        out.set_target(target_text);
        out.set_log_epoch(result->epoch);
        out.set_log_generation(result->generation);
        out.set_log_role(std::string(kgroup::to_string(kgroup::Role::leader)));
        out.set_log_leader(result->leader.to_string());
        out.set_log_term(result->term);
        for (const TextLog::Record& record : result->records) {
          proto::TextLogRecord& entry = *out.add_records();
          entry.set_seq(record.seq);
          entry.set_text(record.text);
        }
        reply(std::move(response));
      });
}

void AdminService::kgroup_write(const proto::KgroupWriteRequest& request, Reply reply) {
  const auto target = kgroup::GroupTarget::parse(request.target());
  if (!target) {
    reply(error_response(fmt::format("'{}' is not a k-group target: write {}", request.target(), kTargetForm)));
    return;
  }
  const size_t limit = node_.kgroups().config().max_text_bytes;
  if (request.text().size() > limit) {
    reply(error_response(
        fmt::format("the text is {} bytes; a log entry holds at most {}", request.text().size(), limit)));
    return;
  }
  node_.kgroups().write(
      *target, request.text(), std::chrono::milliseconds(request.timeout_ms()),
      [alive = alive_, reply = std::move(reply),
       target_text = target->to_string()](const core::Expected<KgroupService::WriteResult, std::string>& result) {
        if (!*alive) return;
        if (!result) {
          reply(error_response(fmt::format("write to {} not acknowledged: {}", target_text, result.error())));
          return;
        }
        proto::AdminResponse response;
        proto::KgroupWriteReply& out = *response.mutable_kgroup_write();
        out.set_seq(result->seq);
        out.set_leader(result->leader.to_string());
        out.set_epoch(result->epoch);
        out.set_generation(result->generation);
        out.set_attempts(result->attempts);
        reply(std::move(response));
      });
}

}  // namespace mesh::agent
