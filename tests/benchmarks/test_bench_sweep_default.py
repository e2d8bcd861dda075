"""``cosim sweep`` of 3 runs without options, as a user waits for it (issue 33: at most 2 s;
its default used to start Ray: 7.6 s against 1.4 s serial).

A fresh ``cosim`` process each time, wall time, best of interleaved repeats; in the same run
the references: ``--backend serial`` and ``python -c "import numpy"``; ``--backend ray``
once (it starts a local Ray). The Ray directory is a scratch one, so a Ray that other
sessions run on this machine is not picked up. Printed, not asserted.

Run: ``python -m pytest -m bench -s tests/benchmarks/test_bench_sweep_default.py``
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cosim import SimulationConfig
from tests.cluster import sweep_models as sm

ROOT = Path(__file__).resolve().parents[2]
TARGET = 2.0


def _cosim() -> list[str]:
    script = Path(sys.executable).parent / "cosim"
    return [str(script)] if script.exists() else [shutil.which("cosim") or "cosim"]


def _wall(cmd: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=600)
    return time.perf_counter() - started


@pytest.mark.bench
def test_bench_cosim_sweep_of_three_runs(tmp_path):
    path = tmp_path / "lag.yaml"
    sm.lag().to_yaml(path, simulation=SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    # Short: Ray's socket paths under it must fit AF_UNIX's ~107 characters.
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    n = iter(range(10**6))

    def sweep_cmd(*extra):
        return [*_cosim(), "sweep", str(path), "--out", str(tmp_path / f"s{next(n)}"),
                "--grid", "gain=1,2,3", "--metric", "y=final:plant.out", *extra]
    cases = {"python -c 'import numpy' (reference)": lambda: [sys.executable, "-c",
                                                               "import numpy"],
             "cosim sweep (default: local processes)": lambda: sweep_cmd(),
             "cosim sweep --backend serial (reference)": lambda: sweep_cmd("--backend",
                                                                            "serial")}
    best = {name: float("inf") for name in cases}
    for _ in range(5):
        for name, cmd in cases.items():
            best[name] = min(best[name], _wall(cmd(), env))
    try:
        ray = _wall(sweep_cmd("--backend", "ray"), env)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"\ncosim sweep of 3 runs, best of 5 interleaved (load {load:.1f}; target "
          f"{TARGET} s for the default):")
    for name, t in best.items():
        print(f"  {name:45s} {t:6.2f} s")
    print(f"  {'cosim sweep --backend ray (once)':45s} {ray:6.2f} s")
    default = best["cosim sweep (default: local processes)"]
    print(f"  default / serial = {default / best['cosim sweep --backend serial (reference)']:.2f}"
          f", ray / default = {ray / default:.1f}")
