#!/usr/bin/env python3
"""Five real agents in a chain n0-n1-n2-n3-n4, started by scripts/testbed.

  testbed_test.py loopback|netns --testbed PATH --meshagent PATH --meshctl PATH
                  --meshsim PATH --dir DIR

Checks that every agent finds its neighbours, that a ping between neighbours
comes back over one hop, that OLSR routes n0 to n4 over 4 hops via n1 and a
ping takes them, that killing n2 with SIGKILL takes n4 out of n0's routes
within the hold times and restarting n2 brings the route back, and that an
agent killed with SIGKILL and started again rejoins. netns mode needs root and working network namespaces; without
them it prints why and exits 77, which ctest reports as skipped.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
# Unix socket paths are limited to 107 bytes; DIR/<name>/admin.sock must fit.
MAX_DIR_LEN = 90


def log(msg):
    print(f"[testbed_test] {msg}", flush=True)


def netns_unavailable():
    """Why network namespaces cannot be used here, or None if they can."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    probe = f"mtprobe-{os.getpid()}"
    try:
        added = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    except OSError as e:
        return f"needs root for network namespaces (ip: {e})"
    if added.returncode != 0:
        return f"needs root for network namespaces (ip netns add: {added.stderr.strip()})"
    try:
        veth = subprocess.run(["ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
                              capture_output=True, text=True)
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    if veth.returncode != 0:
        return f"needs veth pairs in network namespaces (ip link add: {veth.stderr.strip()})"
    return None


class Testbed:
    def __init__(self, args, directory):
        self.args = args
        self.dir = directory

    def run(self, *cmd, check=True):
        argv = [sys.executable, self.args.testbed, *cmd, "--dir", self.dir]
        log("$ " + " ".join(argv[1:]))
        out = subprocess.run(argv, capture_output=True, text=True)
        sys.stdout.write(out.stdout)
        sys.stdout.write(out.stderr)
        if check and out.returncode != 0:
            raise AssertionError(f"`{' '.join(cmd)}` exited {out.returncode}")
        return out

    def ctl_json(self, name, *cmd):
        argv = [sys.executable, self.args.testbed, "ctl", "--dir", self.dir, name, "--json", *cmd]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        log(f"{name}: meshctl --json {' '.join(cmd)} -> exit {out.returncode}: {out.stdout.strip()} "
            f"{out.stderr.strip()}")
        return out

    def nodes(self):
        with open(os.path.join(self.dir, "nodes.json"), encoding="utf-8") as f:
            return {n["name"]: n for n in json.load(f)["nodes"]}


def field(obj, snake, camel):
    return obj.get(snake, obj.get(camel, 0))


def check_ping(tb, src, dst, want_hops=1):
    target = tb.nodes()[dst]["id"]
    out = tb.ctl_json(src, "ping", target, "--count", "1")
    if out.returncode != 0:
        raise AssertionError(f"ping {src} -> {dst} ({target}) got no reply")
    reply = json.loads(out.stdout)
    received = int(field(reply, "received", "received"))
    hops = int(field(reply, "hops", "hops"))
    if received != 1 or hops != want_hops:
        raise AssertionError(f"ping {src} -> {dst}: received={received} hops={hops}, want 1 and {want_hops}")
    log(f"ping {src} -> {dst}: ok (received=1 hops={hops})")


def route_to(tb, src, dst):
    """`meshctl --json routes` of src: the entry for dst, or None."""
    out = tb.ctl_json(src, "routes")
    if out.returncode != 0:
        raise AssertionError(f"meshctl routes on {src} failed")
    target = tb.nodes()[dst]["id"]
    for route in json.loads(out.stdout).get("routes", []):
        if route.get("destination") == target:
            return route
    return None


def wait_for_route(tb, src, dst, present, timeout):
    """Polls src's routes until dst is (or is no longer) in them; returns the entry."""
    deadline = time.monotonic() + timeout
    while True:
        route = route_to(tb, src, dst)
        if (route is not None) == present:
            return route
        if time.monotonic() > deadline:
            state = "appear" if present else "disappear"
            raise AssertionError(f"the route {src} -> {dst} did not {state} within {timeout} s")
        time.sleep(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["loopback", "netns"])
    p.add_argument("--testbed", required=True)
    p.add_argument("--meshagent", required=True)
    p.add_argument("--meshctl", required=True)
    p.add_argument("--meshsim", required=True)
    p.add_argument("--dir", required=True)
    args = p.parse_args()

    if args.mode == "netns":
        why = netns_unavailable()
        if why:
            print(f"SKIP: {why}", flush=True)
            return SKIP

    directory = args.dir
    if len(directory) > MAX_DIR_LEN:
        directory = os.path.join(tempfile.gettempdir(), f"meshtb-{args.mode}-{os.getpid()}")
        log(f"build directory path too long for Unix sockets; using {directory}")

    # ctest ends a test that runs over its TIMEOUT with SIGTERM: still tear down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tb = Testbed(args, directory)
    up = ["up", "--nodes", "5", "--topology", "line", "--meshagent", args.meshagent,
          "--meshctl", args.meshctl, "--meshsim", args.meshsim, "--log-level", "debug"]
    if args.mode == "netns":
        up += ["--netns", "--ns-prefix", "mtt-"]
    else:
        up += ["--loopback-net", "91"]
    try:
        tb.run(*up)
        tb.run("wait", "--timeout", "30")
        check_ping(tb, "n0", "n1")
        check_ping(tb, "n2", "n1")

        # Multi-hop: TCs take a few TC intervals (5 s) to cross the chain.
        route = wait_for_route(tb, "n0", "n4", True, 40)
        via = tb.nodes()["n1"]["id"]
        if int(route.get("hops", 0)) != 4 or route.get("next_hop") != via:
            raise AssertionError(f"n0's route to n4 is {route}, want 4 hops via n1 ({via})")
        log(f"n0 -> n4: {route}")
        check_ping(tb, "n0", "n4", want_hops=4)
        check_ping(tb, "n4", "n0", want_hops=4)

        # kill -9 the middle: n0 loses n4 within the hold times (NEIGHB_HOLD 6 s,
        # then a TC or HELLO without n2); it comes back once n2 is restarted.
        tb.run("kill", "n2")
        wait_for_route(tb, "n0", "n4", False, 30)
        log("n0 lost its route to n4 after n2 was killed")
        tb.run("start", "n2")
        tb.run("wait", "--timeout", "30")
        wait_for_route(tb, "n0", "n4", True, 40)
        log("n0's route to n4 is back")
        check_ping(tb, "n0", "n4", want_hops=4)
        check_ping(tb, "n1", "n2")
        tb.run("status")
    except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError) as e:
        log(f"FAIL: {e}")
        for name in ("n0", "n1", "n2", "n3", "n4"):
            path = os.path.join(directory, name, "agent.log")
            if os.path.exists(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.readlines()[-15:]
                log(f"last lines of {path}:\n" + "".join(lines))
        return 1
    finally:
        tb.run("down", check=False)
    log(f"PASS ({args.mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
