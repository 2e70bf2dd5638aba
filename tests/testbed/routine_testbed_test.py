#!/usr/bin/env python3
"""Nine real agents running routines over thirteen emulated Kasa devices, started by scripts/testbed.

  routine_testbed_test.py loopback|netns --testbed PATH --meshagent PATH --meshctl PATH
                          --meshsim PATH --meshemu PATH --dir DIR [--visibility psv|gsv|sgsv|ev|wv]

meshemu serves plugs, bulbs, a dimmer, a switch and four sensors whose readings follow looping timelines
(on 127.0.0.1 in loopback mode; in netns mode on a device LAN, a bridge every node's namespace joins, see
building.device_lan). The agents form a ring n0..n8 with chords (k = 5, so every group outlives two
crashes). Twelve routines with overlapping device sets are added with `meshctl routine add`: eight fire on
sensor changes, four run on demand (`meshctl routine run`, several at once from different nodes). Mid-run
the leader of a running routine is killed with SIGKILL, then a device leader of a device that routine
uses; triggers and manual runs go on. Then the automatic routines are disabled and the invocations under
way are given a bounded time to end.

The oracle is the emulator's actuation log (building.check_serialization): no command id actuated twice,
and no two invocations of routines sharing a device overlap (first actuation .. last actuation plus the
hold of its successful commands). `meshctl routine history --json` on a survivor must show every
invocation ended (ok, failed or aborted), each command it reports ok actuated exactly once, and every
invocation the log shows. The oracle first runs on hand-made logs (building.self_test_oracle), so a
checker that cannot fail fails the test.

--visibility sets the agents' `[routines] visibility` (routine/visibility.h; default psv). Under gsv and sgsv the
oracle counts every pair of invocations, devices shared or not. Under ev routines sharing a device may overlap
(post-leases), and the oracle asks instead that the devices' actuation order admit a serial order. Under wv nothing isolates routines, so the
run passes only if the oracle does catch conflicting invocations overlapping (and nothing actuated twice);
it takes as long as the others and proves only that the oracle can tell the models apart, so it runs when
MESH_TESTBED_WV=1 and is skipped, saying so, otherwise. The gsv and sgsv runs take 2-3 minutes each on the
testbeds' one-at-a-time chain, which is CI's critical path; the whole-agent sims sweep GSV and S-GSV over
many seeds on every CI run, so these run when MESH_TESTBED_GSV=1 and are skipped, saying so, otherwise.

netns mode needs root and working network namespaces; without them it prints why and exits 77, which
ctest reports as skipped.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import building  # noqa: E402
import testbed_test  # noqa: E402
from building import Command, Device, Routine, meshctl, meshctl_json  # noqa: E402
from testbed_test import SKIP, Testbed, log, log_agent_tails, wait_for_members  # noqa: E402

NAMES = [f"n{i}" for i in range(9)]
EDGES = [(i, (i + 1) % 9) for i in range(9)] + [(0, 4), (2, 6), (3, 7), (1, 5), (8, 4)]
FIRST_PORT = 19941
LAN = ("mtr-lan", "10.252.0")
RUN_BEFORE_KILL_S = 30
RUN_AFTER_KILL_S = 30
SETTLE_S = 60

ON, OFF = '"on"', '"off"'
DEVICES = [
    Device("kitchen_plug", "plug", (8, 3, 0), "kitchen", {"power": OFF}),
    Device("fan_plug", "plug", (14, 4, 0), "office", {"power": OFF}),
    Device("heater_plug", "plug", (20, 10, 0), "office", {"power": OFF}),
    Device("tv_plug", "plug", (4, 12, 0), "living", {"power": OFF}),
    Device("hall_bulb", "bulb", (2, 1, 0), "hall", {"power": "false"}),
    Device("desk_bulb", "bulb", (20, 14, 0), "office", {"power": "false"}),
    Device("porch_bulb", "bulb", (0, 0, 0), "porch", {"power": "false"}),
    Device("living_dimmer", "dimmer", (6, 14, 0), "living", {"power": OFF, "brightness": "50"}),
    Device("garden_switch", "switch", (28, 0, 0), "garden", {"power": OFF}),
    Device("hall_motion", "motion_sensor", (2, 2, 2), "hall",
           timeline=[(0, {"motion": OFF}), (6, {"motion": ON}), (13, {"motion": OFF})], repeat_after=20),
    Device("front_door", "contact_sensor", (0, 1, 1), "porch",
           timeline=[(0, {"contact": OFF}), (9, {"contact": ON}), (14, {"contact": OFF})], repeat_after=23),
    Device("office_presence", "occupancy_sensor", (21, 13, 2), "office",
           timeline=[(0, {"occupancy": OFF}), (4, {"occupancy": ON}), (16, {"occupancy": OFF})], repeat_after=29),
    Device("office_climate", "sensor", (19, 12, 1), "office",
           timeline=[(0, {"temperature": "22"}), (7, {"temperature": "26"}), (15, {"temperature": "18"})],
           repeat_after=25),
]


def on(device, duration_s=0, **extra):
    return Command(device, {"power": ON, **extra}, duration_s)


def off(device):
    return Command(device, {"power": OFF})


AUTOMATIC = [
    Routine("hall_lights_on", "hall_motion.motion == on", [on("hall_bulb", 2, brightness="80"), on("porch_bulb")], 4),
    Routine("hall_lights_off", "hall_motion.motion == off", [off("hall_bulb")], 4),
    Routine("door_welcome", "front_door.contact == on",
            [on("porch_bulb", 1), on("hall_bulb"), on("kitchen_plug")], 4),
    Routine("door_closed", "front_door.contact == off", [off("porch_bulb")], 4),
    Routine("office_arrive", "office_presence.occupancy == on", [on("desk_bulb", 1), on("heater_plug")], 4),
    Routine("office_leave", "office_presence.occupancy == off",
            [off("desk_bulb"), off("heater_plug"), off("fan_plug")], 4),
    Routine("too_warm", "office_climate.temperature > 24", [off("heater_plug"), on("fan_plug", 2)], 4),
    Routine("too_cold", "office_climate.temperature < 20", [off("fan_plug"), on("heater_plug")], 4),
    Routine("garden_path", "front_door.contact == on and hall_motion.motion == on",
            [on("garden_switch", 1), on("porch_bulb")], 4, lock="ola"),
]
MANUAL = [
    Routine("movie", "manual", [on("tv_plug"), on("living_dimmer", 1, brightness="20"), off("hall_bulb")]),
    Routine("all_off", "manual", [off(d.name) for d in DEVICES if d.kind in ("plug", "bulb", "dimmer", "switch")]),
    Routine("evening", "manual", [on("living_dimmer", brightness="60"), off("tv_plug"), off("kitchen_plug")],
            lock="ola"),
]
ROUTINES = AUTOMATIC + MANUAL


def wait_all_up(tb, names, timeout):
    deadline = time.monotonic() + timeout
    while True:
        missing = {}
        for name in names:
            seen = meshctl_json(tb, name, "devices", "--timeout", "5") or {}
            up = {d["id"] for d in seen.get("devices", []) if d.get("up")}
            lacking = [d.name for d in DEVICES if d.name not in up]
            if lacking:
                missing[name] = lacking
        if not missing:
            log(f"every agent lists all {len(DEVICES)} devices up")
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"devices not up after {timeout} s: {missing}")
        time.sleep(2)


def routine_rows(tb, name, *ids):
    reply = meshctl_json(tb, name, "routine", "history", *ids, "--timeout", "10", timeout=60)
    return {r["id"]: r for r in (reply or {}).get("routines", [])}


class ManualRuns:
    """`meshctl routine run` from several nodes at once, without --wait: the exit status says whether the
    routine's group committed the invocation."""

    def __init__(self, tb):
        self.tb = tb
        self.running = []
        self.started = []  # (routine, node, seq or None)

    def run(self, routine, node):
        node_info = self.tb.nodes()[node]
        argv = [self.tb.args.meshctl, "--socket", node_info["admin_socket"], "--json", "routine", "run", routine,
                "--timeout", "20"]
        if self.tb.args.mode == "netns":
            argv = ["ip", "netns", "exec", node_info["namespace"]] + argv
        self.running.append((routine, node, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                             text=True)))

    def collect(self):
        for routine, node, proc in self.running:
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            seq = None
            if proc.returncode == 0:
                seq = int(json.loads(out)["invocation"]["seq"])
            log(f"{node}: routine run {routine} -> exit {proc.returncode}, invocation {seq} {err.strip()}")
            self.started.append((routine, node, seq))
        self.running = []


