"""scripts/chaos's device and routine clients, the emulated devices they drive, and the invariants checked from
what those devices recorded (meshemu's actuation log).

The devices: meshemu serves Kasa plugs on a device LAN (building.device_lan: a bridge in the root namespace
that every node's namespace joins with a second veth, untouched by the harness's nftables rules, which name
the mesh links only). Two sets, disjoint so that each invariant reads only its own clients' commands:
  - cplug0.. for the device clients: `meshctl device set cplugI power=on|off --id ID` from every node;
  - rplug0..2 for the routine clients: four manual routines over them, every pair sharing a plug, and each
    routine setting its first plug twice (first and last command), so that an invocation's commands on a plug
    can be cut into by another's. Three use SLA locking (the mesh's default), one OLA.

What the routine layer promises under crashes (routine/routine_leaders.h, device_locks.h, device_group_state.h):
a device group actuates a routine's command only while the command's fencing token is the device lock's
current holder's, and every command id at most once. A lock can be reclaimed from a holder that stopped
renewing it for DeviceLeaderOptions::lock_reclaim_after (30 s): that ends the holder's isolation early, but its
later commands on the device are then fenced. So on one device the actuations of an invocation are never
interleaved with another's (the invariant); that two conflicting invocations' whole spans (first actuation to
last actuation plus its hold) are disjoint holds only while no lock was reclaimed, which the device records
cannot tell, so span overlaps are reported, not failed.
"""

import datetime
import json
import os
import random
import threading
import time
import zlib

import building
from building import Command, Device, Routine
from kgroup_testbed_test import meshctl

DEVICE_PREFIX = "cplug"
ROUTINE_PLUGS = ["rplug0", "rplug1", "rplug2"]
FIRST_PORT = 19961
CLIENT_PAUSE_S = (0.05, 0.6)
ROUTINE_PAUSE_S = (0.2, 2.0)
ON, OFF = '"on"', '"off"'
FINAL_ATTEMPTS = 3


def chaos_routines():
    """Every pair shares a plug; each sets its first plug first and last (see the module's docstring)."""
    a, b, c = ROUTINE_PLUGS

    def cmd(device, power, hold=0):
        return Command(device, {"power": ON if power else OFF}, hold)
    return [Routine("chaos_ab", "manual", [cmd(a, True), cmd(b, True, 0.5), cmd(a, False)]),
            Routine("chaos_bc", "manual", [cmd(b, True), cmd(c, True, 0.5), cmd(b, False)]),
            Routine("chaos_ca", "manual", [cmd(c, True), cmd(a, True, 0.5), cmd(c, False)]),
            Routine("chaos_all", "manual", [cmd(a, False), cmd(b, False), cmd(c, False), cmd(a, True)],
                    lock="ola")]


def routines_from_meta(meta):
    return [Routine(r["id"], "manual", [Command(d, {"power": ON if p else OFF}, h) for d, p, h in r["commands"]],
                    lock=r.get("lock", "")) for r in meta.get("routines", [])]


def routines_meta(routines):
    return [{"id": r.id, "lock": r.lock,
             "commands": [[c.device, c.values["power"] == ON, c.duration_s] for c in r.commands]} for r in routines]


def device_plugs(count):
    return [f"{DEVICE_PREFIX}{i}" for i in range(count)]


def wall_offset(wall, t0):
    """meshemu's wall clock (ISO 8601 UTC, milliseconds) as seconds from the campaign's start."""
    when = datetime.datetime.strptime(wall.rstrip("Z")[:23], "%Y-%m-%dT%H:%M:%S.%f")
    return when.replace(tzinfo=datetime.timezone.utc).timestamp() - t0


def relay_power(actuation):
    """True/False: the power a plug's actuation set; None when it set none."""
    state = (actuation.get("command") or {}).get("system", {}).get("set_relay_state", {}).get("state")
    return None if state is None else state == 1


