"""``cosim run`` options turned into the run's configuration: parameter overrides and the
co-simulation settings (macro step, scheme, coupling iteration, backend, per-unit options,
CURVE keys of served units).

Every co-simulation flag co-simulates: with the file's ``simulation.cosim`` section when it
has one (the flags change it), else Jacobi at a macro step of the base step (``--cosim H``
chooses it). ``--monolithic`` runs the model as one simulation whatever the file says.
"""

from __future__ import annotations

import difflib
import re

from cosim.cli.common import Usage

__all__ = ["COSIM_FLAGS", "add_cosim_arguments", "overrides", "port_range", "run_config",
           "runtime_env_file"]

_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_INT = re.compile(r"^[-+]?\d+$")

#: ``cosim run`` destination -> the CosimConfig field it sets.
COSIM_FLAGS = {"scheme": "scheme", "extrapolation": "extrapolation",
               "feedthrough": "feedthrough", "iterate": "iterate", "tolerance": "tolerance",
               "max_iterations": "max_iterations", "relaxation": "relaxation",
               "acceleration": "acceleration", "adaptive": "adaptive",
               "ray_address": "address", "partition": "partition"}


def add_cosim_arguments(p) -> None:
    """The co-simulation options of ``cosim run`` (an argparse parser)."""
    from cosim.config import Acceleration, Feedthrough, Scheme
    from cosim.master.backends import backend_names
    g = p.add_argument_group(
        "co-simulation", "Any of these co-simulates the model: every top-level atomic "
        "subsystem is a unit, the other top-level blocks form the unit 'main'. They change "
        "the file's simulation.cosim section (or Jacobi at the base step when it has none).")
    g.add_argument("--cosim", type=float, metavar="H", default=None, dest="macro_step",
                   help="macro step H (s)")
    g.add_argument("--backend", choices=backend_names(), default=None,
                   help="where the units run (local: in this process; ray: Ray actors, a "
                        "local Ray is started if none runs; zmq: server processes; remote: "
                        "every unit at its address)")
    g.add_argument("--scheme", choices=[s.value for s in Scheme])
    g.add_argument("--extrapolation", type=int, choices=(0, 1, 2),
                   help="degree of the polynomial a unit's input follows over a macro step")
    g.add_argument("--feedthrough", choices=[f.value for f in Feedthrough],
                   help="resolve direct feedthrough at macro points (iterating couplings) "
                        "or delay it one macro step")
    g.add_argument("--iterate", action="store_true", default=None,
                   help="iterate algebraic couplings to a fixed point every macro step")
    g.add_argument("--no-iterate", action="store_false", dest="iterate",
                   help="do not iterate couplings (one pass per macro step)")
    g.add_argument("--tolerance", type=float, metavar="TOL",
                   help="max-norm tolerance of the coupling iteration")
    g.add_argument("--max-iterations", type=int, metavar="N")
    g.add_argument("--relaxation", type=float, metavar="W")
    g.add_argument("--acceleration", choices=[a.value for a in Acceleration])
    g.add_argument("--adaptive", action="store_true", default=None,
                   help="adapt the macro step from the coupling error")
    g.add_argument("--partition", type=int, metavar="K",
                   help="cut a model of plain blocks into K units of balanced cost, on "
                        "signals after states where it can (`cosim plan --partition K` shows "
                        "the cut)")
    g.add_argument("--ray-address", metavar="ADDRESS",
                   help="Ray cluster to join ('auto' or the head's host:port)")
    g.add_argument("--runtime-env", metavar="FILE",
                   help="Ray runtime environment of the unit actors (YAML or JSON: "
                        "working_dir, py_modules, pip, env_vars)")
    g.add_argument("--ports", metavar="LOW-HIGH",
                   help="Ray: port range of the unit actors' data-plane sockets (the range "
                        "a firewall between the machines leaves open)")
    g.add_argument("--unit", action="append", default=[], metavar="NAME.OPTION=VALUE",
                   dest="unit_options",
                   help="a unit's option (cosim.config.UnitOptions: address, process, "
                        "num_cpus, resources, node, curve_server_public, curve_client_keys), "
                        "e.g. --unit battery.address=tcp://10.0.0.7:5555; repeatable")
    g.add_argument("--server-key", metavar="FILE",
                   help="public key file of the servers of units with an address (CURVE)")
    g.add_argument("--client-key", metavar="FILE",
                   help="this master's key file, with its secret (CURVE; made by cosim keys)")
    g.add_argument("--monolithic", action="store_true",
                   help="simulate as one plan even if the file asks for co-simulation")


