"""The README's "Serve a unit to another team", followed literally: every command of the
section run in order in a scratch directory (the ``cosim`` of this environment, a real
``cosim serve`` process on loopback), then the results compared with the same model run in
one process. The one change: the server's port, 5555 in the text, is a free port here (other
test sessions may share the machine). The key directory is the test's own (``COSIM_KEY_DIR``)."""

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


def environment(cwd: Path, **extra) -> dict:
    """This environment's ``cosim`` first on PATH; keys in ``cwd/keys`` unless told."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
            f"{os.environ['PATH']}", "COSIM_KEY_DIR": str(cwd / "keys"), **extra}


def shell(line: str, cwd: Path, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=environment(cwd, **extra),
                          capture_output=True, text=True, timeout=300)


def test_the_section_is_what_the_test_follows():
    lines = section_commands()
    assert [line.split()[:2] for line in lines] == [
        ["cosim", "export-unit"], ["cosim", "check"], ["cosim", "keys"], ["cosim", "keys"],
        ["cosim", "keys"], ["cosim", "serve"], ["cosim", "run"]]


@pytest.mark.cluster
@pytest.mark.slow
def test_serve_a_unit_to_another_team_as_the_readme_says(tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    port = str(free_port())
    env = environment(tmp_path)
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
        # Nothing secret where the commands ran: the keys are in the key directory.
        assert not list(tmp_path.glob("*.key*")) and not (tmp_path / "authorized").exists()
        secrets = sorted(p.name for p in (tmp_path / "keys").glob("*.key_secret"))
        assert secrets == ["battery_server.key_secret", "ev_master.key_secret"]
        assert all(p.stat().st_mode & 0o077 == 0 for p in (tmp_path / "keys").glob("*_secret"))

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
    keys = tmp_path / "keys"
    public, secret = zmq.auth.load_certificate(str(keys / "team_a.key_secret"))
    assert public == zmq.auth.load_certificate(str(keys / "team_a.key"))[0]
    assert len(secret) == 40
    assert (keys / "team_a.key_secret").stat().st_mode & 0o777 == 0o600
    assert keys.stat().st_mode & 0o077 == 0
    assert not list(tmp_path.glob("team_a*"))             # nothing where the command ran
    again = shell("cosim keys team_a", tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr
    where = shell("cosim keys --where", tmp_path)
    assert where.stdout.strip() == str(keys)


def test_the_default_key_directory_is_in_the_users_config_directory(tmp_path):
    home = tmp_path / "home"
    r = shell("cosim keys team_b && cosim keys --where", tmp_path, COSIM_KEY_DIR="",
              HOME=str(home), XDG_CONFIG_HOME=str(home / "cfg"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == str(home / "cfg" / "cosim" / "keys")
    assert (home / "cfg" / "cosim" / "keys" / "team_b.key_secret").stat().st_mode & 0o777 \
        == 0o600


def test_no_secret_is_written_inside_a_git_work_tree_unless_asked(tmp_path):
    tree = tmp_path / "repo"
    (tree / ".git").mkdir(parents=True)         # what makes a folder a git work tree
    inside = tree / "deploy" / "keys"
    r = shell(f"cosim keys team_c --dir {inside}", tmp_path)
    assert r.returncode == 2
    assert f"inside the git work tree {tree}" in r.stderr and "--in-git" in r.stderr
    assert not inside.exists()
    # Nor through the key directory's variable.
    r = shell("cosim keys team_c", tmp_path, COSIM_KEY_DIR=str(inside))
    assert r.returncode == 2 and not inside.exists()
    asked = shell(f"cosim keys team_c --dir {inside} --in-git", tmp_path)
    assert asked.returncode == 0, asked.stderr
    assert (inside / "team_c.key_secret").stat().st_mode & 0o777 == 0o600


def test_authorize_copies_a_public_key_and_refuses_a_secret(tmp_path):
    made = shell("cosim keys ev_master --dir theirs", tmp_path)
    assert made.returncode == 0, made.stderr
    ok = shell("cosim keys --authorize theirs/ev_master.key", tmp_path)
    assert ok.returncode == 0, ok.stderr
    copied = tmp_path / "keys" / "authorized" / "ev_master.key"
    assert copied.read_bytes() == (tmp_path / "theirs" / "ev_master.key").read_bytes()
    secret = shell("cosim keys --authorize theirs/ev_master.key_secret", tmp_path)
    assert secret.returncode == 2 and "is a secret key" in secret.stderr
    assert not (tmp_path / "keys" / "authorized" / "ev_master.key_secret").exists()
    junk = tmp_path / "junk.key"
    junk.write_text("not a key\n")
    bad = shell(f"cosim keys --authorize {junk}", tmp_path)
    assert bad.returncode == 2 and "not a public key" in bad.stderr
