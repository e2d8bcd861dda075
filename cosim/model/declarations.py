"""What a block class declares, read without instantiating it: the parameters a model file
may give (through ``**kw`` forwarding to base constructors), the ports and feedthrough its
declarations fix, and the summary ``cosim blocks`` prints (:func:`describe`).

The model-file loader checks parameter names and connections against these before building
anything; :mod:`cosim.model.registry` says which classes the type names mean.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from dataclasses import dataclass

from cosim.model.block import Block
from cosim.model.registry import lookup

__all__ = ["BlockType", "Declared", "Param", "declared", "describe", "parameters"]

#: Parameters of ``Block.__init__`` that a user passes to any block (through ``**kw``).
#: ``inputs`` / ``outputs`` are for block implementers, not for model files.
_BASE_PARAMS = ("sample_time",)


@dataclass(frozen=True)
class Param:
    """One constructor parameter of a block type.

    Attributes
    ----------
    name : str
    required : bool
        No default: a model file must give it.
    default : object
        The default value (None when required).
    """

    name: str
    required: bool
    default: object = None

    def __str__(self) -> str:
        return self.name if self.required else f"{self.name}={self.default!r}"


def _inits(cls: type):
    """``(class, unwrapped __init__)`` for each constructor in ``cls``'s MRO below Block."""
    for klass in cls.__mro__:
        if klass is Block or klass is object:
            return
        fn = klass.__dict__.get("__init__")
        if fn is not None:
            yield klass, inspect.unwrap(fn)


def _tree(fn) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


def _forwarding(cls: type, owner: type, fn) -> tuple[type, int, set[str]]:
    """Where ``fn`` (``owner.__init__``) forwards its ``**kw``: the class whose constructor
    receives them, how many positional arguments (``name`` included, ``self`` not) the call
    gives, and which keywords it sets itself. Without source: the next class of the MRO."""
    mro = cls.__mro__
    nxt = mro[mro.index(owner) + 1]
    tree = _tree(fn)
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "__init__" and any(k.arg is None for k in node.keywords)):
            continue
        target, args = nxt, list(node.args)
        base = node.func.value
        if isinstance(base, ast.Name):   # Base.__init__(self, ...)
            found = fn.__globals__.get(base.id)
            if isinstance(found, type) and found in mro:
                target, args = found, args[1:]
        return target, len(args), {k.arg for k in node.keywords if k.arg is not None}
    return nxt, 0, set()


def parameters(cls: type) -> list[Param]:
    """The parameters a model file may give a block of class ``cls`` (without ``name``).

    They are the class's own constructor parameters and, when it forwards ``**kw`` to a base
    constructor, the base's parameters that the forwarding call leaves open (read from the
    call's source), down to ``sample_time`` of :class:`~cosim.model.block.Block`.
    """
    out: dict[str, Param] = {}
    klass, skip_pos, skip_kw = cls, 0, set()
    while True:
        found = next(_inits(klass), None)
        if found is None:   # the keywords reach Block.__init__
            for base in _BASE_PARAMS:
                out.setdefault(base, Param(base, False, None))
            return list(out.values())
        owner, fn = found
        forwards = False
        for i, p in enumerate(list(inspect.signature(fn).parameters.values())[1:]):
            if p.kind is p.VAR_KEYWORD:
                forwards = True
            elif (p.kind is not p.VAR_POSITIONAL and p.name != "name" and i >= skip_pos
                    and p.name not in skip_kw and p.name not in out):
                required = p.default is p.empty
                out[p.name] = Param(p.name, required, None if required else p.default)
        if not forwards:
            return list(out.values())
        klass, skip_pos, skip_kw = _forwarding(cls, owner, fn)


def _class_sources(cls: type) -> list[ast.AST]:
    """Syntax trees of the classes in ``cls``'s MRO below Block (those with source), most
    derived first."""
    trees = []
    for klass in cls.__mro__:
        if klass is Block or klass is object:
            break
        try:
            trees.append(ast.parse(textwrap.dedent(inspect.getsource(klass))))
        except (OSError, TypeError, SyntaxError):
            continue
    return trees


