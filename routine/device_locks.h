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
//
// Rounds. A write whose outcome is unknown may still be applied much later
// (a group re-forming, a partition healing), after writes sent after it.
// So a release by holder alone, sent before its invocation asked for the
// lock again, could take away the grant of the later request: the
// invocation then runs commands on its other devices believing it holds
// this one, while the next waiter uses it (SLA soak seed 22: r2#2 left
// d3's queue while it waited for d0, asked for d3 in order once it held
// d0 and d1, and the leave, applied after that grant, handed d3 to r4#10
// while r2#2 ran its commands on d0 and d1). Hence every place in a lock
// (the holder, each waiter) keeps the round of the request that made it,
// a request of a later round raises it, and a release naming a round
// takes away only a place of an earlier one. An invocation's round grows
// only through a committed step in its routine group, taken before it
// gives locks or places back to ask for them again (routine/
// routine_leaders.h: OLA's retries, a wound, starting over, SLA leaving
// the queues of devices it needs later); its requests name it, and the
// releases it sends then name the new round. So whatever order they are
// applied in, no release sent before a round began frees what that
// round's requests got, and a status read shows whether a grant is of the
// current round (LockStatusMsg.round) before the invocation records it. A
// release naming no round (the invocation's end, a reclaim, EV's own
// releases) takes whatever the holder has: nothing of that holder asks
// again after it.
//
// Lineages (EV, SafeHome §4-5, routine/routine_leaders.h "Serial keys").
// Under EV a request carries its invocation's serial key and places an
// entry in the device's lineage, ordered by (key, holder); the entry asks
// for the lock itself only once `ready` (its invocation is about to use the
// device). The lock goes, when free, to the lowest entry, and only if that
// one is ready: an entry waits for every lower one to be done with the
// device (released), used or not, so the device's users follow key order.
// The lock's floor is the largest key ever granted; an entry below it is
// refused (not placed), as a routine serialized before one that already
// used the device cannot use it any more: its invocation re-keys. So on
// every device, users come in increasing key order, and every precedence
// edge among routines runs from a lower key to a higher one: no cycle.
// A lower key placed before a higher entry's first use goes first: that is
// SafeHome's pre-lease, without the lender giving anything back (a granted
// lock is never taken away; an entry below a granted one is refused).
class DeviceLocks {
 public:
  struct Entry {
    int64_t serial_key_us = 0;
    bool ready = false;
    int64_t expected_first_use_us = 0;
    int64_t expected_done_us = 0;
  };
  struct Lock {
    std::string holder;  // empty: free
    uint64_t token = 0;
    std::deque<std::string> waiting;
    uint64_t last_token = 0;
    // When the holder's and each waiter's invocation was triggered, as their
    // requests said (aggressive ones only): the age wound-wait compares
    // (routine/routine_leaders.h), told to whoever reads the lock.
    std::map<std::string, int64_t> started_us;
    // EV: the entries placed and not yet released, by holder (a granted
    // one included), and the largest (key, holder) ever granted.
    std::map<std::string, Entry> lineage;
    int64_t floor_key_us = 0;
    std::string floor_holder;
    // The holder's and each waiter's round ("Rounds"), where not 0.
    std::map<std::string, uint32_t> rounds;
    bool free() const { return holder.empty(); }
    // The lineage in grant order.
    std::vector<std::pair<std::string, Entry>> ordered_lineage() const;
    // Whose silence keeps the lock from everyone else: the holder, or the
    // lineage's lowest entry while the lock is free (it is not ready yet).
    std::string blocker() const;
  };

  // Holder already holding or waiting: its place keeps, only raised to
  // `round` if that is later. Free lock: granted. Held by another: queued
  // if `wait` (SLA, aggressive), else nothing (OLA: the requester reads
  // LOCK_NONE and backs off).
  void request(const std::string& device, const std::string& holder, bool wait, int64_t started_us = 0,
               uint32_t round = 0);
  // EV: places `holder`'s entry under entry.serial_key_us (> 0), or moves
  // its entry there (a re-key), or marks it ready; refused below the
  // floor. A granted holder: nothing
  // changes. A full lineage takes no new entry. An invocation's keys only
  // grow, so a request under a lower key than its entry's is a late one
  // (sent before a re-key) and changes nothing.
  void place(const std::string& device, const std::string& holder, const Entry& entry);
  // The holder gives it up (the next waiting one is granted), or a waiting
  // one leaves the queue. Unknown holders: nothing changes. Returns the
  // holder granted by this release, if any. With `serial_key_us` (EV), a
  // holder whose entry is under a higher key is not touched: the release
  // is a late one, from before the entry moved up (a re-key). With
  // `before_round`, a holder or waiter whose place is of that round or a
  // later one is not touched: the release is a late one, from before the
  // invocation asked again ("Rounds").
  std::optional<std::string> release(const std::string& device, const std::string& holder, int64_t serial_key_us = 0,
                                     uint32_t before_round = 0);
  // A device handed over from another group (DeviceImport): its lock goes
  // on from where that group's left off (`carried`: its last token and
  // floor, DeviceGroupState::handoff_answer). Tokens stay above every token
  // the lock issued there, and the floor is the larger of the two, so the
  // device's users still come in key order across the move. Entries placed
  // here below the carried floor are dropped (their invocations read
  // LOCK_NONE and re-key); a holder granted under such an entry loses the
  // grant, which it cannot have used: the device was not live here yet.
  void carry_over(const proto::DeviceLockMsg& carried);
  // The device left this group (a handoff froze it here): nobody holds,
  // waits for or has an entry in its lock here any more. Their commands
  // here are refused from the freeze on, and the device's next group fences
  // their tokens and keys with the floor and last token it carries over,
  // which stay. Kept, the entries would come back to life if the device
  // ever returned: a finished invocation's entry, never withdrawn, would
  // hold every later one up (EV sweep with moving devices, seed 2).
  void forget_users(const std::string& device);

  // With `lineage`, the answer carries the lineage's first kMaxLineageAnswer
  // entries (what a timeline placement reads).
  proto::LockStatusMsg status(const std::string& device, const std::string& holder, bool lineage = false) const;
  const Lock* find(const std::string& device) const;
  const std::map<std::string, Lock>& locks() const { return locks_; }

  std::vector<proto::DeviceLockMsg> to_proto() const;
  // False if the messages are inconsistent (duplicate devices, a holder
  // also waiting, a token above last_token); nothing changes then.
  bool restore(const google::protobuf::RepeatedPtrField<proto::DeviceLockMsg>& msgs);

  // Longest wait list accepted per device: a building has a handful of
  // routines per device; the bound keeps one group's state migratable.
  // The same bound holds for a lineage.
  static constexpr size_t kMaxWaiting = 64;
  // Lineage entries per status answer: it must stay one datagram.
  static constexpr size_t kMaxLineageAnswer = 16;

 private:
  void grant(Lock& lock, std::string holder);
  // A free lock with no FIFO waiter goes to the lineage's lowest entry, if
  // that one is ready.
  void grant_in_key_order(Lock& lock);
  std::map<std::string, Lock> locks_;
};

}  // namespace mesh::routine
