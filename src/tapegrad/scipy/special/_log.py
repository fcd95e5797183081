"""Logistic and logarithmic functions: ``expit logit log_expit logsumexp softmax log_softmax xlogy
xlog1py entr``.

``xlogy(x, y) = x log(y)`` and ``xlog1py(x, y) = x log1p(y)`` are 0 where ``x == 0`` (also for
``y == 0``), with the derivatives of scipy and JAX: ``d/dx = log(y)`` (``log1p(y)``) everywhere, also at
``x = 0``, and ``d/dy = x / y`` (``x / (1 + y)``). ``entr(x) = -x log(x)`` has derivative
``-(1 + log(x))`` (``+inf`` at 0, the limit from the right; nan left of 0, where ``entr`` is ``-inf``).
"""
from __future__ import annotations

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike, Axis
from tapegrad.extend import (
    def_dependency,
    def_lowering,
    defbatch_elementwise,
    defjvp,
    defvjp,
    elementwise_lowering,
    primitive,
    unary_abstract_eval,
)
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._shape import squeeze
from tapegrad.scipy.special._impl import binary, unary


def _expit_impl(x):
    xp = namespace_of(x)
    return xp.exp(-xp.logaddexp(0, -x))


expit_p = primitive("expit", _expit_impl, unary_abstract_eval)
defvjp(expit_p, lambda ct, ans, x: ct * (ans * (1.0 - ans)))
defjvp(expit_p, lambda t, ans, x: t * (ans * (1.0 - ans)))
defbatch_elementwise(expit_p)
def_dependency(expit_p, "elementwise")
def_lowering(expit_p, elementwise_lowering(lambda f, x: f.exp(-f.logaddexp(0.0, -x))))  # the impl's formula

xlogy_p = binary("xlogy", lambda x, y, ans: ew.log(y), lambda x, y, ans: x / y)
xlog1py_p = binary("xlog1py", lambda x, y, ans: ew.log1p(y), lambda x, y, ans: x / (1.0 + y))
entr_p = unary("entr", lambda x, ans: -(1.0 + ew.log(x)))


def expit(x: ArrayLike) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``, as ``scipy.special.expit``, computed as
    ``exp(-logaddexp(0, -x))`` so that it keeps full relative precision in both tails. Derivative
    ``expit(x) * (1 - expit(x))``."""
    return bind(expit_p, x)


def logit(x: ArrayLike) -> Array:
    """``log(x / (1 - x))``, the inverse of :func:`expit`, as ``scipy.special.logit``."""
    return ew.log(x) - ew.log1p(-x)


def log_expit(x: ArrayLike) -> Array:
    """``log(expit(x)) = -logaddexp(0, -x)``, accurate for large negative ``x`` (as
    ``scipy.special.log_expit``)."""
    return -ew.logaddexp(0.0, -x)


def _max_shift(a, axis):
    """The maximum over ``axis`` (kept), without derivative, and 0 where it is not finite or where the
    reduction is empty (``amax`` has no identity: an empty ``logsumexp`` is ``log(0) = -inf``)."""
    axes = range(len(a.shape)) if axis is None else red.normalize_axis(axis, len(a.shape))
    if any(a.shape[i] == 0 for i in axes):
        return 0.0
    shift = red.amax(ew.stop_gradient(a), axis=axis, keepdims=True)
    return ew.where(ew.isfinite(shift), shift, 0.0)


def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike = None, keepdims: bool = False) -> Array:
    """``log(sum(b * exp(a)))`` over ``axis``, shifted by the maximum for stability, as
    ``scipy.special.logsumexp`` (without its ``return_sign``).

    The shift goes through ``stop_gradient``: the result does not depend on it, so its gradient is
    exactly ``softmax(a)`` (times ``b``). An empty reduction gives ``-inf``, as SciPy's.
    """
    a = as_operand(a)
    shift = _max_shift(a, axis)
    e = ew.exp(a - shift)
    if b is not None:
        e = e * b
    out = ew.log(red.sum(e, axis=axis, keepdims=True)) + shift
    if keepdims:
        return out
    return squeeze(out, axis) if axis is not None else squeeze(out)


def log_softmax(x: ArrayLike, axis: Axis = None) -> Array:
    """``x - logsumexp(x, axis, keepdims=True)``, as ``scipy.special.log_softmax`` (``axis=None``:
    over all elements), computed as ``s - log(sum(exp(s)))`` with ``s = x - max(x)``: subtracting the
    rounded ``logsumexp`` itself loses everything in float16 (logits near 65504 gave probabilities 1, 1)."""
    x = as_operand(x)
    shifted = x - _max_shift(x, axis)
    return shifted - ew.log(red.sum(ew.exp(shifted), axis=axis, keepdims=True))


def softmax(x: ArrayLike, axis: Axis = None) -> Array:
    """``exp(x) / sum(exp(x), axis)``, computed as ``exp(log_softmax(x, axis))``, as
    ``scipy.special.softmax``."""
    return ew.exp(log_softmax(x, axis=axis))


def xlogy(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(y)``, and 0 where ``x == 0``, broadcast, as ``scipy.special.xlogy`` (needs SciPy).

    Derivatives (scipy/JAX convention): ``log(y)`` in ``x`` (also at ``x = 0``), ``x / y`` in ``y``.
    """
    return bind(xlogy_p, x, y)


def xlog1py(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log1p(y)``, and 0 where ``x == 0``, broadcast, as ``scipy.special.xlog1py`` (needs SciPy).

    Derivatives: ``log1p(y)`` in ``x`` (also at ``x = 0``), ``x / (1 + y)`` in ``y``.
    """
    return bind(xlog1py_p, x, y)


def entr(x: ArrayLike) -> Array:
    """The elementwise entropy ``-x log(x)`` for ``x > 0``, 0 at 0, ``-inf`` for ``x < 0``, as
    ``scipy.special.entr`` (needs SciPy). Derivative ``-(1 + log(x))``: ``+inf`` at 0."""
    return bind(entr_p, x)

