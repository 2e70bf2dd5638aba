#include "routine/device_locks.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "routine/fault_points.h"

namespace mesh::routine {

namespace {

bool key_below(int64_t key_us, const std::string& holder, int64_t other_key_us, const std::string& other_holder) {
  return std::tie(key_us, holder) < std::tie(other_key_us, other_holder);
}

proto::LineageEntryMsg entry_to_proto(const std::string& holder, const DeviceLocks::Entry& entry) {
  proto::LineageEntryMsg msg;
  msg.set_holder(holder);
  msg.set_serial_key_us(entry.serial_key_us);
  msg.set_ready(entry.ready);
  msg.set_expected_first_use_us(entry.expected_first_use_us);
  msg.set_expected_done_us(entry.expected_done_us);
  return msg;
}

}  // namespace

std::vector<std::pair<std::string, DeviceLocks::Entry>> DeviceLocks::Lock::ordered_lineage() const {
  std::vector<std::pair<std::string, Entry>> ordered(lineage.begin(), lineage.end());
  std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    return key_below(a.second.serial_key_us, a.first, b.second.serial_key_us, b.first);
  });
  return ordered;
}

std::string DeviceLocks::Lock::blocker() const {
  if (!free()) return holder;
  const auto ordered = ordered_lineage();
  return ordered.empty() ? std::string() : ordered.front().first;
}

void DeviceLocks::grant(Lock& lock, std::string holder) {
  lock.holder = std::move(holder);
  lock.token = ++lock.last_token;
}

void DeviceLocks::grant_in_key_order(Lock& lock) {
  if (!lock.free() || !lock.waiting.empty() || lock.lineage.empty()) return;
  const auto ordered = lock.ordered_lineage();
  auto first = ordered.begin();
  if (fault_points().grant_out_of_key_order) {
    first = std::find_if(ordered.begin(), ordered.end(), [](const auto& e) { return e.second.ready; });
    if (first == ordered.end()) return;
  }
  const auto& [lowest, entry] = *first;
  if (!entry.ready) return;
  if (key_below(lock.floor_key_us, lock.floor_holder, entry.serial_key_us, lowest)) {
    lock.floor_key_us = entry.serial_key_us;
    lock.floor_holder = lowest;
  }
  grant(lock, lowest);
}

void DeviceLocks::place(const std::string& device, const std::string& holder, const Entry& entry) {
  if (device.empty() || holder.empty() || entry.serial_key_us <= 0) return;
  Lock& lock = locks_[device];
  if (lock.holder == holder || std::find(lock.waiting.begin(), lock.waiting.end(), holder) != lock.waiting.end()) {
    return;
  }
  const auto placed = lock.lineage.find(holder);
  if (placed != lock.lineage.end() && placed->second.serial_key_us > entry.serial_key_us) return;
  if (placed != lock.lineage.end() && placed->second.serial_key_us == entry.serial_key_us) {
    placed->second.ready = placed->second.ready || entry.ready;
    placed->second.expected_first_use_us = entry.expected_first_use_us;
    placed->second.expected_done_us = entry.expected_done_us;
    grant_in_key_order(lock);
    return;
  }
  // Refused: someone serialized after this key already used the device.
  // (Only a new entry can be: every entry is above the floor, a grant
  // going to the lowest, and entries only move up.)
  if (key_below(entry.serial_key_us, holder, lock.floor_key_us, lock.floor_holder)) return;
  if (placed == lock.lineage.end() && lock.lineage.size() >= kMaxWaiting) return;
  lock.lineage[holder] = entry;
  grant_in_key_order(lock);
}

void DeviceLocks::request(const std::string& device, const std::string& holder, bool wait, int64_t started_us,
                          uint32_t round) {
  if (device.empty() || holder.empty()) return;
  Lock& lock = locks_[device];
  if (lock.holder == holder || std::find(lock.waiting.begin(), lock.waiting.end(), holder) != lock.waiting.end()) {
    if (round != 0) {
      uint32_t& kept = lock.rounds[holder];
      kept = std::max(kept, round);
    }
    return;
  }
  if (lock.free() || fault_points().ignore_locks) {
    std::erase(lock.waiting, holder);
    if (!lock.holder.empty()) lock.started_us.erase(lock.holder);
    grant(lock, holder);
  } else if (wait && lock.waiting.size() < kMaxWaiting) {
    lock.waiting.push_back(holder);
  } else {
    return;
  }
  if (started_us != 0) lock.started_us[holder] = started_us;
  if (round != 0) lock.rounds[holder] = round;
}

