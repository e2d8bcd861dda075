"""Lookup2D against scipy's RegularGridInterpolator (method 'linear'), its two spellings
(Python floats and numpy) bit for bit, a model file, and bad parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

from blocks import Lookup2D
from cosim import ModelError

from tests.blocks.support import assert_same_bits, output

rng = np.random.default_rng(11)
X1 = np.array([-2.0, -0.5, 0.0, 1.0, 2.5])
X2 = np.array([0.0, 0.3, 1.0, 4.0])
TABLE = rng.normal(size=(5, 4))
INSIDE = np.column_stack([rng.uniform(-2.0, 2.5, 60), rng.uniform(0.0, 4.0, 60)])
NODES = np.array([(a, b) for a in X1 for b in X2])
OUTSIDE = np.array([(-5.0, 1.0), (7.0, 2.0), (0.5, -3.0), (0.5, 9.0), (-4.0, -1.0),
                    (3.0, 5.0), (-3.0, 6.0), (9.0, -2.0)])


def lookup(points, extrapolation="clip"):
    return output(Lookup2D("l", X1, X2, TABLE, extrapolation),
                  {"in1": points[:, 0], "in2": points[:, 1]})[:, 0]


def test_inside_the_grid_it_is_scipys_linear_interpolation():
    points = np.vstack([INSIDE, NODES])
    want = RegularGridInterpolator((X1, X2), TABLE, method="linear")(points)
    np.testing.assert_allclose(lookup(points), want, rtol=1e-13, atol=1e-14)


def test_at_the_nodes_it_is_the_table():
    np.testing.assert_array_equal(lookup(NODES), TABLE.ravel())


def test_clip_holds_the_edges():
    clipped = np.column_stack([np.clip(OUTSIDE[:, 0], X1[0], X1[-1]),
                               np.clip(OUTSIDE[:, 1], X2[0], X2[-1])])
    want = RegularGridInterpolator((X1, X2), TABLE, method="linear")(clipped)
    np.testing.assert_allclose(lookup(OUTSIDE), want, rtol=1e-13, atol=1e-14)


def test_linear_extends_the_edge_cells():
    rgi = RegularGridInterpolator((X1, X2), TABLE, method="linear", bounds_error=False,
                                  fill_value=None)
    points = np.vstack([OUTSIDE, INSIDE])
    np.testing.assert_allclose(lookup(points, "linear"), rgi(points), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("extrapolation", ["clip", "linear"])
def test_nan_gives_nan(extrapolation):
    out = lookup(np.array([(math.nan, 1.0), (0.5, math.nan)]), extrapolation)
    assert np.isnan(out).all()


@pytest.mark.parametrize("extrapolation", ["clip", "linear"])
def test_arrays_compute_what_each_point_computes(extrapolation):
    """An input of many elements (numpy) gives, element by element, the bits of a (1,)
    input (Python floats, the kernel's operations)."""
    points = np.vstack([INSIDE, NODES, OUTSIDE])
    block = Lookup2D("l", X1, X2, TABLE, extrapolation)
    whole = output(block, {"in1": points[:, 0][None, :], "in2": points[:, 1][None, :]})
    assert_same_bits(whole[0], lookup(points, extrapolation))


def test_a_model_file_builds_it():
    from cosim import modelfile
    text = """
model: lut2
blocks:
  a: {type: Constant, params: {value: 0.25}}
  b: {type: Constant, params: {value: 2.0}}
  l:
    type: Lookup2D
    params: {breakpoints1: [0.0, 1.0], breakpoints2: [0.0, 4.0], table: [[0.0, 4.0], [1.0, 5.0]]}
connections:
  - [a.out, l.in1]
  - [b.out, l.in2]
simulation: {dt: 0.1, t_end: 0.2}
"""
    import tempfile
    from pathlib import Path
    from cosim import Simulator
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "lut2.yaml"
        path.write_text(text)
        m = modelfile.load(path)
    logs = Simulator(m, m.simulation).run()
    assert logs["l.out"][-1, 0] == 0.75 * 2.0 + 0.25 * 3.0


def build(cls, **kw):
    return lambda: cls(**kw)


@pytest.mark.parametrize("make, param", [
    (build(Lookup2D, name="n", breakpoints1=[0.0, 0.0], breakpoints2=[0.0, 1.0],
           table=[[1, 2], [3, 4]]), "breakpoints1"),
    (build(Lookup2D, name="n", breakpoints1=[0.0, 1.0], breakpoints2=[1.0],
           table=[[1], [3]]), "breakpoints2"),
    (build(Lookup2D, name="n", breakpoints1=[0.0, 1.0], breakpoints2=[0.0, 1.0],
           table=[[1, 2, 3], [3, 4, 5]]), "table"),
    (build(Lookup2D, name="n", breakpoints1=[0.0, 1.0], breakpoints2=[0.0, 1.0],
           table=[1, 2]), "table"),
    (build(Lookup2D, name="n", breakpoints1=[0.0, 1.0], breakpoints2=[0.0, 1.0],
           table=[[1, 2], [3, np.nan]]), "table"),
    (build(Lookup2D, name="n", breakpoints1=[0.0, 1.0], breakpoints2=[0.0, 1.0],
           table=[[1, 2], [3, 4]], extrapolation="hold"), "extrapolation"),
])
def test_bad_parameters_name_the_block_and_the_parameter(make, param):
    with pytest.raises(ModelError, match=rf"Lookup2D 'n': {param}"):
        make()
