"""Atomic subsystems inlined in their parent's generated step function
(:mod:`cosim.fastpath.nested`): bit for bit the reference interpreter
(``SimulationConfig(fast=False)``: parent and inner plans interpreted), on models built for
the test: continuous subsystems on RK4 at their own step, discrete PI controllers with
feedthrough, several rates, nested atomic subsystems, an atomic subsystem taking several
inner ticks per hit; checkpoints and rollbacks; co-simulation units holding them; and the
shapes that stay on the interpreter (events, mode switches)."""

import re
from dataclasses import replace

import numpy as np
import pytest

from blocks import DiscreteIntegrator, Gain, Relay, Sine, Sum, UnitDelay
from blocks.continuous import Integrator
from cosim import Block, CosimConfig, Model, SimulationConfig, Simulator, simulation
from cosim.model.block import Kernel
from cosim.model.diagram import Inport, Outport, Subsystem
from cosim.model.events import Scheduled
from cosim.run import checkpoint

H = 0.01


class LastTime(Block):
    """``out[k] = t[k-1]``: the time of its previous sample (its state update reads the
    time: inlined, the inner plan's own)."""

    input_ports = ()
    direct_feedthrough = False

    def initialize(self, t0):
        self.state["x"] = np.array([-1.0])
        self.outputs["out"] = self.state["x"]

    def output_update(self, t, dt):
        self.outputs["out"] = self.state["x"]

    def state_update(self, t, dt):
        self.next_state["x"] = np.array([t * 1.0])

    def kernel(self):
        return Kernel({"out": "x_x"}, {"x": "t * 1.0"})


def plant(name="plant", dt=H / 4, k=-4.0, c=-0.4):
    """A mass-spring-damper (x'' = u + k x + c x'), continuous, on RK4 at its own step."""
    p = Subsystem(name, atomic=True, dt=dt, solver="RK4")
    p.add(Inport("u"), Integrator("v", 0.0), Integrator("x", 0.1), Gain("k", k),
          Gain("c", c), Sum("f", "+++"), Outport("y"))
    p.connect("u.out", "f.in1")
    p.connect("k.out", "f.in2")
    p.connect("c.out", "f.in3")
    p.connect("f.out", "v.in")
    p.connect("v.out", "x.in", "c.in")
    p.connect("x.out", "k.in", "y.in")
    return p


def pi(name="ctrl", dt=H, kp=2.0, ki=1.5, **kw):
    """A discrete PI controller with direct feedthrough (backward-Euler integrator)."""
    c = Subsystem(name, atomic=True, dt=dt, **kw)
    c.add(Inport("e"), Gain("kp", kp), DiscreteIntegrator("i", ki, method="backward"),
          Sum("s", "++"), Outport("u"))
    c.connect("e.out", "kp.in", "i.in")
    c.connect("kp.out", "s.in1")
    c.connect("i.out", "s.in2")
    c.connect("s.out", "u.in")
    return c


def sensor(name="sensor", dt=H / 2):
    """A feedthrough filter at its own rate: ``0.5 * (0.9 x[k] + x[k-1])``."""
    s = Subsystem(name, atomic=True, dt=dt)
    s.add(Inport("x"), Gain("g", 0.9), UnitDelay("d", 0.0), Sum("a", "++"), Gain("h", 0.5),
          Outport("y"))
    s.connect("x.out", "g.in", "d.in")
    s.connect("g.out", "a.in1")
    s.connect("d.out", "a.in2")
    s.connect("a.out", "h.in")
    s.connect("h.out", "y.in")
    return s


def loop(ctrl=None):
    """Reference -> error -> PI -> plant -> sensor -> error: three atomic subsystems at
    three rates in one feedback loop (the controller's input is computed before it, the
    plant's after it: its state update sees a newer input than its output did)."""
    m = Model("loop3")
    m.add(plant(), ctrl or pi(), sensor(), Sine("ref", frequency=0.5, sample_time=H),
          Sum("err", "+-"))
    m.connect("ref.out", "err.in1")
    m.connect("sensor.y", "err.in2")
    m.connect("err.out", "ctrl.e")
    m.connect("ctrl.u", "plant.u")
    m.connect("plant.y", "sensor.x")
    return m


