#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/env.h"
#include "core/metrics.h"
#include "kgroup/group_client.h"
#include "kgroup/group_host.h"
#include "kgroup/group_selector.h"
#include "mutex/camera.h"
#include "routine/catalog.h"
#include "routine/command_deduction.h"
#include "routine/device_watcher.h"
#include "routine/routine_combo.h"
#include "routine/routine_group_state.h"
#include "routine/routine_messages.h"
#include "routine/routine_model.h"
#include "routine/serial_key_choice.h"
#include "routine/visibility.h"

namespace mesh::routine {

struct RoutineLeaderOptions {
  // How concurrent routines are isolated (routine/visibility.h); the same
  // on every node.
  Visibility visibility = Visibility::ev;
  // The mesh's lock strategy; a routine may override it (`lock = "ola"`).
  LockStrategy strategy = LockStrategy::sla;
  // EV: how an invocation chooses its serial key (routine/
  // serial_key_choice.h), and whether pre- and post-leases happen (each can
  // be turned off for experiments, as in SafeHome Fig. 15).
  EvScheduler ev_scheduler = EvScheduler::tl;
  bool ev_pre_lease = true;
  bool ev_post_lease = true;
  // EV: what one command is expected to take beyond its own duration (the
  // round trips to its device group), when an invocation tells the
  // lineages when it expects to use its devices.
  core::Duration expected_command_time = std::chrono::milliseconds(400);
  // How a precondition command's value is chosen inside an interval
  // (routine/command_deduction.h); the same on every node.
  DeductionPolicy deduction;
  // How often this node looks for routine groups it started or stopped leading.
  core::Duration scan_interval = std::chrono::milliseconds(200);
  // While waiting for a lock or a command's outcome, ask its device group
  // this often (the grant itself is committed there before it is read).
  core::Duration poll_interval = std::chrono::milliseconds(200);
  // Held locks are renewed at every member of the device's group this often
  // (DeviceLeaderOptions::lock_reclaim_after is the other side).
  core::Duration renew_interval = std::chrono::seconds(3);
  // One write or read to another group gives up after this (and is retried).
  core::Duration request_timeout = std::chrono::seconds(5);
  // A rollback that lost a resource (its grant was reclaimed: a leader
  // change, Camera's failure handling) waits this long to take it again
  // before it undoes anything; then it stops and leaves what ran in place,
  // reported in the invocation's history. The resource's holder may be
  // queued for a device this invocation holds, a cycle only this bound
  // breaks.
  core::Duration rollback_resource_wait = std::chrono::seconds(30);
  // OLA: after a refusal, wait a random time in [backoff_min, backoff_max *
  // 2^(attempt-1)] (capped at backoff_cap) before trying again.
  core::Duration backoff_min = std::chrono::milliseconds(100);
  core::Duration backoff_max = std::chrono::milliseconds(500);
  core::Duration backoff_cap = std::chrono::seconds(5);
  // Env time at the Unix epoch (as DeviceLeaderOptions) and the offset of
  // local time from UTC, for trigger windows and days.
  core::TimePoint clock_origin{};
  int32_t utc_offset_minutes = 0;
};

// The routine leaders of one node (CoMesh 4.2): for every routine group
// ("routine:ID") this node leads, watch the devices its trigger names,
// trigger it, and drive each invocation through its phases:
//
//  - Trigger: on every change of a trigger device (DeviceWatcher), and when
//    a session begins on the states its node already holds (a change heard
//    while the node led nothing is told to no listener again), the
//    trigger is evaluated at local time; if it holds, a RoutineTrigger
//    naming the change (device, version) is committed. The group drops it
//    if that change was already acted on or the routine's minimum interval
//    has not passed, so a new leader re-evaluating what its predecessor saw
//    does not trigger twice.
//  - ACQUIRING_LOCKS: first the mesh-wide resources the routine names
//    (`uses`), taken with Camera (mutex/camera.h) one at a time in name
//    order (under GSV the global routine resource before them,
//    routine/visibility.h), each grant committed (ResourceHeld: resource, fencing token,
//    the node holding it) before the next; then the devices of its
//    commands, locked at their device groups. SLA: one at a time in
//    increasing device id, each queued until granted (no wait-for cycle:
//    deadlock-free; the holder of the smallest contended device always
//    progresses; resources come first and in one order too, so no cycle
//    runs through them either). OLA: all at once, each taken only if free;
//    on any refusal every lock is given back and the routine tries again
//    after a randomized, growing backoff (its resources kept). Each grant
//    is committed here (LockHeld, with its fencing token) before the next
//    step. Under WV no device is locked: the invocation goes on to
//    EXECUTING once it holds its resources. Whenever it gives its locks
//    back to take them again (an OLA refusal, a wound, starting over, SLA
//    leaving the queues of its later devices), it first commits a new
//    lock round (`lock_round`): its requests name the round, and the
//    releases it sends then take only what earlier rounds got (routine/
//    device_locks.h, "Rounds"). A release whose write went unanswered may
//    land after later writes; naming only the holder, it would free a lock
//    granted to the invocation since, which then runs its commands on its
//    other devices while someone else uses this one.
//  - Aggressive strategy (APEX §7.2, `lock = "aggressive"`): non-
//    conservative strict 2PL. Once its resources are held the invocation
//    asks for every device lock at once (each queued at its device group,
//    the paper's AR) and enters EXECUTING without waiting. Before each
//    command it waits only for the locks of that command's stage (the
//    routine command it is or serves, with that command's precondition
//    graph), confirmed together (one status read per device, one committed
//    step for all those granted); a stage with precondition rules is
//    planned once its devices are held, from their states read then (a
//    staged plan, one committed step per stage, routine/routine_combo.h).
//    No lock is given up before the end (strict): a rollback needs none
//    again, and nobody changes a precondition it set. Locks taken in any
//    order can wait in a cycle, so:
//  - Wound-wait (APEX §7.1.1 arbitration, and how it meets our ordered
//    locking): an aggressive invocation's lock requests carry its age (its
//    trigger time; ties by holder name), a conservative one's carry none,
//    and a waiter reads the holder's age and token with the lock's status.
//    An aggressive invocation waiting for a lock wounds the holder if the
//    holder is aggressive and younger; an SLA invocation waiting wounds an
//    aggressive holder whatever its age; nobody wounds a conservative
//    holder. A wound is a `wounded` step committed in the holder's routine
//    group, naming the device and the holder's token (the paper forwards
//    the challenge to the holder). The wounded invocation, if it has run
//    nothing yet, gives every lock back and acquires again, keeping its
//    age (and planning again: a plan deduced under those locks is
//    dropped); otherwise it aborts and rolls back under the locks it still
//    holds (an undo needs no new lock), then releases.
//    Where this departs from the paper: there, a conservative combo still
//    reserving loses to an older challenger, as its all-at-once
//    reservations can close wait cycles among themselves; SLA's ordered
//    reservations cannot, so a conservative invocation is never wounded,
//    and once executing it never loses to contention either (§7.1's rule,
//    kept). Why no deadlock: a wait cycle among conservative invocations
//    alone cannot form (SLA's order; OLA never waits), and any cycle with an
//    aggressive member has an edge into one: an aggressive waiter waits for
//    an aggressive or a conservative holder, a conservative waiter for a
//    conservative or (wounding it) an aggressive one. Take the cycle's
//    aggressive members: if a conservative member waits for one, it wounds
//    it; if none does, the cycle is aggressive members only, and its oldest
//    wounds the younger one it waits for. A wounded invocation lets go
//    without waiting for anything, so the cycle breaks. (A waiter queued
//    behind another waits for it only until that one holds the lock, which
//    it then sees and wounds by the same rules. Resources are taken before
//    any device, as above.) Every invocation ends: a conservative one as
//    SLA or OLA always did, an aggressive one completes or is wounded into
//    an abort, with feedback; under heavy conservative load aggressive
//    routines can abort again and again, which their history says. Why
//    serializable: strict 2PL, in the order of the invocations' last lock
//    grants; the devices' logs follow it because a device group actuates
//    only under the lock (fencing).
//  - Preconditions (APEX, routine/routine_combo.h): when precondition
//    rules apply to its commands, the invocation also locks every device of
//    their precondition graphs (under every visibility model: the rules'
//    consistency needs it), and once every lock is held it reads those
//    devices' states, deduces the precondition commands and commits them
//    (`plan`) before its first command. They run as must commands, each
//    before the routine command it serves, and a rollback undoes them too;
//    a rollback of a combo stops at the first command it cannot undo, as
//    undoing the preconditions under it could break a rule.
//  - Ad hoc combos (routine/adhoc_combo.h): an invocation of a group
//    "routine:adhoc:DEVICE" carries its own one-command routine, which
//    every step here reads instead of the catalog's (spec_of); it is
//    driven like any other, and its group watches no trigger.
//  - EXECUTING: commands in order, each a CommandAccept at its device group
//    with id ROUTINE#SEQ#INDEX and the lock's token (no holder and no token
//    under WV: the device group runs it unless a lock is held), then its outcome read
//    back and committed here. A command's duration keeps the locks that long
//    before the next command (or the release). Before each command the
//    leader checks that it still holds everything: a command fenced by its
//    device group (COMMAND_FENCED: the lock was reclaimed) or a lock a
//    device leader answered a renewal about as lost (LocksLost) stops the
//    invocation (a committed `stop` with the reason): its remaining
//    commands are skipped, it releases everything and ends failed (aborted
//    if nothing ran). A resource whose Camera grant this node does not hold
//    (the routine's group changed leader while it ran) aborts it instead
//    (below) if commands are left to run: its device locks still keep
//    every other routine off its devices, so its rollback restores exactly
//    what it changed, and the routine is all or nothing as SafeHome
//    promises.
//  - Atomicity (SafeHome §2.2): a command that is `must` (the default) and
//    does not succeed aborts the invocation (a committed `abort` with the
//    reason): no later command is sent, and the commands that may have
//    acted (ok, or with an unknown outcome) are undone newest first, each
//    set back to the values its device group recorded just before it ran
//    (CommandOutcome.state_before), or to the user's undo values for the
//    attributes the command's `undo` names (rollback_values,
//    routine/routine_model.h), under the same locks, each undo's
//    outcome committed before the next. Then it releases and ends aborted;
//    its history says what failed and what was and was not undone. A
//    best-effort command's failure is reported and the invocation goes on.
//    While its locks are held nobody else wrote its devices (PSV, GSV), so
//    restoring is exactly undoing; under WV a rollback may overwrite a
//    concurrent routine's write, as WV promises no isolation. An invocation
//    stopped for a lost lock is not rolled back: another routine may have
//    written its devices since.
//  - Failure serialization (SafeHome §3, routine/failure_serialization.h):
//    under GSV and S-GSV the invocation first commits the failure and
//    restart event counts of the devices it watches (`baseline`: those it
//    locks, or every device of the mesh), before its plan and first
//    command; each command's step carries its device's count when it began
//    actuating. At the finish point (the last command and its duration
//    done) the leader reads the counts again and, under GSV, S-GSV and PSV,
//    aborts the invocation (rolled back as above) if an event fell where the
//    model cannot serialize it before or after the routine. WV skips this.
//  - Serial keys (EV, SafeHome §4-5; the device side is routine/
//    device_locks.h, "Lineages"): under EV the lock strategy plays no
//    part. Once its resources are held, an invocation chooses a serial key
//    (routine/serial_key_choice.h: `tl` reads its devices' lineages and
//    takes the first gap where it delays nobody, `fcfs` goes after every
//    placed entry, `jit` waits until its devices are unused) and commits it
//    (`serial_key`); then it places an entry under that key in every
//    device's lineage (not yet asking for the lock, unless precondition
//    rules need every device held for the plan) and commits `placed_key_us`
//    once every lineage has it under that key. A device group keeps its
//    lineage in key order, grants the lock to the lowest entry only, once
//    that entry asks (`ready`), and refuses an entry below the largest key
//    it ever granted (its floor): the invocation then withdraws every entry
//    and re-keys above (`serial_key` again; nothing has run yet). In
//    EXECUTING, before each command it asks for that command's device and
//    waits for the grant (committed as `locks_held`); a device it is done
//    with it gives up at once (a post-lease, below). A lower key placed before a higher
//    one asks goes first: SafeHome's pre-lease, chosen by `tl` when the
//    invocation is expected to be done with the device before the higher
//    one's first use. Why serializable: on every device the lock goes in
//    increasing key order (an entry waits for every lower one to be done
//    with the device, and no entry is taken below a key already granted),
//    and a device group actuates a command only under the lock (fencing),
//    so every precedence edge among invocations in the devices' logs runs
//    from a lower key to a higher one: they cannot close a cycle, and the
//    key order is a serial order with the end state the devices show. This
//    holds however placements race, whatever key a scheduler picks, and
//    across leader changes: a new leader re-places under the committed key
//    (placement is idempotent), or re-keys if refused. It needs one key per
//    invocation on all its devices, so both steps are conditional: a key
//    names the key it replaces and a placement the key it placed, and
//    neither applies once the key moved on, as a round begun from an
//    earlier state (an earlier leader's, still reading) would otherwise
//    move it twice or call the new key placed where the old one sits (EV
//    soak seed 655: d1 under the old key, d3 under the new, a deadlock).
//    Why no deadlock: the lowest key among running invocations waits for
//    nobody (no entry below it is left on its devices, and none above it
//    can have been granted, or its placement would have been refused), and
//    keys only grow on a re-key. A lineage entry blocks those after it, so
//    it is renewed like a lock, and a device leader that hears nothing takes back the entry
//    everyone waits for (the holder, or the lowest entry) once the
//    routine's group says the invocation no longer runs. An invocation
//    whose entry was taken back and cannot be placed again (someone after
//    its key used the device since) stops, as for a lost lock. Devices a
//    precondition rule names are never given up early: another routine's
//    planner reads them, and must not read a write this invocation may
//    still undo (SafeHome forbids a post-lease to a routine that reads the
//    device). `ev_pre_lease = false` makes `tl` append, `ev_post_lease =
//    false` keeps every device to the end. `routine_ev_placement_ms` is
//    the time from the first key to being placed (SafeHome's placement
//    time), `routine_ev_stretch` its stretch once it ended ok (routine/
//    invocation_metrics.h), `routine_ev_rekeys_total` and
//    `routine_ev_pre_leases_total` count what their names say.
//  - Rollback after a post-lease (EV): the undo of a command on a device the
//    invocation gave up goes without a lock (`after_lease`); the device
//    group sets only the attributes this invocation still wrote last and,
//    for each attribute a later command overwrote, hands the undo value to
//    that command as its state before (DeviceGroupState::
//    restore_after_lease): the later write stands (EV serializes it after
//    this routine), and if its routine aborts too, its own rollback (which
//    under EV reads the command's state before from the device group)
//    restores what was there before this one. The history says which
//    undos were not needed and why.
//  - RELEASING_LOCKS: every lock given back (each release committed by its
//    device group), the Camera grants given back, then the invocation's end
//    committed here.
//
// Resources and leadership. A Camera grant belongs to the node that asked,
// not to the routine group: it cannot be handed to a new leader. So
//  - who releases it: the node holding it, and nobody else. It releases its
//    grants when the invocation ends, or when it stopped leading the routine
//    (no session of it here) for `request_timeout`: by then any command it
//    sent has been committed at its device group or given up, so the next
//    holder of the resource cannot be overtaken by a late command of this
//    one. A holder that crashes releases nothing: Camera's failure handling
//    stops waiting for it and raises the fencing marks past any token it
//    may have held (`failed_holder_token_gap`).
//  - whether a new leader re-acquires: it treats a committed grant as its
//    own only if this node's Camera holds that resource now with that very
//    token (tokens are never reused, across restarts too, so this also
//    tells apart an earlier life of this node; a node that goes on leading
//    the routine in a new session keeps its grants). In ACQUIRING_LOCKS
//    nothing has run yet: it drops every committed grant and device lock
//    (`resource_dropped`, `lock_dropped`), releases every device of the
//    routine, and acquires again from the first resource (in a new lock
//    round). Releasing also takes it out of device queues a predecessor's
//    SLA request put it in, and while Camera has not granted a resource it
//    leaves them again every `request_timeout` (such a request may land
//    late): an invocation holding a device while it waits for a resource
//    could close a wait cycle with the resource's holder. In EXECUTING a
//    gap in holding may have let another invocation use the resource
//    between two of this invocation's commands: continuing would break its
//    isolation, so the invocation is aborted and rolled back (above), unless
//    every command already ran (nothing is left to do under the resource).
//    An undo uses the resource too, so a rollback that finds a grant lost
//    (after any abort) takes the resource again first and commits the new
//    grant (`for_rollback`): the undo then comes after whoever held the
//    resource in between, a use of its own. That wait holds device locks
//    against the order above (resources first), so the resource's holder
//    may wait for one of them, directly or through others. The rollback
//    therefore asks every routine group whose routine uses the resource to
//    make way (RoutineUpdate.make_way, again every `request_timeout`): a
//    holder of the resource still acquiring gives everything back and
//    acquires again (Camera then serves the older rollback first); one
//    executing aborts if it waits for a device and has run nothing, or
//    waits for a device the rollback holds (its own rollback runs under
//    its own grant, then frees the resource). A cycle none of these breaks
//    (a holder that ran commands waits for someone who waits for the
//    rollback) ends after `rollback_resource_wait`: the rollback stops and
//    leaves what ran in place, reported, rather than undo outside the
//    resource's exclusion. Either way the rollback then withdraws its
//    request (MakeWay.withdrawn), so no holder goes on making way for it.
//  - what the token guards: Camera tokens grow from holder to holder, and
//    the committed token names the one grant under which this invocation's
//    commands ran; a leader sends a command only while its Camera still
//    holds that grant, so a late or new leader cannot run commands under a
//    grant another holder has since superseded. Nor can a leader cut off
//    from most of the mesh: its grant lapses (Camera's holder lease) before
//    the rest may grant the resource again, and the invocation then takes
//    it again (or aborts) as for any lost grant. The token does not travel
//    to the devices (a device group fences with its own lock's token);
//    `meshctl routine show` shows it, so an operator or a resource's own
//    controller can compare it with the token of whoever uses it next.
//
// Everything a leader does follows from the committed state, and every
// request it sends is idempotent (lock requests and releases by holder,
// commands by id), so a new leader simply repeats the step its predecessor
// may or may not have finished. While holding locks the leader renews them
// (LockRenew) at every member of each device's group.
class RoutineLeaders {
 public:
  using EpochOf = std::function<uint64_t(const kgroup::GroupTarget& target)>;

