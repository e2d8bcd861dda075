"""Tests of cosim.model.expr: values, scopes, contexts, refusals and resource bounds."""

from __future__ import annotations

import math
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import ModelError
from cosim.model.expr import (ExpressionError, Limits, Workspace, evaluate_context,
                              evaluate_expression, is_expression)

PLANT = {"k": 4.0, "m": 2.0, "c": 0.5, "zeta": 0.7, "wn": 3.0, "n": 3, "tau": -1.0,
         "v": np.array([1.0, 2.0, 3.0]), "A": np.array([[1.0, 2.0], [3.0, 4.0]]),
         "method": "rk45"}


# --- values --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("2*k + 1", 9.0),
    ("2*zeta*wn", 2 * 0.7 * 3.0),
    ("2 + 3*4", 14),
    ("(2 + 3)*4", 20),
    ("-2**2", -4),
    ("2**-1", 0.5),
    ("2**3**2", 512),
    ("7 // 2", 3),
    ("-7 // 2", -4),
    ("7 % 3", 1),
    ("7 / 2", 3.5),
    ("10**20", 10**20),
    ("1 < 2 < 3", True),
    ("3 > 2 > 2", False),
    ("not 1 < 2", False),
    ("n == 3 and k > 1", True),
    ("0 or k", 4.0),
    ("True + 1", 2),
    ("sqrt(k/m)", math.sqrt(2.0)),
    ("sin(pi/2)", 1.0),
    ("exp(0) + log(e) + log10(100) + log2(8)", 7.0),
    ("hypot(3, 4)", 5.0),
    ("arctan2(1, 1)", math.pi / 4),
    ("abs(-3)", 3),
    ("floor(2.7) + ceil(2.2)", 5.0),
    ("round(2.567, 2)", 2.57),
    ("min(3, 1, 2) + max(3, 1, 2)", 4),
    ("min(v) + max(v) + sum(v) + prod(v) + mean(v)", 18.0),
    ("clip(5, 0, 1)", 1),
    ("sign(-2.5)", -1.0),
    ("rad2deg(deg2rad(90))", 90.0),
    ("det(A)", -2.0),
    ("v[0] + v[-1]", 4.0),
    ("A[1, 0]", 3.0),
    ("A[1][0]", 3.0),
    ("tau if tau > 0 else 1", 1),
    ("1/tau if tau != 0 else 0", -1.0),
    ("1/n0 if n0 != 0 else 0", 0),           # the untaken branch is never evaluated
    ("='+-'", "+-"),
    ("method == 'rk45'", True),
    ("'rk4' if n > 3 else method", "rk45"),
    ("=inf", math.inf),
])
def test_scalar_values(text, expected):
    result = evaluate_expression(text, [PLANT, {"n0": 0}])
    assert result == pytest.approx(expected) if isinstance(expected, float) else result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize("text, expected", [
    ("[[0, 1], [-k/m, -c/m]]", [[0.0, 1.0], [-2.0, -0.25]]),
    ("(1, 2)", [1.0, 2.0]),
    ("[]", np.zeros(0)),
    ("A @ [1, 1]", [3.0, 7.0]),
    ("A @ A", [[7.0, 10.0], [15.0, 22.0]]),
    ("2*v + 1", [3.0, 5.0, 7.0]),
    ("v**2", [1.0, 4.0, 9.0]),
    ("-v", [-1.0, -2.0, -3.0]),
    ("v > 1", [0.0, 1.0, 1.0]),
    ("v[1:]", [2.0, 3.0]),
    ("v[::-1]", [3.0, 2.0, 1.0]),
    ("A[:, 0]", [1.0, 3.0]),
    ("eye(2)", np.eye(2)),
    ("eye(2, 3)", np.eye(2, 3)),
    ("zeros(n)", np.zeros(3)),
    ("zeros((2, 3))", np.zeros((2, 3))),
    ("ones([2, 1])", np.ones((2, 1))),
    ("linspace(0, 1, 5)", np.linspace(0, 1, 5)),
    ("arange(3)", [0.0, 1.0, 2.0]),
    ("arange(1, 2, 0.5)", [1.0, 1.5]),
    ("diag([1, 2])", np.diag([1.0, 2.0])),
    ("diag(A)", [1.0, 4.0]),
    ("array(v)", [1.0, 2.0, 3.0]),
    ("transpose(A)", [[1.0, 3.0], [2.0, 4.0]]),
    ("inv(A) @ A", np.eye(2)),
    ("sum(A, 0)", [4.0, 6.0]),
    ("min(v, 2)", [1.0, 2.0, 2.0]),
    ("sin(zeros(2))", [0.0, 0.0]),
    ("clip(v, 1.5, 2.5)", [1.5, 2.0, 2.5]),
    ("[v, 2*v]", [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]),
])
def test_array_values_are_float_arrays(text, expected):
    result = evaluate_expression(text, PLANT)
    assert isinstance(result, np.ndarray) and result.dtype == np.float64
    np.testing.assert_allclose(result, np.asarray(expected, dtype=float), atol=1e-12)


