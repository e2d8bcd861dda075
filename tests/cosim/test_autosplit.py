"""Automatic partitioning (CosimConfig(partition=k)): balanced parts by the cost model, cuts on
signals after states, and the split run against the model's own monolithic run — bit for bit
where the cuts are discrete delays at the macro step, at first order in H where they carry
continuous states."""

import numpy as np
import pytest

from blocks import FirstOrderLag, Gain, Sine, Sum, UnitDelay
from blocks.continuous import Integrator
from cosim import (CosimConfig, Model, ModelError, SimulationConfig, Simulator, Subsystem)
from cosim.master.autosplit import BALANCE, block_cost, split_model
from cosim.master.cosimulation import CoSimulation
from cosim.model.evaluate import evaluate

DT = 0.01


def delay_chain(n: int) -> Model:
    """A sine through ``n`` blocks: gain, delay, gain, delay, ..."""
    m = Model("chain")
    m.add(Sine("src", amplitude=1.0, frequency=1.0))
    prev = "src.out"
    for i in range(n // 2):
        m.add(Gain(f"g{i}", 1.0 + 1e-4 * (i % 7)), UnitDelay(f"d{i}", sample_time=DT))
        m.connect(prev, f"g{i}.in")
        m.connect(f"g{i}.out", f"d{i}.in")
        prev = f"d{i}.out"
    return m


def lag_chains(chains: int, length: int) -> Model:
    """``chains`` parallel chains of first-order lags (gains between), each in a virtual
    subsystem, all driven by one sine."""
    m = Model("wide")
    m.add(Sine("src", amplitude=1.0, frequency=0.5))
    for c in range(chains):
        s = Subsystem(f"c{c}")
        prev = None
        for i in range(length // 2):
            s.add(Gain(f"k{i}", 1.0), FirstOrderLag(f"lag{i}", tau=0.05 + 0.01 * (c % 5)))
            if prev is not None:
                s.connect(prev, f"k{i}.in")
            s.connect(f"k{i}.out", f"lag{i}.in")
            prev = f"lag{i}.out"
        from cosim import Inport, Outport
        s.add(Inport("u"), Outport("y"))
        s.connect("u.out", "k0.in")
        s.connect(prev, "y.in")
        m.add(s)
        m.connect("src.out", f"c{c}.u")
    return m


def config(T, H=DT, dt=DT, k=None, **kw):
    return SimulationConfig(dt=dt, t_end=T, solver="RK4",
                            cosim=None if k is None else CosimConfig(H=H, partition=k, **kw))


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 4])
def test_ten_thousand_blocks_split_evenly_on_delays_and_equal_the_monolithic_run(k):
    model = delay_chain(10_000)
    evaluate(model)
    split = split_model(model, k, config(0.2))
    share = sum(split.costs) / k
    assert all(abs(c - share) <= BALANCE * share for c in split.costs), split.table()
    assert len(split.cuts) == k - 1 and all(c.startswith("d") and not c.endswith("*")
                                            for c in split.cuts), split.table()
    mono = Simulator(delay_chain(10_000), config(0.2)).run()
    co = CoSimulation(delay_chain(10_000), config(0.2, k=k))
    logs = co.run()
    assert sorted(logs) == sorted(mono)          # the model's own keys
    for key in mono:
        np.testing.assert_array_equal(logs[key], mono[key], err_msg=key)
        np.testing.assert_array_equal(logs.time_of(key), mono.time_of(key), err_msg=key)


def test_a_wide_model_is_cut_through_few_signals_after_states():
    model = lag_chains(40, 50)
    evaluate(model)
    split = split_model(model, 4, config(1.0))
    share = sum(split.costs) / 4
    assert all(abs(c - share) <= BALANCE * share for c in split.costs), split.table()
    # each cut separates at most one chain, after a lag (a state): no feedthrough signal
    assert len(split.cuts) <= 3 and not any(c.endswith("*") for c in split.cuts), split.table()
    assert "part1" in split.table() and "cut signals" in split.table()


def test_continuous_cuts_converge_at_first_order_in_the_macro_step():
    """Cuts after lags hand a continuous state over at macro points (held over the step,
    extrapolation 0): the documented error O(H) against the unsplit run."""
    def err(H):
        mono = Simulator(lag_chains(4, 40), config(1.0, dt=0.0025)).run()
        logs = CoSimulation(lag_chains(4, 40), config(1.0, H=H, dt=0.0025, k=3)).run()
        return max(np.max(np.abs(logs[key][::round(H / 0.0025)] - mono[key][::round(H / 0.0025)]))
                   for key in mono)
    Hs = np.array([0.04, 0.02, 0.01])
    errs = np.array([err(H) for H in Hs])
    assert errs[-1] > 0                               # the cuts are real
    slope = np.polyfit(np.log(Hs), np.log(errs), 1)[0]
    assert 0.8 <= slope <= 1.3, (errs, slope)


