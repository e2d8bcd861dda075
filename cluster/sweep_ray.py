"""A sweep on Ray: one long-lived puller per CPU that asks the driver for its next chunk.

A Ray task costs ~2 ms of CPU over the driver, the raylet and the worker (measured with the
sweep's own arguments), as much as a 10-block run; a task per chunk made the chunks large
and the last ones few. Here the driver starts one Ray task per CPU (a *puller*, on Ray's
pooled worker processes, which keep their compiled code and reruns between studies) while it
checks the model and reads the results file; a puller asks the driver for a chunk over
ZeroMQ, and when it has run it, sends the chunk's rows and gets its next chunk in the reply
(~0.2 ms a round trip), until the driver says stop. The chunks shrink as the runs left do
(:func:`chunks`), so both CPUs finish within a run or two of each other.

Nothing is assumed on the workers' disks: a model file travels with the job (its directory,
references and data files, as the pullers' Ray ``working_dir``, :func:`ship`), the design
and runs in the task arguments, and the logs of ``save_logs`` come back with each chunk's
rows for the driver to write. A puller checks the driver's versions and that it can reach
the driver's socket when it starts, and fails naming them; either failure ends the sweep at
once. Pullers that cannot be scheduled are reported within seconds (:meth:`Pullers.check`):
an error when no alive node could ever run one, a warning naming the resource and what the
cluster has free when they are all taken.

A puller that dies (its worker process lost, or the task failing) is found through its task:
the chunk it held is run again by a new puller, at most ``retries`` times, then its runs are
rows ``failed`` ("worker lost after N retries"), as with a Ray task per chunk. The driver's
socket is bound on its node's address with CURVE encryption; its public key (and so the right
to connect) travels to the pullers in their task arguments only.

Wire protocol (DEALER puller -> ROUTER driver, both ends this module; nothing pickled: the
payloads are :func:`cluster.codec.encode_data`, and the runs themselves (parameter values of
any type) reach the pullers through Ray, in their task arguments, so a chunk names its runs
by index):

- puller -> driver: ``[READY, node id]`` (its Ray node), or
  ``[DONE, chunk number, [[row, structure], ...], logs]`` with each row's parameter values
  left out (None: the driver has them) and ``logs`` the runs' full logs,
  ``[[run_id, values, times, time], ...]`` (empty unless asked);
- driver -> puller: ``[CHUNK, [number, [run index, ...], save_logs]]`` or ``[STOP]``.

The driver checks every message against the state it keeps (which puller holds which chunk)
before it changes any: a malformed or stray one is dropped, and rows that do not decode
count as the chunk lost once.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from cluster.codec import decode_data, encode_data
from cluster.reach import Unreachable, check_reachable
from cluster.sweep_design import Run
from cluster.sweep_worker import execute_many
from cluster.versions import VersionMismatch
from cosim.errors import CodecError, ModelError

log = logging.getLogger("cosim.sweep")

__all__ = ["Pullers", "chunks", "pull", "ship"]

READY, DONE, CHUNK, STOP = b"ready", b"done", b"chunk", b"stop"

#: How often (s) the driver asks Ray whether a puller's task ended (a dead puller's chunk
#: waits this long at most; each asking costs the driver ~0.3 ms of CPU).
CHECK_EVERY = 0.25

#: Longest (s) a puller waits for the driver's answer before it ends on its own (a driver
#: that stopped without telling it; the driver starts a new one if it still has chunks).
PATIENCE = 60.0

#: Longest (s) the driver waits, when it closes, for pullers still starting to ask for a
#: chunk (and be told to stop); those that have not are cancelled.
STARTING = 10.0

#: Most runs of a chunk: a lost worker costs at most these, and their rows wait for the
#: chunk's end before they are written.
MOST = 100

#: Seconds a puller tries to reach the driver's socket when it starts.
REACH = 5.0

#: Seconds without a puller at work before the wait is looked into (and reported).
STALLED = 2.0

#: Left out of a model directory shipped to the workers (gitignore patterns; Ray also
#: honours the directory's .gitignore).
EXCLUDES = (".git", "__pycache__", "*.egg-info", ".venv", "venv", ".tox", "node_modules")


def ship(model, runtime_env: dict | None, out_dir=None) -> tuple[object, dict | None]:
    """What the pullers are given as the model and their Ray runtime environment.

    A model file travels with the job: its directory becomes the pullers' ``working_dir``
    (Ray packs it once, by content, and unpacks it on each node; the referenced library
    files and data files beside the model come with it), and the model is named relative
    to it. The results directory, when inside, is left out. A ``working_dir`` of the user's
    own must hold the model file. A model factory travels by reference (its module must be
    importable on the nodes: ship it with ``py_modules``).

    Returns
    -------
    model : str or callable
        The model as the workers name it.
    runtime_env : dict or None

    Raises
    ------
    ModelError
        The model file is outside the ``working_dir`` given.
    """
    if not isinstance(model, (str, os.PathLike)) or not Path(model).is_file():
        return model, runtime_env           # a factory, or a path the driver will refuse
    path = Path(model).resolve()
    env = dict(runtime_env or {})
    given = env.get("working_dir")
    if given is None:
        excludes = list(env.get("excludes", ())) + list(EXCLUDES)
        if out_dir is not None:
            try:
                excludes.append("/" + Path(out_dir).resolve().relative_to(path.parent)
                                .as_posix())
            except ValueError:
                pass                        # not inside the model's directory
        env.update(working_dir=str(path.parent), excludes=excludes)
        return path.name, env
    try:
        return path.relative_to(Path(given).resolve()).as_posix(), env
    except ValueError:
        raise ModelError(f"the model file {str(model)!r} is not inside the runtime_env "
                         f"working_dir {given!r}: the workers would not find it; put it "
                         "there, or leave working_dir out to ship the model's "
                         "directory") from None


def chunks(todo: Sequence[Run], pullers: int) -> list[list[Run]]:
    """Runs in chunks that shrink as the runs left do: each the runs left over twice the
    pullers, at most :data:`MOST`, at least one (a pull costs little), so the pullers'
    last chunks are of a run or two and neither waits long for the other's.

    >>> [len(c) for c in chunks(list(range(400)), 2)][:6]
    [100, 75, 57, 42, 32, 24]
    """
    out, i = [], 0
    while i < len(todo):
        size = max(1, min(MOST, math.ceil((len(todo) - i) / (2 * pullers))))
        out.append(list(todo[i:i + size]))
        i += size
    return out


def pull(endpoint: str, server_key: bytes, name: bytes, spec: tuple,
         runs: Sequence[tuple], driver: dict | None = None) -> None:
    """A puller (a Ray task): check the versions and that the driver can be reached, say it
    is ready, then run the chunks the driver answers with, each chunk's rows (and logs, when
    asked) sent back, until the driver says stop.

    Parameters
    ----------
    endpoint : str
        The driver's socket, ``tcp://host:port``.
    server_key : bytes
        The driver's CURVE public key (Z85).
    name : bytes
        This puller's identity on the driver's socket.
    spec : tuple
        ``(model, config, reducers, ensemble, reuse_units)`` as
        :func:`~cluster.sweep_worker.execute_many` takes them (a chunk brings its
        ``logs_dir``).
    runs : list of tuple
        The sweep's runs as ``(index, run_id, params)``, ``runs[i][0] == i``: chunks name
        theirs by index.
    driver : dict, optional
        The driver's :func:`~cluster.versions.versions`.

    Raises
    ------
    VersionMismatch
        This node runs another cosim or protocol version.
    Unreachable
        This node cannot reach the driver's socket.
    """
    import ray
    import zmq

    from cluster.versions import check
    from cosim.master.hosts import UnitHosts
    if driver is not None:
        check(driver, "a sweep puller")
    check_reachable(endpoint, REACH, f"the sweep's driver (from the puller on node "
                                     f"{ray.util.get_node_ip_address()})")
    model, config, reducers, ensemble, reuse_units = spec
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)          # nothing is left to send after the stop
    sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
    sock.curve_serverkey = server_key
    sock.setsockopt(zmq.IDENTITY, name)
    sock.connect(endpoint)
    hosts = UnitHosts()                     # a co-simulation's units, kept between chunks
    try:
        # Queued until connected: never blocks.
        sock.send_multipart([READY, ray.get_runtime_context().get_node_id().encode()])
        while True:
            if not sock.poll(int(PATIENCE * 1000)):
                return
            reply = sock.recv_multipart()
            if reply[0] == STOP:
                return
            number, indices, save_logs = decode_data(reply[1])
            chunk = [Run(*runs[i]) for i in indices]
            kept = {} if save_logs else None        # run_id -> Logs, sent to the driver
            done = execute_many(model, config, chunk, reducers, kept, ensemble,
                                reuse_units, hosts)
            rows = [[{k: (None if k in r.params else v) for k, v in row.items()}, structure]
                    for r, (row, structure) in zip(chunk, done)]
            logs = [[run_id, {k: lg[k] for k in lg}, {k: lg.time_of(k) for k in lg},
                     lg.time] for run_id, lg in (kept or {}).items()]
            sock.send_multipart([DONE, b"%d" % number, encode_data(rows), encode_data(logs)])
    finally:
        hosts.close()
        sock.close()


#: CPUs a puller takes (it runs its runs one at a time).
PULLER = 1


def _fatal(err) -> Exception | None:
    """The error that ends the sweep at once when a puller ended with ``err``: another
    version on its node, the driver unreachable from it, or a module missing there (every
    puller on that node would fail alike), or None."""
    if err is None:
        return None
    cause = getattr(err, "cause", None)
    if isinstance(cause, VersionMismatch):
        return ModelError(f"sweep on Ray: {cause}")
    if isinstance(cause, Unreachable):
        return ConnectionError(f"sweep on Ray: {cause}")
    if isinstance(cause, ModuleNotFoundError) or "ModuleNotFoundError" in str(err):
        return ModelError(f"sweep on Ray: a puller could not start: {cause or err}; install "
                          "the module on every node, or ship it with the sweep: "
                          "runtime_env={'py_modules': [...]} (--runtime-env FILE)")
    return None


@functools.lru_cache(maxsize=1)
def _puller_task():
    """:func:`pull` as a Ray task, made once per process (a new remote function is exported
    to the cluster and loaded by every worker again). Ray does not retry it: the driver runs
    a dead puller's chunk again itself, as a new puller's."""
    import ray
    return ray.remote(num_cpus=PULLER, max_retries=0)(pull)


class Pullers:
    """The driver's side of a Ray sweep: its socket, the pullers alive and the chunk each
    holds, the chunks waiting (each with the times it was lost).

    The pullers can be started (:meth:`start`) before the runs are known, while the driver
    checks the model and reads the results file: Ray's task start-up (~4 ms here until a
    worker runs) then overlaps it. They wait for chunks until :meth:`run`, and
    :meth:`close` stops them whatever happened in between.

    Parameters
    ----------
    model, config, reducers, ensemble, reuse_units
        As :func:`cluster.sweep.sweep` takes them (``ensemble`` the runs per ensemble).
    pullers : int, optional
        Pullers (runs at once); default: one per CPU of the cluster.
    retries : int
        Times a chunk lost with its puller is run again.
    address : str, optional
        The Ray cluster to join when Ray is not started yet.
    runs : list of Run
        Every run of the design (``runs[i].index == i``), the ones :meth:`run` is given
        among them: the pullers get them in their task arguments.
    runtime_env : dict, optional
        The pullers' Ray runtime environment; a model file's directory is added as their
        ``working_dir`` (:func:`ship`).
    ports : (int, int), optional
        Bind the driver's socket to a port in ``[low, high]``.
    out_dir : path, optional
        The results directory (left out of a shipped model directory).
    """

    def __init__(self, model, config, reducers, ensemble: int | None, reuse_units: bool,
                 pullers: int | None, retries: int, address: str | None,
                 runs: Sequence[Run], runtime_env: dict | None = None,
                 ports: tuple[int, int] | None = None, out_dir=None):
        from cluster.ray_backend import check_ports
        shipped, self.runtime_env = ship(model, runtime_env, out_dir)
        self.ports = check_ports(ports)
        self.spec = (shipped, config, reducers, ensemble is not None, reuse_units)
        # As plain tuples: Ray serialises them in one msgpack pass, not an object at a time
        # through cloudpickle (3 ms a puller for 400 Run objects, driver CPU at start).
        self.all_runs = [(r.index, r.run_id, r.params) for r in runs]
        self.ensemble = ensemble
        self.most = pullers
        self.retries = retries
        self.address = address
        self.runs: dict[int, list[Run]] = {}                 # chunk number -> runs
        self.waiting: deque = deque()                         # (number, times lost)
        self.holding: dict[bytes, tuple[int, int]] = {}      # puller -> (number, losses)
        self.tasks: dict = {}                                 # task ref -> puller
        self.stopped: set[bytes] = set()                      # pullers told to stop
        self.started = 0
        self.barren = 0         # pullers in a row that ended before reaching the driver
        self.logs_dir = None
        self.finished = self.lost = None
        self.sock = None
        self.node_of: dict[bytes, str] = {}                 # puller -> its Ray node id
        self.active = time.monotonic()      # last time a puller was at work or answered
        self.noticed = False                # the current stall was reported
        #: Told what the runs wait for while no puller can start (e.g. a progress bar's).
        self.notice: Callable[[str], None] | None = None

    def start(self) -> None:
        """Bind the socket and start the pullers (Ray is started or joined first); once."""
        if self.sock is not None:
            return
        import ray
        import zmq

        from cluster.dataplane import bind_port
        from cluster.ray_backend import ensure_ray, live_nodes, unschedulable, uploaded
        from cluster.versions import versions
        ensure_ray(self.address)
        self.runtime_env = uploaded(self.runtime_env)
        live = live_nodes()
        why = unschedulable({"CPU": PULLER}, live)
        if why is not None:
            raise ModelError(f"sweep on Ray: no node can run a puller (CPU={PULLER:g}): "
                             f"{why}; add a node with a CPU, or use backend='process'")
        if self.most is None:
            self.most = max(1, int(sum(n["Resources"].get("CPU", 0) for n in live)))
        self.versions = versions()
        self.ctx = zmq.Context()                # its own: no ZAP handler of other servers
        self.sock = self.ctx.socket(zmq.ROUTER)
        # Closing sends what is queued (the last stops) first; to a peer gone, nothing.
        self.sock.setsockopt(zmq.LINGER, 1000)
        public, secret = zmq.curve_keypair()
        self.sock.curve_secretkey, self.sock.curve_publickey = secret, public
        self.sock.curve_server = True
        host = ray.util.get_node_ip_address()
        port = bind_port(self.sock, host, self.ports)
        self.endpoint, self.public = f"tcp://{host}:{port}", public
        for _ in range(self.most):
            self.launch()

    def launch(self) -> None:
        """A new puller (it asks for a chunk when it is up)."""
        name = b"p%d" % self.started
        self.started += 1
        # The arguments are small (the model's factory by reference): inline, no put.
        task = _puller_task()
        if self.runtime_env is not None:
            task = task.options(runtime_env=self.runtime_env)
        self.tasks[task.remote(self.endpoint, self.public, name, self.spec, self.all_runs,
                               self.versions)] = name

    def run(self, todo: list[Run], logs_dir: str | None, finished: Callable,
            lost: Callable) -> None:
        """Feed ``todo`` in chunks to the pullers until every chunk's rows are in:
        ``finished(rows)`` gets each chunk's ``(row, structure)`` pairs as they come,
        ``lost(runs, err)`` makes the rows of a chunk lost more than ``retries`` times;
        with ``logs_dir`` (the driver's), each run's logs are written there as they come."""
        self.start()
        e = self.ensemble
        parts = [todo[i:i + e] for i in range(0, len(todo), e)] if e else \
            chunks(todo, self.most)
        self.runs = dict(enumerate(parts))
        self.waiting = deque((n, 0) for n in self.runs)
        self.logs_dir, self.finished, self.lost = logs_dir, finished, lost
        self.active = checked = time.monotonic()
        while self.holding or self.waiting:
            if self.sock.poll(int(CHECK_EVERY * 1000)):
                self.answer()
            if time.monotonic() - checked >= CHECK_EVERY:
                self.check()
                checked = time.monotonic()

    def answer(self) -> None:
        """Take a puller's rows (if it brings any) and send it its next chunk, or stop."""
        frames = self.sock.recv_multipart()
        if len(frames) < 2:
            return
        name, kind = frames[0], frames[1]
        if name not in self.tasks.values() or name in self.stopped:
            return                  # a puller found lost already: its chunk is run again
        held = self.holding.get(name)
        if held is None:
            if kind != READY or len(frames) != 3:
                return
            self.node_of[name] = frames[2].decode("ascii", "replace")
        elif kind != DONE or len(frames) != 5 or frames[2] != b"%d" % held[0]:
            return
        self.barren = 0                     # a puller reached the driver
        self.active = time.monotonic()
        self.noticed = False
        rows = None
        if held is not None:
            del self.holding[name]
            try:
                rows = self.rows(held[0], decode_data(frames[3]))
                logs = self.logs(held[0], decode_data(frames[4]))
            except (CodecError, ValueError) as err:
                rows = None
                log.warning("sweep: rows of chunk %d from puller %s do not decode (%s); the "
                            "chunk counts as lost once", held[0], name.decode(), err)
                self.again(held, err)
        # The puller's next chunk first: it runs while the driver writes the rows.
        if self.waiting:
            number, losses = self.waiting.popleft()
            self.holding[name] = (number, losses)
            self.sock.send_multipart([name, CHUNK, encode_data(
                [number, [r.index for r in self.runs[number]], self.logs_dir is not None])])
        else:
            self.sock.send_multipart([name, STOP])
            self.stopped.add(name)
        if rows is not None:
            del self.runs[held[0]]
            for run_id, run_logs in logs:
                run_logs.to_npz(Path(self.logs_dir) / f"{run_id}.npz")
            self.finished(rows)

    def logs(self, number: int, entries) -> list:
        """``(run_id, Logs)`` of chunk ``number``'s runs from a puller's decoded log
        entries (none unless the driver keeps logs).

        Raises
        ------
        ValueError
            An entry is malformed or names a run not of the chunk.
        """
        from cosim.run.logs import Logs
        if type(entries) is not list:
            raise ValueError("logs: expected a list")
        if self.logs_dir is None:
            return []
        ids = {r.run_id for r in self.runs[number]}
        out = []
        for e in entries:
            if (type(e) is not list or len(e) != 4 or e[0] not in ids
                    or type(e[1]) is not dict or type(e[2]) is not dict
                    or set(e[1]) != set(e[2])):
                raise ValueError("a run's logs are malformed")
            out.append((e[0], Logs(e[1], e[2], e[3])))
        return out

    def rows(self, number: int, pairs) -> list[tuple[dict, str]]:
        """Chunk ``number``'s ``(row, structure)`` pairs from a puller's decoded ones, each
        row given its run's parameter values (left out on the wire).

        Raises
        ------
        ValueError
            The pairs are not one row per run of the chunk, in order.
        """
        runs = self.runs[number]
        if type(pairs) is not list or len(pairs) != len(runs):
            raise ValueError(f"expected {len(runs)} rows")
        out = []
        for r, pair in zip(runs, pairs):
            if (type(pair) is not list or len(pair) != 2 or type(pair[0]) is not dict
                    or type(pair[1]) is not str or pair[0].get("index") != r.index
                    or not set(r.params) <= set(pair[0])):
                raise ValueError(f"the row of run {r.index} is malformed")
            row = pair[0]
            row.update(r.params)            # in place: the columns keep their order
            out.append((row, pair[1]))
        return out

    def again(self, held: tuple[int, int], err) -> None:
        """Chunk ``held = (number, losses)`` was lost: it waits to run again, or, lost more
        than ``retries`` times, its runs are failed rows."""
        number, losses = held
        if losses < self.retries:
            self.waiting.appendleft((number, losses + 1))
        else:
            self.finished(self.lost(self.runs.pop(number), err))

    def check(self) -> None:
        """Pullers whose task ended: a failed one's chunk waits again (or, lost more than
        ``retries`` times, its runs are failed rows); a new puller takes the next chunk."""
        import ray
        ended = ray.wait(list(self.tasks), num_returns=len(self.tasks), timeout=0)[0] \
            if self.tasks else []
        for ref in ended:
            name = self.tasks.pop(ref)
            told = name in self.stopped
            self.stopped.discard(name)
            held = self.holding.pop(name, None)
            try:
                ray.get(ref)
                err = None
            except ray.exceptions.RayError as error:
                err = error
            fatal = _fatal(err)
            if fatal is not None:
                raise fatal
            if not told and (held is None or err is None):
                self.barren += 1            # (a chunk lost with its puller counts as such)
                self.give_up(err)
            if held is None:
                continue
            if err is None:                 # it ended on its own, before its chunk came
                self.waiting.appendleft(held)
            else:
                self.again(held, err)
        self.lost_nodes()
        while self.waiting and len(self.tasks) < self.most:
            self.launch()
        if self.holding:
            self.active = time.monotonic()
        elif self.waiting and time.monotonic() - self.active >= STALLED:
            self.stalled()

    def lost_nodes(self) -> None:
        """Chunks held by pullers on a node whose raylet no longer answers (the node lost:
        cosim's own check, seconds before Ray's verdict) wait again, for the pullers
        alive; those pullers are stopped (a late message from one is dropped)."""
        from cluster.ray_backend import node_answers
        nodes = {self.node_of.get(name) for name in self.holding} - {None}
        dead = {n for n in nodes if not node_answers(n)}
        for name in [n for n in self.holding if self.node_of.get(n) in dead]:
            held = self.holding.pop(name)
            self.stopped.add(name)
            log.warning("sweep: node %s of puller %s lost; its chunk %d runs again",
                        self.node_of[name][:8], name.decode(), held[0])
            self.again(held, ConnectionError(f"node {self.node_of[name]} lost"))

    def stalled(self) -> None:
        """No puller has been at work for :data:`STALLED` s while runs wait: when no alive
        node could run one (every node with a CPU lost), raise; when the CPUs are all taken
        by other work, say so once (naming what the cluster has free) and wait on."""
        import ray

        from cluster.ray_backend import live_nodes, taken, unschedulable
        nodes = live_nodes()
        need = {"CPU": PULLER}
        why = unschedulable(need, nodes)
        if why is not None:
            raise ModelError(f"sweep on Ray: {sum(len(self.runs[n]) for n, _ in self.waiting)}"
                             f" runs wait, and no node can run a puller any more: {why}; "
                             "add a node with a CPU (rows written so far stay in the "
                             "results file: run the sweep again to resume)")
        busy = taken(need, nodes, ray.available_resources())
        if busy is not None and not self.noticed:
            self.noticed = True
            waiting = sum(len(self.runs[n]) for n, _ in self.waiting)
            log.warning("sweep on Ray: %d runs wait for a puller to start: %s", waiting, busy)
            if self.notice is not None:
                self.notice(f"{waiting} runs wait for a free CPU")

    def give_up(self, err) -> None:
        """Raise when pullers keep ending before they reach the driver (more in a row than
        ``retries`` times each): they fail as they start (the model's factory cannot be
        loaded on the workers, say), or cannot connect. Rows written so far stay in the
        results file."""
        if self.barren <= self.most * (self.retries + 1):
            return
        why = (f"the last failed: {type(err).__name__}: {err}" if err is not None else
               f"none answered within {PATIENCE:g} s: the workers must be able to connect "
               f"to {self.endpoint} (a firewall between the nodes?)")
        raise ConnectionError(f"sweep on Ray: {self.barren} pullers in a row ended before "
                              f"they asked the driver for a chunk; {why}")

    def close(self) -> None:
        """Stop the pullers still alive and close the socket: those holding a chunk (the
        sweep failed in the driver) are killed, the others are told to stop when they ask
        for a chunk (within :data:`STARTING` s; then cancelled, as not started)."""
        if self.sock is None:
            return
        import ray
        for ref, name in self.tasks.items():
            if name in self.holding:
                ray.cancel(ref, force=True)
                self.stopped.add(name)
        deadline = time.monotonic() + STARTING
        while set(self.tasks.values()) - self.stopped and time.monotonic() < deadline:
            if self.sock.poll(int(CHECK_EVERY * 1000)):
                name = self.sock.recv_multipart()[0]
                if name in self.tasks.values() and name not in self.stopped:
                    self.sock.send_multipart([name, STOP])
                    self.stopped.add(name)
            ended, _ = ray.wait(list(self.tasks), num_returns=len(self.tasks), timeout=0)
            for ref in ended:
                self.stopped.add(self.tasks.pop(ref))
        for ref, name in self.tasks.items():
            if name not in self.stopped:
                ray.cancel(ref)
        self.sock.close()
        self.ctx.term()
        self.sock = None
