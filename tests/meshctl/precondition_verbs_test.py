#!/usr/bin/env python3
"""meshctl's precondition verbs against a running one-node agent: the catalog
file's [[precondition]] tables are listed; precondition add and remove change
the rules at run time; plan prints the graph and the combo of a device
command and of a routine without running anything, in text and --json;
device set on a command rules apply to runs it as an ad hoc combo and
reports its end (here aborted: a reading it needs cannot be read) with the
exit status and routine history; a conflict between rules, an unknown
device and a wrong command line exit non-zero with the reason on stderr."""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import agent_fixture  # noqa: E402

# The devices' drivers point at closed ports: their states stay unknown, so
# the plans are the same on every machine.
CATALOG = """
[[device]]
id = "sprinkler"
kind = "switch"
location = [0, 0, 0]
driver = "kasa://127.0.0.1:1"

[[device]]
id = "outlet_1"
kind = "plug"
location = [1, 0, 0]
driver = "kasa://127.0.0.1:2"

[[device]]
id = "hall_motion"
kind = "motion_sensor"
location = [2, 0, 0]
driver = "kasa://127.0.0.1:3"

[[routine]]
id = "water"
trigger = "manual"
[[routine.command]]
device = "sprinkler"
set = { power = "on" }

[[precondition]]
id = "sprinkler_needs_outlet_off"
when = "sprinkler.power == on"
requires = ["outlet_1.power == off"]
"""

RULES = """
[[precondition]]
id = "outlet_off_when_hall_empty"
when = "outlet_1.power == off"
requires = ["hall_motion.motion == off"]
"""

CONFLICT = """
[[precondition]]
id = "sprinkler_needs_outlet_on"
when = "sprinkler.power == on"
requires = ["outlet_1.power == on"]
"""


class Meshctl:
    def __init__(self, binary, socket_path):
        self.binary = binary
        self.socket_path = socket_path

    def __call__(self, *args):
        return subprocess.run([self.binary, "--socket", self.socket_path, *args], capture_output=True, text=True,
                              timeout=30)

    def json(self, *args):
        out = self("--json", *args)
        assert out.returncode == 0, (args, out.returncode, out.stderr)
        return json.loads(out.stdout)


