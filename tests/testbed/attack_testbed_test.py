#!/usr/bin/env python3
"""Attacks and bad input on live agents: three agents n0 - n1 - n2 in loopback mode.

  attack_testbed_test.py loopback --testbed PATH --meshagent PATH --meshctl PATH
                         --meshsim PATH --dir DIR

A loopback agent takes datagrams only from its topology neighbours' addresses,
so the attacker sends from n1's address (any 127.x address can be bound): it
is a radio neighbour of n0 with or without the mesh key. Against n0 it sends

  - datagrams sealed with a wrong key, truncated ones (empty, short of a
    header, cut inside the tag), a wrong format version, oversized ones (65000
    bytes, and 1401 bytes carrying a valid seal), random bytes of every size;
  - datagrams sealed with the testbed's mesh key (the format of
    core/packet_auth.h, built here with hmac/hashlib) from a made-up sender:
    echo requests delivered, replayed, reordered within the replay window and
    older than it;
  - real sealed datagrams of n1, captured by killing n2 and listening on its
    address: n1 keeps sending to n2 (HELLOs, probes, a ping), and each is
    replayed to n0 twice;
  - random, truncated and oversized datagrams to the OLSR port;
  - a flood of forged requests, a flood of validly sealed echo requests from
    a node that does not exist, and validly sealed envelopes with random
    bodies for every layer (bad input from a peer that has the key);

and at n0's admin socket: 60 meshctl at once, a frame of the largest size
(1 MiB of garbage: an error comes back), a frame declaring one byte more (the
agent closes the connection), frames declaring the largest size then closed,
and 150 connections each stalled one byte short of a 1 MiB frame (the agent
serves 64 and refuses the rest).

Then: every agent is still running, n0's counters rose by exactly what was
sent for each drop reason (where loss on loopback cannot blur it; floods are
checked for at least one), n2 restarted rejoins and a ping crosses the mesh,
and n0's peak RSS (VmHWM) stayed within a bound: 64 stalled 1 MiB frames plus
slack, far under what 150 of them (or twice the frame from buffer doubling)
would take. The admin socket is mode 0660.

Loopback only: the netns mode of the other testbed tests would need the
attacker inside a namespace for nothing more to prove.
"""

import hashlib
import hmac
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testbed_test import SKIP, Testbed, check_ping, log, log_agent_tails, testbed_arguments  # noqa: E402
from testbed_test import wait_for_route  # noqa: E402

# core/packet_auth.h
VERSION = 1
HEADER = 13
TAG = 16
REPLAY_WINDOW = 256
# agent/runtime/loopback_link.h: the largest datagram a link carries.
MAX_DATAGRAM = 1400
# proto/frame.h and agent/runtime/admin_server.h
MAX_FRAME = 1 << 20
MAX_ADMIN_CONNECTIONS = 64
STALLED_CONNECTIONS = 150
# What n0 may grow by: 64 partial frames of 1 MiB, the floods' dedupe entries, and slack for the
# allocator. 150 stalled frames alone would take over twice this.
RSS_GROWTH_BOUND_KB = 100 * 1024
# How long counters may take to show datagrams sent to a live agent on loopback.
SETTLE_S = 20

AUTH_REASONS = ("truncated", "bad_version", "bad_tag", "replay", "too_old", "oversized")
OLSR_DECODE_REASONS = ("truncated", "length_mismatch", "no_messages", "bad_message_size", "bad_block")


def ip_value(address):
    return struct.unpack(">I", socket.inet_aton(address))[0]


def seal(key, sender, counter, payload):
    """A datagram as core::PacketAuth::seal makes it."""
    body = bytes([VERSION]) + socket.inet_aton(sender) + counter.to_bytes(8, "big") + payload
    return body + hmac.new(key, body, hashlib.sha256).digest()[:TAG]


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def pb_varint(field, value):
    return varint(field << 3) + varint(value)


def pb_bytes(field, value):
    return varint((field << 3) | 2) + varint(len(value)) + value