  RoutineLeaders(core::Env& env, kgroup::GroupHost& host, const kgroup::GroupSelector& selector, EpochOf epoch_of,
                 const Catalog& catalog, kgroup::GroupClient& client, DeviceWatcher& watcher,
                 RoutineMessages& messages, mutex::Camera& camera, core::Metrics& metrics,
                 RoutineLeaderOptions options);
  RoutineLeaders(const RoutineLeaders&) = delete;
  RoutineLeaders& operator=(const RoutineLeaders&) = delete;
  ~RoutineLeaders();

  void start();

  // Device records by id, as their groups answered a states read.
  using DeviceRecords = std::map<std::string, proto::DeviceStateMsg>;

  // The routines this node leads right now.
  std::vector<std::string> led_routines() const;

 private:
  struct Driving;
  struct Session;
  using SessionKey = std::tuple<std::string, uint64_t, uint32_t>;

  void scan();
  void sync_watch(const SessionKey& key, Session& session);
  // Evaluates the trigger against the states of its devices this node heard
  // before the session began (once the group's state can be read).
  void evaluate_seen(const SessionKey& key, Session& session, const kgroup::GroupReplica& replica);
  void on_device_change(const SessionKey& key, const std::string& device, const DeviceWatcher::Seen& seen);
  void drive(const SessionKey& key);
  void drive_invocation(const SessionKey& key, const RoutineGroupState::Invocation& invocation);
  // `missing`: the devices not locked yet, in increasing id order; the
  // first is asked for.
  void acquire_sla(const SessionKey& key, uint64_t seq, const std::vector<std::string>& missing);
  // Locks recorded by an invocation still acquiring them, or nothing.
  std::optional<size_t> recorded_locks(const SessionKey& key, uint64_t seq) const;
  void acquire_ola(const SessionKey& key, uint64_t seq, const std::vector<std::string>& missing);
  // Drops the recorded locks, releases `devices`, then waits `then_wait`
  // (or, wounded, commits that the wound was yielded to).
  void give_back(const SessionKey& key, uint64_t seq, std::vector<std::string> devices, core::Duration then_wait,
                 bool then_clear_wound = false);
  // Wounded before anything ran: gives every lock back, then clears the
  // wound, and acquires again.
  void yield_to_wound(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                      const std::vector<std::string>& devices);
  // Aggressive: asks for every lock in `devices` at once (each queued at its
  // device group), without waiting for the answers.
  void ask_all(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices);
  // Aggressive, while executing: reads the status of every lock in
  // `devices` at once, asks again for those their groups do not know, and
  // commits every one granted in one step.
  void acquire_stage(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices);
  // Reads the lock status of every device in `devices` at once, hands each
  // answer that is not a grant to `not_held` (which says whether to ask
  // again, with what request, or why the invocation must stop), and commits
  // every grant found in one locks_held step (or the stop). When it asked
  // again and nothing was granted, it reads again as soon as the requests
  // are committed (a grant happens when a request applies), else after
  // poll_interval.
  struct NotHeld {
    std::optional<std::string> ask;   // a device group write
    std::optional<std::string> stop;  // why the invocation stops
  };
  using OnNotHeld = std::function<NotHeld(const std::string& device, const proto::LockStatusMsg& status)>;
  void collect_grants(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices, OnNotHeld not_held);
  // Whether `holder` may send a lock request for `device` now: once per
  // poll_interval, so a request that changes nothing (a full queue) is not
  // repeated at every read.
  bool may_ask(const std::string& holder, const std::string& device);
  // The lock request of an invocation for `device` (wait: queued if held);
  // empty, and not sent by write_device, unless this session runs it.
  std::string lock_payload(const SessionKey& key, uint64_t seq, const std::string& device, bool wait) const;
  // Wound-wait: if the holder `status` names started after this invocation,
  // tells its routine group (at most once per grant and request_timeout).
  void wound_if_younger(const SessionKey& key, uint64_t seq, const std::string& device,
                        const proto::LockStatusMsg& status);
  // EV, serial keys (routine_leaders_lineage.cc). While acquiring: chooses
  // a key, places the invocation in every device's lineage under it, and
  // re-keys after a refusal; once placed, it goes on to EXECUTING.
  void acquire_in_lineages(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                           const std::vector<std::string>& devices, bool all_from_start);
  // Reads the lineages of `devices` and commits the key the scheduler
  // chooses in place of `replaces_key_us` (0: the first key; `refused_by`:
  // the device whose refusal makes it re-key).
  void choose_key(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices,
                  const std::string& refused_by, int64_t replaces_key_us, bool all_from_start);
  // Reads this invocation's entry at every device, places it where it is
  // missing, and commits that it is placed under its key once every device
  // has it; withdraws everything and re-keys if one refused it. A round
  // whose key is no longer the invocation's does nothing but wait.
  void place_everywhere(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices,
                        bool all_from_start);
  // While executing: asks for the locks of `devices` now (the entries
  // become ready) and commits those granted; stops the invocation if its
  // entry at a device is gone and can no longer be placed there.
  void take_in_key_order(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices);
  // The lineage request of the invocation for `device`: under its serial
  // key, ready or not, with when it expects to use the device if it went on
  // from command `from` now. Empty (not sent) unless this session runs it.
  std::string place_payload(const SessionKey& key, uint64_t seq, const std::string& device, bool ready,
                            bool all_from_start, size_t from) const;
  // When the invocation expects to use each of its devices if it ran its
  // routine commands from `from` on, starting now (every device from the
  // start, with `all_from_start`: precondition rules need them all held
  // before the plan).
  std::map<std::string, ExpectedUse> expected_uses(const RoutineSpec& spec, bool all_from_start, size_t from) const;
  // Aggressive: reads the stage's devices, deduces routine command
  // `stage`'s precondition commands and commits them, or aborts.
  void plan_one_stage(const SessionKey& key, uint64_t seq, uint32_t stage, const std::set<std::string>& devices);
  // Sends command `index` of the invocation, or with `undo` the command
  // that restores what it changed (its recorded state_before), and then
  // polls its outcome, which is committed as a command or undo step.
  // `restore_to` replaces the committed state_before of an undo.
  // A command of a run (independent precondition commands, routine/
  // routine_combo.h) is sent with the run's first: once the first is
  // accepted, the rest follow one by one, each after the one before it was
  // accepted, and only then is the first polled. Outcomes are still
  // committed in index order, each polled in its turn (one read, as it is
  // usually done by then), so a run of w commands costs about one poll
  // interval instead of w.
  void execute(const SessionKey& key, uint64_t seq, uint32_t index, bool undo, const Attributes* restore_to = nullptr);
  proto::DeviceUpdate accept_of(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                                const ComboCommand& command, uint32_t index, bool undo,
                                const Attributes* restore_to) const;
  // The commands after `index` that go out with it: the rest of its run,
  // each on a device the invocation holds and no device twice.
  std::vector<uint32_t> rest_of_run(const RoutineGroupState::Invocation& invocation,
                                    const std::vector<ComboCommand>& commands, uint32_t index) const;
  // Sends rest[at], then the rest after it once accepted; then `then`.
  void send_ahead(const SessionKey& key, uint64_t seq, std::vector<uint32_t> rest, size_t at,
                  std::function<void()> then);
  // The driving state of invocation `seq` of this session, or null.
  Driving* driving_of(const SessionKey& key, uint64_t seq);
  // EV: a device whose lock the invocation may give up before command
  // `next` (no command from `next` on uses it), or nothing.
  std::optional<std::string> lease_candidate(const RoutineGroupState::Invocation& invocation,
                                             const std::vector<ComboCommand>& commands, size_t next) const;
  // Whether a precondition rule names the device.
  bool names_rule_device(const std::string& device) const;
  // Commits the post-lease of `device`, then releases its lock.
  void post_lease(const SessionKey& key, uint64_t seq, const std::string& device, uint64_t token);
  // Reads the states of `devices` (every lock held), deduces the
  // invocation's precondition commands and commits them as its plan, or
  // aborts it with the reason no plan can be made.
  void plan_combo(const SessionKey& key, uint64_t seq, const std::set<std::string>& devices);
  void commit_plan(const SessionKey& key, uint64_t seq, const DeviceStates& states);
  // Reads the states of `devices` at their device groups (linearizable
  // reads) and hands them to `then`; tries again later if a read fails.
  void read_states(const SessionKey& key, uint64_t seq, const std::set<std::string>& devices,
                   std::function<void(const DeviceStates&)> then);
  // The same reads, handing over the devices' whole records (a device its
  // group has no record of is missing).
  void read_records(const SessionKey& key, uint64_t seq, const std::set<std::string>& devices,
                    std::function<void(const DeviceRecords&)> then);
  // The devices the visibility model watches for failures and restarts from
  // an invocation's start (routine/failure_serialization.h), given those it
  // locks.
  std::set<std::string> watched_by(const std::vector<std::string>& locked) const;
  // GSV, S-GSV: reads the watched devices' event counts and commits them as
  // the invocation's baseline.
  void take_baseline(const SessionKey& key, uint64_t seq, const std::set<std::string>& watched);
  // The finish point, after the last command: reads the watched and touched
  // devices again and either commits the release or aborts (then the
  // rollback runs) if a failure or restart cannot be serialized around it.
  void finish(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
              const std::vector<ComboCommand>& commands, const std::set<std::string>& watched);
  void poll_command(const SessionKey& key, uint64_t seq, uint32_t index, bool undo, core::TimePoint deadline);
  // Commits a command's (or with `undo`, its undo's) outcome.
  void record_outcome(const SessionKey& key, uint64_t seq, uint32_t index, bool undo,
                      const proto::CommandOutcome& outcome);
  // Commits `abort` with the reason: no further command runs, the rollback
  // follows.
  void commit_abort(const SessionKey& key, uint64_t seq, const std::string& reason);
  // The next command a previous leader may have sent, whose outcome is not
  // committed here: reads it at its device group and records its outcome if
  // that group accepted it (the next drive sees it ran); else runs `then`.
  void unless_next_was_sent(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                            const std::vector<ComboCommand>& commands, std::function<void()> then);
  // Commits the abort once the next command is settled as above (so the
  // rollback undoes it if it ran): for a lost resource, or a wound.
  void abort_running(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                     const std::vector<ComboCommand>& commands, const std::string& reason);
  // An aborted invocation's next rollback step: undo the newest command
  // that may have acted, or, when none is left, go on to release.
  // `devices`: every device it may hold (a lost resource's holder may wait
  // for one of them, RoutineUpdate.make_way).
  void roll_back(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                 const std::vector<std::string>& devices);
  // Why this invocation must give a resource back to a rollback that asked
  // (make_way), if it must.
  std::optional<std::string> blocks_a_rollback(const RoutineGroupState::Invocation& invocation,
                                               const std::vector<std::string>& devices) const;
  void release(const SessionKey& key, uint64_t seq, std::vector<std::string> devices, proto::InvocationEnd end);
  // Adds an ended invocation's SafeHome latencies (routine/invocation_metrics.h)
  // to the histograms: once, by the leader that committed its end.
  void record_latency(const SessionKey& key, uint64_t seq);
  // Takes `resource` with Camera (once per invocation and node) and commits
  // the grant when it comes.
  void take_resource(const SessionKey& key, uint64_t seq, const std::string& holder, const std::string& resource,
                     const std::vector<std::string>& devices);
  // Drops every committed resource and device lock of an invocation still
  // acquiring, and leaves the queues of `devices`, to take them again in
  // order.
  void start_over(const SessionKey& key, uint64_t seq, const std::vector<std::string>& devices);
  // Releases `holder`'s locks on `devices` and leaves their queues.
  // Commits this node's Camera grant of `resource` (ResourceHeldStep).
  void commit_resource_held(const SessionKey& key, uint64_t seq, const std::string& resource, uint64_t token,
                            bool for_rollback);
  // Asks Camera for `resource` on `holder`'s behalf (claims_).
  void ask_camera(const SessionKey& key, uint64_t seq, const std::string& holder, const std::string& resource);
  // A rollback whose resource grant was lost takes the resource again
  // first, and commits the new grant (ResourceHeldStep.for_rollback).
  void retake_for_rollback(const SessionKey& key, const RoutineGroupState::Invocation& invocation,
                           const std::string& resource, const std::vector<std::string>& devices);
  // Asks every routine group whose routine uses `resource` to make way
  // (RoutineUpdate.make_way) for `holder`'s rollback, which holds `devices`.
  void ask_to_make_way(const std::string& holder, const std::string& resource, const std::vector<std::string>& devices);
  // `holder`'s rollback has `resource` again, or stopped waiting for it: the
  // invocations asked stop making way (a request left standing would make a
  // later wait of theirs abort for nothing).
  void withdraw_make_way(const std::string& holder, const std::string& resource);
  // A make-way request or its withdrawal, to every group whose routine uses the resource.
  void send_make_way(const proto::RoutineUpdate& update);
  // Leaves `holder`'s places in the locks of `devices` that requests of
  // rounds before `round` made (held or queued): a round's own requests
  // stay, so this may be sent while the round asks for them.
  void leave_devices(const std::string& holder, uint32_t round, const std::vector<std::string>& devices);
  // Commits `stop` with the reason: the invocation releases and ends.
  void stop(const SessionKey& key, uint64_t seq, const std::string& reason);
  // Why an executing invocation may not send another command, if it may
  // not: a device lock gone (it stops: another routine may have written the
  // device since, so it is not rolled back) ...
  std::optional<std::string> lost_lock(const std::string& routine,
                                       const RoutineGroupState::Invocation& invocation) const;
  // ... or a device lock no longer recorded though a command ran on the
  // device (every model but WV holds it to the end, or EV leases it):
  // without it, the next command or undo would go out without a lock.
  std::optional<std::string> lock_given_up(const RoutineGroupState::Invocation& invocation,
                                           const std::vector<ComboCommand>& commands) const;
  // ... or a resource's Camera grant gone (it aborts and rolls back under
  // the device locks it still holds).
  std::optional<std::string> lost_resource(const RoutineGroupState::Invocation& invocation) const;
  // Whether this node's Camera holds `resource` under the committed grant.
  bool holds_here(const std::string& resource, const RoutineGroupState::ResourceGrant& grant) const;
  // The resources a routine takes, in the order it takes them.
  std::vector<std::string> resources_of(const RoutineSpec& spec) const;
  void release_claims(const std::string& holder);
  // Releases the grants of invocations this node no longer drives.
  void sweep_claims(const std::set<SessionKey>& leading);
  void on_locks_lost(const proto::LocksLost& lost);
  void renew_locks();
  // A write or read at the group of `device`, remembering the leader that
  // answered (lock renewals go there too).
  void write_device(const std::string& device, std::string payload, kgroup::GroupClient::WriteCallback callback);
  void read_device(const std::string& device, std::string query, kgroup::GroupClient::ReadCallback callback);

