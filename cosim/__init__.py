"""cosim: distributed co-simulation of hierarchical block diagrams.

``import cosim`` is kept light: it never imports ray or zmq (the distributed backends live in
``cluster`` and are found through a registry when first used).
"""

from cosim.model.block import Block, Kernel
from cosim.compile.plan import Plan, compile_model
from cosim.config import CosimConfig, SimulationConfig
from cosim.errors import (CodecError, CompileError, ConvergenceError, CosimError, ModelError,
                          SimulationError, StopSimulation, TransportError, UnsupportedError)
from cosim.run.logs import Logs
from cosim.model.diagram import (Connection, From, Goto, Inport, Model, Outport, Reference,
                         Subsystem)
from cosim.run.simulator import Simulator

__version__ = "0.1.0"


def simulation(model, config: SimulationConfig):
    """The run ``config`` asks for: a :class:`CoSimulation` of ``model`` when ``config.cosim``
    is set, else a :class:`Simulator`. Both have ``run``, ``logs``, ``save_checkpoint`` and
    ``load_checkpoint``."""
    if config.cosim is not None:
        from cosim.master.cosimulation import CoSimulation
        return CoSimulation(model, config)
    return Simulator(model, config)


def __getattr__(name: str):
    # The co-simulation layer is imported when first asked for: ``import cosim`` stays light.
    if name == "CoSimulation":
        from cosim.master.cosimulation import CoSimulation
        return CoSimulation
    raise AttributeError(f"module 'cosim' has no attribute {name!r}")

__all__ = [
    "Block", "CoSimulation", "CodecError", "CompileError", "Connection", "ConvergenceError",
    "CosimConfig",
    "CosimError", "From", "Goto", "Inport", "Kernel", "Logs", "Model", "ModelError", "Outport",
    "Plan", "Reference", "SimulationConfig", "SimulationError", "Simulator", "StopSimulation",
    "Subsystem",
    "TransportError", "UnsupportedError", "compile_model", "simulation",
]
