#!/usr/bin/env python3
"""meshagent speaks systemd's notify protocol: a datagram socket stands in for
systemd (NOTIFY_SOCKET, WATCHDOG_USEC). Checks READY=1 first, WATCHDOG=1 at
about half the watchdog period, STOPPING=1 on SIGTERM, exit 0; and that a mesh
key readable by others stops the agent before it is READY, with the fix."""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_fixture  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshagent", required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    config = agent_fixture.write_node(args.dir)
    notify_path = os.path.join(args.dir, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify_path)
    sock.settimeout(10)
    watchdog_usec = 600_000
    env = dict(os.environ, NOTIFY_SOCKET=notify_path, WATCHDOG_USEC=str(watchdog_usec))
    env.pop("WATCHDOG_PID", None)
    with open(os.path.join(args.dir, "agent.log"), "w") as log:
        agent = agent_fixture.start(args.meshagent, config, env=env, log=log)
        try:
            first = sock.recv(4096).decode()
            assert first.startswith("READY=1\n") or first == "READY=1", f"first message {first!r}"
            print(f"ok   first notification: {first!r}")
            stamps = []
            while len(stamps) < 4:
                msg = sock.recv(4096).decode()
                assert msg == "WATCHDOG=1", f"unexpected {msg!r}"
                stamps.append(time.monotonic())
            gaps = [b - a for a, b in zip(stamps, stamps[1:])]
            print(f"ok   4 x WATCHDOG=1, gaps {', '.join(f'{g:.2f}' for g in gaps)} s (half period 0.30 s)")
            # Loose bound: pings must come well within the watchdog period.
            assert max(gaps) < watchdog_usec / 1e6, f"a ping gap {max(gaps):.2f} s exceeds the watchdog period"
            agent.send_signal(signal.SIGTERM)
            while True:
                msg = sock.recv(4096).decode()
                if msg != "WATCHDOG=1":
                    break
            assert msg == "STOPPING=1", f"expected STOPPING=1, got {msg!r}"
            print("ok   STOPPING=1 on SIGTERM")
            rc = agent.wait(timeout=10)
            assert rc == 0, f"exit status {rc}"
            print("ok   exit 0")
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()

    # Drain pings sent during the 1 s leave grace after STOPPING=1.
    sock.settimeout(0.1)
    try:
        while True:
            sock.recv(4096)
    except socket.timeout:
        pass

    # A mesh key readable by others: exit 2 before READY, message names the fix.
    bad_dir = args.dir + "-badkey"
    config = agent_fixture.write_node(bad_dir, key_mode=0o644)
    result = subprocess.run([args.meshagent, "--config", config], env=env, capture_output=True, text=True,
                            timeout=20)
    assert result.returncode == 2, f"exit {result.returncode}, stderr {result.stderr!r}"
    assert "refusing to start" in result.stderr and "chmod 600" in result.stderr, result.stderr
    sock.settimeout(0.2)
    try:
        msg = sock.recv(4096).decode()
        raise AssertionError(f"agent with a bad key notified {msg!r}")
    except socket.timeout:
        pass
    print("ok   key mode 0644: exit 2, no READY, message: "
          + result.stderr.strip().splitlines()[-1][:100] + "...")
    print("notify: 5 passed, 0 failed")


if __name__ == "__main__":
    main()