def test_array_results_are_fresh_copies():
    scope = {"v": np.array([1.0, 2.0])}
    result = evaluate_expression("v", scope)
    result[0] = 99.0
    assert scope["v"][0] == 1.0


@pytest.mark.parametrize("value, expected", [
    ("=2*k", True), ("= k", True), ("+-", False), ("2*k", False), (" =k", False), ("", False),
    (3.0, False), (None, False), (["=k"], False),
])
def test_is_expression(value, expected):
    assert is_expression(value) is expected


def test_prefix_is_optional_for_evaluate():
    assert evaluate_expression("=2*k + 1", {"k": 3.0}) == evaluate_expression("2*k + 1", {"k": 3.0}) == 7.0


@pytest.mark.parametrize("expression", [3.0, None, ["=k"]])
def test_non_string_expression_is_a_type_error(expression):
    with pytest.raises(TypeError, match="expression must be a str"):
        evaluate_expression(expression, {"k": 1.0})


# --- scopes, contexts, workspaces ----------------------------------------------------------

@pytest.mark.parametrize("scopes, expected", [
    ({"k": 1.0}, 1.0),
    ([{"k": 1.0}, {"k": 2.0}], 2.0),
    ([{"k": 1.0}, {"k": 2.0}, {"m": 5.0}], 2.0),
    ([{"k": 1.0}, {}, {"k": 3.0}], 3.0),
])
def test_inner_scopes_shadow_outer_ones(scopes, expected):
    assert evaluate_expression("k", scopes) == expected


def test_scope_variables_shadow_constants():
    assert evaluate_expression("e", {"e": 0.1}) == 0.1


def test_context_is_evaluated_in_dependency_order():
    model = {"k": 4.0, "m": 1.0, "zeta": 0.5}
    context = {"c": "=2*zeta*wn*m", "wn": "=sqrt(k/m)", "signs": "+-", "x": [1, 2], "n": 2}
    result = evaluate_context(context, [model])
    assert list(result) == list(context)
    assert result["wn"] == 2.0 and result["c"] == 2.0
    assert result["signs"] == "+-" and result["n"] == 2
    np.testing.assert_array_equal(result["x"], [1.0, 2.0])


def test_context_entries_shadow_outer_variables():
    result = evaluate_context({"k": 10.0, "f": "=2*k"}, {"k": 1.0})
    assert result["f"] == 20.0


def test_workspace_chains_scopes():
    model = Workspace({"k": 4.0, "m": 1.0})
    plant = model.child({"wn": "=sqrt(k/m)", "m": 4.0}, path="plant")
    assert plant.evaluate("=wn*m", path="plant/spring.k") == 4.0
    assert model.evaluate("m") == 1.0
    assert evaluate_expression("wn", plant) == 1.0
    assert [dict(s) for s in plant.scopes] == [{"k": 4.0, "m": 1.0}, {"wn": 1.0, "m": 4.0}]


def test_context_reports_every_problem_with_its_path():
    context = {"a": "=b + 1", "b": "=a*2", "self": "=self + 1", "typo": "=2*kk + mm",
               "zero": "=1/0", "after": "=zero + a", "bad": "=x.y", "ok": "=k"}
    with pytest.raises(ExpressionError) as info:
        evaluate_context(context, {"k": 1.0}, path="plant")
    err = info.value
    text = str(err)
    assert err.path == "plant" and err.expression is None and len(err.problems) == 6
    assert "plant.typo = '=2*kk + mm': undefined names 'kk' (did you mean 'k'?), 'mm'" in text
    assert "dependency cycle a -> b -> a" in text
    assert "dependency cycle self -> self" in text
    assert "plant.zero = '=1/0': division by zero" in text
    assert "plant.bad = '=x.y': attribute access is not allowed" in text
    assert "depend on the variables above: plant.after" in text