void DeviceLocks::carry_over(const proto::DeviceLockMsg& carried) {
  if (carried.device().empty() || carried.floor_key_us() < 0 ||
      (carried.floor_key_us() == 0) != carried.floor_holder().empty()) {
    return;
  }
  Lock& lock = locks_[carried.device()];
  lock.last_token = std::max(lock.last_token, carried.last_token());
  if (!key_below(lock.floor_key_us, lock.floor_holder, carried.floor_key_us(), carried.floor_holder())) return;
  lock.floor_key_us = carried.floor_key_us();
  lock.floor_holder = carried.floor_holder();
  const auto below_floor = [&lock](const std::string& holder, const Entry& entry) {
    return key_below(entry.serial_key_us, holder, lock.floor_key_us, lock.floor_holder);
  };
  const auto held = lock.lineage.find(lock.holder);
  const bool holder_below = held != lock.lineage.end() && below_floor(held->first, held->second);
  std::erase_if(lock.lineage, [&](const auto& placed) {
    return placed.first != lock.holder && below_floor(placed.first, placed.second);
  });
  if (holder_below) {
    const std::string revoked = lock.holder;  // release() clears lock.holder
    release(carried.device(), revoked);       // and grants the lowest entry left, if ready
  }
}

void DeviceLocks::forget_users(const std::string& device) {
  const auto it = locks_.find(device);
  if (it == locks_.end()) return;
  Lock& lock = it->second;
  lock.holder.clear();
  lock.token = 0;
  lock.waiting.clear();
  lock.started_us.clear();
  lock.rounds.clear();
  lock.lineage.clear();
}

std::optional<std::string> DeviceLocks::release(const std::string& device, const std::string& holder,
                                                int64_t serial_key_us, uint32_t before_round) {
  const auto it = locks_.find(device);
  if (it == locks_.end()) return std::nullopt;
  Lock& lock = it->second;
  if (const auto round = lock.rounds.find(holder);
      before_round != 0 && round != lock.rounds.end() && round->second >= before_round) {
    return std::nullopt;
  }
  if (const auto entry = lock.lineage.find(holder);
      serial_key_us != 0 && entry != lock.lineage.end() && entry->second.serial_key_us > serial_key_us) {
    return std::nullopt;
  }
  const bool was_placed = lock.lineage.erase(holder) != 0;
  if (lock.holder != holder) {
    if (std::erase(lock.waiting, holder) != 0) {
      lock.started_us.erase(holder);
      lock.rounds.erase(holder);
    }
    if (!was_placed) return std::nullopt;
    // A withdrawn entry may have been the one a ready entry waited for.
    grant_in_key_order(lock);
    return lock.free() ? std::nullopt : std::optional(lock.holder);
  }
  lock.started_us.erase(holder);
  lock.rounds.erase(holder);
  lock.holder.clear();
  lock.token = 0;
  if (lock.waiting.empty()) {
    grant_in_key_order(lock);
    return lock.free() ? std::nullopt : std::optional(lock.holder);
  }
  std::string next = std::move(lock.waiting.front());
  lock.waiting.pop_front();
  grant(lock, next);
  return next;
}

proto::LockStatusMsg DeviceLocks::status(const std::string& device, const std::string& holder, bool lineage) const {
  proto::LockStatusMsg status;
  const Lock* lock = find(device);
  if (lock == nullptr) return status;
  status.set_current_holder(lock->holder);
  status.set_holder_token(lock->token);
  status.set_floor_key_us(lock->floor_key_us);
  status.set_floor_holder(lock->floor_holder);
  const auto ordered = lock->ordered_lineage();
  if (lineage) {
    for (size_t i = 0; i < ordered.size() && i < kMaxLineageAnswer; ++i) {
      *status.add_lineage() = entry_to_proto(ordered[i].first, ordered[i].second);
    }
  }
  if (const auto started = lock->started_us.find(lock->holder); started != lock->started_us.end()) {
    status.set_holder_started_us(started->second);
  }
  if (const auto round = lock->rounds.find(holder); round != lock->rounds.end()) status.set_round(round->second);
  if (lock->holder == holder) {
    status.set_state(proto::LOCK_HELD);
    status.set_token(lock->token);
    return status;
  }
  const auto it = std::find(lock->waiting.begin(), lock->waiting.end(), holder);
  if (it != lock->waiting.end()) {
    status.set_state(proto::LOCK_WAITING);
    status.set_ahead(static_cast<uint32_t>(1 + (it - lock->waiting.begin())));
    return status;
  }
  const auto placed =
      std::find_if(ordered.begin(), ordered.end(), [&holder](const auto& e) { return e.first == holder; });
  if (placed != ordered.end()) {
    status.set_state(proto::LOCK_PLACED);
    status.set_placed_key_us(placed->second.serial_key_us);
    status.set_placed_ready(placed->second.ready);
    status.set_ahead(static_cast<uint32_t>(placed - ordered.begin()));  // a holder's entry is among them
  }
  return status;
}

