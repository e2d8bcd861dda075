"""Start-up of the commands that never simulate: ``cosim --help``, ``check`` and ``plan``.

Target (issue 19): each starts and finishes in at most 0.5 s on an idle machine. Measured as a
user waits for them: a fresh ``cosim`` process (the installed console script), wall time,
best of interleaved repeats; the reference in the same run is a bare ``python -c pass`` (the
interpreter's own start) and ``python -c "import numpy"`` (the floor any cosim command pays).
Printed, not asserted (timing assertions do not belong in tests on shared machines).

Run: ``python -m pytest -m bench -s tests/benchmarks/test_bench_startup.py``
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVO = str(ROOT / "examples" / "servo.yaml")
EV = str(ROOT / "examples" / "electric_vehicle.yaml")
TARGET = 0.5


def _cosim() -> list[str]:
    script = Path(sys.executable).parent / "cosim"
    return [str(script)] if script.exists() else [shutil.which("cosim") or "cosim"]


CASES = {
    "python -c pass (reference)": [sys.executable, "-c", "pass"],
    "python -c 'import numpy' (reference)": [sys.executable, "-c", "import numpy"],
    "cosim --help": [*_cosim(), "--help"],
    "cosim check servo.yaml": [*_cosim(), "check", SERVO],
    "cosim plan servo.yaml": [*_cosim(), "plan", SERVO],
    "cosim check electric_vehicle.yaml": [*_cosim(), "check", EV],
    "cosim plan electric_vehicle.yaml": [*_cosim(), "plan", EV],
}


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONDONTWRITEBYTECODE="0"))
    elapsed = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    return elapsed


@pytest.mark.bench
def test_command_start_up(repeat: int = 7):
    for cmd in CASES.values():          # warm the file cache and the bytecode
        _wall(cmd)
    best = {name: float("inf") for name in CASES}
    for _ in range(repeat):             # interleaved: a busy moment hits every case alike
        for name, cmd in CASES.items():
            best[name] = min(best[name], _wall(cmd))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    base = best["python -c pass (reference)"]
    print(f"\nstart-up, best of {repeat} interleaved runs (load average {load:.2f}; "
          f"target <= {TARGET} s on an idle machine)")
    print(f"{'command':<40} {'wall s':>8} {'vs python':>10} {'target':>7}")
    for name, seconds in best.items():
        verdict = "" if "reference" in name else ("ok" if seconds <= TARGET else "OVER")
        print(f"{name:<40} {seconds:8.3f} {seconds / base:9.1f}x {verdict:>7}")
