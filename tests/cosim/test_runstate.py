"""The run state: one owner of the values, whichever path (interpreter or generated) runs.

The oracle is the reference interpreter (``fast=False``) of the same model: every value the
generated fast path holds, hands to a unit's master or writes back into the blocks must be
the interpreter's, bit for bit.
"""

import numpy as np
import pytest

from cosim import CoSimulation, CosimConfig, SimulationConfig, Simulator
from cosim.master import protocol as P
from cosim.master.local_unit import LocalUnit
from cosim.model.evaluate import evaluate
from tests.cluster.scenarios import DT, motor_pi


def assert_same_logs(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        np.testing.assert_array_equal(a.time_of(key), b.time_of(key), err_msg=key)


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
def test_units_on_the_fast_path_equal_the_interpreter(scheme):
    logs = {}
    for fast in (True, False):
        sim = CoSimulation(motor_pi(), SimulationConfig(
            dt=DT, t_end=0.3, fast=fast, cosim=CosimConfig(H=DT, scheme=scheme,
                                                           extrapolation=1)))
        logs[fast] = sim.run()
        sim.close()
    assert_same_logs(logs[True], logs[False])


def test_a_unit_steps_without_refreshing_its_blocks_and_reads_the_truth():
    m = motor_pi()
    evaluate(m)
    units = {}
    for fast in (True, False):
        unit = LocalUnit(m["motor"], SimulationConfig(dt=DT, t_end=1.0, solver="RK4", fast=fast))
        unit.initialize(0.0)
        units[fast] = unit
    assert units[True].sim.fast_path is not None and units[False].sim.fast_path is None
    speeds = {True: [], False: []}
    for k in range(50):
        for fast, unit in units.items():
            unit.handle(P.SetInputs({"v": np.array([12.0]), "load": np.array([0.001])}, {}))
            done = unit.handle(P.DoStep(k * DT, DT))
            assert isinstance(done, P.StepDone) and not done.event
            speeds[fast].append(unit.handle(P.GetOutputs()).values["speed"])
    np.testing.assert_array_equal(np.concatenate(speeds[True]), np.concatenate(speeds[False]))
    sim = units[True].sim
    w = sim.plan.blocks[sim.plan.index["w"]]
    # The generated path moved on; the block's dict is refreshed only when blocks are read.
    assert np.array_equal(sim.state.value(w, "out"), speeds[True][-1])
    sim.state.blocks_current()
    assert np.array_equal(w.outputs["out"], speeds[True][-1])


def test_rollback_of_a_fast_unit_replays_bit_for_bit():
    m = motor_pi()
    evaluate(m)
    unit = LocalUnit(m["motor"], SimulationConfig(dt=DT, t_end=1.0, solver="RK4"))
    unit.initialize(0.0)
    inputs = P.SetInputs({"v": np.array([6.0]), "load": np.array([0.0])}, {})

    def steps(k0, n):
        out = []
        for k in range(k0, k0 + n):
            unit.handle(inputs)
            unit.handle(P.DoStep(k * DT, DT))
            out.append(unit.handle(P.GetOutputs()).values["speed"][0])
        return out

    steps(0, 10)
    saved = unit.handle(P.GetState())
    first = steps(10, 20)
    assert unit.handle(P.SetState(saved)) == P.Ok()
    assert steps(10, 20) == first


def test_blocks_show_the_values_after_user_facing_calls():
    fast = Simulator(motor_pi(False), SimulationConfig(dt=DT, t_end=0.05, solver="RK4"))
    ref = Simulator(motor_pi(False), SimulationConfig(dt=DT, t_end=0.05, solver="RK4",
                                                      fast=False))
    assert fast.fast_path is None and ref.fast_path is None      # built at initialize
    for sim in (fast, ref):
        sim.initialize()
        for _ in range(7):
            sim.step()
    assert fast.fast_path is not None
    for b_fast, b_ref in zip(fast.plan.blocks, ref.plan.blocks):
        for port in b_fast.output_names:
            np.testing.assert_array_equal(b_fast.outputs[port], b_ref.outputs[port])
        for name in b_ref.state:
            np.testing.assert_array_equal(b_fast.state[name], b_ref.state[name])


def test_blocks_hold_no_stale_values_while_the_generated_path_runs():
    """Between user-facing calls the generated path's flat values are the truth: the blocks'
    output and input dicts are emptied (no stale copy held) and filled again when read."""
    from dataclasses import replace
    cfg = SimulationConfig(dt=DT, t_end=0.05, solver="RK4")
    fast = Simulator(motor_pi(False), cfg)
    ref = Simulator(motor_pi(False), replace(cfg, fast=False))
    for sim in (fast, ref):
        sim.initialize()
        sim.advance_to(7)
    assert fast.fast_path is not None
    assert all(b.outputs == {} and b.inputs == {} for b, _ in fast.fast_path.flat.signal_slots)
    fast.state.blocks_current()
    for b_fast, b_ref in zip(fast.plan.blocks, ref.plan.blocks):
        for mine, theirs in ((b_fast.outputs, b_ref.outputs), (b_fast.inputs, b_ref.inputs)):
            assert sorted(mine) == sorted(theirs), b_ref.name
            for port in theirs:
                np.testing.assert_array_equal(mine[port], theirs[port], err_msg=b_ref.name)
