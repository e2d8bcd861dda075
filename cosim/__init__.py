"""cosim: distributed co-simulation of hierarchical block diagrams.

``import cosim`` is kept light: it never imports ray or zmq (the distributed backends live in
``cluster`` and are found through a registry when first used).
"""

from cosim.model.block import Block, Kernel
from cosim.compile.plan import Plan, compile_model
from cosim.config import CosimConfig, SimulationConfig
from cosim.errors import (CodecError, CompileError, ConvergenceError, CosimError, ModelError,
                          SimulationError, TransportError, UnsupportedError)
from cosim.run.logs import Logs
from cosim.model.diagram import (Connection, From, Goto, Inport, Model, Outport, Reference,
                         Subsystem)
from cosim.run.simulator import Simulator

__version__ = "0.1.0"

__all__ = [
    "Block", "CodecError", "CompileError", "Connection", "ConvergenceError", "CosimConfig",
    "CosimError", "From", "Goto", "Inport", "Kernel", "Logs", "Model", "ModelError", "Outport",
    "Plan", "Reference", "SimulationConfig", "SimulationError", "Simulator", "Subsystem",
    "TransportError", "UnsupportedError", "compile_model",
]
