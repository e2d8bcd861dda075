"""A unit server's memory stays under its budgets when clients send the costly requests:
steps of many ticks are refused before they start when their logs would pass the budget
per request, and a session of steps stops at the budget per session, each refusal naming
its limit; the logs held are still sent."""

import pytest

from cosim.master import protocol as P
from tests.cluster.served import ask, client, serve, start, stop, unit_file

pytestmark = pytest.mark.cluster
MB = 2**20


def rss(pid) -> float:
    """Resident memory of process ``pid`` in bytes."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.slow
def test_the_servers_memory_stays_under_its_budget_under_the_costly_requests(tmp_path):
    per_request, per_session = 40, 100
    proc, address = serve(unit_file(tmp_path), "--max-request-mb", str(per_request),
                          "--max-session-mb", str(per_session))
    try:
        sock = client(address)
        for unit in "abc":
            start(sock, unit, "costly")
        base = rss(proc.pid)
        # The attack: steps of 999 s (499,500 ticks, under the tick limit).
        for _ in range(4):
            (err,) = ask(sock, "a", [P.DoStep(0.0, 999.0)])
            assert isinstance(err, P.ErrorReply)
            assert f"budget of {per_request} MB per request" in err.message
            assert "--max-request-mb" in err.message and "unit 'a'" in err.message
        assert rss(proc.pid) - base < 10 * MB            # refused before any work
        # Steps under the request budget until the session's is reached, on every unit.
        stepped = {}
        for unit in "abc":
            t = 0.0
            while True:
                (rep,) = ask(sock, unit, [P.DoStep(t, 100.0)])
                if isinstance(rep, P.ErrorReply):
                    assert f"budget of {per_session} MB per session" in rep.message, rep
                    assert "--max-session-mb" in rep.message
                    break
                t = rep.t_reached
            stepped[unit] = t
        grown = rss(proc.pid) - base
        print(f"stepped {stepped}; RSS grew {grown / MB:.0f} MB for a budget of "
              f"3 x {per_session} MB")
        assert all(t >= 200.0 for t in stepped.values())      # the budget is not vacuous
        assert grown < 3 * per_session * MB
        # What the units hold is still sent.
        for unit in "abc":
            (logs,) = ask(sock, unit, [P.CollectLogs()])
            assert isinstance(logs, P.LogBatch)
            t, _ = next(iter(logs.signals.values()))
            assert t[-1] == pytest.approx(stepped[unit], abs=0.005)
        assert rss(proc.pid) - base < 3 * per_session * MB
        assert proc.poll() is None
    finally:
        stop(proc)


@pytest.mark.parametrize("h", [float("inf"), float("nan"), -1.0, 0.0, 1e308])
def test_the_budget_estimate_never_raises(h):
    """Steps of any length (the unit itself refuses the odd ones) are estimated without an
    exception: one request must never end the server."""
    from cluster.budget import Budget
    from cosim import SimulationConfig
    from cosim.master.local_unit import LocalUnit
    from cosim.model.evaluate import evaluate
    from tests.cluster.scenarios import three_units
    model = three_units()
    evaluate(model)
    unit = LocalUnit(model["a"], SimulationConfig(dt=0.002, t_end=1.0))
    unit.handle(P.Initialize(0.0))
    why = Budget(MB, MB).refusal("a", unit, h)
    assert why is None or ("budget of 1 MB per request" in why and h == 1e308)
