"""FMU units take the fused macro step (``FUSED_STEP``: one message per unit and round, the
engine's rounds and lanes) in every mode it has, bit for bit the separate protocol requests
of ``CosimConfig(engine=False)``: ``STEP_RESET`` (a feedthrough unit stepped and refreshed
with new inputs), refresh-only steps (``h == 0``), ``STEP_REFRESH`` (delayed feedthrough),
``STEP_KEEP`` / ``STEP_ROLLBACK`` (an iterated coupling, rejected adaptive steps, the
started-up first step of extrapolation 2), in process, behind ZeroMQ servers and in Ray
actors. FMUs of both FMI versions, built from ``fmu_sources/c``."""

import contextlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocks import Gain, Sum
from blocks.continuous import Integrator
from blocks.fmu import FmuBlock
from cosim import CoSimulation, CosimConfig, Inport, Model, Outport, SimulationConfig, Subsystem
from cosim.fmi.unit import FmuUnit
from cosim.master import protocol as P
from tests.cluster.fmu_build import build_fmu
from tests.cluster.fmu_specs import FEEDTHROUGH, LAG, VANDERPOL

H = 0.02
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["2.0", "3.0"])
def fmus(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"fused{request.param[0]}")
    return {s.name: str(build_fmu(s, request.param, d / s.name))
            for s in (FEEDTHROUGH, LAG, VANDERPOL)}


def chain(fmus, step=H) -> Model:
    """vdp.x0 -> ft1 -> ft2 -> lag: two feedthrough units refreshed one after the other
    (FMUs stepped at ``step``)."""
    m = Model("chain")
    m.add(FmuBlock("vdp", fmus["VanDerPol"], step), FmuBlock("ft1", fmus["Feedthrough"], step),
          FmuBlock("ft2", fmus["Feedthrough"], step), FmuBlock("lag", fmus["Lag"], step))
    m.connect("vdp.x0", "ft1.u")
    m.connect("ft1.y", "ft2.u")
    m.connect("ft2.y", "lag.u")
    return m


def loop(fmus) -> Model:
    """An algebraic loop of an FMU and a continuous local unit: u = z + 0.5 * fb.y with
    z' = lag.x - z, fb.y = u (the fixed point y = 2 * z), iterated with rollbacks on both
    sides (a continuous coupling: outputs held over a step would take separate requests)."""
    m = chain(fmus)
    mix = Subsystem("mix", atomic=True, dt=H, solver="RK4")
    mix.add(Inport("x"), Inport("y"), Sum("dz", "+-"), Integrator("z", 1.0),
            Gain("half", 0.5), Sum("s", "++"), Outport("u"))
    mix.connect("x.out", "dz.in1")
    mix.connect("z.out", "dz.in2")
    mix.connect("dz.out", "z.in")
    mix.connect("y.out", "half.in")
    mix.connect("z.out", "s.in1")
    mix.connect("half.out", "s.in2")
    mix.connect("s.out", "u.in")
    fb = FmuBlock("fb", fmus["Feedthrough"], H)
    m.add(mix, fb)
    m.connect("lag.x", "mix.x")
    m.connect("fb.y", "mix.y")
    m.connect("mix.u", "fb.u")
    return m


#: name -> (model, CosimConfig options): each takes the fused step in other modes.
CASES = {
    "resolve": (chain, {}),
    "delay": (chain, {"feedthrough": "delay"}),
    "gauss-seidel": (chain, {"scheme": "gauss-seidel", "extrapolation": 1}),
    "extrapolation 2": (chain, {"extrapolation": 2}),
    # (Steps of H/4 to 2H, some rejected and retried from the state kept on the unit.)
    "adaptive": (lambda fmus: chain(fmus, H / 4),
                 {"adaptive": True, "rtol": 1e-4, "atol": 1e-6, "H_min": H / 4,
                  "H_max": 2 * H}),
    "iterated": (loop, {"iterate": True, "tolerance": 1e-12, "max_iterations": 50}),
}


#: Remote cases: Gauss–Seidel sends a feedthrough unit's step and refresh in one message
#: (STEP_RESET).
REMOTE = ["resolve", "delay", "gauss-seidel", "iterated", "adaptive"]


