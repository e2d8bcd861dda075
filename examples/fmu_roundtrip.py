"""FMI: export an atomic subsystem as an FMU, run it with fmpy, and import it back as a unit.

Needs pythonfmu and fmpy (pip install "cosim[fmi]").
Run: python examples/fmu_roundtrip.py [--out plant.fmu]
"""

import argparse

import numpy as np

from blocks import Gain, Sine
from blocks.continuous import Integrator
from blocks.fmu import FmuBlock
from cosim.fmi.export import export_fmu
from cosim import CoSimulation, CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem


def build() -> Model:
    m = Model("fmu_demo", parameters={"k": 2.0})
    plant = Subsystem("plant", atomic=True, dt=0.01, solver="RK4")
    plant.add(Inport("u"), Gain("g", "=k"), Integrator("x", 0.0), Outport("y"))
    plant.connect("u.out", "g.in")
    plant.connect("g.out", "x.in")
    plant.connect("x.out", "y.in")
    m.add(plant, Sine("src", frequency=0.5, sample_time=0.05))
    m.connect("src.out", "plant.u")
    return m


def fixed(x: float, digits: int = 6) -> str:
    """``x`` with ``digits`` decimals; a value that rounds to zero shows as 0, never -0."""
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="plant.fmu")
    args = ap.parse_args()
    path = export_fmu(build(), "plant", args.out)
    print(f"exported {path}")
    cfg = SimulationConfig(dt=0.01, t_end=2.0, cosim=CosimConfig(H=0.05))
    native = CoSimulation(build(), cfg).run()
    m = build()
    m.blocks[0] = FmuBlock("plant", str(path), 0.05)      # the FMU in the subsystem's place
    imported = CoSimulation(m, cfg).run()
    t = imported.time_of("plant/fmu.y")
    nat = native["plant/x.out"][np.searchsorted(native.time_of("plant/x.out"), t - 1e-12), 0]
    print(f"native vs FMU unit over {len(t)} macro points: max |diff| = "
          f"{np.max(np.abs(imported['plant/fmu.y'][:, 0] - nat)):.1e}")
    from fmpy import simulate_fmu
    tin = np.arange(0.0, 2.0001, 0.05)
    res = simulate_fmu(str(path), stop_time=2.0, step_size=0.05, output_interval=0.05,
                       input=np.array(list(zip(tin, np.sin(np.pi * tin))),
                                      dtype=[("time", float), ("u", float)]))
    print(f"fmpy simulate_fmu: y(2 s) = {fixed(res['y'][-1])}, native {fixed(nat[-1])}")


if __name__ == "__main__":
    main()
