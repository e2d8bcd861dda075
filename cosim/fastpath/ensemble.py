"""Ensembles on the fast path: one plan stepped for N parameter sets at once.

The scalar strategy's step function (:mod:`cosim.fastpath.scalar`) computes every value of a
run as a local float, one statement per block. Translated here, each value that differs
between the members of an ensemble is an array of shape ``(N,)`` (a *member* value) and each
statement a few numpy ufunc calls writing into preallocated buffers (``out=``), in the
statement's own evaluation order: ``a * b + c`` is a multiply into a temporary, then an add
into the target. Elementwise float64 arithmetic rounds per element as Python's float
arithmetic does, so every member computes bit for bit what its own run computes. Values the
same for every member (time, step size, shared parameters, a step input) stay Python floats;
an operand of a numpy call they become 0-d arrays (numpy's scalar path is slower). An
intermediate value's temporary is written over by the call that reads it and reused within
the statement (few buffers, kept in cache). The Runge–Kutta combinations of all
continuous-state components run as one call per term on ``(n_c, N)`` arrays (the products
of all stages in one call on their stacked ``(stages, n_c, N)`` array measured slower:
numpy's loop over a broadcast coefficient costs more than the calls it saves).

Only what translates exactly is accepted (else :class:`~cosim.fastpath.runtime.Unsupported`,
naming the block): ``+ - * /``, unary ``- +``, ``abs``, ``min``/``max``, comparisons (chained
too), ``and``/``or``/``not``, conditional expressions (a branch per member; a branch that can
raise computed only for the members that take it; a chain over one value against constants,
a lookup table's, as gathers), ``math.*`` functions (called per member: numpy's differ by an
ulp). Errors follow Python's floats: a division by zero raises (divisors are checked), an
overflow gives inf and inf - inf NaN (numpy's flags are off).
"""

from __future__ import annotations

import ast
import re

from cosim.fastpath import ensemble_ast as exprs
from cosim.fastpath.ensemble_logs import BLOCK as LOG_BLOCK
from cosim.fastpath.ensemble_lookup import LookupTranslation
from cosim.fastpath.ensemble_ops import EXTREMA_EXACT
from cosim.fastpath.ensemble_stages import (StageTranslation, times_one,
                                            without_repeated_outputs)
from cosim.fastpath.runtime import Unsupported

__all__ = ["Translation", "translate"]

_BINOPS = {ast.Add: "_add", ast.Sub: "_sub", ast.Mult: "_mul", ast.Div: "_div"}
#: Conditional chains of at least this many tests are translated as lookups (``_piecewise``),
#: and chains of chains (a 2-D table's) of any length.
_CHAIN_MIN = 3

#: Names of the scalar strategy's values that hold state across ticks (always member arrays).
_STATE = re.compile(r"^(x\d+|c\d+|z\d+|k\d+_\d+)$")


class Translation:
    """The source of an ensemble step function and the buffers it names.

    Attributes
    ----------
    source : str
        ``advance(k, k_stop, last_logged, ticks, k_full, k_log, V, L)``: like the scalar
        step function's, with ``V`` the tuple of its arrays (:attr:`names` order) and ``L``
        the log buffers ``[task][column]``, shape ``(BLOCK, N)``, with the function it
        hands them to, ``flush(task, row)``, every
        :data:`~cosim.fastpath.ensemble_logs.BLOCK` rows
        (:class:`~cosim.fastpath.ensemble_logs.MemberLogs`).
    names : list of str
        The arrays the function unpacks from ``V``.
    buffers : dict of str to tuple
        Name -> shape (``()`` 0-d, ``("N",)``, ``("C", "N")``) or dtype note of each buffer
        the caller allocates; member values ``x<i>``, ``c<i>`` and varying constants are
        given by the caller.
    zero_d : dict of str to str
        Constant name -> the source of the value it holds: a literal or shared constant
        (a 0-d array), or a constant expression of members' constants (``(N,)``).
    not_nan : set of str
        Constants the code takes to be no NaN for any member (a ``min``/``max`` limit, see
        :meth:`_Translator._extremum`): the caller checks them.
    owned : dict of str to (str, str, object)
        Name -> ``(table, attribute, item)``: a name bound to what a table object keeps
        (``getattr(table, attribute)``, or its ``[item]`` unless None): a lookup's constants,
        masks and cell bounds, kept by its :class:`~cosim.fastpath.ensemble_ops.Cells`
        between evaluations, and the check whether to call it.
    tables : dict of str to dict
        The constants of the lookups (:meth:`_Translator._piecewise`), made once per run
        by :func:`~cosim.fastpath.ensemble_ops.make_table`: ``texts`` (the source of each
        entry: constants, which may be members' arrays, one list per slot) and ``kind``:
        chain, a :class:`~cosim.fastpath.ensemble_ops.Chain` of the tests ``ops``; cells, the
        :class:`~cosim.fastpath.ensemble_ops.Cells` of the axes ``chains`` (made first),
        ``texts`` its gathered rows by branch and ``masks`` its groups' branches.
    """

    def __init__(self):
        self.source = ""
        self.names: list[str] = []
        self.buffers: dict[str, tuple] = {}
        self.zero_d: dict[str, str] = {}
        self.tables: dict[str, dict] = {}
        self.owned: dict[str, tuple] = {}
        self.not_nan: set[str] = set()


#: The step function's arguments (values it is called with, not assigned in its loop).
_ARGS = frozenset({"k", "k_stop", "last_logged", "ticks", "k_full", "k_log", "V", "L"})


def _held_arrays(lines: list[str], loop) -> list[str]:
    """``lines`` with each shared value that is an operand of numpy calls (``_arr(h)``: a
    0-d array made per call) made a 0-d array once where it is assigned, ``_a_h =
    _arr(h)``, and read as that (the step size is an operand of every Runge-Kutta stage),
    where it is read more often than assigned. Only for a name that the scalar ``loop``
    assigns by plain assignments alone (each one then followed by its array's), not an
    argument."""
    used = set(re.findall(r"_arr\((\w+)\)", "\n".join(lines))) - _ARGS
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and (len(node.targets) > 1 or
                                             not isinstance(node.targets[0], ast.Name)):
            targets = node.targets
        elif isinstance(node, (ast.For, ast.NamedExpr, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.Delete)):
            targets = getattr(node, "targets", None) or [i.optional_vars for i in node.items]
        else:
            continue
        used -= {n.id for t in targets if t is not None for n in ast.walk(t)
                 if isinstance(n, ast.Name)}
    if not used:
        return lines
    assigned = re.compile(rf"^(\s*)({'|'.join(sorted(used))}) (?:[-+*/]?=) ")
    # Held where it is read more often than assigned (else one array per call is fewer).
    text = "\n".join(lines)
    writes = [m.group(2) for ln in lines for m in [assigned.match(ln)] if m]
    used = {n for n in used if text.count(f"_arr({n})") > writes.count(n)}
    if not used:
        return lines
    assigned = re.compile(rf"^(\s*)({'|'.join(sorted(used))}) (?:[-+*/]?=) ")
    out = []
    for ln in lines:
        for name in used:
            ln = ln.replace(f"_arr({name})", f"_a_{name}")
        out.append(ln)
        m = assigned.match(ln)
        if m:
            out.append(f"{m.group(1)}_a_{m.group(2)} = _arr({m.group(2)})")
    return out


def translate(source: str, member_consts: set[str], n_c: int,
              owners: dict | None = None, ones: frozenset = frozenset()) -> Translation:
    """Translate the scalar strategy's step function for an ensemble.

    Parameters
    ----------
    source : str
        The scalar strategy's generated source.
    member_consts : set of str
        Constants (``_k<i>``) whose values differ between members.
    n_c : int
        Continuous-state components.
    owners : dict of str to str, optional
        The block path of each value the source names (``s<j>``, ``x<j>``, ``c<j>``, ...):
        a statement that cannot be translated is reported with its block.
    ones : frozenset of str, optional
        Shared constants whose value is ``1.0`` (a gain of one): their products are the
        other factor (the translation is then for those values only).

    Raises
    ------
    Unsupported
        The source uses something without an exact elementwise translation (naming the
        block and the expression).
    """
    return _Translator(source, member_consts, n_c, owners or {}, ones).run()


class _Translator(LookupTranslation, StageTranslation):
    def __init__(self, source, member_consts, n_c, owners, ones=frozenset()):
        self.owners = owners
        self.ones = frozenset(ones) - set(member_consts)
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
        self.alias_of: dict[str, str] = {}  # such a signal -> the state
        self.lines: list[str] = []
        self.temps = {"N": 0, "C": 0, "B": 0, "BC": 0}
        self.free: dict[str, list[str]] = {"N": [], "C": []}
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
                self.alias_of[tg.id] = value.id
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
        if self.free.get(shape):
            return self.free[shape].pop()
        n = self.temps[shape]
        self.temps[shape] += 1
        return self._buffer(f"_t{shape}{n}", {"N": ("N",), "C": ("C", "N"), "B": ("bool", "N"),
                                             "BC": ("bool", "C", "N")}[shape])

    def _result(self, shape: str, *operands: str) -> str:
        """Where an elementwise call on ``operands`` writes: an operand that is a temporary
        (an intermediate value read by this call alone; a ufunc may write over its own
        input), else a temporary. Fewer buffers, and the ones used stay in cache."""
        for a in operands:
            if re.fullmatch(rf"_t{shape}\d+", a):
                return a
        return self._temp(shape)

    def _release(self, shape: str, out: str, *operands: str) -> None:
        """The temporaries among ``operands`` (read by their one call, just emitted) are free
        for the next intermediate values of the statement."""
        for a in operands:
            if a != out and re.fullmatch(rf"_t{shape}\d+", a):
                self.free[shape].append(a)

    def _zero_d(self, text: str, member: bool = False) -> str:
        """A 0-d array holding the constant scalar ``text`` (a literal or shared constant),
        or with ``member`` the ``(N,)`` array of a constant expression (of members'
        constants, or a shared one repeated: numpy's extrema run their fast loop on two
        arrays, not on an array and a 0-d one), both made once per run from ``text``."""
        shape = ("N",) if member else ()
        for name, t in self.out.zero_d.items():
            if t == text and self.out.buffers[name] == shape:
                return name
        name = f"_z{len(self.out.zero_d)}"
        self.out.zero_d[name] = text
        self._buffer(name, shape)
        return name

    # -- expressions -------------------------------------------------------------------------

    def _call_text(self, fn: str, args: list[str], out: str, mask: str | None) -> None:
        """A ufunc call into ``out``; under a guard only the guarded members are computed
        (``where=``), so a member whose own run does not evaluate it cannot raise here."""
        where = f", where={mask}" if mask else ""
        self.lines.append(f"{fn}({', '.join(args)}, {out}{where})")

    def expr(self, node, dst: str | None, stacked: bool = False,
             mask: str | None = None) -> tuple[bool, str]:
        """Emit the calls computing ``node``; ``(is member array, source of the value)``.

        A member value is written into ``dst`` when given (else into a temporary, or it is a
        name already holding it); a shared value is returned as Python source. With ``mask``
        (a boolean member array), only the members it selects are computed: the others'
        elements of the result are left undefined (their own runs do not evaluate ``node``).
        """
        node = times_one(node, self.ones)
        if not self._reads_member(node):
            if dst is not None:
                self.lines.append(f"{dst}[...] = {ast.unparse(node)}")
                return True, dst
            return False, ast.unparse(node)
        shape = "C" if stacked else "N"
        if isinstance(node, ast.UnaryOp) and exprs.constant(node) and dst is None:
            # A member's negated constant (``-_k3``, a negative parameter): made once per
            # run (the negation is exact), not per evaluation.
            return True, self._zero_d(ast.unparse(node), member=True)
        if isinstance(node, ast.Name):
            if dst is not None and dst != node.id:
                # (an assignment to the whole array: numpy.copyto's dispatch costs more)
                self.lines.append(f"{dst}[...] = {node.id}")
                return True, dst
            return True, node.id
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = times_one(node.left, self.ones), times_one(node.right, self.ones)
            inner = self._accumulates(node, dst, left, right)
            a = self.expr(left, dst, stacked, mask)[1] if inner is left else \
                self.operand(left, stacked, mask)
            b = self.expr(right, dst, stacked, mask)[1] if inner is right else \
                self.operand(right, stacked, mask)
            out = dst or self._result(shape, a, b)
            if isinstance(node.op, ast.Div):
                # Python raises on every division by zero (0/0, x/-0.0 too), numpy on some:
                # the divisors are checked (numpy's own flags are off, as Python's
                # arithmetic sets none: inf - inf is NaN in a run).
                self.lines.append(f"_nonzero({b}, {mask})")
            self._call_text(_BINOPS[type(node.op)], [a, b], out, mask)
            self._release(shape, out, a, b)
            return True, out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            if isinstance(node.op, ast.UAdd):
                return self.expr(node.operand, dst, stacked, mask)
            a = self.operand(node.operand, stacked, mask)
            out = dst or self._result(shape, a)
            self._call_text("_neg", [a], out, mask)
            return True, out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "abs" and len(node.args) == 1 and not node.keywords:
            a = self.operand(node.args[0], stacked, mask)
            out = dst or self._result(shape, a)
            self._call_text("_abs", [a], out, mask)
            return True, out
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("min", "max") and len(node.args) >= 2 and not node.keywords \
                and not any(isinstance(a, ast.Starred) for a in node.args):
            return self._extremum(node, dst, stacked, mask)
        if isinstance(node, ast.Call) and exprs.math_call(node):
            # math.* per member, by the very function a run calls (numpy's may differ by an
            # ulp): exact, one Python call per member.
            a = self.operand(node.args[0], stacked, mask)
            out = dst or self._temp(shape)
            self.lines.append(f"_mapf({ast.unparse(node.func)}, {a}, {out}, {mask})")
            return True, out
        if isinstance(node, ast.IfExp):
            return self._select(node, dst, stacked, mask)
        raise Unsupported(f"no exact elementwise form of {ast.unparse(node)!r}")

    def _accumulates(self, node, dst: str | None, left, right):
        """The operand of ``node`` (a binary operation into ``dst``) computed straight into
        ``dst`` (``a + b + c``: the sum of ``a`` and ``b`` in ``dst``, then ``c`` added in
        place), or None: a compound member value (the left one first) when ``node`` does
        not read ``dst``'s memory (nothing reads what it holds in between). Fewer
        temporaries touched: the values stay in cache."""
        if dst is None or exprs.reads(node, self._sharing(dst)):
            return None
        for side in (left, right):
            if isinstance(side, (ast.BinOp, ast.UnaryOp, ast.Call)) and \
                    self._reads_member(side) and not exprs.constant(side):
                return side
        return None

    def _into(self, node, dst: str | None, shape: str) -> str:
        """Where a value computed in several calls goes: ``dst`` when ``node`` does not read
        it (the first call would overwrite what a later one reads), else a temporary."""
        if dst is not None and not exprs.reads(node, self._sharing(dst)):
            return dst
        return self._temp(shape)

    def _sharing(self, name: str) -> set:
        """The names whose arrays may be ``name``'s memory: itself, a signal bound to a
        state's view and that state, a signal computed into a stage derivative's row."""
        out = {name}
        out |= {a for a, s in self.alias_of.items() if s == name}
        if name in self.alias_of:
            out.add(self.alias_of[name])
        if name in self.moved or re.fullmatch(r"k\d+_\d+", name):
            out |= self.moved | {n for n in self.member if re.fullmatch(r"k\d+_\d+", n)}
        return out

    def _extremum(self, node, dst, stacked, mask) -> tuple[bool, str]:
        """``min(a, b, ...)`` / ``max(...)`` as Python selects: ``a``, replaced by each next
        argument that is smaller (greater); NaN and signed zeros as a run selects them.

        Against a constant (a limit) that is no NaN for any member, Python's ``min(a, c)``
        selects what ``numpy.minimum(c, a)`` does where numpy keeps its second argument on
        ties and NaN in it (:data:`~cosim.fastpath.ensemble_ops.EXTREMA_EXACT`, probed on
        this machine): one call. Else a
        comparison and a masked copy per argument."""
        shape = "C" if stacked else "N"
        fn = node.func.id
        acc = self._into(node, dst, shape)
        first = True
        for arg in node.args[1:]:
            if EXTREMA_EXACT and exprs.constant(arg) and not mask:
                # The first argument computed straight into the result where it is a
                # compound value (see _accumulates).
                src = acc if not first else self.expr(node.args[0], acc, stacked)[1] \
                    if self._accumulates(node, acc, node.args[0], node.args[0]) else \
                    self.operand(node.args[0], stacked)
                c = self.operand(arg, stacked) if stacked or self._reads_member(arg) else \
                    self._zero_d(ast.unparse(arg), member=True)
                self.out.not_nan.add(ast.unparse(arg))
                self.lines.append(f"_{fn}imum({c}, {src}, out={acc})")
            else:
                if first:
                    self.expr(node.args[0], acc, stacked, mask)
                v = self.operand(arg, stacked, mask)
                cond = self._temp("BC" if stacked else "B")
                self._call_text("_lt" if fn == "min" else "_gt", [v, acc], cond, mask)
                self.lines.append(f"_copyto({acc}, {v}, where={cond})")
            first = False
        if dst is not None and acc != dst:
            self.lines.append(f"_copyto({dst}, {acc})")
            return True, dst
        return True, acc

    def _select(self, node, dst, stacked, mask) -> tuple[bool, str]:
        """A conditional expression: a branch per member."""
        shape = "C" if stacked else "N"
        if not self._reads_member(node.test):
            out = dst or self._temp(shape)
            self.lines.append(f"if {ast.unparse(node.test)}:")
            self._indented(lambda: self.expr(node.body, out, stacked, mask))
            self.lines.append("else:")
            self._indented(lambda: self.expr(node.orelse, out, stacked, mask))
            return True, out
        chain = exprs.conditional_chain(node)
        if not stacked and (len(chain[0]) >= _CHAIN_MIN or
                            all(isinstance(v, ast.IfExp) for v in chain[1])):
            done = self._piecewise(chain, dst, mask)
            if done is not None:
                return True, done
        cond = self.condition(node.test, stacked, mask)
        sel = self._temp(shape)
        if exprs.safe(node.body) and exprs.safe(node.orelse):
            # Both branches computed for every member (none can raise); each member selects.
            self.expr(node.orelse, sel, stacked, mask)
            b = self.operand(node.body, stacked, mask)
            self.lines.append(f"_copyto({sel}, {b}, where={cond})")
        else:
            # A branch that can raise (a division, math.*) is computed only for the members
            # whose own runs take it.
            bshape = "BC" if stacked else "B"
            yes, no = self._temp(bshape), self._temp(bshape)
            if mask:
                self.lines.append(f"_and({cond}, {mask}, {yes})")
            else:
                yes = cond
            self.lines.append(f"_not({cond}, {no})")
            if mask:
                self.lines.append(f"_and({no}, {mask}, {no})")
            self.expr(node.orelse, sel, stacked, no)
            b = self.operand(node.body, stacked, yes)
            self.lines.append(f"_copyto({sel}, {b}, where={yes})")
        if dst is None:
            return True, sel
        self.lines.append(f"_copyto({dst}, {sel})")
        return True, dst

    def _indented(self, emit) -> None:
        start = len(self.lines)
        emit()
        self.lines[start:] = ["    " + ln for ln in self.lines[start:]]

    def operand(self, node, stacked: bool, mask: str | None = None) -> str:
        """Source of ``node``'s value as a numpy operand (a member array or a 0-d array)."""
        member, src = self.expr(node, None, stacked, mask)
        if member:
            return src
        if exprs.constant(node):
            return self._zero_d(src)
        return f"_arr({src})"

    def condition(self, node, stacked: bool, mask: str | None = None) -> str:
        """A boolean member array of a test: comparisons (chained too), ``and``, ``or``,
        ``not`` and the truth of a value. The right operand of ``and`` / ``or`` is computed
        only for the members whose own runs evaluate it when it can raise."""
        bshape = "BC" if stacked else "B"
        if not self._reads_member(node):
            return f"_arr(bool({ast.unparse(node)}))"
        if isinstance(node, ast.Compare) and \
                all(type(op) in exprs.COMPARISONS for op in node.ops):
            left = self.operand(node.left, stacked, mask)
            out = None
            for op, right_node in zip(node.ops, node.comparators):
                right = self.operand(right_node, stacked, mask)
                part = self._temp(bshape)
                self._call_text(exprs.COMPARISONS[type(op)], [left, right], part, mask)
                if out is None:
                    out = part
                else:
                    self._call_text("_and", [out, part], out, mask)
                left = right
            return out
        if isinstance(node, ast.BoolOp):
            fn = "_and" if isinstance(node.op, ast.And) else "_or"
            out = self._temp(bshape)
            first = self.condition(node.values[0], stacked, mask)
            self.lines.append(f"_copyto({out}, {first})")
            for v in node.values[1:]:
                guard = None
                if not exprs.safe(v):
                    # evaluated where the run evaluates it: ``and`` while true, ``or`` while false
                    guard = self._temp(bshape)
                    if fn == "_and":
                        self.lines.append(f"_copyto({guard}, {out})")
                    else:
                        self.lines.append(f"_not({out}, {guard})")
                    if mask:
                        self.lines.append(f"_and({guard}, {mask}, {guard})")
                part = self.condition(v, stacked, guard or mask)
                self._call_text(fn, [out, part], out, mask)
            return out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.condition(node.operand, stacked, mask)
            out = self._temp(bshape)
            self._call_text("_not", [inner], out, mask)
            return out
        if isinstance(node, (ast.Name, ast.BinOp, ast.UnaryOp, ast.Call, ast.IfExp)):
            v = self.operand(node, stacked, mask)          # a value's truth: nonzero (NaN too)
            out = self._temp(bshape)
            self._call_text("_ne", [v, self._zero_d("0.0")], out, mask)
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
        try:
            self._stmt(st, indent)
        except Unsupported as err:
            if getattr(err, "named", False) or isinstance(st, ast.If):
                raise
            names = [n.id for t in getattr(st, "targets", ()) for n in ast.walk(t)
                     if isinstance(n, ast.Name)]
            owner = next((self.owners.get(re.sub(r"^k\d+_", "k_", n)) for n in names
                          if self.owners.get(re.sub(r"^k\d+_", "k_", n))), None)
            where = f"block {owner}: " if owner else ""
            named = Unsupported(f"{where}{err}")
            named.named = True
            raise named from None

    def _stmt(self, st, indent: int) -> None:
        for shape in self.temps:
            self.temps[shape] = 0
        self.free = {"N": [], "C": []}
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
        elif id(st) in self.bound:
            self.lines.append(f"{target} = {into}")     # a copy of a signal computed there
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
        if isinstance(f, ast.Attribute) and f.attr in ("append", "extend") and \
                isinstance(f.value, ast.Subscript) and ast.unparse(f.value.value) == "rows":
            # A log row (its values, or the one value): each value copied into its column's
            # row of the (BLOCK, N) buffers, copied into the members' logs after the
            # block's last row (see MemberLogs).
            task = ast.unparse(f.value.slice)
            self.emit(indent, f"_r = len(ticks[{task}]) - 1")
            self.emit(indent, f"_b = _r % {LOG_BLOCK}")
            values = call.args[0].elts if f.attr == "extend" else call.args
            for col, v in enumerate(values):
                self.emit(indent, f"L[{task}][{col}][_b] = {ast.unparse(v)}")
            self.emit(indent, f"if _b == {LOG_BLOCK - 1}:")
            self.emit(indent + 4, f"_flush({task}, _r)")
            return
        if re.fullmatch(r"ticks\[\d+\]\.append\(k\)", text):
            self.emit(indent, text)
            return
        if text == "_tickstart()":
            # The continuous state a step starts from, kept for the members whose step
            # changes a switching surface's sign (run again on the interpreter).
            self._buffer("C0", ("C", "N"))
            self.emit(indent, "_copyto(C0, C)")
            return
        if isinstance(f, ast.Name) and f.id == "_located":
            self.emit(indent, text)
            return
        raise Unsupported(f"statement {text!r}")

    # -- the function ------------------------------------------------------------------------

    def run(self) -> Translation:
        body = without_repeated_outputs(self.loop.body)
        self._retargets(body)
        self.statements(body, 12)
        self.lines = _held_arrays(self.lines, self.loop)
        out = self.out
        # The names the lines read, the tests of their ``if`` lines too.
        reads = []
        for ln in self.lines:
            test = re.fullmatch(r"(?:if|elif|while) (.*):", ln.strip())
            if test or not ln.strip().endswith(":"):
                reads.append(test.group(1) if test else ln.strip())
        loaded = {n.id for n in ast.walk(ast.parse("\n".join(reads)))
                  if isinstance(n, ast.Name)}
        out.names = sorted(n for n in loaded - self.alias - self.moved
                           if n in out.buffers or n in out.owned or
                           n in self.member or
                           _STATE.match(n) or re.fullmatch(r"C|C0|Z|K\d+", n))
        head = ["def advance(k, k_stop, last_logged, ticks, k_full, k_log, V, L):",
                f"    {', '.join(out.names)}, = V" if out.names else "    pass",
                "    L, _flush = L",
                "    try:", f"        while {ast.unparse(self.loop.test)}:"]
        tail = ["    except Exception as err:", "        err.cosim_tick = k", "        raise",
                "    return k, last_logged"]
        out.source = "\n".join(head + self.lines + tail) + "\n"
        return out
