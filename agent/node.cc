#include "agent/node.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "agent/output_commit_drivers.h"
#include "agent/text_log.h"
#include "core/log.h"
#include "proto/wire.pb.h"
#include "routine/catalog_log.h"
#include "routine/device_codec.h"
#include "routine/device_group_state.h"

namespace mesh::agent {
namespace {

constexpr std::string_view kBootKey = "auth/boot";
// The boot count fills the high half of the authentication counter, so each
// boot may send 2^32 datagrams before its counters could reach the next
// boot's.
constexpr unsigned kBootCounterShift = 32;

uint64_t read_boot_count(const core::Storage& storage) {
  const core::StoredValue stored = storage.read(kBootKey);
  if (stored.damaged()) {
    throw std::runtime_error(fmt::format(
        "storage key {} is damaged (checksum mismatch); the authentication counter cannot be restored safely. "
        "Remove the file of that key under the data directory and restart every agent of the mesh (their replay "
        "windows would otherwise drop this node's restarted counters)",
        kBootKey));
  }
  if (!stored.found()) return 0;
  const std::string* text = &stored.value;
  uint64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || text->empty()) {
    throw std::runtime_error(
        fmt::format("storage key {} holds '{}', not a decimal boot count; the authentication counter cannot be "
                    "restored safely (fix or remove the key)",
                    kBootKey, *text));
  }
  return value;
}

// The factory of a node given no drivers: it leads no device.
class NoDrivers : public routine::DriverFactory {
 public:
  core::Expected<std::unique_ptr<routine::DeviceDriver>, std::string> open(
      const routine::DeviceSpec& device) override {
    return core::Unexpected(fmt::format("this node has no device drivers (driver {})", device.driver));
  }
};

std::vector<kgroup::DeviceLocation> locations_of(const routine::Catalog& catalog) {
  std::vector<kgroup::DeviceLocation> out;
  for (const auto& [id, spec] : catalog.devices()) out.push_back({id, spec.location});
  return out;
}

}  // namespace

