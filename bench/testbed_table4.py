#!/usr/bin/env python3
"""CoMesh Table 4 on the testbed: k-group quorum, election and state-transfer latencies of real agents.

  bench/testbed_table4.py netns|loopback [--topology grid lshape] [--nodes 16] [--duration 300]
                          [--epoch-s 20] [--targets 6] [--kill-every 30] [--csv out.csv] [--check]

For each topology, scripts/testbed starts N real meshagent processes (netns: one network namespace per
node, veth links; loopback: 127.x addresses) with short epochs (kgroup.epoch_length_s), and then:
  - a client writes to `--targets` device targets in turn with `meshctl kgroup-write` (the first write
    creates each target's group), back to back, for the whole run;
  - every `--kill-every` seconds the leader of one target's group is killed with SIGKILL and started
    again `--down-s` seconds later (so leaders fail, and restarted best-scored members pre-empt);
  - groups migrate to their successors every epoch, each at its own offset.
What is measured comes from the agents' own histograms (`meshctl metrics`, kgroup/replica_metrics.h),
each timed at the one agent where both ends happen:
  quorum write      kgroup_quorum_commit_ms: the leader proposed a client write -> committed at f + 1
  client write      kgroup_client_write_ms: the agent the client asked accepted it -> acknowledged
  election          kgroup_election_ms{trigger=leader_lost}: a member noticed its leader gone (lease
                    ran out, or membership reported it failed) -> it won its term
  failover          kgroup_leader_gap_ms{trigger=leader_lost}: the last append the winner accepted
                    from the lost leader -> it won (the lease it waited out included)
  state transfer    kgroup_state_transfer_ms: a successor member started (the start request the old
                    leader sends once the seal committed arrived) -> as the successor's leader it
                    committed the inherited state at a quorum (the successor's election included)
and, beside them, pre-emption and first elections, the seal's own commit and the state pull alone.
The histograms of every node are merged bucket by bucket (each bucket within about 4 %), less what
they held when the measurement began; a node's histograms are read just before it is killed, since a
restarted agent starts them afresh. One more row is timed from outside: kill -9 of a leader -> another
member reports leading the target (`meshctl kgroups` polled every ~50 ms, so coarse).

Prints a table (count, median, mean, P90 in ms, the paper's numbers beside) and writes it as CSV.
--check exits 1 unless a quorum write, an election after a leader loss and a state transfer were each
measured at least once (the ctest runs that, never a timing).
"""

import argparse
import csv
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "testbed"))
from testbed_test import MAX_DIR_LEN, SKIP, Testbed, log, netns_unavailable, wait_for_members  # noqa: E402

# comesh.md Table 4 (16 Raspberry Pi 4 on Wi-Fi): median, mean, P90 in seconds.
PAPER = {
    "quorum": (1.0805, 1.4021, 1.4962),
    "election": (1.1675, 1.4913, 1.9249),
    "transfer": (2.0750, 2.8468, 3.1390),
}

# (row name, series, paper row or None, measured where).
ROWS = [
    ("quorum write", "kgroup_quorum_commit_ms", "quorum", "leader: proposed -> committed at f+1"),
    ("client write", "kgroup_client_write_ms", None, "client's agent: accepted -> acknowledged"),
    ("election", "kgroup_election_ms{trigger=leader_lost}", "election", "winner: leader lost -> won"),
    ("failover", "kgroup_leader_gap_ms{trigger=leader_lost}", None, "winner: last append -> won"),
    ("election, pre-emption", "kgroup_election_ms{trigger=preempt}", None, "winner: began -> won"),
    ("election, new group", "kgroup_election_ms{trigger=first}", None, "winner: began -> won"),
    ("state transfer", "kgroup_state_transfer_ms", "transfer", "successor leader: started -> inherited"),
    ("state pull", "kgroup_state_pull_ms", None, "successor leader: asked -> inherited"),
    ("seal commit", "kgroup_seal_commit_ms", None, "old leader: proposed -> committed"),
]
OBSERVED_ROW = ("kill -9 -> new leader seen", "observed", None, "this script, polling meshctl kgroups")
REQUIRED = ["kgroup_quorum_commit_ms", "kgroup_election_ms{trigger=leader_lost}", "kgroup_state_transfer_ms"]


