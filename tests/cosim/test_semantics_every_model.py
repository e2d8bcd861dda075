"""The claims of docs/cosim-semantics.md on models built for these tests (not the examples),
against outside oracles: the monolithic Simulator run, ``solve_ivp``, closed forms and the
slopes of log(error) against log(H). Each test names the claim it holds."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from blocks import Constant, Gain, Sine, Sum
from blocks.continuous import Integrator
from cosim import (CosimConfig, Inport, Model, ModelError, Outport, SimulationConfig,
                   Simulator, Subsystem)
from cosim.errors import ConvergenceError
from cosim.master.cosimulation import CoSimulation


def cosim(model, H, dt, t_end, solver="RK4", **cosim_options):
    """The model co-simulated at macro step ``H``; returns (CoSimulation, logs)."""
    co = CoSimulation(model, SimulationConfig(dt=dt, t_end=t_end, solver=solver,
                                              cosim=CosimConfig(H=H, **cosim_options)))
    try:
        return co, co.run()
    finally:
        co.close()


def max_difference(co, mono):
    keys = [k for k in mono if k in co]
    assert keys
    return max(float(np.max(np.abs(co[k] - mono[k]))) for k in keys)


# -- a held output inside an iterated coupling -----------------------------------------------

def held_coupling(H):
    """y1 = 0.5 u + 0.3 in a unit discrete at H; y2 = -0.8 y1 + z with z' = -z + y1 in a
    continuous unit (RK4 at H); u = y2: an algebraic coupling whose discrete output is held
    over each macro step."""
    m = Model("held")
    add_held_loop(m, "a", "b", H)
    return m


def add_held_loop(m, a_name, b_name, H, gain=0.5, offset=0.3, z0=0.0):
    """Add to ``m`` the units of :func:`held_coupling` (``y1 = gain u + offset``, discrete;
    ``z(0) = z0``) as ``a_name`` and ``b_name``, coupled."""
    a = Subsystem(a_name, atomic=True, dt=H)
    a.add(Inport("u"), Gain("g", gain), Constant("c", offset), Sum("s", "++"), Outport("y1"))
    a.connect("u.out", "g.in")
    a.connect("g.out", "s.in1")
    a.connect("c.out", "s.in2")
    a.connect("s.out", "y1.in")
    b = Subsystem(b_name, atomic=True, dt=H, solver="RK4")
    b.add(Inport("y1"), Integrator("z", z0), Gain("k", -1.0), Sum("s", "++"),
          Gain("m", -0.8), Sum("o", "++"), Outport("y2"))
    b.connect("y1.out", "s.in1", "m.in")
    b.connect("k.out", "s.in2")
    b.connect("s.out", "z.in")
    b.connect("z.out", "k.in", "o.in2")
    b.connect("m.out", "o.in1")
    b.connect("o.out", "y2.in")
    m.add(a, b)
    m.connect(f"{a_name}.y1", f"{b_name}.y1")
    m.connect(f"{b_name}.y2", f"{a_name}.u")


@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("extrapolation", [0, 2])
@pytest.mark.parametrize("H", [0.04, 0.01])
def test_a_held_output_stays_at_its_value_at_T_inside_an_iterated_coupling(scheme,
                                                                          extrapolation, H):
    # Before: the held y1 ramped to its candidate at T+H inside the step (8.8e-4 at
    # H = 0.04, falling as O(H)); the monolithic run holds it at y1(T).
    mono = Simulator(held_coupling(H), SimulationConfig(dt=H, t_end=2.0, solver="RK4",
                                                        tolerance_fpi=1e-14)).run()
    co, logs = cosim(held_coupling(H), H, H, 2.0, scheme=scheme, extrapolation=extrapolation,
                     tolerance=1e-14)
    assert co.master.couplings
    assert max_difference(logs, mono) <= 1e-12


# -- co-initialization and convergence tests ------------------------------------------------

def gain_loop(gain, H=0.01, switch=None):
    """y1 = k u + 1 in unit a, y2 = y1 + 0.5 sin(2 pi t) in unit b, u = y2: a linear
    algebraic coupling of loop gain ``k = gain`` (from ``switch`` s on, ``k = 1``: then it
    has no solution). Both units discrete at H."""
    from blocks import Product, Step
    m = Model("gain_loop")
    a = Subsystem("a", atomic=True, dt=H)
    a.add(Inport("u"), Step("k", step_time=1e9 if switch is None else switch,
                            initial=gain, final=1.0),
          Product("p", "**"), Constant("c", 1.0), Sum("s", "++"), Outport("y1"))
    a.connect("u.out", "p.in1")
    a.connect("k.out", "p.in2")
    a.connect("p.out", "s.in1")
    a.connect("c.out", "s.in2")
    a.connect("s.out", "y1.in")
    b = Subsystem("b", atomic=True, dt=H)
    b.add(Inport("y1"), Sine("w", amplitude=0.5), Sum("s", "++"), Outport("y2"))
    b.connect("y1.out", "s.in1")
    b.connect("w.out", "s.in2")
    b.connect("s.out", "y2.in")
    m.add(a, b)
    m.connect("a.y1", "b.y1")
    m.connect("b.y2", "a.u")
    return m


@pytest.mark.parametrize("gain", [0.95, -1.5, 1.8])
def test_newton_acceleration_solves_the_coupling_at_co_initialization_too(gain):
    # Before: co-initialization fell back to plain substitution, which diverges for
    # |gain| >= 1 (and needs ~500 iterations at 0.95): ConvergenceError at t0.
    co, logs = cosim(gain_loop(gain), 0.01, 0.01, 0.5, acceleration="newton",
                     tolerance=1e-13)
    t = logs.time_of("a.y1")
    exact = (gain * 0.5 * np.sin(2 * np.pi * t) + 1.0) / (1.0 - gain)
    np.testing.assert_allclose(logs["a.y1"][:, 0], exact, rtol=1e-11, atol=1e-12)
    mono = Simulator(gain_loop(gain), SimulationConfig(dt=0.01, t_end=0.5,
                                                       tolerance_fpi=1e-13)).run()
    assert max_difference(logs, mono) <= 1e-10 * (1 + np.max(np.abs(exact)))


def test_an_iterate_that_runs_away_is_no_fixed_point_in_the_coupling_loop():
    # y = G(y) = y + 0.3 has no solution; Anderson's least squares on residual differences
    # of rounding size jump to ~1e15, where y + 0.3 == y reads as a zero residual.
    from cosim.master import coupling
    cfg = CosimConfig(H=0.01)
    solve = coupling.iterate(np.array([0.2]), lambda c, rollback: c + 0.3 + 1e-17 * c, cfg)
    assert not solve.converged
    # A loop whose values are large converges relative to their size.
    big = coupling.iterate(np.array([1e7]), lambda c, rollback: 0.5 * c + 1e7, cfg)
    assert big.converged and abs(big.size - 2e7) <= 1e-9 * 2e7


def test_a_coupling_that_loses_its_solution_is_an_error_naming_links_residual_and_size():
    # From t = 0.5 the loop gain is 1: y1 = y1 + 1 + 0.5 sin(2 pi t) has no solution.
    # Before: Anderson ran to ~1e15 where the residual reads 0 and the step was accepted.
    with pytest.raises(ConvergenceError) as mono:
        Simulator(gain_loop(0.5, switch=0.5), SimulationConfig(dt=0.01, t_end=1.0)).run()
    assert mono.value.t == pytest.approx(0.5) and "iterate magnitude" in str(mono.value)
    for acceleration in ("anderson", "aitken", "none", "newton"):
        with pytest.raises(ConvergenceError) as err:
            cosim(gain_loop(0.5, switch=0.5), 0.01, 0.01, 1.0, acceleration=acceleration,
                  max_iterations=200)
        msg = str(err.value)
        assert err.value.t == pytest.approx(0.49), msg     # the step [0.49, 0.5]
        assert "a.y1 -> b.y1" in msg and "b.y2 -> a.u" in msg, msg
        assert "residual" in msg and "iterate magnitude" in msg, msg
        assert err.value.size is not None


# -- settings validated at construction -------------------------------------------------------

BAD_COSIM = [
    (dict(adaptive=True, rtol=-1), r"rtol must be a finite number >= 0, got -1"),
    (dict(H_max=-1), r"H_max must be a number > 0, got -1"),
    (dict(H_min=0.5, H_max=0.1), r"H_min \(0.5\) is above H_max \(0.1\)"),
    (dict(relaxation=math.nan), r"relaxation must be a finite number > 0, got nan"),
    (dict(tolerance=math.inf), r"tolerance must be a finite number > 0, got inf"),
    (dict(atol=-1e-6), r"atol must be"),
    (dict(rtol=0, atol=0), r"rtol and atol are both 0"),
    (dict(max_iterations=2.5), r"max_iterations must be a whole number >= 1, got 2.5"),
    (dict(extrapolation=True), r"extrapolation must be 0, 1 or 2, got True"),
    (dict(iterate="yes"), r"iterate must be True or False, got 'yes'"),
    (dict(timeout=0), r"timeout must be a finite number > 0, got 0"),
    (dict(connect_timeout=-3), r"connect_timeout must be"),
    (dict(checkpoint_every=0), r"checkpoint_every must be a whole number >= 1 or None"),
    (dict(max_restarts=-1), r"max_restarts must be a whole number >= 0"),
    (dict(backend=""), r"backend must be a non-empty string"),
    (dict(units={"plant": {"num_cpus": -1}}),
     r"CosimConfig.units\['plant'\]: num_cpus must be a finite number >= 0"),
    (dict(units={"plant": {"resources": {"gpu": math.nan}}}),
     r"CosimConfig.units\['plant'\]: resources must be"),
]


@pytest.mark.parametrize("options,message", BAD_COSIM)
def test_every_cosim_setting_is_checked_at_construction_naming_it(options, message):
    with pytest.raises(ModelError, match=message):
        CosimConfig(H=0.1, **options)


BAD_SIMULATION = [
    (dict(rtol=-1), r"rtol must be a finite number >= 0, got -1"),
    (dict(atol=math.nan), r"atol must be"),
    (dict(dt_min=-1), r"dt_min must be"),
    (dict(dt_max=0), r"dt_max must be a number > 0"),
    (dict(h0=0.0), r"h0 must be a finite number > 0 or None"),
    (dict(tolerance_fpi=-1e-12), r"tolerance_fpi must be"),
    (dict(iterations_max=0), r"iterations_max must be a whole number >= 1"),
    (dict(iterations_min=1.5), r"iterations_min must be a whole number >= 1 or None"),
    (dict(anderson=-1), r"anderson must be a whole number >= 0"),
    (dict(fast="no"), r"fast must be True or False"),
    (dict(solver="RK44"), r"solver: unknown solver 'RK44'.*did you mean 'RK4'"),
    (dict(cosim={"H": 0.1}), r"cosim must be a CosimConfig or None, got dict"),
]


@pytest.mark.parametrize("options,message", BAD_SIMULATION)
def test_every_simulation_setting_is_checked_at_construction_naming_it(options, message):
    with pytest.raises(ModelError, match=r"SimulationConfig: .*" + message):
        SimulationConfig(dt=0.01, t_end=1.0, **options)


def test_a_units_own_unknown_solver_is_reported_against_the_unit():
    m = held_coupling(0.01)
    m["b"].solver = "RK44"
    with pytest.raises(ModelError, match=r"atomic subsystem 'b': solver: unknown solver "
                                         r"'RK44'"):
        CoSimulation(m, SimulationConfig(dt=0.01, t_end=0.1, cosim=CosimConfig(H=0.01)))


@pytest.mark.parametrize("H", [0.1, 0.2])
def test_an_end_time_off_the_units_common_grid_is_refused(H):
    # Before: t_end = 0.25 with units at 0.1 s ran on to 0.3 and logged it.
    co = CoSimulation(held_coupling(0.1), SimulationConfig(dt=0.1, t_end=0.25,
                                                           cosim=CosimConfig(H=H)))
    with pytest.raises(ModelError, match=r"t_end=0.25 is not on the units' common grid.*"
                                         r"multiple of 0.1 s.*end at 0.2 or 0.3 s"):
        co.run()
    co.close()
    # On the grid but not on H's: the last macro step is shortened, ending at t_end.
    co, logs = cosim(held_coupling(0.1), 0.2, 0.1, 0.3)
    assert logs.time_of("a.y1")[-1] == pytest.approx(0.3) and co.t == pytest.approx(0.3)


# -- order 3 at extrapolation 2, from the first step ------------------------------------------

F = 0.7


def driven_lag(dt):
    """x' = -x + sin(2 pi F t) in a unit (RK4 at ``dt``), the sine in the top-level unit: a
    driver with a slope at t0 (the case the oscillator benchmark, starting at rest, hides)."""
    m = Model("lag")
    p = Subsystem("p", atomic=True, dt=dt, solver="RK4")
    p.add(Inport("u"), Integrator("x", 0.0), Gain("k", -1.0), Sum("s", "++"), Outport("y"))
    p.connect("u.out", "s.in1")
    p.connect("k.out", "s.in2")
    p.connect("s.out", "x.in")
    p.connect("x.out", "k.in", "y.in")
    m.add(p, Sine("src", frequency=F))
    m.connect("src.out", "p.u")
    return m


def driven_loop(dt):
    """x' = -x + z + sin(2 pi F t) in unit a, z' = -z - 2x in unit b (RK4 at ``dt``), x(0) = 1:
    a closed loop whose coupling signals have slopes at t0."""
    m = Model("loop")
    a = Subsystem("a", atomic=True, dt=dt, solver="RK4")
    a.add(Inport("u"), Integrator("x", 1.0), Gain("k", -1.0), Sine("w", frequency=F),
          Sum("s", "+++"), Outport("y"))
    a.connect("u.out", "s.in1")
    a.connect("k.out", "s.in2")
    a.connect("w.out", "s.in3")
    a.connect("s.out", "x.in")
    a.connect("x.out", "k.in", "y.in")
    b = Subsystem("b", atomic=True, dt=dt, solver="RK4")
    b.add(Inport("u"), Integrator("z", 0.0), Gain("k", -1.0), Gain("c", -2.0), Sum("s", "++"),
          Outport("y"))
    b.connect("u.out", "c.in")
    b.connect("c.out", "s.in1")
    b.connect("k.out", "s.in2")
    b.connect("s.out", "z.in")
    b.connect("z.out", "k.in", "y.in")
    m.add(a, b)
    m.connect("a.y", "b.u")
    m.connect("b.y", "a.u")
    return m


ORDER_CASES = {
    "driven_lag": (driven_lag, ("p/x.out",), lambda t, v: [-v[0] + np.sin(2 * np.pi * F * t)],
                   [0.0]),
    "driven_loop": (driven_loop, ("a/x.out", "b/z.out"),
                    lambda t, v: [-v[0] + v[1] + np.sin(2 * np.pi * F * t), -v[1] - 2 * v[0]],
                    [1.0, 0.0]),
}


def order_errors(case, scheme, e, Hs):
    build, keys, rhs, x0 = ORDER_CASES[case]
    exact = solve_ivp(rhs, (0, 1.0), x0, rtol=1e-12, atol=1e-14, dense_output=True).sol
    errs = []
    for H in Hs:
        _, logs = cosim(build(1e-3), H, 1e-3, 1.0, scheme=scheme, extrapolation=e)
        t = logs.time_of(keys[0])
        errs.append(max(np.max(np.abs(logs[k][:, 0] - exact(t)[i])) for i, k in enumerate(keys)))
    return np.array(errs)


@pytest.mark.parametrize("case", list(ORDER_CASES))
@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
def test_extrapolation_2_is_third_order_from_the_first_step(case, scheme):
    # Before: the first macro step held every input (degree 0): slope 1.99 for the driven
    # lag under Jacobi (errors equal to e = 1's), and 1.97 in the loop under both schemes.
    Hs = np.array([0.04, 0.02, 0.01])
    errs = order_errors(case, scheme, 2, Hs)
    slope = np.polyfit(np.log(Hs), np.log(errs), 1)[0]
    assert 2.9 <= slope <= 3.2, (errs, slope)
    assert np.all(errs < 0.35 * order_errors(case, scheme, 1, Hs)), errs


# -- logs at the macro points -------------------------------------------------------------------

def input_feeding_no_output(H, same_level):
    """Unit a: in1 -> 2*in1 -> y (feedthrough), in2 -> 3*in2 feeding none of its outputs;
    unit b: y = -1.5 u (feedthrough) drives a.in2. b's u comes from a.y (b is refreshed after
    a) or, with ``same_level``, from the top-level sine (refreshed with a)."""
    m = Model("late")
    a = Subsystem("a", atomic=True, dt=H)
    a.add(Inport("in1"), Inport("in2"), Gain("g", 2.0), Gain("h", 3.0), Outport("y"))
    a.connect("in1.out", "g.in")
    a.connect("g.out", "y.in")
    a.connect("in2.out", "h.in")
    b = Subsystem("b", atomic=True, dt=H)
    b.add(Inport("u"), Gain("g", -1.5), Outport("y"))
    b.connect("u.out", "g.in")
    b.connect("g.out", "y.in")
    m.add(a, b, Sine("src", frequency=0.8, phase=0.3))
    m.connect("src.out", "a.in1")
    m.connect("src.out" if same_level else "a.y", "b.u")
    m.connect("b.y", "a.in2")
    return m


@pytest.mark.parametrize("same_level", [False, True])
@pytest.mark.parametrize("scheme", ["jacobi", "gauss-seidel"])
@pytest.mark.parametrize("compiled", [True, False])
def test_an_input_refreshed_after_its_unit_is_logged_at_its_macro_point(same_level, scheme,
                                                                         compiled):
    # Before: a/in2.out and a/h.out were logged one macro step late, t0 included (0 at t0
    # where the monolithic run has -0.887).
    H = 0.01
    mono = Simulator(input_feeding_no_output(H, same_level),
                     SimulationConfig(dt=H, t_end=0.5)).run()
    co, logs = cosim(input_feeding_no_output(H, same_level), H, H, 0.5, solver="SSPRK22",
                     scheme=scheme, compiled=compiled)
    assert "a/h.out" in logs
    for key in mono:
        np.testing.assert_array_equal(logs[key], mono[key], err_msg=key, strict=True)
        np.testing.assert_array_equal(logs.time_of(key), mono.time_of(key), err_msg=key)


# -- automatic partitions -----------------------------------------------------------------------

def thermal_zones(n=20):
    """``n`` thermal zones in a row (221 blocks at n = 20), each a virtual subsystem:
    C T' = g_o (T_out - T) + g_n (T_left - T) + g_n (T_right - T) + heat, heat = sat(k_p
    (20 - T)); the outdoor temperature a top-level sine. A cut between two zones crosses
    three signals (both temperatures and the outdoor one), none with direct feedthrough."""
    from blocks import Saturation
    m = Model("zones")
    m.add(Sine("out", amplitude=5.0, frequency=1 / 24, bias=5.0))
    for i in range(n):
        gl, gr = (0.5 if i else 0.0), (0.5 if i < n - 1 else 0.0)
        z = Subsystem(f"z{i}")
        z.add(Inport("Tout"), Inport("Tl"), Inport("Tr"), Gain("go", 0.2), Gain("gl", gl),
              Gain("gr", gr), Gain("gT", -(0.2 + gl + gr)), Sum("q", "+++++"),
              Gain("invC", 1.0 / (1.0 + 0.1 * (i % 3))), Integrator("T", 15.0 + i % 4),
              Constant("set", 20.0), Sum("e", "+-"), Gain("kp", 2.0),
              Saturation("heat", lower=0.0, upper=3.0), Outport("T_"))
        z.connect("Tout.out", "go.in")
        z.connect("Tl.out", "gl.in")
        z.connect("Tr.out", "gr.in")
        for j, src in enumerate(("go", "gl", "gr", "gT", "heat"), 1):
            z.connect(f"{src}.out", f"q.in{j}")
        z.connect("q.out", "invC.in")
        z.connect("invC.out", "T.in")
        z.connect("T.out", "gT.in", "e.in2", "T_.in")
        z.connect("set.out", "e.in1")
        z.connect("e.out", "kp.in")
        z.connect("kp.out", "heat.in")
        m.add(z)
        m.connect("out.out", f"z{i}.Tout")
    for i in range(n):
        m.connect(f"z{i - 1}.T_" if i else "out.out", f"z{i}.Tl")
        m.connect(f"z{i + 1}.T_" if i < n - 1 else "out.out", f"z{i}.Tr")
    return m


def metis_minimum(edges, weights, k, seeds=8):
    """The least weighted cut plain METIS finds on the graph over several seeds, parts
    balanced to 5 % by its own (integer, upper-bound) measure."""
    import pymetis
    n = len(weights)
    adj = [[] for _ in range(n)]
    ew = [[] for _ in range(n)]
    for (i, j), w in edges.items():
        adj[i].append(j)
        adj[j].append(i)
        ew[i].append(int(w))
        ew[j].append(int(w))
    xadj = np.concatenate([[0], np.cumsum([len(a) for a in adj])]).tolist()
    best = math.inf
    for seed in range(seeds):
        res = pymetis.part_graph(k, pymetis.CSRAdjacency(xadj, [j for a in adj for j in a]),
                                 vweights=[int(round(10 * w)) for w in weights],
                                 eweights=[w for e in ew for w in e],
                                 options=pymetis.Options(ufactor=50, seed=seed))
        part = np.asarray(res.vertex_part)
        best = min(best, sum(w for (i, j), w in edges.items() if part[i] != part[j]))
    return best


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_a_partition_is_balanced_to_its_tolerance_with_a_cut_a_graph_partitioner_would_choose(k):
    # Before (a line of blocks cut in runs): 80 signals cut for k = 2 (47 with direct
    # feedthrough) where a cut between two zones crosses 3; parts within +-10 %, not 5 %.
    from cosim.compile.flatten import flatten
    from cosim.master.autosplit import BALANCE, block_cost, signal_graph, split_model
    from cosim.model.evaluate import evaluate
    model = thermal_zones()
    evaluate(model)
    split = split_model(model, k, SimulationConfig(dt=0.01, t_end=1.0))
    share = sum(split.costs) / k
    assert all(abs(c - share) <= BALANCE * share for c in split.costs), split.table()
    # None with direct feedthrough: k = 3 must cut into zones, and does so on their
    # setpoints (constants), not inside their feedthrough chains.
    assert not any(c.endswith("*") for c in split.cuts), split.table()
    if 20 % k == 0:
        # Cuts between zones: the outdoor signal and two temperatures per boundary.
        assert len(split.cuts) <= 2 * (1 + 2 * (k - 1)), split.table()
    flat = flatten(model)
    index = {p: i for i, p in enumerate(flat.paths)}
    edges = signal_graph(flat, index)
    part = np.empty(len(flat.paths), dtype=int)
    for j, paths in enumerate(split.parts):
        part[[index[p] for p in paths]] = j
    weights = np.array([block_cost(b) for b in flat.blocks])
    ours = sum(w for (i, j), w in edges.items() if part[i] != part[j])
    assert ours <= 2 * metis_minimum(edges, weights, k), (ours, split.table())


@pytest.mark.parametrize("k", [2, 3])
def test_a_split_model_logs_every_signal_at_t0_as_its_monolithic_run(k):
    # Before: 26 (k = 2) and 40 (k = 3) signals logged a macro step late at t0 (z0/q.out 1.0
    # for 1.5), and the runs 15 apart.
    cfg = dict(dt=0.01, t_end=0.5, solver="RK4")
    mono = Simulator(thermal_zones(), SimulationConfig(**cfg)).run()
    co, logs = cosim(thermal_zones(), 0.01, **cfg, partition=k)
    assert sorted(logs) == sorted(mono)
    for key in mono:
        np.testing.assert_array_equal(logs[key][0], mono[key][0], err_msg=key)
    # Continuous cuts, held over the step: first order in H (test_autosplit has the slope).
    assert max_difference(logs, mono) < 0.02


# -- events inside units ------------------------------------------------------------------------

GRAV, RESTITUTION, HEIGHT = 9.81, 0.8, 1.0


def bouncing_ball(where):
    """A ball dropped from HEIGHT inside an atomic subsystem (RK45 at 10 ms), its bounce a
    zero crossing of x added to the subsystem (``where="unit"``) or to the model, naming
    ``ball/x`` (``where="model"``); a top-level gain reads the height. ``where="virtual"``:
    the event added to the subsystem, made virtual."""
    m = Model("ball")
    b = Subsystem("ball", **({} if where == "virtual" else dict(atomic=True, dt=0.01,
                                                                  solver="RK45")))
    b.add(Constant("g", -GRAV), Integrator("v", 0.0), Integrator("x", HEIGHT), Outport("h"))
    b.connect("g.out", "v.in")
    b.connect("v.out", "x.in")
    b.connect("x.out", "h.in")
    m.add(b, Gain("k", 1.0))
    m.connect("ball.h", "k.in")
    from cosim.model.events import ZeroCrossing
    if where in ("unit", "virtual"):
        b.add_event(ZeroCrossing("bounce", watch="x", direction="falling",
                                 reset={"v": lambda v: -RESTITUTION * v}))
    else:
        m.add_event(ZeroCrossing("bounce", watch="ball/x", direction="falling",
                                 reset={"ball/v": lambda v: -RESTITUTION * v}))
    return m


def ball_height(t):
    """The closed form: parabolas between bounces, each at RESTITUTION times the speed."""
    v = math.sqrt(2 * GRAV * HEIGHT)
    t_hit, x = math.sqrt(2 * HEIGHT / GRAV), np.empty_like(t)
    first = t < t_hit
    x[first] = HEIGHT - 0.5 * GRAV * t[first] ** 2
    start = t_hit
    while start < t[-1]:
        v *= RESTITUTION
        end = start + 2 * v / GRAV
        seg = (t >= start) & (t < end)
        x[seg] = v * (t[seg] - start) - 0.5 * GRAV * (t[seg] - start) ** 2
        start = end
    return x


BOUNCES = [math.sqrt(2 * HEIGHT / GRAV) + sum(2 * RESTITUTION ** j * math.sqrt(
    2 * GRAV * HEIGHT) / GRAV for j in range(1, i + 1)) for i in range(4)]


@pytest.mark.parametrize("where", ["unit", "model", "virtual"])
def test_a_zero_crossing_inside_an_atomic_subsystem_is_located_by_its_own_run(where):
    # Before: Subsystem had no add_event, and a model event could not name "ball/x".
    cfg = dict(dt=0.01, t_end=2.5, rtol=1e-10, atol=1e-12)
    sim = Simulator(bouncing_ball(where), SimulationConfig(**cfg, solver="RK45"))
    sim.run()
    name = "bounce" if where == "virtual" else "ball/bounce"   # (a virtual one is the model's)
    assert [name for _, name in sim.event_log] == [name] * 4
    np.testing.assert_allclose([t for t, _ in sim.event_log], BOUNCES, rtol=0, atol=1e-9)
    co, logs = cosim(bouncing_ball(where), 0.01, solver="RK45", **cfg)
    t = logs.time_of("ball/x.out")
    np.testing.assert_allclose(logs["ball/x.out"][:, 0], ball_height(t), rtol=0, atol=1e-8)


def test_an_event_naming_blocks_of_two_units_is_refused_naming_them():
    from cosim.errors import CompileError
    from cosim.model.events import ZeroCrossing
    m = held_coupling(0.01)
    m.add_event(ZeroCrossing("odd", watch="b/z", reset={"a/g": [0.0]}))
    with pytest.raises(CompileError, match=r"event 'odd' names blocks in a, b: an event "
                                           r"watches and resets blocks of one run"):
        Simulator(m, SimulationConfig(dt=0.01, t_end=0.1))


def thermostat(atomic):
    """x' = -x + 1.5 u, u a relay on below x = 0.4 and off above 0.6 (starting on), inside a
    subsystem (atomic: its own run, RK45 at 10 ms)."""
    from blocks import Relay
    m = Model("thermo")
    s = Subsystem("room", atomic=atomic, **(dict(dt=0.01, solver="RK45") if atomic else {}))
    s.add(Integrator("x", 0.0), Gain("neg", -1.0), Relay("heat", on_point=-0.4, off_point=-0.6,
                                                           on_value=1.5, off_value=0.0),
          Gain("k", -1.0), Sum("s", "++"), Outport("y"))
    s.connect("x.out", "neg.in", "k.in", "y.in")
    s.connect("neg.out", "heat.in")
    s.connect("heat.out", "s.in1")
    s.connect("k.out", "s.in2")
    s.connect("s.out", "x.in")
    m.add(s, Gain("g", 1.0))
    m.connect("room.y", "g.in")
    return m


def test_switches_of_a_relay_inside_an_atomic_subsystem_are_in_the_switch_log():
    # Before: Simulator.switch_log was empty for the relay inside the atomic subsystem.
    cfg = SimulationConfig(dt=0.01, t_end=3.0, solver="RK45", rtol=1e-10, atol=1e-12)
    atomic = Simulator(thermostat(True), cfg)
    atomic.run()
    virtual = Simulator(thermostat(False), cfg)
    virtual.run()
    # Closed form: on from x = 0 up to 0.6, off down to 0.4, on up to 0.6, ...
    up, down = math.log(1.5 / (1.5 - 0.6)), math.log(0.6 / 0.4)
    up_again = math.log((1.5 - 0.4) / (1.5 - 0.6))
    exact = np.cumsum([up] + [down, up_again] * 5)
    exact = exact[exact < 3.0]
    times = [t for t, _ in atomic.switch_log]
    assert {path for _, path in atomic.switch_log} == {"room/heat"}
    np.testing.assert_allclose(times, exact, rtol=0, atol=1e-9)
    np.testing.assert_allclose(times, [t for t, _ in virtual.switch_log], rtol=0, atol=1e-9)


def test_a_subsystems_events_travel_in_its_models_file(tmp_path):
    from cosim.model.evaluate import evaluate
    path = tmp_path / "ball.yaml"
    m = bouncing_ball("unit")
    m["ball"].events[0] = __import__("dataclasses").replace(m["ball"].events[0],
                                                            reset={"v": [2.0]})
    m.to_yaml(path)
    back = Model.from_yaml(path)
    evaluate(back)
    assert [(ev.name, ev.watch, dict(ev.reset)) for ev in back.events] == \
        [("bounce", "ball/x", {"ball/v": [2.0]})]
    sim = Simulator(back, SimulationConfig(dt=0.01, t_end=0.5, rtol=1e-10, atol=1e-12))
    sim.run()
    assert [name for _, name in sim.event_log] == ["ball/bounce"]


@pytest.mark.parametrize("extrapolation", [0, 1, 2])
def test_the_key_of_a_units_port_is_the_units_own_output_also_when_a_top_level_block_reads_it(
        extrapolation):
    # Before: with a top-level reader, "p.y" was the top-level unit's input, which follows
    # the extrapolation polynomial between macro points; in the monolithic run it is the
    # unit's output.
    H, dt = 0.04, 0.01
    m = driven_lag(dt)
    m.add(Gain("k", 2.0))
    m.connect("p.y", "k.in")
    mono = Simulator(m, SimulationConfig(dt=dt, t_end=1.0, solver="RK4")).run()
    m = driven_lag(dt)
    m.add(Gain("k", 2.0))
    m.connect("p.y", "k.in")
    _, logs = cosim(m, H, dt, 1.0, extrapolation=extrapolation)
    np.testing.assert_array_equal(logs["p.y"], logs["p/x.out"], strict=True)
    np.testing.assert_array_equal(logs.time_of("p.y"), mono.time_of("p.y"))
    np.testing.assert_array_equal(logs["p.y"][:1], mono["p.y"][:1])


def test_a_coupling_of_units_with_different_steps_is_refused_naming_the_units_and_steps():
    # Before: "algebraic loop a -> b -> a mixes sample times; give its blocks one rate".
    from cosim.errors import CompileError
    m = held_coupling(0.02)
    m["b"].dt = 0.01
    with pytest.raises(CompileError, match=r"couples atomic subsystems \(co-simulation units\) "
                                           r"with different steps \((.*a: 0\.02.*b: 0\.01|"
                                           r".*b: 0\.01.*a: 0\.02)"):
        CoSimulation(m, SimulationConfig(dt=0.01, t_end=0.1, cosim=CosimConfig(H=0.02)))


# -- Jacobi at extrapolation 0 -----------------------------------------------------------------

def test_jacobi_without_extrapolation_is_the_monolithic_run_only_at_the_fastest_units_step():
    # The page claimed "for any model"; with H above the consumer's step the monolithic run
    # updates the top-level sine every base step where the co-simulation holds it over H:
    # 4.6e-3 at H = 10 ms (what the page now states: first order in H, exact at H = dt).
    mono = Simulator(driven_lag(1e-3), SimulationConfig(dt=1e-3, t_end=1.0,
                                                        solver="RK4")).run()
    _, logs = cosim(driven_lag(1e-3), 1e-3, 1e-3, 1.0, extrapolation=0)
    for key in mono:
        np.testing.assert_array_equal(logs[key], mono[key], err_msg=key, strict=True)
    Hs = np.array([0.04, 0.02, 0.01])
    errs = []
    for H in Hs:
        _, logs = cosim(driven_lag(1e-3), H, 1e-3, 1.0, extrapolation=0)
        errs.append(np.max(np.abs(logs["p/x.out"] - mono["p/x.out"])))
    slope = np.polyfit(np.log(Hs), np.log(errs), 1)[0]
    assert 0.9 <= slope <= 1.1 and errs[-1] > 1e-3, (errs, slope)
