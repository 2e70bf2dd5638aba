#!/usr/bin/env python3
"""`meshctl metrics --prometheus` against a running agent, through the
package's textfile writer (deploy/debian/prometheus-textfile): the file is
replaced atomically (no temporary left behind), parses as the Prometheus text
format (every sample under one HELP/TYPE of its family, counters end in
_total, summaries have _sum and _count), says meshagent_up 1; with the agent
gone it says meshagent_up 0."""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_fixture  # noqa: E402

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? (\S+)$')


def parse(text):
    """Returns {family: type} and the sample names; raises on a malformed line."""
    types, helps, samples = {}, set(), []
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name not in types, f"second TYPE line for {name}"
            assert kind in ("counter", "gauge", "summary", "histogram", "untyped"), line
            types[name] = kind
            current = name
        else:
            m = SAMPLE.match(line)
            assert m, f"malformed sample line {line!r}"
            name = m.group(1)
            float(m.group(5).replace("+Inf", "inf"))
            family = current
            assert family is not None and (name == family or name in (family + "_sum", family + "_count")), \
                f"sample {name} outside its family ({family})"
            samples.append(name)
    assert set(types) == helps, "every family has HELP and TYPE"
    for name, kind in types.items():
        if kind == "counter":
            assert name.endswith("_total"), f"counter {name} without _total"
        if kind == "summary":
            assert name + "_sum" in samples and name + "_count" in samples, f"summary {name} lacks _sum/_count"
    return types, samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshagent", required=True)
    ap.add_argument("--meshctl", required=True)
    ap.add_argument("--writer", required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    config = agent_fixture.write_node(args.dir)
    textfile_dir = os.path.join(args.dir, "textfile")
    os.makedirs(textfile_dir)
    socket_path = os.path.join(args.dir, "admin.sock")
    env = dict(os.environ, MESHCTL=args.meshctl, MESHCTL_SOCKET=socket_path)
    prom = os.path.join(textfile_dir, "meshagent.prom")
    with open(os.path.join(args.dir, "agent.log"), "w") as log:
        agent = agent_fixture.start(args.meshagent, config, log=log)
        try:
            agent_fixture.wait_for(lambda: os.path.exists(socket_path), 20, "the admin socket")
            # Some traffic counted: wait until the agent has sent a few HELLOs.
            def has_counters():
                out = subprocess.run([args.meshctl, "--socket", socket_path, "metrics", "--prometheus"],
                                     capture_output=True, text=True)
                return out.returncode == 0 and "_total" in out.stdout
            agent_fixture.wait_for(has_counters, 20, "counters in meshctl metrics --prometheus")
            subprocess.run([args.writer, textfile_dir], env=env, check=True)
            text = open(prom).read()
            types, samples = parse(text)
            assert "meshagent_up 1" in text.splitlines(), "meshagent_up 1"
            counters = [n for n, k in types.items() if k == "counter"]
            assert counters, "no counter families"
            print(f"ok   {len(types)} families ({len(counters)} counters, "
                  f"{sum(1 for k in types.values() if k == 'summary')} summaries), {len(samples)} samples, up 1")
            assert os.listdir(textfile_dir) == ["meshagent.prom"], os.listdir(textfile_dir)
            assert oct(os.stat(prom).st_mode & 0o777) == "0o644"
            print("ok   written atomically: only meshagent.prom left, mode 0644")
            # meshctl rejects --prometheus on other commands.
            bad = subprocess.run([args.meshctl, "--socket", socket_path, "status", "--prometheus"],
                                 capture_output=True, text=True)
            assert bad.returncode == 2 and "--prometheus applies to metrics only" in bad.stderr, bad.stderr
            print("ok   --prometheus on another command is a usage error")
        finally:
            agent.terminate()
            agent.wait(timeout=10)
    subprocess.run([args.writer, textfile_dir], env=env, check=True, stderr=subprocess.DEVNULL)
    text = open(prom).read()
    parse(text)
    assert "meshagent_up 0" in text.splitlines(), text
    assert os.listdir(textfile_dir) == ["meshagent.prom"]
    print("ok   no agent: meshagent_up 0")
    print("prometheus_textfile: 4 passed, 0 failed")


if __name__ == "__main__":
    main()