@dataclass(frozen=True)
class Declared:
    """What a block class fixes for all its instances, read from its source (:func:`declared`).

    Attributes
    ----------
    inputs, outputs : tuple of str or None
        The ports every instance has; None when the constructor chooses them from the
        parameters.
    feedthrough_varies : bool
        The constructor sets ``direct_feedthrough`` from the parameters.
    """

    inputs: tuple[str, ...] | None
    outputs: tuple[str, ...] | None
    feedthrough_varies: bool


@functools.lru_cache(maxsize=None)
def declared(cls: type) -> Declared:
    """The ports and feedthrough of ``cls`` as its declarations and constructors fix them.

    Ports are the class attributes ``input_ports`` / ``output_ports`` unless the class passes
    ``inputs=`` / ``outputs=`` to a base ``__init__`` (a literal tuple fixes them, any other
    value makes them depend on the parameters) or assigns ``self.input_names`` /
    ``self.output_names``. Feedthrough varies when a method assigns
    ``self.direct_feedthrough``. Read from the source of the classes below Block; nothing is
    instantiated; without source, only the class attributes are seen.
    """
    ports = {"inputs": tuple(cls.input_ports), "outputs": tuple(cls.output_ports)}
    fixed: set[str] = set()   # set by a more derived class already
    feedthrough = False
    for tree in _class_sources(cls):   # most derived first
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "__init__":
                for k in node.keywords:
                    if k.arg in ports and k.arg not in fixed:
                        fixed.add(k.arg)
                        try:
                            value = ast.literal_eval(k.value)
                            ports[k.arg] = tuple(value) if isinstance(value, (tuple, list)) \
                                and all(isinstance(v, str) for v in value) else None
                        except ValueError:
                            ports[k.arg] = None
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    if t.attr in ("input_names", "output_names"):
                        ports[t.attr.replace("_names", "s")] = None
                        fixed.add(t.attr.replace("_names", "s"))
                    feedthrough |= t.attr == "direct_feedthrough"
    return Declared(ports["inputs"], ports["outputs"], feedthrough)


@dataclass(frozen=True)
class BlockType:
    """What a block type declares, for ``cosim blocks``.

    Attributes
    ----------
    name : str
        Type name in model files.
    cls : type
    summary : str
        First paragraph of the class docstring.
    inputs, outputs : tuple of str or None
        The ports every instance has (see :func:`declared`); None when the parameters
        choose them.
    default_inputs, default_outputs : tuple of str or None
        Ports of an instance made with the default parameters, for ports the parameters
        choose, when every parameter has a default (None otherwise).
    params : list of Param
    feedthrough : bool
        Declared ``direct_feedthrough``.
    feedthrough_varies : bool
        The constructor sets the feedthrough from the parameters.
    sample_time : None, float or tuple
        Declared sample time (None: inherited from the base step).
    continuous : bool
        The class has continuous state (implements ``derivative``).
    """

    name: str
    cls: type
    summary: str
    inputs: tuple[str, ...] | None
    outputs: tuple[str, ...] | None
    default_inputs: tuple[str, ...] | None
    default_outputs: tuple[str, ...] | None
    params: list[Param]
    feedthrough: bool
    feedthrough_varies: bool
    sample_time: object
    continuous: bool


def describe(name: str, cls: type | None = None) -> BlockType:
    """Describe block type ``name`` from its class's declarations.

    Nothing is instantiated except, for a type whose ports the parameters choose and whose
    parameters all have defaults, one instance with the defaults (to show its default ports).
    """
    cls = lookup(name) if cls is None else cls
    params = parameters(cls)
    decl = declared(cls)
    d_in = d_out = None
    if (decl.inputs is None or decl.outputs is None) and not any(p.required for p in params):
        try:
            inst = cls("probe")
            d_in, d_out = tuple(inst.input_names), tuple(inst.output_names)
        except Exception:   # a description must not fail on a constructor's own checks
            pass
    doc = (inspect.getdoc(cls) or "").strip()
    summary = " ".join(doc.split("\n\n")[0].split())   # the first paragraph, on one line
    return BlockType(
        name=name, cls=cls, summary=summary,
        inputs=decl.inputs, outputs=decl.outputs,
        default_inputs=d_in if decl.inputs is None else None,
        default_outputs=d_out if decl.outputs is None else None, params=params,
        feedthrough=cls.direct_feedthrough, feedthrough_varies=decl.feedthrough_varies,
        sample_time=cls.sample_time, continuous=cls.derivative is not Block.derivative)
