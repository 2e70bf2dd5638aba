#include "routine/device_locks.h"

#include <algorithm>
#include <set>

#include "routine/fault_points.h"

namespace mesh::routine {

void DeviceLocks::grant(Lock& lock, std::string holder) {
  lock.holder = std::move(holder);
  lock.token = ++lock.last_token;
}

void DeviceLocks::request(const std::string& device, const std::string& holder, bool wait, int64_t started_us) {
  if (device.empty() || holder.empty()) return;
  Lock& lock = locks_[device];
  if (lock.holder == holder || std::find(lock.waiting.begin(), lock.waiting.end(), holder) != lock.waiting.end()) {
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
}

std::optional<std::string> DeviceLocks::release(const std::string& device, const std::string& holder) {
  const auto it = locks_.find(device);
  if (it == locks_.end()) return std::nullopt;
  Lock& lock = it->second;
  if (lock.holder != holder) {
    if (std::erase(lock.waiting, holder) != 0) lock.started_us.erase(holder);
    return std::nullopt;
  }
  lock.started_us.erase(holder);
  lock.holder.clear();
  lock.token = 0;
  if (lock.waiting.empty()) return std::nullopt;
  std::string next = std::move(lock.waiting.front());
  lock.waiting.pop_front();
  grant(lock, next);
  return next;
}

proto::LockStatusMsg DeviceLocks::status(const std::string& device, const std::string& holder) const {
  proto::LockStatusMsg status;
  const Lock* lock = find(device);
  if (lock == nullptr) return status;
  status.set_current_holder(lock->holder);
  status.set_holder_token(lock->token);
  if (const auto started = lock->started_us.find(lock->holder); started != lock->started_us.end()) {
    status.set_holder_started_us(started->second);
  }
  if (lock->holder == holder) {
    status.set_state(proto::LOCK_HELD);
    status.set_token(lock->token);
    return status;
  }
  const auto it = std::find(lock->waiting.begin(), lock->waiting.end(), holder);
  if (it != lock->waiting.end()) {
    status.set_state(proto::LOCK_WAITING);
    status.set_ahead(static_cast<uint32_t>(1 + (it - lock->waiting.begin())));
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
    if (lock.free() && lock.waiting.empty() && lock.last_token == 0) continue;
    proto::DeviceLockMsg& msg = out.emplace_back();
    msg.set_device(device);
    msg.set_holder(lock.holder);
    msg.set_token(lock.token);
    for (const auto& waiting : lock.waiting) msg.add_waiting(waiting);
    msg.set_last_token(lock.last_token);
    msg.mutable_started_us()->insert(lock.started_us.begin(), lock.started_us.end());
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
    for (const auto& [named, started] : msg.started_us()) {
      if (named.empty() || seen.count(named) == 0) return false;  // an age of nobody here
      lock.started_us.emplace(named, started);
    }
    if (msg.device().empty() || !locks.emplace(msg.device(), std::move(lock)).second) return false;
  }
  locks_ = std::move(locks);
  return true;
}

}  // namespace mesh::routine