Node::Node(const NodeConfig& config, NodeContext context)
    : config_(config), context_(context), started_at_(context.env.now()) {
  auto opened = core::ChecksummedStorage::open(context_.storage);
  if (!opened) throw std::runtime_error(opened.error());
  storage_ = std::move(*opened);
  const uint64_t previous = read_boot_count(*storage_);
  if ((previous + 1) >> (64 - kBootCounterShift) != 0) {
    throw std::runtime_error(
        fmt::format("storage key {} holds boot count {}, too large for the "
                    "authentication counter",
                    kBootKey, previous));
  }
  boot_count_ = previous + 1;
  if (!storage_->put(kBootKey, std::to_string(boot_count_))) {
    throw std::runtime_error(
        fmt::format("cannot persist boot count {} to storage key {}; refusing to start, "
                    "since authentication counters could repeat after a restart",
                    boot_count_, kBootKey));
  }

  auth_ = std::make_unique<core::PacketAuth>(config_.mesh_key, config_.id, boot_count_ << kBootCounterShift,
                                             config_.replay_window);
  if (config_.accepted_mesh_key) auth_->also_accept(*config_.accepted_mesh_key);
  link_ = std::make_unique<core::AuthenticatedLink>(context_.agent_link, *auth_, config_.id, metrics_);
  routing::olsr::OlsrOptions olsr_options = config_.routing;
  olsr_options.main_address = config_.id;
  // Each boot's TCs newer than the previous boot's (see first_ansn).
  olsr_options.first_ansn = routing::olsr::first_ansn_of_boot(boot_count_);
  olsr_ = std::make_unique<routing::olsr::OlsrProtocol>(context_.env, context_.olsr_link, metrics_, olsr_options);
  routing::AgentDirectory::Options presence;
  presence.mesh_key = config_.mesh_key.bytes();
  if (config_.accepted_mesh_key) presence.accepted_mesh_key = config_.accepted_mesh_key->bytes();
  presence.first_counter = boot_count_ << kBootCounterShift;
  presence.interval = olsr_options.tc_interval;
  presence.hold = olsr_options.top_hold;
  agents_ = std::make_unique<routing::AgentDirectory>(context_.env, *olsr_, metrics_, std::move(presence));
  olsr_->set_routes_changed([this, symmetric = size_t{0}]() mutable {
    // A neighbour turning symmetric (or lost) always changes the one-hop
    // routes, so this is where Medley learns whom to join through.
    if (medley_ && medley_->running()) medley_->set_contacts(medley_contacts());
    // A new neighbour processes flooded messages from us only now that the
    // link is symmetric: announce again rather than wait a whole interval.
    const size_t now_symmetric = symmetric_neighbours().size();
    if (now_symmetric > symmetric) agents_->announce();
    symmetric = now_symmetric;
    const std::vector<routing::olsr::Route> routes = olsr_->routes();
    for (const auto& listener : routes_listeners_) listener(routes);
  });
  agents_->set_agent_joined([this](core::NodeId) {
    if (medley_ && medley_->running()) medley_->set_contacts(medley_contacts());
  });
  transport_ = std::make_unique<routing::OlsrTransport>(context_.env, *link_, *olsr_, metrics_, config_.transport,
                                                        config_.mixed_mesh ? agents_.get() : nullptr);
  core::Transport* messenger_transport = transport_.get();
  if (config_.output_commit) {
    // Medley (failure detection, gossip) and echo read no stored state, and
    // must keep flowing while the disk is slow; everything else waits for it.
    output_commit_ = std::make_unique<core::OutputCommitTransport>(
        context_.env, *transport_, *storage_, metrics_,
        std::set<uint32_t>{proto::Envelope::kMembershipFieldNumber, proto::Envelope::kEchoFieldNumber});
    messenger_transport = output_commit_.get();
  }
  messenger_ = std::make_unique<core::Messenger>(context_.env, *messenger_transport, metrics_, config_.messaging);
  echo_ = std::make_unique<EchoService>(context_.env, *messenger_, [this](core::NodeId destination) -> std::string {
    if (destination == config_.id || olsr_->route_to(destination)) return {};
    return fmt::format("no route to {}: OLSR has not learned one (yet), or the node is unreachable",
                       destination.to_string());
  });
  hop_distances_ = std::make_unique<membership::OlsrHopDistances>(context_.env, *olsr_);
  membership::MedleyOptions medley_options = config_.membership;
  medley_options.name = config_.name;
  medley_options.location = config_.location;
  medley_ = std::make_unique<membership::Medley>(context_.env, *messenger_, metrics_, *hop_distances_,
                                                 std::move(medley_options));
  camera_ = std::make_unique<mutex::Camera>(context_.env, *messenger_, *medley_, metrics_, *storage_, config_.mutex);
  routine_messages_ = std::make_unique<routine::RoutineMessages>(*messenger_, metrics_);
  catalog_.set_base(config_.devices.catalog, config_.devices.catalog_digest, config_.devices.routines,
                    config_.devices.preconditions);
  catalog_sync_ = std::make_unique<routine::CatalogSync>(context_.env, *routine_messages_, *storage_, *medley_,
                                                         metrics_, catalog_, config_.devices.sync);
  catalog_sync_->start();
  // Each group hosts the state its target needs: the catalog's change list,
  // a device cluster's device states, commands and locks, a routine's
  // invocations, or a text log.
  auto state_for = [this](const kgroup::GroupTarget& target) -> std::unique_ptr<kgroup::StateMachine> {
    switch (target.kind) {
      case kgroup::TargetKind::catalog:
        return std::make_unique<routine::CatalogLog>(
            [this](const proto::CatalogEntry& entry) { catalog_sync_->learn(entry); });
      case kgroup::TargetKind::cluster:
        return std::make_unique<routine::DeviceGroupState>();
      case kgroup::TargetKind::routine:
        return std::make_unique<routine::RoutineGroupState>();
      case kgroup::TargetKind::device:
        break;
    }
    return std::make_unique<TextLog>();
  };
  // Rejoins the groups persisted in storage (after a restart) right away.
  kgroups_ = std::make_unique<KgroupService>(context_.env, *messenger_, *storage_, *medley_, metrics_, config_.kgroup,
                                             state_for);
  kgroups_->set_devices(locations_of(catalog_));
  catalog_.set_on_change([this] { kgroups_->set_devices(locations_of(catalog_)); });
  routine::DriverFactory* drivers = context_.drivers;
  if (drivers == nullptr) {
    no_drivers_ = std::make_unique<NoDrivers>();
    drivers = no_drivers_.get();
  }
  if (config_.output_commit) {
    output_commit_drivers_ = std::make_unique<OutputCommitDrivers>(
        *drivers, [this](std::function<void()> action) { after_durable(std::move(action)); });
    drivers = output_commit_drivers_.get();
  }
  routine::DeviceLeaderOptions leader_options = config_.devices.leaders;
  leader_options.clock_origin = config_.kgroup.epoch_origin;
  leader_options.max_update_bytes = config_.kgroup.replica.max_update_bytes - 8;  // the write id
  device_leaders_ =
      std::make_unique<routine::DeviceLeaders>(context_.env, kgroups_->host(), kgroups_->selector(), catalog_, *drivers,
                                               *routine_messages_, metrics_, *kgroups_, leader_options);
  device_watcher_ = std::make_unique<routine::DeviceWatcher>(
      context_.env, *routine_messages_, kgroups_->selector(), catalog_,
      [this](const kgroup::GroupTarget& target) { return kgroups_->current_epoch(target); },
      [this](const kgroup::GroupTarget& target, routine::DeviceWatcher::Located done) {
        proto::DeviceQuery query;
        query.set_all_devices(true);
        kgroups_->read(target, query.SerializeAsString(), config_.devices.watcher.renew_interval,
                       [done = std::move(done)](const auto& result) {
                         const auto reply =
                             result ? routine::parse_message<proto::DeviceQueryReply>(result->answer) : std::nullopt;
                         if (!reply) {
                           done(std::nullopt, {});
                           return;
                         }
                         done(result->leader, {reply->devices().begin(), reply->devices().end()});
                       });
      },
      config_.devices.watcher);
  devices_ = std::make_unique<DeviceService>(context_.env, config_.id, *kgroups_, *medley_, catalog_, metrics_,
                                             config_.devices.service);
  routine::RoutineLeaderOptions routine_options = config_.routines.leaders;
  routine_options.clock_origin = config_.kgroup.epoch_origin;
  routine_leaders_ = std::make_unique<routine::RoutineLeaders>(
      context_.env, kgroups_->host(), kgroups_->selector(),
      [this](const kgroup::GroupTarget& target) { return kgroups_->current_epoch(target); }, catalog_, *kgroups_,
      *device_watcher_, *routine_messages_, *camera_, metrics_, routine_options);
  routines_ = std::make_unique<RoutineService>(context_.env, *kgroups_, catalog_, metrics_, config_.routines.service,
                                               config_.kgroup.epoch_origin);
  core::log("agent").info("node created id={} name={} boot={}", config_.id.to_string(), config_.name, boot_count_);
}

