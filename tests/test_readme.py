"""The README's quickstart is followed literally: its commands exist and work."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quickstart_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_two_commands_and_ci_runs_them_in_a_fresh_virtual_environment():
    install_and_run, test_cmd = quickstart_commands()
    assert install_and_run.startswith('pip install -e ".[test]" && ')
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in ci if line and not line.startswith("#")]
    # The README's two commands, last and in order, after a virtual environment made and
    # entered by the script itself (nothing taken from the machine's interpreter).
    assert commands[-2:] == [install_and_run, test_cmd]
    made = next(i for i, line in enumerate(commands) if " -m venv " in line)
    entered = next(i for i, line in enumerate(commands) if line.startswith("source "))
    assert made < entered < len(commands) - 2
    assert any(line.startswith("unset PYTHONPATH") for line in commands)


def test_main_example_runs_as_written(tmp_path):
    install_and_run, _ = quickstart_commands()
    run = install_and_run.split(" && ", 1)[1]
    assert run.startswith("python ")
    args = run.split()[1:]
    png = tmp_path / args[-1]
    args[-1] = str(png)                       # the picture goes to a scratch directory
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "units: battery, control, cycle, motor, vehicle" in out.stdout
    assert png.stat().st_size > 50_000
