#include "routing/olsr_protocol.h"

#include <algorithm>
#include <string>

#include "core/log.h"
#include "routing/mpr_selection.h"
#include "routing/olsr_vtime.h"

namespace mesh::routing::olsr {
namespace {

// A tuple whose time is at or before now is gone; the expiry timer fires at
// exactly that instant, so nothing stale outlives it.
bool alive(core::TimePoint time, core::TimePoint now) { return time > now; }

std::string_view type_name(uint8_t type) {
  switch (type) {
    case static_cast<uint8_t>(MessageType::hello):
      return "hello";
    case static_cast<uint8_t>(MessageType::tc):
      return "tc";
    case static_cast<uint8_t>(MessageType::mid):
      return "mid";
    case static_cast<uint8_t>(MessageType::hna):
      return "hna";
    default:
      return "other";
  }
}

// The slot of a message type in OlsrProtocol's counters: 0 for every type
// type_name() calls "other", the known types at their number.
size_t counted_type(uint8_t type) { return type <= static_cast<uint8_t>(MessageType::hna) ? type : 0; }

double seconds_between(core::TimePoint later, core::TimePoint now) { return core::to_seconds(later - now); }

uint64_t duplicate_key(core::NodeId originator, uint16_t seq) { return uint64_t{originator.value()} << 16 | seq; }

// Neither the ttl nor the hop count of a retransmission may wrap (§3.4.1 keeps
// their sum constant, so a sum above 255 can only come from a broken sender).
constexpr unsigned kMaxTtlPlusHops = 255;

}  // namespace

uint16_t first_ansn_of_boot(uint64_t boot_count) { return static_cast<uint16_t>(boot_count << 12); }

bool seq_newer(uint16_t a, uint16_t b) {
  constexpr uint16_t kHalf = 0x8000;
  return (a > b && a - b <= kHalf) || (b > a && b - a > kHalf);
}

std::string_view to_string(LinkStatus status) {
  switch (status) {
    case LinkStatus::symmetric:
      return "symmetric";
    case LinkStatus::asymmetric:
      return "asymmetric";
    case LinkStatus::lost:
      return "lost";
  }
  return "lost";
}

OlsrProtocol::OlsrProtocol(core::Env& env, core::Link& link, core::Metrics& metrics, Options options)
    : env_(env),
      link_(link),
      metrics_(metrics),
      options_(std::move(options)),
      hello_timer_(env),
      tc_timer_(env),
      mid_timer_(env),
      hna_timer_(env),
      flush_timer_(env),
      expiry_timer_(env),
      route_timer_(env) {
  // Random starting points: a restarted node must not have its fresh messages
  // taken for duplicates by neighbours that still remember its previous run.
  message_seq_ = static_cast<uint16_t>(env_.rng().below(0x10000));
  packet_seq_ = static_cast<uint16_t>(env_.rng().below(0x10000));
  const auto random_ansn = static_cast<uint16_t>(env_.rng().below(0x10000));
  ansn_ = options_.first_ansn.value_or(random_ansn);
}

OlsrProtocol::~OlsrProtocol() {
  if (running_) link_.set_receiver({});
}

void OlsrProtocol::start() {
  if (running_) return;
  running_ = true;
  link_.set_receiver([this](core::Ipv4Address from, core::ByteSpan datagram) { receive(from, datagram); });
  core::log("routing").info("olsr start main={} iface={} willingness={}", options_.main_address.to_string(),
                             link_.local_address().to_string(), options_.willingness);
  // Every type is first due one MAXJITTER from now and fires a jitter before
  // that, so a node is heard at once; when packing, the first timer to fire
  // takes every other type along.
  const core::TimePoint first = env_.now() + max_jitter();
  for (size_t i = 0; i < kPeriodicTypes; ++i) {
    due_[i] = first;
    arm(static_cast<Periodic>(i));
  }
}

void OlsrProtocol::stop() {
  if (!running_) return;
  running_ = false;
  link_.set_receiver({});
  hello_timer_.cancel();
  tc_timer_.cancel();
  mid_timer_.cancel();
  hna_timer_.cancel();
  flush_timer_.cancel();
  flush_deadline_.reset();
  expiry_timer_.cancel();
  route_timer_.cancel();
  outbox_.clear();
}

core::Duration OlsrProtocol::interval_of(Periodic type) const {
  switch (type) {
    case Periodic::tc:
      return options_.tc_interval;
    case Periodic::mid:
      return options_.mid_interval;
    case Periodic::hna:
      return options_.hna_interval;
    case Periodic::hello:
      break;
  }
  return options_.hello_interval;
}

core::Duration OlsrProtocol::hold_of(Periodic type) const {
  switch (type) {
    case Periodic::tc:
      return options_.top_hold;
    case Periodic::mid:
      return options_.mid_hold;
    case Periodic::hna:
      return options_.hna_hold;
    case Periodic::hello:
      break;
  }
  return options_.neighb_hold;
}

core::Duration OlsrProtocol::announced_hold(Periodic type) const {
  if (!options_.pack_messages || type == Periodic::hello) return hold_of(type);
  // A packed TC, MID or HNA keeps its nominal schedule but may leave up to
  // pack_advance() early, so n gaps span up to n x interval + that advance
  // where unpacked they span at most n x interval: announcing the hold plus
  // the advance covers as many lost messages in a row as the hold does
  // unpacked (two, with the RFC's 3 x interval).
  return hold_of(type) + pack_advance(type);
}

core::Duration OlsrProtocol::jitter_bound(Periodic) const { return max_jitter(); }

core::Duration OlsrProtocol::pack_advance(Periodic type) const {
  if (!options_.pack_messages || type == Periodic::hello) return jitter_bound(type);
  // The longest gap between two HELLOs, so a HELLO always passes while the
  // window is open; at most half an interval, so no gap is shorter than that.
  const core::Duration reach = options_.hello_interval + jitter_bound(Periodic::hello);
  return std::max(jitter_bound(type), std::min(reach, interval_of(type) / 2));
}

core::ScopedTimer& OlsrProtocol::timer_of(Periodic type) {
  switch (type) {
    case Periodic::tc:
      return tc_timer_;
    case Periodic::mid:
      return mid_timer_;
    case Periodic::hna:
      return hna_timer_;
    case Periodic::hello:
      break;
  }
  return hello_timer_;
}

void OlsrProtocol::arm(Periodic type) {
  // §3.5: actual interval = interval - jitter.
  const auto i = static_cast<size_t>(type);
  fire_at_[i] = std::max(due_[i] - jitter(jitter_bound(type)), env_.now());
  timer_of(type).start(fire_at_[i] - env_.now(), [this, type] { emit(type); });
}

core::Duration OlsrProtocol::max_jitter() const { return options_.max_jitter.value_or(options_.hello_interval / 4); }

core::Duration OlsrProtocol::jitter() { return jitter(max_jitter()); }

core::Duration OlsrProtocol::jitter(core::Duration bound) {
  if (bound.count() <= 0) return core::Duration::zero();
  return core::Duration(static_cast<int64_t>(env_.rng().below(static_cast<uint64_t>(bound.count()) + 1)));
}

// ---------------------------------------------------------------- receiving

void OlsrProtocol::receive(core::Ipv4Address from, core::ByteSpan datagram) {
  // Our own broadcasts looped back by the interface.
  if (is_own_address(from)) return;
  // The scratch list moves out for the call, so a re-entrant receive()
  // could not overwrite it.
  std::vector<ScannedMessage> scanned = std::move(scanned_);
  uint16_t packet_seq = 0;
  if (auto error = scan_packet(datagram, packet_seq, scanned)) {
    count_drop(to_string(*error));
    core::log("routing").debug("olsr drop from={} reason={} bytes={}", from.to_string(), to_string(*error),
                                datagram.size());
    scanned_ = std::move(scanned);
    return;
  }
  const core::TimePoint now = env_.now();
  for (const ScannedMessage& header : scanned) {
    count_message(header.type, header.size(), Direction::received);
    // §3.4 step 2.
    if (header.ttl == 0 || is_own_address(header.originator)) continue;
    // HELLOs travel one hop and are never forwarded nor deduplicated.
    if (header.type == static_cast<uint8_t>(MessageType::hello)) {
      const Message message = decode_message(header);
      process_hello(from, message, std::get<Hello>(message.body));
      continue;
    }
    // TC, MID, HNA processing (§9.5, §5.4, §12.5) and forwarding (§3.4.1)
    // both require the sender interface to be a symmetric neighbour.
    if (!is_symmetric_link(from)) {
      count_drop("not_symmetric");
      continue;
    }
    const uint64_t key = duplicate_key(header.originator, header.seq);
    DuplicateTuple* dup = duplicates_.find(key);
    if (dup != nullptr && !alive(dup->time, now)) {
      duplicates_.erase(key);
      dup = nullptr;
    }
    // Only a message seen for the first time is decoded here; a duplicate
    // is decoded only if it is to be retransmitted.
    std::optional<Message> message;
    if (dup == nullptr) {
      message = decode_message(header);
      std::visit(
          [&](const auto& body) {
            using Body = std::decay_t<decltype(body)>;
            if constexpr (std::is_same_v<Body, Tc>) {
              process_tc(*message, body);
            } else if constexpr (std::is_same_v<Body, Mid>) {
              process_mid(*message, body);
            } else if constexpr (std::is_same_v<Body, Hna>) {
              process_hna(*message, body);
            } else if constexpr (std::is_same_v<Body, OpaqueBody>) {
              if (extension_listener_) extension_listener_(*message, body);
            }
          },
          message->body);
      dup = &duplicates_.insert(key, DuplicateTuple{now + options_.dup_hold, false});
      duplicate_expiry_.emplace_back(dup->time, key);
    }
    consider_forwarding(from, header, message, *dup);
  }
  scanned_ = std::move(scanned);
  refresh();
}

void OlsrProtocol::process_hello(core::Ipv4Address from, const Message& message, const Hello& hello) {
  const core::TimePoint now = env_.now();
  const core::Duration validity = decode_vtime(message.vtime);
  const core::TimePoint expired = now - core::Duration(1);
  neighbourhood_touched_ = true;

  // §7.1.1 link sensing.
  auto [it, created] = links_.try_emplace(from);
  LinkTuple& link = it->second;
  if (created) {
    link.sym_time = expired;
    link.time = now + validity;
    core::log("routing").debug("olsr link heard iface={} main={}", from.to_string(),
                                message.originator.to_string());
  }
  if (link.neighbour_main != message.originator) {
    if (!created) routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
    link.neighbour_main = message.originator;
  }
  link.asym_time = now + validity;
  link.last_heard = now;
  for (const LinkGroup& group : hello.links) {
    if (neighbour_type_of(group.link_code) > static_cast<uint8_t>(NeighbourType::mpr)) continue;
    const LinkType type = link_type_of(group.link_code);
    for (core::Ipv4Address address : group.neighbours) {
      // Any of our addresses: on a node with several interfaces on one link
      // (one socket, one HELLO for all of them) the neighbour lists the
      // address it hears us on, which need not be the first.
      if (!is_own_address(address)) continue;
      if (type == LinkType::lost) {
        link.sym_time = expired;
      } else if (type == LinkType::symmetric || type == LinkType::asymmetric) {
        link.sym_time = now + validity;
        link.time = link.sym_time + options_.neighb_hold;
      }
    }
  }
  link.time = std::max(link.time, link.asym_time);

  // §8.1 neighbour set.
  auto [neighbour, new_neighbour] = neighbours_.try_emplace(message.originator);
  if (new_neighbour || neighbour->second.willingness != hello.willingness) {
    if (!new_neighbour) routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
    neighbour->second.willingness = hello.willingness;
  }

  if (!alive(link.sym_time, now)) return;
  // §8.2.1 two-hop set and §8.4.1 MPR selector set, from symmetric links only.
  for (const LinkGroup& group : hello.links) {
    const uint8_t neighbour_type = neighbour_type_of(group.link_code);
    if (neighbour_type > static_cast<uint8_t>(NeighbourType::mpr)) continue;
    for (core::Ipv4Address address : group.neighbours) {
      if (is_own_address(address)) {
        if (neighbour_type == static_cast<uint8_t>(NeighbourType::mpr)) {
          auto [selector, added] = mpr_selectors_.insert_or_assign(message.originator, now + validity);
          (void)selector;
          if (added) {
            selectors_changed_ = true;
            core::log("routing").info("olsr mpr selector added node={}", message.originator.to_string());
          }
        }
        continue;
      }
      const auto key = std::pair{message.originator, main_of(address)};
      if (neighbour_type == static_cast<uint8_t>(NeighbourType::not_neighbour)) {
        if (two_hop_.erase(key)) routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
      } else {
        auto [entry, added] = two_hop_.insert_or_assign(key, now + validity);
        (void)entry;
        if (added) routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
      }
    }
  }
}

void OlsrProtocol::process_tc(const Message& message, const Tc& tc) {
  // §9.5 step 2: a TC older than what we hold from this originator is stale.
  if (auto held = topology_.ansn_of(message.originator); held && seq_newer(*held, tc.ansn)) {
    count_drop("stale_ansn");
    return;
  }
  const core::TimePoint until = env_.now() + decode_vtime(message.vtime);
  if (topology_.apply_tc(message.originator, tc.ansn, tc.advertised, until)) routes_dirty_ = true;
}

void OlsrProtocol::process_mid(const Message& message, const Mid& mid) {
  const core::TimePoint until = env_.now() + decode_vtime(message.vtime);
  for (core::Ipv4Address iface : mid.interfaces) {
    if (iface == message.originator) continue;
    auto [it, added] = mid_.try_emplace(iface, MidTuple{message.originator, until});
    if (added) {
      mid_expiry_.add(iface, until);
    } else {
      mid_expiry_.move(iface, it->second.time, until);
      if (it->second.main != message.originator) added = true;
    }
    it->second = MidTuple{message.originator, until};
    if (added) routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
  }
}

void OlsrProtocol::process_hna(const Message& message, const Hna& hna) {
  const core::TimePoint until = env_.now() + decode_vtime(message.vtime);
  for (const HnaEntry& entry : hna.networks) {
    auto [it, added] = hna_.insert_or_assign(HnaKey{message.originator, entry.network, entry.netmask}, until);
    (void)it;
    if (added) {
      core::log("routing").debug("olsr hna gateway={} network={}/{}", message.originator.to_string(),
                                  entry.network.to_string(), entry.netmask.to_string());
    }
  }
}

void OlsrProtocol::consider_forwarding(core::Ipv4Address from, const ScannedMessage& header,
                                       std::optional<Message>& message, DuplicateTuple& duplicate) {
  // §3.4.1: each node retransmits a message at most once, and only when it
  // came from a neighbour that chose this node as its MPR.
  if (duplicate.retransmitted || header.ttl <= 1) return;
  const core::TimePoint now = env_.now();
  auto selector = mpr_selectors_.find(main_of(from));
  const bool from_selector = selector != mpr_selectors_.end() && alive(selector->second, now);
  if (!from_selector && options_.mpr_flooding) return;
  if (unsigned{header.ttl} + unsigned{header.hop_count} > kMaxTtlPlusHops) {
    count_drop("hop_limit");
    return;
  }
  duplicate.retransmitted = true;
  duplicate.time = now + options_.dup_hold;
  duplicate_expiry_.emplace_back(duplicate.time, duplicate_key(header.originator, header.seq));
  Message copy = message ? std::move(*message) : decode_message(header);
  message.reset();
  --copy.ttl;
  ++copy.hop_count;
  core::Counter*& forwarded = forwarded_[counted_type(header.type)];
  if (forwarded == nullptr) forwarded = &metrics_.counter("olsr_forwarded_total", "type", type_name(header.type));
  forwarded->add();
  // §3.5: a forwarded message waits a jitter, and meanwhile may share any
  // packet this node sends.
  enqueue(std::move(copy), now + jitter());
}

// ------------------------------------------------------------ state upkeep

void OlsrProtocol::refresh() {
  const core::TimePoint now = env_.now();
  // The link, neighbour, two-hop and MPR selector sets change only through a
  // HELLO or the passing of one of their times, so between the two a walk
  // would find nothing to do: most packets of a large mesh carry only
  // flooded TCs, and are spared it.
  if (neighbourhood_touched_ || !neighbourhood_next_change_ || now >= *neighbourhood_next_change_) {
    neighbourhood_touched_ = false;
    refresh_neighbourhood(now);
  }
  expire_topology(now);
  expire_mid(now);
  std::erase_if(hna_, [&](const auto& entry) { return !alive(entry.second, now); });

  if (neighbourhood_changed_) {
    neighbourhood_changed_ = false;
    recompute_mprs();
    // Classic flooding advertises the whole neighbourhood.
    if (!options_.mpr_flooding) ++ansn_;
  }
  if (selectors_changed_) {
    selectors_changed_ = false;
    // §9: the advertised set changed.
    ++ansn_;
    if (mpr_selectors_.empty()) selectors_emptied_at_ = now;
  }
  if (routes_dirty_) recalculate_routes_when_due(now);
  schedule_expiry();
}

void OlsrProtocol::refresh_neighbourhood(core::TimePoint now) {
  auto log = [] { return &core::log("routing"); };

  for (auto it = links_.begin(); it != links_.end();) {
    if (!alive(it->second.time, now)) {
      if (it->second.was_symmetric) routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
      log()->debug("olsr link expired iface={}", it->first.to_string());
      it = links_.erase(it);
      continue;
    }
    const bool symmetric = alive(it->second.sym_time, now);
    if (symmetric != it->second.was_symmetric) {
      it->second.was_symmetric = symmetric;
      routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
    }
    ++it;
  }

  // §8.1: a neighbour exists while a link to it does, and is symmetric while
  // one of those links is.
  link_symmetry_.clear();
  for (const auto& [iface, link] : links_) link_symmetry_.emplace_back(link.neighbour_main, link.was_symmetric);
  // Symmetric links first within each neighbour, so the first entry of a
  // neighbour says whether any of its links is symmetric.
  std::sort(link_symmetry_.begin(), link_symmetry_.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
  auto found = link_symmetry_.begin();
  for (auto it = neighbours_.begin(); it != neighbours_.end();) {
    while (found != link_symmetry_.end() && found->first < it->first) ++found;
    if (found == link_symmetry_.end() || found->first != it->first) {
      log()->info("olsr neighbour gone node={}", it->first.to_string());
      it = neighbours_.erase(it);
      continue;
    }
    if (found->second != it->second.symmetric) {
      it->second.symmetric = found->second;
      log()->info("olsr neighbour node={} status={}", it->first.to_string(),
                  found->second ? "symmetric" : "not_symmetric");
    }
    ++it;
  }
  auto symmetric_neighbour = [&](core::NodeId main) {
    auto it = neighbours_.find(main);
    return it != neighbours_.end() && it->second.symmetric;
  };

  // §8.5: losing a symmetric neighbour drops what it told us.
  for (auto it = two_hop_.begin(); it != two_hop_.end();) {
    if (!alive(it->second, now) || !symmetric_neighbour(it->first.first)) {
      it = two_hop_.erase(it);
      routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
    } else {
      ++it;
    }
  }
  for (auto it = mpr_selectors_.begin(); it != mpr_selectors_.end();) {
    if (!alive(it->second, now) || !symmetric_neighbour(it->first)) {
      log()->info("olsr mpr selector removed node={}", it->first.to_string());
      it = mpr_selectors_.erase(it);
      selectors_changed_ = true;
    } else {
      ++it;
    }
  }

  // The earliest time still ahead: nothing in these sets changes before it.
  neighbourhood_next_change_.reset();
  auto consider = [&](core::TimePoint t) {
    if (t > now && (!neighbourhood_next_change_ || t < *neighbourhood_next_change_)) neighbourhood_next_change_ = t;
  };
  for (const auto& [iface, link] : links_) {
    consider(link.sym_time);
    consider(link.asym_time);
    consider(link.time);
  }
  for (const auto& [key, time] : two_hop_) consider(time);
  for (const auto& [main, time] : mpr_selectors_) consider(time);
}

void OlsrProtocol::recalculate_routes_when_due(core::TimePoint now) {
  if (route_timer_.active()) return;  // the pending calculation will see this change too
  if (last_route_calculation_ && now < *last_route_calculation_ + options_.route_recalc_interval) {
    route_timer_.start(*last_route_calculation_ + options_.route_recalc_interval - now, [this] { refresh(); });
    return;
  }
  routes_dirty_ = false;
  last_route_calculation_ = now;
  ++topology_version_;
  recompute_routes();
}

void OlsrProtocol::recompute_mprs() {
  const core::TimePoint now = env_.now();
  std::vector<MprCandidate> candidates;
  for (const auto& [main, neighbour] : neighbours_) {
    if (!neighbour.symmetric) continue;
    MprCandidate candidate{main, neighbour.willingness, {}};
    for (auto it = two_hop_.lower_bound({main, core::NodeId()}); it != two_hop_.end() && it->first.first == main;
         ++it) {
      if (alive(it->second, now)) candidate.neighbours.push_back(it->first.second);
    }
    candidates.push_back(std::move(candidate));
  }
  std::set<core::NodeId> mprs = select_mprs(options_.main_address, candidates);
  if (mprs == mprs_) return;
  std::string list;
  for (core::NodeId id : mprs) {
    if (!list.empty()) list += ',';
    list += id.to_string();
  }
  core::log("routing").info("olsr mpr set changed mprs=[{}]", list);
  mprs_ = std::move(mprs);
}

void OlsrProtocol::recompute_routes() {
  const auto& changes = topology_.changes();
  const bool may_alter =
      local_route_inputs_changed_ || std::any_of(changes.begin(), changes.end(), [&](const auto& change) {
        return route_calculator_.edge_change_may_alter(change.edge, change.added);
      });
  topology_.clear_changes();
  local_route_inputs_changed_ = false;
  if (!may_alter) return;
  const core::TimePoint now = env_.now();
  RoutingInput input;
  input.self = options_.main_address;
  for (const auto& [iface, link] : links_) {
    if (link.was_symmetric) input.symmetric_neighbours.push_back({link.neighbour_main, iface});
  }
  for (const auto& [key, time] : two_hop_) {
    if (!alive(time, now)) continue;
    auto via = neighbours_.find(key.first);
    if (via == neighbours_.end() || !via->second.symmetric || via->second.willingness == kWillNever) continue;
    input.two_hop.push_back({key.first, key.second});
  }
  // refresh() expired the set just before: every tuple is alive.
  input.topology = topology_.edges();
  for (const auto& [iface, tuple] : mid_) {
    if (alive(tuple.time, now)) input.aliases[tuple.main].push_back(iface);
  }
  std::vector<Route> routes = route_calculator_.compute(input);
  if (routes == routes_) return;
  auto& log = core::log("routing");
  if (log.should_log(spdlog::level::debug)) {
    for (const Route& r : routes) {
      auto old = route_to(r.destination);
      if (!old || *old != r) {
        log.debug("olsr route dest={} next_hop={} hops={}", r.destination.to_string(), r.next_hop.to_string(),
                  r.hops);
      }
    }
    for (const Route& r : routes_) {
      if (!std::any_of(routes.begin(), routes.end(), [&](const Route& n) { return n.destination == r.destination; })) {
        log.debug("olsr route lost dest={}", r.destination.to_string());
      }
    }
  }
  routes_ = std::move(routes);
  if (routes_changed_) routes_changed_();
}

void OlsrProtocol::schedule_expiry() {
  const core::TimePoint now = env_.now();
  std::optional<core::TimePoint> next;
  auto consider = [&](core::TimePoint t) {
    if (t > now && (!next || t < *next)) next = t;
  };
  // The neighbourhood's earliest time ahead, as of its last walk: refresh()
  // walks it again before that time passes.
  if (neighbourhood_next_change_) consider(*neighbourhood_next_change_);
  if (auto earliest = topology_.earliest_expiry()) consider(*earliest);
  if (auto earliest = mid_expiry_.earliest()) consider(*earliest);
  for (const auto& [key, time] : hna_) consider(time);
  if (!next) {
    expiry_timer_.cancel();
    return;
  }
  // Called after every packet, and the earliest expiry seldom moves: a timer
  // already set for it stays.
  if (expiry_timer_.active() && expiry_at_ == *next) return;
  expiry_at_ = *next;
  expiry_timer_.start(*next - now, [this] { refresh(); });
}

void OlsrProtocol::purge_duplicates() {
  const core::TimePoint now = env_.now();
  while (!duplicate_expiry_.empty() && !alive(duplicate_expiry_.front().first, now)) {
    const uint64_t key = duplicate_expiry_.front().second;
    const DuplicateTuple* dup = duplicates_.find(key);
    if (dup != nullptr && !alive(dup->time, now)) duplicates_.erase(key);
    duplicate_expiry_.pop_front();
  }
}

void OlsrProtocol::expire_topology(core::TimePoint now) {
  if (topology_.expire(now)) routes_dirty_ = true;
}

void OlsrProtocol::expire_mid(core::TimePoint now) {
  while (auto iface = mid_expiry_.pop_expired(now)) {
    mid_.erase(*iface);
    routes_dirty_ = local_route_inputs_changed_ = neighbourhood_changed_ = true;
  }
}

bool OlsrProtocol::is_symmetric_link(core::Ipv4Address iface) const {
  auto it = links_.find(iface);
  return it != links_.end() && alive(it->second.sym_time, env_.now());
}

core::NodeId OlsrProtocol::main_of(core::Ipv4Address address) const {
  auto mid = mid_.find(address);
  if (mid != mid_.end()) return mid->second.main;
  auto link = links_.find(address);
  if (link != links_.end()) return link->second.neighbour_main;
  return address;
}

bool OlsrProtocol::is_own_address(core::Ipv4Address address) const {
  return address == options_.main_address || address == link_.local_address() ||
         std::find(options_.extra_interfaces.begin(), options_.extra_interfaces.end(), address) !=
             options_.extra_interfaces.end();
}

// ---------------------------------------------------------------- sending

Message OlsrProtocol::new_message(MessageType type, core::Duration validity, uint8_t ttl) {
  Message m;
  m.type = static_cast<uint8_t>(type);
  m.vtime = encode_vtime(validity);
  m.originator = options_.main_address;
  m.ttl = ttl;
  m.hop_count = 0;
  m.seq = message_seq_++;
  return m;
}

std::optional<Message> OlsrProtocol::make_hello() {
  purge_duplicates();
  const core::TimePoint now = env_.now();
  // §6.2: one group per link code, each link reported with its own status.
  std::map<uint8_t, std::vector<core::Ipv4Address>> groups;
  for (const auto& [iface, link] : links_) {
    if (!alive(link.time, now)) continue;
    const LinkType type = alive(link.sym_time, now)    ? LinkType::symmetric
                          : alive(link.asym_time, now) ? LinkType::asymmetric
                                                       : LinkType::lost;
    NeighbourType neighbour_type = NeighbourType::not_neighbour;
    if (mprs_.count(link.neighbour_main)) {
      neighbour_type = NeighbourType::mpr;
    } else if (auto n = neighbours_.find(link.neighbour_main); n != neighbours_.end() && n->second.symmetric) {
      neighbour_type = NeighbourType::symmetric;
    }
    groups[make_link_code(type, neighbour_type)].push_back(iface);
  }
  Message m = new_message(MessageType::hello, options_.neighb_hold, 1);
  Hello hello;
  hello.htime = encode_vtime(options_.hello_interval);
  hello.willingness = options_.willingness;
  for (auto& [code, addresses] : groups) hello.links.push_back(LinkGroup{code, std::move(addresses)});
  m.body = std::move(hello);
  return m;
}

std::optional<Message> OlsrProtocol::make_tc() {
  const core::TimePoint now = env_.now();
  if (!options_.mpr_flooding) {
    Tc tc;
    tc.ansn = ansn_;
    for (const auto& [main, neighbour] : neighbours_) {
      if (neighbour.symmetric) tc.advertised.push_back(main);
    }
    if (tc.advertised.empty()) return std::nullopt;
    Message m = new_message(MessageType::tc, announced_hold(Periodic::tc), 255);
    m.body = std::move(tc);
    return m;
  }
  // §9.3: after the selector set empties, empty TCs keep going for as long
  // as our TCs are held (the vtime they announce) so others drop what we
  // advertised before.
  if (mpr_selectors_.empty() &&
      (!selectors_emptied_at_ || now >= *selectors_emptied_at_ + announced_hold(Periodic::tc))) {
    return std::nullopt;
  }
  Message m = new_message(MessageType::tc, announced_hold(Periodic::tc), 255);
  Tc tc;
  tc.ansn = ansn_;
  for (const auto& [main, time] : mpr_selectors_) tc.advertised.push_back(main);
  m.body = std::move(tc);
  return m;
}

std::optional<Message> OlsrProtocol::make_mid() {
  Mid mid;
  if (link_.local_address() != options_.main_address) mid.interfaces.push_back(link_.local_address());
  for (core::Ipv4Address a : options_.extra_interfaces) {
    if (a != options_.main_address &&
        std::find(mid.interfaces.begin(), mid.interfaces.end(), a) == mid.interfaces.end()) {
      mid.interfaces.push_back(a);
    }
  }
  if (mid.interfaces.empty()) return std::nullopt;
  Message m = new_message(MessageType::mid, announced_hold(Periodic::mid), 255);
  m.body = std::move(mid);
  return m;
}

std::optional<Message> OlsrProtocol::make_hna() {
  if (options_.hna_networks.empty()) return std::nullopt;
  Message m = new_message(MessageType::hna, announced_hold(Periodic::hna), 255);
  m.body = Hna{options_.hna_networks};
  return m;
}

void OlsrProtocol::originate(uint8_t type, std::vector<uint8_t> body, core::Duration validity,
                             core::Duration max_wait) {
  if (!running_) return;
  Message m = new_message(static_cast<MessageType>(type), validity, 255);
  m.body = OpaqueBody{std::move(body)};
  if (!options_.pack_messages) {
    std::vector<Message> alone;
    alone.push_back(std::move(m));
    send_batch(std::move(alone));
    return;
  }
  // Waiting longer than the longest gap between two HELLOs gains nothing.
  const core::Duration cap = options_.hello_interval + jitter_bound(Periodic::hello);
  const core::Duration wait = std::clamp(max_wait, core::Duration::zero(), cap);
  if (wait == core::Duration::zero()) {
    outbox_.push_back(std::move(m));
    emit(std::nullopt);
    return;
  }
  enqueue(std::move(m), env_.now() + wait);
}

void OlsrProtocol::enqueue(Message message, core::TimePoint deadline) {
  outbox_.push_back(std::move(message));
  if (flush_deadline_ && *flush_deadline_ <= deadline) return;
  flush_deadline_ = deadline;
  flush_timer_.start(std::max(deadline - env_.now(), core::Duration::zero()), [this] { emit(std::nullopt); });
}

void OlsrProtocol::emit(std::optional<Periodic> fired) {
  if (!running_) return;
  const core::TimePoint now = env_.now();
  // A HELLO (and, unpacked, every type) is next due one interval after this
  // emission, so no gap between two of them exceeds the interval. A packed
  // TC, MID or HNA is next due one interval after this one was due, however
  // early it left: riding a HELLO does not raise its rate above
  // 1 / interval (every TC is flooded mesh-wide), and the hold it announces
  // covers the longer spans this allows (announced_hold()).
  auto sent = [&](Periodic type) {
    core::TimePoint& due = due_[static_cast<size_t>(type)];
    const core::Duration interval = interval_of(type);
    if (options_.pack_messages && type != Periodic::hello && due + interval > now) {
      due += interval;
    } else {
      // Unpacked, a HELLO, or a schedule fallen a whole interval behind (a
      // stalled event loop): restart it from now rather than send a burst.
      due = now + interval;
    }
    arm(type);
  };
  // The HELLO first: the others ride in it only if they would otherwise leave
  // alone before the next one.
  const auto h = static_cast<size_t>(Periodic::hello);
  std::optional<Message> hello;
  if (fired == Periodic::hello || (options_.pack_messages && now >= due_[h] - pack_advance(Periodic::hello))) {
    hello = make_hello();
    sent(Periodic::hello);
  }
  // A type whose window is open also joins another that leaves, so types of
  // one interval (TC, MID, HNA by default) keep leaving together.
  constexpr std::array kOthers{Periodic::tc, Periodic::mid, Periodic::hna};
  auto window_open = [&](Periodic type) {
    return options_.pack_messages && now >= due_[static_cast<size_t>(type)] - pack_advance(type);
  };
  bool any_other = false;
  for (Periodic type : kOthers) {
    any_other |= fired == type || (window_open(type) && fire_at_[static_cast<size_t>(type)] < fire_at_[h]);
  }
  std::vector<Message> batch;
  for (Periodic type : kOthers) {
    if (fired != type && !(any_other && window_open(type))) continue;
    std::optional<Message> m;
    switch (type) {
      case Periodic::tc:
        m = make_tc();
        break;
      case Periodic::mid:
        m = make_mid();
        break;
      case Periodic::hna:
        m = make_hna();
        break;
      case Periodic::hello:
        break;
    }
    if (m) batch.push_back(std::move(*m));
    sent(type);
  }
  // Without packing, a periodic emission leaves alone; queued messages keep
  // their own deadline.
  if (options_.pack_messages || !fired) {
    for (Message& m : outbox_) batch.push_back(std::move(m));
    outbox_.clear();
    flush_timer_.cancel();
    flush_deadline_.reset();
  }
  if (hello) batch.push_back(std::move(*hello));
  send_batch(std::move(batch));
}

void OlsrProtocol::send_batch(std::vector<Message> batch) {
  const size_t limit = link_.max_datagram_size();
  Packet packet;
  size_t size = kPacketHeaderSize;
  auto send = [&] {
    if (packet.messages.empty()) return;
    packet.seq = packet_seq_++;
    const std::vector<uint8_t> bytes = encode_packet(packet);
    for (const Message& m : packet.messages) count_message(m.type, encoded_size(m), Direction::sent);
    metrics_.counter("olsr_packets_total", "direction", "sent").add();
    metrics_.counter("olsr_packet_bytes_total", "direction", "sent").add(bytes.size());
    link_.broadcast(core::ByteSpan(bytes));
    packet.messages.clear();
    size = kPacketHeaderSize;
  };
  for (Message& m : batch) {
    const size_t message_size = encoded_size(m);
    if (kPacketHeaderSize + message_size > limit) {
      count_drop("oversize");
      core::log("routing").warn("olsr message too large type={} bytes={} limit={}", type_name(m.type),
                                 message_size, limit);
      continue;
    }
    if (size + message_size > limit || (!options_.pack_messages && !packet.messages.empty())) send();
    size += message_size;
    packet.messages.push_back(std::move(m));
  }
  send();
}

void OlsrProtocol::count_message(uint8_t type, size_t bytes, Direction direction) {
  std::optional<core::TrafficCounter>& counter = traffic_[counted_type(type)][static_cast<size_t>(direction)];
  if (!counter) {
    counter = metrics_.traffic_counter("hop", "olsr", type_name(type),
                                       direction == Direction::received ? "received" : "sent");
  }
  counter->add(bytes);
}

void OlsrProtocol::count_drop(std::string_view reason) {
  metrics_.counter("olsr_dropped_total", "reason", reason).add();
}

// ---------------------------------------------------------------- views

std::optional<Route> OlsrProtocol::route_to(core::Ipv4Address destination) const {
  auto it = std::lower_bound(routes_.begin(), routes_.end(), destination,
                             [](const Route& r, core::Ipv4Address d) { return r.destination < d; });
  if (it == routes_.end() || it->destination != destination) return std::nullopt;
  return *it;
}

std::vector<NeighbourInfo> OlsrProtocol::neighbours() const {
  const core::TimePoint now = env_.now();
  std::vector<NeighbourInfo> out;
  for (const auto& [main, tuple] : neighbours_) {
    NeighbourInfo info;
    info.main = main;
    info.willingness = tuple.willingness;
    info.is_mpr = mprs_.count(main) > 0;
    auto selector = mpr_selectors_.find(main);
    info.is_mpr_selector = selector != mpr_selectors_.end() && alive(selector->second, now);
    bool have_link = false;
    for (const auto& [iface, link] : links_) {
      if (link.neighbour_main != main || !alive(link.time, now)) continue;
      const LinkStatus status = alive(link.sym_time, now)    ? LinkStatus::symmetric
                                : alive(link.asym_time, now) ? LinkStatus::asymmetric
                                                             : LinkStatus::lost;
      // The best link speaks for the neighbour.
      if (!have_link || static_cast<int>(status) < static_cast<int>(info.status)) {
        info.status = status;
        info.link_address = iface;
        info.last_heard = link.last_heard;
      }
      have_link = true;
    }
    if (have_link) out.push_back(info);
  }
  return out;
}

std::vector<TopologyInfo> OlsrProtocol::topology() const {
  const core::TimePoint now = env_.now();
  std::vector<TopologyInfo> out;
  for (const TopologySet::Tuple& tuple : topology_.tuples()) {
    if (!alive(tuple.time, now)) continue;
    out.push_back(TopologyInfo{tuple.dest, tuple.last, tuple.ansn, seconds_between(tuple.time, now)});
  }
  return out;
}

std::vector<HnaInfo> OlsrProtocol::hna() const {
  const core::TimePoint now = env_.now();
  std::vector<HnaInfo> out;
  for (const auto& [key, time] : hna_) {
    if (!alive(time, now)) continue;
    out.push_back(HnaInfo{key.gateway, HnaEntry{key.network, key.netmask}, seconds_between(time, now)});
  }
  return out;
}

std::set<core::NodeId> OlsrProtocol::mpr_selectors() const {
  const core::TimePoint now = env_.now();
  std::set<core::NodeId> out;
  for (const auto& [main, time] : mpr_selectors_) {
    if (alive(time, now)) out.insert(main);
  }
  return out;
}

bool OlsrProtocol::is_mpr_selector(core::NodeId main) const {
  auto it = mpr_selectors_.find(main);
  return it != mpr_selectors_.end() && alive(it->second, env_.now());
}

std::vector<std::pair<core::NodeId, core::NodeId>> OlsrProtocol::two_hop() const {
  const core::TimePoint now = env_.now();
  std::vector<std::pair<core::NodeId, core::NodeId>> out;
  for (const auto& [key, time] : two_hop_) {
    if (alive(time, now)) out.push_back(key);
  }
  return out;
}

}  // namespace mesh::routing::olsr