  // Commits `update` in the session's group; done(committed) runs once.
  using Committed = std::function<void(bool committed)>;
  void submit(const SessionKey& key, const proto::RoutineUpdate& update, Committed done);
  void step(const SessionKey& key, uint64_t seq, const std::function<void(proto::InvocationStep&)>& fill,
            Committed done);
  // Commits the invocation's move to `phase`, then drives it on.
  void enter_phase(const SessionKey& key, uint64_t seq, proto::RoutinePhase phase);
  // Idle again after a step: at once if it was committed, after
  // poll_interval if not.
  void after_step(const SessionKey& key, uint64_t seq, bool committed);
  // Marks the invocation idle again and drives the session after `delay`.
  void idle(const SessionKey& key, uint64_t seq, core::Duration delay = core::Duration::zero());

  Session* session(const SessionKey& key);
  kgroup::GroupReplica* replica(const SessionKey& key) const;
  const RoutineGroupState* state(const SessionKey& key) const;
  // The catalog routine whose trigger a session watches (none in an ad hoc
  // combos' group, routine/adhoc_combo.h).
  const RoutineSpec* catalog_spec_of(const SessionKey& key) const;
  // The definition an invocation runs: an ad hoc combo's own, or its
  // routine's in the catalog (null once removed).
  const RoutineSpec* spec_of(const SessionKey& key, const RoutineGroupState::Invocation& invocation) const;
  // Invocation `seq` as committed here (null if unknown) with spec_of it.
  struct Running {
    const RoutineGroupState::Invocation* invocation = nullptr;
    const RoutineSpec* spec = nullptr;
  };
  Running running(const SessionKey& key, uint64_t seq) const;
  // The invocation's lock holder name (holder_name), from the committed state.
  std::string holder_of(const SessionKey& key, uint64_t seq) const;
  // Its lock round (RoutineGroupState::Invocation::lock_round), from the
  // committed state, and whether a lock status read shows a grant to a
  // request of that round (or of no round: EV, an older device group).
  uint32_t lock_round_of(const SessionKey& key, uint64_t seq) const;
  bool held_this_round(const SessionKey& key, uint64_t seq, const proto::LockStatusMsg& status) const;
  LockStrategy strategy_of(const RoutineSpec& spec) const;
  int64_t now_us() const;

