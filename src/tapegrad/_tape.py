"""Reverse mode: the tape (HIPS autograd's design on Autodidax's trace stack).

``VJPTrace`` binds each primitive one level down (so the primal may itself be a tracer of an outer
transform) and returns a ``VJPTracer`` that is itself the tape's record of the operation: its
primitive, operands, parameters and parents. Only operations with a differentiated operand are
recorded; primitives marked ``nondiff`` are not. A primitive with several results is recorded once,
as a :class:`Node`, with one :class:`ResultTracer` per float or complex result.

The trace appends every record to its ``tape`` list, in creation order, which is a topological order:
the backward pass walks it backwards, iteratively (a 10^6-operation chain needs no recursion), with
each record's cotangent kept on the record itself. Because the trace is popped first, the rules' own
operations are recorded by whatever transform is outside, which gives grad-of-grad and every other
nesting with no extra machinery.
"""
from __future__ import annotations

from typing import Any

from tapegrad import _config, _tree
from tapegrad._backend import SCALAR_TYPES, zeros_like
from tapegrad._core import (
    PrimalTracer,
    Primitive,
    Trace,
    Tracer,
    bind,
    check_one_backend,
    check_values,
    holds_tracers_of,
    is_inexact,
    new_main,
)
from tapegrad._jvp import apply_jvp_rule, apply_jvp_rules, fit_rule_result
from tapegrad._structural import add_any
from tapegrad._value_checks import check_rule

_checking = False  # tg.config.debug_nans / debug_infs on: check results (a global, tested per primitive)
_config.mirror_checking(globals())


class VJPTracer(PrimalTracer):
    """A taped value with one result, and the tape's record of the operation that made it: its
    primitive (None for a leaf, a differentiated input), the operands' primals, the parameters, and
    ``parents``, one per operand: the operand's tracer where it is taped by this trace, else None.
    ``ct`` holds its cotangent while a backward pass runs (None: none has reached it yet). Made by
    :func:`_taped`, not by calling the class.
    """

    __slots__ = ("prim", "primals", "params", "parents", "ct")
    prim: Primitive | None
    primals: Any
    params: Any
    parents: Any
    ct: Any

    def __repr__(self):
        return f"VJPTracer(level={self._trace.level}, primal={self.primal!r})"


class Node:
    """One recorded application of a primitive with several results (or a joint call): the
    primitive, its operands' primals, parameters, the list of results ``ans``, and ``parents`` as in
    :class:`VJPTracer`. ``ct`` holds one cotangent slot per result while a backward pass runs."""

    __slots__ = ("prim", "primals", "params", "ans", "parents", "ct")

    def __init__(self, prim, primals, params, ans, parents):
        self.prim = prim
        self.primals = primals
        self.params = params
        self.ans = ans
        self.parents = parents
        self.ct = None


class ResultTracer(PrimalTracer):
    """A taped value: result ``index`` of the multiple-results ``node``."""

    __slots__ = ("node", "index")

    def __init__(self, trace, primal, node, index):
        self._trace = trace
        self.primal = primal
        self.node = node
        self.index = index

    def __repr__(self):
        return f"VJPTracer(level={self._trace.level}, primal={self.primal!r})"


