"""Ensembles on the fast path: one plan stepped for N parameter sets at once.

The scalar strategy's step function (:mod:`cosim.fastpath.scalar`) computes every value of a
run as a local float, one statement per block. Translated here, each value that differs
between the members of an ensemble is an array of shape ``(N,)`` (a *member* value) and each
statement a few numpy ufunc calls writing into preallocated buffers (``out=``), in the
statement's own evaluation order: ``a * b + c`` is a multiply into a temporary, then an add
into the target. Elementwise float64 arithmetic rounds per element as Python's float
arithmetic does, so every member computes bit for bit what its own run computes. Values the
same for every member (time, step size, shared parameters, a step input) stay Python floats;
an operand of a numpy call they become 0-d arrays (numpy's scalar path is slower). The
Runge–Kutta combinations of all continuous-state components run as one call per term on
``(n_c, N)`` arrays.

Only what translates exactly is accepted (else :class:`~cosim.fastpath.runtime.Unsupported`):
``+ - * /``, unary ``- +``, ``abs``, comparisons and conditional expressions. Errors follow
Python's floats: a division by zero or an invalid operation raises (numpy is told to), an
overflow gives inf.
"""

from __future__ import annotations

import ast
import re

import numpy as np

from cosim.fastpath.runtime import Unsupported

__all__ = ["Translation", "translate"]

_BINOPS = {ast.Add: "_add", ast.Sub: "_sub", ast.Mult: "_mul", ast.Div: "_div"}
_CMPS = {ast.Lt: "_lt", ast.LtE: "_le", ast.Gt: "_gt", ast.GtE: "_ge", ast.Eq: "_eq",
         ast.NotEq: "_ne"}
#: The numpy functions the translated code calls (its globals).
UFUNCS = {"_add": np.add, "_sub": np.subtract, "_mul": np.multiply, "_div": np.true_divide,
          "_neg": np.negative, "_abs": np.absolute, "_lt": np.less, "_le": np.less_equal,
          "_gt": np.greater, "_ge": np.greater_equal, "_eq": np.equal, "_ne": np.not_equal,
          "_copyto": np.copyto, "_arr": np.array}

#: Names of the scalar strategy's values that hold state across ticks (always member arrays).
_STATE = re.compile(r"^(x\d+|c\d+|z\d+|k\d+_\d+)$")
_STACKED = re.compile(r"\b(c|z)(\d+)\b|\bk(\d+)_(\d+)\b")


class Translation:
    """The source of an ensemble step function and the buffers it names.

    Attributes
    ----------
    source : str
        ``advance(k, k_stop, last_logged, ticks, k_full, k_log, V, L)``: like the scalar
        step function's, with ``V`` the tuple of its arrays (:attr:`names` order) and
        ``L[task][column]`` the log arrays, shape ``(rows, N)``.
    names : list of str
        The arrays the function unpacks from ``V``.
    buffers : dict of str to tuple
        Name -> shape (``()`` 0-d, ``("N",)``, ``("C", "N")``) or dtype note of each buffer
        the caller allocates; member values ``x<i>``, ``c<i>`` and varying constants are
        given by the caller.
    zero_d : dict of str to str
        0-d constant name -> the scalar source it holds (a literal or a shared constant).
    """

    def __init__(self):
        self.source = ""
        self.names: list[str] = []
        self.buffers: dict[str, tuple] = {}
        self.zero_d: dict[str, str] = {}


def translate(source: str, member_consts: set[str], n_c: int) -> Translation:
    """Translate the scalar strategy's step function for an ensemble.

    Parameters
    ----------
    source : str
        The scalar strategy's generated source.
    member_consts : set of str
        Constants (``_k<i>``) whose values differ between members.
    n_c : int
        Continuous-state components.

    Raises
    ------
    Unsupported
        The source uses something without an exact elementwise translation.
    """
    return _Translator(source, member_consts, n_c).run()


