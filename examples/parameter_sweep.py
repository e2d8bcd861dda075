"""A parameter study: a first-order lag's step response over a Latin-hypercube design of gain
and time constant, with summary metrics per run, written to a resumable results table.

Run: python examples/parameter_sweep.py [--backend serial|process|ray] [--runs 32]
"""

import argparse

from blocks import FirstOrderLag, Step
from cluster.sweep import final, lhs, overshoot, settling_time, sweep
from cosim import Model, SimulationConfig


def lag() -> Model:
    m = Model("lag", parameters={"gain": 1.0, "tau": 0.2})
    m.add(Step("u", step_time=0.1, final=1.0), FirstOrderLag("plant", tau="=tau", gain="=gain"))
    m.connect("u.out", "plant.in")
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="serial")
    ap.add_argument("--runs", type=int, default=32)
    ap.add_argument("--out", default="sweep_results")
    args = ap.parse_args()
    rows = sweep(lag, SimulationConfig(dt=0.01, t_end=3.0, solver="RK4"),
                 lhs({"gain": (0.5, 2.0), "tau": (0.05, 0.5)}, args.runs, seed=1),
                 {"y_end": final("plant.out"), "overshoot": overshoot("plant.out", 1.0),
                  "t_settle": settling_time("plant.out", 1.0, 0.05)},
                 out_dir=args.out, backend=args.backend)
    ok = [r for r in rows if r["status"] == "ok"]
    best = min(ok, key=lambda r: abs(r["y_end"] - 1.0))
    print(f"{len(rows)} runs, {len(ok)} ok; results in {args.out}/results.csv")
    print(f"closest to unit gain: gain={best['gain']:.3f} tau={best['tau']:.3f} "
          f"y_end={best['y_end']:.4f}")


if __name__ == "__main__":
    main()
