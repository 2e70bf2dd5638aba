#include "membership/medley.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"
#include "proto/wire.pb.h"

namespace mesh::membership {
namespace {

constexpr uint32_t kBodyType = proto::Envelope::kMembershipFieldNumber;
// Room in a body for everything but the piggy-backed records (kind tag, seq,
// target).
constexpr size_t kHeaderBytes = 32;

CodecLimits limits_of(const MedleyOptions& o) {
  CodecLimits l;
  l.max_name_bytes = o.max_name_bytes;
  l.max_metadata_entries = o.max_metadata_entries;
  l.max_metadata_bytes = o.max_metadata_bytes;
  return l;
}

Member self_member(core::NodeId id, const MedleyOptions& o) {
  Member m;
  m.id = id;
  m.name = o.name;
  m.location = o.location;
  m.incarnation = o.initial_incarnation;
  m.state = MemberState::alive;
  return m;
}

}  // namespace

Medley::Medley(core::Env& env, core::Messenger& messenger, core::Metrics& metrics, const HopDistances& distances,
               MedleyOptions options)
    : env_(env),
      messenger_(messenger),
      metrics_(metrics),
      distances_(distances),
      options_(std::move(options)),
      limits_(limits_of(options_)),
      table_(self_member(messenger.self(), options_)),
      selector_(options_.alpha, options_.probe_order, options_.bag_limit_factor),
      health_(options_.max_local_health),
      tick_timer_(env),
      indirect_timer_(env),
      suspicion_timer_(env),
      join_timer_(env),
      push_pull_timer_(env),
      reconnect_timer_(env),
      alive_(std::make_shared<bool>(true)),
      probes_(metrics.counter("membership_probes_total")),
      indirect_probes_(metrics.counter("membership_indirect_probes_total")),
      suspicions_(metrics.counter("membership_suspicions_total")),
      failures_(metrics.counter("membership_failures_declared_total")),
      refutations_(metrics.counter("membership_refutations_total")),
      decode_errors_(metrics.counter("membership_decode_errors_total")),
      syncs_(metrics.counter("membership_syncs_total")),
      digest_matches_(metrics.counter("membership_sync_digest_matches_total")),
      passive_probes_(metrics.counter("membership_passive_feedback_probes_total")),
      boosts_granted_(metrics.counter("membership_probe_boosts_granted_total")),
      message_bytes_(metrics.histogram("membership_message_bytes")) {
  std::weak_ptr<bool> alive = alive_;
  messenger_.on_datagram(kBodyType, [this, alive](const core::Message& m) {
    if (alive.lock()) on_datagram(m);
  });
  messenger_.serve(kBodyType, [this, alive](const core::Message& m, core::Responder r) {
    if (alive.lock()) {
      on_sync_request(m, std::move(r));
    } else {
      r.reject("membership stopped");
    }
  });
}

Medley::~Medley() {
  *alive_ = false;
  alive_.reset();
  for (uint64_t id : pending_requests_) messenger_.cancel(id);
}

// ---- MemberView -------------------------------------------------------------

std::vector<Member> Medley::live_members() const {
  std::vector<Member> out;
  for (const auto& [id, e] : table_.entries()) {
    if (is_live(e.member.state)) out.push_back(e.member);
  }
  return out;
}

std::optional<Member> Medley::member(core::NodeId id) const {
  const MemberEntry* e = table_.find(id);
  if (e == nullptr) return std::nullopt;
  return e->member;
}

Medley::ListenerHandle Medley::add_listener(Listener listener) {
  const ListenerHandle handle = next_listener_++;
  listeners_.emplace(handle, std::move(listener));
  return handle;
}

void Medley::remove_listener(ListenerHandle handle) { listeners_.erase(handle); }

void Medley::emit(MemberEventKind kind, const Member& member) {
  ++version_;
  // A list still gaining members (joining, a concurrent boot, a healed
  // partition) is the one anti-entropy repairs: exchange at the base rate.
  if (kind == MemberEventKind::joined) fast_push_pulls_ = options_.push_pull_fast_rounds;
  // A copy: a listener may add or remove listeners.
  const std::map<ListenerHandle, Listener> listeners = listeners_;
  const MemberEvent event{kind, member};
  for (const auto& [handle, listener] : listeners) {
    if (listeners_.contains(handle)) listener(event);
  }
}

// ---- Life cycle ---------------------------------------------------------------

void Medley::start(std::vector<core::NodeId> contacts) {
  if (running_ || left_) return;
  running_ = true;
  // A random phase, so nodes started together do not probe in lockstep.
  const auto phase = core::Duration(static_cast<core::Duration::rep>(
      env_.rng().below(static_cast<uint64_t>(std::max<core::Duration::rep>(1, options_.probe_period.count())))));
  tick_timer_.start(phase, [this] { tick(); });
  push_pull_timer_.start(push_pull_interval(), [this] { push_pull(); });
  reconnect_timer_.start_periodic(options_.reconnect_interval, [this] { reconnect(); });
  set_contacts(contacts);
}

void Medley::set_contacts(const std::vector<core::NodeId>& contacts) {
  contacts_.clear();
  for (core::NodeId c : contacts) {
    if (c != self() && std::find(contacts_.begin(), contacts_.end(), c) == contacts_.end()) contacts_.push_back(c);
  }
  if (running_ && !join_timer_.active()) join_attempt();
}

void Medley::join_attempt() {
  if (!running_ || left_) return;
  const bool alone = table_.live_others().empty();
  for (size_t tried = 0; tried < contacts_.size(); ++tried) {
    const core::NodeId contact = contacts_[next_contact_++ % contacts_.size()];
    const MemberEntry* e = table_.find(contact);
    if (e != nullptr && is_live(e->member.state)) continue;
    core::log("membership").debug("join attempt self={} via={}", self().to_string(), contact.to_string());
    sync_from(contact, true, core::NodeId(), Pull::whole_list);
    break;
  }
  join_timer_.start(alone ? options_.join_retry : options_.reconnect_interval, [this] { join_attempt(); });
}

void Medley::leave() {
  if (left_) return;
  left_ = true;
  running_ = false;
  tick_timer_.cancel();
  indirect_timer_.cancel();
  join_timer_.cancel();
  push_pull_timer_.cancel();
  reconnect_timer_.cancel();
  probe_.reset();
  Member me = table_.self_member();
  me.state = MemberState::left;
  set_self(me);
  const MemberRecord record = table_.record_of(self());
  queue_.enqueue(record);
  std::vector<core::NodeId> others = table_.live_others();
  std::shuffle(others.begin(), others.end(), env_.rng());
  others.resize(std::min(others.size(), options_.leave_fanout));
  for (core::NodeId to : others) {
    proto::MembershipBody body;
    fill_updates(to, body.mutable_gossip()->mutable_updates());
    send(to, body, Sent::gossip);
  }
  core::log("membership").info("left self={} incarnation={}", self().to_string(), me.incarnation);
}

bool Medley::set_metadata(const std::string& key, const std::string& value) {
  if (key.empty() || left_) return false;
  Member me = table_.self_member();
  auto next = me.metadata;
  next[key] = value;
  if (next.size() > options_.max_metadata_entries || metadata_bytes(next) > options_.max_metadata_bytes) return false;
  if (next == me.metadata) return true;
  me.metadata = std::move(next);
  ++me.incarnation;
  set_self(me);
  queue_.enqueue(table_.record_of(self()));
  emit(MemberEventKind::metadata_changed, me);
  return true;
}

bool Medley::erase_metadata(const std::string& key) {
  if (left_) return false;
  Member me = table_.self_member();
  if (me.metadata.erase(key) == 0) return true;
  ++me.incarnation;
  set_self(me);
  queue_.enqueue(table_.record_of(self()));
  emit(MemberEventKind::metadata_changed, me);
  return true;
}

void Medley::set_self(const Member& self) { table_.set_self(self); }

std::vector<Medley::MemberStatus> Medley::status(bool include_gone) const {
  std::vector<MemberStatus> out;
  for (const auto& [id, e] : table_.entries()) {
    if (!include_gone && !is_live(e.member.state)) continue;
    MemberStatus s;
    s.member = e.member;
    s.hops = id == self() ? std::optional<uint32_t>(0) : distances_.hops_to(id);
    auto heard_it = last_heard_.find(id);
    if (heard_it != last_heard_.end()) s.last_heard = heard_it->second;
    out.push_back(std::move(s));
  }
  return out;
}

// ---- Probing ------------------------------------------------------------------

void Medley::tick() {
  finish_probe();
  reap();
  expire_boosts();
  start_probe();
  // At most one extra ping per period for a refused revival.
  while (!reconnect_soon_.empty()) {
    const core::NodeId id = *reconnect_soon_.begin();
    reconnect_soon_.erase(reconnect_soon_.begin());
    const MemberEntry* e = table_.find(id);
    if (e != nullptr && !is_live(e->member.state)) {
      send_reconnect_ping(id);
      break;
    }
  }
  tick_timer_.start(health_.scale(options_.probe_period), [this] { tick(); });
}

void Medley::start_probe() {
  if (selector_live_set_version_ != table_.live_set_version()) {
    selector_.set_members(table_.live_others(), distances_, env_.rng());
    selector_live_set_version_ = table_.live_set_version();
  }
  std::optional<core::NodeId> target;
  while (!target && !verify_.empty()) {
    const core::NodeId id = *verify_.begin();
    verify_.erase(verify_.begin());
    const MemberEntry* e = table_.find(id);
    if (e != nullptr && is_live(e->member.state)) target = id;
  }
  if (!target) {
    target = passive_feedback_target();
    if (target) {
      passive_probed_[*target] = env_.now();
      passive_probes_.add();
    }
  }
  if (!target) target = selector_.next(distances_, env_.rng());
  if (!target) return;
  probe_ = Probe{};
  probe_->seq = next_seq_++;
  probe_->target = *target;
  probes_.add();
  const uint64_t seq = probe_->seq;
  send_ping(*target, seq);
  indirect_timer_.start(health_.scale(options_.probe_timeout), [this, seq] { probe_indirect(seq); });
}

void Medley::probe_indirect(uint64_t seq) {
  if (!probe_ || probe_->seq != seq || probe_->acked) return;
  std::vector<core::NodeId> candidates;
  for (core::NodeId id : table_.live_others()) {
    if (table_.find(id)->member.state == MemberState::alive) candidates.push_back(id);
  }
  const std::vector<core::NodeId> helpers = pick_helpers(candidates, probe_->target, options_.indirect_checks,
                                                         options_.alpha, distances_, env_.rng());
  probe_->helpers = helpers.size();
  // A second direct ping alongside the indirect ones (memberlist sends a TCP
  // ping here): on a multi-hop path one lost datagram should not be enough
  // to suspect a member.
  send_ping(probe_->target, seq);
  for (core::NodeId helper : helpers) {
    indirect_probes_.add();
    proto::MembershipBody body;
    proto::PingReq* req = body.mutable_ping_req();
    req->set_seq(seq);
    req->set_target(probe_->target.value());
    fill_updates(helper, req->mutable_updates());
    send(helper, body, Sent::ping_req);
  }
}

void Medley::finish_probe() {
  if (!probe_) return;
  const Probe probe = *probe_;
  probe_.reset();
  indirect_timer_.cancel();
  if (probe.acked) {
    health_.apply(-1);
    silent_probes_.erase(probe.target);
    return;
  }
  // Unknown distance counts as near: silence keeps its weight when routing
  // has nothing to say (a node cut off from everyone has no routes).
  const std::optional<uint32_t> hops = distances_.hops_to(probe.target);
  const bool far = options_.silence_radius_hops > 0 && hops && *hops > options_.silence_radius_hops;
  // Lifeguard: a nack from a helper ("no ack from the target") shows we can
  // still hear; silence from every helper suggests the fault is ours. Unlike
  // memberlist we count at most one per probe: over several lossy hops a
  // missed nack is common and says little about this node. Far silence is
  // expected and says nothing about this node either.
  if (!far) health_.apply(probe.helpers > 0 && probe.nacks > 0 ? 0 : 1);
  const MemberEntry* e = table_.find(probe.target);
  if (e == nullptr || !is_live(e->member.state)) {
    silent_probes_.erase(probe.target);
    return;
  }
  if (far) {
    silent_probes_.erase(probe.target);
    const size_t nacks_needed =
        std::max<size_t>(1, std::min<size_t>(options_.far_nacks_to_suspect, probe.helpers));
    if (probe.helpers == 0 || probe.nacks < nacks_needed) return;
  }
  // Silence from the target and from every helper is weak evidence over a
  // multi-hop path: at 5 % loss per hop a 12-hop round trip fails half the
  // time, so Medley's completeness probes of far members would otherwise
  // raise most false suspicions. Probe the member again next period and
  // suspect it only after several silent probes in a row; a helper's nack
  // (it is near the target and heard nothing) is strong evidence and counts
  // at once. Without helpers (a tiny mesh) there is nothing to wait for.
  const bool silent = probe.helpers > 0 && probe.nacks == 0;
  if (silent && e->member.state == MemberState::alive &&
      ++silent_probes_[probe.target] < options_.silent_probes_to_suspect) {
    verify_.insert(probe.target);
    return;
  }
  silent_probes_.erase(probe.target);
  // Probing a suspect again and failing is an independent confirmation
  // (Lifeguard), which shortens the suspicion everywhere it spreads.
  if (e->member.state == MemberState::alive) {
    suspicions_.add();
    metrics_.counter("membership_suspicions_by_hops_total", {{"hops", hops ? std::to_string(*hops) : "unknown"}}).add();
  }
  declare(probe.target, MemberState::suspect);
}

void Medley::declare(core::NodeId id, MemberState state) {
  MemberRecord record = table_.record_of(id);
  record.member.state = state;
  record.has_info = false;
  record.accuser = self();
  merge(record, false);
}

void Medley::reconnect() {
  std::vector<core::NodeId> failed;
  for (const auto& [id, e] : table_.entries()) {
    if (e.member.state == MemberState::failed) failed.push_back(id);
  }
  if (failed.empty()) return;
  send_reconnect_ping(failed[env_.rng().below(failed.size())]);
}

void Medley::send_reconnect_ping(core::NodeId target) {
  // Not a probe: no suspicion follows silence. The ping carries the
  // target's failed record, which a live target refutes in its ack.
  send_ping(target, next_seq_++);
}

void Medley::send_ping(core::NodeId target, uint64_t seq) {
  proto::MembershipBody body;
  proto::Ping* ping = body.mutable_ping();
  ping->set_seq(seq);
  ping->set_target(target.value());
  fill_updates(target, ping->mutable_updates());
  if (options_.active_feedback_radius_hops > 0 && rarely_probed()) {
    const std::optional<uint32_t> hops = distances_.hops_to(target);
    ping->set_probe_me_more(hops && *hops <= options_.active_feedback_radius_hops);
  }
  send(target, body, Sent::ping);
}

std::optional<core::NodeId> Medley::passive_feedback_target() const {
  if (options_.passive_feedback_after <= core::Duration::zero()) return std::nullopt;
  const core::TimePoint now = env_.now();
  std::optional<core::NodeId> oldest;
  core::TimePoint oldest_at{};
  // The near nodes, if routing can list them, are a few dozen; the live
  // members can be a thousand. Either way in id order, so ties go the same.
  const std::optional<std::vector<core::NodeId>> near = distances_.nodes_within(options_.passive_feedback_radius_hops);
  const std::vector<core::NodeId>& live = table_.live_others();
  for (core::NodeId id : near ? *near : live) {
    if (near ? !std::binary_search(live.begin(), live.end(), id) : !near_for_feedback(id)) continue;
    // Never heard from directly: silent since it became live here.
    core::TimePoint since = table_.find(id)->state_since;
    if (auto heard_it = last_heard_.find(id); heard_it != last_heard_.end()) since = std::max(since, heard_it->second);
    // One passive probe per silence: an unanswered one goes on through the
    // ordinary silent-probe rules.
    if (auto probed_it = passive_probed_.find(id); probed_it != passive_probed_.end()) {
      since = std::max(since, probed_it->second);
    }
    if (now - since > options_.passive_feedback_after && (!oldest || since < oldest_at)) {
      oldest = id;
      oldest_at = since;
    }
  }
  return oldest;
}

void Medley::note_probed(core::NodeId from, uint64_t seq) {
  if (last_probe_of_me_ == std::pair{from, seq}) return;
  last_probe_of_me_ = {from, seq};
  const core::TimePoint now = env_.now();
  // Gaps between probes only: the wait for the first one is the join.
  if (last_probed_) {
    const auto gap = static_cast<double>((now - *last_probed_).count());
    probe_gap_average_us_ =
        probe_gap_average_us_ ? *probe_gap_average_us_ + options_.active_feedback_alpha * (gap - *probe_gap_average_us_)
                              : gap;
  }
  last_probed_ = now;
}

bool Medley::rarely_probed() const {
  if (options_.active_feedback_gap <= core::Duration::zero() || !last_probed_ || !probe_gap_average_us_) return false;
  // The gap still open counts once it is longer than the average: a node
  // nobody probes any more must not wait for a probe to notice.
  const auto open = static_cast<double>((env_.now() - *last_probed_).count());
  const double average = *probe_gap_average_us_;
  const double estimate = open > average ? average + options_.active_feedback_alpha * (open - average) : average;
  return estimate > static_cast<double>(options_.active_feedback_gap.count());
}

void Medley::grant_boost(core::NodeId member) {
  const MemberEntry* e = table_.find(member);
  if (e == nullptr || !is_live(e->member.state)) return;
  boosted_until_[member] = env_.now() + options_.active_feedback_hold;
  if (selector_.boosted(member)) return;
  boosts_granted_.add();
  selector_.boost(member, options_.active_feedback_boost, distances_);
}

void Medley::expire_boosts() {
  const core::TimePoint now = env_.now();
  std::erase_if(boosted_until_, [this, now](const auto& entry) {
    if (now < entry.second) return false;
    selector_.end_boost(entry.first);
    return true;
  });
}

core::Duration Medley::push_pull_interval() const {
  // memberlist's pushPullScale: a full-list exchange costs O(N) bytes, so
  // beyond the threshold the interval grows with log2(N) to keep the
  // mesh-wide sync load near O(N log N) instead of O(N^2). Not while the
  // list is still gaining members (see push_pull()).
  const double n = static_cast<double>(table_.live_count());
  const double threshold = static_cast<double>(options_.push_pull_scale_threshold);
  if (fast_push_pulls_ > 0 || options_.push_pull_scale_threshold == 0 || n <= threshold) {
    return options_.push_pull_interval;
  }
  const double mult = std::ceil(std::log2(n) - std::log2(threshold)) + 1.0;
  return core::Duration(static_cast<core::Duration::rep>(static_cast<double>(options_.push_pull_interval.count()) * mult));
}

void Medley::push_pull() {
  const std::vector<core::NodeId> others = table_.live_others();
  size_t pick = 0;
  if (fast_push_pulls_ > 0) {
    // The list is still gaining members (joining, a concurrent boot, a
    // healed partition): piggy-backed news of a join can die out before
    // every node has joined, and an exchange with a random member, usually
    // one that heard it, repairs that.
    --fast_push_pulls_;
    if (!others.empty()) pick = env_.rng().below(others.size());
  } else if (!others.empty()) {
    // Steady state: a partner drawn like a probe target (hops^-alpha). The
    // exchange is two full lists, and a near partner carries them over few
    // hops; a missed update still diffuses between neighbourhoods.
    const std::vector<double> weights = distance_weights(others, distances_, options_.alpha);
    double draw = env_.rng().unit();  // the weights are normalised
    pick = others.size() - 1;
    for (size_t i = 0; i < others.size(); ++i) {
      if (draw < weights[i]) {
        pick = i;
        break;
      }
      draw -= weights[i];
    }
  }
  push_pull_timer_.start(push_pull_interval(), [this] { push_pull(); });
  if (!others.empty()) sync_from(others[pick], true, core::NodeId(), Pull::differences);
}

void Medley::catch_up_from(core::NodeId peer) {
  if (!running_ || left_ || peer == self() || peer.is_unspecified()) return;
  sync_from(peer, true, core::NodeId(), Pull::differences);
}

void Medley::reap() {
  const core::TimePoint now = env_.now();
  std::vector<core::NodeId> gone;
  // Every tick: walk the table only when it holds a failed or departed member.
  if (table_.live_count() < table_.entries().size()) {
    for (const auto& [id, e] : table_.entries()) {
      if (!is_live(e.member.state) && now - e.state_since > options_.failed_retention) gone.push_back(id);
    }
  }
  for (core::NodeId id : gone) {
    table_.erase(id);
    last_heard_.erase(id);
    passive_probed_.erase(id);
  }
  std::erase_if(silent_probes_, [this](const auto& entry) {
    const MemberEntry* e = table_.find(entry.first);
    return e == nullptr || e->member.state != MemberState::alive;
  });
}

// ---- Suspicion ------------------------------------------------------------------

core::Duration Medley::suspicion_timeout(size_t accusers) const {
  const double n = static_cast<double>(std::max<size_t>(1, table_.live_count()));
  const double period = static_cast<double>(options_.probe_period.count());
  const double min = options_.suspicion_mult * std::max(1.0, std::log10(n)) * period;
  const double max = std::max(min, options_.suspicion_max_mult * min);
  // Confirmations can only come from the other live members.
  const double k = table_.live_count() < options_.suspicion_confirmations + 2
                       ? 0.0
                       : static_cast<double>(options_.suspicion_confirmations);
  if (k < 1) return core::Duration(static_cast<core::Duration::rep>(min));
  const double confirmations = static_cast<double>(accusers > 0 ? accusers - 1 : 0);
  const double frac = std::log(confirmations + 1.0) / std::log(k + 1.0);
  return core::Duration(static_cast<core::Duration::rep>(std::max(min, max - frac * (max - min))));
}

void Medley::arm_suspicion_timer() {
  std::optional<core::TimePoint> earliest;
  for (const auto& [id, e] : table_.entries()) {
    if (e.member.state != MemberState::suspect) continue;
    const core::TimePoint deadline = e.suspect_since + suspicion_timeout(e.accusers.size());
    if (!earliest || deadline < *earliest) earliest = deadline;
  }
  if (!earliest) {
    suspicion_timer_.cancel();
    return;
  }
  suspicion_timer_.start(*earliest - env_.now(), [this] { on_suspicion_timer(); });
}

void Medley::on_suspicion_timer() {
  const core::TimePoint now = env_.now();
  std::vector<core::NodeId> expired;
  for (const auto& [id, e] : table_.entries()) {
    if (e.member.state == MemberState::suspect && now >= e.suspect_since + suspicion_timeout(e.accusers.size())) {
      expired.push_back(id);
    }
  }
  for (core::NodeId id : expired) {
    failures_.add();
    core::log("membership").info("member failed self={} member={}", self().to_string(), id.to_string());
    declare(id, MemberState::failed);
  }
  arm_suspicion_timer();
}

// ---- Merging ----------------------------------------------------------------------

void Medley::merge_updates(const google::protobuf::RepeatedPtrField<proto::MemberRecord>& updates) {
  for (const auto& wire : updates) {
    auto record = from_wire(wire, limits_);
    if (record) merge(*record, false);
  }
}

void Medley::merge(const MemberRecord& record, bool from_sync) {
  if (record.member.id == self()) {
    about_self(record);
    return;
  }
  const ApplyResult result = table_.apply(record, env_.now(), !from_sync);
  const bool known = result.was_known;
  const bool was_suspect = result.was_suspect;
  if (result.stale_accusation) verify_.insert(record.member.id);
  if (result.revival_refused) reconnect_soon_.insert(record.member.id);
  if (!result.changed) return;
  // A member newly learnt from a full-list pull is no news to anyone else.
  if (!(from_sync && !known)) {
    queue_.enqueue(result.new_accuser || !record.has_info ? record : table_.record_of(record.member.id));
  }
  const MemberEntry* after = table_.find(record.member.id);
  if (result.event == MemberEventKind::suspected && record.accuser != self() && near_for_feedback(record.member.id)) {
    // Passive feedback for a member in doubt: a near member suspected by
    // another node is probed next, so a crash gets its independent
    // confirmations (each shortens the suspicion timeout) from the nodes
    // around it, not only from its own neighbours: a node with two
    // neighbours otherwise waits out most of suspicion_max_mult.
    verify_.insert(record.member.id);
  }
  if (result.event) emit(*result.event, after->member);
  if (was_suspect || after->member.state == MemberState::suspect) arm_suspicion_timer();
}

bool Medley::near_for_feedback(core::NodeId id) const {
  if (options_.passive_feedback_after <= core::Duration::zero()) return false;
  const std::optional<uint32_t> hops = distances_.hops_to(id);
  return hops && *hops <= options_.passive_feedback_radius_hops;
}

void Medley::about_self(const MemberRecord& record) {
  if (left_) return;
  const uint64_t mine = table_.self_member().incarnation;
  if (record.member.state == MemberState::alive) {
    // An earlier life of this node advertised a higher incarnation.
    if (record.member.incarnation > mine) refute(record.member.incarnation);
    return;
  }
  if (record.member.incarnation < mine) {
    // Someone holds an outdated accusation: our last refutation did not
    // reach it. Announce our current record again.
    if (queue_.find(self()) == nullptr) queue_.enqueue(table_.record_of(self()));
    return;
  }
  // Lifeguard also raises local health here. We do not: over lossy multi-hop
  // paths a suspicion mostly reflects path loss, and slowing the suspect's
  // own probing only slows the spread of its refutation (medley_bench, 10 %
  // hop loss: 2.6 false failures per node-hour with it, 1.2 without).
  refute(record.member.incarnation);
  // Piggy-backing alone spreads a refutation slowly from a node whose
  // neighbourhood is lossy (and whose probing health just slowed down), so
  // the accuser and a few others hear it at once.
  std::vector<core::NodeId> tell = table_.live_others();
  std::shuffle(tell.begin(), tell.end(), env_.rng());
  tell.resize(std::min(tell.size(), options_.refute_fanout));
  if (!record.accuser.is_unspecified() && record.accuser != self() &&
      std::find(tell.begin(), tell.end(), record.accuser) == tell.end()) {
    tell.push_back(record.accuser);
  }
  for (core::NodeId to : tell) {
    proto::MembershipBody body;
    to_wire(table_.record_of(self()), body.mutable_gossip()->add_updates());
    send(to, body, Sent::gossip);
  }
}

void Medley::refute(uint64_t over_incarnation) {
  Member me = table_.self_member();
  // An absurd (forged) maximum cannot be out-bid; keep it rather than wrap.
  me.incarnation = over_incarnation == UINT64_MAX ? over_incarnation : over_incarnation + 1;
  me.state = MemberState::alive;
  set_self(me);
  refutations_.add();
  queue_.enqueue(table_.record_of(self()));
}

// ---- Messages ------------------------------------------------------------------------

void Medley::fill_updates(core::NodeId to, google::protobuf::RepeatedPtrField<proto::MemberRecord>* out) {
  size_t budget = options_.max_message_bytes > kHeaderBytes ? options_.max_message_bytes - kHeaderBytes : 0;
  size_t count = 0;
  auto add = [&](const MemberRecord& r) {
    to_wire(r, out->Add());
    budget -= std::min(budget, wire_size(r));
    ++count;
  };
  if (left_) add(table_.record_of(self()));
  const MemberEntry* e = table_.find(to);
  if (e != nullptr && e->member.state != MemberState::alive && count < options_.max_piggyback) {
    add(table_.record_of(to));
  }
  const uint32_t limit = DisseminationQueue::retransmit_limit(options_.retransmit_mult, table_.live_count());
  for (const MemberRecord& r : queue_.take(budget, options_.max_piggyback - count, limit)) {
    if (r.member.id == self() && left_) continue;
    to_wire(r, out->Add());
  }
  // Where the piggy-back bytes go, by the state each record announces.
  for (const proto::MemberRecord& r : *out) {
    const size_t state = r.state() == proto::MEMBER_ALIVE     ? 0
                         : r.state() == proto::MEMBER_SUSPECT ? 1
                         : r.state() == proto::MEMBER_FAILED  ? 2
                                                              : 3;
    PiggybackCounters& counters = piggyback_[state];
    if (counters.records == nullptr) {
      const char* name = std::array{"alive", "suspect", "failed", "left"}[state];
      counters.records = &metrics_.counter("membership_piggyback_records_total", "state", name);
      counters.bytes = &metrics_.counter("membership_piggyback_bytes_total", "state", name);
    }
    counters.records->add();
    counters.bytes->add(r.ByteSizeLong() + 2);
  }
}

const char* Medley::sent_name(Sent type) {
  switch (type) {
    case Sent::ping:
      return "ping";
    case Sent::ping_req:
      return "ping_req";
    case Sent::ack:
      return "ack";
    case Sent::nack:
      return "nack";
    case Sent::gossip:
      return "gossip";
    case Sent::sync_request:
      return "sync_request";
    case Sent::sync_response:
      return "sync_response";
  }
  return "unknown";
}

void Medley::count_sent(core::NodeId to, Sent type, size_t bytes) {
  SentCounters& counters = sent_[static_cast<size_t>(type)];
  if (counters.messages == nullptr) {
    const char* name = sent_name(type);
    counters.messages = &metrics_.counter("membership_sent_total", "type", name);
    counters.bytes = &metrics_.counter("membership_sent_bytes_total", "type", name);
    counters.hop_bytes = &metrics_.counter("membership_sent_hop_bytes_total", "type", name);
  }
  counters.messages->add();
  counters.bytes->add(bytes);
  // Body bytes times the hops they cross: what the mesh carries, by type.
  const uint32_t hops = distances_.hops_to(to).value_or(1);
  counters.hop_bytes->add(bytes * hops);
  message_bytes_.record(static_cast<double>(bytes));
}

void Medley::send(core::NodeId to, const proto::MembershipBody& body, Sent type) {
  std::string bytes = body.SerializeAsString();
  count_sent(to, type, bytes.size());
  messenger_.send(to, kBodyType, std::move(bytes));
}

void Medley::on_datagram(const core::Message& message) {
  auto body = decode_body(message.body, limits_);
  if (!body) {
    decode_errors_.add();
    core::log("membership").debug("bad membership datagram from={} error={}", message.src.to_string(), body.error());
    return;
  }
  heard(message.src);
  // A node we do not know is talking to us: our lists differ by at least
  // that node, so pull its list (it is usually near: probes are skewed).
  if (running_ && table_.find(message.src) == nullptr) sync_from(message.src, true, core::NodeId(), Pull::differences);
  switch (body->kind_case()) {
    case proto::MembershipBody::kPing:
      handle_ping(message.src, body->ping());
      break;
    case proto::MembershipBody::kAck:
      handle_ack(message.src, body->ack());
      break;
    case proto::MembershipBody::kPingReq:
      handle_ping_req(message.src, body->ping_req());
      break;
    case proto::MembershipBody::kNack:
      handle_nack(body->nack());
      break;
    case proto::MembershipBody::kGossip:
      merge_updates(body->gossip().updates());
      break;
    default:
      decode_errors_.add();
      break;
  }
}

void Medley::handle_ping(core::NodeId from, const proto::Ping& ping) {
  merge_updates(ping.updates());
  if (ping.probe_me_more()) grant_boost(from);
  if (core::NodeId(ping.target()) != self()) return;
  note_probed(from, ping.seq());
  proto::MembershipBody body;
  proto::Ack* ack = body.mutable_ack();
  ack->set_seq(ping.seq());
  ack->set_target(self().value());
  fill_updates(from, ack->mutable_updates());
  send(from, body, Sent::ack);
}

void Medley::handle_ack(core::NodeId from, const proto::Ack& ack) {
  merge_updates(ack.updates());
  const core::NodeId target(ack.target());
  heard(target);
  if (probe_ && probe_->seq == ack.seq() && probe_->target == target) {
    probe_->acked = true;
    return;
  }
  auto it = relays_.find(ack.seq());
  if (it == relays_.end() || it->second.target != target || from != target) return;
  const Relay relay = {it->second.requester, it->second.requester_seq, it->second.target, false, nullptr};
  relays_.erase(it);
  proto::MembershipBody body;
  proto::Ack* forward = body.mutable_ack();
  forward->set_seq(relay.requester_seq);
  forward->set_target(target.value());
  fill_updates(relay.requester, forward->mutable_updates());
  send(relay.requester, body, Sent::ack);
}

void Medley::handle_ping_req(core::NodeId from, const proto::PingReq& req) {
  merge_updates(req.updates());
  const core::NodeId target(req.target());
  if (target == self() || left_) return;
  const uint64_t seq = next_seq_++;
  Relay& relay = relays_[seq];
  relay.requester = from;
  relay.requester_seq = req.seq();
  relay.target = target;
  relay.timer = std::make_unique<core::ScopedTimer>(env_);
  const core::Duration timeout = health_.scale(options_.probe_timeout);
  const auto nack_after = core::Duration(
      static_cast<core::Duration::rep>(static_cast<double>(timeout.count()) * options_.nack_fraction));
  relay.timer->start(nack_after, [this, seq, timeout] {
    auto it = relays_.find(seq);
    if (it == relays_.end()) return;
    proto::MembershipBody nack;
    nack.mutable_nack()->set_seq(it->second.requester_seq);
    nack.mutable_nack()->set_target(it->second.target.value());
    send(it->second.requester, nack, Sent::nack);
    // A late ack is still relayed for a while: the requester waits until
    // the end of its protocol period.
    it->second.timer->start(timeout, [this, seq] { relays_.erase(seq); });
  });
  send_ping(target, seq);
}

void Medley::handle_nack(const proto::Nack& nack) {
  if (probe_ && probe_->seq == nack.seq() && probe_->target == core::NodeId(nack.target())) ++probe_->nacks;
}

// ---- Sync ---------------------------------------------------------------------------

void Medley::sync_from(core::NodeId peer, bool reverse, core::NodeId after, Pull pull) {
  if (after.is_unspecified()) {
    if (syncing_.contains(peer)) return;
    syncing_.insert(peer);
    syncs_.add();
  }
  proto::MembershipBody body;
  proto::SyncRequest* req = body.mutable_sync_request();
  to_wire(table_.record_of(self()), req->mutable_sender());
  req->set_after(after.value());
  req->set_reverse(reverse && after.is_unspecified());
  if (pull == Pull::differences && options_.push_pull_members_per_bucket > 0) {
    // Recomputed for every chunk: buckets the last chunk repaired are
    // skipped from here on.
    const MemberDigest mine = digest();
    req->mutable_bucket_digests()->Add(mine.hashes().begin(), mine.hashes().end());
  }
  core::RetryPolicy retry;
  retry.deadline = options_.sync_request_deadline;
  std::string bytes = body.SerializeAsString();
  count_sent(peer, Sent::sync_request, bytes.size());
  auto id = std::make_shared<uint64_t>(0);
  *id = messenger_.request(
      peer, kBodyType, std::move(bytes),
      [this, peer, reverse, pull, id, alive = std::weak_ptr<bool>(alive_)](const core::RequestResult& result) {
        if (!alive.lock()) return;
        pending_requests_.erase(*id);
        if (result.status != core::RequestStatus::ok) {
          syncing_.erase(peer);
          return;
        }
        auto response = decode_body(result.response.body, limits_);
        if (!response || response->kind_case() != proto::MembershipBody::kSyncResponse) {
          decode_errors_.add();
          syncing_.erase(peer);
          return;
        }
        heard(peer);
        core::NodeId last;
        for (const auto& wire : response->sync_response().members()) {
          auto record = from_wire(wire, limits_);
          if (!record) continue;
          merge(*record, true);
          last = std::max(last, record->member.id);
        }
        if (response->sync_response().more() && !last.is_unspecified() && !left_) {
          sync_from(peer, reverse, last, pull);
        } else {
          syncing_.erase(peer);
        }
      },
      retry);
  pending_requests_.insert(*id);
}

void Medley::on_sync_request(const core::Message& request, core::Responder responder) {
  auto body = decode_body(request.body, limits_);
  if (!body || body->kind_case() != proto::MembershipBody::kSyncRequest) {
    decode_errors_.add();
    responder.reject("bad sync request");
    return;
  }
  heard(request.src);
  const proto::SyncRequest& req = body->sync_request();
  auto sender = from_wire(req.sender(), limits_);
  if (sender && sender->member.id == request.src) merge(*sender, false);
  const core::NodeId after(req.after());
  // A request without digests (an older node) gets the whole list.
  std::optional<MemberDigest> theirs;
  std::optional<MemberDigest> mine;
  if (req.bucket_digests_size() > 0) {
    theirs.emplace(std::vector<uint32_t>(req.bucket_digests().begin(), req.bucket_digests().end()));
    mine.emplace(table_, theirs->hashes().size());
  }
  const bool lists_agree = theirs && *theirs == *mine;
  if (lists_agree) digest_matches_.add();
  proto::MembershipBody reply;
  proto::SyncResponse* resp = reply.mutable_sync_response();
  size_t budget = options_.max_message_bytes > kHeaderBytes ? options_.max_message_bytes - kHeaderBytes : 0;
  for (auto it = table_.entries().upper_bound(after); it != table_.entries().end() && !lists_agree; ++it) {
    if (!it->second.has_info || (theirs && !mine->differs_for(it->first, *theirs))) continue;
    const MemberRecord record = table_.record_of(it->first);
    const size_t size = wire_size(record);
    if (size > budget || static_cast<size_t>(resp->members_size()) >= limits_.max_records) {
      resp->set_more(true);
      break;
    }
    budget -= size;
    to_wire(record, resp->add_members());
  }
  std::string bytes = reply.SerializeAsString();
  count_sent(request.src, Sent::sync_response, bytes.size());
  responder.respond(std::move(bytes));
  if (req.reverse() && after.is_unspecified() && running_ && !lists_agree) {
    sync_from(request.src, false, core::NodeId(), Pull::differences);
  }
}

MemberDigest Medley::digest() const {
  return MemberDigest(table_,
                      MemberDigest::bucket_count(table_.with_info_count(), options_.push_pull_members_per_bucket,
                                                 limits_.max_digest_buckets));
}

}  // namespace mesh::membership