class _Translator:
    def __init__(self, source, member_consts, n_c):
        tree = ast.parse(source)
        fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        if len(fns) != 1 or fns[0].name != "advance":
            raise Unsupported("a chunked step function (large plan)")
        self.fn = fns[0]
        tries = [n for n in self.fn.body if isinstance(n, ast.Try)]
        if len(tries) != 1 or len(tries[0].body) != 1 or \
                not isinstance(tries[0].body[0], ast.While):
            raise Unsupported("unexpected step function")
        self.loop = tries[0].body[0]
        self.n_c = n_c
        self.out = Translation()
        self.member = set(member_consts)
        self.alias: set[str] = set()        # signals bound to a state's view
        self.lines: list[str] = []
        self.temps = {"N": 0, "C": 0, "B": 0, "BC": 0}
        self._kinds()

    # -- which values are member arrays --------------------------------------------------

    def _assigns(self, body):
        for st in body:
            if isinstance(st, ast.Assign):
                yield st
            elif isinstance(st, (ast.If, ast.While)):
                yield from self._assigns(st.body)
                yield from self._assigns(st.orelse)

    def _kinds(self) -> None:
        pairs = []
        for st in self._assigns(self.loop.body):
            tg = st.targets[0]
            if isinstance(tg, ast.Tuple):
                pairs += list(zip(tg.elts, st.value.elts))
            else:
                pairs.append((tg, st.value))
        names = {p[0].id for p in pairs if isinstance(p[0], ast.Name)}
        self.member |= {n for n in names if _STATE.match(n)}
        self.member |= {f"c{j}" for j in range(self.n_c)}
        changed = True
        while changed:
            changed = False
            for tg, value in pairs:
                if tg.id not in self.member and self._reads_member(value):
                    self.member.add(tg.id)
                    changed = True
        for tg, value in pairs:
            if tg.id in self.member and isinstance(value, ast.Name) and \
                    re.match(r"^[cz]\d+$", value.id):
                self.alias.add(tg.id)
        for tg, value in pairs:
            bare = isinstance(value, ast.Name) and re.match(r"^[cz]\d+$", value.id)
            if tg.id in self.alias and not bare:
                raise Unsupported(f"{tg.id} is both a state's view and computed")

    def _reads_member(self, node) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.member for n in ast.walk(node))

    # -- buffers -----------------------------------------------------------------------------

    def _buffer(self, name: str, shape: tuple) -> str:
        self.out.buffers.setdefault(name, shape)
        return name

    def _temp(self, shape: str) -> str:
        n = self.temps[shape]
        self.temps[shape] += 1
        return self._buffer(f"_t{shape}{n}", {"N": ("N",), "C": ("C", "N"), "B": ("bool", "N"),
                                             "BC": ("bool", "C", "N")}[shape])

    def _zero_d(self, text: str) -> str:
        """A 0-d array holding the constant scalar ``text`` (a literal or shared constant)."""
        for name, t in self.out.zero_d.items():
            if t == text:
                return name
        name = f"_z{len(self.out.zero_d)}"
        self.out.zero_d[name] = text
        self._buffer(name, ())
        return name

    # -- expressions -------------------------------------------------------------------------

    def expr(self, node, dst: str | None, stacked: bool = False) -> tuple[bool, str]:
        """Emit the calls computing ``node``; ``(is member array, source of the value)``.

        A member value is written into ``dst`` when given (else into a temporary, or it is a
        name already holding it); a shared value is returned as Python source.
        """
        if not self._reads_member(node):
            if dst is not None:
                self.lines.append(f"{dst}[...] = {ast.unparse(node)}")
                return True, dst
            return False, ast.unparse(node)
        shape = "C" if stacked else "N"
        if isinstance(node, ast.Name):
            if dst is not None and dst != node.id:
                self.lines.append(f"_copyto({dst}, {node.id})")
                return True, dst
            return True, node.id
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a = self.operand(node.left, stacked)
            b = self.operand(node.right, stacked)
            out = dst or self._temp(shape)
            self.lines.append(f"{_BINOPS[type(node.op)]}({a}, {b}, {out})")
            return True, out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            if isinstance(node.op, ast.UAdd):
                return self.expr(node.operand, dst, stacked)
            a = self.operand(node.operand, stacked)
            out = dst or self._temp(shape)
            self.lines.append(f"_neg({a}, {out})")
            return True, out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "abs" and len(node.args) == 1 and not node.keywords:
            a = self.operand(node.args[0], stacked)
            out = dst or self._temp(shape)
            self.lines.append(f"_abs({a}, {out})")
            return True, out
        if isinstance(node, ast.IfExp):
            out = dst or self._temp(shape)
            if not self._reads_member(node.test):
                self.lines.append(f"if {ast.unparse(node.test)}:")
                self._indented(lambda: self.expr(node.body, out, stacked))
                self.lines.append("else:")
                self._indented(lambda: self.expr(node.orelse, out, stacked))
                return True, out
            # Both branches are computed (each member selects its own), into a temporary:
            # a branch may read the target's old value.
            cond = self.condition(node.test, stacked)
            sel = self._temp(shape)
            self.expr(node.orelse, sel, stacked)
            b = self.operand(node.body, stacked)
            self.lines.append(f"_copyto({sel}, {b}, where={cond})")
            if dst is None:
                return True, sel
            self.lines.append(f"_copyto({dst}, {sel})")
            return True, dst
        raise Unsupported(f"no exact elementwise form of {ast.unparse(node)!r}")

    def _indented(self, emit) -> None:
        start = len(self.lines)
        emit()
        self.lines[start:] = ["    " + ln for ln in self.lines[start:]]

    def operand(self, node, stacked: bool) -> str:
        """Source of ``node``'s value as a numpy operand (a member array or a 0-d array)."""
        member, src = self.expr(node, None, stacked)
        if member:
            return src
        if isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and
                                              node.id.startswith("_k")):
            return self._zero_d(src)
        return f"_arr({src})"

    def condition(self, node, stacked: bool) -> str:
        """A boolean member array of a comparison ``a < b`` (one operator)."""
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPS:
            a = self.operand(node.left, stacked)
            b = self.operand(node.comparators[0], stacked)
            out = self._temp("BC" if stacked else "B")
            self.lines.append(f"{_CMPS[type(node.ops[0])]}({a}, {b}, {out})")
            return out
        raise Unsupported(f"no exact elementwise form of the test {ast.unparse(node)!r}")

    # -- statements --------------------------------------------------------------------------

    def statements(self, body, indent: int) -> None:
        i = 0
        while i < len(body):
            st = body[i]
            n = self._stacked_run(body, i)
            if n:
                self._stacked(body[i], indent)
                i += n
                continue
            self.stmt(st, indent)
            i += 1

    def emit(self, indent: int, text: str) -> None:
        self.lines.append(" " * indent + text)

    def stmt(self, st, indent: int) -> None:
        for shape in self.temps:
            self.temps[shape] = 0
        if isinstance(st, ast.If):
            if self._reads_member(st.test):
                raise Unsupported(f"a branch on member values: {ast.unparse(st.test)}")
            self.emit(indent, f"if {ast.unparse(st.test)}:")
            self.statements(st.body, indent + 4)
            if st.orelse:
                self.emit(indent, "else:")
                self.statements(st.orelse, indent + 4)
            return
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            self._call(st.value, indent)
            return
        if isinstance(st, ast.AugAssign) or (isinstance(st, ast.Assign) and
                                             not self._touches_member(st)):
            self.emit(indent, ast.unparse(st))
            return
        if isinstance(st, ast.Assign):
            tg = st.targets[0]
            if isinstance(tg, ast.Tuple):
                self._simultaneous(tg.elts, st.value.elts, indent)
                return
            self._assign(tg.id, st.value, indent, st)
            return
        raise Unsupported(f"statement {ast.unparse(st)!r}")

    def _touches_member(self, st) -> bool:
        return self._reads_member(st) or any(
            isinstance(n, ast.Name) and n.id in self.member for t in st.targets
            for n in ast.walk(t))

    def _assign(self, target: str, value, indent: int, st=None) -> None:
        start = len(self.lines)
        into = self.retarget.get(id(st))
        if target in self.alias:
            self.lines.append(f"{target} = {value.id}")
        elif id(st) in self.dropped:
            pass                        # the signal was computed into this derivative
        elif into is not None or target in self.moved:
            # The name is bound to where this assignment computes it.
            self.lines.append(f"{target} = {into or self._buffer('_b_' + target, ('N',))}")
            self.expr(value, target)
        else:
            # A signal has a buffer of its own; states are the caller's arrays (or views).
            self.expr(value, target if _STATE.match(target) else self._buffer(target, ("N",)))
        self.lines[start:] = [" " * indent + ln for ln in self.lines[start:]]

    def _simultaneous(self, targets, values, indent: int) -> None:
        pairs = [(t.id, v) for t, v in zip(targets, values)
                 if not (isinstance(v, ast.Name) and v.id == t.id)]   # x = x: nothing to do
        start = len(self.lines)
        if len(pairs) == 1:
            self.expr(pairs[0][1], pairs[0][0])
        else:
            news = []
            for t, v in pairs:
                news.append(self._buffer(f"_new_{t}", ("N",)))
                self.expr(v, news[-1])
            self.lines += [f"_copyto({t}, {n})" for (t, _), n in zip(pairs, news)]
        self.lines[start:] = [" " * indent + ln for ln in self.lines[start:]]

    def _call(self, call, indent: int) -> None:
        text = ast.unparse(call)
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "append" and \
                isinstance(f.value, ast.Subscript) and ast.unparse(f.value.value) == "rows":
            # A log row: each value copied into its column's row of the (rows, N) arrays.
            task = ast.unparse(f.value.slice)
            self.emit(indent, f"_r = len(ticks[{task}]) - 1")
            for col, v in enumerate(call.args[0].elts):
                self.emit(indent, f"L[{task}][{col}][_r] = {ast.unparse(v)}")
            return
        if re.fullmatch(r"ticks\[\d+\]\.append\(k\)", text):
            self.emit(indent, text)
            return
        raise Unsupported(f"statement {text!r}")

    # -- Runge-Kutta combinations of every component at once ----------------------------------

    def _stacked_run(self, body, i: int) -> int:
        """Number of statements from ``body[i]`` that are one combination per component
        (``z<g> = c<g> + ...`` or ``c<g> = ...`` for g = 0 .. n_c-1), else 0."""
        if self.n_c < 2 or i + self.n_c > len(body):
            return 0
        texts = []
        for g, st in enumerate(body[i:i + self.n_c]):
            if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name)):
                return 0
            name = st.targets[0].id
            if not re.fullmatch(rf"[cz]{g}", name):
                return 0
            ok = True

            def sub(m, g=g):
                nonlocal ok
                if m.group(1):
                    ok &= int(m.group(2)) == g
                    return f"{m.group(1)}G"
                ok &= int(m.group(4)) == g
                return f"k{m.group(3)}_G"
            texts.append(_STACKED.sub(sub, ast.unparse(st)))
            if not ok:
                return 0
        return self.n_c if all(t == texts[0] for t in texts) else 0

    def _stacked(self, st, indent: int) -> None:
        """One statement over the ``(n_c, N)`` arrays ``C``, ``Z``, ``K<j>``."""
        text = _STACKED.sub(lambda m: ({"c": "C", "z": "Z"}[m.group(1)] if m.group(1)
                                       else f"K{m.group(3)}"), ast.unparse(st))
        tree = ast.parse(text).body[0]
        for shape in self.temps:
            self.temps[shape] = 0
        saved = self.member
        self.member = saved | {"C", "Z"} | {f"K{j}" for j in range(8)}
        start = len(self.lines)
        self.expr(tree.value, tree.targets[0].id, stacked=True)
        self.member = saved
        self.lines[start:] = [" " * indent + ln for ln in self.lines[start:]]

    # -- the function ------------------------------------------------------------------------

    def _retargets(self, body) -> None:
        """Signals computed straight into the stage derivative that is a copy of them
        (``s6 = ...; k0_0 = s6``: the copy is dropped, ``s6`` bound to ``k0_0``'s row).

        Only an unguarded assignment of the signal (the latest before the copy) is moved;
        ``K<i>``'s rows are written nowhere else within a step.
        """
        latest: dict = {}
        self.retarget, self.dropped = {}, set()

        def walk(stmts, guarded: bool) -> None:
            for st in stmts:
                if isinstance(st, ast.If):
                    inner = guarded or ast.unparse(st.test) != "k < k_full"
                    walk(st.body, inner)
                    walk(st.orelse, inner)
                    continue
                if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name)):
                    continue
                tg, v = st.targets[0].id, st.value
                if re.fullmatch(r"k\d+_\d+", tg) and isinstance(v, ast.Name):
                    src = latest.pop(v.id, None)
                    if src is not None and not guarded:
                        self.retarget[id(src)] = tg
                        self.dropped.add(id(st))
                elif tg in self.member and tg[0] == "s" and tg not in self.alias:
                    latest[tg] = None if guarded else st
        walk(body, False)
        targets = {id(st): st.targets[0].id for st in self._assigns(body)}
        self.moved = {targets[i] for i in self.retarget}

    def run(self) -> Translation:
        body = _without_repeated_outputs(self.loop.body)
        self._retargets(body)
        self.statements(body, 12)
        out = self.out
        loaded = {n.id for n in ast.walk(ast.parse("\n".join(ln.strip() for ln in self.lines
                                                              if not ln.strip().endswith(":"))))
                  if isinstance(n, ast.Name)}
        out.names = sorted(n for n in loaded - self.alias - self.moved
                           if n in out.buffers or n in self.member or _STATE.match(n) or
                           re.fullmatch(r"C|Z|K\d+", n))
        head = ["def advance(k, k_stop, last_logged, ticks, k_full, k_log, V, L):",
                f"    {', '.join(out.names)}, = V" if out.names else "    pass",
                "    try:", f"        while {ast.unparse(self.loop.test)}:"]
        tail = ["    except Exception as err:", "        err.cosim_tick = k", "        raise",
                "    return k, last_logged"]
        out.source = "\n".join(head + self.lines + tail) + "\n"
        return out