def running_invocation(tb, observer):
    """(routine id, leader node id) of a routine with an invocation under way, longest routines first."""
    rows = routine_rows(tb, observer)
    for routine in sorted(ROUTINES, key=lambda r: -len(r.commands)):
        row = rows.get(routine.id, {})
        if row.get("leader") and any(i.get("phase") != "PHASE_DONE" for i in row.get("invocations", [])):
            return routine.id, row["leader"]
    return None, None


def kill_leaders(tb, manual):
    """Kills the leader of a running routine (all_off, nine commands, is run for it) and then a device leader
    of a device of that routine; returns the two names. Either may be n0: which node leads a group follows
    from the epoch, so from the wall clock, and a test that spared one node failed whenever it led all_off."""
    ids = {n["id"]: name for name, n in tb.nodes().items()}
    deadline = time.monotonic() + 20
    routine = leader = None
    while time.monotonic() < deadline and leader is None:
        manual.run("all_off", "n2")
        for _ in range(10):
            routine, leader = running_invocation(tb, "n0")
            if leader in ids:
                break
            leader = None
            time.sleep(0.3)
    if leader is None:
        raise AssertionError("no routine was found running with a known leader to kill")
    # Read the device leaders before the first kill: the node asked may be the one killed.
    devices = (meshctl_json(tb, "n0", "devices", "--timeout", "5") or {}).get("devices", [])
    victims = [ids[leader]]
    log(f"killing {victims[0]}, the leader of routine {routine} while it runs")
    tb.run("kill", victims[0])
    used = {c.device for r in ROUTINES if r.id == routine for c in r.commands}
    for d in devices:
        name = ids.get(d.get("leader"))
        if d["id"] in used and name not in (None, victims[0]):
            victims.append(name)
            log(f"killing {name}, the device leader of {d['id']}")
            break
    else:
        victims.append("n6" if victims[0] != "n6" else "n7")
        log(f"no device of {routine} is led by another node; killing {victims[1]}")
    tb.run("kill", victims[1])
    return victims