def write_file(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def check(meshctl, directory):
    rules = meshctl.json("preconditions")["rules"]
    assert [r["id"] for r in rules] == ["sprinkler_needs_outlet_off"], rules
    assert rules[0]["requirements"] == ["outlet_1.power == off"] and rules[0]["in_file"], rules
    print("ok   the catalog file's rules are listed")

    out = meshctl("precondition", "add", "--file", write_file(directory, "rules.toml", RULES))
    assert out.returncode == 0, out.stderr
    assert "precondition outlet_off_when_hall_empty added as catalog version 1" in out.stdout, out.stdout
    agent_fixture.wait_for(lambda: len(meshctl.json("preconditions")["rules"]) == 2, 10, "the added rule")
    listing = meshctl("preconditions").stdout
    assert "outlet_off_when_hall_empty" in listing and "run time" in listing, listing
    print("ok   precondition add: the rule is listed, from run time")

    out = meshctl("plan", "device", "set", "sprinkler", "power=on", "--timeout", "2")
    assert out.returncode == 0, out.stderr
    for line in ("plan for sprinkler power=on (sprinkler.power == on)", "graph: 3 conditions, depth 3",
                 "[2] hall_motion.motion == off  before [1]  (outlet_off_when_hall_empty)",
                 "combo: 3 steps in 3 stages, 2 commands", "the command itself"):
        assert line in out.stdout, (line, out.stdout)
    plan = meshctl.json("plan", "device", "set", "sprinkler", "power=on", "--timeout", "2")["plans"][0]
    steps = [(s["action"], s["device"], s["value"]) for stage in plan["stages"] for s in stage["steps"]]
    assert steps == [("check", "hall_motion", ""), ("set", "outlet_1", "off"), ("set", "sprinkler", "on")], steps
    assert plan["stages"][1]["steps"][0]["rules"] == ["sprinkler_needs_outlet_off"], plan
    print("ok   plan device set: graph and combo, text and --json")

    plans = meshctl.json("plan", "routine", "water", "--timeout", "2")["plans"]
    assert [p["command"] for p in plans] == ["sprinkler power=on"] and plans[0]["depth"] == 3, plans
    print("ok   plan routine: each command planned")

    out = meshctl("precondition", "add", "--file", write_file(directory, "conflict.toml", CONFLICT))
    assert out.returncode == 0, out.stderr
    agent_fixture.wait_for(lambda: len(meshctl.json("preconditions")["rules"]) == 3, 10, "the conflicting rule")
    out = meshctl("plan", "device", "set", "sprinkler", "power=on", "--timeout", "2")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "cannot plan sprinkler power=on: precondition rules conflict on outlet_1.power" in out.stderr, out.stderr
    assert "sprinkler_needs_outlet_on" in out.stderr and "sprinkler_needs_outlet_off" in out.stderr, out.stderr
    out = meshctl("--json", "plan", "device", "set", "sprinkler", "power=on", "--timeout", "2")
    assert out.returncode == 1 and "conflict" in json.loads(out.stdout)["plans"][0]["error"], out.stdout
    print("ok   conflicting rules: both named, exit 1")

    out = meshctl("precondition", "remove", "sprinkler_needs_outlet_on")
    assert out.returncode == 0 and "removed as catalog version" in out.stdout, (out.stdout, out.stderr)
    out = meshctl("precondition", "remove", "nothing")
    assert out.returncode == 1 and "no precondition rule nothing in the catalog" in out.stderr, out.stderr
    out = meshctl("device", "remove", "hall_motion")
    assert out.returncode == 1 and "named by precondition rule outlet_off_when_hall_empty" in out.stderr, out.stderr
    print("ok   precondition remove; a device a rule names is not removed")

    out = meshctl("device", "set", "sprinkler", "power=on", "--timeout", "25")
    assert out.returncode == 9, (out.returncode, out.stdout, out.stderr)
    for line in ("device sprinkler: combo adhoc:sprinkler invocation 1 aborted: its preconditions cannot be met",
                 "hall_motion.motion could not be read", "1. sprinkler power=on (subject): not run"):
        assert line in out.stderr, (line, out.stderr)
    reply = json.loads(meshctl("--json", "device", "set", "sprinkler", "power=on", "--lock", "ola",
                               "--timeout", "25").stdout)
    assert reply["combo"] == "adhoc:sprinkler" and reply["status"] == "aborted", reply
    assert reply["invocation"]["adhoc"]["lock_strategy"] == "ola", reply
    out = meshctl("routine", "history", "adhoc:sprinkler")
    assert out.returncode == 0 and "2 invocations remembered" in out.stdout, (out.stdout, out.stderr)
    assert "invocation 2 (run by hand): aborted: its preconditions cannot be met" in out.stdout, out.stdout
    out = meshctl("device", "set", "sprinkler", "power=on", "--lock", "fastest")
    assert out.returncode == 2 and "--lock wants sla, ola or aggressive" in out.stderr, out.stderr
    out = meshctl("device", "set", "sprinkler", "power=on", "--lock", "ola", "--ignore-preconditions")
    assert out.returncode == 2, out.stderr
    out = meshctl("routine", "run", "water", "--lock", "sla")
    assert out.returncode == 2 and "--lock applies to device set only" in out.stderr, out.stderr
    print("ok   device set runs an ad hoc combo: its end, exit 9, --json, routine history; --lock checked")

    out = meshctl("plan", "device", "set", "pump", "power=on")
    assert out.returncode == 1 and "no device pump in the catalog" in out.stderr, out.stderr
    out = meshctl("plan", "device", "set", "sprinkler")
    assert out.returncode == 2 and "takes ATTR=VALUE" in out.stderr, out.stderr
    out = meshctl("plan", "sprinkler")
    assert out.returncode == 2, out.stderr
    out = meshctl("precondition", "add")
    assert out.returncode == 2 and "precondition add takes --file F" in out.stderr, out.stderr
    out = meshctl("--help")
    assert "plan device set ID ATTR=VALUE..." in out.stdout and "preconditions" in out.stdout
    assert "[--lock sla|ola|aggressive]" in out.stdout and "routine:adhoc:ID" in out.stdout, out.stdout
    print("ok   mistakes: unknown device exits 1, wrong command lines exit 2")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshagent", required=True)
    ap.add_argument("--meshctl", required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    config = agent_fixture.write_node(args.dir)
    write_file(args.dir, "catalog.toml", CATALOG)
    with open(config, "a") as f:
        # k = 1: a mesh of one node creates its device groups, so combos lock.
        f.write('[kgroup]\nk = 1\n[devices]\ncatalog = "catalog.toml"\n')
    socket_path = os.path.join(args.dir, "admin.sock")
    with open(os.path.join(args.dir, "agent.log"), "w") as log:
        agent = agent_fixture.start(args.meshagent, config, log=log)
        try:
            agent_fixture.wait_for(lambda: os.path.exists(socket_path), 20, "the admin socket")
            check(Meshctl(args.meshctl, socket_path), args.dir)
        finally:
            agent.terminate()
            agent.wait(timeout=10)
    print("precondition_verbs: 8 passed, 0 failed")


if __name__ == "__main__":
    main()
