#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mesh::routine {

// How strictly concurrent routines are isolated from each other (SafeHome
// §2.1): one setting for the whole mesh, `[routines] visibility`. Every
// node must run the same one; a node with another would give its routines
// another isolation than its neighbours'.
//
//  - wv (weak visibility): no isolation. A routine's commands go to their
//    devices as soon as it is triggered, without device locks, so two
//    routines over the same devices may interleave; the baseline SafeHome
//    measures the others against, and what a hub-less mesh does by default
//    when it does nothing. (Mesh-wide resources named with `uses` are still
//    taken: they are the user's own mutual exclusion, not isolation among
//    routines.)
//  - gsv (global strict visibility): at most one routine executing in the
//    whole mesh. Every invocation first takes one mesh-wide Camera
//    resource, kGlobalRoutineResource, before its own resources and device
//    locks, and holds it until it ends, so invocations run one after
//    another in the order Camera grants that resource: the order of its
//    requests' timestamps, which is the order the invocations started
//    acquiring (trigger order, up to the time a trigger takes to reach its
//    routine's leader). Device locks are taken too: they cost no waiting
//    (no other routine competes) and they fence the commands of a leader
//    that lost its grant.
//  - psv (partitioned strict visibility): routines that share a device never
//    overlap. The device locks (routine/device_locks.h), taken with SLA or
//    OLA, are held from the first command to the end of the invocation:
//    strict two-phase locking over the devices, so the invocations that
//    ran are serializable in the order they took their contended locks.
//  - sgsv (strong GSV): GSV, and its failure serialization aborts a running
//    routine on a failure or restart of any device of the mesh, not only of
//    the devices it touches (SafeHome §3, routine/failure_serialization.h).
//
//  - ev (eventual visibility, SafeHome §4-5): routines are serialized by
//    key rather than by lock waits. Each invocation chooses a serial key
//    (by timeline placement, `[routines] ev_scheduler`) and is placed in
//    every device's lineage under it; a device goes to its lineage's
//    entries in key order, each taking the device just before its first
//    command there and giving it up right after its last one
//    (post-leasing), and a routine may go before one already placed that
//    has not used the device yet (pre-leasing). Routines sharing a device
//    overlap, another routine may see a device mid-routine (temporary
//    incongruence), and the end state is that of the key order. How, and
//    why it stays serializable, is routine/routine_leaders.h ("Serial
//    keys").
//
// Each model also places device failure and restart events in its serial
// order as SafeHome §3 says (routine/failure_serialization.h): WV ignores
// them; GSV, S-GSV, PSV and EV abort a routine an event cannot be
// serialized before or after.
enum class Visibility { wv, gsv, psv, sgsv, ev };

std::string_view to_string(Visibility visibility);
// GSV and S-GSV: one routine executing at a time in the whole mesh.
bool is_global(Visibility visibility);
std::optional<Visibility> parse_visibility(std::string_view text);

// The Camera resource every invocation holds under GSV and S-GSV. It has a space in
// it, which no resource a routine names in `uses` may have, so it never
// collides with one; it is taken before them (resources are taken in one
// order everywhere, so no wait cycle runs through them).
inline constexpr std::string_view kGlobalRoutineResource = "routines gsv";

}  // namespace mesh::routine