def nested():
    """An atomic controller holding an atomic PI and an atomic continuous actuator lag (four
    RK4 ticks of its own per hit), inside a loop with an atomic plant."""
    outer = Subsystem("ctrl", atomic=True, dt=H / 2)
    act = Subsystem("act", atomic=True, dt=H / 2, solver="RK4", options={"dt": H / 8})
    act.add(Inport("u"), Integrator("z", 0.0), Gain("w", -20.0), Gain("b", 20.0),
            Sum("s", "++"), Outport("y"))
    act.connect("u.out", "b.in")
    act.connect("b.out", "s.in1")
    act.connect("w.out", "s.in2")
    act.connect("s.out", "z.in")
    act.connect("z.out", "w.in", "y.in")
    outer.add(Inport("e"), pi("pi", dt=H), act, Gain("lim", 1.0), Outport("u"))
    outer.connect("e.out", "pi.e")
    outer.connect("pi.u", "act.u")
    outer.connect("act.y", "lim.in")
    outer.connect("lim.out", "u.in")
    return loop(ctrl=outer)


def multi_tick():
    """An atomic subsystem whose inner step is finer than its rate in the parent: each hit
    runs four inner ticks (and inner blocks at half the inner rate, one with an offset)."""
    m = loop()
    fine = Subsystem("fine", atomic=True, dt=H, options={"dt": H / 4}, solver="RK4")
    fine.add(Inport("u"), Integrator("q", 0.0), Gain("g", -3.0), Sum("s", "++"),
             UnitDelay("d", 0.0, sample_time=H / 2),
             UnitDelay("o", 0.5, sample_time=(H / 2, H / 4)),
             LastTime("lt"), Outport("y"), Outport("yd"), Outport("yo"), Outport("ylt"))
    fine.connect("u.out", "s.in1")
    fine.connect("g.out", "s.in2")
    fine.connect("s.out", "q.in")
    fine.connect("q.out", "g.in", "y.in", "d.in")
    fine.connect("d.out", "yd.in", "o.in")
    fine.connect("o.out", "yo.in")
    fine.connect("lt.out", "ylt.in")
    m.add(fine, Sum("both", "++++"))
    m.connect("err.out", "fine.u")
    m.connect("fine.y", "both.in1")
    m.connect("fine.yd", "both.in2")
    m.connect("fine.yo", "both.in3")
    m.connect("fine.ylt", "both.in4")
    return m


def edges():
    """Atomic subsystems of every boundary: a source (no inputs, a sine inside), a sink (no
    outputs), a pass-through (its output is its input), beside a parent with continuous
    state of its own (on the parent's RK4) fed by and feeding them."""
    m = Model("edges")
    src = Subsystem("src", atomic=True, dt=H / 2)
    src.add(Sine("s", frequency=1.5), Gain("g", 0.7), Outport("y"))
    src.connect("s.out", "g.in")
    src.connect("g.out", "y.in")
    sink = Subsystem("sink", atomic=True, dt=H)
    sink.add(Inport("u"), UnitDelay("d", 0.0), Gain("g", 2.0))
    sink.connect("u.out", "d.in")
    sink.connect("d.out", "g.in")
    thru = Subsystem("thru", atomic=True, dt=H / 4)
    thru.add(Inport("u"), Outport("y"))
    thru.connect("u.out", "y.in")
    m.add(src, sink, thru, Integrator("x", 0.2), Gain("k", -1.5), Sum("s", "++"))
    m.connect("src.y", "s.in1")
    m.connect("k.out", "s.in2")
    m.connect("s.out", "x.in")
    m.connect("x.out", "thru.u")
    m.connect("thru.y", "k.in", "sink.u")
    return m


MODELS = {"loop": loop, "nested": nested, "multi_tick": multi_tick, "edges": edges}


def cfg(**kw):
    return SimulationConfig(dt=H / 4, t_end=2.0, solver="RK4", **kw)


def assert_same_logs(ref, logs):
    assert sorted(ref) == sorted(logs)
    for key in ref:
        np.testing.assert_array_equal(ref[key], logs[key], err_msg=key)
        np.testing.assert_array_equal(ref.time_of(key), logs.time_of(key), err_msg=key)


def atomics(sim):
    """Every atomic subsystem's simulator inside ``sim`` (nested ones too)."""
    found = []
    for _, blk in sim.atomics:
        found += [blk.inner, *atomics(blk.inner)]
    return found


