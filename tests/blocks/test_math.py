"""Math operators against numpy, their run-time errors, and bad parameters."""

from __future__ import annotations

import numpy as np
import pytest

from blocks import Abs, Constant, Gain, MathFunction, MinMax, Product, Step, Sum
from cosim import Model, ModelError, SimulationConfig, SimulationError, Simulator

from tests.blocks.support import output

rng = np.random.default_rng(7)
U1, U2, U3 = rng.normal(size=(3, 12))


def test_gain_scalar_and_matrix():
    np.testing.assert_array_equal(output(Gain("g", -2.5), {"in": U1})[:, 0], -2.5 * U1)
    K = np.array([[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]])
    u = rng.normal(size=(12, 2))
    out = output(Gain("g", K), {"in": u})
    np.testing.assert_allclose(out, u @ K.T, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("signs", ["+", "-", "+-", "-+-"])
def test_sum_accumulates_signed_inputs(signs):
    inputs = {f"in{i + 1}": u for i, u in enumerate((U1, U2, U3)[:len(signs)])}
    expected = np.zeros(12)
    for s, u in zip(signs, inputs.values()):
        expected = expected + u if s == "+" else expected - u
    np.testing.assert_array_equal(output(Sum("s", signs), inputs)[:, 0], expected)


@pytest.mark.parametrize("ops, expected", [
    ("**", U1 * U2),
    ("*/", U1 / U2),
    ("/", 1.0 / U1),
    ("/*/", 1.0 / U1 * U2 / U3),
    ("***", U1 * U2 * U3),
])
def test_product_is_element_wise_left_to_right(ops, expected):
    inputs = {f"in{i + 1}": u for i, u in enumerate((U1, U2, U3)[:len(ops)])}
    np.testing.assert_array_equal(output(Product("p", ops), inputs)[:, 0], expected)


def test_product_broadcasts_a_scalar_over_a_vector():
    v = rng.normal(size=(12, 3))
    out = output(Product("p", "*/"), {"in1": v, "in2": U1})
    np.testing.assert_array_equal(out, v / U1[:, None])


@pytest.mark.parametrize("fast", [False, True])
def test_product_division_by_zero_stops_the_run(fast):
    m = Model("div")
    m.add(Constant("a", 1.0), Constant("b", 0.0), Product("p", "*/"))
    m.connect("a.out", "p.in1")
    m.connect("b.out", "p.in2")
    with pytest.raises(SimulationError, match="division by zero") as err:
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, fast=fast)).run()
    assert err.value.t == 0.0
    if not fast:       # the fast path names the time, the interpreter also the port
        assert err.value.block == "p" and "p.in2" in str(err.value)


def test_abs():
    np.testing.assert_array_equal(output(Abs("a"), {"in": U1})[:, 0], np.abs(U1))


FUNCTIONS = {
    "exp": np.exp, "log": np.log, "log10": np.log10, "log2": np.log2, "sqrt": np.sqrt,
    "square": np.square, "reciprocal": np.reciprocal, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh,
}
DOMAIN = rng.uniform(0.05, 0.95, size=12)     # inside every function's domain


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_math_function_matches_numpy(function):
    ufunc = FUNCTIONS[function]
    # Scalar signals use Python's math module: equal to numpy's to the last bit or so.
    scalar = output(MathFunction("f", function), {"in": DOMAIN})[:, 0]
    np.testing.assert_allclose(scalar, ufunc(DOMAIN), rtol=4e-16, atol=0)
    # Vector signals use numpy's ufunc itself.
    v = np.column_stack([DOMAIN, DOMAIN[::-1]])
    np.testing.assert_array_equal(output(MathFunction("f", function), {"in": v}), ufunc(v))


@pytest.mark.parametrize("function, value", [
    ("log", 0.0), ("log", -1.0), ("sqrt", -1.0), ("reciprocal", 0.0), ("asin", 2.0),
    ("acos", -1.5), ("exp", 1000.0), ("cosh", 1000.0), ("log10", -2.0),
])
@pytest.mark.parametrize("shape", [(1,), (2,)])
def test_math_function_domain_errors_stop_the_run(function, value, shape):
    m = Model("domain")
    m.add(Constant("c", np.full(shape, value)), MathFunction("f", function))
    m.connect("c.out", "f.in")
    with pytest.raises(SimulationError) as err:
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, fast=False)).run()
    assert err.value.block == "f" and function in str(err.value)


def test_math_function_accepts_a_callable():
    out = output(MathFunction("f", lambda u: 2.0 * u + 1.0), {"in": U1})
    np.testing.assert_array_equal(out[:, 0], 2.0 * U1 + 1.0)


def build(cls, **kw):
    """A factory of ``cls(**kw)``, so the construction happens inside the test."""
    return lambda: cls(**kw)


@pytest.mark.parametrize("make, param", [
    (build(Gain, name="g", k=[1.0, 2.0]), "k"),
    (build(Sum, name="g", signs="+*"), "signs"),
    (build(Sum, name="g", signs=""), "signs"),
    (build(Product, name="g", ops="*+"), "ops"),
    (build(Product, name="g", ops=2), "ops"),
    (build(MathFunction, name="g", function="gamma"), "function"),
    (build(MathFunction, name="g", function=None), "function"),
])
def test_bad_parameters_name_the_block_and_parameter(make, param):
    with pytest.raises(ModelError) as err:
        make()
    msg = str(err.value)
    assert "'g'" in msg and f": {param} " in msg, msg


def test_product_division_by_zero_at_the_last_tick_of_a_fast_run():
    m = Model("div_last")
    m.add(Constant("a", 1.0), Step("b", 1.0, 1.0, 0.0), Product("p", "*/"))
    m.connect("a.out", "p.in1")
    m.connect("b.out", "p.in2")
    with pytest.raises(SimulationError, match="division by zero"):
        Simulator(m, SimulationConfig(dt=0.1, t_end=1.0, fast=True)).run()


@pytest.mark.parametrize("function, reduce", [("max", np.maximum), ("min", np.minimum)])
def test_minmax_is_the_element_wise_extreme(function, reduce):
    rng = np.random.default_rng(5)
    ins = {f"in{i + 1}": rng.uniform(-2, 2, (20, 2)) for i in range(3)}
    out = output(MinMax("m", function, 3), ins)
    np.testing.assert_array_equal(out, reduce(reduce(ins["in1"], ins["in2"]), ins["in3"]))
    scalar = output(MinMax("m", function, 3), {k: v[:, 0] for k, v in ins.items()})[:, 0]
    np.testing.assert_array_equal(scalar, out[:, 0])


def test_minmax_selects_like_python_and_refuses_bad_parameters():
    # max(a, b) is b only if b > a: a NaN in a later input is passed over (Python's rule).
    out = output(MinMax("m"), {"in1": [1.0, np.nan, 0.0], "in2": [np.nan, 2.0, -0.0]})[:, 0]
    assert out[0] == 1.0 and np.isnan(out[1]) and str(out[2]) == "0.0"
    with pytest.raises(ModelError, match="function"):
        MinMax("m", "mean")
    with pytest.raises(ModelError, match="n_inputs"):
        MinMax("m", "max", 0)