Node::~Node() {
  *alive_ = false;
  // The catalog's listener calls into the k-groups, which go first.
  catalog_.set_on_change({});
}

void Node::after_durable(std::function<void()> action) {
  storage_->after_durable([alive = alive_, action = std::move(action)] {
    if (*alive) action();
  });
}

void Node::start() {
  after_durable([this] { start_now(); });
}

void Node::start_now() {
  started_at_ = context_.env.now();
  olsr_->start();
  if (config_.routing_only) {
    core::log("agent").info("routing only: OLSR runs, agent messages are neither sent nor relayed id={}",
                            config_.id.to_string());
    return;
  }
  if (config_.mixed_mesh) agents_->start();
  medley_->start(medley_contacts());
  device_leaders_->start();
  devices_->start();
  routine_leaders_->start();
}

void Node::leave() {
  if (config_.routing_only || medley_->has_left()) return;
  core::log("agent").info("node leaving the membership id={}", config_.id.to_string());
  medley_->leave();
}

std::vector<core::NodeId> Node::symmetric_neighbours() const {
  std::vector<core::NodeId> ids;
  for (const auto& neighbour : olsr_->neighbours()) {
    if (neighbour.status == routing::olsr::LinkStatus::symmetric) ids.push_back(neighbour.main);
  }
  return ids;
}

