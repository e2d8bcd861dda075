"""A real multi-node Ray cluster on this machine, for tests: ``ray start --head`` and
``ray start --address`` processes, each node its own loopback address, resources, working
directory and Ray temp directory (so no file is shared through a common working directory:
a model file in the driver's directory is not in any node's).

Ray resolves the head's ``127.0.0.1`` to the machine's own address; the other nodes keep
theirs (``127.0.0.2``, ``127.0.0.3``, ...), so every node has a distinct IP. The nodes join
with Ray's token authentication on (``RAY_AUTH_MODE=token`` and the token in
``RAY_AUTH_TOKEN``, as every machine of a real cluster needs it: without it ``ray start
--address`` fails with ``InvalidAuthToken``).

Teardown kills exactly the processes of these nodes (found by their own temp directory in
the command line, with the children of their raylets), never ``ray stop`` (which ends every
Ray on the machine, other users' too).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Node", "RayNodes"]

#: Seconds one ``ray start`` may take on a loaded machine.
START_TIMEOUT = 120.0


@dataclass
class Node:
    """One node: its address, resources and directories (``cwd`` is where its raylet, and so
    its worker processes, run)."""

    ip: str
    resources: dict
    cwd: Path
    temp: Path
    num_cpus: int = 1
    node_id: str | None = None
    pids: list = field(default_factory=list)


def _pids_of(node: Node) -> list[int]:
    """The processes of ``node``: those naming its temp directory, and the children of its
    raylet (its worker processes and agents)."""
    mine, raylets = [], []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(node.temp) + "/" in cmd or cmd.rstrip().endswith(str(node.temp)):
            mine.append(int(entry.name))
            if "/raylet/raylet" in cmd:
                raylets.append(entry.name)
    for raylet in raylets:
        try:
            out = subprocess.run(["pgrep", "-P", raylet], capture_output=True, text=True,
                                 timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        mine += [int(p) for p in out.split()]
    return sorted(set(mine) - {os.getpid()})


class RayNodes:
    """Start a head and ``len(workers)`` worker nodes under ``root``.

    Parameters
    ----------
    root : Path
        Each node gets ``root/<name>`` as its working directory and ``root/t<i>`` as its
        Ray temp directory (kept short: Ray's socket paths are limited to ~100 bytes).
    head : dict
        Custom resources of the head.
    workers : list of dict
        Custom resources of each worker node (addresses 127.0.0.2, 127.0.0.3, ...).
    head_cpus : int
        CPUs of the head (0, as a head that runs no work: pullers and CPU-hungry units go
        to the worker nodes).
    """

    def __init__(self, root: Path, head: dict, workers: list[dict], head_cpus: int = 0):
        self.root = Path(root)
        self.token = secrets.token_hex(32)
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN": self.token}
        self.nodes = [self._node("head", "127.0.0.1", head, 0)]
        self.nodes[0].num_cpus = head_cpus
        self.nodes += [self._node(f"n{i + 2}", f"127.0.0.{i + 2}", res, i + 1)
                       for i, res in enumerate(workers)]
        self.address = None

    def _node(self, name: str, ip: str, resources: dict, i: int) -> Node:
        cwd = self.root / name
        cwd.mkdir(parents=True, exist_ok=True)
        return Node(ip, dict(resources), cwd, self.root / f"t{i}")

    def _start(self, node: Node, *extra: str) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--node-ip-address",
               node.ip, "--num-cpus", str(node.num_cpus), "--resources",
               json.dumps(node.resources), "--temp-dir", str(node.temp),
               "--object-store-memory", str(80 * 1024 * 1024), "--disable-usage-stats",
               *extra]
        return subprocess.Popen(cmd, cwd=node.cwd, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def start(self) -> "RayNodes":
        head = self.nodes[0]
        self._wait(self._start(head, "--head", "--port", "0", "--include-dashboard", "false"),
                   head)
        self.address = (head.temp / "ray_current_cluster").read_text().strip()
        procs = [(n, self._start(n, "--address", self.address)) for n in self.nodes[1:]]
        for node, proc in procs:
            self._wait(proc, node)
        return self

    def revive(self, node: Node) -> None:
        """Start a lost worker node again (same address, resources and directory; a new
        temp directory and node id), and wait until it has joined."""
        import ray
        node.temp = node.temp.with_name(node.temp.name + "r")
        self._wait(self._start(node, "--address", self.address), node)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            ids = [n["NodeID"] for n in ray.nodes()
                   if n["Alive"] and n["NodeManagerAddress"] == node.ip
                   and n["NodeID"] != node.node_id]
            if ids:
                node.node_id = ids[0]
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {node.ip} did not join again")
            time.sleep(0.2)

    def _wait(self, proc: subprocess.Popen, node: Node) -> str:
        try:
            out, _ = proc.communicate(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"ray start of node {node.ip} failed:\n{out[-3000:]}")
        return out

    def connect(self) -> None:
        """Join the cluster from this process (the driver, on the head's machine) with the
        cluster's token, and learn each node's id.

        Ray reads ``RAY_AUTH_MODE`` when it is imported: a process that imported it before
        (the test session) has its configuration and token cache reset, with Ray's own test
        utility, after the variables are set (a driver started with them set needs nothing).
        """
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = self.token
        import ray
        from ray._private.authentication_test_utils import reset_auth_token_state
        reset_auth_token_state()
        ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            alive = {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n["Alive"]}
            if len(alive) >= len(self.nodes):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {sorted(alive)} of the nodes joined")
            time.sleep(0.2)
        head_ip = ray.util.get_node_ip_address()
        for node in self.nodes:
            node.node_id = alive[head_ip if node is self.nodes[0] else node.ip]
            if node is self.nodes[0]:
                node.ip = head_ip

    def by_ip(self, ip: str) -> Node:
        return next(n for n in self.nodes if n.ip == ip)

    def kill(self, node: Node, sig: int = signal.SIGKILL) -> int:
        """End every process of ``node`` (node loss with SIGKILL); the number ended."""
        pids = _pids_of(node)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self) -> None:
        """End every node's processes (TERM, then KILL what is left)."""
        for node in reversed(self.nodes):
            self.kill(node, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_pids_of(n) for n in self.nodes):
            time.sleep(0.2)
        for node in self.nodes:
            self.kill(node, signal.SIGKILL)