def arguments():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["loopback", "netns"])
    p.add_argument("--topology", nargs="+", default=["grid", "lshape"],
                   help="scripts/testbed topologies, one run each (default: grid lshape, as the paper's Fig. 10)")
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--k", type=int, default=3, help="members per k-group (default 3)")
    p.add_argument("--duration", type=float, default=300.0, help="measured seconds per topology (default 300)")
    p.add_argument("--warmup", type=float, default=15.0, help="seconds of writes before measuring (default 15)")
    p.add_argument("--epoch-s", type=int, default=20, help="kgroup.epoch_length_s (default 20)")
    p.add_argument("--targets", type=int, default=6, help="device targets written to (default 6)")
    p.add_argument("--kill-every", type=float, default=30.0, help="seconds between leader kills (default 30)")
    p.add_argument("--down-s", type=float, default=8.0, help="seconds a killed leader stays down (default 8)")
    p.add_argument("--csv", help="write the table here")
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless each of quorum, election and state transfer was measured")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR") or os.path.join(REPO, "build"))
    p.add_argument("--testbed", default=os.path.join(REPO, "scripts", "testbed"))
    p.add_argument("--meshagent")
    p.add_argument("--meshctl")
    p.add_argument("--meshsim")
    p.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "meshtable4"))
    args = p.parse_args()
    args.meshagent = args.meshagent or os.path.join(args.build_dir, "agent", "meshagent")
    args.meshctl = args.meshctl or os.path.join(args.build_dir, "meshctl", "meshctl")
    args.meshsim = args.meshsim or os.path.join(args.build_dir, "sim", "meshsim")
    if len(args.dir) > MAX_DIR_LEN:
        args.dir = os.path.join(tempfile.gettempdir(), f"meshtable4-{args.mode}-{os.getpid()}")
        log(f"--dir too long for Unix socket paths; using {args.dir}")
    return args


# ---------------------------------------------------------------- metrics


def as_int(value):
    try:
        return int(value)  # proto3 JSON writes uint64 as a string
    except (TypeError, ValueError):
        return 0


def parse_metrics(text):
    """`meshctl --json metrics` -> {series: {"count", "sum", "buckets": {value: count}}}; raises on bad input."""
    reply = json.loads(text)
    out = {}
    for h in reply.get("histograms", []):
        series = h["series"]
        count = as_int(h.get("count", 0))
        buckets = {}
        for b in h.get("buckets", []):
            buckets[float(b.get("value", 0.0))] = buckets.get(float(b.get("value", 0.0)), 0) + as_int(b.get("count"))
        if sum(buckets.values()) != count:
            raise ValueError(f"{series}: buckets add up to {sum(buckets.values())}, count is {count}")
        out[series] = {"count": count, "sum": float(h.get("mean", 0.0)) * count, "buckets": buckets}
    return out


def subtract(later, earlier):
    out = {}
    for series, h in later.items():
        before = earlier.get(series, {"count": 0, "sum": 0.0, "buckets": {}})
        buckets = {v: n - before["buckets"].get(v, 0) for v, n in h["buckets"].items()}
        out[series] = {"count": h["count"] - before["count"], "sum": h["sum"] - before["sum"],
                       "buckets": {v: n for v, n in buckets.items() if n > 0}}
    return out


def add_into(total, part):
    for series, h in part.items():
        t = total.setdefault(series, {"count": 0, "sum": 0.0, "buckets": {}})
        t["count"] += h["count"]
        t["sum"] += h["sum"]
        for v, n in h["buckets"].items():
            t["buckets"][v] = t["buckets"].get(v, 0) + n


def quantile(buckets, q):
    count = sum(buckets.values())
    if count == 0:
        return float("nan")
    rank = max(1, math.ceil(q * count))
    seen = 0
    for value in sorted(buckets):
        seen += buckets[value]
        if seen >= rank:
            return value
    return max(buckets)


def stats_of(h):
    if not h or h["count"] <= 0:
        return {"count": 0, "median": float("nan"), "mean": float("nan"), "p90": float("nan")}
    return {"count": h["count"], "median": quantile(h["buckets"], 0.5), "mean": h["sum"] / h["count"],
            "p90": quantile(h["buckets"], 0.9)}


def stats_of_samples(samples):
    if not samples:
        return {"count": 0, "median": float("nan"), "mean": float("nan"), "p90": float("nan")}
    ordered = sorted(samples)
    pick = lambda q: ordered[max(1, math.ceil(q * len(ordered))) - 1]  # noqa: E731
    return {"count": len(ordered), "median": pick(0.5), "mean": sum(ordered) / len(ordered), "p90": pick(0.9)}


