#!/usr/bin/env python3
"""Seven real agents driving emulated TP-Link Kasa devices, started by scripts/testbed.

  device_testbed_test.py loopback|netns --testbed PATH --meshagent PATH --meshctl PATH
                         --meshsim PATH --meshemu PATH --dir DIR

meshemu serves four devices over the real Kasa protocol (TCP, XOR autokey):
on 127.0.0.1 in loopback mode; in netns mode on a "device LAN", a bridge in
the root namespace that every node's namespace joins with a second veth, as
a building's plugs sit on the Wi-Fi every Pi reaches (the mesh links stay
the agents' own). The agents form a ring n0..n6 with chords (k = 3). A
catalog file is added with `meshctl device add` on n3; every agent then lists
every device up. `meshctl device watch --json` runs on n5 while `meshctl
device set` commands, each with its own command id, go out from every agent
in turn, flipping the lamp on and off; mid-way the lamp's device leader is
killed with SIGKILL and the commands go on.

The emulator's actuation log (one JSON line per actuation, with the command
id the Kasa driver sends) is the oracle: every command acknowledged ok was
actuated exactly once, no command twice, and the watch on n5 saw the lamp's
changes up to its final state.

netns mode needs root and working network namespaces; without them it prints
why and exits 77, which ctest reports as skipped.
"""

import json
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import building  # noqa: E402
import testbed_test  # noqa: E402
from building import actuations, meshctl  # noqa: E402
from testbed_test import SKIP, Testbed, log, log_agent_tails, wait_for_members  # noqa: E402

NAMES = [f"n{i}" for i in range(7)]
EDGES = [(i, (i + 1) % 7) for i in range(7)] + [(0, 3), (1, 5), (2, 6)]
DEVICES = [("lamp", "plug", 19921, [0, 0, 0]), ("fan", "plug", 19922, [40, 0, 0]),
           ("hall", "dimmer", 19923, [0, 40, 0]), ("desk", "bulb", 19924, [40, 40, 0])]
COMMANDS_BEFORE_KILL = 8
COMMANDS_AFTER_KILL = 8


def devices_of(tb, name):
    out = meshctl(tb, name, "--json", "devices", "--timeout", "5")
    if out.returncode != 0:
        return {}
    return {d["id"]: d for d in json.loads(out.stdout).get("devices", [])}


def wait_all_up(tb, timeout):
    deadline = time.monotonic() + timeout
    while True:
        views = {name: devices_of(tb, name) for name in NAMES}
        missing = {n: [d for d, *_ in DEVICES if not v.get(d, {}).get("up")] for n, v in views.items()}
        missing = {n: m for n, m in missing.items() if m}
        if not missing:
            log("every agent lists every device up")
            return views["n0"]
        if time.monotonic() > deadline:
            raise AssertionError(f"devices not up after {timeout} s: {missing}; n0 sees {views['n0']}")
        time.sleep(2)


LAN = ("mtd-lan", "10.251.0")