class VJPTrace(Trace):
    """Reverse mode's trace; ``tape`` lists its records (``VJPTracer`` and ``Node``) in creation order."""

    __slots__ = ("tape",)

    def __init__(self, main):
        super().__init__(main)
        self.tape = []

    def process_primitive(self, prim, args, params):
        if prim.multiple_results:  # its own method: the body below stays the single-result hot path
            return self._process_multiple(prim, args, params)
        n = len(args)
        primals: tuple
        if n == 1:  # bind chose this trace, so a lone operand is one of its tracers
            primals, parents = (args[0].primal,), args
        elif n == 2:  # every binary operation: two fixed slots, no loop
            a, b = args
            if type(a) in _TAPED and a._trace is self:
                pa, a = a, a.primal
            else:
                pa = None
            if type(b) in _TAPED and b._trace is self:
                pb, b = b, b.primal
            else:
                pb = None
            primals, parents = (a, b), (pa, pb)
        else:
            primals, parents = self._operands(args)
        if self.level != 1:  # a transform below this one: the primals may be its tracers
            below = primals[0]._trace if n == 1 and isinstance(primals[0], Tracer) else None
            if below is not None and below.main.active:  # bind's search, for one operand: its trace
                ans = below.process_primitive(prim, primals, params)
            else:
                ans = bind(prim, *primals, **params)
        else:  # no transform below: the impl itself (no parameters: every arithmetic operation)
            try:
                ans = prim.impl(*primals, **params) if params else prim.impl(*primals)
            except TypeError:
                check_one_backend(primals)
                raise
            if _checking:  # tg.config.debug_nans / debug_infs
                check_values(prim, primals, ans)
        if prim.nondiff:
            return ans
        if prim.vjp_rules is None:
            raise NotImplementedError(f"vjp rule for '{prim.name}' is not defined")
        out = _taped(self, ans, prim, primals, params, parents)
        self.tape.append(out)
        return out

    def _process_multiple(self, prim, args, params):
        primals, parents = self._operands(args)
        if prim.vjp_fwd is not None:  # the primitive keeps residuals for its rule (a scan's intermediates)
            ans, residuals = prim.vjp_fwd(*primals, **params)
            if _checking:
                check_values(prim, primals, ans)
            return self._results(Node(prim, primals, dict(params, residuals=residuals), ans, parents), ans)
        ans = bind(prim, *primals, **params)
        if prim.nondiff:
            return ans
        if prim.vjp_rules is None:
            raise NotImplementedError(f"vjp rule for '{prim.name}' is not defined")
        return self._results(Node(prim, primals, params, ans, parents), ans)

    def _operands(self, args):
        """The primals of ``args`` and their parents (an operand's tracer where this trace tapes it,
        else None)."""
        primals, parents = list(args), [None] * len(args)
        for i, a in enumerate(args):
            if type(a) in _TAPED and a._trace is self:
                primals[i] = a.primal
                parents[i] = a
        return primals, parents

    def _results(self, node, outs):
        """The results of a multiple-results ``node``, which joins the tape: tracers of the float and
        complex ones; the integer ones (an argmax) carry no derivative and stay plain values."""
        self.tape.append(node)
        return [ResultTracer(self, o, node, k) if is_inexact(o) else o for k, o in enumerate(outs)]

    def process_joint(self, call, args):
        """One multiple-results node for the whole call, like a primitive's: its rule is
        ``call.backward``, which gets every result's cotangent at once and returns every operand's."""
        primals, parents = self._operands(args)
        outs, residuals = call.forward(*primals)
        if holds_tracers_of(self, outs) or holds_tracers_of(self, _tree.tree_leaves(residuals)):
            return call.on_capture(args)
        prim = Primitive(call.name, multiple_results=True)
        prim.vjp_rules = _JointRules(call)
        prim.jvp_rule = _joint_jvp(call)
        return self._results(Node(prim, primals, {"residuals": residuals}, list(outs), parents), outs)


_TAPED = frozenset([VJPTracer, ResultTracer])
_new = object.__new__


def _taped(trace, primal, prim, primals, params, parents) -> VJPTracer:
    """A new ``VJPTracer`` (a record of ``trace``'s tape, or a leaf where ``prim`` is None). Its slots
    are set here rather than by an ``__init__``: calling a class with a Python ``__init__`` was half of
    the cost of recording an operation."""
    out = _new(VJPTracer)
    out._trace = trace
    out.primal = primal
    out.prim = prim
    out.primals = primals
    out.params = params
    out.parents = parents
    out.ct = None
    return out


class _JointRules:
    """The vjp rules of a joint call's node: ``call.backward`` gives every operand's cotangent at once
    (the interface of ``_rules._ArgnumRules``, which the backward pass calls once per node)."""

    __slots__ = ("call",)

    def __init__(self, call):
        self.call = call

    def all_operands(self, argnums, cts, ans, primals, params):
        in_cts = self.call.backward(params["residuals"], cts)
        return [in_cts[argnum] for argnum in argnums]


def _joint_jvp(call):
    """The jvp rule of a joint call's node (a forward sweep over the tape): the call maps every
    operand's tangent at once."""
    def rule(tangents, ans, *primals, residuals):
        return call.jvp(list(primals), tangents)[1]
    return rule


def accumulate(tracer, ct) -> None:
    """Add ``ct`` into the cotangent of ``tracer`` (a ``VJPTracer`` or a ``ResultTracer``).

    The one place where the backward pass sums cotangents. A ``VJPTracer`` keeps its cotangent
    itself; a multiple-results node keeps a list, one slot per result.
    """
    if type(tracer) is VJPTracer:
        previous = tracer.ct
        tracer.ct = ct if previous is None else add_any(previous, ct)
        return
    node, index = tracer.node, tracer.index
    slots = node.ct
    if slots is None:
        slots = node.ct = [None] * len(node.ans)
    previous = slots[index]
    slots[index] = ct if previous is None else add_any(previous, ct)


