"""cosim: distributed co-simulation of hierarchical block diagrams.

``import cosim`` is kept light: it never imports ray or zmq (the distributed backends live in
``cluster`` and are found through a registry when first used).
"""

from cosim.errors import (CodecError, CompileError, ConvergenceError, CosimError, ModelError,
                          SimulationError, TransportError)

__version__ = "0.1.0"

__all__ = [
    "CodecError", "CompileError", "ConvergenceError", "CosimError", "ModelError",
    "SimulationError", "TransportError",
]
