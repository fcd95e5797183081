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
from tapegrad._jvp import apply_jvp_rule
from tapegrad._structural import add_any

_sequence = itertools.count()


class Node:
    """One recorded operation: the primitive, its residuals (operands and result), and its parents
    as ``(operand index, parent node)`` pairs. Leaves (the differentiated inputs) have no primitive.

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
    __slots__ = ("node",)

    def __init__(self, trace, primal, node):
        self._trace = trace
        self.primal = primal
        self.node = node

    def __repr__(self):
        return f"VJPTracer(level={self._trace.level}, primal={self.primal!r})"


class VJPTrace(Trace):
    __slots__ = ()

    def process_primitive(self, prim, args, params):
        if len(args) == 1:  # bind chose this trace, so a lone operand is one of its tracers
            (a,) = args
            primals, parents = (a.primal,), ((0, a.node),)
        else:
            primals = list(args)
            parents = []
            for i, a in enumerate(args):
                if type(a) is VJPTracer and a._trace is self:
                    primals[i] = a.primal
                    parents.append((i, a.node))
        if self.level == 1:  # no transform below this one: the primals are concrete arrays
            ans = prim.impl(*primals, **params)
        else:
            ans = bind(prim, *primals, **params)
        if prim.nondiff:
            return ans
        if prim.vjp_rules is None:
            raise NotImplementedError(f"vjp rule for '{prim.name}' is not defined")
        return VJPTracer(self, ans, Node(prim, primals, params, ans, parents))

    def process_joint(self, call, args):
        """One node for the whole call: its rule (``call.backward``) gets every output's cotangent at
        once and returns every operand's. Each output is a tracer of its own small node, which hands
        its cotangent to slot ``k`` of the joint node's list."""
        primals, parents = list(args), []
        for i, a in enumerate(args):
            if type(a) is VJPTracer and a._trace is self:
                primals[i] = a.primal
                parents.append((i, a.node))
        outs, residuals = call.forward(*primals)
        if holds_tracers_of(self, outs) or holds_tracers_of(self, _tree.tree_leaves(residuals)):
            return call.on_capture(args)
        # params: the outputs, for zero cotangents where none arrives (None for non-float outputs)
        likes = [o if is_inexact(o) else None for o in outs]
        # primals: the call's residuals, and its operands (for a forward sweep over the tape)
        joint = Node(_JointRule(call), (residuals, primals), likes, len(outs), tuple(parents))
        return [VJPTracer(self, o, Node(_OUTPUT, None, None, None, ((k, joint),))) if is_inexact(o) else o
                for k, o in enumerate(outs)]


class _JointRule:
    """The ``prim`` of a joint node: ``call.backward(residuals, out_cts) -> in_cts``."""

    __slots__ = ("call", "name")

    def __init__(self, call):
        self.call = call
        self.name = call.name


_OUTPUT = object()  # the ``prim`` of an output of a joint node: its cotangent goes into the joint's slot


def _backward_special(node, ct, cts):
    """Backward for nodes that are not primitives: outputs of joint nodes and joint nodes."""
    prim = node.prim
    if prim is _OUTPUT:
        ((k, joint),) = node.parents
        slots = cts.get(joint)
        if slots is None:
            slots = cts[joint] = [None] * joint.ans
        slots[k] = ct  # each output node is visited once, after all of its consumers
        return ()
    ct = [zeros_like(like) if c is None and like is not None else c for c, like in zip(ct, node.params)]
    in_cts = prim.call.backward(node.primals[0], ct)
    return [(parent, in_cts[argnum]) for argnum, parent in node.parents]


def _backward_operands(node, rules, ct, cts):
    """A rule for any number of operands (``concatenate``, ``einsum``): called once for all of them,
    with the primals as one list, so a node of N operands costs O(N) (``stack`` of 10^5 scalars)."""
    parents = node.parents
    parent_cts = rules.all_operands([argnum for argnum, _ in parents], ct, node.ans, node.primals, node.params)
    for (_, parent), parent_ct in zip(parents, parent_cts):
        if parent_ct is not None:
            previous = cts.get(parent)
            cts[parent] = parent_ct if previous is None else add_any(previous, parent_ct)


def _reverse_topological(out_nodes):
    """The nodes that reach ``out_nodes``, consumers before producers (latest created first)."""
    seen = {node for node in out_nodes if node is not None}
    stack = list(seen)
    while stack:
        for _, parent in stack.pop().parents:
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return sorted(seen, key=_by_seq, reverse=True)


_by_seq = operator.attrgetter("seq")