def run_config(model, path: str, args=None):
    """The model file's simulation options with the command line's changes.

    Parameters
    ----------
    model : Model
    path : str
        The model file (named in messages).
    args : argparse.Namespace, optional
        ``cosim run``'s options; None: the file's options as they are.
    """
    from dataclasses import replace

    from cosim.config import CosimConfig
    cfg = getattr(model, "simulation", None)
    if cfg is None:
        raise Usage(f"{path} has no 'simulation:' section; add one with at least dt and "
                    "t_end, e.g. 'simulation: {dt: 0.01, t_end: 10.0}'")
    if args is None:
        return cfg
    if args.t_end is not None:
        cfg = replace(cfg, t_end=args.t_end)   # validated again: a bad value is a ModelError
    changes = {field: getattr(args, dest) for dest, field in COSIM_FLAGS.items()
               if getattr(args, dest) is not None}
    if args.backend is not None:
        changes["backend"] = args.backend
    if getattr(args, "runtime_env", None) is not None:
        changes["runtime_env"] = runtime_env_file(args.runtime_env)
    if getattr(args, "ports", None) is not None:
        changes["ports"] = port_range(args.ports)
    units = _unit_options(args.unit_options)
    keys = {"curve_server_public": args.server_key, "curve_client_keys": args.client_key}
    keys = {k: v for k, v in keys.items() if v is not None}
    asked = changes or units or keys or args.macro_step is not None
    if args.monolithic:
        if asked:
            raise Usage("--monolithic cannot be combined with co-simulation options "
                        "(--cosim, --backend, --scheme, --unit, ...)")
        return replace(cfg, cosim=None)
    if not asked:
        return cfg
    cosim = cfg.cosim or CosimConfig(H=cfg.dt)
    if args.macro_step is not None:
        changes["H"] = args.macro_step
    merged = {name: dict(vars(opts)) for name, opts in cosim.units.items()}
    for name, opts in units.items():
        merged.setdefault(name, {}).update(opts)
    if keys:
        served = [name for name, opts in merged.items() if opts.get("address")]
        if not served:
            raise Usage("--server-key/--client-key are for units served elsewhere, and no "
                        "unit has an address: add --unit NAME.address=tcp://HOST:PORT")
        for name in served:
            merged[name].update(keys)
    _check_files(merged)
    return replace(cfg, cosim=replace(cosim, units=merged, **changes))


def _unit_options(assignments: list[str]) -> dict:
    """``--unit NAME.OPTION=VALUE`` arguments as ``{unit: {option: value}}``."""
    from dataclasses import fields

    from cosim.config import UnitOptions
    valid = [f.name for f in fields(UnitOptions)]
    out: dict[str, dict] = {}
    problems = []
    for text in assignments:
        target, sep, value = text.partition("=")
        unit, dot, option = target.strip().partition(".")
        if not (sep and dot and unit and option and value.strip()):
            problems.append(f"--unit {text!r}: write NAME.OPTION=VALUE, e.g. "
                            "--unit battery.address=tcp://10.0.0.7:5555")
            continue
        if option not in valid:
            close = difflib.get_close_matches(option, valid, n=1)
            problems.append(f"--unit {text!r}: unknown option {option!r}"
                            + (f"; did you mean {close[0]!r}?" if close else "")
                            + f" (options: {', '.join(valid)})")
            continue
        out.setdefault(unit, {})[option] = _value(value.strip())
    if problems:
        raise Usage("bad unit option" + ("s" if len(problems) > 1 else "") + ":\n"
                    + "\n".join(f"  {p}" for p in problems))
    return out


def _value(text: str):
    """A number, a YAML mapping (``{gpu_node: 1}``) or the text itself."""
    if _INT.match(text):
        return int(text)
    if _NUMBER.match(text):
        return float(text)
    if text.startswith("{"):
        import yaml
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise Usage(f"--unit value {text!r} is not a mapping: {err}") from err
    return text


def _check_files(units: dict) -> None:
    """Key files named for units exist (a missing one is found now, not at connect time)."""
    from pathlib import Path
    for name, opts in units.items():
        for option in ("curve_server_public", "curve_client_keys"):
            path = opts.get(option)
            if path is not None and not Path(path).is_file():
                raise Usage(f"unit {name}: {option} {path}: no such key file (make a key "
                            "pair with: cosim keys NAME)")


def overrides(assignments: list[str], model) -> dict:
    """``-p NAME=VALUE`` arguments as parameter overrides (numbers or expressions)."""
    from cosim.model.expr import check_expression
    out, problems = {}, []
    params = model.parameters
    for text in assignments:
        name, sep, value = text.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name.isidentifier() or not value:
            problems.append(f"-p {text!r}: write NAME=VALUE (a number or an expression)")
            continue
        if name not in params:
            close = difflib.get_close_matches(name, list(params), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            problems.append(f"-p {name}: not a parameter of model {model.name!r}{hint} "
                            f"(parameters: {', '.join(params) or 'none'})")
            continue
        if _INT.match(value):
            out[name] = int(value)
        elif _NUMBER.match(value):
            out[name] = float(value)
        else:
            expression = value if value.startswith("=") else "=" + value
            problem = check_expression(expression, set(params) | set(model.context))
            if problem is not None:
                problems.append(f"-p {name}={value}: {problem}")
                continue
            out[name] = expression
    if problems:
        raise Usage("bad parameter override" + ("s" if len(problems) > 1 else "") + ":\n"
                    + "\n".join(f"  {p}" for p in problems))
    return out


def port_range(text: str | None) -> tuple[int, int] | None:
    """``--ports LOW-HIGH`` as ``(low, high)`` (None stays None).

    Raises
    ------
    Usage
        Not two whole numbers ``LOW-HIGH`` with ``1024 <= LOW <= HIGH <= 65535``.
    """
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not m or not 1024 <= int(m[1]) <= int(m[2]) <= 65535:
        raise Usage(f"--ports {text!r}: give LOW-HIGH with 1024 <= LOW <= HIGH <= 65535, "
                    "e.g. --ports 50000-50100")
    return int(m[1]), int(m[2])


def runtime_env_file(path: str | None) -> dict | None:
    """The Ray runtime environment in file ``path`` (a YAML or JSON mapping; None stays
    None).

    Raises
    ------
    Usage
        The file cannot be read or does not hold a mapping.
    """
    if path is None:
        return None
    import yaml
    try:
        with open(path, encoding="utf-8") as fh:
            env = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as err:
        raise Usage(f"--runtime-env {path!r}: cannot read it: {err}") from None
    if not isinstance(env, dict):
        raise Usage(f"--runtime-env {path!r}: expected a mapping (working_dir, py_modules, "
                    f"pip, env_vars, ...), got {type(env).__name__}")
    return env
