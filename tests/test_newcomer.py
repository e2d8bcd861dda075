"""A newcomer's first hour, as a test: clone this repository (``git clone`` of its path, at
the commit under test), make a fresh virtual environment with the interpreter running the
tests, run the README's first command exactly as written from the clone's root, then a
handful of the README's other commands as written there, and check what they print and write.
Afterwards ``git status`` of the clone is clean: every output is ignored, and no key file is
in the tree (``cosim keys`` writes to the user's configuration directory, here a scratch one).

A missing install step, an unignored output or a stale README fails it. It needs git, a
commit to clone and an interpreter that makes virtual environments (skipped, with the reason
printed, where one is missing); the install reaches the package index as the README's first
command does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_readme import quickstart_commands
from tests.test_readme_snippets import snippets

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
#: Examples whose README command (the table's "run" column) the newcomer tries, with a line
#: each must print.
TRIED = {"examples/quickstart.py": r"max \|co-simulated - monolithic\| over the run: ",
         "examples/bouncing_ball.py": r"impact",
         "examples/servo.yaml": r"parameters: kp = 1\.6",
         "examples/linearize.py": r"x = 0\.500000000 m \(F/k = 0\.500000000\)"}


def example_commands() -> dict[str, str]:
    """The README's "run" command of each example in its table, by example."""
    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| [^|]+ \| `([^`]+)` \| `([^`]+)` \|$", text, re.M)
    return dict(rows)


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    """``(clone, run)``: the clone, installed by the README's first command in a fresh
    virtual environment (its result kept as ``run.first``), and ``run(command)`` running a
    shell command from the clone's root in that environment."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed: the newcomer test clones the repository")
    head = subprocess.run([git, "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode != 0:
        pytest.skip(f"{ROOT} is not a git repository with a commit: nothing to clone "
                    f"({head.stderr.strip()})")
    base = tmp_path_factory.mktemp("newcomer")
    clone, venv, home = base / "cosim", base / "venv", base / "config"
    subprocess.run([git, "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True,
                   capture_output=True, timeout=600)
    subprocess.run([git, "-C", str(clone), "checkout", "-q", head.stdout.strip()],
                   check=True, capture_output=True, timeout=600)
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                          text=True, timeout=600)
    if made.returncode != 0:            # e.g. a Debian Python without python3-venv
        pytest.skip(f"{sys.executable} cannot make a virtual environment here: "
                    f"{made.stderr.strip()[-500:]}")
    # Nothing of this session's environment leaks in: no PYTHONPATH to this checkout, no
    # virtual environment, no key directory; the user's configuration is a scratch one.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "COSIM_KEY_DIR",
                        "PYTHONDONTWRITEBYTECODE")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
               XDG_CONFIG_HOME=str(home), RAY_USAGE_STATS_ENABLED="0", MPLBACKEND="Agg")

    def run(command: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=timeout)
    first, _ = quickstart_commands()
    run.first = run(first, timeout=3600)
    run.home = home
    return clone, run


def test_the_first_command_installs_and_runs_the_main_example(newcomer):
    clone, run = newcomer
    first = run.first
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "units: battery, control, cycle, motor, vehicle" in first.stdout
    picture = quickstart_commands()[0].split()[-1]
    assert (clone / picture).stat().st_size > 50_000
    # The environment is the clone's: cosim is imported from it.
    where = run("python -c 'import cosim, sys; print(cosim.__file__, sys.prefix)'")
    assert where.stdout.split()[0] == str(clone / "cosim" / "__init__.py"), where.stdout


@pytest.mark.parametrize("example", sorted(TRIED))
def test_an_examples_command_runs_as_the_readme_shows(newcomer, example):
    _, run = newcomer
    assert run.first.returncode == 0, "the first command failed"
    command = example_commands()[example]
    r = run(command)
    assert r.returncode == 0, f"{command}\n{r.stderr}"
    assert re.search(TRIED[example], r.stdout), f"{command}\n{r.stdout}"


def test_the_tour_builds_and_simulates_at_the_root(newcomer):
    clone, run = newcomer
    assert run.first.returncode == 0, "the first command failed"
    heading, code = snippets("python")[0]
    assert heading == "### Build and simulate"
    r = run(f"python - <<'EOF'\n{code}\nEOF")
    assert r.returncode == 0, r.stderr
    assert "src" in r.stdout and "g" in r.stdout, r.stdout        # the plan's table
    for written in re.findall(r'"(\w+\.(?:csv|png))"', code):
        assert (clone / written).stat().st_size > 0, written


def test_plan_and_the_first_steps_of_serving_a_unit(newcomer):
    clone, run = newcomer
    assert run.first.returncode == 0, "the first command failed"
    plan = run("cosim plan examples/electric_vehicle.yaml")
    assert plan.returncode == 0, plan.stderr
    solver = {line.split()[1]: line.split()[4] for line in plan.stdout.splitlines()
              if re.match(r"^\d+\s", line)}
    assert solver == {"cycle": "discrete", "control": "discrete", "motor": "RK4",
                      "battery": "RK4", "vehicle": "RK4"}, plan.stdout
    text = (ROOT / "README.md").read_text()
    section = text.split("### Serve a unit to another team", 1)[1]
    battery_team = re.findall(r"```bash\n(.*?)```", section, re.S)[0].split("\n")
    for command in filter(None, battery_team):
        r = run(command)
        assert r.returncode == 0, f"{command}\n{r.stderr}"
    keys = run.home / "cosim" / "keys"
    assert (keys / "battery_server.key_secret").stat().st_mode & 0o777 == 0o600
    assert not list(clone.rglob("*.key*"))


def test_git_status_is_clean_after_the_walkthrough(newcomer):
    clone, run = newcomer
    # After the other tests of this module (pytest runs them in file order).
    assert run.first.returncode == 0, "the first command failed"
    status = run("git status --porcelain --untracked-files=all")
    assert status.returncode == 0, status.stderr
    assert status.stdout == "", f"left in the work tree, not ignored:\n{status.stdout}"
    ignored = run("git status --porcelain --ignored").stdout
    assert "electric_vehicle.png" in ignored            # written, and ignored