class Ledger:
    """Histograms measured since the start, per node, across restarts: each agent incarnation contributes
    its last reading less its first (the first incarnation's first reading is taken when measuring begins;
    a restarted agent starts from empty histograms)."""

    def __init__(self, bench):
        self.bench = bench
        self.done = {}  # node -> histograms of finished incarnations
        self.baseline = {}
        self.last = {}
        self.parse_failures = 0

    def read(self, name):
        out = self.bench.meshctl(name, "metrics", timeout=10)
        if out.returncode != 0:
            return None
        try:
            return parse_metrics(out.stdout)
        except (ValueError, KeyError, json.JSONDecodeError) as e:
            self.parse_failures += 1
            log(f"{name}: metrics do not parse: {e}")
            return None

    def begin(self, name, empty=False):
        self.baseline[name] = {} if empty else (self.read(name) or {})
        self.last[name] = self.baseline[name]

    def update(self, name):
        reading = self.read(name)
        if reading is not None:
            self.last[name] = reading

    def end_incarnation(self, name):
        add_into(self.done.setdefault(name, {}), subtract(self.last.get(name, {}), self.baseline.get(name, {})))
        self.baseline[name] = {}
        self.last[name] = {}

    def merged(self):
        total = {}
        for name in set(self.done) | set(self.last):
            add_into(total, self.done.get(name, {}))
            add_into(total, subtract(self.last.get(name, {}), self.baseline.get(name, {})))
        return total


# ---------------------------------------------------------------- the run


class Bench:
    def __init__(self, args, topology):
        self.args = args
        self.topology = topology
        self.dir = args.dir
        self.tb = Testbed(args, self.dir)
        self.rng = random.Random(args.seed)
        self.down = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.writes_ok = 0
        self.writes_failed = 0
        self.kills = 0
        self.observed = []  # seconds from kill -9 to a new leader seen
        self.targets = [f"device:t4-{i}" for i in range(args.targets)]

    def meshctl(self, name, *cmd, timeout=30):
        node = self.nodes[name]
        argv = [self.args.meshctl, "--socket", node["admin_socket"], "--json", *cmd]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", "timed out")

    def running(self):
        with self.lock:
            return [n for n in self.names if n not in self.down]

    def writer(self):
        i = 0
        while not self.stop.is_set():
            target = self.targets[i % len(self.targets)]
            client = self.rng.choice(self.running())
            out = self.meshctl(client, "kgroup-write", target, f"w{i}", "--timeout", "10", timeout=30)
            if out.returncode == 0:
                self.writes_ok += 1
            else:
                self.writes_failed += 1
            i += 1

    def leaders_of(self, target, names, first=False):
        """{node name: (epoch, generation, term, [member names])} of the nodes leading target's unsealed group
        (with first, only the first one found, asking no further)."""
        by_id = {n["id"]: name for name, n in self.nodes.items()}
        out = {}
        for name in names:
            reply = self.meshctl(name, "kgroups", timeout=10)
            if reply.returncode != 0:
                continue
            for g in json.loads(reply.stdout).get("groups", []):
                if g.get("target") == target and g.get("role") == "leader" and not g.get("sealed", False):
                    members = [by_id.get(m.get("id"), m.get("name", "")) for m in g.get("members", [])]
                    out[name] = (as_int(g.get("epoch")), as_int(g.get("generation")), as_int(g.get("term")), members)
            if first and out:
                return out
        return out

    def kill_a_leader(self, target, ledger):
        leaders = self.leaders_of(target, self.running())
        if not leaders:
            log(f"no leader of {target} found; no kill this round")
            return
        leader = max(leaders, key=lambda n: leaders[n][:3])
        members = [m for m in leaders[leader][3] if m and m != leader]
        ledger.update(leader)
        with self.lock:
            self.down.add(leader)
        killed_at = time.monotonic()
        self.tb.run("kill", leader)
        self.kills += 1
        ledger.end_incarnation(leader)
        # The first other node to report leading the target: a member of the group, or of a successor that
        # took over meanwhile (asked after the members).
        while time.monotonic() - killed_at < 20 and not self.stop.is_set():
            alive = self.running()
            if self.leaders_of(target, [m for m in members if m in alive] + [n for n in alive if n not in members],
                               first=True):
                self.observed.append(time.monotonic() - killed_at)
                log(f"{target}: {leader} killed; a new leader seen after {self.observed[-1] * 1000:.0f} ms")
                break
            time.sleep(0.05)
        else:
            log(f"{target}: no new leader seen within 20 s of killing {leader}")
        time.sleep(max(0.0, self.args.down_s - (time.monotonic() - killed_at)))
        self.tb.run("start", leader)
        ledger.begin(leader, empty=True)
        with self.lock:
            self.down.discard(leader)

    def run(self):
        a = self.args
        up = ["up", "--nodes", str(a.nodes), "--topology", self.topology, "--kgroup-k", str(a.k),
              "--kgroup-epoch-s", str(a.epoch_s), "--meshagent", a.meshagent, "--meshctl", a.meshctl,
              "--meshsim", a.meshsim, "--log-level", "info", "--timeout", "60"]
        up += ["--netns", "--ns-prefix", "mt4-"] if a.mode == "netns" else ["--loopback-net", "94"]
        self.tb.run(*up)
        self.nodes = self.tb.nodes()
        self.names = sorted(self.nodes, key=lambda n: int(n[1:]) if n[1:].isdigit() else n)
        self.tb.run("wait", "--timeout", "90")
        wait_for_members(self.tb, [self.names[0], self.names[-1]], {n: "alive" for n in self.names}, False, 120)
        writer = threading.Thread(target=self.writer, daemon=True)
        writer.start()
        time.sleep(a.warmup)
        ledger = Ledger(self)
        for name in self.names:
            ledger.begin(name)
        log(f"measuring for {a.duration:.0f} s ({self.writes_ok} writes acknowledged in the warm-up)")
        start = time.monotonic()
        next_kill = start + min(a.kill_every, a.duration / 2)
        k = 0
        while time.monotonic() - start < a.duration:
            if time.monotonic() >= next_kill:
                self.kill_a_leader(self.targets[k % len(self.targets)], ledger)
                k += 1
                next_kill += a.kill_every
            time.sleep(0.2)
        self.stop.set()
        writer.join(60)
        for name in self.running():
            ledger.update(name)
        return ledger

    def table(self, ledger):
        merged = ledger.merged()
        rows = []
        for label, series, paper, where in ROWS:
            rows.append((label, series, paper, where, stats_of(merged.get(series))))
        observed = stats_of_samples([s * 1000.0 for s in self.observed])
        rows.append((*OBSERVED_ROW, observed))
        return rows, merged


