#include "sim/kgroup_world.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace mesh::sim {

using kgroup::GroupReplica;
using std::chrono::milliseconds;

bool newer(const proto::KgroupRef& a, const proto::KgroupRef& b) {
  return a.epoch() != b.epoch() ? a.epoch() > b.epoch() : a.generation() > b.generation();
}

KgroupWorld::KgroupWorld(uint64_t seed, KgroupWorldOptions options)
    : seed_(seed),
      options_(std::move(options)),
      topology_(options_.topology ? *options_.topology
                                  : random_geometric(static_cast<int>(options_.nodes), mix_seed(seed, 0x70b0))),
      simulator_(seed),
      network_(simulator_, mix_seed(seed, 0xbeef)),
      routing_(simulator_, network_, mix_seed(seed, 0xfeed)),
      smart_(topology_.size(), true),
      slots_(topology_.size()) {
  if (options_.hop_arq) routing_.enable_hop_arq(*options_.hop_arq);
  LinkParams params;
  params.delay = options_.hop_delay;
  params.jitter = options_.hop_jitter;
  params.loss = options_.hop_loss;
  for (size_t i = 0; i < topology_.size(); ++i) ids_.push_back(network_.add_node());
  for (const auto& [a, b] : topology_.edges) {
    network_.connect(ids_[static_cast<size_t>(a)], ids_[static_cast<size_t>(b)], params);
  }
  if (options_.smart != 0 && options_.smart < topology_.size()) {
    std::vector<size_t> order(topology_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    core::Rng rng(mix_seed(seed, 0x5a47));
    std::shuffle(order.begin(), order.end(), rng);
    std::fill(smart_.begin(), smart_.end(), false);
    for (size_t i = 0; i < options_.smart; ++i) smart_[order[i]] = true;
  }
  if (!options_.select) {
    options_.select = [k = options_.k](const std::vector<kgroup::SmartNode>& live, const kgroup::GroupTarget& target,
                                       uint64_t epoch) {
      std::vector<core::NodeId> out;
      for (const auto& m : kgroup::hash_select(live, target, epoch, k)) out.push_back(m.id);
      return out;
    };
  }
  if (options_.epoch_length) schedule_.emplace(*options_.epoch_length, core::TimePoint{});
}

KgroupWorld::~KgroupWorld() = default;

size_t KgroupWorld::index_of(core::NodeId id) const {
  return static_cast<size_t>(std::find(ids_.begin(), ids_.end(), id) - ids_.begin());
}

std::vector<kgroup::SmartNode> KgroupWorld::smart_nodes() const {
  std::vector<kgroup::SmartNode> out;
  for (size_t i = 0; i < size(); ++i) {
    if (smart_[i]) out.push_back({ids_[i], topology_.positions[i]});
  }
  return out;
}

GroupReplica* KgroupWorld::replica(size_t i, const std::string& target, uint64_t epoch, uint32_t generation) {
  if (!up(i)) return nullptr;
  return slots_[i].host->find(target, epoch, generation);
}

GroupReplica* KgroupWorld::replica(size_t i, const kgroup::GroupConfig& config) {
  return replica(i, config.target.to_string(), config.epoch, config.generation);
}

CounterLog& KgroupWorld::counter_log(GroupReplica& replica) {
  return dynamic_cast<CounterLog&>(replica.state_machine());
}

std::optional<proto::KgroupRef> KgroupWorld::newest(const std::string& target) {
  std::optional<proto::KgroupRef> best;
  for (size_t i = 0; i < size(); ++i) {
    if (!up(i)) continue;
    if (GroupReplica* r = slots_[i].host->latest(target); r && (!best || newer(r->ref(), *best))) best = r->ref();
  }
  return best;
}

GroupReplica* KgroupWorld::serving_leader(const std::string& target) {
  GroupReplica* best = nullptr;
  for (size_t i = 0; i < size(); ++i) {
    if (!up(i)) continue;
    GroupReplica* r = slots_[i].host->latest(target);
    if (r == nullptr || !r->serving()) continue;
    if (best == nullptr || newer(r->ref(), best->ref()) ||
        (!newer(best->ref(), r->ref()) && r->leader_term() > best->leader_term())) {
      best = r;
    }
  }
  return best;
}

void KgroupWorld::boot_all() {
  booting_all_ = true;
  for (size_t i = 0; i < size(); ++i) {
    if (smart_[i]) boot(i);
  }
  booting_all_ = false;
}

void KgroupWorld::boot(size_t i) {
  Slot& s = slots_[i];
  network_.set_node_up(ids_[i], true);
  const bool first = s.incarnation == 0;
  s.env = std::make_unique<SimEnv>(simulator_, seed_, static_cast<uint32_t>(i), s.incarnation++);
  s.metrics = std::make_unique<core::Metrics>();
  auto checked = core::ChecksummedStorage::open(s.storage);
  if (!checked) throw std::logic_error("memory storage failed to open: " + checked.error());
  s.checked = std::move(*checked);
  s.messenger =
      std::make_unique<core::Messenger>(*s.env, routing_.transport(ids_[i]), *s.metrics, core::Messenger::Options{});
  s.view = std::make_unique<membership::StaticMemberView>(ids_[i]);
  std::vector<membership::Member> members;
  for (size_t j = 0; j < size(); ++j) {
    if (!smart_[j] || (j != i && !up(j) && !booting_all_)) continue;
    members.push_back(member_record(j));
  }
  s.view->set_members(members);
  kgroup::GroupHost::Selector select;
  if (schedule_) {
    membership::StaticMemberView* view = s.view.get();
    select = [this, view](const kgroup::GroupTarget& target, uint64_t epoch) {
      if (frozen_) return std::vector<core::NodeId>{};
      std::vector<kgroup::SmartNode> live;
      for (const auto& m : view->live_members()) live.push_back({m.id, m.location});
      return options_.select(live, target, epoch);
    };
  }
  const size_t index = i;
  s.host = std::make_unique<kgroup::GroupHost>(
      *s.env, *s.messenger, *s.checked, *s.view, *s.metrics, options_.replica,
      [this, index](const kgroup::GroupTarget& target) {
        std::function<void()> restored;
        if (on_restored_) {
          restored = [this, index, name = target.to_string()] {
            if (on_restored_) on_restored_(index, name);
          };
        }
        return std::make_unique<CounterLog>(checker_, target.to_string(), std::move(restored));
      },
      std::move(select), schedule_ ? &*schedule_ : nullptr);
  const core::NodeId self = ids_[i];
  s.host->set_on_join([this, self, index](GroupReplica& replica) {
    replica.set_on_elected([this, &replica, key = group_key(replica.ref()), self, index](uint64_t term) {
      checker_.elected(key, term, self);
      if (on_elected_) on_elected_(index, replica, term);
    });
  });
  s.host->restore();
  if (!first) return;
  for (const kgroup::GroupConfig& config : groups_) {
    if (std::find(config.members.begin(), config.members.end(), self) == config.members.end()) continue;
    s.host->join(config);
  }
}

void KgroupWorld::crash(size_t i) {
  Slot& s = slots_[i];
  network_.set_node_up(ids_[i], false);
  s.host.reset();
  s.view.reset();
  s.messenger.reset();
  s.env.reset();
  s.metrics.reset();
  s.checked.reset();
}

void KgroupWorld::crash_for_a_while(size_t i, core::Rng& rng, const CrashTiming& timing) {
  crash(i);
  const core::Duration detect = timing.detect_min + milliseconds(rng.below(timing.detect_spread_ms));
  simulator_.after(detect, [this, i] {
    if (!up(i)) announce_failed(i);
  });
  const core::Duration down = timing.down_min + milliseconds(rng.below(timing.down_spread_ms));
  simulator_.after(down, [this, i] {
    if (up(i)) return;
    boot(i);
    announce_alive(i);
  });
}

std::optional<size_t> KgroupWorld::highest_term_leader(const std::vector<size_t>& members,
                                                       const kgroup::GroupConfig& config) {
  std::optional<size_t> best;
  uint64_t best_term = 0;
  for (size_t m : members) {
    kgroup::GroupReplica* r = replica(m, config);
    if (r != nullptr && r->role() == kgroup::Role::leader && r->leader_term() >= best_term) {
      best = m;
      best_term = r->leader_term();
    }
  }
  return best;
}

void KgroupWorld::crash_members_until(core::TimePoint until, core::Rng& rng, std::vector<size_t> members,
                                      const kgroup::GroupConfig& config, size_t f, bool partitions) {
  if (simulator_.now() >= until) return;
  size_t down = 0;
  for (size_t m : members) down += up(m) ? 0 : 1;
  const uint64_t action = rng.below(10);
  if (partitions && rng.below(3) == 0) {
    partition_for_a_while(rng);
  } else if (action < 5) {
    if (auto leader = highest_term_leader(members, config); leader && down < f) crash_for_a_while(*leader, rng);
  } else if (action < 8) {
    const size_t m = members[rng.below(members.size())];
    if (up(m) && down < f) crash_for_a_while(m, rng);
  } else if (down == 0) {
    std::vector<size_t> shuffled = members;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    for (size_t i = 0; i < f; ++i) crash_for_a_while(shuffled[i], rng);
  }
  simulator_.after(std::chrono::milliseconds(300 + rng.below(1500)),
                   [this, until, &rng, members = std::move(members), config, f, partitions]() mutable {
                     crash_members_until(until, rng, std::move(members), config, f, partitions);
                   });
}

void KgroupWorld::partition_for_a_while(core::Rng& rng) {
  std::vector<core::NodeId> side;
  for (size_t i = 0; i < size(); ++i) {
    if (rng.below(2) == 0) side.push_back(ids_[i]);
  }
  network_.partition({side});
  simulator_.after(milliseconds(300 + rng.below(2500)), [this] { network_.heal(); });
}

void KgroupWorld::announce_failed(size_t i) {
  for (size_t j = 0; j < size(); ++j) {
    if (j != i && up(j)) slots_[j].view->mark_failed(ids_[i]);
  }
}

void KgroupWorld::announce_alive(size_t i) {
  for (size_t j = 0; j < size(); ++j) {
    if (j != i && up(j)) slots_[j].view->upsert(member_record(i));
  }
}

void KgroupWorld::settle() {
  network_.heal();
  for (size_t i = 0; i < size(); ++i) {
    if (smart_[i] && !up(i)) {
      boot(i);
      announce_alive(i);
    }
  }
}

uint64_t KgroupWorld::submit(GroupReplica& replica, const std::string& target,
                             std::function<void(const kgroup::SubmitResult&)> done) {
  const uint64_t value = next_value_++;
  checker_.submitted(target, value);
  replica.submit(std::to_string(value),
                 [this, &replica, target, value, done = std::move(done)](const kgroup::SubmitResult& result) {
                   if (result.status == kgroup::SubmitStatus::committed) {
                     if (const auto position = counter_log(replica).position_of(value)) {
                       checker_.acked(target, *position, value);
                     } else {
                       checker_.fail("value " + std::to_string(value) + " committed but not in the leader's state");
                     }
                   }
                   if (done) done(result);
                 });
  return value;
}

void KgroupWorld::start_client(core::Rng& rng, std::function<GroupReplica*()> pick) {
  client_on_ = true;
  client_rng_ = &rng;
  client_pick_ = std::move(pick);
  simulator_.after(milliseconds(100), [this] { client_tick(); });
}

void KgroupWorld::client_tick() {
  if (!client_on_) return;
  check_reads();
  if (GroupReplica* r = client_pick_()) submit(*r, r->ref().target());
  simulator_.after(milliseconds(5 + client_rng_->below(40)), [this] { client_tick(); });
}

void KgroupWorld::check_reads() {
  for (size_t i = 0; i < size(); ++i) {
    if (!up(i)) continue;
    for (GroupReplica* r : slots_[i].host->replicas()) {
      if (r->can_read() && !r->sealed()) {
        checker_.read(r->ref().target(), group_key(r->ref()), counter_log(*r).values());
      }
    }
  }
}

std::vector<std::string> KgroupWorld::check_settled(const std::string& target, uint64_t epoch, uint32_t generation,
                                                    core::Duration converge) {
  std::vector<std::string> failures;
  auto fail = [&](const std::string& what) { failures.push_back(what); };
  auto finish = [&] {
    for (const auto& f : checker_.failures()) {
      if (std::find(failures.begin(), failures.end(), f) == failures.end()) failures.push_back(f);
    }
    return failures;
  };
  const std::string key = target + "#" + std::to_string(epoch) + "." + std::to_string(generation);
  // The group's configuration, as its members hold it.
  std::vector<core::NodeId> members;
  for (size_t i = 0; i < size() && members.empty(); ++i) {
    if (GroupReplica* r = replica(i, target, epoch, generation)) members = r->config().members;
  }
  if (members.empty()) {
    fail("no live node holds " + key);
    return finish();
  }
  // Elections finished: one leader, the best-scored member, followed by all.
  const size_t top = index_of(members.front());
  GroupReplica* leader = replica(top, target, epoch, generation);
  if (leader == nullptr || !leader->serving()) {
    fail("after settling the best-scored member n" + std::to_string(top) + " of " + key + " is not serving (" +
         std::string(leader ? kgroup::to_string(leader->role()) : "absent") + ")");
    return finish();
  }
  for (core::NodeId id : members) {
    GroupReplica* r = replica(index_of(id), target, epoch, generation);
    if (r == nullptr) {
      fail("member " + id.to_string() + " never started " + key);
    } else if (r != leader && (r->role() != kgroup::Role::follower || r->leader() != leader->leader())) {
      fail("member " + id.to_string() + " is " + std::string(kgroup::to_string(r->role())) + " following " +
           r->leader().to_string());
    }
  }
  // The settled group still commits.
  bool committed = false;
  submit(*leader, target, [&committed](const kgroup::SubmitResult& result) {
    committed = committed || result.status == kgroup::SubmitStatus::committed;
  });
  run_for(milliseconds(2000));
  if (!committed) fail("the settled leader did not commit a new update");
  // Inheritance: every acknowledged update is in the leader's state, at its
  // sequence number, so in acknowledgement order.
  const std::vector<uint64_t> values = counter_log(*leader).values();
  for (const auto& ack : checker_.acks()) {
    if (ack.target != target) continue;
    if (ack.position >= values.size() || values[ack.position] != ack.value) {
      fail("acknowledged value " + std::to_string(ack.value) + " at position " + std::to_string(ack.position) +
           " missing from the leader's state");
      break;
    }
  }
  // Followers converge to the same state.
  run_for(converge);
  for (core::NodeId id : members) {
    GroupReplica* r = replica(index_of(id), target, epoch, generation);
    if (r != nullptr && counter_log(*r).values() != values) {
      fail("member " + id.to_string() + " holds " + std::to_string(counter_log(*r).values().size()) +
           " values that differ from the leader's " + std::to_string(values.size()));
    }
  }
  return finish();
}

membership::Member KgroupWorld::member_record(size_t j) const {
  membership::Member m;
  m.id = ids_[j];
  m.name = std::string("n").append(std::to_string(j));
  m.incarnation = slots_[j].incarnation;
  m.location = topology_.positions[j];
  return m;
}

}  // namespace mesh::sim
