#!/usr/bin/env python3
"""Seven real agents with k = 3 k-groups, started by scripts/testbed.

  kgroup_testbed_test.py loopback|netns --testbed PATH --meshagent PATH --meshctl PATH
                         --meshsim PATH --dir DIR

The agents form a ring n0..n6 with chords (no single crash cuts it). Once
every agent lists all seven alive, every agent computes the same group for
device:lamp from its own view (`meshctl kgroup device:lamp --json`). A client
on an agent outside that group writes entries in a loop with `meshctl
kgroup-write` (the first write creates the group), recording each
acknowledged write with its sequence number, while a second client on
another agent writes back to back in the background, so writes are in
flight when, mid-way, the group's leader is killed with SIGKILL; both
clients keep writing.
Then every surviving member of the target's newest group shows the same log
(`meshctl kgroup device:lamp --log --json`), holding every acknowledged write
at its sequence number, in the order acknowledged.

netns mode needs root and working network namespaces; without them it prints
why and exits 77, which ctest reports as skipped.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

# No __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testbed_test import SKIP, Testbed, log, log_agent_tails, testbed_arguments, wait_for_members  # noqa: E402

TARGET = "device:lamp"
NAMES = [f"n{i}" for i in range(7)]
# A ring with three chords: 2-connected, at most 3 hops between any two.
EDGES = [(i, (i + 1) % 7) for i in range(7)] + [(0, 3), (1, 5), (2, 6)]
WRITES_BEFORE_KILL = 12
WRITES_AFTER_KILL = 12


def meshctl(tb, name, *cmd, timeout=60):
    node = tb.nodes()[name]
    argv = [tb.args.meshctl, "--socket", node["admin_socket"], *cmd]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def group_of(tb, name):
    out = meshctl(tb, name, "--json", "kgroup", TARGET)
    if out.returncode != 0:
        raise AssertionError(f"{name}: meshctl kgroup {TARGET} exited {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def wait_same_group(tb, timeout):
    """Every agent computes the same group (zero messages: views agree)."""
    deadline = time.monotonic() + timeout
    while True:
        groups = {name: group_of(tb, name) for name in NAMES}
        keys = {json.dumps([g["leader"], [m["id"] for m in g["members"]]]) for g in groups.values()}
        if len(keys) == 1:
            group = groups["n0"]
            log(f"every agent computes {TARGET} -> {json.dumps(group)}")
            if len(group["members"]) != 3:
                raise AssertionError(f"k = 3 but the group has {len(group['members'])} members")
            return group
        if time.monotonic() > deadline:
            raise AssertionError(f"agents still compute different groups after {timeout} s: {groups}")
        time.sleep(1)


def write(tb, client, text, acked):
    out = meshctl(tb, client, "--json", "kgroup-write", TARGET, text, "--timeout", "20", timeout=40)
    if out.returncode != 0:
        log(f"write {text}: not acknowledged: {out.stderr.strip()}")
        return False
    reply = json.loads(out.stdout)
    acked.append((int(reply["seq"]), text))
    log(f"write {text}: seq {reply['seq']} leader {reply['leader']} attempts {reply['attempts']}")
    return True


def leader_of(tb, members):
    """The member whose `meshctl kgroups` says it leads the target's group."""
    for name in members:
        out = meshctl(tb, name, "--json", "kgroups")
        if out.returncode != 0:
            continue
        for g in json.loads(out.stdout).get("groups", []):
            if g.get("target") == TARGET and g.get("role") == "leader" and not g.get("sealed", False):
                return name
    return None


def logs_of(tb, names):
    """{name: parsed `kgroup TARGET --log --json`} of the names that hold a replica."""
    out = {}
    for name in names:
        result = meshctl(tb, name, "--json", "kgroup", TARGET, "--log")
        if result.returncode == 0:
            out[name] = json.loads(result.stdout)
    return out


class BackgroundClient(threading.Thread):
    """Writes b0, b1, ... from one agent, back to back, until stopped."""

    def __init__(self, tb, client):
        super().__init__(daemon=True)
        self.tb = tb
        self.client = client
        self.acked = []
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            write(self.tb, self.client, f"b{i}", self.acked)
            i += 1


