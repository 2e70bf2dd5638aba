"""A one-node loopback meshagent for the deploy tests (standard library only)."""
import os
import random
import secrets
import shutil
import socket
import subprocess
import time


def free_udp_port_pair(address):
    for _ in range(200):
        port = random.randint(20000, 60000)
        try:
            for p in (port, port + 1):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.bind((address, p))
            return port
        except OSError:
            continue
    raise RuntimeError("no free UDP port pair")


def write_node(directory, key_mode=0o600):
    """Writes agent.toml, mesh.key, topology.txt into a fresh directory; returns the config path."""
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    address = f"127.{random.randint(80, 120)}.{random.randint(1, 250)}.{random.randint(1, 250)}"
    port = free_udp_port_pair(address)
    key = os.path.join(directory, "mesh.key")
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.chmod(key, key_mode)
    with open(os.path.join(directory, "topology.txt"), "w") as f:
        f.write(f"{address} 127.0.0.250\n")
    config = os.path.join(directory, "agent.toml")
    with open(config, "w") as f:
        f.write(
            f'[node]\nname = "deploy-test"\naddress = "{address}"\n'
            f'[link]\nmode = "loopback"\ntopology_file = "topology.txt"\nagent_port = {port}\n'
            f'[security]\nmesh_key_file = "mesh.key"\n'
            f'[admin]\nsocket = "{os.path.join(directory, "admin.sock")}"\n'
            f'[storage]\ndata_dir = "{os.path.join(directory, "data")}"\n'
            f'[mutex]\nexpected_nodes = 1\n'
        )
    return config


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def start(meshagent, config, env=None, log=None):
    return subprocess.Popen([meshagent, "--config", config], stdin=subprocess.DEVNULL,
                            stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