def _identity(st) -> bool:
    """True for a state update that keeps the state (``x0 = x0``; ``x0, x1 = x0, x1``)."""
    if not isinstance(st, ast.Assign):
        return False
    tg, v = st.targets[0], st.value
    if isinstance(tg, ast.Tuple):
        return isinstance(v, ast.Tuple) and all(_identity(ast.Assign([a], b))
                                                for a, b in zip(tg.elts, v.elts))
    return isinstance(tg, ast.Name) and isinstance(v, ast.Name) and tg.id == v.id


def _without_repeated_outputs(body: list) -> list:
    """The loop body without the outputs Runge–Kutta stage 0 recomputes when nothing changed
    since the tick's own outputs (no state update before it): the same statements on the
    same values give the same results."""
    full = next((st for st in body if isinstance(st, ast.If) and
                 ast.unparse(st.test) == "k < k_full"), None)
    if full is None:
        return body
    first = {ast.unparse(st) for st in body if st is not full}
    kept, before, at_stage0 = [], True, False
    for st in full.body:
        text = ast.unparse(st)
        if before and text.startswith("h = "):
            before, at_stage0 = False, True
        elif before and not _identity(st):
            return body              # a state changes: stage 0 sees new values
        elif at_stage0 and re.match(r"k0_\d+ = ", text):
            at_stage0 = False
        elif at_stage0 and text in first:
            continue
        kept.append(st)
    new = ast.If(test=full.test, body=kept, orelse=full.orelse)
    return [new if st is full else st for st in body]
