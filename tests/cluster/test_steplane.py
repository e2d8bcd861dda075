"""A lane's stream (:class:`cluster.steplane.StepStream`): Steps sent two ahead on a DEALER
socket of their own are answered in order, as the channel's one-message batch answers them;
a reconnect of the channel closes the stream's socket and the next send opens another."""

import math

import numpy as np

from cluster.channel import Channel
from cluster.dataplane import serve
from cosim import SimulationConfig
from cosim.master import protocol as P
from cosim.master.local_unit import LocalUnit
from cosim.model.evaluate import evaluate
from tests.cluster.scenarios import three_units

H = 0.02


def served(keys):
    """Unit ``a`` of three_units served from a thread (as a Ray actor serves it), a channel
    to it, and the unit's ``(name, inputs, refresh, n_in, n_out)``."""
    model = three_units()
    evaluate(model)
    unit = LocalUnit(model["a"], SimulationConfig(dt=0.002, t_end=1.0, solver="RK4"))
    endpoint, _ = serve({"a": unit}, "127.0.0.1", keys)
    conn = Channel(endpoint, 0.05, keys=keys, patient=True)
    reqs = [P.Initialize(0.0), P.Describe()]
    conn.submit("a", reqs)
    desc = conn.result_watched("a", reqs, lambda: None, 30.0)[1]
    size = lambda ports: sum(math.prod(p.shape) for p in ports)  # noqa: E731
    spec = ("a", tuple(p.name for p in desc.inputs), (0,) * len(desc.inputs), 0,
            size(desc.inputs), size(desc.outputs))
    return conn, spec


def inputs(k: int, n: int) -> np.ndarray:
    return np.full(n, math.sin(0.3 * k))


def test_steps_sent_two_ahead_are_answered_in_order_as_one_at_a_time():
    # Plain sockets: CURVE here would start this process's ZAP handler for good (the Ray
    # pipeline tests run the streams with the run's keys, in the actors' processes).
    (one, spec), (two, _) = served(None), served(None)
    batch = one.lane().batch([spec])
    stream = two.lane().stream([spec], 2)
    n_in = spec[4]
    expected = []
    for k in range(10):
        batch.send(k * H, H, [inputs(k, n_in)])
        expected.append(batch.receive(k * H)[0])
    got = []
    stream.send(0.0, H, [inputs(0, n_in)])
    for k in range(10):
        if k + 1 < 10:                          # the next step waits at the unit
            stream.send((k + 1) * H, H, [inputs(k + 1, n_in)])
        got.append(stream.receive(k * H)[0])
    for a, b in zip(expected, got):
        assert type(a) is tuple and type(b) is tuple
        assert a[:3] == b[:3]
        np.testing.assert_array_equal(a[3], b[3])
    # a reconnect (the channel's recovery) closes the stream's socket; the next send opens
    # another, and the unit answers on
    two.reconnect()
    stream.send(10 * H, H, [inputs(10, n_in)])
    batch.send(10 * H, H, [inputs(10, n_in)])
    np.testing.assert_array_equal(stream.receive(10 * H)[0][3], batch.receive(10 * H)[0][3])
    # the next run's stream for the unit (hosts reused) closes this one's socket
    again = two.lane().stream([spec], 2)
    assert stream.sock is None and again is not stream
    one.close()
    two.close()