@pytest.mark.parametrize("name", ["_hidden", "not valid", "lambda", 3])
def test_context_refuses_invalid_variable_names(name):
    with pytest.raises(ExpressionError, match="not a valid variable name"):
        evaluate_context({name: 1.0}, path="plant")


def test_unevaluated_expression_in_scope_is_explained():
    with pytest.raises(ExpressionError, match="unevaluated expression '=2'.*evaluate_context"):
        evaluate_expression("k + 1", {"k": "=2"})


# --- errors --------------------------------------------------------------------------------

def test_error_names_path_expression_and_remedy():
    with pytest.raises(ExpressionError) as info:
        evaluate_expression("=2*zetta*wn + kk", PLANT, path="plant/spring.k")
    err = info.value
    assert isinstance(err, ModelError)
    assert err.path == "plant/spring.k" and err.expression == "=2*zetta*wn + kk"
    assert str(err).startswith("plant/spring.k = '=2*zetta*wn + kk': undefined names 'zetta' "
                               "(did you mean 'zeta'?), 'kk' (did you mean 'k'?); defined names: "
                               "A, c, k, m, method, n, tau, v, wn, zeta")


@pytest.mark.parametrize("text, reason", [
    ("x.__class__", "attribute access"),
    ("np.linalg", "attribute access"),
    ("_secret", "names starting with '_'"),
    ("__import__('os').system('rm -rf /')", "only the allowed functions"),
    ("__import__('os')", "function '__import__' is not allowed"),
    ("open('/etc/passwd')", "function 'open' is not allowed"),
    ("eval('1')", "function 'eval' is not allowed"),
    ("getattr(k, 'real')", "function 'getattr' is not allowed"),
    ("sqr(2)", "did you mean 'sqrt'"),
    ("k()", "function 'k' is not allowed"),
    ("(lambda: 1)()", "only the allowed functions"),
    ("lambda: 1", "lambda is not allowed"),
    ("[x for x in v]", "comprehensions"),
    ("sum(x for x in v)", "comprehensions"),
    ("f'{k}'", "f-strings"),
    ("(y := 1)", "assignment"),
    ("max(*v)", "starred"),
    ("{'a': 1}", "dict literals"),
    ("{1, 2}", "set literals"),
    ("import os", "syntax error"),
    ("k +", "syntax error"),
    ("linspace(0, 1, num=5)", "positional arguments only"),
    ("sqrt(1, 2)", "takes 1 arguments, got 2"),
    ("1 << 3", "operator <<"),
    ("~1", "operator ~"),
    ("k is k", "operator 'is'"),
    ("1 in v", "operator 'in'"),
    ("1j", "constant 1j is not allowed"),
    ("None", "constant None is not allowed"),
    ("b'x'", "constant b'x' is not allowed"),
    ("[1, 2]*3", "ambiguous"),
    ("3*[1, 2]", "ambiguous"),
    ("[1] + [2]", "ambiguous"),
    ("'a' + 'b'", "arithmetic on strings"),
    ("-'a'", "arithmetic on strings"),
    ("'a' < 'b'", "strings can only be compared"),
    ("sqrt('4')", "not strings"),
    ("k[0]", "only arrays can be indexed"),
    ("v[0.5]", "indices must be integers"),
    ("v[[0, 1]]", "indices must be integers"),
    ("v[5]", "IndexError"),
    ("v if v else 0", "truth value of a ndarray is ambiguous"),
    ("0 < v < 2", "ambiguous"),
    ("[1, 'a']", "list elements must be numbers"),
    ("[[1, 2], [3]]", "ValueError"),
    ("k @ v", "'@' needs two vectors or matrices"),
    ("A @ v", "'@' shapes (2, 2) and (3,) do not match"),
    ("v + A", "do not broadcast"),
    ("1/0", "division by zero"),
    ("1 % 0", "division by zero"),
    ("sqrt(-1)", "invalid value"),
    ("log(0)", "divide by zero"),
    ("(-8)**0.5", "complex result"),
    ("1e308*10", "overflow"),
    ("exp(1000)", "overflow"),
    ("inv([[1, 2], [2, 4]])", "Singular matrix"),
    ("inv(v)", "square matrix"),
    ("zeros(-1)", "non-negative integer"),
    ("zeros(2.5)", "non-negative integer"),
    ("linspace(0, v, 3)", "needs a number"),
    ("arange(0, 1, 0)", "step must not be zero"),
    ("min([])", "ValueError"),
])
def test_refused_with_reason_path_and_expression(text, reason):
    with pytest.raises(ExpressionError) as info:
        evaluate_expression(text, PLANT, path="plant/spring.k")
    err = info.value
    assert reason in err.reason
    assert err.path == "plant/spring.k" and err.expression == text
    assert str(err).startswith(f"plant/spring.k = {text!r}: ")