def main():
    meshemu, args, directory = testbed_test.testbed_arguments_with_meshemu("meshdev")
    if args is None:
        return SKIP
    os.makedirs(os.path.dirname(os.path.abspath(directory)), exist_ok=True)
    base = os.path.abspath(directory)
    topology, catalog, emu_log = base + ".topology", base + ".catalog.toml", base + ".actuations"
    with open(topology, "w", encoding="utf-8") as f:
        f.write("".join(f"{a} {b}\n" for a, b in EDGES))
    for path in (emu_log,):
        if os.path.exists(path):
            os.remove(path)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tb = Testbed(args, directory)
    up = ["up", "--topology", topology, "--kgroup-k", "3", "--meshagent", args.meshagent,
          "--meshctl", args.meshctl, "--meshsim", args.meshsim, "--log-level", "info"]
    up += ["--netns", "--ns-prefix", "mtd-"] if args.mode == "netns" else ["--loopback-net", "93"]
    emulator = watch = None
    try:
        tb.run(*up)
        tb.run("wait", "--timeout", "30")
        wait_for_members(tb, NAMES, {n: "alive" for n in NAMES}, False, 60)
        address = "127.0.0.1"
        if args.mode == "netns":
            building.device_lan(tb, NAMES, True, *LAN)
            address = f"{LAN[1]}.1"
        emu = [meshemu, "--log", emu_log, "--address", address]
        for name, kind, port, _ in DEVICES:
            emu += ["--device", f"{kind}:{name}:{port}"]
        emulator = subprocess.Popen(emu, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in emulator.stdout:
            log(f"meshemu: {line.strip()}")
            if line.strip() == "ready":
                break
        with open(catalog, "w", encoding="utf-8") as f:
            for name, kind, port, location in DEVICES:
                f.write(f'[[device]]\nid = "{name}"\nkind = "{kind}"\nlocation = {location}\n'
                        f'driver = "kasa://{address}:{port}"\n\n')
        added = meshctl(tb, "n3", "device", "add", "--file", catalog, "--timeout", "30")
        log(f"device add: exit {added.returncode}: {added.stdout.strip()} {added.stderr.strip()}")
        if added.returncode != 0:
            raise AssertionError("device add failed")
        wait_all_up(tb, 90)

        watch_argv = [args.meshctl, "--socket", tb.nodes()["n5"]["admin_socket"], "--json", "device", "watch"]
        if args.mode == "netns":
            watch_argv = ["ip", "netns", "exec", tb.nodes()["n5"]["namespace"]] + watch_argv
        watch = subprocess.Popen(watch_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        acked, failed = [], []
        power = True

        def command(i, sender):
            nonlocal power
            cid = f"tb-{i}"
            out = meshctl(tb, sender, "device", "set", "lamp", f"power={'on' if power else 'off'}", "--id", cid,
                          "--timeout", "15", timeout=40)
            log(f"{sender}: set lamp power={'on' if power else 'off'} ({cid}) -> exit {out.returncode} "
                f"{out.stdout.strip()} {out.stderr.strip()}")
            (acked if out.returncode == 0 else failed).append((cid, power))
            power = not power
            time.sleep(1.5)  # above the poll interval: the watch sees each state

        for i in range(COMMANDS_BEFORE_KILL):
            command(i, NAMES[i % len(NAMES)])
        leader_id = devices_of(tb, "n5").get("lamp", {}).get("leader")
        ids = {n["id"]: name for name, n in tb.nodes().items()}
        victim = ids.get(leader_id)
        if victim is None:
            raise AssertionError(f"no leader known for lamp (n5 says {leader_id!r})")
        log(f"killing lamp's device leader {victim} with SIGKILL")
        tb.run("kill", victim)
        alive = [n for n in NAMES if n != victim and n != "n5"]
        for i in range(COMMANDS_BEFORE_KILL, COMMANDS_BEFORE_KILL + COMMANDS_AFTER_KILL):
            command(i, alive[i % len(alive)])
        if len([c for c in acked if int(c[0][3:]) >= COMMANDS_BEFORE_KILL]) < COMMANDS_AFTER_KILL // 2:
            raise AssertionError(f"only {len(acked)} commands acknowledged; failed: {failed}")
        time.sleep(4)

        log_lines = [a for a in actuations(emu_log) if a.get("device") == "lamp"]
        counts = {}
        for a in log_lines:
            counts[a.get("command_id")] = counts.get(a.get("command_id"), 0) + 1
        twice = {c: n for c, n in counts.items() if n > 1}
        if twice:
            raise AssertionError(f"commands actuated more than once: {twice}")
        lost = [c for c, _ in acked if counts.get(c) != 1]
        if lost:
            raise AssertionError(f"acknowledged commands not actuated: {lost}; log: {log_lines}")
        log(f"{len(acked)} commands acknowledged, each actuated exactly once; {len(failed)} not acknowledged")

        final = log_lines[-1]["command"]["system"]["set_relay_state"]["state"] == 1 if log_lines else None
        watch.send_signal(signal.SIGINT)
        seen, _ = watch.communicate(timeout=20)
        lamp_states = [json.loads(l)["device"].get("state") for l in seen.splitlines()
                       if l.strip() and json.loads(l)["device"]["id"] == "lamp"]
        log(f"n5's watch saw lamp go through {lamp_states}")
        want = f"power={'on' if final else 'off'}"
        if not lamp_states or lamp_states[-1] != want:
            raise AssertionError(f"the watch on n5 ended at {lamp_states[-1:] or 'nothing'}, the lamp is {want}")
        changes = sum(1 for a, b in zip(lamp_states, lamp_states[1:]) if a != b)
        if changes < len(acked) // 2:
            raise AssertionError(f"the watch saw {changes} changes for {len(acked)} acknowledged commands")
    except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
        log(f"FAIL: {e}")
        log_agent_tails(directory, NAMES, "routine", 8)
        return 1
    finally:
        for process in (watch, emulator):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
        tb.run("down", check=False)
        if args.mode == "netns":
            building.device_lan(tb, NAMES, False, *LAN)
        for path in (topology, catalog, emu_log):
            if os.path.exists(path):
                os.remove(path)
    log(f"PASS ({args.mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
