"""The README's "Serve a unit to another team", followed literally: every command of the
section run in order in a scratch directory (the ``cosim`` of this environment, a real
``cosim serve`` process on loopback), then the results compared with the same model run in
one process. The one change: the server's port, 5555 in the text, is a free port here (other
test sessions may share the machine)."""

from __future__ import annotations

import csv
import os
import re
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cosim import CoSimulation, Model

ROOT = Path(__file__).resolve().parents[2]
SECTION = "### Serve a unit to another team"


def section_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    body = text.split(SECTION, 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", body, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shell(line: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_section_is_what_the_test_follows():
    lines = section_commands()
    assert [line.split()[:2] for line in lines] == [
        ["cosim", "export-unit"], ["cosim", "check"], ["cosim", "keys"], ["cosim", "keys"],
        ["mkdir", "-p"], ["cosim", "serve"], ["cosim", "run"]]


@pytest.mark.cluster
@pytest.mark.slow
def test_serve_a_unit_to_another_team_as_the_readme_says(tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    port = str(free_port())
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    server = None
    outputs = []
    try:
        for line in section_commands():
            line = line.replace("5555", port)
            if line.startswith("cosim serve "):
                server = subprocess.Popen(["bash", "-c", "exec " + line], cwd=tmp_path,
                                          env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)
                ready = server.stdout.readline()
                assert ready.startswith("serving battery on tcp://127.0.0.1:" + port), \
                    ready + server.stderr.read()
                continue
            r = shell(line, tmp_path)
            assert r.returncode == 0, f"{line}\n{r.stderr}"
            outputs.append(r.stdout)
        assert outputs[1].startswith("OK: battery.yaml")                  # cosim check
        run_out = outputs[-1]
        assert "starting the remote backend" in run_out and "saved ev.csv" in run_out

        # Without the client key the server refuses the master, and the error says why.
        refused = shell(f"cosim run examples/electric_vehicle.yaml --t-end 0.1 --unit "
                        f"battery.address=tcp://127.0.0.1:{port}", tmp_path)
        assert refused.returncode == 1
        assert "uses CURVE encryption and this client does not" in refused.stderr
        assert "--server-key SERVER.key --client-key YOURS.key_secret" in refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    assert server.returncode == 0          # stopped by SIGTERM, cleanly

    # The oracle: the same model co-simulated with every unit in this process.
    model = Model.from_yaml(ROOT / "examples" / "electric_vehicle.yaml")
    sim = CoSimulation(model, replace(model.simulation, t_end=5.0))
    logs = sim.run()
    sim.close()
    with open(tmp_path / "ev.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    time = [float(r["time"]) for r in rows]
    assert time == list(logs.time)
    for key in ("battery/soc.out", "battery/v_term.out", "motor/current_.out",
                "vehicle/speed.out"):
        column = [float(r[key]) for r in rows if r[key] != ""]
        assert column == list(logs[key][:, 0]), key


def test_keys_are_a_zmq_pair_and_never_overwritten(tmp_path):
    import zmq.auth
    r = shell("cosim keys team_a", tmp_path)
    assert r.returncode == 0, r.stderr
    public, secret = zmq.auth.load_certificate(str(tmp_path / "team_a.key_secret"))
    assert public == zmq.auth.load_certificate(str(tmp_path / "team_a.key"))[0]
    assert len(secret) == 40
    assert (tmp_path / "team_a.key_secret").stat().st_mode & 0o077 == 0
    again = shell("cosim keys team_a", tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr
