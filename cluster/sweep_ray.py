"""A sweep on Ray: one long-lived puller per CPU that asks the driver for its next chunk.

A Ray task costs ~2 ms of CPU over the driver, the raylet and the worker (measured with the
sweep's own arguments), a tenth of a 10-block run's; a task per chunk made the chunks large
and the last ones few. Here the driver starts one Ray task per CPU (a *puller*, on Ray's
pooled worker processes, which keep their compiled code and reruns between studies) with a
first chunk in its arguments; when it has run a chunk, the puller sends the chunk's rows to
the driver over ZeroMQ and gets its next chunk in the reply (~0.2 ms a round trip), until the
driver says stop. The chunks shrink as the runs left do (:func:`chunks`), so both CPUs finish
within a run or two of each other.

A puller that dies (its worker process lost, or the task failing) is found through its task:
the chunk it held is run again by a new puller, at most ``retries`` times, then its runs are
rows ``failed`` ("worker lost after N retries"), as with a Ray task per chunk. The driver's
socket is bound on its node's address with CURVE encryption; its public key (and so the right
to connect) travels to the pullers in their task arguments only.

Wire protocol (DEALER puller -> ROUTER driver, pickled payloads, both ends this module):
puller ``[DONE, chunk number, rows]`` -> driver ``[CHUNK, (number, runs)]`` or ``[STOP]``.
"""

from __future__ import annotations

import functools
import math
import pickle
import time
from collections import deque
from collections.abc import Callable, Sequence

from cluster.sweep_design import Run
from cluster.sweep_worker import execute_many

__all__ = ["chunks", "pull", "run_on_ray"]

DONE, CHUNK, STOP = b"done", b"chunk", b"stop"

#: How often (s) the driver asks Ray whether a puller's task ended, while rows arrive.
CHECK_EVERY = 0.05

#: Most runs of a chunk: a lost worker costs at most these, and their rows wait for the
#: chunk's end before they are written.
MOST = 100


def chunks(todo: Sequence[Run], pullers: int) -> list[list[Run]]:
    """Runs in chunks that shrink as the runs left do: each the runs left over twice the
    pullers, at most :data:`MOST`, at least one (a pull costs little), so the pullers'
    last chunks are of a run or two and neither waits long for the other's.

    >>> [len(c) for c in chunks(list(range(400)), 2)][:6]
    [100, 75, 57, 43, 32, 24]
    """
    out, i = [], 0
    while i < len(todo):
        size = max(1, min(MOST, math.ceil((len(todo) - i) / (2 * pullers))))
        out.append(list(todo[i:i + size]))
        i += size
    return out


def pull(endpoint: str, server_key: bytes, name: bytes, first: tuple[int, list[Run]],
         spec: tuple) -> None:
    """A puller (a Ray task): run ``first``, then the chunks the driver answers with, each
    chunk's rows sent back, until the driver says stop.

    Parameters
    ----------
    endpoint : str
        The driver's socket, ``tcp://host:port``.
    server_key : bytes
        The driver's CURVE public key (Z85).
    name : bytes
        This puller's identity on the driver's socket.
    first : (int, list of Run)
        The first chunk's number and runs.
    spec : tuple
        ``(model, config, reducers, logs_dir, ensemble, reuse_units)`` as
        :func:`~cluster.sweep_worker.execute_many` takes them.
    """
    import zmq

    from cosim.master.hosts import UnitHosts
    model, config, reducers, logs_dir, ensemble, reuse_units = spec
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)          # nothing is left to send after the stop
    sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
    sock.curve_serverkey = server_key
    sock.setsockopt(zmq.IDENTITY, name)
    sock.connect(endpoint)                  # while the first chunk runs
    hosts = UnitHosts()                     # a co-simulation's units, kept between chunks
    try:
        number, runs = first
        while True:
            rows = execute_many(model, config, runs, reducers, logs_dir, ensemble,
                                reuse_units, hosts)
            sock.send_multipart([DONE, b"%d" % number, pickle.dumps(rows, protocol=5)])
            reply = sock.recv_multipart()
            if reply[0] == STOP:
                return
            number, runs = pickle.loads(reply[1])
    finally:
        hosts.close()
        sock.close()


@functools.lru_cache(maxsize=1)
def _puller_task():
    """:func:`pull` as a Ray task, made once per process (a new remote function is exported
    to the cluster and loaded by every worker again). Ray does not retry it: the driver runs
    a dead puller's chunk again itself, as a new puller's."""
    import ray
    return ray.remote(num_cpus=1, max_retries=0)(pull)


class _Pullers:
    """The driver's side: its socket, the pullers alive and the chunk each holds, the
    chunks waiting (each with the times it was lost)."""

    def __init__(self, parts: list[list[Run]], pullers: int, retries: int, spec: tuple,
                 finished: Callable, lost: Callable):
        import ray
        import zmq
        self.most = pullers
        self.retries = retries
        self.finished = finished
        self.lost = lost
        self.runs = dict(enumerate(parts))                    # chunk number -> runs

        self.waiting = deque((n, 0) for n in self.runs)      # (number, times lost)
        self.holding: dict[bytes, tuple[int, int]] = {}      # puller -> (number, losses)
        self.tasks: dict = {}                                 # task ref -> puller
        self.started = 0
        self.ctx = zmq.Context()                # its own: no ZAP handler of other servers
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        public, secret = zmq.curve_keypair()
        self.sock.curve_secretkey, self.sock.curve_publickey = secret, public
        self.sock.curve_server = True
        host = ray.util.get_node_ip_address()
        port = self.sock.bind_to_random_port(f"tcp://{host}")
        self.endpoint, self.public = f"tcp://{host}:{port}", public
        self.spec = spec          # small (the model's factory by reference): inline, no put

    def start(self) -> None:
        """A new puller with the next waiting chunk."""
        number, losses = self.waiting.popleft()
        name = b"p%d" % self.started
        self.started += 1
        self.holding[name] = (number, losses)
        ref = _puller_task().remote(self.endpoint, self.public, name,
                                    (number, self.runs[number]), self.spec)
        self.tasks[ref] = name

    def run(self) -> None:
        """Feed the chunks to the pullers until every chunk's rows are in."""
        while self.waiting and len(self.tasks) < self.most:
            self.start()
        checked = time.monotonic()
        while self.holding or self.waiting:
            if self.sock.poll(int(CHECK_EVERY * 1000)):
                self.answer()
            if time.monotonic() - checked >= CHECK_EVERY:
                self.check()
                checked = time.monotonic()

    def answer(self) -> None:
        """Take a puller's rows and send it its next chunk, or stop."""
        name, kind, number, payload = self.sock.recv_multipart()
        held = self.holding.get(name)
        if kind != DONE or held is None or held[0] != int(number):
            return                  # a puller found lost already: its chunk is run again
        del self.holding[name]
        # The puller's next chunk first: it runs while the driver writes the rows.
        if self.waiting:
            number, losses = self.waiting.popleft()
            self.holding[name] = (number, losses)
            self.sock.send_multipart([name, CHUNK, pickle.dumps((number, self.runs[number]),
                                                                protocol=5)])
        else:
            self.sock.send_multipart([name, STOP])
        del self.runs[held[0]]
        self.finished(pickle.loads(payload))

    def check(self) -> None:
        """Pullers whose task ended: a failed one's chunk waits again (or, lost more than
        ``retries`` times, its runs are failed rows); a new puller takes the next chunk."""
        import ray
        if not self.tasks:
            return
        ended, _ = ray.wait(list(self.tasks), num_returns=len(self.tasks), timeout=0)
        for ref in ended:
            name = self.tasks.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayError as err:
                held = self.holding.pop(name, None)
                if held is not None:
                    number, losses = held
                    if losses < self.retries:
                        self.waiting.appendleft((number, losses + 1))
                    else:
                        self.finished(self.lost(self.runs.pop(number), err))
        while self.waiting and len(self.tasks) < self.most:
            self.start()

    def close(self) -> None:
        """Close the socket; pullers still holding a chunk (the sweep failed in the driver)
        are stopped (the others were told to stop and end on their own)."""
        import ray
        for ref, name in self.tasks.items():
            if name in self.holding:
                ray.cancel(ref, force=True)
        self.sock.close()
        self.ctx.term()


def run_on_ray(model, config, todo: list[Run], reducers, logs_dir: str | None,
               max_in_flight: int | None, retries: int, address: str | None,
               ensemble: int | None, reuse_units: bool, finished: Callable,
               lost: Callable) -> None:
    """Run ``todo`` on Ray pullers, one per CPU of the cluster (or ``max_in_flight``);
    ``finished(rows)`` gets each chunk's ``(row, structure)`` pairs as they come,
    ``lost(runs, err)`` makes the rows of a chunk lost more than ``retries`` times."""
    import ray

    from cluster.ray_backend import ensure_ray
    ensure_ray(address)
    pullers = max_in_flight or max(1, int(ray.cluster_resources().get("CPU", 1)))
    parts = [todo[i:i + ensemble] for i in range(0, len(todo), ensemble)] if ensemble \
        else chunks(todo, pullers)
    spec = (model, config, reducers, logs_dir, ensemble is not None, reuse_units)
    feed = _Pullers(parts, pullers, retries, spec, finished, lost)
    try:
        feed.run()
    finally:
        feed.close()
