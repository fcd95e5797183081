"""Forward mode: ``JVPTrace`` carries a tangent beside every primal (Autodidax's ``JVPTrace``).

Each primitive is bound one level down on the primals (so a primal may be a tracer of an outer
transform), then its jvp rule maps the operands' tangents to the output's. A missing tangent is a
symbolic zero (None): constants and operands that do not depend on the inputs cost nothing, and an
output whose tangent is zero is returned as a plain value, not a tracer.

The rules are written in tapegrad operations, so their work is itself recorded by any transform
outside this one: jvp-of-grad (a Hessian-vector product), grad-of-jvp, jvp-of-jvp.
"""
from __future__ import annotations

import numpy as np

from tapegrad import _config
from tapegrad._backend import SCALAR_TYPES, full_like
from tapegrad._core import (
    PrimalTracer,
    Trace,
    bind,
    check_one_backend,
    check_values,
    holds_tracers_of,
    is_inexact,
    new_main,
)
from tapegrad._structural import astype, broadcast_to
from tapegrad._value_checks import check_rule

_checking = False  # tg.config.debug_nans / debug_infs on: check results (a global, tested per primitive)
_config.mirror_checking(globals())


class JVPTracer(PrimalTracer):
    __slots__ = ("tangent",)

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    def __repr__(self):
        return f"JVPTracer(level={self._trace.level}, primal={self.primal!r})"


class JVPTrace(Trace):
    __slots__ = ()

    def process_primitive(self, prim, args, params):
        if prim.multiple_results:
            return self._process_multiple(prim, args, params)
        primals = list(args)
        tangents = [None] * len(args)
        for i, a in enumerate(args):
            if type(a) is JVPTracer and a._trace is self:
                primals[i] = a.primal
                tangents[i] = a.tangent
        if self.level == 1:  # no transform below this one: the primals are concrete arrays
            try:
                ans = prim.impl(*primals, **params)
            except TypeError:
                check_one_backend(primals)
                raise
            if _checking:  # tg.config.debug_nans / debug_infs
                check_values(prim, primals, ans)
        else:
            ans = bind(prim, *primals, **params)
        if prim.nondiff or not is_inexact(ans):
            return ans
        tangent = apply_jvp_rule(prim, tangents, ans, primals, params)
        return ans if tangent is None else JVPTracer(self, ans, tangent)

    def _split(self, args):
        """The primals of ``args`` and their tangents (None for an operand this trace does not carry)."""
        primals, tangents = list(args), [None] * len(args)
        for i, a in enumerate(args):
            if type(a) is JVPTracer and a._trace is self:
                primals[i], tangents[i] = a.primal, a.tangent
        return primals, tangents

    def _process_multiple(self, prim, args, params):
        """``process_primitive`` for a primitive with several results: a tracer for each result whose
        tangent is not zero."""
        primals, tangents = self._split(args)
        ans = bind(prim, *primals, **params)
        if prim.nondiff:
            return ans
        out_tangents = apply_jvp_rules(prim, tangents, ans, primals, params)
        if out_tangents is None:
            return ans
        return [o if t is None else JVPTracer(self, o, t) for o, t in zip(ans, out_tangents)]

    def process_joint(self, call, args):
        primals, tangents = self._split(args)
        outs, out_tangents = call.jvp(primals, tangents)
        if holds_tracers_of(self, outs) or holds_tracers_of(self, out_tangents):
            return call.on_capture(args)
        return [o if t is None or not is_inexact(o) else JVPTracer(self, o, _fit(t, o))
                for o, t in zip(outs, out_tangents)]


def apply_jvp_rules(prim, tangents, ans, primals, params):
    """:func:`apply_jvp_rule` for a primitive with ``multiple_results``: the list of its results'
    tangents (None for a zero one, and for every integer result), or None when all are zero."""
    if prim.jvp_rule is None:
        raise NotImplementedError(f"jvp rule for '{prim.name}' is not defined")
    out_tangents = prim.jvp_rule(tangents, ans, *primals, **params)
    if out_tangents is None:
        return None
    if _checking:  # tg.config.debug_nans / debug_infs
        check_rule(prim, "jvp", primals, [t for t in out_tangents if t is not None])
    fitted = [None if t is None or not is_inexact(o) else _fit(t, o, prim.name) for t, o in zip(out_tangents, ans)]
    return None if all(t is None for t in fitted) else fitted


