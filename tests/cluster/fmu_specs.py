"""The test FMUs' variable specs (built by :mod:`fmu_build` from ``fmu_sources/c``)."""

from tests.cluster.fmu_build import Spec, Var

BALL = Spec("BouncingBall", "bouncing_ball.c", [
    Var("h", "state_output", start=10.0), Var("der_h", "local", derivative_of="h"),
    Var("v", "state_output", start=0.0), Var("der_v", "local", derivative_of="v"),
    Var("g", "parameter", start=9.81), Var("e", "parameter", start=0.8), Var("z", "local")],
    states=("h", "v"), indicators=("z",), stop_time=8.0, step_size=0.01)

SAMPLER = Spec("Sampler", "sampler.c", [
    Var("x", "state_output", start=0.0), Var("der_x", "local", derivative_of="x"),
    Var("u", "input", start=1.0), Var("d", "discrete_input", start=0.0),
    Var("period", "parameter", start=0.25), Var("stop_at", "parameter", start=1000.0),
    Var("limit", "parameter", start=1e9),
    Var("n", "discrete_output", type="Int32", start=0),
    Var("held", "discrete_output", start=0.0), Var("acc", "discrete_output", start=0.0),
    Var("requested", "discrete_output", type="Int32", start=0),
    Var("served", "discrete_output", type="Int32", start=0),
    Var("stage", "local", start=0.0), Var("pending", "local", start=0.0)],
    states=("x",), stop_time=3.0, step_size=0.1)


def _pairs(*pairs):
    return [Var(name + suffix, kind, type=t, start=start, dims=dims, max_size=8)
            for name, t, start, dims in pairs
            for suffix, kind in (("_in", "discrete_input" if t != "Float64" and t != "Float32"
                                  else "input"), ("_out", "discrete_output"
                                                  if not t.startswith("Float") else "output"))]


#: Every FMI 2.0 type, input -> output (numbers doubled, booleans negated, enumerations next,
#: strings copied).
TYPES2 = Spec("Types", "types.c", _pairs(
    ("r", "Float64", 1.5, ()), ("i", "Int32", 3, ()), ("b", "Boolean", 0, ()),
    ("e", "Enumeration", 1, ()), ("t", "String", "Set me!", ())),
    enumerations={"Level": ("low", "mid", "high")}, step_size=0.1)

#: Every FMI 3.0 type and width, fixed-size and structurally sized arrays.
TYPES3 = Spec("Types", "types.c", [
    Var("n", "structural", type="UInt64", start=3)] + _pairs(
    ("f32", "Float32", 0.25, ()), ("i8", "Int8", -3, ()), ("u16", "UInt16", 7, ()),
    ("i32", "Int32", -5, ()), ("i64", "Int64", 1 << 40, ()), ("u64", "UInt64", 1 << 50, ()),
    ("b", "Boolean", 1, ()), ("e", "Enumeration", 2, ()), ("a", "Float64", 1.0, (3,)),
    ("s", "Float64", 2.0, ("n",)), ("t", "String", "Set me!", ()),
    ("bin", "Binary", b"\x00\xffab", ())), enumerations={"Level": ("low", "mid", "high")},
    step_size=0.1)

#: An FMI 3.0 co-simulation FMU with a time-based input clock (interval 0.3 s).
TICKER = Spec("Ticker", "ticker.c", [
    Var("tick", "clock"), Var("u", "input", start=0.0),
    Var("count", "discrete_output", type="Int32", start=0),
    Var("total", "discrete_output", start=0.0), Var("ticked", "local", start=0.0)],
    clocks=(("tick", "input", "constant", 0.3),), step_size=0.05, stop_time=2.0)

#: Benchmark FMUs (FMI 2.0 co-simulation, internal Euler step 1e-3 s).
FEEDTHROUGH = Spec("Feedthrough", "feedthrough.c", [
    Var("u", "input", start=0.0), Var("y", "output")], step_size=0.01)

VANDERPOL = Spec("VanDerPol", "vanderpol.c", [
    Var("x0", "state_output", start=2.0), Var("der_x0", "local", derivative_of="x0"),
    Var("x1", "state", start=0.0), Var("der_x1", "local", derivative_of="x1"),
    Var("mu", "parameter", start=1.0)], states=("x0", "x1"), step_size=0.01)

LAG = Spec("Lag", "lag.c", [
    Var("x", "state_output", start=0.0), Var("der_x", "local", derivative_of="x"),
    Var("u", "input", start=1.0), Var("tau", "parameter", start=0.5)],
    states=("x",), step_size=0.01)

#: No continuous state, time events only (FMI 2.0 and 3.0): a counter stepped every
#: `period`, terminating when it reaches stop_at (at t = (stop_at - 1) * period).
STAIR = Spec("Stair", "stair.c", [
    Var("counter", "discrete_output", type="Int32", start=1),
    Var("period", "parameter", start=1.0), Var("stop_at", "parameter", start=10.0)],
    step_size=0.2, stop_time=10.0)

#: An FMI 3.0 array state x (3,) with its array derivative, an array input and output, and
#: a Boolean structural parameter.
ARRAY_STATE = Spec("ArrayState", "arraystate.c", [
    Var("doubled", "structural", type="Boolean", start=0),
    Var("x", "state", start=1.0, dims=(3,)), Var("der_x", "local", dims=(3,), derivative_of="x"),
    Var("u", "input", start=0.0, dims=(3,)), Var("y", "output", dims=(3,))],
    states=("x",), step_size=0.1, stop_time=2.0)

#: Text outputs that change every `period` (no state): label "tick <n>" (String) and, FMI
#: 3.0, data bytes {n, 0, 255} (Binary), n an Int32 output too.
TEXTER2 = Spec("Texter", "texter.c", [
    Var("period", "parameter", start=0.1), Var("n", "discrete_output", type="Int32"),
    Var("label", "discrete_output", type="String", start="tick 0")], step_size=0.1)
TEXTER3 = Spec("Texter", "texter.c", TEXTER2.variables + [
    Var("data", "discrete_output", type="Binary", start=b"\x00\x00\xff")], step_size=0.1)