def check_history(tb, observer, invocations, log_lines):
    """Every invocation ended; every command reported ok was actuated once; every logged invocation is known
    (or among the oldest finished ones the group's answer leaves out to fit a datagram, which are counted).
    Returns ({holder: {index: status}}, per-routine outcome counts, invocations left out)."""
    rows = routine_rows(tb, observer)
    errors = {rid: r.get("error") for rid, r in rows.items() if r.get("error")}
    if errors or len(rows) != len(ROUTINES):
        raise AssertionError(f"routine history on {observer}: {len(rows)} routines, read errors {errors}")
    counts = {}
    for a in log_lines:
        counts[a.get("command_id")] = counts.get(a.get("command_id"), 0) + 1
    statuses, outcomes, unfinished, lost = {}, {}, [], []
    oldest_shown = {}
    for routine in ROUTINES:
        shown = rows[routine.id].get("invocations", [])
        if int(rows[routine.id].get("omitted_invocations", 0)) > 0 and shown:
            oldest_shown[routine.id] = min(int(inv["seq"]) for inv in shown)
        for inv in shown:
            holder = f"{routine.id}#{inv['seq']}.{int(inv.get('tag', 0)):08x}"
            outcome = inv.get("outcome", "")
            outcomes.setdefault(routine.id, {}).setdefault(outcome, 0)
            outcomes[routine.id][outcome] += 1
            if inv.get("phase") != "PHASE_DONE":
                unfinished.append(f"{holder} in {inv.get('phase')}")
            elif outcome != "INVOCATION_OK":
                log(f"{holder} ended {outcome}: {inv.get('detail')}")
            statuses[holder] = {int(c.get("index", 0)): c.get("status") for c in inv.get("commands", [])}
            for index, status in statuses[holder].items():
                if status == "COMMAND_OK" and counts.get(f"{holder}#{index}") != 1:
                    lost.append(f"{holder}#{index} reported ok, actuated {counts.get(f'{holder}#{index}', 0)} times")
    if unfinished:
        raise AssertionError(f"invocations that never ended: {unfinished}")
    if lost:
        raise AssertionError(f"commands reported ok but not actuated exactly once: {lost}")
    left_out, unknown = [], []
    for holder, inv in invocations.items():
        if holder in statuses:
            continue
        seq = int(holder.split("#")[1].split(".")[0])
        (left_out if seq < oldest_shown.get(inv["routine"], 0) else unknown).append(holder)
    if unknown:
        raise AssertionError(f"invocations in the actuation log that {observer}'s history lacks: {sorted(unknown)}")
    return statuses, outcomes, left_out


