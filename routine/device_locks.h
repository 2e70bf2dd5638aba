#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/routine.pb.h"

namespace mesh::routine {

// The locks of one device group's devices (CoMesh 4.2): per device one
// holder at a time and a FIFO wait list. It is part of the group's
// replicated state (DeviceGroupState), so every operation below is an
// applied update, deterministic on every replica, and the queue survives
// any leader change and migrates with the group.
//
// A grant happens at apply time: the request that finds the lock free, or
// the release that hands it to the head of the wait list. So a grant is
// replicated at a quorum before anyone can learn of it (the requester
// learns by reading through the leader, or from the leader's notice sent
// after the commit): no two holders can ever both believe they hold it.
//
// Every grant gets a fencing token, larger than any earlier one of the
// device. A routine's command carries the token it was granted; the device
// group refuses to actuate a command whose token is not the current
// holder's (DeviceGroupState, CommandActuating), so a holder whose lock was
// reclaimed (it stopped renewing: its whole group vanished, or it was cut
// off for longer than the reclaim timeout) cannot actuate afterwards.
//
// Holders are strings "ROUTINE#SEQ" (one invocation of one routine). All
// operations are idempotent, as the routine leader repeats them after any
// unknown outcome and after its own fail-over.
class DeviceLocks {
 public:
  struct Lock {
    std::string holder;  // empty: free
    uint64_t token = 0;
    std::deque<std::string> waiting;
    uint64_t last_token = 0;
    // When the holder's and each waiter's invocation was triggered, as their
    // requests said (aggressive ones only): the age wound-wait compares
    // (routine/routine_leaders.h), told to whoever reads the lock.
    std::map<std::string, int64_t> started_us;
    bool free() const { return holder.empty(); }
  };

  // Holder already holding or waiting: nothing changes. Free lock: granted.
  // Held by another: queued if `wait` (SLA, aggressive), else nothing (OLA:
  // the requester reads LOCK_NONE and backs off).
  void request(const std::string& device, const std::string& holder, bool wait, int64_t started_us = 0);
  // The holder gives it up (the next waiting one is granted), or a waiting
  // one leaves the queue. Unknown holders: nothing changes. Returns the
  // holder granted by this release, if any.
  std::optional<std::string> release(const std::string& device, const std::string& holder);

  proto::LockStatusMsg status(const std::string& device, const std::string& holder) const;
  const Lock* find(const std::string& device) const;
  const std::map<std::string, Lock>& locks() const { return locks_; }

  std::vector<proto::DeviceLockMsg> to_proto() const;
  // False if the messages are inconsistent (duplicate devices, a holder
  // also waiting, a token above last_token); nothing changes then.
  bool restore(const google::protobuf::RepeatedPtrField<proto::DeviceLockMsg>& msgs);

  // Longest wait list accepted per device: a building has a handful of
  // routines per device; the bound keeps one group's state migratable.
  static constexpr size_t kMaxWaiting = 64;

 private:
  void grant(Lock& lock, std::string holder);
  std::map<std::string, Lock> locks_;
};

}  // namespace mesh::routine
