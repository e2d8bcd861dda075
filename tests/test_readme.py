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


def test_two_commands_and_ci_runs_the_readme_test_command():
    install_and_run, test_cmd = quickstart_commands()
    assert install_and_run.startswith('pip install -e ".[test]" && ')
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]"' in ci
    assert test_cmd in ci.splitlines()


def test_main_example_runs_as_written(tmp_path):
    install_and_run, _ = quickstart_commands()
    run = install_and_run.split(" && ", 1)[1]
    assert run.startswith("python ")
    out = subprocess.run([sys.executable, *run.split()[1:]], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "saved" in out.stdout
