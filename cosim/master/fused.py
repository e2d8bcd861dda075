"""The fused macro step of one unit: the master's side of :class:`~cosim.master.protocol.Step`.

A unit in another process that lists :data:`~cosim.master.protocol.FUSED_STEP` gets one
``Step`` per macro step instead of the batch ``SetInputs``, ``DoStep``, (``RefreshOutputs``),
``GetOutputs``, its inputs and their derivatives packed in one float64 array, and answers one
``Stepped`` with its outputs packed likewise: one message whose layout stays the same from
step to step, which the codec encodes from a prepared header (``cluster.codec``). The values
are the protocol path's, bit for bit: the same extrapolation, only packed.
"""

from __future__ import annotations

import math

import numpy as np

from cosim.errors import TransportError
from cosim.master import protocol as P

__all__ = ["FusedStep"]


class FusedStep:
    """Packs one unit's macro step into a :class:`~cosim.master.protocol.Step` and unpacks
    its :class:`~cosim.master.protocol.Stepped`.

    Parameters
    ----------
    unit : str
        The unit's name.
    ports : list of (str, (str, str))
        The unit's inputs and the outputs driving them (``UnitGraph.inputs[unit]``).
    outputs : tuple of PortInfo
        The unit's outputs, in the order of its description (the order of ``Stepped``).
    """

    def __init__(self, unit: str, ports, outputs):
        self.unit = unit
        self.ports = list(ports)
        self.layout = []                # (output, shape, start, end) in Stepped.outputs
        start = 0
        for p in outputs:
            end = start + math.prod(p.shape)
            self.layout.append((p.name, p.shape, start, end))
            start = end
        self.size = start
        self.names = tuple(name for name, _ in self.ports)
        self.keys = [key for _, key in self.ports]
        self.held = (0,) * len(self.ports)
        # The output whose value is the whole of Stepped.outputs as it comes (one output of
        # shape (size,)), else None.
        self.whole = (unit, self.layout[0][0]) \
            if len(self.layout) == 1 and self.layout[0][1] == (self.size,) else None

    def request(self, history, values: dict, T: float, H: float, fresh: dict, cand: dict,
                mode: int, after: list | None = None) -> P.Step:
        """The unit's ``Step`` over ``[T, T+H]``: the inputs of
        :meth:`PortHistory.inputs <cosim.master.extrapolation.PortHistory.inputs>` (``fresh``
        outputs at T+H to interpolate to, coupling candidates ``cand`` to ramp to), packed;
        with ``after`` (``mode`` has ``STEP_RESET``), then the inputs' values at ``T+H``, in
        the order of the unit's inputs."""
        if history.order == 0 and not cand:
            # Every input holds its value at T, without derivatives (PortHistory.inputs at
            # order 0): the values themselves, one of them sent as it is.
            vals = [values[key] for key in self.keys]
            if after:
                vals += after
            if len(vals) == 1 and vals[0].ndim == 1 and vals[0].dtype == np.float64:
                data = vals[0]
            else:
                data = np.concatenate([v.ravel() for v in vals]) if vals else np.zeros(0)
                if data.dtype != np.float64:
                    data = data.astype(np.float64)
            return P.Step(self.names, self.held, mode, T, H, data)
        parts, orders = [], []
        for _, v, d in history.each(self.ports, values, H, fresh, cand):
            parts.append(v.ravel())
            if d:
                parts += [x.ravel() for x in d]
            orders.append(len(d))
        if after:
            parts += [np.ravel(v) for v in after]
        data = np.concatenate(parts) if parts else np.zeros(0)
        if data.dtype != np.float64:
            data = data.astype(np.float64)
        return P.Step(self.names, tuple(orders), mode, T, H, data)

    def outputs(self, out: np.ndarray, into: dict) -> None:
        """Unpack ``out`` (a ``Stepped``'s outputs) into ``into[(unit, output)]`` (views,
        each of its port's shape)."""
        if type(out) is not np.ndarray or out.dtype != np.float64 or out.shape != (self.size,):
            raise TransportError(self.unit, "Step", f"Stepped.outputs must be float64 of "
                                 f"shape ({self.size},), got {getattr(out, 'dtype', '?')} "
                                 f"{getattr(out, 'shape', '?')}")
        whole = self.whole
        if whole is not None:               # one output, a vector: the array is its value
            into[whole] = out
            return
        unit = self.unit
        for name, shape, start, end in self.layout:
            into[(unit, name)] = out[start:end].reshape(shape)
