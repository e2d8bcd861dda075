"""Hierarchy and evaluation: subsystems, atomic subsystems, tags, references, workspaces."""

from dataclasses import replace

import numpy as np
import pytest

from blocks import Constant, Gain, Sine, Sum, UnitDelay
from blocks.continuous import Integrator
from cosim import CompileError, Model, SimulationConfig, Simulator, simulation
from cosim.run.atomic import AtomicSubsystem, boundary
from cosim.model.library import register
from cosim.model.diagram import From, Goto, Inport, Outport, Reference, Subsystem


def flat_model():
    m = Model("flat")
    m.add(Sine("src", amplitude=1.5, frequency=0.7), Gain("g", 3.0), UnitDelay("d", 0.25),
          Sum("s", "+-"), Gain("out", 0.5))
    m.connect("src.out", "g.in")
    m.connect("g.out", "d.in", "s.in1")
    m.connect("d.out", "s.in2")
    m.connect("s.out", "out.in")
    return m


@register("scaler")
def scaler(name):
    sub = Subsystem(name, context={"gain": 1.0})
    sub.add(Inport("u"), Gain("g", "=gain"), Outport("y"))
    sub.connect("u.out", "g.in")
    sub.connect("g.out", "y.in")
    return sub


def nested_model():
    """The flat model written in three levels, with a reference, context and tags."""
    m = Model("nested", parameters={"k": 3.0, "half": 0.5, "d0": 0.25})
    outer = Subsystem("outer", context={"k2": "=k"})
    inner = Subsystem("inner")
    inner.add(Inport("u"), Reference("amp", "scaler", overrides={"gain": "=k2"}), Outport("y"))
    inner.connect("u.out", "amp.u")
    inner.connect("amp.y", "y.in")
    outer.add(Inport("u"), inner, UnitDelay("d", "=d0"), Goto("send", "sig"),
              From("recv", "sig"), Sum("s", "+-"), Outport("y"))
    outer.connect("u.out", "inner.u")
    outer.connect("inner.y", "d.in", "send.in")
    outer.connect("recv.out", "s.in1")
    outer.connect("d.out", "s.in2")
    outer.connect("s.out", "y.in")
    m.add(Sine("src", amplitude=1.5, frequency=0.7), outer, Gain("out", "=half"))
    m.connect("src.out", "outer.u")
    m.connect("outer.y", "out.in")
    return m


@pytest.mark.parametrize("fast", [True, False])
def test_flattened_virtual_subsystems_equal_flat_model_bit_for_bit(fast):
    cfg = SimulationConfig(dt=0.01, t_end=2.0, fast=fast)
    a = simulation(flat_model(), cfg).run()
    sim = simulation(nested_model(), cfg)
    b = sim.run()
    pairs = {"src.out": "src.out", "g.out": "outer/inner/amp/g.out", "d.out": "outer/d.out",
             "s.out": "outer/s.out", "out.out": "out.out"}
    assert sorted(b) == sorted(pairs.values())
    for ka, kb in pairs.items():
        np.testing.assert_array_equal(a[ka], b[kb])
    assert set(sim.plan.names) == {k.rsplit(".", 1)[0] for k in pairs.values()}


def test_parameter_override_in_context_shadows_model_parameter():
    m = nested_model()
    m["outer"].context["k2"] = 5.0            # the diagram context overrides the model's k
    logs = Simulator(m, SimulationConfig(dt=0.01, t_end=0.1)).run()
    np.testing.assert_allclose(logs["outer/inner/amp/g.out"], 5.0 * logs["src.out"])


def test_expression_errors_name_parameter_path_and_are_all_reported():
    m = nested_model()
    m["outer"].context["k2"] = "=kk"
    m["out"].__dict__["_spec_args"] = (("out", "=halve * 2"), {})
    with pytest.raises(CompileError) as exc:
        Simulator(m, SimulationConfig(dt=0.01, t_end=0.1))
    err = exc.value
    assert len(err.problems) == 2
    assert "outer" in err.problems[0] and "'kk'" in err.problems[0]
    assert "out.k" in err.problems[1] and "'halve'" in err.problems[1]


def test_goto_from_visibility():
    def model(vis, from_in):
        m = Model("tags")
        sub = Subsystem("sub")
        sub.add(Constant("c", 2.0), Goto("g", "t", vis))
        sub.connect("c.out", "g.in")
        m.add(sub, Gain("k", 1.0))
        if from_in == "top":
            m.add(From("f", "t"))
            m.connect("f.out", "k.in")
        else:
            deeper = Subsystem("deeper")
            deeper.add(From("f", "t"), Outport("y"))
            deeper.connect("f.out", "y.in")
            sub.add(deeper, Outport("y"))
            sub.connect("deeper.y", "y.in")
            m.connect("sub.y", "k.in")
        return m

    cfg = SimulationConfig(dt=0.1, t_end=0.2)
    assert simulation(model("global", "top"), cfg).run()["k.out"][0, 0] == 2.0
    assert simulation(model("scoped", "deeper"), cfg).run()["k.out"][0, 0] == 2.0
    for vis, where in (("local", "top"), ("local", "deeper"), ("scoped", "top")):
        with pytest.raises(CompileError, match="has no visible Goto"):
            simulation(model(vis, where), cfg)


