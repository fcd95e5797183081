"""Reverse mode: the tape (HIPS autograd's design on Autodidax's trace stack).

``VJPTrace`` binds each primitive one level down (so the primal may itself be a tracer of an outer
transform), records a :class:`Node` with its parents and residuals, and returns a ``VJPTracer``.
Only operations with a differentiated operand are recorded; primitives marked ``nondiff`` are not.

The backward pass runs after the trace is popped, iteratively in reverse topological order: a
10^6-operation chain needs no recursion. Because the trace is popped first, the rules' own operations
are recorded by whatever transform is outside, which gives grad-of-grad and every other nesting with
no extra machinery.
"""
from __future__ import annotations

import itertools
import operator

from tapegrad import _tree
from tapegrad._backend import zeros_like
from tapegrad._core import PrimalTracer, Primitive, Trace, bind, holds_tracers_of, is_inexact, new_main
from tapegrad._jvp import apply_jvp_rule, apply_jvp_rules
from tapegrad._structural import add_any

_sequence = itertools.count()


class Node:
    """One recorded application of a primitive, whatever its number of results: the primitive, its
    residuals (operands and result, or list of results), and its parents as ``(operand index, parent
    node, parent's result index)`` triples, the index None for a parent with one result. Leaves (the
    differentiated inputs) have no primitive.

    ``seq`` numbers nodes in creation order, which is a topological order of the tape: a node is
    always created after its parents.
    """

    __slots__ = ("prim", "primals", "params", "ans", "parents", "seq")

    def __init__(self, prim, primals, params, ans, parents):
        self.prim = prim
        self.primals = primals
        self.params = params
        self.ans = ans
        self.parents = parents
        self.seq = next(_sequence)


class VJPTracer(PrimalTracer):
    """A taped value: result ``index`` of ``node`` (None when the node has one result)."""

    __slots__ = ("node", "index")

    def __init__(self, trace, primal, node, index):
        self._trace = trace
        self.primal = primal
        self.node = node
        self.index = index

    def __repr__(self):
        return f"VJPTracer(level={self._trace.level}, primal={self.primal!r})"


class VJPTrace(Trace):
    __slots__ = ()

    def process_primitive(self, prim, args, params):
        if prim.multiple_results:  # its own method: the body below stays the single-result hot path
            return self._process_multiple(prim, args, params)
        if len(args) == 1:  # bind chose this trace, so a lone operand is one of its tracers
            (a,) = args
            primals, parents = (a.primal,), ((0, a.node, a.index),)
        else:  # _operands, inlined: this is the path of every binary operation
            primals, parents = list(args), []
            for i, a in enumerate(args):
                if type(a) is VJPTracer and a._trace is self:
                    primals[i] = a.primal
                    parents.append((i, a.node, a.index))
        if self.level == 1:  # no transform below this one: the primals are concrete arrays
            ans = prim.impl(*primals, **params)
        else:
            ans = bind(prim, *primals, **params)
        if prim.nondiff:
            return ans
        if prim.vjp_rules is None:
            raise NotImplementedError(f"vjp rule for '{prim.name}' is not defined")
        return VJPTracer(self, ans, Node(prim, primals, params, ans, parents), None)

    def _process_multiple(self, prim, args, params):
        primals, parents = self._operands(args)
        if prim.vjp_fwd is not None:  # the primitive keeps residuals for its rule (a scan's intermediates)
            ans, residuals = prim.vjp_fwd(*primals, **params)
            return self._results(Node(prim, primals, dict(params, residuals=residuals), ans, parents), ans)
        ans = bind(prim, *primals, **params)
        if prim.nondiff:
            return ans
        if prim.vjp_rules is None:
            raise NotImplementedError(f"vjp rule for '{prim.name}' is not defined")
        return self._results(Node(prim, primals, params, ans, parents), ans)

    def _operands(self, args):
        """The primals of ``args`` and the parents among them (this trace's tracers)."""
        primals, parents = list(args), []
        for i, a in enumerate(args):
            if type(a) is VJPTracer and a._trace is self:
                primals[i] = a.primal
                parents.append((i, a.node, a.index))
        return primals, parents

    def _results(self, node, outs):
        """The results of a multiple-results ``node``: tracers of the float and complex ones; the
        integer ones (an argmax) carry no derivative and stay plain values."""
        return [VJPTracer(self, o, node, k) if is_inexact(o) else o for k, o in enumerate(outs)]

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
        return self._results(Node(prim, primals, {"residuals": residuals}, list(outs), tuple(parents)), outs)


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


def accumulate(cts: dict, node, index, ct) -> None:
    """Add ``ct`` into the cotangent slot of result ``index`` of ``node`` (None: its only result).

    The one place where the backward pass sums cotangents. A node with one result keeps its
    cotangent in ``cts[node]`` itself; a multiple-results node keeps a list, one slot per result.
    """
    if index is None:
        previous = cts.get(node)
        cts[node] = ct if previous is None else add_any(previous, ct)
        return
    slots = cts.get(node)
    if slots is None:
        slots = cts[node] = [None] * len(node.ans)
    previous = slots[index]
    slots[index] = ct if previous is None else add_any(previous, ct)


def _complete(slots, ans) -> list:
    """The cotangents a multiple-results rule sees: zeros for a float or complex result no cotangent
    reached, None for an integer result."""
    return [c if c is not None or not is_inexact(a) else zeros_like(a) for c, a in zip(slots, ans)]