def wait_ended(tb, observer, timeout):
    """Polls the history until no invocation is under way (or timeout): the bounded settle time."""
    deadline = time.monotonic() + timeout
    while True:
        rows = routine_rows(tb, observer)
        busy = [f"{rid}#{i['seq']} {i.get('phase')}" for rid, r in rows.items() for i in r.get("invocations", [])
                if i.get("phase") != "PHASE_DONE"]
        busy += [f"{rid} not read: {r['error']}" for rid, r in rows.items() if r.get("error")]
        busy += [f"{r.id} not listed" for r in ROUTINES if r.id not in rows]
        if not busy:
            log("every invocation has ended")
            return
        if time.monotonic() > deadline:
            log(f"still under way after {timeout} s: {busy}")
            return
        time.sleep(2)


def report(invocations, outcomes, manual, problems):
    log(f"{len(invocations)} invocations actuated devices; "
        f"{building.conflicting_pairs(invocations, ROUTINES)} pairs of them share a device")
    for routine in ROUTINES:
        actuated = sum(1 for inv in invocations.values() if inv["routine"] == routine.id)
        log(f"  {routine.id:<16} devices {','.join(sorted(routine.devices()))}: {actuated} actuated, "
            f"outcomes {outcomes.get(routine.id, {})}")
    committed = sum(1 for _, _, seq in manual.started if seq is not None)
    log(f"manual runs: {committed} of {len(manual.started)} committed")
    log(f"overlaps and double actuations: {len(problems)}")
    for p in problems:
        log(f"  {p}")


def keep_evidence(directory, emu_log, kept):
    """A failed run keeps the actuation log and every agent's log (in KEPT/) for the next reader."""
    shutil.rmtree(kept, ignore_errors=True)
    os.makedirs(kept)
    if os.path.exists(emu_log):
        shutil.copy(emu_log, os.path.join(kept, "actuations"))
    for name in NAMES:
        path = os.path.join(directory, name, "agent.log")
        if os.path.exists(path):
            shutil.copy(path, os.path.join(kept, f"{name}.log"))
    log(f"the actuation log and the agents' logs are kept in {kept}")


