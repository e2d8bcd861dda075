"""Unit files: one atomic subsystem of a model, written as a model file its team serves.

``cosim export-unit MODEL --subsystem NAME -o unit.yaml`` writes the subsystem with the
model's parameters and context (what its expressions refer to), its own step and solver, and
the unit's ports as the file's own ports: a top-level ``Inport`` per unit input and an
``Outport`` per output, wired to the subsystem. So ``cosim check unit.yaml`` compiles it as
it stands (the inputs are free ports, not undriven blocks), ``cosim run unit.yaml`` runs it
with its inputs at their initial values, and ``cosim serve unit.yaml`` serves the subsystem
as the unit ``NAME`` that a master's model reaches by address.
"""

from __future__ import annotations

from pathlib import Path

from cosim.errors import ModelError

__all__ = ["export_unit", "unit_model"]


def unit_model(model, subsystem: str):
    """A Model holding atomic subsystem ``subsystem`` of ``model`` with its ports at top level.

    Raises
    ------
    ModelError
        ``subsystem`` is not a top-level atomic subsystem with its own dt, or a port name
        clashes with the subsystem's name.
    """
    from cosim.model.diagram import Inport, Model, Outport, Subsystem
    sub = model[subsystem] if subsystem in model else None
    if not isinstance(sub, Subsystem) or not sub.atomic:
        atomic = [b.name for b in model.blocks if isinstance(b, Subsystem) and b.atomic]
        raise ModelError(f"{subsystem!r} is not a top-level atomic subsystem of model "
                         f"{model.name!r} (its atomic subsystems: {', '.join(atomic) or 'none'})")
    if sub.dt is None:
        raise ModelError(f"subsystem {subsystem!r} needs its own dt to be served: give it "
                         "'dt:' (a unit steps on its own base step)")
    ports = list(sub.input_names) + list(sub.output_names)
    if subsystem in ports:
        raise ModelError(f"subsystem {subsystem!r} has a port of its own name; rename the "
                         "port (the unit file's ports are named after the unit's)")
    inner = {b.name: b for b in sub.blocks}
    unit = Model(f"{subsystem}_unit", parameters=dict(model.parameters))
    unit.context = dict(model.context)
    for name in sub.input_names:
        port = inner[name]
        unit.add(Inport(name, shape=port.shape, initial=port.initial))
    unit.add(sub)
    for name in sub.output_names:
        unit.add(Outport(name))
    for name in sub.input_names:
        unit.connect(f"{name}.out", f"{subsystem}.{name}")
    for name in sub.output_names:
        unit.connect(f"{subsystem}.{name}", f"{name}.in")
    return unit


def export_unit(model, subsystem: str, path) -> Path:
    """Write ``subsystem`` of ``model`` (a Model or a model file) as a unit file at ``path``.

    The file's ``simulation:`` section holds the subsystem's step and solver (a served unit
    is stepped by the master; ``t_end`` is the model file's).
    """
    from dataclasses import replace

    from cosim.config import SimulationConfig
    from cosim.model.diagram import Model
    if not isinstance(model, Model):
        model = Model.from_yaml(model)
    unit = unit_model(model, subsystem)
    sub = model[subsystem]
    base = getattr(model, "simulation", None)
    solver = sub.solver or (base.solver if base is not None else None)
    cfg = SimulationConfig(dt=sub.dt, t_end=base.t_end if base is not None else 0.0)
    if solver is not None:
        cfg = replace(cfg, solver=solver)
    path = Path(path)
    unit.to_yaml(path, simulation=cfg)
    return path
