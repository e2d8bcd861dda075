"""The ``cosim`` commands this package adds (entry point group ``cosim.commands``).

Light on purpose: ``cosim --help`` imports this module, never zmq or ray.
"""

from cosim.cli import Command

__all__ = ["KEYS", "SERVE", "SWEEP"]

SERVE = Command("serve units over ZeroMQ for remote masters", "cluster.server:main")
SWEEP = Command("run a parameter study (local worker processes; Ray when given an address "
                "or already running)", "cluster.sweep:main")
KEYS = Command("make a CURVE key pair for cosim serve and cosim run", "cluster.keys:main")