def run(fmus, case, backend, engine, address=None):
    """Logs, step records and fused units of ``case``; ``address``: the FMU units served
    there (``cosim serve``), the other units on ``backend``."""
    make, opts = CASES[case]
    model = make(fmus)
    units = {b.name: {"address": address} for b in model.blocks
             if isinstance(b, FmuBlock)} if address else {}
    cfg = CosimConfig(H=H, engine=engine, compiled=False, backend=backend, units=units,
                      **opts)
    sim = CoSimulation(model, SimulationConfig(dt=H / 4, t_end=0.6, cosim=cfg))
    try:
        logs = sim.run()
        fused = None if sim.master.engine is None else set(sim.master.engine.fusable)
        return logs, sim.master.step_log, fused
    finally:
        sim.close()


@contextlib.contextmanager
def served(model, tmp_path):
    """The FMU blocks of ``model`` as units behind one ``cosim serve``; yields its
    address."""
    unit_file = tmp_path / "fmus.yaml"
    m = Model("served")
    m.add(*[b for b in model.blocks if isinstance(b, FmuBlock)])
    m.to_yaml(unit_file, simulation=SimulationConfig(dt=H / 4, t_end=0.0))
    server = subprocess.Popen([sys.executable, "-m", "cosim.cli", "serve", str(unit_file),
                               "--bind", "tcp://127.0.0.1:0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        yield server.stdout.readline().strip().rsplit(" on ", 1)[1]
    finally:
        server.terminate()
        server.wait(timeout=30)


def same(a, b):
    assert set(a) == set(b) and len(a) >= 4
    for key in a:
        np.testing.assert_array_equal(a.time_of(key), b.time_of(key), err_msg=key)
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("case", list(CASES))
def test_fused_steps_of_fmu_units_are_the_separate_requests_in_process(fmus, case):
    ref, ref_steps, _ = run(fmus, case, "local", False)
    logs, steps, fused = run(fmus, case, "local", True)
    assert {"vdp", "ft1", "ft2", "lag"} <= fused
    same(ref, logs)
    assert [(r.t, r.H, r.status) for r in steps] == [(r.t, r.H, r.status) for r in ref_steps]


@pytest.mark.cluster
@pytest.mark.parametrize("case", REMOTE)
def test_fused_steps_of_fmu_units_are_the_separate_requests_behind_a_server(fmus, case,
                                                                            tmp_path):
    ref, _, _ = run(fmus, case, "local", False)
    with served(CASES[case][0](fmus), tmp_path) as address:
        logs, _, fused = run(fmus, case, "zmq", True, address)
    assert {"vdp", "ft1", "ft2", "lag"} <= fused
    same(ref, logs)


@pytest.mark.cluster
@pytest.mark.parametrize("case", REMOTE)
def test_fused_steps_of_fmu_units_are_the_separate_requests_in_ray_actors(ray_session, fmus,
                                                                          case):
    ref, _, _ = run(fmus, case, "local", False)
    logs, _, fused = run(fmus, case, "ray", True)
    assert {"vdp", "ft1", "ft2", "lag"} <= fused
    same(ref, logs)


def test_an_fmu_unit_with_numeric_ports_serves_the_fused_step(fmus):
    u = FmuUnit(fmus["Feedthrough"], "ft", step=H)
    u.initialize(0.0)
    try:
        assert P.FUSED_STEP in u.describe().capabilities
        kept = u.handle(P.Step(("u",), (0,), P.STEP_KEEP | P.STEP_RESET, 0.0, H,
                               np.array([1.0, 3.0])))
        assert isinstance(kept, P.Stepped), kept
        # The step's outputs (u = 1 held), then the refresh's for u = 3 at t = H.
        np.testing.assert_array_equal(kept.outputs, [1.0, 3.0])
        again = u.handle(P.Step(("u",), (0,), P.STEP_ROLLBACK, 0.0, H, np.array([2.0])))
        assert again.t_reached == H and list(again.outputs) == [2.0]
        refresh = u.handle(P.Step(("u",), (0,), P.STEP_REFRESH, H, 0.0, np.array([5.0])))
        assert refresh.t_reached == H and list(refresh.outputs) == [5.0]
    finally:
        u.terminate()
