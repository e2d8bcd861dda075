"""Block library of cosim, built only on the public ``cosim.Block`` API (one module per family).

============  =====================================================================
module        blocks
============  =====================================================================
sources       Constant, Sine, Step, Ramp, Pulse, Square, Clock, FromArray, WhiteNoise
math          Gain, Sum, Product, Abs, MathFunction, MinMax
nonlinear     Saturation, DeadZone, Lookup1D, Lookup2D, Switch, RateLimiter, Relay
routing       Mux, Demux
discrete      UnitDelay, ZeroOrderHold, RateTransition, DiscreteIntegrator, DiscretePID
discrete_lti  DiscreteStateSpace, DiscreteTransferFunction
continuous    Integrator, StateSpace, TransferFunction, FirstOrderLag, PID, Derivative,
              ODE, TransportDelay
sinks         Recorder, Scope, Terminator
============  =====================================================================

Every block documents its ports (with shapes), whether it has direct feedthrough, and whether
it has a fast-path kernel (a scalar :class:`~cosim.model.block.Kernel` that reproduces its methods
bit for bit).
"""

from blocks.continuous import (ODE, PID, Derivative, FirstOrderLag, Integrator, StateSpace,
                               TransferFunction, TransportDelay)
from blocks.discrete import (DiscreteIntegrator, DiscretePID, RateTransition, UnitDelay,
                             ZeroOrderHold)
from blocks.discrete_lti import DiscreteStateSpace, DiscreteTransferFunction
from blocks.math import Abs, Gain, MathFunction, MinMax, Product, Sum
from blocks.nonlinear import (DeadZone, Lookup1D, Lookup2D, RateLimiter, Relay, Saturation,
                              Switch)
from blocks.routing import Demux, Mux
from blocks.sinks import Recorder, Scope, Terminator
from blocks.sources import (Clock, Constant, FromArray, Pulse, Ramp, Sine, Square, Step,
                            WhiteNoise)

__all__ = [
    "Derivative", "FirstOrderLag", "Integrator", "ODE", "PID", "StateSpace",
    "TransferFunction", "TransportDelay",
    "Abs", "Clock", "Constant", "DeadZone", "Demux", "DiscreteIntegrator", "DiscretePID",
    "DiscreteStateSpace", "DiscreteTransferFunction", "FromArray", "Gain", "Lookup1D", "Lookup2D",
    "MathFunction", "MinMax", "Mux", "Product", "Pulse", "Ramp", "RateLimiter", "RateTransition",
    "Recorder", "Relay",
    "Scope", "Saturation", "Sine", "Square", "Step", "Sum", "Switch", "Terminator", "UnitDelay",
    "WhiteNoise", "ZeroOrderHold",
]