def _reverse_topological(out_refs):
    """The nodes that reach ``out_refs`` (``(node, index)`` pairs or None), consumers before producers
    (latest created first)."""
    seen = {ref[0] for ref in out_refs if ref is not None}
    stack = list(seen)
    while stack:
        for _, parent, _ in stack.pop().parents:
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return sorted(seen, key=_by_seq, reverse=True)


_by_seq = operator.attrgetter("seq")


def backward(out_refs, out_cts, in_nodes, free: bool, order=None):
    """Cotangents of ``in_nodes`` given ``out_cts`` on the results ``out_refs`` (``(node, index)``
    pairs, None where the output is not taped; a cotangent None where nothing flows).

    Visits only the nodes that reach an output, each once, after all of its consumers; no recursion.
    ``free`` drops each node's residuals once its rule has run (``grad``); a reusable ``vjp_fn``
    keeps them, and may pass the visiting ``order`` it computed once (``_reverse_topological``).
    """
    cts = {}
    for ref, ct in zip(out_refs, out_cts):
        if ref is not None and ct is not None:
            accumulate(cts, ref[0], ref[1], ct)
    results = {}
    for node in order or _reverse_topological(out_refs):
        ct = cts.pop(node, None)
        if ct is None:
            continue
        prim = node.prim
        if prim is None:  # a leaf: one of the differentiated inputs
            results[node] = ct
            continue
        rules, primals, params, ans = prim.vjp_rules, node.primals, node.params, node.ans
        if prim.multiple_results:
            ct = _complete(ct, ans)
        if type(rules) is tuple:  # the hot path: one rule per operand
            for argnum, parent, index in node.parents:
                parent_ct = rules[argnum](ct, ans, *primals, **params)
                if parent_ct is None:
                    continue
                if index is None and parent not in cts:  # the first cotangent of a result: nothing to add
                    cts[parent] = parent_ct
                else:
                    accumulate(cts, parent, index, parent_ct)
        else:  # one call for all operands (``concatenate`` of N arrays costs O(N)), and joint calls
            parents = node.parents
            parent_cts = rules.all_operands([argnum for argnum, _, _ in parents], ct, ans, primals, params)
            for (_, parent, index), parent_ct in zip(parents, parent_cts):
                if parent_ct is not None:
                    accumulate(cts, parent, index, parent_ct)
        if free:
            node.primals = node.ans = node.params = None
    return [results.get(node) for node in in_nodes]


def record_flat(fun, primals):
    """Run ``fun`` (a list of arrays to a list of arrays) under a new tape.

    Returns:
        ``(out_primals, in_nodes, out_refs)``: the tape's leaves, one per primal, and the result of
        each output as a ``(node, index)`` pair (None for an output that does not depend on the
        primals).
    """
    with new_main(VJPTrace) as main:
        trace = main.trace
        in_nodes = [Node(None, None, None, None, ()) for _ in primals]
        outs = fun(*[VJPTracer(trace, x, node, None) for x, node in zip(primals, in_nodes)])
        out_primals, out_refs = [], []
        for out in outs:
            if type(out) is VJPTracer and out._trace is trace:
                out_primals.append(out.primal)
                out_refs.append((out.node, out.index))
            else:
                out_primals.append(out)
                out_refs.append(None)
    return out_primals, in_nodes, out_refs


def vjp_flat(fun, primals):
    """Run ``fun`` (a list of arrays to a list of arrays) under a new tape.

    Returns:
        ``(out_primals, pullback)``. ``pullback(out_cts, free=False)`` maps one cotangent per output
        (None: zero) to one per input (None where no gradient reaches it).
    """
    out_primals, in_nodes, out_refs = record_flat(fun, primals)
    order = []  # the visiting order, computed at the first call that keeps the residuals

    def pullback(out_cts, free: bool = False):
        if free:
            return backward(out_refs, out_cts, in_nodes, True)
        if not order:
            order.extend(_reverse_topological(out_refs))
        return backward(out_refs, out_cts, in_nodes, False, order)
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


def sweep_order(out_refs):
    """The nodes a forward sweep visits, in creation order: those that reach an output, less the leaves
    and the single integer results (which carry no tangent). Computed once per linearization."""
    return [node for node in reversed(_reverse_topological(out_refs))
            if node.prim is not None and (node.prim.multiple_results or is_inexact(node.ans))]


def forward_sweep(order, in_nodes, in_tangents, out_refs):
    """Tangents of ``out_refs`` given ``in_tangents`` on the tape's leaves (None: zero): each node of
    ``order`` (``sweep_order``) maps its operands' tangents through its jvp rule at the stored primals,
    a linearization replayed without recomputing the primals. A multiple-results node's tangent is
    the list of its results' tangents."""
    tangents = {node: t for node, t in zip(in_nodes, in_tangents) if t is not None}
    for node in order:
        primals = node.primals
        operand_tangents = [None] * len(primals)
        reached = False
        for argnum, parent, index in node.parents:
            t = _tangent(tangents, parent, index)
            if t is not None:
                operand_tangents[argnum] = t
                reached = True
        if not reached:
            continue
        prim = node.prim
        apply = apply_jvp_rules if prim.multiple_results else apply_jvp_rule
        t = apply(prim, operand_tangents, node.ans, primals, node.params)
        if t is not None:
            tangents[node] = t
    return [None if ref is None else _tangent(tangents, *ref) for ref in out_refs]


def _tangent(tangents, node, index):
    t = tangents.get(node)
    return t if index is None or t is None else t[index]