std::vector<core::NodeId> Node::medley_contacts() const {
  std::vector<core::NodeId> contacts = symmetric_neighbours();
  if (!config_.mixed_mesh) return contacts;
  for (core::NodeId agent : agents_->agents_beyond_plain_routers()) {
    if (std::find(contacts.begin(), contacts.end(), agent) == contacts.end()) contacts.push_back(agent);
  }
  return contacts;
}

core::Duration Node::uptime() const { return context_.env.now() - started_at_; }

std::vector<Node::LayerLine> Node::status() const {
  std::vector<LayerLine> lines;
  lines.push_back({"core", fmt::format("boot {}, auth counter {}, {} auth drops", boot_count_, auth_->next_counter(),
                                       metrics_.total("auth_dropped_total"))});
  size_t symmetric = 0;
  for (const auto& neighbour : olsr_->neighbours()) {
    symmetric += neighbour.status == routing::olsr::LinkStatus::symmetric ? 1 : 0;
  }
  lines.push_back(
      {"routing", fmt::format("olsr: {} symmetric neighbours, {} MPRs, {} MPR selectors, {} routes, {} "
                              "topology entries, {} forwarded, {} dropped; {} other agents known, {} beyond plain "
                              "routers, {} sent end to end{}",
                              symmetric, olsr_->mprs().size(), olsr_->mpr_selectors().size(), olsr_->routes().size(),
                              olsr_->topology().size(), metrics_.total("transport_forwarded_total"),
                              metrics_.total("transport_dropped_total"), agents_->agents().size(),
                              agents_->agents_beyond_plain_routers().size(),
                              metrics_.total("transport_routed_sent_total"),
                              config_.routing_only ? "; routing only" : "")});
  lines.push_back({"messenger", fmt::format("{} pending requests, {} retransmits, {} timeouts, {} held for the disk",
                                            messenger_->pending_requests(), metrics_.total("request_retransmits_total"),
                                            metrics_.total("request_timeouts_total"), held_messages())});
  const membership::Medley& medley = *medley_;
  size_t suspect = 0;
  const std::vector<membership::Member> live = medley.live_members();
  for (const auto& member : live) suspect += member.state == membership::MemberState::suspect ? 1 : 0;
  lines.push_back({"membership", fmt::format("medley: {} live members ({} suspect), incarnation {}, local health {}{}",
                                             live.size(), suspect, medley.incarnation(), medley.local_health(),
                                             medley.has_left() ? ", left" : "")});
  size_t held = 0;
  size_t waiting = 0;
  const std::vector<mutex::Camera::ResourceStatus> resources = camera_->status();
  for (const auto& resource : resources) {
    held += resource.phase == mutex::Camera::Phase::held ? 1 : 0;
    waiting += resource.phase == mutex::Camera::Phase::waiting ? 1 : 0;
  }
  lines.push_back({"mutex", fmt::format("camera: {} resources, {} held, {} waiting", resources.size(), held, waiting)});
  size_t leading = 0;
  const std::vector<kgroup::GroupReplica*> groups = kgroups_->host().replicas();
  for (const kgroup::GroupReplica* replica : groups) leading += replica->role() == kgroup::Role::leader ? 1 : 0;
  lines.push_back(
      {"kgroup", fmt::format("k={}: serving in {} groups, leading {}; {} client writes in flight",
                             kgroups_->config().selection.k, groups.size(), leading, kgroups_->writes_in_flight())});
  lines.push_back({"devices", fmt::format("catalog: {} devices, run-time version {}; leading {}, {} subscribers, "
                                         "watching {}, {} client commands done",
                                         catalog_.devices().size(), catalog_.version(),
                                         device_leaders_->led_devices().size(), device_leaders_->subscriptions(),
                                         device_watcher_->view().size(), metrics_.total("device_client_commands_total"))});
  lines.push_back({"routines", fmt::format("catalog: {} routines; leading {}, {} triggers, {} invocations ended",
                                          catalog_.routines().size(), routine_leaders_->led_routines().size(),
                                          metrics_.total("routine_triggers_total"),
                                          metrics_.total("routine_invocations_total"))});
  return lines;
}

void Node::ping(core::NodeId destination, core::Duration timeout, EchoService::Callback callback) {
  if (timeout <= core::Duration::zero()) timeout = config_.ping_timeout;
  echo_->ping(destination, timeout, std::move(callback));
}

}  // namespace mesh::agent
