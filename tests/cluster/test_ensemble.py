"""Ensembles: N runs simulated as one model, each member bit for bit its own run."""

import numpy as np
import pytest

from cluster.ensemble import ensemble_model, member
from cluster.sweep import final, grid, lhs, maximum, sweep
from cluster.sweep_design import runs_of
from cosim import ModelError, SimulationConfig, Simulator

from tests.cluster import sweep_models as sm

CASES = {
    "msd_pid_fast": (sm.msd_pid, SimulationConfig(dt=1e-3, t_end=1.0, solver="RK4"),
                     lhs({"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0)}, 7, seed=2)),
    "msd_pid_interpreter": (sm.msd_pid, SimulationConfig(dt=1e-2, t_end=0.5, solver="RK4",
                                                         fast=False),
                            lhs({"kp": (5.0, 40.0), "kd": (1.0, 10.0)}, 3, seed=4)),
    "multirate_hold": (sm.held, SimulationConfig(dt=0.01, t_end=1.0, solver="SSPRK22"),
                       grid({"gain": [0.5, 2.0], "tau": [0.1, 0.3]})),
}


def own_run(factory, config, params):
    m = factory()
    m.parameters.update(params)
    return Simulator(m, config).run()


@pytest.mark.parametrize("case", list(CASES))
def test_every_member_is_bit_identical_to_its_own_run(case):
    factory, config, points = CASES[case]
    runs = runs_of(points)
    logs = Simulator(ensemble_model(factory, runs), config).run()
    for r in runs:
        mine, alone = member(logs, r), own_run(factory, config, r.params)
        assert sorted(mine) == sorted(alone)
        for key in alone:
            assert np.array_equal(mine[key], alone[key]), (case, r.params, key)
            assert np.array_equal(mine.time_of(key), alone.time_of(key))


#: Models whose scalar fast path an ensemble translates (cosim.fastpath.ensemble_run).
TRANSLATED = {
    "msd_pid": (sm.msd_pid, SimulationConfig(dt=1e-3, t_end=0.5, solver="RK4"),
                lhs({"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0)}, 6, seed=3)),
    "pi_loop": (sm.pi_loop, sm.PI_CONFIG,
                lhs({"kp": (0.5, 4.0), "ki": (0.1, 2.0), "tau": (0.2, 1.0)}, 5, seed=1)),
    "multirate_hold": (sm.held, SimulationConfig(dt=0.01, t_end=1.0, solver="SSPRK22"),
                       grid({"gain": [0.5, 2.0], "tau": [0.1, 0.3]})),
    "step_at_member_times": (sm.timed_step, SimulationConfig(dt=0.01, t_end=0.5,
                                                             solver="RK4"),
                             grid({"t_step": [0.0, 0.105, 0.2], "height": [1.0, 3.5]})),
    "one_member": (sm.lag, sm.CONFIG, [{"gain": 1.5}]),
    # Other tableaux: the stages' combinations (several terms, one stage alone) per solver.
    "msd_friction_ssprk33": (sm.msd_friction, SimulationConfig(dt=1e-3, t_end=0.5,
                                                               solver="SSPRK33"),
                             lhs({"kp": (5.0, 40.0), "mu": (0.5, 3.0)}, 5, seed=6)),
    "msd_friction_euler": (sm.msd_friction, SimulationConfig(dt=1e-3, t_end=0.5,
                                                             solver="Euler"),
                           lhs({"kp": (5.0, 40.0), "mu": (0.5, 3.0)}, 5, seed=7)),
    # Limits, lookups, switching, math per member (issue 36): parameters chosen so that
    # every limit and switch acts in some members and not in others.
    "thermal_zone_saturated": (sm.thermal_zone,
                               SimulationConfig(dt=0.01, t_end=6.0, solver="RK4",
                                                log=["t1.out", "heater.out", "pi.out"]),
                               lhs({"kp": (2.0, 20.0), "ki": (0.5, 5.0), "q_max": (3.0, 10.0),
                                    "r12": (0.3, 1.0), "c1": (0.5, 2.0)}, 12, seed=3)),
    "msd_limits_friction_map": (sm.msd_friction, SimulationConfig(dt=1e-3, t_end=1.5,
                                                                  solver="RK4"),
                                lhs({"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0),
                                     "u_max": (3.0, 10.0), "mu": (0.5, 3.0)}, 12, seed=4)),
    "limits_zoo": (sm.limits_zoo, sm.ZOO_CONFIG,
                   lhs({"amp": (0.2, 2.5), "dz": (0.0, 0.6), "rise": (0.5, 8.0),
                        "hi": (0.1, 1.2), "bp": (0.05, 0.6), "on": (0.05, 0.8)}, 12, seed=5)),
}


def same_bits(a, b) -> bool:
    """Bit for bit (signed zeros and NaN payloads too, which ``array_equal`` does not see)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_members_are_their_own_runs(factory, config, points, label) -> None:
    """Every member of the ensemble of ``points`` (run by ``run_members``) is its own run
    bit for bit: the same signals, values and times."""
    from cosim.fastpath.ensemble_run import run_members
    m = factory()
    m.parameters.update(points[0])
    sim = Simulator(m, config)
    sim.initialize()
    for params, mine in zip(points, run_members(sim, m, points), strict=True):
        alone = own_run(factory, config, params)
        assert sorted(mine) == sorted(alone)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (label, params, key)
            assert np.array_equal(mine.time_of(key), alone.time_of(key))
        assert np.array_equal(mine.time, alone.time)


def test_translated_division_and_abs_are_bit_identical():
    from cosim.fastpath.ensemble_run import run_members
    points = [{"den": 2.0}, {"den": 0.3}, {"den": 7.0}]
    config = SimulationConfig(dt=0.01, t_end=0.3, solver="RK4")
    m = quotient()
    sim = Simulator(m, config)
    sim.initialize()
    for params, mine in zip(points, run_members(sim, m, points), strict=True):
        alone = own_run(quotient, config, params)
        for key in alone:
            assert np.array_equal(mine[key], alone[key]), (params, key)


@pytest.mark.parametrize("case", list(TRANSLATED))
def test_translated_members_are_bit_identical_to_their_own_runs(case):
    factory, config, points = TRANSLATED[case]
    assert_members_are_their_own_runs(factory, config, points, case)


def test_a_translated_ensemble_refuses_a_parameter_that_changes_structure():
    from cosim.fastpath.ensemble_run import run_members
    from cosim.fastpath.runtime import Unsupported
    m = sm.guarded()
    sim = Simulator(m, sm.CONFIG)
    sim.initialize()
    with pytest.raises(Unsupported, match="change the structure of pid"):
        run_members(sim, m, [{}, {"kd": 0.2}])      # kd = 0 has no derivative state


def test_parameters_crossing_zero_share_the_reference_code():
    """A negative value is lifted with its sign in the kernel (``-p__1``): members on both
    sides of zero still run on one translation, each bit for bit its own run."""
    from cosim.fastpath.ensemble_run import run_members
    points = [{"height": 1.0, "t_step": 0.1}, {"height": -3.0, "t_step": 0.2},
              {"height": -0.0, "t_step": 0.05}, {"height": 0.0, "t_step": 0.0}]
    m = sm.timed_step()
    m.parameters.update(points[0])
    sim = Simulator(m, sm.CONFIG)
    sim.initialize()
    for params, mine in zip(points, run_members(sim, m, points), strict=True):
        alone = own_run(sm.timed_step, sm.CONFIG, params)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (params, key)


@pytest.mark.parametrize("backend", ["serial", pytest.param("ray", marks=pytest.mark.cluster)])
def test_sweep_in_ensembles_equals_the_sweep_run_by_run(request, backend, tmp_path):
    if backend == "ray":
        request.getfixturevalue("ray_session")
    points = lhs({"kp": (5.0, 40.0), "ki": (1.0, 20.0), "kd": (1.0, 10.0)}, 10, seed=5)
    config = SimulationConfig(dt=1e-3, t_end=0.5, solver="RK4", log=["x.out"])
    reducers = {"x_end": final("x.out")}
    alone = sweep(sm.msd_pid, config, points, reducers, backend="serial")
    together = sweep(sm.msd_pid, config, points, reducers, backend=backend, ensemble=4,
                     out_dir=tmp_path / "e")
    strip = ("wall_time",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in together] == \
        [{k: v for k, v in r.items() if k not in strip} for r in alone]
    # Each worker translates its chunk of N runs as the serial sweep does.
    assert sorted((e["runs"], e["path"]) for e in together.ensembles) == \
        [([0, 1, 2, 3], "translated"), ([4, 5, 6, 7], "translated"), ([8, 9], "translated")]


def test_a_model_the_translation_does_not_take_runs_as_copies(tmp_path):
    points = lhs({"kp": (5.0, 40.0), "kd": (1.0, 10.0)}, 3, seed=4)
    config = SimulationConfig(dt=1e-2, t_end=0.3, solver="RK4", fast=False)
    reducers = {"x_end": final("x.out")}
    alone = sweep(sm.msd_pid, config, points, reducers, backend="serial")
    together = sweep(sm.msd_pid, config, points, reducers, backend="serial", ensemble=3)
    assert [r["x_end"] for r in together] == [r["x_end"] for r in alone]
    assert [r["status"] for r in together] == ["ok"] * 3


def quotient():
    """A lag's output divided by a step to ``den`` at 0.1 s (a member with ``den = 0``
    divides by zero there), through an absolute value."""
    from blocks import Abs, Product, Step
    m = sm.lag()
    m.parameters["den"] = 1.0
    m.add(Step("d", step_time=0.1, initial=1.0, final="=den"), Product("q", "*/"), Abs("a"))
    m.connect("plant.out", "q.in1")
    m.connect("d.out", "q.in2")
    m.connect("q.out", "a.in")
    return m


def test_a_member_failing_while_it_steps_fails_alone():
    points = [{"den": 2.0}, {"den": 0.0}, {"den": 0.5}]
    config = SimulationConfig(dt=0.01, t_end=0.3, solver="RK4")
    reducers = {"y": final("a.out")}
    alone = sweep(quotient, config, points, reducers, backend="serial")
    together = sweep(quotient, config, points, reducers, backend="serial", ensemble=3)
    assert [r["status"] for r in together] == [r["status"] for r in alone] == \
        ["ok", "failed", "ok"]
    assert [r["y"] for r in together][::2] == [r["y"] for r in alone][::2]


def test_a_failing_member_fails_alone():
    rows = sweep(sm.broken, sm.CONFIG, grid({"gain": [1.0, 2.0, 3.0]}),
                 {"y_end": final("plant.out")}, backend="serial", ensemble=3)
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert np.isfinite(rows[0]["y_end"]) and np.isnan(rows[1]["y_end"])


@pytest.mark.parametrize("factory, config, message", [
    (sm.lag, SimulationConfig(dt=0.01, t_end=1.0, solver="RK45"),
     r"solver 'RK45' is adaptive: one step size would be chosen over all members"),
    (sm.lag, SimulationConfig(dt=0.01, t_end=1.0, solver="BDF"),
     r"solver 'BDF' is (adaptive|implicit)"),
    (sm.watching_signal, sm.CONFIG, r"event 'floor' watches the signal 'x.out' of block x: "
                                    r"an ensemble locates zero crossings of continuous "
                                    r"states per member, not of signals"),
    (sm.cosim_lag, sm.COSIM_CONFIG, r"co-simulations run their own units"),
])
def test_what_an_ensemble_cannot_share_is_refused_before_any_run(tmp_path, factory, config,
                                                                  message):
    with pytest.raises(ModelError, match="sweep\\(ensemble=...\\) refused: " + message):
        sweep(factory, config, grid({"gain": [1.0, 2.0]}), {}, backend="serial", ensemble=2,
              out_dir=tmp_path / "s")
    assert not (tmp_path / "s").exists()


def _all_logged(factory, config):
    """``config`` logging every block output of ``factory``'s model."""
    from dataclasses import replace
    plan = Simulator(factory(), config).plan
    keys = [f"{n}.{p}" for n, b in zip(plan.names, plan.blocks) for p in b.output_names]
    return replace(config, log=keys)


@pytest.mark.parametrize("case", ["thermal_zone_saturated", "msd_limits_friction_map",
                                  "limits_zoo"])
def test_limits_lookups_and_switches_act_and_every_signal_is_bit_identical(case):
    """Every block output of every member against its own run, on models whose limits,
    table segments and switches are active in some members and not in others."""
    from cosim.fastpath.ensemble_run import run_members
    factory, config, points = TRANSLATED[case]
    config = _all_logged(factory, config)
    m = factory()
    m.parameters.update(points[0])
    sim = Simulator(m, config)
    sim.initialize()
    got = run_members(sim, m, points)
    alone = [own_run(factory, config, p) for p in points]
    for params, mine, own in zip(points, got, alone, strict=True):
        assert sorted(mine) == sorted(own)
        for key in own:
            assert same_bits(mine[key], own[key]), (case, params, key)
    # The nonlinearities act: the limits are reached by some members, not by all.
    if case == "thermal_zone_saturated":
        at_max = [np.any(a["heater.out"] == p["q_max"]) for a, p in zip(alone, points)]
        inside = [np.any((a["heater.out"] > 0.0) & (a["heater.out"] < p["q_max"]))
                  for a, p in zip(alone, points)]
        pi_lim = [np.any(a["pi.out"] == 2 * p["q_max"]) for a, p in zip(alone, points)]
        assert all(at_max) and sum(inside) > len(points) // 2
        assert any(pi_lim) and not all(pi_lim)
    elif case == "msd_limits_friction_map":
        limited = [np.mean(np.abs(a["lim.out"]) == p["u_max"]) for a, p in zip(alone, points)]
        assert all(0.0 < f < 1.0 for f in limited)       # each run in and out of the limit
        v = np.concatenate([a["v.out"].ravel() for a in alone])
        assert np.histogram(v, [-1.0, -0.05, -0.01, 0.0, 0.01, 0.05, 1.0])[0].min() > 0
    else:
        for key, acts in (("sat.out", lambda a, p: a[key] == p["hi"]),
                          ("dz.out", lambda a, p: a[key] == 0.0),
                          ("rl.out", lambda a, p: np.abs(np.diff(a[key], axis=0)) >=
                           p["rise"] * 0.01 * (1 - 1e-12)),
                          ("r.out", lambda a, p: a[key] == 1.0),
                          ("mx.out", lambda a, p: a[key] == -0.2),
                          ("map.out", lambda a, p: a["mx.out"] < p["bp"]),
                          ("sw.out", lambda a, p: a[key] == a["g.out"])):
            share = [float(np.mean(acts(a, p))) for a, p in zip(alone, points)]
            # part of the run in some members, and not alike in all
            assert any(0.0 < f < 1.0 for f in share) and len(set(share)) > 1, (key, share)


def test_a_branch_that_raises_is_computed_only_for_the_members_that_take_it():
    """``a / b if b != 0 else 0`` and ``b != 0 and a / b > 0.5``: a member with b = 0 runs
    alone without dividing by zero, so it must in the ensemble too (guarded evaluation, not
    both branches, both operands, for all)."""
    from cosim.fastpath.ensemble_run import run_members
    points = [{"den": 2.0, "kd": 0.0}, {"den": 0.0, "kd": 0.0}, {"den": 0.3, "kd": 0.0}]
    config = _all_logged(sm.guarded, sm.CONFIG)
    m = sm.guarded()
    sim = Simulator(m, config)
    sim.initialize()
    got = run_members(sim, m, points)
    assert {float(v) for g in got for v in g["above.out"].ravel()} == {0.0, 1.0}
    for params, mine in zip(points, got, strict=True):
        alone = own_run(sm.guarded, config, params)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (params, key)


def test_members_of_another_structure_run_as_an_ensemble_of_their_own(tmp_path):
    """``kd = 0`` drops the discrete PID's derivative state: those members form a second
    translated ensemble; every row equals the sweep run by run."""
    points = [{"den": 2.0, "kd": 0.0}, {"den": 1.0, "kd": 0.3}, {"den": -0.5, "kd": 0.0},
              {"den": 0.0, "kd": 0.1}, {"den": 3.0, "kd": 0.0}]
    config = SimulationConfig(dt=0.01, t_end=1.0, solver="RK4", log=["pid.out", "q.out"])
    reducers = {"u": final("pid.out"), "q": final("q.out")}
    alone = sweep(sm.guarded, config, points, reducers, backend="serial")
    together = sweep(sm.guarded, config, points, reducers, backend="serial", ensemble=5)
    assert [(r["u"], r["q"]) for r in together] == [(r["u"], r["q"]) for r in alone]
    assert together.ensembles == [{"runs": [0, 1, 2, 3, 4], "path": "translated",
                                   "reason": ""}]


def test_the_sweep_says_each_ensemble_was_translated(tmp_path, caplog):
    points = lhs({"kp": (2.0, 20.0), "ki": (0.5, 5.0), "q_max": (1.5, 4.0)}, 7, seed=2)
    config = SimulationConfig(dt=0.01, t_end=2.0, solver="RK4", log=["t1.out"])
    rows = sweep(sm.thermal_zone, config, points, {"t": final("t1.out")}, backend="serial",
                 ensemble=3, out_dir=tmp_path / "z")
    assert [e["path"] for e in rows.ensembles] == ["translated"] * 3
    assert [e["runs"] for e in rows.ensembles] == [[0, 1, 2], [3, 4, 5], [6]]
    assert "_ensemble" not in rows[0]
    assert "copies" not in caplog.text
    header = (tmp_path / "z" / "results.csv").read_text().splitlines()[0]
    assert "_ensemble" not in header


def delayed():
    """The lag through a transport delay (a block without a fast-path kernel)."""
    from blocks import TransportDelay
    m = sm.lag()
    m.add(TransportDelay("d", delay=0.05))
    m.connect("plant.out", "d.in")
    return m


def test_copies_are_reported_with_the_block_that_forced_them(caplog):
    points = grid({"gain": [1.0, 2.0, 3.0]})
    alone = sweep(delayed, sm.CONFIG, points, {"y": final("d.out")}, backend="serial")
    rows = sweep(delayed, sm.CONFIG, points, {"y": final("d.out")}, backend="serial",
                 ensemble=3)
    assert [r["y"] for r in rows] == [r["y"] for r in alone]
    (e,) = rows.ensembles
    assert e["path"] == "copies"
    assert e["reason"] == "block d (TransportDelay) has no fast-path kernel"
    assert "ran as copies: block d (TransportDelay) has no fast-path kernel" in caplog.text


def test_cosim_sweep_prints_how_the_ensembles_ran(tmp_path, capsys):
    from cluster.sweep import main
    path = tmp_path / "zone.yaml"
    path.write_text(ZONE_YAML)
    code = main([str(path), "--out", str(tmp_path / "o"), "--backend", "serial",
                 "--sample", "lhs", "4", "--range", "kp=2:20", "--range", "qmax=1.5:4",
                 "--metric", "t_end=final:t1.out", "--ensemble", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ensembles: 2 translated, 0 as copies, 0 one by one" in out


#: A model file of a lag heated through a saturated PI (the CLI test's model).
ZONE_YAML = """
model: zone
parameters: {kp: 8.0, qmax: 3.0}
blocks:
  ref:    {type: Step, params: {step_time: 0.2, initial: 18.0, final: 21.0}}
  e:      {type: Sum, params: {signs: "+-"}}
  pi:     {type: DiscretePID, params: {kp: =kp, ki: 1.0, sample_time: 0.1}}
  heater: {type: Saturation, params: {lower: 0.0, upper: =qmax}}
  t1:     {type: FirstOrderLag, params: {tau: 2.0, gain: 3.0}}
connections:
  - [ref.out, e.in1]
  - [t1.out, e.in2]
  - [e.out, pi.in]
  - [pi.out, heater.in]
  - [heater.out, t1.in]
simulation: {dt: 0.01, t_end: 1.0, solver: RK4}
"""


THERMOSTAT_POINTS = lhs({"t_on": (18.0, 20.0), "t_off": (20.5, 22.0), "ua": (0.1, 0.25),
                         "q": (6.0, 9.0)}, 16, seed=1)


def test_relay_switches_are_located_per_member_as_in_its_own_run():
    """A relay on a continuous state: each member's step that switches is run on its own
    interpreter, the rest vectorised; every signal and every switch time is the member's
    own run's, bit for bit."""
    from dataclasses import replace

    from cosim.fastpath.ensemble_run import run_members
    config = replace(sm.THERMOSTAT_CONFIG, t_end=25.0, log=None)
    config = _all_logged(sm.thermostat, config)
    m = sm.thermostat()
    m.parameters.update(THERMOSTAT_POINTS[0])
    sim = Simulator(m, config)
    sim.initialize()
    switches: list = []
    got = run_members(sim, m, THERMOSTAT_POINTS, switches=switches)
    counts = set()
    for params, mine, located in zip(THERMOSTAT_POINTS, got, switches, strict=True):
        m = sm.thermostat()
        m.parameters.update(params)
        own = Simulator(m, config)
        alone = own.run()
        assert located == own.switch_log and len(located) >= 3, params
        counts.add(len(located))
        for key in alone:
            assert same_bits(mine[key], alone[key]), (params, key)
    assert len(counts) > 1          # members switch at their own times, not together


def test_a_relay_loop_sweeps_in_translated_ensembles():
    points = grid({"gain": [0.6, 1.0, 1.7], "tau": [0.1, 0.25]})
    config = SimulationConfig(dt=0.01, t_end=2.0, solver="RK4", log=["plant.out", "r.out"])
    reducers = {"y": final("plant.out"), "r_peak": maximum("r.out")}
    alone = sweep(sm.relay_loop, config, points, reducers, backend="serial")
    together = sweep(sm.relay_loop, config, points, reducers, backend="serial", ensemble=6)
    assert [(r["y"], r["r_peak"]) for r in together] == [(r["y"], r["r_peak"]) for r in alone]
    assert [e["path"] for e in together.ensembles] == ["translated"]


def test_a_member_that_blows_up_stays_in_the_translated_ensemble():
    """An unstable member overflows to inf and then NaN (inf - inf), as its own run does
    without raising: the other members stay vectorised with it, every value bit for bit."""
    from cosim.fastpath.ensemble_run import run_members
    config = SimulationConfig(dt=1e-2, t_end=1.0, solver="RK4")
    points = [{"kp": 2.0}, {"kp": 1e5}, {"kp": 4.0}]
    m = sm.pi_loop()
    sim = Simulator(m, config)
    sim.initialize()
    got = run_members(sim, m, points)
    assert np.isnan(got[1]["plant.out"][-1, 0]) and np.isfinite(got[0]["plant.out"][-1, 0])
    for params, mine in zip(points, got):
        alone = own_run(sm.pi_loop, config, params)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (params, key)
    rows = sweep(sm.pi_loop, config, points, {"y": final("plant.out")}, backend="serial",
                 ensemble=3)
    assert [e["path"] for e in rows.ensembles] == ["translated"]


@pytest.mark.parametrize("extrema", [True, False], ids=["numpy extrema", "compare and copy"])
def test_limits_select_signed_zeros_and_nan_as_a_run_does(monkeypatch, extrema):
    """Both translations of min/max (numpy's extrema where the probe allows, else a
    comparison and a masked copy) select what a run selects: ties of 0.0 and -0.0, NaN."""
    from cosim.fastpath import ensemble
    if extrema and not ensemble.EXTREMA_EXACT:
        pytest.skip("numpy's extrema select otherwise on this machine (the probe says so)")
    monkeypatch.setattr(ensemble, "EXTREMA_EXACT", extrema)
    points = [{"c": 0.0, "g": 0.5}, {"c": -0.0, "g": 10.0}, {"c": 0.5, "g": 10.0},
              {"c": -2.0, "g": 0.5}]
    config, got = _zeros_members(points)
    assert np.signbit(got[0]["a.out"][0, 0]) and np.isnan(got[1]["n.out"][0, 0])
    for params, mine in zip(points, got, strict=True):
        alone = own_run(sm.zeros_and_nan, config, params)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (params, key)


def _zeros_members(points):
    """The zeros-and-NaN model's members ``points`` run as one ensemble (every signal
    logged): ``(config, their logs)``."""
    from cosim.fastpath.ensemble_run import run_members
    config = _all_logged(sm.zeros_and_nan, SimulationConfig(dt=0.1, t_end=0.3))
    m = sm.zeros_and_nan()
    m.parameters.update(points[0])
    sim = Simulator(m, config)
    sim.initialize()
    return config, run_members(sim, m, points)


@pytest.mark.parametrize("tries", [16, 0], ids=["shared", "built per member"])
def test_members_of_a_grid_share_blocks_built_from_the_same_values_only(tries, monkeypatch):
    """Blocks are built once per distinct values (a grid's members share them): members
    whose values differ only in a zero's sign do not share, every member is its own run
    (and so where blocks are built per member, as after MEMO_TRIES members that differ)."""
    from cosim.fastpath import ensemble_members
    monkeypatch.setattr(ensemble_members, "MEMO_TRIES", tries)
    points = [{"c": c, "g": g} for g in (0.5, 10.0) for c in (0.0, -0.0, 0.0, -0.0)]
    config, got = _zeros_members(points)
    assert not np.signbit(got[0]["c.out"][0, 0]) and np.signbit(got[1]["c.out"][0, 0])
    for params, mine in zip(points, got, strict=True):
        alone = own_run(sm.zeros_and_nan, config, params)
        for key in alone:
            assert same_bits(mine[key], alone[key]), (params, key)


def test_zero_crossings_are_located_per_member_as_in_its_own_run():
    """A ball bouncing (a ZeroCrossing of its height resetting its velocity): each member's
    step with an impact runs on its own interpreter, which locates and fires the event;
    every signal and every event time is the member's own run's."""
    from cosim.fastpath.ensemble_run import run_members
    points = [{"h0": 1.0, "v0": 0.0}, {"h0": 2.5, "v0": 1.0}, {"h0": 0.4, "v0": -2.0},
              {"h0": 1.7, "v0": 3.0}]
    config = SimulationConfig(dt=0.01, t_end=3.0, solver="RK4", log=["x.out", "v.out"])
    m = sm.bouncing()
    m.parameters.update(points[0])
    sim = Simulator(m, config)
    sim.initialize()
    events: list = []
    got = run_members(sim, m, points, events=events)
    for params, mine, fired in zip(points, got, events, strict=True):
        own = Simulator(_with(sm.bouncing(), params), config)
        alone = own.run()
        assert fired == own.event_log and len(fired) >= 2, params
        for key in alone:
            assert same_bits(mine[key], alone[key]), (params, key)
    assert len({e[0][0] for e in events}) == len(points)      # each at its own time
    reducers = {"x": final("x.out"), "v": final("v.out")}
    alone = sweep(sm.bouncing, config, points, reducers, backend="serial")
    together = sweep(sm.bouncing, config, points, reducers, backend="serial", ensemble=4)
    assert [(r["x"], r["v"]) for r in together] == [(r["x"], r["v"]) for r in alone]
    assert [e["path"] for e in together.ensembles] == ["translated"]


def _with(model, params):
    model.parameters.update(params)
    return model


def bounce_delayed():
    """The bouncing ball with a transport delay (no fast-path kernel) on its height."""
    from blocks import TransportDelay
    m = sm.bouncing()
    m.add(TransportDelay("d", delay=0.05))
    m.connect("x.out", "d.in")
    return m


def test_events_that_do_not_translate_run_one_by_one_saying_why():
    """Copies in one model cannot locate each member's events: such an ensemble runs its
    members one by one, and says so, naming the block and the events."""
    config = SimulationConfig(dt=0.01, t_end=1.0, solver="RK4")
    points = [{"h0": 1.0}, {"h0": 0.5}]
    alone = sweep(bounce_delayed, config, points, {"x": final("x.out")}, backend="serial")
    rows = sweep(bounce_delayed, config, points, {"x": final("x.out")}, backend="serial",
                 ensemble=2)
    assert [r["x"] for r in rows] == [r["x"] for r in alone]
    (e,) = rows.ensembles
    assert e["path"] == "one by one"
    assert "block d (TransportDelay) has no fast-path kernel; its events (floor) are " \
           "located per run" in e["reason"]


def unit_gain():
    """A gain ``g`` (1.0 unless swept) between a force ``f`` and a velocity's derivative,
    ``f`` read by a second integrator too: with ``g`` one, ``f`` is computed straight into
    the stage derivative and the gain's output bound to it."""
    from blocks import Gain, Integrator, Sum
    from cosim import Model
    m = Model("unit", parameters={"g": 1.0, "k": 2.0})
    m.add(sm.Step("ref", step_time=0.0, final=1.0), Sum("e", "+-"), Gain("kp", "=k"),
          Sum("f", "+-"), Gain("g", "=g"), Integrator("v", 0.0), Integrator("x", 0.0),
          Integrator("fi", 0.0))
    m.connect("ref.out", "e.in1")
    m.connect("x.out", "e.in2")
    m.connect("e.out", "kp.in")
    m.connect("kp.out", "f.in1")
    m.connect("v.out", "f.in2", "x.in")
    m.connect("f.out", "g.in", "fi.in")
    m.connect("g.out", "v.in")
    return m


@pytest.mark.parametrize("shared, points", [
    ({"g": 1.0}, lhs({"k": (0.5, 4.0)}, 4, seed=1)),
    ({"g": 2.0}, lhs({"k": (0.5, 4.0)}, 4, seed=1)),
    ({"g": 1.0}, [{"k": 1.5, "g": 1.0}, {"k": 2.5, "g": 2.0}, {"k": 0.5, "g": -1.0}])],
    ids=["gain of one shared", "the same structure with another gain", "gain swept"])
def test_a_gain_of_one_is_left_out_and_every_signal_is_bit_identical(shared, points):
    """A shared gain of exactly 1.0 is no product (its input is computed into the stage
    derivative); the same structure with another gain, run after it, is its own
    translation; a swept gain that is one for some members is a product for all. Every
    signal of every member is its own run's."""
    config = SimulationConfig(dt=0.01, t_end=0.5, solver="RK4",
                              log=["e.out", "f.out", "g.out", "v.out", "x.out", "fi.out"])

    def factory():
        m = unit_gain()
        m.parameters.update(shared)
        return m
    assert_members_are_their_own_runs(factory, config, points, shared)