def _complete(slots, ans) -> list:
    """The cotangents a multiple-results rule sees: zeros for a float or complex result no cotangent
    reached, None for an integer result."""
    return [c if c is not None or not is_inexact(a) else zeros_like(a) for c, a in zip(slots, ans)]


def _record_of(tracer):
    """The tape record of a taped value: the tracer itself, or its multiple-results node."""
    return tracer if type(tracer) is VJPTracer else tracer.node


class Tape:
    """A finished recording: the leaves (``VJPTracer`` with no primitive, one per differentiated
    input), the records in creation order, and the outputs (a taped tracer, or None for an output that
    does not depend on the leaves)."""

    __slots__ = ("leaves", "records", "outs", "_lock", "_pruned", "_busy")

    def __init__(self, leaves, records, outs):
        self.leaves = leaves
        self.records = records
        self.outs = outs
        import threading  # here, not at the top: its import is a few percent of `import tapegrad`'s
        self._lock = threading.RLock()  # reentrant: a call from inside its own pass is refused, not hung
        self._pruned = self._busy = False

    def prune(self) -> None:
        """Keep only the records that reach an output (a reusable pullback or a linearization holds
        the tape: the others' residuals go now). One backward walk over the tape, no sort."""
        if self._pruned:
            return
        live = {id(_record_of(out)) for out in self.outs if out is not None}
        kept = []
        for record in reversed(self.records):
            if id(record) in live:
                kept.append(record)
                live.update(id(_record_of(p)) for p in record.parents if p is not None)
        kept.reverse()
        self.records, self._pruned = kept, True

    def backward(self, out_cts, free: bool) -> list:
        """Cotangents of the leaves given ``out_cts`` on the outputs (None: zero); None where no
        cotangent reaches a leaf.

        Visits the records latest first, each after all of its consumers; no recursion. ``free``
        consumes the tape (``grad``): each record leaves it as it is visited, so its residuals go as
        soon as no later record needs them. Otherwise (a reusable ``vjp_fn``) the tape is kept, one
        pass at a time, and the cotangent slots are cleared after each pass, even one that raises.
        """
        if free:
            records, self.records = self.records, []
            return self._pass(out_cts, records, True)
        with self._lock:  # the cotangents live on the records: two passes at once would mix them
            if self._busy:
                raise RuntimeError("a vjp function was called from inside its own backward pass (a "
                                   "custom rule calling it); compute that cotangent with a second "
                                   "tg.vjp of the same function instead")
            self.prune()
            self._busy = True
            try:
                return self._pass(out_cts, list(self.records), False)
            finally:
                self._busy = False
                for record in self.records:
                    record.ct = None
                for leaf in self.leaves:
                    leaf.ct = None

    def _pass(self, out_cts, records: list, free: bool) -> list:
        """One backward pass over ``records`` (creation order), which it empties from the end: a
        record the pass has left is released unless something else holds it."""
        for out, ct in zip(self.outs, out_cts):
            if out is not None and ct is not None:
                accumulate(out, ct)
        pop = records.pop
        while records:
            record = pop()
            ct = record.ct
            if ct is None:
                continue
            record.ct = None
            if type(record) is VJPTracer:
                ans = record.primal
            else:
                ans = record.ans
                ct = _complete(ct, ans)
            rules, primals, params = record.prim.vjp_rules, record.primals, record.params
            if type(rules) is tuple:  # the hot path, inlined: one rule per operand
                argnum = 0
                for parent in record.parents:
                    if parent is not None:
                        parent_ct = rules[argnum](ct, ans, *primals, **params)
                        if parent_ct is not None:
                            if _checking:  # tg.config.debug_nans / debug_infs
                                check_rule(record.prim, "vjp", primals, parent_ct, argnum)
                            if type(parent_ct) in SCALAR_TYPES or parent_ct.shape != primals[argnum].shape:
                                # a rule's constant or 0-d result: broadcast (or refused), like the operand
                                parent_ct = fit_rule_result(parent_ct, primals[argnum], record.prim.name)
                            if type(parent) is VJPTracer and parent.ct is None:  # the first: nothing to add
                                parent.ct = parent_ct
                            else:
                                accumulate(parent, parent_ct)
                    argnum += 1
            else:
                _all_operands(record, rules, ct, ans)
            if free:
                record.primals = record.params = record.parents = None
        results = [leaf.ct for leaf in self.leaves]
        for leaf in self.leaves:
            leaf.ct = None
        return results