  core::Env& env_;
  kgroup::GroupHost& host_;
  const kgroup::GroupSelector& selector_;
  EpochOf epoch_of_;
  const Catalog& catalog_;
  kgroup::GroupClient& client_;
  DeviceWatcher& watcher_;
  RoutineMessages& messages_;
  RoutineLeaderOptions options_;
  core::ScopedTimer scan_timer_;
  core::ScopedTimer renew_timer_;
  std::map<SessionKey, std::unique_ptr<Session>> sessions_;
  std::map<std::string, core::NodeId> device_group_leaders_;  // device group target -> last leader heard
  mutex::Camera& camera_;
  // This node's Camera requests, by invocation (holder_name) and resource;
  // node-local like the grants, so they outlive a session that ends while
  // the node goes on leading the routine in the next one.
  struct Claim {
    mutex::AcquireHandle handle = 0;
    std::optional<uint64_t> token;  // granted
    core::TimePoint devices_left_at{};  // last leave_devices() while waiting
    core::TimePoint asked_at{};
    std::optional<core::TimePoint> make_way_asked_at;  // a rollback's last ask_to_make_way()
  };
  std::map<std::string, std::map<std::string, Claim>> claims_;
  std::map<std::string, core::TimePoint> unled_claims_since_;  // holder -> since no session here drives it
  // Locks device leaders answered a renewal about as lost: holder -> device -> token.
  std::map<std::string, std::map<std::string, uint64_t>> lost_locks_;
  // Lock requests sent while collecting grants: "HOLDER DEVICE" -> when.
  std::map<std::string, core::TimePoint> asked_at_;
  // Command id -> when this node first sent it (now_us), until its outcome
  // is committed (CommandStep.started_at_us).
  std::map<std::string, int64_t> command_sent_at_us_;
  // Wounds sent: "HOLDER DEVICE TOKEN" -> when (sent again after request_timeout).
  std::map<std::string, core::TimePoint> wounds_sent_;
  // SLA: holder -> when it last left the queues of the devices after the
  // one it waits for (a request of an earlier leader of the invocation,
  // or one sent before it started over, may be granted there out of order).
  std::map<std::string, core::TimePoint> left_ahead_at_;
  // FaultPoints::stale_precondition_states only: holder -> the states it
  // read before its locks.
  std::map<std::string, DeviceStates> stale_states_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  core::Counter& triggers_;
  core::Counter& invocations_ok_;
  core::Counter& invocations_failed_;
  core::Counter& invocations_aborted_;
  core::Counter& rollback_commands_;
  core::Counter& failure_aborts_;
  core::Counter& lock_retries_;
  core::Counter& wounds_;
  core::Counter& made_way_;  // resources given back to a rollback that lost them
  core::Counter& rekeys_;
  core::Counter& pre_leases_;
  core::Histogram& placement_ms_;
  core::Histogram& ev_stretch_;  // SafeHome's EV stretch of each invocation that ran every command
  core::Histogram& wait_ms_;
  core::Histogram& end_to_end_ms_;
  core::Histogram& latency_overhead_;  // ok invocations only
};

// A digest of the routine's definition: an invocation runs the definition
// it was triggered with, or stops.
uint64_t definition_digest(const RoutineSpec& spec);

}  // namespace mesh::routine
