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