def _all_operands(record, rules, ct, ans) -> None:
    """Pass ``ct`` to the record's parents with one call for all operands: ``concatenate`` of N arrays
    costs O(N), and a joint call's ``backward`` gives every operand's cotangent at once."""
    parents = record.parents
    argnums = [argnum for argnum, parent in enumerate(parents) if parent is not None]
    parent_cts = rules.all_operands(argnums, ct, ans, record.primals, record.params)
    for argnum, parent_ct in zip(argnums, parent_cts):
        if parent_ct is not None:
            if _checking:  # tg.config.debug_nans / debug_infs
                check_rule(record.prim, "vjp", record.primals, parent_ct, argnum)
            if type(parent_ct) in SCALAR_TYPES or parent_ct.shape != record.primals[argnum].shape:
                parent_ct = fit_rule_result(parent_ct, record.primals[argnum], record.prim.name)
            accumulate(parents[argnum], parent_ct)



def record_flat(fun, primals) -> tuple[list, Tape]:
    """Run ``fun`` (a list of arrays to a list of arrays) under a new tape.

    Returns:
        ``(out_primals, tape)``: the outputs' values and the :class:`Tape`, whose ``outs`` are the
        outputs' tracers (None for an output that does not depend on the primals).
    """
    with new_main(VJPTrace) as main:
        trace = main.trace
        try:
            leaves = [_taped(trace, x, None, None, None, ()) for x in primals]
            outs = fun(*leaves)
            out_primals, out_tracers = [], []
            for out in outs:
                if type(out) in _TAPED and out._trace is trace:
                    out_primals.append(out.primal)
                    out_tracers.append(out)
                else:
                    out_primals.append(out)
                    out_tracers.append(None)
            return out_primals, Tape(leaves, trace.tape, out_tracers)
        finally:
            trace.tape = None  # the trace's tracers reach it: no cycle left for the garbage collector


def vjp_flat(fun, primals):
    """Run ``fun`` (a list of arrays to a list of arrays) under a new tape.

    Returns:
        ``(out_primals, pullback)``. ``pullback(out_cts, free=False)`` maps one cotangent per output
        (None: zero) to one per input (None where no gradient reaches it).
    """
    out_primals, tape = record_flat(fun, primals)

    def pullback(out_cts, free: bool = False):
        return tape.backward(out_cts, free)
    return out_primals, pullback


def pull_back_on(fun, primals, variables, out_cts) -> list:
    """The cotangents of ``primals[i]`` for each ``i`` in ``variables`` (None where none reaches it),
    given ``out_cts`` on ``fun``'s outputs: ``fun`` runs once more under a fresh tape with the other
    operands held fixed (``checkpoint``'s recomputation, ``switch``'s backward branches)."""
    def on_variables(*vs):
        leaves = list(primals)
        for i, v in zip(variables, vs):
            leaves[i] = v
        return fun(*leaves)
    _, pullback = vjp_flat(on_variables, [primals[i] for i in variables])
    return pullback(out_cts, free=True)


def sweep_order(tape: Tape) -> list:
    """The records a forward sweep visits, in creation order: those that reach an output, less the
    single integer results (which carry no tangent). Computed once per linearization."""
    tape.prune()
    return [r for r in tape.records if type(r) is Node or is_inexact(r.primal)]


def forward_sweep(order, tape: Tape, in_tangents) -> list:
    """Tangents of the tape's outputs given ``in_tangents`` on its leaves (None: zero): each record of
    ``order`` (``sweep_order``) maps its operands' tangents through its jvp rule at the stored primals,
    a linearization replayed without recomputing the primals. A multiple-results node's tangent is
    the list of its results' tangents. Tangents are kept by the records' ids, not on the records, so
    that the sweeps of one linearization may run at once."""
    tangents = {id(leaf): t for leaf, t in zip(tape.leaves, in_tangents) if t is not None}
    for record in order:
        primals = record.primals
        operand_tangents = [None] * len(primals)
        reached = False
        for argnum, parent in enumerate(record.parents):
            if parent is not None:
                t = _tangent(tangents, parent)
                if t is not None:
                    operand_tangents[argnum] = t
                    reached = True
        if not reached:
            continue
        prim = record.prim
        if type(record) is VJPTracer:
            t = apply_jvp_rule(prim, operand_tangents, record.primal, primals, record.params)
        else:
            t = apply_jvp_rules(prim, operand_tangents, record.ans, primals, record.params)
        if t is not None:
            tangents[id(record)] = t
    return [None if out is None else _tangent(tangents, out) for out in tape.outs]


def _tangent(tangents, tracer):
    if type(tracer) is VJPTracer:
        return tangents.get(id(tracer))
    t = tangents.get(id(tracer.node))
    return None if t is None else t[tracer.index]
