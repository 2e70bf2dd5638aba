#!/usr/bin/env python3
"""A mixed mesh: agents n0 and n2 with a plain OLSR router n1 between them.

  mixed_mesh_testbed_test.py netns --testbed PATH --meshagent PATH --meshctl PATH
                             --meshsim PATH --dir DIR

n0 - n1 - n2 in network namespaces, kernel routes installed, n1 started with
routing.routing_only = true: it speaks OLSR and forwards IP but binds no agent
port and relays no agent message, as a stock olsrd would. Checks that n0 and
n2 learn each other as agents (agent-presence messages relayed by n1's OLSR),
that Medley on each lists the other alive and never lists n1, that an echo
request from n0 reaches n2 and comes back over 2 hops, and that n0 sent end
to end (transport_routed_sent_total). Without end-to-end delivery none of
this happens: n1 drops every agent message.

netns only: a loopback mesh has no kernel routes to send across. Without
root and working network namespaces it prints why and exits 77 (skipped).
"""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testbed_test import SKIP, Testbed, check_ping, log, log_agent_tails, testbed_arguments  # noqa: E402
from testbed_test import wait_for_members, wait_for_route  # noqa: E402


def counter_total(tb, name, series):
    """The sum of every sample of counter `series` in `meshctl metrics --json` of name."""
    out = tb.ctl_json(name, "metrics")
    if out.returncode != 0:
        raise AssertionError(f"meshctl metrics on {name} failed")
    total = 0
    for counter in json.loads(out.stdout).get("counters", []):
        if counter.get("name") == series:
            total += int(counter.get("value", 0))
    return total


def main():
    args, directory = testbed_arguments("meshmx")
    if args is None:
        return SKIP
    if args.mode != "netns":
        print("SKIP: a mixed mesh needs kernel routes, so network namespaces (netns mode)", flush=True)
        return SKIP

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tb = Testbed(args, directory)
    up = ["up", "--nodes", "3", "--topology", "line", "--meshagent", args.meshagent, "--meshctl", args.meshctl,
          "--meshsim", args.meshsim, "--log-level", "debug", "--netns", "--ns-prefix", "mtx-", "--kernel-routes",
          "--routing-only", "n1"]
    try:
        tb.run(*up)
        wait_for_route(tb, "n0", "n2", True, 30)
        wait_for_route(tb, "n2", "n0", True, 30)
        # Each lists the other alive; n1, never an agent, is in neither list.
        wait_for_members(tb, ["n0", "n2"], {"n0": "alive", "n2": "alive"}, False, 40)
        for name in ("n0", "n2"):
            out = tb.ctl_json(name, "members", "--all")
            listed = {m.get("name", "") for m in json.loads(out.stdout).get("members", [])}
            if "n1" in listed:
                raise AssertionError(f"{name}'s members list the plain router n1: {listed}")
        check_ping(tb, "n0", "n2", want_hops=2)
        check_ping(tb, "n2", "n0", want_hops=2)
        routed = counter_total(tb, "n0", "transport_routed_sent_total")
        if routed == 0:
            raise AssertionError("n0 reached n2 without a single end-to-end send")
        forwarded = counter_total(tb, "n1", "transport_forwarded_total")
        if forwarded != 0:
            raise AssertionError(f"the plain router n1 forwarded {forwarded} agent messages")
        log(f"n0 sent {routed} messages end to end; n1 forwarded none")
        tb.run("status")
    except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError) as e:
        log(f"FAIL: {e}")
        log_agent_tails(directory, ["n0", "n1", "n2"], "", 20)
        return 1
    finally:
        tb.run("down", check=False)
    log("PASS (netns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