def atomic_pair(atomic: bool):
    """A continuous plant and a discrete controller, as atomic subsystems at two rates."""
    m = Model("pair")
    plant = Subsystem("plant", atomic=atomic, dt=0.01 if atomic else None)
    plant.add(Inport("u"), Integrator("x", 1.0), Gain("c", -2.0), Sum("s", "++"), Outport("y"))
    plant.connect("u.out", "s.in1")
    plant.connect("x.out", "c.in", "y.in")
    plant.connect("c.out", "s.in2")
    plant.connect("s.out", "x.in")
    ctrl = Subsystem("ctrl", atomic=atomic, dt=0.05 if atomic else None)
    ctrl.add(Inport("e"), Gain("kp", "=kp"), UnitDelay("z", 0.0), Outport("u"))
    ctrl.connect("e.out", "kp.in")
    ctrl.connect("kp.out", "z.in")
    ctrl.connect("z.out", "u.in")
    m.parameters["kp"] = 0.8
    m.add(Sine("ref", frequency=0.2, sample_time=0.01), plant, ctrl, Sum("err", "+-"))
    m.connect("ref.out", "err.in1")
    m.connect("plant.y", "err.in2")
    m.connect("err.out", "ctrl.e")
    m.connect("ctrl.u", "plant.u")
    return m


def test_atomic_subsystems_run_at_their_own_rates():
    sim = Simulator(atomic_pair(True), SimulationConfig(dt=0.01, t_end=1.0, solver="RK4"))
    logs = sim.run()
    blocks = dict(zip(sim.plan.names, sim.plan.blocks))
    assert isinstance(blocks["plant"], AtomicSubsystem)
    assert blocks["ctrl"].inner.config.dt == 0.05
    np.testing.assert_allclose(np.diff(logs.time_of("ctrl.u")), 0.05)
    np.testing.assert_allclose(np.diff(logs.time_of("plant/x.out")), 0.01)
    # The controller output is held between its 50 ms hits, so the plant sees a ZOH input.
    u = logs["plant/u.out"][:, 0]
    assert np.all(u[5:10] == u[5]) and u[5] != 0.0 and u[10] != u[9]
    # The continuous plant under a held input: x' = u - 2x, exact over each 10 ms step.
    x = logs["plant/x.out"][:, 0]
    h = 0.01
    expect = u[:-1] / 2 + (x[:-1] - u[:-1] / 2) * np.exp(-2 * h)
    np.testing.assert_allclose(x[1:], expect, rtol=0, atol=1e-10)


def test_atomic_with_held_inputs_equals_virtual_bit_for_bit():
    """With piecewise-constant inputs an atomic subsystem computes what its contents would."""
    def model(atomic):
        m = Model("held")
        sub = Subsystem("plant", atomic=atomic)
        sub.add(Inport("u"), Integrator("x", 1.0), Gain("g", -0.5), Sum("s", "++"), Outport("y"))
        sub.connect("u.out", "s.in1")
        sub.connect("x.out", "g.in", "y.in")
        sub.connect("g.out", "s.in2")
        sub.connect("s.out", "x.in")
        m.add(Sine("src", sample_time=0.01), sub, Gain("k", 2.0, sample_time=0.01))
        m.connect("src.out", "plant.u")
        m.connect("plant.y", "k.in")
        return m
    cfg = SimulationConfig(dt=0.01, t_end=1.0, solver="RK4")
    a = simulation(model(False), cfg).run()
    b = simulation(model(True), cfg).run()
    np.testing.assert_array_equal(a["plant/x.out"], b["plant/x.out"])
    np.testing.assert_array_equal(a["k.out"], b["k.out"])