class ChaosBuilding:
    """The emulated devices of one run: set up before the campaign, torn down on every exit path."""

    def __init__(self, tb, names, ns_prefix, meshemu, out_dir, device_names, routines):
        self.tb, self.names, self.meshemu = tb, names, meshemu
        crc = zlib.crc32(ns_prefix.encode())
        self.lan = (f"{ns_prefix}lan", f"10.253.{crc % 250 + 2}")
        self.address = f"{self.lan[1]}.1"
        self.config = os.path.join(out_dir, "meshemu.toml")
        self.catalog = os.path.join(out_dir, "catalog.toml")
        self.actuation_log = os.path.join(out_dir, "actuations.jsonl")
        self.devices = [Device(d, "plug", (2 * i, 0, 0), initial={"power": OFF})
                        for i, d in enumerate(list(device_names) + ROUTINE_PLUGS)]
        self.routines = routines
        self.emulator = None
        self.lan_up = False

    def start(self, deadline_s, say):
        if os.path.exists(self.actuation_log):
            os.remove(self.actuation_log)
        self.lan_up = True  # before it is made: a half-made LAN is removed too
        building.device_lan(self.tb, self.names, True, *self.lan)
        with open(self.config, "w", encoding="utf-8") as f:
            f.write(building.meshemu_config(self.devices, self.address, FIRST_PORT, self.actuation_log, 1))
        self.emulator, _ = building.start_meshemu(self.meshemu, self.config)
        with open(self.catalog, "w", encoding="utf-8") as f:
            f.write(building.catalog_text(self.devices, self.address, FIRST_PORT))
            f.write("\n" + building.routines_text(self.routines))
        added = meshctl(self.tb, self.names[0], "device", "add", "--file", self.catalog, "--timeout", "30",
                        timeout=60)
        if added.returncode != 0:
            raise RuntimeError(f"meshctl device add: {added.stdout.strip()} {added.stderr.strip()}")
        self.wait_devices_up(deadline_s)
        if self.routines:
            added = meshctl(self.tb, self.names[0], "routine", "add", "--file", self.catalog, "--timeout", "30",
                            timeout=60)
            if added.returncode != 0:
                raise RuntimeError(f"meshctl routine add: {added.stdout.strip()} {added.stderr.strip()}")
        say(f"meshemu serves {len(self.devices)} plugs on {self.address}; every agent lists them up"
            + (f"; {len(self.routines)} routines added" if self.routines else ""))

    def wait_devices_up(self, deadline_s):
        deadline = time.monotonic() + deadline_s
        while True:
            missing = {}
            for name in self.names:
                out = meshctl(self.tb, name, "--json", "devices", "--timeout", "5", timeout=30)
                up = set()
                if out.returncode == 0:
                    up = {d["id"] for d in json.loads(out.stdout).get("devices", []) if d.get("up")}
                lacking = [d.name for d in self.devices if d.name not in up]
                if lacking:
                    missing[name] = lacking
            if not missing:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"emulated devices not up after {deadline_s:.0f} s: {missing}")
            time.sleep(2)

    def actuations(self, t0):
        lines = building.actuations(self.actuation_log)
        for a in lines:
            a["at"] = wall_offset(a["wall"], t0) if a.get("wall") else None
        return lines

    def stop(self):
        building.stop_process(self.emulator)
        self.emulator = None
        if self.lan_up:
            building.device_lan(self.tb, self.names, False, *self.lan)
            self.lan_up = False


def first_line(text):
    text = (text or "").strip()
    return text.splitlines()[0][:160] if text else ""


class DeviceClient(threading.Thread):
    """Loops on `meshctl device set PLUG power=on|off --id ID` from one node, every id unique."""

    def __init__(self, tb, node, seed, devices, op_timeout, clock, records, phase="campaign"):
        super().__init__(daemon=True)
        self.tb, self.node, self.devices, self.op_timeout = tb, node, devices, op_timeout
        self.rng = random.Random(f"{seed}-device-{node}")
        self.clock, self.records, self.phase = clock, records, phase
        self.stop = threading.Event()
        self.count = 0

    def command(self, device, power, attempts=1):
        """One command; with attempts > 1 it is asked again under the same id while no outcome came back (exit 1),
        which meshctl documents as safe: the device group actuates an id at most once."""
        self.count += 1
        cid = f"chaos.{self.node}.{self.phase.replace(' ', '-')}.{self.count}"
        record = {"client": f"device@{self.node}", "node": self.node, "device": device, "power": power,
                  "command_id": cid, "phase": self.phase, "sent": self.clock.now(), "acked": False}
        for attempt in range(1, attempts + 1):
            out = meshctl(self.tb, self.node, "device", "set", device, f"power={'on' if power else 'off'}", "--id",
                          cid, "--timeout", str(self.op_timeout), timeout=self.op_timeout + 30)
            record.update(exit=out.returncode, acked=out.returncode == 0, attempts=attempt,
                          error=first_line(out.stderr or out.stdout))
            if out.returncode != 1:
                break
        record["answered"] = self.clock.now()
        self.records.append(record)
        return record

    def run(self):
        while not self.stop.is_set():
            device = self.devices[self.rng.randrange(len(self.devices))]
            power = self.rng.random() < 0.5
            pause = self.rng.uniform(*CLIENT_PAUSE_S)
            record = self.command(device, power)
            self.stop.wait(pause if record["acked"] else max(pause, 0.5))