# --- resource attacks ----------------------------------------------------------------------

HOSTILE = [
    "9**9**9",
    "10**10000",
    "2**1000000",
    "(-3)**10**9",
    "10**300 * 10**300 * 10**300 * 10**300",
    "[0]*10**9",
    "zeros(10**9)",
    "ones((10**5, 10**5))",
    "ones([10**4, 10**4, 10**4])",
    "eye(10**5)",
    "linspace(0, 1, 10**12)",
    "arange(1e12)",
    "arange(0, inf)",
    "diag(ones(10**6))",
    "zeros((1, 10**6)) + zeros((10**6, 1))",
    "ones((1000, 1000)) @ ones((1000, 1000)) @ ones((1000, 1000))",
    "sin(ones(10**6)) + sin(ones(10**6)) + sin(ones(10**6)) + sin(ones(10**6))"
    " + sin(ones(10**6)) + sin(ones(10**6))",
    "'a'*10**9",
    "1" * 5000,
    "1+" * 6000 + "1",
    "-" * 9000 + "1",
    "(" * 1000 + "1" + ")" * 1000,
    "[" * 150 + "]" * 150,
    "k" + " + k" * 3000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: t if len(t) < 40 else t[:37] + "...")
def test_resource_attacks_are_refused_quickly_and_small(text):
    tracemalloc.start()
    start = time.process_time()       # CPU time: what the attack would cost, not the load
    try:
        with pytest.raises(ExpressionError) as info:
            evaluate_expression(text, PLANT, path="plant/spring.k")
        elapsed = time.process_time() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 2.0              # refused, not computed (each would take minutes)
    assert peak < 64 * 2**20   # bytes; the largest array an expression may hold is 8 MB
    assert "plant/spring.k" in str(info.value) and text[:100] in str(info.value)
    assert info.value.expression == text


@pytest.mark.parametrize("text, limits", [
    ("zeros(11)", Limits(max_elements=10)),
    ("zeros(6) + zeros(6)", Limits(max_total_elements=15)),
    ("eye(10) @ eye(10)", Limits(max_flops=999)),
    ("2**11", Limits(max_int_bits=10)),
    ("1+1+1", Limits(max_nodes=5)),
    ("-(-(-1))", Limits(max_depth=3)),
    ("12345", Limits(max_length=4)),
])
def test_limits_are_configurable(text, limits):
    with pytest.raises(ExpressionError):
        evaluate_expression(text, limits=limits)
    evaluate_expression(text)   # within the default limits


# --- agreement with Python on trusted, generated arithmetic --------------------------------

_LEAVES = st.one_of(st.integers(-5, 5), st.sampled_from([0.5, 1.25, -2.0, 3.0, 0.1]))


def _trees(depth: int) -> st.SearchStrategy[str]:
    leaf = _LEAVES.map(lambda x: f"({x!r})")
    if depth == 0:
        return leaf
    sub = _trees(depth - 1)
    # Exponents are small constants and the depth is bounded, so Python's own (exact, unbounded)
    # integer arithmetic stays fast on every generated tree.
    return st.one_of(
        leaf,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "/", "//", "%"]), sub).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        sub.map(lambda s: f"(-{s})"),
        st.tuples(sub, st.sampled_from(["-1", "0", "1", "2", "3", "0.5"])).map(
            lambda t: f"({t[0]} ** {t[1]})"),
    )


@settings(max_examples=300, deadline=None)
@given(_trees(4))
def test_arithmetic_agrees_with_python(text):
    try:
        expected = eval(text)   # trusted: generated by the strategy above, not user input
    except (ZeroDivisionError, OverflowError, TypeError):   # TypeError: complex // or %
        expected = None
    if isinstance(expected, complex):
        expected = None
    if expected is None:
        with pytest.raises(ExpressionError):
            evaluate_expression(text)
    else:
        result = evaluate_expression(text)
        assert result == expected and type(result) is type(expected)
