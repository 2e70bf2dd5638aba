#!/usr/bin/env python3
"""Rotating the mesh key of a live mesh without splitting it: three agents n0 - n1 - n2, loopback mode.

  key_rotation_testbed_test.py loopback --testbed PATH --meshagent PATH --meshctl PATH
                               --meshsim PATH --dir DIR [--one-pass]

The procedure of deploy/README.md ("Rotating the mesh key"), one node at a time, each restarted
(SIGTERM, then started again with its edited agent.toml):
  pass 1: every node keeps sealing with the old key and also accepts the new one
          (security.accepted_mesh_key_file);
  pass 2: every node seals with the new key and also accepts the old one.
After every restart, once the routes are back, n0 pings n2 across the mesh, and no agent has
refused a single datagram for its tag (auth_dropped_total{reason=bad_tag} stays 0 everywhere):
at no moment could two agents not read each other. At the end every node opens datagrams with
its sealing key (the new one) and auth_opened_total{key="accepted"} shows the old key was in use
during the rotation.

--one-pass skips pass 1 (each node goes straight to sealing with the new key): the check that
shows this test can fail. It must then report bad_tag drops and exits 1.
"""

import json
import os
import re
import secrets
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testbed_test import SKIP, Testbed, check_ping, log, log_agent_tails, testbed_arguments  # noqa: E402
from testbed_test import wait_for_route  # noqa: E402

NAMES = ["n0", "n1", "n2"]


def counter_by_label(tb, name, series, label):
    out = subprocess.run([sys.executable, tb.args.testbed, "ctl", "--dir", tb.dir, name, "--json", "metrics"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"meshctl metrics on {name} failed: {out.stderr.strip()}")
    values = {}
    for c in json.loads(out.stdout).get("counters", []):
        if c.get("name") != series:
            continue
        labels = c.get("labels", {})
        if isinstance(labels, list):
            labels = dict(labels)
        key = labels.get(label)
        values[key] = values.get(key, 0) + int(c.get("value", 0))
    return values


def write_key(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")


def set_keys(config_path, sealing, accepted):
    """Rewrites the [security] key files of one node's agent.toml."""
    with open(config_path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"^accepted_mesh_key_file = .*\n", "", text, flags=re.M)
    line = f"mesh_key_file = {json.dumps(sealing)}\n"
    if accepted:
        line += f"accepted_mesh_key_file = {json.dumps(accepted)}\n"
    text, count = re.subn(r"^mesh_key_file = .*\n", lambda _: line, text, flags=re.M)
    if count != 1:
        raise AssertionError(f"no mesh_key_file line in {config_path}")
    with open(config_path, "w", encoding="utf-8") as f:
        f.write(text)


def check_mesh(tb, step):
    """Routes back, a ping across, and no datagram refused for its tag on any node."""
    wait_for_route(tb, "n0", "n2", True, 60)
    wait_for_route(tb, "n2", "n0", True, 60)
    check_ping(tb, "n0", "n2", want_hops=2)
    for name in NAMES:
        bad_tag = counter_by_label(tb, name, "auth_dropped_total", "reason").get("bad_tag", 0)
        if bad_tag:
            raise AssertionError(f"after {step}: {name} refused {bad_tag} datagrams for their tag: two agents "
                                 f"could not read each other")
    log(f"after {step}: the mesh pings across, no datagram refused for its tag")


def restart_with(tb, name, sealing, accepted):
    tb.run("stop", name)
    set_keys(tb.nodes()[name]["config"], sealing, accepted)
    tb.run("start", name)


def main():
    one_pass = "--one-pass" in sys.argv
    if one_pass:
        sys.argv.remove("--one-pass")
    args, directory = testbed_arguments("meshrot")
    if args is None:
        return SKIP
    if args.mode != "loopback":
        print("SKIP: the key rotation test runs in loopback mode only", flush=True)
        return SKIP

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tb = Testbed(args, directory)
    up = ["up", "--nodes", "3", "--topology", "line", "--meshagent", args.meshagent, "--meshctl", args.meshctl,
          "--meshsim", args.meshsim, "--loopback-net", "97", "--log-level", "info"]
    try:
        tb.run(*up)
        old_key = os.path.join(directory, "mesh.key")
        new_key = os.path.join(directory, "mesh.key.new")
        write_key(new_key)
        check_mesh(tb, "start")
        if not one_pass:
            for name in NAMES:
                restart_with(tb, name, old_key, new_key)
                check_mesh(tb, f"pass 1 on {name}")
        for name in NAMES:
            restart_with(tb, name, new_key, old_key)
            check_mesh(tb, f"pass 2 on {name}")
        for name in NAMES:
            opened = counter_by_label(tb, name, "auth_opened_total", "key")
            if opened.get("sealing", 0) == 0:
                raise AssertionError(f"{name} opened nothing with its sealing key (the new one): {opened}")
            log(f"{name}: auth_opened_total {opened}")
        # Counters restart with their agent. n0 ran pass 2 first and heard n1 seal with the old key until n1's
        # turn: the accepted key is what kept them talking. n2 ran it last, when nobody sealed with the old
        # key any more: its accepted count is what tells an operator the old key can go.
        if counter_by_label(tb, "n0", "auth_opened_total", "key").get("accepted", 0) == 0:
            raise AssertionError("n0 never opened a datagram with the old (accepted) key during pass 2")
        late = counter_by_label(tb, "n2", "auth_opened_total", "key").get("accepted", 0)
        if late != 0:
            raise AssertionError(f"n2 opened {late} datagrams with the old key after every node had switched")
        log("n0 used the old key while n1 still sealed with it; n2, last, never needed it")
        tb.run("status")
    except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError) as e:
        log(f"FAIL: {e}")
        log_agent_tails(directory, NAMES, "", 10)
        return 1
    finally:
        tb.run("down", check=False)
    log("PASS (loopback)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
