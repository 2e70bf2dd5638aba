"""An emulated building for real agents: meshemu's Kasa devices, the catalog that points the agents at them,
routines over them, and the oracle that reads the emulator's actuation log.

Shared by the routine testbed test and `scripts/demo` (building mode), which each describe their own
building with Device and Routine and drive a testbed made by scripts/testbed (testbed_test.Testbed).

The oracle: every actuation meshemu logs carries the command id the agent sent, `ROUTINE#SEQ.TAG#INDEX`
for a routine's command. Grouped by invocation (`ROUTINE#SEQ.TAG`), the actuations of one invocation span
the interval from its first actuation to the end of its last command's hold (the command's duration_s,
kept only when the command succeeded). Two invocations of routines whose device sets intersect hold a
common device lock, so their intervals must be disjoint; and no command id may be actuated twice.
"""

import json
import os
import subprocess
from dataclasses import dataclass, field

from testbed_test import log


@dataclass
class Device:
    name: str
    kind: str                 # a meshemu kind: plug, bulb, dimmer, switch, motion_sensor, ...
    location: tuple           # metres; device groups are clustered by location
    room: str = ""
    initial: dict = field(default_factory=dict)   # attribute -> TOML literal text, e.g. {"power": '"off"'}
    timeline: list = field(default_factory=list)  # [(at_s, {attribute: TOML literal})]
    repeat_after: float = 0


@dataclass
class Command:
    device: str
    values: dict              # attribute -> TOML literal text
    duration_s: float = 0


@dataclass
class Routine:
    id: str
    trigger: str              # a trigger expression, or "manual"
    commands: list
    min_retrigger_s: float = 0  # 0: the agent's default
    lock: str = ""            # "", "sla" or "ola"

    def devices(self):
        return {c.device for c in self.commands}


def meshemu_config(devices, address, first_port, actuation_log, seed):
    """meshemu's TOML: device i listens on first_port + i."""
    out = [f'address = "{address}"', f'actuation_log = "{actuation_log}"', f"seed = {seed}", ""]
    for i, d in enumerate(devices):
        out += ["[[device]]", f'name = "{d.name}"', f'kind = "{d.kind}"', f"port = {first_port + i}"]
        out += [f"{k} = {v}" for k, v in d.initial.items()]
        if d.timeline:
            steps = ", ".join("{ " + ", ".join([f"at = {at}"] + [f"{k} = {v}" for k, v in values.items()]) + " }"
                              for at, values in d.timeline)
            out.append(f"timeline = [ {steps} ]")
        if d.repeat_after:
            out.append(f"repeat_after = {d.repeat_after}")
        out.append("")
    return "\n".join(out)


def catalog_text(devices, address, first_port):
    out = []
    for i, d in enumerate(devices):
        x, y, z = d.location
        out += ["[[device]]", f'id = "{d.name}"', f'kind = "{d.kind}"', f"location = [{x}, {y}, {z}]",
                f'driver = "kasa://{address}:{first_port + i}"']
        if d.room:
            out.append(f'room = "{d.room}"')
        out.append("")
    return "\n".join(out)


def routines_text(routines):
    out = []
    for r in routines:
        out += ["[[routine]]", f'id = "{r.id}"', f'trigger = "{r.trigger}"']
        if r.min_retrigger_s:
            out.append(f"min_retrigger_s = {r.min_retrigger_s}")
        if r.lock:
            out.append(f'lock = "{r.lock}"')
        for c in r.commands:
            values = ", ".join(f"{k} = {v}" for k, v in c.values.items())
            out += ["[[routine.command]]", f'device = "{c.device}"', f"set = {{ {values} }}"]
            if c.duration_s:
                out.append(f"duration_s = {c.duration_s}")
        out.append("")
    return "\n".join(out)