@pytest.mark.parametrize("name", sorted(MODELS))
def test_inlined_atomic_subsystems_are_bit_identical_to_the_interpreter(name):
    ref_sim = Simulator(MODELS[name](), cfg(fast=False))
    ref = ref_sim.run()
    sim = Simulator(MODELS[name](), cfg())
    logs = sim.run()
    assert ref_sim.fast_path is None
    assert sim.fast_path is not None, "the parent runs on the generated path"
    assert re.search(r"\ba\d+_k = ", sim.fast_path.source), "its atomic subsystems are inlined"
    assert_same_logs(ref, logs)
    # Every inner simulator ends where the interpreted one does: tick, values, counters.
    for a, b in zip(atomics(ref_sim), atomics(sim)):
        assert a.k == b.k
        sa, sb = a.state.snapshot(), b.state.snapshot()
        np.testing.assert_array_equal(sa["X"], sb["X"])
        for path, vals in sa["blocks"].items():
            for part in ("state", "outputs"):
                for key, v in vals[part].items():
                    np.testing.assert_array_equal(v, sb["blocks"][path][part][key],
                                                  err_msg=f"{path} {part} {key}")
        assert a.solver_stats.get("naccept") == b.solver_stats.get("naccept")


def test_stepping_in_pieces_equals_one_run():
    """advance_to in pieces (a unit's macro steps), step() and output_phase() in between."""
    ref = Simulator(nested(), cfg(fast=False)).run()
    sim = Simulator(nested(), cfg())
    sim.initialize()
    for k in (1, 2, 7, 8, 40, 333):
        sim.advance_to(k)
        sim.output_phase()
    while sim.k < 500:
        sim.step()
    logs = sim.run()
    assert_same_logs(ref, logs)


def test_checkpoint_and_rollback_with_inlined_atomic_subsystems(tmp_path):
    ref = Simulator(nested(), cfg()).run()
    sim = Simulator(nested(), cfg())
    sim.run(t_end=0.73)
    assert sim.fast_path is not None
    sim.save_checkpoint(tmp_path / "cp")
    kept = checkpoint.snapshot(sim)
    sim.run(t_end=1.3)
    checkpoint.restore_snapshot(sim, kept)        # rollback: logs cut back, values reloaded
    assert_same_logs(ref, sim.run())
    other = Simulator(nested(), cfg())
    other.load_checkpoint(tmp_path / "cp")
    logs = other.run()
    for key in ref:
        n = len(logs[key])
        assert n > 0, key
        np.testing.assert_array_equal(ref[key][-n:], logs[key], err_msg=key)


def test_log_selection_inside_inlined_atomic_subsystems():
    log = ("ctrl/act/z.out", "plant/x.out", "err.out")
    ref = Simulator(nested(), cfg(fast=False, log=log)).run()
    logs = Simulator(nested(), cfg(log=log)).run()
    assert sorted(logs) == sorted(log)
    assert_same_logs(ref, logs)


def test_units_holding_atomic_subsystems_co_simulate_as_interpreted():
    """A co-simulation unit whose plan inlines atomic subsystems (the nested controller)."""
    def run(fast):
        m = nested()
        config = replace(cfg(fast=fast), t_end=1.0, cosim=CosimConfig(H=H))
        co = simulation(m, config)
        try:
            return co.run()
        finally:
            co.close()
    assert_same_logs(run(False), run(True))


def test_events_and_mode_switches_keep_the_interpreter_and_its_numbers():
    """A parent with a scheduled event runs on the interpreter (its inner plans on their
    own generated code); an atomic subsystem with a relay on continuous state keeps its
    own interpreter and its parent with it. Both as with fast=False."""
    def with_event():
        m = loop()
        m.add_event(Scheduled("kick", times=[0.2555], callback=lambda sim, t: None))
        return m

    def with_relay():
        m = loop()
        r = Subsystem("hyst", atomic=True, dt=H, solver="RK4")
        r.add(Inport("u"), Integrator("q", 0.0), Relay("r", 0.05, -0.05, 1.0, -1.0),
              Outport("y"))
        r.connect("u.out", "q.in")
        r.connect("q.out", "r.in")
        r.connect("r.out", "y.in")
        m.add(r)
        m.connect("err.out", "hyst.u")
        return m

    for make in (with_event, with_relay):
        ref = Simulator(make(), cfg(fast=False)).run()
        sim = Simulator(make(), cfg())
        assert_same_logs(ref, sim.run())
        assert sim.fast_path is None