class RoutineClient(threading.Thread):
    """Loops on `meshctl routine run ID --wait` from one node: at most one run of its own under way."""

    def __init__(self, tb, node, seed, routines, op_timeout, clock, records):
        super().__init__(daemon=True)
        self.tb, self.node, self.routines = tb, node, routines
        # A run waits for its locks behind every other client's: four operations' worth.
        self.timeout = 4 * op_timeout
        self.rng = random.Random(f"{seed}-routine-{node}")
        self.clock, self.records = clock, records
        self.stop = threading.Event()

    def run_once(self, routine):
        record = {"client": f"routine@{self.node}", "node": self.node, "routine": routine, "sent": self.clock.now(),
                  "seq": None, "outcome": None}
        out = meshctl(self.tb, self.node, "--json", "routine", "run", routine, "--wait", "--timeout",
                      str(self.timeout), timeout=self.timeout + 30)
        record.update(exit=out.returncode, error=first_line(out.stderr))
        try:
            invocation = json.loads(out.stdout).get("invocation", {})
            record.update(seq=int(invocation["seq"]) if "seq" in invocation else None,
                          outcome=invocation.get("outcome"))
        except ValueError:
            pass
        record["answered"] = self.clock.now()
        self.records.append(record)
        return record

    def run(self):
        while not self.stop.is_set():
            routine = self.routines[self.rng.randrange(len(self.routines))]
            pause = self.rng.uniform(*ROUTINE_PAUSE_S)
            self.run_once(routine)
            self.stop.wait(pause)


def wait_invocations_ended(tb, names, deadline):
    """Polls `meshctl routine history` until no invocation is under way (or the deadline): a routine's commands
    can land after its client gave up waiting, and the actuation log is read after this."""
    busy = []
    while True:
        for name in names:
            out = meshctl(tb, name, "--json", "routine", "history", "--timeout", "10", timeout=40)
            if out.returncode == 0:
                break
        else:
            busy = ["no node answered routine history"]
            out = None
        if out is not None:
            rows = json.loads(out.stdout).get("routines", [])
            busy = [f"{r['id']}#{i.get('seq')} {i.get('phase')}" for r in rows for i in r.get("invocations", [])
                    if i.get("phase") != "PHASE_DONE"]
            busy += [f"{r['id']}: {r['error']}" for r in rows if r.get("error")]
        if not busy or time.monotonic() > deadline:
            return busy
        time.sleep(2)


def final_commands(tb, names, seed, devices, op_timeout, clock, records):
    """After the heal, once every client has stopped: one command per device-client plug, one at a time, so the
    plug's final state is defined (the invariant's 'last acknowledged command'). Each is asked up to
    FINAL_ATTEMPTS times under its one id while no outcome comes back."""
    rng = random.Random(f"{seed}-final")
    for i, device in enumerate(devices):
        client = DeviceClient(tb, names[i % len(names)], seed, devices, op_timeout, clock, records, phase="final")
        client.command(device, rng.random() < 0.5, attempts=FINAL_ATTEMPTS)


# ---------------------------------------------------------------- invariants


def command_counts(actuations):
    counts = {}
    for a in actuations:
        if a.get("command_id"):
            counts[a["command_id"]] = counts.get(a["command_id"], 0) + 1
    return counts


