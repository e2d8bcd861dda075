"""Mux and Demux: concatenation and splitting, declared widths, bad parameters."""

from __future__ import annotations

import numpy as np
import pytest

from blocks import Constant, Demux, Mux
from cosim import Model, ModelError, SimulationConfig, SimulationError, Simulator

from tests.blocks.support import Feed, run_block

rng = np.random.default_rng(5)


def test_mux_concatenates_flattened_inputs_in_order():
    a, b, c = rng.normal(size=(4, 1)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2, 2))
    logs, _ = run_block(Mux("m", 3), {"in1": a, "in2": b, "in3": c})
    np.testing.assert_array_equal(logs["m.out"], np.hstack([a, b, c.reshape(4, 4)]))


def test_mux_sizes_declare_the_input_widths():
    m = Model("mux")
    m.add(Constant("a", [1.0, 2.0]), Constant("b", [3.0]), Mux("m", sizes=[1, 2]))
    m.connect("a.out", "m.in1")
    m.connect("b.out", "m.in2")
    with pytest.raises(SimulationError, match=r"a.out \(shape \(2,\)\) -> m.in1"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=0.2)).run()


@pytest.mark.parametrize("make, widths", [
    (lambda: Demux("d", 3), [2, 2, 2]),
    (lambda: Demux("d", sizes=[1, 4, 1]), [1, 4, 1]),
    (lambda: Demux("d", 1), [6]),
])
def test_demux_splits_consecutive_pieces(make, widths):
    u = rng.normal(size=(4, 6))
    logs, _ = run_block(make(), {"in": u})
    edges = np.cumsum([0] + widths)
    for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        np.testing.assert_array_equal(logs[f"d.out{i + 1}"], u[:, a:b])


def test_demux_then_mux_is_identity():
    u = rng.normal(size=(5, 5))
    m = Model("roundtrip")
    m.add(Feed("f", u), Demux("d", sizes=[2, 3]), Mux("m", sizes=[2, 3]))
    m.connect("f.out", "d.in")
    m.connect("d.out1", "m.in1")
    m.connect("d.out2", "m.in2")
    logs = Simulator(m, SimulationConfig(dt=0.1, t_end=0.4)).run()
    np.testing.assert_array_equal(logs["m.out"], u)


def test_demux_reports_an_input_that_does_not_split_evenly():
    with pytest.raises(SimulationError, match=r"d.in has shape \(5,\).*3 equal pieces"):
        run_block(Demux("d", 3), {"in": np.zeros((2, 5))})


def build(cls, **kw):
    """A factory of ``cls(**kw)``, so the construction happens inside the test."""
    return lambda: cls(**kw)


@pytest.mark.parametrize("make, param", [
    (build(Mux, name="r", n_inputs=0), "n_inputs"),
    (build(Mux, name="r", n_inputs=2.5), "n_inputs"),
    (build(Mux, name="r", sizes=[]), "sizes"),
    (build(Mux, name="r", sizes=[2, 0]), "sizes"),
    (build(Mux, name="r", n_inputs=3, sizes=[1, 2]), "n_inputs"),
    (build(Demux, name="r", n_outputs=-1), "n_outputs"),
    (build(Demux, name="r", sizes="12"), "sizes"),
])
def test_bad_parameters_name_the_block_and_parameter(make, param):
    with pytest.raises(ModelError) as err:
        make()
    msg = str(err.value)
    assert "'r'" in msg and f": {param} " in msg, msg
