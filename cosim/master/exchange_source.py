"""The Python source of the compiled exchange's macro loop (:mod:`cosim.master.compiled`):
the macro-step program's rounds written as statements over local floats, one function that
runs whole chunks of macro steps."""

from __future__ import annotations

from cosim.master.inlined import InlinedUnit

__all__ = ["ExchangeSource"]


class ExchangeSource:
    """The source of ``exchange(...)`` for one :class:`~cosim.master.compiled.CompiledExchange`.

    Locals: ``k<i>``, ``l<i>`` each unit's tick and last logged tick; ``f<i>, S<i>, D<i>,
    X<i>, R<i>, G<i>`` its bound step function and values; ``L<i>_<n>`` the live values of its
    input ``n``; ``y<j>, p<j>, q<j>`` output ``j`` at the latest three macro points ``ta, tb,
    tc``; ``o<j>`` its value as the step computed it for T+H, ``r<j>`` as refreshed there;
    ``cur`` the unit being called (``i``: its step, ``n_units + i``: a refresh, -1: none);
    ``u<i>_<name>`` the locals of unit ``i``'s step function when it is inlined
    (:class:`~cosim.master.inlined.InlinedUnit`), ``u<i>g<name>`` its globals.
    Live-value writes are kept as ``("live", L, values)`` until every write is known: a live
    value whose derivatives are zero in all of them is zeroed once, and written value and
    time only.
    """

    def __init__(self, ex, directs: dict, timed: bool):
        self.ex = ex
        self.directs = directs
        self.timed = timed
        self.unit_index = {u: i for i, u in enumerate(ex.names)}
        self.live = {}
        self.orders: dict[str, set] = {}      # live value -> derivative counts written
        for i, (u, d) in enumerate(directs.items()):
            ex.counts[u] = {}
            for n, name in enumerate(d.inputs):
                self.live[(u, name)] = f"L{i}_{n}"
        self.refreshed: set[int] = set()      # outputs refreshed at T+H (y from r)
        self.stoppers = [i for i, u in enumerate(ex.names) if directs[u].stops is not None]
        # The units whose step function is inlined: not those of an iterated coupling (they
        # roll back on their side, from the run state) nor those that can stop the run;
        # the small ones (InlinedUnit.of), whose call is a good part of their step.
        self.namespace: dict = {}             # the inlined units' constants
        self.inlined: dict[int, InlinedUnit] = {}
        for i, (u, d) in enumerate(directs.items()):
            if u not in ex.coupled and d.stops is None and d.generated:
                inl = InlinedUnit.of(i, ex.units[u], d, round(ex.H / d.dt))
                if inl is not None:
                    self.inlined[i] = inl
                    self.namespace.update(inl.constants)

    def text(self) -> str:
        ex = self.ex
        nk, nu = len(ex.keys), len(ex.names)
        H = ex.H
        head = ["def exchange(n, n_stop, n_mark, T, nq, t_lim, t_end, ta, tb, tc, Y, P, Q, K, LAST, "
                "B, LIVE, starts, STOPS, KEEPS, records, counter, WALLS, HELP):",
                "    err = None",
                "    cur = -1",
                "    record = starts.append",
                "    UNLOG, ITERATE, FAILED, ARRAY, RECORD, STATUS, clock = HELP"]
        for i in range(nu):
            head.append(f"    f{i}, S{i}, D{i}, X{i}, R{i}, G{i} = B[{i}]")
            head.append(f"    U{i} = UNLOG[{i}]")
            if self.timed:
                head.append(f"    V{i} = WALLS[{i}][0].append; W{i} = WALLS[{i}][1].append")
        head += _unpack(list(self.live.values()), "LIVE")
        for v in "ypq":
            head += _unpack([f"{v}{j}" for j in range(nk)], v.upper())
        head += _unpack([f"k{i}" for i in range(nu)], "K")
        head += _unpack([f"l{i}" for i in range(nu)], "LAST")
        for i, inl in self.inlined.items():
            head += inl.prologue(f"S{i}, D{i}, X{i}, R{i}, G{i}")
        head += [f"    o{j} = r{j} = y{j}" for j in range(nk)]
        if self.stoppers:
            head += [f"    Z{i} = STOPS[{i}]" for i in self.stoppers]
        body = []
        if ex.coupled:
            body += ["its = 0", "res = 0.0", "status = ACCEPTED"]
            head.append("    ACCEPTED, CONTINUED, UNITERATED = STATUS.ACCEPTED, "
                        "STATUS.CONTINUED, STATUS.UNITERATED")
        if self.stoppers:
            body.append("stop = False")
        closures = []
        for c, stage in enumerate(ex.program.stages):
            if stage.resolve:
                body += self._resolve(c, stage, closures)
            elif stage.coupling:
                body += self._coupling(c, stage, closures)
            else:
                body += self._round(stage)
        body += ["record(T)"]
        if ex.coupled:
            body += [f"records.append(RECORD(T, {H!r}, its, res, status))"]
        body += ["n += 1", f"nq += {ex.nq_step}", f"T = {ex.t0!r} + nq * {ex.quantum!r}",
                 "tc = tb", "tb = ta", "ta = T"]
        body += [f"q{j} = p{j}; p{j} = y{j}; y{j} = o{j}" for j in range(nk)]
        if self.stoppers:
            # A unit stopped the run in this step: accepted, not refreshed (Master.step).
            body.append("if stop: break")
        body += [f"y{j} = r{j}" for j in sorted(self.refreshed)]
        # At a step count where log_every has the master collect the logs: a chunk that
        # would end before the next one ends here, so that its last macro point is collected
        # (or not) as between protocol steps (Master.finish refreshes the last one again).
        every, nq_step = ex.cfg.log_every, ex.nq_step
        body += ["if n == n_mark:", f"    n_mark += {every}",
                 f"    T_ = {ex.t0!r} + (nq + {(every - 1) * nq_step}) * {ex.quantum!r}",
                 f"    if not (T_ < t_lim and t_end - T_ >= {H!r}): break"]
        for pre, fn in closures:
            head += pre + self._render(fn, 8)
        lines = head + [f"    {L}[1] = {L}[2] = {L}[3] = 0.0" for L in sorted(self.zeroed())]
        lines += ["    try:", f"        while n < n_stop and T < t_lim and t_end - T >= {H!r}:"]
        lines += self._render(body, 12)
        back = ", ".join
        lines += ["    except Exception as e:", "        err = e"]
        # Where an inlined unit's step failed (its function marks its errors so).
        lines += [f"        if cur == {i} or cur == {nu + i}: e.cosim_tick = u{i}_k"
                  for i in self.inlined]
        for inl in self.inlined.values():
            lines += inl.store
        lines += [f"    return (err, cur, n, T, nq, ta, tb, tc, "
                  f"[{back(f'y{j}' for j in range(nk))}], "
                  f"[{back(f'p{j}' for j in range(nk))}], [{back(f'q{j}' for j in range(nk))}], "
                  f"[{back(f'k{i}' for i in range(nu))}], "
                  f"[{back(f'l{i}' for i in range(nu))}])"]
        return "\n".join(lines) + "\n"

    # -- live values --------------------------------------------------------------------

    def zeroed(self) -> set:
        """Live values whose derivatives every write leaves zero."""
        return {L for L, orders in self.orders.items() if orders == {0}}

    def _render(self, body: list, indent: int) -> list[str]:
        """``body``'s lines indented, its live-value writes written out."""
        pad = " " * indent
        zeroed = self.zeroed()
        out = []
        for ln in body:
            if type(ln) is str:
                out.append(pad + ln)
                continue
            _, L, vals, extra = ln
            ind = pad + " " * extra
            if L in zeroed:
                out += [f"{ind}{L}[0] = {vals[0]}", f"{ind}{L}[4] = tu"]
            else:
                out.append(f"{ind}{L}[:] = ({', '.join(vals)}, tu)")
        return out

    def _write(self, u: str, name: str, vals: tuple, step: bool = False) -> tuple:
        """A write of unit ``u``'s input ``name`` into its live values ``vals`` (value, has
        derivatives, d1, d2); ``step``: the step's, whose derivative count the unit takes
        back when it settles (a refresh's have none)."""
        L = self.live[(u, name)]
        n = 0 if vals[1] == "0.0" else (2 if vals[3] != "0.0" else 1)
        self.orders.setdefault(L, set()).add(n)
        if step:
            self.ex.counts[u][name] = n
        return ("live", L, vals, 0)

    # -- actions ------------------------------------------------------------------------

    def _time(self, u: str) -> str:
        d = self.directs[u]
        return f"tu = {float(d.t0)!r} + k{self.unit_index[u]} * {float(d.dt)!r}"

    def _order(self, key) -> int:
        """The degree of output ``key``'s polynomial over the step: 0 when it is held."""
        ex = self.ex
        return 0 if ex.history.held(key, ex.H) else min(ex.cfg.extrapolation, 2)

    @staticmethod
    def _slopes(j: int, order: int) -> tuple[list[str], str, str]:
        """Lines and the derivatives at T (``d1``, ``d2``) of output ``j``'s polynomial of
        degree ``order`` (1, 2) through its past macro points (:meth:`PortHistory.extrapolate
        <cosim.master.extrapolation.PortHistory.extrapolate>`)."""
        lines = [f"f01 = (y{j} - p{j}) / (ta - tb)"]
        if order == 1:
            return lines, "f01", "0.0"
        lines.append(f"f012 = (f01 - (p{j} - q{j}) / (tb - tc)) / (ta - tc)")
        return lines, "f01 + f012 * (ta - tb)", "2.0 * f012"

    def _predict(self, j: int, key) -> tuple[list[str], str]:
        """Lines and expression of output ``j``'s extrapolation to T+H (``extrapolate``'s
        prediction)."""
        H, order = self.ex.H, self._order(key)
        if order == 0:
            return [], f"y{j}"
        lines, d1, _ = self._slopes(j, order)
        if order == 1:
            return lines, f"y{j} + f01 * {H!r}"
        return lines + [f"d1 = {d1}"], f"y{j} + d1 * {H!r} + f012 * {H!r} * {H!r}"

    def _inputs(self, u: str, fresh: set, cand: dict) -> list:
        """Unit ``u``'s inputs over the step (:meth:`PortHistory.inputs`): ramping to
        coupling candidates ``cand`` (key -> local), interpolated to outputs ``fresh``
        computed for T+H, else extrapolated."""
        ex = self.ex
        H = ex.H
        lines = [self._time(u)] if ex.graph.inputs[u] else []
        for name, key in ex.graph.inputs[u]:
            j = ex.index[key]
            order = self._order(key)
            if key in cand:                    # a ramp whatever the order, unless held
                vals = (f"y{j}", "0.0", "0.0", "0.0") if ex.history.held(key, H) else \
                    (f"y{j}", "1.0", f"({cand[key]} - y{j}) / {H!r}", "0.0")
            elif order == 0:
                vals = (f"y{j}", "0.0", "0.0", "0.0")
            elif key in fresh:                 # PortHistory.interpolate
                if order == 1:
                    vals = (f"y{j}", "1.0", f"(o{j} - y{j}) / {H!r}", "0.0")
                else:
                    lines += [f"f01 = (o{j} - y{j}) / {H!r}",
                              f"f012 = (f01 - (y{j} - p{j}) / (ta - tb)) / (ta + {H!r} - tb)"]
                    vals = (f"y{j}", "1.0", f"f01 - f012 * {H!r}", "2.0 * f012")
            else:                              # PortHistory.extrapolate
                more, d1, d2 = self._slopes(j, order)
                lines += more
                vals = (f"y{j}", "1.0", d1, d2)
            lines.append(self._write(u, name, vals, step=True))
        return lines

    def _call(self, u: str, lines: list, refresh: bool) -> list:
        """``lines`` (a call of unit ``u``'s step function) with ``cur`` set, timed when an
        observer watches the run."""
        i = self.unit_index[u]
        head = [f"cur = {len(self.ex.names) + i if refresh else i}"]
        if not self.timed or refresh:
            return head + lines
        return head + ["w_ = clock()"] + lines + [f"W{i}(clock() - w_); V{i}(T)"]

    def _step(self, u: str, fresh: set, cand: dict | None = None) -> list:
        """Unit ``u``'s step over the macro step (``SetInputs``, ``DoStep``, the outputs at
        its end into ``o``)."""
        ex, i, d = self.ex, self.unit_index[u], self.directs[u]
        lines = self._inputs(u, fresh, cand or {})
        m = round(ex.H / d.dt)
        # Delayed feedthrough: the outputs at the step's end are logged as computed (the
        # protocol path's RefreshOutputs after DoStep, with the step's inputs).
        k_log = f"k{i} + {m + 1}" if ex.delayed else f"k{i} + {m}"
        args = (f"k{i}", f"k{i} + {m + 1}", f"k{i} + {m}", k_log)
        lines += self._call(u, [*self._run(i, args), f"k{i} += {m}"], False)
        lines += [f"o{ex.index[(u, p)]} = {self._slot(i, slot)}" for p, slot in d.outputs.items()]
        return lines

    def _run(self, i: int, args: tuple) -> list[str]:
        """Lines running unit ``i``'s step function over ticks ``k_start .. k_stop - 1``
        (``args``: ``(k_start, k_stop, k_full, k_log)``), its last logged tick into
        ``l<i>``: its statements inlined, or a call."""
        inl = self.inlined.get(i)
        if inl is not None:
            return inl.run(*args)
        k, k_stop, k_full, k_log = args
        return [f"_, l{i} = f{i}({k}, {k_stop}, l{i}, S{i}, D{i}, X{i}, R{i}, G{i}, {k_full}, "
                f"{k_log})"]

    def _slot(self, i: int, slot: int) -> str:
        """Unit ``i``'s signal at ``slot`` of its flat values (an inlined unit's local)."""
        return f"u{i}_s{slot}" if i in self.inlined else f"S{i}[{slot}]"

    def _refresh(self, u: str, values: list, into: str) -> list:
        """Unit ``u``'s refresh at T+H (``RefreshOutputs``): ``values`` ``(input, local)``
        set (values only), its outputs computed and logged (replacing a sample logged at
        that tick), read into ``into`` (``"r"`` or ``"o"``)."""
        ex, i, d = self.ex, self.unit_index[u], self.directs[u]
        lines = [self._time(u)] if values else []
        lines += [self._write(u, name, (v, "0.0", "0.0", "0.0")) for name, v in values]
        call = []
        if d.generated:
            call += [f"if l{i} >= k{i}:", f"    U{i}(k{i})", f"    l{i} = k{i} - 1"]
        call += self._run(i, (f"k{i}", f"k{i} + 1", f"k{i}", f"k{i} + 1"))
        lines += self._call(u, call, True)
        for p, slot in d.outputs.items():
            j = ex.index[(u, p)]
            lines.append(f"{into}{j} = {self._slot(i, slot)}")
            if into == "r":
                self.refreshed.add(j)
        return lines

    def _round(self, stage) -> list:
        """A round of the program: each unit's step and/or refresh, in order; what a refresh
        reads is what was known when the round began (as the engine sends it)."""
        ex = self.ex
        lines = []
        if self.stoppers:
            lines.append("halt = stop")     # (a refresh alone is not sent once one stopped)
        written: set[str] = set()
        early: dict[str, str] = {}
        body = []
        for s in stage.sends:
            u, i = s.unit, self.unit_index[s.unit]
            if s.step:
                body += self._step(u, set(s.fresh))
                written |= {f"o{ex.index[(u, p)]}" for p in self.directs[u].outputs}
                if i in self.stoppers:
                    body.append(f"if Z{i}: stop = True")
            if not s.reset:
                continue
            values = []
            for name, key, post in s.sources:
                v = f"{'r' if post else 'o'}{ex.index[key]}"
                if v in written:                # changed earlier in this round: its value
                    v = early.setdefault(v, f"e{len(early)}")   # at the round's start
                values.append((name, v))
            refresh = self._refresh(u, values, "r")
            written |= {f"r{ex.index[(u, p)]}" for p in self.directs[u].outputs}
            if s.step and i in self.stoppers:
                body += [f"if not Z{i}:", *_indent(refresh)]
            elif not s.step and self.stoppers:
                body += ["if not halt:", *_indent(refresh)]
            else:
                body += refresh
        return lines + [f"{e} = {v}" for v, e in early.items()] + body

    def _coupling(self, c: int, stage, closures: list) -> list:
        """An algebraic coupling of the program iterated to a fixed point over the macro
        step (:func:`cosim.master.coupling.iterate` with a generated evaluation, the units
        keeping and restoring their state on their side), or stepped once
        (``iterate=False``: its residual recorded)."""
        ex = self.ex
        g = list(stage.coupling)
        keys = ex.graph.coupling_keys(g)
        fresh = set(stage.fresh)
        idx = [ex.index[k] for k in keys]
        lines = []
        preds = []
        for j, key in zip(idx, keys):
            pre, expr = self._predict(j, key)
            lines += pre
            lines.append(f"x{j} = {expr}")
            preds.append(f"x{j}")
        if not ex.cfg.iterate:
            for u in g:
                lines += self._step(u, fresh)
            lines.append("res = max(res, " + (f"max({', '.join(f'abs(o{j} - x{j})' for j in idx)})"
                                              if len(idx) > 1 else f"abs(o{idx[0]} - x{idx[0]})")
                         + ")")
            lines.append("status = UNITERATED")
            return lines
        cand = {key: f"c{m}" for m, key in enumerate(keys)}
        mine = [self.unit_index[u] for u in g]
        state = [f"k{i}" for i in mine] + [f"l{i}" for i in mine] + \
            [f"o{ex.index[(u, p)]}" for u in g for p in self.directs[u].outputs]
        kept = [f"K{c}_{i}" for i in mine] + [f"J{c}_{i}" for i in mine]
        fn = [f"def ev{c}(c, rollback):",
              f"    nonlocal cur, {', '.join(state + kept + [f'RS{c}_{i}' for i in mine])}"]
        ev = ["if rollback:"]
        ev += [f"    RS{c}_{i}(); k{i} = K{c}_{i}; l{i} = J{c}_{i}" for i in mine]
        ev += ["else:"]
        ev += [f"    RS{c}_{i} = KEEPS[{i}](); K{c}_{i} = k{i}; J{c}_{i} = l{i}" for i in mine]
        ev.append(f"{', '.join(cand.values())}, = c.tolist()")
        period = ex.history.held
        for u in g:
            ev += self._step(u, fresh, cand)
            # An input from a held coupling output takes its candidate at T+H only: the
            # unit is refreshed there for it (PortHistory.held_at_end).
            end = [(name, cand[key]) for name, key in ex.graph.inputs[u]
                   if key in cand and period(key, ex.H)]
            if end:
                ev += self._refresh(u, end, "o")
        ev += ["counter[0] += 1", f"return ARRAY([{', '.join(f'o{j}' for j in idx)}])"]
        # (Rendered last: a live value's writes are all known then.) The closure's names
        # exist before it is defined.
        closures.append(([f"    {v} = None" for v in kept + [f"RS{c}_{i}" for i in mine]]
                         + [f"    {fn[0]}", f"    {fn[1]}"], ev))
        lines += [f"sv = ITERATE(ARRAY([{', '.join(preds)}]), ev{c})",
                  "its = max(its, sv.iterations)", "res = max(res, sv.residual)",
                  "if not sv.converged:",
                  "    cur = -1",
                  f"    FAILED({tuple(g)!r}, sv, T)",
                  "    status = CONTINUED"]
        return lines


    def _resolve(self, c: int, stage, closures: list) -> list:
        """A coupling solved again at T+H (:meth:`Engine._resolve
        <cosim.master.engine.Engine>`): a generated evaluation refreshing its units for
        candidates of its coupling outputs and the values its sources name, handed to
        :func:`cosim.master.coupling.iterate` from the outputs its step left."""
        ex = self.ex
        g = list(stage.coupling)
        keys = ex.graph.coupling_keys(g)
        idx = [ex.index[k] for k in keys]
        cand = {key: f"c{m}" for m, key in enumerate(keys)}
        mine = [self.unit_index[u] for u in g]
        state = [f"l{i}" for i in mine] + \
            [f"r{ex.index[(u, p)]}" for u in g for p in self.directs[u].outputs]
        ev = [f"{', '.join(cand.values())}, = c.tolist()"]
        for v, sources in stage.resolve:
            values = [(name, cand[key] if post is None else
                       f"{'r' if post else 'o'}{ex.index[key]}") for name, key, post in sources]
            ev += self._refresh(v, values, "r")
        ev += ["counter[0] += 1", f"return ARRAY([{', '.join(f'r{j}' for j in idx)}])"]
        closures.append(([f"    def rv{c}(c, rollback):",
                          f"        nonlocal cur, {', '.join(state)}"], ev))
        lines = [f"sv = ITERATE(ARRAY([{', '.join(f'o{j}' for j in idx)}]), rv{c})",
                 "its = max(its, sv.iterations)", "res = max(res, sv.residual)",
                 "if not sv.converged:",
                 "    cur = -1",
                 f"    FAILED({tuple(g)!r}, sv, {ex.t0!r} + (nq + {ex.nq_step}) * "
                 f"{ex.quantum!r}, True)",
                 "    status = CONTINUED"]
        # (a unit stopped the run in this step: nothing is refreshed, Master.step)
        return ["if not stop:", *_indent(lines)] if self.stoppers else lines


def _indent(lines: list) -> list:
    """``lines`` one level deeper (a live-value write carries its extra indent)."""
    return [("    " + ln) if type(ln) is str else ln[:3] + (ln[3] + 4,) for ln in lines]


def _unpack(names: list[str], src: str) -> list[str]:
    """The prologue line unpacking ``src`` into ``names`` (none when empty)."""
    return [f"    {', '.join(names)}, = {src}"] if names else []