def start_meshemu(meshemu, config_path):
    """Starts meshemu and returns (process, {device: "ADDRESS:PORT"}) once it printed "ready"."""
    emulator = subprocess.Popen([meshemu, "--config", config_path], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    endpoints = {}
    for line in emulator.stdout:
        line = line.strip()
        if line == "ready":
            return emulator, endpoints
        words = line.split()
        if len(words) == 3:
            endpoints[words[0]] = words[2]
    emulator.wait(10)
    raise AssertionError(f"meshemu exited with {emulator.returncode} before it was ready")


def stop_process(process):
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def device_lan(tb, names, up, bridge, prefix):
    """netns mode: creates (up=True) or removes a "device LAN", a bridge `bridge` at PREFIX.1/24 in the root
    namespace that every node's namespace joins with a second veth (lan0, PREFIX.(10 + i)), as a building's
    plugs sit on the Wi-Fi every Pi reaches while the mesh links stay the agents' own."""
    def ip(*cmd):
        return subprocess.run(["ip", *cmd], capture_output=True, text=True)
    if not up:
        for i, _ in enumerate(names):
            ip("link", "del", f"{bridge}{i}")
        ip("link", "del", bridge)
        return
    for cmd in (["link", "add", bridge, "type", "bridge"], ["addr", "add", f"{prefix}.1/24", "dev", bridge],
                ["link", "set", bridge, "up"]):
        out = ip(*cmd)
        if out.returncode != 0:
            raise AssertionError(f"ip {' '.join(cmd)}: {out.stderr.strip()}")
    for i, name in enumerate(names):
        ns = tb.nodes()[name]["namespace"]
        for cmd in (["link", "add", f"{bridge}{i}", "type", "veth", "peer", "name", "lan0", "netns", ns],
                    ["link", "set", f"{bridge}{i}", "master", bridge],
                    ["link", "set", f"{bridge}{i}", "up"],
                    ["netns", "exec", ns, "ip", "addr", "add", f"{prefix}.{10 + i}/24", "dev", "lan0"],
                    ["netns", "exec", ns, "ip", "link", "set", "lan0", "up"]):
            out = ip(*cmd)
            if out.returncode != 0:
                raise AssertionError(f"ip {' '.join(cmd)}: {out.stderr.strip()}")
    log(f"device LAN {prefix}.0/24 joins every namespace")


def meshctl(tb, name, *cmd, timeout=60):
    """meshctl against node `name` (inside its namespace in netns mode)."""
    node = tb.nodes()[name]
    argv = [tb.args.meshctl, "--socket", node["admin_socket"], *cmd]
    if tb.args.mode == "netns":
        argv = ["ip", "netns", "exec", node["namespace"]] + argv
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"meshctl timed out after {timeout} s")


def meshctl_json(tb, name, *cmd, timeout=60):
    out = meshctl(tb, name, "--json", *cmd, timeout=timeout)
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        return None


def actuations(path):
    """The emulator's actuation log: one dict per line."""
    out = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    out.append(json.loads(line))
    return out


def split_command_id(command_id):
    """"ROUTINE#SEQ.TAG#INDEX" -> ("ROUTINE#SEQ.TAG", "ROUTINE", INDEX), or None for another id."""
    parts = (command_id or "").split("#")
    if len(parts) != 3 or "." not in parts[1] or not parts[2].isdigit():
        return None
    return f"{parts[0]}#{parts[1]}", parts[0], int(parts[2])


def invocations_of(log_lines, routines, command_ok=None):
    """Groups a routine's actuations by invocation: {holder: {"routine", "start", "end", "commands"}}.
    command_ok(holder, index) says whether the agent reported the command ok (its duration is then kept), or
    None when it does not know; without command_ok, and where it answers None, the duration is kept."""
    by_id = {r.id: r for r in routines}
    out = {}
    for a in log_lines:
        parsed = split_command_id(a.get("command_id"))
        if parsed is None or parsed[1] not in by_id:
            continue
        holder, routine, index = parsed
        t = float(a["mono_s"])
        command = by_id[routine].commands[index] if index < len(by_id[routine].commands) else None
        reported = None if command_ok is None else command_ok(holder, index)
        keeps = command is not None and command.duration_s and reported is not False
        end = t + (command.duration_s if keeps else 0)
        inv = out.setdefault(holder, {"routine": routine, "start": t, "end": end, "commands": []})
        inv["start"] = min(inv["start"], t)
        inv["end"] = max(inv["end"], end)
        inv["commands"].append((index, a.get("device"), t))
    return out


def precedence_cycle(log_lines):
    """EV's oracle: on each device an invocation whose actuation (command or undo) comes first is serialized
    before the next one's; returns one cycle of that precedence graph as text, or None when it is acyclic (a
    serial order exists)."""
    after = {}
    by_device = {}
    for a in log_lines:
        cid = a.get("command_id") or ""
        if "#" in cid:
            by_device.setdefault(a["device"], []).append(a)
    for device, lines in by_device.items():
        previous = None
        for a in sorted(lines, key=lambda x: x["mono_s"]):
            holder = a["command_id"].rsplit("#", 1)[0]
            if previous is not None and previous[0] != holder:
                after.setdefault(previous[0], {}).setdefault(holder, (device, previous[1], a["mono_s"]))
            previous = (holder, a["mono_s"])
    state, path = {}, []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(after.get(node, {})):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                return ", ".join(f"{x} before {y} on {after[x][y][0]} ({after[x][y][1]:.3f} then "
                                 f"{after[x][y][2]:.3f})" for x, y in zip(cycle, cycle[1:]))
            if not state.get(nxt):
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(after):
        if not state.get(node):
            found = visit(node)
            if found:
                return found
    return None