def pb_fixed32(field, value):
    return varint((field << 3) | 5) + struct.pack("<I", value)


def envelope(src, dst, msg_id, body_field, body, kind=1):
    """proto/wire.proto's Envelope; kind 1 is REQUEST."""
    return (pb_varint(1, 1) + pb_fixed32(2, ip_value(src)) + pb_fixed32(3, ip_value(dst)) + pb_varint(4, 8) +
            pb_varint(5, kind) + pb_varint(6, msg_id) + pb_bytes(body_field, body))


def echo_request(payload):
    return pb_bytes(1, pb_bytes(1, payload))  # EchoBody { request: EchoRequest { payload } }


class Agent:
    """What the test reads of one running agent."""

    def __init__(self, tb, name):
        self.tb = tb
        self.name = name

    def node(self):
        return self.tb.nodes()[self.name]

    def metrics(self):
        out = subprocess.run([sys.executable, self.tb.args.testbed, "ctl", "--dir", self.tb.dir, self.name, "--json",
                              "metrics"], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise AssertionError(f"meshctl metrics on {self.name} failed: {out.stderr.strip()}")
        return json.loads(out.stdout).get("counters", [])

    def memory_kb(self, field):
        with open(f"/proc/{self.node()['pid']}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise AssertionError(f"no {field} in /proc/{self.node()['pid']}/status")

    def running(self):
        try:
            with open(f"/proc/{self.node()['pid']}/stat", encoding="utf-8") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state not in ("Z", "X")


def counters(samples, name, label=None):
    """{label value: count} of counter `name` (label None: {None: total})."""
    out = {}
    for c in samples:
        if c.get("name") != name:
            continue
        labels = c.get("labels", {})
        if isinstance(labels, list):
            labels = dict(labels)
        key = labels.get(label) if label else None
        out[key] = out.get(key, 0) + int(c.get("value", 0))
    return out


def traffic(samples, layer, type_, direction="received", scope="e2e"):
    total = 0
    for c in samples:
        if c.get("name") != "messages_total":
            continue
        labels = c.get("labels", {})
        if isinstance(labels, list):
            labels = dict(labels)
        if (labels.get("layer"), labels.get("type"), labels.get("direction"), labels.get("scope")) == (
                layer, type_, direction, scope):
            total += int(c.get("value", 0))
    return total


def delta(after, before, keys):
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


class Attacker:
    """UDP sockets bound to a neighbour's address, sending to one agent's two ports."""

    def __init__(self, source, target, agent_port, olsr_port):
        self.target = target
        self.agent_port = agent_port
        self.olsr_port = olsr_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((source, 0))

    def agent(self, datagram, pace=True):
        self.sock.sendto(datagram, (self.target, self.agent_port))
        if pace:
            time.sleep(0.002)  # loopback loses nothing the agent's socket buffer can hold

    def olsr(self, datagram):
        self.sock.sendto(datagram, (self.target, self.olsr_port))
        time.sleep(0.002)

    def close(self):
        self.sock.close()


def wait_for_counts(agent, before, expect, read, what):
    """Polls agent's metrics until read(metrics) - before equals expect for every key."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        now = read(agent.metrics())
        got = delta(now, before, expect.keys())
        if got == expect:
            log(f"{agent.name}: {what} rose by {got}, as sent")
            return now
        if any(got[k] > expect[k] for k in expect) or time.monotonic() > deadline:
            raise AssertionError(f"{agent.name}: {what} rose by {got}, want {expect}")
        time.sleep(0.5)


# ------------------------------------------------------------------ UDP attacks


def expected_auth_reason(datagram):
    if len(datagram) > MAX_DATAGRAM:
        return "oversized"
    if len(datagram) < HEADER + TAG:
        return "truncated"
    if datagram[0] != VERSION:
        return "bad_version"
    return "bad_tag"


def malformed_datagrams(rng, key, n1):
    """Datagrams the agent port must refuse, none of them sealed with the mesh key."""
    wrong_key = bytes(rng.getrandbits(8) for _ in range(32))
    genuine = seal(key, n1, 1, b"x" * 40)
    out = [seal(wrong_key, n1, rng.getrandbits(63), bytes(rng.getrandbits(8) for _ in range(rng.randrange(200))))
           for _ in range(200)]
    out += [b"", genuine[:HEADER - 1], genuine[:HEADER + TAG - 1], genuine[:40]]
    out += [bytes([2]) + genuine[1:] for _ in range(10)]
    out += [bytes([VERSION]) + bytes(rng.getrandbits(8) for _ in range(64999)), bytes(MAX_DATAGRAM + 1)]
    for _ in range(300):
        out.append(bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, MAX_DATAGRAM + 1))))
    return out


def attack_agent_port(rng, agent, attacker, key, n1, fake, n0):
    """Bad datagrams, then sealed ones from the made-up sender `fake`: each drop reason exact."""
    before = agent.metrics()
    auth_before = counters(before, "auth_dropped_total", "reason")
    echo_before = traffic(before, "echo", "request")

    bad = malformed_datagrams(rng, key, n1)
    expect = {reason: 0 for reason in AUTH_REASONS}
    for datagram in bad:
        expect[expected_auth_reason(datagram)] += 1
        attacker.agent(datagram)
    # Validly sealed but larger than any link carries: refused before the HMAC.
    attacker.agent(seal(key, fake, 10, bytes(MAX_DATAGRAM + 1 - HEADER - TAG)))
    attacker.agent(seal(key, fake, 11, bytes(65000 - HEADER - TAG)))
    expect["oversized"] += 2

    # Sealed echo requests from a sender that does not exist: delivered once each, whatever the order
    # within the window; a replay or a counter below the window is refused.
    base = 1_000_000
    first = seal(key, fake, base + 10, envelope(fake, n0, 1, 16, echo_request(b"first")))
    reordered = seal(key, fake, base + 5, envelope(fake, n0, 2, 16, echo_request(b"reordered")))
    too_old = seal(key, fake, base + 10 - REPLAY_WINDOW - 1, envelope(fake, n0, 3, 16, echo_request(b"old")))
    for datagram in (first, reordered, first, reordered, first, too_old):
        attacker.agent(datagram)
    expect["replay"] += 3
    expect["too_old"] += 1

    after = wait_for_counts(agent, auth_before, expect, lambda m: counters(m, "auth_dropped_total", "reason"),
                            "auth_dropped_total by reason")
    echoes = traffic(agent.metrics(), "echo", "request") - echo_before
    if echoes != 2:
        raise AssertionError(f"{agent.name} received {echoes} sealed echo requests, want 2 (first, reordered)")
    log(f"{agent.name} served the two sealed echo requests once each")
    return after


def attack_olsr_port(rng, agent, attacker, captured_hellos):
    before = counters(agent.metrics(), "olsr_dropped_total", "reason")
    datagrams = [b"", b"\x00\x04", bytes(65000)]
    datagrams += [bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 1500))) for _ in range(300)]
    # Real HELLOs cut short: a Packet Length that no longer matches.
    datagrams += [hello[:len(hello) - 4] for hello in captured_hellos[:5]]
    for datagram in datagrams:
        attacker.olsr(datagram)
    deadline = time.monotonic() + SETTLE_S
    while True:
        got = sum(delta(counters(agent.metrics(), "olsr_dropped_total", "reason"), before,
                        OLSR_DECODE_REASONS).values())
        if got == len(datagrams):
            log(f"{agent.name}: olsr_dropped_total rose by {got} for {len(datagrams)} undecodable datagrams")
            return
        if got > len(datagrams) or time.monotonic() > deadline:
            raise AssertionError(f"{agent.name}: olsr decode drops rose by {got}, want {len(datagrams)}")
        time.sleep(0.5)


def flood(rng, agent, attacker, key, n1, fake, n0):
    """Floods: the agent keeps up or drops, never grows without bound; at least some arrive."""
    before = agent.metrics()
    wrong_key = bytes(32)
    for i in range(5000):
        attacker.agent(seal(wrong_key, n1, i, envelope(n1, n0, i, 16, echo_request(b"forged"))), pace=False)
        if i % 200 == 0:
            time.sleep(0.01)
    for i in range(5000):
        attacker.agent(seal(key, fake, 2_000_000 + i, envelope(fake, n0, 1000 + i, 16, echo_request(b"flood"))),
                       pace=False)
        if i % 200 == 0:
            time.sleep(0.01)
    # A peer with the key sending garbage bodies of every layer, as datagrams and as requests.
    for i in range(600):
        body_field = rng.choice((16, 19, 20, 21, 22, 23, 40))
        body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300)))
        kind = rng.choice((0, 1, 2, 3))
        attacker.agent(seal(key, fake, 3_000_000 + i, envelope(fake, n0, 10_000 + i, body_field, body, kind)))
    time.sleep(2)
    after = agent.metrics()
    bad_tag = delta(counters(after, "auth_dropped_total", "reason"), counters(before, "auth_dropped_total", "reason"),
                    ["bad_tag"])["bad_tag"]
    echoes = traffic(after, "echo", "request") - traffic(before, "echo", "request")
    if bad_tag < 1 or bad_tag > 5000:
        raise AssertionError(f"{agent.name}: bad_tag rose by {bad_tag} for 5000 forged requests")
    if echoes < 1:
        raise AssertionError(f"{agent.name}: served none of 5000 sealed echo requests")
    log(f"{agent.name}: flood: {bad_tag} forged requests dropped (bad_tag), {echoes} sealed echo requests served")


def capture_from(tb, agent_port, olsr_port, victim, sender):
    """Kills victim and listens on its address: what sender still sends it (HELLOs on the OLSR port, sealed
    agent datagrams on the agent port, a ping's requests). Returns (agent datagrams, OLSR datagrams)."""
    address = tb.nodes()[victim]["address"]
    tb.run("kill", victim)
    sockets = {}
    deadline = time.monotonic() + 10
    while len(sockets) < 2:
        try:
            for port in (agent_port, olsr_port):
                if port not in sockets:
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    s.bind((address, port))
                    s.settimeout(0.2)
                    sockets[port] = s
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    ping = subprocess.Popen([sys.executable, tb.args.testbed, "ctl", "--dir", tb.dir, sender, "ping", address,
                             "--count", "3", "--interval", "0.3"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    agent_datagrams, olsr_datagrams = [], []
    sender_address = tb.nodes()[sender]["address"]
    end = time.monotonic() + 6
    while time.monotonic() < end:
        for port, s in sockets.items():
            try:
                data, (from_address, _) = s.recvfrom(70000)
            except socket.timeout:
                continue
            if from_address != sender_address:
                continue
            (agent_datagrams if port == agent_port else olsr_datagrams).append(data)
    ping.wait(timeout=30)
    for s in sockets.values():
        s.close()
    log(f"captured {len(agent_datagrams)} sealed datagrams and {len(olsr_datagrams)} OLSR packets "
        f"{sender} sent to the killed {victim}")
    if not agent_datagrams or not olsr_datagrams:
        raise AssertionError(f"captured nothing {sender} sent to {victim}")
    return agent_datagrams, olsr_datagrams


def replay_captured(agent, attacker, captured):
    """Each real datagram twice to another neighbour of its sender: the second copy is always refused (the
    first may be new to it: a seal names its sender, not the hop it was for)."""
    before = counters(agent.metrics(), "auth_dropped_total", "reason")
    for datagram in captured:
        attacker.agent(datagram)
        attacker.agent(datagram)
    deadline = time.monotonic() + SETTLE_S
    while True:
        got = delta(counters(agent.metrics(), "auth_dropped_total", "reason"), before, AUTH_REASONS)
        refused = got["replay"] + got["too_old"]
        others = sum(v for k, v in got.items() if k not in ("replay", "too_old"))
        if others:
            raise AssertionError(f"replayed genuine datagrams were refused for other reasons: {got}")
        if refused >= len(captured):
            log(f"{agent.name}: {len(captured)} captured datagrams replayed twice: {refused} refused "
                f"(replay {got['replay']}, too_old {got['too_old']})")
            if refused > 2 * len(captured):
                raise AssertionError(f"{refused} refusals for {2 * len(captured)} datagrams")
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{agent.name}: only {refused} of {len(captured)} second copies refused")
        time.sleep(0.5)


# ------------------------------------------------------------------ admin socket attacks


def read_frame(sock):
    header = b""
    while len(header) < 4:
        chunk = sock.recv(4 - len(header))
        if not chunk:
            return None
        header += chunk
    length = struct.unpack(">I", header)[0]
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


def closed_by_peer(sock):
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def attack_admin(tb, agent, meshctl):
    path = agent.node()["admin_socket"]
    mode = os.stat(path).st_mode & 0o777
    if mode != 0o660:
        raise AssertionError(f"{path} has mode {mode:o}, want 660 (owner and group only)")
    log(f"{path}: mode {mode:o}")
    before = agent.metrics()

    clients = [subprocess.Popen([meshctl, "--socket", path, "--json", "status"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True) for _ in range(60)]
    failed = [c.communicate(timeout=60)[1] for c in clients if c.wait(timeout=60) != 0]
    if failed:
        raise AssertionError(f"{len(failed)} of 60 concurrent meshctl status failed: {failed[0]}")
    log("60 concurrent meshctl status: all answered")

    # The largest frame, of garbage: an error comes back and the connection stays usable.
    s = connect(path)
    s.sendall(struct.pack(">I", MAX_FRAME) + bytes(MAX_FRAME))
    answer = read_frame(s)
    if answer is None or b"malformed request" not in answer:
        raise AssertionError(f"no error for a {MAX_FRAME}-byte garbage frame: {answer!r}")
    s.close()
    # One byte more: the agent closes the connection.
    s = connect(path)
    s.sendall(struct.pack(">I", MAX_FRAME + 1) + b"x" * 100)
    if not closed_by_peer(s):
        raise AssertionError("a frame declaring more than the limit left the connection open")
    s.close()
    # The largest size declared, then closed half way.
    for _ in range(5):
        s = connect(path)
        s.sendall(struct.pack(">I", MAX_FRAME) + bytes(1000))
        s.close()
    log("largest frame: answered; one byte over: closed; declared then closed: survived")

    # Many connections each one byte short of the largest frame, held open.
    body = struct.pack(">I", MAX_FRAME) + bytes(MAX_FRAME - 1)
    stalled, refused = [], 0
    for _ in range(STALLED_CONNECTIONS):
        s = connect(path)
        try:
            s.sendall(body)
            stalled.append(s)
        except (BrokenPipeError, ConnectionResetError):
            refused += 1
            s.close()
    time.sleep(2)  # for the agent to read what was sent before the peak is read
    peak_kb = agent.memory_kb("VmHWM")
    log(f"{STALLED_CONNECTIONS} stalled 1 MiB frames: {refused} refused while sending, n0 peak RSS {peak_kb} kB")
    for s in stalled:
        s.close()
    time.sleep(1)

    after = agent.metrics()
    refusals = delta(counters(after, "admin_connections_refused_total"),
                     counters(before, "admin_connections_refused_total"), [None])[None]
    frames = delta(counters(after, "admin_frames_dropped_total", "reason"),
                   counters(before, "admin_frames_dropped_total", "reason"), ["oversized", "malformed"])
    if refusals < STALLED_CONNECTIONS - MAX_ADMIN_CONNECTIONS:
        raise AssertionError(f"admin_connections_refused_total rose by {refusals}, want at least "
                             f"{STALLED_CONNECTIONS - MAX_ADMIN_CONNECTIONS}")
    if frames != {"oversized": 1, "malformed": 1}:
        raise AssertionError(f"admin_frames_dropped_total rose by {frames}, want one oversized, one malformed")
    log(f"admin: {refusals} connections refused over the limit, frames dropped {frames}")
    return peak_kb


def main():
    args, directory = testbed_arguments("meshatk")
    if args is None:
        return SKIP
    if args.mode != "loopback":
        print("SKIP: the attack test runs in loopback mode only", flush=True)
        return SKIP

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tb = Testbed(args, directory)
    up = ["up", "--nodes", "3", "--topology", "line", "--meshagent", args.meshagent, "--meshctl", args.meshctl,
          "--meshsim", args.meshsim, "--loopback-net", "96", "--log-level", "info"]
    rng = random.Random(16_5)
    names = ["n0", "n1", "n2"]
    try:
        tb.run(*up)
        with open(os.path.join(directory, "nodes.json"), encoding="utf-8") as f:
            agent_port = json.load(f)["port"]
        olsr_port = agent_port + 1  # scripts/testbed's loopback layout
        with open(os.path.join(directory, "mesh.key"), encoding="utf-8") as f:
            key = bytes.fromhex(f.read().strip())
        nodes = tb.nodes()
        n0, n1 = nodes["n0"]["address"], nodes["n1"]["address"]
        fake = n0.rsplit(".", 1)[0] + ".250"  # in the testbed's net, no node's address
        wait_for_route(tb, "n0", "n2", True, 40)
        wait_for_route(tb, "n2", "n0", True, 40)
        check_ping(tb, "n0", "n2", want_hops=2)

        agents = {name: Agent(tb, name) for name in names}
        started = {name: agents[name].node()["pid"] for name in names}
        target = agents["n0"]
        baseline_kb = target.memory_kb("VmRSS")
        log(f"n0 RSS before the attacks: {baseline_kb} kB")

        captured, hellos = capture_from(tb, agent_port, olsr_port, "n2", "n1")
        attacker = Attacker(n1, n0, agent_port, olsr_port)
        try:
            attack_agent_port(rng, target, attacker, key, n1, fake, n0)
            replay_captured(target, attacker, captured)
            attack_olsr_port(rng, target, attacker, hellos)
            flood(rng, target, attacker, key, n1, fake, n0)
        finally:
            attacker.close()
        peak_kb = attack_admin(tb, target, args.meshctl)

        # n2 was killed on purpose (to capture what n1 sent it); n0 and n1 must be the processes started.
        for name in ("n0", "n1"):
            if agents[name].node()["pid"] != started[name] or not agents[name].running():
                raise AssertionError(f"{name} (pid {started[name]}) is no longer running")
        tb.run("start", "n2")
        if not agents["n2"].running():
            raise AssertionError("n2 did not start again")
        log("every agent is still running")
        wait_for_route(tb, "n0", "n2", True, 60)
        wait_for_route(tb, "n2", "n0", True, 60)
        check_ping(tb, "n0", "n2", want_hops=2)
        check_ping(tb, "n2", "n0", want_hops=2)

        peak_kb = max(peak_kb, target.memory_kb("VmHWM"))
        if peak_kb - baseline_kb > RSS_GROWTH_BOUND_KB:
            raise AssertionError(f"n0's peak RSS {peak_kb} kB grew {peak_kb - baseline_kb} kB over its "
                                 f"{baseline_kb} kB before the attacks; the bound is {RSS_GROWTH_BOUND_KB} kB")
        log(f"n0 peak RSS {peak_kb} kB: {peak_kb - baseline_kb} kB over the start, bound {RSS_GROWTH_BOUND_KB}")
        tb.run("status")
    except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError) as e:
        log(f"FAIL: {e}")
        log_agent_tails(directory, names, "", 20)
        return 1
    finally:
        tb.run("down", check=False)
    log("PASS (loopback)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
