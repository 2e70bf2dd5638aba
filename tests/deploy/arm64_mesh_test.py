#!/usr/bin/env python3
"""arm64 binaries under qemu-user (ctest arm64_mesh, label arm64, in a build
made with deploy/cmake/aarch64-linux-gnu.cmake, e.g. by scripts/cross-build):
meshagent --version, --check-config on a testbed node's config, then a
3-agent loopback mesh n0-n1-n2 of arm64 agents started by scripts/testbed
--emulator that converges: every agent lists all three alive, n0 routes to n2
over 2 hops via n1, and a ping n0 -> n2 comes back. Exits 77 (skipped) with
the reason when qemu-user is missing."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

SKIP = 77


def log(msg):
    print(f"[arm64_mesh] {msg}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testbed", required=True)
    ap.add_argument("--meshagent", required=True)
    ap.add_argument("--meshctl", required=True)
    ap.add_argument("--emulator", default="")
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    emulator = args.emulator or shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64") or ""
    if not emulator or not shutil.which(emulator.split()[0]):
        print("SKIPPED: qemu-user is not installed (scripts/setup --arm64 installs qemu-user-static)")
        return SKIP
    em = emulator.split()
    version = subprocess.run(em + [args.meshagent, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("meshagent "), version
    arch = subprocess.run(["file", "-b", args.meshagent], capture_output=True, text=True).stdout
    log(f"{version.stdout.strip()} ({arch.split(',')[1].strip() if ',' in arch else arch.strip()}) under {em[0]}")

    tb = [sys.executable, args.testbed]
    common = ["--dir", args.dir]
    bins = ["--meshagent", args.meshagent, "--meshctl", args.meshctl, "--emulator", emulator]
    started = time.monotonic()
    up = subprocess.run(tb + ["up", "--nodes", "3", "--topology", "line", "--timeout", "120"] + common + bins,
                        capture_output=True, text=True)
    print(up.stdout + up.stderr)
    try:
        assert up.returncode == 0, "testbed up failed"
        nodes = {n["name"]: n for n in json.load(open(os.path.join(args.dir, "nodes.json")))["nodes"]}
        check = subprocess.run(em + [args.meshagent, "--check-config", nodes["n0"]["config"]],
                               capture_output=True, text=True, timeout=60)
        assert check.returncode == 0 and ": ok" in check.stdout, check
        log(f"--check-config: {check.stdout.splitlines()[0]}")
        wait = subprocess.run(tb + ["wait", "--timeout", "180"] + common, capture_output=True, text=True)
        assert wait.returncode == 0, f"testbed wait: {wait.stdout}{wait.stderr}"
        log(f"neighbours found after {time.monotonic() - started:.1f} s")

        def ctl(name, *cmd):
            out = subprocess.run(em + [args.meshctl, "--socket", nodes[name]["admin_socket"], "--json"] + list(cmd),
                                 capture_output=True, text=True, timeout=60)
            return json.loads(out.stdout) if out.returncode == 0 else None

        deadline = time.monotonic() + 180
        while True:
            views = {}
            for name in nodes:
                reply = ctl(name, "members") or {}
                views[name] = sorted(m.get("name", "") for m in reply.get("members", []) if m.get("state") == "alive")
            routes = (ctl("n0", "routes") or {}).get("routes", [])
            to_n2 = [r for r in routes if r.get("destination") == nodes["n2"]["id"]]
            converged = all(v == sorted(nodes) for v in views.values()) and to_n2 and to_n2[0].get("hops") == 2
            if converged:
                break
            assert time.monotonic() < deadline, f"no convergence in 180 s: members {views}, n0 routes {routes}"
            time.sleep(2)
        log(f"converged after {time.monotonic() - started:.1f} s: every agent lists {sorted(nodes)} alive; "
            f"n0 -> n2 via {to_n2[0].get('next_hop')} in 2 hops")
        ping = subprocess.run(em + [args.meshctl, "--socket", nodes["n0"]["admin_socket"], "ping",
                                    nodes["n2"]["id"], "--count", "1", "--timeout", "20"],
                              capture_output=True, text=True, timeout=90)
        assert ping.returncode == 0, f"ping n0 -> n2: {ping.stdout}{ping.stderr}"
        log("ping n0 -> n2: " + ping.stdout.strip().splitlines()[0])
        print("arm64_mesh: 4 passed, 0 failed")
        return 0
    finally:
        subprocess.run(tb + ["down"] + common, capture_output=True, text=True)


if __name__ == "__main__":
    sys.exit(main())
