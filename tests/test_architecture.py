"""The architecture holds: layers (import-linter contracts in pyproject.toml) and no reach-ins.

Each piece of state has one owner. A module may use another module's or object's public names
only: no ``from x import _y``, no ``obj._attr`` on anything but ``self``/``cls``, no writing
``obj.__dict__["_..."]`` of an object of another class. The few reach-ins into *third-party*
internals that have no public equivalent are listed below, each with its reason; a new one
must be added there, on purpose, with a reason.
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("cosim", "blocks", "cluster")

#: (file, attribute) -> why the reach-in is unavoidable.
ALLOWED = {
    ("cosim/solvers/scipy_adapter.py", "_lsoda_solver"):
        "scipy's LSODA keeps its ODEPACK work arrays and state (critical time, next step size, "
        "the step history a checkpoint saves) private",
    ("cosim/solvers/scipy_adapter.py", "_integrator"):
        "scipy's LSODA keeps its ODEPACK work arrays and state (critical time, next step size, "
        "the step history a checkpoint saves) private",
    ("cosim/solvers/scipy_adapter.py", "_compute_dense_output"):
        "a restored scipy Radau needs its last step's dense output (the next step's Newton "
        "start), which only this private method builds from the restored history",
}

#: Underscore names that are public API by convention (namedtuple methods, os._exit).
CONVENTIONAL = {"_make", "_replace", "_asdict", "_fields", "_exit"}


def _sources():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in CONVENTIONAL


def _own(node) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own names."""
    if isinstance(node, ast.Name) and node.id in ("self", "cls"):
        return True
    return isinstance(node, ast.Call) and getattr(node.func, "id", "") == "super"


def reach_ins() -> list[str]:
    """Every reach-in into another module's or object's underscore names."""
    found = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                found += [f"{rel}:{node.lineno} imports {node.module}.{a.name}"
                          for a in node.names if _private(a.name)]
            elif isinstance(node, ast.Attribute) and _private(node.attr) \
                    and not _own(node.value) and (rel, node.attr) not in ALLOWED:
                found.append(f"{rel}:{node.lineno} reads or writes .{node.attr} of "
                             f"{ast.unparse(node.value)}")
            elif isinstance(node, (ast.Subscript, ast.Call)):
                # obj.__dict__["_x"] / obj.__dict__.get("_x"): the same reach-in, spelled
                # through the instance dict.
                target = node.value if isinstance(node, ast.Subscript) else node.func
                key = node.slice if isinstance(node, ast.Subscript) else \
                    (node.args[0] if node.args else None)
                if isinstance(node, ast.Call):
                    if not (isinstance(target, ast.Attribute) and target.attr == "get"):
                        continue
                    target = target.value
                if (isinstance(target, ast.Attribute) and target.attr == "__dict__"
                        and not _own(target.value) and isinstance(key, ast.Constant)
                        and isinstance(key.value, str) and _private(key.value)
                        and rel != "cosim/model/block.py"):
                    found.append(f"{rel}:{node.lineno} uses {ast.unparse(target)}"
                                 f"[{key.value!r}]")
    return found


def test_no_module_reaches_into_another_ones_underscore_names():
    found = reach_ins()
    assert not found, ("reach-ins (use or add a public name instead):\n" + "\n".join(found))


def test_the_scan_finds_a_reach_in():
    tree = ast.parse("from cosim.x import _y\nsim._state = 1\nself._ok = 2\n")
    privates = [n for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and _private(n.attr) and not _own(n.value)]
    assert [ast.unparse(n) for n in privates] == ["sim._state"]
    assert _private("_y") and not _private("__init__") and not _private("_make")


def test_import_contracts_hold():
    """Layers: cluster over blocks over cosim; cosim imports neither (import-linter)."""
    from importlinter import configuration
    from importlinter.application import use_cases
    configuration.configure()
    assert use_cases.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_logo=True,
                                  cache_dir=None), "an import contract is broken (see above)"