def apply_jvp_rule(prim, tangents, ans, primals, params):
    """The output tangent of ``prim`` (None: zero), shaped and typed like ``ans``."""
    if prim.jvp_rule is None:
        raise NotImplementedError(f"jvp rule for '{prim.name}' is not defined")
    tangent = prim.jvp_rule(tangents, ans, *primals, **params)
    if tangent is None:
        return None
    if _checking:  # tg.config.debug_nans / debug_infs
        check_rule(prim, "jvp", primals, tangent)
    try:
        if tangent.shape == ans.shape and tangent.dtype == ans.dtype:
            return tangent
    except AttributeError:  # a Python number: fitted below
        pass
    return _fit(tangent, ans, prim.name)


def _fit(tangent, ans, rule=None):
    """The tangent with the output's shape and dtype: an operand's tangent may need broadcasting (a
    scalar added to a matrix), and a weakly typed term must not upcast a float32 output. A Python
    number (a rule's constant tangent) becomes a constant array like the output."""
    if type(tangent) in SCALAR_TYPES:
        return scalar_like(tangent, ans, rule or "a custom rule")
    if tangent.shape != ans.shape:
        tangent = broadcast_to(tangent, ans.shape)
    if tangent.dtype != ans.dtype:
        tangent = astype(tangent, ans.dtype)
    return tangent


def fit_rule_result(value, like, rule: str, what: str = "cotangent"):
    """A derivative rule's ``value`` for ``like`` (an operand's cotangent, an output's tangent) with
    ``like``'s shape and dtype.

    A scalar is broadcast, so that a rule may return a constant or a reduction where an array is due:
    a Python number as a constant array (:func:`scalar_like`), a NumPy scalar, 0-d array or 0-d tracer
    through ``broadcast_to`` and ``astype``, so that it stays differentiable (an eager ``tnp.sum(g)``
    is a NumPy scalar where the same rule under ``jit`` gives a 0-d tracer, and both modes must agree).

    Raises:
        ValueError: ``value`` has another shape and is not 0-d.
        TypeError: a complex ``value`` for a real ``like`` (a real one is cast to ``like``'s dtype).
    """
    if type(value) in SCALAR_TYPES:
        return scalar_like(value, like, rule)
    shape, dtype = tuple(like.shape), np.dtype(like.dtype)
    value_shape, value_dtype = tuple(value.shape), np.dtype(value.dtype)
    if value_shape != shape:
        if value_shape != ():
            raise ValueError(f"the derivative rule of {rule!r} returned a {what} of shape {value_shape} (dtype "
                             f"{value_dtype}) for a value of shape {shape} and dtype {dtype}; return one shaped "
                             "like it, or a scalar, which is broadcast to it")
        value = broadcast_to(value, shape)
    if value_dtype != dtype and dtype.kind in "fc":
        if value_dtype.kind == "c" and dtype.kind != "c":
            raise TypeError(f"the derivative rule of {rule!r} returned a complex {what} ({value_dtype}) for a "
                            f"real value ({dtype}); return a real one (its .real, if the imaginary part is 0)")
        value = astype(value, dtype)  # np.float64(2.0) for a float32 value: no rule upcasts
    return value


def scalar_like(value, like, rule: str):
    """A scalar that a derivative rule returned where an array is due (its operand's cotangent, its
    output's tangent), as a constant array of ``like``'s shape and dtype on ``like``'s backend: a
    Python number would otherwise reach a leaf as a Python float (no shape, float64) or lose its batch
    axis under ``vmap``. A complex scalar for a real operand is a ``TypeError``."""
    dtype = like.dtype
    if isinstance(value, complex) or getattr(value, "dtype", None) is not None and value.dtype.kind == "c":
        if getattr(dtype, "kind", None) != "c":
            if value.imag != 0:
                raise TypeError(f"the derivative rule of {rule!r} returned the complex scalar {value!r} for "
                                f"a real value ({dtype}); return a real value")
            value = value.real
    return full_like(like, value)


def jvp_flat(fun, primals, tangents):
    """Run ``fun`` (a list of arrays to a list of arrays) with ``tangents`` attached to ``primals``.

    ``tangents`` may hold None (a zero tangent). Returns ``(out_primals, out_tangents)``, with None
    for an output whose tangent is zero.
    """
    with new_main(JVPTrace) as main:
        trace = main.trace
        ins = [x if t is None else JVPTracer(trace, x, t) for x, t in zip(primals, tangents)]
        outs = fun(*ins)
        out_primals, out_tangents = [], []
        for out in outs:
            if type(out) is JVPTracer and out._trace is trace:
                out_primals.append(out.primal)
                out_tangents.append(out.tangent)
            else:
                out_primals.append(out)
                out_tangents.append(None)
    return out_primals, out_tangents
