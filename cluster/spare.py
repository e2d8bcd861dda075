"""A spare unit server: a process that has started the interpreter and imported what a unit
server needs, then waits for its arguments, so that re-spawning a lost server (a recovery)
does not pay them (about half a second of a 2-core machine's time, most of a recovery).

``python -m cluster.spare`` reads one line from standard input: the JSON list of a
``python -m cluster.server`` command line's arguments; it then runs that server (whose
``--keys-stdin`` reads the rest of standard input). An empty line or end of input (its
master stopped it, or died) ends it without serving anything.
"""

from __future__ import annotations

import json
import sys

# What a server imports before it serves: the server and its data plane (CURVE's
# authenticator among them), the model-file reader and the block library.
import zmq.auth.thread  # noqa: F401

import cluster.server
from cosim.master import protocol as P

__all__ = ["main", "warm_up"]

#: A unit file of one small unit: building and stepping it once imports and builds what
#: any unit file needs first (the schema's validator, the block registry, code generation).
WARM_UP = """\
version: 1
model: spare_warm_up
blocks:
  w:
    type: Subsystem
    atomic: true
    dt: 0.1
    solver: RK4
    blocks:
      u: {type: Inport}
      k: {type: Gain, params: {k: 2.0}}
      x: {type: Integrator, params: {initial: 0.0}}
      y: {type: Outport}
    connections:
      - [u.out, k.in]
      - [k.out, x.in]
      - [x.out, y.in]
simulation: {dt: 0.1, t_end: 1.0}
"""


def warm_up() -> None:
    """Build, initialize and step :data:`WARM_UP`'s unit (then drop it)."""
    (unit,) = cluster.server.units_from_file(WARM_UP).values()
    for request in (P.Initialize(0.0), P.DoStep(0.0, 0.1), P.GetOutputs()):
        reply = unit.handle(request)
        if isinstance(reply, P.ErrorReply):
            raise RuntimeError(f"the spare's warm-up unit failed: {reply.message}")


def main() -> int:
    """Warm up, then wait for a server's arguments on standard input and serve as that
    server."""
    warm_up()
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    argv = json.loads(line)
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        print("cosim spare: error: expected a JSON list of strings (a server's arguments)",
              file=sys.stderr)
        return 2
    return cluster.server.main(argv)


if __name__ == "__main__":
    sys.exit(main())