const DeviceLocks::Lock* DeviceLocks::find(const std::string& device) const {
  const auto it = locks_.find(device);
  return it == locks_.end() ? nullptr : &it->second;
}

std::vector<proto::DeviceLockMsg> DeviceLocks::to_proto() const {
  std::vector<proto::DeviceLockMsg> out;
  for (const auto& [device, lock] : locks_) {
    if (lock.free() && lock.waiting.empty() && lock.last_token == 0 && lock.lineage.empty()) continue;
    proto::DeviceLockMsg& msg = out.emplace_back();
    msg.set_device(device);
    msg.set_holder(lock.holder);
    msg.set_token(lock.token);
    for (const auto& waiting : lock.waiting) msg.add_waiting(waiting);
    msg.set_last_token(lock.last_token);
    msg.mutable_started_us()->insert(lock.started_us.begin(), lock.started_us.end());
    msg.mutable_rounds()->insert(lock.rounds.begin(), lock.rounds.end());
    for (const auto& [holder, entry] : lock.ordered_lineage()) *msg.add_lineage() = entry_to_proto(holder, entry);
    msg.set_floor_key_us(lock.floor_key_us);
    msg.set_floor_holder(lock.floor_holder);
  }
  return out;
}

bool DeviceLocks::restore(const google::protobuf::RepeatedPtrField<proto::DeviceLockMsg>& msgs) {
  std::map<std::string, Lock> locks;
  for (const auto& msg : msgs) {
    Lock lock;
    lock.holder = msg.holder();
    lock.token = msg.token();
    lock.last_token = msg.last_token();
    std::set<std::string> seen{lock.holder};
    for (const auto& waiting : msg.waiting()) {
      if (waiting.empty() || !seen.insert(waiting).second) return false;
      lock.waiting.push_back(waiting);
    }
    if (lock.token > lock.last_token || (lock.free() && (lock.token != 0 || !lock.waiting.empty())) ||
        lock.waiting.size() > kMaxWaiting) {
      return false;
    }
    for (const auto& entry : msg.lineage()) {
      // A lineage entry is the holder's own or nobody else's here.
      if (entry.holder().empty() || entry.serial_key_us() <= 0 ||
          (entry.holder() != lock.holder && seen.count(entry.holder()) != 0) ||
          !lock.lineage
               .emplace(entry.holder(), Entry{entry.serial_key_us(), entry.ready(), entry.expected_first_use_us(),
                                              entry.expected_done_us()})
               .second) {
        return false;
      }
    }
    if (lock.lineage.size() > kMaxWaiting || msg.floor_key_us() < 0 ||
        (msg.floor_key_us() == 0) != msg.floor_holder().empty()) {
      return false;
    }
    lock.floor_key_us = msg.floor_key_us();
    lock.floor_holder = msg.floor_holder();
    for (const auto& [named, started] : msg.started_us()) {
      if (named.empty() || seen.count(named) == 0) return false;  // an age of nobody here
      lock.started_us.emplace(named, started);
    }
    for (const auto& [named, round] : msg.rounds()) {
      if (named.empty() || seen.count(named) == 0 || round == 0) return false;  // a round of nobody here
      lock.rounds.emplace(named, round);
    }
    if (msg.device().empty() || !locks.emplace(msg.device(), std::move(lock)).second) return false;
  }
  locks_ = std::move(locks);
  return true;
}

}  // namespace mesh::routine
