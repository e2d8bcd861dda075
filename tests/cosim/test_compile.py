"""Compilation: every problem reported at once, loops with their path, plans and tasks."""

import pytest

from blocks import Constant, Gain, Recorder, Sine, Sum, UnitDelay
from cosim import Block, CompileError, Model, Simulator, SimulationConfig, compile_model


def test_five_problems_reported_in_one_error():
    m = Model("broken")
    m.add(Sine("src"), Gain("g", 2.0), Gain("g2", 1.0), Sum("s", "+-"),
          UnitDelay("slow", sample_time=0.015), Recorder("rec"))
    m.connect("src.out", "g.in", "s.in1")
    m.connect("nosuch.out", "g2.in")            # 1: unknown block
    m.connect("src.out", "s.in2")
    m.connect("g.out", "s.in2")                 # 2: s.in2 driven twice
    m.connect("g.oops", "rec.in")               # 3: unknown port
    # 4: slow.in is never driven; 5: slow's sample time is not a multiple of dt
    with pytest.raises(CompileError) as exc:
        Simulator(m, SimulationConfig(dt=0.01, t_end=1.0))
    err = exc.value
    assert len(err.problems) == 5, err
    text = str(err)
    for needle in ("'nosuch'", "s.in2 is driven 2 times", "no output 'oops'",
                   "slow.in is not connected", "sample time 0.015"):
        assert needle in text
    assert "5 problems" in text


def test_algebraic_loop_reported_with_path_and_remedy():
    m = Model("loop")
    m.add(Constant("c", 1.0), Sum("s", "++"), Gain("a", 0.5), Gain("b", 2.0))
    m.connect("c.out", "s.in1")
    m.connect("s.out", "a.in")
    m.connect("a.out", "b.in")
    m.connect("b.out", "s.in2")
    with pytest.raises(CompileError) as exc:
        compile_model(m, 0.1)
    (problem,) = exc.value.problems
    assert "algebraic loop: s -> a -> b -> s" in problem
    assert "UnitDelay" in problem


def test_loop_broken_by_unit_delay_compiles_into_levels():
    m = Model("ok")
    m.add(Constant("c", 1.0), Sum("s", "++"), Gain("a", 0.5), UnitDelay("d"))
    m.connect("c.out", "s.in1")
    m.connect("s.out", "a.in")
    m.connect("a.out", "d.in")
    m.connect("d.out", "s.in2")
    plan = compile_model(m, 0.1)
    assert [[b.name for b in lv] for lv in plan.levels] == [["c", "d"], ["s"], ["a"]]
    assert [b.name for b in plan.blocks] == ["c", "d", "s", "a"]
    assert "level" in plan.table() and "UnitDelay" in plan.table()
    dot = plan.to_dot()
    assert dot.startswith('digraph "ok"') and '"a" -> "d"' in dot


def test_wrong_direction_and_malformed_refs_are_explained():
    m = Model("dir")
    m.add(Constant("c"), Gain("g"))
    m.connect("g.in", "c.out")
    m.connect("c", "g.in")
    with pytest.raises(CompileError) as exc:
        compile_model(m, 0.1)
    text = str(exc.value)
    assert "wrong way" in text and "'c' is not of the form 'block.port'" in text


def test_duplicate_names_and_unknown_log_signal():
    m = Model("dup")
    m.add(Constant("c"), Constant("c"), Terminator_("t"))
    m.connect("c.out", "t.in")
    with pytest.raises(CompileError) as exc:
        compile_model(m, 0.1, log=("c.nope",))
    text = str(exc.value)
    assert "two blocks are named 'c'" in text and "log: 'c.nope'" in text


class Terminator_(Block):
    output_ports = ()
    direct_feedthrough = False


def test_tasks_grouped_by_sample_time_with_offsets():
    m = Model("rates")
    m.add(Constant("c"), UnitDelay("d1", sample_time=0.05), UnitDelay("d2", sample_time=(0.05, 0.02)))
    m.connect("c.out", "d1.in", "d2.in")
    plan = compile_model(m, 0.01)
    assert [(t.period, t.offset) for t in plan.tasks] == [(1, 0), (5, 0), (5, 2)]
    assert [plan.tasks[2].active(k) for k in range(8)] == [False, False, True] + [False] * 4 + [True]


@pytest.mark.parametrize("bad", [
    "class B(Block):\n    direct_feedthrough = 'yes'\n    def output_update(self, t, dt): pass",
    "class B(Block):\n    input_ports = ['in']\n    def output_update(self, t, dt): pass",
    "class B(Block):\n    def output_update(self, t): pass",
    "class B(Block):\n    pass",
    "class B(Block):\n    sample_time = -1\n    def output_update(self, t, dt): pass",
])
def test_block_declarations_are_checked_when_the_class_is_defined(bad):
    with pytest.raises(TypeError, match="block class B"):
        exec(bad, {"Block": Block})


def test_an_unevaluated_block_wired_to_others_is_reported_not_an_attribute_error():
    # Before: a deferred block (parameter expressions not yet evaluated, or arguments its
    # class does not take) that was connected crashed compile_model with AttributeError
    # ('output_names') instead of naming the block: sweep(ensemble=...) checks the model so.
    from blocks import DeadZone
    m = Model("deferred", parameters={"w": 0.1})
    m.add(Constant("c", 1.0), DeadZone("dz", start="=-w", end="=w"), Gain("g", 1.0))
    m.connect("c.out", "dz.in")
    m.connect("dz.out", "g.in")
    with pytest.raises(CompileError) as exc:
        compile_model(m, 0.1, None)
    assert "dz: its parameters are expressions that were not evaluated" in str(exc.value)