def check_logs(tb, survivors, acked, timeout):
    deadline = time.monotonic() + timeout
    while True:
        logs = logs_of(tb, survivors)
        newest = max(((l["epoch"], l["generation"]) for l in logs.values()), default=None)
        members = {n: l for n, l in logs.items() if (l["epoch"], l["generation"]) == newest and not l["sealed"]}
        entries = {n: [(e["seq"], e["text"]) for e in l["entries"]] for n, l in members.items()}
        distinct = {json.dumps(e) for e in entries.values()}
        problem = None
        if len(members) < 2:
            problem = f"only {sorted(members)} serve the newest group {newest}"
        elif len(distinct) != 1:
            problem = f"members disagree: {entries}"
        else:
            log_entries = next(iter(entries.values()))
            by_seq = dict(log_entries)
            everything = [a for client in acked for a in client]
            lost = [(s, t) for s, t in everything if by_seq.get(s) != t]
            texts = [t for _, t in log_entries]
            if lost:
                problem = f"acknowledged writes missing from the log: {lost}; log: {log_entries}"
            elif any([s for s, _ in client] != sorted(s for s, _ in client) for client in acked):
                problem = f"a client's writes were acknowledged out of order: {acked}"
            elif len(texts) != len(set(texts)):
                problem = f"a write was applied twice: {log_entries}"
            elif [s for s, _ in log_entries] != list(range(1, len(log_entries) + 1)):
                problem = f"the log's sequence numbers have gaps: {log_entries}"
        if problem is None:
            log(f"{sorted(members)} (epoch, generation {newest}) hold the same {len(log_entries)} entries, "
                f"every one of the {len(everything)} acknowledged writes at its sequence number")
            return
        if time.monotonic() > deadline:
            raise AssertionError(problem)
        time.sleep(1)


def main():
    args, directory = testbed_arguments("meshkg")
    if args is None:
        return SKIP
    os.makedirs(os.path.dirname(os.path.abspath(directory)), exist_ok=True)
    topology = os.path.abspath(directory) + ".topology"
    with open(topology, "w", encoding="utf-8") as f:
        f.write("".join(f"{a} {b}\n" for a, b in EDGES))

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tb = Testbed(args, directory)
    up = ["up", "--topology", topology, "--kgroup-k", "3", "--meshagent", args.meshagent,
          "--meshctl", args.meshctl, "--meshsim", args.meshsim, "--log-level", "info"]
    up += ["--netns", "--ns-prefix", "mtk-"] if args.mode == "netns" else ["--loopback-net", "92"]
    try:
        tb.run(*up)
        tb.run("wait", "--timeout", "30")
        wait_for_members(tb, NAMES, {n: "alive" for n in NAMES}, False, 60)
        group = wait_same_group(tb, 30)
        ids = {n["id"]: name for name, n in tb.nodes().items()}
        members = [ids[m["id"]] for m in group["members"]]
        outside = [n for n in NAMES if n not in members]
        client, other = outside[0], outside[1]
        log(f"group members {members}, clients on {client} and {other}")

        acked = []
        for i in range(WRITES_BEFORE_KILL):
            write(tb, client, f"w{i}", acked)
        if len(acked) < WRITES_BEFORE_KILL // 2:
            raise AssertionError(f"only {len(acked)} of {WRITES_BEFORE_KILL} writes acknowledged before the kill")
        background = BackgroundClient(tb, other)
        background.start()
        leader = leader_of(tb, members)
        if leader is None:
            raise AssertionError(f"no member of {members} reports leading {TARGET}")
        log(f"killing the leader {leader} with SIGKILL")
        tb.run("kill", leader)
        before = len(acked)
        for i in range(WRITES_BEFORE_KILL, WRITES_BEFORE_KILL + WRITES_AFTER_KILL):
            write(tb, client, f"w{i}", acked)
        if len(acked) - before < WRITES_AFTER_KILL // 2:
            raise AssertionError(f"only {len(acked) - before} of {WRITES_AFTER_KILL} writes acknowledged after "
                                 f"the leader was killed")
        background.stop.set()
        background.join(60)
        log(f"the background client had {len(background.acked)} writes acknowledged")
        survivors = [n for n in NAMES if n != leader]
        check_logs(tb, survivors, [acked, background.acked], 30)
    except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
        log(f"FAIL: {e}")
        log_agent_tails(directory, NAMES, "kgroup", 10)
        return 1
    finally:
        tb.run("down", check=False)
        if os.path.exists(topology):
            os.remove(topology)
    log(f"PASS ({args.mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