def fmt(x):
    return "-" if x != x else f"{x:.1f}"  # NaN: nothing measured


def print_table(bench, rows, elapsed):
    a = bench.args
    print(f"\nTable 4 on the testbed: {a.mode}, {a.nodes} agents, {bench.topology}, k = {a.k}, epochs of "
          f"{a.epoch_s} s, {a.targets} targets, {a.duration:.0f} s measured ({elapsed:.0f} s in all); "
          f"{bench.writes_ok} writes acknowledged, {bench.writes_failed} not; {bench.kills} leaders killed")
    head = f"{'operation':<28} {'count':>6} {'median':>8} {'mean':>8} {'p90':>8}   {'paper median/mean/p90':<22} where"
    print(head)
    print("-" * len(head))
    for label, _series, paper, where, st in rows:
        ref = "/".join(f"{v * 1000:.0f}" for v in PAPER[paper]) if paper else ""
        print(f"{label:<28} {st['count']:>6} {fmt(st['median']):>8} {fmt(st['mean']):>8} {fmt(st['p90']):>8}   "
              f"{ref:<22} {where}")
    print("(ms; paper: comesh.md Table 4, 16 Raspberry Pi 4 on Wi-Fi)", flush=True)


def main():
    args = arguments()
    if args.mode == "netns":
        why = netns_unavailable()
        if why:
            print(f"SKIP: {why}", flush=True)
            return SKIP
    all_rows = []
    missing = []
    for topology in args.topology:
        bench = Bench(args, topology)
        began = time.monotonic()
        try:
            ledger = bench.run()
            rows, merged = bench.table(ledger)
        finally:
            bench.stop.set()
            bench.tb.run("down", check=False)
        print_table(bench, rows, time.monotonic() - began)
        for label, series, paper, where, st in rows:
            all_rows.append({"mode": args.mode, "topology": topology, "nodes": args.nodes, "k": args.k,
                             "epoch_s": args.epoch_s, "duration_s": args.duration, "operation": label,
                             "series": series, "where": where, "count": st["count"],
                             "median_ms": round(st["median"], 2), "mean_ms": round(st["mean"], 2),
                             "p90_ms": round(st["p90"], 2),
                             "paper_median_ms": PAPER[paper][0] * 1000 if paper else "",
                             "paper_mean_ms": PAPER[paper][1] * 1000 if paper else "",
                             "paper_p90_ms": PAPER[paper][2] * 1000 if paper else ""})
        if ledger.parse_failures:
            missing.append(f"{topology}: {ledger.parse_failures} metrics readings did not parse")
        for series in REQUIRED:
            if merged.get(series, {}).get("count", 0) <= 0:
                missing.append(f"{topology}: nothing measured for {series}")
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(all_rows[0].keys()))
            w.writeheader()
            w.writerows(all_rows)
        log(f"wrote {args.csv}")
    if args.check:
        if missing:
            for m in missing:
                log(f"FAIL: {m}")
            return 1
        log("PASS: quorum writes, elections after a leader loss and state transfers were all measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
