"""Unit files: the model files a master writes for the processes that host its units, and
the units a process builds from one, again with other parameter values.

A master's server process (or Ray actor) is given its units as a unit file
(:func:`unit_file_data`, written by :func:`cosim.modelfile.writer.emit`): a model whose
top-level atomic subsystems are the units, the run's parameter values as its top-level
``parameters:``. Between the runs of a parameter study only those values change, as a rule:
the master then sends the values alone (:class:`~cosim.master.protocol.SetParameters`), and
the process builds its units from the file it keeps, parsed (:class:`UnitTemplate`), with
the new values: what parsing the file with those values written in would build, without
writing, sending and parsing the file every run (a few milliseconds each per process).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

__all__ = ["UnitTemplate", "split_parameters", "unit_file_data", "units_of"]


def unit_file_data(group, name: str) -> dict:
    """The data of a unit file (:func:`cosim.modelfile.writer.emit` writes it) whose
    top-level atomic subsystems are ``group``'s units (UnitSpec, each with a subsystem).

    The file's ``simulation:`` is the first unit's configuration without its log selection;
    every unit carries the fields in which its own differs, and its log selection, as
    subsystem options, so that the server derives exactly each unit's configuration (a unit's
    plan takes no log selection from its parent's).

    Parameters
    ----------
    group : list of UnitSpec
    name : str
        Names the file's model (``units_<name>``).
    """
    from dataclasses import fields, replace

    from cosim.model.diagram import Model
    from cosim.modelfile.writer import model_data
    base = replace(group[0].config, log=None)
    wrapper = Model(f"units_{name}", parameters=dict(group[0].workspace or {}))
    saved = []
    for spec in group:
        sub = spec.subsystem
        saved.append((sub, sub.options, sub.atomic, sub.dt, sub.solver))
        sub.atomic, sub.dt = True, spec.config.dt
        sub.solver = sub.solver or spec.config.solver
        diff = {f.name: getattr(spec.config, f.name) for f in fields(base)
                if f.name not in ("dt", "solver")
                and getattr(spec.config, f.name) != getattr(base, f.name)}
        sub.options = {**sub.options, **diff}
        wrapper.blocks.append(sub)
    try:
        return model_data(wrapper, simulation=base)
    finally:
        wrapper.blocks.clear()
        # As found: a Ray actor is sent the subsystems themselves.
        for sub, options, atomic, dt, solver in saved:
            sub.options, sub.atomic, sub.dt, sub.solver = options, atomic, dt, solver


def split_parameters(data: dict) -> tuple[dict, dict]:
    """A unit file's data as ``(structure, parameters)``: everything but the parameter
    values (their names included), and the values. Two files of one structure build the
    same units but for what the values change."""
    parameters = data.get("parameters", {})
    structure = {k: v for k, v in data.items() if k != "parameters"}
    structure["parameters"] = list(parameters)
    return structure, dict(parameters)


def units_of(obj) -> dict:
    """The units a loaded unit file defines (:func:`cosim.modelfile.load` of it, evaluated
    here): a model's top-level atomic subsystems (with its ``simulation:`` options) and
    blocks that are units by themselves (an FMU block), or a library file's one subsystem.

    Raises
    ------
    ValueError
        A library subsystem that is not atomic with its own dt, or a model with no unit.
    """
    from cosim.config import SimulationConfig
    from cosim.master.local_unit import LocalUnit
    from cosim.model.diagram import Model, Subsystem
    from cosim.model.evaluate import evaluate
    from cosim.run.atomic import inner_config
    if isinstance(obj, Subsystem):
        if not obj.atomic or obj.dt is None:
            raise ValueError(f"{obj.name}: a served subsystem must be atomic with its own dt")
        parent = Model(obj.name)
        parent.add(obj)
        evaluate(parent)
        # A unit is driven by do_step: t_end is not used.
        cfg = SimulationConfig(dt=obj.dt, t_end=0.0)
        return {obj.name: LocalUnit(obj, _every_port(inner_config(obj, cfg), obj))}
    evaluate(obj)
    cfg = getattr(obj, "simulation", None) or SimulationConfig(dt=0.01, t_end=0.0)
    units = {b.name: LocalUnit(b, _every_port(inner_config(b, cfg), b)) for b in obj.blocks
             if isinstance(b, Subsystem) and b.atomic}
    # Blocks that are units by themselves (an FMU block) are served as such.
    units.update({b.name: b.as_unit(b.name, cfg) for b in obj.blocks if hasattr(b, "as_unit")})
    if not units:
        raise ValueError(f"{obj.name} has no top-level atomic subsystem or FMU block to serve")
    return units


def _every_port(config, subsystem):
    """A served unit's configuration: without a log selection of its own (a file another
    team serves), it logs every output and every port (its Outport's input), since it
    cannot know which of its ports its master shows as ``unit.port``; the master keeps
    what its selection names (:class:`cluster.zmq_backend.ServedProxy`, and the partition's
    keys hide the ports it does not show)."""
    from dataclasses import replace

    from cosim.compile.flatten import ALL_OUTPUTS
    if config.log is not None:
        return config
    return replace(config, log=(ALL_OUTPUTS, *(f"{p}.in" for p in subsystem.output_names)))


class UnitTemplate:
    """A unit file parsed once, to build its units again, with other parameter values.

    Parameters
    ----------
    source : str or os.PathLike
        The unit file (a path, or its text).
    limit : callable, optional
        Applied to every set of units built (a server's limits on a step's work).

    Raises
    ------
    CompileError
        The file cannot be read (as :func:`cosim.modelfile.load` says).
    """

    def __init__(self, source, limit: Callable[[dict], dict] | None = None,
                 own_paths: bool = False):
        from cosim.modelfile import load
        self._limit = limit or (lambda units: units)
        # Never evaluated (evaluation builds blocks and inlines references in place): each
        # build evaluates a copy.
        self._pristine = load(source, own_paths=own_paths)

    def units(self, parameters: Mapping | None = None) -> dict:
        """The units the file builds, with these values of its top-level parameters (bit for
        bit those of the file with the values written in), or with its own.

        Raises
        ------
        ValueError
            The names are not the file's parameters.
        Exception
            What evaluating the model with these values raises (a value of a wrong kind).
        """
        from cosim.model.diagram import Model
        obj = copy.deepcopy(self._pristine)
        if parameters is not None:
            names = list(obj.parameters) if isinstance(obj, Model) else []  # a library: none
            if sorted(parameters) != sorted(names):
                raise ValueError(f"the unit file has parameters {', '.join(names) or 'none'}"
                                 f", not {', '.join(sorted(parameters)) or 'none'}")
            if names:
                # In the file's order, as a parse of the file with these values has them.
                obj.parameters = {k: parameters[k] for k in names}
        return self._limit(units_of(obj))