def backward(out_nodes, out_cts, in_nodes, free: bool, order=None):
    """Cotangents of ``in_nodes`` given ``out_cts`` on ``out_nodes`` (None where nothing flows).

    Visits only the nodes that reach an output, each once, after all of its consumers; no recursion.
    ``free`` drops each node's residuals once its rule has run (``grad``); a reusable ``vjp_fn``
    keeps them, and may pass the visiting ``order`` it computed once (``_reverse_topological``).
    """
    cts = {}
    for node, ct in zip(out_nodes, out_cts):
        if node is not None and ct is not None:
            cts[node] = ct if node not in cts else add_any(cts[node], ct)
    results = {}
    for node in order or _reverse_topological(out_nodes):
        ct = cts.pop(node, None)
        if ct is None:
            continue
        prim = node.prim
        if prim is None:  # a leaf: one of the differentiated inputs
            results[node] = ct
            continue
        if type(prim) is not Primitive:
            for parent, parent_ct in _backward_special(node, ct, cts):
                if parent_ct is not None:
                    previous = cts.get(parent)
                    cts[parent] = parent_ct if previous is None else add_any(previous, parent_ct)
            if free:
                node.primals = node.params = None
            continue
        rules, primals, params, ans = prim.vjp_rules, node.primals, node.params, node.ans
        if type(rules) is tuple:  # the hot path: one rule per operand
            for argnum, parent in node.parents:
                parent_ct = rules[argnum](ct, ans, *primals, **params)
                if parent_ct is not None:
                    previous = cts.get(parent)
                    cts[parent] = parent_ct if previous is None else add_any(previous, parent_ct)
        else:
            _backward_operands(node, rules, ct, cts)
        if free:
            node.primals = node.ans = None
    return [results.get(node) for node in in_nodes]


def record_flat(fun, primals):
    """Run ``fun`` (a list of arrays to a list of arrays) under a new tape.

    Returns:
        ``(out_primals, in_nodes, out_nodes)``: the tape's leaves, one per primal, and the node of each
        output (None for an output that does not depend on the primals).
    """
    with new_main(VJPTrace) as main:
        trace = main.trace
        in_nodes = [Node(None, None, None, None, ()) for _ in primals]
        outs = fun(*[VJPTracer(trace, x, node) for x, node in zip(primals, in_nodes)])
        out_primals, out_nodes = [], []
        for out in outs:
            if type(out) is VJPTracer and out._trace is trace:
                out_primals.append(out.primal)
                out_nodes.append(out.node)
            else:
                out_primals.append(out)
                out_nodes.append(None)
    return out_primals, in_nodes, out_nodes


def vjp_flat(fun, primals):
    """Run ``fun`` (a list of arrays to a list of arrays) under a new tape.

    Returns:
        ``(out_primals, pullback)``. ``pullback(out_cts, free=False)`` maps one cotangent per output
        (None: zero) to one per input (None where no gradient reaches it).
    """
    out_primals, in_nodes, out_nodes = record_flat(fun, primals)
    order = []  # the visiting order, computed at the first call that keeps the residuals

    def pullback(out_cts, free: bool = False):
        if free:
            return backward(out_nodes, out_cts, in_nodes, True)
        if not order:
            order.extend(_reverse_topological(out_nodes))
        return backward(out_nodes, out_cts, in_nodes, False, order)
    return out_primals, pullback


def sweep_order(out_nodes):
    """The nodes a forward sweep visits, in creation order: those that reach an output, less the leaves
    and the integer results (which carry no tangent). Computed once per linearization."""
    return [node for node in reversed(_reverse_topological(out_nodes))
            if node.prim is not None and (type(node.prim) is not Primitive or is_inexact(node.ans))]


def forward_sweep(order, in_nodes, in_tangents, out_nodes):
    """Tangents of ``out_nodes`` given ``in_tangents`` on the tape's leaves (None: zero): each node of
    ``order`` (``sweep_order``) maps its operands' tangents through its jvp rule at the stored primals,
    a linearization replayed without recomputing the primals."""
    tangents = {node: t for node, t in zip(in_nodes, in_tangents) if t is not None}
    get = tangents.get
    for node in order:
        prim = node.prim
        if prim is _OUTPUT:
            ((k, joint),) = node.parents
            joint_tangents = get(joint)
            if joint_tangents is not None and joint_tangents[k] is not None:
                tangents[node] = joint_tangents[k]
            continue
        primals = node.primals if type(prim) is Primitive else node.primals[1]
        operand_tangents = [None] * len(primals)
        reached = False
        for argnum, parent in node.parents:
            t = get(parent)
            if t is not None:
                operand_tangents[argnum] = t
                reached = True
        if not reached:
            continue
        if type(prim) is Primitive:
            t = apply_jvp_rule(prim, operand_tangents, node.ans, primals, node.params)
        else:  # a joint node: its call maps every operand's tangent at once
            t = prim.call.jvp(list(primals), operand_tangents)[1]
        if t is not None:
            tangents[node] = t
    return [None if node is None else get(node) for node in out_nodes]
