"""Block library of cosim, built only on the public ``cosim.Block`` API (one module per family)."""

from blocks.discrete import UnitDelay
from blocks.math import Gain, Sum
from blocks.sinks import Recorder, Terminator
from blocks.sources import Constant, Sine

__all__ = ["Constant", "Gain", "Recorder", "Sine", "Sum", "Terminator", "UnitDelay"]