def test_log_selection_reaches_inside_atomic_subsystems():
    """``log=`` selects signals inside atomic subsystems as a co-simulation does
    (``"plant/x.out"``); unselected inner signals are not logged; values equal the full log."""
    from cosim import CoSimulation, CosimConfig

    full = Simulator(atomic_pair(True), SimulationConfig(dt=0.01, t_end=1.0, solver="RK4")).run()
    log = ("plant/x.out", "ctrl.u", "err.out")
    cfg = SimulationConfig(dt=0.01, t_end=1.0, solver="RK4", log=log)
    some = Simulator(atomic_pair(True), cfg).run()
    assert sorted(some) == sorted(log)
    for key in log:
        np.testing.assert_array_equal(some[key], full[key])
        np.testing.assert_array_equal(some.time_of(key), full.time_of(key))
    co = CoSimulation(atomic_pair(True), replace(cfg, cosim=CosimConfig(H=0.05)))
    try:
        logs = co.run()
    finally:
        co.close()
    assert sorted(logs) == sorted(log)
    # ctrl.u feeds only another unit: ctrl logs it itself, at its own 50 ms rate; it is
    # discrete at the macro step, so co-simulated and monolithic values agree exactly.
    np.testing.assert_array_equal(logs["ctrl.u"], some["ctrl.u"])
    np.testing.assert_allclose(logs.time_of("ctrl.u"), some.time_of("ctrl.u"), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(logs["plant/x.out"], some["plant/x.out"])
    # Only the selected inner signal: nothing else of the plant's plan is logged.
    only = Simulator(atomic_pair(True), replace(cfg, log=("err.out",))).run()
    assert sorted(only) == ["err.out"]
    with pytest.raises(CompileError, match="nope.out"):
        Simulator(atomic_pair(True), replace(cfg, log=("plant/nope.out",)))


def test_a_full_log_has_the_monolithic_keys_in_a_cosimulation():
    """With ``log=None`` a co-simulation logs every key the monolithic run of the same model
    logs, unit ports only another unit receives (``ctrl.u``) included; ``"*"`` means the same,
    and ``("*", key)`` adds an input to every output."""
    from cosim import CoSimulation, CosimConfig

    cfg = SimulationConfig(dt=0.01, t_end=1.0, solver="RK4")
    mono = Simulator(atomic_pair(True), cfg).run()
    co = CoSimulation(atomic_pair(True), replace(cfg, cosim=CosimConfig(H=0.05)))
    try:
        logs = co.run()
    finally:
        co.close()
    assert sorted(logs) == sorted(mono)
    # Discrete at the macro step: co-simulated and monolithic values agree exactly.
    np.testing.assert_array_equal(logs["ctrl.u"], mono["ctrl.u"])
    np.testing.assert_allclose(logs.time_of("ctrl.u"), mono.time_of("ctrl.u"), rtol=0, atol=1e-12)
    star = Simulator(atomic_pair(True), replace(cfg, log=("*",))).run()
    assert sorted(star) == sorted(mono)
    for key in mono:
        np.testing.assert_array_equal(star[key], mono[key])
    plus = Simulator(atomic_pair(True), replace(cfg, log=("*", "err.in1"))).run()
    assert sorted(plus) == sorted([*mono, "err.in1"])


def test_boundary_lists_direct_dependencies():
    sub = Subsystem("b")
    sub.add(Inport("u1"), Inport("u2"), Gain("g", 2.0), UnitDelay("d"), Sum("s", "++"),
            Outport("fast"), Outport("slow"))
    sub.connect("u1.out", "g.in")
    sub.connect("u2.out", "d.in")
    sub.connect("g.out", "s.in1")
    sub.connect("d.out", "s.in2", "slow.in")
    sub.connect("s.out", "fast.in")
    assert boundary(sub) == {"fast": ("u1",), "slow": ()}
    assert AtomicSubsystem(sub).direct_feedthrough is True


def test_checkpoint_with_atomic_subsystems_is_bit_identical(tmp_path):
    cfg = SimulationConfig(dt=0.01, t_end=1.0, solver="RK45")
    ref = simulation(atomic_pair(True), cfg).run()
    sim = simulation(atomic_pair(True), cfg)
    sim.run(t_end=0.47)
    sim.save_checkpoint(tmp_path / "cp")
    other = simulation(atomic_pair(True), cfg)
    other.load_checkpoint(tmp_path / "cp")
    logs = other.run()
    for key in ref:
        n = len(logs[key])
        assert n > 0, key
        np.testing.assert_array_equal(ref[key][-n:], logs[key], err_msg=key)


def _vector_gain_unit(shape=None):
    b = Subsystem("b", atomic=True, dt=0.01)
    b.add(Inport("u", **({} if shape is None else {"shape": shape})), Gain("g", 0.5),
          Outport("y"))
    b.connect("u.out", "g.in")
    b.connect("g.out", "y.in")
    return b


def test_a_loop_through_an_atomic_subsystem_has_the_shape_its_inport_declares():
    # Before: the loop's tear signal started as shape (1,) (nothing read it with a declared
    # shape), so y = 0.5 u closed by a top-level gain of -1 ran on scalars.
    m = Model("vector_loop")
    m.add(_vector_gain_unit((2,)), Gain("t", -1.0))
    m.connect("b.y", "t.in")
    m.connect("t.out", "b.u")
    logs = Simulator(m, SimulationConfig(dt=0.01, t_end=0.05)).run()
    for key in ("b.y", "t.out", "b/u.out"):
        assert logs[key].shape == (6, 2)
        assert not np.any(logs[key])           # the loop's one solution, y = u = 0


def test_an_atomic_subsystem_inport_refuses_a_wire_of_another_shape():
    # Before: a 2-vector fed into an Inport declaring shape (3,) ran silently as (2,).
    for shape, ok in (((2,), True), ((3,), False), (None, True)):
        m = Model("v")
        m.add(Constant("c", [1.0, 2.0]), _vector_gain_unit(shape))
        m.connect("c.out", "b.u")
        sim = Simulator(m, SimulationConfig(dt=0.01, t_end=0.02))
        if ok:
            np.testing.assert_array_equal(sim.run()["b.y"][-1], [0.5, 1.0])
            continue
        with pytest.raises(Exception, match=r"c\.out \(shape \(2,\)\) -> b\.u \(expects "
                                            r"shape \(3,\)\)"):
            sim.run()