def check_serialization(log_lines, routines, command_ok=None, visibility="psv"):
    """The oracle. Returns (invocations, problems): problems lists every command id actuated more than once
    and every pair of invocations of conflicting routines (intersecting device sets) whose intervals overlap;
    under GSV and S-GSV (visibility "gsv", "sgsv") every pair of invocations conflicts, as one routine runs at
    a time. Under EV (visibility "ev") routines sharing a device may overlap (post-leases); the check there is
    that the devices' actuation order admits a serial order (precedence_cycle)."""
    problems = []
    counts = {}
    for a in log_lines:
        if a.get("command_id"):
            counts[a["command_id"]] = counts.get(a["command_id"], 0) + 1
    for cid, n in sorted(counts.items()):
        if n > 1:
            problems.append(f"command {cid} actuated {n} times")
    by_id = {r.id: r for r in routines}
    invocations = invocations_of(log_lines, routines, command_ok)
    if visibility == "ev":
        cycle = precedence_cycle(log_lines)
        if cycle:
            problems.append(f"no serial order: precedence cycle {cycle}")
        return invocations, problems
    ordered = sorted(invocations.items(), key=lambda kv: kv[1]["start"])
    for i, (a_holder, a) in enumerate(ordered):
        for b_holder, b in ordered[i + 1:]:
            shared = by_id[a["routine"]].devices() & by_id[b["routine"]].devices()
            if (shared or visibility in ("gsv", "sgsv")) and b["start"] < a["end"]:
                where = f"on {', '.join(sorted(shared))}" if shared else "(no shared device: GSV)"
                problems.append(f"{a_holder} [{a['start']:.3f} .. {a['end']:.3f}] overlaps {b_holder} "
                                f"[{b['start']:.3f} .. {b['end']:.3f}] {where}")
    return invocations, problems


def conflicting_pairs(invocations, routines):
    """How many pairs of the logged invocations share a device (the pairs the oracle had to order)."""
    by_id = {r.id: r for r in routines}
    items = list(invocations.values())
    return sum(1 for i, a in enumerate(items) for b in items[i + 1:]
               if by_id[a["routine"]].devices() & by_id[b["routine"]].devices())


def self_test_oracle():
    """The oracle on hand-made logs: it must pass a serialized one and catch an overlap, a hold cut into,
    a double actuation, and under GSV an overlap of routines sharing no device. Raises AssertionError when it
    does not, so a broken oracle fails the run."""
    routines = [Routine("a", "manual", [Command("lamp", {"power": '"on"'}, 2), Command("fan", {"power": '"on"'})]),
                Routine("b", "manual", [Command("fan", {"power": '"off"'})]),
                Routine("c", "manual", [Command("desk", {"power": '"off"'})])]

    def entry(cid, device, t):
        return {"command_id": cid, "device": device, "mono_s": t, "ok": True}
    serial = [entry("a#1.0000000a#0", "lamp", 1.0), entry("a#1.0000000a#1", "fan", 3.5),
              entry("b#1.0000000b#0", "fan", 3.6), entry("c#1.0000000c#0", "desk", 3.55),
              entry("a#2.0000001a#0", "lamp", 4.0), entry("a#2.0000001a#1", "fan", 6.1)]
    cases = {
        "serialized": (serial, 0),
        "interleaved": (serial[:2] + [entry("b#2.0000002b#0", "fan", 2.0)], 1),
        "inside a hold": ([entry("a#1.0000000a#0", "lamp", 1.0), entry("a#2.0000001a#0", "lamp", 2.5)], 1),
        "twice": (serial + [entry("c#1.0000000c#0", "desk", 9.0)], 1),
    }
    for name, (lines, want) in cases.items():
        invocations, problems = check_serialization(lines, routines)
        if len(problems) != want:
            raise AssertionError(f"oracle self-test '{name}': {len(problems)} problems, want {want}: {problems}")
    _, problems = check_serialization(cases["inside a hold"][0], routines, command_ok=lambda holder, index: False)
    if problems:
        raise AssertionError(f"oracle self-test: a failed command's duration was kept: {problems}")
    # c (desk) actuates inside a's lamp hold (1.0 .. 3.0): fine under PSV, an overlap under GSV.
    global_serial = [entry("a#1.0000000a#0", "lamp", 1.0), entry("c#1.0000000c#0", "desk", 2.0)]
    if check_serialization(global_serial, routines)[1] or len(check_serialization(
            global_serial, routines, visibility="gsv")[1]) != 1:
        raise AssertionError("oracle self-test: GSV must catch routines sharing no device overlapping, PSV not")
    # EV: a overlapping b on the fan is fine as long as one order explains every device; a writing the fan
    # before and after b does not.
    leased = [entry("a#1.0000000a#0", "lamp", 1.0), entry("a#1.0000000a#1", "fan", 1.2),
              entry("b#1.0000000b#0", "fan", 1.5), entry("a#1.0000000a#2", "lamp", 2.0)]
    revisited = leased[:3] + [entry("a#1.0000000a#2", "fan", 2.0)]
    if check_serialization(leased, routines, visibility="ev")[1] or len(check_serialization(
            revisited, routines, visibility="ev")[1]) != 1:
        raise AssertionError("oracle self-test: EV must pass an overlap one serial order explains and catch a cycle")
    log("oracle self-test: a serialized log passes; an interleaving, a hold cut into, a double actuation, "
        "(GSV) any overlap and (EV) a precedence cycle are each caught")