def check_device_commands(records):
    """(status, summary, details): every acknowledged command actuated exactly once, no command twice, and each
    plug's final state that of its last acknowledged command where that is defined."""
    actuations = records.get("actuations", [])
    commands = records.get("device_commands", [])
    counts = command_counts(actuations)
    ours = {c["command_id"] for c in commands}
    problems, notes = [], []
    acked = [c for c in commands if c["acked"]]
    for c in acked:
        if counts.get(c["command_id"], 0) == 0:
            problems.append(f"{c['command_id']} ({c['device']} power={'on' if c['power'] else 'off'}, acknowledged "
                            f"at +{c['answered']:.1f}s by {c['node']}) never reached its device")
    for cid, n in sorted(counts.items()):
        if cid in ours and n > 1:
            problems.append(f"{cid} actuated {n} times")
    applied = sum(1 for c in commands if counts.get(c["command_id"], 0) > 0)
    defined = 0
    for device in records["meta"].get("devices", []):
        sent = sorted((c for c in commands if c["device"] == device), key=lambda c: c["sent"])
        if not sent:
            continue
        last = sent[-1]
        if last.get("phase") != "final" or not last["acked"]:
            notes.append(f"{device}: final state undefined (its last command {last['command_id']} was "
                         f"{'not the final one' if last.get('phase') != 'final' else 'not acknowledged'})")
            continue
        racing = [c["command_id"] for c in sent[:-1] if c["answered"] > last["sent"]]
        if racing:
            notes.append(f"{device}: final state undefined ({racing[0]} was still under way)")
            continue
        ok = [a for a in actuations if a.get("device") == device and a.get("ok") and relay_power(a) is not None]
        if not ok:
            problems.append(f"{device}: acknowledged {last['command_id']} but the device logged no actuation")
            continue
        defined += 1
        final = ok[-1]
        if relay_power(final) != last["power"]:
            problems.append(f"{device}: ended power={'on' if relay_power(final) else 'off'} (set by "
                            f"{final.get('command_id')} at +{final.get('at') or 0:.1f}s), but the last acknowledged "
                            f"command {last['command_id']} (sent +{last['sent']:.1f}s after every other had its "
                            f"answer) set power={'on' if last['power'] else 'off'}")
    summary = (f"{len(acked)} of {len(commands)} commands acknowledged, {applied} applied; final state defined "
               f"and checked on {defined} plugs")
    if problems:
        return "FAIL", summary, problems + notes
    if not acked:
        return "UNCHECKED", "no device command was acknowledged, so there is nothing to check", notes
    return "PASS", summary, notes


def interleavings(actuations, routine_ids):
    """Per device, an invocation whose actuations resume after another invocation's: [(device, a, b, times)]."""
    found = []
    by_device = {}
    for a in actuations:
        parsed = building.split_command_id(a.get("command_id"))
        if parsed is None or parsed[1] not in routine_ids:
            continue
        by_device.setdefault(a.get("device"), []).append((parsed[0], a))
    for device, seq in sorted(by_device.items()):
        done, current = {}, None
        for holder, a in seq:
            if holder != current:
                if holder in done:
                    found.append((device, holder, current, done[holder], a))
                if current is not None:
                    done[current] = last
                current = holder
            last = a
    return found


def check_routine_isolation(records):
    """(status, summary, details): on every device, no invocation's actuations interleaved with another's, and no
    routine command actuated twice; span overlaps of conflicting invocations are listed, not failed."""
    routines = routines_from_meta(records["meta"])
    ids = {r.id for r in routines}
    actuations = [a for a in records.get("actuations", [])
                  if (building.split_command_id(a.get("command_id")) or (None, None))[1] in ids]
    problems = []
    for cid, n in sorted(command_counts(actuations).items()):
        if n > 1:
            problems.append(f"{cid} actuated {n} times")
    for device, holder, other, before, resumed in interleavings(actuations, ids):
        problems.append(f"{device}: {holder} actuated at +{before.get('at') or 0:.3f}s, then {other}, then {holder} "
                        f"again at +{resumed.get('at') or 0:.3f}s (mono {before['mono_s']} .. {resumed['mono_s']})")
    invocations, found = building.check_serialization(actuations, routines)
    overlaps = [p for p in found if "overlaps" in p]
    runs = records.get("routine_runs", [])
    finished = {}
    for r in runs:
        key = r.get("outcome") or f"exit {r.get('exit')}"
        finished[key] = finished.get(key, 0) + 1
    summary = (f"{len(invocations)} invocations actuated ({len(runs)} runs asked: "
               f"{', '.join(f'{k} {v}' for k, v in sorted(finished.items()))}), "
               f"{building.conflicting_pairs(invocations, routines)} pairs share a plug; "
               f"{len(overlaps)} span overlaps (noted)")
    notes = [f"span overlap (a lock may have been reclaimed; not failed): {p}" for p in overlaps]
    if problems:
        return "FAIL", summary, problems + notes
    if not invocations:
        return "UNCHECKED", "no routine actuated a device, so there is nothing to check", notes
    return "PASS", summary, notes