def main():
    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("--visibility", choices=["psv", "gsv", "sgsv", "ev", "wv"], default="psv")
    ours, rest = model.parse_known_args()
    sys.argv = [sys.argv[0]] + rest
    visibility = ours.visibility
    if visibility == "wv" and os.environ.get("MESH_TESTBED_WV") != "1":
        print("SKIP: the WV run only shows that the oracle catches routines that are not isolated; "
              "MESH_TESTBED_WV=1 runs it", flush=True)
        return SKIP
    if visibility in ("gsv", "sgsv") and os.environ.get("MESH_TESTBED_GSV") != "1":
        print(f"SKIP: the {visibility} testbed run is a soak (2-3 minutes on CI's critical path; the "
              "RoutineAgentSim sweeps cover GSV and S-GSV on every run); MESH_TESTBED_GSV=1 runs it", flush=True)
        return SKIP
    meshemu, args, directory = testbed_test.testbed_arguments_with_meshemu("meshrt")
    if args is None:
        return SKIP
    building.self_test_oracle()
    os.makedirs(os.path.dirname(os.path.abspath(directory)), exist_ok=True)
    base = os.path.abspath(directory)
    topology, emu_config, catalog, routines_file, emu_log = (
        base + ext for ext in (".topology", ".meshemu.toml", ".catalog.toml", ".routines.toml", ".actuations"))
    with open(topology, "w", encoding="utf-8") as f:
        f.write("".join(f"{a} {b}\n" for a, b in EDGES))
    if os.path.exists(emu_log):
        os.remove(emu_log)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tb = Testbed(args, directory)
    up = ["up", "--topology", topology, "--kgroup-k", "5", "--meshagent", args.meshagent,
          "--meshctl", args.meshctl, "--meshsim", args.meshsim, "--log-level", "info", "--visibility", visibility]
    up += ["--netns", "--ns-prefix", "mtr-"] if args.mode == "netns" else ["--loopback-net", "94"]
    emulator = None
    manual = ManualRuns(tb)
    try:
        tb.run(*up)
        tb.run("wait", "--timeout", "30")
        wait_for_members(tb, NAMES, {n: "alive" for n in NAMES}, False, 60)
        address = "127.0.0.1"
        if args.mode == "netns":
            building.device_lan(tb, NAMES, True, *LAN)
            address = f"{LAN[1]}.1"
        with open(emu_config, "w", encoding="utf-8") as f:
            f.write(building.meshemu_config(DEVICES, address, FIRST_PORT, emu_log, 1))
        emulator, endpoints = building.start_meshemu(meshemu, emu_config)
        log(f"meshemu serves {len(endpoints)} devices: {endpoints}")
        with open(catalog, "w", encoding="utf-8") as f:
            f.write(building.catalog_text(DEVICES, address, FIRST_PORT))
        added = meshctl(tb, "n3", "device", "add", "--file", catalog, "--timeout", "30")
        log(f"device add: exit {added.returncode}: {added.stdout.strip()} {added.stderr.strip()}")
        if added.returncode != 0:
            raise AssertionError("device add failed")
        wait_all_up(tb, NAMES, 90)
        with open(routines_file, "w", encoding="utf-8") as f:
            f.write(building.routines_text(ROUTINES))
        added = meshctl(tb, "n5", "routine", "add", "--file", routines_file, "--timeout", "30")
        log(f"routine add: exit {added.returncode}: {added.stdout.strip()} {added.stderr.strip()}")
        if added.returncode != 0:
            raise AssertionError("routine add failed")

        # Sensors drive the automatic routines; conflicting manual runs go in from several nodes at once.
        started = time.monotonic()
        rounds = [("movie", "n1"), ("all_off", "n7"), ("evening", "n4")]
        while time.monotonic() - started < RUN_BEFORE_KILL_S:
            for routine, node in rounds:
                manual.run(routine, node)
            manual.collect()
            time.sleep(8)
        victims = kill_leaders(tb, manual)
        survivors = [n for n in NAMES if n not in victims]
        observer = survivors[0]
        started = time.monotonic()
        while time.monotonic() - started < RUN_AFTER_KILL_S:
            for i, (routine, _) in enumerate(rounds):
                manual.run(routine, survivors[(i * 3 + int(time.monotonic())) % len(survivors)])
            manual.collect()
            time.sleep(8)
        manual.collect()
        for routine in AUTOMATIC:
            out = meshctl(tb, observer, "routine", "disable", routine.id, "--timeout", "30")
            if out.returncode != 0:
                raise AssertionError(f"routine disable {routine.id}: {out.stdout.strip()} {out.stderr.strip()}")
        log("automatic routines disabled; waiting for the invocations under way")
        wait_ended(tb, observer, SETTLE_S)
        time.sleep(1)

        log_lines = building.actuations(emu_log)
        invocations = building.invocations_of(log_lines, ROUTINES)
        statuses, outcomes, left_out = check_history(tb, observer, invocations, log_lines)
        invocations, problems = building.check_serialization(
            log_lines, ROUTINES,
            command_ok=lambda holder, index: statuses[holder].get(index) == "COMMAND_OK" if holder in statuses else None,
            visibility=visibility)
        report(invocations, outcomes, manual, problems)
        if visibility == "wv":
            twice = [p for p in problems if "actuated" in p]
            if twice or not problems:
                raise AssertionError(f"under WV the oracle should see overlaps and no double actuation: {problems}")
            log(f"WV: the oracle caught {len(problems)} overlaps, as it must without isolation")
            problems = []
        if left_out:
            log(f"{len(left_out)} old finished invocations are past what one history answer holds (their holds are "
                f"kept in full): {sorted(left_out)}")
        if problems:
            raise AssertionError(f"{len(problems)} overlaps or double actuations (above)")
        fired = {inv["routine"] for inv in invocations.values()}
        if len(fired) < len(ROUTINES) - 2 or building.conflicting_pairs(invocations, ROUTINES) < 20:
            raise AssertionError(f"too little ran to judge: routines that actuated {sorted(fired)}")
    except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
        log(f"FAIL: {e}")
        log_agent_tails(directory, NAMES, "routine", 8)
        keep_evidence(directory, emu_log, base + ".failed")
        return 1
    finally:
        manual.collect()
        building.stop_process(emulator)
        tb.run("down", check=False)
        if args.mode == "netns":
            building.device_lan(tb, NAMES, False, *LAN)
        for path in (topology, emu_config, catalog, routines_file, emu_log):
            if os.path.exists(path):
                os.remove(path)
    log(f"PASS ({args.mode}, {visibility})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