def test_hierarchical_paths_keep_their_keys():
    mono = Simulator(lag_chains(3, 6), config(0.3)).run()
    logs = CoSimulation(lag_chains(3, 6), config(0.3, k=2)).run()
    assert sorted(logs) == sorted(mono)
    assert any("/" in key for key in logs)


def test_the_cost_model_counts_states():
    assert block_cost(FirstOrderLag("a")) > block_cost(UnitDelay("d", sample_time=DT)) > \
        block_cost(Gain("g", 1.0))


def test_what_cannot_be_split_is_refused_naming_why():
    with pytest.raises(ModelError, match="partition must be a whole number"):
        CosimConfig(H=DT, partition=0)
    m = delay_chain(6)
    evaluate(m)
    with pytest.raises(ModelError, match="has only 7 blocks"):
        split_model(m, 8, config(0.1))
    m = Model("m")
    sub = Subsystem("plant", atomic=True, dt=DT)
    sub.add(Integrator("x", 1.0))
    m.add(sub, Sum("s", "+"))
    with pytest.raises(ModelError, match="atomic subsystems or unit blocks \\(plant\\)"):
        split_model(m, 2, config(0.1))


@pytest.mark.cluster
def test_a_split_model_runs_on_ray_bit_identically(ray_session):
    local = CoSimulation(delay_chain(400), config(0.2, k=2)).run()
    co = CoSimulation(delay_chain(400), config(0.2, k=2, backend="ray"))
    try:
        logs = co.run()
    finally:
        co.close()
    for key in local:
        np.testing.assert_array_equal(logs[key], local[key], err_msg=key)


def test_cosim_plan_and_run_take_a_partition(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "chain.yaml"
    delay_chain(200).to_yaml(path, simulation=config(0.2))
    plan = subprocess.run([sys.executable, "-m", "cosim.cli", "plan", str(path),
                           "--partition", "2"], capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    assert "part1" in plan.stdout and "part2" in plan.stdout and "cut signals: 1" in \
        plan.stdout, plan.stdout
    out = tmp_path / "res.npz"
    run = subprocess.run([sys.executable, "-m", "cosim.cli", "run", str(path), "--partition",
                          "2", "--out", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    from cosim.run.logs import Logs
    logs, mono = Logs.load(out), Simulator(delay_chain(200), config(0.2)).run()
    assert sorted(logs) == sorted(mono)
    for key in mono:
        np.testing.assert_array_equal(logs[key], mono[key], err_msg=key)


def test_a_log_selection_is_what_the_units_log():
    """`log=` selects the same signals co-simulated as in the monolithic run (each unit logs
    its share, in its own names) — split automatically or by hand."""
    from dataclasses import replace
    from tests.cluster.scenarios import three_units
    pick = ("d3.out", "d90.out")
    logs = CoSimulation(delay_chain(200), replace(config(0.2, k=2), log=pick)).run()
    assert sorted(logs) == sorted(pick)
    mono = Simulator(delay_chain(200), replace(config(0.2), log=pick)).run()
    for key in pick:
        np.testing.assert_array_equal(logs[key], mono[key])
    cfg = SimulationConfig(dt=0.002, t_end=0.1, log=("b.y", "src.out"))
    mono = Simulator(three_units(), cfg).run()
    logs = CoSimulation(three_units(), replace(cfg, cosim=CosimConfig(H=0.002))).run()
    assert sorted(logs) == ["b.y", "src.out"]
    for key in logs:
        np.testing.assert_array_equal(logs[key], mono[key])


def test_a_signal_inside_a_unit_can_be_selected_and_a_wrong_one_is_named():
    from dataclasses import replace

    from cosim.errors import CompileError
    from tests.cluster.scenarios import three_units
    cfg = SimulationConfig(dt=0.002, t_end=0.1, log=("a/x.out", "src.out"),
                           cosim=CosimConfig(H=0.002))
    logs = CoSimulation(three_units(), cfg).run()
    assert sorted(logs) == ["a/x.out", "src.out"]
    with pytest.raises((CompileError, ModelError), match="nope"):
        CoSimulation(three_units(), replace(cfg, log=("a/nope.out",))).run()