# ---------------------------------------------------------------- forged violations and hand-made records


def inject_violation(records, kind):
    forged = "forged by --inject-violation"
    if kind == "device-lost":
        device = (records["meta"].get("devices") or ["cplug0"])[0]
        records.setdefault("device_commands", []).append(
            {"client": forged, "node": "n0", "device": device, "power": True, "command_id": "forged.lost",
             "phase": "campaign", "sent": 0.0, "answered": 0.0, "acked": True, "exit": 0, "error": ""})
    elif kind == "device-final":
        finals = [c for c in records.get("device_commands", []) if c.get("phase") == "final" and c["acked"]]
        if not finals:
            raise ValueError("no acknowledged final device command to contradict")
        c = finals[0]
        records["actuations"].append({"device": c["device"], "command_id": "forged.late", "ok": True,
                                      "mono_s": 1e9, "wall": None, "at": c["answered"] + 1,
                                      "command": {"system": {"set_relay_state": {"state": 0 if c["power"] else 1}}}})
    elif kind == "routine-interleave":
        ids = {r["id"] for r in records["meta"].get("routines", [])}
        lines = records.get("actuations", [])
        for i, a in enumerate(lines):
            parsed = building.split_command_id(a.get("command_id"))
            if parsed is None or parsed[1] not in ids:
                continue
            later = next((j for j in range(i + 1, len(lines)) if lines[j].get("device") == a["device"]
                          and (building.split_command_id(lines[j].get("command_id")) or [None])[0] == parsed[0]),
                         None)
            if later is not None:
                routine = next(r for r in ids if r != parsed[1])
                lines.insert(later, dict(a, command_id=f"{routine}#999999.00000000#0", mono_s=a["mono_s"]))
                return
        raise ValueError("no invocation actuated a device twice, so there is nothing to interleave")


def hand_made(records):
    """Adds a clean device and routine history to the harness's hand-made records."""
    routines = chaos_routines()
    records["meta"].update(clients=["lock", "write", "device", "routine"], devices=["cplug0"],
                           routines=routines_meta(routines))

    def act(cid, device, t, power):
        return {"command_id": cid, "device": device, "mono_s": t, "at": t, "ok": True, "wall": None,
                "command": {"system": {"set_relay_state": {"state": 1 if power else 0}}}}

    def cmd(cid, power, sent, acked=True, phase="campaign"):
        return {"client": "device@n0", "node": "n0", "device": "cplug0", "power": power, "command_id": cid,
                "phase": phase, "sent": sent, "answered": sent + 0.5, "acked": acked, "exit": 0 if acked else 1,
                "error": ""}
    records["device_commands"] = [cmd("c1", True, 1.0), cmd("c2", False, 2.0, acked=False),
                                  cmd("c3", True, 3.0, phase="final")]
    records["actuations"] = [
        act("c1", "cplug0", 1.2, True),
        act("chaos_ab#1.0000000a#0", "rplug0", 1.0, True), act("chaos_ab#1.0000000a#1", "rplug1", 1.1, True),
        act("chaos_ab#1.0000000a#2", "rplug0", 1.7, False),
        # Shares rplug1 with chaos_ab: starts after its hold (1.1 + 0.5).
        act("chaos_bc#1.0000000b#0", "rplug1", 1.8, True), act("chaos_bc#1.0000000b#1", "rplug2", 1.9, True),
        act("chaos_bc#1.0000000b#2", "rplug1", 2.5, False),
        act("c3", "cplug0", 3.2, True)]
    records["routine_runs"] = [{"client": "routine@n0", "node": "n0", "routine": "chaos_ab", "seq": 1,
                                "outcome": "INVOCATION_OK", "exit": 0, "sent": 0.9, "answered": 2.0}]
    return records
